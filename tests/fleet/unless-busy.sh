#!/usr/bin/env bash
# shutdown --unless-busy on the sandbox fleet: at the deadline (and at the
# warning) each watcher samples once. The instance whose GPU is busy gets
# no warning and is skipped (journaled with the reason before anything
# runs, no stop call, shown by events and shutdown ls, not counted as armed
# by status), and stays skipped when its watcher is SIGKILLed and started
# again with the GPU idle (replay); the idle one is warned and stops. A
# nightly schedule --unless-busy (the test clock) skips the busy one too.
. "$(dirname "$0")/../e2e/lib.sh"
. "$(dirname "$0")/lib/watcher.sh"

fleet_up 2 --group-size 1
for n in 1 2; do
	run set "inst-$n" 'stop_command=remote:shutdown -h now'
done
gpu_util inst-1 87	# training
gpu_util inst-2 0	# idle

# A plain deadline far ahead keeps inst-1's watcher running after the skip.
run shutdown inst-1 --in 1h --warn 0 --json
expect_rc 0 "a plain deadline on inst-1"
idl=$(deadline_id)
# --warn 1: due at once; sent where the machine is idle then, not where busy.
run shutdown inst-1,inst-2 --in 20s --warn 1 --unless-busy --json
expect_rc 0 "shutdown --unless-busy"
expect_eq "$(printf '%s' "$out" | jq -c '[.[] | [.name, .unless_busy]]')" \
    '[["inst-1",true],["inst-2",true]]' "--json: unless_busy"
id1=$(printf '%s' "$out" | jq -r '.[] | select(.name == "inst-1") | .id')
id2=$(printf '%s' "$out" | jq -r '.[] | select(.name == "inst-2") | .id')
expect_eq "$(jq -c '[.deadlines[] | [.id, .unless_busy]]' "$(rdir inst-1)/plan.json")" \
    "[[\"$idl\",null],[\"$id1\",true]]" "the plan on the instance carries unless_busy"
run shutdown ls inst-1 --json
expect_eq "$(printf '%s' "$out" | jq -c '[.[0].watcher.deadlines[] | [.unless_busy, .skipped]]')" \
    '[[false,null],[true,null]]' "shutdown ls --json: unless_busy, not skipped yet"

# --- the idle one stops, the busy one is skipped ------------------------------
wait_for 90 "idle inst-2 stopped" is_state inst-2 stopped || show_journal inst-2
expect_eq "$(calls inst-2 shutdown)" 1 "inst-2: one stop"
expect_eq "$(journal inst-2 "select(.event == \"firing\" and .id == \"$id2\") | [.reason, .evidence.samples[0].gpus]" | jq -c .)" \
    '["deadline",[0]]' "inst-2: fired, with the idle sample as evidence"
wait_for 90 "inst-1 skipped" has_event inst-1 skipped ".id == \"$id1\"" || show_journal inst-1
expect_eq "$(journal inst-1 "select(.event == \"skipped\") | [.reason, .evidence.samples[0].gpus]" | jq -c .)" \
    '["busy: gpu 0 at 87%",[87]]' "inst-1: skipped, the reason and the sample"
expect_eq "$(jcount inst-1 firing)" 0 "inst-1: no firing"
expect_eq "$(calls inst-1 shutdown)$(fstate inst-1)" 0ok "inst-1: no stop call, still up"
expect_eq "$(calls inst-1 wall)$(jcount inst-1 warned)" 00 "inst-1: busy, no warning"
expect_eq "$(calls inst-2 wall)$(jcount inst-2 warned)" 11 "inst-2: idle, warned once"

run status inst-1
expect_match "$out" "inst-1  watcher running: 1 deadline armed" "status: the skipped one is not armed"
run shutdown ls inst-1
expect_match "$(printf '%s\n' "$out" | grep -F "$id1")" \
    "^ +$id1 +skipped, due at .* unless busy .*skipped: busy: gpu 0 at 87%" \
    "shutdown ls: skipped and why (until the next plan write drops it)"

# --- replay: the watcher SIGKILLed, started again with the GPU idle ----------
gpu_util inst-1 0
w1=$(watcher_pid inst-1)
expect_match "$w1" '^[0-9]+$' "inst-1's watcher runs (the plain deadline)"
kill -KILL "$w1"
wait_for 10 "the watcher is dead" eval "! alive $w1"
run status inst-1 --json
expect_eq "$(printf '%s' "$out" | jq -r '.[0].watcher.state')" started \
    "status starts the watcher again"
# Cancelling the plain deadline leaves nothing armed: the new watcher
# exits, so it has been through its deadlines since its start.
run shutdown cancel "$idl"
expect_rc 0 "cancel the plain deadline"
wait_for 30 "the new watcher exits (nothing armed)" has_event inst-1 exiting \
    '.reason == "nothing armed"' || show_journal inst-1
expect_eq "$(jcount inst-1 firing)$(calls inst-1 shutdown)$(fstate inst-1)" 00ok \
    "the skipped id never fires"

run events inst-1
expect_match "$out" "inst-1 +skipped +$id1 +reason=busy: gpu 0 at 87%" "events shows the skip and why"

# --- a nightly schedule --unless-busy skips the busy machine -----------------
# The test clock puts tonight's 02:00 (Shanghai) about 15 s from now.
gpu_util inst-1 87
t2=$(TZ=Asia/Shanghai date -d 'tomorrow 02:00' +%s)
GPUFLEET_TEST_CRON_MINUTE=1@$(( (60 * ($(date +%s) + 15) - t2) / 59 ))
export GPUFLEET_TEST_CRON_MINUTE
run schedule add inst-1 --cron '0 2 * * *' --tz Asia/Shanghai --do shutdown \
    --unless-busy --warn 0 --name nightly
expect_rc 0 "schedule add --unless-busy"
stag=$(sql "SELECT tag FROM schedule WHERE name = 'nightly'")
wait_for 90 "the nightly occurrence skipped on busy inst-1" \
    has_event inst-1 skipped ".id | startswith(\"s-$stag-\")" || show_journal inst-1
expect_eq "$(journal inst-1 "select(.event == \"skipped\" and (.id | startswith(\"s-$stag-\"))) | .reason")" \
    '"busy: gpu 0 at 87%"' "the schedule's skip says why"
expect_eq "$(jcount inst-1 firing)$(calls inst-1 shutdown)$(fstate inst-1)" 00ok \
    "the busy machine is not stopped by its schedule"

finish

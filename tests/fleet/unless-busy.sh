#!/usr/bin/env bash
# shutdown --unless-busy on the sandbox fleet: at the deadline each watcher
# samples once. The instance whose GPU is busy is skipped (journaled with
# the reason before anything runs, no stop call, shown by events and
# shutdown ls) and stays skipped when a watcher starts again with the GPU
# idle (replay); the idle one stops.
. "$(dirname "$0")/../e2e/lib.sh"
. "$(dirname "$0")/lib/watcher.sh"

fleet_up 2 --group-size 1
for n in 1 2; do
	run set "inst-$n" 'stop_command=remote:shutdown -h now'
done
gpu_util inst-1 87	# training
gpu_util inst-2 0	# idle

run shutdown inst-1,inst-2 --in 20s --warn 0 --unless-busy --json
expect_rc 0 "shutdown --unless-busy"
expect_eq "$(printf '%s' "$out" | jq -c '[.[] | [.name, .unless_busy]]')" \
    '[["inst-1",true],["inst-2",true]]' "--json: unless_busy"
id1=$(printf '%s' "$out" | jq -r '.[] | select(.name == "inst-1") | .id')
id2=$(printf '%s' "$out" | jq -r '.[] | select(.name == "inst-2") | .id')
expect_eq "$(jq -c '[.deadlines[] | [.id, .unless_busy]]' "$(rdir inst-1)/plan.json")" \
    "[[\"$id1\",true]]" "the plan on the instance carries unless_busy"
run shutdown ls inst-1 --json
expect_eq "$(printf '%s' "$out" | jq -c '[.[0].watcher.deadlines[] | [.unless_busy, .skipped]]')" \
    '[[true,null]]' "shutdown ls --json: unless_busy, not skipped yet"

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

# --- replay: a watcher started again, the GPU idle now, does not fire it ------
wait_for 30 "inst-1's watcher exits (nothing armed)" has_event inst-1 exiting \
    '.reason == "nothing armed"'
gpu_util inst-1 0
agent=$(cd "$(rdir inst-1)" && ls gpufleet-agent-* | head -1)
out=$(ssh -F "$D/ssh_config" inst-1 "d=\$HOME/.cache/gpufleet; \"\$d/$agent\" watch --dir \"\$d\"")
expect_match "$out" '^started [0-9]+$' "a new watcher starts"
wait_for 30 "the new watcher exits too" eval '[ "$(jcount inst-1 exiting)" -ge 2 ]'
expect_eq "$(jcount inst-1 firing)$(calls inst-1 shutdown)$(fstate inst-1)" 00ok \
    "the skipped id never fires"
run status inst-1 --json
expect_eq "$(printf '%s' "$out" | jq -r '.[0].watcher.state')" none \
    "status starts no watcher: nothing is armed"

# --- what the user sees --------------------------------------------------------
run events inst-1
expect_match "$out" "inst-1 +skipped +$id1 +reason=busy: gpu 0 at 87%" "events shows the skip and why"
run shutdown ls inst-1
expect_match "$(printf '%s\n' "$out" | grep -F "$id1")" \
    "^ +$id1 +skipped, due at .* unless busy .*skipped: busy: gpu 0 at 87%" \
    "shutdown ls: skipped and why"
expect_contains "$out" "nothing armed" "shutdown ls: nothing armed"

finish

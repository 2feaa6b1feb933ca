#!/usr/bin/env bash
# The watcher on the sandbox fleet: one per remote_dir, a deadline fires
# exactly once although the watcher is SIGKILLed in the middle of the stop
# and started again, a fired deadline is never re-armed, a container
# restart kills the watcher and the next contact starts it again with its
# plan, and `fleet down` finds watchers (daemons outside any session).
. "$(dirname "$0")/../e2e/lib.sh"
. "$(dirname "$0")/lib/watcher.sh"

# The stop command is killed after stop_confirm_s: long enough here for
# the test to hold it while it kills and restarts the watcher.
export GPUFLEET_STOP_CONFIRM=300
fleet_up 2 --group-size 1
i1=$(instance_dir inst-1)
for n in 1 2; do
	run set "inst-$n" 'stop_command=remote:shutdown -h now'
done

# --- one watcher per remote_dir --------------------------------------------
run shutdown inst-2 --in 2h --warn 0 --json
expect_rc 0 "arm inst-2"
w2=$(watcher_pid inst-2)
expect_match "$w2" '^[0-9]+$' "plan set started the watcher"
agent=$(cd "$(rdir inst-2)" && ls gpufleet-agent-* | head -1)
out=$(ssh -F "$D/ssh_config" inst-2 "d=\$HOME/.cache/gpufleet; \"\$d/$agent\" watch --dir \"\$d\"")
rc=$?
expect_rc 0 "a second watch exits 0"
expect_eq "$out" "running $w2" "a second watch leaves the first running"
expect_eq "$(watcher_pid inst-2)" "$w2" "still the first watcher"
# It outlived the SSH session that started it, with the instance's
# environment (so the harness finds it, as a platform's stop would).
checks=$((checks + 1))
tr '\0' '\n' <"/proc/$w2/environ" | grep -qx "GPUFLEET_INSTANCE=inst-2" ||
    fail "the watcher lacks the instance's environment"

# --- SIGKILL in the middle of the stop --------------------------------------
: >"$i1/fake-stop-hold"	# the stop command runs until the test lets it go
run shutdown inst-1 --now --warn 0 --json
expect_rc 0 "shutdown inst-1 --now"
id=$(deadline_id)
wait_for 60 "the stop command started" has_call inst-1 shutdown || show_journal inst-1
wait_for 30 "stopping journaled" has_event inst-1 stopping ".id == \"$id\""
w1=$(watcher_pid inst-1)
expect_match "$w1" '^[0-9]+$' "the watcher runs during the stop"
kill -KILL "$w1"
wait_for 10 "the watcher is dead" eval "! alive $w1"
expect_eq "$(fstate inst-1)" ok "inst-1 still up (the stop is held)"
run status inst-1 --json
expect_rc 0 "status inst-1"
expect_eq "$(printf '%s' "$out" | jq -r '.[0].watcher.state')" started \
    "status starts the watcher that died"
w1b=$(watcher_pid inst-1)
checks=$((checks + 1))
[ -n "$w1b" ] && [ "$w1b" != "$w1" ] || fail "no new watcher ($w1b, old $w1)"
expect_eq "$(jcount inst-1 started)" 2 "the new watcher journaled its start"
# The new watcher replays the journal: the stop under way is not started
# again. Give it time to do the wrong thing (many check intervals).
sleep 4
expect_eq "$(calls inst-1 shutdown)" 1 "the stop command ran once"
expect_eq "$(jcount inst-1 stopping ".id == \"$id\"")" 1 "one stopping"
expect_eq "$(jcount inst-1 firing ".id == \"$id\"")" 1 "one firing"
rm -f "$i1/fake-stop-hold"	# the stop completes
wait_for 60 "inst-1 stopped" is_state inst-1 stopped
expect_eq "$(calls inst-1 shutdown)" 1 "still one stop call"

# The platform starts it again: the deadline is fired for good.
fleet start inst-1
run status inst-1
expect_rc 0 "inst-1 is back"
run shutdown ls inst-1
expect_match "$(printf '%s\n' "$out" | grep -F "$id")" "^ +$id +fired" \
    "shutdown ls: the deadline is marked fired"
expect_match "$out" "nothing armed" "shutdown ls: nothing armed"
run shutdown inst-1 --in 2h --warn 0 --json
expect_rc 0 "arm a new deadline on inst-1"
id2=$(deadline_id)
p1=$(rdir inst-1)/plan.json
expect_eq "$(jq -c '[.deadlines[].id]' "$p1")" "[\"$id2\"]" "the fired deadline left the plan"
# The new watcher sees the container started after the stop began.
wait_for 30 "stopped journaled after the container restart" has_event inst-1 stopped ".id == \"$id\""
expect_eq "$(jcount inst-1 firing ".id == \"$id\"")" 1 "never fired again"
expect_eq "$(calls inst-1 shutdown)" 1 "never stopped again"
run status inst-1
run ledger inst-1 --json
expect_eq "$(printf '%s' "$out" | jq --arg id "$id" '[.[] | select(.state == "stopped" and .source == "performed" and (.note // "" | contains($id)))] | length')" \
    1 "one ledger stop for stopping + stopped"

# --- a container restart kills the watcher; the next contact restarts it ----
w1c=$(watcher_pid inst-1)
gen=$(jq .generation "$p1")
fleet restart inst-1
checks=$((checks + 1))
! alive "$w1c" || fail "the container restart left the watcher running"
run status inst-1 --json
wj=$(printf '%s' "$out" | jq -c '.[0].watcher')
expect_eq "$(printf '%s' "$wj" | jq -r .state)" started "status: watcher started again"
expect_eq "$(printf '%s' "$wj" | jq -r .generation)" "$gen" "the plan kept its generation"
expect_eq "$(printf '%s' "$wj" | jq -c '[.deadlines[].id]')" "[\"$id2\"]" "status --json: the deadline kept"
run status inst-1
expect_match "$(printf '%s\n' "$out" | grep -A3 '^inst-1 ')" 'running' "status: watcher running"
w1d=$(watcher_pid inst-1)
expect_match "$w1d" '^[0-9]+$' "a watcher runs again"

# --- fleet down takes the watchers too ----------------------------------------
fleet down
checks=$((checks + 1))
for p in $w1d $w2; do
	! alive "$p" || fail "watcher $p survived fleet down"
done

finish

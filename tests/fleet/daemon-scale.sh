#!/usr/bin/env bash
# gpufleet daemon at scale on the sandbox fleet: the CLI writing while the
# daemon polls 50 instances (and backs off from one that refuses), guards
# evaluated after its polls, a status schedule's result per host, and the
# top-up of a shutdown schedule for an instance tagged while it runs.
. "$(dirname "$0")/../e2e/lib.sh"
. "$(dirname "$0")/lib/watcher.sh"
. "$(dirname "$0")/lib/daemon.sh"
# --- the CLI writes while the daemon polls 50 instances ---------------------
fleet_up 51 --prefix big
# big-51 refuses connections: the daemon backs off from it between polls.
fleet break big-51 refuse
# Two instances past a cost cap: a warn guard and a shutdown guard.
for n in big-2 big-3; do
	"$GPUFLEET" set "$n" price=360000/h billing=second >/dev/null &&
	    "$GPUFLEET" mark "$n" running --at -1h >/dev/null ||
	    fail "pricing $n"
done
"$GPUFLEET" set big-3 'stop_command=remote:shutdown -h now' >/dev/null
run guard add big-2 --max-cost 10 --do warn --name cap-warn
expect_rc 0 "guard add cap-warn"
run guard add big-3 --max-cost 10 --do shutdown --name cap-stop
expect_rc 0 "guard add cap-stop"
# A guard that cannot be judged (its stored selector broken, sorted first)
# must not keep the others' stops from running.
run guard add big-2 --max-cost 0 --do warn --name aa-broken
expect_rc 0 "guard add aa-broken"
sql "UPDATE guard SET selector = '@' WHERE name = 'aa-broken'"
start_daemon
backed_off() { [ -n "$(sql "SELECT 1 FROM last_status s JOIN instance i ON i.id = s.instance_id WHERE i.name = 'big-51' AND s.state = 'unreachable' AND s.error LIKE 'not tried: % connection failure% in a row, next attempt in %'")" ]; }
wait_for 120 "a host that fails to connect is not tried again at once" backed_off
# (big-3 may be stopped by its guard meanwhile: 48 up at least)
wait_for 180 "a poll reached the 51 instances" \
    at_least 51 sql "SELECT count(*) FROM last_status s JOIN instance i ON i.id = s.instance_id WHERE i.name LIKE 'big-%'"
expect_eq "$(sql "SELECT count(*) >= 48 FROM last_status s JOIN instance i ON i.id = s.instance_id WHERE i.name LIKE 'big-%' AND s.state = 'up'")" 1 \
    "the polled instances are up"
s0=$(polled)
bad=0
i=0
# 100 writes at least, and on until the daemon stored a poll meanwhile (a
# pass waits for its slowest host).
while [ "$i" -lt 100 ] || { [ "$(polled)" -le "$s0" ] && [ "$i" -lt 2000 ]; }; do
	i=$((i + 1))
	n=big-$((i % 50 + 1))
	if [ $((i % 10)) = 0 ]; then
		"$GPUFLEET" set "$n" "notes=write $i" >/dev/null 2>"$T/cli.err"
	else
		"$GPUFLEET" tag "$n" "+t$i" >/dev/null 2>"$T/cli.err"
	fi
	rc=$?
	if [ "$rc" != 0 ] || grep -Eiq 'busy|locked' "$T/cli.err"; then
		bad=$((bad + 1))
		printf 'call %d: rc %d: %s\n' "$i" "$rc" "$(cat "$T/cli.err")" >&2
	fi
done
expect_eq "$bad" 0 "every CLI write while the daemon polls exits 0, never busy"
checks=$((checks + 1))
[ "$(polled)" -gt "$s0" ] || fail "the daemon stored nothing while the CLI wrote"
expect_eq "$(sql "SELECT count(*) FROM instance_tag WHERE tag LIKE 't%'")" $((i - i / 10)) \
    "every tag written"
# The guards, evaluated after every poll, fired once each.
guard_done() { [ -n "$(sql "SELECT 1 FROM action_log WHERE kind = 'guard_shutdown' AND name = 'cap-stop' AND result IS NOT NULL")" ]; }
wait_for 120 "the shutdown guard's stop ran" guard_done
# Its fake stop moves big-3 off the sshd it shares with big-1..16 (the
# harness's caveat: new connections to them are refused for a moment); the
# contacts below wait until that is over (and big-4's, further down).
wait_for 120 "big-3 stopped by its guard" is_state big-3 stopped
expect_eq "$(sql "SELECT count(*) FROM action_log WHERE kind = 'guard_warn' AND name = 'cap-warn'")" 1 \
    "the warn guard fired once over many polls"
expect_eq "$(sql "SELECT count(*) FROM action_log WHERE kind = 'guard_shutdown' AND name = 'cap-stop'")" 1 \
    "the shutdown guard fired once"
expect_eq "$(sql "SELECT json_extract(result, '\$.\"big-3\"') IS NOT NULL FROM action_log WHERE kind = 'guard_shutdown'")" 1 \
    "the stop's result for big-3 is recorded"
expect_contains "$(cat "$LOG")" "guard cap-stop: stopping" "the daemon logs the guard"
expect_contains "$(cat "$LOG")" "guards: guard aa-broken" "the daemon logs the guard it cannot judge"
# schedule run of a status and of a shutdown schedule: their children's
# JSON parsed per host.
CRON='0 0 1 1 *' add_schedule st big-1,big-51 status
run schedule run st
expect_rc 1 "schedule run of a status schedule with a host down"
expect_eq "$(sql "SELECT state || ' ' || json_extract(result, '\$.\"big-1\"') || ' ' || (json_extract(result, '\$.\"big-51\"') LIKE 'unreachable: %') FROM schedule_run r JOIN schedule s ON s.id = r.schedule_id WHERE s.name = 'st'")" \
    "failed ok 1" "status per host: up is ok, unreachable says why"
"$GPUFLEET" set big-4 'stop_command=remote:shutdown -h now' >/dev/null
run schedule add big-4 --cron '0 2 * * *' --do shutdown --warn 0 --name night
expect_rc 0 "schedule add night"
run schedule run night
expect_rc 0 "schedule run of a shutdown schedule"
expect_eq "$out" "big-4: ok" "the stop armed on big-4"
wait_for 120 "big-4 stopped by its watcher" is_state big-4 stopped
armed() { [ "$(s_ids "$1")" -gt 0 ]; }
s_ids() { jq -r '[.deadlines[] | select(.id | startswith("s-")) | .id] | length' "$(rdir "$1")/plan.json" 2>/dev/null || echo 0; }
# The top-up: a shutdown schedule's selector picks big-5 once tagged (the
# tag arms nothing itself); the daemon's next poll writes its plan.
# (With the daemon stopped: a schedule add racing the daemon's top-up on
# the same plan loses with "the plan changed on the instance".)
kill -TERM "$dpid"
wait "$dpid"
for n in big-5 big-6; do
	"$GPUFLEET" set "$n" 'stop_command=remote:shutdown -h now' >/dev/null
done
run schedule add @night,big-6 --cron '0 2 * * *' --do shutdown --warn 0 --name by-tag
expect_rc 0 "schedule add by-tag"
checks=$((checks + 1))
armed big-6 || fail "big-6 not armed by schedule add"
expect_eq "$(s_ids big-5)" 0 "big-5 not armed before its tag"
run tag big-5 +night
start_daemon
wait_for 120 "the daemon's poll tops up big-5's plan" armed big-5
checks=$((checks + 1))
! grep -q "reentrant" "$LOG" || fail "the top-up ran the loop inside the loop"
kill -TERM "$dpid"
wait "$dpid"
expect_rc 0 "SIGTERM after the busy loop"
checks=$((checks + 1))
! grep -Eiq 'database is locked|SQLITE_BUSY' "$T/daemon.err" "$LOG" ||
    fail "the daemon hit a locked database: $(grep -Ei 'locked|busy' "$LOG")"

finish


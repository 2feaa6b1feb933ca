#!/usr/bin/env bash
# The daemon's local stops and guard stops run beside its loop: while one
# local stop blocks (until the test releases it) the API answers, another
# instance's guard stop (its shutdown child blocked in that instance's own
# local stop) runs and the API still answers, a schedule runs; a second
# due stop of the same instance waits for the first; a released stop is
# booked when it ends, nothing of its process group left. SIGTERM ends
# the daemon within its grace and leaves nothing of either stop's group:
# the local stop is booked failed, the guard's stays pending, and the
# next daemon runs the guard's again (not the claimed local one).
. "$(dirname "$0")/../e2e/lib.sh"
. "$(dirname "$0")/lib/watcher.sh"
. "$(dirname "$0")/lib/daemon.sh"

fleet_up 3 --group-size 1
# The stops of inst-1 and inst-2: each records its process group, leaves
# a grandchild behind it, and waits for $T/release.NAME (which it takes)
# before it exits 0.
cat >"$T/stop.sh" <<EOF
ps -o pgid= -p \$\$ | tr -d ' ' >"$T/pgid.\$1"
sleep 1000 &
while ! rm "$T/release.\$1" 2>/dev/null; do sleep 0.2; done
EOF
for i in 1 2; do
	run set inst-$i "stop_command=local:sh $T/stop.sh {name}" stop_kind=stop
	expect_rc 0 "inst-$i's local stop"
done
# inst-2 costs far past the guard's cap; inst-1 and inst-3 nothing near it.
run set inst-2 provider=vast price=360000/h billing=second
expect_rc 0 "inst-2 on vast, priced"
for i in 1 3; do
	run set inst-$i price=0.0001/h billing=second
	expect_rc 0 "price inst-$i"
done
run status
expect_rc 0 "status sees the three"

free_port() {
	python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
port=$(free_port)
DAEMON_ARGS="--listen 127.0.0.1:$port" start_daemon

# Two due stops of inst-1 (what the watcher's local_due stores).
id1=$(sql "SELECT id FROM instance WHERE name = 'inst-1'")
sql "INSERT INTO local_stop (instance_id, deadline, t) VALUES ($id1, 'd-1', strftime('%s')), ($id1, 'd-2', strftime('%s') + 1)"
wait_for 60 "inst-1's first stop runs" test -s "$T/pgid.inst-1"
pgid=$(cat "$T/pgid.inst-1")
expect_eq "$(sql "SELECT started_at IS NOT NULL FROM local_stop WHERE deadline = 'd-1'")" 1 \
    "d-1 is claimed"

# --- while it blocks, the loop goes on -----------------------------------------
# api WHY: five requests, each answered (a generous bound on each).
api() {
	local i code
	for i in 1 2 3 4 5; do
		code=$(curl -sS -m 20 -o "$T/body" -w '%{http_code}' "http://127.0.0.1:$port/api/v1/instances")
		expect_eq "$code" 200 "GET /api/v1/instances $i answers while $1"
	done
	expect_eq "$(jq -r '[.[].name] | sort | join(",")' "$T/body")" "inst-1,inst-2,inst-3" \
	    "the API names the three while $1"
}
api "inst-1's stop blocks"
run guard add all --max-cost 0.001 --do shutdown --name cap
expect_rc 0 "guard add"
wait_for 120 "the guard's stop of inst-2 runs" test -s "$T/pgid.inst-2"
api "the guard's stop of inst-2 blocks too"
pending() { sql "SELECT count(*) FROM action_log WHERE kind = 'guard_shutdown' AND result IS NULL"; }
expect_eq "$(pending)" 1 "the guard's stop is pending while it runs"
pgid2=$(cat "$T/pgid.inst-2")
add_schedule tick inst-3 exec 'echo run >> ticks.txt'
wait_for 120 "a schedule runs" at_least 1 runs tick ok
pause tick
expect_eq "$(sql "SELECT started_at IS NULL FROM local_stop WHERE deadline = 'd-2'")" 1 \
    "inst-1's second stop waits for its first"
expect_eq "$(sql "SELECT status IS NULL FROM local_stop WHERE deadline = 'd-1'")" 1 \
    "d-1 is not booked while it runs"

# --- released: booked, then the next one runs ----------------------------------
rm -f "$T/pgid.inst-1"
touch "$T/release.inst-1"
booked() { [ "$(sql "SELECT status FROM local_stop WHERE deadline = 'd-1'")" = 0 ]; }
wait_for 60 "d-1 is booked done" booked
group_gone() { ! pgrep -g "$pgid" >/dev/null; }
wait_for 30 "nothing of d-1's process group is left (its sleep)" group_gone
expect_eq "$(sql "SELECT count(*) FROM stop_request r JOIN instance i ON i.id = r.instance_id WHERE i.name = 'inst-1' AND r.fire_id = 'd-1' AND r.cause = 'local'")" 1 \
    "d-1's stop request is recorded"
wait_for 60 "inst-1's second stop runs" test -s "$T/pgid.inst-1"
pgid=$(cat "$T/pgid.inst-1")

# --- SIGTERM: the daemon ends, the stops' groups with it ------------------------
kill -TERM "$dpid"
wait_for 120 "the daemon ends on SIGTERM" gone_or_zombie "$dpid"
wait "$dpid"
rc=$?
expect_rc 0 "the daemon's exit on SIGTERM"
wait_for 30 "nothing of d-2's process group is left" group_gone
pgid=$pgid2
wait_for 30 "nothing of the guard's stop of inst-2 is left" group_gone
expect_eq "$(sql "SELECT status FROM local_stop WHERE deadline = 'd-2'")" 1 \
    "d-2, stopped with the daemon, is booked failed"
expect_contains "$(cat "$LOG")" "the local stop of deadline d-2 failed: it was stopped with the daemon" \
    "the log says why"
expect_eq "$(pending)" 1 "the guard's stop stopped with the daemon is still pending"

# --- the next daemon: the guard's stop again, not the claimed local one ---------
rm -f "$T/pgid.inst-1" "$T/pgid.inst-2"
DAEMON_ARGS="--listen 127.0.0.1:$port" start_daemon
wait_for 120 "the guard's stop of inst-2 runs again" test -s "$T/pgid.inst-2"
touch "$T/release.inst-2"
wait_for 120 "the guard stops inst-2" not at_least 1 pending
expect_eq "$(sql "SELECT result FROM action_log WHERE kind = 'guard_shutdown'")" '{"inst-2":"ok"}' \
    "the guard's stop of inst-2 went through"
checks=$((checks + 1))
[ ! -e "$T/pgid.inst-1" ] || fail "a claimed local stop ran again"
finish

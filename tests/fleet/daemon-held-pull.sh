#!/usr/bin/env bash
# The daemon's pulls of held stops are its tracked children: one still
# going when the daemon gets SIGTERM (held at a test point until the test
# says) is ended with the daemon, nothing of its process group left; what
# it had claimed is armed again, and the next daemon pulls it.
. "$(dirname "$0")/../e2e/lib.sh"
. "$(dirname "$0")/lib/watcher.sh"
. "$(dirname "$0")/lib/daemon.sh"

fleet_up 1
run status
expect_rc 0 "status pins the host key"
mkdir -p "$(instance_dir inst-1)/home/out"
printf 'result\n' >"$(instance_dir inst-1)/home/out/a.txt"

# A held stop of inst-1 waiting for its pull (what a fired deadline with
# --pull leaves).
id1=$(sql "SELECT id FROM instance WHERE name = 'inst-1'")
sql "INSERT INTO stop_hold (instance_id, deadline, pulls, must, created_at, held_at) VALUES ($id1, 'd-1', '[{\"remote\": \"~/out\", \"local\": \"$T/res\"}]', 1, strftime('%s'), strftime('%s'))"
hold_state() { sql "SELECT state FROM stop_hold WHERE deadline = 'd-1'"; }
hold_not() { [ "$(hold_state)" != "$1" ]; }

# The pull stops before its transfer until $T/gate is removed.
start_daemon GPUFLEET_TEST_PAUSE_AT=xfer:1 GPUFLEET_TEST_CRASH_GATE="$T/gate"
wait_for 120 "the daemon starts the pull, which waits at its gate" test -e "$T/gate"
pull=$(sed -n 's/.*held stop d-1 of inst-1: pulling (pid \([0-9]*\)).*/\1/p' "$LOG" | head -n 1)
expect_match "$pull" '^[0-9]+$' "the log names the pull's pid"
expect_eq "$(hold_state)" pulling "the pull claimed the hold"
expect_eq "$(ps -o pgid= -p "$pull" | tr -d ' ')" "$pull" "the pull leads its own process group"

# --- SIGTERM: the daemon ends, the pull with it ------------------------------
kill -TERM "$dpid"
wait_for 120 "the daemon ends on SIGTERM" gone_or_zombie "$dpid"
wait "$dpid"
rc=$?
expect_rc 0 "the daemon's exit on SIGTERM"
# The daemon waits for its children: the pull is gone when it has exited.
checks=$((checks + 1))
kill -0 "$pull" 2>/dev/null && fail "the pull (pid $pull) outlived the daemon"
pgid=$pull
group_gone() { ! pgrep -g "$pgid" >/dev/null; }
wait_for 30 "nothing of the pull's process group is left" group_gone
expect_contains "$(cat "$LOG")" "a held stop's pull (pid $pull) did not finish: it was stopped with the daemon" \
    "the log says why the pull ended"
expect_eq "$(hold_state)" armed "the hold is armed again for the next pull"

# --- the next daemon pulls it -------------------------------------------------
rm -f "$T/gate"
start_daemon
wait_for 120 "the next daemon's pull takes the hold on" hold_not armed
wait_for 120 "the pull is over" hold_not pulling
expect_eq "$(cat "$T/res/inst-1/out/a.txt" 2>&1)" result "the results came home"
finish

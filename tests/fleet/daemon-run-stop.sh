#!/usr/bin/env bash
# A schedule run's child is one of the daemon's tracked children: one that
# does not exit on its SIGTERM (a backup held at a test point after its
# rsync started, its handler waiting) is killed 5 s after it, and the
# daemon exits only once it is reaped: nothing of the run's process group
# outlives the daemon, and the run is recorded abandoned.
. "$(dirname "$0")/../e2e/lib.sh"
. "$(dirname "$0")/lib/watcher.sh"
. "$(dirname "$0")/lib/daemon.sh"

fleet_up 1
run status
expect_rc 0 "status pins the host key"
mkdir -p "$(instance_dir inst-1)/home/ckpt"
printf 'w\n' >"$(instance_dir inst-1)/home/ckpt/w.bin"

add_schedule bk inst-1 backup '~/ckpt/' "$T/b"
# Its pull stops once its transfer started, until $T/gate is removed.
start_daemon GPUFLEET_TEST_PAUSE_AT=xfer:2 GPUFLEET_TEST_CRASH_GATE="$T/gate"
wait_for 120 "the run's pull waits at its gate" test -e "$T/gate"
pause bk
wait_for 60 "the run's pid is recorded" has_pid bk
child=$(run_col bk pid)
expect_eq "$(ps -o pgid= -p "$child" | tr -d ' ')" "$child" "the run's child leads its own process group"

kill -TERM "$dpid"
wait_for 120 "the daemon ends on SIGTERM" gone_or_zombie "$dpid"
wait "$dpid"
rc=$?
expect_rc 0 "the daemon's exit on SIGTERM"
# The daemon waits for its children: the run's is gone once it has exited.
checks=$((checks + 1))
kill -0 "$child" 2>/dev/null && fail "the run's child (pid $child) outlived the daemon"
pgid=$child
group_gone() { ! pgrep -g "$pgid" >/dev/null; }
wait_for 30 "nothing of the run's process group is left" group_gone
expect_eq "$(run_col bk state)" abandoned "the run stopped with the daemon is abandoned"
expect_contains "$(cat "$LOG")" "run $(run_col bk id): its child exited" \
    "the daemon saw its child exit"
rm -f "$T/gate"
finish

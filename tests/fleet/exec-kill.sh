#!/usr/bin/env bash
# What gpufleet exec starts on an instance, it stops: after --timeout, and
# after Ctrl-C or SIGTERM to gpufleet, the remote command's whole process
# group ends (a child in the background too, not only the shell; on a
# channel, one that ignores SIGTERM by SIGKILL after the grace), directly
# and through the daemon's held sessions; the timeout says what it killed;
# a child moved to a session of its own with setsid is left running, as
# documented.
. "$(dirname "$0")/../e2e/lib.sh"
. "$(dirname "$0")/lib/watcher.sh"
. "$(dirname "$0")/lib/daemon.sh"
. "$(dirname "$0")/lib/exec.sh"
export GPUFLEET_NO_PROGRESS=1

export XDG_RUNTIME_DIR="$T/run"
mkdir -m 700 "$XDG_RUNTIME_DIR"
fleet_up 2

# The remote commands are told by their arguments: GNU sleep takes a
# fraction, and $$ (this test's pid) keeps other tests' sleeps out; none
# would end on its own during the test. Any left are ended with it.
tag=$$
leftovers() {
	local p
	p=$(pgrep -f "^sleep 97[6789]\.$tag\$")
	[ -z "$p" ] || kill $p
}
cleanup_hooks+=(leftovers)
# left SECS: processes of the remote commands still there.
left() { pgrep -f "^sleep $1\.$tag\$" >/dev/null; }
gone() { ! left "$1"; }
# started SECS: the remote command runs.
running() { left "$1"; }


# signal_case SIG RC WHAT [EXEC OPTIONS]: exec a command with a child in
# the background; once both run, SIG to gpufleet; both must end.
signal_case() {
	local sig=$1 want=$2 what=$3 pid
	shift 3
	"$GPUFLEET" exec inst-1 "$@" -- "sleep 979.$tag & sleep 978.$tag; wait" \
	    >"$T/out" 2>"$T/err" &
	pid=$!
	wait_for 60 "$what: the remote command runs" running 978 &&
	    wait_for 60 "$what: its background child runs" running 979
	kill -"$sig" "$pid"
	wait_exit "$pid" "$what"
	err=$(cat "$T/err")
	expect_rc "$want" "$what: exit status"
	[ "$want" != 130 ] ||
	    expect_match "$err" 'inst-1: interrupted' "$what: the host was interrupted"
	wait_for 30 "$what: the remote shell's command ended" gone 978
	wait_for 30 "$what: its background child ended" gone 979
}

# stubborn WHAT [EXEC OPTIONS]: a child that ignores SIGTERM and SIGHUP,
# of a shell that does not, is killed (SIGKILL after the grace) once past
# --timeout, though the shell is gone by then.
stubborn() {
	local what=$1
	shift
	run exec inst-1 -t 2 "$@" -- "sh -c 'trap \"\" TERM HUP; sleep 976.$tag' & wait"
	expect_rc 1 "$what: a command that ignores TERM, past --timeout"
	wait_for 30 "$what: the command that ignores TERM was killed" gone 976
}

# --- --timeout: the group ends, and the message says so ------------------
run exec inst-1 -t 2 --no-daemon -- "sleep 979.$tag & sleep 978.$tag; echo never"
expect_rc 1 "a command past --timeout"
expect_match "$err" \
    '^gpufleet: inst-1: command timed out after 2s; killed the remote command \(process group [0-9]+\)$' \
    "the timeout says what it killed"
expect_match "$err" "exec: 1 host: 0 ok, 0 exit non-zero, 1 failed \(timeout 1\)" \
    "summary"
wait_for 30 "--timeout: the remote command ended" gone 978
wait_for 30 "--timeout: its background child ended" gone 979

# --- Ctrl-C and SIGTERM, direct ------------------------------------------
signal_case INT 130 "Ctrl-C" --no-daemon
expect_match "$err" 'interrupted; killed the remote command \(process group [0-9]+\)' \
    "Ctrl-C says what it killed"
signal_case TERM 130 "SIGTERM" --no-daemon
stubborn "direct" --no-daemon

# --- stderr before and after the marker is the command's, unchanged -------
run exec inst-1 --no-daemon -- 'echo one >&2; echo two'
expect_rc 0 "a command that writes stderr"
expect_eq "$err" "inst-1 [stderr]: one
gpufleet: exec: 1 host: 1 ok, 0 exit non-zero, 0 failed" "stderr passed on, the group's line taken out"
expect_eq "$out" "inst-1: two" "stdout as it was"

# --- setsid leaves the group: such a child survives, as documented --------
run exec inst-1 -t 2 --no-daemon -- \
    "setsid sleep 977.$tag </dev/null >/dev/null 2>&1 & sleep 978.$tag"
expect_rc 1 "setsid: the command timed out"
wait_for 30 "setsid: the command's own sleep ended" gone 978
checks=$((checks + 1))
kept=$(pgrep -f "^sleep 977\.$tag\$")
[ -n "$kept" ] || fail "a setsid child was killed: it left the group"
[ -z "$kept" ] || kill $kept

# --- through the daemon's held sessions -----------------------------------
all_polled() { [ "$(polled)" -ge "$1" ]; }
start_daemon
wait_for 60 "the daemon's first poll" all_polled 2
run -v exec inst-1 -t 2 -- "sleep 979.$tag & sleep 978.$tag; echo never"
expect_rc 1 "through the daemon: a command past --timeout"
expect_match "$err" 'exec through the daemon' "it went through the daemon"
expect_match "$err" 'inst-1: command timed out after 2s' \
    "through the daemon: timed out"
wait_for 30 "through the daemon, --timeout: the command ended" gone 978
wait_for 30 "through the daemon, --timeout: its child ended" gone 979
signal_case INT 130 "through the daemon, Ctrl-C"
# SIGTERM ends the CLI at once (143); the daemon sees it go and stops the run.
signal_case TERM 143 "through the daemon, SIGTERM"

# --- the daemon without command runners: its plain channels likewise -------
kill "$dpid"
wait "$dpid" 2>/dev/null
start_daemon GPUFLEET_NO_RUNNER=1
run -v exec inst-1 -t 2 -- "sleep 979.$tag & sleep 978.$tag; echo never"
expect_rc 1 "the daemon's channel: a command past --timeout"
expect_match "$err" 'exec through the daemon' "it went through the daemon"
expect_match "$err" \
    'inst-1: command timed out after 2s; killed the remote command \(process group [0-9]+\)' \
    "the daemon's channel: the timeout says what it killed"
wait_for 30 "the daemon's channel, --timeout: the command ended" gone 978
wait_for 30 "the daemon's channel, --timeout: its child ended" gone 979
signal_case INT 130 "the daemon's channel, Ctrl-C"
stubborn "the daemon's channel"

finish

#!/usr/bin/env bash
# gpufleet exec never waits on its reader beyond its deadlines: a reader
# that stops reading holds the hosts (SSH flow control), not the loop, so
# --timeout still ends the run; what the reader never took is dropped and
# said so; a slow reader still gets every line; stdout is left blocking.
. "$(dirname "$0")/../e2e/lib.sh"
. "$(dirname "$0")/lib/exec.sh"
export GPUFLEET_NO_PROGRESS=1 GPUFLEET_NO_DAEMON=1

fleet_up 2

# --- a reader that never reads: --timeout still ends the run ----------
mkfifo "$T/pipe"
sleep 100 <"$T/pipe" &
sleeper=$!
cleanup_hooks+=("kill $sleeper 2>/dev/null")
"$GPUFLEET" exec inst-1 -t 3 -- yes "reader-t-$$" >"$T/pipe" 2>"$T/err" &
pid=$!
wait_exit "$pid" "exec -t 3 -- yes | sleep 100"
err=$(cat "$T/err")
checks=$((checks + 1))
kill -0 "$sleeper" 2>/dev/null || fail "the reader was gone: nothing proved"
expect_rc 1 "a stalled reader: the host timed out"
expect_match "$err" \
    '^gpufleet: inst-1: command timed out after 3s; killed the remote command' \
    "the timeout was reported, and the command killed"
checks=$((checks + 1))
for ((i = 0; i < 150; i++)); do
	pgrep -f "^yes reader-t-$$\$" >/dev/null || break
	sleep 0.2
done
! pgrep -f "^yes reader-t-$$\$" >/dev/null || fail "yes still runs on the instance (30 s on)"
expect_match "$err" 'bytes of output dropped: the reader did not take them' \
    "the output the reader never took is said to be dropped"
expect_match "$err" "exec: 1 host: 0 ok, 0 exit non-zero, 1 failed \(timeout 1\)" \
    "summary"
kill "$sleeper" 2>/dev/null
wait "$sleeper" 2>/dev/null
rm -f "$T/pipe"

# --- the same with Ctrl-C and no --timeout: it ends, exit 130 ----------
mkfifo "$T/pipe"
sleep 100 <"$T/pipe" &
sleeper=$!
cleanup_hooks+=("kill $sleeper 2>/dev/null")
"$GPUFLEET" exec inst-1 -- yes "reader-$$" >"$T/pipe" 2>"$T/err" &
pid=$!
# Ctrl-C once the command runs (and soon fills what is queued).
for ((i = 0; i < 300; i++)); do
	pgrep -f "^yes reader-$$\$" >/dev/null && break
	sleep 0.2
done
sleep 1
kill -INT "$pid"
wait_exit "$pid" "exec -- yes | sleep 100, Ctrl-C"
err=$(cat "$T/err")
expect_rc 130 "Ctrl-C while the reader is stalled"
expect_match "$err" 'inst-1: interrupted' "the host was interrupted"
kill "$sleeper" 2>/dev/null
wait "$sleeper" 2>/dev/null
rm -f "$T/pipe"

# --- a slow reader gets every line, in order, and exit 0 ---------------
( "$GPUFLEET" exec inst-1 -- 'seq 1 300000' 2>"$T/err"; echo "rc=$?" >"$T/rc" ) |
    { sleep 2; cat; } >"$T/out"
rc=$(sed -n 's/^rc=//p' "$T/rc")
expect_rc 0 "a slow reader"
expect_eq "$(wc -l <"$T/out")" 300000 "every line came"
expect_eq "$(seq 1 300000 | sed 's/^/inst-1: /' | cmp - "$T/out" && echo same)" \
    same "in order, prefixed"

# --- stdout is blocking again when exec ends (a shared pipe or tty) ----
flag=$( ( "$GPUFLEET" exec inst-1 -- 'seq 1 100000' 2>/dev/null
	python3 -c 'import fcntl, os, sys
print("nonblock=%d" % bool(fcntl.fcntl(1, fcntl.F_GETFL) & os.O_NONBLOCK))' ) |
    { sleep 1; cat; } | tail -1)
expect_eq "$flag" "nonblock=0" "stdout is blocking again for the next writer"

finish

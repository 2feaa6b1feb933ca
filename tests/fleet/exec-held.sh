#!/usr/bin/env bash
# gpufleet exec through a running daemon's held sessions: after the
# daemon's first poll, two runs give the output of a direct run
# (--no-daemon) and make no new SSH login; exit codes, --json and -b as
# direct; the socket 0600 in a 0700 directory; a socket left by a dead
# daemon means a direct run; a daemon killed during a long command gives
# a clear error, no hang.
. "$(dirname "$0")/../e2e/lib.sh"
. "$(dirname "$0")/lib/watcher.sh"
. "$(dirname "$0")/lib/daemon.sh"

export XDG_RUNTIME_DIR="$T/run"
mkdir -m 700 "$XDG_RUNTIME_DIR"
N=10
fleet_up $N

# sorted CMD...: gpufleet's stdout and stderr, each sorted (hosts finish in
# any order), and its exit status.
sorted() {
	"$GPUFLEET" "$@" >"$T/o" 2>"$T/e"
	rc=$?
	sout=$(sort "$T/o")
	serr=$(sort "$T/e")
}
# no_duration: --json lines without the timing.
no_duration() { sed 's/"duration_ms":[0-9]*/"duration_ms":X/' "$T/o" | sort; }
all_polled() { [ "$(polled)" -ge "$1" ]; }

start_daemon
wait_for 60 "the daemon's first poll" all_polled $N

# --- the socket: 0600 in a 0700 directory, one per database ----------------
sock=$(ls "$XDG_RUNTIME_DIR"/gpufleet/held-*.sock 2>/dev/null)
expect_eq "$(printf '%s\n' "$sock" | grep -c .)" 1 "one socket"
expect_eq "$(stat -c %a "$sock")" 600 "the socket's mode"
expect_eq "$(stat -c %a "$XDG_RUNTIME_DIR/gpufleet")" 700 "its directory's mode"
expect_eq "$(stat -c %F "$sock")" socket "a socket"

# --- the same output as a direct run, and no new login ---------------------
CMD='echo "in $(pwd)"; echo to-stderr >&2'
sorted exec all --no-daemon -- "$CMD"
direct_out=$sout direct_err=$serr
expect_rc 0 "a direct exec"
expect_eq "$(printf '%s\n' "$direct_out" | grep -c ': in /')" $N \
    "every host answered directly"
before=$(logins)
for k in 1 2; do
	sorted exec all -- "$CMD"
	expect_rc 0 "exec $k through the daemon"
	expect_eq "$sout" "$direct_out" "exec $k: stdout as a direct run's"
	expect_eq "$serr" "$direct_err" "exec $k: stderr as a direct run's"
done
expect_eq "$(logins)" "$before" "no new SSH login for the two runs"
sorted -v exec all -- true
expect_contains "$serr" "exec through the daemon at $sock" "-v says which way"
sorted -v exec all --no-daemon -- true
checks=$((checks + 1))
! grep -q "through the daemon" "$T/e" || fail "--no-daemon went through the daemon"

# --- exit codes, --json and -b as a direct run ------------------------------
sorted exec all -- 'echo x; exit 3'
held_out=$sout held_err=$serr
expect_rc 1 "a failing command through the daemon"
sorted exec all --no-daemon -- 'echo x; exit 3'
expect_rc 1 "a failing command, direct"
expect_eq "$held_out" "$sout" "a failing command: stdout as direct"
expect_eq "$held_err" "$serr" "a failing command: stderr as direct"
expect_contains "$held_err" "exited with status 3" "the status is named"
"$GPUFLEET" exec all --json -- 'echo j; exit 2' >"$T/o" 2>"$T/e"
rc=$? held_json=$(no_duration)
expect_rc 1 "--json through the daemon"
"$GPUFLEET" exec all --json --no-daemon -- 'echo j; exit 2' >"$T/o" 2>"$T/e"
expect_eq "$held_json" "$(no_duration)" "--json as direct"
expect_eq "$(printf '%s\n' "$held_json" | grep -c '"exit_status":2')" $N \
    "--json has every host's status"
"$GPUFLEET" exec all -b -- 'echo same' >"$T/o" 2>"$T/e"
rc=$? held_b=$(cat "$T/o")
expect_rc 0 "-b through the daemon"
"$GPUFLEET" exec all -b --no-daemon -- 'echo same' >"$T/o" 2>"$T/e"
expect_eq "$held_b" "$(cat "$T/o")" "-b as direct"

# --- a socket left by a dead daemon: direct, correct output ---------------
kill -9 "$dpid"
wait_for 30 "the daemon dies" gone_or_zombie "$dpid"
checks=$((checks + 1))
[ -S "$sock" ] || fail "the dead daemon's socket should still be there"
sorted -v exec all -- "$CMD"
expect_rc 0 "exec with a stale socket"
expect_eq "$(printf '%s\n' "$sout")" "$direct_out" "stale socket: direct output"
expect_contains "$serr" "no daemon at $sock" "stale socket: -v says direct"

# --- the daemon killed during a long command: a clear error, no hang -----
n0=$(polled)
start_daemon
wait_for 60 "the new daemon's first poll" all_polled $((n0 + N))
for d in "$D"/instances/*/home; do rm -f "$d/started"; done
timeout 120 "$GPUFLEET" exec all -- 'touch started; sleep 40' \
    >"$T/long.out" 2>"$T/long.err" &
cli=$!
started_all() { [ "$(ls "$D"/instances/*/home/started 2>/dev/null | wc -l)" -ge $N ]; }
wait_for 60 "the long command runs on every host" started_all
kill -9 "$dpid"
wait_for 60 "the CLI ends once the daemon is gone" gone_or_zombie "$cli"
wait "$cli"
rc=$? err=$(cat "$T/long.err")
expect_rc 1 "exec whose daemon died"
expect_contains "$err" "the daemon's run broke off (the daemon went away before this host finished): $N of $N host(s) not done" \
    "the CLI says the daemon went away"
expect_eq "$(grep -c ': the daemon went away before this host finished' "$T/long.err")" $N \
    "every host not done is reported"

finish

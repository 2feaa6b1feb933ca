#!/usr/bin/env bash
# gpufleet exec through a running daemon's held sessions: after the
# daemon's first poll, two runs give the output of a direct run
# (--no-daemon) and make no new SSH login; exit codes, --json and -b as
# direct; the socket 0600 in a 0700 directory; a socket left by a dead
# daemon means a direct run; a daemon killed during a long command gives
# a clear error, no hang. The commands go to each held session's command
# runner (gpufleet-agent serve): their parent is the agent, not a new sshd
# session; signals, large output and timeouts as a direct run; a runner
# that answers garbage or nothing gives a command its own channel; one
# that goes away during a command fails that host with a clear error (its
# commands get channels from then on); never a wrong result.
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
	err=$serr
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

# --- the command runner: no sshd session process per command ---------------
# $PPID of the user's shell: the runner (comm "gpufleet-agent-" of
# gpufleet-agent-HASH) through the daemon, sshd's side directly.
sorted exec all -- 'cat /proc/$PPID/comm'
expect_rc 0 "exec through the runner"
expect_eq "$(printf '%s\n' "$sout" | grep -c ': gpufleet-agent-$')" $N \
    "every held command ran under its session's runner"
sorted exec all --no-daemon -- 'cat /proc/$PPID/comm'
expect_rc 0 "the same, direct"
expect_eq "$(printf '%s\n' "$sout" | grep -c 'gpufleet-agent')" 0 \
    "a direct command runs under sshd's session"
before=$(logins)
sorted exec all -- true
expect_eq "$(logins)" "$before" "a run on the runners makes no new SSH login"
# Killed by a signal, large output, stdin: as a direct run.
sorted exec all -- 'echo before; kill -TERM $$'
held_out=$sout held_err=$serr held_rc=$rc
sorted exec all --no-daemon -- 'echo before; kill -TERM $$'
expect_eq "$held_rc" "$rc" "a command killed by SIGTERM: exit status as direct"
expect_eq "$held_out" "$sout" "a command killed by SIGTERM: stdout as direct"
expect_eq "$held_err" "$serr" "a command killed by SIGTERM: stderr as direct"
expect_contains "$held_err" "TERM" "the signal is named"
BIG='seq 1 30000; seq 1 3000 >&2; head -c 100000 /dev/zero | tr "\0" x; echo'
sorted exec all -- "$BIG"
held_out=$sout held_err=$serr
expect_rc 0 "large output through the runner"
sorted exec all --no-daemon -- "$BIG"
expect_eq "$(printf '%s\n' "$held_out" | md5sum)" "$(printf '%s\n' "$sout" | md5sum)" \
    "large output: stdout as direct ($(printf '%s\n' "$sout" | wc -l) lines)"
expect_eq "$(printf '%s\n' "$held_err" | md5sum)" "$(printf '%s\n' "$serr" | md5sum)" \
    "large output: stderr as direct"
sorted exec all -- 'read -r x; echo "got [$x]"'
expect_eq "$(printf '%s\n' "$sout" | grep -c ': got \[\]$')" $N \
    "a held command's stdin is empty, as a direct one's"

# --- the daemon's held sessions are nobody's login -------------------------
# The agent, run here outside any session as the watcher runs, counts
# inst-1's logins (those carrying its session mark): the daemon's session,
# with its runner, is not one; an ssh login is.
mark=$(ssh -F "$D/ssh_config" inst-1 'echo $GPUFLEET_AGENT_SESSION_MARK')
mkdir -p "$T/agentdir"
seen() {
	GPUFLEET_AGENT_SESSION_MARK=$mark "$(dirname "$GPUFLEET")/gpufleet-agent" \
	    report --dir "$T/agentdir" 2>/dev/null | jq -r .host.sessions
}
no_login() { [ "$(seen)" = 0 ]; }
wait_for 60 "the daemon's held session (with its runner) counts as no login" no_login
ssh -F "$D/ssh_config" inst-1 'sleep 60' >/dev/null 2>&1 &
login=$!
one_login() { [ "$(seen)" = 1 ]; }
wait_for 60 "an ssh login on inst-1 counts" one_login
kill "$login" 2>/dev/null
wait "$login" 2>/dev/null

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

# --- runners that answer garbage or nothing: a channel, never a failure ---
# The daemon's polls go through the runners too. On inst-1 the agent's
# serve sends garbage instead of its hello; on inst-2 a good hello, then
# garbage for the first command (the daemon's first poll); on inst-4
# nothing at all (the poll gives up on it at the set-up deadline, 3 s
# here). Other uses of the agent run the real one.
for i in 1 2 4; do
	adir=$(instance_dir inst-$i)/home/.cache/gpufleet
	a=$(ls "$adir"/gpufleet-agent-* | head -1)
	mv "$a" "$adir/real-agent"
	if [ $i = 1 ]; then
		body="printf 'Z\\000\\000\\000\\003bad'; sleep 5; exit 0"
	elif [ $i = 4 ]; then
		body="sleep 30; exit 0"
	else
		body="printf 'R\\000\\000\\000\\026gpufleet-agent serve 1'; head -c 5 >/dev/null; printf 'Q\\000\\000\\000\\000'; sleep 5; exit 0"
	fi
	printf '#!/bin/sh\nif [ "$1" = serve ]; then %s; fi\nexec "%s" "$@"\n' \
	    "$body" "$adir/real-agent" >"$a"
	chown --reference="$adir/real-agent" "$a"
	chmod 700 "$a"
done
printf '[ssh]\nsetup_timeout = 3\n' >>"$XDG_CONFIG_HOME/gpufleet/config.ini"
n0=$(polled)
start_daemon
polled_but() { [ "$(polled)" -ge $((n0 + N - 1)) ]; }
wait_for 90 "the new daemon's first poll" polled_but
# Each of the three: the command runs, on a channel of its own.
for i in 1 2 4; do
	sorted exec inst-$i -- 'cat /proc/$PPID/comm; echo ok'
	expect_rc 0 "inst-$i's broken runner: the command still runs"
	expect_contains "$sout" "inst-$i: ok" "inst-$i's broken runner: the output"
	checks=$((checks + 1))
	! grep -q 'gpufleet-agent' "$T/o" ||
	    fail "inst-$i: the command went to a broken runner: $(cat "$T/o" "$T/e")"
done
for i in 1 2 4; do
	adir=$(instance_dir inst-$i)/home/.cache/gpufleet
	mv "$adir/real-agent" "$(ls "$adir"/gpufleet-agent-* | head -1)"
done

# --- a runner that goes away during a command: a clear error --------------
# The command kills its parent, the runner of inst-5's held session.
sorted exec inst-5 -- 'kill -9 $PPID; sleep 1'
expect_rc 1 "a runner gone mid-command: the host fails"
expect_contains "$serr" "inst-5: the command runner on the instance ended before the command finished" \
    "a runner gone mid-command: the reason"
sorted exec inst-5 -- 'cat /proc/$PPID/comm; echo ok'
expect_rc 0 "after a runner that went away: the next command runs"
expect_contains "$sout" "inst-5: ok" "after a runner that went away: its output"
checks=$((checks + 1))
! grep -q 'gpufleet-agent' "$T/o" ||
    fail "a runner that failed a command was used again: $(cat "$T/o" "$T/e")"

# --- a timed-out command on the runner is killed on the instance ----------
sorted exec inst-3 -t 2 -- 'sleep 47.25; echo never'
expect_rc 1 "a held command past its timeout"
expect_contains "$serr" "command timed out after 2s" "the timeout is named"
no_sleeper() { ! pgrep -f 'sleep 47.25' >/dev/null; }
wait_for 60 "the timed-out command is hung up on" no_sleeper

# --- the daemon killed during a long command: a clear error, no hang -----
n0=$(polled)
wait_for 60 "the daemon's next poll" all_polled $((n0 + N))
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

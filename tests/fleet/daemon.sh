#!/usr/bin/env bash
# gpufleet daemon on the sandbox fleet: a passphrase it cannot ask for, one
# daemon per database, polls over held sessions, an exec schedule that runs
# once per occurrence (the test clock), a daemon SIGKILLed in the middle of
# a scheduled exec and of a scheduled key rotation (restarted: no double
# action, state consistent), SIGTERM, SIGHUP, missed runs, a hung-up
# schedule run, --detach (tests/fleet/daemon-scale.sh: 50 instances).
. "$(dirname "$0")/../e2e/lib.sh"
. "$(dirname "$0")/lib/watcher.sh"
. "$(dirname "$0")/lib/daemon.sh"

fleet_up 3
D1=$D
# runs_not_skipped NAME: the runs of NAME, not counting the occurrences skipped
# because one still went. A schedule is paused once its run has started,
# and the next occurrence (a test minute, 3 s) may come first: a skipped
# row, which is no run.
runs_not_skipped() { sql "SELECT count(*) FROM schedule_run r JOIN schedule s ON s.id = r.schedule_id WHERE s.name = '$1' AND r.state != 'skipped'"; }

# --- a passphrase that would be asked for: refused, nothing started --------
printf '[keys]\npassphrase_file = ask\n' >"$T/ask.ini"
"$GPUFLEET" --config "$T/ask.ini" daemon --listen none >"$T/out" 2>"$T/err" &
p=$!
wait_for 30 "the daemon refuses passphrase_file = ask" gone_or_zombie "$p"
kill -9 "$p" 2>/dev/null
wait "$p"
rc=$?
err=$(cat "$T/err")
expect_rc 4 "passphrase_file = ask"
expect_one_error_line "passphrase_file = ask"
expect_contains "$err" "[keys] passphrase_file is 'ask', but a daemon has no terminal" \
    "the refusal says why"
GPUFLEET_KEYS_PASSPHRASE_FILE=ask timeout 30 "$GPUFLEET" daemon --listen none >"$T/out" 2>"$T/err"
rc=$?
err=$(cat "$T/err")
expect_rc 4 "GPUFLEET_KEYS_PASSPHRASE_FILE=ask"
expect_contains "$err" "GPUFLEET_KEYS_PASSPHRASE_FILE is 'ask'" "the override named"
checks=$((checks + 1))
! grep -q "daemon started" "$LOG" 2>/dev/null || fail "a refused daemon started"

# --- one daemon per database -----------------------------------------------
start_daemon
a=$dpid
# (bounded: a second daemon that did not refuse would run on)
second() {
	timeout 60 "$GPUFLEET" daemon --listen none "$@" >"$T/out" 2>"$T/err"
	rc=$?
	out=$(cat "$T/out")
	err=$(cat "$T/err")
	local p
	p=$(printf '%s' "$out" | sed -n 's/.*started, pid \([0-9]*\),.*/\1/p')
	[ -z "$p" ] || daemons+=("$p")
}
second
expect_rc 2 "a second daemon"
expect_eq "$err" "gpufleet daemon: another daemon (pid $a) runs on $db" \
    "the second daemon names the first"
second --detach
expect_rc 2 "a second daemon, detached"
expect_eq "$err" "gpufleet daemon: another daemon (pid $a) runs on $db" \
    "the second detached daemon names the first"
expect_eq "$(stat -c %a "$XDG_STATE_HOME/gpufleet") $(stat -c %a "$LOG")" \
    "700 600" "the log is 0600 in a 0700 directory"

# --- polls over held sessions: no new login per poll ------------------------
wait_for 60 "three polls stored" at_least 9 polled
l1=$(logins)
n1=$(polled)
wait_for 60 "three more polls stored" at_least $((n1 + 9)) polled
expect_eq "$(logins)" "$l1" "polls reuse the held sessions (no new login)"
expect_eq "$(sql "SELECT count(*) FROM last_status WHERE state = 'up'")" 3 \
    "every instance up"

# --- an exec schedule runs once per occurrence ------------------------------
add_schedule tick inst-1 exec 'echo run >> ticks.txt'
wait_for 120 "three occurrences of tick ran" at_least 3 runs tick ok
pause tick
# The pause might land just after a claim: let the last run end.
wait_for 60 "no run of tick still going" settled tick
expect_eq "$(lines inst-1 ticks.txt)" "$(runs tick ok)" \
    "one line on the instance per run recorded ok"
expect_eq "$(runs tick failed)" 0 "no run of tick failed"
expect_eq "$(sql "SELECT count(DISTINCT occurrence) FROM schedule_run r JOIN schedule s ON s.id = r.schedule_id WHERE s.name = 'tick'")" \
    "$(runs tick)" "one row per occurrence"
expect_eq "$(sql "SELECT count(*) FROM action_log WHERE kind = 'schedule_run' AND name = 'tick'")" \
    "$(runs tick ok)" "an action_log entry per run"
expect_eq "$(sql "SELECT result FROM schedule_run r JOIN schedule s ON s.id = r.schedule_id WHERE s.name = 'tick' AND r.state = 'ok' LIMIT 1")" \
    '{"inst-1":"ok"}' "the result per host"
out1=$(run_col tick output)
expect_match "$out1" "^$XDG_STATE_HOME/gpufleet/runs/[0-9]+\.out$" "the run's output file"
expect_eq "$(stat -c %a "$out1") $(stat -c %a "$(dirname "$out1")")" "600 700" \
    "output 0600 in 0700"

# --- schedule run NAME: now, in the foreground, recorded as manual --------
before=$(lines inst-1 ticks.txt)
run schedule run tick
expect_rc 0 "schedule run tick"
expect_eq "$out" "inst-1: ok" "schedule run prints the result per host"
expect_eq "$(lines inst-1 ticks.txt)" $((before + 1)) "schedule run ran the command once"
expect_eq "$(sql "SELECT state || ' ' || result FROM schedule_run r JOIN schedule s ON s.id = r.schedule_id WHERE s.name = 'tick' AND r.manual = 1")" \
    'ok {"inst-1":"ok"}' "the manual run's row"

checks=$((checks + 1))
! grep -q "instance(s) up" "$LOG" || fail "debug lines in the log without -v"

# --- missed occurrences are recorded once, the newest runs -----------------
past=$(($(date +%s) - 60)) # 20 test minutes ago
add_schedule miss inst-1 exec true
sql "UPDATE schedule SET created_at = $past, considered_until = $past WHERE name = 'miss'"
wait_for 60 "miss ran" at_least 1 runs miss ok
pause miss
wait_for 60 "miss settled" settled miss
expect_eq "$(sql "SELECT count(*) FROM action_log WHERE kind = 'schedule_missed' AND name = 'miss'")" 1 \
    "the missed occurrences: one entry, not one each"
expect_match "$(sql "SELECT why FROM action_log WHERE kind = 'schedule_missed' AND name = 'miss'")" \
    '^(19|[2-9][0-9]) occurrences missed from ' "the entry says how many and from when"
expect_eq "$(runs miss)" "$(($(runs miss ok) + $(runs miss skipped)))" \
    "no row for the older occurrences, and nothing failed"

# --- SIGHUP re-reads the configuration; a bad one is kept out --------------
printf '[daemon]\npoll_interval = 2\nstop_grace = 2\n' \
    >"$XDG_CONFIG_HOME/gpufleet/config.ini"
# logrotate moves the log, then sends SIGHUP: the daemon writes a new one.
mv "$LOG" "$LOG.1"
kill -HUP "$a"
wait_for 30 "SIGHUP re-reads the configuration, logged in a new log" grep -q "SIGHUP: configuration re-read" "$LOG"
expect_eq "$(stat -c %a "$LOG")" 600 "the new log is 0600"
printf '[daemon]\npoll_interval = 0\n' >"$XDG_CONFIG_HOME/gpufleet/config.ini"
kill -HUP "$a"
wait_for 30 "a bad configuration is logged" grep -q "the configuration in use stays" "$LOG"
expect_eq "$(grep -c "the configuration in use stays" "$LOG")" 1 "one line for the bad configuration"
checks=$((checks + 1))
kill -0 "$a" 2>/dev/null || fail "a bad configuration stopped the daemon"
printf '[daemon]\npoll_interval = 1\nstop_grace = 2\n' \
    >"$XDG_CONFIG_HOME/gpufleet/config.ini"

# --- the files of runs that ended more than runs_keep_days ago go ----------
old=$(sql "SELECT r.output FROM schedule_run r JOIN schedule s ON s.id = r.schedule_id WHERE s.name = 'tick' AND r.state = 'ok' ORDER BY r.id LIMIT 1")
recent=$(sql "SELECT r.output FROM schedule_run r JOIN schedule s ON s.id = r.schedule_id WHERE s.name = 'tick' AND r.state = 'ok' ORDER BY r.id DESC LIMIT 1")
checks=$((checks + 1))
[ -f "$old" ] && [ -f "${old%.out}.err" ] && [ "$old" != "$recent" ] ||
    fail "two runs of tick with their files: $old $recent"
sql "UPDATE schedule_run SET ended_at = ended_at - 15 * 86400 WHERE output = '$old'"
pruned() { [ ! -e "$old" ] && [ ! -e "${old%.out}.err" ]; }
wait_for 30 "the files of a run ended 15 days ago are deleted" pruned
checks=$((checks + 1))
[ -f "$recent" ] && [ -f "${recent%.out}.err" ] || fail "the files of a recent run went too"
expect_eq "$(sql "SELECT count(*) FROM schedule_run WHERE output = '$old'")" 0 \
    "the pruned run's row no longer names its file"

# --- SIGTERM: exit 0, daemon_stop ------------------------------------------
kill -TERM "$a"
wait "$a"
rc=$?
expect_rc 0 "SIGTERM"
expect_eq "$(sql "SELECT count(*) FROM action_log WHERE kind = 'daemon_stop'")" 1 \
    "a daemon_stop entry"
expect_eq "$(sql "SELECT count(*) FROM action_log WHERE kind = 'daemon_start'")" 1 \
    "one daemon_start entry (the refused ones wrote none)"

# --- SIGKILL in the middle of a scheduled exec; the child outlives it -------
# The run waits on the instance while the file slowhang is there, so that
# its child still goes when the daemon is killed and when the next starts.
home2=$(instance_dir inst-2)/home
: >"$home2/slowhang"
add_schedule slow inst-2 exec 'while [ -f slowhang ]; do sleep 0.2; done; echo done >> slow.txt'
start_daemon
wait_for 60 "slow's run started" has_pid slow
pause slow
child=$(run_col slow pid)
kill -9 "$dpid"
wait "$dpid" 2>/dev/null
checks=$((checks + 1))
[ "$(pid_state "$child")" != "" ] || fail "the run's child died with the daemon"
start_daemon
wait_for 60 "the restarted daemon waits for the child" \
    grep -qF "(pid $child) from before this daemon still goes" "$LOG"
rm -f "$home2/slowhang"
wait_for 60 "the restarted daemon finishes slow's run" settled slow
expect_eq "$(run_col slow state)" ok "the run waited for is ok"
expect_eq "$(runs_not_skipped slow)" 1 "slow ran once"
expect_eq "$(lines inst-2 slow.txt)" 1 "one line on the instance"

# --- SIGTERM with a run going: its grace, then stopped and abandoned --------
add_schedule long inst-2 exec 'sleep 120; echo late >> long.txt'
wait_for 60 "long's run started" has_pid long
pause long
child=$(run_col long pid)
long_id=$(run_col long id)
kill -TERM "$dpid"
wait "$dpid"
rc=$?
expect_rc 0 "SIGTERM with a run going"
expect_contains "$(cat "$LOG")" "run $long_id: its child exited" \
    "the daemon waited for its child to exit after its SIGTERM"
expect_eq "$(run_col long state)" abandoned "the run still going is abandoned"
expect_eq "$(run_col long reason)" "the daemon stopped (SIGTERM): SIGTERM after 2s" \
    "the reason says who stopped it"
wait_for 30 "the run's child is stopped" gone_or_zombie "$child"
expect_eq "$(lines inst-2 long.txt)" 0 "the stopped run wrote nothing"

# --- a daemon leaves a foreground schedule run alone while its CLI lives ----
# The run waits on the instance while the file hang is there.
: >"$home2/hang"
CRON='0 0 1 1 *' add_schedule fg inst-2 exec 'while [ -f hang ]; do sleep 0.2; done; echo r >> fg.txt'
"$GPUFLEET" schedule run fg >"$T/fg.out" 2>"$T/fg.err" &
cli=$!
wait_for 60 "fg's manual run started" has_pid fg
child=$(run_col fg pid)
expect_eq "$(run_col fg runner_pid)" "$cli" "the manual run's runner is the CLI"
start_daemon
kill -TERM "$dpid"
wait "$dpid"
rc=$?
expect_rc 0 "SIGTERM with a foreground schedule run going"
checks=$((checks + 1))
[ "$(pid_state "$child")" != "" ] || fail "the daemon stopped the CLI's child"
expect_eq "$(run_col fg state)" running "the daemon left the CLI's run alone"
rm -f "$home2/hang"
wait "$cli"
rc=$?
expect_rc 0 "the foreground schedule run, a daemon started and stopped meanwhile"
expect_eq "$(cat "$T/fg.out")" "inst-2: ok" "its result per host"
expect_eq "$(run_col fg state)" ok "its row"

# --- a schedule run killed with its child blocks nothing after it ----------
# Killed by a hang-up: the CLI and its child (one process group) die; the
# row is finished (abandoned) by whoever decides "still going" next: the
# daemon's tick, and the CLI's schedule run.
start_daemon
sql "DELETE FROM schedule_run WHERE schedule_id = (SELECT id FROM schedule WHERE name = 'fg')"
hup_run() {
	: >"$home2/hang"
	setsid "$GPUFLEET" schedule run fg >/dev/null 2>&1 &
	wait_for 60 "fg's manual run started" has_pid fg
	local runner
	runner=$(run_col fg runner_pid)
	kill -HUP -- "-$runner"
	wait_for 30 "the hung-up run's runner is gone" gone_or_zombie "$runner"
	wait_for 30 "the hung-up run's child is gone" gone_or_zombie "$(run_col fg pid)"
	rm -f "$home2/hang"
}
hup_run
sql "UPDATE schedule SET cron = '* * * * *' WHERE name = 'fg'"
run schedule resume fg
expect_rc 0 "schedule resume fg"
wait_for 60 "the daemon runs fg after the hung-up run" at_least 1 runs fg ok
pause fg
wait_for 60 "fg settled" settled fg
# The first scheduled occurrence after the dead run ran: only a live run
# may make one skipped (a later occurrence can meet a slow live run on a
# loaded machine, which is no fault of the dead one).
expect_eq "$(sql "SELECT r.state FROM schedule_run r JOIN schedule s ON s.id = r.schedule_id WHERE s.name = 'fg' AND r.manual = 0 AND r.state <> 'missed' ORDER BY r.id LIMIT 1")" ok \
    "no occurrence skipped for a dead run: the first after it ran"
expect_eq "$(sql "SELECT state || ': ' || reason FROM schedule_run r JOIN schedule s ON s.id = r.schedule_id WHERE s.name = 'fg' AND r.manual = 1")" \
    "abandoned: the runner died before it gave a whole result" \
    "the hung-up run is abandoned"
kill -TERM "$dpid"
wait "$dpid"
sql "DELETE FROM schedule_run WHERE schedule_id = (SELECT id FROM schedule WHERE name = 'fg')"
hup_run
# (a manual run's occurrence is the second it started: one per second)
later() { [ "$(date +%s)" -gt "$(run_col fg occurrence)" ]; }
wait_for 10 "a second after the hung-up run's" later
run schedule run fg --json
expect_rc 0 "schedule run after a hung-up one"
expect_eq "$(printf '%s' "$out" | jq -r .state)" ok "the new run is ok"
expect_eq "$(sql "SELECT group_concat(state, ' ') FROM (SELECT state FROM schedule_run r JOIN schedule s ON s.id = r.schedule_id WHERE s.name = 'fg' ORDER BY r.id)")" \
    "abandoned ok" "the hung-up run abandoned, then the new one"

# --- a run whose finish failed (database locked) is finished later ---------
start_daemon
: >"$home2/hang"
add_schedule held inst-2 exec 'while [ -f hang ]; do sleep 0.2; done'
wait_for 60 "held's run started" has_pid held
pause held
# (the daemon writes every poll: lock_db waits for its turn)
checks=$((checks + 1))
lock_db || fail "the database is not locked: $(cat "$T/lock.out")"
rm -f "$home2/hang"
wait_for 90 "the daemon cannot finish held's run" \
    grep -q "finishing run $(run_col held id): .*database is locked" "$LOG"
expect_eq "$(run_col held state)" running "held's run not finished yet"
unlock_db
wait_for 60 "held's run is finished once the database is free" settled held
# (its child may start only once the lock is held: opening the database
# takes no write lock, inventory_migrate)
expect_eq "$(sql "SELECT state || ifnull(': ' || reason, '') FROM schedule_run WHERE id = $(run_col held id)")" \
    ok "held's run, finished late, is ok"
checks=$((checks + 1))
! grep -q "no word from the daemon" "$XDG_STATE_HOME/gpufleet/runs/$(run_col held id).err" ||
	fail "held's exec lost the daemon while the database was locked"
kill -TERM "$dpid"
wait "$dpid"
# (the locked database was logged on purpose: keep it out of the checks below)
mv "$LOG" "$T/held.log"
mv "$T/daemon.err" "$T/held.err"

# --- "still going" is decided inside the claim's transaction -----------------
# A run of fg claimed (by a daemon, say) while schedule run is between its
# reads and its claim: schedule run refuses, nothing runs twice.
GPUFLEET_TEST_CLAIM_GATE=$T/gate "$GPUFLEET" schedule run fg >"$T/fg.out" 2>"$T/fg.err" &
cli=$!
wait_for 60 "schedule run reaches its claim" test -e "$T/gate"
sleep 300 &
holder=$!
sql "INSERT INTO schedule_run (schedule_id, occurrence, manual, state, started_at, runner_pid, runner_start) SELECT id, 1, 0, 'running', 1, $holder, $(awk '{ sub(/.*\) /, ""); print $20 }' /proc/$holder/stat) FROM schedule WHERE name = 'fg'"
rm -f "$T/gate"
wait "$cli"
rc=$?
err=$(cat "$T/fg.err")
expect_rc 2 "schedule run when a run was claimed meanwhile"
expect_match "$err" "fg: the previous run is still going \(run [0-9]+\)" "the refusal says why"
expect_eq "$(sql "SELECT count(*) FROM schedule_run r JOIN schedule s ON s.id = r.schedule_id WHERE s.name = 'fg' AND r.state = 'running'")" 1 \
    "one run of fg going, not two"
kill "$holder"
wait "$holder" 2>/dev/null
sql "DELETE FROM schedule_run WHERE occurrence = 1 AND schedule_id = (SELECT id FROM schedule WHERE name = 'fg')"

# --- a daemon killed between fork and the pid's record: the child does not act
start_daemon GPUFLEET_TEST_SPAWN_CRASH=1
add_schedule gate inst-1 exec 'echo g >> gate.txt'
wait_for 60 "the daemon dies as it starts gate's run" gone_or_zombie "$dpid"
wait "$dpid" 2>/dev/null
pause gate
gate_out=$XDG_STATE_HOME/gpufleet/runs/$(run_col gate id).out
holds_out() {
	local fd
	for fd in /proc/[0-9]*/fd/*; do
		[ "$(readlink "$fd" 2>/dev/null)" = "$gate_out" ] && return 0
	done
	return 1
}
expect_eq "$(run_col gate pid)" "" "gate's child was never recorded"
wait_for 60 "gate's child is gone" not holds_out
expect_eq "$(lines inst-1 gate.txt)" 0 "the unrecorded child did not run the command"
start_daemon
wait_for 60 "the restarted daemon settles gate's run" settled gate
expect_eq "$(run_col gate state)" abandoned "the run that never started is abandoned"
kill -TERM "$dpid"
wait "$dpid"

# --- SIGKILL in the middle of a scheduled rotation --------------------------
keys_before=$("$GPUFLEET" keys ls --json | jq length)
add_schedule rot inst-3 rotate-keys
# The child waits at the crash point (a gate file) until the daemon is
# stopped, so that no live parent sees it die.
start_daemon GPUFLEET_TEST_CRASH_AT=4 GPUFLEET_TEST_CRASH_GATE="$T/crash-gate"
wait_for 60 "rot's run started" has_pid rot
pause rot
wait_for 120 "rot's child reached step 4" test -e "$T/crash-gate"
kill -STOP "$dpid"
child=$(run_col rot pid)
rm -f "$T/crash-gate"
wait_for 60 "the rotation stops after step 4" gone_or_zombie "$child"
kill -9 "$dpid"
kill -CONT "$dpid" 2>/dev/null
wait "$dpid" 2>/dev/null
start_daemon
wait_for 60 "the restarted daemon settles rot's run" settled rot
expect_eq "$(run_col rot state)" abandoned "a dead runner with no result: abandoned"
expect_eq "$(run_col rot reason)" "the runner died before it gave a whole result" \
    "the reason"
expect_eq "$(runs_not_skipped rot)" 1 "rot not started again"
sleep 4 # a few test minutes: nothing may start again meanwhile
expect_eq "$(runs_not_skipped rot)" 1 "rot still not started again"
run keys status inst-3
expect_match "$out" "inst-3 .*step 4/7" "the rotation is left at step 4"
run keys rotate inst-3
expect_rc 0 "the rerun of keys rotate completes it"
expect_match "$out" "^inst-3: rotated to " "rerun result"
run keys status inst-3
expect_contains "$out" "done, step 7/7" "keys status after the rerun"
expect_eq "$("$GPUFLEET" keys ls --json | jq length)" $((keys_before + 1)) \
    "one new key: one rotation"
run exec inst-3 -- true
expect_rc 0 "inst-3 reachable with the rotated key"
kill -TERM "$dpid"
wait "$dpid"
expect_rc 0 "SIGTERM after the recoveries"

# --- --detach: back once the lock is held, the daemon in the background ---
run daemon --detach
expect_rc 0 "daemon --detach"
bg=$(printf '%s' "$out" | sed -n 's/^gpufleet daemon: started, pid \([0-9]*\), log .*/\1/p')
[ -z "$bg" ] || daemons+=("$bg")
expect_match "$out" "^gpufleet daemon: started, pid [0-9]+, log $LOG\$" "what --detach says"
expect_eq "$(readlink "/proc/$bg/fd/1") $(readlink "/proc/$bg/fd/2")" "/dev/null /dev/null" \
    "the detached daemon's stdout and stderr are /dev/null"
# A session of its own, which it does not lead (so it never gets a terminal).
sid=$(ps -o sid= -p "$bg" | tr -d ' ')
checks=$((checks + 1))
[ -n "$sid" ] && [ "$sid" != "$(ps -o sid= -p $$ | tr -d ' ')" ] && [ "$sid" != "$bg" ] ||
    fail "the detached daemon's session: $sid (daemon $bg, test $(ps -o sid= -p $$))"
second
expect_rc 2 "a second daemon while the detached one runs"
kill -TERM "$bg"
wait_for 60 "the detached daemon stops on SIGTERM" gone_or_zombie "$bg"

# --- -v: debug lines in the log ---------------------------------------------
DAEMON_ARGS=-v start_daemon
wait_for 60 "-v logs each poll" grep -q "poll [0-9]*: [0-9]* of [0-9]* instance(s) up" "$LOG"
kill -TERM "$dpid"
wait "$dpid"
rc=$? err=""
expect_rc 0 "SIGTERM of the -v daemon"
finish

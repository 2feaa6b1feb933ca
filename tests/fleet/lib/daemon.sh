# Helpers of the daemon tests (tests/fleet/daemon*.sh): a state dir, a
# config with a 1 s poll, the test clock, daemons that die with the test,
# schedules and their runs.
sql() { sqlite3 -cmd '.timeout 20000' "$db" "$@"; }

export XDG_STATE_HOME="$T/state"
LOG=$XDG_STATE_HOME/gpufleet/daemon.log
# A cron minute lasts 3 s from now on (SCHEDULE.md, "The test clock").
GPUFLEET_TEST_CRON_MINUTE=3@$(date +%s)
export GPUFLEET_TEST_CRON_MINUTE
mkdir -p "$XDG_CONFIG_HOME/gpufleet"
printf '[daemon]\npoll_interval = 1\nstop_grace = 2\n' \
    >"$XDG_CONFIG_HOME/gpufleet/config.ini"

# Every daemon started here, and every run child, dies with the test.
daemons=()
kill_all() {
	local p
	for p in "${daemons[@]}"; do kill -9 "$p" 2>/dev/null; done
	for p in $(sql "SELECT pid FROM schedule_run WHERE state = 'running' AND pid IS NOT NULL" 2>/dev/null); do
		kill -9 "$p" 2>/dev/null
	done
	return 0
}
cleanup_hooks=(kill_all "${cleanup_hooks[@]}")
# start_daemon [ENV=VALUE...]: a foreground daemon in the background (with
# $DAEMON_ARGS); dpid.
start_daemon() {
	env "$@" "$GPUFLEET" daemon --listen none ${DAEMON_ARGS:-} >>"$T/daemon.out" 2>>"$T/daemon.err" &
	dpid=$!
	daemons+=("$dpid")
	wait_for 60 "daemon $dpid starts" started "$dpid"
}
started() { grep -q "daemon started: pid $1," "$LOG" 2>/dev/null; }
# add_schedule NAME SELECTOR ACTION [COMMAND...]: every (test) minute, or
# at $CRON.
add_schedule() {
	local name=$1 sel=$2 action=$3
	shift 3
	"$GPUFLEET" schedule add "$sel" --cron "${CRON:-* * * * *}" --do "$action" \
	    --name "$name" ${1:+--} "$@" >"$T/add.out" 2>"$T/add.err" ||
	    fail "schedule add $name: $(cat "$T/add.err")"
}
runs() { sql "SELECT count(*) FROM schedule_run r JOIN schedule s ON s.id = r.schedule_id WHERE s.name = '$1'${2:+ AND r.state = '$2'}"; }
run_col() { sql "SELECT r.$2 FROM schedule_run r JOIN schedule s ON s.id = r.schedule_id WHERE s.name = '$1' ORDER BY r.id LIMIT 1"; }
pause() { sql "UPDATE schedule SET paused = 1 WHERE name = '$1'"; }
at_least() { [ "$("${@:2}")" -ge "$1" ]; }
not() { ! "$@"; }
settled() { [ "$(runs "$1" running)" = 0 ]; }
has_pid() { [ -n "$(run_col "$1" pid)" ]; }
pid_state() { awk '{ sub(/.*\) /, ""); print $1 }' "/proc/$1/stat" 2>/dev/null; }
gone_or_zombie() { local s; s=$(pid_state "$1"); [ -z "$s" ] || [ "$s" = Z ]; }
logins() { cat "$D"/groups/*/sshd.log "$D"/instances/*/sshd/sshd.log 2>/dev/null | grep -c "Accepted publickey"; }
lines() { local f; f=$(instance_dir "$1")/home/$2; [ -f "$f" ] && wc -l <"$f" || echo 0; }
polled() { sql "SELECT count(*) FROM sample_host"; }

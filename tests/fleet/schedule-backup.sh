#!/usr/bin/env bash
# A backup schedule pulls its paths home as `gpufleet pull` does, into
# LOCAL_DIR/NAME/: stored as a JSON array of pull's paths, run by
# `schedule run` and by the daemon (the test clock), only what changed
# the next time, a failed instance makes the run failed with its reason;
# bad paths are refused with nothing stored.
. "$(dirname "$0")/../e2e/lib.sh"
. "$(dirname "$0")/lib/watcher.sh"
. "$(dirname "$0")/lib/daemon.sh"
export GPUFLEET_NO_PROGRESS=1

fleet_up 2
home_of() { printf '%s/home' "$(instance_dir "$1")"; }
last() { # last NAME: the last run's state and its result per instance
	"$GPUFLEET" schedule ls --json |
	    jq -c --arg n "$1" '.[] | select(.name == $n) | [.last.state, .last.result]'
}
nsched() { sql "SELECT count(*) FROM schedule"; }
run status
expect_rc 0 "status pins the host keys"
for i in inst-1 inst-2; do
	mkdir -p "$(home_of $i)/ckpt/step 1"
	printf '%s\n' "$i" >"$(home_of $i)/ckpt/step 1/w é.bin"
	head -c 100000 /dev/urandom >"$(home_of $i)/ckpt/opt"
done

# --- bad input: one line, exit 2, nothing stored ----------------------------
n0=$(nsched)
run schedule add all --cron '@daily' --do backup -- '~/ckpt/' backups
expect_rc 2 "a relative LOCAL_DIR"
expect_eq "$err" "gpufleet: schedule: --do backup: LOCAL_DIR 'backups' must be an absolute path (try 'gpufleet schedule --help')" \
    "says LOCAL_DIR must be absolute"
run schedule add all --cron '@daily' --do backup -- "$T/b"
expect_rc 2 "no REMOTE_PATH"
expect_eq "$err" "gpufleet: schedule: --do backup needs -- REMOTE_PATH... LOCAL_DIR (try 'gpufleet schedule --help')" \
    "says what backup needs"
run schedule add all --cron '@daily' --do backup
expect_rc 2 "no paths at all"
run schedule add all --cron '@daily' --do backup --argv -- '~/ckpt/' "$T/b"
expect_rc 2 "--argv with backup"
expect_eq "$err" "gpufleet: schedule: --argv is for --do exec only (try 'gpufleet schedule --help')" \
    "--argv is refused"
expect_eq "$(nsched)" "$n0" "no schedule stored by the refused adds"

# --- schedule run: the paths come home to LOCAL_DIR/NAME/ -------------------
run schedule add 'inst-1,inst-2' --cron '@yearly' --do backup --name nightly -- \
    '~/ckpt/' "$T/backups"
expect_rc 0 "add a backup schedule"
expect_eq "$(sql "SELECT action, command FROM schedule WHERE name = 'nightly'")" \
    "backup|[\"~/ckpt/\",\"$T/backups\"]" "stored as pull's paths"
expect_eq "$("$GPUFLEET" schedule ls --json | jq -c '.[] | select(.name == "nightly") | .command')" \
    "[\"~/ckpt/\",\"$T/backups\"]" "ls --json shows the paths"
run schedule run nightly
expect_rc 0 "run the backup schedule"
for i in inst-1 inst-2; do
	expect_eq "$(cat "$T/backups/$i/step 1/w é.bin" 2>&1)" "$i" "$i's file came home"
	expect_eq "$(sha256sum <"$T/backups/$i/opt")" "$(sha256sum <"$(home_of $i)/ckpt/opt")" \
	    "$i's 100000 bytes, same checksum"
done
expect_eq "$(last nightly)" '["ok",{"inst-1":"ok","inst-2":"ok"}]' "recorded ok per instance"
# The child's output is pull --json: 2 files a host; bytes 7 ("inst-N\n")
# + 100000.
outf=$(sql "SELECT output FROM schedule_run r JOIN schedule s ON s.id = r.schedule_id WHERE s.name = 'nightly'")
expect_eq "$(jq -c '[.instances[] | [.name, .files, .bytes]]' "$outf")" \
    '[["inst-1",2,100007],["inst-2",2,100007]]' "the run's output is pull's JSON"

# --- the daemon runs it; the second time only what changed ------------------
printf 'more\n' >"$(home_of inst-1)/ckpt/new"
start_daemon
add_schedule tick inst-1 backup '~/ckpt/' "$T/backups"
wait_for 60 "a run of tick ended ok" at_least 1 runs tick ok
pause tick
wait_for 60 "no run of tick still going" settled tick
expect_eq "$(cat "$T/backups/inst-1/new" 2>&1)" more "the daemon's backup fetched the new file"
outf=$(run_col tick output)
# Only ckpt/new (5 bytes) changed since nightly's run.
expect_eq "$(jq -c '[.instances[] | [.name, .result, .files, .bytes]]' "$outf")" \
    '[["inst-1","ok",1,5]]' "only what changed was fetched"
kill_all

# --- a failed instance: the run fails with its reason ------------------------
fleet break inst-2 hostkey >/dev/null
run schedule run nightly
expect_rc 1 "a backup run with a changed host key on inst-2"
expect_eq "$(last nightly)" \
    '["failed",{"inst-1":"ok","inst-2":"Host key verification failed."}]' \
    "inst-2's reason is recorded, inst-1 still ok"

finish

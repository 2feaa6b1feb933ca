#!/usr/bin/env bash
# `run --then stop` killed (SIGKILL) once the agent has started the job:
# run:1, before gpufleet recorded it; run:2, after. The job goes on, `jobs`
# finds it (from the agent) and shows it running, and when it ends the
# instance stops as asked: the kill of the CLI loses neither the job nor
# its stop. (jobs-then.sh: a SIGKILLed watcher. A stopped instance's jobs
# show as last seen, marked, whatever killed what.)
. "$(dirname "$0")/../e2e/lib.sh"
. "$(dirname "$0")/lib/watcher.sh"
export GPUFLEET_NO_PROGRESS=1

fleet_up 2 --group-size 1
for n in 1 2; do
	run set "inst-$n" 'stop_command=remote:shutdown -h now'
	expect_rc 0 "a stop method for inst-$n"
done

# jobs_of NAME: NAME's jobs as `jobs --json` has them: "NAME STATE" lines.
jobs_of() {
	"$GPUFLEET" jobs "$1" --all --json 2>/dev/null |
	    jq -r '.[] | "\(.name) \(.state)"'
}
job_is() { [ "$(jobs_of "$1")" = "$2" ]; }

n=0
for point in run:1 run:2; do
	n=$((n + 1))
	inst=inst-$n
	home=$(instance_dir $inst)/home
	(GPUFLEET_TEST_CRASH_AT=$point "$GPUFLEET" run $inst --then stop --name held -- \
	    'while [ ! -e ~/go ]; do sleep 0.2; done' >"$T/out" 2>"$T/err") 2>/dev/null
	rc=$?
	expect_rc 137 "run --then stop: SIGKILL at $point"
	wait_for 60 "$point: jobs finds the job running" job_is $inst "held running"
	expect_eq "$(fstate $inst)" ok "$point: $inst is up while the job runs"
	touch "$home/go"
	wait_for 60 "$point: the job ends, then $inst stops" is_state $inst stopped ||
	    show_journal $inst
	expect_eq "$(sqlite3 "$db" 'PRAGMA integrity_check')" ok "$point: integrity_check"
done

finish

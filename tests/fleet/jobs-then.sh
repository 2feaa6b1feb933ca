#!/usr/bin/env bash
# gpufleet run --then on the sandbox fleet: the watcher stops the instance
# (the fake platform's stop) after a job that succeeded and after one that
# failed; stop-if-ok only after success (after a failure the instance
# stays up and events says why); a local: stop method runs here on the
# next contact; the plan carries the stop method, written only when it
# must be; a SIGKILLed watcher loses no job: the job goes on and the
# restarted watcher journals its end once.
. "$(dirname "$0")/../e2e/lib.sh"
. "$(dirname "$0")/lib/watcher.sh"

fleet_up 4 --group-size 1
for n in 1 2 3 4; do
	run set "inst-$n" 'stop_command=remote:shutdown -h now'
done
run set inst-4 "stop_command=local:bash '$GPUFLEET_HARNESS' -d '$D' stop inst-4"
expect_rc 0 "a local stop method for inst-4"

# started_job: the job number in `run --json` output ($out).
started_job() { printf '%s' "$out" | jq -r '.[0].job'; }
fire_of() { printf '%s' "$out" | jq -r '.[0].fire_id'; }

# --- arm everything first: the watchers work in parallel --------------------
run run inst-1 --then stop --json -- true
expect_rc 0 "run --then stop, a job that succeeds"
f1=$(fire_of)
expect_eq "$(jq -c .stop "$(rdir inst-1)/plan.json")" \
    '{"command":"shutdown -h now","kind":"stop","allow_release":false}' \
    "run wrote the stop method into the plan"
run run inst-2 --then stop --json -- 'exit 3'
expect_rc 0 "run --then stop, a job that fails"
f2=$(fire_of)
run run inst-3 --then stop-if-ok --json -- 'echo nope; exit 1'
expect_rc 0 "run --then stop-if-ok, a job that fails"
j3=$(started_job)
f3=$(fire_of)
run run inst-4 --then stop --json -- true
expect_rc 0 "run --then stop with a local method"
expect_eq "$(printf '%s' "$out" | jq -r '.[0].local_stop')" true \
    "--json says the stop runs here"
f4=$(fire_of)

# --- --then stop: after success and after failure ------------------------------
wait_for 60 "inst-1 stopped after its job succeeded" is_state inst-1 stopped ||
    show_journal inst-1
wait_for 60 "inst-2 stopped after its job failed" is_state inst-2 stopped ||
    show_journal inst-2
expect_eq "$(jcount inst-1 firing ".id == \"$f1\" and .reason == \"job\"")" 1 \
    "inst-1: one firing, reason job"
expect_eq "$(journal inst-2 "select(.event == \"firing\" and .id == \"$f2\") | .evidence | [.state, .exit]" )" \
    '["failed",3]' "inst-2: the firing's evidence is the job's end"

# --- stop-if-ok after a failure: the instance stays up, events says why ------
wait_for 60 "inst-3's stop skipped" has_event inst-3 skipped ".id == \"$f3\"" ||
    show_journal inst-3
expect_eq "$(journal inst-3 "select(.event == \"skipped\" and .id == \"$f3\") | .reason")" \
    '"job failed: exit 1"' "skipped says why"
sleep 2 # many watcher turns: a wrong stop would have started
expect_eq "$(fstate inst-3)" ok "inst-3 stays up"
expect_eq "$(calls inst-3 shutdown)" 0 "no stop ran on inst-3"
run status inst-3
run events inst-3
expect_contains "$out" "no stop after job $j3: job failed: exit 1" \
    "events: why the box stayed up"
expect_contains "$out" "job $j3 (echo) failed, exit 1" \
    "events: the job's end in words (named after the line's first word)"

# --- a local: method runs here once the job's end is read ----------------------
wait_for 60 "inst-4's stop is due here" has_event inst-4 local_due ".id == \"$f4\"" ||
    show_journal inst-4
expect_eq "$(fstate inst-4)" ok "inst-4 waits for this machine"
run status inst-4
wait_for 60 "inst-4 stopped by its local method" is_state inst-4 stopped

# --- stop-if-ok after success; the plan is written only when it must be -------
gen=$(jq .generation "$(rdir inst-3)/plan.json")
run run inst-3 --then stop-if-ok --json -- true
expect_rc 0 "run --then stop-if-ok, a job that succeeds"
expect_eq "$(jq .generation "$(rdir inst-3)/plan.json")" "$gen" \
    "the plan had the stop method: not written again"
wait_for 60 "inst-3 stopped after success" is_state inst-3 stopped ||
    show_journal inst-3

# --- the controller's record once the instances are back ----------------------
fleet start inst-1
fleet start inst-2
run jobs inst-1,inst-2 --all --json
expect_rc 0 "jobs after the stops"
expect_eq "$(printf '%s' "$out" | jq -c '[.[] | [.instance, .state, .exit, .then]] | sort')" \
    '[["inst-1","succeeded",0,"stop"],["inst-2","failed",3,"stop"]]' \
    "jobs: the ended jobs and their --then"
run events inst-1
expect_contains "$out" "stopping the instance: job 1 succeeded, exit 0" \
    "events: the stop after the job, in words"

# --- a SIGKILLed watcher: the job goes on, its end is journaled once ---------
run run inst-1 --json -- 'sleep 3; echo done'
expect_rc 0 "a job on inst-1"
j5=$(started_job)
f5=$(fire_of)
w=$(watcher_pid inst-1)
expect_match "$w" '^[0-9]+$' "a watcher runs with the job"
kill -KILL "$w"
wait_for 10 "the watcher is dead" eval "! alive $w"
wait_for 60 "the job ended without its watcher" \
    test -s "$(rdir inst-1)/jobs/$j5/status"
expect_eq "$(jcount inst-1 job_ended ".fire_id == \"$f5\"")" 0 \
    "nobody journaled the end yet"
run status inst-1 --json
expect_eq "$(printf '%s' "$out" | jq -r '.[0].watcher.state')" started \
    "the next contact starts the watcher again"
wait_for 60 "the new watcher journals the end" has_event inst-1 job_ended \
    ".fire_id == \"$f5\""
run status inst-1
sleep 2
run status inst-1
expect_eq "$(jcount inst-1 job_ended ".fire_id == \"$f5\"")" 1 "journaled once"
expect_eq "$(jcount inst-1 job_started ".fire_id == \"$f5\"")" 1 "its start once too"
expect_eq "$(sql "SELECT state || ' ' || exit || ' ' || last_line FROM job WHERE fire_id = '$f5'")" \
    "succeeded 0 done" "the journal's end stored by the contact"

finish

#!/usr/bin/env bash
# rm on the sandbox fleet: an instance gpufleet saw running, with a job it
# started and a deadline it armed, is refused (exit 2, one line naming what
# to run, nothing removed); each reason goes when the user deals with it
# (kill, shutdown cancel, mark stopped); then rm goes through, and restore
# brings the instance back with its job history: the next status contacts
# it as before.
. "$(dirname "$0")/../e2e/lib.sh"
. "$(dirname "$0")/lib/watcher.sh"

fleet_up 1
run set inst-1 'stop_command=remote:shutdown -h now'
run status inst-1
expect_rc 0 "first contact: its ledger says running"
run run inst-1 --name train -- 'sleep 600'
expect_rc 0 "a job"
run shutdown inst-1 --in 2h --warn 0 --json
expect_rc 0 "a deadline"
id=$(deadline_id)

run rm inst-1
expect_rc 2 "rm of a running instance with a job and a deadline"
expect_match "$err" "^gpufleet: inst-1 may still be billing \(its ledger says running since [0-9T:-]+Z\): stop it first \(gpufleet shutdown inst-1 --now\), or mark it \(gpufleet mark inst-1 stopped\); it has 1 running job \(inst-1:1 train\): let it end or kill it \(gpufleet jobs inst-1; gpufleet kill inst-1:1\); it has 1 deadline armed \($id\): cancel it \(gpufleet shutdown cancel inst-1\); or rm --force$" \
    "why, each with what to run"
expect_one_error_line "one line"
run ls inst-1
expect_rc 0 "inst-1 still in service"

run kill inst-1:1 --grace 5s
expect_rc 0 "kill the job"
run jobs inst-1
expect_rc 0 "jobs stores that it ended (as rm says to run)"
run shutdown cancel inst-1
expect_rc 0 "cancel the deadline"
run rm inst-1
expect_rc 2 "still running on the platform"
expect_match "$err" "^gpufleet: inst-1 may still be billing \(its ledger says running since [0-9T:-]+Z\): stop it first \(gpufleet shutdown inst-1 --now\), or mark it \(gpufleet mark inst-1 stopped\); or rm --force$" \
    "only the billing is left"

# Stopped on the platform's console, the status above a second before: a
# stop stated at the second of an answer would not count (still billing?).
sleep 1
run mark inst-1 stopped
run rm inst-1
expect_rc 0 "rm once stopped, no job, nothing armed"
expect_contains "$out" "inst-1: removed from gpufleet (the platform's machine is not touched" \
    "rm says what it does"
run jobs --all
expect_eq "$out" "" "jobs forgets a removed instance"

run restore inst-1
expect_rc 0 "restore"
run jobs inst-1 --all --json
expect_eq "$(printf '%s' "$out" | jq -r '.[0].state')" killed "its job history is back"
run status inst-1 --all
expect_rc 0 "status --all contacts the restored (stopped) instance"
expect_match "$out" $'\ninst-1 +up ' "it answers, logged in with what it had"
finish

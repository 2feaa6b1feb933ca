#!/usr/bin/env bash
# exec is a contact too: after the command, on the sessions it held, the
# instances with a watcher's plan are polled, so what their watchers
# journaled since the last contact reaches `events`; an instance without a
# plan costs nothing more than its command.
. "$(dirname "$0")/../e2e/lib.sh"
. "$(dirname "$0")/lib/watcher.sh"

fleet_up 2
run set inst-1 'stop_command=remote:shutdown -h now'
expect_rc 0 "a stop method"
run status
expect_rc 0 "first contact"

# A deadline far ahead: `shutdown` reads the journal before it writes the
# plan, so the entries the watcher writes when the new plan loads (started,
# plan, armed) are on the instance only.
run shutdown inst-1 --in 1h --warn 0 --json
expect_rc 0 "shutdown inst-1 --in 1h"
id=$(deadline_id)
wait_for 30 "the watcher armed $id" has_event inst-1 armed ".id == \"$id\""
expect_eq "$(sql "SELECT count(*) FROM journal WHERE event = 'armed' AND id = '$id'")" 0 \
    "armed is not stored before a contact"
samples2=$(sql "SELECT count(*) FROM sample_host WHERE instance_id = (SELECT id FROM instance WHERE name = 'inst-2')")

run exec all -- echo hello
expect_rc 0 "exec on both"
expect_contains "$out" "inst-1: hello" "the command's output"
expect_contains "$out" "inst-2: hello" "the command's output (2)"
expect_eq "$(sql "SELECT count(*) FROM journal WHERE event = 'armed' AND id = '$id'")" 1 \
    "exec stored the journal entry once"
run events inst-1
expect_match "$out" "armed +$id" "events shows what the watcher did"
expect_eq "$(sql "SELECT count(*) FROM sample_host WHERE instance_id = (SELECT id FROM instance WHERE name = 'inst-2')")" \
    "$samples2" "inst-2 has no plan: exec polled nothing there"

# A second exec stores nothing twice.
run exec inst-1 -- true
expect_rc 0 "exec again"
expect_eq "$(sql "SELECT count(*) FROM journal WHERE event = 'armed' AND id = '$id'")" 1 \
    "each entry once"

run shutdown cancel "$id"
expect_rc 0 "cancel"
finish

#!/usr/bin/env bash
# The ledger can be inspected and corrected: rm and amend by global id,
# each recorded in events, with the old --delete/--move as aliases.
. "$(dirname "$0")/lib.sh"
db=$XDG_DATA_HOME/gpufleet/fleet.db
export TZ=UTC
dump() { sqlite3 "$db" .dump; }

run add l1 10.0.0.9 --price 1/h
expect_rc 0 "add l1"
run mark l1 running --at '2026-12-01 10:00'
expect_rc 0 "mark running"
# A report-derived entry that cannot be right: a container start 1999.
sqlite3 "$db" "INSERT INTO ledger (instance_id, t, state, source, note)
    SELECT id, 915148800, 'running', 'observed', 'first seen running'
    FROM instance WHERE name = 'l1'"
bad=$(sqlite3 "$db" "SELECT id FROM ledger WHERE t = 915148800")
good=$(sqlite3 "$db" "SELECT id FROM ledger WHERE source = 'stated'")

run ledger l1
expect_rc 0 "ledger l1"
expect_contains "$out" "$bad   1999-01-01T00:00:00Z  running  observed  first seen running" \
    "ledger lists the impossible start"

before=$(dump)
run ledger rm 999999
expect_rc 2 "rm of no entry"
expect_eq "$err" "gpufleet: there is no ledger entry 999999" "rm of no entry"
expect_eq "$(dump)" "$before" "a refused rm changes nothing"
run ledger amend "$good"
expect_rc 2 "amend without --at"
run ledger amend "$good" --at 2030-01-01
expect_rc 2 "amend into the future"
expect_eq "$err" "gpufleet: time 2030-01-01T00:00:00Z is in the future" \
    "amend into the future refused"
expect_eq "$(dump)" "$before" "a refused amend changes nothing"

run ledger rm "$bad"
expect_rc 0 "rm the impossible start"
expect_eq "$out" "l1: ledger entry $bad deleted" "rm output"
expect_eq "$(sqlite3 "$db" "SELECT count(*) FROM ledger WHERE id = $bad")" 0 \
    "the row is gone"
run ledger amend "$good" --at '2026-12-01 09:00'
expect_rc 0 "amend"
expect_eq "$out" "l1: ledger entry $good moved to 2026-12-01T09:00:00Z" \
    "amend output"
expect_eq "$(sqlite3 "$db" "SELECT t FROM ledger WHERE id = $good")" \
    1796115600 "the row moved (2026-12-01 09:00 UTC = 1796115600)"

run events --json
expect_rc 0 "events"
expect_contains "$out" "entry $bad (running at 1999-01-01T00:00:00Z, observed) removed" \
    "events records the rm"
expect_contains "$out" "entry $good (running, stated) moved from 2026-12-01T10:00:00Z to 2026-12-01T09:00:00Z" \
    "events records the amend"

# The aliases, scoped to NAME.
run add l2 10.0.0.8
run ledger l2 --delete "$good"
expect_rc 2 "--delete of another instance's entry"
expect_eq "$err" "gpufleet: this instance has no ledger entry $good" \
    "--delete is scoped to NAME"
run ledger l1 --move "$good" --at '2026-12-01 08:00'
expect_rc 0 "--move alias"
expect_eq "$out" "l1: ledger entry $good moved to 2026-12-01T08:00:00Z" \
    "--move output"
finish

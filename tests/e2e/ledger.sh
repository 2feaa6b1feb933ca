#!/usr/bin/env bash
# The ledger can be inspected and corrected: rm and amend by global id,
# each recorded in events, with the old --delete/--move as aliases; times
# stated with mark or amend are checked against now and when the instance
# was added.
. "$(dirname "$0")/lib.sh"
db=$XDG_DATA_HOME/gpufleet/fleet.db
export TZ=UTC
dump() { sqlite3 "$db" .dump; }

run add l1 10.0.0.9 --price 1/h
expect_rc 0 "add l1"
backdate l1 2026-12-01T10:00:00Z
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

# mark --at and amend --at: not after now, nor more than 7 days
# (LEDGER_BACKDATE_MAX) before the instance was added. Added 2026-11-20
# 00:00 UTC, the earliest is 2026-11-13 00:00.
run add m1 10.0.0.7 --price 1/h
backdate m1 2026-11-20T00:00:00Z
before=$(dump)
run mark m1 running --at 1999-01-01
expect_rc 2 "mark in 1999"
expect_eq "$err" "gpufleet: time 1999-01-01T00:00:00Z is more than 7 days before the instance was added (earliest 2026-11-13T00:00:00Z)" \
    "mark in 1999 refused"
run mark m1 running --at 2026-11-12T23:59:59Z
expect_rc 2 "mark a second before the margin"
expect_eq "$err" "gpufleet: time 2026-11-12T23:59:59Z is more than 7 days before the instance was added (earliest 2026-11-13T00:00:00Z)" \
    "a second before the margin refused"
run mark m1 stopped --at 2030-01-01
expect_rc 2 "mark in 2030"
expect_eq "$err" "gpufleet: time 2030-01-01T00:00:00Z is in the future" \
    "mark in 2030 refused"
expect_eq "$(dump)" "$before" "refused marks change nothing"
run mark m1 running --at 2026-11-13T00:00:00Z
expect_rc 0 "mark at the margin itself"
expect_eq "$out" "m1: running since 2026-11-13T00:00:00Z" "mark at the margin"
m=$(sqlite3 "$db" "SELECT l.id FROM ledger l JOIN instance i ON
    i.id = l.instance_id WHERE i.name = 'm1'")
before=$(dump)
run ledger amend "$m" --at 2026-11-12T23:59:59Z
expect_rc 2 "amend before the margin"
expect_eq "$err" "gpufleet: time 2026-11-12T23:59:59Z is more than 7 days before the instance was added (earliest 2026-11-13T00:00:00Z)" \
    "amend before the margin refused"
expect_eq "$(dump)" "$before" "a refused amend changes nothing"

# --- add --since: a rental that began before gpufleet knew it ---------------
run add s1 10.0.0.10 --since '-30d'
expect_rc 0 "add --since 30 days ago"
run mark s1 running --at '-35d'
expect_rc 0 "mark --at may go back to since (and 7 days before it)"
run mark s1 running --at '-40d'
expect_rc 2 "not further"
expect_match "$err" "is more than 7 days before the instance was added \(earliest " \
    "the refusal names the earliest time"
run set s1 since=
expect_rc 0 "since= clears it"
expect_match "$out" "^since: .* -> \(when added\)" "set says what changed"
run mark s1 running --at '-20d'
expect_rc 2 "without since, 7 days before it was added"
run set s1 since=-500d
expect_rc 2 "since more than a year back is refused"
expect_eq "$err" "gpufleet: since '-500d' must be in the last 366 days, not in the future" \
    "since out of range: one line"
run set s1 since=-2d
run show s1 --json
expect_match "$out" '"since": "[0-9T:-]+Z"' "show --json has since"
finish

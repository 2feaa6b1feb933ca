#!/usr/bin/env bash
# The stopped state: status shows an instance the ledger says is stopped
# without contacting it (unless --all) and exits 0 for it; one that
# answered since it was stopped is flagged by status, cost and advise;
# selectors state:running, state:stopped and state:unknown.
. "$(dirname "$0")/lib.sh"
db=$XDG_DATA_HOME/gpufleet/fleet.db
export TZ=UTC
sql() { sqlite3 "$db" "$@"; }
names() { printf '%s\n' "$out" | awk 'NR > 1 { print $1 }' | tr '\n' ' '; }

# Nothing listens on 127.0.0.1:1: a contact fails at once.
run add s1 127.0.0.1 --port 1 --price 2/h
backdate s1 2026-12-01T00:00:00Z
run mark s1 running --at 2026-12-01T00:00:00Z
run mark s1 stopped --at 2026-12-01T02:00:00Z
expect_rc 0 "mark s1 stopped"
run add r1 127.0.0.1 --port 1 # an empty ledger: unknown
run add m1 127.0.0.2 --port 1
run mark m1 running
run add u1 127.0.0.3 --port 1
sql "INSERT INTO ledger (instance_id, t, state, source, note)
    SELECT id, 1796083200, 'unknown', 'observed', 'unreachable'
    FROM instance WHERE name = 'u1'"
s1=$(sql "SELECT id FROM instance WHERE name = 's1'")

# --- selectors --------------------------------------------------------------
run ls state:stopped
expect_rc 0 "ls state:stopped"
expect_eq "$(names)" "s1 " "state:stopped"
run ls state:running
expect_eq "$(names)" "m1 " "state:running"
run ls state:unknown
expect_eq "$(names)" "r1 u1 " "state:unknown: no entry, or unknown last"
run ls '!state:unknown'
expect_eq "$(names)" "m1 s1 " "!state:unknown"
run ls state:released
expect_rc 2 "state:released is no selector"
expect_eq "$err" "gpufleet: selector 'state:released': state 'released' is not running, stopped or unknown" \
    "state:released refused"

# --- status: stopped is not contacted, and is no failure -------------------
run status s1
expect_rc 0 "status of a stopped instance"
expect_match "$out" "^NAME +STATE " "status header"
expect_match "$out" $'\n''s1 +stopped \(since 2026-12-01T02:00:00Z\) +- +- ' \
    "stopped (since T)"
expect_eq "$(sql "SELECT count(*) FROM last_status WHERE instance_id = $s1")" 0 \
    "s1 was not contacted: nothing stored"
run status s1 --json
expect_eq "$(printf '%s' "$out" | jq -c '.[0] | [.state, .checked_at, .ledger_state, .ledger_since, .still_billing, .report]')" \
    '["stopped",null,"stopped","2026-12-01T02:00:00Z",false,null]' \
    "status --json of a stopped instance"
run status 's1,r1'
expect_rc 1 "r1 (not stopped) fails to answer"
run status s1 --all
expect_rc 0 "status --all: a stopped instance that does not answer is no failure"
expect_match "$out" $'\n''s1 +stopped \(since 2026-12-01T02:00:00Z\), [a-z ]+: ' \
    "--all: stopped, and why it did not answer"
expect_eq "$(sql "SELECT count(*) FROM last_status WHERE instance_id = $s1")" 1 \
    "--all contacted s1"

# --- answering while stopped: still billing? --------------------------------
# A pass that saw s1 up a second before it stopped (02:00 = 1796090400).
sql "UPDATE last_status SET state = 'up', t = 1796090399 WHERE instance_id = $s1"
run cost s1 --since 2026-12-01T00:00:00Z --until 2026-12-02T00:00:00Z
expect_eq "$(printf '%s\n' "$out" | grep -c 'still billing')" 0 \
    "up before the stop: no flag"
# Seen up at 03:00, an hour after the stop (2026-12-01T03:00Z = 1796094000).
sql "UPDATE last_status SET t = 1796094000 WHERE instance_id = $s1"
run cost s1 --since 2026-12-01T00:00:00Z --until 2026-12-02T00:00:00Z
expect_rc 0 "cost s1"
# 2 h running at 2/h = 4.00; stopped costs nothing without a stopped_price.
expect_contains "$out" "total 4.00 CNY" "cost: the ledger's run"
expect_contains "$out" "s1: marked stopped but reachable: still billing? (costed as stopped)" \
    "cost flags it"
run cost s1 --json --since 2026-12-01T00:00:00Z --until 2026-12-02T00:00:00Z
expect_eq "$(printf '%s' "$out" | jq -c '.instances[0] | [.name, .still_billing]')" \
    '["s1",true]' "cost --json flags it"
run advise s1
expect_contains "$out" "s1: marked stopped but reachable: still billing? (stopped since 2026-12-01T02:00:00Z, it answered status since): stop it, or gpufleet mark s1 running" \
    "advise flags it"
run status s1
expect_rc 0 "status s1 (not contacted)"
expect_contains "$out" "s1  marked stopped but reachable: still billing? (the ledger says stopped since 2026-12-01T02:00:00Z)" \
    "status flags it from the last pass that asked"
run status s1 --json
expect_eq "$(printf '%s' "$out" | jq -c '.[0].still_billing')" true \
    "status --json flags it"
# Said to run again: the flag goes.
run mark s1 running
run advise s1
expect_eq "$(printf '%s\n' "$out" | grep -c 'still billing')" 0 \
    "running again: no flag"
finish

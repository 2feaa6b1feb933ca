#!/usr/bin/env bash
# Price history: `set NAME price=... [--from TIME]` keeps the earlier price
# for time before the change; a run over a change is charged piecewise;
# `set` says what it changed (--json too); `show` lists the pricing fields
# and the history; prices stored before the history are valid from when the
# instance was added; bad --from values are refused with the DB unchanged.
. "$(dirname "$0")/lib.sh"
db=$XDG_DATA_HOME/gpufleet/fleet.db
export TZ=UTC
dump() { sqlite3 "$db" .dump; }
iso() { date -u -d "@$1" +%Y-%m-%dT%H:%M:%SZ; }
# age NAME SECS: NAME was added, and its prices set, SECS earlier, so that
# a change from now is not in the second of an earlier one (which it would
# replace).
age() {
	sqlite3 "$db" "UPDATE instance SET created_at = created_at - $2
	    WHERE name = '$1'"
	sqlite3 "$db" "UPDATE instance_price SET valid_from = valid_from - $2
	    WHERE instance_id = (SELECT id FROM instance WHERE name = '$1')"
}
added_hour_ago() { age "$1" 3600; }
history() {
	sqlite3 "$db" "SELECT p.valid_from, p.price, p.price_per, p.unit,
	    p.stopped_per_day, p.currency FROM instance_price p
	    JOIN instance i ON i.id = p.instance_id
	    WHERE i.name = '$1' ORDER BY p.valid_from"
}
total() { printf '%s\n' "$out" | sed -n 's/^.*total \([0-9.]* [A-Z]*\).*$/\1/p' | head -1; }

# B: an hour boundary two days ago, inside the 7 days a ledger entry may
# be back-dated before an instance was added (times given absolute, so
# that run lengths are exact).
now=$(date +%s)
B=$(((now - 2 * 86400) / 3600 * 3600))

# --- the issue's example: a past run keeps its amount -----------------------
run add g1 10.0.0.1 --price 4.98/h
expect_rc 0 "add g1"
added_hour_ago g1
created=$(sqlite3 "$db" "SELECT created_at FROM instance WHERE name = 'g1'")
run mark g1 running --at "$(iso $B)"
run mark g1 stopped --at "$(iso $((B + 6665)))"
W="--since $(iso $((B - 3600))) --until $(iso $((B + 86400)))"
# 4.98 * 6665 s / 3600 = 9.2199 -> 92200 minor: 9.22. (The issue's "1h51m"
# was some seconds over: 6660 s would be 9.213 -> 9.21.)
run cost g1 $W
expect_rc 0 "cost g1"
expect_eq "$(total)" "9.22 CNY" "the run at 4.98/h"
run set g1 price=2.28/h
expect_rc 0 "set g1 price=2.28/h"
# g1 had one price, from when it was added; the new one is from now.
expect_match "$out" '^price: 4\.98/h -> 2\.28/h from [0-9-]+T[0-9:]+Z$' \
    "set says the price changed, from when"
expect_eq "$(printf '%s\n' "$out" | wc -l)" 1 "one line: only the price changed"
expect_eq "$(history g1 | cut -d'|' -f1 | head -1)" "$created" \
    "the first price is valid from when g1 was added"
expect_eq "$(history g1 | cut -d'|' -f2 | tr '\n' ' ')" "49800 22800 " \
    "both prices kept"
# Before the history this run became 2.28 * 6665 / 3600 = 4.2212 -> 4.22.
run cost g1 $W
expect_eq "$(total)" "9.22 CNY" "the past run keeps its 9.22"

# --- a run over a change, per hour ------------------------------------------
# h1 per hour at 2.69, running B .. B+2h10m: three hours, 3 * 2.69 = 8.07.
run add h1 10.0.0.2 --price 2.69/h --billing hour
added_hour_ago h1
run mark h1 running --at "$(iso $B)"
run mark h1 stopped --at "$(iso $((B + 7800)))"
run cost h1 $W
expect_eq "$(total)" "8.07 CNY" "three hours at 2.69"
before=$(dump)
# A change from B+1h30m: the hours starting B and B+1h are at 2.69, the
# one starting B+2h at 2.28: 2 * 2.69 + 2.28 = 7.66.
run set h1 price=2.28/h --from "$(iso $((B + 5400)))"
expect_rc 0 "set --from"
expect_eq "$out" "price: 2.69/h -> 2.28/h from $(iso $((B + 5400)))" \
    "set --from says from when"
expect_eq "$err" "" "no later price: no warning"
# The change is before h1 was added: its first price (2.69, in force before
# its time too) now holds from 7 days before h1 was added until the change.
h1_created=$(sqlite3 "$db" "SELECT created_at FROM instance WHERE name = 'h1'")
expect_eq "$(history h1 | cut -d'|' -f1,2 | tr '\n' ' ')" \
    "$((h1_created - 604800))|26900 $((B + 5400))|22800 " \
    "the first price moved back, the change from B+1h30m"
run cost h1 $W
expect_eq "$(total)" "7.66 CNY" "piecewise: each hour at the price when it starts"
# Windows cut at the change: by B+1h30m two hours have started (5.38),
# after it the third (2.28); 5.38 + 2.28 = 7.66.
run cost h1 --since "$(iso $((B - 3600)))" --until "$(iso $((B + 5400)))"
expect_eq "$(total)" "5.38 CNY" "window up to the change"
run cost h1 --since "$(iso $((B + 5400)))" --until "$(iso $((B + 86400)))"
expect_eq "$(total)" "2.28 CNY" "window after the change"
# An earlier change at B+1h: it applies to the price in force then (2.69),
# and the later one (2.28 from B+1h30m) stays: 2.69 + 3.00 + 2.28 = 7.97.
run set h1 price=3/h --from "$(iso $((B + 3600)))"
expect_rc 0 "set --from before a later change"
expect_eq "$out" "price: 2.69/h -> 3.00/h from $(iso $((B + 3600)))" \
    "the earlier change is against the price then"
expect_eq "$err" "gpufleet: warning: h1: the later price from $(iso $((B + 5400))) stays in force from then" \
    "set warns that a later price stays"
run cost h1 $W
expect_eq "$(total)" "7.97 CNY" "three prices in one run"

# --- show: pricing fields and the history -------------------------------------
run show h1
expect_rc 0 "show h1"
expect_eq "$(printf '%s\n' "$out" | sed -n '/^price:/,$p')" \
"price:                2.28/h
currency:             CNY
billing:              hour
min_billed:           none
stopped_price:        none
monthly_price:        none
egress_price:         none
price_history:        3 prices, oldest first
  $(iso $((h1_created - 604800))) price=2.69/h billing=hour min_billed=none stopped_price=none monthly_price=none egress_price=none
  $(iso $((B + 3600))) price=3.00/h billing=hour min_billed=none stopped_price=none monthly_price=none egress_price=none
  $(iso $((B + 5400))) price=2.28/h billing=hour min_billed=none stopped_price=none monthly_price=none egress_price=none" \
    "show: pricing and history, oldest first"
expect_contains "$out" "price_from:           set by hand" "show: where the price came from"
run show h1 --json
expect_eq "$(printf '%s' "$out" | jq -c '.pricing | [.price, .price_minor, .billing, .currency, .minor_per_unit]')" \
    '["2.28/h",22800,"hour","CNY",10000]' "show --json: pricing"
expect_eq "$(printf '%s' "$out" | jq -c '[.price_history[] | [.from_unix, .price_minor]]')" \
    "[[$((h1_created - 604800)),26900],[$((B + 3600)),30000],[$((B + 5400)),22800]]" \
    "show --json: the history"
# Unpriced: no price, the defaults, no history.
run add u1 10.0.0.3
added_hour_ago u1
run show u1
expect_eq "$(printf '%s\n' "$out" | sed -n 's/^price: *//p;s/^price_history: *//p' | tr '\n' ' ')" \
    "(no price) (none) " "show: an unpriced instance"
run show u1 --json
expect_eq "$(printf '%s' "$out" | jq -c '[.pricing, .price_history]')" '[null,[]]' \
    "show --json: unpriced"

# --- set says what it changed -----------------------------------------------
run set h1 port=2222 notes='two words' billing=minute min_billed=10m
expect_rc 0 "set several fields"
expect_eq "$(printf '%s\n' "$out" | sed 's/ from [0-9-]*T[0-9:]*Z$/ from T/')" \
    "port: 22 -> 2222
notes: '' -> two words
billing: hour -> minute from T
min_billed: none -> 10m from T" "set: one line a field, old -> new"
before=$(dump)
run set h1 port=2222 billing=minute
expect_rc 0 "set to the same values"
expect_eq "$out" "h1: nothing changed" "set: nothing changed"
expect_eq "$(dump)" "$before" "nothing stored when nothing changed"
run set h1 stopped_price=0.5/day --json
expect_rc 0 "set --json"
expect_eq "$(printf '%s' "$out" | jq -c '[.name, .changed, .currency_whole_history]')" \
    '["h1",[{"field":"stopped_price","old":"none","new":"0.50/day"}],false]' \
    "set --json: the change"
expect_match "$(printf '%s' "$out" | jq -r .prices_from)" '^[0-9-]+T[0-9:]+Z$' \
    "set --json: prices_from"
run set h1 notes=x --json
expect_eq "$(printf '%s' "$out" | jq -c '[.changed[0].field, .prices_from]')" \
    '["notes",null]' "set --json: no price change, prices_from null"
# The currency is the whole history's: a correction, not a change.
run set g1 currency=USD
expect_eq "$out" "currency: CNY -> USD (the whole price history)" \
    "currency: the whole history"
expect_eq "$(history g1 | cut -d'|' -f6 | tr '\n' ' ')" "USD USD " \
    "every entry in USD"
# A preset goes into the history from now, like any set.
run set u1 preset=autodl.a100-80g
expect_rc 0 "set preset"
expect_contains "$out" "price: (no price) -> 4.98/h from $(iso "$(sqlite3 "$db" "SELECT created_at FROM instance WHERE name = 'u1'")")" \
    "preset on an unpriced instance: its first price, valid since added"
expect_contains "$out" "price_from: (no price) -> preset autodl.a100-80g" \
    "set: where the price comes from"
run set u1 price=4.50/h
# u1's ledger is empty: nothing was billed yet, so the price is replaced
# (still from when u1 was added) rather than added to the history.
expect_eq "$(history u1 | cut -d'|' -f2 | tr '\n' ' ')" "45000 " \
    "an empty ledger: no past to keep, the price replaced"
# A preset on an instance with a price: a change from now.
age g1 60
created=$((created - 60))
run set g1 preset=autodl.a100-80g
expect_match "$out" '^price: 2\.28/h -> 4\.98/h from [0-9-]+T[0-9:]+Z$' \
    "preset: the price from now"
expect_eq "$(history g1 | cut -d'|' -f2 | tr '\n' ' ')" "49800 22800 49800 " \
    "preset: a third entry in g1's history"

# --- bad --from: one line, exit 2, nothing changed ---------------------------
before=$(dump)
run set h1 price=1/h --from "$(iso $((now + 86400)))"
expect_rc 2 "--from in the future"
expect_eq "$err" "gpufleet: time $(iso $((now + 86400))) is in the future" \
    "--from in the future: the message"
run set h1 price=1/h --from "$(iso $((h1_created - 8 * 86400)))"
expect_rc 2 "--from more than 7 days before added"
expect_eq "$err" "gpufleet: --from $(iso $((h1_created - 8 * 86400))) is before h1's ledger begins and more than 7 days before it was added (earliest $(iso $((h1_created - 7 * 86400))))" \
    "--from too early: the message"
expect_one_error_line "--from too early"
run set h1 port=1 --from "$(iso $B)"
expect_rc 2 "--from without a pricing field"
expect_eq "$err" "gpufleet: --from is when a price change takes effect: give a pricing field (price, currency, billing, min_billed, stopped_price, monthly_price, egress_price) or preset" \
    "--from without a pricing field: the message"
run set h1 price=1/h --from soon
expect_rc 2 "--from unparsable"
expect_one_error_line "--from unparsable"
expect_eq "$(dump)" "$before" "db unchanged after refused --from"

# --- prices stored before the history: valid from when added -----------------
run add m1 10.0.0.4 --price 1/h
m1_created=$(sqlite3 "$db" "SELECT created_at FROM instance WHERE name = 'm1'")
# The schema as it was at version 15: one price per instance (and none of
# the later steps' tables).
sqlite3 "$db" "
    CREATE TABLE old_price AS SELECT instance_id, price, price_per, unit,
        min_billed, stopped_per_day, monthly_price, egress_per_gb, currency
        FROM instance_price p WHERE valid_from = (SELECT max(valid_from)
        FROM instance_price q WHERE q.instance_id = p.instance_id);
    DROP TABLE instance_price;
    CREATE TABLE instance_price (instance_id INTEGER PRIMARY KEY
        REFERENCES instance(id) ON DELETE CASCADE, price INTEGER NOT NULL,
        price_per TEXT NOT NULL, unit TEXT NOT NULL,
        min_billed INTEGER NOT NULL, stopped_per_day INTEGER NOT NULL,
        monthly_price INTEGER NOT NULL, egress_per_gb INTEGER NOT NULL,
        currency TEXT NOT NULL);
    INSERT INTO instance_price SELECT * FROM old_price;
    DROP TABLE old_price;
    DROP TABLE stop_hold; -- version 17's
    DROP TABLE armed; DROP TABLE stop_request; DROP TABLE clock;
    ALTER TABLE instance DROP COLUMN since;
    ALTER TABLE journal DROP COLUMN rejected; -- version 18's
    DROP INDEX journal_received;
    ALTER TABLE watcher_state DROP COLUMN journal_seq; -- version 19's
    PRAGMA user_version = 15;"
run show m1
expect_rc 0 "show after the migration"
expect_eq "$(sqlite3 "$db" 'PRAGMA user_version')" 19 "migrated to 19"
expect_eq "$(history m1)" "$m1_created|10000|h|second|0|CNY" \
    "migrated: valid from when m1 was added"
expect_eq "$(history g1)" "$created|49800|h|second|5000|CNY" \
    "migrated: the price in force (the preset's) kept, from when g1 was added"

finish

#!/usr/bin/env bash
# Money never wraps: prices above 10^6 an hour are refused where they are
# given (exit 2, database unchanged), and a price stored before the ceiling
# makes cost fail with a clear message instead of printing a wrapped total.
. "$(dirname "$0")/lib.sh"
db=$XDG_DATA_HOME/gpufleet/fleet.db
dump() { sqlite3 "$db" .dump; }

run add a1 10.0.0.1 --price 2.69/h
expect_rc 0 "add with a sane price"
before=$(dump)

run add a2 10.0.0.2 --price 1000000000/s
expect_rc 2 "add --price 1000000000/s refused"
expect_contains "$err" "price '1000000000/s' is too high (at most 1000000 an hour)" \
    "add --price names the ceiling"
expect_one_error_line "add --price huge"
expect_eq "$(dump)" "$before" "db unchanged after add --price huge"

for kv in price=1000000000/s price=1000000.01/h price=277.7778/s \
    stopped_price=1000001/h egress_price=1000001/GB; do
	run set a1 "$kv"
	expect_rc 2 "set $kv refused"
	expect_contains "$err" "is too high" "set $kv: why"
	expect_one_error_line "set $kv"
	expect_eq "$(dump)" "$before" "db unchanged after set $kv"
done
run provider add autodl --balance 1000000001 --currency CNY
expect_rc 2 "a balance above 10^9 refused"
expect_eq "$(dump)" "$before" "db unchanged after a huge balance"

backdate a1 2026-11-01T00:00:00Z
# The price a1 ran under from Nov 1 (a price from now would leave the
# run at 2.69/h).
run mark a1 running --at 2026-11-01T00:00:00Z
expect_rc 0 "mark running"
run set a1 price=1000000/h --from 2026-11-01T00:00:00Z
expect_rc 0 "the ceiling itself is accepted"
run cost --since 2026-11-01T00:00:00Z --until 2026-11-02T00:00:00Z
expect_rc 0 "cost at the ceiling"
expect_contains "$out" "total 24,000,000.00 CNY" "a day at the ceiling, not wrapped"

# A rule stored before the ceiling existed: refused with a way out.
sqlite3 "$db" "UPDATE instance_price SET price = 10000000000000, price_per = 's'
    WHERE valid_from = 1793491200"
run cost --since 2026-11-01T00:00:00Z --until 2026-11-02T00:00:00Z
checks=$((checks + 1))
[ "$rc" != 0 ] || fail "cost with a stored huge price succeeded: $out"
expect_contains "$err" "above 1000000 an hour" "stored huge price named"
checks=$((checks + 1))
case $out in *-9*) fail "a wrapped (negative) total printed: $out" ;; esac
run set a1 price=2.69/h --from 2026-11-01T00:00:00Z
expect_rc 0 "set repairs the stored price"
run cost --since 2026-11-01T00:00:00Z --until 2026-11-02T00:00:00Z
expect_rc 0 "cost after the repair"
expect_contains "$out" "total 64.56 CNY" "24h at 2.69/h"
finish

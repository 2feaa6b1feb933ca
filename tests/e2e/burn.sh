#!/usr/bin/env bash
# Burn and the figures a renter acts on: storage of a stopped instance in
# the burn, projection and provider runway; advise on a young instance over
# the span it has existed; shown parts that add up to shown totals;
# unpriced instances as '?'; currencies as ISO 4217 codes.
. "$(dirname "$0")/lib.sh"
db=$XDG_DATA_HOME/gpufleet/fleet.db
export TZ=UTC # --by day cuts days at local midnight
dump() { sqlite3 "$db" .dump; }

# --- currencies are ISO 4217 codes ------------------------------------------
run add c1 10.0.0.9 --price 1/h
expect_rc 0 "add c1"
before=$(dump)
run set c1 currency=RMB
expect_rc 2 "RMB refused"
expect_eq "$err" "gpufleet: currency 'RMB' is not an ISO 4217 code: use CNY" \
    "RMB refused with the code meant"
run set c1 currency=XYZ
expect_rc 2 "XYZ refused"
expect_eq "$err" "gpufleet: currency 'XYZ' is not an ISO 4217 code (e.g. CNY, USD, EUR)" \
    "XYZ refused"
run provider add twp --currency ntd
expect_rc 2 "provider add --currency ntd refused"
expect_contains "$err" "currency 'ntd' is not an ISO 4217 code: use TWD" \
    "provider add: the hint"
expect_one_error_line "provider add --currency ntd"
run add c2 10.0.0.10 --price 1/h --currency RMB
expect_rc 2 "add --currency RMB refused"
expect_eq "$(dump)" "$before" "db unchanged after refused currencies"
run set c1 currency=eur
expect_rc 0 "eur accepted as EUR"
# A database written before the check, holding RMB, keeps working.
sqlite3 "$db" "UPDATE instance_price SET currency = 'RMB'"
backdate c1 2026-11-02T01:00:00Z
run mark c1 running --at 2026-11-02T01:00:00Z
run mark c1 stopped --at 2026-11-02T03:00:00Z
run cost c1 --since 2026-11-02T00:00:00Z --until 2026-11-03T00:00:00Z
expect_rc 0 "cost with a stored RMB"
expect_contains "$out" "total 2.00 RMB" "2 h at 1/h, in the stored RMB"
run rm c1 --purge --yes
expect_rc 0 "rm c1"

# --- shown parts add up to shown totals (fixed window) ----------------------
# p1 at 8.3949/h per second for 1 h: compute 83949 (8.3949); then stopped
# 1 h at 0.1176/day: 1176 * 3600 / 86400 = 49 (0.0049); total 83998.
# q1, q2 at 0.005/h for 1 h: 50 (0.005) each. CNY total 83998 + 100 = 84098,
# shown 8.41. Rounded alone the rows would show 8.40 + 0.01 + 0.01 = 8.42;
# by largest remainder (floors 8.39, 0.00, 0.00, remainders 0.0098, 0.0050,
# 0.0050; two cents missing) they show 8.40 + 0.01 + 0.00 = 8.41. p1's
# columns against its 8.40: floors 8.39 + 0.00, remainders 0.0049 each,
# the tie to the first: 8.40 + 0.00 (rounded alone: 8.39 + 0.00).
run add p1 10.0.0.1 --price 8.3949/h --provider pa
run set p1 stopped_price=0.1176/day
run add q1 10.0.0.2 --price 0.005/h --provider pb
run add q2 10.0.0.3 --price 0.005/h --provider pb
for n in p1 q1 q2; do
	backdate $n 2026-11-02T01:00:00Z
	run mark $n running --at 2026-11-02T01:00:00Z
	run mark $n stopped --at 2026-11-02T02:00:00Z
done
W="--since 2026-11-02T00:00:00Z --until 2026-11-02T03:00:00Z"
run cost $W
expect_rc 0 "cost (rounding)"
expect_match "$out" "p1 +pa +1h00m +1h00m +- +8\.40 +0\.00 +0\.00 +\? +8\.40 CNY" \
    "p1's columns add up to its total"
expect_match "$out" "q1 +pb .* 0\.01 +0\.00 +0\.00 +\? +0\.01 CNY" "q1 takes a cent"
expect_match "$out" "q2 +pb .* 0\.00 +0\.00 +0\.00 +\? +0\.00 CNY" "q2 does not"
expect_contains "$out" "total 8.41 CNY" "the rows add up to the total"
run cost $W --by provider
expect_match "$out" "pa +1 +1h00m +8\.40 CNY" "--by provider pa"
expect_match "$out" "pb +2 +2h00m +0\.01 CNY" "--by provider pb"
run cost $W --by day
expect_match "$out" "2026-11-02 +8\.41 CNY" "--by day"
run cost $W --json
expect_match "$(printf '%s' "$out" | tr -d ' \n')" '"name":"p1".*"compute":83949,"storage":49,"egress":0,"idle":null,"total":83998' \
    "JSON keeps exact minor units"

# --- unpriced instances show ? ----------------------------------------------
run add u1 10.0.0.4
backdate u1 2026-11-02T01:00:00Z
run mark u1 running --at 2026-11-02T01:00:00Z # still running at 03:00
run cost $W
expect_match "$out" "u1 +- +2h00m +2h00m +- +\? +\? +\? +\? +\? \(no price\)" \
    "unpriced: ? in every cost column"
expect_contains "$out" "total 8.41 CNY + ?" "a total with an unpriced instance"
expect_contains "$out" "1 instance has no price: '?' above (gpufleet set NAME price=...)" \
    "cost ends with the count"
run cost $W --by provider
expect_match "$out" "- +1 +2h00m +\? " "--by provider: a provider of only unpriced"
run cost $W --json
j=$(printf '%s' "$out" | tr -d ' \n')
expect_match "$j" '"name":"u1".*"priced":false,.*"compute":null,"storage":null,"egress":null,"idle":null,"total":null' \
    "JSON: null for unknown amounts"
expect_match "$j" '"unpriced":1\},?.*"unpriced_instances":1\}$' "JSON: the counts"
run rm u1 p1 q1 q2 --purge --yes --force
expect_rc 0 "rm the rounding instances"

# --- storage while stopped burns ----------------------------------------------
# s1 stopped at 0.5/day: burn 0.5 / 24 = 0.0208 -> 0.02 an hour; a balance
# of 10.00 lasts 10 / 0.5 = 20 days (less the seconds of storage since it
# was stated: 19d23h), where it used to say "burning 0.00/h, nothing
# running".
run add s1 10.0.1.1 --price 4.98/h --provider autodl
run set s1 stopped_price=0.5/day
run mark s1 running --at -3h
run mark s1 stopped --at -2h
run cost s1
expect_match "$out" "burning 0\.02 CNY/h, projected [0-9,.]+ CNY by the end of the month" \
    "cost: storage in the burn"
run cost s1 --json
expect_match "$(printf '%s' "$out" | tr -d ' \n')" '"burn_per_hour":209,"projected_month_end":[0-9]+,"burn_per_day":5000' \
    "burn per day exact, per hour rounded up"
run provider add autodl --balance 10 --currency CNY
run provider ls
expect_match "$out" "^autodl: 10\.00 CNY left, burning 0\.02/h \(storage of 1 stopped\), runs out in (19d23h|20d00h) " \
    "provider ls: storage burns the balance"
run provider ls --json
expect_match "$(printf '%s' "$out" | tr -d ' \n')" '"burn_per_hour":209,"burn_per_day":5000,"running":0,"stopped":1' \
    "provider ls --json"
# r1 running at 4.98/h too: 4.98 + 0.0208 = 5.0008 -> 5.00 an hour.
run add r1 10.0.1.2 --price 4.98/h --provider autodl
run mark r1 running --at -1h
run provider ls
expect_match "$out" "^autodl: [0-9.]+ CNY left, burning 5\.00/h \(1 running, storage of 1 stopped\), runs out in " \
    "provider ls: running and stored"
run rm r1 s1 --purge --yes --force

# --- advise on a young instance -----------------------------------------------
# Rented 2 days ago and always on: 24 h/day over 2.0 days; by hand
# 24 x 4.98 x 30 = 3,585.60 against a 2,599 plan saves 986.60; break-even
# 2599 / 4.98 / 30 = 17.4 h/day.
run add y1 10.0.1.3 --price 4.98/h
run set y1 monthly_price=2599
run mark y1 running --at -2d
run advise y1
expect_rc 0 "advise y1"
expect_contains "$out" "y1: used 24.0 h/day over 2.0 days of evidence, break-even 17.4 h/day: the monthly plan saves 986.60 CNY/month over hourly (3,585.60 CNY for 30 days at that use)" \
    "advise over the span observed"
run advise y1 --json
expect_match "$(printf '%s' "$out" | tr -d ' \n')" '"monthly":\{"currency":"CNY","evidence_s":17280[0-9],.*"hourly_month":35856000,"monthly_price":25990000,"savings":9866000,"thin_evidence":false' \
    "advise --json: the numbers"
finish

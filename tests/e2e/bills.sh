#!/usr/bin/env bash
# Bills to check against: `cost --format csv` for spreadsheets (RFC 4180,
# exact amounts, formulas kept as text) and `cost NAME --explain`, each run
# with its rounding, whose totals are what `cost` says.
. "$(dirname "$0")/lib.sh"
db=$XDG_DATA_HOME/gpufleet/fleet.db
export TZ=UTC # --by day cuts days at local midnight
dump() { sqlite3 "$db" .dump; }
# bytes_eq WANT DESCRIPTION: stdout of the last run is exactly WANT.
bytes_eq() {
	printf '%s' "$1" >"$T/want"
	expect_eq "$(od -An -c "$T/out")" "$(od -An -c "$T/want")" "$2"
}
# at NAME STATE TIME: a ledger entry as status would have observed it.
at() {
	sqlite3 "$db" "INSERT INTO ledger (instance_id, t, state, source)
	    SELECT id, strftime('%s', '$3'), '$2', 'observed' FROM instance
	    WHERE name = '$1'"
}

# m1: 2.69 CNY/h per minute with a 10 min minimum, 1.20/day stored.
# h1: 3.00 USD/h per hour. u1: no price.
run add m1 10.0.0.1 --price 2.69/h --provider autodl
expect_rc 0 "add m1"
run set m1 billing=minute min_billed=10m stopped_price=1.20/day
expect_rc 0 "set m1"
run add h1 10.0.0.2 --price 3/h --provider vast --currency USD
run set h1 billing=hour
run add u1 10.0.0.3 --provider x
expect_rc 0 "add u1"
# Added before the ledger below (so no check on back-dating refuses it).
sqlite3 "$db" "UPDATE instance SET created_at = strftime('%s', '2026-11-01')"
at m1 running 2026-11-02T01:00:00Z
at m1 stopped 2026-11-02T01:03:20Z
at m1 running 2026-11-02T05:03:20Z
at m1 unknown 2026-11-02T07:03:50Z
at m1 stopped 2026-11-02T08:00:00Z
at h1 running 2026-11-02T10:00:00Z
at h1 stopped 2026-11-02T11:10:00Z
at h1 running 2026-11-02T12:00:00Z
at h1 stopped 2026-11-02T12:05:00Z
at u1 running 2026-11-02T02:00:00Z
at u1 stopped 2026-11-02T03:00:00Z
W="--since 2026-11-02T00:00:00Z --until 2026-11-03T00:00:00Z"

# --- --explain: each run with its rounding ----------------------------------
# m1, by hand, at 2.69/h = 26900 minor an hour:
#   01:00:00-01:03:20  200 s, under the 10 min minimum: 10 minutes,
#                      26900 * 600 / 3600 = 4483.33 -> 0.4484
#   01:03:20-05:03:20  stopped 4 h at 1.20/day: 12000 * 4 / 24 = 0.20
#   05:03:20-07:03:50  7230 s -> 121 whole minutes (7260 s):
#                      26900 * 7260 / 3600 = 54248.33 -> 5.4249
#   07:03:50-08:00:00  unknown, billed as that run going on: 10600 s
#                      from 05:03:20 are 177 minutes (10620 s),
#                      26900 * 10620 / 3600 = 7.9355, less the 5.4249
#                      before it: 2.5106 for its 56 minutes
#   08:00:00-24:00:00  stopped 16 h: 12000 * 16 / 24 = 0.80
#   total 0.4484 + 0.20 + 5.4249 + 2.5106 + 0.80 = 9.3839, shown 9.38
run cost m1 $W --explain
expect_rc 0 "explain m1"
expect_eq "$out" "window 2026-11-02T00:00:00Z to 2026-11-03T00:00:00Z
m1 on autodl: 2.69 CNY/h, billed per minute, minimum 10m00s, stopped 1.20 CNY/day
START                 STOP                  STATE    DURATION   BILLED       MINIMUM  PRICE     AMOUNT
2026-11-02T01:00:00Z  2026-11-02T01:03:20Z  running  3m20s      10 minutes   10m00s   2.69/h    0.4484
2026-11-02T01:03:20Z  2026-11-02T05:03:20Z  stopped  4h00m00s   -            -        1.20/day  0.20
2026-11-02T05:03:20Z  2026-11-02T07:03:50Z  running  2h00m30s   121 minutes  -        2.69/h    5.4249
2026-11-02T07:03:50Z  2026-11-02T08:00:00Z  unknown  56m10s     56 minutes   -        2.69/h    2.5106
2026-11-02T08:00:00Z  2026-11-03T00:00:00Z  stopped  16h00m00s  -            -        1.20/day  0.80
unknown from 2026-11-02T07:03:50Z to 2026-11-02T08:00:00Z: unreachable, billed as running: gpufleet does not know it stopped
total 9.38 CNY (exactly 9.3839)" "explain m1: per minute, the minimum, storage, unknown billed as running"
run cost m1 $W
expect_contains "$out" "total 9.38 CNY" "cost m1 says the explained total"
run cost m1 $W --json
expect_match "$(printf '%s' "$out" | tr -d ' \n')" '"compute":83839,"storage":10000,"egress":0,"idle":null,"total":93839' \
    "cost m1 --json: 4484 + 54249 + 25106 (unknown) compute, 2000 + 8000 storage"
run cost m1 $W --explain --json
expect_rc 0 "explain --json"
j=$(printf '%s' "$out" | tr -d ' \n')
expect_match "$j" '"state":"running","start":"2026-11-02T01:00:00Z","stop":"2026-11-02T01:03:20Z","ongoing":false,"duration_s":200,"window_s":200,"billed_s":600,"units":10,"minimum_applied":true,"charge":4484,"before_window":0,"amount":4484\}' \
    "explain --json: the minimum applied"
expect_match "$j" '"egress":\{"bytes":0,"amount":0\},"total":93839\}\]\}$' \
    "explain --json total == cost --json total"

# h1 per hour: 10:00-11:10 is 70 min, 2 hours, 6.00; 12:00-12:05 is
# 5 min, 1 hour, 3.00. Total 9.00 USD.
run cost h1 $W --explain
expect_eq "$out" "window 2026-11-02T00:00:00Z to 2026-11-03T00:00:00Z
h1 on vast: 3.00 USD/h, billed per hour
START                 STOP                  STATE    DURATION   BILLED   MINIMUM  PRICE   AMOUNT
2026-11-02T10:00:00Z  2026-11-02T11:10:00Z  running  1h10m00s   2 hours  -        3.00/h  6.00
2026-11-02T11:10:00Z  2026-11-02T12:00:00Z  stopped  50m00s     -        -        -       0.00
2026-11-02T12:00:00Z  2026-11-02T12:05:00Z  running  5m00s      1 hour   -        3.00/h  3.00
2026-11-02T12:05:00Z  2026-11-03T00:00:00Z  stopped  11h55m00s  -        -        -       0.00
total 9.00 USD" "hourly: 70 min is 2 hours, 5 min is 1 hour"
expect_match "$out" '^total 9\.00 USD$' "h1 explained total"
run cost h1 $W
expect_contains "$out" "total 9.00 USD" "cost h1 says the same"
# From 10:30: the run's first hour was charged at 10:00, before the
# window; the second starts at 11:00, inside it: 3.00 of 6.00.
run cost h1 --since 2026-11-02T10:30:00Z --until 2026-11-02T11:30:00Z --explain
expect_match "$out" '^2026-11-02T10:00:00Z +2026-11-02T11:10:00Z +running +1h10m00s +2 hours +- +3\.00/h +3\.00 \(3\.00 before the window\)$' \
    "a run that started before the window"
expect_match "$out" '^total 3\.00 USD$' "its part is the window's total"
run cost h1 --since 2026-11-02T10:30:00Z --until 2026-11-02T11:30:00Z
expect_contains "$out" "total 3.00 USD" "cost says the same for the window"

# Several instances: one bill each; unpriced amounts are ?.
run cost $W --explain
expect_rc 0 "explain all"
expect_contains "$out" "u1 on x: no price (gpufleet set u1 price=...)" \
    "unpriced: says so"
expect_match "$out" '^2026-11-02T02:00:00Z +2026-11-02T03:00:00Z +running +1h00m00s +3600 seconds +- +\? +\?$' \
    "unpriced: ? amounts"
expect_match "$out" '^total \? \(no price\)$' "unpriced: total ?"

# --explain --format csv: the same lines, amounts adding up to the total
# (0.4484 + 0.20 + 5.4249 + 2.5106 + 0.80 = 9.3839).
run cost m1 $W --explain --format csv
expect_rc 0 "explain csv"
bytes_eq $'name,state,start,stop,duration_s,window_s,unit,billed_s,billed_units,minimum_applied,price,currency,amount,before_window\r
m1,running,2026-11-02T01:00:00Z,2026-11-02T01:03:20Z,200,200,minute,600,10,yes,2.69/h,CNY,0.4484,0.00\r
m1,stopped,2026-11-02T01:03:20Z,2026-11-02T05:03:20Z,14400,14400,,,,,1.20/day,CNY,0.20,0.00\r
m1,running,2026-11-02T05:03:20Z,2026-11-02T07:03:50Z,7230,7230,minute,7260,121,no,2.69/h,CNY,5.4249,0.00\r
m1,unknown,2026-11-02T07:03:50Z,2026-11-02T08:00:00Z,3370,3370,minute,3360,56,no,2.69/h,CNY,2.5106,0.00\r
m1,stopped,2026-11-02T08:00:00Z,2026-11-03T00:00:00Z,57600,57600,,,,,1.20/day,CNY,0.80,0.00\r
' "explain csv bytes"

# --- csv: the listing, --by day, --by provider ------------------------------
# u1 renamed '=cmd' and its provider '-2+3' by an older version (names are
# checked now): a spreadsheet must not run them as formulas.
sqlite3 "$db" "UPDATE instance SET name = '=cmd', provider = '-2+3'
    WHERE name = 'u1'"
run cost $W --format csv # in name order
expect_rc 0 "cost --format csv"
# m1 ran 200 + 7230 = 7430 s, billed 600 + 7260 + 3360 (unknown, as
# running) = 11220 s, stopped 14400 + 57600 = 72000 s; h1 ran 4200 + 300
# = 4500 s, billed 10800 s,
# stopped 11:10-12:00 and 12:05-24:00, 3000 + 42900 = 45900 s.
bytes_eq $'name,released_at,provider,currency,priced,running_s,billed_s,stopped_s,unknown_s,starts,compute,storage,egress,idle,total,restarts,outages\r
\'=cmd,,\'-2+3,CNY,no,3600,3600,75600,0,1,,,,,,0,0\r
h1,,vast,USD,yes,4500,10800,45900,0,2,9.00,0.00,0.00,,9.00,0,0\r
m1,,autodl,CNY,yes,7430,11220,72000,3370,2,8.3839,1.00,0.00,,9.3839,0,0\r
' "csv: exact amounts, formulas as text, empty when unpriced"
run cost $W --by day --format csv
expect_rc 0 "--by day --format csv"
bytes_eq $'day,currency,total,unpriced\r
2026-11-02,CNY,9.3839,1\r
2026-11-02,USD,9.00,0\r
' "csv by day"
run cost --since 2026-11-01T00:00:00Z --until 2026-11-03T00:00:00Z --by day --format csv
bytes_eq $'day,currency,total,unpriced\r
2026-11-01,CNY,0.00,1\r
2026-11-01,USD,0.00,0\r
2026-11-02,CNY,9.3839,1\r
2026-11-02,USD,9.00,0\r
' "csv by day over two days"
run cost $W --by provider --format csv
expect_rc 0 "--by provider --format csv"
# Availability: m1 ran 7430 s of 7430 + 3370 seen, 68.80%.
bytes_eq $'provider,currency,instances,unpriced,running_s,unknown_s,total,restarts,outages,availability_percent\r
\'-2+3,CNY,1,1,3600,0,,0,0,100.00\r
vast,USD,1,0,4500,0,9.00,0,0,100.00\r
autodl,CNY,1,0,7430,3370,9.3839,0,0,68.80\r
' "csv by provider"

# --- egress is a line of the bill ------------------------------------------
# h1 sent 1.5 GB (10^9 bytes each) between two samples at 0.80/GB:
# 0.80 * 1.5 = 1.20 USD; total 9.00 + 1.20 = 10.20. The price is in force
# from Nov 1 (a price from now would leave Nov 2's bytes at no price).
run set h1 egress_price=0.80/GB --from 2026-11-01T00:00:00Z
expect_rc 0 "set h1 egress_price"
sqlite3 "$db" "INSERT INTO sample_host (instance_id, t, net_tx_bytes)
    SELECT id, strftime('%s', '2026-11-02T10:00:00Z'), 1000 FROM instance
    WHERE name = 'h1' UNION ALL
    SELECT id, strftime('%s', '2026-11-02T11:00:00Z'), 1500001000 FROM instance
    WHERE name = 'h1'"
run cost h1 $W --explain
expect_match "$out" '^egress 1500000000 bytes at 0\.80/GB: 1\.20$' "explain: egress"
expect_match "$out" '^total 10\.20 USD$' "explain: total with egress"
run cost h1 $W
expect_contains "$out" "total 10.20 USD" "cost says the same with egress"
run cost h1 $W --explain --format csv
expect_match "$out" '^h1,egress,2026-11-02T00:00:00Z,2026-11-03T00:00:00Z,,,,,,,0\.80/GB,USD,1\.20,0\.00'$'\r''$' \
    "explain csv: the egress record"

# --- a run still going: counted up to now ----------------------------------
# Per hour at 1.00, started 30 min ago: its first hour, 1.00, however many
# seconds pass between the two commands.
run add n1 10.0.0.4 --price 1/h
run set n1 billing=hour
run mark n1 running --at -30m
expect_rc 0 "mark n1 running"
run cost n1 --since -1h --explain
expect_match "$out" '^[0-9T:Z-]+ +now +running +(29m5[0-9]s|30m0[0-9]s) +1 hour +- +1\.00/h +1\.00$' \
    "an ongoing run stops 'now'"
expect_match "$out" '^total 1\.00 CNY$' "ongoing: the total"
run cost n1 --since -1h
expect_contains "$out" "total 1.00 CNY" "cost says the same"
run cost n1 --since -1h --explain --json
expect_match "$(printf '%s' "$out" | tr -d ' \n')" '"ongoing":true,.*"amount":10000\}\],"egress":\{"bytes":0,"amount":0\},"total":10000\}' \
    "explain --json: ongoing"

# --- --explain over a price change: the lines are the piecewise charge ------
# p1 per hour at 2.69/h, 1.20/day stored; from 01:30 2.28/h and 2.40/day;
# from 04:10 1.20/day again. Running 00:00-02:10, then stopped. By hand:
#   00:00-02:10  7800 s, 3 hours billed: the hours starting 00:00 and
#                01:00 at 2.69, the one starting 02:00 at 2.28:
#                2 * 2.69 + 2.28 = 7.66
#   02:10-24:00  stopped: 2 h at 2.40/day and 19h50m (71400 s) at
#                1.20/day, rounded once: (24000 * 7200 + 12000 * 71400)
#                / 86400 = 11916.67 -> 1.1917
#   total 7.66 + 1.1917 = 8.8517, shown 8.85 (at 2.28/h and 1.20/day
#   throughout it would be 6.84 + 1.0917)
run add p1 10.0.0.5 --price 2.69/h --billing hour
run set p1 stopped_price=1.20/day
sqlite3 "$db" "UPDATE instance SET created_at = strftime('%s', '2026-11-01')
    WHERE name = 'p1'"
at p1 running 2026-11-02T00:00:00Z
at p1 stopped 2026-11-02T02:10:00Z
run set p1 price=2.28/h stopped_price=2.40/day --from 2026-11-02T01:30:00Z
expect_rc 0 "set p1 --from 01:30"
run set p1 stopped_price=1.20/day --from 2026-11-02T04:10:00Z
expect_rc 0 "set p1 --from 04:10"
run cost p1 $W --explain
expect_rc 0 "explain p1"
expect_eq "$out" "window 2026-11-02T00:00:00Z to 2026-11-03T00:00:00Z
p1: 2.28 CNY/h, billed per hour, stopped 1.20 CNY/day (now; lines show the prices they were charged at)
START                 STOP                  STATE    DURATION   BILLED   MINIMUM  PRICE                                         AMOUNT
2026-11-02T00:00:00Z  2026-11-02T02:10:00Z  running  2h10m00s   3 hours  -        2 at 2.69/h + 1 at 2.28/h                     7.66
2026-11-02T02:10:00Z  2026-11-03T00:00:00Z  stopped  21h50m00s  -        -        2h00m00s at 2.40/day + 19h50m00s at 1.20/day  1.1917
total 8.85 CNY (exactly 8.8517)" "explain p1: piecewise lines over price changes"
run cost p1 $W
expect_contains "$out" "total 8.85 CNY" "cost p1 says the explained total"
run cost p1 $W --json
expect_match "$(printf '%s' "$out" | tr -d ' \n')" '"compute":76600,"storage":11917,"egress":0,"idle":null,"total":88517' \
    "cost p1 --json: the exact parts"
run cost p1 $W --explain --json
expect_match "$(printf '%s' "$out" | tr -d ' \n')" '"unit":"hour","pieces":\[\{"start":"2026-11-02T00:00:00Z","secs":7200,"units":2,"price":26900,"per":"h"\},\{"start":"2026-11-02T02:00:00Z","secs":3600,"units":1,"price":22800,"per":"h"\}\],"state":"running"' \
    "explain p1 --json: the run's pieces"
expect_match "$(printf '%s' "$out" | tr -d ' \n')" '"pieces":\[\{"start":"2026-11-02T02:10:00Z","secs":7200,"price":24000,"per":"day"\},\{"start":"2026-11-02T04:10:00Z","secs":71400,"price":12000,"per":"day"\}\],"state":"stopped"' \
    "explain p1 --json: the stop's pieces"
expect_match "$(printf '%s' "$out" | tr -d ' \n')" '"total":88517\}\]\}$' \
    "explain p1 --json: the total is cost's"

# --- bad input ----------------------------------------------------------------
before=$(dump)
run cost --format xml
expect_rc 2 "--format xml"
expect_contains "$err" "--format 'xml' must be table, csv or json" "--format xml: why"
expect_one_error_line "--format xml"
run cost m1 --explain --by day
expect_rc 2 "--explain --by day"
expect_contains "$err" "--explain lists each instance's runs: not with --by" \
    "--explain --by: why"
expect_eq "$(dump)" "$before" "db unchanged by refused commands"

finish

#!/usr/bin/env bash
# `cost --by day` reads each instance's books once and cuts the days in
# memory: every day's amount per currency is what `cost` says for that day
# alone, summed over the instances, across runs over midnight, a price
# change, a minimum per start, storage, an unknown stretch, a restart and
# egress counters (reset included) on both sides of midnight.
. "$(dirname "$0")/lib.sh"
db=$XDG_DATA_HOME/gpufleet/fleet.db
export TZ=UTC
at() {
	sqlite3 "$db" "INSERT INTO ledger (instance_id, t, state, source)
	    SELECT id, strftime('%s', '$3'), '$2', '${4:-observed}' FROM instance
	    WHERE name = '$1'"
}
tx() { # NAME TIME BYTES: a sample of the agent's bytes-sent counter
	sqlite3 "$db" "INSERT INTO sample_host (instance_id, t, net_tx_bytes)
	    SELECT id, strftime('%s', '$2'), $3 FROM instance WHERE name = '$1'"
}

run add m1 10.0.0.1 --price 2.69/h --provider autodl
run set m1 billing=minute min_billed=10m stopped_price=1.20/day \
    egress_price=0.50/GB
run add h1 10.0.0.2 --price 3/h --provider vast --currency USD
run set h1 billing=hour
run add s1 10.0.0.3 --price 0.90/h --provider autodl
expect_rc 0 "add s1"
sqlite3 "$db" "UPDATE instance SET created_at = strftime('%s', '2026-10-30')"
run set m1 price=3.10/h --from 2026-11-02T12:00:00Z
expect_rc 0 "m1's price changes on the 2nd"
run set h1 egress_price=0.80/GB --from 2026-10-30T00:00:00Z
at m1 running 2026-11-01T22:00:00Z
at m1 unknown 2026-11-02T01:00:00Z
at m1 running 2026-11-02T02:30:00Z
at m1 stopped 2026-11-02T23:50:00Z
at m1 running 2026-11-03T00:05:00Z stated
at m1 stopped 2026-11-03T00:07:00Z
at h1 running 2026-11-01T10:00:00Z
at h1 stopped 2026-11-03T02:10:00Z
at s1 running 2026-11-02T20:00:00Z
at s1 unknown 2026-11-03T03:00:00Z
at s1 running 2026-11-03T04:00:00Z
sqlite3 "$db" "INSERT INTO incident (instance_id, t, kind)
    SELECT id, strftime('%s', '2026-11-03T03:30:00Z'), 'restart'
    FROM instance WHERE name = 's1'"
at s1 stopped 2026-11-03T09:00:00Z
tx m1 2026-11-01T23:00:00Z 1000
tx m1 2026-11-02T00:30:00Z 900001000
tx m1 2026-11-02T05:00:00Z 300 # the counter reset
tx m1 2026-11-02T20:00:00Z 1000000300
tx m1 2026-11-03T00:06:00Z 2000000300
tx h1 2026-11-01T23:59:00Z 5
tx h1 2026-11-02T00:01:00Z 1500000005
tx h1 2026-11-02T12:00:00Z 3000000005
tx h1 2026-11-03T01:00:00Z 4000000005
tx h1 2026-11-03T02:00:00Z 5000000005

# DAY CURRENCY MINOR-UNITS lines from --by day's CSV (exact amounts,
# 10000 minor units to the unit).
run cost --since 2026-11-01T00:00:00Z --until 2026-11-04T00:00:00Z --by day --format csv
expect_rc 0 "cost --by day"
got=$(printf '%s\n' "$out" | tr -d '\r' | awk -F, 'NR > 1 {
	split($3, a, "."); f = substr(a[2] "0000", 1, 4)
	printf "%s %s %d\n", $1, $2, a[1] * 10000 + f }' | sort)
want=$(for d in 01 02 03; do
	next=$(date -u -d "2026-11-$d + 1 day" +%Y-%m-%d)
	"$GPUFLEET" cost --since "2026-11-${d}T00:00:00Z" --until "${next}T00:00:00Z" --json |
	    jq -r --arg day "2026-11-$d" '.totals[] | "\($day) \(.currency) \(.total)"'
done | sort)
expect_eq "$got" "$want" "each day of --by day is what cost says for that day"
expect_eq "$(printf '%s\n' "$got" | wc -l)" 6 "three days, two currencies"
expect_match "$got" "2026-11-02 USD 732000" \
    "h1's 2026-11-02: 24 hours at 3.00 and 1.5 GB at 0.80"

# cost of many instances reads the GPU samples of all at once: each one's
# idle share is what cost of that instance alone says (several GPUs at a
# time: the largest weight and utilisation; a GPU without one left out).
sqlite3 "$db" "INSERT INTO sample_gpu (instance_id, t, gpu, util)
    SELECT id, strftime('%s', '2026-11-02T03:00:00Z'), 0, 2 FROM instance WHERE name = 'm1'
    UNION ALL SELECT id, strftime('%s', '2026-11-02T03:05:00Z'), 0, 90 FROM instance WHERE name = 'm1'
    UNION ALL SELECT id, strftime('%s', '2026-11-02T03:10:00Z'), 0, 1 FROM instance WHERE name = 'm1'
    UNION ALL SELECT id, strftime('%s', '2026-11-02T03:10:00Z'), 1, 50 FROM instance WHERE name = 'm1'
    UNION ALL SELECT id, strftime('%s', '2026-11-02T03:15:00Z'), 0, NULL FROM instance WHERE name = 'm1'
    UNION ALL SELECT id, strftime('%s', '2026-11-02T03:15:00Z'), 1, 3 FROM instance WHERE name = 'm1';
    INSERT INTO sample_gpu_5m (instance_id, t, gpu, n, util_max)
    SELECT id, strftime('%s', '2026-11-02T10:00:00Z'), 0, 5, 3 FROM instance WHERE name = 'h1'
    UNION ALL SELECT id, strftime('%s', '2026-11-02T11:00:00Z'), 0, 4, 80 FROM instance WHERE name = 'h1'
    UNION ALL SELECT id, strftime('%s', '2026-11-02T11:00:00Z'), 1, 3, 1 FROM instance WHERE name = 'h1'
    UNION ALL SELECT id, strftime('%s', '2026-11-02T12:00:00Z'), 0, 2, NULL FROM instance WHERE name = 'h1'
    UNION ALL SELECT id, strftime('%s', '2026-11-02T12:00:00Z'), 1, 3, 2 FROM instance WHERE name = 'h1'"
W="--since 2026-11-02T00:00:00Z --until 2026-11-03T00:00:00Z"
# Each instance's idle, total, restarts and outages from cost of all, and
# from cost of each alone.
all_rows() {
	run cost $W --json
	expect_rc 0 "cost of all"
	all=$(printf '%s' "$out" | jq -c '[.instances[] | [.name, .idle, .total, .restarts, .outages]]')
	one=$(for n in h1 m1 s1; do "$GPUFLEET" cost "$n" $W --json |
		jq -c '.instances[] | [.name, .idle, .total, .restarts, .outages]'; done | jq -sc .)
}
all_rows
expect_eq "$all" "$one" "cost of all: each instance as cost of it alone"
expect_match "$all" '\["h1",[1-9]' "h1 has an idle share"

# A utilisation that is not a number (gpufleet never stores one) is taken
# as SQL orders it, all at once as one by one.
sqlite3 "$db" "INSERT INTO sample_gpu (instance_id, t, gpu, util)
    SELECT id, strftime('%s', '2026-11-02T03:10:00Z'), 2, 'x' FROM instance WHERE name = 'm1'"
all_rows
expect_eq "$all" "$one" "a sample not a number: each instance as cost of it alone"

finish

#!/usr/bin/env bash
# When gpufleet does not know, the money counts as billing: a stretch the
# ledger cannot account for (the instance unreachable) is billed as the run
# going on, and cost, cost --explain and --json say so and why.
. "$(dirname "$0")/lib.sh"
db=$XDG_DATA_HOME/gpufleet/fleet.db
export TZ=UTC
# at NAME STATE TIME NOTE: a ledger entry as status observes it.
at() {
	sqlite3 "$db" "INSERT INTO ledger (instance_id, t, state, source, note)
	    SELECT id, strftime('%s', $3), '$2', 'observed', '$4' FROM instance
	    WHERE name = '$1'"
}
W="--since 2026-11-02T00:00:00Z --until 2026-11-03T00:00:00Z"

# a1, 2.69 CNY/h per minute: seen running at 10:00, unreachable from
# 10:30, reachable again at 11:06:40, marked stopped at 11:30. One run of
# 90 minutes (nothing says it stopped), 26900 * 5400 / 3600 = 4.035:
#   10:00-10:30     30 minutes, 1.345
#   10:30-11:06:40  unknown: by 11:06:40 the run is 67 started minutes
#                   (4020 s), 3.00383 -> 3.0039, less 1.345: 1.6589 for
#                   its 37 minutes
#   11:06:40-11:30  the run goes on: 90 minutes, 4.035, less 3.0039: 1.0311
# With the unknown stretch free and running again a new start it was
# 1.345 + 1.076 = 2.42.
run add a1 10.0.0.1 --price 2.69/h --billing minute
expect_rc 0 "add a1"
sqlite3 "$db" "UPDATE instance SET created_at = strftime('%s', '2026-11-01')"
at a1 running "'2026-11-02T10:00:00Z'" "first seen running"
at a1 unknown "'2026-11-02T10:30:00Z'" unreachable
at a1 running "'2026-11-02T11:06:40Z'" "reachable again"
run mark a1 stopped --at 2026-11-02T11:30:00Z
expect_rc 0 "mark a1 stopped"

run cost a1 $W
expect_rc 0 "cost a1"
expect_match "$out" '^a1 +- +53m +1h30m +36m +4\.04 +0\.00 +0\.00 +\? +4\.04 CNY$' \
    "cost: the unknown stretch in the compute, its time in UNKNOWN"
expect_contains "$out" "a1: 36m unknown (unreachable from 2026-11-02T10:30:00Z to 2026-11-02T11:06:40Z) billed as running, 1.66 CNY: gpufleet does not know it stopped" \
    "cost: a note says what was billed as running and why"
expect_match "$out" '^total 4\.04 CNY$' "cost: the total"

run cost a1 $W --explain
expect_rc 0 "explain a1"
expect_eq "$out" "window 2026-11-02T00:00:00Z to 2026-11-03T00:00:00Z
a1: 2.69 CNY/h, billed per minute
START                 STOP                  STATE    DURATION   BILLED      MINIMUM  PRICE   AMOUNT
2026-11-02T10:00:00Z  2026-11-02T10:30:00Z  running  30m00s     30 minutes  -        2.69/h  1.345
2026-11-02T10:30:00Z  2026-11-02T11:06:40Z  unknown  36m40s     37 minutes  -        2.69/h  1.6589
2026-11-02T11:06:40Z  2026-11-02T11:30:00Z  running  23m20s     23 minutes  -        2.69/h  1.0311
2026-11-02T11:30:00Z  2026-11-03T00:00:00Z  stopped  12h30m00s  -           -        -       0.00
unknown from 2026-11-02T10:30:00Z to 2026-11-02T11:06:40Z: unreachable, billed as running: gpufleet does not know it stopped
total 4.04 CNY (exactly 4.035)" "explain: the unknown stretch is a line of the run, named and why"

run cost a1 $W --json
expect_rc 0 "cost a1 --json"
j=$(printf '%s' "$out" | tr -d ' \n')
expect_match "$j" '"running_s":3200,"billed_s":5400,"stopped_s":45000,"unknown_s":2200,"starts":1,"compute":40350,' \
    "--json: one start, the unknown stretch billed"
expect_match "$j" '"unknown_compute":16589,"unknown_stretches":\[\{"start":"2026-11-02T10:30:00Z","stop":"2026-11-02T11:06:40Z","ongoing":false,"window_s":2200,"why":"unreachable","billed_as":"running"\}\]' \
    "--json: what the stretch cost, when and why"
run cost a1 $W --explain --json
expect_rc 0 "explain --json"
j=$(printf '%s' "$out" | tr -d ' \n')
expect_match "$j" '\{"continues_run":true,"why":"unreachable","billed_as":"running","unit":"minute","pieces":\[\{"start":"2026-11-02T10:30:00Z","secs":2220,"units":37,"price":26900,"per":"h"\}\],"state":"unknown",.*"billed_s":2220,"units":37,"minimum_applied":false,"charge":16589,"before_window":0,"amount":16589\}' \
    "explain --json: the unknown line, billed as running"
expect_match "$j" '"total":40350\}\]\}$' "explain --json: the total is cost's"

# A start stated after the outage is a new start (its own minimum): with
# a 30 min minimum, 11:06:40-11:30 is billed 30 minutes on its own,
# 1.345; 10:00-11:06:40 one run of 67 minutes, 3.0039: 4.3489.
run set a1 min_billed=30m --from 2026-11-01T00:00:00Z
expect_rc 0 "set a1 min_billed"
sqlite3 "$db" "UPDATE ledger SET source = 'stated' WHERE note = 'reachable again'"
run cost a1 $W --json
expect_match "$(printf '%s' "$out" | tr -d ' \n')" '"starts":2,"compute":43489,' \
    "a stated start after the stretch: a new start"

# b1, 1 CNY/h per second, seen running an hour ago and unreachable for the
# last 30 minutes: billed as running until now, said so, and it burns.
run add b1 10.0.0.2 --price 1/h
expect_rc 0 "add b1"
at b1 running "'now', '-3600 seconds'" "first seen running"
at b1 unknown "'now', '-1800 seconds'" unreachable
run cost b1 --since -2h
expect_rc 0 "cost b1"
expect_match "$out" '^b1: 30m unknown \(unreachable since [0-9T:Z-]+\) billed as running, 0\.50 CNY: gpufleet does not know it stopped$' \
    "cost: an ongoing stretch, since when"
expect_match "$out" '^b1 +- +30m +(59m|1h00m) +30m +1\.00 ' "cost: an hour billed"
run cost b1 --since -2h --explain
expect_match "$out" '^[0-9T:Z-]+ +now +unknown +(29m5[0-9]s|30m0[0-9]s) +[0-9]+ seconds +- +1\.00/h +0\.5' \
    "explain: the stretch goes on until now"
expect_match "$out" '^unknown since [0-9T:Z-]+: unreachable, billed as running: gpufleet does not know it stopped$' \
    "explain: since when, and why"
run cost b1 --since -2h --json
expect_match "$(printf '%s' "$out" | tr -d ' \n')" '"burn_per_hour":10000,' \
    "--json: it burns its price"
expect_match "$(printf '%s' "$out" | tr -d ' \n')" '"ongoing":true,"window_s":(179[0-9]|18[0-9][0-9]),"why":"unreachable","billed_as":"running"' \
    "--json: the stretch is ongoing"
finish

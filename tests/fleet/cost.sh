#!/usr/bin/env bash
# Money end to end on the sandbox fleet: prices set, instances observed
# running by status, runs stated with mark, and cost/provider/advise output
# checked to the minor unit against amounts worked out by hand below.
. "$(dirname "$0")/../e2e/lib.sh"
export GPUFLEET_NO_PROGRESS=1
: "${GPUFLEET_AGENT:=$(dirname "$GPUFLEET")/gpufleet-agent}"
export GPUFLEET_AGENT
db=$XDG_DATA_HOME/gpufleet/fleet.db
export TZ=UTC	# --by day cuts days at local midnight
sql() { sqlite3 "$db" "$@"; }

fleet_up 3
# The containers started an hour ago: the 30 days that availability looks
# at then hold evidence however fast this runs (a start in the same second
# as advise is no evidence, and no availability line).
# Rented an hour before they were added: since= lets the books go back
# to the container start (without it, the first sighting is clamped to
# when the instance was added: unit_ledger).
for n in inst-1 inst-2 inst-3; do
	printf '%s\n' "$((EPOCHSECONDS - 3600))" >"$(instance_dir "$n")/container_start"
	run set "$n" since=-2h
	expect_rc 0 "set $n since=-2h"
done
run set inst-1 price=2.69/h billing=second provider=autodl
expect_rc 0 "set price"
run set inst-2 price=2.69/h billing=hour min_billed=10m stopped_price=24/day \
    monthly_price=1500 provider=autodl
run set inst-3 price=0.05/min billing=minute currency=usd provider=vast
bad() { run "$@"; expect_rc 2 "$*"; expect_one_error_line "$*"; }
bad set inst-1 price=2.69
bad set inst-1 price=-1/h
bad set inst-1 price=2.69/month
bad set inst-1 billing=daily
bad set inst-1 min_billed=10
bad set inst-1 currency=euro
bad set inst-1 prise=1/h
expect_match "$err" "price, currency, billing" "unknown field lists pricing fields"

# --- status observes the instances running since their container start ---
run status
expect_rc 0 "status"
expect_eq "$(sql "SELECT count(*) FROM ledger WHERE state = 'running' AND source = 'observed'")" \
    3 "first sighting recorded as running (observed)"
cs=$(sql "SELECT container_start FROM sample_host LIMIT 1")
expect_eq "$(sql "SELECT min(t) FROM ledger WHERE source = 'observed'")" "$cs" \
    "running since the container start"

# --- stated runs in a fixed past window, costed by hand -------------------
# inst-1, 2.69/h billed per second: 01:00:00 to 03:20:30 is 8430 s,
#   26900 * 8430 / 3600 = 62990.83 -> 62991 (rounded up) = 6.30 CNY.
# (Marks this far back need the instances added before them: backdate.)
for n in inst-1 inst-2 inst-3; do backdate $n 2026-11-02T01:00:00Z; done
run mark inst-1 running --at 2026-11-02T01:00:00Z
run mark inst-1 stopped --at 2026-11-02T03:20:30Z
# inst-2, 2.69/h billed per started hour, minimum 10 min per start:
#   01:00-01:05 (5 min -> 10 min -> 1 h) = 26900
#   02:00-04:30 (2.5 h -> 3 h)           = 80700   compute 107600
#   stopped 01:05-02:00 (3300 s) and 04:30 to the window end 11-04 00:00
#   (156600 s) at 24/day: 240000*3300/86400 = 9166.67 -> 9167 and
#   240000*156600/86400 = 435000, storage 444167.       total 551767
run mark inst-2 running --at 2026-11-02T01:00:00Z
run mark inst-2 stopped --at 2026-11-02T01:05:00Z
run mark inst-2 running --at 2026-11-02T02:00:00Z
run mark inst-2 stopped --at 2026-11-02T04:30:00Z
expect_eq "$out" "inst-2: stopped since 2026-11-02T04:30:00Z" "mark output"
# inst-3, 0.05 USD/min billed per started minute: 30 s -> 1 min = 500.
run mark inst-3 running --at 2026-11-02T10:00:00Z
run mark inst-3 stopped --at 2026-11-02T10:00:30Z

W="--since 2026-11-02T00:00:00Z --until 2026-11-04T00:00:00Z"
run cost $W --json
expect_rc 0 "cost --json"
one() { printf '%s\n' "$out" | tr -d ' \n' | grep -o "\"name\":\"$1\"[^}]*"; }
expect_match "$(one inst-1)" '"running_s":8430,"billed_s":8430,.*"compute":62991,"storage":0,.*"total":62991' \
    "inst-1 per-second"
expect_match "$(one inst-2)" '"running_s":9300,"billed_s":14400,.*"starts":2,"compute":107600,"storage":444167,.*"total":551767' \
    "inst-2 hourly with minimum and storage"
expect_match "$(one inst-3)" '"currency":"USD".*"compute":500,.*"total":500' \
    "inst-3 per-minute in USD"
tot=$(printf '%s\n' "$out" | tr -d ' \n' | grep -o '"totals":.*')
expect_match "$tot" '\{"currency":"CNY","total":614758' "CNY total (62991+551767)"
expect_match "$tot" '\{"currency":"USD","total":500' "USD kept apart"

run cost $W
expect_match "$out" "inst-2 +autodl +2h35m +4h00m +- +10.76 +44.42 +0.00 +\? +55.18 CNY" \
    "table row"
expect_match "$out" "total 61.48 CNY" "CNY total line"
expect_match "$out" "total 0.05 USD" "USD total line"
run cost $W --by day
# Day 2 (UTC): inst-1 6.30; inst-2 compute 10.76 and storage 3300 s +
# 19.5 h (70200 s) of the day: 9167 + 195000 = 204167 -> 20.42; 37.48.
expect_match "$out" "2026-11-02 +37.48 CNY" "day 2"
expect_match "$out" "2026-11-03 +24.00 CNY" "day 3: a full day of storage"
run cost $W --by provider
expect_match "$out" "autodl +2 +" "per provider"
# The default window is this month: month to date and a projection at
# the current burn (two CNY instances observed running at 2.69/h each).
run cost
expect_match "$out" "total [0-9,.]+ CNY month to date; burning 5.38 CNY/h, projected [0-9,.]+ CNY by the end of the month" \
    "month to date and projection"
run cost --json
expect_match "$(printf '%s' "$out" | tr -d ' \n')" '"currency":"CNY","total":[0-9]+,"burn_per_hour":53800,"projected_month_end":[0-9]+' \
    "projection in JSON"
# Days add up to the window to the minor unit.
d2=$( "$GPUFLEET" cost inst-2 --since 2026-11-02T00:00:00Z --until 2026-11-03T00:00:00Z --json | tr -d ' \n' | grep -o '"totals":\[{"currency":"CNY","total":[0-9]*' | grep -o '[0-9]*$')
d3=$( "$GPUFLEET" cost inst-2 --since 2026-11-03T00:00:00Z --until 2026-11-04T00:00:00Z --json | tr -d ' \n' | grep -o '"totals":\[{"currency":"CNY","total":[0-9]*' | grep -o '[0-9]*$')
expect_eq "$((d2 + d3))" 551767 "two days add up to the window"

# A corrected entry corrects every report: cost is derived, not stored.
sql "UPDATE ledger SET t = strftime('%s','2026-11-02T03:00:00Z') WHERE t = strftime('%s','2026-11-02T03:20:30Z')"
run cost inst-1 $W --json
expect_match "$(one inst-1)" '"running_s":7200,.*"compute":53800' "corrected ledger, corrected cost"

# --- providers and runway ---------------------------------------------------
run provider add autodl --balance 100 --currency CNY --low-balance 5000
expect_rc 0 "provider add"
run provider add autodl
expect_rc 2 "provider add twice"
run provider ls
expect_match "$out" "^autodl: [0-9.]+ CNY left, burning 5.38/h, runs out in [0-9dhm]+ \([A-Z][a-z][a-z] [0-9]{2}:[0-9]{2}\)  \[LOW BALANCE\]$" \
    "runway line (two running instances at 2.69/h)"
run provider set nosuch --balance 1
expect_rc 2 "unknown provider"

# --- advise -------------------------------------------------------------------
run advise
expect_rc 0 "advise"
expect_match "$out" "inst-2: used [0-9.]+ h/day over [0-9.]+ days? of evidence( \(thin: under a day\))?, break-even 18.6 h/day: the monthly plan costs [0-9,.]+ CNY/month more than hourly \([0-9,.]+ CNY for 30 days at that use\)" \
    "monthly vs hourly"
# An instance stopped three days ago (never contacted: only stated).
run add old-1 10.255.0.1 --provider autodl
run set old-1 price=2.69/h stopped_price=24/day
backdate old-1 '10 days ago'
run mark old-1 running --at -10d
run mark old-1 stopped --at -3d
run advise old-1
expect_match "$out" "old-1: stopped for 3d00h and paying storage \(72.00 CNY so far\)" \
    "stopped but paying"
run provider set autodl --release-after 4
run advise old-1
expect_match "$out" "old-1: stopped 3 days; autodl releases instances stopped 4 days" \
    "release deadline"

run provider set autodl --balance 3
run advise
expect_match "$out" "autodl: [0-9.]+ CNY left runs out in [0-9hm]+: top up or stop instances" \
    "runway under a day"

expect_match "$out" "vast: observed availability [0-9.]+% over 30 days, 0 outages, 0 unexpected restarts" \
    "availability per provider"

run add priced-at-add 10.255.0.2 --price 0.9/h --billing minute --currency USD
expect_rc 0 "add --price"
expect_eq "$(sql "SELECT price, price_per, unit, currency FROM instance_price p JOIN instance i ON i.id = p.instance_id WHERE i.name = 'priced-at-add'")" \
    "9000|h|minute|USD" "price stored at add"
run add bad-price 10.255.0.3 --price 0.9
expect_rc 2 "add with a bad price"
run show bad-price
expect_rc 2 "nothing added on a bad price"

# --- released instances stay in the history ----------------------------------
run mark inst-3 released
run ls inst-3
expect_rc 2 "released instance left service"
run cost $W --json
expect_match "$(one inst-3)" '"compute":500' "still costed after release"

finish

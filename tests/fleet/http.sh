#!/usr/bin/env bash
# The daemon's HTTP server on the sandbox fleet, driven with curl: the
# dashboard (CSP, nosniff, ETag and 304), 404s and 405, GET /metrics
# through promtool, each API document
# equal to the CLI's --json for the same database, every POST refused
# without a token, and with one a shutdown armed and cancelled over the
# API and a cross-site POST refused with nothing armed,
# a Host that is not loopback refused (DNS rebinding), an oversized
# header, the bearer token (none, wrong, right; a token file others can
# read), a non-loopback address without a token and a port in use refused
# at start, and with a token one served (401 without it). The dashboard in
# headless Chromium: the fleet table (states, idle GPUs, memory, progress
# and stale progress, cost, next stop), the cost charts and projection,
# schedules, autostop policies, events, an instance over 24 h and 7 d, a
# phone's width. The daemon's own metrics: actions logged, sessions.
. "$(dirname "$0")/../e2e/lib.sh"
. "$(dirname "$0")/lib/watcher.sh"
. "$(dirname "$0")/lib/daemon.sh"
# Real minutes: a schedule's next run stays put while the test compares.
unset GPUFLEET_TEST_CRON_MINUTE

# One sshd per instance: breaking inst-2 leaves inst-1 alone.
fleet_up 2 --group-size 1
for n in 1 2; do
	run set "inst-$n" 'stop_command=remote:shutdown -h now'
	expect_rc 0 "stop_command of inst-$n"
done
run set inst-1 price=2.40/h billing=second currency=CNY provider=autodl
expect_rc 0 "inst-1 has a price"
# inst-2 billed per started hour: 1.20 CNY for the hour the test lasts, a
# cost that stays put while an API document is compared with the CLI's.
run set inst-2 price=1.20/h billing=hour currency=CNY provider=vast
expect_rc 0 "inst-2 has a price"
# Fake GPUs: inst-1 has a busy one and an idle one, inst-2 one busy.
gpu_util inst-1 80 3
gpu_util inst-2 50
run status
expect_rc 0 "first contact"
# A shutdown schedule ten days from now (within the 30 days armed on the
# watcher, never during the test): inst-2's next stop.
stop_day=$(date -u -d '+10 days' +%F)
run schedule add inst-2 --cron "0 3 $(date -u -d "$stop_day" '+%-d %-m') *" --tz UTC \
    --do shutdown --name newyear
expect_rc 0 "schedule add"
# Progress files as a job keeps them (README "status"): inst-1's just
# written, inst-2's two hours old, stale past [status]
# stale_progress_minutes (30 by default).
for n in 1 2; do mkdir -p "$(instance_dir "inst-$n")/home/.gpufleet"; done
printf 'epoch 3 step 1200 loss 0.412\n' >"$(instance_dir inst-1)/home/.gpufleet/progress"
printf 'epoch 1 step 40 loss 2.31\n' >"$(instance_dir inst-2)/home/.gpufleet/progress"
touch -d '-2 hours' "$(instance_dir inst-2)/home/.gpufleet/progress"
# An autostop policy on inst-2 (busy at 50 %: it never fires here), and
# its line as shutdown ls prints it.
run autostop inst-2 --idle 6h
expect_rc 0 "autostop inst-2"
run shutdown ls inst-2
autostop_line=$(printf '%s\n' "$out" | sed -n 's/^ *\(autostop a-[0-9a-f]*: .*\)$/\1/p')
expect_match "$autostop_line" '^autostop a-[0-9a-f]+: idle 6h00m ' "shutdown ls shows the policy"

free_port() {
	python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
# serve_on ADDR: a daemon listening on ADDR and a free port; U its URL on
# 127.0.0.1.
serve_on() {
	port=$(free_port)
	U=http://127.0.0.1:$port
	DAEMON_ARGS="--listen $1:$port" start_daemon
	expect_contains "$(cat "$LOG")" "listening on http://$1:$port/" \
	    "the log says where it listens ($1)"
}
serve_on 127.0.0.1

# get PATH [CURL ARGS...]: status in $code, headers in $T/h, body in $body;
# with the curl arguments in AUTH (the bearer token, once one is set).
AUTH=()
get() {
	local path=$1
	shift
	rm -f "$T/body" # curl writes no file for an empty body
	code=$(curl -s -o "$T/body" -D "$T/h" -w '%{http_code}' --max-time 60 \
	    "${AUTH[@]}" "$@" "$U$path")
	body=$(cat "$T/body" 2>/dev/null)
}
header() { awk -v k="$1" 'BEGIN { IGNORECASE = 1 } tolower($1) == tolower(k ":") { sub(/^[^:]*: */, ""); sub(/\r$/, ""); print }' "$T/h"; }
polled_once() { get /api/v1/instances; [ "$code" = 200 ]; }
wait_for 60 "the first poll is served" polled_once

# --- the dashboard ----------------------------------------------------------
get /
expect_eq "$code" 200 "GET /"
expect_contains "$body" '<script src="/assets/app.js"' "the page"
expect_contains "$(header Content-Type)" "text/html" "the page's type"
expect_contains "$(header Content-Security-Policy)" "default-src 'self'" "CSP on /"
expect_eq "$(header X-Content-Type-Options)" nosniff "nosniff on /"
expect_eq "$(header Cache-Control)" no-cache "Cache-Control on /"
etag=$(header ETag)
expect_match "$etag" '^"[0-9a-f]+"$' "an ETag"
get / -H "If-None-Match: $etag"
expect_eq "$code" 304 "If-None-Match: the page is current"
expect_eq "$body" "" "304 has no body"
expect_eq "$(header ETag)" "$etag" "304 repeats the ETag"
get / -I
expect_eq "$code" 200 "HEAD /"
expect_eq "$(header ETag)" "$etag" "HEAD has the ETag"
checks=$((checks + 1))
case $body in *"<html"*) fail "HEAD sent the page: $body" ;; esac
get /assets/app.js
expect_eq "$code" 200 "an asset"
expect_contains "$(header Content-Type)" "text/javascript" "the script's type"
expect_contains "$body" "/api/v1/" "the script"
get /nosuch
expect_eq "$code" 404 "an unknown page"
expect_contains "$(header Content-Security-Policy)" "default-src 'self'" "CSP on a 404"
get /api/v1/nosuch
expect_eq "$code" 404 "an unknown API path"
expect_eq "$(printf '%s' "$body" | jq -r .error)" "no such API path" "404 as JSON"
get / -X PUT
expect_eq "$code" 405 "PUT"
expect_eq "$(header Allow)" "GET, HEAD, POST" "405 says what is allowed"
expect_eq "$(header X-Content-Type-Options)" nosniff "nosniff on a 405"
get /api/v1/instances/inst-1/shutdown
expect_eq "$code" 405 "GET of an action"

# --- GET /metrics: the same text as gpufleet metrics, plus the daemon's ----
get /metrics
expect_eq "$code" 200 "GET /metrics"
expect_eq "$(header Content-Type)" "text/plain; version=0.0.4" "the exposition format's type"
expect_eq "$(header X-Content-Type-Options)" nosniff "nosniff on /metrics"
expect_eq "$(printf '%s\n' "$body" | grep -c '^gpufleet_gpu_utilization_ratio{instance="inst-[12]"')" 3 \
    "one utilization series per fake GPU"
expect_match "$(printf '%s\n' "$body" | grep '^gpufleet_gpu_utilization_ratio{instance="inst-1",.*gpu="1"')" \
    ' 0\.03$' "inst-1's idle GPU at 3%"
expect_match "$(printf '%s\n' "$body" | grep '^gpufleet_poll_duration_seconds_count ')" \
    ' [1-9][0-9]*$' "the daemon's polls are counted"
if command -v promtool >/dev/null 2>&1; then
	lint=$(printf '%s\n' "$body" | promtool check metrics 2>&1)
	rc=$?
	expect_rc 0 "promtool check metrics on the daemon's /metrics: $lint"
	expect_eq "$lint" "" "no lint issue"
else
	echo "SKIP promtool check: promtool not found (Debian package prometheus)" >&2
fi

# --- the API's documents are the CLI's --------------------------------------
# same PATH CLI ARGS...: the API's document equals the CLI's (compared
# again while the daemon's polls change them between the two reads); with
# PICK set, the jq filter PICK of the API's document.
same() {
	local path=$1
	shift
	get "$path"
	[ "$code" = 200 ] || return 1
	api_doc=$(printf '%s' "$body" | jq -S "${PICK:-.}") || return 1
	cli_doc=$("$GPUFLEET" "$@" | jq -S .) || return 1
	[ "$api_doc" = "$cli_doc" ]
}
check_same() {
	wait_for 60 "GET $1 is $GPUFLEET ${*:2}" same "$@" ||
	    printf 'api: %s\ncli: %s\n' "$api_doc" "$cli_doc" >&2
}
# An instance: show's document, with the last poll's status of it (report
# and watcher: the plan) and its cost (a window fixed in the past, so the
# money cannot move between the two reads: the route runs cost NAME
# --json with no window, compared on its shape and row).
PICK='del(.status, .cost)' check_same /api/v1/instances/inst-1 show inst-1 --json
get /api/v1/instances/inst-1
expect_eq "$(printf '%s' "$body" | jq -c '[.status.name, .status.state, (.status.report.gpus | length), (.status.watcher | has("deadlines"))]')" \
    '["inst-1","up",2,true]' "instances/NAME: its status from the last poll"
expect_eq "$(printf '%s' "$body" | jq -c '[.cost.minor_per_unit, [.cost.instances[].name], .cost.instances[0].currency, .cost.instances[0].priced]')" \
    '[10000,["inst-1"],"CNY",true]' "instances/NAME: cost NAME --json"
expect_eq "$(printf '%s' "$body" | jq -c '.cost | keys')" "$("$GPUFLEET" cost inst-1 --json | jq -c keys)" \
    "instances/NAME: cost's document whole"
get /api/v1/instances/inst-2
expect_eq "$(printf '%s' "$body" | jq -c '[.name, .status.name, [.cost.instances[].name]]')" \
    '["inst-2","inst-2",["inst-2"]]' "instances/NAME: each its own"
check_same "/api/v1/cost?since=2026-12-01&until=2026-12-02" \
    cost --json --since 2026-12-01 --until 2026-12-02
check_same "/api/v1/cost?since=-2h&until=-1h&by=provider" \
    cost --json --since=-2h --until=-1h --by provider
check_same /api/v1/schedules schedule ls --json
expect_eq "$(printf '%s' "$body" | jq -r '.[0].name')" newyear "the schedule listed"
check_same "/api/v1/events?since=-1d&limit=5" events --json --since=-1d --limit 5
check_same "/api/v1/history/inst-1?since=-1h" history inst-1 --json --since=-1h

# The last poll's view is status --json, equal documents. The fake GPUs
# and progress files stay put, so what may differ between the daemon's
# poll and the CLI's own run of status is only what moves by itself, left
# out of both: times and ages, the host's load, memory, disk and network
# counters, the watcher's journal (each reader takes the entries after
# the stored cursor) and the sessions (the CLI's login and the daemon's
# held one count for each other); in cost: the window's end, the running
# time and the projection to the month's end.
volatile='walk(if type == "object" then del(.checked_at, .time, .load,
    .mem_available_kib, .free_kib, .net_rx_bytes, .net_tx_bytes, .sessions,
    .journal, .journal_more, .skew_s, .until, .running_s,
    .projected_month_end) else . end)'
instances_are_status() {
	get /api/v1/instances
	[ "$code" = 200 ] || return 1
	api_doc=$(printf '%s' "$body" | jq -S "$volatile") || return 1
	cli_doc=$("$GPUFLEET" status --json | jq -S "$volatile") || return 1
	[ "$api_doc" = "$cli_doc" ]
}
wait_for 60 "GET /api/v1/instances is status --json (equal documents)" instances_are_status ||
    diff <(printf '%s\n' "$api_doc") <(printf '%s\n' "$cli_doc") >&2
expect_eq "$(printf '%s' "$api_doc" | jq -c '[.[] | [.name, .report.progress.text, .flags.progress_stale, .watcher.autostop.idle_s]]')" \
    '[["inst-1","epoch 3 step 1200 loss 0.412\n",false,null],["inst-2","epoch 1 step 40 loss 2.31\n",true,21600]]' \
    "what the documents hold: the progress lines, the stale one, the autostop policy"
# instances/NAME whole: show NAME --json, with "status" NAME's element of
# status --json and "cost" cost NAME --json. inst-2's cost stays put (its
# started hour); inst-1's grows each second, so it is read again until
# the API's and the CLI's reads fall in one second.
show_is_cli() {
	local st show cost
	# (status logs in, slow on a loaded machine: first, so that the two
	# reads of the money that moves come right after each other)
	st=$("$GPUFLEET" status "$1" --json | jq '.[0]') || return 1
	show=$("$GPUFLEET" show "$1" --json) || return 1
	get "/api/v1/instances/$1"
	cost=$("$GPUFLEET" cost "$1" --json) || return 1
	[ "$code" = 200 ] || return 1
	api_doc=$(printf '%s' "$body" | jq -S "$volatile") || return 1
	cli_doc=$(printf '%s' "$show" |
	    jq -S --argjson st "$st" --argjson cost "$cost" \
	    '. + {status: $st, cost: $cost}' | jq -S "$volatile") || return 1
	[ "$api_doc" = "$cli_doc" ]
}
for n in 2 1; do
	wait_for 60 "GET /api/v1/instances/inst-$n is show, status and cost (equal documents)" \
	    show_is_cli "inst-$n" ||
	    diff <(printf '%s\n' "$api_doc") <(printf '%s\n' "$cli_doc") >&2
done
expect_eq "$(printf '%s' "$api_doc" | jq -c '[.name, .status.name, .cost.totals[0].total > 0]')" \
    '["inst-1","inst-1",true]' "inst-1's document: its status and its cost so far"
get /api/v1/instances
expect_eq "$(printf '%s' "$body" | jq -r '[.[].state] | join(" ")')" "up up" \
    "both instances up"
expect_eq "$(printf '%s' "$body" | jq -c '[.[].report.gpus[].util_gpu]')" "[80,3,50]" \
    "the GPUs of the last poll"

# Bad requests: one JSON error each, nothing run.
get "/api/v1/cost?since=--help"
expect_eq "$code" 400 "a since that looks like an option"
expect_contains "$(printf '%s' "$body" | jq -r .error)" "bad time '--help'" \
    "it reached the CLI as a value, not an option"
get "/api/v1/cost?sort=name"
expect_eq "$code" 400 "an unknown parameter"
expect_eq "$(printf '%s' "$body" | jq -r .error)" "unknown parameter 'sort'" \
    "the unknown parameter named"
get /api/v1/instances/nosuch
expect_eq "$code" 404 "an unknown instance"
expect_eq "$(printf '%s' "$body" | jq -r .error)" "no instance 'nosuch'" \
    "the unknown instance named"
get "/api/v1/history/a;b"
expect_eq "$code" 400 "a name against the rules"
get / -H "Host: evil.example:$port"
expect_eq "$code" 403 "a Host that is not loopback (DNS rebinding)"
get /api/v1/schedules -H 'Sec-Fetch-Site: cross-site' -H 'Sec-Fetch-Mode: no-cors'
expect_eq "$code" 403 "another site's page fetching the API"
get / -H 'Sec-Fetch-Site: cross-site' -H 'Sec-Fetch-Mode: navigate'
expect_eq "$code" 200 "a link from another site opens the page"
get /api/v1/schedules -H 'Sec-Fetch-Site: same-origin' -H 'Sec-Fetch-Mode: cors'
expect_eq "$code" 200 "the page's own fetch"

# --- actions need the token ------------------------------------------------
# Without [daemon] token_file any local process (another user's too) could
# reach a loopback port: no POST is carried out, same-origin or not.
armed() { "$GPUFLEET" shutdown ls inst-1 --json | jq '[.. | objects | select(has("id") and (.id | tostring | startswith("d-")))] | length'; }
expect_eq "$(armed)" 0 "nothing armed on inst-1 yet"
get /api/v1/instances/inst-1/shutdown -X POST -H 'Content-Type: application/json' \
    -H "Origin: $U" -d '{"in": "1h", "warn": 0}'
expect_eq "$code" 403 "a same-origin POST without [daemon] token_file"
expect_eq "$(printf '%s' "$body" | jq -r .error)" \
    "actions (POST) need a bearer token: set [daemon] token_file" "403 names the fix"
get /api/v1/instances/inst-1/cancel -X POST -H 'Content-Type: application/json' -d '{}'
expect_eq "$code" 403 "a cancel without [daemon] token_file"
expect_eq "$(armed)" 0 "the refused POSTs armed nothing"

# --- the page in a real browser --------------------------------------------
# Headless Chromium loads the dashboard against this daemon and runs its
# script; the DOM after it is what a user sees. Screenshots go to
# build/tests/artifacts/ for people to look at (not committed).
chrome=$(command -v chromium || command -v chromium-browser || true)
if [ -z "$chrome" ]; then
	echo "SKIP the browser checks: no chromium (Debian package chromium)" >&2
else
	art=${GPUFLEET_ARTIFACTS:-$(dirname "$GPUFLEET")/tests/artifacts}
	mkdir -p "$art"
	browse() {
		# Nothing but loopback: every other name resolves to nothing,
		# and Chromium's own background traffic is off.
		timeout 120 "$chrome" --headless --no-sandbox --disable-gpu \
		    --user-data-dir="$T/chrome" --virtual-time-budget=20000 \
		    --host-resolver-rules='MAP * ~NOTFOUND, EXCLUDE 127.0.0.1' \
		    --disable-background-networking --disable-component-update \
		    --disable-sync --disable-extensions --disable-default-apps \
		    --no-first-run --no-pings --disable-domain-reliability \
		    --window-size=1280,900 "$@" 2>>"$T/chrome.err"
	}
	fleet_dom() {
		dom=$(browse --dump-dom "$U/")
		case $dom in *'data-name="inst-2"'*) ;; *) return 1 ;; esac
	}
	wait_for 120 "the fleet page shows both instances" fleet_dom ||
	    printf '%s\n' "$dom" | head -50 >&2
	rows=$(printf '%s' "$dom" | grep -o '<tr data-name="[^"]*"><td><a [^>]*>[^<]*</a></td><td class="state-[a-z]*"' |
	    sed 's/.*data-name="\([^"]*\)".*class="state-\([a-z]*\)"/\1 \2/' | tr '\n' ' ')
	expect_eq "$rows" "inst-1 up inst-2 up " "the fleet table's rows and states"
	expect_eq "$(printf '%s' "$dom" | grep -o 'class="gpu idle"' | wc -l)" 1 \
	    "the one idle GPU stands out"
	expect_contains "$dom" 'id="cost-day"' "the cost-by-day chart"
	expect_contains "$dom" '<td>newyear</td>' "the schedule in its table"
	row2=$(printf '%s' "$dom" | grep -o '<tr data-name="inst-2">.*' | sed 's,</tr>.*,,')
	expect_match "$row2" "<td>$stop_day 03:00Z \\(in [0-9]+d\\)</td>" \
	    "inst-2's next stop: newyear's deadline on its watcher"
	row1=$(printf '%s' "$dom" | grep -o '<tr data-name="inst-1">.*' | sed 's,</tr>.*,,')
	expect_match "$row1" '<td>-</td></tr>|<td>-</td>$' "inst-1: no stop to come"
	expect_match "$row1" 'CNY<div class="muted">\+2\.40/h</div>' \
	    "inst-1's cost cell: so far, and its burn an hour"
	expect_contains "$dom" 'id="events"' "the events table"
	# The progress line and its age; inst-2's, two hours old, stands out
	# (the class "stale"), as status marks it.
	expect_match "$row1" '<td class="wrap"><span>epoch 3 step 1200 loss 0\.412 \([0-9]+[sm] ago\)</span></td>' \
	    "inst-1's progress line and its age"
	expect_match "$row2" '<td class="wrap"><span class="stale">epoch 1 step 40 loss 2\.31 \(2h ago\)</span></td>' \
	    "inst-2's stale progress stands out"
	expect_eq "$(printf '%s' "$dom" | grep -o 'class="stale"' | wc -l)" 1 \
	    "only the stale progress line stands out"
	# Memory: the GPUs' used and total (fake GPUs: 500 of 81920 MiB each).
	expect_contains "$row1" '<td>1.0/160 GiB</td>' "inst-1's GPU memory"
	expect_contains "$row2" '<td>0.5/80 GiB</td>' "inst-2's GPU memory"
	# Cost by provider: one bar each, as high as its cost on an axis
	# from 0 to the next 1, 2 or 5 above the largest (vast: 1.20 CNY,
	# inst-2's started hour, on 2.00: 92 of the chart's 92 units * 0.6).
	provider=$(printf '%s' "$dom" | grep -o '<svg[^>]*id="cost-provider".*' | sed 's,</svg>.*,,')
	expect_contains "$provider" 'data-top="20000"' "the provider chart's axis ends at 2.00 CNY"
	expect_contains "$provider" '<text x="0" y="24">2.00 CNY</text>' "the axis labelled"
	expect_match "$provider" 'height="55\.2" data-v="12000"><title>vast: 1\.20 CNY</title>' \
	    "vast's bar: 1.20 CNY, 0.6 of the axis"
	expect_match "$provider" '<title>autodl: 0\.[0-9]{2} CNY</title>' "autodl's bar"
	# Cost by day: the days before the instances were added draw no bar
	# (no full-height bar for nothing); the month-end projection and the
	# cost of a day at the current burn (a dashed line) in the same card.
	byday=$(printf '%s' "$dom" | grep -o '<svg[^>]*id="cost-day".*' | sed 's,</div>.*,,')
	expect_eq "$(printf '%s' "$byday" | grep -o 'height="0" data-v="0"' | wc -l)" 6 \
	    "six days with no cost, no bar"
	expect_contains "$byday" '<line class="projected"' "the current burn's dashed line"
	expect_contains "$byday" '86.40 CNY/day now</text>' "labelled: (2.40 + 1.20) CNY/h a day"
	expect_match "$byday" '<p id="projection" class="muted">projected [0-9]+\.[0-9]{2} CNY at month end \([0-9]+\.[0-9]{2} CNY so far; a day at the current burn: 86\.40 CNY\)</p>' \
	    "the month-end projection next to the chart"
	# The autostop policy, as shutdown ls words it.
	expect_contains "$dom" "<li data-name=\"inst-2\">inst-2: $autostop_line</li>" \
	    "inst-2's autostop policy listed"
	checks=$((checks + 1))
	case $dom in *"not available"*) fail "a document the page wants is not available" ;; esac
	expect_match "$dom" '<span id="error" class="error" hidden' "no error shown"
	browse --screenshot="$art/http-fleet.png" "$U/" >/dev/null
	# page_shows PATH TEXT: the DOM of the page at PATH (in $dom) holds
	# TEXT.
	page_shows() {
		dom=$(browse --dump-dom "$U$1")
		case $dom in *"$2"*) ;; *) return 1 ;; esac
	}
	# The charts need stored samples: the polls store them each second.
	wait_for 120 "the instance page charts inst-1's utilization" \
	    page_shows /#/i/inst-1 'id="chart-util"' ||
	    printf '%s\n' "$dom" | head -50 >&2
	expect_contains "$dom" 'id="chart-mem"' "the memory chart"
	expect_contains "$dom" '"name": "inst-1"' "show's document on the page"
	expect_contains "$dom" 'id="charts" data-range="24h"' "24 h by default"
	browse --screenshot="$art/http-instance.png" "$U/#/i/inst-1" >/dev/null
	# The 7 d choice, in the address (a link or a reload keeps it).
	wait_for 120 "the instance page over 7 days" \
	    page_shows /#/i/inst-1/7d 'id="chart-util"' ||
	    printf '%s\n' "$dom" | head -50 >&2
	expect_contains "$dom" 'id="charts" data-range="7d"' "the charts cover 7 d"
	expect_contains "$dom" '<button type="button" aria-pressed="true">7d</button>' \
	    "the 7d button pressed"
	expect_contains "$dom" 'id="chart-mem"' "the memory chart over 7 d"
	# A phone: 390x844 CSS pixels. The page is no wider than the screen
	# (wide tables scroll in their own box); screenshots for people.
	browse --window-size=390,844 --screenshot="$art/http-phone.png" "$U/" >/dev/null
	browse --window-size=390,844 --screenshot="$art/http-phone-instance.png" \
	    "$U/#/i/inst-1/7d" >/dev/null
	checks=$((checks + 1))
	[ -s "$art/http-phone.png" ] && [ -s "$art/http-phone-instance.png" ] ||
	    fail "no phone screenshots in $art"
	# phone_width PATH READY: the page's width and what it draws in, as
	# JSON, once the JavaScript READY is true.
	phone_width() {
		timeout 150 python3 "$(dirname "$0")/lib/cdp-eval.py" 390 844 "$U$1" "$2" \
		    '[document.documentElement.scrollWidth, document.documentElement.clientWidth]' \
		    "$chrome" --headless --no-sandbox --disable-gpu \
		    --user-data-dir="$T/chrome-cdp" \
		    --host-resolver-rules='MAP * ~NOTFOUND, EXCLUDE 127.0.0.1' \
		    --disable-background-networking --disable-component-update \
		    --disable-sync --disable-extensions --disable-default-apps \
		    --no-first-run --no-pings --disable-domain-reliability \
		    2>>"$T/chrome.err"
	}
	expect_eq "$(phone_width / '!!document.querySelector("#fleet tr[data-name=inst-2]")')" \
	    '[390, 390]' "the fleet page on a phone: no wider than the screen"
	expect_eq "$(phone_width /#/i/inst-1/7d '!!document.getElementById("chart-util")')" \
	    '[390, 390]' "the instance page on a phone: no wider than the screen"
	checks=$((checks + 1))
	[ -s "$art/http-fleet.png" ] && [ -s "$art/http-instance.png" ] ||
	    fail "no screenshots in $art"
fi

# --- the daemon's own on /metrics: actions logged, sessions -----------------
# metric NAME{LABELS}: the sample's value on the daemon's /metrics ("" if
# it has none).
metric() {
	get /metrics
	printf '%s\n' "$body" | awk -v k="$1 " 'index($0, k) == 1 { print substr($0, length(k) + 1) }'
}
# The actions this daemon logged, by kind: its start, then a warn
# guard's firing (inst-2's 1.20 CNY is past the cap of 0.01), which the
# daemon's guard pass after a poll logs; as many as events lists.
expect_eq "$(metric 'gpufleet_events_total{kind="daemon_start"}')" 1 \
    "the daemon counts its own start"
run guard add inst-2 --max-cost 0.01 --do warn --name http-cap
expect_rc 0 "a warn guard over inst-2's cost"
guard_counted() {
	local n
	n=$("$GPUFLEET" events --json | jq '[.[] | select(.event == "guard_warn")] | length')
	[ "$n" -ge 1 ] && [ "$(metric 'gpufleet_events_total{kind="guard_warn"}')" = "$n" ]
}
wait_for 60 "the guard's warning counted as events lists it" guard_counted
run guard rm http-cap
expect_rc 0 "guard rm"
# Sessions: the daemon's agent leaves its own held session out; a login
# on inst-1 (a cat reading until the fifo's writer closes) is one there.
i1='{instance="inst-1",provider="autodl"}'
i2='{instance="inst-2",provider="vast"}'
sessions_are() {
	[ "$(metric "gpufleet_instance_sessions$i1")" = "$1" ] &&
	    [ "$(metric "gpufleet_instance_sessions$i2")" = "$2" ]
}
wait_for 60 "no login but the daemon's: no session" sessions_are 0 0
mkfifo "$T/login"
ssh -F "$D/ssh_config" inst-1 'cat >/dev/null' <"$T/login" >/dev/null 2>&1 &
login=$!
exec 7>"$T/login"
cleanup_hooks=("kill $login 2>/dev/null" "${cleanup_hooks[@]}")
wait_for 60 "one login on inst-1: one session there" sessions_are 1 0
exec 7>&-
wait "$login"
wait_for 60 "the login over: no session" sessions_are 0 0

# --- limits -----------------------------------------------------------------
big=$(head -c 12000 /dev/zero | tr '\0' a)
get / -H "X-Big: $big"
checks=$((checks + 1))
case $code in 4??) ;; *) fail "a 12 KB header: got $code, wanted a 4xx" ;; esac
get /
expect_eq "$code" 200 "still serving after the oversized header"
head -c 100000 /dev/zero | tr '\0' ' ' >"$T/bigbody"
get /api/v1/instances/inst-1/shutdown -X POST -H 'Content-Type: application/json' \
    --data-binary "@$T/bigbody"
checks=$((checks + 1))
case $code in 4??) ;; *) fail "a 100 KB body: got $code, wanted a 4xx" ;; esac
expect_eq "$(armed)" 0 "the oversized body armed nothing"

# The first daemon (no token) stops.
kill -TERM "$dpid"
wait_for 60 "the daemon without a token stops" gone_or_zombie "$dpid"
wait "$dpid"
rc=$?
expect_rc 0 "its exit status"

# --- start-up refusals ------------------------------------------------------
# refused ARGS...: a daemon that must not start (bounded, in case it does).
refused() {
	timeout 60 "$GPUFLEET" daemon "$@" >"$T/out" 2>"$T/err"
	rc=$?
	err=$(cat "$T/err")
}
refused --listen "0.0.0.0:$port"
expect_rc 4 "a non-loopback address without a token"
expect_eq "$err" "gpufleet: daemon: listen 0.0.0.0:$port is not a loopback address: set [daemon] token_file (a bearer token every request must carry)" \
    "the refusal names the address and the fix"
refused --listen "localhost:$port"
expect_rc 2 "a name, not an address"
expect_contains "$err" "must be ADDR:PORT" "--listen's form"
# A listener holds a port (it writes which once it listens).
python3 -c 'import socket, sys, time
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen()
f = open(sys.argv[1] + ".tmp", "w"); f.write(str(s.getsockname()[1])); f.close()
import os; os.rename(sys.argv[1] + ".tmp", sys.argv[1]); time.sleep(120)' "$T/held" &
holder=$!
cleanup_hooks=("kill $holder 2>/dev/null" "${cleanup_hooks[@]}")
wait_for 60 "a port is held" test -s "$T/held"
port=$(cat "$T/held")
refused --listen "127.0.0.1:$port"
expect_rc 1 "a port in use"
expect_contains "$err" "cannot listen on 127.0.0.1:$port: Address already in use" \
    "the bind failure names the address"
kill "$holder"

# --- the bearer token -------------------------------------------------------
token=0123456789abcdef0123456789abcdef
printf '%s\n' "$token" >"$T/token"
chmod 644 "$T/token"
port=$(free_port)
U=http://127.0.0.1:$port
# ([ssh] setup_timeout for the SIGTERM check below.)
printf '[daemon]\npoll_interval = 1\nstop_grace = 2\nlisten = 127.0.0.1:%s\ntoken_file = %s\n[ssh]\nsetup_timeout = 10\n' \
    "$port" "$T/token" >"$XDG_CONFIG_HOME/gpufleet/config.ini"
refused
expect_rc 4 "a token file others can read"
expect_contains "$err" "token_file $T/token may be read by group or others" \
    "the refusal names the file"
chmod 600 "$T/token"
"$GPUFLEET" daemon >>"$T/daemon.out" 2>>"$T/daemon.err" &
dpid=$!
daemons+=("$dpid")
wait_for 60 "daemon $dpid starts" started "$dpid"
get /
expect_eq "$code" 401 "no token"
expect_eq "$(header WWW-Authenticate | tr '\n' '|')" \
    'Bearer realm="gpufleet"|Basic realm="gpufleet", charset="UTF-8"|' \
    "401 asks for the bearer token or Basic (a browser's prompt)"
get / -H "Authorization: Bearer ${token%?}x"
expect_eq "$code" 401 "a wrong token"
get /api/v1/schedules -H "Authorization: Bearer $token-and-more"
expect_eq "$code" 401 "a longer token"
get / -H "Authorization: Bearer $token"
expect_eq "$code" 200 "the right token"
get /api/v1/schedules -H "Authorization: Bearer $token"
expect_eq "$code" 200 "the API with the token"
get /api/v1/instances/inst-1/cancel -X POST -H 'Content-Type: application/json' -d '{}'
expect_eq "$code" 401 "a POST without the token"
# The token as the password of HTTP Basic (what a browser sends).
get /api/v1/schedules -u "gpufleet:$token"
expect_eq "$code" 200 "Basic with the token as the password"
get /api/v1/schedules -u ":$token"
expect_eq "$code" 200 "Basic: any user name, an empty one too"
get /api/v1/schedules -u "gpufleet:${token%?}x"
expect_eq "$code" 401 "Basic with a wrong password"
get /api/v1/schedules -u "$token:x"
expect_eq "$code" 401 "Basic with the token as the user name"
get /api/v1/schedules -H "Authorization: Basic $(printf '%s' "$token" | base64 -w0)"
expect_eq "$code" 401 "Basic without a colon"
get /api/v1/schedules -H "Authorization: Basic $(printf 'u:%s\0x' "$token" | base64 -w0)"
expect_eq "$code" 401 "Basic with a NUL after the token"
get /api/v1/schedules -H 'Authorization: Basic !!!notbase64'
expect_eq "$code" 401 "Basic that is not base64"
get /api/v1/schedules -H "Authorization: Basic $(printf 'u:%s' "$token" | base64 -w0)==="
expect_eq "$code" 401 "Basic with too much padding"
if [ -n "$chrome" ]; then
	# A browser given the token once in the URL: the page's own fetches
	# carry it (the credentials the browser keeps for the origin).
	tokdom() {
		dom=$(browse --dump-dom "http://gpufleet:$token@127.0.0.1:$port/")
		case $dom in *'data-name="inst-2"'*) ;; *) return 1 ;; esac
	}
	wait_for 120 "the dashboard works with the token as Basic credentials" tokdom ||
	    printf '%s\n' "$dom" | head -50 >&2
	expect_match "$dom" '<span id="error" class="error" hidden' \
	    "with the token: no error shown"
fi
AUTH=(-H "Authorization: Bearer $token")

# --- actions: with the token, same-origin JSON POSTs only -----------------
get /api/v1/instances/inst-1/shutdown -X POST -H 'Content-Type: application/json' \
    -H 'Origin: http://evil.example' -d '{"in": "1h", "warn": 0}'
expect_eq "$code" 403 "a cross-site POST"
get /api/v1/instances/inst-1/shutdown -X POST -H 'Content-Type: application/json' \
    -H "Origin: https://evil.example:$port" -d '{"in": "1h", "warn": 0}'
expect_eq "$code" 403 "a cross-site POST over https"
get /api/v1/instances/inst-1/shutdown -X POST -H 'Content-Type: application/json' \
    -H "Origin: null" -d '{"in": "1h", "warn": 0}'
expect_eq "$code" 403 "a POST from an opaque origin (Origin: null)"
expect_contains "$(printf '%s' "$body" | jq -r .error)" "cross-origin" "403 says why"
get /api/v1/instances/inst-1/shutdown -X POST -H 'Content-Type: text/plain' \
    -d '{"in": "1h", "warn": 0}'
expect_eq "$code" 415 "a POST a form could send (text/plain)"
get /api/v1/instances/inst-1/shutdown -X POST -H 'Content-Type: application/json' \
    -d '{"in": "1h", "at": "02:00"}'
expect_eq "$code" 400 "two deadlines at once"
get /api/v1/instances/inst-1/shutdown -X POST -H 'Content-Type: application/json' \
    -d '{"in": "-rf /"}'
expect_eq "$code" 400 "a duration with odd characters"
expect_eq "$(armed)" 0 "the refused POSTs armed nothing"

get /api/v1/instances/inst-1/shutdown -X POST -H 'Content-Type: application/json' \
    -H "Origin: $U" -d '{"in": "1h", "warn": 0}'
expect_eq "$code" 200 "a same-origin shutdown (stderr: $body)"
id=$(printf '%s' "$body" | jq -r '.[0].id')
expect_match "$id" '^d-[0-9a-f]{8}$' "the answer is shutdown --json's"
expect_eq "$(armed)" 1 "the deadline is armed (shutdown ls)"
expect_contains "$("$GPUFLEET" shutdown ls inst-1 --json)" "$id" "shutdown ls has its id"
get /api/v1/instances/inst-1/cancel -X POST -H 'Content-Type: application/json' -d '{}'
expect_eq "$code" 200 "cancel (no Origin: same-origin by default)"
expect_contains "$(printf '%s' "$body" | jq -r '.output[0]')" "inst-1  cancelled 1 deadline" \
    "cancel's lines"
expect_eq "$(armed)" 0 "cancelled"

get /metrics -X POST -H 'Content-Type: application/json' -d '{}'
expect_eq "$code" 405 "POST /metrics"

# --- SIGTERM while a request's command runs ---------------------------------
# inst-2 stops answering (TCP connects, no SSH banner): the shutdown that
# a request starts waits [ssh] setup_timeout. The daemon told to stop
# meanwhile waits for it and sends its answer before it exits.
fleet break inst-2 silent
# Eight at once, the most the daemon runs for requests: a ninth is 503.
# Seven shutdowns and a cancel.
slow=()
for k in 1 2 3 4 5 6 7 8; do
	what=shutdown
	[ "$k" = 8 ] && what=cancel
	curl -s -o "$T/slow$k.body" -w '%{http_code}' --max-time 120 -X POST "${AUTH[@]}" \
	    -H 'Content-Type: application/json' -d '{"in": "1h"}' \
	    "$U/api/v1/instances/inst-2/$what" >"$T/slow$k.code" &
	slow+=($!)
done
running_shutdowns() { [ "$(pgrep -P "$dpid" -f ' shutdown ' | wc -l)" = 8 ]; }
wait_for 60 "the requests' eight shutdowns run" running_shutdowns
get /api/v1/schedules
expect_eq "$code" 503 "a ninth command while eight run"
expect_contains "$(printf '%s' "$body" | jq -r .error)" "busy" "503 says why"
kill -TERM "$dpid"
wait "${slow[@]}"
for k in 1 2 3 4 5 6 7 8; do
	expect_eq "$(cat "$T/slow$k.code")" 502 "request $k in flight at SIGTERM is answered"
done
expect_contains "$(jq -r '.[0].error' "$T/slow1.body")" "no SSH banner" \
    "with shutdown --json's document saying why"
expect_contains "$(jq -r '.error' "$T/slow8.body")" "no SSH banner" \
    "the cancel that failed says why"
wait_for 60 "the daemon stops" gone_or_zombie "$dpid"
wait "$dpid"
rc=$?
expect_rc 0 "the daemon's exit status"
fleet heal inst-2


# --- IPv6 loopback, where this machine has ::1 -------------------------------
port6=$(python3 -c 'import socket; s = socket.socket(socket.AF_INET6); s.bind(("::1", 0)); print(s.getsockname()[1])' 2>/dev/null)
if [ -z "$port6" ]; then
	echo "SKIP the IPv6 check: no ::1 on this machine" >&2
else
	printf '[daemon]\npoll_interval = 1\nstop_grace = 2\ntoken_file = %s\n' \
	    "$T/token" >"$XDG_CONFIG_HOME/gpufleet/config.ini"
	DAEMON_ARGS="--listen [::1]:$port6" start_daemon
	U="http://[::1]:$port6"
	get /
	expect_eq "$code" 200 "GET / on [::1]"
	get /api/v1/instances/inst-1/cancel -X POST -H 'Content-Type: application/json' \
	    -H "Origin: $U" -d '{}'
	expect_eq "$code" 200 "a same-origin POST on [::1] (Origin's [::1]:PORT is the Host)"
	kill -TERM "$dpid"
	wait_for 60 "the daemon on [::1] stops" gone_or_zombie "$dpid"
	wait "$dpid"
fi

# --- off loopback: every request needs the token ----------------------------
# Listening on all addresses (connecting to 127.0.0.1 only): with
# [daemon] token_file the daemon starts, and nothing is answered without
# the token, whatever the Host a browser on the LAN sends.
printf '[daemon]\npoll_interval = 1\nstop_grace = 2\ntoken_file = %s\n' \
    "$T/token" >"$XDG_CONFIG_HOME/gpufleet/config.ini"
serve_on 0.0.0.0
AUTH=()
for path in / /api/v1/schedules /metrics; do
	get "$path"
	expect_eq "$code" 401 "off loopback, $path without the token"
	get "$path" -H "Host: gpu-box.lan:$port"
	expect_eq "$code" 401 "off loopback, $path by a LAN name without the token"
	get "$path" -H "Authorization: Bearer $token"
	expect_eq "$code" 200 "off loopback, $path with the token"
	get "$path" -H "Host: gpu-box.lan:$port" -u "gpufleet:$token"
	expect_eq "$code" 200 "off loopback, $path by a LAN name with the token (Basic)"
done

finish

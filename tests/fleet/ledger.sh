#!/usr/bin/env bash
# The truth of the books on the sandbox fleet (controller/LEDGER.md): a
# stop counts when evidence shows it took effect, and an instance changes
# the books only for what gpufleet armed there.
#   inst-1  a stop method that is not there: stopping (unconfirmed), billed
#           as running, the command's failure shown
#   inst-2  the same, retried quickly: stop_failed, an alert everywhere,
#           never stopped in the books; then the method fixed
#   inst-3  forged journal lines: rejected claims, nothing else
#   inst-4  a stop that worked while nobody read its journal: stopped from
#           the request, not an outage; started again: running again
#   inst-5  a release that worked: out of service, history kept
#   inst-6  a stop method changed after a deadline and a job's --then
#           were armed with the old one: the next contact gives them the
#           new one, and the job's stop works
. "$(dirname "$0")/../e2e/lib.sh"
. "$(dirname "$0")/lib/watcher.sh"

fleet_up 6 --group-size 1
for n in 1 2 3 4 5 6; do
	run status "inst-$n"
	expect_rc 0 "first contact with inst-$n"
done

# ledger_state NAME: the books' last word (state source note).
ledger_state() {
	sql "SELECT l.state || ' ' || l.source || ' ' || coalesce(l.note, '')
	    FROM ledger l JOIN instance i ON i.id = l.instance_id
	    WHERE i.name = '$1' ORDER BY l.t DESC, l.id DESC LIMIT 1"
}
# stops NAME STATE: stop requests of the instance in that state.
stops() {
	sql "SELECT count(*) FROM stop_request s JOIN instance i ON
	    i.id = s.instance_id WHERE i.name = '$1' AND s.state = '$2'"
}

# --- inst-1, inst-2: a stop command that is not found -----------------------
fleet setenv inst-1 GPUFLEET_AGENT_STOP_BACKOFF=3600,3600
fleet setenv inst-2 GPUFLEET_AGENT_STOP_BACKOFF=1,1
for n in 1 2; do
	run set "inst-$n" 'stop_command=remote:/nonexistent/shutdown'
	expect_rc 0 "set a broken stop method on inst-$n"
	run shutdown "inst-$n" --now --warn 0 --json
	expect_rc 0 "shutdown inst-$n --now"
done
id1=$(sql "SELECT a.id FROM armed a JOIN instance i ON i.id = a.instance_id WHERE i.name = 'inst-1'")
wait_for 60 "inst-1's stop command failed" has_event inst-1 stop_result ".status == 127"
run status inst-1
expect_rc 0 "inst-1 still answers"
expect_match "$out" "inst-1  stopping \(unconfirmed, since [^)]*\): stop $id1 \(shutdown\), billed as running until it is seen down; the stop command failed: exit 127" \
    "status: stopping, unconfirmed, and why"
expect_match "$(ledger_state inst-1)" "^running " "inst-1 is running in the books"
run status inst-1 --json
expect_eq "$(printf '%s' "$out" | jq -r '.[0].watcher.stopping[0].id')" "$id1" \
    "status --json: the unconfirmed stop"
run cost inst-1
expect_match "$out" "inst-1: stopping \(unconfirmed, since [^)]*\): stop $id1 \(shutdown\) is billed as running until it is seen down" \
    "cost: the unconfirmed stop bills"

wait_for 90 "inst-2's watcher gave up" has_event inst-2 stop_failed || show_journal inst-2
expect_eq "$(jcount inst-2 stop_result '.status == 127')" 3 "three attempts, each exit 127"
run status inst-2
expect_rc 0 "inst-2 still answers"
expect_match "$out" "inst-2  ALERT stop_failed [^ ]+ at [^:]+:[^:]+:[^:]+: the stop did not stop it; it still runs and bills" \
    "status: the alert"
expect_match "$(ledger_state inst-2)" "^running " "a failed stop never books stopped"
expect_eq "$(sql "SELECT count(*) FROM ledger l JOIN instance i ON i.id = l.instance_id WHERE i.name = 'inst-2' AND l.state = 'stopped'")" \
    0 "no stopped row at all"
expect_eq "$(stops inst-2 failed)" 1 "the stop request failed"
run cost inst-2
expect_match "$out" "inst-2: the stop d-[0-9a-f]+ failed at [^ ]+: it still runs and is billed as running" \
    "cost: the failed stop"
run events inst-2
expect_match "$out" "stop_failed" "events: stop_failed"
# The dashboard: inst-2's row in red and a banner, inst-1 stopping
# (unconfirmed); headless Chromium against a daemon, as fleet_http does.
chrome=$(command -v chromium || command -v chromium-browser || true)
if [ -z "$chrome" ]; then
	echo "SKIP the dashboard checks: no chromium (Debian package chromium)" >&2
else
	. "$(dirname "$0")/lib/daemon.sh"
	port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
	DAEMON_ARGS="--listen 127.0.0.1:$port" start_daemon
	api_alert() {
		curl -s "http://127.0.0.1:$port/api/v1/instances" |
		    jq -e '.[] | select(.name == "inst-2") | .watcher.alerts[] | select(.kind == "stop_failed")' >/dev/null
	}
	wait_for 60 "the API has inst-2's alert" api_alert
	dom=$(timeout 120 "$chrome" --headless --no-sandbox --disable-gpu \
	    --user-data-dir="$T/chrome" --virtual-time-budget=20000 \
	    --host-resolver-rules='MAP * ~NOTFOUND, EXCLUDE 127.0.0.1' \
	    --disable-background-networking --disable-component-update \
	    --disable-sync --disable-extensions --disable-default-apps \
	    --no-first-run --no-pings --disable-domain-reliability \
	    --dump-dom "http://127.0.0.1:$port/" 2>>"$T/chrome.err")
	expect_contains "$dom" '<tr data-name="inst-2" class="alert">' "the dashboard: inst-2's row in red"
	expect_match "$dom" '<div id="alerts" class="banner"><div>inst-2: the stop d-[0-9a-f]+ failed at [^<]*: it still runs and bills</div>' \
	    "the dashboard: the banner"
	expect_contains "$dom" "stopping (unconfirmed, since " "the dashboard: inst-1 is stopping, unconfirmed"
	kill "$dpid"
	wait "$dpid" 2>/dev/null || true
fi

# The method fixed: the next stop works, and is booked once seen down.
run set inst-2 'stop_command=remote:shutdown'
expect_rc 0 "fix the stop method"
run shutdown inst-2 --now --warn 0
expect_rc 0 "shutdown inst-2 again"
wait_for 90 "inst-2 stopped" is_state inst-2 stopped
run status inst-2
expect_match "$(ledger_state inst-2)" "^stopped performed stop d-" "seen down: stopped, by gpufleet"

# --- inst-3: forged journal lines -------------------------------------------
run set inst-3 'stop_command=remote:shutdown'
run shutdown inst-3 --in 1h
expect_rc 0 "arm something on inst-3 (its journal exists)"
wait_for 30 "inst-3's journal" has_event inst-3 armed
j3=$(rdir inst-3)/journal.jsonl
epoch=$(journal inst-3 'select(.event == "journal") | .epoch' | tr -d '"')
seq=$(journal inst-3 '.seq' | sort -n | tail -1)
now=$(date +%s)
for ev in 'stopping","id":"forged-1' 'stopped","id":"forged-2' \
    'local_due","id":"forged-3' 'stop_failed","id":"forged-4","reason":"x'; do
	seq=$((seq + 1))
	printf '{"epoch":"%s","seq":%d,"time":%d,"event":"%s"}\n' "$epoch" "$seq" "$now" "$ev" >>"$j3"
done
run status inst-3
expect_rc 0 "inst-3 answers"
expect_match "$out" "inst-3  ALERT claim_rejected forged-1 .*it claimed a stop gpufleet never armed; the books are unchanged" \
    "status: a rejected claim"
expect_eq "$(sql "SELECT count(*) FROM alert a JOIN instance i ON i.id = a.instance_id WHERE i.name = 'inst-3' AND a.kind = 'claim_rejected'")" \
    4 "one alert per forged line"
expect_match "$(ledger_state inst-3)" "^running observed" "the books are unchanged"
expect_eq "$(sql "SELECT count(*) FROM local_stop")" 0 "no local stop queued"
expect_eq "$(sql "SELECT count(*) FROM stop_request s JOIN instance i ON i.id = s.instance_id WHERE i.name = 'inst-3'")" \
    0 "no stop requested"
run events inst-3
expect_contains "$out" "inst-3 claimed a stop gpufleet never armed (stopping forged-1)" \
    "events: the rejected claim"

# --- inst-4: a stop that worked, its journal unread -------------------------
run set inst-4 'stop_command=remote:shutdown'
run shutdown inst-4 --now --warn 0
expect_rc 0 "shutdown inst-4 --now"
wait_for 90 "inst-4 stopped by its watcher" is_state inst-4 stopped
run status inst-4
expect_match "$(ledger_state inst-4)" "^stopped performed stop d-[0-9a-f]+ \(shutdown\)" \
    "unreachable after the deadline: stopped by gpufleet"
expect_eq "$(sql "SELECT count(*) FROM ledger l JOIN instance i ON i.id = l.instance_id WHERE i.name = 'inst-4' AND l.state = 'unknown'")" \
    0 "not unknown"
expect_eq "$(sql "SELECT count(*) FROM incident n JOIN instance i ON i.id = n.instance_id WHERE i.name = 'inst-4'")" \
    0 "not an outage"
run status inst-4
expect_rc 0 "a stopped instance is not a failure"
expect_match "$out" $'\n''inst-4 +stopped \(since ' "status: stopped (since T)"
# Started again from the console: seen by plain status, running again; the
# journal read then puts the stop at the time it was requested.
fleet start inst-4
run status inst-4
expect_match "$out" $'\n''inst-4 +up ' "inst-4 answers again"
expect_match "$(ledger_state inst-4)" "^running observed running again" "running again"
stopping=$(journal inst-4 'select(.event == "stopping") | .time')
lt=$(sql "SELECT l.t FROM ledger l JOIN instance i ON i.id = l.instance_id WHERE i.name = 'inst-4' AND l.state = 'stopped'")
checks=$((checks + 1))
[ "${lt:-0}" -ge $((stopping - 1)) ] && [ "${lt:-0}" -le $((stopping + 1)) ] ||
    fail "the stop is booked at $lt, the instance requested it at $stopping"

# --- inst-5: a release ------------------------------------------------------
run set inst-5 provider=featurize allow_release=yes
fleet setenv inst-5 UUID=feat-5
run shutdown inst-5 --now --warn 0 --yes
expect_rc 0 "release inst-5"
wait_for 90 "inst-5 released by its watcher" is_state inst-5 stopped
# Seen down once (a blip looks the same): released in the books, still
# contacted; still gone stop_confirm_seconds later: out of service.
mkdir -p "$XDG_CONFIG_HOME/gpufleet"
printf '[status]\nstop_confirm_seconds = 2\n' >>"$XDG_CONFIG_HOME/gpufleet/config.ini"
run status inst-5
expect_match "$(sql "SELECT l.state || ' ' || l.source FROM ledger l JOIN instance i ON i.id = l.instance_id WHERE i.name = 'inst-5' ORDER BY l.t DESC, l.id DESC LIMIT 1")" \
    "^released performed" "unreachable after the release: released in the books"
expect_eq "$(sql "SELECT released_at IS NULL FROM instance WHERE name = 'inst-5'")" 1 \
    "one unreachable sighting does not take it out of service"
sleep 3
run status inst-5
expect_eq "$(sql "SELECT released_at IS NOT NULL FROM instance WHERE name = 'inst-5'")" 1 \
    "a performed release, still gone: out of service"
expect_match "$(sql "SELECT l.state || ' ' || l.source FROM ledger l JOIN instance i ON i.id = l.instance_id WHERE i.name = 'inst-5' ORDER BY l.t DESC, l.id DESC LIMIT 1")" \
    "^released performed" "the books say released, by gpufleet"
run ls
checks=$((checks + 1))
case $out in *inst-5*) fail "a released instance is still listed: $out" ;; esac
run ls --all
expect_contains "$out" inst-5 "its history is kept (ls --all)"

# --- inst-6: the stop method changed after arming ---------------------------
run set inst-6 'stop_command=remote:/nonexistent/shutdown'
run shutdown inst-6 --in 1h
expect_rc 0 "a deadline armed with the broken method"
run run inst-6 --then stop -- sleep 20
expect_rc 0 "a job with --then stop, the broken method"
p6=$(rdir inst-6)/plan.json
expect_eq "$(jq -r '.stop.command' "$p6")" /nonexistent/shutdown "the plan has the old method"
run set inst-6 'stop_command=remote:shutdown'
expect_rc 0 "set the method that works"
expect_contains "$err" "inst-6: its plan arms 1 deadline, autostop off and 1 job's --then with the old stop method" \
    "set says what still has the old method"
run status inst-6
expect_rc 0 "the next contact"
expect_contains "$err" "inst-6: the stop method set now replaces the one in its plan (1 deadline, autostop off, 1 job's --then)" \
    "the contact says what it changed"
expect_eq "$(jq -r '.stop.command' "$p6")" shutdown "the plan has the new method"
run status inst-6
checks=$((checks + 1))
case $err in *"replaces the one in its plan"*) fail "rewritten again: $err" ;; esac
wait_for 120 "the job's --then stop worked with the new method" is_state inst-6 stopped ||
    show_journal inst-6
expect_eq "$(calls inst-6 shutdown)" 1 "the new method ran once"

finish

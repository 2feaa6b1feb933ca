#!/usr/bin/env bash
# Notifications against local receivers (tests/harness/hookrecv.py) on
# 127.0.0.1: HTTPS with a certificate made here (passed as ca_file) and
# plain HTTP. Failed schedule runs (an instance nobody can reach) are the
# events. Checked: the body of each format; Feishu's and DingTalk's
# signatures, verified by the receiver with the platforms' algorithms;
# a retry after a 500; the spacing of min_interval and DingTalk's
# default; a hung receiver holds up no other target and, cut off by
# SIGTERM, becomes "unknown", never sent again; no message twice across
# a daemon restart; flush (refused while a daemon runs); notify ls never
# shows a URL's secret part; notify test; the config's errors.
. "$(dirname "$0")/lib.sh"
export TZ=UTC XDG_STATE_HOME="$T/state"
db=$XDG_DATA_HOME/gpufleet/fleet.db
sql() { sqlite3 -cmd '.timeout 20000' "$db" "$@"; }
cfg=$XDG_CONFIG_HOME/gpufleet/config.ini
mkdir -p "$XDG_CONFIG_HOME/gpufleet" "$T/r"
RECV=$GPUFLEET_SRC/tests/harness/hookrecv.py

wait_for() {
	local limit=$1 what=$2 end
	shift 2
	end=$((SECONDS + limit))
	while ! "$@"; do
		if [ "$SECONDS" -ge "$end" ]; then
			checks=$((checks + 1))
			fail "$what (not within ${limit}s)"
			return 1
		fi
		sleep 0.2
	done
	checks=$((checks + 1))
}

# --- the receivers ------------------------------------------------------
openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=127.0.0.1 \
    -addext subjectAltName=IP:127.0.0.1 -keyout "$T/r/key.pem" \
    -out "$T/r/cert.pem" 2>/dev/null || { echo "openssl req failed" >&2; exit 1; }
echo 'SECfeishu0123' >"$T/r/feishu.secret"
echo 'SECdingtalk4567' >"$T/r/ding.secret"
pids=()
cleanup_hooks=('for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done' "${cleanup_hooks[@]}")
python3 "$RECV" --port-file "$T/r/a.port" --log "$T/r/a.log" \
    --cert "$T/r/cert.pem" --key "$T/r/key.pem" --hang /hang --slow /slow \
    --feishu-secret SECfeishu0123 --dingtalk-secret SECdingtalk4567 &
pids+=($!)
python3 "$RECV" --port-file "$T/r/b.port" --log "$T/r/b.log" --fail-first 1 &
pids+=($!)
have() { [ -s "$1" ]; }
wait_for 30 "receiver A listens" have "$T/r/a.port"
wait_for 30 "receiver B listens" have "$T/r/b.port"
A=https://127.0.0.1:$(cat "$T/r/a.port")
B=http://127.0.0.1:$(cat "$T/r/b.port")
touch "$T/r/a.log" "$T/r/b.log"

# --- config errors --------------------------------------------------------
bad() {
	printf '%b' "$1" >"$T/bad.ini"
	run --config "$T/bad.ini" notify ls
	expect_rc 4 "config error: $2"
	expect_contains "$err" "$2" "config error names it"
	expect_one_error_line "config error: $2"
}
bad '[notify.x]\nurl = https://h/\nevents = job_failed, jobs_finished\n' "unknown event 'jobs_finished'"
bad '[notify.x]\nurl = https://h/\nformat = teams\n' "format 'teams' must be"
bad '[notify.x]\nurl = ftp://h/x\n' "only http:// and https://"
bad '[notify.x]\nformat = slack\n' "[notify.x] needs one of url and url_file"
bad '[notify.x]\nurl = https://h/\nmin_interval = soon\n' "min_interval 'soon'"
bad '[notify.x]\nurl = https://h/\nfrom_instances = maybe\n' "from_instances 'maybe'"
bad '[notify.x]\nurl = https://h/\ncolour = red\n' "unknown key 'colour' in [notify.x]"

# --- the targets ----------------------------------------------------------
echo "$A/ntfy/gpufleet-topic-secret" >"$T/r/ntfy.url"
cat >"$cfg" <<EOT
[daemon]
poll_interval = 1
stop_grace = 2

[notify.slack]
url = $A/slack/T000/B000/slacksecret
format = slack
ca_file = $T/r/cert.pem
events = schedule_failed

[notify.discord]
url = $A/discord/api/webhooks/1/discordsecret
format = discord
ca_file = $T/r/cert.pem

[notify.feishu]
url = $A/feishu/open-apis/bot/v2/hook/feishusecret
format = feishu
secret_file = $T/r/feishu.secret
ca_file = $T/r/cert.pem

[notify.ding]
url = $A/dingtalk/robot/send?access_token=dingsecret
format = dingtalk
secret_file = $T/r/ding.secret
ca_file = $T/r/cert.pem

[notify.ntfy]
url_file = $T/r/ntfy.url
format = ntfy
ca_file = $T/r/cert.pem

[notify.json]
url = $A/json/jsonsecret
min_interval = 2s
ca_file = $T/r/cert.pem

[notify.retry]
url = $B/retry
events = schedule_failed guard

[notify.hang]
url = $A/hang/hangsecret
ca_file = $T/r/cert.pem
timeout = 60s
retries = 0

[notify.other]
url = $A/other
events = job_failed
EOT
run notify ls
expect_rc 0 "notify ls"
expect_match "$(printf '%s\n' "$out" | head -1)" '^NAME +FORMAT +EVENTS +URL +PENDING +FAILED$' "ls header"
expect_match "$(printf '%s\n' "$out" | grep '^ding ')" "^ding +dingtalk +all +https://127.0.0.1:[0-9]+/\.\.\. +0 +0$" "ls: ding"
expect_match "$(printf '%s\n' "$out" | grep '^other ')" "^other +json +job_failed " "ls: events"
case $out in *secret*) fail "notify ls shows a URL's secret part: $out" ;; esac
run notify ls --json
expect_eq "$(printf '%s' "$out" | jq -c '[.[] | select(.name == "ding") | .min_interval, .format, .url]')" \
    "[3,\"dingtalk\",\"$A/...\"]" "ls --json: DingTalk's default spacing, redacted url"

# --- events: three failed schedule runs -----------------------------------
run add dead 127.0.0.1:1
run schedule add dead --cron '0 3 * * *' --do exec --name nightly -- true
expect_rc 0 "schedule add"
# A manual run is one a second: the next second's, when refused (exit 2).
run_failing() {
	local tries=0
	run schedule run nightly
	while [ "$rc" = 2 ] && [ $tries -lt 50 ]; do
		sleep 0.1
		tries=$((tries + 1))
		run schedule run nightly
	done
	expect_rc 1 "schedule run fails"
}
for i in 1 2 3; do run_failing; done
expect_eq "$(sql 'SELECT count(*) FROM notify_msg')" 3 "three messages queued"
expect_eq "$(sql "SELECT count(*) FROM notify_send WHERE state = 'pending'")" 24 \
    "one pending send per subscribed target (not 'other')"
run notify queue --json
expect_eq "$(printf '%s' "$out" | jq -r '.[0].kind + " " + .[0].state')" "schedule_failed pending" "queue --json"
expect_match "$(printf '%s' "$out" | jq -r '.[0].text')" \
    '^gpufleet: schedule nightly: manual run of .*: failed: 1 of 1 hosts failed at [0-9]{2}:[0-9]{2} UTC\. Next: gpufleet events --since -1h$' \
    "the message: what, when, the next command"

# --- daemon 1: sends; the hung target holds up nobody; SIGTERM ------------
daemons=()
cleanup_hooks=('for p in "${daemons[@]}"; do kill -9 "$p" 2>/dev/null; done' "${cleanup_hooks[@]}")
started() { grep -q "daemon started: pid $1," "$XDG_STATE_HOME/gpufleet/daemon.log" 2>/dev/null; }
start_daemon() {
	"$GPUFLEET" daemon --listen none >>"$T/daemon.out" 2>&1 &
	dpid=$!
	daemons+=("$dpid")
	wait_for 60 "daemon $dpid starts" started "$dpid"
}
hits() { grep -c "\"path\": \"$1" "$T/r/${2:-a}.log"; }
at_least() { [ "$("${@:2}")" -ge "$1" ]; }
gone() { ! kill -0 "$1" 2>/dev/null; }
start_daemon
wait_for 60 "slack gets all three while the hung target hangs" at_least 3 hits /slack
wait_for 60 "the hung receiver got its request" at_least 1 hits /hang
expect_eq "$(sql "SELECT state FROM notify_send WHERE target = 'hang' AND msg_id = 1")" sending \
    "the hung send is in flight"
kill -TERM "$dpid"
wait_for 60 "daemon 1 stops within its grace" gone "$dpid"
wait "$dpid"
expect_eq "$?" 0 "daemon 1 exit status"
expect_eq "$(sql "SELECT state FROM notify_send WHERE target = 'hang' AND msg_id = 1")" unknown \
    "the send cut off by SIGTERM is unknown"
expect_contains "$(sql "SELECT last_error FROM notify_send WHERE target = 'hang' AND msg_id = 1")" \
    "may not have arrived" "unknown says why"

# --- daemon 2: the rest, nothing twice -------------------------------------
start_daemon
run notify flush
expect_rc 2 "flush refused while a daemon runs"
expect_contains "$err" "a daemon (pid $dpid) runs on" "flush names the daemon"
left() { [ "$(sql "SELECT count(*) FROM notify_send WHERE target <> 'hang' AND state <> 'sent'")" = 0 ]; }
wait_for 90 "everything but the hung target sent" left
wait_for 60 "the hung receiver got the second message" at_least 2 hits /hang
# A crash mid-send: the row stays claimed until a sender finds it dead.
kill -9 "$dpid"
wait_for 60 "daemon 2 is gone" gone "$dpid"
expect_eq "$(sql "SELECT state FROM notify_send WHERE target = 'hang' AND msg_id = 2")" sending \
    "claimed by the killed daemon"
start_daemon
is_unknown() { [ "$(sql "SELECT state FROM notify_send WHERE target = 'hang' AND msg_id = 2")" = unknown ]; }
wait_for 60 "the next daemon marks it unknown, not pending" is_unknown
expect_contains "$(sql "SELECT last_error FROM notify_send WHERE target = 'hang' AND msg_id = 2")" \
    "died mid-send: may not have arrived" "unknown after a crash says why"
wait_for 60 "daemon 3 tries the third message" at_least 3 hits /hang
kill -TERM "$dpid"
wait_for 60 "daemon 3 stops" gone "$dpid"
expect_eq "$(sql "SELECT state || ' ' || attempts FROM notify_send WHERE target = 'hang' ORDER BY msg_id" | tr '\n' ' ')" \
    "unknown 1 unknown 1 unknown 1 " "no unknown row is sent again"

for p in /slack /discord /feishu /dingtalk /ntfy /json; do
	expect_eq "$(jq -r "select(.path | startswith(\"$p\")) | .body" "$T/r/a.log" | sort | uniq -d | wc -l)" 0 \
	    "$p: no message twice"
	expect_eq "$(hits $p)" 3 "$p: three requests"
done
expect_eq "$(hits /retry b)" 4 "retry: one 500, then three"
expect_eq "$(jq -r 'select(.path == "/retry") | .status' "$T/r/b.log" | head -2 | tr '\n' ' ')" "500 200 " \
    "the first answer was a 500, the retry got through"
expect_eq "$(jq -r 'select(.path == "/retry") | .body' "$T/r/b.log" | sort | uniq -c | awk '$1 > 1 && ++n' | wc -l)" 1 \
    "only the message answered 500 arrived twice"
expect_contains "$(sql "SELECT why FROM action_log WHERE kind = 'notify_failed' AND name = 'retry'")" \
    "HTTP 500 (attempt 1, again in" "the 500 is in events"
expect_eq "$(hits /hang)" "$(sql "SELECT count(*) FROM notify_send WHERE target = 'hang' AND state = 'unknown'")" \
    "the hung target: one request per unknown row"
expect_eq "$(jq -r 'select(.path | startswith("/hang")) | .body' "$T/r/a.log" | sort | uniq -d | wc -l)" 0 \
    "the hung target: no message twice"

# Bodies.
body() { jq -c "select(.path | startswith(\"$1\")) | .body | fromjson | $2" "$T/r/a.log" | head -1; }
expect_match "$(body /slack 'keys')" '^\["text"\]$' "slack body"
expect_match "$(body /discord 'keys')" '^\["content"\]$' "discord body"
expect_eq "$(body /feishu '[.msg_type, (.content | keys), (.timestamp | type), (.sign | type)]')" \
    '["text",["text"],"string","string"]' "feishu body"
expect_eq "$(body /dingtalk '[.msgtype, (.text | keys)]')" '["text",["content"]]' "dingtalk body"
expect_eq "$(body /json 'keys')" '["instance","kind","next","text","time"]' "json body"
expect_eq "$(body /json '[.kind, .next]')" '["schedule_failed","gpufleet events --since -1h"]' "json fields"
expect_match "$(jq -r 'select(.path | startswith("/ntfy")) | .headers.title' "$T/r/a.log" | head -1)" \
    '^gpufleet: schedule_failed$' "ntfy Title header"
expect_match "$(jq -r 'select(.path | startswith("/ntfy")) | .headers["content-type"] + " " + .body' "$T/r/a.log" | head -1)" \
    '^text/plain; charset=utf-8 gpufleet: schedule nightly' "ntfy plain text body"
expect_eq "$(jq -r 'select(.path | startswith("/feishu")) | .sig' "$T/r/a.log" | sort | uniq -c | awk '{print $1, $2}')" \
    "3 ok" "feishu signatures verified"
expect_eq "$(jq -r 'select(.path | startswith("/dingtalk")) | .sig' "$T/r/a.log" | sort | uniq -c | awk '{print $1, $2}')" \
    "3 ok" "dingtalk signatures verified"
expect_match "$(jq -r 'select(.path | startswith("/dingtalk")) | .query' "$T/r/a.log" | head -1)" \
    '^access_token=dingsecret&timestamp=[0-9]{13}&sign=[A-Za-z0-9%]+$' "dingtalk: ms timestamp, URL-encoded sign"

# Spacing: the senders' claim times in the queue (last_at, whole seconds
# of the clock the pace is kept by), not when requests arrived: each of
# the three rows was tried once, and no claim follows the last sooner than
# the target's spacing, however fast or slow the machine. Sent without
# spacing, all three go in the same second or two.
claims_spaced() {
	sql "SELECT attempts, last_at FROM notify_send WHERE target = '$1' AND msg_id <= 3 ORDER BY last_at" |
	    awk -F'|' -v min="$2" '$1 != 1 { bad = 1 } NR > 1 && $2 - prev < min { bad = 1 }
		{ prev = $2 } END { exit bad || NR != 3 }'
}
checks=$((checks + 2))
claims_spaced ding 3 || fail "dingtalk claims closer than its 3 s default: $(sql "SELECT group_concat(last_at) FROM notify_send WHERE target = 'ding'")"
claims_spaced json 2 || fail "json claims closer than its min_interval 2s: $(sql "SELECT group_concat(last_at) FROM notify_send WHERE target = 'json'")"

# --- every attempt in events ----------------------------------------------
run events
expect_match "$(printf '%s\n' "$out" | grep -c 'notify_sent')" '^2[0-9]$' "notify_sent rows in events"
expect_contains "$out" "schedule_failed to feishu: sent (HTTP 200, attempt 1)" "events: a sent one"

# --- flush without a daemon -------------------------------------------------
run_failing
# A cost guard firing: a guard event, queued once per firing.
run add g1 10.0.0.1 --price 360000/h --billing second
run mark g1 running --at -1h
run guard add g1 --max-cost 10 --per day --do warn --name daily
expect_rc 0 "guard add"
run guard check
expect_rc 0 "guard check"
run guard check
expect_eq "$(sql "SELECT count(*) FROM notify_msg WHERE kind = 'guard' AND instance = 'g1'")" 1 \
    "the guard's firing queued once"
expect_match "$(sql "SELECT text FROM notify_msg WHERE kind = 'guard'")" \
    '^gpufleet: g1 guard daily warns: g1: cost .* passed 10\.00 at [0-9:]+ UTC\. Next: gpufleet cost$' \
    "the guard message"
python3 - "$cfg" "$T/nohang.ini" <<'PY'
import sys, re
s = open(sys.argv[1]).read()
s = re.sub(r"\[notify\.hang\][^\[]*", "", s)
open(sys.argv[2], "w").write(s)
PY
run --config "$T/nohang.ini" notify flush
expect_rc 0 "flush sends the new message"
expect_eq "$(hits /slack)" 4 "flush: slack got the fourth, not the guard's"
expect_eq "$(hits /dingtalk)" 5 "flush: dingtalk got both"
expect_eq "$(jq -r 'select(.path | startswith("/json")) | .body | fromjson | select(.kind == "guard") | .instance' "$T/r/a.log")" \
    g1 "flush: the guard's message as json"
expect_eq "$(sql "SELECT count(*) FROM notify_send WHERE msg_id = 4 AND state = 'sent'")" 7 \
    "flush: sent to every configured target"
expect_eq "$(sql "SELECT state FROM notify_send WHERE msg_id = 4 AND target = 'hang'")" pending \
    "a target no longer configured keeps its row"

# --- SIGTERM: a send in flight finishes within the stop grace --------------
cat >"$T/slow.ini" <<EOT
[daemon]
poll_interval = 1
stop_grace = 30

[notify.slow]
url = $A/slow
ca_file = $T/r/cert.pem
EOT
export GPUFLEET_CONFIG=$T/slow.ini
run_failing
start_daemon
arrived() { [ "$(jq -r 'select(.path == "/slow") | .status' "$T/r/a.log" | grep -c arrived)" -ge 1 ]; }
wait_for 60 "the slow receiver has the request" arrived
kill -TERM "$dpid"
wait_for 60 "the daemon stops once the send is over" gone "$dpid"
unset GPUFLEET_CONFIG
expect_eq "$(sql "SELECT state FROM notify_send WHERE target = 'slow'")" sent \
    "the send in flight at SIGTERM finished"
expect_eq "$(jq -r 'select(.path == "/slow") | .status' "$T/r/a.log" | tr '\n' ' ')" "arrived 200 " \
    "answered once"

# --- notify test ----------------------------------------------------------
run --config "$T/nohang.ini" notify test feishu
expect_rc 0 "notify test feishu"
expect_eq "$out" 'feishu: sent (HTTP 200): {"code":0,"msg":"success"}' "test prints the answer"
expect_contains "$(sql "SELECT why FROM action_log WHERE kind = 'notify_sent' ORDER BY id DESC LIMIT 1")" \
    "test to feishu: sent" "test is recorded"
expect_eq "$(jq -r 'select(.path | startswith("/feishu")) | .sig' "$T/r/a.log" | tail -1)" ok "test is signed"
run --config "$T/nohang.ini" notify test nosuch
expect_rc 2 "test of an unknown target"
echo 'WRONGsecret' >"$T/r/feishu.secret"
run --config "$T/nohang.ini" notify test feishu
expect_rc 1 "a bad signature fails"
expect_contains "$out" "feishu: failed: code 19021: sign match fail" "Feishu's error is shown"

finish

#!/usr/bin/env bash
# gpufleet speed on the loopback fleet: bad input, plausible numbers
# (positive and finite, not timed thresholds) stored and shown per platform
# by speed, cost --by provider and advise, a short download caught, a hung
# transfer held to --timeout, a slow peer measured (not failed) at its own
# rate, and an unreachable instance.
. "$(dirname "$0")/../e2e/lib.sh"
export GPUFLEET_NO_PROGRESS=1
: "${GPUFLEET_SLOWPEER:=$GPUFLEET_SRC/build/tests/slowpeer}"
db=$XDG_DATA_HOME/gpufleet/fleet.db
sql() { sqlite3 "$db" "$@"; }

fleet_up 4
run set inst-1 provider=loop
run set inst-2 provider=loop
run set inst-3 provider=other
expect_rc 0 "set provider"

# --- bad input: one line, exit 2, nothing stored ---------------------------
bad() {
	run speed "$@"
	expect_rc 2 "speed $*"
	expect_one_error_line "speed $*"
}
bad inst-1 --size 0
expect_contains "$err" "--size: '0' is out of range (1M to 1G)" "size 0"
bad inst-1 --size 2G
expect_contains "$err" "--size: '2G' is out of range (1M to 1G)" "size 2G"
bad inst-1 --size lots
expect_contains "$err" "--size: 'lots' is not a size (e.g. 64M, 1G)" "size word"
bad inst-1 -f 0
expect_contains "$err" "--fanout '0' is not a number of instances (1-256)" "fanout 0"
bad inst-1 --timeout 0
expect_contains "$err" "--timeout '0' is out of range (1s to 1h00m)" "timeout 0"
bad
expect_contains "$err" "needs one SELECTOR" "no selector"
bad inst-1 inst-2
expect_eq "$(sql 'SELECT count(*) FROM speed')" 0 "bad input stores nothing"

# --- two instances of one platform ------------------------------------------
run speed inst-1,inst-2 --size 4M
expect_rc 0 "speed on two instances"
rate='[0-9]+(\.[0-9])? [kMG]?B/s'
expect_match "$out" "^NAME +DOWNLOAD +UPLOAD +RTT" "table header"
expect_match "$(grep '^inst-1 ' <<<"$out")" "^inst-1 +$rate +$rate +[0-9]+(\.[0-9])? ms$" \
    "inst-1 row"
expect_match "$(grep '^inst-2 ' <<<"$out")" "^inst-2 +$rate +$rate +[0-9]+(\.[0-9])? ms$" \
    "inst-2 row"
expect_match "$out" "  loop: download $rate, upload $rate, rtt [0-9.]+ ms over 2 runs" \
    "median per platform after the run"
expect_eq "$(sql 'SELECT count(*) FROM speed')" 2 "one run stored per instance"
# Plausible: both rates above zero and finite (SQLite keeps inf as 9e999),
# the round trip not negative, the size as asked (4 MiB = 4194304 bytes).
expect_eq "$(sql "SELECT count(*) FROM speed WHERE up_Bps > 0 AND
    down_Bps > 0 AND up_Bps < 1e15 AND down_Bps < 1e15 AND rtt_ms >= 0 AND
    rtt_ms < 1e6 AND size = 4194304")" 2 "stored numbers are plausible"

run speed inst-1 --size 1M --json
expect_rc 0 "speed --json"
one=$(tr -d ' \n' <<<"$out")
expect_match "$one" '^\[\{"name":"inst-1","download_Bps":[1-9][0-9]*,"upload_Bps":[1-9][0-9]*,"rtt_ms":[0-9.e+-]+,"size":1048576,"error":null\}\]$' \
    "JSON result"
expect_eq "$(sql "SELECT count(*) FROM speed s JOIN instance i ON i.id = s.instance_id WHERE i.name = 'inst-1'")" \
    2 "the JSON run is stored too"

# --- shown per platform ------------------------------------------------------
run cost --by provider
expect_rc 0 "cost --by provider"
expect_contains "$out" "speed (median):" "cost: speed heading"
expect_match "$out" "^  loop: download $rate, upload $rate, rtt [0-9.]+ ms over 3 runs$" \
    "cost: the loop platform's medians over 3 runs"
expect_eq "$(grep -c 'other:' <<<"$out")" 0 "cost: no line for a platform never measured"
run cost --json
expect_rc 0 "cost --json"
expect_eq "$(jq -c '[.speed_by_provider[] | .provider, .runs]' <<<"$out")" '["loop",3]' \
    "cost --json: the loop platform's medians over 3 runs, no other platform"
expect_eq "$(jq '.speed_by_provider[0] | (.download_Bps > 0) and (.upload_Bps > 0) and
    (.rtt_ms >= 0) and (.download_Bps | floor == .)' <<<"$out")" true \
    "cost --json: medians in bytes per second and ms"
run advise
expect_rc 0 "advise"
expect_match "$out" "^loop: download $rate, upload $rate, rtt [0-9.]+ ms over 3 runs$" \
    "advise: the loop platform's medians"
run advise --json
expect_match "$(tr -d ' \n' <<<"$out")" '"kind":"speed","name":"loop","message":"download' \
    "advise --json: kind speed"

# --- a download that comes back short ---------------------------------------
# inst-3's head gives half of what was asked: the bytes are counted, not
# trusted.
d3=$(instance_dir inst-3)
cat >"$d3/bin/head" <<'SH'
#!/bin/sh
exec /usr/bin/head -c 524288 /dev/zero
SH
chmod +x "$d3/bin/head"
run speed inst-3 --size 1M
expect_rc 1 "a short download fails the instance"
expect_eq "$err" "gpufleet: inst-3: download: got 524288 of 1048576 bytes" \
    "short download: message"
expect_eq "$(sql "SELECT count(*) FROM speed s JOIN instance i ON i.id = s.instance_id WHERE i.name = 'inst-3'")" \
    0 "short download: nothing stored"

# --- a transfer that never ends: --timeout holds -----------------------------
# The peer is up (the login and round trips work) but its head hangs.
printf '#!/bin/sh\nexec sleep 60\n' >"$d3/bin/head"
out=$(timeout 120 "$GPUFLEET" speed inst-3 --size 1M --timeout 3s --json 2>"$T/err")
rc=$?
expect_rc 1 "a hung download fails the instance (124: the deadline did not hold)"
expect_match "$(tr -d '\n' <<<"$out")" '"code": "timeout", +"message": "download did not finish within 3s' \
    "hung download: reason"
rm "$d3/bin/head"

# --- a slow peer is not a dead one -------------------------------------------
# A relay in front of inst-3's sshd holds every piece of at most 64 KiB from
# the server for 100 ms: the download of 1 MiB (16 pieces after the exec
# reply) takes at least 1.5 s, so whatever the machine's load its rate
# stays under 1048576 / 1.5 = 699051 B/s. Measured, stored, not failed.
key=$(awk '$1 == "IdentityFile" { print $2; exit }' "$D/ssh_config")
port=$(awk '$1 == "Port" { print $2; exit }' "$D/ssh_config")
user=$(awk '$1 == "User" { print $2; exit }' "$D/ssh_config")
rm -f "$T/slow.port"
"$GPUFLEET_SLOWPEER" "$T/slow.port" relay "$port" 100 65536 &
cleanup_hooks+=("kill $! 2>/dev/null")
for _ in $(seq 100); do
	[ -s "$T/slow.port" ] && break
	sleep 0.1
done
read -r sport <"$T/slow.port" || { echo "slowpeer did not start" >&2; exit 1; }
run add slow "$user@127.0.0.1:$sport" --identity "$key"
expect_rc 0 "add the slow peer"
run speed slow --size 1M --timeout 1m --json
expect_rc 0 "a slow peer is measured"
down=$(tr -d ' \n' <<<"$out" | sed -n 's/.*"download_Bps":\([0-9]*\).*/\1/p')
expect_match "$down" '^[0-9]+$' "slow peer: a download rate"
[ -n "$down" ] && [ "$down" -gt 0 ] && [ "$down" -lt 699051 ] ||
    fail "slow peer: download $down B/s is not between 0 and 699051"
expect_eq "$(sql "SELECT count(*) FROM speed s JOIN instance i ON i.id = s.instance_id WHERE i.name = 'slow'")" \
    1 "slow peer: stored"

# --- one instance unreachable, the others measured --------------------------
fleet break inst-4 refuse
run speed inst-2,inst-4 --size 1M
expect_rc 1 "an unreachable instance gives 1"
expect_match "$out" "^inst-2 +$rate" "the reachable one is measured"
expect_match "$err" "^gpufleet: inst-4: login: " "the unreachable one: reason"
expect_eq "$(sql "SELECT count(*) FROM speed s JOIN instance i ON i.id = s.instance_id WHERE i.name = 'inst-4'")" \
    0 "unreachable: nothing stored"

finish

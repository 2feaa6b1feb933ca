#!/usr/bin/env bash
# Deadlines hold whatever the peer does: a server that streams pre-banner
# text, a command that prints for ever (default and -o modes), a server that
# trickles bytes, and a slow server that is not a dead one.
. "$(dirname "$0")/../e2e/lib.sh"
export GPUFLEET_NO_PROGRESS=1
: "${GPUFLEET_SLOWPEER:=$GPUFLEET_SRC/build/tests/slowpeer}"

fleet_up 1
key=$(awk '$1 == "IdentityFile" { print $2; exit }' "$D/ssh_config")
port=$(awk '$1 == "Port" { print $2; exit }' "$D/ssh_config")
user=$(awk '$1 == "User" { print $2; exit }' "$D/ssh_config")
run exec inst-1 -- true
expect_rc 0 "the fleet answers"

# slowpeer NAME MODE ARGS...: start a misbehaving server and add it to the
# inventory as NAME.
slowpeer() {
	local name=$1 p
	shift
	rm -f "$T/$name.port"
	"$GPUFLEET_SLOWPEER" "$T/$name.port" "$@" &
	cleanup_hooks+=("kill $! 2>/dev/null")
	for _ in $(seq 100); do
		[ -s "$T/$name.port" ] && break
		sleep 0.1
	done
	read -r p <"$T/$name.port" || { echo "slowpeer did not start" >&2; exit 1; }
	"$GPUFLEET" add "$name" "$user@127.0.0.1:$p" --identity "$key" >/dev/null ||
	    { echo "add $name failed" >&2; exit 1; }
}

# reason: the error code of the one host in $out (JSON).
reason() { sed -n 's/.*"error":{"code":"\([a-z_]*\)".*/\1/p' <<<"$out"; }

# --- a server that streams pre-banner lines for ever ----------------------
# Every read used to re-add the deadline timer, which took the fired timer
# off libevent's active list: the 2 s limit was held off for minutes.
slowpeer chatty prebanner
out=$(timeout 120 "$GPUFLEET" exec chatty --json --connect-timeout 2 -- true \
    2>"$T/err")
rc=$?
expect_rc 1 "a pre-banner stream fails the host (124: the deadline never came)"
expect_eq "$(reason)" connect_timeout "pre-banner stream: reason"
expect_contains "$out" "no SSH banner within 2s" "pre-banner stream: message"

# --- a command that prints for ever ----------------------------------------
# A slow reader on stdout keeps gpufleet busy writing, so the socket always
# has data when the loop comes round: the old engine never let the timer run
# (it was killed by the outer timeout every time).
slow_reader() { while [ "$(head -c 65536 | wc -c)" -gt 0 ]; do sleep 0.05; done; }
timeout 120 "$GPUFLEET" exec inst-1 -t 2 -- yes 2>"$T/err" | slow_reader
rc=${PIPESTATUS[0]}
err=$(cat "$T/err")
expect_rc 1 "yes with -t 2 into a slow reader ends (124: the deadline never came)"
expect_contains "$err" "1 failed (timeout 1)" "yes: timed out"

mkdir -m 700 "$T/o"
timeout 120 "$GPUFLEET" exec inst-1 -t 2 -o "$T/o" -- \
    'while :; do echo "a line of output that never ends"; done' \
    >"$T/out" 2>"$T/err"
rc=$?
err=$(cat "$T/err")
expect_rc 1 "endless output with -o ends (124: the deadline never came)"
expect_contains "$err" "1 failed (timeout 1)" "-o: timed out"
checks=$((checks + 1))
[ -s "$T/o/inst-1.out" ] || fail "-o: no output was written before the deadline"
rm -rf "$T/o"

# --- a slow server is not a dead one --------------------------------------
# Each piece the server sends waits 700 ms: set-up takes several seconds,
# more than --connect-timeout, yet the server is never silent for long.
slowpeer slow relay "$port" 700 65536
run exec slow --json --connect-timeout 2 --setup-timeout 10 -- echo made it
expect_rc 0 "a slow server gets through"
expect_contains "$out" '"stdout":"made it\n"' "slow server: output"
ms=$(sed -n 's/.*"duration_ms":\([0-9]*\).*/\1/p' <<<"$out")
checks=$((checks + 1))
# Not a timing assertion: the relay's sleeps alone add up to more than 2 s,
# so this only proves the test exercised what it claims.
[ "${ms:-0}" -gt 2000 ] || fail "the relay did not slow set-up past 2 s: $ms ms"

# --- a server that trickles bytes for ever ---------------------------------
# One byte every 200 ms after the banner: never silent for a second, never
# done; the overall cap (10 x --setup-timeout) ends it.
slowpeer trickle relay "$port" 200 1
out=$(timeout 120 "$GPUFLEET" exec trickle --json --connect-timeout 5 \
    --setup-timeout 1 -- true 2>"$T/err")
rc=$?
expect_rc 1 "a trickling server fails the host (124: no cap)"
expect_eq "$(reason)" connect_timeout "trickle: reason"
expect_contains "$out" "session set-up did not finish within 10s" \
    "trickle: message names the cap"

# --- a server that goes silent after its banner -----------------------------
# (the limit from the config's [ssh] setup_timeout this time)
slowpeer mute relay "$port" 60000 65536
printf '[ssh]\nsetup_timeout = 1\n' >"$T/setup.ini"
out=$(timeout 120 "$GPUFLEET" --config "$T/setup.ini" exec mute --json \
    --connect-timeout 5 -- true 2>"$T/err")
rc=$?
expect_rc 1 "a server silent after its banner fails the host"
expect_contains "$out" "nothing from the server for 1s" \
    "silent after banner: message"

run exec inst-1 --setup-timeout 0 -- true
expect_rc 2 "--setup-timeout 0 is a usage error"

finish

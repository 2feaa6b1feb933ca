#!/usr/bin/env bash
# [ssh] handshake_window: auto, off and fixed sizes all reach every host of
# a fleet of 20 with its own output; a handshake that never completes
# frees its place when it fails (a window of 1 behind a server that never
# sends a banner still reaches the rest); bad values are refused.
# Correctness only: how fast each setting is belongs to bench/exec.sh.
. "$(dirname "$0")/../e2e/lib.sh"
: "${GPUFLEET_SLOWPEER:=$GPUFLEET_SRC/build/tests/slowpeer}"
export GPUFLEET_NO_PROGRESS=1

fleet_up 20
cfg=$XDG_CONFIG_HOME/gpufleet/config.ini
mkdir -p "$(dirname "$cfg")"

# every_host_said_its_name LABEL: each inst-K printed "inst-K: inst-K" once.
every_host_said_its_name() {
	local k bad=0
	for k in $(seq 20); do
		[ "$(grep -cx "inst-$k: inst-$k" <<<"$out")" = 1 ] || bad=$((bad + 1))
	done
	expect_eq "$bad" 0 "$1: hosts without exactly their own line"
	expect_eq "$(wc -l <<<"$out")" 20 "$1: 20 lines in all"
}

for w in off auto 1 3 256; do
	printf '[ssh]\nhandshake_window = %s\n' "$w" >"$cfg"
	run exec all -f 20 -- 'echo "$GPUFLEET_INSTANCE"'
	expect_rc 0 "handshake_window = $w: exec on 20"
	expect_contains "$err" "20 hosts: 20 ok" "handshake_window = $w: summary"
	every_host_said_its_name "handshake_window = $w"
done

# No setting at all is auto.
rm -f "$cfg"
run exec all -- 'echo "$GPUFLEET_INSTANCE"'
expect_rc 0 "default window: exec on 20"
every_host_said_its_name "default window"

for bad in 0 -1 fast 65537 "4 8" ""; do
	printf '[ssh]\nhandshake_window = %s\n' "$bad" >"$cfg"
	run exec all -- true
	checks=$((checks + 1))
	[ "$rc" != 0 ] || fail "handshake_window = '$bad' was accepted"
	expect_one_error_line "handshake_window = '$bad'"
	expect_contains "$err" "handshake_window '$bad' must be auto, off or a number" \
	    "handshake_window = '$bad': the error names the setting"
done
rm -f "$cfg"

# A window of one behind a server that takes TCP and never speaks SSH: its
# handshake fails at the connect timeout and lets the others through.
key=$(awk '$1 == "IdentityFile" { print $2; exit }' "$D/ssh_config")
user=$(awk '$1 == "User" { print $2; exit }' "$D/ssh_config")
"$GPUFLEET_SLOWPEER" "$T/mute.port" prebanner 100000 &
cleanup_hooks+=("kill $! 2>/dev/null")
for _ in $(seq 100); do
	[ -s "$T/mute.port" ] && break
	sleep 0.1
done
read -r p <"$T/mute.port" || { echo "slowpeer did not start" >&2; exit 1; }
"$GPUFLEET" add a-mute "$user@127.0.0.1:$p" --identity "$key" >/dev/null ||
    { echo "add a-mute failed" >&2; exit 1; }
printf '[ssh]\nhandshake_window = 1\n' >"$cfg"
out=$(timeout 240 "$GPUFLEET" exec all --connect-timeout 2 -- \
    'echo "$GPUFLEET_INSTANCE"' 2>"$T/err")
rc=$?
err=$(cat "$T/err")
expect_rc 1 "window 1 with a mute server: one host fails (124: the run hung)"
expect_contains "$err" "21 hosts: 20 ok" "window 1 with a mute server: summary"
expect_contains "$err" "no SSH banner within 2s" "the mute server's reason"
out=$(grep -v '^a-mute' <<<"$out")
every_host_said_its_name "window 1 with a mute server"

finish

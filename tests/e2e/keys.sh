#!/usr/bin/env bash
# gpufleet keys without a fleet: no core dump can hold the passphrase while
# it is asked, and key files left by a kill before their row committed are
# listed as orphans by `keys ls` and removed by `keys gc`.
. "$(dirname "$0")/lib.sh"
KEYS=$XDG_DATA_HOME/gpufleet/keys

# --- the passphrase prompt: RLIMIT_CORE 0 while it waits --------------------
ulimit -S -c "$(ulimit -H -c)"
expect_eq "$( [ "$(ulimit -S -c)" != 0 ] && echo raised)" raised \
    "core dumps are allowed before the run (else this proves nothing)"
mkfifo "$T/tty-in"
GPUFLEET_KEYS_PASSPHRASE_FILE=ask script -qfec "'$GPUFLEET' keys gen --name asked" \
    "$T/ask.log" <"$T/tty-in" >/dev/null 2>&1 &
spid=$!
exec 3>"$T/tty-in"
for i in $(seq 600); do
	grep -q "Passphrase for gpufleet's keys" "$T/ask.log" 2>/dev/null && break
	sleep 0.1
done
pid=
for p in /proc/[0-9]*; do
	[ "$(readlink "$p/exe" 2>/dev/null)" = "$(readlink -f "$GPUFLEET")" ] &&
	    tr '\0' ' ' <"$p/cmdline" 2>/dev/null | grep -q 'keys gen --name asked' &&
	    pid=${p#/proc/}
done
checks=$((checks + 1))
[ -n "$pid" ] || fail "no gpufleet process waiting at the prompt"
expect_eq "$(awk '/^Max core file size/ { print $5 }' "/proc/$pid/limits" 2>/dev/null)" 0 \
    "no core dump while the passphrase prompt waits"
printf 'typed secret\n' >&3
exec 3>&-
wait "$spid"
rc=$?
expect_rc 0 "keys gen with an asked passphrase"
checks=$((checks + 1))
ssh-keygen -y -P 'typed secret' -f "$KEYS/asked" >/dev/null 2>&1 ||
    fail "the key is not encrypted with the typed passphrase"

# --- a kill between the key files and their row: an orphan -------------------
run keys gen --name kept
expect_rc 0 "keys gen"
GPUFLEET_TEST_CRASH_AT=0 "$GPUFLEET" keys gen --name crashed >/dev/null 2>&1
rc=$?
expect_rc 137 "killed after writing the key files"
checks=$((checks + 1))
[ -f "$KEYS/crashed" ] && [ -f "$KEYS/crashed.pub" ] || fail "the kill left no files to test with"
run keys ls
expect_rc 0 "keys ls with an orphan"
expect_match "$out" "^crashed +- +- +[0-9]+[smhd] +orphan +-$" "ls lists the orphan"
expect_contains "$err" "1 orphan key (no database row" "ls warns of it"
expect_contains "$err" "keys gc" "ls says how to remove it"
run keys ls --json
expect_eq "$(printf '%s' "$out" | jq -r '.[] | select(.orphan) | .name')" crashed "ls --json"
run keys gc
expect_rc 0 "keys gc"
expect_eq "$out" "removed crashed (no database row (interrupted before it was recorded))" "gc says what it removed"
checks=$((checks + 1))
[ ! -e "$KEYS/crashed" ] && [ ! -e "$KEYS/crashed.pub" ] || fail "gc left the orphan files"
checks=$((checks + 1))
[ -f "$KEYS/kept" ] && [ -f "$KEYS/kept.pub" ] && [ -f "$KEYS/asked" ] || fail "gc removed a recorded key"
run keys ls
expect_eq "$err" "" "no orphan left"
run keys gc
expect_eq "$out" "" "a second gc finds nothing"
expect_eq "$err" "gpufleet: keys gc: no orphan key files" "and says so on stderr"

finish

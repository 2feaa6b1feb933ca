#!/usr/bin/env bash
# The laptop's disk full: the data directory (database, keys) on a 4 MB
# tmpfs of a private mount namespace, filled up. `status`, `cost` and a
# key rotation (from the start, and with the disk filling up in the middle)
# fail with one line naming the full disk, the database stays whole and
# unchanged in meaning, no instance is locked out, and once space is free
# a rerun finishes the rotation. A command that only reads still works
# while another process (the daemon) keeps the database open.
# No mount namespace (unshare) or no tmpfs mount: exit 77, ctest's skip.
if [ -z "${FAULTS_NS-}" ]; then
	ns=(unshare --mount --propagation private)
	[ "$(id -u)" = 0 ] || ns=(unshare --user --map-root-user --mount --propagation private)
	if ! "${ns[@]}" true 2>/dev/null; then
		echo "SKIP: cannot make a mount namespace (${ns[*]}): the test mounts a small tmpfs" >&2
		exit 77
	fi
	FAULTS_NS=1 exec "${ns[@]}" bash "$0" "$@"
fi
. "$(dirname "$0")/../e2e/lib.sh"
export GPUFLEET_NO_PROGRESS=1
. "$(dirname "$0")/lib/keys.sh"
mkdir -p "$XDG_DATA_HOME"
if ! mount -t tmpfs -o size=4m,mode=0700 tmpfs "$XDG_DATA_HOME" 2>"$T/mount.err"; then
	echo "SKIP: cannot mount a tmpfs: $(cat "$T/mount.err")" >&2
	exit 77
fi
cleanup_hooks+=("umount -l '$XDG_DATA_HOME'")

# fill: the data directory's disk has no free block left. unfill: it has.
fill() { dd if=/dev/zero of="$XDG_DATA_HOME/fill" bs=4k 2>/dev/null; sync; }
unfill() { rm -f "$XDG_DATA_HOME/fill"; }
# dump: the database's rows, to compare before and after.
dump() { sqlite3 -cmd '.timeout 20000' "$db" .dump; }
# hold / release: another process keeps the database open (as the daemon
# does), so its -shm and -wal files exist when the disk fills.
hold() {
	mkfifo "$T/hold"
	sqlite3 "$db" <"$T/hold" >"$T/hold.out" 2>&1 &
	holder=$!
	cleanup_hooks+=("kill $holder 2>/dev/null")
	exec 8>"$T/hold"
	printf "SELECT 'open', count(*) FROM instance;\n" >&8
	wait_open
}
wait_open() {
	local i
	for ((i = 0; i < 300; i++)); do
		grep -q '^open|' "$T/hold.out" && return 0
		sleep 0.2
	done
	fail "the holder did not open the database: $(cat "$T/hold.out")"
}
release() { exec 8>&-; wait "$holder"; rm -f "$T/hold"; }
# unchanged WHAT: with space again, the database holds what it held
# (before) and is whole, and inst-1's authorized_keys is as it was.
unchanged() {
	unfill
	expect_eq "$(dump)" "$before" "$1: no row changed"
	db_ok "$1"
	checks=$((checks + 1))
	cmp -s "$T/ak-1" "$(akfile inst-1)" || fail "$1: inst-1's authorized_keys changed"
}
# disk_full WHAT: the command failed (exit 3) with one line naming the disk.
disk_full() {
	expect_rc 3 "$1: exit status"
	expect_one_error_line "$1"
	expect_contains "$err" "the disk is full (No space left on device)" "$1: names the full disk"
}

fleet_up 2 --group-size 1
run status
expect_rc 0 "status before the disk fills"
cp "$(akfile inst-1)" "$T/ak-1"

# --- nobody has the database open: not even a read can start ---------------
before=$(dump)
fill
for c in status cost "keys rotate inst-1"; do
	run $c
	disk_full "$c on a full disk"
done
unchanged "nobody has it open, the disk full"
not_locked_out inst-1 "rotation on a full disk"

# --- the daemon keeps it open: reads work, writes fail whole ---------------
hold
before=$(dump)
fill
run status
disk_full "status with the database open elsewhere"
expect_match "$out" "^inst-1 +up " "status shows what it saw all the same"
run cost
expect_rc 0 "cost only reads: it works on a full disk"
expect_match "$out" "^inst-1 " "cost lists inst-1"
run keys rotate inst-1
disk_full "keys rotate with the database open elsewhere"
run keys status inst-1
expect_rc 0 "keys status reads on a full disk"
release
unchanged "open elsewhere, the disk full"

# --- the disk fills in the middle of a rotation ------------------------------
# Paused after step 2 (the new key is in authorized_keys, not yet proven):
# the disk fills; the rotation cannot record step 3 and stops there.
hold
GPUFLEET_TEST_PAUSE_AT=2 GPUFLEET_TEST_CRASH_GATE="$T/gate" \
    "$GPUFLEET" keys rotate 'inst-*' >"$T/rot.out" 2>"$T/rot.err" &
rot=$!
for ((i = 0; i < 600; i++)); do [ -e "$T/gate" ] && break; sleep 0.2; done
checks=$((checks + 1))
[ -e "$T/gate" ] || fail "the rotation never reached step 2: $(cat "$T/rot.err")"
fill
rm -f "$T/gate"
wait $rot
rc=$?
out=$(cat "$T/rot.out")
err=$(cat "$T/rot.err")
expect_rc 1 "a rotation that the full disk stopped"
for n in inst-1 inst-2; do
	expect_match "$out" "^$n: failed: .*the disk is full \(No space left on device\)" \
	    "$n: the full disk named"
	not_locked_out $n "the disk filled mid-rotation"
done
release
unfill
db_ok "after the disk filled mid-rotation"
run keys rotate 'inst-*'
expect_rc 0 "once there is space, a rerun finishes the rotation"
expect_eq "$(printf '%s\n' "$out" | grep -c ': rotated to ')" 2 "the rerun rotates both"
for n in inst-1 inst-2; do
	checks=$((checks + 1))
	login $n "$(current_key $n)" || fail "$n: the new key does not log in after the rerun"
	not_locked_out $n "after the rerun"
done
run keys status 'inst-*'
expect_eq "$(printf '%s\n' "$out" | grep -c 'done, step 7/7')" 2 "keys status: both done"
db_ok "at the end"

finish

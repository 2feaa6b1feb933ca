#!/usr/bin/env bash
# The network cut (the instance's port refused: `fleet break NAME refuse`)
# in the middle of a key rotation and of a password lock, at a chosen step
# (GPUFLEET_TEST_PAUSE_AT): the run says which instances it did not
# finish and why, the others finish, nothing is lost (each instance still
# takes a login with a key gpufleet has), and once the network is back a
# rerun finishes the rest.
. "$(dirname "$0")/../e2e/lib.sh"
export GPUFLEET_NO_PROGRESS=1
. "$(dirname "$0")/lib/keys.sh"

# paused POINT ARGS...: run gpufleet ARGS in the background, paused at
# POINT; returns once it is there (its pid in bg).
paused() {
	local point=$1 i
	shift
	rm -f "$T/gate"
	GPUFLEET_TEST_PAUSE_AT=$point GPUFLEET_TEST_CRASH_GATE="$T/gate" \
	    "$GPUFLEET" "$@" >"$T/bg.out" 2>"$T/bg.err" &
	bg=$!
	for ((i = 0; i < 600; i++)); do [ -e "$T/gate" ] && return 0; sleep 0.2; done
	fail "gpufleet $* never reached $point: $(cat "$T/bg.err")"
}
# go_on: let the paused run go on and collect it (rc, out, err).
go_on() {
	rm -f "$T/gate"
	wait "$bg"
	rc=$?
	out=$(cat "$T/bg.out")
	err=$(cat "$T/bg.err")
}

fleet_up 2 --group-size 1

# --- keys rotate: the network cut after step 2, then after step 4 ---------
for step in 2 4; do
	oldblob=$(ssh-keygen -y -f "$(key_of inst-1)" | cut -d' ' -f2)
	paused $step keys rotate 'inst-*'
	fleet break inst-1 refuse >/dev/null
	go_on
	expect_rc 1 "a rotation with inst-1 cut after step $step"
	expect_match "$out" "^inst-1: failed: .*refused" "inst-1 reported unfinished (cut after step $step)"
	expect_match "$out" "^inst-2: rotated to " "inst-2 finishes (cut after step $step)"
	fleet heal inst-1 >/dev/null
	not_locked_out inst-1 "cut after step $step"
	db_ok "cut after step $step"
	run keys rotate inst-1
	expect_rc 0 "the rerun once the network is back (cut after step $step)"
	expect_match "$out" "^inst-1: rotated to " "the rerun finishes inst-1 (cut after step $step)"
	checks=$((checks + 1))
	login inst-1 "$(current_key inst-1)" || fail "inst-1: its new key does not log in (cut after step $step)"
	checks=$((checks + 1))
	! grep -qF -- "$oldblob" "$(akfile inst-1)" ||
	    fail "inst-1: the key the rerun rotated away is still in authorized_keys (cut after step $step)"
	run keys status 'inst-*'
	expect_eq "$(printf '%s\n' "$out" | grep -c 'done, step 7/7')" 2 "both done (cut after step $step)"
done

# --- passwd --lock: the network cut after the lock ------------------------
# pw-1 is cut while the lock's session is open: the fresh login that
# checks key login is refused, so the lock is undone over that session;
# pw-2 locks. The rerun locks pw-1 and finds pw-2 locked.
if [ "$(id -u)" = 0 ]; then
	fleet_up 2 --group-size 1 --root-login 1 --root-login 2 --prefix pw
	shadow() { awk -F: '$1 == "root" { print $2 }' "$(instance_dir "$1")/etc/shadow"; }
	old=$(shadow pw-1)
	paused passwd:1 passwd 'pw-*' --lock
	fleet break pw-1 refuse >/dev/null
	go_on
	expect_rc 1 "a lock with pw-1 cut"
	expect_match "$out" "^pw-1: failed: key login stopped working after .*refused.*; the old password hash was written back" \
	    "pw-1 reported unfinished, its lock undone"
	expect_match "$out" "^pw-2: locked " "pw-2 locks"
	expect_eq "$(shadow pw-1)" "$old" "pw-1's old hash is back"
	fleet heal pw-1 >/dev/null
	not_locked_out pw-1 "lock cut"
	run passwd 'pw-*' --lock
	expect_rc 0 "the rerun once the network is back"
	expect_match "$out" "^pw-1: locked " "the rerun locks pw-1"
	expect_match "$out" "^pw-2: already locked" "the rerun finds pw-2 locked"
	not_locked_out pw-1 "after the rerun"
	db_ok "after the lock"
else
	echo "not root: the passwd --lock part is skipped (the harness's --root-login needs root)" >&2
fi

finish

#!/usr/bin/env bash
# SIGKILL in the middle of `keys rotate`, `passwd --lock` and `add
# --password`, at each of
# their steps (the GPUFLEET_TEST_CRASH_AT points): after each kill the
# instance still takes a login with a key gpufleet has, its
# authorized_keys and shadow entry are whole, the database passes
# integrity_check, `keys status` says the rotation was interrupted (not
# "running" with nothing running) and how to finish it, and a rerun
# finishes. (tests/fleet/keys.sh kills two hosts at every rotation step;
# onboard.sh `keys install`; daemon.sh a rotation the daemon runs.)
. "$(dirname "$0")/../e2e/lib.sh"
export GPUFLEET_NO_PROGRESS=1
. "$(dirname "$0")/lib/keys.sh"

# the fleet's root logins need root (tests/fleet/passwd.sh)
as_root=0
[ "$(id -u)" = 0 ] && as_root=1
if [ $as_root = 1 ]; then
	fleet_up 2 --group-size 1 --root-login 2
else
	echo "not root: the passwd --lock part is skipped (the harness's --root-login needs root)" >&2
	fleet_up 1
fi

# --- a rotation that is alive says running ---------------------------------
GPUFLEET_TEST_PAUSE_AT=2 GPUFLEET_TEST_CRASH_GATE="$T/gate" \
    "$GPUFLEET" keys rotate inst-1 >"$T/rot.out" 2>"$T/rot.err" &
rot=$!
for ((i = 0; i < 600; i++)); do [ -e "$T/gate" ] && break; sleep 0.2; done
run keys status inst-1
expect_match "$out" "^inst-1 .* running, step 2/7 " "keys status while the rotation runs"
checks=$((checks + 1))
case $out in *interrupted*) fail "a live rotation called interrupted: $out" ;; esac
rm -f "$T/gate"
wait $rot
rc=$?
err=$(cat "$T/rot.err")
expect_rc 0 "the paused rotation goes on"

# --- keys rotate: a kill after each step ------------------------------------
for step in 1 2 3 4 5 6; do
	(GPUFLEET_TEST_CRASH_AT=$step "$GPUFLEET" keys rotate inst-1 \
	    >"$T/out" 2>"$T/err") 2>/dev/null
	rc=$?
	expect_rc 137 "keys rotate: SIGKILL after step $step"
	not_locked_out inst-1 "keys rotate killed after step $step"
	db_ok "keys rotate killed after step $step"
	run keys status inst-1
	expect_rc 0 "keys status after a kill at step $step"
	expect_match "$out" "^inst-1 .* interrupted, step $step/7 " \
	    "keys status: interrupted at step $step, not running"
	expect_match "$out" "^interrupted: the rotation that ran it is gone; \`gpufleet keys rotate inst-1\` finishes it$" \
	    "keys status says how to finish (step $step)"
	run keys rotate inst-1
	expect_rc 0 "the rerun after a kill at step $step"
	expect_match "$out" "^inst-1: rotated to " "the rerun finishes (step $step)"
	checks=$((checks + 1))
	login inst-1 "$(current_key inst-1)" || fail "the new key does not log in (kill at step $step)"
	run keys status inst-1
	expect_match "$out" "^inst-1 .* done, step 7/7 " "keys status after the rerun (step $step)"
done

# --- passwd --lock: a kill after each step ----------------------------------
# inst-2 logs in as root by key, its /etc a private copy (UsePAM no: the
# lock is usermod -p '*'). Between the cases its old hash is put back.
if [ $as_root = 1 ]; then
	shadowf=$(instance_dir inst-2)/etc/shadow
	shadow() { awk -F: '$1 == "root" { print $2 }' "$shadowf"; }
	old=$(shadow)
	unlock() {
		awk -F: -v OFS=: -v h="$old" '$1 == "root" { $2 = h } { print }' \
		    "$shadowf" >"$T/shadow" && cat "$T/shadow" >"$shadowf"
	}
	for point in passwd:1 passwd:2 passwd:3; do
		unlock
		(GPUFLEET_TEST_CRASH_AT=$point "$GPUFLEET" passwd inst-2 --lock \
		    --password-file "$(instance_dir inst-2)/password" \
		    >"$T/out" 2>"$T/err") 2>/dev/null
		rc=$?
		expect_rc 137 "passwd --lock: SIGKILL at $point"
		not_locked_out inst-2 "passwd --lock killed at $point"
		s=$(shadow)
		checks=$((checks + 1))
		[ "$s" = "$old" ] || [ "$s" = "*" ] ||
		    fail "passwd --lock killed at $point: the shadow entry is neither the old hash nor locked: [$s]"
		db_ok "passwd --lock killed at $point"
		run passwd inst-2 --lock
		expect_rc 0 "passwd --lock rerun after a kill at $point"
		expect_match "$out" "^inst-2: (locked \(usermod -p '\*'\)|already locked), key login ok on a fresh connection, shadow entry locked$" \
		    "the rerun locks (kill at $point)"
		expect_eq "$(shadow)" "*" "inst-2 locked after the rerun ($point)"
		not_locked_out inst-2 "after the rerun ($point)"
	done
fi

# --- add --password: a kill after each step of the key's install ----------
# (its own fleet, not imported: `add` is its first contact). The instance's
# row is committed before its key is installed: a rerun of `add` says how
# to finish it (`keys install`), which works, the database is whole, and gc
# takes the key files the kills left. Between the cases it is purged.
if [ $as_root = 1 ]; then
	FLEET_NO_IMPORT=1 fleet_up 1 --group-size 1 --root-login 1 --prefix new
	where="root@127.0.0.1:$(port new-1)"
	pw=$(instance_dir new-1)/password
	for step in 1 2 3; do
		(GPUFLEET_TEST_CRASH_AT=$step "$GPUFLEET" add new-1 "$where" \
		    --password-file "$pw" >"$T/out" 2>"$T/err") 2>/dev/null
		rc=$?
		expect_rc 137 "add --password: SIGKILL after step $step"
		db_ok "add killed after step $step"
		f=$(akfile new-1)
		checks=$((checks + 1))
		[ ! -e "$f" ] || { [ -z "$(tail -c 1 "$f")" ] &&
		    ! grep -Ev '^(ssh-ed25519|ssh-rsa|ecdsa-sha2-nistp256) [A-Za-z0-9+/=]+( .*)?$' "$f" | grep -q .; } ||
		    fail "add killed after step $step: new-1's authorized_keys is partial: $(cat -A "$f")"
		run add new-1 "$where" --password-file "$pw"
		expect_rc 2 "add again after a kill at step $step"
		expect_one_error_line "add again after a kill at step $step"
		expect_contains "$err" "(an \`add --password\` that did not finish?): \`gpufleet keys install new-1 --password-file FILE\` gives it its key" \
		    "add again says how to finish (step $step)"
		run keys install new-1 --password-file "$pw"
		expect_rc 0 "keys install finishes the add killed at step $step"
		not_locked_out new-1 "the add killed at step $step, finished"
		run rm --purge --yes --force new-1
		expect_rc 0 "purge new-1 (step $step)"
	done
	run keys gc
	expect_rc 0 "keys gc after the killed adds"
	expect_eq "$(printf '%s\n' "$out" | grep -c '^removed new-1-.*(no database row')" 3 \
	    "gc removes the three keys the kills left"
fi

finish

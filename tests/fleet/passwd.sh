#!/usr/bin/env bash
# gpufleet passwd and harden --fix against the harness's --root-login
# instances (root with a password, its /etc a private copy, so nothing here
# touches the machine's /etc/shadow): --lock by usermod -p '*' (UsePAM no)
# and passwd -l (UsePAM yes), each proven with OpenSSH (a fresh password
# login refused, key login kept); the undo when key login stops working;
# --random (old refused, new works, --out 0600); a login user without the
# rights; the events and keys status rows; harden --fix on private keys.
. "$(dirname "$0")/../e2e/lib.sh"
export GPUFLEET_NO_PROGRESS=1
if [ "$(id -u)" != 0 ]; then
	echo "SKIP: not root: the harness's --root-login needs root" >&2
	exit 0
fi
shadow_before=$(sha256sum </etc/shadow)

fleet_up 8 --root-login 2 --root-login 3:kbdint --root-login 4 \
    --root-login 5 --root-login 6 --root-login 7 --root-login 8
port() { awk -v n="$1" '$1 == n { print $2 }' "$D/instances.tsv"; }
shadow() { awk -F: '$1 == "root" { print $2 }' "$(instance_dir "$1")/etc/shadow"; }
pwfile() { printf '%s/password' "$(instance_dir "$1")"; }

cat >"$T/askpass" <<'EOS'
#!/bin/sh
cat "$ASKPASS_FILE"
EOS
chmod 0755 "$T/askpass"
# pwssh NAME METHOD FILE: does a fresh OpenSSH login by that password work?
pwssh() {
	ASKPASS_FILE=$3 SSH_ASKPASS=$T/askpass SSH_ASKPASS_REQUIRE=force \
	    setsid -w ssh -F /dev/null -o UserKnownHostsFile="$D/known_hosts" \
	    -o GlobalKnownHostsFile=/dev/null -o StrictHostKeyChecking=yes \
	    -o PubkeyAuthentication=no -o PreferredAuthentications="$2" \
	    -o NumberOfPasswordPrompts=1 -o ControlPath=none \
	    -o KexAlgorithms=curve25519-sha256 -o ConnectTimeout=10 \
	    -p "$(port "$1")" root@127.0.0.1 true </dev/null >/dev/null 2>&1
}
# keyssh NAME: does a fresh OpenSSH login with only the client key work?
keyssh() {
	ssh -F "$D/ssh_config" -o ControlPath=none \
	    -o KexAlgorithms=curve25519-sha256 "$1" true </dev/null >/dev/null 2>&1
}

# --- the OpenSSH checks see what the instances start with ----------------
pwssh inst-2 password "$(pwfile inst-2)" || fail "inst-2 takes no password to begin with"
pwssh inst-3 keyboard-interactive "$(pwfile inst-3)" || fail "inst-3 takes no password to begin with"

# --- harden reads the sshd that serves the session, not /etc/ssh's --------
# Each sshd here has its own -f config: inst-1's says no passwords, inst-2's
# PasswordAuthentication yes, inst-3's keyboard-interactive with UsePAM yes,
# whatever the machine's /etc/ssh/sshd_config says. inst-1's user is not
# root (sshd -T cannot read the host key): its sshd's file is read instead,
# and its login shell (dash) keeps the script in an ancestor's argv, which
# must not be taken for an sshd's.
conf1=$D/groups/g1/sshd_config conf2=$D/groups/g2/sshd_config
conf3=$D/groups/g3/sshd_config
[ -f "$conf1" ] && [ -f "$conf2" ] && [ -f "$conf3" ] || fail "the fleet's sshd_config files are not where this test looks"
run harden 'inst-1,inst-2,inst-3' --json
expect_eq "$(printf '%s' "$out" | jq -r '.[] | "\(.name) \(.password_authentication) \(.kbd_interactive_pam) \(.password_source)"')" \
    "inst-1 no false $conf1
inst-2 yes false sshd -T -f $conf2
inst-3 no true sshd -T -f $conf3" "harden: each session's own sshd config"
run harden 'inst-2,inst-3'
expect_contains "$out" "inst-2: password login: yes (sshd -T -f $conf2)" "harden: inst-2 takes passwords"
expect_contains "$out" "inst-3: password login: keyboard-interactive with UsePAM yes (sshd -T -f $conf3; sshd -T -f $conf3)" \
    "harden: inst-3 asks for the password by keyboard-interactive"

# --- --lock without PAM: usermod -p '*', key login kept --------------------
run passwd inst-2 --lock --password-file "$(pwfile inst-2)"
expect_rc 0 "passwd --lock inst-2"
expect_eq "$out" "inst-2: locked (usermod -p '*'), key login ok on a fresh connection, shadow entry locked, password refused" "lock inst-2 (UsePAM no)"
expect_eq "$(shadow inst-2)" "*" "inst-2's shadow entry"
pwssh inst-2 password "$(pwfile inst-2)" && fail "inst-2 still takes its password"
keyssh inst-2 || fail "inst-2 lost key login"

# Again: nothing to do, still checked.
run passwd inst-2 --lock
expect_rc 0 "passwd --lock inst-2 again"
expect_eq "$out" "inst-2: already locked, key login ok on a fresh connection, shadow entry locked" "lock inst-2 again"

# --- --lock with PAM (keyboard-interactive only): passwd -l -------------------
old3=$(shadow inst-3)
run passwd inst-3 --lock --json --password-file - <"$(pwfile inst-3)"
expect_rc 0 "passwd --lock inst-3"
expect_eq "$(printf '%s' "$out" | jq -r '.[0] | [.ok, .method, .old_password_refused] | @tsv')" \
    "true	passwd -l	true" "lock inst-3 --json"
expect_eq "$(shadow inst-3)" "!$old3" "inst-3's shadow entry: passwd -l's \"!\" before the hash"
pwssh inst-3 keyboard-interactive "$(pwfile inst-3)" && fail "inst-3 still takes its password"
keyssh inst-3 || fail "inst-3 lost key login"

# --- a lock that breaks key login is undone over the open session ---------
# inst-4's usermod locks as passwd -l does; its sshd has UsePAM no.
old4=$(shadow inst-4)
cat >"$(instance_dir inst-4)/bin/usermod" <<'EOS'
#!/bin/sh
exec passwd -l "$3" >/dev/null
EOS
chmod 0755 "$(instance_dir inst-4)/bin/usermod"
run passwd inst-4 --lock
expect_rc 1 "a lock that broke key login"
expect_match "$out" "^inst-4: failed: key login stopped working after usermod -p '\\*' \\(root@127.0.0.1 refused our key\\); the old password hash was written back \\(state unlocked\\)$" "the undo reported"
expect_eq "$(shadow inst-4)" "$old4" "inst-4's old hash back"
keyssh inst-4 || fail "inst-4 has no key login after the undo"
pwssh inst-4 password "$(pwfile inst-4)" || fail "inst-4's password no longer works after the undo"
rm -f "$(instance_dir inst-4)/bin/usermod"

# --- a login user without the rights: refused, nothing changed -------------
run passwd inst-1 --lock
expect_rc 1 "lock as a plain user"
expect_contains "$out" "inst-1: failed: gpufleet-test is not root and cannot sudo without a password, so cannot lock its password; nothing changed" "plain user refused"

# --- --random, --out ------------------------------------------------------
# inst-5's chpasswd notes its argv (the password must come on stdin).
cat >"$(instance_dir inst-5)/bin/chpasswd" <<EOS
#!/bin/sh
printf '%s\n' "chpasswd \$*" >>"$T/chpasswd-argv"
exec /usr/sbin/chpasswd "\$@"
EOS
chmod 0755 "$(instance_dir inst-5)/bin/chpasswd"
run passwd inst-5 --random --password-file "$(pwfile inst-5)" --out "$T/new"
expect_rc 0 "passwd --random inst-5"
expect_eq "$out" "inst-5: set (chpasswd), shadow entry unlocked, old password refused, new password logs in
inst-5: password written to $T/new" "random inst-5"
expect_eq "$(stat -c %a "$T/new")" 600 "--out file mode"
expect_match "$(cat "$T/new")" '^inst-5 [A-Za-z0-9]{20}$' "--out file line"
new5=$(awk '{ print $2 }' "$T/new")
printf '%s\n' "$new5" >"$T/new5"
pwssh inst-5 password "$T/new5" || fail "inst-5's new password refused"
pwssh inst-5 password "$(pwfile inst-5)" && fail "inst-5 still takes the old password"
keyssh inst-5 || fail "inst-5 lost key login"
expect_eq "$(cat "$T/chpasswd-argv")" "chpasswd " "chpasswd's argv holds no password"
rm -f "$(instance_dir inst-5)/bin/chpasswd"

# --out never overwrites, and nothing changes then.
before5=$(shadow inst-5)
run passwd inst-5 --random --out "$T/new"
expect_rc 2 "--out to an existing file"
expect_one_error_line "--out exists"
expect_contains "$err" "cannot create $T/new: it exists" "--out exists: the reason"
expect_eq "$(shadow inst-5)" "$before5" "nothing changed for an existing --out"

# Shown once, on a locked account (inst-2): it is unlocked with the new one.
run passwd inst-2 --random --json
expect_rc 0 "passwd --random inst-2 --json"
new2=$(printf '%s' "$out" | jq -r '.[0].password')
expect_match "$new2" '^[A-Za-z0-9]{20}$' "--json password"
expect_eq "$(printf '%s' "$out" | jq -c '.[0] | [.new_password_works, .old_password_refused]')" \
    "[true,null]" "--json checks"
printf '%s\n' "$new2" >"$T/new2"
pwssh inst-2 password "$T/new2" || fail "inst-2's new password refused"

# Usage errors.
run passwd inst-2
expect_rc 2 "neither --lock nor --random"
expect_one_error_line "neither --lock nor --random"
run passwd inst-2 --lock --out "$T/x"
expect_rc 2 "--out with --lock"
[ ! -e "$T/x" ] || fail "--out with --lock made $T/x"

# --- events and keys status: what, when, how; no secret ------------------
run events --json
expect_rc 0 "events"
expect_eq "$(printf '%s' "$out" | jq -r '[.[] | select(.event == "passwd_lock" and .why == "passwd --lock") | .result["inst-2"] // empty] | .[0]')" \
    "locked (usermod -p '*'), key login ok on a fresh connection, shadow entry locked, password refused" "events: the lock of inst-2"
expect_eq "$(printf '%s' "$out" | jq -r '[.[] | select(.event == "passwd_random") | .instances[0]] | join(",")')" \
    "inst-5,inst-2" "events: the random passwords"
run keys status 'inst-2,inst-3,inst-4'
expect_match "$out" "inst-2 .* set \\(chpasswd\\) [0-9-]+T[0-9:]+Z " "keys status: inst-2's random password"
expect_match "$out" "inst-3 .* locked \\(passwd -l\\) [0-9-]+T[0-9:]+Z " "keys status: inst-3's lock"
expect_match "$out" "inst-4 .* failed [0-9-]+T" "keys status: inst-4's failed lock"
for f in "$XDG_DATA_HOME"/gpufleet/fleet.db*; do
	for s in "$new5" "$new2" "$(cat "$(pwfile inst-2)")" "$old3"; do
		grep -qaF -- "$s" "$f" && fail "a secret is stored in $f"
	done
done

# --- --lock on an image without usermod (busybox, alpine): chpasswd -e ----
# Hidden in inst-7's own mount namespace (its sshd's, private: the machine's
# /usr/sbin/usermod is untouched) by /dev/null over it, not a regular file.
sp=$(bash "$GPUFLEET_HARNESS" -d "$D" status | awk '$1 == "inst-7" { print $4 }')
nsenter -t "$sp" -m mount --bind /dev/null /usr/sbin/usermod || fail "cannot hide usermod from inst-7"
[ -f /usr/sbin/usermod ] || fail "usermod hidden from the machine too"
run passwd inst-7 --lock --password-file "$(pwfile inst-7)"
expect_rc 0 "passwd --lock inst-7 (no usermod)"
expect_eq "$out" "inst-7: locked (chpasswd -e '*'), key login ok on a fresh connection, shadow entry locked, password refused" \
    "lock without usermod"
expect_eq "$(shadow inst-7)" "*" "inst-7's shadow entry"
pwssh inst-7 password "$(pwfile inst-7)" && fail "inst-7 still takes its password"
keyssh inst-7 || fail "inst-7 lost key login"

# --- Ctrl-C during --lock waits until the lock is checked -----------------
# (env: a script's background job starts with SIGINT ignored; a user's
# Ctrl-C finds it at its default.)
env --default-signal=INT "$GPUFLEET" passwd inst-8 --lock >"$T/out8" 2>&1 &
lpid=$!
for _ in $(seq 300); do
	ss -Htnp state established "( dport = :$(port inst-8) )" 2>/dev/null | grep -q "pid=$lpid," && break
	sleep 0.05
done
kill -INT "$lpid"
wait "$lpid"
rc=$?
expect_rc 130 "passwd --lock, Ctrl-C: it ends by the signal, once done"
expect_eq "$(cat "$T/out8")" "inst-8: locked (usermod -p '*'), key login ok on a fresh connection, shadow entry locked" \
    "Ctrl-C during --lock: the lock was finished and checked first"
expect_eq "$(shadow inst-8)" "*" "inst-8's shadow entry"
keyssh inst-8 || fail "inst-8 lost key login"

# --- harden --fix --------------------------------------------------------
h=$(instance_dir inst-6)/home
ssh-keygen -q -t ed25519 -N '' -C fix -f "$h/.ssh/id_fix" </dev/null
ssh-keygen -q -t rsa -b 2048 -m PEM -N '' -C top -f "$h/top.key" </dev/null
ssh-keygen -q -t ed25519 -N '' -C out -f "$T/outside" </dev/null
chmod 644 "$h/.ssh/id_fix" "$h/.ssh/id_fix.pub" "$T/outside"
chmod 640 "$h/top.key"
ln -s "$T/outside" "$h/.ssh/id_link"
printf 'no key here\n' >"$h/.ssh/notes"
chmod 644 "$h/.ssh/notes"
run harden inst-6 --fix
expect_rc 1 "harden --fix (sshd's settings stay findings)"
expect_contains "$out" "inst-6: fixed: password locked (usermod -p '*'), key login ok on a fresh connection, shadow entry locked" "harden --fix locked the password"
expect_contains "$out" "inst-6: fixed: private key $h/.ssh/id_fix was readable by others, mode 644 -> 600" "harden --fix: id_fix"
expect_contains "$out" "inst-6: fixed: private key $h/top.key was readable by others, mode 640 -> 600" "harden --fix: top.key"
expect_eq "$(stat -c %a "$h/.ssh/id_fix") $(stat -c %a "$h/top.key")" "600 600" "the private keys' modes"
expect_eq "$(stat -c %a "$h/.ssh/id_fix.pub") $(stat -c %a "$h/.ssh/notes")" "644 644" "a public key and a non-key left alone"
expect_eq "$(stat -c %a "$T/outside")" 644 "a symlinked key is not followed"
expect_eq "$(shadow inst-6)" "*" "inst-6's shadow entry"
pwssh inst-6 password "$(pwfile inst-6)" && fail "inst-6 still takes its password after harden --fix"
keyssh inst-6 || fail "inst-6 lost key login after harden --fix"
run harden inst-6 --fix --json
expect_eq "$(printf '%s' "$out" | jq -c '.[0] | [.fixed_keys, .password_lock.ok, .readable_private_keys]')" \
    '[[],true,[]]' "harden --fix --json, nothing left to fix"
run events --json
expect_eq "$(printf '%s' "$out" | jq -r '[.[] | select(.event == "harden_fix") | .result["inst-6"]] | .[0]')" \
    "chmod go-r $h/top.key (640 -> 600), chmod go-r $h/.ssh/id_fix (644 -> 600)" "events: harden --fix's chmods"
# harden without --fix still changes nothing.
chmod 644 "$h/.ssh/id_fix"
run harden inst-6
expect_eq "$(stat -c %a "$h/.ssh/id_fix")" 644 "harden without --fix changed a mode"

# --- several at once: each host its own outcome ---------------------------
run passwd 'inst-1,inst-3,inst-6' --lock
expect_rc 1 "a lock of three, one refused"
expect_eq "$(printf '%s\n' "$out" | cut -d: -f1-2)" "inst-1: failed
inst-3: already locked, key login ok on a fresh connection, shadow entry locked
inst-6: already locked, key login ok on a fresh connection, shadow entry locked" "three at once"

[ "$(sha256sum </etc/shadow)" = "$shadow_before" ] || fail "the machine's /etc/shadow changed"
finish

#!/usr/bin/env bash
# gpufleet keys against a real sshd fleet: rotation that keeps every other
# authorized_keys byte, StrictModes, a SIGKILL after every step then a rerun,
# a verification failure, files that must not be touched, unreachable hosts,
# two rotations at once, re-injected keys, --revoke, --shared and harden.
. "$(dirname "$0")/../e2e/lib.sh"
export GPUFLEET_NO_PROGRESS=1
. "$(dirname "$0")/lib/keys.sh"

# expected ORIG OLDBLOB NEWLINE [OPTIONS]: ORIG minus lines with that blob,
# plus NEWLINE (after OPTIONS, the old line's, if given).
expected() {
	python3 - "$1" "$2" "$3" "${4-}" <<'PY'
import sys
data = open(sys.argv[1], 'rb').read()
old, new = sys.argv[2].encode(), sys.argv[3].encode()
if sys.argv[4]:
    new = sys.argv[4].encode() + b' ' + new
out = []
for line in data.splitlines(keepends=True):
    f = line.split()
    blob = None
    for i in range(len(f) - 1):
        if f[i].startswith((b'ssh-', b'ecdsa-sha2-', b'sk-')):
            blob = f[i + 1]
            break
    if blob != old:
        out.append(line)
res = b''.join(out)
if res and not res.endswith(b'\n'):
    res += b'\n'
sys.stdout.buffer.write(res + new + b'\n')
PY
}

# keyline NAME [TYPE]: the public key line of a fresh key $T/NAME.
keyline() {
	[ -f "$T/$1.pub" ] || ssh-keygen -q -t "${2:-ed25519}" -N '' -C "$1" -f "$T/$1"
	cat "$T/$1.pub"
}

# --- 20 instances, seeded files, byte for byte ---------------------------
# A key limited by options keeps them: the new line gets the old line's.
LIMITS='from="127.0.0.1",command="echo limited",restrict,no-port-forwarding,no-pty'
fleet_up 20
D20=$D
client_blob=$(awk '{ print $2 }' "$D/client/id_ed25519.pub")
client_line=$(cat "$D/client/id_ed25519.pub")
other_line=$(keyline other rsa)
keep_line=$(keyline keep)
for n in $(seq 1 20); do
	f=$(akfile inst-$n)
	case $((n % 4)) in
	0) printf '# managed by hand\n\n%s\n\n%s\n' "$client_line" "$other_line" >"$f" ;;
	1) printf '%s %s\r\n# trailing comment\n%s' "$LIMITS" "$client_line" "$(keyline other-$n)" >"$f" ;;
	2) printf 'command="echo a b" %s\n%s\n\n\n' "$keep_line" "$client_line" >"$f" ;;
	3) printf '%s' "$client_line" >"$f" ;;
	esac
	cp "$f" "$T/orig-$n"
done
run keys rotate all
expect_rc 0 "rotate 20 instances"
expect_eq "$(printf '%s\n' "$out" | grep -c ': rotated to ')" 20 "20 rotated"
expect_contains "$err" "20 hosts: 20 rotated, 0 failed" "summary"
for n in $(seq 1 20); do
	key=$(current_key inst-$n)
	checks=$((checks + 1))
	[ -n "$key" ] && [ -f "$key" ] || { fail "inst-$n has no current key"; continue; }
	opts=
	[ $((n % 4)) != 1 ] || opts=$LIMITS
	expected "$T/orig-$n" "$client_blob" "$(cat "$key.pub")" "$opts" >"$T/want-$n"
	checks=$((checks + 1))
	cmp -s "$T/want-$n" "$(akfile inst-$n)" ||
	    fail "inst-$n: authorized_keys differs: $(diff <(od -c "$T/want-$n") <(od -c "$(akfile inst-$n)") | head -5)"
	checks=$((checks + 1))
	login inst-$n "$key" || fail "inst-$n: new key does not log in"
	checks=$((checks + 1))
	! login inst-$n "$D/client/id_ed25519" || fail "inst-$n: old key still logs in"
done
expect_eq "$(ls "$D/client/id_ed25519")" "$D/client/id_ed25519" \
    "the user's own key is never deleted"
run keys status
expect_eq "$(printf '%s\n' "$out" | grep -c 'done, step 7/7')" 20 "status: 20 done"
# Imported from an ssh_config whose IdentityFile is the old key: exec and
# ssh must use the rotated key, not what the file says.
run exec all -- echo after-rotation
expect_rc 0 "exec after rotation on imported instances"
expect_eq "$(printf '%s\n' "$out" | grep -c ': after-rotation$')" 20 "all 20 answer"
run ssh inst-5 -- echo via-ssh
expect_eq "$out" "via-ssh" "gpufleet ssh with the rotated key"

# A second rotation removes gpufleet's first key file once unused.
first=$(current_key inst-1)
run keys rotate 'inst-1,inst-2'
expect_rc 0 "second rotation"
checks=$((checks + 1))
[ ! -e "$first" ] && [ ! -e "$first.pub" ] || fail "old managed key not deleted"
run keys ls
# The AGE column's format, whatever the time the test took to get here.
expect_match "$out" "inst-1-[0-9-]+ +ssh-ed25519 +SHA256:[^ ]+ +[0-9]+[smhd] +deleted +-" "ls shows deleted key"
run keys rotate inst-3 --keep-old
kept=$("$GPUFLEET" keys ls | awk '$1 ~ /^inst-3-/ && $5 == "present" && $6 == "-" { print $1 }')
checks=$((checks + 1))
[ -n "$kept" ] && [ -f "$KEYS/$kept" ] || fail "--keep-old deleted the old key"

# --dry-run changes nothing.
cp "$(akfile inst-4)" "$T/before-dry"
run keys rotate inst-4 --dry-run
expect_rc 0 "dry run"
expect_match "$out" "^inst-4: would replace .* with a new ed25519 key$" "dry run line"
checks=$((checks + 1))
cmp -s "$T/before-dry" "$(akfile inst-4)" || fail "dry run changed the file"

# --- a rotated-out key put back by the platform is noticed ------------------
printf '%s\n' "$client_line" >>"$(akfile inst-5)"
run keys check 'inst-5,inst-6'
expect_rc 1 "check finds a re-injected key"
expect_match "$out" "^inst-5: warning: a key taken off is back in authorized_keys: ssh-ed25519 SHA256:[^ ]+ \(rotated\)$" "inst-5 warned"
expect_match "$out" "^inst-6: ok$" "inst-6 clean"
expect_contains "$err" "inst-5: a key taken off is back" "warning on stderr"
# ... and status, on its normal round trip, warns too.
: "${GPUFLEET_AGENT:=$(dirname "$GPUFLEET")/gpufleet-agent}"
export GPUFLEET_AGENT
run status 'inst-5,inst-6'
expect_match "$err" "warning: inst-5: a key gpufleet took off is back in ~/.ssh/authorized_keys \(re-added by the platform\?\): ssh-ed25519 SHA256:" \
    "status warns of a re-injected key"
checks=$((checks + 1))
case $err in *inst-6:*key*) fail "status warned about inst-6" ;; esac
# ... and so does exec, after the command, on the same sessions.
before=$(grep -h "Accepted publickey" "$D"/groups/*/sshd.log "$D"/instances/*/sshd/sshd.log 2>/dev/null | wc -l)
run exec 'inst-5,inst-6' -- echo hi
expect_rc 0 "exec with a re-injected key"
expect_match "$err" "warning: inst-5: a key gpufleet took off is back in ~/.ssh/authorized_keys" \
    "exec warns of a re-injected key"
checks=$((checks + 1))
case $err in *inst-6:*key*) fail "exec warned about inst-6" ;; esac
after=$(grep -h "Accepted publickey" "$D"/groups/*/sshd.log "$D"/instances/*/sshd/sshd.log 2>/dev/null | wc -l)
expect_eq $((after - before)) 2 "the check reuses the sessions (no new login)"

# --- encrypted managed keys: rotate, then exec decrypts with [keys] -------
printf 'managed secret\n' >"$T/keypass"
mkdir -p "$XDG_CONFIG_HOME/gpufleet"
printf '[keys]\npassphrase_file = %s\n' "$T/keypass" >"$XDG_CONFIG_HOME/gpufleet/config.ini"
D=$D20
run keys rotate inst-19
expect_rc 0 "rotation with an encrypted new key"
enc=$(current_key inst-19)
checks=$((checks + 1))
ssh-keygen -y -P '' -f "$enc" >/dev/null 2>&1 && fail "new key not encrypted"
run exec inst-19 -- echo decrypted
expect_eq "$out" "inst-19: decrypted" "exec decrypts the managed key with [keys] passphrase_file"
# passphrase_file = ask: asked once on the terminal for the whole run (a
# second prompt would wait for input that never comes, and time out).
printf '[keys]\npassphrase_file = ask\n' >"$XDG_CONFIG_HOME/gpufleet/config.ini"
(sleep 2; printf 'typed at the prompt\n') | timeout 90 script -qec \
    "'$GPUFLEET' keys rotate 'inst-17,inst-18'" "$T/ask.log" >/dev/null 2>&1
rc=$?
expect_rc 0 "rotation asking the passphrase on the terminal"
expect_eq "$(grep -c "Passphrase for gpufleet's keys" "$T/ask.log")" 1 \
    "asked once for two hosts"
for n in 17 18; do
	checks=$((checks + 1))
	ssh-keygen -y -P 'typed at the prompt' -f "$(current_key inst-$n)" \
	    >/dev/null 2>&1 || fail "inst-$n key not encrypted with the typed passphrase"
done
rm "$XDG_CONFIG_HOME/gpufleet/config.ini"

# --- --revoke: a compromised key leaves every selected instance -------------
# On inst-6 it hides behind a quoted command= holding spaces, "ssh-" and \"
# escapes, and again on a CRLF line, with a \v ending its blob and with a \f
# inside it; on inst-7 a leaked RSA key is spelt with e as 00 01 00 01. sshd
# reads all of them as the key.
ssh-keygen -q -t ed25519 -N '' -C leaked -f "$T/leaked"
ssh-keygen -q -t rsa -b 2048 -N '' -C leaked -f "$T/leaked-rsa"
leaked_opts='command="echo use ssh-keygen; exec sh -c \"$SSH_ORIGINAL_COMMAND\""'
printf '%s %s\n%s\r\n' "$leaked_opts" "$(cat "$T/leaked.pub")" \
    "$(cat "$T/leaked.pub")" >>"$(akfile inst-6)"
read -r lt lb _ <"$T/leaked.pub"
printf '%s %s\v leaked\nno-pty %s %s\f%s leaked\n' "$lt" "$lb" \
    "$lt" "${lb:0:20}" "${lb:20}" >>"$(akfile inst-6)"
printf '%s\n' "$(cat "$T/leaked.pub")" >>"$(akfile inst-7)"
python3 - "$T/leaked-rsa.pub" >>"$(akfile inst-7)" <<'PY'
import base64, struct, sys
t, b = open(sys.argv[1]).read().split()[:2]
d = base64.b64decode(b)
f, i = [], 0
while i < len(d):
    n = struct.unpack(">I", d[i:i + 4])[0]
    f.append(d[i + 4:i + 4 + n])
    i += 4 + n
s = lambda x: struct.pack(">I", len(x)) + x
v = s(f[0]) + s(b"\0" + f[1]) + s(f[2])
print("ssh-rsa", base64.b64encode(v).decode(), "leaked planted")
PY
for n in 6 7; do
	cp "$(akfile inst-$n)" "$T/rv-$n"
	checks=$((checks + 1))
	login inst-$n "$T/leaked" || fail "inst-$n: the leaked key does not log in before the revoke"
done
checks=$((checks + 1))
login inst-7 "$T/leaked-rsa" || fail "inst-7: the planted RSA spelling does not log in before the revoke"
run keys rotate 'inst-6,inst-7' --revoke "$T/leaked.pub"
expect_rc 0 "revoke"
expect_match "$out" "^inst-6: revoked SHA256:" "inst-6 revoked"
expect_match "$out" "^inst-7: revoked SHA256:" "inst-7 revoked"
run keys rotate inst-7 --revoke "$T/leaked-rsa.pub"
expect_rc 0 "revoke a key planted in another spelling"
expect_match "$out" "^inst-7: revoked SHA256:" "inst-7 revoked the RSA key"
for n in 6 7; do
	checks=$((checks + 1))
	grep -av leaked "$T/rv-$n" | cmp -s - "$(akfile inst-$n)" ||
	    fail "inst-$n: revoke changed more or less than the leaked lines"
	checks=$((checks + 1))
	! login inst-$n "$T/leaked" || fail "inst-$n: leaked key still logs in"
	checks=$((checks + 1))
	login inst-$n "$(current_key inst-$n)" || fail "inst-$n: current key lost by revoke"
done
checks=$((checks + 1))
! login inst-7 "$T/leaked-rsa" || fail "inst-7: the planted RSA spelling still logs in"
run keys rotate 'inst-6,inst-7' --revoke "$T/leaked.pub"
expect_rc 0 "revoke again"
expect_match "$out" "^inst-6: not present: SHA256:" "a second revoke finds nothing"
run keys rotate inst-6 --revoke "$(current_key inst-6).pub"
expect_rc 1 "revoking the key gpufleet uses is refused"
expect_contains "$out" "rotate first" "refusal says what to do"
checks=$((checks + 1))
login inst-6 "$(current_key inst-6)" || fail "inst-6: refused revoke lost the key"

# --- --shared: one key for the selected set ----------------------------------
D=$D20
run keys rotate 'inst-9,inst-10' --shared
expect_rc 0 "shared rotation"
expect_eq "$(current_key inst-9)" "$(current_key inst-10)" "one key for both"
expect_match "$(current_key inst-9)" "/shared-[0-9-]+$" "shared key name"
checks=$((checks + 1))
login inst-10 "$(current_key inst-10)" || fail "shared key does not log in"

# --- harden reports and changes nothing ---------------------------------------
unmanaged=$(keyline unmanaged rsa)
ublob=$(awk '{ print $2 }' "$T/unmanaged.pub")
printf 'no-pty %s\n' "${unmanaged% *} someone@else" >>"$(akfile inst-11)"
# An attacker's key behind an option that quotes gpufleet's own line.
managed11=$(cat "$(current_key inst-11).pub")
evil=$(keyline evil)
printf 'command="exec %s" %s\n' "$managed11" "${evil% *} evil" >>"$(akfile inst-11)"
cp "$D/client/id_ed25519" "$(instance_dir inst-11)/home/id_rsa"
chmod 0644 "$(instance_dir inst-11)/home/id_rsa"
cp "$(akfile inst-11)" "$T/h-before"
run harden 'inst-11,inst-13'
expect_rc 1 "harden finds something"
# The fleet's sshd (not the machine's /etc/ssh) says PasswordAuthentication no.
case $out in *"inst-11: password login"*) fail "inst-11: a password login its sshd does not allow" ;; esac
expect_contains "$out" "inst-11: key not managed by gpufleet: ssh-rsa ${ublob:0:16}... someone@else" "unmanaged key reported"
expect_contains "$out" "inst-11: key not managed by gpufleet: ssh-ed25519 AAAAC3NzaC1lZDI1... evil" \
    "a key behind an option quoting gpufleet's key is reported"
expect_match "$out" "^inst-11: private key readable by anyone: .*/inst-11/home/id_rsa$" "readable key reported"
expect_eq "$(printf '%s\n' "$out" | grep '^inst-13: key not managed')" \
    "inst-13: key not managed by gpufleet: ssh-ed25519 AAAAC3NzaC1lZDI1... other-13" \
    "inst-13: only the seeded foreign key is reported"
checks=$((checks + 1))
cmp -s "$T/h-before" "$(akfile inst-11)" || fail "harden changed authorized_keys"
expect_eq "$(stat -c %a "$(instance_dir inst-11)/home/id_rsa")" 644 "harden changed no mode"
run harden inst-11 --json
expect_eq "$(printf '%s' "$out" | jq -r '.[0].unmanaged_keys[0]')" \
    "no-pty ${unmanaged% *} someone@else" "harden --json"
conf=$D/groups/g1/sshd_config # inst-1..16's sshd
run harden inst-11 --json
expect_eq "$(printf '%s' "$out" | jq -r '.[0].password_authentication')" no "harden --json: password_authentication"
expect_match "$(printf '%s' "$out" | jq -r '.[0].password_source')" "^(sshd -T -f )?$conf\$" \
    "harden --json: the serving sshd's config, by sshd -T (the fleet's user owns its host key) or read"
# Keyboard-interactive with UsePAM yes asks for the password: a password
# login too. What harden reads is the serving sshd's config file: edited
# here (the running sshd keeps what it read at start), one case per run.
cp "$conf" "$T/sshd_config.saved"
harden_with() {
	sed "$1" "$T/sshd_config.saved" >"$conf"
	run harden inst-13
	cat "$T/sshd_config.saved" >"$conf"
}
src="(sshd -T -f )?$conf"
harden_with 's/^UsePAM no$/UsePAM yes/; s/^KbdInteractiveAuthentication no$/KbdInteractiveAuthentication yes/'
expect_rc 1 "harden finds keyboard-interactive with PAM"
expect_match "$out" "^inst-13: password login: keyboard-interactive with UsePAM yes \($src; $src\)$" \
    "KbdInteractiveAuthentication with UsePAM reported"
harden_with 's/^UsePAM no$/UsePAM yes/; s/^KbdInteractiveAuthentication no$/ChallengeResponseAuthentication yes/'
expect_match "$out" "^inst-13: password login: keyboard-interactive with UsePAM yes \($src; $src\)$" \
    "ChallengeResponseAuthentication with UsePAM reported"
harden_with 's/^KbdInteractiveAuthentication no$/KbdInteractiveAuthentication yes/'
checks=$((checks + 1))
case $out in *"inst-13: password login"*) fail "inst-13 (UsePAM no) reported" ;; esac
sed 's/^UsePAM no$/UsePAM yes/; s/^KbdInteractiveAuthentication no$/KbdInteractiveAuthentication yes/' \
    "$T/sshd_config.saved" >"$conf"
run harden inst-13 --json
cat "$T/sshd_config.saved" >"$conf"
expect_eq "$(printf '%s' "$out" | jq -r '.[0].kbd_interactive_pam')" true "harden --json kbd_interactive_pam"

# --- crash after every step, then rerun -----------------------------------
# ok_after_kill NAME: some key gpufleet holds logs in; the file is whole.
ok_after_kill() {
	local n=$1 k ok=0 f
	f=$(akfile "$n")
	for k in "$KEYS"/*; do
		case $k in *.pub) continue ;; esac
		# (only a key the file lists can log in: no ssh for the rest)
		[ -f "$k" ] && [ -f "$k.pub" ] &&
		    grep -qF -- "$(cut -d' ' -f2 "$k.pub")" "$f" &&
		    login "$n" "$k" && { ok=1; break; }
	done
	checks=$((checks + 1))
	[ $ok = 1 ] || fail "after kill at step $2: no key gpufleet holds logs in to $n"
	checks=$((checks + 1))
	[ -s "$f" ] && [ -z "$(tail -c 1 "$f")" ] &&
	    ! grep -Fxv -e "$other_line" -e '# managed by hand' -e '' "$f" |
	    grep -Eqv '^ssh-ed25519 [A-Za-z0-9+/=]+ gpufleet:[^ ]+$' ||
	    fail "after kill at step $2: $f is empty or partial: $(cat -A "$f")"
}
for step in 1 2 3 4 5 6 7; do
	GPUFLEET_TEST_CRASH_AT=$step "$GPUFLEET" keys rotate 'inst-8,inst-12' \
	    >"$T/out" 2>"$T/err"
	rc=$?
	expect_rc 137 "SIGKILL after step $step"
	for n in inst-8 inst-12; do ok_after_kill $n $step; done
	cp "$(akfile inst-8)" "$T/ak-before"
	touch -d '2020-01-01' "$(akfile inst-8)"
	m1=$(stat -c %Y "$(akfile inst-8)")
	run keys rotate 'inst-8,inst-12'
	expect_rc 0 "rerun after a kill at step $step"
	expect_eq "$(printf '%s\n' "$out" | grep -c ': rotated to ')" 2 "rerun after step $step finishes both"
	if [ "$step" -ge 5 ]; then
		expect_eq "$(stat -c %Y "$(akfile inst-8)")" "$m1" \
		    "rerun after step $step changes no file (mtime)"
	fi
	for n in inst-8 inst-12; do
		checks=$((checks + 1))
		login $n "$(current_key $n)" || fail "$n: current key fails after rerun (step $step)"
	done
	run keys status 'inst-8,inst-12'
	expect_eq "$(printf '%s\n' "$out" | grep -c 'done, step 7/7')" 2 "status after rerun of step $step"
done

# --- StrictModes yes ---------------------------------------------------------
fleet_up 2 --strict-modes --prefix strict
run keys rotate 'strict-*'
expect_rc 0 "rotate under StrictModes yes"
for n in strict-1 strict-2; do
	checks=$((checks + 1))
	login $n "$(current_key $n)" || fail "$n: new key does not log in (StrictModes)"
	expect_eq "$(stat -c %a "$(dirname "$(akfile $n)")")" 700 "$n ~/.ssh mode"
	expect_eq "$(stat -c %a "$(akfile $n)")" 600 "$n authorized_keys mode"
done
DS=$D

# --- verification failure: the sshd refuses the new key type ----------------
fleet_up 2 --group-size 1 --prefix pk
g=$(grep -l "$(instance_dir pk-1)/home" "$D"/groups/*/sshd_config)
printf '\tPubkeyAcceptedAlgorithms ssh-ed25519\n' >>"$g"
/usr/sbin/sshd -t -f "$g" || fail "sshd -t rejects the edited config"
kill -HUP "$(cat "$(dirname "$g")/sshd.pid")"
for i in $(seq 50); do login pk-1 "$D/client/id_ed25519" && break; sleep 0.1; done
cp "$(akfile pk-1)" "$T/pk-before"
run keys rotate 'pk-*' --type ecdsa
expect_rc 1 "one host cannot verify"
expect_match "$out" "^pk-1: failed: the new key did not log in \(.*\); removed it again, the old key stays$" "pk-1 reported"
expect_match "$out" "^pk-2: rotated to " "pk-2 rotated"
checks=$((checks + 1))
cmp -s "$T/pk-before" "$(akfile pk-1)" || fail "pk-1 authorized_keys not restored"
checks=$((checks + 1))
login pk-1 "$D/client/id_ed25519" || fail "pk-1: old key lost"
run keys status pk-1
expect_match "$out" "pk-1 .* reverted, step 2/7" "status shows reverted"
# The key made for the reverted rotation is deleted, not left behind.
expect_eq "$("$GPUFLEET" keys ls | awk '$1 ~ /^pk-1-/ { print $5 }')" deleted \
    "the reverted rotation's key is deleted"
checks=$((checks + 1))
! ls "$KEYS"/pk-1-* >/dev/null 2>&1 || fail "the reverted rotation's key files are left: $(ls "$KEYS"/pk-1-*)"

# --- a kill between a new key's files and its row: an orphan until gc -----
GPUFLEET_TEST_CRASH_AT=0 "$GPUFLEET" keys rotate pk-2 >"$T/out" 2>"$T/err"
rc=$?
expect_rc 137 "SIGKILL after writing the new key's files"
orphan=$(cd "$KEYS" && ls pk-2-* | grep -v '\.pub$' | while read -r f; do
	"$GPUFLEET" keys ls --json | jq -e --arg p "$KEYS/$f" 'any(.[]; .path == $p and (.orphan | not))' >/dev/null || echo "$f"
done)
checks=$((checks + 1))
[ -n "$orphan" ] || fail "the kill left no orphan key file"
run keys ls
expect_match "$out" "^$orphan +- +- +[0-9]+[smhd] +orphan +-" "keys ls lists the orphan"
expect_contains "$err" "orphan key (no database row" "keys ls warns of the orphan"
run keys rotate pk-2
expect_rc 0 "a rotation after the kill"
run keys gc
expect_rc 0 "keys gc"
expect_eq "$out" "removed $orphan (no database row (interrupted before it was recorded))" "gc removes the orphan"
checks=$((checks + 1))
[ ! -e "$KEYS/$orphan" ] && [ ! -e "$KEYS/$orphan.pub" ] || fail "gc left the orphan's files"
checks=$((checks + 1))
login pk-2 "$(current_key pk-2)" || fail "pk-2: gc removed the key in use"

# --- files that must not be touched, an unreachable host --------------------
fleet_up 5 --group-size 1 --prefix bad
chmod 0400 "$(akfile bad-1)"
mv "$(akfile bad-2)" "$(akfile bad-2).real"
ln -s "$(akfile bad-2).real" "$(akfile bad-2)"
chmod 0500 "$(dirname "$(akfile bad-3)")"
fleet break bad-4 refuse >/dev/null
for n in 1 2 3; do cp -P "$(akfile bad-$n)" "$T/bad-$n"; done
cp "$(akfile bad-2).real" "$T/bad-2.real"
run keys rotate 'bad-*'
expect_rc 1 "bad hosts fail"
expect_match "$out" "^bad-1: failed: step 2 \(add the new key\): exit 5: .*read-only" "read-only reported"
expect_match "$out" "^bad-2: failed: step 2 \(add the new key\): exit 4: .*symbolic link" "symlink reported"
expect_match "$out" "^bad-3: failed: step 2 \(add the new key\): exit 6: .*cannot write in " "unwritable ~/.ssh reported"
expect_match "$out" "^bad-4: failed: step 2 \(add the new key\): .*refused" "unreachable reported"
expect_match "$out" "^bad-5: rotated to " "bad-5 rotated"
for n in 1 3; do
	checks=$((checks + 1))
	cmp -s "$T/bad-$n" "$(akfile bad-$n)" || fail "bad-$n changed"
	checks=$((checks + 1))
	login bad-$n "$D/client/id_ed25519" || fail "bad-$n: old key lost"
done
checks=$((checks + 1))
[ -L "$(akfile bad-2)" ] && cmp -s "$T/bad-2.real" "$(akfile bad-2).real" ||
    fail "bad-2 symlink replaced or target changed"
chmod 0700 "$(dirname "$(akfile bad-3)")"
fleet heal bad-4 >/dev/null
run keys rotate 'bad-3,bad-4'
expect_rc 0 "failed hosts rotate on rerun once fixed"

# --- two rotations at once ---------------------------------------------------
fleet break bad-4 silent >/dev/null
"$GPUFLEET" keys rotate bad-4 >"$T/bg.out" 2>&1 &
bg=$!
sleep 1.5
run keys rotate bad-5
expect_rc 2 "a second rotation refuses"
expect_match "$err" "another key rotation \(pid $bg, since [0-9]+\) is running" "refusal names the pid"
fleet heal bad-4 >/dev/null
wait $bg
run keys rotate bad-5
expect_rc 0 "after the first ends, a rotation runs"

finish

#!/usr/bin/env bash
# Self-test of the harness's --root-login instances (fleet --help): root
# logs in with a password (PasswordAuthentication, or only
# keyboard-interactive through PAM), sessions stay inside the instance, and
# whatever a session does to root's password edits the instance's own /etc
# copy, never the machine's /etc/shadow. `down` leaves nothing behind.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
FLEET=${GPUFLEET_HARNESS:-$HERE/../harness/fleet}
if [[ $EUID -ne 0 ]]; then
	echo "SKIP: not root: --root-login sets root's password in a copy of /etc" >&2
	exit 0
fi

STEP=setup
fail() {
	echo "FAIL [$STEP]: $*" >&2
	exit 1
}
step() {
	STEP=$1
	echo "--- $1"
}

D=''
T=$(mktemp -d)
cleanup() {
	local rc=$?
	[[ -n $D ]] && "$FLEET" -d "$D" down || true
	rm -rf -- "$T"
	if ((rc != 0)); then echo "harness root-login test FAILED (at: $STEP)" >&2; fi
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

shadow_before=$(sha256sum </etc/shadow)
passwd_before=$(sha256sum </etc/passwd)

step up
# bad uses first: nothing may be left of them
out=$("$FLEET" -d "$T/bad" up 2 --owner 0 --root-login 3 2>&1) && fail "--root-login 3 of 2 instances accepted"
[[ $out == *"only 2 instances"* ]] || fail "unclear error for --root-login 3: $out"
out=$("$FLEET" -d "$T/bad" up 2 --owner 0 --root-login 1:pam 2>&1) && fail "--root-login 1:pam accepted"
[[ $out == *"want I or I:kbdint"* ]] || fail "unclear error for --root-login 1:pam: $out"
[[ ! -e $T/bad ]] || fail "a refused up left $T/bad"

D=$("$FLEET" up 3 --root-login 2 --root-login=3:kbdint) || fail "fleet up failed"
declare -A PORT IDIR USR
while IFS=$'\t' read -r name port user idir; do
	PORT[$name]=$port IDIR[$name]=$idir USR[$name]=$user
done <"$D/instances.tsv"
[[ ${USR[inst-1]} == gpufleet-test && ${USR[inst-2]} == root && ${USR[inst-3]} == root ]] ||
	fail "login users: ${USR[*]}"
for name in inst-2 inst-3; do
	i=${IDIR[$name]}
	[[ -d $i/etc && -s $i/password ]] || fail "$name has no etc/ or password"
	[[ $(stat -c '%a %U' "$i/password") == "600 root" ]] || fail "$name's password file not 0600 root"
	# its own sshd, in another mount namespace than ours
	read -r pid <"$D/groups/$(<"$i/group")/sshd.pid"
	[[ $(readlink "/proc/$pid/ns/mnt") != "$(readlink /proc/self/ns/mnt)" ]] || fail "$name's sshd shares our mount namespace"
	[[ $(wc -l <"$D/groups/$(<"$i/group")/members") == 1 ]] || fail "$name shares its sshd"
done
[[ ! -e ${IDIR[inst-1]}/etc && ! -e ${IDIR[inst-1]}/password ]] || fail "plain inst-1 got a password"

# ssh NAME METHOD PASSWORD-FILE COMMAND: a password login with OpenSSH
cat >"$T/askpass" <<'EOS'
#!/bin/sh
cat "$ASKPASS_FILE"
EOS
chmod 0755 "$T/askpass"
pwssh() {
	local name=$1 method=$2 pwfile=$3
	shift 3
	ASKPASS_FILE=$pwfile SSH_ASKPASS=$T/askpass SSH_ASKPASS_REQUIRE=force \
		setsid -w ssh -o UserKnownHostsFile="$D/known_hosts" -o GlobalKnownHostsFile=/dev/null \
		-o StrictHostKeyChecking=yes -o PubkeyAuthentication=no -o PreferredAuthentications="$method" \
		-o NumberOfPasswordPrompts=1 -o KexAlgorithms=curve25519-sha256 \
		-p "${PORT[$name]}" "root@127.0.0.1" "$@" </dev/null
}
keyssh() { ssh -F "$D/ssh_config" -o KexAlgorithms=curve25519-sha256 "$@"; }
echo wrong-password >"$T/wrong"

step "password login"
out=$(pwssh inst-2 password "${IDIR[inst-2]}/password" 'echo "$(id -un)|$HOME|$(pwd)|$GPUFLEET_INSTANCE"') ||
	fail "password login to inst-2 failed"
[[ $out == "root|${IDIR[inst-2]}/home|${IDIR[inst-2]}/home|inst-2" ]] || fail "inst-2 session: $out"
pwssh inst-2 password "$T/wrong" true 2>/dev/null && fail "inst-2 took a wrong password"
pwssh inst-2 password "${IDIR[inst-3]}/password" true 2>/dev/null && fail "inst-2 took inst-3's password"
out=$(keyssh inst-2 'id -un') || fail "key login to inst-2 failed"
[[ $out == root ]] || fail "key login to inst-2 as $out"
pwssh inst-1 password "${IDIR[inst-2]}/password" true 2>/dev/null && fail "plain inst-1 took a password"

step "keyboard-interactive only"
out=$(pwssh inst-3 keyboard-interactive "${IDIR[inst-3]}/password" 'echo "$(id -un)|$HOME|$GPUFLEET_INSTANCE"') ||
	fail "keyboard-interactive login to inst-3 failed"
[[ $out == "root|${IDIR[inst-3]}/home|inst-3" ]] || fail "inst-3 session: $out"
pwssh inst-3 password "${IDIR[inst-3]}/password" true 2>/dev/null && fail "inst-3 took PasswordAuthentication"
pwssh inst-3 keyboard-interactive "$T/wrong" true 2>/dev/null && fail "inst-3 took a wrong password"

step "passwd inside edits only the copy"
pwssh inst-2 password "${IDIR[inst-2]}/password" 'passwd -l root >/dev/null' || fail "passwd -l root in inst-2 failed"
grep -q '^root:!' "${IDIR[inst-2]}/etc/shadow" || fail "inst-2's shadow copy not locked"
[[ $(sha256sum </etc/shadow) == "$shadow_before" ]] || fail "the machine's /etc/shadow changed"
pwssh inst-2 password "${IDIR[inst-2]}/password" true 2>/dev/null && fail "locked inst-2 took the password"
# UsePAM no: sshd refuses a locked account even by key
keyssh inst-2 true 2>/dev/null && fail "locked inst-2 (UsePAM no) took the key"
pwssh inst-3 keyboard-interactive "${IDIR[inst-3]}/password" 'set -e; echo root:new-pass-3 | chpasswd; passwd -l root >/dev/null' ||
	fail "chpasswd/passwd -l in inst-3 failed"
grep -q '^root:!' "${IDIR[inst-3]}/etc/shadow" || fail "inst-3's shadow copy not locked"
[[ $(sha256sum </etc/shadow) == "$shadow_before" && $(sha256sum </etc/passwd) == "$passwd_before" ]] ||
	fail "the machine's /etc/shadow or /etc/passwd changed"
# UsePAM yes: a locked password leaves key login working (Debian's sshd)
out=$(keyssh inst-3 'echo key-ok') || fail "key login to locked inst-3 (UsePAM yes) failed"
[[ $out == key-ok ]] || fail "inst-3 said $out"

step "break and heal keep the namespace"
"$FLEET" -d "$D" break inst-3 refuse >/dev/null || fail "break inst-3 refuse"
"$FLEET" -d "$D" heal inst-3 || fail "heal inst-3"
out=$(keyssh inst-3 'grep -c "^root:!" /etc/shadow') || fail "key login to healed inst-3 failed"
[[ $out == 1 ]] || fail "healed inst-3 does not see its own /etc copy ($out)"
[[ $(sha256sum </etc/shadow) == "$shadow_before" ]] || fail "the machine's /etc/shadow changed"

step down
"$FLEET" -d "$D" down || fail "down failed"
[[ ! -e $D ]] || fail "down left $D"
pgrep -f -- "$D/" >/dev/null && fail "processes of $D left"
grep -qF -- "$D" /proc/self/mountinfo && fail "a mount of $D is visible here"
D=''
[[ $(sha256sum </etc/shadow) == "$shadow_before" ]] || fail "the machine's /etc/shadow changed"
echo "harness root-login self-test passed"

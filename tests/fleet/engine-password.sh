#!/usr/bin/env bash
# The engine's password login (engine_host.password) against the harness's
# --root-login instances: password authentication, keyboard-interactive
# (PAM's "Password:" prompt), the keys first, a refused password as one
# `auth` failure whose message never holds the password.
. "$(dirname "$0")/../e2e/lib.sh"
: "${GPUFLEET_ENGINEPW:=$GPUFLEET_SRC/build/tests/enginepw}"
if [ "$(id -u)" != 0 ]; then
	echo "SKIP: not root: the harness's --root-login needs root" >&2
	exit 0
fi

fleet_up 3 --root-login 2 --root-login 3:kbdint
port() { awk -v n="$1" '$1 == n { print $2 }' "$D/instances.tsv"; }
key=$D/client/id_ed25519
pw2=$(instance_dir inst-2)/password
pw3=$(instance_dir inst-3)/password
ssh-keygen -q -N '' -t ed25519 -f "$T/other" </dev/null
echo 'wrong-pass-Xq7' >"$T/wrong"

ep() { out=$("$GPUFLEET_ENGINEPW" "$@" 2>"$T/err"); rc=$?; err=$(cat "$T/err"); }

ep root "$(port inst-2)" "$pw2"
expect_rc 0 "enginepw ran"
expect_eq "$out" "ok 0 inst-2 root" "password authentication alone"

ep root "$(port inst-2)" "$pw2" "$T/other"
expect_eq "$out" "ok 0 inst-2 root" "a refused key, then the password"

ep root "$(port inst-2)" "$pw2" "$key"
expect_eq "$out" "ok 0 inst-2 root" "the key first (the password never needed)"

ep root "$(port inst-3)" "$pw3"
expect_eq "$out" "ok 0 inst-3 root" "keyboard-interactive (UsePAM yes) answered with the password"

ep root "$(port inst-3)" - "$T/other" <"$pw3"
expect_eq "$out" "ok 0 inst-3 root" "refused key, then keyboard-interactive; password from stdin"

ep root "$(port inst-2)" "$T/wrong"
expect_eq "$out" "auth root@127.0.0.1 refused the password" "a wrong password: auth"
ep root "$(port inst-2)" "$T/wrong" "$T/other"
expect_eq "$out" "auth root@127.0.0.1 refused our key and the password" \
    "a wrong key and password: auth, both named"
ep root "$(port inst-3)" "$T/wrong"
expect_eq "$out" "auth root@127.0.0.1 refused the password" \
    "a wrong password over keyboard-interactive: auth"
ep root "$(port inst-3)" "$pw2"
expect_eq "$out" "auth root@127.0.0.1 refused the password" "another instance's password: auth"

# a plain instance offers no password method at all
user=$(awk -v n=inst-1 '$1 == n { print $3 }' "$D/instances.tsv")
ep "$user" "$(port inst-1)" "$T/wrong" "$T/other"
expect_eq "$out" "auth $user@127.0.0.1 refused our key and takes no password (its sshd offers neither password nor keyboard-interactive login)" \
    "no password method offered: auth, saying so"
ep "$user" "$(port inst-1)" "$T/wrong"
expect_eq "$out" "auth $user@127.0.0.1 takes no password (its sshd offers neither password nor keyboard-interactive login)" \
    "no password method offered, no key: auth, saying so"

# the right password, expired: PAM asks for a new one after it, which is
# not "refused" (inst-3's /etc is its own copy: chage changes only that)
unshare -m --propagation private sh -c 'mount --bind "$1" /etc && chage -d 0 root' \
    sh "$(instance_dir inst-3)/etc" || fail "cannot expire inst-3's password"
ep root "$(port inst-3)" "$pw3"
expect_match "$out" "^auth root@127.0.0.1 took the password, then asked \".*[Pp]assword.*\" \(keyboard-interactive\): log in once by hand to answer it$" \
    "an expired password: what PAM asked after it"
ep root "$(port inst-3)" "$T/wrong"
expect_eq "$out" "auth root@127.0.0.1 refused the password" "a wrong password while expired: still refused"

# never the password in what it says, nor in sshd's logs
for p in "$(cat "$T/wrong")" "$(cat "$pw2")"; do
	checks=$((checks + 1))
	if grep -rqF -- "$p" "$D"/groups/*/sshd.log; then fail "a password is in sshd's log"; fi
done
finish

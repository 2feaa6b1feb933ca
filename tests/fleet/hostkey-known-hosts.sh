#!/usr/bin/env bash
# First contact consults the user's known_hosts files, as ssh would: a key
# they list for [127.0.0.1]:PORT (plain or hashed) is pinned as
# "known_hosts"; other keys listed for it refuse the host as changed with
# both fingerprints and pin nothing; a @revoked key is refused; a negated
# pattern does not list the host; GlobalKnownHostsFile and
# UserKnownHostsFile come from ~/.ssh/config; the host is asked first for
# the key type listed. The files are never written.
. "$(dirname "$0")/../e2e/lib.sh"
export GPUFLEET_NO_PROGRESS=1
db=$XDG_DATA_HOME/gpufleet/fleet.db

# Added by login line: the fleet's ssh_config names its own known_hosts.
FLEET_NO_IMPORT=1 fleet_up 4
port() { awk -v n="$1" '$1 == n { print $2 }' "$D/instances.tsv"; }
user=$(awk '$1 == "inst-1" { print $3 }' "$D/instances.tsv")
p1=$(port inst-1) p2=$(port inst-2) p3=$(port inst-3) p4=$(port inst-4)
for i in 1 2 3 4; do
	run add "inst-$i" "ssh -p $(port "inst-$i") -i $D/client/id_ed25519 $user@127.0.0.1"
	expect_rc 0 "add inst-$i"
done
# The line sshd's ed25519 key has in the fleet's known_hosts, and its parts.
line() { grep "^\[127.0.0.1\]:$1 " "$D/known_hosts" | head -1; }
sshd_fp() { line "$1" | ssh-keygen -lf - | awk '{ print $2 }'; }
sshd_key() { line "$1" | awk '{ print $2 " " $3 }'; }
ssh-keygen -q -t ed25519 -N '' -f "$T/other" >/dev/null
other=$(awk '{ print $1 " " $2 }' "$T/other.pub")
other_fp=$(ssh-keygen -lf "$T/other.pub" | awk '{ print $2 }')
pin() {
	sqlite3 "$db" "SELECT coalesce(max(k.source), 'none') FROM host_key k JOIN instance i ON i.id = k.instance_id WHERE i.name = '$1'"
}

mkdir -m 0700 "$HOME/.ssh"
{
	line "$p1"
	echo "[127.0.0.1]:$p2 $other"
	echo "@revoked [127.0.0.1]:$p3 $(sshd_key "$p3")"
	echo "[127.0.0.1]:*,![127.0.0.1]:$p4 $other"
	echo "@cert-authority [127.0.0.1]:$p4 $other"
	echo "# a comment, then garbage"
} >"$HOME/.ssh/known_hosts"
ssh-keygen -Hf "$HOME/.ssh/known_hosts" >/dev/null 2>&1 # hashed entries
rm -f "$HOME/.ssh/known_hosts.old"
checks=$((checks + 1))
grep -q '^|1|' "$HOME/.ssh/known_hosts" || fail "ssh-keygen -H hashed nothing"
{
	echo "[127.0.0.1]:$p4"
	echo "@revoked"
	head -c 20000 /dev/zero | tr '\0' x
	echo
} >>"$HOME/.ssh/known_hosts"
cp "$HOME/.ssh/known_hosts" "$T/known_hosts.orig"

# --- a key listed for the host (hashed) is pinned as known_hosts ---------
run exec inst-1 -- true
expect_rc 0 "inst-1 listed with its key"
expect_eq "$(pin inst-1)" known_hosts "inst-1 pinned from known_hosts"

# --- another key listed: refused with both fingerprints, nothing pinned --
run exec inst-2 -- true
expect_rc 1 "inst-2 listed with another key"
expect_contains "$err" "HOST KEY CHANGED for inst-2" "says changed"
expect_contains "$err" "lists ssh-ed25519 $other_fp ($HOME/.ssh/known_hosts:2)" \
    "the listed key's fingerprint and where"
expect_contains "$err" "presented ssh-ed25519 $(sshd_fp "$p2")" \
    "the presented key's fingerprint"
expect_contains "$err" "gpufleet hostkey accept inst-2" "how to accept it"
expect_eq "$(pin inst-2)" none "nothing pinned for inst-2"
run add --check box-2 "ssh -p $p2 -i $D/client/id_ed25519 $user@127.0.0.1"
expect_rc 1 "add --check refuses the host ssh would refuse"
expect_contains "$err" "HOST KEY CHANGED for box-2" "add --check says changed"
expect_eq "$(sqlite3 "$db" "SELECT count(*) FROM instance WHERE name = 'box-2'")" \
    0 "add --check added nothing"
run hostkey accept inst-2
expect_rc 0 "hostkey accept trusts it"
run exec inst-2 -- true
expect_rc 0 "inst-2 works after accept"
expect_eq "$(pin inst-2)" accepted "inst-2 pinned as accepted"

# --- a @revoked key is refused ------------------------------------------
run exec inst-3 -- true
expect_rc 1 "inst-3's key is revoked"
expect_contains "$err" "host key ssh-ed25519 $(sshd_fp "$p3") of inst-3" \
    "names the key"
expect_contains "$err" "marked @revoked in $HOME/.ssh/known_hosts:3" "and where"
expect_eq "$(pin inst-3)" none "nothing pinned for inst-3"

# --- negated: not listed, only a CA line: first use ----------------------
run exec inst-4 -- true
expect_rc 0 "inst-4 negated out of the other key's line"
expect_eq "$(pin inst-4)" first-use "inst-4 pinned on first use"
checks=$((checks + 1))
cmp -s "$T/known_hosts.orig" "$HOME/.ssh/known_hosts" ||
    fail "~/.ssh/known_hosts was changed"

# --- the files ~/.ssh/config names: UserKnownHostsFile, Global... --------
run hostkey forget inst-1
run hostkey forget inst-4
echo "[127.0.0.1]:$p1 $other" >"$T/global_hosts"
line "$p4" >>"$T/global_hosts"
cat >"$HOME/.ssh/config" <<CFG
Host 127.0.0.1
	UserKnownHostsFile $T/none_such
	GlobalKnownHostsFile $T/global_hosts
CFG
run exec inst-4 -- true
expect_rc 0 "inst-4 listed in the GlobalKnownHostsFile"
expect_eq "$(pin inst-4)" known_hosts "inst-4 pinned from the global file"
run exec inst-1 -- true
expect_rc 1 "inst-1 listed with another key in the global file"
expect_contains "$err" "lists ssh-ed25519 $other_fp ($T/global_hosts:1)" \
    "the global file named"
expect_eq "$(pin inst-1)" none "nothing pinned for inst-1"

# --- asked first for the type known_hosts lists, as ssh does -------------
# inst-1's sshd also gets an ECDSA host key; listed only by that one,
# inst-1 is asked for ECDSA (not refused over its ed25519 key).
gdir=$(dirname "$(grep -l "^Port $p1\$" "$D"/groups/*/sshd_config)")
ssh-keygen -q -t ecdsa -N '' -f "$gdir/host_ecdsa_key" >/dev/null
sed -i "/^HostKey /a HostKey $gdir/host_ecdsa_key" "$gdir/sshd_config"
kill -HUP "$(cat "$gdir/sshd.pid")"
ecdsa=$(awk '{ print $1 " " $2 }' "$gdir/host_ecdsa_key.pub")
ecdsa_fp=$(ssh-keygen -lf "$gdir/host_ecdsa_key.pub" | awk '{ print $2 }')
served() { ssh-keyscan -t ecdsa -p "$p1" 127.0.0.1 2>/dev/null | grep -q ecdsa; }
for _ in $(seq 600); do # sshd re-executes itself: until it serves ECDSA
	served && break
	sleep 0.2
done
checks=$((checks + 1))
served || fail "sshd does not serve the ECDSA key: $(tail -3 "$gdir/sshd.log")"
echo "[127.0.0.1]:$p1 $ecdsa" >"$T/global_hosts"
run exec inst-1 -- true
expect_rc 0 "inst-1 listed with its ECDSA key only"
expect_eq "$(pin inst-1)" known_hosts "inst-1 pinned from known_hosts"
run hostkey show inst-1
expect_contains "$out" "ecdsa-sha2-nistp256 $ecdsa_fp" "the ECDSA key is pinned"

finish

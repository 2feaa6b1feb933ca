#!/usr/bin/env bash
# Pinned host keys (accept-new, strict, accept, forget), `gpufleet ssh`
# agreeing with the pins, ssh_config following, ProxyJump refusal, names
# resolved without blocking, and a passphrase read once per run.
. "$(dirname "$0")/../e2e/lib.sh"
export GPUFLEET_NO_PROGRESS=1

fleet_up 4
# First contact trusts the known_hosts files an instance's ssh_config names
# (hostkey-known-hosts.sh); the fleet's names the sshd keys, so it names
# none here, to see first use and strict at work.
sed -i '/UserKnownHostsFile/d' "$D/ssh_config"

# --- accept-new pins on first contact ------------------------------------
run hostkey show inst-1
expect_eq "$out" "inst-1: no host key pinned yet" "no pin before contact"
run exec inst-1 -- true
expect_rc 0 "first contact"
run hostkey show inst-1 --json
expect_match "$out" '"type": "ssh-ed25519"' "pinned type"
expect_match "$out" '"source": "first-use"' "pinned on first use"
fp=$(ssh-keygen -lf "$D/groups/g1/host_ed25519_key.pub" 2>/dev/null | awk '{print $2}')
[ -n "$fp" ] || fp=$(ssh-keygen -lf "$(ls "$D"/groups/*/*key.pub | head -1)" | awk '{print $2}')
expect_contains "$out" "\"fingerprint\": \"$fp\"" "the fingerprint is the sshd's"

# --- a changed key refuses that host only, and ssh agrees ----------------
run exec 'inst-1,inst-2' -- true
new=$(fleet break inst-1 hostkey)
run exec 'inst-1,inst-2' -- 'echo ran >$HOME/ran'
expect_rc 1 "changed key fails the run"
checks=$((checks + 1))
[ ! -e "$(instance_dir inst-1)/home/ran" ] || fail "command ran on inst-1"
checks=$((checks + 1))
[ -e "$(instance_dir inst-2)/home/ran" ] || fail "inst-2 did not run"
expect_contains "$err" "pinned ssh-ed25519 $fp, presented ssh-ed25519 $new" \
    "old and new fingerprints"
"$GPUFLEET" ssh inst-1 -- true >"$T/ssh.out" 2>&1
rc=$?
expect_rc 255 "gpufleet ssh refuses the changed key too"
expect_match "$(cat "$T/ssh.out")" "REMOTE HOST IDENTIFICATION HAS CHANGED" \
    "OpenSSH saw the pinned key"
run hostkey accept inst-1 --fingerprint SHA256:AAAAnotit
expect_rc 1 "accept with the wrong fingerprint"
run exec inst-1 -- true
expect_rc 1 "still refused after a refused accept"
run hostkey accept inst-1 --fingerprint "$new"
expect_rc 0 "accept the new key"
expect_eq "$out" "inst-1: pinned ssh-ed25519 $new" "accept output"
run exec inst-1 -- true
expect_rc 0 "works after accept"
run ssh inst-1 -- echo via ssh '$GPUFLEET_INSTANCE' '|' tr a-z A-Z
expect_rc 0 "gpufleet ssh after accept"
expect_eq "$out" 'VIA SSH INST-1' "ssh joins the words for the remote shell, like exec"
run ssh inst-1 --argv -- echo via ssh '$HOME' 'a  b'
expect_rc 0 "gpufleet ssh --argv"
expect_eq "$out" 'via ssh $HOME a  b' "ssh --argv keeps each argument exactly, like exec --argv"
fleet heal inst-1
run hostkey forget inst-1
expect_rc 0 "forget"
run exec inst-1 -- true
expect_rc 0 "re-pinned on next contact after forget"

# --- strict: only pinned or ~/.ssh/known_hosts keys -----------------------
mkdir -p "$XDG_CONFIG_HOME/gpufleet"
printf '[ssh]\nhost_key_policy = strict\n' >"$XDG_CONFIG_HOME/gpufleet/config.ini"
run exec inst-3 -- true
expect_rc 1 "strict refuses an unknown key"
expect_match "$err" "unknown host key .* strict" "strict message"
run hostkey show inst-3
expect_eq "$out" "inst-3: no host key pinned yet" "strict pinned nothing"
port3=$(awk '$1 == "inst-3" { print $2 }' "$D/instances.tsv")
mkdir -p "$HOME/.ssh"
grep "^\[127.0.0.1\]:$port3 " "$D/known_hosts" >"$HOME/.ssh/known_hosts"
ssh-keygen -Hf "$HOME/.ssh/known_hosts" >/dev/null 2>&1   # hashed entries
run exec inst-3 -- true
expect_rc 0 "strict accepts a key from ~/.ssh/known_hosts (hashed)"
run hostkey show inst-3 --json
expect_match "$out" '"source": "known_hosts"' "pinned from known_hosts"
run exec inst-1 -- true
expect_rc 0 "strict accepts a pinned key"
rm "$XDG_CONFIG_HOME/gpufleet/config.ini"

# --- imported instances follow their ssh_config ---------------------------
cp "$D/ssh_config" "$T/cfg"
run import "$T/cfg" --match inst-4 --tag moved
# (already imported from the fleet's file: nothing changes)
expect_match "$out" "nothing to import" "re-import of the same alias"
run rm --purge --yes --force inst-4
run import "$T/cfg" --match inst-4
expect_rc 0 "import from a copy"
port4=$(awk '$1 == "inst-4" { print $2 }' "$D/instances.tsv")
sed -i "s/Port $port4/Port 1/" "$T/cfg"
run exec inst-4 --connect-timeout 2 -- true
expect_match "$err" "refused \(127.0.0.1 port 1\)" "exec follows the edited Port"
run ls inst-4 --json
expect_match "$out" '"port": 1,' "ls shows the Port exec used"
sed -i "s/Port 1\$/Port $port4/" "$T/cfg"
accepted() { cat "$D"/groups/*/sshd.log "$D"/instances/*/sshd/sshd.log 2>/dev/null | grep -c "Connection from"; }
before=$(accepted)
run exec inst-4 -- true
expect_rc 0 "and back"
checks=$((checks + 1))
[ "$(accepted)" -gt "$before" ] || fail "sshd logs no 'Connection from' (the check below would prove nothing)"
printf '    ProxyJump jumphost\n' >>"$T/cfg"
before=$(accepted)
run exec inst-4 -- true
expect_rc 1 "ProxyJump is refused"
expect_match "$err" "ProxyJump jumphost .*not supported yet" "ProxyJump message"
# Refused before connecting anywhere (no sshd saw a connection).
expect_eq "$(accepted)" "$before" "ProxyJump refusal was immediate"

# --- names resolve through evdns; a bad name fails that host only --------
run add byname "$(awk 'NR==1{print $3}' "$D/instances.tsv")@localhost:$(awk 'NR==2{print $2}' "$D/instances.tsv")" \
    --identity "$D/client/id_ed25519"
run add nxhost "nosuchhost.invalid" --identity "$D/client/id_ed25519"
run exec 'byname,nxhost,inst-2' --connect-timeout 5 -- echo up
expect_match "$out" "byname: up" "a name that resolves"
expect_match "$out" "inst-2: up" "others unaffected"
expect_match "$err" "nxhost: cannot resolve nosuchhost.invalid" "a name that does not"
run rm --purge --yes --force byname nxhost

# --- an encrypted identity: the passphrase is read once per run ----------
cp "$D/client/id_ed25519" "$T/enc_key"
chmod 600 "$T/enc_key"
ssh-keygen -q -p -P '' -N 'correct horse' -f "$T/enc_key" >/dev/null
for n in 1 2 3; do
	run set "inst-$n" identity="$T/enc_key"
	expect_match "$err" "no longer follows" "set identity detaches from ssh_config"
done
mkfifo "$T/pass"
# A FIFO gives the passphrase to exactly one reader: a second read would
# block and the run would time out.
timeout 30 sh -c "printf 'correct horse\n' >'$T/pass'" &
GPUFLEET_PASSPHRASE_FILE=$T/pass timeout 20 "$GPUFLEET" exec 'inst-1,inst-2,inst-3' \
    -- echo ok >"$T/pp.out" 2>"$T/pp.err"
rc=$?
expect_rc 0 "encrypted key, passphrase from a file read once"
expect_eq "$(grep -c ': ok$' "$T/pp.out")" 3 "three hosts with one passphrase"
# Without a passphrase file: asked once on the terminal for all hosts (a
# second prompt would wait for input that never comes).
(sleep 2; printf 'correct horse\n') | timeout 60 script -qec \
    "'$GPUFLEET' exec 'inst-1,inst-2,inst-3' -- echo ok" "$T/tty-pass" \
    >/dev/null 2>&1
rc=$?
expect_rc 0 "passphrase asked on the terminal"
expect_eq "$(grep -c 'Passphrase for' "$T/tty-pass")" 1 "asked once for three hosts"
expect_eq "$(grep -c ': ok' "$T/tty-pass")" 3 "three hosts logged in"
printf 'wrong\n' >"$T/wrongpass"
GPUFLEET_PASSPHRASE_FILE=$T/wrongpass run exec inst-1 -- true
expect_rc 1 "wrong passphrase"
expect_match "$err" "cannot load identity $T/enc_key" "wrong passphrase message"

finish

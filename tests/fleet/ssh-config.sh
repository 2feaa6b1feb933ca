#!/usr/bin/env bash
# The fleet for OpenSSH's own tools: the exported ssh_config lets ssh -F,
# scp -F (both ways), sftp -F -b and rsync -e 'ssh -F' in with the pinned
# host keys and the current key; a changed host key is refused by them and
# `gpufleet ssh` names `gpufleet hostkey accept`; BatchMode only off a
# terminal; the installed ~/.ssh/gpufleet.conf follows set, keys rotate and
# hostkey accept.
. "$(dirname "$0")/../e2e/lib.sh"
export GPUFLEET_NO_PROGRESS=1

fleet_up 3 --group-size 1
port() { awk -v n="$1" '$1 == n { print $2 }' "$D/instances.tsv"; }
home_of() { printf '%s/home' "$(instance_dir "$1")"; }
# sshf CONF ARGS...: OpenSSH with that config only, never asking.
SSHO=(-o BatchMode=yes -o ControlPath=none -o ConnectTimeout=10)
sshf() { local c=$1; shift; ssh -F "$c" "${SSHO[@]}" "$@" </dev/null; }

run exec 'inst-1,inst-2' -- true
expect_rc 0 "first contact pins inst-1 and inst-2"
run ls --format ssh-config
expect_rc 0 "export"
printf '%s\n' "$out" >"$T/fleet.conf"
run ssh-config
expect_eq "$out" "$(cat "$T/fleet.conf")" "ssh-config prints what ls --format ssh-config does"
KH=$XDG_DATA_HOME/gpufleet/gpufleet_known_hosts
expect_match "$(cat "$KH")" "^inst-1 ssh-ed25519 [A-Za-z0-9+/=]+$" "known_hosts line NAME TYPE BASE64"
checks=$((checks + 1))
grep -q '^inst-3 ' "$KH" && fail "inst-3 has no pin yet but is in known_hosts"
g=$(ssh -G -F "$T/fleet.conf" inst-1 2>/dev/null)
expect_match "$g" "^hostkeyalias inst-1$" "HostKeyAlias NAME"
expect_contains "$g" "userknownhostsfile $KH" "gpufleet's known_hosts"
expect_match "$g" "^stricthostkeychecking (true|yes)$" "StrictHostKeyChecking yes"
expect_match "$g" "^identityfile $D/client/id_ed25519$" "the current key, absolute"
expect_match "$g" "^port $(port inst-1)$" "its port"

# --- ssh, scp both ways, sftp, rsync: pinned keys, no prompt ---------------
out=$(sshf "$T/fleet.conf" inst-1 'echo $GPUFLEET_INSTANCE' 2>"$T/err")
rc=$?
expect_rc 0 "ssh -F"
expect_eq "$out" "inst-1" "ssh -F reached inst-1"
printf 'up\n' >"$T/up.txt"
scp -F "$T/fleet.conf" "${SSHO[@]}" -q "$T/up.txt" inst-1:up.txt </dev/null 2>"$T/err"
rc=$? err=$(cat "$T/err")
expect_rc 0 "scp -F upload"
expect_eq "$(cat "$(home_of inst-1)/up.txt" 2>&1)" "up" "the uploaded file"
printf 'down\n' >"$(home_of inst-2)/down.txt"
scp -F "$T/fleet.conf" "${SSHO[@]}" -q inst-2:down.txt "$T/down.txt" </dev/null 2>"$T/err"
rc=$? err=$(cat "$T/err")
expect_rc 0 "scp -F download"
expect_eq "$(cat "$T/down.txt" 2>&1)" "down" "the downloaded file"
printf 'put %s sftp.txt\nget down.txt %s\n' "$T/up.txt" "$T/sftp-down.txt" >"$T/batch"
sftp -F "$T/fleet.conf" "${SSHO[@]}" -b "$T/batch" inst-2 >/dev/null 2>"$T/err" </dev/null
rc=$? err=$(cat "$T/err")
expect_rc 0 "sftp -F -b"
expect_eq "$(cat "$(home_of inst-2)/sftp.txt" 2>&1)" "up" "sftp put"
expect_eq "$(cat "$T/sftp-down.txt" 2>&1)" "down" "sftp get"
if command -v rsync >/dev/null; then
	mkdir -p "$T/tree/sub" && printf 'r\n' >"$T/tree/sub/f"
	rsync -a -e "ssh -F $T/fleet.conf ${SSHO[*]}" "$T/tree/" inst-1:tree/ </dev/null 2>"$T/err"
	rc=$? err=$(cat "$T/err")
	expect_rc 0 "rsync -e 'ssh -F'"
	expect_eq "$(cat "$(home_of inst-1)/tree/sub/f" 2>&1)" "r" "rsync copied the tree"
else
	checks=$((checks + 1))
	fail "rsync is not installed (scripts/deps.sh installs it)"
fi

# --- an instance with no pin: a comment, and ssh refuses it ----------------
expect_match "$(sed -n '/^Host inst-3$/,/^$/p' "$T/fleet.conf")" \
    "# no host key pinned yet: ssh refuses this host until \`gpufleet status inst-3\`" \
    "the unpinned instance says what to run"
sshf "$T/fleet.conf" inst-3 true >/dev/null 2>"$T/err"
rc=$? err=$(cat "$T/err")
expect_rc 255 "ssh -F refuses an instance with no pin"
expect_contains "$err" "Host key verification failed" "OpenSSH says why"
run status inst-3
expect_rc 0 "status pins inst-3"
out=$(sshf "$T/fleet.conf" inst-3 'echo $GPUFLEET_INSTANCE' 2>"$T/err")
rc=$? err=$(cat "$T/err")
expect_rc 0 "the same exported file works once status pinned the key"
expect_eq "$out" "inst-3" "inst-3 reached"

# --- a changed host key: the pin holds; gpufleet ssh names its command ----
new=$(fleet break inst-1 hostkey)
sshf "$T/fleet.conf" inst-1 true >/dev/null 2>"$T/err"
rc=$? err=$(cat "$T/err")
expect_rc 255 "ssh -F refuses the changed key"
expect_contains "$err" "REMOTE HOST IDENTIFICATION HAS CHANGED" "OpenSSH saw the pinned key"
scp -F "$T/fleet.conf" "${SSHO[@]}" -q "$T/up.txt" inst-1:changed.txt </dev/null 2>/dev/null
rc=$?
expect_rc 255 "scp -F refuses the changed key"
checks=$((checks + 1))
[ ! -e "$(home_of inst-1)/changed.txt" ] || fail "scp wrote to the changed host"
run ssh inst-1 -- true </dev/null
expect_rc 255 "gpufleet ssh exits with ssh's status"
expect_contains "$err" "REMOTE HOST IDENTIFICATION HAS CHANGED" "ssh's own warning passes through"
expect_contains "$err" "gpufleet: HOST KEY CHANGED for inst-1 (127.0.0.1 port $(port inst-1))" \
    "gpufleet says the key changed"
expect_contains "$err" "presented ssh-ed25519 $new; refusing to connect. If the machine was really replaced, run: gpufleet hostkey accept inst-1" \
    "gpufleet names the new key and its command"
expect_eq "$(printf '%s\n' "$err" | grep -c '^gpufleet: ')" 1 "one gpufleet line"
run ssh inst-2 -- 'exit 255' </dev/null
expect_rc 255 "a remote exit 255"
expect_eq "$err" "" "no host key hint where the key did not change"
run ssh inst-2 -- 'exit 7' </dev/null
expect_rc 7 "gpufleet ssh exits with the remote command's status"
GPUFLEET_SSH=$T/no-such-ssh run ssh inst-2 -- true </dev/null
expect_rc 1 "an ssh that cannot be run"
expect_one_error_line "an ssh that cannot be run"
expect_contains "$err" "cannot run $T/no-such-ssh: No such file or directory" "says which"

# --- gpufleet killed while ssh runs: ssh goes too ---------------------------
cat >"$T/ssh-pid" <<EOF
#!/bin/sh
echo \$\$ >"$T/ssh.pid"
exec ssh "\$@"
EOF
chmod 755 "$T/ssh-pid"
for sig in TERM HUP; do
	rm -f "$T/ssh.pid" "$(home_of inst-2)/started"
	GPUFLEET_SSH=$T/ssh-pid "$GPUFLEET" ssh inst-2 -- 'touch $HOME/started; sleep 300' \
	    </dev/null >/dev/null 2>"$T/kill.err" &
	gpid=$!
	for _ in $(seq 600); do [ -e "$(home_of inst-2)/started" ] && break; sleep 0.1; done
	checks=$((checks + 1))
	[ -e "$(home_of inst-2)/started" ] || fail "SIG$sig: the remote command never started"
	spid=$(cat "$T/ssh.pid")
	kill -"$sig" "$gpid"
	wait "$gpid"
	rc=$?
	checks=$((checks + 1))
	[ "$rc" != 0 ] || fail "SIG$sig: gpufleet ssh exited 0"
	gone=
	for _ in $(seq 300); do kill -0 "$spid" 2>/dev/null || { gone=1; break; }; sleep 0.1; done
	checks=$((checks + 1))
	[ -n "$gone" ] || { fail "SIG$sig to gpufleet ssh left ssh ($spid) running"; kill "$spid"; }
	expect_eq "$(grep -c 'HOST KEY' "$T/kill.err")" 0 "SIG$sig: no host key hint"
done

# --- BatchMode only when stdin is not a terminal ---------------------------
cat >"$T/ssh-wrap" <<EOF
#!/bin/sh
printf '%s\n' "\$*" >>"$T/ssh-args"
exec ssh "\$@"
EOF
chmod 755 "$T/ssh-wrap"
GPUFLEET_SSH=$T/ssh-wrap "$GPUFLEET" ssh inst-2 -- echo batch </dev/null >"$T/out" 2>"$T/err"
rc=$? err=$(cat "$T/err")
expect_rc 0 "gpufleet ssh off a terminal"
expect_contains "$(cat "$T/ssh-args")" "BatchMode=yes" "BatchMode off a terminal"
if command -v script >/dev/null; then
	: >"$T/ssh-args"
	GPUFLEET_SSH=$T/ssh-wrap script -qec "'$GPUFLEET' ssh inst-2 -- echo on-a-tty" /dev/null \
	    </dev/null >"$T/tty.out" 2>&1
	rc=$?
	expect_rc 0 "gpufleet ssh on a terminal (script)"
	expect_contains "$(cat "$T/tty.out")" "on-a-tty" "ran on a terminal"
	checks=$((checks + 1))
	[ -s "$T/ssh-args" ] || fail "the wrapper was not run"
	checks=$((checks + 1))
	grep -q BatchMode "$T/ssh-args" && fail "BatchMode on a terminal: $(cat "$T/ssh-args")"
else
	echo "script(1) is not installed: skipping the terminal check" >&2
fi

# --- job control: ssh's ~^Z and the terminal's ^Z stop the job, fg resumes -
# An interactive bash on a pseudo-terminal (Python's pty module) runs
# gpufleet ssh, which now waits for ssh instead of being replaced by it.
cat >"$T/ptyjob.py" <<'PY'
import os, pty, re, select, sys, time
g = sys.argv[1]
pid, fd = pty.fork()
if pid == 0:
    os.execvpe('bash', ['bash', '--norc', '--noprofile', '-i'],
               dict(os.environ, PS1='PROMPT$ ', TERM='dumb'))
buf = ''
def expect(pat, t=60):
    global buf
    end = time.time() + t
    while True:
        m = re.search(pat, buf, re.S)
        if m:
            seen, buf = buf[:m.end()], buf[m.end():]
            return seen
        left = end - time.time()
        r = select.select([fd], [], [], max(left, 0))[0] if left > 0 else []
        if not r:
            sys.exit('no %r within %ds; the terminal showed: %r' % (pat, t, buf[-400:]))
        try:
            d = os.read(fd, 4096)
        except OSError:
            d = b''
        if not d:
            sys.exit('the terminal closed waiting for %r: %r' % (pat, buf[-400:]))
        buf += d.decode('utf-8', 'replace')
def send(s):
    os.write(fd, s.encode())
P = r'PROMPT\$ '
expect(P)
send("'%s' ssh inst-3\r" % g)
send('echo remote-$GPUFLEET_INSTANCE\r')
expect('remote-inst-3')
time.sleep(0.5)
send('\r~\x1a')
expect('Stopped.*' + P)
send('fg\r')
time.sleep(0.5)
send('echo again-$GPUFLEET_INSTANCE\r')
expect('again-inst-3')
send('exit 3\r')
expect(P)
send('echo rc=$?\r')
expect('rc=3')
expect(P)
# What the remote command prints is computed there, so the terminal's echo
# of the command line cannot match it; ^Z waits until it runs.
send("'%s' ssh inst-3 -- 'echo st$((1+1))rt; sleep 2; echo sl$((2+3))pt'\r" % g)
expect('st2rt')
send('\x1a')
expect('Stopped.*' + P)
send('fg\r')
expect('sl5pt')
expect(P)
send('jobs; echo jobs-$((1+1))\r')
seen = expect('jobs-2')
if 'Stopped' in seen:
    sys.exit('the job stopped again after fg: %r' % seen)
send('exit\r')
print('ok')
PY
out=$(timeout 200 python3 "$T/ptyjob.py" "$GPUFLEET" 2>&1)
rc=$?
expect_rc 0 "job control through gpufleet ssh ($out)"
expect_eq "$out" "ok" "~^Z, ^Z, fg and the exit status at a terminal"

# --- the installed file follows accept, set and keys rotate ----------------
run ssh-config --install
expect_rc 0 "install"
CONF=$HOME/.ssh/gpufleet.conf
expect_contains "$out" "Include ~/.ssh/gpufleet.conf" "prints the Include line"
expect_eq "$(stat -c %a "$CONF")" 600 "installed 0600"
sshf "$CONF" inst-1 true >/dev/null 2>&1
rc=$?
expect_rc 255 "the installed file refuses the changed key too"
run hostkey accept inst-1 --fingerprint "$new"
expect_rc 0 "accept the new key"
out=$(sshf "$CONF" inst-1 'echo $GPUFLEET_INSTANCE' 2>"$T/err")
rc=$? err=$(cat "$T/err")
expect_rc 0 "after hostkey accept the installed file logs in"
expect_eq "$out" "inst-1" "with the accepted key"

before=$(cat "$CONF")
p3=$(port inst-3)
run set inst-2 port="$p3"
expect_rc 0 "set inst-2's port"
g=$(ssh -G -F "$CONF" inst-2 2>/dev/null)
expect_match "$g" "^port $p3$" "the installed file has the new port"
sshf "$CONF" inst-2 true >/dev/null 2>"$T/err"
rc=$? err=$(cat "$T/err")
expect_rc 255 "inst-3's sshd is not inst-2's pinned key"
expect_contains "$err" "REMOTE HOST IDENTIFICATION HAS CHANGED" "the pin is per instance, not per address"
run set inst-2 port="$(port inst-2)"
expect_rc 0 "set the port back"
expect_eq "$(cat "$CONF")" "$before" "the file is as before"

run keys rotate inst-2
expect_rc 0 "rotate inst-2's key"
key=$("$GPUFLEET" keys ls --json | jq -r '.[] | select((.instances | split(",")) | index("inst-2")) | .path')
checks=$((checks + 1))
[ -n "$key" ] && [ -f "$key" ] || fail "no current key for inst-2: [$key]"
expect_match "$(ssh -G -F "$CONF" inst-2 2>/dev/null)" "^identityfile $key$" "the installed file names the new key"
out=$(sshf "$CONF" inst-2 'echo $GPUFLEET_INSTANCE' 2>"$T/err")
rc=$? err=$(cat "$T/err")
expect_rc 0 "the installed file logs in with the rotated key"
expect_eq "$out" "inst-2" "inst-2 reached"
sshf "$T/fleet.conf" inst-2 true >/dev/null 2>&1
rc=$?
expect_rc 255 "the old export's key was taken off"

run ssh-config --uninstall
expect_rc 0 "uninstall"
checks=$((checks + 1))
[ ! -e "$CONF" ] || fail "$CONF is still there"

finish

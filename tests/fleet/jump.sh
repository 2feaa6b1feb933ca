#!/usr/bin/env bash
# ProxyJump: instances reached through another instance of the inventory
# (its `jump` field). exec, status and `gpufleet ssh` go through one
# session of the jump host (direct-tcpip channels, seen in the jump's sshd
# log); a changed jump key, a refused or a hung jump fail the hosts behind
# it with a reason naming the jump, and nothing runs.
. "$(dirname "$0")/../e2e/lib.sh"
export GPUFLEET_NO_PROGRESS=1

# One sshd per instance, so the jump's log is its own; DEBUG1 logs
# direct-tcpip requests.
fleet_up 4 --group-size 1 --log-level DEBUG1
port_of() { awk -v n="$1" '$1 == n { print $2 }' "$D/instances.tsv"; }
jlog() { cat "$D"/groups/*/sshd.log "$D"/instances/inst-1/*.log 2>/dev/null; }
logins() { jlog | grep -c "Accepted publickey"; }

# --- the field: validation, show, ls --json, rm ----------------------------
run set inst-2 jump=inst-2
expect_rc 2 "a jump to itself"
expect_contains "$err" "inst-2 cannot be its own jump host" "self jump message"
expect_one_error_line "self jump"
run set inst-2 jump=nosuch
expect_rc 2 "a jump to a missing instance"
expect_contains "$err" "jump host 'nosuch' is not in the inventory" "missing jump"
run set inst-2 'jump=bad name'
expect_rc 2 "a jump that is not a name"
run set inst-2 jump=inst-1
expect_rc 0 "set jump"
run set inst-3 jump=inst-1
expect_rc 0 "set a second host behind the same jump"
run set inst-1 jump=inst-4
expect_rc 2 "a jump host cannot be behind a jump (two hops)"
expect_contains "$err" "inst-1 is the jump host of inst-2, inst-3; only one hop is supported" \
    "two-hop message names the hosts behind it"
run set inst-4 jump=inst-2
expect_rc 2 "a jump that is itself behind a jump"
expect_contains "$err" "jump host inst-2 is itself behind jump host inst-1" \
    "chain message"
run show inst-2
expect_match "$out" '^jump: +inst-1$' "show prints the jump"
run show inst-4
expect_match "$out" '^jump: +\(direct\)$' "show: direct"
run ls --json
expect_contains "$out" '"jump": "inst-1"' "ls --json carries the jump"
expect_contains "$out" '"jump": null' "ls --json: null when direct"
run rm inst-1
expect_rc 2 "rm refuses a jump host in use"
expect_contains "$err" "inst-1 is the jump host of inst-2, inst-3" "rm names them"
run ls
expect_contains "$out" "inst-1" "inst-1 still there after the refused rm"

# --- exec through one session of the jump host ------------------------------
run exec inst-1 -- true
expect_rc 0 "the jump host itself, directly (pins its key)"
before=$(logins)
run exec 'inst-2,inst-3' -- 'echo "hi from $GPUFLEET_INSTANCE"'
expect_rc 0 "exec through the jump"
expect_eq "$(printf '%s\n' "$out" | sort)" "inst-2: hi from inst-2
inst-3: hi from inst-3" "outputs of both hosts behind the jump"
jdir=$(dirname "$(grep -lx inst-1 "$D"/groups/*/members)")
jl=$(cat "$jdir/sshd.log")
for n in inst-2 inst-3; do
	checks=$((checks + 1))
	printf '%s\n' "$jl" | grep -Eq "server_request_direct_tcpip: .*target 127.0.0.1 port $(port_of $n)\b" ||
	    fail "the jump's sshd log has no direct-tcpip request to $n"
done
expect_eq "$(($(logins) - before))" 3 \
    "one login on the jump host, one per host behind it"

# One host at a time: the second still uses the first one's jump session.
before=$(logins)
run exec 'inst-2,inst-3' --fanout 1 -- true
expect_rc 0 "fanout 1 through the jump"
expect_eq "$(($(logins) - before))" 3 "fanout 1: still one login on the jump host"

# A direct host between two behind the jump, one host at a time: the jump
# session waits for the second instead of logging in again.
run set inst-3 jump=
expect_rc 0 "clear inst-3's jump"
run set inst-4 jump=inst-1
expect_rc 0 "inst-4 behind the jump (inst-3, direct, sorts between)"
before=$(logins)
run exec 'inst-2,inst-3,inst-4' --fanout 1 -- true
expect_rc 0 "fanout 1, a direct host between two behind the jump"
expect_eq "$(($(logins) - before))" 4 "one jump login for both hosts behind it"
run set inst-4 jump=
run set inst-3 jump=inst-1
expect_rc 0 "inst-3 behind the jump again"

run exec 'inst-2,inst-3' --json --stdin - -- wc -c <<<"twelve bytes"
expect_rc 0 "stdin through the jump"
expect_contains "$out" '"stdout":"13\n"' "stdin arrived whole"

# A bigger stream in both directions: the channel's window is respected.
head -c 3000000 /dev/urandom >"$T/big"
want=$(sha256sum <"$T/big" | cut -d' ' -f1)
run exec inst-2 --stdin "$T/big" -- 'cat >$HOME/big; sha256sum <$HOME/big; cat $HOME/big | head -c 2000000 | wc -c'
expect_rc 0 "3 MB through the jump"
expect_eq "$out" "inst-2: $want  -
inst-2: 2000000" "what went through the tunnel is intact"

run status 'inst-2,inst-3' --json
expect_rc 0 "status through the jump"
expect_match "$out" '"name": "inst-2"' "status: inst-2"
expect_match "$out" '"name": "inst-3"' "status: inst-3"

# Held sessions (run uploads the plan, then starts the job on them).
before=$(logins)
run run 'inst-2,inst-3' -- 'echo job on $GPUFLEET_INSTANCE'
expect_rc 0 "run through the jump (sessions held between steps)"
expect_eq "$(($(logins) - before))" 3 "run: the held sessions kept the one jump session"
expect_match "$out" '^inst-2: job [0-9]+ started' "run: inst-2 started"
expect_match "$out" 'inst-3: job [0-9]+ started' "run: inst-3 started"

# The exported ssh_config says ProxyJump too (the jump is a Host of it).
run ls --format ssh-config
expect_match "$out" "ProxyJump inst-1" "ls --format ssh-config: ProxyJump"
# OpenSSH itself goes through the jump with the exported file, both hops'
# keys checked against gpufleet's pins (ssh passes -F on to the hop).
printf '%s\n' "$out" >"$T/exported.conf"
fwd() { grep -c "server_request_direct_tcpip: .*target 127.0.0.1 port $(port_of inst-2)\b" "$jdir/sshd.log"; }
before=$(fwd)
checks=$((checks + 1))
got=$(ssh -F "$T/exported.conf" -o BatchMode=yes inst-2 echo via the file 2>"$T/ssh-F.err") ||
	fail "ssh -F exported config through the jump: $(cat "$T/ssh-F.err")"
expect_eq "$got" "via the file" "ssh -F through the jump: output"
expect_eq "$(($(fwd) - before))" 1 "ssh -F went through the jump host"

# Only the host behind the jump selected: the jump's Host block comes too,
# once, so ProxyJump names a block of the file and its key is pinned.
run ssh-config inst-2
expect_rc 0 "ssh-config of a host behind a jump alone"
expect_eq "$(printf '%s\n' "$out" | grep -c '^Host ')" 2 "two Host blocks"
expect_match "$out" "^Host inst-1\$" "the jump's block is written"
printf '%s\n' "$out" >"$T/one.conf"
before=$(fwd)
checks=$((checks + 1))
got=$(ssh -F "$T/one.conf" -o BatchMode=yes inst-2 echo via one 2>"$T/ssh-1.err") ||
	fail "ssh -F with only inst-2 selected: $(cat "$T/ssh-1.err")"
expect_eq "$got" "via one" "ssh -F (inst-2 alone): output"
expect_eq "$(($(fwd) - before))" 1 "ssh -F (inst-2 alone) went through the jump"
run ls --format ssh-config 'inst-2,inst-3'
expect_eq "$(printf '%s\n' "$out" | grep -c '^Host inst-1$')" 1 \
    "two hosts behind one jump: its block once"

fwd3() { grep -c "server_request_direct_tcpip: .*target 127.0.0.1 port $(port_of inst-3)\b" "$jdir/sshd.log"; }
# --- add --check --jump with the console's login line ------------------------
# inst-3's address through inst-1, the target's key pinned through the tunnel.
u3=$(awk '$1 == "inst-3" { print $3 }' "$D/instances.tsv")
before=$(fwd3)
run add --check --jump inst-1 box-j ssh -p "$(port_of inst-3)" -i "$D/client/id_ed25519" "$u3@127.0.0.1"
expect_rc 0 "add --check --jump with a login line"
expect_match "$out" "box-j: logged in: " "box-j: first contact through the jump"
checks=$((checks + 1))
[ "$(fwd3)" -gt "$before" ] || fail "box-j: add --check did not go through the jump"
run hostkey show box-j --json
expect_match "$out" '"source": "first-use"' "box-j: its own key pinned through the jump"
run add --check --jump inst-1 box-k ssh -p "$(port_of inst-3)" -i "$D/client/id_ed25519" "nosuchuser@127.0.0.1"
expect_rc 1 "add --check --jump, refused login behind the jump"
expect_contains "$err" "box-k not added" "box-k: not added"
run show box-k
expect_rc 2 "box-k is not in the inventory"
run rm box-j --force
expect_rc 0 "rm box-j"

# --- gpufleet ssh through the jump, the jump's key pinned ------------------
before=$(fwd)
run ssh inst-2 -- echo via ssh
expect_rc 0 "gpufleet ssh through the jump"
expect_eq "$out" "via ssh" "ssh output"
expect_eq "$(($(fwd) - before))" 1 "gpufleet ssh went through the jump host"
run hostkey forget inst-1
run hostkey forget inst-2
run ssh inst-2 -- echo first contact
expect_rc 0 "gpufleet ssh with neither hop pinned: both pinned first"
expect_eq "$out" "first contact" "ssh output after first contact"
run hostkey show inst-1 --json
# Pinned from the known_hosts file inst-1's ssh_config (the fleet's) names.
expect_match "$out" '"source": "known_hosts"' "the jump's key pinned by ssh's first contact"

# --- gpufleet ssh with paths ssh would split or expand ----------------------
# The inventory (so its known_hosts file) and the keys under a directory
# with a space and a %: ssh splits UserKnownHostsFile at spaces and expands
# % in file options, in the ProxyCommand's inner ssh as well.
odd="$T/my fleet %h"
mkdir -p "$odd"
for f in "$XDG_DATA_HOME"/gpufleet/fleet.db*; do
	cp "$f" "$odd/gpufleet.db${f##*/fleet.db}"
done
cp "$D/client/id_ed25519" "$odd/key %r"
chmod 600 "$odd/key %r"
GPUFLEET_DB="$odd/gpufleet.db" run set inst-1 "identity=$odd/key %r"
expect_rc 0 "identity with a space and a %"
GPUFLEET_DB="$odd/gpufleet.db" run set inst-2 "identity=$odd/key %r"
GPUFLEET_DB="$odd/gpufleet.db" run ssh inst-4 -- echo odd direct
expect_rc 0 "gpufleet ssh, known_hosts and key paths with a space and a %"
expect_eq "$out" "odd direct" "ssh output (odd paths, direct)"
before=$(fwd)
GPUFLEET_DB="$odd/gpufleet.db" run ssh inst-2 -- echo odd via jump
expect_rc 0 "gpufleet ssh through the jump, odd paths in the ProxyCommand"
expect_eq "$out" "odd via jump" "ssh output (odd paths, through the jump)"
expect_eq "$(($(fwd) - before))" 1 "odd paths: went through the jump host"
mkdir -p "$T/bad\"dir"
cp "$odd/gpufleet.db" "$T/bad\"dir/gpufleet.db"
GPUFLEET_DB="$T/bad\"dir/gpufleet.db" run ssh inst-4 -- true
expect_rc 2 "a known_hosts path ssh cannot be given"
expect_contains "$err" "cannot give ssh the path" "names the path problem"

# --- the jump's host key changed: nothing runs behind it --------------------
rm -f "$(instance_dir inst-2)/home/ran" "$(instance_dir inst-3)/home/ran"
new=$(fleet break inst-1 hostkey)
run exec 'inst-2,inst-3,inst-4' --json -- 'echo ran >$HOME/ran'
expect_rc 1 "a changed jump key fails the hosts behind it"
for n in inst-2 inst-3; do
	line=$(printf '%s\n' "$out" | grep "\"name\":\"$n\"")
	expect_contains "$line" 'hostkey_changed' "$n: the jump's reason code"
	expect_contains "$line" "via jump inst-1" "$n: the message names the jump"
	checks=$((checks + 1))
	[ ! -e "$(instance_dir $n)/home/ran" ] || fail "the command ran on $n"
done
checks=$((checks + 1))
[ -e "$(instance_dir inst-4)/home/ran" ] || fail "inst-4 (direct) did not run"
"$GPUFLEET" ssh inst-2 -- true >"$T/ssh.out" 2>&1
rc=$?
expect_rc 255 "gpufleet ssh refuses the changed jump key too"
expect_match "$(cat "$T/ssh.out")" "REMOTE HOST IDENTIFICATION HAS CHANGED" \
    "OpenSSH checked the jump's pinned key"
expect_contains "$(cat "$T/ssh.out")" "run: gpufleet hostkey accept inst-1" \
    "gpufleet's hint names the jump host's accept, not the target's"
fleet heal inst-1

# --- the target's own key is pinned too (checked through the tunnel) --------
new2=$(fleet break inst-2 hostkey)
run exec 'inst-2,inst-3' --json -- true
expect_rc 1 "a changed key behind the jump"
line=$(printf '%s\n' "$out" | grep '"name":"inst-2"')
expect_contains "$line" "hostkey_changed" "inst-2: its own key changed"
expect_contains "$line" "presented ssh-ed25519 $new2" "inst-2: the new key is inst-2's"
line=$(printf '%s\n' "$out" | grep '"name":"inst-3"')
expect_contains "$line" '"error":null' "inst-3 unaffected"
run hostkey accept inst-2 --fingerprint "$new2"
expect_rc 0 "hostkey accept through the jump"
run exec inst-2 -- true
expect_rc 0 "inst-2 after accept"
fleet heal inst-2
run hostkey accept inst-2
expect_rc 0 "back to the original key"

# --- a host behind the jump refuses: the jump host says so ----------------
fleet break inst-3 refuse
run exec 'inst-2,inst-3' --json -- true
expect_rc 1 "a refused host behind the jump"
line=$(printf '%s\n' "$out" | grep '"name":"inst-3"')
expect_contains "$line" '"code":"refused"' "inst-3: refused"
expect_contains "$line" "via jump inst-1: cannot reach 127.0.0.1 port $(port_of inst-3)" \
    "inst-3: the jump host could not reach it"
line=$(printf '%s\n' "$out" | grep '"name":"inst-2"')
expect_contains "$line" '"error":null' "inst-2 unaffected on the same jump session"
fleet heal inst-3

# --- the jump refuses connections -----------------------------------------
fleet break inst-1 refuse
run exec 'inst-2,inst-3' --json -- true
expect_rc 1 "a refused jump"
for n in inst-2 inst-3; do
	line=$(printf '%s\n' "$out" | grep "\"name\":\"$n\"")
	expect_contains "$line" "refused" "$n: refused"
	expect_contains "$line" "via jump inst-1: connection refused" "$n: names the jump"
done
fleet heal inst-1

# --- a hung jump: the deadline holds ----------------------------------------
fleet break inst-1 hang
run exec 'inst-2,inst-3' --json --connect-timeout 3 -- true
expect_rc 1 "a hung jump"
for n in inst-2 inst-3; do
	line=$(printf '%s\n' "$out" | grep "\"name\":\"$n\"")
	expect_contains "$line" "connect_timeout" "$n: connect_timeout"
	expect_contains "$line" "via jump inst-1" "$n: names the jump"
done
fleet heal inst-1

# --- the jump freezes while a command runs through it: --timeout holds ------
started=$(instance_dir inst-2)/home/started
rm -f "$started"
timeout 120 "$GPUFLEET" exec inst-2 --json --timeout 6 -- \
    'touch $HOME/started; sleep 60' >"$T/frozen.out" 2>"$T/frozen.err" &
xpid=$!
for _ in $(seq 600); do [ -e "$started" ] && break; sleep 0.1; done
checks=$((checks + 1))
[ -e "$started" ] || fail "the command never started through the jump"
fleet break inst-1 hang
wait "$xpid"
rc=$?
expect_rc 1 "a jump frozen mid-command"
expect_contains "$(cat "$T/frozen.out")" '"code":"timeout"' "the command's deadline held"
fleet heal inst-1
fleet heal inst-1
run exec 'inst-2,inst-3' -- true
expect_rc 0 "healed: through the jump again"

finish

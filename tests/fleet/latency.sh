#!/usr/bin/env bash
# tests/harness/delayrelay (what bench/exec.sh --rtt measures through): a
# fleet of 4 behind the relay, imported with the relay's ports, gets every
# host's own output, in order and complete, from gpufleet and from OpenSSH
# with the relayed ssh_config; a changed host key is still refused through
# it; an instance that refuses connections fails alone; the relay survives
# it all.  Correctness only: the one duration checked is a lower bound (a
# login through a 300 ms relay cannot take less than one round trip), which
# no slowness of the machine can break.
. "$(dirname "$0")/../e2e/lib.sh"
. "$GPUFLEET_SRC/tests/harness/delayrelay.sh"
: "${GPUFLEET_DELAYRELAY:=$GPUFLEET_SRC/build/tests/delayrelay}"
export GPUFLEET_NO_PROGRESS=1

FLEET_NO_IMPORT=1 fleet_up 4
relay_up "$GPUFLEET_DELAYRELAY" "$D" 40 "$T/relay" ||
    { echo "relay did not start" >&2; exit 1; }
cleanup_hooks+=("kill $RELAY_PID 2>/dev/null")

# every instance has a relay port of its own, none of them an sshd's
expect_eq "$(wc -l <"$T/relay/ports")" 4 "one relay port per instance"
expect_eq "$(awk '$1 == $2' "$T/relay/ports" | wc -l)" 0 "relay ports differ from the sshd's"
expect_eq "$(awk '$1 == "Port"' "$T/relay/ssh_config" | sort -u | wc -l)" 4 \
    "the relayed ssh_config has 4 distinct ports"
rport() { awk -v p="$1" '$1 == p { print $2 }' "$T/relay/ports"; }
iport() { awk -v n="$1" '$1 == n { print $2 }' "$D/instances.tsv"; }

run import "$T/relay/ssh_config" --match "*"
expect_rc 0 "import the relayed ssh_config"
run ls --json
for k in 1 2 3 4; do
	expect_contains "$out" "$(rport "$(iport "inst-$k")")" "inst-$k is stored with its relay port"
done

# Each host prints its name and 20000 lines (about 110 KB, many pieces
# through the relay each way): all of it, in order, attributed right.
want=$(seq 20000 | md5sum)
run exec all -f 4 -- 'echo "$GPUFLEET_INSTANCE"; seq 20000'
expect_rc 0 "exec through the relay"
expect_contains "$err" "4 hosts: 4 ok" "exec through the relay: summary"
for k in 1 2 3 4; do
	expect_eq "$(grep -c "^inst-$k: inst-$k\$" <<<"$out")" 1 "inst-$k said its own name"
	expect_eq "$(sed -n "s/^inst-$k: //p" <<<"$out" | sed 1d | md5sum)" "$want" \
	    "inst-$k: seq 20000 complete and in order"
done

# OpenSSH through the relay with the rewritten known_hosts (host key checked:
# StrictHostKeyChecking yes), input one way and output the other.
got=$(seq 5000 | ssh -F "$T/relay/ssh_config" inst-2 'md5sum' 2>"$T/ssh.err")
expect_eq "$got" "$(seq 5000 | md5sum)" "ssh through the relay: stdin arrives whole (stderr: $(head -c 300 "$T/ssh.err"))"

# A changed host key is refused through the relay (pinned by the run above).
fleet break inst-3 hostkey >/dev/null
fleet break inst-4 refuse
run exec all -t 60 -- 'echo "ok $GPUFLEET_INSTANCE"'
expect_rc 1 "broken hosts give exit 1"
expect_contains "$out" "inst-1: ok inst-1" "inst-1 still answers"
expect_contains "$out" "inst-2: ok inst-2" "inst-2 still answers"
expect_contains "$err" "4 hosts: 2 ok" "two of four ok"
checks=$((checks + 1))
grep -q "^inst-3: ok" <<<"$out" && fail "inst-3 ran the command with a changed host key"
checks=$((checks + 1))
grep -q "^inst-4: ok" <<<"$out" && fail "inst-4 ran the command while refusing connections"
expect_contains "$err" "inst-3: HOST KEY CHANGED" "inst-3's failure names the host key"
fleet heal inst-3
fleet heal inst-4

# The relay really delays (a lower bound, not a timing assertion): with a
# 300 ms round trip, a login (several round trips) takes at least 300 ms.
relay_up "$GPUFLEET_DELAYRELAY" "$D" 300 "$T/slow" ||
    { echo "second relay did not start" >&2; exit 1; }
cleanup_hooks+=("kill $RELAY_PID 2>/dev/null")
t0=$(date +%s%N)
out=$(ssh -F "$T/slow/ssh_config" inst-1 'echo slow' 2>"$T/ssh.err")
t1=$(date +%s%N)
expect_eq "$out" slow "ssh through the 300 ms relay"
checks=$((checks + 1))
[ $(((t1 - t0) / 1000000)) -ge 300 ] ||
    fail "a login through a 300 ms relay took $(((t1 - t0) / 1000000)) ms: the relay does not delay"

checks=$((checks + 1))
kill -0 "$RELAY_PID" 2>/dev/null || fail "the relay died"
finish

#!/usr/bin/env bash
# Self-test of the test-fleet harness tests/harness/fleet: real sshd
# instances on 127.0.0.1, their isolation, every misbehaviour mode, heal,
# down and the watchdog.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
FLEET=${GPUFLEET_HARNESS:-$HERE/../harness/fleet}
[[ -x $FLEET ]] || {
	echo "FAIL: harness $FLEET not executable" >&2
	exit 1
}

T0=$SECONDS
STEP=setup
fail() {
	echo "FAIL [$STEP]: $*" >&2
	exit 1
}
step() {
	STEP=$1
	echo "--- $1 ($((SECONDS - T0))s)"
}

D=''
D2=''
BG=()
cleanup() {
	local rc=$?
	local p
	for p in "${BG[@]}"; do kill "$p" 2>/dev/null || true; done
	[[ -n $D ]] && "$FLEET" -d "$D" down || true
	[[ -n $D2 ]] && "$FLEET" -d "$D2" down || true
	if ((rc != 0)); then echo "harness self-test FAILED (at: $STEP)" >&2; fi
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

step up
D=$("$FLEET" up 20) || fail "fleet up 20 failed"
[[ -d $D && -f $D/ssh_config && -f $D/known_hosts && -f $D/instances.tsv ]] || fail "state dir $D incomplete"
[[ $(wc -l <"$D/instances.tsv") -eq 20 ]] || fail "instances.tsv has not 20 lines"
FLEETS=$(dirname "$D")

# NAME PORT USER DIR
declare -A PORT IDIR
LOGIN_USER=
while IFS=$'\t' read -r name port user idir; do
	PORT[$name]=$port
	IDIR[$name]=$idir
	LOGIN_USER=$user
done <"$D/instances.tsv"
if [[ $EUID -eq 0 ]]; then
	[[ $LOGIN_USER == gpufleet-test ]] || fail "login user is $LOGIN_USER, not gpufleet-test"
else
	[[ $LOGIN_USER == "$(id -un)" ]] || fail "login user is $LOGIN_USER"
fi

# curve25519: the default post-quantum key exchange costs the client ~10x
# the CPU, and this test makes some 50 connections
SSH=(ssh -F "$D/ssh_config" -o BatchMode=yes -o StrictHostKeyChecking=yes -o KexAlgorithms=curve25519-sha256)
rsh() { "${SSH[@]}" "$@"; }

# every instance dir has what it should
for name in inst-1 inst-20; do
	i=${IDIR[$name]}
	for d in home home/.ssh home/.cache bin gpu; do [[ -d $i/$d ]] || fail "$i/$d missing"; done
	[[ $(stat -c %a "$i/home/.ssh") == 700 ]] || fail "$i/home/.ssh not 0700"
	[[ $(stat -c '%a %U' "$i/home/.ssh/authorized_keys") == "600 $LOGIN_USER" ]] || fail "authorized_keys not 0600 $LOGIN_USER"
	[[ $(<"$i/port") == "${PORT[$name]}" ]] || fail "$i/port wrong"
done
[[ $(stat -c %a "$D/client") == 700 ]] || fail "client dir not 0700"
[[ $(stat -c %a "$D/client/id_ed25519") == 600 ]] || fail "client key not 0600"

step "sessions"
# one sshd group serves inst-1..16, a second inst-17..20
for name in inst-1 inst-7 inst-16 inst-17 inst-20; do
	out=$(rsh "$name" 'echo "$HOME|$GPUFLEET_INSTANCE|$(id -un)|$(pwd)|$GPUFLEET_GPU_FIXTURES|$PATH"') ||
		fail "ssh $name failed"
	i=${IDIR[$name]}
	want="$i/home|$name|$LOGIN_USER|$i/home|$i/gpu|$i/bin:/usr/local/bin:/usr/bin:/bin"
	[[ $out == "$want" ]] || fail "$name: got '$out', want '$want'"
done

# homes are separate; relative paths land in the instance's home
rsh inst-1 'echo one > ~/only-in-1 && echo rel > relative-file && mkdir -p ~/.cache/gpufleet' || fail "write in inst-1"
[[ $(<"${IDIR[inst-1]}/home/only-in-1") == one ]] || fail "file not in inst-1 home on disk"
[[ -f ${IDIR[inst-1]}/home/relative-file ]] || fail "relative path did not land in HOME"
rsh inst-2 'test ! -e ~/only-in-1 && test ! -e relative-file && test -d ~/.cache' ||
	fail "inst-2 sees inst-1's files (or has no ~/.cache)"

# fake tools in bin/ come first in PATH, per instance
printf '#!/bin/sh\necho "fake nvidia-smi on $GPUFLEET_INSTANCE"\n' >"${IDIR[inst-3]}/bin/nvidia-smi"
chmod 0755 "${IDIR[inst-3]}/bin/nvidia-smi"
[[ $(rsh inst-3 nvidia-smi) == "fake nvidia-smi on inst-3" ]] || fail "fake tool in inst-3/bin not used"
rsh inst-4 'command -v nvidia-smi' >/dev/null 2>&1 && [[ ! -x /usr/bin/nvidia-smi ]] &&
	fail "inst-4 sees inst-3's fake tool"

# fan-out: all 20 at once
pids=()
for name in "${!PORT[@]}"; do
	rsh "$name" 'echo "$GPUFLEET_INSTANCE"' >"$D/out.$name" 2>&1 &
	pids+=($!)
done
for p in "${pids[@]}"; do wait "$p" || fail "parallel ssh failed: $(cat "$D"/out.* | grep -v '^inst-' | head -3)"; done
for name in "${!PORT[@]}"; do [[ $(<"$D/out.$name") == "$name" ]] || fail "parallel: $name said $(<"$D/out.$name")"; done
rm -f "$D"/out.*

st=$("$FLEET" -d "$D" status)
[[ $(grep -c ' ok [0-9]*$' <<<"$st") -eq 20 ]] || fail "status not all ok: $st"

step "break"
# a session on another instance of the same sshd must outlive the SIGHUPs
rsh inst-10 'sleep 4; echo survived' >"$D/bg.inst-10" 2>&1 &
BG+=($!)
BG10=$!
# a command that runs while inst-5 hangs
rsh inst-5 'echo start; i=0; while [ $i -lt 60 ]; do i=$((i + 1)); echo tick; sleep 0.1; done; echo end' >"$D/bg.inst-5" 2>&1 &
BG+=($!)
BG5=$!
for ((i = 0; i < 100; i++)); do
	grep -q start "$D/bg.inst-5" 2>/dev/null && break
	sleep 0.05
done
grep -q start "$D/bg.inst-5" || fail "inst-5 command did not start"

"$FLEET" -d "$D" break inst-5 hang || fail "break hang"
hang_at=$SECONDS
"$FLEET" -d "$D" break inst-2 refuse || fail "break refuse"
"$FLEET" -d "$D" break inst-3 silent || fail "break silent"
fp=$("$FLEET" -d "$D" break inst-6 hostkey) || fail "break hostkey"
[[ $fp == SHA256:* ]] || fail "break hostkey printed '$fp', not a SHA256 fingerprint"

st=$("$FLEET" -d "$D" status)
for want in "inst-2 ${PORT[inst-2]} refuse -" "inst-3 ${PORT[inst-3]} silent " "inst-5 ${PORT[inst-5]} hang " "inst-6 ${PORT[inst-6]} hostkey " "inst-1 ${PORT[inst-1]} ok "; do
	grep -q "^$want" <<<"$st" || fail "status lacks '$want': $st"
done

step "refuse"
# Refused, not timed out (ConnectTimeout 5 would say "timed out").
if out=$(rsh -o ConnectTimeout=5 inst-2 true 2>&1); then fail "inst-2 (refuse) accepted a login"; fi
grep -q "Connection refused" <<<"$out" || fail "inst-2: no 'Connection refused': $out"
! grep -qi "timed out" <<<"$out" || fail "inst-2 timed out instead of refusing: $out"

step "silent"
t=$(date +%s%N)
if out=$(rsh -o ConnectTimeout=2 inst-3 true 2>&1); then fail "inst-3 (silent) accepted a login"; fi
ms=$((($(date +%s%N) - t) / 1000000))
((ms >= 1900)) || fail "inst-3 (silent) failed too fast (${ms}ms): $out"
grep -qi "timed out" <<<"$out" || fail "inst-3: no time-out: $out"
grep -qi "banner exchange" <<<"$out" || fail "inst-3: time-out not in banner exchange: $out"

step "hang"
# output already on its way when it froze may still come in
sleep 0.5
ticks=$(grep -c tick "$D/bg.inst-5" || true)
sleep 2
kill -0 "$BG5" 2>/dev/null || fail "command on hung inst-5 finished: $(tail -n 2 "$D/bg.inst-5")"
[[ $(grep -c tick "$D/bg.inst-5") == "$ticks" ]] || fail "command on hung inst-5 went on ($ticks ticks, then $(grep -c tick "$D/bg.inst-5"))"
((ticks < 60)) || fail "inst-5 command ended before the hang (break hang took $((SECONDS - hang_at))s)"
if rsh -o ConnectTimeout=2 inst-5 true 2>/dev/null; then fail "login to hung inst-5 worked"; fi

step "hostkey"
if out=$(rsh inst-6 true 2>&1); then fail "inst-6 with a new host key accepted by StrictHostKeyChecking=yes"; fi
grep -q "REMOTE HOST IDENTIFICATION HAS CHANGED" <<<"$out" || fail "inst-6: no host key change reported: $out"
grep -qF "$fp" <<<"$out" || fail "inst-6: fingerprint $fp not the one ssh saw: $out"

step "others"
for name in inst-1 inst-4 inst-16 inst-17; do
	[[ $(rsh "$name" 'echo $GPUFLEET_INSTANCE') == "$name" ]] || fail "$name stopped working while others are broken"
done

step "heal"
for name in inst-2 inst-3 inst-5 inst-6; do
	"$FLEET" -d "$D" heal "$name" || fail "heal $name"
done
wait "$BG5" || fail "inst-5 command failed after heal: $(cat "$D/bg.inst-5")"
[[ $(grep -c tick "$D/bg.inst-5") == 60 && $(tail -n 1 "$D/bg.inst-5") == end ]] || fail "inst-5 command output after heal: $(tail -n 3 "$D/bg.inst-5")"
for name in inst-2 inst-3 inst-5 inst-6 inst-1 inst-17; do
	[[ $(rsh "$name" 'echo $GPUFLEET_INSTANCE:$HOME') == "$name:${IDIR[$name]}/home" ]] || fail "$name not healed"
done
wait "$BG10" || fail "session on inst-10 died during break/heal: $(cat "$D/bg.inst-10")"
[[ $(<"$D/bg.inst-10") == survived ]] || fail "inst-10 session: $(cat "$D/bg.inst-10")"
BG=()
st=$("$FLEET" -d "$D" status)
[[ $(grep -c ' ok [0-9]*$' <<<"$st") -eq 20 ]] || fail "status not all ok after heal: $st"

# break twice in a row, then heal: still fine
"$FLEET" -d "$D" break inst-7 silent >/dev/null
"$FLEET" -d "$D" break inst-7 hostkey >/dev/null
"$FLEET" -d "$D" heal inst-7
[[ $(rsh inst-7 'echo $GPUFLEET_INSTANCE') == inst-7 ]] || fail "inst-7 after break/break/heal"

step "down"
# a daemon that left its session must go too
rsh inst-8 'nohup setsid sh -c "while :; do sleep 1; done" >/dev/null 2>&1 </dev/null & echo $!' >/dev/null
rsh inst-9 'sleep 60' >/dev/null 2>&1 &
BG+=($!)
sleep 0.3
tag=$(<"$D/tag")
"$FLEET" -d "$D" down || fail "down failed"
wait || true
BG=()
[[ ! -e $D ]] || fail "state dir $D still there"
left=$(pgrep -f -- "$D" || true)
[[ -z $left ]] || fail "processes of $D left: $(ps -o pid=,args= -p "${left//$'\n'/,}")"
left=$(grep -l -s -a -F "GPUFLEET_FLEET_TAG=$tag" /proc/[0-9]*/environ || true)
[[ -z $left ]] || fail "session processes left: $left"
"$FLEET" -d "$D" down || fail "second down not idempotent"
D=

step "watchdog"
D2=$FLEETS/watchdog-test.$$.$RANDOM
# the owner: a subshell that runs `up` (default owner: its parent) and then
# becomes a sleep; SIGKILL it and the watchdog must take the fleet down
(
	"$FLEET" -d "$D2" up 3
	exec sleep 300
) &
owner=$!
for ((i = 0; i < 200; i++)); do
	[[ -f $D2/state && $(<"$D2/state") == up ]] && break
	sleep 0.05
done
[[ -f $D2/state && $(<"$D2/state") == up ]] || fail "up under an owner did not come up"
[[ $(ssh -F "$D2/ssh_config" inst-3 'echo $GPUFLEET_INSTANCE') == inst-3 ]] || fail "fleet 2 does not work"
[[ -n $(pgrep -f -- "$D2/") ]] || fail "no sshd of $D2 running"
kill -KILL "$owner"
wait "$owner" 2>/dev/null || true
for ((i = 0; i < 100; i++)); do
	[[ ! -e $D2 && -z $(pgrep -f -- "$D2" || true) ]] && break
	sleep 0.1
done
[[ ! -e $D2 ]] || fail "watchdog did not remove $D2 within 10s"
[[ -z $(pgrep -f -- "$D2" || true) ]] || fail "processes of $D2 left after the owner died"
D2=

echo "harness self-test passed in $((SECONDS - T0))s"

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
	want="$i/home|$name|$LOGIN_USER|$i/home|$i/gpu|$i/bin:$D/platform:/usr/local/bin:/usr/bin:/bin"
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

step "platform"
# inst_line NAME: its line of `fleet status`; wait_stopped NAME: until that
# says stopped (20 s at most)
inst_line() { "$FLEET" -d "$D" status | grep "^$1 "; }
wait_stopped() {
	local i
	for ((i = 0; i < 200; i++)); do
		[[ $(inst_line "$1") == "$1 ${PORT[$1]} stopped -" ]] && return 0
		sleep 0.1
	done
	return 1
}
# what the agent's test knobs see
tag=$(<"$D/tag")
out=$(rsh inst-11 'echo "$GPUFLEET_AGENT_CONTAINER_START|$(cat "$GPUFLEET_AGENT_CONTAINER_START")|$GPUFLEET_AGENT_SESSION_MARK"') ||
	fail "ssh inst-11"
cs11=$(<"${IDIR[inst-11]}/container_start")
[[ $cs11 =~ ^[0-9]+$ ]] && ((cs11 <= EPOCHSECONDS)) || fail "container_start of inst-11 is '$cs11'"
[[ $out == "${IDIR[inst-11]}/container_start|$cs11|$tag/inst-11" ]] || fail "container start / session mark knobs: $out"
for t in shutdown runpodctl vastai featurize wall; do
	[[ $(rsh inst-11 "command -v $t") == "$D/platform/$t" ]] || fail "fake $t not first in PATH"
done
[[ ! -s ${IDIR[inst-11]}/calls.log ]] || fail "calls.log not empty at start"

# wall records its message and returns
printf 'two\tfields\nlines\n' | rsh inst-12 'wall -n' || fail "fake wall failed"
[[ $(<"${IDIR[inst-12]}/calls.log") == $'wall\t-n\t\t\t\t\t\ttwo fields\\nlines\\n' ]] ||
	fail "wall's calls.log: $(cat -A "${IDIR[inst-12]}/calls.log")"

# fake-stop-hold: the call is recorded, the stop waits for the file to go
: >"${IDIR[inst-12]}/fake-stop-hold"
rsh inst-12 'shutdown -h now' >/dev/null 2>&1 &
BG+=($!)
for ((i = 0; i < 200; i++)); do
	[[ $(wc -l <"${IDIR[inst-12]}/calls.log") == 2 ]] && break
	sleep 0.05
done
[[ $(tail -n 1 "${IDIR[inst-12]}/calls.log") == $'shutdown\t-h now\t\t\t\t\t' ]] || fail "held shutdown's calls.log: $(cat -A "${IDIR[inst-12]}/calls.log")"
[[ $(inst_line inst-12) == "inst-12 ${PORT[inst-12]} ok "* ]] || fail "a held stop took inst-12 down"
rm -f "${IDIR[inst-12]}/fake-stop-hold"
wait_stopped inst-12 || fail "inst-12 not stopped after its hold went: $(inst_line inst-12)"
"$FLEET" -d "$D" start inst-12 || fail "start inst-12"

# setenv: the platform's variables in new sessions; a stop tool sees them
"$FLEET" -d "$D" setenv inst-11 CONTAINER_ID=4242 "CONTAINER_API_KEY=k'y \$x" || fail "setenv"
[[ $(rsh inst-11 'echo "$CONTAINER_ID|$CONTAINER_API_KEY"') == "4242|k'y \$x" ]] || fail "setenv values not in the session"
if "$FLEET" -d "$D" setenv inst-11 1BAD=x 2>/dev/null; then fail "setenv took a bad name"; fi
# a daemon and a session of the instance, which the stop must kill
rsh inst-11 'nohup setsid sh -c "while :; do sleep 1; done" >/dev/null 2>&1 </dev/null & echo $!' >"$D/daemon.11" || fail "daemon on inst-11"
rsh inst-11 'sleep 120' >/dev/null 2>&1 &
BG+=($!)
bg11=$!
sleep 0.3
# the stop tool never returns: the instance goes down under it
rsh inst-11 'vastai stop instance $CONTAINER_ID --api-key "$CONTAINER_API_KEY"; echo returned' >"$D/stop.11" 2>&1 && fail "vastai returned 0 on inst-11: $(cat "$D/stop.11")"
grep -q returned "$D/stop.11" && fail "the stop tool returned: $(cat "$D/stop.11")"
[[ $(<"${IDIR[inst-11]}/calls.log") == $'vastai\tstop instance 4242 --api-key k\'y $x\t4242\tk\'y $x\t\t\t' ]] ||
	fail "vastai's calls.log: $(cat -A "${IDIR[inst-11]}/calls.log")"
wait_stopped inst-11 || fail "inst-11 not stopped: $(inst_line inst-11)"
if out=$(rsh -o ConnectTimeout=5 inst-11 true 2>&1); then fail "stopped inst-11 accepted a login"; fi
grep -q "Connection refused" <<<"$out" || fail "stopped inst-11: no 'Connection refused': $out"
read -r dpid <"$D/daemon.11"
pid_gone() { ! kill -0 "$1" 2>/dev/null || [[ $(ps -o stat= -p "$1") == Z* ]]; }
pid_gone "$dpid" || fail "inst-11's daemon $dpid survived the stop"
wait "$bg11" && fail "inst-11's session survived the stop"
[[ -n $(grep -l -s -z -x -F "GPUFLEET_INSTANCE=inst-11" /proc/[0-9]*/environ | xargs -r grep -l -s -z -x -F "GPUFLEET_FLEET_TAG=$tag") ]] &&
	fail "processes of inst-11 left after the stop"
[[ $(rsh inst-12 'echo $GPUFLEET_INSTANCE') == inst-12 ]] || fail "inst-12 went down with inst-11"
if out=$("$FLEET" -d "$D" break inst-11 silent 2>&1); then fail "break of a stopped instance worked"; fi
grep -q "inst-11 is stopped; start it with" <<<"$out" || fail "break of a stopped instance: $out"
"$FLEET" -d "$D" start inst-12 2>/dev/null && fail "start of a running instance worked"

"$FLEET" -d "$D" start inst-11 || fail "start inst-11"
[[ $(rsh inst-11 'echo $GPUFLEET_INSTANCE') == inst-11 ]] || fail "inst-11 does not answer after start"
(($(<"${IDIR[inst-11]}/container_start") > cs11)) || fail "start did not write a later container_start"
[[ $(wc -l <"${IDIR[inst-11]}/calls.log") == 1 ]] || fail "calls.log not kept across stop/start"
[[ $(inst_line inst-11) == "inst-11 ${PORT[inst-11]} ok "* ]] || fail "status after start"

# fake-stop-noop: recorded, instance stays up
: >"${IDIR[inst-13]}/fake-stop-noop"
out=$(rsh inst-13 'export RUNPOD_POD_ID=pod-7; runpodctl stop pod "$RUNPOD_POD_ID"; echo "rc=$?"') || fail "runpodctl (noop) on inst-13"
[[ $out == rc=0 ]] || fail "noop runpodctl: $out"
[[ $(<"${IDIR[inst-13]}/calls.log") == $'runpodctl\tstop pod pod-7\t\t\tpod-7\t\t' ]] || fail "noop calls.log: $(cat -A "${IDIR[inst-13]}/calls.log")"
sleep 1.5
[[ $(rsh inst-13 'echo $GPUFLEET_INSTANCE') == inst-13 ]] || fail "a noop stop took inst-13 down"
# fake-stop-sleep: recorded at once, the stop comes after the sleep
echo 2 >"${IDIR[inst-14]}/fake-stop-sleep"
rsh inst-14 'export UUID=u-1; featurize instance release "$UUID"' >/dev/null 2>&1 &
BG+=($!)
for ((i = 0; i < 100; i++)); do
	[[ -s ${IDIR[inst-14]}/calls.log ]] && break
	sleep 0.05
done
[[ $(<"${IDIR[inst-14]}/calls.log") == $'featurize\tinstance release u-1\t\t\t\t\tu-1' ]] || fail "sleeping stop calls.log: $(cat -A "${IDIR[inst-14]}/calls.log")"
wait_stopped inst-14 || fail "inst-14 not stopped after its sleeping stop: $(inst_line inst-14)"
"$FLEET" -d "$D" stop inst-14 || fail "stop of a stopped instance is not a no-op"
"$FLEET" -d "$D" start inst-14 || fail "start inst-14"

# restart: processes gone, disk kept, a new container start, still listening
cs15=$(<"${IDIR[inst-15]}/container_start")
rsh inst-15 'echo kept >~/disk-file; nohup setsid sh -c "while :; do sleep 1; done" >/dev/null 2>&1 </dev/null & echo $!' >"$D/daemon.15" || fail "daemon on inst-15"
rsh inst-15 'sleep 120' >/dev/null 2>&1 &
BG+=($!)
bg15=$!
sleep 0.3
"$FLEET" -d "$D" restart inst-15 || fail "restart inst-15"
read -r dpid <"$D/daemon.15"
pid_gone "$dpid" || fail "inst-15's daemon $dpid survived the restart"
wait "$bg15" && fail "inst-15's session survived the restart"
(($(<"${IDIR[inst-15]}/container_start") > cs15)) || fail "restart did not write a later container_start"
[[ $(rsh inst-15 'cat ~/disk-file') == kept ]] || fail "inst-15 lost its disk or does not answer after restart"
[[ $(inst_line inst-15) == "inst-15 ${PORT[inst-15]} ok "* ]] || fail "status after restart"

# outside a fleet session the tools refuse, and touch nothing
if out=$(env -u GPUFLEET_INSTANCE "$D/platform/shutdown" -h now 2>&1); then fail "fake shutdown outside an instance exited 0"; fi
grep -q "no instance ''" <<<"$out" || fail "fake shutdown outside an instance: $out"
[[ -z $(ls -A "$D/requests") ]] || fail "stop requests left: $(ls -A "$D/requests")"

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
# the owner: a subshell that runs `up --owner` itself and then becomes a
# sleep; SIGKILL it and the watchdog must take the fleet down
(
	"$FLEET" -d "$D2" up 3 --owner "$BASHPID"
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

step "one-shot shell"
# The README's example run as `bash -c '...'` (a shell that exits at once,
# as a tool runner's): without --owner the fleet stays until `down`.
D2=$FLEETS/oneshot-test.$$.$RANDOM
bash -c "'$FLEET' -d '$D2' up 2; echo started" >"$D2.out" 2>&1 ||
    fail "up from bash -c failed: $(cat "$D2.out")"
[[ $(<"$D2.out") == started ]] || fail "up from bash -c said: $(cat "$D2.out")"
rm -f "$D2.out"
grep -q "no owner, the fleet stays until down" "$D2/watchdog.log" ||
    fail "the watchdog did not start ownerless: $(cat "$D2/watchdog.log")"
# Ten watchdog ticks after the shell is gone, the fleet is still there.
sleep 2
[[ -f $D2/state && $(<"$D2/state") == up ]] || fail "the fleet of a one-shot shell went down"
[[ $(ssh -F "$D2/ssh_config" inst-2 'echo $GPUFLEET_INSTANCE') == inst-2 ]] ||
    fail "the fleet of a one-shot shell does not answer"
# Its fake stop tools still work (the watchdog serves them).
ssh -F "$D2/ssh_config" inst-1 'shutdown -h now' >/dev/null 2>&1 || true
for ((i = 0; i < 100; i++)); do
	ssh -F "$D2/ssh_config" -o ConnectTimeout=2 inst-1 true 2>/dev/null || break
	sleep 0.1
done
! ssh -F "$D2/ssh_config" -o ConnectTimeout=2 inst-1 true 2>/dev/null ||
    fail "shutdown on an ownerless fleet did not take inst-1 down"
"$FLEET" -d "$D2" down || fail "down of the ownerless fleet"
[[ ! -e $D2 && -z $(pgrep -f -- "$D2" || true) ]] || fail "processes of $D2 left after down"
D2=

echo "harness self-test passed in $((SECONDS - T0))s"

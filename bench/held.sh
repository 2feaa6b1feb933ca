#!/usr/bin/env bash
# Benchmark held connections (#18): a repeated `gpufleet exec all -- true`
# through a running daemon's held sessions (their command runners, and
# again with GPUFLEET_NO_RUNNER=1: a channel per command), against a fresh one
# (--no-daemon: N logins) and against pdsh over OpenSSH ControlMaster
# masters (ControlMaster=auto, ControlPersist, warmed first), on a sandbox
# fleet of real sshd on 127.0.0.1.
#
#   bash bench/held.sh [N]     (default 200; about six minutes on 2 cores,
#                              most of it warming the ControlMaster masters)
#
# Each row runs BENCH_REPS times (default 5); the medians, the ratios and
# the logins each kind of run made (sshd's "Accepted publickey" lines) go
# to stdout and are appended to bench/results/held-DATE.md. Every run is
# verified (exit 0, "N hosts: N ok" for gpufleet); a failed run fails the
# benchmark. Only 127.0.0.1 is ever contacted.
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
n=${1:-200}
reps=${BENCH_REPS:-5}
case $n$reps in
'' | *[!0-9]*) echo "usage: bash bench/held.sh [N]  (BENCH_REPS a positive integer)" >&2; exit 2 ;;
esac
[ "$n" -gt 0 ] && [ "$reps" -gt 0 ] || { echo "bench: N and BENCH_REPS must be positive" >&2; exit 2; }
# The peer and the tools, from Debian, as bench/exec.sh installs them.
need=()
command -v pdsh >/dev/null || need+=(pdsh)
command -v sqlite3 >/dev/null || need+=(sqlite3)
command -v bc >/dev/null || need+=(bc)
if [ ${#need[@]} -gt 0 ]; then
	sudo=
	[ "$(id -u)" = 0 ] || sudo=sudo
	echo "bench: installing ${need[*]}" >&2
	export DEBIAN_FRONTEND=noninteractive
	$sudo apt-get install -y -qq "${need[@]}" >/dev/null 2>&1 ||
	    { $sudo apt-get update -qq >/dev/null 2>&1 || true
	      $sudo apt-get install -y -qq "${need[@]}" >/dev/null 2>&1 || true; }
fi
command -v pdsh >/dev/null || { echo "bench: pdsh is required (apt-get install pdsh)" >&2; exit 1; }
command -v sqlite3 >/dev/null || { echo "bench: sqlite3 is required" >&2; exit 1; }

# BENCH_BUILD_DIR: the build to measure (default: build/, made if missing).
build=${BENCH_BUILD_DIR:-$top/build}
gf=$build/gpufleet
{ "$gf" --version && [ -x "$build/tests/subreaper" ]; } >/dev/null 2>&1 ||
    BUILD_DIR=$build bash "$top/scripts/build.sh" >/dev/null

# The fleet's login user must be able to traverse the work directory.
if [ "$(id -u)" = 0 ]; then
	base=/var/lib/gpufleet-test/bench
else
	base=${XDG_STATE_HOME:-$HOME/.local/state}/gpufleet-bench
fi
mkdir -p "$base"
work=$(mktemp -d "$base/held.XXXXXX")
chmod 755 "$work"
fleet=$work/fleet
dpid= cg=
cleanup() {
	local rc=$? i
	trap - EXIT INT TERM
	[ -z "$dpid" ] || { kill "$dpid" 2>/dev/null; wait "$dpid" 2>/dev/null || true; }
	if [ -f "$fleet/ssh_config" ]; then
		for i in $(seq 1 "$n"); do
			ssh -F "$fleet/ssh_config" -o ControlPath="$work/cm/%C" -O exit \
			    "inst-$i" >/dev/null 2>&1 || true
		done
		bash "$top/tests/harness/fleet" -d "$fleet" down >/dev/null 2>&1 || true
	fi
	[ -z "$cg" ] || rmdir "$cg" 2>/dev/null || true
	rm -rf "$work"
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# A private copy and a private state: nothing of the user's is touched.
cp "$gf" "$work/gpufleet"
cp "$build/gpufleet-agent" "$work/gpufleet-agent" # the daemon's polls
# sshd listeners as child subreapers: the sessions' CPU is theirs to reap.
cp "$build/tests/subreaper" "$work/subreaper"
export FLEET_SUBREAPER=$work/subreaper
gf=$work/gpufleet
export GPUFLEET_DB=$work/fleet.db GPUFLEET_CONFIG=$work/gpufleet.ini
export XDG_STATE_HOME=$work/state XDG_RUNTIME_DIR=$work/run
mkdir -m 700 "$XDG_RUNTIME_DIR" "$work/cm"
printf '[daemon]\npoll_interval = 3600\n' >"$GPUFLEET_CONFIG"
unset GPUFLEET_DEBUG

echo "bench: starting a fleet of $n" >&2
bash "$top/tests/harness/fleet" -d "$fleet" up "$n" --owner $$ --log-level INFO
"$gf" import "$fleet/ssh_config" --match "*" >/dev/null
logins() { cat "$fleet"/groups/*/sshd.log "$fleet"/instances/*/sshd/sshd.log 2>/dev/null | grep -c "Accepted publickey" || true; }

# The fleet's sshd CPU, in microseconds: the sshd listeners and every
# process they fork (privilege separation, sessions, shells), exact, from
# cpu.stat of a cgroup (v2) the listeners are moved into before the first
# login. Not from /proc/PID/stat: it gives each process's CPU in whole
# 1/CLK_TCK (10 ms) ticks, rounded down, and a row adds only ~10-15 ms to
# each host's session process, so each moves 0, 1 or 2 ticks depending on
# its remainder; the hosts' remainders move together (same history), so the
# error does not average out over hosts. The ControlMaster masters' sessions
# were fresh (one channel each), and pdsh read 0.62 ms per host where the
# cgroup says it costs the same as a held channel (bench/results/
# held-2026-12-04.md). Without a writable cgroup2 (not root, no cgroup2
# mount) the ticks are the fallback, flagged as such in the results.
cpu_how=ticks
cg2=$(awk '$3 == "cgroup2" { print $2; exit }' /proc/mounts)
if [ -n "$cg2" ] && mkdir "$cg2/gpufleet-bench-$$" 2>/dev/null; then
	cg=$cg2/gpufleet-bench-$$
	for p in $(cat "$fleet"/groups/*/sshd.pid); do
		echo "$p" >"$cg/cgroup.procs" 2>/dev/null || { cpu_how=ticks; break; }
		cpu_how=cgroup
	done
fi
sshd_cpu_us() {
	if [ "$cpu_how" = cgroup ]; then
		awk '$1 == "usage_usec" { print $2 }' "$cg/cpu.stat"
	else
		echo $(($(sshd_ticks) * 1000000 / $(getconf CLK_TCK)))
	fi
}
# sshd_ticks: CPU ticks (reaped children included) of the fleet's sshd
# and every process below them (privilege separation, sessions, shells).
# One ps snapshot and one awk: the command runners of held sessions keep
# hundreds of processes below the listeners, and a ps per process was
# minutes per call.
sshd_ticks() {
	ps -e -o pid=,ppid= | awk -v roots="$(cat "$fleet"/groups/*/sshd.pid 2>/dev/null | tr '\n' ' ')" '
		{ kids[$2] = kids[$2] " " $1 }
		END {
			n = split(roots, q, " ")
			for (i = 1; i <= n; i++) seen[q[i]] = 1
			for (i = 1; i <= n; i++) {
				m = split(kids[q[i]], k, " ")
				for (j = 1; j <= m; j++)
					if (!(k[j] in seen)) { seen[k[j]] = 1; q[++n] = k[j] }
			}
			for (i = 1; i <= n; i++) {
				f = "/proc/" q[i] "/stat"
				if ((getline line < f) > 0) {
					sub(/.*\) /, "", line)
					split(line, a, " ")
					t += a[12] + a[13] + a[14] + a[15]
				}
				close(f)
			}
			print t + 0
		}'
}

# time_run NAME CMD...: one verified run; its wall seconds on stdout.
time_run() {
	local name=$1 t0 t1 rc=0
	shift
	t0=$(date +%s.%N)
	"$@" >"$work/out" 2>"$work/err" || rc=$?
	t1=$(date +%s.%N)
	if [ "$rc" != 0 ] || { [ "$name" != pdsh ] && ! grep -q "$n hosts: $n ok" "$work/err"; }; then
		echo "bench: $name failed (exit $rc): $(tail -1 "$work/err")" >&2
		exit 1
	fi
	echo "$t1 - $t0" | bc -l
}
# row NAME CMD...: BENCH_REPS runs; the median wall and the logins made.
row() {
	local name=$1 i before t0 k0 us=0 ticks=0
	shift
	before=$(logins)
	: >"$work/times"
	for i in $(seq 1 "$reps"); do
		k0=$(sshd_ticks) t0=$(sshd_cpu_us)
		time_run "$name" "$@" >>"$work/times"
		us=$((us + $(sshd_cpu_us) - t0)) ticks=$((ticks + $(sshd_ticks) - k0))
	done
	# sshd CPU per run, ms per host (and what the ticks said, to compare)
	sshd_ms=$(echo "$us / 1000 / $reps / $n" | bc -l | awk '{ printf "%.2f", $1 }')
	tick_ms=$(echo "$ticks * 1000 / $(getconf CLK_TCK) / $reps / $n" | bc -l | awk '{ printf "%.2f", $1 }')
	median=$(sort -g "$work/times" | awk '{ a[NR] = $1 } END { m = (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2; printf "%.3f", m }')
	all=$(sort -g "$work/times" | awk '{ printf "%s%.3f", (NR > 1 ? " " : ""), $1 }')
	made=$(( $(logins) - before ))
	echo "bench: $name: median ${median}s ($all), $made login(s), sshd ${sshd_ms} ms CPU per host ($cpu_how; /proc ticks said ${tick_ms})" >&2
}

pdsh_cm() {
	PDSH_SSH_ARGS_APPEND="-F $fleet/ssh_config -o ControlMaster=auto -o ControlPath=$work/cm/%C -o ControlPersist=600" \
	    pdsh -S -R ssh -f "$n" -w "inst-[1-$n]" true
}

echo "bench: warming up (host keys pinned, agent deployed)" >&2
"$gf" exec all --no-daemon -f "$n" -- true >/dev/null 2>&1 || true
row fresh "$gf" exec all --no-daemon -f "$n" -- true
fresh=$median fresh_all=$all fresh_logins=$made fresh_sshd=$sshd_ms

"$gf" daemon >"$work/daemon.out" 2>&1 &
dpid=$!
polled() { [ "$(sqlite3 -cmd '.timeout 20000' "$GPUFLEET_DB" 'SELECT count(DISTINCT instance_id) FROM sample_host' 2>/dev/null || echo 0)" -ge "$n" ]; }
for i in $(seq 1 240); do polled && break; sleep 0.5; done
polled || { echo "bench: the daemon's first poll did not cover $n hosts:" >&2
	tail -5 "$XDG_STATE_HOME/gpufleet/daemon.log" >&2; exit 1; }
"$gf" exec all -f "$n" -- true >/dev/null 2>&1 # the first: runners start
row held "$gf" exec all -f "$n" -- true
held=$median held_all=$all held_logins=$made held_sshd=$sshd_ms

# The same, a daemon whose held sessions run each command on a channel.
kill "$dpid"
wait "$dpid" 2>/dev/null || true
samples() { sqlite3 -cmd '.timeout 20000' "$GPUFLEET_DB" 'SELECT count(*) FROM sample_host' 2>/dev/null || echo 0; }
s0=$(samples)
GPUFLEET_NO_RUNNER=1 "$gf" daemon >>"$work/daemon.out" 2>&1 &
dpid=$!
repolled() { [ "$(samples)" -ge $((s0 + n)) ]; }
for i in $(seq 1 240); do repolled && break; sleep 0.5; done
repolled || { echo "bench: the second daemon's first poll did not cover $n hosts" >&2; exit 1; }
"$gf" exec all -f "$n" -- true >/dev/null 2>&1
row held-channels "$gf" exec all -f "$n" -- true
chan=$median chan_all=$all chan_logins=$made chan_sshd=$sshd_ms
kill "$dpid"
wait "$dpid" 2>/dev/null || true
dpid=

# One master per host, made in the background by ssh -fN (a master that
# pdsh's first ssh forked would hold pdsh's pipes open for ControlPersist).
echo "bench: warming the ControlMaster masters" >&2
warm=()
for i in $(seq 1 "$n"); do
	ssh -F "$fleet/ssh_config" -o ControlMaster=yes -o ControlPath="$work/cm/%C" \
	    -o ControlPersist=600 -f -N "inst-$i" </dev/null >/dev/null 2>&1 &
	warm+=($!)
done
wait "${warm[@]}" # not the daemon
pdsh_cm >/dev/null 2>&1 || true
row pdsh pdsh_cm
pdsh=$median pdsh_all=$all pdsh_logins=$made pdsh_sshd=$sshd_ms

ratio() { echo "$1 / $2" | bc -l | awk '{ printf "%.1f", $1 }'; }
day=$(date +%Y-%m-%d)
out=$top/bench/results/held-$day.md
mkdir -p "$top/bench/results"
{
	echo "## Held connections, N = $n ($(date -u '+%Y-%m-%d %H:%M UTC'))"
	echo
	echo "$(nproc) CPUs, load at start $(cut -d' ' -f1-3 /proc/loadavg); gpufleet $("$gf" --version | cut -d' ' -f2)" \
	    "(git $(git -C "$top" rev-parse --short HEAD 2>/dev/null || echo '?')); $(ssh -V 2>&1); $(pdsh -V 2>&1 | head -1)."
	echo "\`exec all -f $n -- true\`, $reps runs each, median wall seconds (all runs in brackets);"
	echo "logins: sshd's \"Accepted publickey\" lines during the row's runs; sshd CPU: the fleet's sshd"
	echo "and every process below them (sessions, remote shells), reaped children included, per run and host"
	if [ "$cpu_how" = cgroup ]; then
		echo "(exact: cpu.stat usage_usec of a cgroup holding the fleet's sshd)."
	else
		echo "(FALLBACK, biased: /proc/PID/stat ticks, 10 ms per process; no writable cgroup2)."
	fi
	echo
	echo "| run | wall s | runs | logins | sshd CPU ms/host | held is faster by |"
	echo "|---|---:|---|---:|---:|---:|"
	echo "| gpufleet exec, fresh (--no-daemon) | $fresh | $fresh_all | $fresh_logins | $fresh_sshd | $(ratio "$fresh" "$held")x |"
	echo "| gpufleet exec, held (daemon, command runners) | $held | $held_all | $held_logins | $held_sshd | 1.0x |"
	echo "| gpufleet exec, held (daemon, a channel per command: GPUFLEET_NO_RUNNER=1) | $chan | $chan_all | $chan_logins | $chan_sshd | $(ratio "$chan" "$held")x |"
	echo "| pdsh -R ssh, ControlMaster=auto + ControlPersist (warm) | $pdsh | $pdsh_all | $pdsh_logins | $pdsh_sshd | $(ratio "$pdsh" "$held")x |"
	echo
	echo "Targets (#18): held at least 10x faster than fresh:" \
	    "$(awk -v a="$fresh" -v b="$held" 'BEGIN { print (a >= 10 * b) ? "met" : "missed" }');" \
	    "at least 5x faster than pdsh with ControlMaster:" \
	    "$(awk -v a="$pdsh" -v b="$held" 'BEGIN { print (a >= 5 * b) ? "met" : "missed" }')."
	echo
} | tee -a "$out"
echo "bench: appended to ${out#"$top"/}" >&2

#!/usr/bin/env bash
# Benchmark `gpufleet exec` against pdsh, ClusterShell (clush) and
# parallel-ssh (and Ansible at N <= 50), side by side, on a sandbox fleet of
# real sshd on 127.0.0.1.
#
#   bash bench/exec.sh [N...]        (default: 50 200 500, ~7 min on 2 cores)
#   bash bench/exec.sh --quick       (N = 50, one repetition, under 2 minutes)
#   bash bench/exec.sh --rtt MS [N...]
#                                    (default N: 200; about 4 minutes at 100 ms)
#
# --rtt MS puts tests/harness/delayrelay in front of every instance: each
# direction of every connection waits MS/2 ms, so a round trip takes MS ms
# more, as with rented machines 30-300 ms away.  Every tool goes through it
# (an ssh_config and known_hosts with the relay's ports, host keys still
# checked; gpufleet imports that ssh_config), gpufleet is also measured with
# `[ssh] handshake_window = off`, Ansible runs at N <= 200, and the tables go
# to a "Latency: MS ms round trip" section of bench/results/DATE.md (which
# replaces that section only; the main run keeps such sections too).
#
# For each N: start a fleet of N instances (tests/harness/fleet), import it
# into a throw-away gpufleet database, warm up, then run `true` and
# `seq 100` on all N hosts with fan-out N with every tool, several times,
# and `gpufleet status` (the agent deployed in the warm-up) against the
# same N,
# measuring wall time, client CPU, sshd CPU and memory; then stop the fleet.
# The OpenSSH-based tools are measured twice: with their defaults, and with
# `-o KexAlgorithms=curve25519-sha256` (OpenSSH 9's default post-quantum kex
# costs ~135 ms of client CPU per connection; gpufleet uses curve25519).
# Every run is verified (all N hosts ran the command, N logins in the sshd
# logs); a failed run is reported as failed and not timed.
#
# Ansible (`ansible all -m command -f N`, pipelining, no ControlMaster, the
# same ssh_config, key and host key checking, curve25519) runs once per
# command at N <= 50 only: it is slow.  Above N = 200 the default-kex rows
# run only `true`.
#
# Tables go to stdout and to bench/results/exec-DATE-TIME.txt with every raw
# run (kept out of git by bench/.gitignore); the summary for the README goes
# to bench/results/DATE.md (markdown tables and the targets of issue #18)
# with a plot of wall time against N, bench/results/DATE.png (gnuplot):
# those two are meant to be committed.  Progress goes to stderr.
#
# Environment: BENCH_REPS (runs per row, default 2; --quick: 1),
# BENCH_SLOW_REPS (runs per row for the OpenSSH-default-kex rows, default 1:
# they take ~5x longer), BENCH_TIMEOUT (seconds before one run is killed,
# default 180), BENCH_NOTES (a markdown file appended to DATE.md, e.g. the
# profile that explains a missed target).
#
# Installs what is missing (pdsh clustershell pssh ansible-core time
# gnuplot-nox, via apt-get) and
# builds gpufleet (scripts/build.sh) if build/gpufleet is missing or broken.
# Only 127.0.0.1 is ever contacted.  Works from any directory.
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
here=$top/bench
usage="usage: bash bench/exec.sh [--quick | --rtt MS] [N...]  (MS in 1..10000, N a positive integer)"
quick=0
rtt=0
if [ "${1:-}" = --quick ]; then
	[ $# -eq 1 ] || { echo "$usage" >&2; exit 2; }
	quick=1
	set -- 50
elif [ "${1:-}" = --rtt ]; then
	case ${2:-} in
	'' | *[!0-9]* | 0*) echo "bench: --rtt needs a round trip in milliseconds (1..10000)" >&2; exit 2 ;;
	esac
	[ "$2" -le 10000 ] || { echo "bench: --rtt $2: at most 10000 ms" >&2; exit 2; }
	rtt=$2
	shift 2
	[ $# -gt 0 ] || set -- 200
fi
reps=${BENCH_REPS:-$((quick ? 1 : 2))}
slow_reps=${BENCH_SLOW_REPS:-1}
run_timeout=${BENCH_TIMEOUT:-180}
notes=${BENCH_NOTES:-}

if [ $# -eq 0 ]; then set -- 50 200 500; fi
for n in "$@"; do
	case $n in
	'' | *[!0-9]* | 0*) echo "$usage" >&2; exit 2 ;;
	esac
done
for v in "$reps" "$slow_reps" "$run_timeout"; do
	case $v in
	'' | *[!0-9]* | 0*) echo "bench: BENCH_REPS, BENCH_SLOW_REPS and BENCH_TIMEOUT must be positive integers" >&2; exit 2 ;;
	esac
done
if [ -n "$notes" ] && [ ! -r "$notes" ]; then
	echo "bench: BENCH_NOTES: cannot read $notes" >&2
	exit 2
fi

sudo=
[ "$(id -u)" = 0 ] || sudo=sudo

# ---- tools -------------------------------------------------------------------
need=()
command -v pdsh >/dev/null || need+=(pdsh)
command -v clush >/dev/null || need+=(clustershell)
command -v parallel-ssh >/dev/null || need+=(pssh)
command -v ansible >/dev/null || need+=(ansible-core)
[ -x /usr/bin/time ] || need+=(time)
command -v gnuplot >/dev/null || need+=(gnuplot-nox) # the plot
command -v python3 >/dev/null || need+=(python3)
if [ ${#need[@]} -gt 0 ]; then
	echo "bench: installing ${need[*]}" >&2
	export DEBIAN_FRONTEND=noninteractive
	$sudo apt-get install -y -qq "${need[@]}" >/dev/null 2>&1 ||
	    { $sudo apt-get update -qq >/dev/null 2>&1 || true
	      $sudo apt-get install -y -qq "${need[@]}" >/dev/null ||
	          echo "bench: could not install all of: ${need[*]} (missing tools are skipped)" >&2; }
fi
[ -x /usr/bin/time ] || { echo "bench: /usr/bin/time is required" >&2; exit 1; }
py=/usr/bin/python3
[ -x "$py" ] || py=$(command -v python3)
have() { command -v "$1" >/dev/null && echo 1 || echo 0; }

# ---- gpufleet ----------------------------------------------------------------
gf=$top/build/gpufleet
if ! "$gf" --version >/dev/null 2>&1 || [ ! -x "$top/build/gpufleet-agent" ] ||
    [ ! -x "$top/build/tests/subreaper" ] ||
    { [ "$rtt" != 0 ] && [ ! -x "$top/build/tests/delayrelay" ]; }; then
	echo "bench: building gpufleet" >&2
	bash "$top/scripts/build.sh" >/dev/null ||
	    { bash "$top/scripts/deps.sh" && bash "$top/scripts/build.sh" >/dev/null; }
fi

# ---- work directory: the fleet's login user must be able to traverse it -----
if [ "$(id -u)" = 0 ]; then
	base=/var/lib/gpufleet-test/bench
else
	base=${XDG_STATE_HOME:-$HOME/.local/state}/gpufleet-bench
fi
mkdir -p "$base"
work=$(mktemp -d "$base/exec.XXXXXX")
chmod 755 "$work"
fleet_dir=
RELAY_PID=
cleanup() {
	local rc=$?
	trap - EXIT INT TERM
	[ -z "$RELAY_PID" ] || kill "$RELAY_PID" 2>/dev/null || true
	if [ -n "$fleet_dir" ]; then
		bash "$top/tests/harness/fleet" -d "$fleet_dir" down >/dev/null 2>&1 ||
		    echo "bench: fleet down failed for $fleet_dir" >&2
	fi
	rm -rf "$work"
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# A private copy: others may rebuild build/ while the benchmark runs.
cp "$gf" "$work/gpufleet"
cp "$top/build/gpufleet-agent" "$work/gpufleet-agent"
gf=$work/gpufleet
# Every sshd listener a child subreaper: the post-auth session processes
# its monitors orphan are its to reap, so the sshd CPU read from the
# listeners is all of a login's, not three quarters of it (the rest went
# to pid 1: bench/results/2026-12-04.md, "uncounted sshd CPU").
cp "$top/build/tests/subreaper" "$work/subreaper"
export FLEET_SUBREAPER=$work/subreaper
: >"$work/gpufleet.ini" # empty config: every default (accept-new, fan-out 256)
rtt_args=()
if [ "$rtt" != 0 ]; then
	cp "$top/build/tests/delayrelay" "$work/delayrelay"
	. "$top/tests/harness/delayrelay.sh"
	printf '[ssh]\nhandshake_window = off\n' >"$work/window-off.ini"
	rtt_args=(--rtt "$rtt" --window-off-config window-off.ini --ansible-max-n 200)
fi

mkdir -p "$here/results"
results=$here/results/exec-$(date +%Y-%m-%d-%H%M%S)$([ "$rtt" = 0 ] || echo "-rtt$rtt").txt
{
	echo "gpufleet exec benchmark, $(date -u '+%Y-%m-%d %H:%M:%S UTC'), Ns: $*"
	echo "machine: $(nproc) CPUs, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo)," \
	    "$(uname -sr), load average at start $(cut -d' ' -f1-3 /proc/loadavg)"
	echo "gpufleet: $("$gf" --version) (build/gpufleet of $(date -u -r "$top/build/gpufleet" '+%H:%M UTC');" \
	    "checkout at git $(git -C "$top" rev-parse --short HEAD 2>/dev/null || echo '?')$(
	    git -C "$top" diff --quiet HEAD -- controller include agent CMakeLists.txt 2>/dev/null || echo ', with uncommitted changes'))," \
	    "libssh $(dpkg-query -W -f='${Version}' libssh-4 2>/dev/null || echo '?')"
	echo "peers: $(pdsh -V 2>&1 | head -1 || true); $(clush --version 2>&1 || true);" \
	    "parallel-ssh $(parallel-ssh --version 2>&1 || true);" \
	    "$(ansible --version 2>/dev/null | head -1 || echo 'ansible: not installed'); $(ssh -V 2>&1)"
	[ "$rtt" = 0 ] || echo "round trip: $rtt ms added by tests/harness/delayrelay ($((rtt / 2)) ms each way) in front of every instance"
	echo "all tools log in as the fleet user with the fleet key, host keys checked"
	echo "(OpenSSH tools: -F fleet/ssh_config: StrictHostKeyChecking yes against"
	echo "fleet/known_hosts, BatchMode; gpufleet: keys pinned on first contact in the"
	echo "warm-up, checked on every timed run); pdsh -S -R ssh -f N, clush -S -f N,"
	echo "parallel-ssh -p N -i, gpufleet exec all -f N; gpufleet status: all N,"
	echo "the agent deployed in the warm-up (x gpufleet: status / exec true)."
	echo "wall, client CPU (user+sys of the tool and its children) and sshd CPU are"
	echo "medians; peak RSS is the largest single process of any run, tree RSS the"
	echo "largest sum of RSS over the tool and its children (sampled every 100 ms)."
	echo "x gpufleet = wall / gpufleet's wall for the same command and N."
	echo
} | tee "$results"

for n in "$@"; do
	fleet_dir=$work/fleet-$n
	echo "bench: N=$n: starting the fleet" >&2
	bash "$top/tests/harness/fleet" -d "$fleet_dir" up "$n" --owner $$
	ssh_config=$fleet_dir/ssh_config
	if [ "$rtt" != 0 ]; then
		relay_up "$work/delayrelay" "$fleet_dir" "$rtt" "$work/relay-$n" ||
		    { echo "bench: N=$n: the relay did not start" >&2; exit 1; }
		ssh_config=$work/relay-$n/ssh_config
	fi
	GPUFLEET_DB=$work/fleet.db GPUFLEET_CONFIG=$work/gpufleet.ini \
	    "$gf" import "$ssh_config" --match "*" >/dev/null
	"$py" "$here/exec_bench.py" run --fleet "$fleet_dir" --n "$n" --gpufleet "$gf" \
	    --ssh-config "$ssh_config" --agent "$work/gpufleet-agent" "${rtt_args[@]}" \
	    --work "$work" --reps "$reps" --slow-reps "$slow_reps" --timeout "$run_timeout" \
	    --results "$results" --have-pdsh "$(have pdsh)" --have-clush "$(have clush)" \
	    --have-pssh "$(have parallel-ssh)" --have-ansible "$(have ansible)"
	if [ -n "$RELAY_PID" ]; then
		kill "$RELAY_PID" 2>/dev/null || true
		wait "$RELAY_PID" 2>/dev/null || true
		RELAY_PID=
	fi
	bash "$top/tests/harness/fleet" -d "$fleet_dir" down >/dev/null
	fleet_dir=
	# the next N gets a fresh database (instance names are reused)
	rm -f "$work"/fleet.db* "$work"/known_hosts
done
day=$(date +%Y-%m-%d)
if [ "$rtt" = 0 ]; then
	"$py" "$here/exec_bench.py" report --work "$work" --header "$results" \
	    --out "$here/results/$day.md" --png "$here/results/$day.png" \
	    --date "$day" ${notes:+--notes "$notes"}
	echo "bench: results in ${results#"$top"/}, bench/results/$day.md and $day.png" >&2
else
	"$py" "$here/exec_bench.py" report --work "$work" --header "$results" \
	    --out "$here/results/$day.md" --rtt "$rtt" --date "$day" ${notes:+--notes "$notes"}
	echo "bench: results in ${results#"$top"/} and the \"Latency: $rtt ms\" section of bench/results/$day.md" >&2
fi

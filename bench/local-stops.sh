#!/usr/bin/env bash
# Benchmark the daemon's loop while local stops run (#36): the latency of
# GET /api/v1/instances, N sequential requests with curl, with no local
# stop in flight and with four `local:sleep 60` stops in flight (due rows
# of four instances, run beside the loop by controller/child.c), on a
# sandbox fleet of real sshd on 127.0.0.1.
#
#   bash bench/local-stops.sh [N]     (default 200; about a minute)
#
# p50, p99 and max (milliseconds, curl's time_total) go to stdout and are
# appended to bench/results/local-stops-DATE.md. Every request must answer
# 200, and the four stops must still be in flight after the last request
# (else the row measured nothing): either failing fails the benchmark.
# The target (#36): every request under 200 ms. Only 127.0.0.1 is
# contacted.
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
n=${1:-200}
case $n in
'' | *[!0-9]*) echo "usage: bash bench/local-stops.sh [N]" >&2; exit 2 ;;
esac
[ "$n" -gt 0 ] || { echo "bench: N must be positive" >&2; exit 2; }
for t in sqlite3 curl python3; do
	command -v "$t" >/dev/null || { echo "bench: $t is required" >&2; exit 1; }
done

# BENCH_BUILD_DIR: the build to measure (default: build/, made if missing).
build=${BENCH_BUILD_DIR:-$top/build}
gf=$build/gpufleet
"$gf" --version >/dev/null 2>&1 || BUILD_DIR=$build bash "$top/scripts/build.sh" >/dev/null

# The fleet's login user must be able to traverse the work directory.
if [ "$(id -u)" = 0 ]; then
	base=/var/lib/gpufleet-test/bench
else
	base=${XDG_STATE_HOME:-$HOME/.local/state}/gpufleet-bench
fi
mkdir -p "$base"
work=$(mktemp -d "$base/local-stops.XXXXXX")
chmod 755 "$work"
fleet=$work/fleet
dpid=
cleanup() {
	local rc=$?
	trap - EXIT INT TERM
	[ -z "$dpid" ] || { kill "$dpid" 2>/dev/null; wait "$dpid" 2>/dev/null || true; }
	[ ! -f "$fleet/ssh_config" ] ||
	    bash "$top/tests/harness/fleet" -d "$fleet" down >/dev/null 2>&1 || true
	rm -rf "$work"
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# A private copy and a private state: nothing of the user's is touched.
cp "$gf" "$work/gpufleet"
cp "$build/gpufleet-agent" "$work/gpufleet-agent"
gf=$work/gpufleet
export GPUFLEET_DB=$work/fleet.db GPUFLEET_CONFIG=$work/gpufleet.ini
export XDG_STATE_HOME=$work/state XDG_RUNTIME_DIR=$work/run
mkdir -m 700 "$XDG_RUNTIME_DIR"
# A poll every 2 s: the due rows are run after the next one.
printf '[daemon]\npoll_interval = 2\nstop_grace = 5\n' >"$GPUFLEET_CONFIG"
unset GPUFLEET_DEBUG
sql() { sqlite3 -cmd '.timeout 20000' "$GPUFLEET_DB" "$@"; }

load=$(cut -d' ' -f1-3 /proc/loadavg)
echo "bench: starting a fleet of 5" >&2
bash "$top/tests/harness/fleet" -d "$fleet" up 5 --owner $$ --log-level INFO >/dev/null
"$gf" import "$fleet/ssh_config" --match "*" >/dev/null
for i in 1 2 3 4; do
	"$gf" set "inst-$i" "stop_command=local:sleep 60" stop_kind=stop >/dev/null
done
"$gf" status >/dev/null || true
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
"$gf" daemon --listen "127.0.0.1:$port" >"$work/daemon.out" 2>&1 &
dpid=$!
url=http://127.0.0.1:$port/api/v1/instances
for i in $(seq 1 300); do
	curl -sf -m 5 -o /dev/null "$url" && break
	sleep 0.2
done

# measure NAME: N requests; appends "NAME p50 p99 max" (ms) to $work/rows.
measure() {
	local i code t
	: >"$work/times"
	for i in $(seq 1 "$n"); do
		read -r code t < <(curl -s -m 60 -o /dev/null -w '%{http_code} %{time_total}\n' "$url")
		[ "$code" = 200 ] || { echo "bench: request $i answered $code" >&2; exit 1; }
		echo "$t" >>"$work/times"
	done
	sort -n "$work/times" | awk -v name="$1" '
		{ v[NR] = $1 * 1000 }
		END {
			p50 = v[int((NR + 1) * 0.50)]; p99 = v[int(NR * 0.99 + 0.5)]
			printf "%s|%.1f|%.1f|%.1f\n", name, p50, p99, v[NR]
		}' >>"$work/rows"
}
inflight() { sql "SELECT count(*) FROM local_stop WHERE started_at IS NOT NULL AND status IS NULL"; }

echo "bench: $n requests, no local stop in flight" >&2
measure "none in flight"
for i in 1 2 3 4; do
	sql "INSERT INTO local_stop (instance_id, deadline, t) SELECT id, 'bench-$i', strftime('%s') FROM instance WHERE name = 'inst-$i'"
done
for i in $(seq 1 300); do
	[ "$(inflight)" = 4 ] && break
	sleep 0.2
done
[ "$(inflight)" = 4 ] || { echo "bench: the four local stops did not start" >&2; exit 1; }
echo "bench: $n requests, four local:sleep 60 in flight" >&2
measure "four local:sleep 60 in flight"
[ "$(inflight)" = 4 ] || { echo "bench: the local stops ended before the last request: nothing measured" >&2; exit 1; }

out=$top/bench/results/local-stops-$(date -u +%F).md
{
	printf '## API latency beside local stops, N = %s (%s)\n\n' "$n" "$(date -u '+%F %H:%M UTC')"
	printf '%s CPUs, load at start %s; %s (git %s).\n' "$(nproc)" "$load" \
	    "$("$gf" --version | head -1)" "$(git -C "$top" rev-parse --short HEAD 2>/dev/null || echo unknown)"
	printf 'GET /api/v1/instances, %s sequential requests with curl, milliseconds (time_total).\n\n' "$n"
	printf '| local stops | p50 ms | p99 ms | max ms | every request under 200 ms |\n|---|---:|---:|---:|---|\n'
	awk -F'|' '{ printf "| %s | %s | %s | %s | %s |\n", $1, $2, $3, $4, ($4 < 200 ? "yes" : "no") }' "$work/rows"
	printf '\n'
} | tee -a "$out"

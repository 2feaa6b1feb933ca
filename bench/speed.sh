#!/usr/bin/env bash
# Benchmark `gpufleet speed` against OpenSSH on the same instances: ssh
# with `cat > /dev/null` (upload) and `head -c SIZE /dev/zero` (download),
# and scp of a SIZE-byte file each way, on a sandbox fleet of real sshd on
# 127.0.0.1.
#
#   bash bench/speed.sh [N]          (default: 2 instances)
#
# Every tool works over a connection already logged in, so the handshake
# is not counted: gpufleet speed times each transfer on its held session;
# ssh and scp run through one ControlMaster connection per instance. Each
# row is the median of BENCH_REPS runs (default 3); DOWN/ssh and UP/ssh are
# a tool's rate over ssh's for the same instance and direction (ssh and
# scp times include starting the client, a few ms). On loopback the
# numbers say what each tool costs in CPU, not what a link carries: read
# the ratios, not the MB/s. Instances are measured one at a time.
#
# Environment: BENCH_REPS (default 3), BENCH_SIZE (default 64M; the
# sizes gpufleet speed --size takes).
#
# Output: a table on stdout and in bench/results/speed-DATE.txt (kept out
# of git). Builds gpufleet (scripts/build.sh) if build/gpufleet is missing.
# Only 127.0.0.1 is ever contacted. Works from any directory.
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
here=$top/bench
reps=${BENCH_REPS:-3}
size_text=${BENCH_SIZE:-64M}
n=${1:-2}
case $n in
'' | *[!0-9]* | 0*) echo "usage: bash bench/speed.sh [N]  (N a positive integer)" >&2; exit 2 ;;
esac
case $reps in
'' | *[!0-9]* | 0*) echo "bench: BENCH_REPS must be a positive integer" >&2; exit 2 ;;
esac
py=$(command -v python3) || { echo "bench: python3 is required" >&2; exit 1; }

gf=$top/build/gpufleet
if ! "$gf" --version >/dev/null 2>&1; then
	echo "bench: building gpufleet" >&2
	bash "$top/scripts/build.sh" >/dev/null
fi

if [ "$(id -u)" = 0 ]; then
	base=/var/lib/gpufleet-test/bench
else
	base=${XDG_STATE_HOME:-$HOME/.local/state}/gpufleet-bench
fi
mkdir -p "$base"
work=$(mktemp -d "$base/speed.XXXXXX")
chmod 755 "$work"
fleet_dir=
cfg=
cleanup() {
	local rc=$?
	trap - EXIT INT TERM
	if [ -n "$fleet_dir" ]; then
		for ((i = 1; i <= n; i++)); do
			ssh -F "$cfg" -o ControlPath="$work/cm-%C" -O exit "inst-$i" \
			    >/dev/null 2>&1 || true
		done
		bash "$top/tests/harness/fleet" -d "$fleet_dir" down >/dev/null 2>&1 ||
		    echo "bench: fleet down failed for $fleet_dir" >&2
	fi
	rm -rf "$work"
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

cp "$gf" "$work/gpufleet"
gf=$work/gpufleet
: >"$work/gpufleet.ini"
export GPUFLEET_DB=$work/fleet.db GPUFLEET_CONFIG=$work/gpufleet.ini
export GPUFLEET_NO_PROGRESS=1

# The size in bytes, as gpufleet reads it (it refuses what it would).
size=$("$py" - "$size_text" <<'PY'
import re, sys
m = re.fullmatch(r"(\d+)([KMG]?)(i?b)?", sys.argv[1], re.I)
if not m:
    sys.exit("bench: BENCH_SIZE '%s' is not a size (e.g. 64M)" % sys.argv[1])
print(int(m.group(1)) << {"": 0, "K": 10, "M": 20, "G": 30}[m.group(2).upper()])
PY
)
head -c "$size" /dev/zero >"$work/payload"

fleet_dir=$work/fleet
cfg=$fleet_dir/ssh_config
echo "bench: starting $n instance(s)" >&2
bash "$top/tests/harness/fleet" -d "$fleet_dir" up "$n" --owner $$ >/dev/null
"$gf" import "$cfg" --match "*" >/dev/null
cm=(-F "$cfg" -o ControlMaster=auto -o ControlPath="$work/cm-%C" -o ControlPersist=600)

# now: seconds since the epoch, to the nanosecond.
now() { date +%s.%N; }
# rate START END: bytes per second of $size over the interval.
rate() { "$py" -c 'import sys; print(int(sys.argv[3]) / (float(sys.argv[2]) - float(sys.argv[1])))' "$1" "$2" "$size"; }

mkdir -p "$here/results"
results=$here/results/speed-$(date +%Y-%m-%d-%H%M%S).txt
raw=$work/raw.tsv
: >"$raw"
for ((i = 1; i <= n; i++)); do
	h=inst-$i
	ssh "${cm[@]}" "$h" true # the master connection, and a check
	for ((r = 1; r <= reps; r++)); do
		echo "bench: $h run $r/$reps" >&2
		"$gf" speed "$h" --size "$size_text" --json >"$work/gf.json"
		"$py" - "$work/gf.json" "$h" >>"$raw" <<'PY'
import json, sys
(o,) = json.load(open(sys.argv[1]))
if o["error"] is not None:
    sys.exit("bench: gpufleet speed failed: %s" % o["error"]["message"])
print("%s\tgpufleet\t%r\t%r" % (sys.argv[2], o["download_Bps"], o["upload_Bps"]))
PY
		t0=$(now)
		ssh "${cm[@]}" "$h" 'cat > /dev/null' <"$work/payload"
		t1=$(now)
		ssh "${cm[@]}" "$h" "head -c $size /dev/zero" >"$work/down"
		t2=$(now)
		[ "$(stat -c %s "$work/down")" = "$size" ] ||
		    { echo "bench: ssh download came back short" >&2; exit 1; }
		printf '%s\tssh\t%s\t%s\n' "$h" "$(rate "$t1" "$t2")" "$(rate "$t0" "$t1")" >>"$raw"
		t0=$(now)
		scp -q "${cm[@]}" "$work/payload" "$h:.speed-bench"
		t1=$(now)
		scp -q "${cm[@]}" "$h:.speed-bench" "$work/down"
		t2=$(now)
		cmp -s "$work/payload" "$work/down" ||
		    { echo "bench: scp download differs" >&2; exit 1; }
		ssh "${cm[@]}" "$h" 'rm -f .speed-bench'
		printf '%s\tscp\t%s\t%s\n' "$h" "$(rate "$t1" "$t2")" "$(rate "$t0" "$t1")" >>"$raw"
	done
done

{
	echo "gpufleet speed benchmark, $(date -u '+%Y-%m-%d %H:%M:%S UTC'), $n instance(s)," \
	    "$size_text each way, median of $reps run(s)"
	echo "machine: $(nproc) CPUs, $(uname -sr), load average $(cut -d' ' -f1-3 /proc/loadavg)"
	echo "gpufleet: $("$gf" --version); $(ssh -V 2>&1)"
	"$py" - "$raw" <<'PY'
import statistics, sys
rows = {}
for line in open(sys.argv[1]):
    h, tool, down, up = line.split("\t")
    rows.setdefault((h, tool), []).append((float(down), float(up)))
def med(h, tool, k):
    return statistics.median(v[k] for v in rows[(h, tool)])
print("%-8s %-9s %12s %12s %9s %9s" % ("INSTANCE", "TOOL", "DOWNLOAD", "UPLOAD",
      "DOWN/ssh", "UP/ssh"))
for h in sorted({h for h, _ in rows}, key=lambda s: int(s.split("-")[1])):
    sd, su = med(h, "ssh", 0), med(h, "ssh", 1)
    for tool in ("gpufleet", "ssh", "scp"):
        d, u = med(h, tool, 0), med(h, tool, 1)
        print("%-8s %-9s %7.1f MB/s %7.1f MB/s %8.2fx %8.2fx" %
              (h, tool, d / 1e6, u / 1e6, d / sd, u / su))
PY
} | tee "$results"

#!/usr/bin/env bash
# How long the commands that only read take on a big inventory: N
# instances (default 2000) with DAYS (default 365) of ledger (a run a day,
# now and then unknown), a price change for a quarter of them, two days of
# host and GPU samples every 5 minutes (the raw retention) and 30 days of
# hourly GPU aggregates. The database is made at the store level (SQL on
# the real schema), about a minute. Each command runs REPS times (default
# 5); the median wall time is printed as a Markdown table row.
# Usage: bench/reads.sh [N DAYS REPS]   (results: bench/results/reads-*.md)
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
n=${1:-2000} days=${2:-365} reps=${3:-5}
BUILD_DIR=$top/build bash "$top/scripts/build.sh" >/dev/null
g=$top/build/gpufleet
tmp=$(mktemp -d)
[ -n "${KEEP:-}" ] || trap 'rm -rf "$tmp"' EXIT
[ -z "${KEEP:-}" ] || echo "database: $tmp/fleet.db" >&2
export GPUFLEET_DB=$tmp/fleet.db XDG_CONFIG_HOME=$tmp/config \
    XDG_DATA_HOME=$tmp/data XDG_STATE_HOME=$tmp/state TZ=UTC
"$g" provider add bench >/dev/null # makes the schema
now=$(date +%s)
day0=$(((now / 86400 - days) * 86400))
t0=$(date +%s.%N)
sqlite3 "$GPUFLEET_DB" >/dev/null <<SQL
PRAGMA foreign_keys = ON;
BEGIN;
WITH RECURSIVE i(k) AS (SELECT 1 UNION ALL SELECT k + 1 FROM i WHERE k < $n)
INSERT INTO instance (id, name, host, port, provider, created_at)
    SELECT k, 'gpu-' || k, '10.' || (k / 65536) || '.' || (k / 256 % 256)
        || '.' || (k % 256), 22, 'bench', $day0 - 86400 FROM i;
INSERT INTO instance_price SELECT id, created_at, 26900, 'h', 'second', 0,
    12000, 0, 5000, 'CNY' FROM instance;
INSERT INTO instance_price SELECT id, $day0 + $days / 2 * 86400, 31000, 'h',
    'minute', 600, 12000, 0, 5000, 'CNY' FROM instance WHERE id % 4 = 0;
WITH RECURSIVE d(k) AS (SELECT 0 UNION ALL SELECT k + 1 FROM d
    WHERE k < $days - 1)
INSERT INTO ledger (instance_id, t, state, source)
    SELECT i.id, $day0 + d.k * 86400 + 28800 + i.id % 3600, 'running',
        'observed' FROM instance i, d
    UNION ALL
    SELECT i.id, $day0 + d.k * 86400 + 72000 + i.id % 600,
        CASE WHEN d.k % 30 = 7 THEN 'unknown' ELSE 'stopped' END,
        'observed' FROM instance i, d
    WHERE NOT (d.k = $days - 1 AND i.id % 2 = 0);
WITH RECURSIVE s(k) AS (SELECT 0 UNION ALL SELECT k + 1 FROM s
    WHERE k < 575)
INSERT INTO sample_host (instance_id, t, load1, net_tx_bytes)
    SELECT i.id, $now - 172800 + s.k * 300, 1.5, s.k * 1000000 FROM instance i, s;
WITH RECURSIVE s(k) AS (SELECT 0 UNION ALL SELECT k + 1 FROM s
    WHERE k < 575)
INSERT INTO sample_gpu (instance_id, t, gpu, util, mem_used_mib,
    mem_total_mib) SELECT i.id, $now - 172800 + s.k * 300, 0,
    (s.k * 7 + i.id) % 100, 1000, 81920 FROM instance i, s;
WITH RECURSIVE s(k) AS (SELECT 0 UNION ALL SELECT k + 1 FROM s
    WHERE k < 719)
INSERT INTO sample_gpu_5m (instance_id, t, gpu, n, util_mean, util_max,
    mem_total_mib) SELECT i.id, $now - 172800 - 2592000 + s.k * 3600, 0, 5,
    (s.k + i.id) % 100, (s.k + i.id) % 100, 81920 FROM instance i, s;
COMMIT;
PRAGMA wal_checkpoint(TRUNCATE);
SQL
gen=$(echo "$(date +%s.%N) - $t0" | bc)
rows() { sqlite3 "$GPUFLEET_DB" "SELECT count(*) FROM $1"; }
printf 'inventory: %s instances, %s ledger rows, %s host samples, %s GPU samples, %s GPU aggregates; %s MiB; made in %.1f s\n\n' \
    "$(rows instance)" "$(rows ledger)" "$(rows sample_host)" \
    "$(rows sample_gpu)" "$(rows sample_gpu_5m)" \
    "$(($(stat -c %s "$GPUFLEET_DB") / 1048576))" "$gen"
printf '| command | median wall ms (of %s) |\n| --- | --- |\n' "$reps"
bench() {
	local i t s ts=()
	for ((i = 0; i < reps; i++)); do
		s=$(date +%s%N)
		"$g" "$@" >/dev/null
		ts+=($((($(date +%s%N) - s) / 1000000)))
	done
	t=$(printf '%s\n' "${ts[@]}" | sort -n | sed -n "$(((reps + 1) / 2))p")
	printf '| `gpufleet %s` | %s |\n' "$*" "$t"
}
bench ls
bench ls --json
bench show gpu-1
bench cost
bench cost --json # what GET /api/v1/cost runs
bench cost --by day
bench cost --by day --since -365d
bench cost gpu-1 --since -365d --explain
bench provider ls

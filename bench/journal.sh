#!/usr/bin/env bash
# The watcher's journal at scale. On the instance: a journal of LINES
# (1,000,000) lines, then a `status` contact (gpufleet-agent report with the
# controller's cursor at the end, as each poll runs it) and a watcher start
# (plan set), each timed, without and with D/journal.state, then contacts
# again once the watcher has rotated the journal into a segment. On the laptop:
# fleet.db after DAYS (365) of INSTANCES (200) watchers' journals, one of
# them hostile, through the real store code (bench/journaldb.c).
# Usage: bench/journal.sh [LINES INSTANCES DAYS] (DAYS 0: the instance only)
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
lines=${1:-1000000}
BUILD_DIR=$top/build bash "$top/scripts/build.sh" >/dev/null
cmake --build "$top/build" --target journaldb >/dev/null
A=$top/build/gpufleet-agent
tmp=$(mktemp -d)
D=$tmp/d
cleanup() {
	if [ -s "$D/watcher.pid" ]; then
		kill "$(cat "$D/watcher.pid")" 2>/dev/null || true
	fi
	rm -rf "$tmp"
}
trap cleanup EXIT
mkdir -p "$D"
epoch=5f0c3a9e1b2d4c6a
now=$(date +%s)
# What a long-lived autostop watcher writes: idle/busy, and now and then a
# stop of a fire id.
awk -v n="$lines" -v e="$epoch" -v t="$now" 'BEGIN {
	printf "{\"epoch\":\"%s\",\"seq\":1,\"time\":%d,\"event\":\"journal\"}\n", e, t - n
	for (i = 2; i <= n; i++)
		if (i % 1000 == 0)
			printf "{\"epoch\":\"%s\",\"seq\":%d,\"time\":%d,\"event\":\"stop_failed\",\"id\":\"a-1@%d\",\"reason\":\"still running after 3 attempts\"}\n", e, i, t - n + i, i
		else
			printf "{\"epoch\":\"%s\",\"seq\":%d,\"time\":%d,\"event\":\"%s\",\"id\":\"a-1\",\"reason\":\"gpu_util\"}\n", e, i, t - n + i, i % 2 ? "busy" : "idle"
}' >"$D/journal.jsonl"
size=$(stat -c %s "$D/journal.jsonl")
ms() { echo $(($(date +%s%N) / 1000000)); }
contact() {
	local t0 t1
	t0=$(ms)
	"$A" report --dir "$D" --nvidia-smi /bin/false \
		--journal-after "$epoch:$1" >"$tmp/out"
	t1=$(ms)
	grep -q '"journal_epoch":"'$epoch'"' "$tmp/out"
	echo $((t1 - t0))
}
echo "journal: $lines lines, $((size / 1048576)) MiB"
echo "status contact, cursor at the end, no journal.state yet: $(contact "$lines") ms"
echo "status contact, cursor at the end, with journal.state: $(contact "$lines") ms"
echo "status contact, 256 entries behind: $(contact $((lines - 256))) ms"
plan='{"version":1,"deadlines":[{"id":"d-far","at":'$((now + 86400))',"action":"stop"}],"stop":{"command":"/bin/true","kind":"stop"}}'
start() {
	local t0 t1
	t0=$(ms)
	"$A" plan set --dir "$D" --expect "$1" <<<"$plan" >"$tmp/out"
	t1=$(ms)
	grep -q '"watcher":"started"' "$tmp/out"
	kill "$(cat "$D/watcher.pid")"
	while [ -n "$(fuser "$D/watcher.pid" 2>/dev/null)" ]; do sleep 0.1; done
	echo $((t1 - t0))
}
rm -f "$D/journal.state"
echo "watcher start (plan set), no journal.state: $(start 0) ms"
echo "watcher start (plan set), with journal.state: $(start 1) ms"
# The first start rotated the journal (past 4 MiB) into one segment.
echo "journal files after the starts: $(cd "$D" && ls journal-*.jsonl journal.jsonl | tr '\n' ' ')"
echo "status contact across the segment, cursor at the end: $(contact "$lines") ms"
echo "status contact across the segment, 256 entries behind: $(contact $((lines - 256))) ms"
# DAYS 0: the instance's part only.
if [ "${3:-365}" -gt 0 ]; then
	"$top/build/journaldb" "$tmp/fleet.db" "${2:-200}" "${3:-365}" 90 \
		2>"$tmp/err" || { cat "$tmp/err" >&2; exit 1; }
fi

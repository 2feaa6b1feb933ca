#!/bin/bash
# The instance's journal rotated into segments (agent/WATCH.md "The
# journal's segments"), with a 64 KiB segment: acknowledged by the
# reports' cursors, the segments go and the journal's files stay under a
# bound while 40,000 entries are written; acknowledged by nobody, every
# entry is kept, in order. The built watcher rotates (at its "started"
# entry) after each batch of entries appended with its epoch and seqs
# while it is not running.

. "$(dirname "$0")/lib.sh"
: "${GPUFLEET_AGENT:=$GPUFLEET_SRC/build/gpufleet-agent}"
A=$GPUFLEET_AGENT
export GPUFLEET_AGENT_JOURNAL_SEGMENT_BYTES=65536 GPUFLEET_AGENT_JOURNAL_KEEP_S=0

# lines DIR: the journal's lines, segments first.
lines() {
	local f
	for f in $(find "$1" -name 'journal-*.jsonl' | sort) "$1/journal.jsonl"; do
		[ -f "$f" ] && cat "$f"
	done
}
bytes() { lines "$1" | wc -c; }

# batch DIR ACK: 2,000 entries of the journal's epoch after its last seq,
# with ACK a report whose cursor is the last of them, then the watcher,
# which starts, rotates and exits (nothing is armed).
batch() {
	local d=$1 epoch seq
	epoch=$(lines "$d" | jq -r -R 'fromjson? | .epoch' | head -1)
	seq=$(lines "$d" | jq -r -R 'fromjson? | .seq' | tail -1)
	awk -v e="$epoch" -v s="$seq" 'BEGIN {
		for (i = 1; i <= 2000; i++)
			printf "{\"epoch\":\"%s\",\"seq\":%d,\"time\":1,\"event\":\"busy\",\"id\":\"a-x\",\"reason\":\"gpu_util\"}\n", e, s + i
	}' >>"$d/journal.jsonl"
	if [ "$2" = ack ]; then
		timeout 30 "$A" report --dir "$d" --journal-after "$epoch:$((seq + 2000))" >"$T/report" ||
		    fail "report"
		expect_eq "$(jq -r '.watcher.journal | length' "$T/report")" 0 "nothing after the cursor"
	fi
	timeout 30 "$A" watch --dir "$d" --foreground >/dev/null 2>&1 || fail "watch"
}

mkdir -p "$T/acked" "$T/kept"
timeout 30 "$A" watch --dir "$T/acked" --foreground >/dev/null 2>&1
timeout 30 "$A" watch --dir "$T/kept" --foreground >/dev/null 2>&1
most=0
for i in $(seq 20); do
	batch "$T/acked" ack
	b=$(bytes "$T/acked")
	[ "$b" -gt "$most" ] && most=$b
done
checks=$((checks + 1))
# A batch is about 220 KiB: one unacknowledged segment and the new file.
[ "$most" -lt $((400 * 1024)) ] ||
    fail "the acknowledged journal grew to $most bytes (40,000 entries: 4.4 MB)"
last=$(lines "$T/acked" | jq -r -R 'fromjson? | .seq' | tail -1)
checks=$((checks + 1))
[ "$last" -gt 40000 ] || fail "the journal ends at seq $last"
expect_eq "$(lines "$T/acked" | jq -r -R 'fromjson? | .epoch' | sort -u | wc -l)" 1 "one epoch"

for i in $(seq 5); do
	batch "$T/kept" noack
done
checks=$((checks + 1))
[ "$(find "$T/kept" -name 'journal-*.jsonl' | wc -l)" -ge 4 ] || fail "not rotated"
n=$(lines "$T/kept" | jq -r -R 'fromjson? | .seq' | awk '$1 != NR { bad = 1 } END { print bad ? "gap" : NR }')
checks=$((checks + 1))
[ "$n" != gap ] && [ "$n" -gt 10000 ] || fail "unacknowledged: $n entries, every one from 1 expected"
# A report far behind reads across the segments, in order.
timeout 30 "$A" report --dir "$T/kept" --journal-after "$(lines "$T/kept" | jq -r -R 'fromjson? | .epoch' | head -1):5" >"$T/report"
expect_eq "$(jq -c '[.watcher.journal[0].seq, (.watcher.journal | length), .watcher.journal_more]' "$T/report")" \
    "[6,256,true]" "a report from an old segment"
finish

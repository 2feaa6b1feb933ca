#!/usr/bin/env bash
# A watcher whose journal the laptop is 3,000 entries behind on (about 12
# pages of 256): ONE status contact asks for page after page while the
# report says there is more, and stores them all; the cursor reaches the
# last entry. The entries are written straight into the journal, with the
# watcher's epoch and seq.
. "$(dirname "$0")/../e2e/lib.sh"
. "$(dirname "$0")/lib/watcher.sh"

fleet_up 1
run set inst-1 'stop_command=remote:shutdown'
run shutdown inst-1 --in 2h
expect_rc 0 "arm a deadline on inst-1"
wait_for 30 "inst-1's journal" has_event inst-1 armed
epoch=$(journal inst-1 'select(.event == "journal") | .epoch' | tr -d '"')
run status inst-1
expect_rc 0 "the laptop reads the journal so far"
seq=$(journal inst-1 '.seq' | sort -n | tail -1)
now=$(date +%s)
awk -v e="$epoch" -v s="$seq" -v t="$now" 'BEGIN {
	for (i = 1; i <= 3000; i++)
		printf "{\"epoch\":\"%s\",\"seq\":%d,\"time\":%d,\"event\":\"%s\",\"id\":\"a-x\",\"reason\":\"gpu_util\"}\n", e, s + i, t, i % 2 ? "busy" : "idle"
}' >>"$(rdir inst-1)/journal.jsonl"

run status inst-1
expect_rc 0 "one contact"
last=$(journal inst-1 '.seq' | sort -n | tail -1)
checks=$((checks + 1))
[ "$last" -ge $((seq + 3000)) ] || fail "the journal ends at $last"
cursor=$(sql "SELECT journal_seq FROM watcher_state")
checks=$((checks + 1))
[ "$cursor" -ge $((seq + 3000)) ] ||
    fail "after one contact the cursor is at $cursor, not past $((seq + 3000))"
expect_eq "$(sql "SELECT count(*) FROM journal WHERE id = 'a-x'")" 3000 \
    "every entry of the backlog stored, once"
finish

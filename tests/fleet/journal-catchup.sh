#!/usr/bin/env bash
# A watcher whose journal the laptop is far behind on (300,000 entries
# unread) still gets its stop_failed to the laptop within ONE contact: the
# report reads the stops past its page ahead (journal_urgent). The
# entries are written straight into the journal, with the watcher's epoch
# and seq, for the deadline gpufleet armed there.
. "$(dirname "$0")/../e2e/lib.sh"
. "$(dirname "$0")/lib/watcher.sh"

fleet_up 1
run set inst-1 'stop_command=remote:shutdown'
run shutdown inst-1 --in 2h
expect_rc 0 "arm a deadline on inst-1"
wait_for 30 "inst-1's journal" has_event inst-1 armed
id=$(journal inst-1 'select(.event == "armed") | .id' | tr -d '"' | tail -1)
epoch=$(journal inst-1 'select(.event == "journal") | .epoch' | tr -d '"')
seq=$(journal inst-1 '.seq' | sort -n | tail -1)
now=$(date +%s)
awk -v e="$epoch" -v s="$seq" -v t="$now" -v id="$id" 'BEGIN {
	for (i = 1; i <= 300000; i++)
		printf "{\"epoch\":\"%s\",\"seq\":%d,\"time\":%d,\"event\":\"%s\",\"id\":\"a-x\",\"reason\":\"gpu_util\"}\n", e, s + i, t, i % 2 ? "busy" : "idle"
	printf "{\"epoch\":\"%s\",\"seq\":%d,\"time\":%d,\"event\":\"stopping\",\"id\":\"%s\",\"command\":\"shutdown\",\"pid\":null,\"pid_start\":null}\n", e, s + 300001, t, id
	printf "{\"epoch\":\"%s\",\"seq\":%d,\"time\":%d,\"event\":\"stop_failed\",\"id\":\"%s\",\"reason\":\"the stop command failed 3 times: exit 127\"}\n", e, s + 300002, t, id
}' >>"$(rdir inst-1)/journal.jsonl"

run status inst-1
expect_rc 0 "one contact"
expect_match "$out" "inst-1  ALERT stop_failed $id at [0-9T:Z-]+: the stop did not stop it" \
    "the stop_failed behind 300,000 entries arrives in that contact"
expect_eq "$(sql "SELECT count(*) FROM journal WHERE event = 'stop_failed'")" 1 \
    "stored once"
cursor=$(sql "SELECT journal_seq FROM watcher_state")
checks=$((checks + 1))
[ "$cursor" -lt $((seq + 300000)) ] ||
    fail "the cursor ($cursor) went past the entries not read yet"
finish

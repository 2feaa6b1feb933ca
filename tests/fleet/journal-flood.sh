#!/usr/bin/env bash
# A hostile instance floods its journal: every report sends 48 entries of
# 15,000 bytes under a new epoch. fleet.db keeps at most the day's caps of
# it (2 MiB), the cursor moves past what was dropped, and `status` shows
# one journal_flood alert (one a day), escaped text and all.
. "$(dirname "$0")/../e2e/lib.sh"
export GPUFLEET_NO_PROGRESS=1
db=$XDG_DATA_HOME/gpufleet/fleet.db
sql() { sqlite3 "$db" "$@"; }

fleet_up 1
# A fake agent: the report of a machine whose journal is made again at
# each contact (a new epoch), with 48 big entries each time.
cat >"$T/flood-agent" <<'AGENT'
#!/bin/sh
[ "$1" = report ] || exit 2
n=$(cat "$HOME/.flood" 2>/dev/null || echo 0)
n=$((n + 1))
echo "$n" >"$HOME/.flood"
awk -v now="$(date +%s)" -v n="$n" 'BEGIN {
	pad = "xxxxxxxxxxxxxxx"
	for (k = 0; k < 1000; k++)
		p = p pad
	pad = p
	ep = sprintf("%016x", n)
	printf "{\"schema\":1,\"time\":%d,\"host\":{\"hostname\":\"x\",\"container_start\":%d},\"gpus\":[],", now, now - 60
	printf "\"watcher\":{\"state\":\"none\",\"pid\":null,\"current\":false,\"error\":null,\"generation\":0,\"plan\":null,\"notify\":null,\"journal_epoch\":\"%s\",\"journal\":[", ep
	for (i = 1; i <= 48; i++)
		printf "%s{\"epoch\":\"%s\",\"seq\":%d,\"time\":%d,\"event\":\"busy\",\"id\":\"a-1\",\"pad\":\"%s\"}", (i > 1 ? "," : ""), ep, i, now, pad
	printf "],\"journal_more\":false}}\n"
}'
AGENT
chmod 755 "$T/flood-agent"

day0=$(($(date +%s) / 86400))
for i in 1 2 3 4 5; do
	GPUFLEET_AGENT=$T/flood-agent run status inst-1
	expect_rc 0 "status $i of a flooding instance"
done
days=$(($(date +%s) / 86400 - day0 + 1))
bytes=$(sql "SELECT coalesce(sum(length(entry)), 0) FROM journal")
checks=$((checks + 1))
[ "$bytes" -le $((2 * 1024 * 1024)) ] && [ "$bytes" -gt $((1024 * 1024)) ] ||
    fail "the journal keeps $bytes bytes of 3.4 MiB sent (cap 2 MiB a day)"
expect_eq "$(sql "SELECT count(*) FROM journal")" \
    "$(sql "SELECT count(*) FROM journal WHERE event = 'busy'")" \
    "only the flood's entries"
flood=$(sql "SELECT count(*) FROM alert WHERE kind = 'journal_flood'")
checks=$((checks + 1))
[ "$flood" -ge 1 ] && [ "$flood" -le "$days" ] ||
    fail "$flood journal_flood alerts over $days day(s): one a day"
expect_match "$out" "inst-1  ALERT journal_flood - at [0-9T:Z-]+: it floods its journal; entries past the day's caps were dropped" \
    "status: the flood alert"
expect_eq "$(sql "SELECT journal_epoch || ':' || journal_seq FROM watcher_state")" \
    "0000000000000005:48" "the cursor moved past what was dropped"
run events inst-1
expect_contains "$out" "inst-1 floods its journal" "events: the flood"
finish

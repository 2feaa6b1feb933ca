#!/usr/bin/env bash
# An instance whose report always says there is more of its journal
# (journal_more) is asked again for the next page within one contact, but
# no more than 20 times (PROBE_JOURNAL_PAGES): `status` ends, every page
# it got is stored, and each request's cursor was the last entry of the
# page before.
. "$(dirname "$0")/../e2e/lib.sh"
export GPUFLEET_NO_PROGRESS=1
db=$XDG_DATA_HOME/gpufleet/fleet.db
sql() { sqlite3 "$db" "$@"; }

fleet_up 1
# A fake agent: each report is one more entry, and "more" always; it logs
# the cursor it was asked from.
cat >"$T/more-agent" <<'AGENT'
#!/bin/sh
[ "$1" = report ] || exit 2
cursor=-
while [ $# -gt 0 ]; do
	[ "$1" = --journal-after ] && cursor=$2
	shift
done
echo "$cursor" >>"$HOME/.more"
n=$(wc -l <"$HOME/.more")
now=$(date +%s)
printf '{"schema":1,"time":%d,"host":{"hostname":"x","container_start":%d},"gpus":[],' "$now" $((now - 60))
printf '"watcher":{"state":"none","pid":null,"current":false,"error":null,"generation":0,"plan":null,"notify":null,"journal_epoch":"00000000000000aa","journal":['
printf '{"epoch":"00000000000000aa","seq":%d,"time":%d,"event":"busy","id":"a-1"}' "$n" "$now"
printf '],"journal_more":true}}\n'
AGENT
chmod 755 "$T/more-agent"

GPUFLEET_AGENT=$T/more-agent run status inst-1
expect_rc 0 "status ends"
home=$(instance_dir inst-1)/home
expect_eq "$(wc -l <"$home/.more")" 20 "20 reports in one contact, no more"
expect_eq "$(sed -n '1p;2p;20p' "$home/.more" | tr '\n' ' ')" \
    "- 00000000000000aa:1 00000000000000aa:19 " "each after the page before"
expect_eq "$(sql "SELECT count(*) || ' ' || max(seq) FROM journal")" "20 20" \
    "every page stored"
expect_eq "$(sql "SELECT journal_epoch || ':' || journal_seq FROM watcher_state")" \
    "00000000000000aa:20" "the cursor after the last page"
finish

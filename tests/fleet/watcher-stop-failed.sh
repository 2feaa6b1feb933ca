#!/usr/bin/env bash
# A stop command that fails at once, on the sandbox fleet (agent/WATCH.md,
# "Exactly once"): the watcher journals its exit status and output, retries
# after the short backoffs instead of the confirm window, and journals
# stop_failed right after the third run fails.
. "$(dirname "$0")/../e2e/lib.sh"
. "$(dirname "$0")/lib/watcher.sh"

# A confirm window far beyond every bound below: a failed stop that waited
# for it would never get to stop_failed in time. The backoffs are small.
export GPUFLEET_STOP_CONFIRM=3600
fleet_up 1
fleet setenv inst-1 GPUFLEET_AGENT_STOP_BACKOFF=1,2
run set inst-1 'stop_command=remote:/nonexistent/shutdown'
expect_rc 0 "set a stop command that is not there"
run shutdown inst-1 --now --warn 0 --json
expect_rc 0 "shutdown inst-1 --now"
id=$(deadline_id)
wait_for 120 "stop_failed after three failed runs" \
    has_event inst-1 stop_failed ".id == \"$id\"" || show_journal inst-1

# events ID: the events of one id in the journal, on one line.
events() { journal inst-1 "select(.id == \"$1\")" | jq -r .event | tr '\n' ' '; }
expect_eq "$(events "$id")" \
    "armed firing stopping stop_result stop_retry stopping stop_result stop_retry stopping stop_result stop_failed " \
    "three runs, two retries, stop_failed"
results=$(journal inst-1 "select(.event == \"stop_result\" and .id == \"$id\")")
expect_eq "$(printf '%s\n' "$results" | jq -c '[.status, .signal, .timed_out]' | sort | uniq -c | tr -s ' ')" \
    " 3 [127,null,false]" "each run: exit 127"
expect_match "$(printf '%s\n' "$results" | jq -r .output | head -n 1)" \
    '/nonexistent/shutdown: (not found|No such file or directory)' \
    "stop_result carries the shell's error"
expect_eq "$(journal inst-1 "select(.event == \"stop_failed\" and .id == \"$id\")" | jq -r .reason)" \
    "the stop command failed 3 times: exit 127" "stop_failed names the exit status"
# Each retry waits its backoff from the failed run's stop_result (the
# journal's own times: nothing here measures the wall clock).
gaps=$(journal inst-1 "select(.id == \"$id\" and (.event == \"stop_result\" or .event == \"stop_retry\"))" |
    jq -s -r '[range(0; 2) as $i | (.[2 * $i + 1].time - .[2 * $i].time)] | map(tostring) | join(" ")')
checks=$((checks + 1))
read -r g1 g2 <<<"$gaps"
[ "${g1:-0}" -ge 1 ] && [ "${g2:-0}" -ge 2 ] ||
    fail "the retries did not wait their backoffs (1 s, 2 s): $gaps"
expect_eq "$(fstate inst-1)" ok "inst-1 still runs"
wait_for 30 "the watcher exits: nothing is armed" eval '! watcher_pid inst-1 >/dev/null'

finish

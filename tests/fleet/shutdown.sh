#!/usr/bin/env bash
# gpufleet shutdown on the sandbox fleet, the stops done by the watcher on
# the instance: a deadline that fires while no controller can reach the
# instance (the laptop closed), a stop that does not stop (stop_failed),
# release methods that need --yes, vast.ai's variables, an instance
# without a stop method, and cancel.
. "$(dirname "$0")/../e2e/lib.sh"
. "$(dirname "$0")/lib/watcher.sh"

# One sshd per instance: stopping one never disturbs the others' listeners.
fleet_up 5 --group-size 1
i1=$(instance_dir inst-1)

# --- arm everything first: the watchers work in parallel --------------------
# inst-1 is on RunPod: the default method, runpodctl with the pod's id.
run set inst-1 provider=runpod
expect_rc 0 "provider runpod"
fleet setenv inst-1 RUNPOD_POD_ID=pod-abc RUNPOD_API_KEY=rk-1
run status inst-1
expect_rc 0 "first contact with inst-1"
run shutdown inst-1 --in 20s --warn 1 --json
expect_rc 0 "shutdown inst-1 --in 20s"
id1=$(deadline_id)
expect_match "$id1" '^d-[0-9a-f]{8}$' "deadline id"
expect_match "$(printf '%s' "$out" | jq -r '.[0].method')" \
    '^remote:runpodctl stop pod \$RUNPOD_POD_ID( |$)' "RunPod's default method"
expect_eq "$(printf '%s' "$out" | jq -r '.[0].kind')" stop "RunPod: kind stop"
at1=$(jq --arg id "$id1" '.deadlines[] | select(.id == $id) | .at' "$(rdir inst-1)/plan.json")
expect_match "$at1" '^[0-9]+$' "the deadline is in the plan on the instance"
wpid=$(watcher_pid inst-1)
checks=$((checks + 1))
[ -n "$wpid" ] || fail "plan set started no watcher on inst-1"

# The laptop closes at once: nothing can reach inst-1 any more. (gpufleet
# has no resident process: the command above has exited. Checked with ssh,
# not gpufleet: a closed laptop stores nothing meanwhile.)
fleet break inst-1 refuse
closed=$(date +%s)
out=$(ssh -F "$D/ssh_config" -o ConnectTimeout=5 inst-1 true 2>&1)
expect_contains "$out" "Connection refused" "inst-1 cannot be reached"
checks=$((checks + 1))
alive "$wpid" || fail "the watcher died with the listener"

# inst-2: a stop command that exits 0 and leaves the machine up.
run set inst-2 'stop_command=remote:shutdown -h now'
expect_rc 0 "set stop_command"
: >"$(instance_dir inst-2)/fake-stop-noop"
run shutdown inst-2 --now --warn 0 --json
expect_rc 0 "shutdown inst-2 --now"
id2=$(deadline_id)

# inst-3 is on featurize, whose method releases the instance.
run set inst-3 provider=featurize
fleet setenv inst-3 UUID=feat-uuid-3
run shutdown inst-3 --in 1h
expect_rc 1 "a release without --yes is refused"
expect_contains "$out$err" "releases the instance and deletes its data; add --yes" \
    "release refusal says why"
run autostop inst-3 --idle 1h
expect_rc 1 "autostop with a release method needs allow_release"
expect_contains "$out$err" "allow_release" "autostop refusal names allow_release"
p3=$(rdir inst-3)/plan.json
checks=$((checks + 1))
if [ -e "$p3" ] && [ "$(jq '(.deadlines | length) + (if .autostop then 1 else 0 end)' "$p3")" != 0 ]; then
	fail "a refused release armed something: $(cat "$p3")"
fi
run set inst-3 allow_release=yes
run autostop inst-3 --idle 1h
expect_rc 0 "autostop with allow_release=yes"
expect_eq "$(jq -c '[.stop.kind, .stop.allow_release, (.autostop != null)]' "$p3")" \
    '["release",true,true]' "the plan allows the release"
run autostop off inst-3
expect_rc 0 "autostop off"
expect_eq "$(jq -c '.autostop' "$p3")" null "autostop off clears the policy"
run shutdown inst-3 --now --warn 0 --yes --json
expect_rc 0 "a release with --yes"

# inst-4 is on vast.ai: the stop gets the container's id and key. vast.ai
# sets them for the container; the fleet gives them to every session (the
# watcher's PID 1 fallback for sessions without them is covered by the
# agent's unit tests: PID 1 here is the test machine's).
run set inst-4 provider=vast
fleet setenv inst-4 CONTAINER_ID=c-4242 CONTAINER_API_KEY=vk-4242
run shutdown inst-4 --now --warn 0 --json
expect_rc 0 "shutdown inst-4 --now"
id4=$(deadline_id)

# inst-5 has no provider: no stop method, and it says how to set one.
run shutdown inst-5 --in 1h
expect_rc 1 "no stop method"
expect_contains "$out$err" "inst-5: no stop method" "no stop method: message"
expect_contains "$out$err" "gpufleet set inst-5 stop_command=" "no stop method: how to set one"
run shutdown inst-5 --in 1h --dry-run
expect_rc 1 "dry run without a method fails too"
run set inst-5 'stop_command=remote:shutdown'
run shutdown inst-5 --in 1h --dry-run --json
expect_rc 0 "dry run"
checks=$((checks + 1))
[ ! -e "$(rdir inst-5)/plan.json" ] || [ "$(jq '.deadlines | length' "$(rdir inst-5)/plan.json")" = 0 ] ||
    fail "--dry-run wrote a plan"
run shutdown inst-5 --in 1h --json
expect_rc 0 "shutdown inst-5 --in 1h"
id5=$(deadline_id)
run shutdown ls inst-5
expect_contains "$out" "$id5" "shutdown ls lists the armed deadline"
run shutdown cancel "$id5"
expect_rc 0 "cancel by id"
wait_for 30 "inst-5's watcher journals the cancel" has_event inst-5 cancelled ".id == \"$id5\""
run shutdown ls inst-5
checks=$((checks + 1))
case $out in *"$id5"*) fail "a cancelled deadline is still listed: $out" ;; esac

# --- inst-4: vast.ai's stop with the container's variables ------------------
wait_for 90 "inst-4 stopped by its watcher" is_state inst-4 stopped
expect_eq "$(awk -F'\t' '$1 == "vastai"' "$(instance_dir inst-4)/calls.log")" \
    "$(printf 'vastai\tstop instance c-4242 --api-key vk-4242\tc-4242\tvk-4242\t\t\t')" \
    "vastai got the container's id and key"
expect_eq "$(jcount inst-4 firing ".id == \"$id4\"")" 1 "inst-4: fired once"

# --- inst-3: released with --yes ---------------------------------------------
wait_for 90 "inst-3 released by its watcher" is_state inst-3 stopped
expect_eq "$(awk -F'\t' '$1 == "featurize" { print $2 "|" $7 }' "$(instance_dir inst-3)/calls.log")" \
    "instance release feat-uuid-3|feat-uuid-3" "featurize release with the instance's UUID"

# --- inst-2: the stop that did not stop --------------------------------------
wait_for 90 "inst-2: stop_failed after the retry" has_event inst-2 stop_failed ".id == \"$id2\"" ||
    show_journal inst-2
expect_eq "$(calls inst-2 shutdown)" 2 "the stop ran twice (one retry)"
expect_eq "$(jcount inst-2 stop_retry ".id == \"$id2\"")" 1 "one stop_retry"
expect_eq "$(jcount inst-2 firing ".id == \"$id2\"")" 1 "one firing"
expect_eq "$(fstate inst-2)" ok "inst-2 still runs"
run status inst-2
expect_match "$(printf '%s\n' "$out" | grep -A3 '^inst-2 ')" 'stop_failed' "status shows the alert"
run status inst-2 --json
expect_match "$(printf '%s' "$out" | jq -c '.[0].watcher.alerts')" 'stop_failed' \
    "status --json: the alert"
run shutdown ls inst-2
expect_contains "$out" stop_failed "shutdown ls shows the alert"
run events inst-2
expect_match "$out" "stop_failed.*$id2" "events shows stop_failed"
run events inst-2 --json
expect_eq "$(printf '%s' "$out" | jq --arg id "$id2" '[.[] | select(.event == "stop_failed" and .id == $id)] | length')" \
    1 "stop_failed stored once"

# --- inst-1: stopped on time with nobody watching ----------------------------
wait_for 120 "inst-1 stopped by its watcher while unreachable" is_state inst-1 stopped ||
    show_journal inst-1
expect_eq "$(calls inst-1 runpodctl)" 1 "one stop call"
expect_eq "$(awk -F'\t' '$1 == "runpodctl" { print $2 "|" $5 "|" $6 }' "$i1/calls.log")" \
    "stop pod pod-abc|pod-abc|rk-1" "runpodctl stop pod with the pod's id and key"
expect_eq "$(calls inst-1 wall)" 1 "one warning"
msg=$(awk -F'\t' '$1 == "wall" { print $8 }' "$i1/calls.log")
expect_contains "$msg" "gpufleet: this machine stops at " "wall message"
expect_match "$msg" '\(in [0-9]+ s\)' "a deadline under a minute away is said in seconds"
expect_contains "$msg" "[deadline $id1]; cancel with: gpufleet shutdown cancel $id1" \
    "wall message names the deadline"
stopping=$(journal inst-1 "select(.event == \"stopping\" and .id == \"$id1\") | .time")
expect_match "$stopping" '^[0-9]+$' "one stopping entry on the instance"
checks=$((checks + 1))
[ "${stopping:-0}" -ge "${at1:-1}" ] || fail "stopped at $stopping, before the deadline $at1"
checks=$((checks + 1))
[ "${stopping:-0}" -ge "$closed" ] || fail "stopped at $stopping, before the laptop closed at $closed"
expect_eq "$(jcount inst-1 firing ".id == \"$id1\" and .reason == \"deadline\"")" 1 \
    "firing journaled once, reason deadline"

# The laptop opens again: the next contact brings the journal home.
fleet start inst-1
cs2=$(cat "$i1/container_start")
run status inst-1
expect_rc 0 "inst-1 answers again"
run events inst-1 --json
evs=$(printf '%s' "$out" | jq -r --arg id "$id1" '[.[] | select(.id == $id) | .event] | join(" ")')
expect_match "$evs" '^armed warned firing stopping' "events: what happened while away ($evs)"
expect_eq "$(printf '%s' "$out" | jq --arg id "$id1" '.[] | select(.event == "stopping" and .id == $id) | .entry.time')" \
    "$stopping" "events: the entry as the instance journaled it"
run events inst-1
expect_match "$out" "inst-1 +firing +$id1" "events, the table"
run status inst-1
run events inst-1 --json
expect_eq "$(printf '%s' "$out" | jq --arg id "$id1" '[.[] | select(.id == $id and .event == "firing")] | length')" \
    1 "each entry stored once, whatever the contacts"

# The ledger ends the run at the journaled time (less the measured skew:
# one machine, so at most the second it rounds to).
run ledger inst-1 --json
lt=$(printf '%s' "$out" | jq -r --arg id "$id1" '[.[] | select(.state == "stopped" and .source == "performed" and (.note // "" | contains($id)))] | (length | tostring) + " " + (.[0].t | tostring)')
expect_match "$lt" '^1 [0-9]+$' "one performed stop in the ledger, noting the deadline ($lt)"
lt=${lt#1 }
checks=$((checks + 1))
[ "${lt:-0}" -ge $((stopping - 1)) ] && [ "${lt:-0}" -le $((stopping + 1)) ] ||
    fail "ledger stop at $lt, journal says $stopping"
ledger=$out
t0=$(printf '%s' "$out" | jq '[.[] | select(.state == "running")][0].t')
run cost inst-1 --since "$(date -u -d "@$t0" +%FT%TZ)" --until "$(date -u -d "@$cs2" +%FT%TZ)" --json
rs=$(printf '%s' "$out" | jq '.instances[0].running_s')
expect_eq "$rs" $((lt - t0)) "cost: the run ends at the watcher's stop"
[ "$rs" = $((lt - t0)) ] || printf 'ledger: %s\ncost: %s\n' "$ledger" "$out" >&2

# A fired deadline cannot be cancelled (and is not re-armed).
run shutdown cancel "$id1"
expect_rc 1 "cancel of a fired deadline"
expect_match "$out$err" "$id1.*fired|fired.*$id1" "the refusal says it fired"
run shutdown ls inst-1
expect_match "$(printf '%s\n' "$out" | grep -F "$id1")" "^ +$id1 +fired" \
    "shutdown ls: the deadline is marked fired"
expect_match "$out" "nothing armed" "shutdown ls: nothing armed"

finish

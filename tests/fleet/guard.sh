#!/usr/bin/env bash
# A budget guard stops an instance whose cost passes its cap, through its
# stop method (the watcher runs vast.ai's fake tool), and not the other
# one; events shows the guard_shutdown with the result per host.
. "$(dirname "$0")/../e2e/lib.sh"
. "$(dirname "$0")/lib/watcher.sh"

fleet_up 2 --group-size 1
for i in 1 2; do
	run set inst-$i provider=vast
	expect_rc 0 "inst-$i on vast"
	fleet setenv inst-$i CONTAINER_ID=c-$i CONTAINER_API_KEY=vk-$i
done
# inst-1 costs 100 CNY a second, inst-2 0.0001 an hour (billed per second,
# each charge rounded up: one minor unit an hour). The cap is 10 units.
run set inst-1 price=360000/h billing=second
expect_rc 0 "price inst-1"
run set inst-2 price=0.0001/h billing=second
expect_rc 0 "price inst-2"
run status
expect_rc 0 "status sees both running"
run guard add all --max-cost 0.001 --do shutdown --name cap
expect_rc 0 "guard add"

would_fire() {
	run guard check --dry-run
	case $out in *"cap would shutdown"*) return 0 ;; esac
	return 1
}
wait_for 60 "inst-1's cost passes the cap" would_fire
expect_match "$out" "^cap would shutdown: inst-1: cost [0-9.]+ CNY since added passed 0.001$" \
    "only inst-1 would be stopped"

run guard check --json
expect_rc 0 "guard check"
expect_eq "$(printf '%s' "$out" | jq -c '[.[] | [.guard, .action, .instances, .result]]')" \
    '[["cap","shutdown",["inst-1"],{"inst-1":"ok"}]]' "check stopped inst-1"

wait_for 90 "inst-1 stopped by its watcher" is_state inst-1 stopped
expect_eq "$(awk -F'\t' '$1 == "vastai" { print $2 }' "$(instance_dir inst-1)/calls.log")" \
    "stop instance c-1 --api-key vk-1" "vast.ai's stop call for inst-1"
expect_eq "$(calls inst-2 vastai)" 0 "no stop call for inst-2"
expect_eq "$(fstate inst-2)" ok "inst-2 still up"

run events --json
expect_rc 0 "events --json"
expect_eq "$(printf '%s' "$out" | jq -c '[.[] | select(.source == "gpufleet") | [.event, .name, .instances, .result]]')" \
    '[["guard_shutdown","cap",["inst-1"],{"inst-1":"ok"}]]' "events: the guard_shutdown and its result"
run events
expect_match "$out" "inst-1 +guard_shutdown +cap +inst-1: cost [0-9.]+ CNY since added passed 0.001 -> inst-1: ok" \
    "events text: why and result"
run events inst-2
checks=$((checks + 1))
case $out in *guard_shutdown*) fail "inst-2's events show the guard: $out" ;; esac
# Seen down after the guard's stop: booked stopped, its cause the guard.
run status inst-1
expect_match "$(sqlite3 "$XDG_DATA_HOME/gpufleet/fleet.db" "SELECT l.state || ' ' || l.note FROM ledger l JOIN instance i ON i.id = l.instance_id WHERE i.name = 'inst-1' ORDER BY l.t DESC, l.id DESC LIMIT 1")" \
    '^stopped stop g-[0-9a-f]{8} \(guard\)$' "the ledger books the guard's stop as the guard's"

run guard check
expect_rc 0 "second check"
expect_eq "$out" "no guard fires" "it fires once"
finish

#!/usr/bin/env bash
# The stop method fields and the shutdown/autostop/events command lines
# without a fleet: bad input is exit 2 with one error line and changes
# nothing; --dry-run contacts nothing and writes nothing; the refusals
# (no method, release without --yes) name the way out.
. "$(dirname "$0")/lib.sh"
db=$XDG_DATA_HOME/gpufleet/fleet.db
dump() { sqlite3 "$db" .dump; }

run add a1 10.0.0.1 --provider autodl
run add f1 10.0.0.2 --provider featurize
run add x1 10.0.0.3
run show a1
expect_match "$out" "stop_method: +remote:/usr/bin/shutdown \(stop\)" "autodl default"
expect_match "$out" "stop_method_from: +provider autodl" "from the provider"
run show f1 --json
expect_eq "$(printf '%s' "$out" | jq -c '.stop_method')" \
    '{"where":"remote","command":"featurize instance release $UUID","kind":"release","from":"provider featurize"}' \
    "featurize default: a release"
expect_eq "$(printf '%s' "$out" | jq -c '[.stop_command, .stop_kind, .allow_release]')" \
    '[null,null,false]' "nothing set on the instance"
run show x1
expect_match "$out" "stop_method: +none" "no default for an unknown provider"

run set x1 "stop_command=local:vastai stop instance {instance_id}" stop_kind=release allow_release=yes
expect_rc 0 "set the stop fields"
run show x1 --json
expect_eq "$(printf '%s' "$out" | jq -c '[.stop_command, .stop_kind, .allow_release, .stop_method.from]')" \
    '["local:vastai stop instance {instance_id}","release",true,"instance"]' "stored"
before=$(dump)
for kv in stop_command=shutdown stop_command=remote: "stop_command=remote:a$(printf '\t')b" \
    stop_kind=delete allow_release=1; do
	run set x1 "$kv"
	expect_rc 2 "set $kv refused"
	expect_one_error_line "set $kv"
	expect_eq "$(dump)" "$before" "db unchanged after set $kv"
done
# {instance_id} is the platform's id: without one the stop is refused,
# never run with an empty or another id.
run shutdown x1 --in 1h --dry-run --yes
expect_rc 1 "a stop command needing the platform's id, none set"
expect_contains "$err" "uses {instance_id} and it has no platform_id; set it: gpufleet set x1 platform_id=ID" \
    "names the way out"
run set x1 platform_id='bad id'
expect_rc 2 "a platform_id with a space"
run set x1 platform_id=4242
expect_rc 0 "set platform_id"
run show x1 --json
expect_eq "$(printf '%s' "$out" | jq -r .platform_id)" 4242 "platform_id stored"
run shutdown x1 --in 1h --dry-run --yes
expect_rc 0 "with the platform's id"
run set x1 platform_id= stop_command=default stop_kind=default allow_release=no
run show x1
expect_match "$out" "stop_method: +none" "back to the provider's (none)"

bad() {	# bad DESCRIPTION ARGS...: exit 2, one line, nothing written
	local what=$1
	shift
	before=$(dump)
	run "$@"
	expect_rc 2 "$what"
	expect_one_error_line "$what"
	expect_eq "$(dump)" "$before" "db unchanged: $what"
}
bad "shutdown without a time" shutdown a1
bad "shutdown with two times" shutdown a1 --now --in 5m
bad "shutdown --in 0" shutdown a1 --in 0
bad "shutdown --in garbage" shutdown a1 --in soon
bad "shutdown --at in the past" shutdown a1 --at 2020-01-01
bad "shutdown --at 25:00" shutdown a1 --at 25:00
bad "shutdown --warn -1" shutdown a1 --in 5m --warn -1
bad "shutdown --warn 1441" shutdown a1 --in 5m --warn 1441
bad "--before-must-succeed without --before" shutdown a1 --in 5m --before-must-succeed
bad "shutdown two selectors" shutdown a1 f1 --in 5m
bad "autostop without --idle" autostop a1
bad "autostop --idle below 5m" autostop a1 --idle 4m59s
bad "autostop --gpu-below 101" autostop a1 --idle 1h --gpu-below 101
bad "autostop --wait-for bad" autostop a1 --idle 1h --wait-for ssh
bad "events --limit 0" events --limit 0
bad "events --since garbage" events --since later
GPUFLEET_CHECK_INTERVAL=0 run autostop a1 --idle 1h
expect_rc 2 "a bad knob is a usage error"
GPUFLEET_MIN_IDLE=10 run autostop a1 --idle 9s
expect_rc 2 "GPUFLEET_MIN_IDLE is the minimum"

# --dry-run contacts nothing (10.0.0.x is not reachable) and writes nothing.
before=$(dump)
run shutdown a1 --in 30m --dry-run --warn 10
expect_rc 0 "dry run"
expect_match "$out" '^a1  would stop at .* \(instance clock [0-9:]{8}\)  warn 10 min  remote:/usr/bin/shutdown \(stop\)  id d-[0-9a-f]{8}$' \
    "dry run line"
run shutdown a1 --in 30m --dry-run --warn 10 --unless-busy
expect_rc 0 "dry run --unless-busy"
expect_match "$out" '^a1  would stop at .* \(instance clock [0-9:]{8}\) unless busy  warn 10 min  ' \
    "dry run line: unless busy"
run shutdown a1 --in 30m --dry-run --unless-busy --json
expect_eq "$(printf '%s' "$out" | jq -c '[.[0].unless_busy, .[0].error]')" '[true,null]' \
    "--json: unless_busy"
run shutdown a1 --in 30m --dry-run --json
expect_eq "$(printf '%s' "$out" | jq -c '.[0].unless_busy')" false "--json: unless_busy false"
run shutdown x1 --in 30m --dry-run
expect_rc 1 "no stop method"
expect_contains "$err" "x1: no stop method (provider (none) has no default); set one: gpufleet set x1 stop_command='remote:/usr/bin/shutdown'" \
    "no stop method: how to set one"
run shutdown f1 --in 30m --dry-run
expect_rc 1 "a release without --yes"
expect_contains "$err" "releases the instance and deletes its data; add --yes" \
    "release refusal"
run shutdown f1 --in 30m --dry-run --yes --json
expect_rc 0 "a release with --yes"
expect_eq "$(printf '%s' "$out" | jq -r '.[0].kind')" release "json kind"
expect_eq "$(printf '%s' "$out" | jq -r '.[0].method')" \
    'remote:featurize instance release $UUID' "json method, without the kind"
expect_eq "$(dump)" "$before" "dry runs wrote nothing"

# [provider.NAME] in the config file: over the built-in default.
mkdir -p "$XDG_CONFIG_HOME/gpufleet"
cfg=$XDG_CONFIG_HOME/gpufleet/config.ini
printf '[provider.lambda]\nstop_command = local:lambda-cli stop {name}\n[provider.autodl]\nstop_kind = release\n' >"$cfg"
run set x1 provider=lambda
run show x1
expect_match "$out" "stop_method: +local:lambda-cli stop \{name\} \(stop\)" "the config's method"
expect_match "$out" "stop_method_from: +config \[provider.lambda\]" "from the config"
run shutdown x1 --now --unless-busy --dry-run
expect_rc 1 "--unless-busy --now with a local method"
expect_contains "$err" "x1: --unless-busy is judged on the instance before the stop; with a local stop method use --in or --at" \
    "--unless-busy --now, local: says why"
run show a1
expect_match "$out" "stop_method: +remote:/usr/bin/shutdown \(release\)" "the config's kind"
printf '[provider.lambda]\nstop_command = poweroff\n' >"$cfg"
run show x1
expect_rc 4 "a bad method in the config"
expect_contains "$err" "config.ini:2: stop_command must be 'remote:COMMAND'" "names file and line"
printf '[provider.lambda]\nstop = x\n' >"$cfg"
run show x1
expect_rc 4 "an unknown key in [provider.NAME]"
expect_contains "$err" "unknown key 'stop' in [provider.lambda]" "names the key"
rm -f "$cfg"

run shutdown cancel d-0123abcd
expect_rc 1 "cancel an unknown id"
expect_contains "$err" "no instance has a deadline d-0123abcd" "unknown id"
run events
expect_rc 0 "events on an empty journal"
expect_eq "$out" "TIME  INSTANCE  EVENT  ID  DETAILS" "only the header"
run events --json
expect_eq "$out" "[]" "an empty array"

# What gpufleet last stored of a watcher is shown while the instance cannot
# be reached (nothing listens on port 1): a watcher that is down, and the
# instance's clock skew when it is over a minute (one under is not).
run add s1 127.0.0.1:1
run add s2 127.0.0.1:1
for n in s1:120 s2:30; do
	sqlite3 "$db" "INSERT INTO watcher_state (instance_id, t, state, generation, plan, skew)
	    SELECT id, 1796000000, 'down', 1, '{\"version\":1,\"generation\":1,\"deadlines\":[],\"autostop\":null}', ${n#*:}
	    FROM instance WHERE name = '${n%%:*}'"
done
run status s1,s2
expect_rc 1 "status: neither reached"
expect_match "$out" "s1  watcher down" "status shows the watcher down"
expect_match "$out" "s1  clock skew \+120s" "status shows a skew over a minute"
checks=$((checks + 1))
case $out in *"s2  clock skew"*) fail "a skew of 30 s is shown: $out" ;; esac
run shutdown ls s1
expect_contains "$out" "(as of " "shutdown ls: the stored plan of an instance not reached"
expect_match "$out" "clock skew \+120s" "shutdown ls shows the skew"
finish

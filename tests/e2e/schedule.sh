#!/usr/bin/env bash
# gpufleet schedule without a fleet, on a real SQLite file: add, ls (table
# and --json), pause, resume, rm; the default name and zone; every refused
# add is exit 2 with one error line naming the problem, and stores nothing.
. "$(dirname "$0")/lib.sh"
export TZ=UTC
db=$XDG_DATA_HOME/gpufleet/fleet.db
dump() { sqlite3 "$db" 'SELECT * FROM schedule'; }

mkdir -p "$XDG_CONFIG_HOME/gpufleet"
printf '[schedule]\ntz = Asia/Kolkata\n' >"$XDG_CONFIG_HOME/gpufleet/config.ini"

run schedule add @train --cron '0 2 * * *' --tz Asia/Shanghai --do shutdown \
    --unless-busy --warn 10 --before 'python save.py' --name nightly
expect_rc 0 "add a shutdown schedule"
expect_match "$out" '^schedule nightly added: next [0-9-]{10} 02:00 CST \([0-9-]{10} 18:00 UTC\)' \
    "add says the next run in the zone and UTC"
expect_contains "$out" "no instance to arm now" "nothing selected yet"
run schedule add all --cron '@monthly' --do rotate-keys
expect_rc 0 "add rotate-keys"
expect_contains "$out" "schedule rotate-keys-all added" "default name"
run schedule add all --cron '0 3 1 * *' --do rotate-keys
expect_contains "$out" "schedule rotate-keys-all-2 added" "default name, made unique"
run schedule add '@train,!a1' --cron '*/15 * * * *' --do exec --catchup 10m -- df -h '/data x'
expect_rc 0 "add exec"
expect_contains "$out" "schedule exec-train-a1 added" "derived from the selector"

run schedule ls
expect_rc 0 "ls"
expect_match "$(printf '%s\n' "$out" | head -1)" '^NAME +SELECTOR +CRON +TZ +ACTION +NEXT +LAST$' "ls header"
expect_match "$(printf '%s\n' "$out" | grep '^nightly ')" \
    '^nightly +@train +0 2 \* \* \* +Asia/Shanghai +shutdown +[0-9-]{10} 02:00 CST \([0-9-]{10} 18:00 UTC\) +-$' \
    "ls: nightly"
expect_match "$(printf '%s\n' "$out" | grep '^rotate-keys-all ')" \
    'Asia/Kolkata +rotate-keys +[0-9-]{4}-[0-9]{2}-01 00:00 IST' "ls: the config's zone"

run schedule ls --json
expect_rc 0 "ls --json"
expect_eq "$(printf '%s' "$out" | jq -c 'map(.name)')" \
    '["exec-train-a1","nightly","rotate-keys-all","rotate-keys-all-2"]' "by name"
expect_eq "$(printf '%s' "$out" | jq -c '.[1] | keys_unsorted')" \
    '["name","selector","cron","tz","action","command","paused","next_run","next_run_utc","last"]' \
    "the fields"
expect_eq "$(printf '%s' "$out" | jq -c '.[0] | [.selector, .action, .command, .tz, .paused, .last]')" \
    '["@train,!a1","exec","df -h /data x","Asia/Kolkata",false,null]' \
    "exec's words joined into the line for the remote shell"
expect_match "$(printf '%s' "$out" | jq -r '.[1].next_run')" \
    '^[0-9-]{10}T02:00:00\+08:00$' "next_run with the zone's offset"
expect_match "$(printf '%s' "$out" | jq -r '.[1].next_run_utc')" \
    '^[0-9-]{10}T18:00:00Z$' "next_run_utc"
expect_eq "$(sqlite3 "$db" "SELECT unless_busy, warn_minutes, before_stop, catchup_s FROM schedule WHERE name = 'nightly'")" \
    "1|10|python save.py|3600" "shutdown fields stored"
expect_eq "$(sqlite3 "$db" "SELECT catchup_s FROM schedule WHERE name = 'exec-train-a1'")" 600 "--catchup stored"
run schedule add @train --cron '@daily' --do exec --argv --name exact -- df -h '/data x' '$HOME'
expect_rc 0 "add exec --argv"
run schedule ls --json
expect_eq "$(printf '%s' "$out" | jq -c '.[] | select(.name == "exact") | .command')" \
    '["df","-h","/data x","$HOME"]' "--argv: exec's exact words, an array"
run schedule rm exact

# --- pause, resume, rm -------------------------------------------------------
run schedule pause rotate-keys-all-2
expect_rc 0 "pause"
run schedule ls --json
expect_eq "$(printf '%s' "$out" | jq -c '.[3] | [.paused, .next_run]')" '[true,null]' "paused: no next run"
run schedule ls
expect_match "$(printf '%s\n' "$out" | grep '^rotate-keys-all-2 ')" ' paused ' "ls: paused"
run schedule resume rotate-keys-all-2
expect_rc 0 "resume"
run schedule ls --json
expect_eq "$(printf '%s' "$out" | jq '.[3].paused')" false "resumed"
run schedule rm rotate-keys-all-2
expect_rc 0 "rm"
expect_eq "$(sqlite3 "$db" "SELECT count(*) FROM schedule WHERE name = 'rotate-keys-all-2'")" 0 "removed"
for v in rm pause resume run; do
	run schedule "$v" nope
	expect_rc 2 "$v of an unknown schedule"
	expect_eq "$err" "gpufleet: no schedule nope" "$v nope: message"
done
# run: recorded like a scheduled run (nothing matches @none: it fails).
run schedule add @none --cron '@yearly' --do status --name st
run schedule run st
expect_rc 1 "run of a schedule that selects nothing"
run schedule ls --json
expect_eq "$(printf '%s' "$out" | jq -c '.[] | select(.name == "st") | .last | [.manual, .state]')" \
    '[true,"failed"]' "ls --json: the last run"
run schedule ls
expect_match "$(printf '%s\n' "$out" | grep '^st ')" ' [0-9T:-]{19}Z failed' "ls: LAST"
run schedule rm st

# --- refused adds: exit 2, one line naming the problem, nothing stored -------
before=$(dump)
refuse() {
	local want=$1
	shift
	run schedule add "$@"
	expect_rc 2 "refused: $*"
	expect_one_error_line "refused: $*"
	expect_contains "$err" "$want" "refused: $*: message"
	expect_eq "$(dump)" "$before" "refused: $*: nothing stored"
}
refuse "--cron '61 * * * *': cron: minute '61' is out of range 0-59" @t --cron '61 * * * *' --do status
refuse "cron: weekday" @t --cron '0 0 * * funday' --do status
refuse "--cron '0 0 * *'" @t --cron '0 0 * *' --do status
refuse "--tz: cron: unknown time zone 'Mars/Olympus'" @t --cron '@daily' --tz Mars/Olympus --do status
refuse "--do 'reboot' is not shutdown, exec, rotate-keys, status or backup" @t --cron '@daily' --do reboot
refuse "add needs --do" @t --cron '@daily'
refuse "add needs --cron EXPR" @t --do status
refuse "add needs one SELECTOR" --cron '@daily' --do status
refuse "add takes one SELECTOR" @t @u --cron '@daily' --do status
refuse "selector '@': tag is empty" @ --cron '@daily' --do status
refuse "--do exec needs -- COMMAND..." @t --cron '@daily' --do exec
refuse "--do exec needs -- COMMAND..." @t --cron '@daily' --do exec --
refuse "-- and its words are for --do exec and backup only (--do status takes none)" @t --cron '@daily' --do status -- ls
refuse "--warn, --before and --unless-busy are for --do shutdown only" @t --cron '@daily' --do exec --warn 3 -- ls
refuse "--argv is for --do exec only" @t --cron '@daily' --do status --argv
# A word that is not UTF-8 is refused, not dropped from the stored array.
refuse "COMMAND is not UTF-8" @t --cron '@daily' --do exec --argv -- echo "$(printf 'a\377')"
refuse "a path is not UTF-8" @t --cron '@daily' --do backup -- "$(printf '~/a\377')" /tmp/bk
refuse "--warn, --before and --unless-busy are for --do shutdown only" @t --cron '@daily' --do status --unless-busy
refuse "--warn, --before and --unless-busy are for --do shutdown only" @t --cron '@daily' --do rotate-keys --before true
refuse "--warn '1441' is not a number of minutes" @t --cron '@daily' --do shutdown --warn 1441
refuse "--before must be a command of 1 to 4096 bytes" @t --cron '@daily' --do shutdown --before ''
refuse "--catchup is not for --do shutdown" @t --cron '@daily' --do shutdown --catchup 1h
refuse "--catchup" @t --cron '@daily' --do status --catchup soon
refuse "--name 'a b' must be 1 to 64 of [A-Za-z0-9._-]" @t --cron '@daily' --do status --name 'a b'
refuse "a schedule named 'nightly' already exists" @t --cron '@daily' --do status --name nightly
refuse "bad option '--bogus'" @t --cron '@daily' --do status --bogus

# The stored tags: 8 hex digits, all different.
expect_eq "$(sqlite3 "$db" "SELECT count(*) FROM schedule WHERE length(tag) = 8 AND tag NOT GLOB '*[^0-9a-f]*'")" \
    3 "tags are 8 hex digits"
expect_eq "$(sqlite3 "$db" "SELECT count(DISTINCT tag) FROM schedule")" 3 "tags differ"

# A config zone that does not exist is refused when the config is read.
printf '[schedule]\ntz = Nowhere/Land\n' >"$XDG_CONFIG_HOME/gpufleet/config.ini"
run schedule ls
expect_rc 4 "a bad [schedule] tz"
expect_contains "$err" "Nowhere/Land" "the bad zone is named"
finish

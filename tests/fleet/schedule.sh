#!/usr/bin/env bash
# Shutdown schedules on the sandbox fleet, fired by the watchers: with the
# test clock (a cron minute lasts 3 s) `schedule add @t --cron '*/2 * * * *'
# --do shutdown` arms 3 instances, then no gpufleet process runs at all and
# the watchers stop all 3; an instance tagged later is armed at its next
# `status`, and removing its tag disarms it at the next one. An occurrence
# that came while the machine was stopped from the console is skipped once
# it is started again; contacts with a slow agent rewrite no plan.
. "$(dirname "$0")/../e2e/lib.sh"
. "$(dirname "$0")/lib/watcher.sh"

fleet_up 4 --group-size 1
GPUFLEET_TEST_CRON_MINUTE=3@$(date +%s)
export GPUFLEET_TEST_CRON_MINUTE
for n in 1 2 3 4; do
	run set "inst-$n" 'stop_command=remote:shutdown -h now'
	expect_rc 0 "stop method of inst-$n"
done
for n in 1 2 3; do
	run tag "inst-$n" +t
	expect_rc 0 "tag inst-$n"
done

# no_gpufleet: no gpufleet process of this test runs (the others' may).
no_gpufleet() {
	local p
	for p in $(pgrep -x gpufleet); do
		if tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null |
		    grep -qx "XDG_DATA_HOME=$XDG_DATA_HOME"; then
			fail "gpufleet process $p runs: $(tr '\0' ' ' <"/proc/$p/cmdline")"
			return 1
		fi
	done
	return 0
}

# s_ids NAME: the schedule deadline ids in the plan on the instance's disk.
s_ids() {
	local p
	p=$(rdir "$1")/plan.json
	[ -f "$p" ] || return 0
	jq -r '.deadlines[].id | select(startswith("s-"))' "$p"
}

# --- 3 instances armed, then stopped with no gpufleet running ----------------
run schedule add @t --cron '*/2 * * * *' --do shutdown --warn 0 --name fast
expect_rc 0 "schedule add @t"
for n in 1 2 3; do
	expect_match "$(printf '%s\n' "$out" | grep "^inst-$n ")" \
	    "^inst-$n  armed: [0-9]+ occurrences" "inst-$n armed (line)"
done
expect_eq "$(printf '%s\n' "$out" | grep -c '^inst-4 ')" 0 "inst-4 is not selected"
tag=$(sql "SELECT tag FROM schedule WHERE name = 'fast'")
expect_match "$tag" '^[0-9a-f]{8}$' "the schedule's tag"
ids=$(s_ids inst-1)
expect_match "$(printf '%s\n' "$ids" | head -1)" "^s-$tag-[0-9]+$" "deadline id s-TAG-UNIXTIME"
expect_eq "$(printf '%s\n' "$ids" | wc -l)" 48 "48 occurrences armed"
first=$(printf '%s\n' "$ids" | head -1)
at=$(jq --arg id "$first" '.deadlines[] | select(.id == $id) | .at' "$(rdir inst-1)/plan.json")
checks=$((checks + 1))
d=$((at - ${first##*-}))
[ "$d" -ge -1 ] && [ "$d" -le 1 ] || fail "at $at is not the occurrence ${first##*-} plus the skew"
checks=$((checks + 1))
no_gpufleet || true
for n in 1 2 3; do
	wait_for 120 "inst-$n stopped by its watcher" is_state "inst-$n" stopped ||
	    show_journal "inst-$n"
	expect_eq "$(calls "inst-$n" shutdown)" 1 "inst-$n: one stop call"
	expect_eq "$(jcount "inst-$n" firing ".id | startswith(\"s-$tag-\")")" 1 \
	    "inst-$n: one schedule deadline fired"
done
expect_eq "$(fstate inst-4)" ok "inst-4 (not tagged) still runs"
expect_eq "$(calls inst-4 shutdown)" 0 "inst-4: no stop call"

# --- a 4th instance tagged later: armed at its next status; untagged: not ---
run schedule add @u --cron '0 0 * * *' --do shutdown --name daily \
    --unless-busy --warn 7 --before 'echo saved'
expect_rc 0 "schedule add @u (selects nothing yet)"
expect_contains "$out" "no instance to arm now" "nothing to arm yet"
tag2=$(sql "SELECT tag FROM schedule WHERE name = 'daily'")
run tag inst-4 +u
expect_eq "$(s_ids inst-4 | grep -c "^s-$tag2-")" 0 "tagging alone writes nothing"
run status inst-4
expect_rc 0 "status inst-4"
expect_eq "$(s_ids inst-4 | grep -c "^s-$tag2-")" 48 "inst-4 armed by status (48 occurrences)"
expect_eq "$(jq -c '[.deadlines[] | select(.id | startswith("s-")) | [.unless_busy, .warn_minutes, .before_stop, .action]] | unique' "$(rdir inst-4)/plan.json")" \
    '[[true,7,"echo saved","stop"]]' "the schedule's fields in each deadline"
expect_match "$(sql "SELECT plan FROM watcher_state w JOIN instance i ON i.id = w.instance_id WHERE i.name = 'inst-4'")" \
    "\"id\":\"s-$tag2-[0-9]+\"" "the stored plan has it too"
# events: the 48 armed entries of that write (read at the next contact) are
# one row in text, all of them in JSON.
run status inst-4
expect_rc 0 "status inst-4 (reads the journal)"
run events inst-4
expect_match "$out" "armed +s-$tag2-[0-9]+ \\+47 +48 deadlines armed; the first: at=" \
    "events shows one schedule arming as one row"
run events inst-4 --json
expect_eq "$(printf '%s' "$out" | jq "[.[] | select(.event == \"armed\" and (.id | startswith(\"s-$tag2-\")))] | length")" \
    48 "events --json has every armed entry"
run tag inst-4 -u
run status inst-4
expect_rc 0 "status inst-4 after the tag went"
expect_eq "$(s_ids inst-4 | wc -l)" 0 "inst-4 disarmed: the plan has no s- deadline"
run shutdown ls inst-4 --json
expect_eq "$(printf '%s' "$out" | jq '[.[0].deadlines[]? | select(.id | startswith("s-"))] | length')" \
    0 "shutdown ls reads back no s- deadline"
# events: the disarm's cancelled entries (read at a later contact) fold
# into a row too, and JSON has each of them.
cancelled48() {
	"$GPUFLEET" status inst-4 >/dev/null 2>&1
	[ "$("$GPUFLEET" events inst-4 --json | jq "[.[] | select(.event == \"cancelled\" and (.id | startswith(\"s-$tag2-\")))] | length")" = 48 ]
}
wait_for 60 "the 48 cancelled entries read back" cancelled48
run events inst-4
expect_match "$out" "cancelled +s-$tag2-[0-9]+ \\+[0-9]+ +[0-9]+ deadlines cancelled" \
    "events folds the disarm's cancelled entries"

# --- rm disarms at once ------------------------------------------------------
run tag inst-4 +u
run schedule add @u --cron '0 0 * * *' --do shutdown --name daily
expect_rc 2 "a name taken"
# exec is a contact too: it arms the instance tagged again.
run exec inst-4 -- true
expect_rc 0 "exec on inst-4"
expect_eq "$(s_ids inst-4 | grep -c "^s-$tag2-")" 48 "inst-4 armed again by exec's contact"

# --- 64 deadlines in a plan: a manual one first, the schedules' fill the rest
run shutdown inst-4 --in 1h --json
expect_rc 0 "a manual deadline on inst-4"
manual=$(deadline_id)
run schedule add @u --cron '0 12 * * *' --do shutdown --name noon
expect_rc 0 "a second schedule on @u"
expect_contains "$out" "inst-4  33 occurrences left out: the plan holds 64 deadlines" \
    "the plan is full, and it says so"
expect_eq "$(jq '.deadlines | length' "$(rdir inst-4)/plan.json")" 64 "64 deadlines armed"
expect_eq "$(jq --arg id "$manual" '[.deadlines[] | select(.id == $id)] | length' "$(rdir inst-4)/plan.json")" \
    1 "the manual deadline kept"

run schedule rm daily
expect_rc 0 "schedule rm"
expect_contains "$out" "inst-4  not armed (disarmed)" "rm reports the disarm"
expect_eq "$(s_ids inst-4 | grep -c "^s-$tag2-")" 0 "rm disarmed daily on inst-4"
expect_eq "$(s_ids inst-4 | wc -l)" 48 "the other schedule's 48 fill the room"
run schedule pause noon
expect_rc 0 "pause"
expect_contains "$out" "inst-4  not armed (disarmed)" "pause reports the disarm"
expect_eq "$(s_ids inst-4 | wc -l)" 0 "pause disarmed inst-4"
run shutdown ls inst-4
expect_contains "$out" "$manual" "the manual deadline stays through it all"

# --- stopped before an occurrence, started after: not stopped again ---------
# The user stops the machine from the platform's console before the time and
# starts it after; the first contact starts the watcher, which must skip the
# deadline whose time came while the machine was down, not fire it late.
run tag inst-4 +r
expect_rc 0 "tag inst-4 +r"
anchor=${GPUFLEET_TEST_CRON_MINUTE#*@}
# The schedule clock's minute about 15 real seconds ahead: a daily cron
# there comes back 72 real minutes later.
m=$(( (anchor + ($(date +%s) + 15 - anchor) * 20 + 59) / 60 * 60 ))
run schedule add @r --cron "$(date -u -d "@$m" +'%-M %-H') * * *" \
    --do shutdown --warn 0 --name restart
expect_rc 0 "schedule add @r"
tag3=$(sql "SELECT tag FROM schedule WHERE name = 'restart'")
first=$(s_ids inst-4 | grep "^s-$tag3-" | sort -t- -k3 -n | head -1)
occ=${first##*-}
expect_match "$first" "^s-$tag3-[0-9]+$" "the next occurrence armed on inst-4"
fleet stop inst-4
wait_for 30 "inst-4 stopped from the console" is_state inst-4 stopped
checks=$((checks + 1))
[ "$(date +%s)" -lt "${occ:-0}" ] || fail "inst-4 stopped after the occurrence $occ"
while [ "$(date +%s)" -le $((occ + 1)) ]; do sleep 0.5; done
fleet start inst-4
run status inst-4
expect_rc 0 "status after the start"
wait_for 30 "the occurrence the machine was down at is skipped" \
    has_event inst-4 skipped ".id == \"$first\"" || show_journal inst-4
expect_eq "$(journal inst-4 "select(.event == \"skipped\" and .id == \"$first\") | .reason")" \
    '"the container started after its time"' "skipped, and why"
expect_eq "$(jcount inst-4 firing ".id == \"$first\"")" 0 "it never fired"
expect_eq "$(calls inst-4 shutdown)" 0 "no stop call: the machine the user started runs on"
expect_eq "$(fstate inst-4)" ok "inst-4 runs"

# --- contacts with a slow agent rewrite nothing ------------------------------
# The agent answers, then takes 1 s or 5 s to exit (alternately): the skew is
# measured over the host's own round trip up to its report, so it stays, and
# the plan is not written again (nor "armed" journaled) for a wobble.
slow=$T/slow-agent count=$(rdir inst-4)/slow-count
cat >"$slow" <<EOS
#!/bin/sh
'$GPUFLEET_AGENT' "\$@"
rc=\$?
if [ "\$1" = report ]; then
	n=\$(cat '$count' 2>/dev/null || echo 0)
	echo \$((n + 1)) >'$count'
	if [ \$((n % 2)) -eq 0 ]; then sleep 1; else sleep 5; fi
fi
exit \$rc
EOS
gen() { jq .generation "$(rdir inst-4)/plan.json"; }
skew() { sql "SELECT skew FROM watcher_state w JOIN instance i ON i.id = w.instance_id WHERE i.name = 'inst-4'"; }
GPUFLEET_AGENT=$slow run status inst-4
expect_rc 0 "status with the slow agent (uploaded)"
gen1=$(gen)
armed1=$(jcount inst-4 armed)
GPUFLEET_AGENT=$slow run status inst-4
expect_rc 0 "status with the slow agent (5 s after its report)"
s2=$(skew)
GPUFLEET_AGENT=$slow run status inst-4
expect_rc 0 "status with the slow agent (1 s after its report)"
expect_eq "$(cat "$count")" 3 "the slow agent ran 3 reports"
expect_eq "$(gen)" "$gen1" "two contacts: the plan's generation stays"
expect_eq "$(jcount inst-4 armed)" "$armed1" "two contacts: no armed entry"
checks=$((checks + 1))
[ "${s2:-99}" -ge -2 ] && [ "${s2:-99}" -le 2 ] ||
    fail "skew $s2 measured with the 5 s wait (one machine: about 0)"

# --- a plan written by someone else between the read and the write ----------
# The agent, after its first report, writes the plan itself (as the daemon's
# top-up would): schedule add's plan set finds the generation moved, and
# contacts the host again instead of failing it.
race=$T/race-agent mark=$(rdir inst-4)/race-mark
cat >"$race" <<EOS
#!/bin/sh
'$GPUFLEET_AGENT' "\$@"
rc=\$?
if [ "\$1" = report ] && [ ! -e '$mark' ]; then
	: >'$mark'
	d='$(rdir inst-4)'
	g=\$(sed -n 's/.*"generation":\([0-9]*\).*/\1/p' "\$d/plan.json")
	'$GPUFLEET_AGENT' plan set --dir "\$d" --expect "\$g" <"\$d/plan.json" >/dev/null
fi
exit \$rc
EOS
chmod +x "$race"
gen0=$(gen)
GPUFLEET_AGENT=$race run schedule add inst-4 --cron '0 3 * * *' --do shutdown --name racing
expect_rc 0 "schedule add while another writer moves the plan"
[ -e "$mark" ] || fail "the racing agent never wrote the plan"
checks=$((checks + 1))
case $err in *"plan changed"*) fail "the moved plan was reported as a failure: $err" ;; esac
rtag=$(sql "SELECT tag FROM schedule WHERE name = 'racing'")
expect_eq "$(jq "[.deadlines[] | select(.id | startswith(\"s-$rtag-\"))] | length > 0" "$(rdir inst-4)/plan.json")" true \
    "the racing schedule is armed on inst-4"
expect_eq "$(( $(gen) >= gen0 + 2 ))" 1 "both writes happened (the racing one and the retry)"
finish

#!/usr/bin/env bash
# gpufleet guard like a user: add, ls (text and --json), rm; refused adds
# exit 2 with the reason and store nothing; `guard check` of a warn guard
# writes an action_log entry that events shows (source gpufleet), once;
# events --follow prints an entry added while it runs and exits 0 on
# SIGTERM; a shutdown guard's stop interrupted (its runner killed) is run
# again by the next check, and --follow prints its entry again with the
# result; check runs every stop when one of them fails, and judges every
# guard when one cannot be.
. "$(dirname "$0")/lib.sh"
db=$XDG_DATA_HOME/gpufleet/fleet.db
dump() { sqlite3 "$db" .dump; }

run add a1 10.0.0.1 --price 360000/h --billing second
expect_rc 0 "add a1"
run add a2 10.0.0.2 --price 1/h --currency USD
expect_rc 0 "add a2"
run mark a1 running --at -1h
expect_rc 0 "mark a1 running"

run guard add a1,a2 --max-cost 10 --per day --do warn --name daily
expect_rc 0 "guard add daily"
expect_eq "$out" "guard daily: max-cost 10.00/day on a1,a2, warn" "add says what"
run guard add @gpu --min-runway 6h --do shutdown
expect_rc 0 "guard add with the default name"
expect_eq "$out" "guard guard-1: min-runway 6h00m on @gpu, shutdown" "default name"
before=$(dump)

bad() { # bad MESSAGE ARGS...: a refused add
	local want=$1
	shift
	run guard add "$@"
	expect_rc 2 "guard add $*"
	expect_contains "$err" "$want" "guard add $*: why"
	expect_one_error_line "guard add $*"
	expect_eq "$(dump)" "$before" "nothing stored by guard add $*"
}
bad "amount '12x' is not a number" all --max-cost 12x --do warn
bad "exactly one of --max-cost and --min-runway" all --max-cost 1 \
    --min-runway 1h --do warn
bad "exactly one of --max-cost and --min-runway" all --do warn
bad "--per 'week' must be day or month" all --max-cost 1 --per week --do warn
bad "--per goes with --max-cost" all --min-runway 1h --per day --do warn
bad "--do 'stop' must be warn or shutdown" all --max-cost 1 --do stop
bad "add needs --do warn|shutdown" all --max-cost 1
bad "--min-runway: duration '5parsecs' is not like 90s" all --min-runway 5parsecs --do warn
bad "--min-runway '0s' is out of range" all --min-runway 0s --do warn
bad "a guard named 'daily' exists" all --max-cost 1 --do warn --name daily
bad "selector '@': tag is empty" @ --max-cost 1 --do warn
run guard rm nosuch
expect_rc 2 "rm of no guard"
expect_eq "$err" "gpufleet: no guard named 'nosuch'" "rm names it"
run guard ls --max-cost 1
expect_rc 2 "ls takes no add option"

run guard ls
expect_rc 0 "guard ls"
expect_match "$out" "^NAME +SELECTOR +RULE +ACTION +NOW +LAST" "ls header"
expect_match "$out" "daily +a1,a2 +max-cost 10.00/day +warn +a1 [0-9.]+ CNY today \(over\), a2 0.00 USD today +-" \
    "daily: each instance against the cap, in its currency"
expect_match "$out" "guard-1 +@gpu +min-runway 6h00m +shutdown +- +-" "runway guard, nothing selected"
run guard ls --json
expect_rc 0 "guard ls --json"
expect_eq "$(printf '%s' "$out" | jq -c '.[0] | [.name, .max_cost, .per, .action, .last_fired, [.instances[] | .name, .hit, .fired]]')" \
    '["daily",100000,"day","warn",null,["a1",true,false,"a2",false,false]]' "ls --json"

# events --follow in the background, then a check that fires.
"$GPUFLEET" events --follow --json >"$T/follow" 2>"$T/follow.err" &
fpid=$!
cleanup_hooks+=("kill $fpid 2>/dev/null")

run guard check --dry-run
expect_rc 0 "check --dry-run"
expect_match "$out" "^daily would warn: a1: cost [0-9.]+ CNY today passed 10.00$" "dry run says what"
expect_eq "$(sqlite3 "$db" 'SELECT count(*) FROM action_log') $(sqlite3 "$db" 'SELECT count(*) FROM guard_fire')" \
    "0 0" "a dry run writes nothing"

run guard check
expect_rc 0 "guard check"
expect_match "$out" "^daily warn: a1: cost [0-9.]+ CNY today passed 10.00$" "check fires"
run guard check
expect_rc 0 "second check"
expect_eq "$out" "no guard fires" "fires once per period"

run events --json
expect_rc 0 "events --json"
expect_eq "$(printf '%s' "$out" | jq -c '[.[] | [.source, .event, .name, .instances, .result]]')" \
    '[["gpufleet","guard_warn","daily",["a1"],null]]' "events shows the firing"
expect_match "$(printf '%s' "$out" | jq -r '.[0].why')" "^a1: cost [0-9.]+ CNY today passed 10.00$" "its why"
run events a2
expect_rc 0 "events a2"
expect_eq "$(printf '%s\n' "$out" | wc -l)" 1 "not shown for an instance it does not name"
run events a1
expect_match "$out" "a1 +guard_warn +daily +a1: cost" "shown for a1"

# Rows the daemon and schedules write: one naming no instance shows only
# without a SELECTOR; five names are shortened; why and result escaped.
sqlite3 "$db" "INSERT INTO action_log (t, kind, name, instances, why, result) VALUES
    (strftime('%s','now'), 'daemon_start', NULL, '[]', 'pid 42', NULL),
    (strftime('%s','now'), 'schedule_run', 'nightly', '[\"a1\",\"b\",\"c\",\"d\",\"e\"]',
     'due', '{\"a1\":\"ok\",\"b\":\"bad\\u001b[31m\"}'),
    (strftime('%s','now'), 'schedule_missed', 'hourly', '[\"a1\"]', '3 missed', 'not json')"
run events
expect_match "$out" " - +daemon_start +- +pid 42$" "daemon_start without a SELECTOR"
expect_match "$out" " a1,b,c \+2 +schedule_run +nightly +due -> a1: ok, b: bad[\\]e\[31m$" \
    "five names shortened, the result per host escaped"
run events --json
expect_eq "$(printf '%s' "$out" | jq -c '.[-1] | [.event, .why, .result]')" \
    '["schedule_missed","3 missed",null]' "an unreadable stored result is null, the row still shown"
run events a1
checks=$((checks + 1))
case $out in *daemon_start*) fail "events a1 shows daemon_start: $out" ;; esac
expect_contains "$out" "schedule_run" "events a1 shows an action naming a1"

for _ in $(seq 1 100); do
	grep -q guard_warn "$T/follow" && break
	sleep 0.2
done
for _ in $(seq 1 100); do
	grep -q schedule_missed "$T/follow" && break
	sleep 0.2
done
expect_eq "$(jq -c '[.source, .event, .name]' "$T/follow" | tr '\n' ' ')" \
    '["gpufleet","guard_warn","daily"] ["gpufleet","daemon_start",null] ["gpufleet","schedule_run","nightly"] ["gpufleet","schedule_missed","hourly"] ' \
    "events --follow printed the new rows, each once"
kill -TERM "$fpid"
wait "$fpid"
frc=$?
checks=$((checks + 1))
[ "$frc" = 0 ] || fail "events --follow exit $frc after SIGTERM, wanted 0 ($(cat "$T/follow.err"))"

# SIGTERM as soon as events --follow started, with another process holding
# the write lock: exit 0 as well.
checks=$((checks + 1))
lock_db || fail "the write lock was not taken: $(cat "$T/lock.out")"
"$GPUFLEET" events --follow >"$T/follow0" 2>&1 &
f0pid=$!
cleanup_hooks+=("kill $f0pid 2>/dev/null")
# caught_term PID: PID catches SIGTERM (bit 15 of SigCgt).
caught_term() {
	local m
	m=$(awk '$1 == "SigCgt:" { print $2 }' "/proc/$1/status" 2>/dev/null)
	[ -n "$m" ] && [ $(((0x$m >> 14) & 1)) = 1 ]
}
for _ in $(seq 1 150); do
	caught_term "$f0pid" && break
	sleep 0.2
done
checks=$((checks + 1))
caught_term "$f0pid" || fail "events --follow does not catch SIGTERM while it waits"
kill -TERM "$f0pid"
unlock_db
wait "$f0pid"
frc=$?
checks=$((checks + 1))
[ "$frc" = 0 ] || fail "events --follow exit $frc after an early SIGTERM, wanted 0 ($(cat "$T/follow0"))"

run guard add a1 --max-cost 0 --do warn --name zero
expect_rc 0 "a cap of 0 (any cost at all)"
run guard rm daily
expect_rc 0 "guard rm"
run guard ls --json
expect_eq "$(printf '%s' "$out" | jq -c '[.[] | [.name, .max_cost]]')" '[["guard-1",null],["zero",0]]' \
    "rm removed it; the cap of 0 is stored as 0"
expect_eq "$(sqlite3 "$db" 'SELECT count(*) FROM guard_fire')" 0 "its firings too"

# norm TEXT: TEXT with every cost shown as N (a1's rises by the second).
norm() { printf '%s' "$1" | sed -E 's/cost [0-9.]+ /cost N /g'; }

# A shutdown guard's stop whose runner is SIGKILLed before the result is
# stored: while the runner lives a second check leaves it alone; once it is
# gone the next check runs it again (once) and stores the result. Its
# stop (a1's local: method) blocks the first time, succeeds after.
cat >"$T/stop.sh" <<EOF
#!/bin/sh
echo \$\$ >>"$T/stop.pids"
[ -e "$T/stop.once" ] && exit 0
: >"$T/stop.once"
exec sleep 120
EOF
chmod 0700 "$T/stop.sh"
cleanup_hooks+=('[ -e "$T/stop.pids" ] && kill $(cat "$T/stop.pids") 2>/dev/null')
run set a1 "stop_command=local:$T/stop.sh"
expect_rc 0 "a1's stop method"
run guard add a1 --max-cost 10 --per day --do shutdown --name cap
expect_rc 0 "guard add cap"
"$GPUFLEET" events --follow --json >"$T/follow2" 2>&1 &
f2pid=$!
"$GPUFLEET" events a1 --follow >"$T/follow3" 2>&1 &
f3pid=$!
cleanup_hooks+=("kill $f2pid $f3pid 2>/dev/null")
# Both have printed the rows stored so far (the text one as a table) before
# the check fires: the stop's entry comes as a new row, a line.
for _ in $(seq 1 150); do
	grep -q '"hourly"' "$T/follow2" && grep -q ' hourly ' "$T/follow3" && break
	sleep 0.2
done
"$GPUFLEET" guard check >"$T/check1" 2>&1 &
cpid=$!
cleanup_hooks+=("kill -9 $cpid 2>/dev/null")
for _ in $(seq 1 150); do
	[ -e "$T/stop.once" ] && grep -q '"cap"' "$T/follow2" &&
	    grep -q 'guard_shutdown  cap' "$T/follow3" && break
	sleep 0.2
done
expect_eq "$(sqlite3 "$db" "SELECT coalesce(result, 'null') FROM action_log WHERE name = 'cap'")" \
    null "the stop runs, no result yet"
run guard check
expect_rc 0 "check while the stop runs"
expect_eq "$out" "no guard fires" "a stop whose runner lives is not run again"
{
	kill -KILL "$cpid"
	wait "$cpid"
} 2>/dev/null
run guard check
expect_rc 0 "check after the runner died"
expect_eq "$(norm "$out")" "cap shutdown (resumed: its stop was interrupted): a1: cost N CNY today passed 10.00
  a1  ok" "the interrupted stop is run again"
expect_eq "$(wc -l <"$T/stop.pids")" 2 "the stop ran twice in all"
expect_eq "$(sqlite3 "$db" "SELECT result FROM action_log WHERE name = 'cap'")" \
    '{"a1":"ok"}' "its result stored"
run guard check
expect_eq "$out" "no guard fires" "a stop with its result is not run again"

# events --follow printed the entry with no result, then once with it.
for _ in $(seq 1 100); do
	grep -q 'cap  result:' "$T/follow3" && grep -q '"a1":"ok"' "$T/follow2" && break
	sleep 0.2
done
expect_eq "$(jq -c 'select(.name == "cap") | [.event, .instances, .result]' "$T/follow2" | tr '\n' ' ')" \
    '["guard_shutdown",["a1"],null] ["guard_shutdown",["a1"],{"a1":"ok"}] ' \
    "follow --json: the stop's entry, then again with its result"
expect_eq "$(grep -c ' cap  ' "$T/follow3")" 2 "follow: two lines for the stop"
expect_match "$(grep ' cap  ' "$T/follow3" | tail -1)" \
    "^[0-9-]+ [0-9:]+  a1  guard_shutdown  cap  result: a1: ok$" "follow: the second says its result"

# guard check runs every claimed stop even when one of them cannot be
# recorded (a trigger refuses aa-first's result), and says each.
printf '#!/bin/sh\n: >"%s/stop2.ran"\n' "$T" >"$T/stop2.sh"
chmod 0700 "$T/stop2.sh"
run set a2 "stop_command=local:$T/stop2.sh"
expect_rc 0 "a2's stop method"
run mark a2 running --at -1h
expect_rc 0 "mark a2 running"
run guard add a1 --max-cost 10 --do shutdown --name aa-first
expect_rc 0 "guard add aa-first"
run guard add a2 --max-cost 0 --do shutdown --name zz-second
expect_rc 0 "guard add zz-second"
sqlite3 "$db" "CREATE TRIGGER refuse BEFORE UPDATE OF result ON action_log
    WHEN NEW.name = 'aa-first' BEGIN SELECT RAISE(ABORT, 'refused by the test'); END"
run guard check
expect_rc 3 "check with a result refused"
expect_match "$err" "^gpufleet: guard aa-first: .*refused by the test$" "the refusal named, one line"
expect_eq "$(norm "$out")" "aa-first shutdown: a1: cost N CNY since added passed 10.00
  error: ${err#gpufleet: guard aa-first: }
zz-second shutdown: a2: cost N USD since added passed 0.00
  a2  ok" "both reported"
checks=$((checks + 1))
[ -e "$T/stop2.ran" ] || fail "zz-second's stop did not run after aa-first's failed"
expect_eq "$(sqlite3 "$db" "SELECT name || ' ' || coalesce(result, 'null') FROM action_log WHERE name IN ('aa-first', 'zz-second') ORDER BY id" | tr '\n' ' ')" \
    'aa-first null zz-second {"a2":"ok"} ' "the second's result stored"
sqlite3 "$db" "DROP TRIGGER refuse"
run guard check --json
expect_rc 0 "check once the trigger is gone"
expect_eq "$(printf '%s' "$out" | jq -c '[.[] | [.guard, .resumed, .result, .error]]')" \
    '[["aa-first",true,{"a1":"ok"},null]]' "the refused one is resumed"

# A guard that cannot be judged (its stored selector broken) stops no
# other: ba-first's hit is claimed and stopped, bc-after still judged, the
# error named and the exit status its.
rm -f "$T/stop2.ran"
run guard add a2 --max-cost 0 --do shutdown --name ba-first
expect_rc 0 "guard add ba-first"
run guard add a2 --max-cost 0 --do warn --name bb-broken
expect_rc 0 "guard add bb-broken"
run guard add a2 --max-cost 0 --do warn --name bc-after
expect_rc 0 "guard add bc-after"
sqlite3 "$db" "UPDATE guard SET selector = '@' WHERE name = 'bb-broken'"
run guard check
expect_rc 2 "check with a broken guard"
expect_eq "$err" "gpufleet: guard bb-broken: selector '@': tag is empty" "the broken guard named"
expect_eq "$(norm "$out")" "ba-first shutdown: a2: cost N USD since added passed 0.00
  a2  ok
bc-after warn: a2: cost N USD since added passed 0.00" "the others judged, the stop run"
checks=$((checks + 1))
[ -e "$T/stop2.ran" ] || fail "ba-first's stop did not run"

kill -TERM "$f2pid" "$f3pid"
wait "$f2pid" "$f3pid"
finish

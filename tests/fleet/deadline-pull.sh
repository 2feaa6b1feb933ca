#!/usr/bin/env bash
# shutdown --in/--at --pull on the sandbox fleet: the deadline fires on the
# instance and its stop is held there (agent/WATCH.md "Held stops") until
# the results came home. Under a daemon the files (a nested tree, names
# with spaces and non-ASCII, 8 MB and 100 MB, what --before wrote) come
# home before the stop, which happens once; a failed pull holds a release method's stop (an event,
# status shows it) until `shutdown --release`; without a daemon a stop
# method stops after --pull-wait, a release method waits on, a garbage
# release file is ignored and journaled, and `shutdown --pull-held` does
# the daemon's work by hand; `shutdown cancel` of a held stop skips it;
# bad --pull-wait input arms nothing.
. "$(dirname "$0")/../e2e/lib.sh"
. "$(dirname "$0")/lib/watcher.sh"
. "$(dirname "$0")/lib/daemon.sh"
. "$(dirname "$0")/lib/refused.sh"

# One sshd per instance: stopping one never disturbs the others' listeners.
fleet_up 5 --group-size 1
# A target for stop_held (nothing listens: the queue is what is checked).
printf '[notify.hook]\nurl = http://127.0.0.1:9/hook\nformat = json\nevents = stop_held\n' \
    >>"$XDG_CONFIG_HOME/gpufleet/config.ini"
home_of() { printf '%s/home' "$(instance_dir "$1")"; }
for i in inst-1 inst-2 inst-3 inst-4 inst-5; do
	mkdir -p "$(home_of $i)/out/nested/deep" "$(home_of $i)/out/run 1"
	printf '%s\n' "$i" >"$(home_of $i)/out/nested/deep/a.txt"
	printf '{"loss": 0.1}\n' >"$(home_of $i)/out/run 1/métrique é.json"
	run set $i 'stop_command=remote:shutdown -h now' stop_kind=stop
	expect_rc 0 "$i: a remote stop method"
done
head -c 8M /dev/urandom >"$(home_of inst-1)/out/big.bin"
head -c 100M /dev/urandom >"$(home_of inst-1)/out/nested/huge.bin"
run set inst-2 stop_kind=release
run set inst-4 stop_kind=release
run set inst-5 stop_kind=release
run status
expect_rc 0 "status pins the host keys"

# entry NAME EVENT FIELD: FIELD of the instance's first EVENT entry.
entry() { journal "$1" "select(.event == \"$2\") | .$3" | head -n 1 | jq -r .; }
# sums DIR: the checksums of the files under DIR, by relative path.
sums() { (cd "$1" && find . -type f -print0 | sort -z | xargs -0 sha256sum); }
# hold_state NAME: the stop_hold row's state.
hold_state() { sql "SELECT h.state FROM stop_hold h JOIN instance i ON i.id = h.instance_id WHERE i.name = '$1'"; }
is_hold() { [ "$(hold_state "$1")" = "$2" ]; }

# --- bad input: exit 2, nothing armed --------------------------------------
bad "--pull-wait: duration 'soon' is not like 90s, 10m, 1h30m, 2d or 0 (units w d h m s, largest first)" \
    inst-1 --in 1h --pull "~/out:$T/res" --pull-wait soon
bad "--pull-wait needs --pull with --in or --at" inst-1 --in 1h --pull-wait 5s
bad "--pull-wait needs --pull with --in or --at" inst-1 --now --pull "~/out:$T/res" --pull-wait 5s
checks=$((checks + 1))
[ ! -e "$(rdir inst-1)/plan.json" ] || [ "$(jq '.deadlines | length' "$(rdir inst-1)/plan.json")" = 0 ] ||
    fail "a refused --pull-wait armed something: $(cat "$(rdir inst-1)/plan.json")"
expect_eq "$(sql 'SELECT count(*) FROM stop_hold')" 0 "nothing kept to pull"

# --- no daemon: a stop method stops after --pull-wait ------------------------
run shutdown inst-3 --in 2s --warn 0 --pull "~/out:$T/res" --pull-wait 5s --json
expect_rc 0 "inst-3: a held deadline"
id3=$(deadline_id)
expect_eq "$(jq -c --arg id "$id3" '.deadlines[] | select(.id == $id) | .hold' "$(rdir inst-3)/plan.json")" \
    '{"for":"pull","wait":5,"must":false}' "the plan holds the stop, and no local path"
checks=$((checks + 1))
grep -qF "$T/res" "$(rdir inst-3)/plan.json" && fail "the instance was told the local path"
# --- no daemon: a release method waits on -----------------------------------
run shutdown inst-4 --in 2s --warn 0 --yes --pull "~/out:$T/res" --pull-wait 5s --json
expect_rc 0 "inst-4: a held deadline with a release method"
id4=$(deadline_id)
expect_eq "$(jq -c --arg id "$id4" '.deadlines[] | select(.id == $id) | .hold.must' "$(rdir inst-4)/plan.json")" \
    true "a release method's hold must have the pull"
expect_eq "$(printf '%s' "$out" | jq -c '.[0].hold')" '{"wait_s":5,"must":true}' \
    "--json: the hold"

wait_for 90 "inst-3 stops after its wait" is_state inst-3 stopped || show_journal inst-3
expect_eq "$(jcount inst-3 held) $(jcount inst-3 hold_expired) $(jcount inst-3 stopping)" \
    "1 1 1" "inst-3: held, expired, stopped once"
held3=$(entry inst-3 held since)
expired3=$(entry inst-3 hold_expired time)
checks=$((checks + 1))
[ $((expired3 - held3)) -ge 5 ] || fail "inst-3's hold expired before its wait: $held3 -> $expired3"
checks=$((checks + 1))
[ "$(entry inst-3 hold_expired seq)" -lt "$(entry inst-3 stopping seq)" ] ||
    fail "inst-3 stopped before its hold expired"

wait_for 60 "inst-4 says it keeps waiting" has_event inst-4 hold_kept ".id == \"$id4\"" ||
    show_journal inst-4
expect_eq "$(entry inst-4 hold_kept reason)" "a release method waits for the results" \
    "hold_kept says why"
# A garbage release file: ignored, journaled, removed; still held.
printf 'release now please\n' >"$(rdir inst-4)/release-$id4"
wait_for 60 "inst-4 ignores a garbage release" has_event inst-4 release_ignored ".id == \"$id4\""
checks=$((checks + 1))
[ -e "$(rdir inst-4)/release-$id4" ] && fail "the garbage release file is still there"
expect_eq "$(jcount inst-4 stopping) $(fstate inst-4)" "0 ok" "inst-4 still held, not stopped"
run status inst-4
expect_contains "$out" "inst-4  stop held for pull since" "status shows the held stop"
expect_contains "$out" "($id4): waiting for the pull" "status: what it waits for"
# --pull-held does the daemon's work by hand: pull, then release.
run shutdown --pull-held inst-4
expect_rc 0 "--pull-held"
expect_contains "$out" "inst-4  held stop $id4: pulled" "--pull-held says what came"
wait_for 90 "inst-4 stops once released" is_state inst-4 stopped || show_journal inst-4
expect_eq "$(entry inst-4 released by)" pulled "released by the pull"
expect_eq "$(cat "$T/res/inst-4/out/nested/deep/a.txt" 2>&1)" inst-4 "inst-4's results are home"
expect_eq "$(hold_state inst-4)" released "the hold is over"

# --- under a daemon: the files come home, then the stop ----------------------
start_daemon
# --before runs first: what it writes comes home too. (The instance's
# user may not be this one: it gets a directory it can write to.)
chmod 1777 "$(home_of inst-1)/out/nested"
run shutdown inst-1 --in 3s --warn 0 --before "echo saved >'$(home_of inst-1)/out/nested/before.txt'" \
    --pull "~/out:$T/res" --json
expect_rc 0 "inst-1: a held deadline under a daemon, with --before"
id1=$(deadline_id)
wait_for 120 "inst-1 stopped after its pull" is_state inst-1 stopped || {
	show_journal inst-1
	cat "$LOG" >&2
}
expect_eq "$(sums "$T/res/inst-1/out")" "$(sums "$(home_of inst-1)/out")" \
    "inst-1's results are home, equal checksums"
expect_eq "$(cat "$T/res/inst-1/out/nested/before.txt" 2>&1)" saved "--before ran before the pull"
expect_eq "$(jcount inst-1 held) $(jcount inst-1 released) $(jcount inst-1 stopping) $(jcount inst-1 firing)" \
    "1 1 1 1" "held, released, stopped once"
expect_eq "$(entry inst-1 released by)" pulled "released by the daemon's pull"
checks=$((checks + 1))
[ "$(entry inst-1 released seq)" -lt "$(entry inst-1 stopping seq)" ] ||
    fail "inst-1 stopped before its release"
# Each file's local change time (its rename into place) is no later than
# the stop's start (the same machine's clock).
stop1=$(entry inst-1 stopping time)
checks=$((checks + 1))
late=$(find "$T/res/inst-1" -type f -newerct "@$((stop1 + 1))")
[ -z "$late" ] || fail "files came after the stop began: $late"
wait_for 30 "the daemon logged the pull" grep -q "held stop $id1 of inst-1: pulling" "$LOG"

# --- under a daemon: a failed pull holds a release method ------------------
run shutdown inst-2 --in 2s --warn 0 --yes --pull "~/gone:$T/res" --json
expect_rc 0 "inst-2: a held deadline, its pull will fail"
id2=$(deadline_id)
wait_for 120 "inst-2's pull fails" is_hold inst-2 failed || cat "$LOG" >&2
expect_eq "$(jcount inst-2 stopping) $(fstate inst-2)" "0 ok" "inst-2 not stopped"
expect_match "$(sql "SELECT text FROM notify_msg WHERE kind = 'stop_held' AND instance = 'inst-2'")" \
    '^gpufleet: inst-2 is held: its results did not come home, the stop waits at [0-9:]+ UTC\. Next: gpufleet shutdown --release inst-2$' \
    "a stop_held notification, once"
run events inst-2
expect_match "$out" "held.*$id2" "events: the watcher holds the stop"
expect_match "$out" "stop_hold.*pull failed" "events: the failed pull"
run status inst-2
expect_contains "$out" "inst-2  stop held for pull since" "status shows the held stop"
expect_contains "$out" "the pull failed: ~/gone: " "status: why it is held"
expect_contains "$out" "gpufleet shutdown --release inst-2" "status: what to do"
run shutdown ls inst-2
expect_contains "$out" "stop held for pull since" "shutdown ls shows the held stop"
run shutdown --release inst-2
expect_rc 0 "--release"
expect_contains "$out" "inst-2  held stop $id2: released by the user, without the pull" \
    "--release says so"
wait_for 90 "inst-2 stops once released" is_state inst-2 stopped || show_journal inst-2
expect_eq "$(entry inst-2 released by) $(jcount inst-2 stopping)" "user 1" \
    "released by the user, stopped once"
run shutdown --release inst-2
expect_rc 1 "nothing held any more"
expect_contains "$err" "inst-2: no stop is held" "--release with nothing held"

# --- a held stop cancelled: never stopped --------------------------------------
run shutdown inst-5 --in 2s --warn 0 --yes --pull "~/gone:$T/res" --json
expect_rc 0 "inst-5: a held deadline, its pull will fail"
id5=$(deadline_id)
wait_for 120 "inst-5's pull fails" is_hold inst-5 failed
run shutdown cancel "$id5"
expect_rc 0 "cancel a held stop"
expect_contains "$out" "inst-5  cancelled held stop $id5 (not stopped" "cancel says so"
wait_for 60 "inst-5 skips the stop" has_event inst-5 skipped ".id == \"$id5\""
expect_eq "$(entry inst-5 skipped reason) $(entry inst-5 released by)" \
    "cancelled while held cancelled" "skipped after a cancel"
expect_eq "$(jcount inst-5 stopping) $(fstate inst-5)" "0 ok" "inst-5 never stopped"

finish

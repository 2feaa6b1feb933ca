#!/usr/bin/env bash
# shutdown --now --pull REMOTE:LOCAL_DIR on the sandbox fleet: the results
# come home to LOCAL_DIR/NAME/ before the stop; a failed pull holds back a
# release method's stop always and any stop with --pull-must-succeed
# (exit 1, nothing stopped), and without it the stop goes on with a
# warning (exit 1); a release refused for want of --yes pulls nothing;
# --json says what came; bad --pull input is exit 2 with nothing done.
# The stops are local: methods (they run here at once with --now, so each
# leaves a file to look for); the pull is the same before a remote one.
. "$(dirname "$0")/../e2e/lib.sh"
. "$(dirname "$0")/lib/refused.sh"
export GPUFLEET_NO_PROGRESS=1

fleet_up 3
home_of() { printf '%s/home' "$(instance_dir "$1")"; }
stops=$T/stops
mkdir "$stops"
run status
expect_rc 0 "status pins the host keys"
for i in inst-1 inst-2 inst-3; do
	mkdir -p "$(home_of $i)/out/run 1"
	printf '%s\n' "$i" >"$(home_of $i)/out/run 1/metrics é.json"
	run set $i "stop_command=local:touch $stops/{name}" stop_kind=stop
	expect_rc 0 "$i: a local stop method"
done
run set inst-2 stop_kind=release
expect_rc 0 "inst-2's method releases it"

# --- bad input: exit 2, nothing pulled, nothing stopped -----------------------
bad "--pull-wait needs --pull with --in or --at" \
    inst-1 --now --pull "out:$T/res" --pull-wait 1h
bad "--pull 'out' is not REMOTE:LOCAL_DIR" inst-1 --now --pull out
bad "--pull ':$T/res' is not REMOTE:LOCAL_DIR" inst-1 --now --pull ":$T/res"
bad "--pull-must-succeed needs --pull" inst-1 --now --pull-must-succeed
bad "--pull with --before: the pull would come before CMD; run CMD with gpufleet exec first" \
    inst-1 --now --before true --pull "out:$T/res"
: >"$T/afile"
bad "--pull: $T/afile is not a directory" inst-1 --now --pull "out:$T/afile"
expect_eq "$(ls "$stops" | wc -l) $(ls "$T/res" 2>/dev/null | wc -l)" "0 0" \
    "nothing stopped, nothing pulled"

# --- a release without --yes is refused before any pull ---------------------
run shutdown inst-2 --now --warn 0 --pull "~/out:$T/res"
expect_rc 1 "a release without --yes"
expect_contains "$err" "inst-2: its stop method local:touch" "the release refusal"
checks=$((checks + 1))
[ -e "$T/res/inst-2" ] && fail "a refused stop pulled"

# --- the results come home, then the stop -----------------------------------
run shutdown 'inst-1,inst-2' --now --warn 0 --yes --pull "~/out:$T/res"
expect_rc 0 "pull then stop"
# 1 file each: "inst-N\n" is 7 bytes.
expect_eq "$(printf '%s\n' "$out" | grep ': pulled' | sed 's/ in .*//')" \
    "inst-1: pulled 1 file, 7 B
inst-2: pulled 1 file, 7 B" "a pull line per instance"
expect_contains "$out" "inst-2  stopped now with local:touch" "then the stop"
for i in inst-1 inst-2; do
	expect_eq "$(cat "$T/res/$i/out/run 1/metrics é.json" 2>&1)" "$i" "$i's results are home"
	checks=$((checks + 1))
	[ -e "$stops/$i" ] || fail "$i was not stopped"
done
rm -f "$stops"/*

# --- a failed pull holds back a release, and any stop with --pull-must-succeed
run shutdown 'inst-1,inst-2' --now --warn 0 --yes --pull "~/gone:$T/res"
expect_rc 1 "a failed pull before a release"
gone1=$(home_of inst-1)/gone gone2=$(home_of inst-2)/gone
expect_contains "$err" "inst-2: not stopped: the pull failed (a release method waits until the results are home): ~/gone: rsync: [sender] link_stat \"$gone2\" failed: No such file or directory (2)" \
    "the release is held back, with why"
expect_contains "$err" "inst-1: the pull failed, stopping anyway (no --pull-must-succeed): ~/gone: rsync: [sender] link_stat \"$gone1\" failed: No such file or directory (2)" \
    "a plain stop goes on, with a warning"
expect_eq "$(ls "$stops")" inst-1 "inst-1 stopped, inst-2 not"
rm -f "$stops"/*
run shutdown inst-3 --now --warn 0 --pull-must-succeed --json --pull "~/out:$T/res" --pull "~/gone:$T/res"
expect_rc 1 "--pull-must-succeed with a failed pull"
expect_eq "$(printf '%s' "$out" | jq -c '.[0] | [.pull.result, .pull.files, .pull.bytes, (.pull.error | startswith("~/gone: ")), (.error | startswith("not stopped: the pull failed (--pull-must-succeed): ~/gone: "))]')" \
    '["failed",1,7,true,true]' "--json: what came, why the stop is held"
checks=$((checks + 1))
[ -e "$stops/inst-3" ] && fail "inst-3 was stopped though its pull failed"
expect_eq "$(cat "$T/res/inst-3/out/run 1/metrics é.json" 2>&1)" inst-3 "the first pull came home"

# --- --dry-run: says what would come, pulls and stops nothing ---------------
run shutdown inst-3 --now --warn 0 --dry-run --pull "~/out:$T/dry"
expect_rc 0 "--dry-run"
expect_contains "$out" "inst-3: dry run: would fetch 1 file, 7 B" "what would come"
checks=$((checks + 1))
[ -e "$T/dry" ] || [ -e "$stops/inst-3" ] && fail "--dry-run pulled or stopped"

finish

#!/usr/bin/env bash
# A schedule's exec reads its command as exec does: the words stored as one
# line for the remote shell, or with --argv (and in every schedule stored
# before exec joined its words: a JSON array) each word exactly.
. "$(dirname "$0")/../e2e/lib.sh"
export GPUFLEET_NO_PROGRESS=1
db=$XDG_DATA_HOME/gpufleet/fleet.db

fleet_up 1
home=$(instance_dir inst-1)/home
last() { # last NAME: the last run's state and inst-1's result
	"$GPUFLEET" schedule ls --json |
	    jq -c --arg n "$1" '.[] | select(.name == $n) | [.last.state, .last.result["inst-1"]]'
}

run schedule add inst-1 --cron '@yearly' --do exec --name line -- \
    echo '$GPUFLEET_INSTANCE' '|' tr a-z A-Z '>$HOME/line'
expect_rc 0 "add a schedule with a shell line"
expect_eq "$(sqlite3 "$db" "SELECT command FROM schedule WHERE name = 'line'")" \
    '"echo $GPUFLEET_INSTANCE | tr a-z A-Z >$HOME/line"' "stored as one line"
run schedule run line
expect_rc 0 "run the line schedule"
expect_eq "$(cat "$home/line" 2>/dev/null)" INST-1 "the remote shell read the line"
expect_eq "$(last line)" '["ok","ok"]' "recorded ok"

run schedule add inst-1 --cron '@yearly' --do exec --argv --name exact -- \
    touch 'a  b' '$HOME'
expect_rc 0 "add a schedule with --argv"
run schedule run exact
expect_rc 0 "run the --argv schedule"
checks=$((checks + 1))
[ -e "$home/a  b" ] && [ -e "$home/\$HOME" ] || fail "--argv words did not arrive exactly: $(ls "$home")"

# A row stored before: a JSON array, exact words, as it was meant then.
run schedule add inst-1 --cron '@yearly' --do exec --name old -- true
sqlite3 "$db" "UPDATE schedule SET command = '[\"sh\",\"-c\",\"echo old >\$HOME/old\"]' WHERE name = 'old'"
run schedule run old
expect_rc 0 "run a schedule stored as an array"
expect_eq "$(cat "$home/old" 2>/dev/null)" old "an array keeps its exact words (sh -c SCRIPT)"

finish

#!/usr/bin/env bash
# gpufleet run, jobs, logs and kill on the sandbox fleet (agent/JOBS.md):
# a job outlives the SSH session that started it and a killed `logs -f`;
# exit statuses and signals as `jobs --json` shows them; `logs -f`
# follows and exits with the job's status; `kill` takes the whole process
# group (a child that ignores TERM, a grandchild); a container restart
# makes a job lost, with the reason; `run` refuses where the agent cannot
# start a job, leaving nothing behind; `jobs` with an instance that
# cannot be reached. The --then stops are in jobs-then.sh.
. "$(dirname "$0")/../e2e/lib.sh"
. "$(dirname "$0")/lib/watcher.sh"

fleet_up 3 --group-size 1
i1=$(instance_dir inst-1)

# job_field NAME JOB FIELD: FIELD of job JOB in `jobs NAME --all --json`.
job_field() {
	"$GPUFLEET" jobs "$1" --all --json 2>/dev/null |
	    jq -r --argjson j "$2" --arg n "$1" \
		".[] | select(.instance == \$n and .job == \$j) | .$3"
}
# job_ended NAME JOB: the job is no longer running (as the agent says).
job_ended() {
	local s
	s=$(job_field "$1" "$2" state)
	[ -n "$s" ] && [ "$s" != running ]
}
# started_job: the job number in `run --json` output ($out).
started_job() { printf '%s' "$out" | jq -r '.[0].job'; }

# --- a job outlives the session that started it -----------------------------
run run inst-1 --name sleeper --json -- 'echo started; sleep 30'
expect_rc 0 "run a long job"
j_sleep=$(started_job)
expect_eq "$j_sleep" 1 "the first job is number 1"
p_sleep=$(printf '%s' "$out" | jq -r '.[0].pid')
expect_match "$(printf '%s' "$out" | jq -r '.[0].fire_id')" '^j-1-[0-9]+$' \
    "the fire id names the job and its start"
checks=$((checks + 1))
alive "$p_sleep" || fail "the job died with the SSH session of run"
expect_eq "$(job_field inst-1 1 state)" running "jobs: the job runs"
expect_eq "$(job_field inst-1 1 name)" sleeper "jobs: --name kept"
run run inst-1 -- 'echo plain'
expect_rc 0 "run without --json"
expect_match "$out" '^inst-1: job 2 started \(pid [0-9]+\); logs: gpufleet logs inst-1:2$' \
    "run says how to read the log"

# --- exit statuses and signals ---------------------------------------------
run run inst-1 --json -- 'exit 7'
j_exit=$(started_job)
run run inst-1 --json -- 'kill -USR1 $$'
j_sig=$(started_job)
run run inst-1 --json -- true
j_ok=$(started_job)
wait_for 60 "job $j_exit ended" job_ended inst-1 "$j_exit"
wait_for 60 "job $j_sig ended" job_ended inst-1 "$j_sig"
wait_for 60 "job $j_ok ended" job_ended inst-1 "$j_ok"
run jobs inst-1 --json
expect_rc 0 "jobs --json"
pick() { printf '%s' "$out" | jq -c --argjson j "$1" '.[] | select(.job == $j) | [.state, .exit, .signal]'; }
expect_eq "$(pick "$j_exit")" '["failed",7,null]' "exit 7: failed, exit 7"
expect_eq "$(pick "$j_sig")" '["killed",null,"USR1"]' "a signal: killed, its name"
expect_eq "$(pick "$j_ok")" '["succeeded",0,null]' "exit 0: succeeded"
run jobs inst-1
expect_match "$(printf '%s\n' "$out" | awk -v j="$j_sig" '$1 == j')" \
    "killed +.* USR1( |$)" "the table's EXIT shows the signal"

# --- logs -f follows and exits with the job's status -------------------------
run run inst-1 --json -- 'echo one; sleep 2; printf "\033[31mred\n"; echo err >&2; exit 5'
j_log=$(started_job)
run logs "inst-1:$j_log" -f
expect_rc 5 "logs -f exits with the job's status"
expect_eq "$out" "$(printf 'one\n\033[31mred\nerr')" \
    "logs -f: the whole output, piped as it is, stderr interleaved"
expect_eq "$err" "gpufleet: inst-1:$j_log failed, exit 5" \
    "the agent's trailer read, not printed raw"
run logs inst-1 --tail 1
expect_rc 0 "logs of the newest job"
expect_eq "$out" "err" "--tail 1, the newest job"
# To a terminal the escape sequence is shown, not obeyed.
script -qec "'$GPUFLEET' logs inst-1:$j_log" /dev/null >"$T/tty" 2>&1 </dev/null
checks=$((checks + 1))
grep -qF '\e[31mred' "$T/tty" || fail "logs to a terminal did not escape ESC: $(cat -v "$T/tty")"
run logs inst-1:99
expect_rc 1 "logs of a job that does not exist"
expect_contains "$err" "inst-1: no job 99" "says which job is missing"

# As exec: the words joined into one line for sh; --argv keeps them exact.
run run inst-1 --json -- echo '$GPUFLEET_INSTANCE' 'a   b' '|' tr a-z A-Z
j_line=$(started_job)
run logs "inst-1:$j_line" -f
expect_rc 0 "a joined line ends"
expect_eq "$out" "INST-1 A B" "run: sh read the joined line (pipe, variable)"
expect_eq "$(job_field inst-1 "$j_line" name)" echo "run: named after the line's first word"
run run inst-1 --json --argv -- printf '<%s>\n' 'a   b' '$HOME' "it's" '|'
j_argv=$(started_job)
run logs "inst-1:$j_argv" -f
expect_rc 0 "an --argv job ends"
expect_eq "$out" "$(printf '<%s>\n' 'a   b' '$HOME' "it's" '|')" \
    "run --argv: each argument arrived exactly"
expect_eq "$(job_field inst-1 "$j_argv" name)" printf "run --argv: named after the first argument"

# A follower killed hard: the job goes on.
run run inst-1 --json -- 'sleep 3; echo late'
j_f=$(started_job)
"$GPUFLEET" logs "inst-1:$j_f" -f >"$T/follow" 2>&1 &
fpid=$!
sleep 1
kill -KILL "$fpid"
wait "$fpid" 2>/dev/null
wait_for 60 "the job outlives a killed logs -f" job_ended inst-1 "$j_f"
expect_eq "$(job_field inst-1 "$j_f" state)" succeeded "the job ran to its end"
run logs "inst-1:$j_f"
expect_eq "$out" late "its output is all there"

# Ctrl-C ends a follower (130); the job goes on.
run run inst-1 --json -- 'sleep 3; echo after'
j_i=$(started_job)
"$GPUFLEET" logs "inst-1:$j_i" -f >"$T/follow" 2>&1 &
fpid=$!
sleep 1
kill -INT "$fpid"
wait "$fpid"
rc=$?
expect_rc 130 "logs -f after Ctrl-C"
wait_for 60 "the job outlives the interrupted follower" job_ended inst-1 "$j_i"
expect_eq "$(job_field inst-1 "$j_i" state)" succeeded "it ran to its end"
# A silent job: the instance's job log --follow ends with the session,
# not when the job does.
run run inst-1 --json -- sleep 300
j_s=$(started_job)
"$GPUFLEET" logs "inst-1:$j_s" -f >"$T/follow" 2>&1 &
fpid=$!
# follower JOB: a job log --follow of JOB runs on inst-1.
follower() { pgrep -f -- "job log --dir $i1/[^ ]* --job $1 --follow" >/dev/null; }
wait_for 60 "the follower runs on the instance" follower "$j_s"
kill -INT "$fpid"
wait "$fpid"
wait_for 60 "no job log --follow is left on the instance" eval "! follower $j_s"
expect_eq "$(job_field inst-1 "$j_s" state)" running "the silent job goes on"
run kill "inst-1:$j_s" --grace 5s
expect_rc 0 "kill of the silent job"

# --- kill takes the whole process group -------------------------------------
# The job's shell, a child that ignores TERM, and a grandchild.
run run inst-1 --json -- 'sh -c "trap \"\" TERM; echo \$\$ >$HOME/child.pid; while :; do sleep 1; done" & sh -c "sleep 300 & echo \$! >$HOME/grand.pid; wait" & wait'
j_kill=$(started_job)
wait_for 30 "the job wrote its pids" eval "[ -s '$i1/home/child.pid' ] && [ -s '$i1/home/grand.pid' ]"
child=$(cat "$i1/home/child.pid")
grand=$(cat "$i1/home/grand.pid")
checks=$((checks + 1))
alive "$child" && alive "$grand" || fail "the job's child ($child) and grandchild ($grand) run"
run kill "inst-1:$j_kill" --grace 1s
expect_rc 0 "kill"
expect_match "$out" "^inst-1:$j_kill: TERM to its process group; still there after 1s: KILL sent; gone$" \
    "kill says TERM was not enough"
wait_for 30 "the child that ignored TERM is gone" eval "! alive $child"
wait_for 30 "the grandchild is gone" eval "! alive $grand"
wait_for 60 "the killed job ended" job_ended inst-1 "$j_kill"
expect_eq "$(job_field inst-1 "$j_kill" state)" killed "jobs: killed"
run events inst-1 --json
expect_eq "$(printf '%s' "$out" | jq -r --arg n "inst-1:$j_kill" '.[] | select(.event == "job_kill" and .name == $n) | .result["inst-1"]')" \
    "TERM to its process group; still there after 1s: KILL sent; gone" \
    "events records the kill and its outcome"
run kill "inst-1:$j_kill"
expect_eq "$rc $out" "0 inst-1:$j_kill: already ended; nothing sent" "kill of a job that ended, nothing of it left"
run kill inst-1:3 --signal NOPE
expect_rc 2 "a bad signal is a usage error"
run kill inst-1
expect_rc 2 "kill needs INSTANCE:JOB"

# --- a container restart: lost, with the reason -------------------------------
run run inst-2 --json -- sleep 300
expect_rc 0 "a job on inst-2"
j_lost=$(started_job)
fleet restart inst-2
run jobs inst-2 --json
expect_rc 0 "jobs after the restart"
expect_eq "$(printf '%s' "$out" | jq -r --argjson j "$j_lost" '.[] | select(.job == $j) | .state')" \
    lost "a restarted container's job is lost"
expect_contains "$(printf '%s' "$out" | jq -r --argjson j "$j_lost" '.[] | select(.job == $j) | .reason')" \
    "the container restarted at" "lost says what was observed"
expect_match "$(printf '%s' "$out" | jq -r --argjson j "$j_lost" '.[] | select(.job == $j) | .ended')" \
    '^[0-9]{4}-' "a lost job ended when it was found lost"
run jobs inst-2
expect_contains "$out" "inst-2:$j_lost lost: the container restarted at" \
    "the table's lost line"

# --- run refuses where no job can start, and leaves nothing --------------------
run status inst-3
r3=$(rdir inst-3)
: >"$r3/jobs"		# mkdir jobs/N fails, even as root
run run inst-3 -- true
expect_rc 1 "run where jobs/ cannot be made"
expect_match "$err" '^gpufleet: inst-3: ' "the reason, for the instance"
checks=$((checks + 1))
[ "$(printf '%s\n' "$err" | wc -l)" = 1 ] || fail "one line of reason: [$err]"
checks=$((checks + 1))
[ -f "$r3/jobs" ] || fail "run changed what it refused: $(ls -la "$r3")"
expect_eq "$(sql "SELECT count(*) FROM job j JOIN instance i ON i.id = j.instance_id WHERE i.name = 'inst-3'")" \
    0 "no job recorded"
rm -f "$r3/jobs"
# A remote_dir that cannot be made at all (under a file).
: >"$(instance_dir inst-3)/home/afile"
run set inst-3 'remote_dir=~/afile/gpufleet'
run run inst-3 -- true
expect_rc 1 "run with an unwritable remote_dir"
expect_contains "$err" "inst-3: " "names the instance"
expect_contains "$err" "afile/gpufleet" "names the remote_dir"
expect_eq "$(sql "SELECT count(*) FROM job j JOIN instance i ON i.id = j.instance_id WHERE i.name = 'inst-3'")" \
    0 "still no job recorded"
run set inst-3 'remote_dir=~/.cache/gpufleet'

# --- jobs with an instance that cannot be reached ----------------------------
fleet break inst-1 refuse
run jobs --all
expect_rc 1 "jobs with inst-1 unreachable"
expect_match "$err" '^gpufleet: inst-1: unreachable \(.*\); its jobs as of [0-9]{4}-' \
    "one line for the unreachable instance"
expect_match "$(printf '%s\n' "$out" | awk '$1 == 1 && $3 == "inst-1"')" '(running|succeeded)\*' \
    "its stored jobs are shown, marked"
run jobs --all --json
expect_eq "$(printf '%s' "$out" | jq -c '[.[] | select(.instance == "inst-1") | .stale] | unique')" \
    '[true]' "--json: stale"
expect_eq "$(printf '%s' "$out" | jq -c '[.[] | select(.instance == "inst-2") | .stale] | unique')" \
    '[false]' "--json: the others are not"
fleet heal inst-1

finish

#!/bin/bash
# The built agent's jobs in temporary directories (agent/JOBS.md): a job
# runs detached from its starter, its states (succeeded, failed, killed,
# lost), `job log --follow` and its exit status, `job kill` of a whole
# process group, log rotation, the watcher's job_started/job_ended once
# across a restart, --then stop after success and failure and its skip,
# and starts that fail leaving no D/jobs/N behind.

. "$(dirname "$0")/lib.sh"
: "${GPUFLEET_AGENT:=$GPUFLEET_SRC/build/gpufleet-agent}"
A=$GPUFLEET_AGENT

# kill_watchers: end the watchers of our directories (if ours), and what
# is left of the jobs' process groups.
kill_watchers() {
	local f p
	for f in "$T"/*/watcher.pid; do
		p=$(cat "$f" 2>/dev/null) || continue
		[ -n "$p" ] && [ "$(readlink "/proc/$p/exe" 2>/dev/null)" = "$(readlink -f "$A")" ] &&
		    kill "$p" 2>/dev/null
	done
	for f in "$T"/*/jobs/*/pid; do
		p=$(jq -r .pid "$f" 2>/dev/null) || continue
		[ -n "$p" ] && kill -KILL -- "-$p" 2>/dev/null
	done
	return 0
}
cleanup_hooks+=(kill_watchers)

# wait_until SECONDS COMMAND...: poll until COMMAND succeeds; 1 if it never does.
wait_until() {
	local n=$(($1 * 10))
	shift
	while [ $n -gt 0 ]; do
		"$@" && return 0
		sleep 0.1
		n=$((n - 1))
	done
	return 1
}

# agent ARGS... [< input]: run the agent with a bound.
agent() {
	timeout 60 "$A" "$@" >"$T/out" 2>"$T/err"
	rc=$?
	out=$(cat "$T/out")
	err=$(cat "$T/err")
}

# start DIR SPEC: job start; sets n (the job's number) from its line.
start() {
	agent job start --dir "$1" <<<"$2"
	n=$(printf '%s' "$out" | jq -r .job 2>/dev/null)
}

# field DIR N JQ: a field of job N in job ls.
field() { "$A" job ls --dir "$1" --job "$2" | jq -r ".jobs[0] | $3"; }
state_is() { [ "$(field "$1" "$2" .state)" = "$3" ]; }
# gone PID: it has exited (a zombie too: not every PID 1 reaps).
gone() { ! grep -Eqs '^State:[[:space:]]+[^[:space:]ZX]' "/proc/$1/status"; }
# entries DIR JQ-FILTER: the journal's entries that match, compact.
entries() { jq -c "select($2)" "$1/journal.jsonl"; }
journal_has() { [ -n "$(entries "$1" "$2")" ]; }
watcher_pid() { cat "$1/watcher.pid" 2>/dev/null; }

# A job runs after its starter has exited, apart from it: job start's
# stdout (a pipe) is closed by everything it leaves running, or $(...)
# would wait; the job has the starter's environment and the spec's.
D1=$T/d1
out=$(FROM_STARTER=login timeout 30 "$A" job start --dir "$D1" <<EOF
{"version":1,"name":"first","command":"while [ ! -e $T/go ]; do sleep 0.1; done; echo out \$FROM_STARTER \$FROM_SPEC; echo err >&2; echo ran >$T/ran",
 "env":[["FROM_SPEC","spec"]]}
EOF
)
rc=$?
expect_rc 0 "job start"
expect_match "$out" '^\{"job":1,"pid":[0-9]+,"started":[0-9]+,"fire_id":"j-1-[0-9]+","watcher":"started","log":"'"$D1"'/jobs/1/log"\}$' \
    "job start's line"
jpid=$(printf '%s' "$out" | jq -r .pid)
expect_eq "$(printf '%s' "$out" | jq -r .fire_id)" "j-1-$(printf '%s' "$out" | jq -r .started)" "fire id"
checks=$((checks + 1))
[ -e "$T/ran" ] && fail "the job ran before it was let go"
spid=$(jq -r .supervisor "$D1/jobs/1/pid")
expect_eq "$(ps -o ppid= -p "$spid" | tr -d ' ')" 1 "the supervisor is init's child"
expect_eq "$(ps -o sid= -p "$jpid" | tr -d ' ')" "$jpid" "the job leads its own session"
expect_eq "$(ps -o ppid= -p "$jpid" | tr -d ' ')" "$spid" "the job is the supervisor's child"
expect_eq "$(readlink /proc/"$jpid"/fd/0) $(readlink /proc/"$jpid"/fd/1) $(readlink /proc/"$jpid"/fd/2)" \
    "/dev/null $D1/jobs/1/log $D1/jobs/1/log" "the job's stdin, stdout and stderr"
expect_eq "$(for f in /proc/"$spid"/fd/*; do readlink "$f"; done | sort | tr '\n' ' ')" \
    "/dev/null /dev/null /dev/null $D1/jobs/1/log " "the supervisor holds the log and nothing of ours"
expect_eq "$(stat -c %a "$D1/jobs" "$D1/jobs/1" "$D1/jobs/1/spec.json" "$D1/jobs/1/pid" "$D1/jobs/1/log" | tr '\n' ' ')" \
    "700 700 600 600 600 " "modes"
expect_eq "$(field "$D1" 1 '[.name, .state, .exit, .then] | @json')" '["first","running",null,null]' "job ls while it runs"
touch "$T/go"
agent job log --dir "$D1" --job 1 --follow
expect_rc 0 "job log --follow of a job that succeeds"
expect_eq "$out" "$(printf 'out login spec\nerr')" "the job's output, stdout and stderr in one log"
expect_eq "$(printf '%s\n' "$err" | tail -n 1)" '{"job":1,"state":"succeeded","exit":0,"signal":null}' "the trailer"
expect_eq "$(cat "$T/ran")" ran "the job ran to its end"
expect_eq "$(field "$D1" 1 '[.state, .exit, .signal, .reason, .last_line, .log_bytes] | @json')" \
    '["succeeded",0,null,null,"err",19]' "job ls of a succeeded job"
agent job log --dir "$D1" --last --tail 1
expect_eq "$out" err "job log --tail 1"
agent job log --dir "$D1" --job 1
expect_eq "$rc $out" "0 $(printf 'out login spec\nerr')" "job log without --follow"
expect_eq "$(jq -c '[.ended > 0, .exit, .signal, .core]' "$D1/jobs/1/status")" '[true,0,null,false]' "the status file"

# Exit statuses: 3 is failed, a signal is killed; --follow exits with them.
start "$D1" '{"version":1,"command":"echo before; exit 3"}'
agent job log --dir "$D1" --job "$n" --follow
expect_eq "$rc $out" "3 before" "--follow of a job that exits 3"
expect_eq "$(printf '%s\n' "$err" | tail -n 1)" '{"job":2,"state":"failed","exit":3,"signal":null}' "failed trailer"
start "$D1" '{"version":1,"command":"echo x; kill -KILL $$"}'
agent job log --dir "$D1" --job "$n" --follow
expect_eq "$rc" 137 "--follow of a job killed by SIGKILL: 128 + 9"
expect_eq "$(printf '%s\n' "$err" | tail -n 1)" '{"job":3,"state":"killed","exit":null,"signal":"KILL"}' "killed trailer"
expect_eq "$("$A" job ls --dir "$D1" | jq -c '[.jobs[] | [.job, .state]]')" \
    '[[3,"killed"],[2,"failed"],[1,"succeeded"]]' "job ls, newest first"
mkdir "$HOME/sub"
start "$D1" '{"version":1,"command":"pwd","cwd":"~/sub"}'
agent job log --dir "$D1" --job "$n" --follow
expect_eq "$rc $out" "0 $HOME/sub" "the job runs in its cwd"
# --follow of a silent job whose reader went away (an interrupted logs
# -f: sshd closes the pipe) ends, rather than polling until the job does.
start "$D1" '{"version":1,"command":"sleep 300"}'
timeout 60 bash -c '"$1" job log --dir "$2" --job "$3" --follow | head -c 0' _ "$A" "$D1" "$n" 2>/dev/null
expect_eq "$? $(field "$D1" "$n" .state)" "0 running" "--follow ends when its stdout is closed, the job goes on"
agent job kill --dir "$D1" --job "$n" --grace 5
# created is the instance's clock, whatever the controller's says (a
# laptop's clock behind by more than 60 s made a job being started look
# never started).
t0=$(date +%s)
start "$D1" '{"version":1,"command":"true","created":1000}'
expect_rc 0 "job start with a created of long ago"
checks=$((checks + 1))
[ "$(jq -r .created "$D1/jobs/$n/spec.json")" -ge "$t0" ] ||
    fail "spec.json's created $(jq -r .created "$D1/jobs/$n/spec.json") is not the instance's clock ($t0)"
agent job ls --dir "$D1" --job 9
expect_rc 6 "job ls of no such job"
agent job log --dir "$D1" --job 9
expect_rc 6 "job log of no such job"

# job kill: the job's whole process group, a child and a grandchild.
start "$D1" '{"version":1,"command":"sleep 300 & echo $! >'"$T"'/child; (sleep 300 & echo $! >'"$T"'/grandchild); wait"}'
wait_until 30 test -s "$T/grandchild" || fail "the job did not start its children"
wait_until 30 test -s "$T/child" || fail "the job did not start its child"
agent job kill --dir "$D1" --job "$n"
expect_eq "$rc $out" "0 {\"job\":$n,\"signal\":\"TERM\",\"sent\":true,\"killed\":false,\"gone\":true}" "job kill"
checks=$((checks + 1))
gone "$(cat "$T/child")" && gone "$(cat "$T/grandchild")" || fail "the child or grandchild survived job kill"
wait_until 30 state_is "$D1" "$n" killed || fail "a killed job is not killed"
expect_eq "$(jq -c '[.signal, .grace_s]' "$D1/jobs/$n/kill")" '["TERM",10]' "the kill file"
agent job kill --dir "$D1" --job "$n"
expect_eq "$rc $out" "0 {\"job\":$n,\"signal\":\"TERM\",\"sent\":false,\"killed\":false,\"gone\":true}" "job kill of an ended job"
# One that ignores SIGTERM gets SIGKILL after the grace.
start "$D1" '{"version":1,"command":"trap \"\" TERM; sleep 300 & echo $! >'"$T"'/stubborn; wait; wait"}'
wait_until 30 test -s "$T/stubborn" || fail "the stubborn job did not start"
agent job kill --dir "$D1" --job "$n" --signal HUP --grace 30
expect_eq "$out" "{\"job\":$n,\"signal\":\"HUP\",\"sent\":true,\"killed\":false,\"gone\":true}" "SIGHUP ends what TERM does not"
start "$D1" '{"version":1,"command":"trap \"\" TERM; sleep 300 & echo $! >'"$T"'/stubborn2; wait; wait"}'
wait_until 30 test -s "$T/stubborn2" || fail "the stubborn job did not start (2)"
agent job kill --dir "$D1" --job "$n" --grace 1
expect_eq "$out" "{\"job\":$n,\"signal\":\"TERM\",\"sent\":true,\"killed\":true,\"gone\":true}" "SIGKILL after the grace"
checks=$((checks + 1))
gone "$(cat "$T/stubborn2")" || fail "the stubborn child survived SIGKILL"
wait_until 30 state_is "$D1" "$n" killed || fail "the stubborn job is not killed"
# A job whose shell exited leaving a member of its group running: it
# has ended (succeeded), but kill still reaches what is left, and the
# state stays what the journal already said.
start "$D1" '{"version":1,"command":"sleep 300 & echo $! >'"$T"'/leftover; exit 0"}'
wait_until 30 state_is "$D1" "$n" succeeded || fail "the job with a leftover did not end"
left=$(cat "$T/leftover")
expect_eq "$(ps -o pgid= -p "$left" | tr -d ' ') $(ps -o sid= -p "$left" | tr -d ' ')" \
    "$(field "$D1" "$n" .pid) $(field "$D1" "$n" .pid)" "the leftover is in the job's group and session"
agent job kill --dir "$D1" --job "$n" --grace 30
expect_eq "$rc $out" "0 {\"job\":$n,\"signal\":\"TERM\",\"sent\":true,\"killed\":false,\"gone\":true}" \
    "job kill of an ended job whose group lives on"
checks=$((checks + 1))
gone "$left" || fail "the ended job's leftover survived job kill"
expect_eq "$(field "$D1" "$n" .state)" succeeded "an ended job's state is kept"
checks=$((checks + 1))
[ -e "$D1/jobs/$n/kill" ] && fail "a kill file for a job that had ended"
agent job kill --dir "$D1" --job "$n"
expect_eq "$rc $out" "0 {\"job\":$n,\"signal\":\"TERM\",\"sent\":false,\"killed\":false,\"gone\":true}" \
    "then nothing is left to send to"
agent job kill --dir "$D1" --job "$n" --signal NOPE
expect_rc 2 "job kill with a bad signal"

# Lost: the supervisor SIGKILLed (the job then runs unwatched until it
# is gone too); a container that started after the job.
start "$D1" '{"version":1,"command":"sleep 300"}'
spid=$(jq -r .supervisor "$D1/jobs/$n/pid")
jpid=$(jq -r .pid "$D1/jobs/$n/pid")
kill -KILL "$spid"
wait_until 30 gone "$spid" || fail "the supervisor survived SIGKILL"
expect_eq "$(field "$D1" "$n" '[.state, .reason] | @json')" \
    "[\"running\",\"its supervisor (pid $spid) vanished without recording an exit status; the job's process $jpid still runs, unwatched\"]" \
    "a job whose supervisor vanished"
kill "$jpid"
wait_until 30 gone "$jpid" || fail "the unwatched job did not end"
expect_eq "$(field "$D1" "$n" '[.state, .reason, .exit] | @json')" \
    "[\"lost\",\"its supervisor (pid $spid) vanished without recording an exit status; the job's process is gone too\",null]" \
    "lost when both are gone"
agent job log --dir "$D1" --job "$n" --follow
expect_eq "$rc" 1 "--follow of a lost job exits 1"
start "$D1" '{"version":1,"command":"sleep 300"}'
started=$(jq -r .started "$D1/jobs/$n/pid")
echo $((started + 100)) >"$T/cstart"
expect_eq "$(GPUFLEET_AGENT_CONTAINER_START=$T/cstart field "$D1" "$n" '[.state, .reason] | @json')" \
    "[\"lost\",\"the container restarted at $((started + 100)); the job started at $started\"]" \
    "lost after a container restart"
echo 1000 >"$T/cstart"
expect_eq "$(GPUFLEET_AGENT_CONTAINER_START=$T/cstart field "$D1" "$n" .state)" running "an older container: running"
agent job kill --dir "$D1" --job "$n" --grace 5

# Log rotation: ~3 MiB through a 1 MiB log keeps log.1 and bounds log.
start "$D1" '{"version":1,"log_max_bytes":1048576,"command":"i=0; while [ $i -lt 48 ]; do head -c 65536 /dev/zero | tr \"\\\\0\" x; echo; i=$((i + 1)); sleep 0.15; done; echo end"}'
agent job log --dir "$D1" --job "$n" --follow
expect_eq "$rc" 0 "--follow across rotations"
expect_eq "$(printf '%s\n' "$out" | tail -n 1)" end "--follow printed to the end"
checks=$((checks + 1))
[ -s "$D1/jobs/$n/log.1" ] || fail "no log.1 after rotation"
l0=$(stat -c %s "$D1/jobs/$n/log")
l1=$(stat -c %s "$D1/jobs/$n/log.1")
checks=$((checks + 1))
[ "$l0" -lt 3145728 ] && [ "$l1" -lt 3145728 ] && [ "$l1" -gt 1048576 ] ||
    fail "log $l0 and log.1 $l1 bytes: not rotated at 1 MiB"
expect_eq "$(tr -d 'x\n' <"$D1/jobs/$n/log.1")" "" "log.1 is what the job wrote"
expect_eq "$(field "$D1" "$n" '[.last_line, .log_bytes] | @json')" "[\"end\",$((l0 + l1))]" "job ls after rotation"

# The watcher journals job_started and job_ended once per job, even when
# it is killed and restarted in between and after.
D2=$T/d2
start "$D2" '{"version":1,"command":"while [ ! -e '"$T"'/go2 ]; do sleep 0.1; done"}'
fid=$(printf '%s' "$out" | jq -r .fire_id)
wpid=$(printf '%s' "$out" | jq -r '.watcher')
expect_eq "$wpid" started "job start started a watcher"
wait_until 30 journal_has "$D2" '.event == "job_started"' || fail "no job_started"
expect_eq "$(entries "$D2" '.event == "job_started"' | jq -c 'del(.epoch, .seq, .time, .pid, .started)')" \
    '{"event":"job_started","job":1,"name":"while","then":null,"fire_id":"'"$fid"'"}' "job_started"
wpid=$(watcher_pid "$D2")
kill -KILL "$wpid"
wait_until 30 gone "$wpid" || fail "the watcher survived SIGKILL"
agent report --dir "$D2" --ensure-watcher
expect_eq "$(printf '%s' "$out" | jq -r .watcher.state)" started "--ensure-watcher with a job running"
wait_until 30 bash -c "[ \$(jq -c 'select(.event == \"started\")' '$D2/journal.jsonl' | wc -l) = 2 ]" ||
    fail "the second watcher did not start"
touch "$T/go2"
wait_until 30 journal_has "$D2" '.event == "job_ended"' || fail "no job_ended"
wait_until 30 journal_has "$D2" '.event == "exiting"' || fail "the watcher did not exit with nothing armed"
agent watch --dir "$D2"
wait_until 30 bash -c "[ \$(jq -c 'select(.event == \"exiting\")' '$D2/journal.jsonl' | wc -l) = 2 ]" ||
    fail "the third watcher did not exit"
expect_eq "$(jq -r 'select(.fire_id == "'"$fid"'") | .event' "$D2/journal.jsonl" | tr '\n' ' ')" \
    "job_started job_ended " "each once"
expect_eq "$(entries "$D2" '.event == "job_ended"' | jq -c '[.job, .state, .exit, .signal, .reason, .then, .fire_id, .last_line, .ended >= .started]')" \
    '[1,"succeeded",0,null,null,null,"'"$fid"'",null,true]' "job_ended"
# A job that ends while no watcher runs: --ensure-watcher brings one to
# journal it.
start "$D2" '{"version":1,"command":"while [ ! -e '"$T"'/go3 ]; do sleep 0.1; done"}'
fid=$(printf '%s' "$out" | jq -r .fire_id)
wait_until 30 journal_has "$D2" '.event == "job_started" and .fire_id == "'"$fid"'"' || fail "no job_started (2)"
wpid=$(watcher_pid "$D2")
kill -KILL "$wpid"
wait_until 30 gone "$wpid" || fail "the watcher survived SIGKILL (2)"
touch "$T/go3"
wait_until 30 state_is "$D2" "$n" succeeded || fail "job 2 did not end"
agent report --dir "$D2" --ensure-watcher
expect_eq "$(printf '%s' "$out" | jq -r .watcher.state)" started "--ensure-watcher with a job ended unjournaled"
wait_until 30 journal_has "$D2" '.event == "job_ended" and .fire_id == "'"$fid"'"' || fail "no job_ended (2)"

# job start sends SIGUSR1 to whoever holds D/watcher.pid's lock, which
# can be a watcher still starting. Held there (its journal a FIFO that
# nobody reads: opening it blocks), it already handles SIGUSR1 and goes
# on starting; dead of it, wait would say 138 (the kernel fixes the exit
# status of a fatal signal when it is sent, so no race decides this).
D6=$T/d6
mkdir -p "$D6"
mkfifo "$D6/journal.jsonl"
"$A" watch --foreground --dir "$D6" >/dev/null 2>&1 &
w6=$!
wait_until 60 bash -c "[ \"\$(cat '$D6/watcher.pid' 2>/dev/null)\" = $w6 ]" ||
    fail "the held watcher did not take its lock"
caught=$(awk '$1 == "SigCgt:" { print $2 }' "/proc/$w6/status")
expect_eq "$(((0x$caught >> 9) & 1))" 1 "a watcher holding its lock catches SIGUSR1 (SigCgt $caught)"
kill -USR1 "$w6"
kill -KILL "$w6"
{ wait "$w6"; } 2>/dev/null # not bash's "Killed" line
expect_eq "$?" 137 "SIGUSR1 to a starting watcher: it lived on until SIGKILL"

# --then stop: the plan's stop command runs after a success and after a
# failure; stop-if-ok after a failure is skipped, with the reason.
D3=$T/d3
cat >"$T/stop.sh" <<EOF
#!/bin/sh
echo stop >>"$T/stopped"
EOF
chmod +x "$T/stop.sh"
agent job start --dir "$D3" <<<'{"version":1,"command":"true","then":{"when":"always","action":"stop"}}'
expect_rc 5 "then stop with no stop method in the plan"
expect_eq "$err" "gpufleet-agent job: then.action stop needs a stop method in the plan ($D3/plan.json has none)" \
    "no stop method: why"
agent plan set --dir "$D3" --expect 0 <<<'{"version":1,"stop_confirm_s":3600,"stop":{"command":"'"$T"'/stop.sh","kind":"stop"}}'
expect_rc 0 "plan set with a stop method"
start "$D3" '{"version":1,"command":"echo fine","then":{"when":"always","action":"stop"}}'
f1=$(printf '%s' "$out" | jq -r .fire_id)
wait_until 60 journal_has "$D3" '.event == "stop_result" and .id == "'"$f1"'"' || fail "no stop after success"
expect_eq "$(cat "$T/stopped")" stop "the stop ran after success"
expect_eq "$(entries "$D3" '.id == "'"$f1"'" and .event == "firing"' | jq -c '[.reason, .evidence]')" \
    '["job",{"job":1,"state":"succeeded","exit":0,"signal":null}]' "firing for a job"
expect_eq "$(jq -r 'select(.id == "'"$f1"'" or .fire_id == "'"$f1"'") | .event' "$D3/journal.jsonl" | tr '\n' ' ')" \
    "job_started job_ended firing stopping stop_result " "the job's entries"
start "$D3" '{"version":1,"command":"exit 3","then":{"when":"always","action":"stop"}}'
f2=$(printf '%s' "$out" | jq -r .fire_id)
wait_until 60 journal_has "$D3" '.event == "stop_result" and .id == "'"$f2"'"' || fail "no stop after failure"
expect_eq "$(cat "$T/stopped" | tr '\n' ' ')" "stop stop " "the stop ran after failure"
start "$D3" '{"version":1,"command":"exit 3","then":{"when":"success","action":"stop"}}'
f3=$(printf '%s' "$out" | jq -r .fire_id)
wait_until 60 journal_has "$D3" '.event == "skipped" and .id == "'"$f3"'"' || fail "stop-if-ok after failure not skipped"
expect_eq "$(entries "$D3" '.id == "'"$f3"'"' | jq -c '[.event, .reason, .evidence]')" \
    '["skipped","job failed: exit 3",{"job":3,"state":"failed","exit":3,"signal":null}]' "stop-if-ok's skip"
expect_eq "$(entries "$D3" '.fire_id == "'"$f3"'" and .event == "job_ended"' | jq -r .then)" stop-if-ok "job_ended's then"
# Restarted, the watcher fires none of them again.
wpid=$(watcher_pid "$D3")
kill "$wpid"
wait_until 30 gone "$wpid" || fail "the watcher did not exit on SIGTERM"
agent watch --dir "$D3"
wait_until 30 bash -c "[ \$(jq -c 'select(.event == \"started\")' '$D3/journal.jsonl' | wc -l) = 2 ]" ||
    fail "the watcher did not start again"
wpid=$(watcher_pid "$D3")
kill "$wpid"
wait_until 30 gone "$wpid" || fail "the watcher did not exit on SIGTERM (2)"
expect_eq "$(jq -c 'select(.event == "firing" or .event == "skipped" or .event == "job_ended") | .event' "$D3/journal.jsonl" | wc -l)" \
    6 "a restarted watcher fires and journals nothing twice"
expect_eq "$(cat "$T/stopped" | tr '\n' ' ')" "stop stop " "the stop ran twice in all"

# action local: the laptop's to stop (local_due); a plan that lost its
# stop method since the job started: skipped as a deadline would be.
start "$D3" '{"version":1,"command":"true","then":{"when":"success","action":"local"}}'
f4=$(printf '%s' "$out" | jq -r .fire_id)
wait_until 60 journal_has "$D3" '.id == "'"$f4"'" and .event == "local_due"' || fail "no local_due for then local"
start "$D3" '{"version":1,"command":"while [ ! -e '"$T"'/go4 ]; do sleep 0.1; done","then":{"when":"always","action":"stop"}}'
f5=$(printf '%s' "$out" | jq -r .fire_id)
agent plan set --dir "$D3" --expect 1 <<<'{"version":1}'
expect_rc 0 "plan set without a stop method"
touch "$T/go4"
wait_until 60 journal_has "$D3" '.id == "'"$f5"'" and .event == "skipped"' || fail "no skip without a stop method"
expect_eq "$(jq -r 'select(.id == "'"$f5"'") | [.event, .reason] | @tsv' "$D3/journal.jsonl" | tr '\n\t' '  ')" \
    "firing job skipped no stop method " "a job's stop without a stop method"
expect_eq "$(cat "$T/stopped" | tr '\n' ' ')" "stop stop " "no stop ran for them"

# wait_for jobs: a running job makes autostop busy (reason jobs).
D5=$T/d5
mkdir "$T/gpus"
echo "0, GPU-4f1e9a2c-7b3d-5e8f-9c2a-3cecef5a0d11, NVIDIA A100-SXM4-80GB, 0, 0, 10, 81920, 30, 60.00, 400.00, 535.104.05" \
    >"$T/gpus/query-gpu.csv"
GPUFLEET_GPU_FIXTURES=$T/gpus agent plan set --dir "$D5" --expect 0 <<<'{"version":1,"check_interval_s":1,
 "autostop":{"id":"a-1","idle_s":3600,"wait_for":["jobs"],"nvidia_smi":"'"$GPUFLEET_SRC"'/tests/data/agent/fake-nvidia-smi"}}'
expect_match "$out" '"watcher":"started"' "an autostop plan"
wait_until 30 journal_has "$D5" '.event == "idle"' || fail "autostop never idle"
start "$D5" '{"version":1,"command":"while [ ! -e '"$T"'/go5 ]; do sleep 0.1; done"}'
expect_eq "$(printf '%s' "$out" | jq -r .watcher)" running "job start finds the watcher running"
wait_until 30 journal_has "$D5" '.event == "busy"' || fail "a running job is not busy"
expect_eq "$(entries "$D5" '.event == "busy"' | jq -r .reason)" jobs "busy's reason"
touch "$T/go5"
wait_until 30 bash -c "[ \$(jq -c 'select(.event == \"idle\")' '$D5/journal.jsonl' | wc -l) = 2 ]" ||
    fail "not idle again after the job"

# A job never started (its starter killed before the pid file): lost,
# its start said as its creation, a time the controller can take.
D7=$T/d7
mkdir -p "$D7/jobs/1"
created=$(($(date +%s) - 1000))
printf '{"version":1,"command":"true","created":%s}\n' "$created" >"$D7/jobs/1/spec.json"
expect_eq "$(field "$D7" 1 '[.state, .started, .ended, .fire_id, .reason] | @json')" \
    "[\"lost\",$created,null,\"j-1-$created\",\"it was never started (no pid file)\"]" "job ls of a job never started"

# Starts that fail leave no D/jobs/N behind.
D4=$T/d4
agent job start --dir "$D4" <<<'{"version":1,"command":"true","then":{"when":"sometimes","action":"stop"}}'
expect_eq "$rc $err" '4 gpufleet-agent job: invalid spec: then.when: must be "always" or "success"' "a bad spec"
agent job start --dir "$D4" <<<'{"version":1,"command":"true","cwd":"~/nowhere"}'
expect_eq "$rc $err" "5 gpufleet-agent job: cwd $HOME/nowhere: No such file or directory" "a missing cwd"
mkdir -p "$D4/watcher.pid"
agent job start --dir "$D4" <<<'{"version":1,"command":"touch '"$T"'/never"}'
expect_rc 5 "a watcher that cannot start"
expect_match "$err" '^gpufleet-agent job: the watcher said: failed: cannot open .*watcher.pid: Is a directory$' "why"
expect_eq "$(ls -A "$D4/jobs" | wc -l)" 0 "no half-started job"
touch "$T/afile"
agent job start --dir "$T/afile/d" <<<'{"version":1,"command":"true"}'
expect_match "$rc $err" '^5 gpufleet-agent job: cannot create .*afile/d: Not a directory$' "an unwritable dir"
rmdir "$D4/watcher.pid"
rm -r "$D4/jobs"
touch "$D4/jobs"
agent job start --dir "$D4" <<<'{"version":1,"command":"true"}'
expect_rc 5 "D/jobs not a directory"
agent job start --dir "$D4" <<<'nonsense'
expect_rc 4 "not JSON"
agent job frob
expect_rc 2 "an unknown subcommand"
checks=$((checks + 1))
[ -e "$T/never" ] && fail "a job whose start failed ran"

finish

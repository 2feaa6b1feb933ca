#!/bin/bash
# The built agent's watcher in a temporary directory (agent/WATCH.md): plan
# set's compare-and-swap, `watch` daemonizing and a second start finding it,
# a deadline that fires once with a fake stop command through its retry and
# stop_failed, the report's journal after a cursor, the watcher exiting
# when nothing is armed, and --ensure-watcher bringing one back.

. "$(dirname "$0")/lib.sh"
: "${GPUFLEET_AGENT:=$GPUFLEET_SRC/build/gpufleet-agent}"
A=$GPUFLEET_AGENT
W=$T/remote
stopped=$T/stopped

# kill_watcher: end the watcher named in the pid file, if it is ours.
kill_watcher() {
	local p
	p=$(cat "$W/watcher.pid" 2>/dev/null) || return 0
	[ -n "$p" ] && [ "$(readlink "/proc/$p/exe" 2>/dev/null)" = "$(readlink -f "$A")" ] &&
	    kill "$p" 2>/dev/null
	return 0
}
cleanup_hooks+=(kill_watcher 'touch "$T/release"') # the slow stop below ends

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

# agent ARGS... [< input]: run the agent with a bound, as run does.
agent() {
	timeout 30 "$A" "$@" >"$T/out" 2>"$T/err"
	rc=$?
	out=$(cat "$T/out")
	err=$(cat "$T/err")
}

# events [ID]: the journal's events (of one id), one a line.
events() {
	jq -r --arg id "${1-}" 'select($id == "" or .id == $id) | .event' \
	    "$W/journal.jsonl"
}
journal_has() { events "$1" | grep -qx "$2"; }
# gone PID: it has exited (a zombie too: not every PID 1 reaps).
gone() { ! grep -Eqs '^State:[[:space:]]+[^[:space:]ZX]' "/proc/$1/status"; }

cat >"$T/stop.sh" <<EOF
#!/bin/sh
echo "stop \$CONTAINER_ID" >>"$stopped"
echo stop-output
EOF
chmod +x "$T/stop.sh"
export CONTAINER_ID=e2e
now=$(date +%s)
plan1='{"version":1,"deadlines":[{"id":"d-far","at":'$((now + 3600))',"action":"stop"}],
 "stop":{"command":"'$T/stop.sh'","kind":"stop"}}'

# Compare-and-swap: 0 -> generation 1 and a watcher; 0 again is refused.
agent plan set --dir "$W" --expect 0 <<<"$plan1"
expect_rc 0 "plan set --expect 0"
expect_match "$out" '^\{"generation":1,"watcher":"started","pid":[0-9]+\}$' "plan set line"
pid=$(printf '%s' "$out" | jq -r .pid)
agent plan set --dir "$W" --expect 0 <<<"$plan1"
expect_rc 3 "plan set with a stale generation"
expect_eq "$out" '{"error":"generation","generation":1}' "generation moved line"
agent plan set --dir "$W" --expect 1 <<<'{"version":1,"deadlines":[{"id":"x","at":1,"action":"stop","warn":1}]}'
expect_rc 4 "plan set with an unknown key"
expect_eq "$err" "gpufleet-agent: plan set: invalid plan: deadlines[0].warn: unknown key" "invalid plan reason"
agent plan set --dir "$W" <<<"$plan1"
expect_rc 2 "plan set without --expect"
expect_eq "$(stat -c %a "$W") $(stat -c %a "$W/plan.json") $(stat -c %a "$W/journal.jsonl")" \
    "700 600 600" "modes of the directory and files"

# The watcher is a daemon apart from us: `watch` returns, finds it running.
out=$(timeout 20 "$A" watch --dir "$W" 2>&1)
rc=$?
expect_rc 0 "watch with a watcher running"
expect_eq "$out" "running $pid" "second start says running"
expect_eq "$(cat "$W/watcher.pid")" "$pid" "watcher.pid"
fds=$(for f in /proc/"$pid"/fd/*; do readlink "$f"; done | sed "s|^$W/||; s|^pipe:.*|pipe|" | sort | tr '\n' ' ')
expect_eq "$fds" "/dev/null anon_inode:inotify journal.jsonl pipe pipe watcher.log watcher.log watcher.pid " \
    "the watcher's descriptors: nothing of ours (the wake pipe is its own)"
expect_eq "$(readlink /proc/"$pid"/fd/1)" "$W/watcher.log" "watcher stdout"
expect_eq "$(stat -L -c %i /proc/"$pid"/fd/* 2>/dev/null | sort | uniq -d | wc -l)" 2 \
    "the two pipe ends are one pipe, the log is dup'ed"
checks=$((checks + 1))
[ "$(ps -o sid= -p "$pid" | tr -d ' ')" != "$(ps -o sid= -p $$ | tr -d ' ')" ] ||
    fail "the watcher is in our session"
printf 'watcher RSS while idle: %s\n' "$(grep VmRSS /proc/"$pid"/status)"

# A deadline 2 s ahead: fires once, retries once, then stop_failed; the
# far one is cancelled; then nothing is armed and the watcher exits.
plan2='{"version":1,"stop_confirm_s":1,"deadlines":[{"id":"d-soon","at":'$(($(date +%s) + 2))',"action":"stop"}],
 "stop":{"command":"'$T/stop.sh'","kind":"stop"}}'
agent plan set --dir "$W" --expect 1 <<<"$plan2"
expect_rc 0 "plan set --expect 1"
expect_eq "$out" '{"generation":2,"watcher":"running","pid":'"$pid"'}' "plan set, watcher running"
wait_until 60 journal_has d-soon stop_failed || fail "no stop_failed for d-soon"
wait_until 30 gone "$pid" || fail "the watcher did not exit"
expect_eq "$(events d-soon | tr '\n' ' ')" \
    "armed firing stopping stop_result stop_retry stopping stop_result stop_failed " \
    "d-soon's entries"
expect_eq "$(events d-far | tr '\n' ' ')" "armed cancelled " "d-far's entries"
expect_eq "$(tail -n 1 "$W/journal.jsonl" | jq -c '{event, reason}')" \
    '{"event":"exiting","reason":"nothing armed"}' "last entry"
expect_eq "$(cat "$stopped" | tr '\n' ' ')" "stop e2e stop e2e " "the stop ran twice (once and the retry)"
expect_eq "$(jq -r 'select(.event == "stop_result") | .output' "$W/journal.jsonl" | head -n 1)" \
    "stop-output" "stop_result output"

# The report: the watcher section, entries after a cursor.
epoch=$(head -n 1 "$W/journal.jsonl" | jq -r .epoch)
fseq=$(jq -r 'select(.event == "firing") | .seq' "$W/journal.jsonl")
agent report --dir "$W" --proc /proc --journal-after "$epoch:$((fseq - 1))"
expect_rc 0 "report --journal-after"
expect_eq "$(printf '%s' "$out" | jq -c '.watcher | [.state, .pid, .generation, .journal_epoch, .journal_more]')" \
    '["none",null,2,"'"$epoch"'",false]' "report's watcher section"
expect_eq "$(printf '%s' "$out" | jq -r '.watcher.journal[0].event')" firing "first entry after the cursor"
expect_eq "$(printf '%s' "$out" | jq -r '.watcher.journal | length')" \
    "$(($(wc -l <"$W/journal.jsonl") - fseq + 1))" "entries after the cursor"
expect_eq "$(printf '%s' "$out" | jq -r 'keys_unsorted | last')" watcher "watcher is the last key"
expect_eq "$(printf '%s' "$out" | jq -c '.watcher.plan.deadlines[0].id')" '"d-soon"' "plan in the report"
agent report --dir "$W" --journal-after "0000000000000000:5"
expect_eq "$(printf '%s' "$out" | jq -r '.watcher.journal[0].event')" journal "another epoch: from the start"
agent report --dir "$W" --journal-after "nonsense"
expect_rc 2 "report with a bad cursor"

# A plan that arms something with no watcher: down; --ensure-watcher starts one.
agent plan set --dir "$W" --expect 2 <<<'{"version":1,"deadlines":[]}'
expect_eq "$out" '{"generation":3,"watcher":"none","pid":null}' "nothing armed: no watcher"
plan4='{"version":1,"autostop":{"id":"a-1","idle_s":86400,"wait_for":["sessions"],"nvidia_smi":"/nonexistent"}}'
agent plan set --dir "$W" --expect 3 <<<"$plan4"
expect_match "$out" '"watcher":"started"' "autostop arms a watcher"
wait_until 30 bash -c "jq -r .event '$W/journal.jsonl' | grep -qx gpu_unreadable" ||
    fail "a failing nvidia-smi is not journaled"
kill_watcher
wait_until 30 bash -c "! $A report --dir $W | jq -e '.watcher.state == \"running\"' >/dev/null" ||
    fail "the watcher did not exit on SIGTERM"
expect_eq "$(tail -n 1 "$W/journal.jsonl" | jq -c '{event, reason}')" \
    '{"event":"exiting","reason":"SIGTERM"}' "SIGTERM journaled"
agent report --dir "$W"
expect_eq "$(printf '%s' "$out" | jq -r '.watcher.state')" down "armed, no watcher: down"
agent report --dir "$W" --ensure-watcher
expect_eq "$(printf '%s' "$out" | jq -c '.watcher | [.state, .current]')" '["started",true]' "--ensure-watcher"

# Autostop: an idle fake GPU, no sessions counted: idle, then firing with
# the samples as evidence, the stop, and the watcher exits.
kill_watcher
wait_until 30 bash -c "! $A report --dir $W | jq -e '.watcher.state == \"running\"' >/dev/null" ||
    fail "the watcher did not exit on SIGTERM (2)"
mkdir "$T/gpus"
echo "0, GPU-4f1e9a2c-7b3d-5e8f-9c2a-3cecef5a0d11, NVIDIA A100-SXM4-80GB, 0, 0, 10, 81920, 30, 60.00, 400.00, 535.104.05" \
    >"$T/gpus/query-gpu.csv"
export GPUFLEET_GPU_FIXTURES=$T/gpus
plan5='{"version":1,"check_interval_s":1,"stop_confirm_s":1,"stop":{"command":"'$T/stop.sh'","kind":"stop"},
 "autostop":{"id":"a-2","idle_s":2,"wait_for":[],"nvidia_smi":"'$GPUFLEET_SRC/tests/data/agent/fake-nvidia-smi'"}}'
agent plan set --dir "$W" --expect 4 <<<"$plan5"
expect_match "$out" '"generation":5,"watcher":"started"' "autostop plan set"
apid=$(printf '%s' "$out" | jq -r .pid)
wait_until 60 bash -c "jq -r 'select(.event == \"stop_failed\") | .id' '$W/journal.jsonl' | grep -q '^a-2@'" ||
    fail "autostop did not fire"
wait_until 30 gone "$apid" || fail "the autostop watcher did not exit"
fire=$(jq -c 'select(.event == "firing" and (.id | startswith("a-2@")))' "$W/journal.jsonl")
expect_eq "$(printf '%s' "$fire" | jq -r .reason)" idle "autostop fires for idle"
expect_eq "$(printf '%s' "$fire" | jq -c '.evidence.samples[-1] | [.gpus, .gpu_mem_mib, .jobs]')" \
    '[[0],[10],0]' "evidence: the last sample (GPU memory in use, one query a check)"
expect_eq "$(jq -r 'select(.id == "a-2") | .event' "$W/journal.jsonl" | tr '\n' ' ')" "idle " \
    "the policy journals the idle transition once"

# Exactly once across a SIGKILL: the watcher dies while its stop command
# runs; the next one waits for that command instead of starting another,
# and once the container has restarted (a later container_start) the
# stop is "stopped".
cat >"$T/slow-stop.sh" <<EOF
#!/bin/sh
echo started >>"$T/slow"
while [ ! -e "$T/release" ]; do sleep 0.1; done
echo done >>"$T/slow"
EOF
chmod +x "$T/slow-stop.sh"
echo 1000 >"$T/cstart"
export GPUFLEET_AGENT_CONTAINER_START=$T/cstart
plan6='{"version":1,"stop_confirm_s":3600,"stop":{"command":"'$T/slow-stop.sh'","kind":"stop"},
 "deadlines":[{"id":"d-kill","at":'$(($(date +%s) - 1))',"action":"stop"}]}'
agent plan set --dir "$W" --expect 5 <<<"$plan6"
expect_match "$out" '"generation":6,"watcher":"started"' "plan set, a due deadline"
kpid=$(printf '%s' "$out" | jq -r .pid)
wait_until 30 journal_has d-kill stopping || fail "d-kill never reached stopping"
wait_until 30 test -e "$T/slow" || fail "the slow stop did not start"
kill -9 "$kpid"
wait_until 30 gone "$kpid" || fail "SIGKILL"
# The next contact's report brings it back: a fired deadline whose stop
# is unfinished still arms the plan.
agent report --dir "$W" --ensure-watcher
expect_eq "$(printf '%s' "$out" | jq -c '.watcher | [.state, .current]')" '["started",true]' \
    "--ensure-watcher after SIGKILL mid-stop"
npid=$(printf '%s' "$out" | jq -r .watcher.pid)
sleep 1 # give it the chance to misbehave (start the stop again)
touch "$T/release"
wait_until 30 journal_has d-kill stop_result || fail "no stop_result after the restart"
expect_eq "$(tr '\n' ' ' <"$T/slow")" "started done " "the stop command ran once"
expect_eq "$(jq -r 'select(.id == "d-kill" and .event == "stop_result") | .status' "$W/journal.jsonl")" \
    null "its result, not seen, is null"
kill "$npid"
wait_until 30 gone "$npid" || fail "SIGTERM (3)"
echo 2000000000 >"$T/cstart"
agent watch --dir "$W"
wait_until 30 journal_has d-kill stopped || fail "no stopped after a container restart"
expect_eq "$(jq -r 'select(.id == "d-kill") | .event' "$W/journal.jsonl" | tr '\n' ' ')" \
    "armed firing stopping stop_result stopped " "d-kill's entries: fired once"
expect_eq "$(jq -r 'select(.event == "stopped") | .container_start' "$W/journal.jsonl")" \
    2000000000 "stopped carries the new container_start"

# A watcher of another executable (an older agent) is replaced.
cp "$A" "$T/agent-old"
plan7='{"version":1,"deadlines":[{"id":"d-late","at":'$(($(date +%s) + 3600))',"action":"stop"}]}'
agent plan set --dir "$W" --expect 6 <<<"$plan7"
kill_watcher
wait_until 30 bash -c "! $A report --dir $W | jq -e '.watcher.state == \"running\"' >/dev/null" ||
    fail "SIGTERM (4)"
out=$(timeout 20 "$T/agent-old" watch --dir "$W")
opid=${out#started }
expect_match "$out" '^started [0-9]+$' "the old agent's watcher"
agent report --dir "$W"
expect_eq "$(printf '%s' "$out" | jq -c '.watcher | [.state, .pid, .current]')" "[\"running\",$opid,false]" \
    "an old watcher is not current"
agent report --dir "$W" --ensure-watcher
expect_eq "$(printf '%s' "$out" | jq -c '.watcher | [.state, .current]')" '["started",true]' \
    "--ensure-watcher replaces an old watcher"
checks=$((checks + 1))
wait_until 30 gone "$opid" || { fail "the old watcher still runs"; kill "$opid"; }

# The warning (a fake wall in PATH gets the message on stdin), then the
# before-stop command, which fails and must succeed: the stop is skipped.
kill_watcher
echo 1000 >"$T/cstart" # back to a container older than what follows
mkdir "$T/bin"
cat >"$T/bin/wall" <<EOF
#!/bin/sh
cat >>"$T/wall.txt"
EOF
chmod +x "$T/bin/wall"
at=$(($(date +%s) + 600))
plan8() {
	printf '%s' '{"version":1,"stop":{"command":"'$T/stop.sh'","kind":"stop"},
 "deadlines":[{"id":"d-warn","at":'$1',"action":"stop","warn_minutes":15,
   "before_stop":"echo saving; echo to-stderr >&2; exit 4","before_must_succeed":true}]}'
}
wait_until 30 bash -c "! $A report --dir $W | jq -e '.watcher.state == \"running\"' >/dev/null" ||
    fail "SIGTERM (5)"
gen=$(jq -r .generation "$W/plan.json")
PATH=$T/bin:$PATH agent plan set --dir "$W" --expect "$gen" <<<"$(plan8 "$at")"
expect_match "$out" '"watcher":"started"' "plan set, a deadline to warn of"
wait_until 30 journal_has d-warn warned || fail "d-warn: no warning"
expect_match "$(cat "$T/wall.txt")" \
    "^gpufleet: this machine stops at $(date -u -d "@$at" +%H:%M) UTC \(in (9|10) min\) \[deadline d-warn\]; cancel with: gpufleet shutdown cancel d-warn$" \
    "the warning's text"
# The same deadline moved to now: it fires, warned already.
agent plan set --dir "$W" --expect $((gen + 1)) <<<"$(plan8 "$(date +%s)")"
wait_until 60 journal_has d-warn skipped || fail "d-warn was not skipped"
expect_eq "$(jq -r 'select(.id == "d-warn") | .event' "$W/journal.jsonl" | tr '\n' ' ')" \
    "armed warned armed firing before_stop skipped " "d-warn's entries (armed again when moved)"
expect_eq "$(jq -r 'select(.event == "warned") | .method' "$W/journal.jsonl")" wall "warned by wall"
expect_eq "$(jq -c 'select(.event == "before_stop") | [.status, .signal, .timed_out, .output]' "$W/journal.jsonl")" \
    '[4,null,false,"saving\nto-stderr\n"]' "before_stop's result"
expect_eq "$(jq -r 'select(.event == "skipped") | .reason' "$W/journal.jsonl")" \
    "before_stop failed" "skipped's reason"

# Exit 5: the plan cannot be written (the directory is under a file);
# exit 6: written, but the watcher cannot start (watcher.pid is a directory).
touch "$T/afile"
agent plan set --dir "$T/afile/d" --expect 0 <<<"$plan1"
expect_rc 5 "plan set where no directory can be made"
expect_match "$err" '^gpufleet-agent: plan set: cannot create .*afile/d: Not a directory$' "exit 5 says why"
mkdir -p "$T/w6/watcher.pid"
agent plan set --dir "$T/w6" --expect 0 <<<"$plan1"
expect_rc 6 "plan set whose watcher cannot start"
expect_eq "$out" '{"generation":1,"watcher":"none","pid":null}' "exit 6 still prints the generation"
expect_match "$err" '^gpufleet-agent: plan set: the watcher said: failed: cannot open .*watcher.pid: Is a directory$' \
    "exit 6 says why"

finish

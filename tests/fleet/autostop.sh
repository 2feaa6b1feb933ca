#!/usr/bin/env bash
# gpufleet autostop on the sandbox fleet, judged by the watcher on each
# instance from fake GPUs: an idle instance stops; a busy one, one with an
# interactive session and one whose nvidia-smi fails do not (until that
# changes: each is then shown to stop, so the watcher was judging all
# along); --wait-for jobs ignores the session; --stalled stops busy GPUs
# whose progress file froze; --max-runtime stops whatever the load.
. "$(dirname "$0")/../e2e/lib.sh"
. "$(dirname "$0")/lib/watcher.sh"

fleet_up 6 --group-size 1
for n in 1 2 3 4 5 6; do
	run set "inst-$n" 'stop_command=remote:shutdown -h now'
done
gpu_util inst-1 0 0	# idle
gpu_util inst-2 90 90	# busy
gpu_util inst-3 0	# idle GPUs, someone logged in
gpu_util inst-4 100	# busy, but its progress file will freeze
i5=$(instance_dir inst-5)	# nvidia-smi fails
gpu_util inst-5 0
echo "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver." >"$i5/gpu/fail"
gpu_util inst-6 100	# busy, with a runtime limit

run autostop inst-1 --idle 1s
expect_rc 2 "--idle below GPUFLEET_MIN_IDLE"
run autostop inst-1 --idle 3s --gpu-below 101
expect_rc 2 "--gpu-below over 100"

# An interactive session on inst-3 (sshd: USER@notty, as an IDE's).
ssh -F "$D/ssh_config" inst-3 'sleep 600' </dev/null >/dev/null 2>&1 &
sess=$!
cleanup_hooks+=("kill $sess 2>/dev/null")
# inst-4's training loop writes its progress file, until it hangs.
p4=$(instance_dir inst-4)/home/.gpufleet/progress
mkdir -p "${p4%/*}"
(while :; do echo "step $SECONDS" >"$p4"; sleep 0.3; done) &
writer=$!
cleanup_hooks+=("kill $writer 2>/dev/null")

for n in 1 2 3 5; do
	run autostop "inst-$n" --idle 3s
	expect_rc 0 "autostop inst-$n --idle 3s"
done
run autostop inst-4 --idle 3s --stalled 4s
expect_rc 0 "autostop --stalled"
run autostop ls --json
expect_rc 0 "autostop ls"
run autostop ls
expect_match "$(printf '%s\n' "$out" | grep 'inst-4')" 'stall' "autostop ls shows --stalled"
# After the ls: inst-6 stops at once (it has run for more than 2 s), and
# ls contacts every instance (a loaded machine was slower than the stop).
run autostop inst-6 --idle 1h --max-runtime 2s
expect_rc 0 "autostop --max-runtime"
aid=$(jq -r '.autostop.id' "$(rdir inst-1)/plan.json")
expect_match "$aid" '^a-[0-9a-f]{8}$' "a policy id in the plan"
expect_eq "$(jq -c '[.check_interval_s, .autostop.idle_s, .autostop.gpu_below, .autostop.wait_for]' "$(rdir inst-1)/plan.json")" \
    '[1,3,5,["sessions","jobs"]]' "the plan: test knob interval, window, defaults"

# firing_of NAME FIELD: FIELD of the one firing entry of NAME's journal.
firing_of() { journal "$1" 'select(.event == "firing")' | jq -c "$2"; }

# --- idle: it stops after the window ----------------------------------------
wait_for 90 "idle inst-1 stopped" is_state inst-1 stopped || show_journal inst-1
expect_eq "$(calls inst-1 shutdown)" 1 "idle: one stop"
expect_eq "$(firing_of inst-1 '[.reason, (.id | startswith("'"$aid"'@"))]')" '["idle",true]' \
    "idle: firing under the policy id and the container start"
expect_eq "$(firing_of inst-1 '.evidence.samples[-1] | (.gpus | max) < 5 and .sessions == 0')" \
    true "idle: the evidence shows idle GPUs and no session"

# The others have been judged as long as inst-1 took and more: ten more
# check intervals, then none of them may have stopped.
sleep 10
for n in 2 3 4 5; do
	expect_eq "$(calls "inst-$n" shutdown)$(jcount "inst-$n" firing)$(fstate "inst-$n")" \
	    00ok "inst-$n did not stop"
done
expect_eq "$(jcount inst-5 gpu_unreadable)" 1 "nvidia-smi failing: journaled once"
run status inst-5
run events inst-5 --json
expect_eq "$(printf '%s' "$out" | jq '[.[] | select(.event == "gpu_unreadable")] | length')" \
    1 "events shows gpu_unreadable"
# inst-6 has passed its runtime limit busy as it is.
wait_for 60 "inst-6 stopped at its runtime limit" is_state inst-6 stopped || show_journal inst-6
expect_eq "$(firing_of inst-6 .reason)" '"max_runtime"' "max runtime: reason"

# --- each held back by one thing; take it away and it stops -----------------
t=$(date +%s)
gpu_util inst-2 0 0	# the job ended
gpu_util inst-5 0	# the driver is back
kill "$writer"	# the training loop hangs, its GPU stays at 100%
run autostop inst-3 --idle 3s --wait-for jobs	# the session does not count
expect_rc 0 "autostop --wait-for jobs"
wait_for 90 "inst-2 stopped once idle" is_state inst-2 stopped || show_journal inst-2
wait_for 90 "inst-3 stopped with its session open" is_state inst-3 stopped || show_journal inst-3
wait_for 90 "inst-4 stopped when its progress froze" is_state inst-4 stopped || show_journal inst-4
wait_for 90 "inst-5 stopped once nvidia-smi works" is_state inst-5 stopped || show_journal inst-5
for n in 2 3 4 5; do
	expect_eq "$(calls "inst-$n" shutdown)" 1 "inst-$n: one stop"
	checks=$((checks + 1))
	ft=$(firing_of "inst-$n" .time)
	[ "${ft:-0}" -ge "$t" ] || fail "inst-$n fired at $ft, before what held it back went ($t)"
done
expect_eq "$(firing_of inst-3 '[.reason, (.evidence.samples[-1].sessions >= 1)]')" '["idle",true]' \
    "--wait-for jobs: idle with the session counted in the evidence"
expect_eq "$(firing_of inst-4 '[.reason, (.evidence.samples[-1].gpus[0] >= 90), (.evidence.samples[-1].progress_age_s >= 4)]')" \
    '["stalled",true,true]' "--stalled: busy GPU, old progress file"

# The journal comes home on the next contact. (Busy first: the started
# container is a new one, which the policy judges afresh.)
gpu_util inst-2 90 90
fleet start inst-2
run status inst-2
run events inst-2 --json
expect_eq "$(printf '%s' "$out" | jq '[.[] | select(.event == "firing") | .entry.reason] | join(",")')" \
    '"idle"' "events: the firing and its reason"
run autostop off inst-2
expect_rc 0 "autostop off"
expect_eq "$(jq -c .autostop "$(rdir inst-2)/plan.json")" null "policy gone from the plan"

finish

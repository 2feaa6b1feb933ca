#!/usr/bin/env bash
# Keys held by ssh-agent: used when the instance has no identity of its
# own, and a stuck agent stalls only the hosts that need it, for at most
# [ssh] agent_timeout.
. "$(dirname "$0")/../e2e/lib.sh"
export GPUFLEET_NO_PROGRESS=1
unset SSH_AUTH_SOCK SSH_AGENT_PID

fleet_up 6
for n in 1 2 3; do run set "inst-$n" identity=; done

agent_pids=()
start_agent() {	# start_agent SOCKET: an ssh-agent holding the fleet key
	local out
	out=$(ssh-agent -a "$1" -s) || { fail "ssh-agent"; return 1; }
	eval "$out" >/dev/null
	agent_pids+=("$SSH_AGENT_PID")
	SSH_AUTH_SOCK=$1 ssh-add -q "$D/client/id_ed25519" 2>/dev/null
}
cleanup_hooks+=('for p in "${agent_pids[@]}"; do kill -CONT $p; kill $p; done')

# No identity anywhere and no agent: a clear reason, no hang.
run exec inst-1 -- true
expect_rc 1 "no key at all"
expect_match "$err" "no identity" "no identity message"

start_agent "$T/agent.sock"
SSH_AUTH_SOCK=$T/agent.sock run exec 'inst-1,inst-2,inst-3' -- echo via agent
expect_rc 0 "login with the agent's key"
expect_eq "$(printf '%s\n' "$out" | grep -c ': via agent$')" 3 "three hosts"

# A slow agent (every signature waits 2 s for a confirmation) serves
# the three agent hosts one after another on its worker: the third waits
# 4 s in the queue, in silence from its server. Only silence during a
# host's own login (2 s) counts against --setup-timeout 3, so all three
# get in.
printf '#!/bin/sh\nsleep 2\nexit 0\n' >"$T/confirm"
chmod 755 "$T/confirm"
out=$(SSH_ASKPASS=$T/confirm SSH_ASKPASS_REQUIRE=force ssh-agent -a "$T/slow.sock" -s) ||
    fail "slow ssh-agent"
eval "$out" >/dev/null
agent_pids+=("$SSH_AGENT_PID")
SSH_AUTH_SOCK=$T/slow.sock ssh-add -q -c "$D/client/id_ed25519" 2>/dev/null
SSH_AUTH_SOCK=$T/slow.sock run exec 'inst-1,inst-2,inst-3' --setup-timeout 3 \
    -- echo via slow agent
expect_rc 0 "a slow agent's queue is not the server's silence"
expect_eq "$(printf '%s\n' "$out" | grep -c ': via slow agent$')" 3 \
    "all three hosts behind the slow agent ran"

# An agent that accepts connections and never answers (SIGSTOP).
start_agent "$T/stuck.sock"
kill -STOP "$SSH_AGENT_PID"
SSH_AUTH_SOCK=$T/stuck.sock run exec all --json --connect-timeout 2 \
    --setup-timeout 2 -- echo ok
expect_rc 1 "stuck agent fails its hosts"
for n in 1 2 3; do
	expect_match "$(printf '%s\n' "$out" | grep "\"inst-$n\"")" \
	    '"code":"connect_timeout"' "inst-$n waits for the agent, then fails"
done
# Not held up: each finished before the stuck hosts' deadline fired (their
# durations), whatever the speed of the machine.
ms() { printf '%s\n' "$out" | grep "\"inst-$1\"" |
    sed -n 's/.*"duration_ms":\([0-9]*\).*/\1/p'; }
stuck_min=$(for n in 1 2 3; do ms $n; done | sort -n | head -1)
for n in 4 5 6; do
	line=$(printf '%s\n' "$out" | grep "\"inst-$n\"")
	expect_match "$line" '"stdout":"ok\\n".*"error":null' "inst-$n ran"
	checks=$((checks + 1))
	[ "$(ms $n)" -lt "${stuck_min:-0}" ] ||
	    fail "inst-$n held up by the agent: $(ms $n) ms, the stuck hosts $stuck_min ms"
done

# [ssh] agent_timeout bounds the wait on the agent: the login it holds
# fails with that reason, and the agent then counts as hung: the logins
# queued behind it, and those that come later in the same process, go on
# to the key file after it (the config's identity). The process exits
# with its worker still stuck in the agent.
mkdir -p "$XDG_CONFIG_HOME/gpufleet"
printf '[defaults]\nidentity = %s\n[ssh]\nagent_timeout = 2\n' \
    "$D/client/id_ed25519" >"$XDG_CONFIG_HOME/gpufleet/config.ini"
line() { printf '%s\n' "$out" | grep "\"inst-$1\""; }
SSH_AUTH_SOCK=$T/stuck.sock run exec 'inst-1,inst-2,inst-3' --json -- echo ok
expect_rc 1 "the login the stuck agent holds fails"
expect_eq "$(printf '%s\n' "$out" | grep -c 'ssh-agent did not answer in 2 s')" \
    1 "one host fails with the agent's bound"
expect_eq "$(printf '%s\n' "$out" | grep -c '"stdout":"ok\\n".*"error":null')" \
    2 "the two queued behind it log in with the key file"
SSH_AUTH_SOCK=$T/stuck.sock run exec 'inst-1,inst-2,inst-3' --json --fanout 1 \
    -- echo ok
expect_rc 1 "one at a time: the first waits on the stuck agent"
expect_match "$(line 1)" '"code":"auth","message":"ssh-agent did not answer in 2 s"' \
    "inst-1 fails with the agent's bound"
for n in 2 3; do
	expect_match "$(line $n)" '"stdout":"ok\\n".*"error":null' \
	    "inst-$n, started after, skips the hung agent for the key file"
done
rm "$XDG_CONFIG_HOME/gpufleet/config.ini"

finish

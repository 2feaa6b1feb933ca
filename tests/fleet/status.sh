#!/usr/bin/env bash
# gpufleet status and history on a sandbox fleet with simulated GPUs: the
# table, deploy-once, concurrent deploys, hosts that cannot run the agent,
# garbage reports, watch reusing connections, and retention.
. "$(dirname "$0")/../e2e/lib.sh"
export GPUFLEET_NO_PROGRESS=1
: "${GPUFLEET_AGENT:=$(dirname "$GPUFLEET")/gpufleet-agent}"
export GPUFLEET_AGENT
data=$GPUFLEET_SRC/tests/data/agent
db=$XDG_DATA_HOME/gpufleet/fleet.db
sql() { sqlite3 "$db" "$@"; }

fleet_up 6
gpu() {	# gpu NAME FIXTURE: a fake nvidia-smi fed from a fixture set
	local dir
	dir=$(instance_dir "$1")
	cp "$data/fake-nvidia-smi" "$dir/bin/nvidia-smi"
	cp -r "$data/gpus/$2/." "$dir/gpu/"
}
gpu inst-1 a100
gpu inst-2 h100x8
gpu inst-3 hang
gpu inst-5 rtx4090
h1=$(instance_dir inst-1)/home
mkdir -p "$h1/.gpufleet"
printf 'epoch 3 step 1200 loss 0.412\n' >"$h1/.gpufleet/progress"
touch -d '-2 hours' "$h1/.gpufleet/progress"
fleet break inst-6 refuse

logins() {	# logins: accepted SSH logins on the whole fleet so far
	grep -h "Accepted publickey" "$D"/groups/*/sshd.log \
	    "$D"/instances/*/sshd/sshd.log 2>/dev/null | wc -l
}

# --- first status: deploys, reports, stores ------------------------------
run status
expect_rc 1 "one unreachable instance gives 1"
row() { printf '%s\n' "$out" | grep "^$1 "; }
expect_match "$(row inst-1)" '^inst-1 +up +2xA100-80G +97,93 +72,72/80 +65C +611/800W +python,python3 ' \
    "A100 row"
expect_match "$(row inst-1)" 'epoch 3 step 1200 loss 0.412 \([0-9]+h[0-5][0-9]m ago\)' \
    "progress text and age"
expect_match "$(row inst-2)" '^inst-2 +up +8xH100-80G +100,100,99,100,100,98,100,100 ' \
    "8xH100 row"
expect_match "$(row inst-3)" '^inst-3 +up +\(nvidia-smi timed out after 4.5s\)' \
    "hanging nvidia-smi: a report with gpu_error"
expect_match "$(row inst-4)" '^inst-4 +up +\(nvidia-smi not found\)' "no nvidia-smi"
expect_match "$(row inst-5)" '^inst-5 +up +1xRTX4090-24G ' "RTX 4090 row"
expect_match "$(row inst-6)" '^inst-6 +unreachable: connection refused' \
    "unreachable row"
agent=$(ls "$h1"/.cache/gpufleet/gpufleet-agent-* 2>/dev/null)
checks=$((checks + 1))
[ -n "$agent" ] && cmp -s "$agent" "$GPUFLEET_AGENT" ||
    fail "agent not deployed intact"
expect_eq "$(stat -c %a "$agent")" 700 "agent mode 0700"
expect_eq "$(ls -A "$h1/.cache/gpufleet" | grep -c '^\.')" 0 "no temp file left"
expect_eq "$(sql 'SELECT count(*) FROM sample_gpu')" 11 "GPU samples stored (2+8+1)"
expect_eq "$(sql 'SELECT count(*) FROM sample_host')" 5 "host samples stored"
expect_eq "$(sql "SELECT state FROM last_status s JOIN instance i ON i.id = s.instance_id WHERE i.name = 'inst-6'")" \
    unreachable "controller's view stored"
# --json's flags: what the table marks, with the user's thresholds.
run status inst-1,inst-4 --json
expect_eq "$(printf '%s' "$out" | jq -c '[.[] | [.name, .flags.idle_gpus, .flags.progress_stale, .flags.idle_util_percent, .flags.stale_progress_minutes]]')" \
    '[["inst-1",[],true,5,30],["inst-4",[],null,5,30]]' \
    "flags: no idle GPU at 97/93 %, progress 2 h old is stale, defaults 5 % and 30 min"
mkdir -p "$XDG_CONFIG_HOME/gpufleet"
printf '[status]\nidle_util_percent = 95\nstale_progress_minutes = 600\n' \
    >"$XDG_CONFIG_HOME/gpufleet/config.ini"
run status inst-1 --json
expect_eq "$(printf '%s' "$out" | jq -c '.[0].flags | [.idle_gpus, .progress_stale]')" \
    '[[1],false]' "flags follow [status]: GPU 1 (93 %) under 95 %, 2 h under 600 min"
rm "$XDG_CONFIG_HOME/gpufleet/config.ini"

# --- a second status uploads nothing ---------------------------------------
mtime=$(stat -c %Y.%N "$agent")
before=$(logins)
sleep 1
run status 'inst-[1-5]'
expect_rc 0 "second status"
expect_eq "$(stat -c %Y.%N "$agent")" "$mtime" "agent not uploaded again"
expect_eq $(( $(logins) - before )) 5 "one login per instance, one round trip"

# --- colour on a terminal only, and never with NO_COLOR -------------------
checks=$((checks + 1))
if printf '%s' "$out" | grep -q $'\033'; then fail "escape codes in piped output"; fi
env -u NO_COLOR script -qec "'$GPUFLEET' status inst-1" "$T/tty1" >/dev/null 2>&1
expect_contains "$(cat "$T/tty1")" $'\033[31mepoch 3 step 1200' \
    "stale progress in red on a terminal"
NO_COLOR=1 script -qec "'$GPUFLEET' status inst-1" "$T/tty2" >/dev/null 2>&1
expect_contains "$(cat "$T/tty2")" "epoch 3 step 1200" "NO_COLOR output"
checks=$((checks + 1))
if grep -q $'\033\[3' "$T/tty2"; then fail "NO_COLOR still coloured"; fi

# --- JSON: the full reports plus the controller's view ---------------------
run status inst-1,inst-6 --json
expect_match "$out" '"state": "up"' "json state"
expect_match "$out" '"util_gpu": 97' "json report"
expect_match "$out" '"error": "connection refused' "json error"
expect_match "$out" '"driver_version": "535.104.05"' "driver version"
expect_match "$out" '"cuda_version": "12.2"' "CUDA version"

# --- two controllers deploying at once do not corrupt the binary ---------
for n in 1 2 3; do rm -rf "$(instance_dir inst-$n)/home/.cache/gpufleet"; done
"$GPUFLEET" status 'inst-[1-3]' >"$T/a.out" 2>&1 &
a=$!
"$GPUFLEET" status 'inst-[1-3]' >"$T/b.out" 2>&1 &
b=$!
wait $a; ra=$?
wait $b; rb=$?
expect_eq "$ra$rb" 00 "both concurrent deploys succeed"
for n in 1 2 3; do
	f=$(ls "$(instance_dir inst-$n)"/home/.cache/gpufleet/gpufleet-agent-*)
	checks=$((checks + 1))
	cmp -s "$f" "$GPUFLEET_AGENT" || fail "inst-$n agent corrupted"
done

# --- hosts that cannot run the agent ---------------------------------------
run set inst-4 remote_dir=/proc/gpufleet-cannot
run status inst-4
expect_rc 1 "unwritable remote dir"
expect_match "$out" "inst-4 +agent error: cannot write the agent to /proc/gpufleet-cannot" \
    "unwritable remote dir reason"
# Another architecture: a uname that says aarch64 first in PATH.
rm -rf "$(instance_dir inst-5)/home/.cache/gpufleet"
printf '#!/bin/sh\n[ "$1" = -m ] && echo aarch64 || /bin/uname "$@"\n' \
    >"$(instance_dir inst-5)/bin/uname"
chmod 755 "$(instance_dir inst-5)/bin/uname"
run status inst-5
expect_match "$out" "inst-5 +agent error: cannot run the agent: the host is aarch64; the agent is built for x86_64" \
    "other architecture reason"
rm "$(instance_dir inst-5)/bin/uname"
nx=$(mktemp -d /var/lib/gpufleet-test/noexec.XXXXXX)
if mount -t tmpfs -o noexec,size=16m tmpfs "$nx" 2>/dev/null; then
	cleanup_hooks+=("umount '$nx'; rmdir '$nx'")
	chmod 1777 "$nx"
	run set inst-4 "remote_dir=$nx/agent"
	run status inst-4
	expect_match "$out" "inst-4 +agent error: cannot execute the agent in $nx/agent \(mounted noexec\?\)" \
	    "noexec mount reason"
else
	rmdir "$nx"
	echo "note: cannot mount tmpfs here; noexec case not exercised" >&2
fi
run set inst-4 'remote_dir=~/.cache/gpufleet'

# --- garbage, truncated, wrong-version and oversized reports ---------------
cat >"$T/bad-agent" <<'EOS'
#!/bin/sh
[ "$1" = report ] || exit 2
case $GPUFLEET_INSTANCE in
inst-1) echo 'this is not json' ;;
inst-2) printf '{"schema":1,"time":1,"host":{"hostname":"x"' ;;
inst-3) echo '{"schema":2,"time":1,"host":{"hostname":"x"},"gpus":[]}' ;;
inst-4) head -c 2000000 /dev/zero | tr '\0' ' ' ; echo '{}' ;;
*) exit 86 ;;
esac
EOS
chmod 755 "$T/bad-agent"
gsql() { sql "SELECT count(*) FROM sample_gpu"; }
before=$(gsql)
hbefore=$(sql "SELECT count(*) FROM sample_host")
GPUFLEET_AGENT=$T/bad-agent run status 'inst-[1-5]'
expect_rc 1 "bad reports fail their hosts"
expect_match "$(row inst-1)" "agent error: agent report is not JSON" "garbage"
expect_match "$(row inst-2)" "agent error: agent report is not JSON" "truncated"
expect_match "$(row inst-3)" "agent error: bad agent report: schema 2" "wrong version"
expect_match "$(row inst-4)" "agent error: agent report is larger than 1048576 bytes" \
    "oversized"
expect_eq "$(sql "SELECT count(*) FROM sample_host")" "$((hbefore))" \
    "nothing stored from bad reports (inst-5 runs its old agent: no new file)"
# Restore: the real agent is deployed again under its own hash.
run status 'inst-[1-5]'
expect_rc 0 "back to the real agent"; [ "$rc" = 0 ] || echo "$out $err" >&2

# --- watch reuses the SSH sessions ----------------------------------------
before=$(logins)
run status 'inst-[1-3]' --watch 1 --count 3
expect_rc 0 "watch"
expect_eq "$(printf '%s\n' "$out" | grep -c '^gpufleet status, every 1s')" 3 \
    "three refreshes"
expect_eq $(( $(logins) - before )) 3 "one login per instance for three refreshes"

# --- a hung instance: reported after the connect timeout, others unaffected
mkdir -p "$XDG_CONFIG_HOME/gpufleet"
printf '[ssh]\nconnect_timeout = 3\n' >"$XDG_CONFIG_HOME/gpufleet/config.ini"
fleet break inst-2 hang
run status 'inst-[1-3]'
expect_match "$(row inst-2)" "^inst-2 +unreachable: no SSH banner within 3s" "hung instance"
expect_match "$(row inst-1)" "^inst-1 +up +2xA100-80G" "others unaffected by the hung one"

# Ctrl-C: exit 130 and nothing stored.
seen=$(sql "SELECT t FROM last_status s JOIN instance i ON i.id = s.instance_id WHERE i.name = 'inst-1'")
sleep 1
"$GPUFLEET" status 'inst-[1-3]' >"$T/int.out" 2>"$T/int.err" &
pid=$!
sleep 1
kill -INT $pid
wait $pid
rc=$?
expect_rc 130 "status interrupted"
expect_match "$(cat "$T/int.err")" "interrupted; nothing stored" "interrupt message"
expect_eq "$(sql "SELECT t FROM last_status s JOIN instance i ON i.id = s.instance_id WHERE i.name = 'inst-1'")" \
    "$seen" "nothing stored after Ctrl-C"
fleet heal inst-2
rm "$XDG_CONFIG_HOME/gpufleet/config.ini"

# Ctrl-C while --watch waits for its next refresh: the watch ends at once
# with the last refresh's exit code (0), and that refresh stays stored.
"$GPUFLEET" status inst-1 --watch 3600 >"$T/watch.out" 2>"$T/watch.err" &
pid=$!
for _ in $(seq 600); do
	grep -q '^inst-1 .*up' "$T/watch.out" 2>/dev/null && break
	sleep 0.1
done
expect_match "$(cat "$T/watch.out")" "^gpufleet status, every 3600s" "watch header"
kill -INT $pid
for _ in $(seq 600); do kill -0 $pid 2>/dev/null || break; sleep 0.1; done
kill -0 $pid 2>/dev/null && { kill $pid; fail "--watch ignored Ctrl-C while waiting"; }
wait $pid
rc=$?
expect_rc 0 "Ctrl-C between refreshes"
expect_eq "$(cat "$T/watch.err")" "" "nothing on stderr after Ctrl-C between refreshes"
[ "$(sql "SELECT t FROM last_status s JOIN instance i ON i.id = s.instance_id WHERE i.name = 'inst-1'")" -gt "$seen" ] ||
	fail "the refresh before Ctrl-C was not stored"

# --- history and retention ---------------------------------------------------
run history inst-1 --json
expect_match "$out" '"util_mean": 97.0' "history points"
run history inst-1
expect_match "$out" "^inst-1 GPU 0  .* util mean 97% max 97%  mem mean 72.5/80 GiB" \
    "history sparkline line"
id=$(sql "SELECT id FROM instance WHERE name = 'inst-1'")
old=$(( $(date +%s) - 50 * 3600 ))
old=$(( old / 300 * 300 ))
sql "INSERT INTO sample_gpu VALUES ($id, $old, 0, 10, 1000, 81920, 50, 100, 1),
     ($id, $((old + 60)), 0, 30, 3000, 81920, 60, 200, 1);
     INSERT INTO sample_host (instance_id, t) VALUES ($id, $old);"
run status inst-1
expect_eq "$(sql "SELECT count(*) FROM sample_gpu WHERE t < $((old + 3600))")" 0 \
    "raw samples past 48 h are folded"
expect_eq "$(sql "SELECT n, util_mean, util_max, mem_max FROM sample_gpu_5m WHERE instance_id = $id AND t = $old AND gpu = 0")" \
    "2|20.0|30.0|3000.0" "into a 5-minute aggregate (mean and max)"
run history inst-1 --since -3d --json
expect_match "$out" '"n": 2' "history reads aggregates too"
sql "INSERT INTO sample_gpu_5m VALUES ($id, $(( $(date +%s) - 91 * 86400 )), 0, 1, 1, 1, 1, 1, 1, 1, 1)"
run status inst-1
expect_eq "$(sql "SELECT count(*) FROM sample_gpu_5m WHERE t < $(( $(date +%s) - 90 * 86400 ))")" 0 \
    "aggregates past 90 days are dropped"

# --- stopped: knocked on, not logged in to; one that answers bills ---------
# inst-2 is booked stopped but runs (started again from the platform's
# console): plain status knocks (a connect and the SSH banner), contacts
# it and books it running. down-1 is booked stopped and is down (nothing
# listens): knocked on, never logged in to, stays stopped.
run mark inst-2 stopped --note "stopped on the console"
run add down-1 127.0.0.1 --port 1
run mark down-1 stopped
since=$(sql "SELECT strftime('%Y-%m-%dT%H:%M:%SZ', max(t), 'unixepoch') FROM ledger l JOIN instance i ON i.id = l.instance_id WHERE i.name = 'down-1'")
n=$(logins)
run status 'inst-1,inst-2,down-1'
expect_rc 0 "inst-1 up, inst-2 answers, down-1 knowingly stopped"
expect_match "$out" $'\n''down-1 +stopped \(since '"$since"'\) ' "stopped (since T)"
expect_match "$out" $'\n''inst-2 +up +1xH100' "inst-2 answered the knock and was contacted"
expect_contains "$err" "inst-2 is booked stopped but its SSH server answers: contacting it" \
    "the knock is said"
expect_eq "$(logins)" $((n + 2)) "inst-1 and inst-2 were logged in to, down-1 only knocked on"
run ledger inst-2
expect_match "$out" "running +observed +answers while booked stopped: running" \
    "answering while booked stopped: running from now"
expect_eq "$(sql "SELECT l.state FROM ledger l JOIN instance i ON i.id = l.instance_id WHERE i.name = 'inst-2' ORDER BY l.t DESC, l.id DESC LIMIT 1")" \
    running "the books say running: cost bills it"
run status inst-2
expect_match "$out" $'\n''inst-2 +up +1xH100' "a plain status contacts it from then on"

finish

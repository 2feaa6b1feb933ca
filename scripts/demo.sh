#!/usr/bin/env bash
# README command 1: install what is missing, build, start a sandbox fleet
# of 5 instances (real sshd on 127.0.0.1; two handed out with a root
# password, as AutoDL does), manage it with gpufleet from a
# throw-away inventory, and stop the sandbox again.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)

bash "$top/scripts/deps.sh"
BUILD_DIR=$top/build bash "$top/scripts/build.sh" >/dev/null

gpufleet() { "$top/build/gpufleet" "$@"; }
fleet() { bash "$top/tests/harness/fleet" -d "$D" "$@"; }
show() { printf '\n\033[1m$ %s\033[0m\n' "$*"; }

work=$(mktemp -d /tmp/gpufleet-demo.XXXXXX)
export GPUFLEET_DB=$work/fleet.db XDG_CONFIG_HOME=$work/config XDG_DATA_HOME=$work/data \
    XDG_STATE_HOME=$work/state
D=""
pid=""
hook=""
cleanup() {
	[ -n "$pid" ] && kill -TERM "$pid" 2>/dev/null || true
	[ -n "$hook" ] && kill "$hook" 2>/dev/null || true
	[ -n "$D" ] && fleet down >/dev/null 2>&1 || true
	rm -rf "$work"
}
trap cleanup EXIT INT TERM

base=/var/lib/gpufleet-test/fleets
[ "$(id -u)" = 0 ] || base=${XDG_STATE_HOME:-$HOME/.local/state}/gpufleet-harness/fleets
mkdir -p "$base"
D=$(mktemp -d "$base/demo.XXXXXX")
rmdir "$D"
show "tests/harness/fleet up 5 --prefix gpu --root-login 4 --root-login 5    # 5 sandbox instances, real sshd; gpu-4 and gpu-5 as AutoDL hands them out: root and a password"
fleet up 5 --prefix gpu --root-login 4 --root-login 5 --owner $$
cat "$D/instances.tsv" | awk '{ printf "  %s on 127.0.0.1:%s (user %s)\n", $1, $2, $3 }'
key=$D/client/id_ed25519
port() { awk -v n="$1" '$1 == n { print $2 }' "$D/instances.tsv"; }
user=$(awk 'NR == 1 { print $3 }' "$D/instances.tsv")

show gpufleet add gpu-1 "$user@127.0.0.1:$(port gpu-1)" --identity KEY --provider autodl --tag train
gpufleet add gpu-1 "$user@127.0.0.1:$(port gpu-1)" --identity "$key" \
    --provider autodl --region beijing-b --tag train
show gpufleet add gpu-2 "$user@127.0.0.1:$(port gpu-2)" --identity KEY --provider vast --tag train
gpufleet add gpu-2 "$user@127.0.0.1:$(port gpu-2)" --identity "$key" \
    --provider vast --tag train
show gpufleet import FLEET/ssh_config --match gpu-3 --provider runpod --tag dev
gpufleet import "$D/ssh_config" --match gpu-3 --provider runpod --tag dev

# A machine as the platform's console hands it out: a login line and a
# password, no key of ours on it yet.
: >"$(awk '$1 == "gpu-4" { print $4 }' "$D/instances.tsv")/home/.ssh/authorized_keys"
pw=$D/instances/gpu-4/password
line="ssh -p $(port gpu-4) root@127.0.0.1"
show "gpufleet add gpu-4 '$line' --password --check --provider autodl   # the console's line; the password typed (here: --password-file)"
gpufleet add gpu-4 "$line" --password-file "$pw" --check --provider autodl
show "gpufleet passwd gpu-4 --lock --password   # only its key opens SSH now; the console password is proven refused"
gpufleet passwd gpu-4 --lock --password-file "$pw"
# gpu-5 was added earlier by its address only (no key of ours on it yet):
# keys install gives it its own key the same way, then a new random
# console password replaces the one the platform showed.
: >"$(awk '$1 == "gpu-5" { print $4 }' "$D/instances.tsv")/home/.ssh/authorized_keys"
gpufleet add gpu-5 "ssh -p $(port gpu-5) root@127.0.0.1" --provider featurize >/dev/null 2>&1
show "gpufleet keys install gpu-5 --password   # an instance already in the inventory (here: --password-file)"
gpufleet keys install gpu-5 --password-file "$D/instances/gpu-5/password"
show "gpufleet passwd gpu-5 --random --out PW.txt   # for a web console that needs one; shown once or written 0600"
gpufleet passwd gpu-5 --random --out "$work/pw.txt"
ls -l "$work/pw.txt" | awk '{ print "  " $1 " PW.txt" }'
show gpufleet keys status gpu-4,gpu-5
gpufleet keys status gpu-4,gpu-5
# A private key left readable on the box (a common leftover of setup).
g4=$(awk '$1 == "gpu-4" { print $4 }' "$D/instances.tsv")/home
cp "$D/client/id_ed25519" "$g4/deploy_key" && chmod 0644 "$g4/deploy_key"
show "gpufleet harden gpu-4 --fix   # what is safe and reversible is fixed; the rest stays a report"
gpufleet harden gpu-4 --fix || true

show gpufleet ls
gpufleet ls
show gpufleet ls @train --format ansible
gpufleet ls @train --format ansible

# Simulated GPUs: a fake nvidia-smi on each instance's PATH, fed from
# fixtures in the real nvidia-smi CSV format.
idir() { awk -v n="$1" '$1 == n { print $4 }' "$D/instances.tsv"; }
# until WHAT SECS CMD...: dots while CMD fails, at most SECS seconds.
until_ok() {
	local what=$1 left=$2
	shift 2
	printf 'waiting for %s' "$what"
	while [ "$left" -gt 0 ] && ! "$@"; do
		printf .
		sleep 1
		left=$((left - 1))
	done
	echo
}
fstate() { fleet status | awk -v n="$1" '$1 == n { print $3 }'; }
stopped() { local i; for i in "$@"; do [ "$(fstate "$i")" = stopped ] || return 1; done; }
for n in gpu-1:a100 gpu-2:h100x8; do
	cp "$top/tests/data/agent/fake-nvidia-smi" "$(idir "${n%%:*}")/bin/nvidia-smi"
	cp -r "$top/tests/data/agent/gpus/${n#*:}/." "$(idir "${n%%:*}")/gpu/"
done
mkdir -p "$(idir gpu-1)/home/.gpufleet"
echo "epoch 3 step 1200 loss 0.412" >"$(idir gpu-1)/home/.gpufleet/progress"
chown -R "$user" "$(idir gpu-1)/home/.gpufleet" 2>/dev/null || true

show gpufleet exec all -- uname -s
gpufleet exec all -- uname -s
show gpufleet exec all --connect-timeout 5 --setup-timeout 20 -- uptime -p
gpufleet exec all --connect-timeout 5 --setup-timeout 20 -- uptime -p
show "gpufleet exec @train -b -- 'echo \$GPUFLEET_INSTANCE | wc -c'   # one line for the remote shell, as ssh"
gpufleet exec @train -b -- 'echo $GPUFLEET_INSTANCE | wc -c'
show "gpufleet status          # deploys the agent, then one round trip per instance"
gpufleet status || true
show "gpufleet status @train --json | head -12"
gpufleet status @train --json | head -12
show gpufleet history gpu-2
gpufleet history gpu-2
show gpufleet hostkey show gpu-1
gpufleet hostkey show gpu-1
show gpufleet ssh gpu-2 -- echo hello from gpu-2
gpufleet ssh gpu-2 -- echo hello from gpu-2
# A machine reachable only through another (a lab's gateway): here gpu-2
# through gpu-1, for a moment. One session to the jump serves every host
# behind it; each hop's host key is pinned.
show "gpufleet set gpu-2 jump=gpu-1; gpufleet exec gpu-2 -- 'echo \$GPUFLEET_INSTANCE via the jump'"
gpufleet set gpu-2 jump=gpu-1
gpufleet exec gpu-2 -- 'echo $GPUFLEET_INSTANCE via the jump'
gpufleet set gpu-2 jump=
# OpenSSH's own tools with gpufleet's pinned keys (ssh-config --install
# keeps ~/.ssh/gpufleet.conf current; here a file of the demo's own).
show "gpufleet ssh-config > FLEET.conf; scp -F FLEET.conf notes.txt gpu-4:   # scp, sftp, rsync -e, VS Code"
gpufleet ssh-config >"$work/fleet.conf"
echo "checkpoint list" >"$work/notes.txt"
scp -q -o BatchMode=yes -F "$work/fleet.conf" "$work/notes.txt" gpu-4:notes.txt
ssh -o BatchMode=yes -F "$work/fleet.conf" gpu-4 cat notes.txt
# Files in and out: push data to the training boxes, pull their results
# home (rsync over the same pinned keys; LOCAL_DIR/NAME/ per instance).
show "gpufleet push @train notes.txt '~/data/'"
gpufleet push @train "$work/notes.txt" '~/data/'
gpufleet exec @train -- 'mkdir -p out && echo "loss 0.41 on $GPUFLEET_INSTANCE" >out/metrics.txt' >/dev/null 2>&1
show "gpufleet pull @train '~/out/' RESULTS   # RESULTS/gpu-1/..., RESULTS/gpu-2/..."
gpufleet pull @train '~/out/' "$work/results"
(cd "$work" && find results -type f | sort | while read -r f; do echo "  $f: $(cat "$f")"; done)
show "gpufleet speed @train --size 8M   # upload, download and round trip over each instance's SSH connection"
gpufleet speed @train --size 8M

show "gpufleet preset ls; gpufleet set gpu-1 preset=autodl.a100-80g   # a price rule by name (an example to check)"
gpufleet preset ls
gpufleet set gpu-1 preset=autodl.a100-80g
gpufleet set gpu-2 price=2.40/h currency=USD billing=minute min_billed=10m
gpufleet set gpu-3 price=2.28/h billing=hour stopped_price=0.5/day
show "gpufleet mark gpu-3 running --at -3h; gpufleet mark gpu-3 stopped --at -50m"
gpufleet mark gpu-3 running --at -3h
gpufleet mark gpu-3 stopped --at -50m
show gpufleet provider add autodl --balance 40 --low-balance 50
gpufleet set gpu-1 provider=autodl >/dev/null
gpufleet provider add autodl --balance 40 --low-balance 50
show gpufleet ledger gpu-3   # what cost is computed from; ledger rm ID / amend ID --at T repair an entry
gpufleet ledger gpu-3
# The sandbox's own first sight of gpu-3 ("observed", now) contradicts the
# story told above; ledger rm takes an entry out (recorded in events).
obs=$(gpufleet ledger gpu-3 --json | jq -r '[.[] | select(.source == "observed")] | last | .id // empty')
if [ -n "$obs" ]; then
	show "gpufleet ledger rm $obs   # an entry that is wrong: cost and advise no longer see it"
	gpufleet ledger rm "$obs"
fi
show gpufleet cost --since -4h
gpufleet cost --since -4h
show "gpufleet cost gpu-3 --explain --since -4h   # each run with its rounding, to check against the platform's bill"
gpufleet cost gpu-3 --explain --since -4h
show gpufleet provider ls
gpufleet provider ls
show gpufleet advise
gpufleet advise

show "gpufleet db backup   # a checked copy of the books beside fleet.db (the daemon makes one a day)"
gpufleet db backup
show "gpufleet db check    # integrity_check; when damaged, the newest good backup and how to restore it"
gpufleet db check

show gpufleet keys rotate all
gpufleet keys rotate all
show gpufleet keys ls
gpufleet keys ls
show gpufleet keys gc   # removes key files no rotation uses (keys ls marks them orphan)
gpufleet keys gc
show "gpufleet exec all -- 'grep -c gpufleet: ~/.ssh/authorized_keys'   # logged in with the new keys"
gpufleet exec all -- 'grep -c gpufleet: ~/.ssh/authorized_keys'

# The watcher: a shutdown and an autostop that happen with the laptop
# closed. The sandbox's "platforms" are fake stop tools on each instance
# (they record the call and take the instance down); the test knobs
# shorten the check interval and the minimum idle window for the demo.
export GPUFLEET_CHECK_INTERVAL=2 GPUFLEET_MIN_IDLE=10
show "gpufleet set gpu-1 stop_command='remote:shutdown -h now'   # the sandbox's AutoDL shutdown is on PATH"
gpufleet set gpu-1 'stop_command=remote:shutdown -h now'
fleet setenv gpu-3 RUNPOD_POD_ID=pod-gpu3   # what RunPod sets in its containers
show gpufleet shutdown gpu-1 --in 30s --warn 1
gpufleet shutdown gpu-1 --in 30s --warn 1
show "gpufleet autostop gpu-3 --idle 10s   # gpu-3 (RunPod) has no GPU: idle when nobody is logged in"
gpufleet autostop gpu-3 --idle 10s
show gpufleet shutdown ls
gpufleet shutdown ls || true
show "tests/harness/fleet break gpu-1 refuse; ... break gpu-3 refuse   # the laptop closes: nothing reaches them"
fleet break gpu-1 refuse
fleet break gpu-3 refuse
until_ok "the watchers on gpu-1 and gpu-3" 120 stopped gpu-1 gpu-3
show "tests/harness/fleet status   # both stopped by their watchers"
fleet status
show "cat FLEET/instances/gpu-{1,3}/calls.log   # what the fake platform tools were asked"
awk -F'\t' '{ print "  " $1 " " $2 ($1 == "wall" ? "<<< " $8 : "") }' \
    "$(idir gpu-1)/calls.log" "$(idir gpu-3)/calls.log"
show "tests/harness/fleet start gpu-1; ... start gpu-3   # the platform starts them; the laptop opens"
fleet start gpu-1
fleet start gpu-3
gpufleet status gpu-1,gpu-3 >/dev/null || true
show gpufleet events gpu-1,gpu-3
gpufleet events gpu-1,gpu-3
show gpufleet ledger gpu-1
gpufleet ledger gpu-1

# A stop method with a typo: the stop is requested, its command fails, the
# watcher retries (here after 1 s and 2 s instead of 30 s and 2 min) and
# gives up; the books never say stopped, and status says why. Fixed, the
# next stop works and is booked once gpu-1 is seen down.
fleet setenv gpu-1 GPUFLEET_AGENT_STOP_BACKOFF=1,2
show "gpufleet set gpu-1 stop_command='remote:shutdwn -h now'   # a typo"
gpufleet set gpu-1 'stop_command=remote:shutdwn -h now'
show gpufleet shutdown gpu-1 --now --warn 0
gpufleet shutdown gpu-1 --now --warn 0
until_ok "the watcher on gpu-1 to give up" 60 grep -q '"event":"stop_failed"' \
    "$(idir gpu-1)/home/.cache/gpufleet/journal.jsonl"
show "gpufleet status gpu-1   # still up and billing: the alert says the stop failed"
gpufleet status gpu-1 || true
show "gpufleet set gpu-1 stop_command='remote:shutdown -h now'   # fixed"
gpufleet set gpu-1 'stop_command=remote:shutdown -h now'
show gpufleet shutdown gpu-1 --now --warn 0
gpufleet shutdown gpu-1 --now --warn 0
until_ok "gpu-1 to stop" 60 stopped gpu-1
show "gpufleet status gpu-1   # seen down after the request: stopped, by gpufleet, from the request"
gpufleet status gpu-1 || true
show "gpufleet ledger gpu-1"
gpufleet ledger gpu-1
fleet setenv gpu-1
fleet start gpu-1
gpufleet status gpu-1 >/dev/null || true

# Schedules: every night at 02:00 Shanghai time stop the training boxes
# unless they are busy. The occurrences are armed on each watcher, so they
# fire with the laptop closed. The test clock makes a cron minute last one
# second, set so that tonight's 02:00 comes about 20 s from now.
t2=$(TZ=Asia/Shanghai date -d 'tomorrow 02:00' +%s)
export GPUFLEET_TEST_CRON_MINUTE=1@$(( (60 * ($(date +%s) + 20) - t2) / 59 ))
show "gpufleet schedule add @train --cron '0 2 * * *' --tz Asia/Shanghai --do shutdown --unless-busy --warn 0 --name nightly"
gpufleet schedule add @train --cron '0 2 * * *' --tz Asia/Shanghai --do shutdown \
    --unless-busy --warn 0 --name nightly
show "gpufleet schedule ls   # NEXT: when it really fires (the test clock puts 02:00 there)"
gpufleet schedule ls
echo "gpu-2's job is done (its GPUs go idle); gpu-1 still trains (97 %)"
awk -F', ' 'BEGIN { OFS = ", " } { $4 = 0; $6 = 0; print }' \
    "$(idir gpu-2)/gpu/query-gpu.csv" >"$(idir gpu-2)/gpu/idle.csv"
mv "$(idir gpu-2)/gpu/idle.csv" "$(idir gpu-2)/gpu/query-gpu.csv"
rm -f "$(idir gpu-2)/gpu/query-apps.csv"
until_ok "02:00 in Shanghai (test clock)" 90 stopped gpu-2
show "tests/harness/fleet status   # gpu-2 stopped by its watcher; gpu-1 was busy"
fleet status
fleet start gpu-2
gpufleet status @train >/dev/null || true
show "gpufleet events @train --since -2m"
gpufleet events @train --since -2m
gpufleet schedule rm nightly >/dev/null || true

# A guard: warn when an instance costs more than 0.01 a day (the daemon
# evaluates guards after every poll; guard check does it now).
show gpufleet guard add gpu-1 --max-cost 0.01 --per day --do warn --name burn
gpufleet guard add gpu-1 --max-cost 0.01 --per day --do warn --name burn
show gpufleet guard check
gpufleet guard check || true
show gpufleet guard ls
gpufleet guard ls

# The daemon: what needs the laptop (batch commands, key rotations, guards)
# runs there; here an exec schedule every 10 cron minutes (10 s).
mkdir -p "$XDG_CONFIG_HOME/gpufleet"
# A webhook receiver on 127.0.0.1 stands for Slack, Feishu, DingTalk or ntfy.
python3 "$top/tests/harness/hookrecv.py" --port-file "$work/hook.port" \
    --log "$work/hook.log" &
hook=$!
for _ in $(seq 50); do [ -s "$work/hook.port" ] && break; sleep 0.1; done
# The dashboard on a free port (9464, the default, may be taken here).
web=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
cat >"$XDG_CONFIG_HOME/gpufleet/config.ini" <<EOF
[daemon]
poll_interval = 5
listen = 127.0.0.1:$web

[notify.phone]
url = http://127.0.0.1:$(cat "$work/hook.port")/hook
format = json
events = job_finished job_failed stopped
from_instances = yes
EOF
show "cat config.ini   # [notify.phone]: where messages go"
sed 's/^/  /' "$XDG_CONFIG_HOME/gpufleet/config.ini"
show "gpufleet schedule add @train --cron '*/10 * * * *' --do exec --name disk -- df -h /"
gpufleet schedule add @train --cron '*/10 * * * *' --do exec --name disk -- df -h /
show gpufleet daemon --detach
started=$(gpufleet daemon --detach)
echo "$started"
pid=$(printf '%s' "$started" | sed -n 's/.*pid \([0-9]*\).*/\1/p')
echo "the dashboard: http://127.0.0.1:$web/ (the JSON API under /api/v1/)"
show "curl -s http://127.0.0.1:$web/api/v1/schedules | jq -r '.[].name'"
curl -s "http://127.0.0.1:$web/api/v1/schedules" | jq -r '.[].name'
show "curl -s http://127.0.0.1:$web/metrics | grep -m 3 '^gpufleet_gpu_utilization_ratio'   # for Prometheus"
# (read whole, then cut: grep -m quitting early made curl fail with 23)
curl -s "http://127.0.0.1:$web/metrics" >"$work/metrics.txt"
grep -m 3 '^gpufleet_gpu_utilization_ratio' "$work/metrics.txt"
printf 'waiting for the daemon to run the schedule'
for _ in $(seq 60); do
	gpufleet schedule ls --json | grep -Eq '"state": "(ok|failed)"' && break
	printf .
	sleep 1
done
echo
show gpufleet schedule ls
gpufleet schedule ls
show "gpufleet events --limit 4"
gpufleet events --limit 4
# Jobs: a short "training" on gpu-2 that stops its instance when it ends;
# the job outlives the SSH session. With from_instances the instance's
# watcher sends the messages itself (with its curl): the laptop may be
# closed by then.
job='for e in 1 2 3; do echo "epoch $e loss 0.$((9 - e))"; sleep 2; done'
show "gpufleet run gpu-2 --name train --then stop -- '$job'"
gpufleet run gpu-2 --name train --then stop -- "$job"
show gpufleet jobs @train
gpufleet jobs @train
show "gpufleet logs -f gpu-2   # follows the newest job until it ends, exits with its status"
rc=0
gpufleet logs -f gpu-2 || rc=$?
echo "(exit $rc)"
printf 'waiting for gpu-2 to stop after its job'
for _ in $(seq 60); do
	[ "$(fleet status | awk '$1 == "gpu-2" { print $3 }')" = stopped ] && break
	printf .
	sleep 1
done
echo
show "tests/harness/fleet status   # gpu-2 stopped itself when its job ended"
fleet status
printf 'waiting for the messages at the receiver'
for _ in $(seq 60); do
	[ -s "$work/hook.log" ] && [ "$(grep -c . "$work/hook.log")" -ge 2 ] && break
	printf .
	sleep 1
done
echo
show "the receiver got (the json format's text field):"
python3 -c 'import json, sys
for l in open(sys.argv[1]):
    print("  " + json.loads(json.loads(l)["body"])["text"])' "$work/hook.log"
fleet start gpu-2
show gpufleet jobs gpu-2 --all
gpufleet jobs gpu-2 --all || true
show "gpufleet events gpu-2 --since -1m"
gpufleet events gpu-2 --since -1m
show "kill -TERM $pid   # the daemon finishes what runs, records it, exits 0"
[ -n "$pid" ] && kill -TERM "$pid" 2>/dev/null || true
for _ in $(seq 30); do kill -0 "$pid" 2>/dev/null || break; sleep 1; done
tail -3 "$XDG_STATE_HOME/gpufleet/daemon.log"
unset GPUFLEET_TEST_CRON_MINUTE

# Giving a machine back: rm takes it out of gpufleet only, so it refuses
# while the ledger says the machine may still bill; stopped on the
# platform (here the sandbox) and marked so, it goes, its history kept;
# restore brings it back as it was.
show "gpufleet rm gpu-5   # refused: the platform would bill on with nothing watching"
gpufleet rm gpu-5 || true
fleet stop gpu-5
sleep 1 # the daemon's last answer from gpu-5 came before the stop is stated
show "tests/harness/fleet stop gpu-5; gpufleet mark gpu-5 stopped; gpufleet rm gpu-5"
gpufleet mark gpu-5 stopped
gpufleet rm gpu-5
show "gpufleet restore gpu-5   # back with its tags, prices, stop method and history"
gpufleet restore gpu-5

show "tests/harness/fleet down"
fleet down
D=""
echo "demo done: the sandbox fleet is stopped and the demo inventory removed."

#!/usr/bin/env bash
# The notifications gpufleet derives rather than reads from a journal, on
# the sandbox fleet: `stalled` (a real report whose progress file is old,
# once per stale streak, whoever reads it: status or the daemon),
# `key_reinjected` (a real rotation, then the old key put back as a
# platform does: status, keys check and exec see it, one message) and
# `release_deadline` (a stopped instance near its platform's release:
# advise, then the daemon's poll for a new stop). The daemon delivers
# each once to a local receiver (tests/harness/hookrecv.py, 127.0.0.1).
. "$(dirname "$0")/../e2e/lib.sh"
. "$(dirname "$0")/lib/watcher.sh"
. "$(dirname "$0")/lib/notify.sh"

fleet_up 2 --group-size 1
start_receiver
cat >"$XDG_CONFIG_HOME/gpufleet/config.ini" <<EOT
[status]
stale_progress_minutes = 30

[daemon]
poll_interval = 1
stop_grace = 2

[notify.hook]
url = http://127.0.0.1:$(cat "$T/port")/hook
format = json
events = stalled key_reinjected release_deadline
EOT
queued() { sql "SELECT count(*) FROM notify_msg WHERE kind = '$1'${2:+ AND instance = '$2'}"; }
at_least() { [ "$("${@:2}")" -ge "$1" ]; }

# --- stalled: inst-1's progress file is two hours old; inst-2 has none ----
h1=$(instance_dir inst-1)/home
mkdir -p "$h1/.gpufleet"
printf 'epoch 3 step 1200 loss 0.412\n' >"$h1/.gpufleet/progress"
touch -d '-2 hours' "$h1/.gpufleet/progress"
run status
expect_rc 0 "status"
run status inst-1
expect_eq "$(queued stalled inst-1)" 1 "stalled queued once for the streak"
expect_eq "$(queued stalled inst-2)" 0 "no progress file, no stalled"
expect_match "$(sql "SELECT text FROM notify_msg WHERE kind = 'stalled'")" \
    '^gpufleet: inst-1 is stalled: its progress file is unchanged for [12]h[0-9]{2}m \("epoch 3 step 1200 loss 0.412"\) at [0-9]{2}:[0-9]{2} UTC\. Next: gpufleet status inst-1$' \
    "the stalled message"
# Fresh progress: nothing; stale again (another mtime): a new streak.
printf 'epoch 4\n' >"$h1/.gpufleet/progress"
run status inst-1
expect_eq "$(queued stalled inst-1)" 1 "fresh progress queues nothing"
touch -d '-1 hour' "$h1/.gpufleet/progress"
run status inst-1
expect_eq "$(queued stalled inst-1)" 2 "stale again: a new streak"

# --- key_reinjected: rotate inst-2, then the platform puts the old key back -
run keys rotate inst-2
expect_rc 0 "rotate inst-2"
expect_eq "$(queued key_reinjected)" 0 "nothing back yet"
run status inst-2
expect_eq "$(queued key_reinjected)" 0 "a clean file queues nothing"
cat "$D/client/id_ed25519.pub" >>"$(instance_dir inst-2)/home/.ssh/authorized_keys"
run status inst-2
expect_rc 0 "status with a re-injected key"
expect_contains "$err" "inst-2: a key gpufleet took off is back" "status warns"
run keys check inst-2
expect_rc 1 "keys check finds it"
run exec inst-2 -- true
expect_rc 0 "exec"
expect_contains "$err" "inst-2: a key gpufleet took off is back" "exec warns"
expect_eq "$(queued key_reinjected inst-2)" 1 "key_reinjected once, whoever sees it"
fp=$(ssh-keygen -lf "$D/client/id_ed25519.pub" | awk '{ print $2 }')
expect_contains "$(sql "SELECT text FROM notify_msg WHERE kind = 'key_reinjected'")" \
    "gpufleet: inst-2 has a key gpufleet took off back in its authorized_keys (re-added by the platform?): ssh-ed25519 $fp (rotated) at " \
    "the message names the key"
expect_eq "$(sql "SELECT next FROM notify_msg WHERE kind = 'key_reinjected'")" \
    "gpufleet keys rotate inst-2 --revoke OLD.pub (a file holding that key)" "the next command"

# --- release_deadline: old-1 stopped 3 days, autodl releases after 4 -------
# (127.0.0.1:1 answers nothing: old-1 is never reached.)
run add old-1 127.0.0.1 --port 1 --provider autodl --price 2.69/h
backdate old-1 '10 days ago'
run mark old-1 running --at -10d
run mark old-1 stopped --at -3d
run advise old-1
expect_rc 0 "advise"
expect_eq "$(queued release_deadline)" 0 "no release rule yet"
run provider add autodl --release-after 4
expect_rc 0 "provider add --release-after"
run advise old-1
expect_match "$out" "old-1: stopped 3 days; autodl releases instances stopped 4 days" "advise says it"
run advise
expect_eq "$(queued release_deadline old-1)" 1 "release_deadline once per stopped period"
expect_match "$(sql "SELECT text FROM notify_msg WHERE kind = 'release_deadline'")" \
    '^gpufleet: old-1 will be released by autodl with its data on [0-9-]{10} [0-9:]{5} UTC \(stopped 3d00h; autodl releases instances stopped 4 days\) at [0-9:]{5} UTC\. Next: start it, or copy your data off before [0-9-]{10} [0-9:]{5} UTC$' \
    "the release_deadline message"
# Started and stopped again (a new period, released in a day): the daemon.
run mark old-1 running --at -50h
run mark old-1 stopped --at -49h
expect_rc 0 "mark old-1 stopped again"

"$GPUFLEET" daemon --listen none >>"$T/daemon.out" 2>&1 &
dpid=$!
cleanup_hooks=("kill -9 $dpid 2>/dev/null" "${cleanup_hooks[@]}")
wait_for 90 "the daemon queues the new period" at_least 2 queued release_deadline old-1
sent() { [ "$(sql "SELECT count(*) FROM notify_send WHERE state = 'sent'")" = "$1" ]; }
wait_for 60 "the daemon sent the five" sent 5
# The daemon's polls (stored before it looks at deadlines) read inst-1's
# stale file again: the same streak.
expect_eq "$(queued stalled inst-1)" 2 "the daemon's polls queue no stalled twice"
kill -TERM "$dpid"
wait "$dpid"
expect_eq "$?" 0 "the daemon stops"
expect_eq "$(jq -r .body "$T/hook.log" | jq -r .kind | sort | tr '\n' ' ')" \
    "key_reinjected release_deadline release_deadline stalled stalled " "one request per event"
expect_eq "$(sql "SELECT count(*) FROM notify_msg")" 5 "nothing else queued"

finish

#!/usr/bin/env bash
# Notifications from what gpufleet learns on the sandbox fleet, delivered
# by the daemon to a local receiver (tests/harness/hookrecv.py, plain HTTP
# on 127.0.0.1): a stop that did not stop (stop_failed, from the watcher's
# journal), a stop done while the laptop was away (stopped, learned when
# the instance is back), a changed host key (hostkey_changed, once however
# often it is met), and an instance the platform stopped behind gpufleet's
# back (host_down, from the daemon's held sessions; once per outage, a
# daemon restarted during it too). Each is queued once, whichever contact
# reads it.
. "$(dirname "$0")/../e2e/lib.sh"
. "$(dirname "$0")/lib/watcher.sh"
. "$(dirname "$0")/lib/notify.sh"

fleet_up 2 --group-size 1
start_receiver
cat >"$XDG_CONFIG_HOME/gpufleet/config.ini" <<EOT
[daemon]
poll_interval = 1
stop_grace = 2

[notify]
host_down_after = 2s

[notify.hook]
url = http://127.0.0.1:$(cat "$T/port")/hook/secret-token
format = json
events = stopped stop_failed hostkey_changed host_down

[notify.jobs]
url = http://127.0.0.1:$(cat "$T/port")/jobs
events = job_finished job_failed
EOT
queued() { sql "SELECT count(*) FROM notify_msg WHERE kind = '$1'${2:+ AND instance = '$2'}"; }
at_least() { [ "$("${@:2}")" -ge "$1" ]; }

# --- inst-1: the stop that did not stop ------------------------------------
run set inst-1 'stop_command=remote:shutdown -h now'
: >"$(instance_dir inst-1)/fake-stop-noop"
run shutdown inst-1 --now --warn 0 --json
expect_rc 0 "shutdown inst-1 --now"
id1=$(deadline_id)
wait_for 90 "inst-1: stop_failed journaled" has_event inst-1 stop_failed ".id == \"$id1\""
run status inst-1
expect_rc 0 "status reads the journal"
run status inst-1
expect_eq "$(queued stop_failed inst-1)" 1 "stop_failed queued once"
expect_eq "$(queued stopped inst-1)" 0 "a stop_result read from a running machine is no 'stopped'"
expect_match "$(sql "SELECT text FROM notify_msg WHERE kind = 'stop_failed'")" \
    "^gpufleet: inst-1 did not stop \\($id1\\): .* at [0-9]{2}:[0-9]{2} UTC\\. Next: gpufleet status inst-1$" \
    "the stop_failed message"
expect_eq "$(sql "SELECT group_concat(target) FROM notify_send s JOIN notify_msg m ON m.id = s.msg_id WHERE m.kind = 'stop_failed'")" \
    hook "queued for the target that takes it only"

# --- inst-2: stopped while away, learned when it is back --------------------
run set inst-2 provider=vast
fleet setenv inst-2 CONTAINER_ID=c-2 CONTAINER_API_KEY=vk-2
run shutdown inst-2 --now --warn 0 --json
expect_rc 0 "shutdown inst-2 --now"
id2=$(deadline_id)
wait_for 90 "inst-2 stopped by its watcher" is_state inst-2 stopped
fleet start inst-2
run status inst-2
expect_rc 0 "inst-2 answers again"
# The restarted watcher journals `stopped` once it has looked: read again.
stopped_queued() { run status inst-2; [ "$(queued stopped inst-2)" -ge 1 ]; }
wait_for 60 "inst-2: stopped queued" stopped_queued
run status inst-2
expect_eq "$(queued stopped inst-2)" 1 "stopped queued once"
expect_contains "$(sql "SELECT text FROM notify_msg WHERE kind = 'stopped'")" \
    "gpufleet: inst-2 was stopped ($id2) at" "the stopped message"

# --- inst-2: a changed host key ---------------------------------------------
fleet break inst-2 hostkey >/dev/null
run status inst-2
expect_rc 1 "a changed host key is refused"
run status inst-2
expect_eq "$(queued hostkey_changed inst-2)" 1 "hostkey_changed queued once for that key"
expect_contains "$(sql "SELECT next FROM notify_msg WHERE kind = 'hostkey_changed'")" \
    "gpufleet hostkey show inst-2" "the next command"

# --- the daemon delivers each once ------------------------------------------
"$GPUFLEET" daemon --listen none >>"$T/daemon.out" 2>&1 &
dpid=$!
cleanup_hooks=("kill -9 $dpid 2>/dev/null" "${cleanup_hooks[@]}")
sent() { [ "$(sql "SELECT count(*) FROM notify_send WHERE state = 'sent'")" = "$1" ]; }
wait_for 60 "the daemon sent the three" sent 3
started() { grep -q "daemon started: pid $1," "$XDG_STATE_HOME/gpufleet/daemon.log" 2>/dev/null; }
wait_for 60 "the daemon starts" started "$dpid"
# The platform stops inst-1 behind gpufleet's back: its held session dies.
fleet stop inst-1
wait_for 90 "host_down queued for inst-1" at_least 1 queued host_down inst-1
wait_for 60 "the daemon sent host_down" sent 4
expect_eq "$(queued host_down)" 1 "host_down once per outage, for inst-1 only"
expect_match "$(sql "SELECT text FROM notify_msg WHERE kind = 'host_down'")" \
    '^gpufleet: inst-1 is unreachable for [0-9]+s.* Next: gpufleet status inst-1$' "the host_down message"
# A daemon restarted during the outage: the same outage, no second host_down.
kill -TERM "$dpid"
wait "$dpid"
expect_eq "$?" 0 "the first daemon stops"
polled_at() { sql "SELECT t FROM last_status s JOIN instance i ON i.id = s.instance_id WHERE i.name = 'inst-1'"; }
later() { [ "$(polled_at)" -gt "$1" ]; }
t0=$(polled_at)
"$GPUFLEET" daemon --listen none >>"$T/daemon.out" 2>&1 &
dpid=$!
cleanup_hooks=("kill -9 $dpid 2>/dev/null" "${cleanup_hooks[@]}")
wait_for 60 "the second daemon starts" started "$dpid"
wait_for 60 "the second daemon polls inst-1" later "$t0"
# Well past host_down_after (2s) from its first poll, and one poll more: a
# daemon that keyed the outage by its own first sight would queue again.
t1=$(polled_at)
wait_for 60 "the second daemon polls inst-1 6s later" later $((t1 + 5))
wait_for 60 "and once more" later "$(polled_at)"
expect_eq "$(queued host_down)" 1 "host_down once per outage across a daemon restart"
hits() { grep -c '"path": "/hook/secret-token"' "$T/hook.log"; }
expect_eq "$(jq -r .body "$T/hook.log" | jq -r .kind | sort | tr '\n' ' ')" \
    "host_down hostkey_changed stop_failed stopped " "one request per event"
expect_eq "$(jq -r .body "$T/hook.log" | jq -r 'select(.kind == "stopped") | .instance')" inst-2 \
    "the json body names the instance"
kill -TERM "$dpid"
wait "$dpid"
expect_eq "$?" 0 "the daemon stops"
expect_eq "$(hits)" 4 "nothing more"

finish

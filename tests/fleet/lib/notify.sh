# shellcheck shell=bash
# Helpers for the notification fleet tests (tests/fleet/notify*.sh):
# sourced after tests/e2e/lib.sh and lib/watcher.sh.

export XDG_STATE_HOME="$T/state"
RECV=$GPUFLEET_SRC/tests/harness/hookrecv.py

# start_receiver: the local webhook receiver (tests/harness/hookrecv.py,
# plain HTTP on 127.0.0.1) logging to $T/hook.log; its port in $T/port.
start_receiver() {
	python3 "$RECV" --port-file "$T/port" --log "$T/hook.log" &
	rpid=$!
	cleanup_hooks=("kill -9 $rpid 2>/dev/null" "${cleanup_hooks[@]}")
	wait_for 30 "the receiver listens" test -s "$T/port"
	touch "$T/hook.log"
	mkdir -p "$XDG_CONFIG_HOME/gpufleet"
}

# Helpers of the exec tests that start gpufleet in the background.
# wait_exit PID WHAT: wait (60 s at most) for gpufleet (PID) to exit and
# set rc to its status; one that does not is a failure (killed, rc 137).
wait_exit() {
	local i
	checks=$((checks + 1))
	for ((i = 0; i < 300; i++)); do
		kill -0 "$1" 2>/dev/null || break
		sleep 0.2
	done
	if kill -0 "$1" 2>/dev/null; then
		fail "$2: still running after 60 s"
		kill -KILL "$1"
	fi
	wait "$1"
	rc=$?
}

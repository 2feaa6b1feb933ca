# shellcheck shell=bash
# bad MESSAGE ARGS...: `gpufleet shutdown ARGS...` is refused, exit 2, with
# that one line (tests/fleet/shutdown-pull.sh, deadline-pull.sh).
bad() {
	local want=$1
	shift
	run shutdown "$@"
	expect_rc 2 "refused: $*"
	expect_eq "$err" "gpufleet: shutdown: $want (try 'gpufleet shutdown --help')" "refused: $*: message"
}

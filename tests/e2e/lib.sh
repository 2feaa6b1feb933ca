# Shared helpers for end-to-end tests: they drive the built gpufleet binary
# against a throw-away database and configuration, like a user would.
# ctest sets GPUFLEET (the binary) and GPUFLEET_SRC; defaults fit a build/.

set -u
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
: "${GPUFLEET_SRC:=$(cd "$here/../.." && pwd)}"
: "${GPUFLEET:=$GPUFLEET_SRC/build/gpufleet}"
: "${GPUFLEET_HARNESS:=$GPUFLEET_SRC/tests/harness/fleet}"

T=$(mktemp -d /tmp/gpufleet-e2e.XXXXXX)
export HOME="$T/home" XDG_DATA_HOME="$T/data" XDG_CONFIG_HOME="$T/config"
mkdir -p "$HOME"
unset GPUFLEET_DB GPUFLEET_CONFIG GPUFLEET_DEBUG
export NO_COLOR=1
failures=0
checks=0
cleanup_hooks=()

cleanup() {
	local h
	for h in "${cleanup_hooks[@]}"; do eval "$h" || true; done
	rm -rf "$T"
}
trap cleanup EXIT

fail() {
	failures=$((failures + 1))
	printf 'FAIL: %s\n' "$*" >&2
}

# run ARGS...: run gpufleet, capturing stdout, stderr and the exit status.
run() {
	"$GPUFLEET" "$@" >"$T/out" 2>"$T/err"
	rc=$?
	out=$(cat "$T/out")
	err=$(cat "$T/err")
	return 0
}

# expect_rc N DESCRIPTION
expect_rc() {
	checks=$((checks + 1))
	if [ "$rc" != "$1" ]; then
		fail "$2: exit $rc, wanted $1 (stderr: $err)"
	fi
}

# expect_eq GOT WANT DESCRIPTION
expect_eq() {
	checks=$((checks + 1))
	if [ "$1" != "$2" ]; then
		fail "$3: got [$1] wanted [$2]"
	fi
}

# expect_match TEXT REGEX DESCRIPTION
expect_match() {
	checks=$((checks + 1))
	if ! printf '%s' "$1" | grep -Eq -- "$2"; then
		fail "$3: [$1] does not match /$2/"
	fi
}

# expect_contains TEXT FIXED_STRING DESCRIPTION
expect_contains() {
	checks=$((checks + 1))
	case $1 in
	*"$2"*) ;;
	*) fail "$3: [$1] does not contain [$2]" ;;
	esac
}

# expect_one_error_line DESCRIPTION: stderr is one line "gpufleet: ...".
expect_one_error_line() {
	checks=$((checks + 1))
	if [ "$(printf '%s\n' "$err" | wc -l)" != 1 ] ||
	    [ "${err#gpufleet: }" = "$err" ]; then
		fail "$1: stderr is not one 'gpufleet: ' line: [$err]"
	fi
}

# backdate NAME WHEN: record that instance NAME was added at WHEN (as
# `date -d` reads it: 2026-11-02T01:00:00Z, '10 days ago'), for tests that
# mark runs long before they add the instance: `mark --at` refuses times
# more than 7 days before the instance was added (LEDGER_BACKDATE_MAX).
backdate() {
	local t n
	t=$(date -u -d "$2" +%s) || { echo "backdate: bad time '$2'" >&2; exit 1; }
	n=$(sqlite3 "$XDG_DATA_HOME/gpufleet/fleet.db" \
	    "UPDATE instance SET created_at = $t WHERE name = '$1' AND
	    released_at IS NULL; SELECT changes()")
	[ "$n" = 1 ] || { echo "backdate: no instance '$1' in service" >&2; exit 1; }
}

# finish: print the summary line and exit with the result.
# lock_db: another process (sqlite3) takes the write lock of $db and holds
# it until unlock_db. It waits for the lock (.timeout); a BEGIN that
# failed ends it (-bail) rather than print the marker. 1: not taken.
lock_db() {
	local i
	mkfifo "$T/lock"
	sqlite3 -bail -cmd '.timeout 20000' "$db" <"$T/lock" >"$T/lock.out" 2>&1 &
	locker=$!
	cleanup_hooks+=("kill $locker 2>/dev/null")
	exec 7>"$T/lock"
	printf "BEGIN IMMEDIATE;\nSELECT 'lock held';\n" >&7
	for ((i = 0; i < 300; i++)); do
		grep -qx "lock held" "$T/lock.out" && return 0
		sleep 0.2
	done
	return 1
}
unlock_db() {
	printf 'COMMIT;\n' >&7
	exec 7>&-
	wait "$locker"
	rm -f "$T/lock"
}

finish() {
	printf '%d passed, %d failed\n' $((checks - failures)) "$failures"
	[ "$failures" = 0 ]
}

# fleet_up N [harness up options]: start N sandbox instances behind real
# sshd on 127.0.0.1 and import them into this test's inventory. Sets D (the
# fleet directory). The fleet goes down when the test exits. (It lives on
# 127.0.0.1, a loopback address that import skips unless --match names it.)
# With FLEET_NO_IMPORT set it is started but not imported.
fleet() { bash "$GPUFLEET_HARNESS" -d "$D" "$@"; }
fleet_up() {
	local base=${FLEET_BASE:-/var/lib/gpufleet-test}
	[ "$(id -u)" = 0 ] || base=${XDG_STATE_HOME:-$HOME/.local/state}/gpufleet-harness
	mkdir -p "$base/fleets"
	D=$(mktemp -d "$base/fleets/t.XXXXXX")
	chmod 755 "$D"
	rmdir "$D"
	cleanup_hooks+=("bash '$GPUFLEET_HARNESS' -d '$D' down")
	bash "$GPUFLEET_HARNESS" -d "$D" up "$@" --owner $$ ||
	    { echo "fleet up failed" >&2; exit 1; }
	[ -z "${FLEET_NO_IMPORT:-}" ] || return 0
	"$GPUFLEET" import "$D/ssh_config" --match "*" >/dev/null ||
	    { echo "import failed" >&2; exit 1; }
}

# instance_dir NAME: the sandbox directory of one instance.
instance_dir() { awk -v n="$1" '$1 == n { print $4 }' "$D/instances.tsv"; }

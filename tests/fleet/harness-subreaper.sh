#!/usr/bin/env bash
# The harness's FLEET_SUBREAPER (tests/harness/fleet --help): every sshd
# listener runs in the foreground under tests/harness/subreaper, so a
# process a session leaves behind is reparented to its listener, not to
# pid 1 (what lets bench/exec.sh count all of a login's server CPU). Also
# after a SIGHUP re-exec (an instance moved to an sshd of its own), a
# stop and start, and `down` leaves no listener.
. "$(dirname "$0")/../e2e/lib.sh"
. "$(dirname "$0")/lib/watcher.sh"
[ -x "${GPUFLEET_SUBREAPER:-}" ] || { echo "FAIL: GPUFLEET_SUBREAPER is not set (ctest sets it)" >&2; exit 1; }
export FLEET_SUBREAPER=$GPUFLEET_SUBREAPER
FLEET_NO_IMPORT=1 fleet_up 2

listener() { fleet status | awk -v n="$1" '$1 == n { print $4 }'; }
ppid_of() { awk '{ sub(/.*\) /, ""); print $2 }' "/proc/$1/stat" 2>/dev/null; }
# running PID: alive and not a zombie (waiting to be reaped).
running() { case $(awk '{ sub(/.*\) /, ""); print $1 }' "/proc/$1/stat" 2>/dev/null) in "" | Z | X) return 1 ;; esac; }
# orphan NAME: a login that leaves a sleep behind; its pid.
orphan() {
	ssh -F "$D/ssh_config" "$1" 'sleep 120 </dev/null >/dev/null 2>&1 & echo $!'
}
# adopted NAME: a left-behind process's parent is NAME's listener.
adopted() {
	local l p
	l=$(listener "$1")
	p=$(orphan "$1")
	cleanup_hooks+=("kill $p 2>/dev/null")
	reparented() { [ "$(ppid_of "$p")" = "$l" ]; }
	wait_for 30 "$1's orphan $p is reparented to its listener $l (now $(ppid_of "$p"))" reparented
}

l1=$(listener inst-1)
expect_match "$l1" '^[0-9]+$' "inst-1 has a listener"
expect_eq "$(listener inst-2)" "$l1" "both instances share one sshd"
expect_contains "$(tr '\0' ' ' <"/proc/$l1/cmdline")" " -D" "the listener runs in the foreground"
adopted inst-1

# inst-1's first stop moves it to an sshd of its own; the shared one
# re-executes itself on SIGHUP and stays a subreaper.
fleet stop inst-1
expect_eq "$(fleet status | awk '$1 == "inst-1" { print $3 }')" stopped "inst-1 stopped"
fleet start inst-1
expect_eq "$(fleet status | awk '$1 == "inst-1" { print $3 }')" ok "inst-1 started"
expect_eq "$(listener inst-2)" "$l1" "inst-2's sshd is the same process after its SIGHUP"
checks=$((checks + 1))
[ "$(listener inst-1)" != "$l1" ] || fail "inst-1 did not move to an sshd of its own"
adopted inst-2
adopted inst-1

pids="$(listener inst-1) $(listener inst-2)"
fleet down
for p in $pids; do
	checks=$((checks + 1))
	! running "$p" || fail "listener $p still runs after down"
done
finish

#!/usr/bin/env bash
# `push` killed (SIGKILL) at each of its steps (GPUFLEET_TEST_CRASH_AT):
# xfer:1, its ssh_config written, nothing started; xfer:2, the transfer
# under way. The source is untouched, every file on the instance is either
# absent or whole (a part only in rsync's partial directory), a rerun
# completes the push, and it removes the ssh_config directory the killed
# run left in TMPDIR. (pushpull.sh kills a pull half way.)
. "$(dirname "$0")/../e2e/lib.sh"
export GPUFLEET_NO_PROGRESS=1
export TMPDIR=$T/tmp
mkdir -p "$TMPDIR"

fleet_up 1
home=$(instance_dir inst-1)/home
# sums DIR: every file's checksum, sorted (rsync's partial directory aside).
sums() {
	(cd "$1" && find . -type f ! -path './.gpufleet-partial/*' -print0 |
	    sort -z | xargs -0 -r sha256sum)
}
run status
expect_rc 0 "status pins the host key"
src=$T/src
mkdir -p "$src/d"
head -c 8388608 /dev/urandom >"$src/big"
printf 'small\n' >"$src/d/small"
want=$(sums "$src")

for point in xfer:1 xfer:2; do
	rm -rf "$home/dst"
	(GPUFLEET_TEST_CRASH_AT=$point "$GPUFLEET" push inst-1 "$src/" '~/dst' \
	    >"$T/out" 2>"$T/err") 2>/dev/null
	rc=$?
	expect_rc 137 "push: SIGKILL at $point"
	# what it started (rsync, ssh) ends once its parent is gone
	for ((i = 0; i < 300; i++)); do
		pgrep -f -- "$TMPDIR/gpufleet-xfer" >/dev/null || break
		sleep 0.2
	done
	expect_eq "$(sums "$src")" "$want" "push killed at $point: the source is untouched"
	if [ -d "$home/dst" ]; then
		checks=$((checks + 1))
		sums "$home/dst" | while read -r sum f; do
			grep -qxF -- "$sum  $f" <<<"$want" || echo "$f"
		done | grep . && fail "push killed at $point: a file on the instance is partial"
	fi
	checks=$((checks + 1))
	ls -d "$TMPDIR"/gpufleet-xfer.* >/dev/null 2>&1 ||
	    fail "push killed at $point left no ssh_config directory (is the kill where it should be?)"
	run push inst-1 "$src/" '~/dst'
	expect_rc 0 "the push rerun after a kill at $point"
	expect_eq "$(sums "$home/dst")" "$want" "the rerun completes the push (kill at $point)"
	expect_eq "$(ls -A "$TMPDIR")" "" "the rerun removed what the killed push left in TMPDIR ($point)"
done

finish

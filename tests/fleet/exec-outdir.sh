#!/usr/bin/env bash
# gpufleet exec -o DIR: files are made only where nobody else can plant a
# link or a file, never through a symbolic link, and a write that fails (a
# full disk) makes that host's result an error, never "ok".
. "$(dirname "$0")/../e2e/lib.sh"
export GPUFLEET_NO_PROGRESS=1

fleet_up 3

# ran NAME TAG: did a command that touched $HOME/TAG run on NAME?
ran() { [ -e "$(instance_dir "$1")/home/$2" ]; }

# --- a symbolic link planted in DIR is refused; its target is untouched --
mkdir -m 0755 "$T/odir"
printf 'precious\n' >"$T/victim"
ln -s "$T/victim" "$T/odir/inst-1.out"
run exec inst-1 -o "$T/odir" -- 'touch $HOME/ran-link; echo overwritten'
expect_rc 2 "a link in DIR"
expect_one_error_line "a link in DIR"
expect_contains "$err" "cannot write $T/odir/inst-1.out: it is a symbolic link" \
    "names the link"
expect_eq "$(cat "$T/victim")" precious "the link's target is untouched"
checks=$((checks + 1))
! ran inst-1 ran-link || fail "the command ran although DIR was refused"
rm "$T/odir/inst-1.out"

# --- a hard link to another file is refused too ---------------------------
ln "$T/victim" "$T/odir/inst-1.err"
run exec inst-1 -o "$T/odir" -- echo overwritten
expect_rc 2 "a hard link in DIR"
expect_contains "$err" "cannot write $T/odir/inst-1.err: not a regular file" \
    "names the hard link"
expect_eq "$(cat "$T/victim")" precious "the hard link's file is untouched"
rm "$T/odir/inst-1.err"

# --- a stale file of ours is overwritten from the start -------------------
head -c 10000 /dev/zero >"$T/odir/inst-1.out"
run exec inst-1 -o "$T/odir" -- echo fresh
expect_rc 0 "a stale file"
expect_eq "$(cat "$T/odir/inst-1.out")" fresh "the stale file is replaced"

# --- DIR writable by others (not sticky) or owned by another user ---------
mkdir -m 0775 "$T/shared"
chmod 0775 "$T/shared"
run exec inst-1 -o "$T/shared" -- 'touch $HOME/ran-shared'
expect_rc 2 "a group-writable DIR"
expect_one_error_line "a group-writable DIR"
expect_contains "$err" "refusing output directory $T/shared: writable by others (mode 0775) and not sticky" \
    "names the mode"
checks=$((checks + 1))
! ran inst-1 ran-shared || fail "the command ran in a group-writable DIR"
expect_eq "$(ls -A "$T/shared")" "" "nothing made in the refused DIR"
chmod 1777 "$T/shared"
run exec inst-1 -o "$T/shared" -- echo sticky
expect_rc 0 "a sticky world-writable DIR (as /tmp)"
expect_eq "$(cat "$T/shared/inst-1.out")" sticky "written in the sticky DIR"
if [ "$(id -u)" = 0 ]; then
	mkdir -m 0755 "$T/theirs"
	chown nobody "$T/theirs"
	run exec inst-1 -o "$T/theirs" -- 'touch $HOME/ran-theirs'
	expect_rc 2 "a DIR owned by another user"
	expect_match "$err" "refusing output directory $T/theirs: owned by uid [0-9]+, not by you" \
	    "names the owner"
	checks=$((checks + 1))
	! ran inst-1 ran-theirs || fail "the command ran in another user's DIR"
else
	echo "note: not root: the test of a DIR owned by another user is skipped" >&2
fi

# --- a full disk makes the host's result an error -------------------------
mkdir "$T/tiny"
if mount -t tmpfs -o size=64k,mode=0755 tmpfs "$T/tiny" 2>"$T/mount.err"; then
	cleanup_hooks+=("umount '$T/tiny'")
	run exec 'inst-1,inst-2' -o "$T/tiny" -- head -c 1048576 /dev/zero
	expect_rc 1 "a full disk"
	expect_contains "$err" "inst-1: cannot write $T/tiny/inst-1.out: No space left on device" \
	    "inst-1 names the failed write"
	expect_contains "$err" "inst-2: cannot write $T/tiny/inst-2.out: No space left on device" \
	    "inst-2 names the failed write"
	expect_contains "$err" "2 hosts: 0 ok, 0 exit non-zero, 2 failed (write_error 2)" \
	    "the summary counts write errors"
	umount "$T/tiny"
	mount -t tmpfs -o size=64k,mode=0755 tmpfs "$T/tiny"
	run exec inst-3 -o "$T/tiny" -- echo small
	expect_rc 0 "what fits is ok"
	expect_eq "$(cat "$T/tiny/inst-3.out")" small "small output written"
else
	echo "SKIP: cannot mount a tmpfs here ($(cat "$T/mount.err")): the full-disk test did not run" >&2
fi

finish

#!/usr/bin/env bash
# push and pull on the sandbox fleet: a tree with nested directories, a
# symbolic link, names with spaces and non-ASCII and an 8 MiB file arrives
# with the same checksums both ways; --json counts; --dry-run sends nothing;
# --delete only when asked; a pull killed half way keeps its part and the
# rerun completes it; an instance without rsync gets a tar stream; a changed
# host key refuses the transfer; bad input and a missing local rsync.
# The issue's 100 MB file makes one round trip of its own (push, then pull
# back by rsync, and a push by the tar stream); the other cases use 8 MiB.
. "$(dirname "$0")/../e2e/lib.sh"
export GPUFLEET_NO_PROGRESS=1

fleet_up 3
home_of() { printf '%s/home' "$(instance_dir "$1")"; }
# sums DIR: every file's checksum and every link's target, sorted.
sums() {
	(cd "$1" && find . -type f ! -path './.gpufleet-partial/*' -print0 |
	    sort -z | xargs -0 sha256sum &&
	    find . -type l -printf '%p -> %l\n' | sort)
}
run status
expect_rc 0 "status pins the host keys"

src=$T/src
mkdir -p "$src/a/b c/ü"
printf 'hi\n' >"$src/a/b c/ü/f"
printf 'x\n' >"$src/name with space é.txt"
ln -s 'b c/ü/f' "$src/a/link"
head -c 8388608 /dev/urandom >"$src/big"

# --- push: the tree arrives whole on every instance ------------------------
run push 'inst-1,inst-2' --json "$src/" '~/dst'
expect_rc 0 "push"
# files 3 (f, the .txt, big); bytes 3 + 2 + 8388608 = 8388613 (a link is
# not a regular file, rsync counts its content apart)
expect_eq "$(printf '%s' "$out" | jq -c '[.files, .bytes, .failed]')" \
    '[6,16777226,0]' "--json totals: 2 x 3 files, 2 x 8388613 bytes"
expect_eq "$(printf '%s' "$out" | jq -c '[.instances[] | [.name, .result, .method, .files, .bytes]]')" \
    '[["inst-1","ok","rsync",3,8388613],["inst-2","ok","rsync",3,8388613]]' \
    "--json per instance"
# duration_ms and rate, the run's and each instance's: numbers >= 0, the
# rate the bytes per second of duration_ms (0 when it took no time).
expect_eq "$(printf '%s' "$out" | jq -c '[., .instances[]] |
    map(.duration_ms, .rate | type == "number" and . >= 0) | all')" \
    true "--json: duration_ms and rate are numbers >= 0"
expect_eq "$(printf '%s' "$out" | jq -c '[., .instances[]] |
    map(if .duration_ms > 0
        then (.rate - .bytes * 1000 / .duration_ms) as $d |
            (if $d < 0 then -$d else $d end) <= 1 + .rate / 100
        else .rate == 0 end) | all')" \
    true "--json: rate is bytes / duration_ms"
expect_eq "$(sums "$(home_of inst-1)/dst")" "$(sums "$src")" "inst-1 has the tree (checksums, link)"
expect_eq "$(sums "$(home_of inst-2)/dst")" "$(sums "$src")" "inst-2 has the tree"
expect_eq "$(readlink "$(home_of inst-1)/dst/a/link")" 'b c/ü/f' "the link is a link"

run push inst-1 "$src/" '~/dst'
expect_rc 0 "push again"
expect_eq "$out" "inst-1: pushed 0 files, 0 B in $(printf '%s' "$out" | sed -n 's/.* in \([0-9.]*\) s .*/\1/p') s (0 B/s)" \
    "nothing changed: nothing sent"

# --- pull: LOCAL_DIR/NAME/ per instance -------------------------------------
run pull 'inst-1,inst-2' '~/dst' "$T/back"
expect_rc 0 "pull"
expect_eq "$(sums "$T/back/inst-1/dst")" "$(sums "$src")" "pulled inst-1's tree"
expect_eq "$(sums "$T/back/inst-2/dst")" "$(sums "$src")" "pulled inst-2's tree"
expect_eq "$(stat -c %a "$T/back/inst-1")" 700 "LOCAL_DIR/NAME made 0700"

# --- --dry-run and --delete -------------------------------------------------
printf 'extra\n' >"$(home_of inst-1)/dst/extra"
printf 'new\n' >"$src/new"
run push inst-1 --dry-run "$src/" '~/dst'
expect_rc 0 "push --dry-run"
expect_eq "$out" "inst-1: dry run: would send 1 file, 4 B" "dry run says what it would send"
checks=$((checks + 1))
[ -e "$(home_of inst-1)/dst/new" ] && fail "--dry-run sent a file"
run push inst-1 "$src/" '~/dst'
expect_eq "$(cat "$(home_of inst-1)/dst/extra" 2>&1)" extra "no --delete: the extra file stays"
run push inst-1 --delete "$src/" '~/dst'
expect_rc 0 "push --delete"
checks=$((checks + 1))
[ -e "$(home_of inst-1)/dst/extra" ] && fail "--delete left the extra file"
rm "$src/new"

# --- at most -f N transfers at once ----------------------------------------
# A local rsync that holds a file in $T/conc while it runs and logs how
# many are there when it starts and once it has slept a little.
wrap=$T/wrap
mkdir "$wrap" "$T/conc"
cat >"$wrap/rsync" <<WRAP
#!/bin/sh
touch "$T/conc/\$\$"
ls "$T/conc" | wc -l >>"$T/conc.log"
sleep 0.3
ls "$T/conc" | wc -l >>"$T/conc.log"
$(command -v rsync) "\$@"
rc=\$?
rm -f "$T/conc/\$\$"
exit \$rc
WRAP
chmod 755 "$wrap/rsync"
PATH=$wrap:$PATH "$GPUFLEET" push 'inst-1,inst-2,inst-3' -f 1 "$src/a" '~/conc' >"$T/out" 2>"$T/err"
rc=$? err=$(cat "$T/err")
expect_rc 0 "push -f 1"
expect_eq "$(wc -l <"$T/conc.log")" 6 "-f 1: rsync ran once per instance"
expect_eq "$(sort -n "$T/conc.log" | tail -1)" 1 "-f 1: one rsync at a time"
rm "$T/conc.log"
PATH=$wrap:$PATH "$GPUFLEET" push 'inst-1,inst-2,inst-3' "$src/a" '~/conc' >"$T/out" 2>"$T/err"
rc=$? err=$(cat "$T/err")
expect_rc 0 "push with the default fanout"
expect_eq "$(wc -l <"$T/conc.log")" 6 "default fanout: rsync ran once per instance"
checks=$((checks + 1))
[ "$(sort -n "$T/conc.log" | tail -1)" -le 4 ] || fail "default fanout: more than 4 at once"
rm -rf "$wrap" "$T/conc" "$T/conc.log"

# --- a pull killed half way resumes ----------------------------------------
# inst-3's rsync sends at 1000 KiB/s: the 8 MiB file takes about 8 s.
cp "$src/big" "$(home_of inst-3)/big"
bin3=$(instance_dir inst-3)/bin
printf '#!/bin/sh\nexec /usr/bin/rsync --bwlimit=1000 "$@"\n' >"$bin3/rsync"
chmod 755 "$bin3/rsync"
"$GPUFLEET" pull inst-3 '~/big' "$T/res" >"$T/kill.out" 2>&1 &
pid=$!
got=0
for _ in $(seq 1 300); do # until 2 MiB arrived (30 s at most)
	f=$(find "$T/res/inst-3" -name '.big.*' 2>/dev/null | head -1)
	if [ -n "$f" ] && [ "$(stat -c %s "$f" 2>/dev/null || echo 0)" -ge 2097152 ]; then
		got=1
		break
	fi
	sleep 0.1
done
expect_eq "$got" 1 "the slow pull got under way"
kill -TERM "$pid"
wait "$pid"
rc=$? err=$(cat "$T/kill.out")
expect_rc 130 "pull interrupted"
expect_contains "$err" "inst-3: failed: interrupted" "the instance's result says so"
checks=$((checks + 1))
[ -e "$T/res/inst-3/big" ] && fail "a half-written file has the final name"
part=$(stat -c %s "$T/res/inst-3/.gpufleet-partial/big" 2>/dev/null || echo 0)
checks=$((checks + 1))
[ "$part" -ge 2097152 ] && [ "$part" -lt 8388608 ] ||
    fail "the part kept in .gpufleet-partial/ is $part bytes"
rm "$bin3/rsync"
run pull inst-3 --json '~/big' "$T/res"
expect_rc 0 "the pull run again"
expect_eq "$(sha256sum <"$T/res/inst-3/big")" "$(sha256sum <"$src/big")" "resumed file is whole"
checks=$((checks + 1))
[ -e "$T/res/inst-3/.gpufleet-partial" ] && fail "the partial dir stayed"

# --- a 100 MB file there and back -----------------------------------------
head -c 104857600 /dev/urandom >"$T/huge"
want=$(sha256sum <"$T/huge")
run push inst-1 "$T/huge" '~/huge'
expect_rc 0 "push of 100 MB"
expect_eq "$(sha256sum <"$(home_of inst-1)/huge/huge")" "$want" "100 MB pushed whole"
run pull inst-1 '~/huge/huge' "$T/hugeback"
expect_rc 0 "pull of 100 MB"
expect_eq "$(sha256sum <"$T/hugeback/inst-1/huge")" "$want" "100 MB pulled whole"
rm -rf "$(home_of inst-1)/huge" "$T/hugeback"

# --- no rsync on the instance: a tar stream --------------------------------
# inst-2's PATH holds every tool of /usr/bin but rsync.
nr=$(instance_dir inst-2)/norsync
mkdir "$nr"
# (one ln for them all; a name in both, the first: /usr/bin's)
ln -s /usr/bin/* /bin/* "$nr/" 2>/dev/null
rm -f "$nr/rsync"
checks=$((checks + 1))
[ -L "$nr/tar" ] && [ ! -e "$nr/rsync" ] || fail "the PATH without rsync is not as wanted"
fleet setenv inst-2 "PATH=$nr"
run push inst-2 "$src/a" "$src/big" '~/tarred'
expect_rc 0 "push by tar"
expect_eq "$out" "inst-2: pushed 2 files, 8.0 MiB in $(printf '%s' "$out" | sed -n 's/.* in \([0-9.]*\) s .*/\1/p') s ($(printf '%s' "$out" | sed -n 's/.*s (\(.*\)\/s).*/\1/p')/s) by tar stream (no rsync on the instance)" \
    "the output says tar was used"
expect_eq "$(sums "$(home_of inst-2)/tarred/a")" "$(sums "$src/a")" "tar push: nested dirs, link, names"
expect_eq "$(sha256sum <"$(home_of inst-2)/tarred/big")" "$(sha256sum <"$src/big")" "tar push: the big file"
expect_eq "$(find "$(home_of inst-2)/tarred" -name '.gpufleet-xfer.*' | wc -l)" 0 "no temporary directory left"
run push inst-2 "$T/huge" '~/tarhuge'
expect_rc 0 "push of 100 MB by tar"
expect_eq "$(sha256sum <"$(home_of inst-2)/tarhuge/huge")" "$want" "100 MB by tar, whole"
rm -rf "$(home_of inst-2)/tarhuge" "$T/huge"
# --delete cannot be honoured by tar: that instance fails, the others go on
printf 'extra\n' >"$(home_of inst-2)/tarred/extra"
run push 'inst-1,inst-2' --delete "$src/a" '~/deltar'
expect_rc 1 "push --delete to an instance without rsync"
expect_contains "$out" "inst-2: failed: --delete needs rsync on the instance (the tar stream cannot delete)" \
    "--delete is refused by tar, with why"
expect_contains "$out" "inst-1: pushed 1 file" "the instance with rsync goes on"
checks=$((checks + 1))
[ -e "$(home_of inst-2)/deltar" ] && fail "a copy by tar without the deletion asked for"
run push inst-2 --delete --dry-run "$src/a" '~/deltar'
expect_rc 1 "push --delete --dry-run to an instance without rsync"
expect_eq "$out" "inst-2: failed: --delete needs rsync on the instance (the tar stream cannot delete)" \
    "a dry run says the same"
run pull inst-2 --delete '~/tarred/' "$T/deltar"
expect_rc 1 "pull --delete from an instance without rsync"
expect_eq "$out" "inst-2: failed: --delete needs rsync on the instance (the tar stream cannot delete)" \
    "pull --delete is refused by tar"
expect_eq "$(find "$T/deltar/inst-2" -mindepth 1 | wc -l)" 0 "and nothing arrives"
rm "$(home_of inst-2)/tarred/extra"
# '~' is the login directory, as for rsync
printf 'home\n' >"$T/athome"
run push inst-2 "$T/athome" '~'
expect_rc 0 "push by tar to ~"
expect_eq "$(cat "$(home_of inst-2)/athome" 2>&1)" home "push by tar to ~ lands in the login directory"
checks=$((checks + 1))
[ -e "$(home_of inst-2)/~" ] && fail "push by tar to ~ made a directory named ~"
run pull inst-2 '~' "$T/tilde"
expect_rc 0 "pull by tar of ~"
expect_eq "$(cat "$T/tilde/inst-2/athome" 2>&1)" home "pull by tar of ~ brings the login directory's content"
rm -rf "$(home_of inst-2)/athome" "$T/tilde"
# progress counts the tar stream: the instance's tar ends 2 s after its
# work, so the lines drawn meanwhile show what passed
rm "$nr/tar"
printf '#!/bin/sh\n%s "$@"\nrc=$?\nsleep 2\nexit $rc\n' "$(command -v tar)" >"$nr/tar"
chmod 755 "$nr/tar"
tty_run() {
	script -qec "env -u GPUFLEET_NO_PROGRESS $(printf '%q ' "$GPUFLEET" "$@")" /dev/null </dev/null |
	    tr '\r' '\n' >"$T/tty.out"
}
tty_run push inst-2 "$src/big" '~/prog'
expect_match "$(cat "$T/tty.out")" 'inst-2: \(tar\) [1-9][0-9.]* [KM]iB +[0-9]+% ' \
    "push by tar: progress counts the bytes sent"
expect_match "$(cat "$T/tty.out")" 'inst-2: pushed 1 file, 8.0 MiB' "and the push ends"
tty_run pull inst-2 '~/prog/' "$T/prog"
expect_match "$(cat "$T/tty.out")" 'inst-2: \(tar\) [1-9][0-9.]* [KM]iB +[0-9]+% ' \
    "pull by tar: progress counts the bytes received"
expect_eq "$(sha256sum <"$T/prog/inst-2/big")" "$(sha256sum <"$src/big")" "and the pull is whole"
rm -rf "$(home_of inst-2)/prog" "$T/prog" "$nr/tar"
ln -s "$(command -v tar)" "$nr/tar"
run pull inst-2 --json '~/tarred/' "$T/tarback"
expect_rc 0 "pull by tar"
expect_eq "$(printf '%s' "$out" | jq -c '.instances[0] | [.method, .files, .bytes]')" \
    '["tar",2,8388611]' "tar pull: 2 files, 3 + 8388608 bytes"
expect_eq "$(sums "$T/tarback/inst-2" | sort)" "$( (cd "$(home_of inst-2)/tarred" && sums .) | sort)" \
    "tar pull: what the instance has"
expect_eq "$(find "$T/tarback/inst-2" -name '.gpufleet-xfer.*' | wc -l)" 0 "no temporary directory left here"
# a stream cut short leaves nothing under a final name
run pull inst-2 '~/tarred/' '~/nothere' "$T/tarfail"
expect_rc 1 "pull of a missing path by tar fails"
expect_match "$out" "^inst-2: failed: " "with a reason"
expect_eq "$(find "$T/tarfail/inst-2" -mindepth 1 | wc -l)" 0 "and nothing arrives"
# An instance's symlink must not carry a later pull out of LOCAL_DIR/NAME:
# pull 1 brings out -> $T/victim, then out is a directory with a file;
# pull 2 replaces the link with the directory, as rsync does, and writes
# nothing into the link's target.
mkdir -p "$T/victim" "$(home_of inst-2)/esc"
ln -s "$T/victim" "$(home_of inst-2)/esc/out"
run pull inst-2 '~/esc/' "$T/escape"
expect_rc 0 "pull by tar of a symlink"
expect_eq "$(readlink "$T/escape/inst-2/out")" "$T/victim" "the link arrives as a link"
rm "$(home_of inst-2)/esc/out"
mkdir "$(home_of inst-2)/esc/out"
echo planted >"$(home_of inst-2)/esc/out/authorized_keys"
run pull inst-2 '~/esc/' "$T/escape"
expect_rc 0 "pull by tar: a directory where a link was"
expect_eq "$(find "$T/victim" -mindepth 1 | wc -l)" 0 "nothing written through the old link"
expect_eq "$(cat "$T/escape/inst-2/out/authorized_keys")" planted "the directory replaced the link"
fleet setenv inst-2

# --- a changed host key refuses the transfer -------------------------------
fleet break inst-1 hostkey >/dev/null
run push 'inst-1,inst-2' "$src/big" '~/after'
expect_rc 1 "push with a changed host key"
expect_contains "$out" "inst-1: failed: Host key verification failed." "refused by ssh"
expect_contains "$out" "inst-2: pushed 1 file" "the other instance goes on"
checks=$((checks + 1))
[ -e "$(home_of inst-1)/after" ] && fail "a file reached the instance with the changed key"
fleet heal inst-1

# --- bad input: one line, exit 2 --------------------------------------------
bad() { run "$@"; expect_rc 2 "$*"; expect_one_error_line "$*"; }
bad push inst-1 "$src/big"
expect_eq "$err" "gpufleet: push: wants SELECTOR, LOCAL... and REMOTE_DIR (try 'gpufleet push --help')" "too few words"
bad push inst-1 "$T/nonesuch" '~/x'
expect_eq "$err" "gpufleet: push: $T/nonesuch: No such file or directory (try 'gpufleet push --help')" "missing LOCAL"
bad push inst-1 -f 0 "$src/big" '~/x'
expect_eq "$err" "gpufleet: push: --fanout '0' is not a number of instances (1-256) (try 'gpufleet push --help')" "-f 0"
bad pull inst-1 $'a\nb' "$T/x"
expect_eq "$err" "gpufleet: pull: a path with a control character (try 'gpufleet pull --help')" "a newline in a path"
bad pull inst-1 '~/x' "$src/big"
expect_eq "$err" "gpufleet: pull: $src/big is not a directory (try 'gpufleet pull --help')" "LOCAL_DIR a file"
run push nosuch "$src/big" '~/x'
expect_rc 2 "unknown instance"

# --- no rsync here -----------------------------------------------------------
mkdir "$T/nolocal"
PATH=$T/nolocal "$GPUFLEET" push inst-1 "$src/big" '~/x' >"$T/out" 2>"$T/err"
rc=$? err=$(cat "$T/err")
expect_rc 4 "no local rsync"
expect_eq "$err" "gpufleet: rsync is not installed on this machine (gpufleet push and pull run it): install rsync" \
    "a clear error"

finish

#!/usr/bin/env bash
# gpufleet exec against a real sshd fleet: the words joined for the remote
# shell (as ssh), --argv's arguments arriving exactly, every output mode,
# stdin, big outputs streamed, failure isolation, Ctrl-C.
. "$(dirname "$0")/../e2e/lib.sh"
export GPUFLEET_NO_PROGRESS=1

fleet_up 20

# --- the words make one line for the remote shell, as with ssh ----------
run exec 'inst-[1-3]' -- 'df -h / | tail -1'
expect_rc 0 "a pipe in one word"
expect_eq "$(printf '%s\n' "$out" | wc -l)" 3 "one line per host: tail ran remotely"
expect_eq "$(printf '%s\n' "$out" | grep -Ec '^inst-[1-3]: [^ ]+ +[0-9.]+[A-Z]? .* [0-9]+% /$')" 3 \
    "df's last line from every host"
run exec inst-1 -- echo '$GPUFLEET_INSTANCE' 'a   b' '|' tr a-z A-Z
expect_rc 0 "words joined with spaces"
expect_eq "$out" "inst-1: INST-1 A B" "the remote shell read the joined line"
run exec inst-1 -- 'echo one >$HOME/joined;' echo two '>>$HOME/joined'
expect_rc 0 "redirections in the line"
expect_eq "$(cat "$(instance_dir inst-1)/home/joined")" "one
two" "both redirections ran on the instance"

# --- --argv: arguments reach the remote command exactly as given --------
args=('a b' "it's" '"q"' ';' '$(id)' '`id`' '*' '' 'héllo wörld' $'new\nline'
    '\' 'a\\b' '--' '-n' '%s' '&&' '|' '>x' '$HOME')
run exec inst-1 --argv -- printf '<%s>\n' "${args[@]}"
expect_rc 0 "exec --argv with hostile arguments"
want=$(printf '<%s>\n' "${args[@]}" | sed 's/^/inst-1: /')
expect_eq "$out" "$want" "arguments arrive byte for byte"
checks=$((checks + 1))
[ ! -e "$(instance_dir inst-1)/home/x" ] || fail "'>x' was interpreted"
run exec inst-1 --argv -- sh -c 'df -h / | tail -1'
expect_rc 0 "--argv: sh -c keeps its script as one word"
expect_match "$out" '^inst-1: [^ ]+ +[0-9.]+[A-Z]? .* [0-9]+% /$' "sh -c ran the pipe"
run exec inst-1 --argv -- 'df -h / | tail -1'
expect_rc 1 "--argv: the whole word is one command name"
expect_match "$err" 'not found' "no shell read the word"

# --- default mode: prefixed lines, stderr marked, nothing torn ----------
run exec all -- 'i=0; while [ $i -lt 300 ]; do
    echo "$GPUFLEET_INSTANCE line $i"; i=$((i+1)); done; echo oops >&2'
expect_rc 0 "exec all"
expect_eq "$(printf '%s\n' "$out" | wc -l)" 6000 "300 lines from 20 hosts"
checks=$((checks + 1))
bad=$(printf '%s\n' "$out" | grep -Evc '^(inst-[0-9]+): \1 line [0-9]+$')
[ "$bad" = 0 ] || fail "$bad lines torn or mislabelled"
for n in 1 7 20; do
	expect_eq "$(printf '%s\n' "$out" | grep -c "^inst-$n: ")" 300 \
	    "inst-$n lines"
done
expect_eq "$(printf '%s\n' "$err" | grep -c '^inst-[0-9]* \[stderr\]: oops$')" \
    20 "stderr lines marked"
expect_match "$err" "gpufleet: exec: 20 hosts: 20 ok, 0 exit non-zero, 0 failed" \
    "summary"

# --- gather: identical results grouped ---------------------------------
run exec all -b -- 'case $GPUFLEET_INSTANCE in inst-1?) echo ten;;
    *) echo other;; esac'
expect_rc 0 "gather"
expect_eq "$(printf '%s\n' "$out" | grep -c '^==== ')" 2 "two groups"
expect_match "$out" "^==== inst-1,inst-2,inst-20,inst-3,inst-4,inst-5,inst-6,inst-7,inst-8,inst-9 \(10 hosts\): exit 0
other$" "group of other"
expect_match "$out" "==== inst-10,inst-11,inst-12,inst-13,inst-14,inst-15,inst-16,inst-17,inst-18,inst-19 \(10 hosts\): exit 0" \
    "group of ten"

# --- json: one object per host, exact fields ---------------------------
run exec 'inst-1,inst-2' --json -- 'printf "x\ny"; echo e >&2; exit 4'
expect_rc 1 "non-zero exit gives 1"
expect_eq "$(printf '%s\n' "$out" | wc -l)" 2 "one JSON line per host"
line=$(printf '%s\n' "$out" | grep '"name":"inst-2"')
expect_match "$line" '^\{"name":"inst-2","exit_status":4,"signal":null,"stdout":"x\\ny","stderr":"e\\n","stdout_truncated":false,"stderr_truncated":false,"duration_ms":[0-9]+,"error":null\}$' \
    "JSON object"

# --- -o DIR and --stdin -------------------------------------------------
head -c 300000 /dev/urandom >"$T/input"
run exec 'inst-1*' --stdin "$T/input" -o "$T/outdir" -- 'cat; echo E >&2'
expect_rc 0 "-o with --stdin"
for n in inst-1 inst-10 inst-19; do
	checks=$((checks + 1))
	cmp -s "$T/input" "$T/outdir/$n.out" || fail "$n.out differs from input"
	expect_eq "$(cat "$T/outdir/$n.err")" E "$n.err"
done
expect_eq "$(ls "$T/outdir" | wc -l)" 22 "11 hosts x 2 files"
printf 'hello\n' >"$T/hello"
run exec inst-2 --stdin - -- tr a-z A-Z <"$T/hello"
expect_eq "$out" "inst-2: HELLO" "--stdin -"

# --- 100 MB streams through, never held in memory ------------------------
/usr/bin/time -f %M -o "$T/rss" "$GPUFLEET" exec inst-3 -o "$T/big" -- \
    head -c 104857600 /dev/zero 2>/dev/null
expect_eq "$(stat -c %s "$T/big/inst-3.out")" 104857600 "100 MB to -o"
# The memory bound holds for the real build; under ASan the RSS measures
# the sanitizer's quarantine, not what gpufleet holds.
bounded_rss() {	# bounded_rss DESCRIPTION
	local rss
	rss=$(tail -1 "$T/rss")
	if [ "${GPUFLEET_SANITIZED:-0}" = 1 ]; then
		echo "note: $1: RSS ${rss} KiB not checked under ASan" >&2
		return
	fi
	checks=$((checks + 1))
	[ "$rss" -lt 60000 ] || fail "$1: max RSS ${rss} KiB"
}
bounded_rss "-o held the output"
/usr/bin/time -f %M -o "$T/rss" "$GPUFLEET" exec inst-3 -- \
    'yes 0123456789abcdef | head -c 104857600' 2>/dev/null |
    awk 'END { print NR }' >"$T/lines"
expect_eq "$(cat "$T/lines")" 6168095 "100 MB of lines, prefixed, streamed"
bounded_rss "prefix mode held the output"
run exec inst-3 --json -- head -c 3000000 /dev/zero
expect_match "$out" '"stdout_truncated":true' "--json caps and marks"
run exec inst-3 -b -- head -c 3000000 /dev/zero
expect_match "$out" "output truncated at 1048576 bytes" "--gather caps and marks"

# --- --fanout bounds how many hosts run at once ---------------------------
shared=$(mktemp -d /tmp/gpufleet-fanout.XXXXXX)
chmod 1777 "$shared"
cleanup_hooks+=("rm -rf '$shared'")
run exec 'inst-[1-6]' -f 2 -- "echo s >>$shared/log; sleep 0.3; echo e >>$shared/log"
expect_rc 0 "exec --fanout 2"
most=$(awk '$1 == "s" { n++; if (n > m) m = n } $1 == "e" { n-- } END { print m }' \
    "$shared/log")
expect_eq "$most" 2 "never more than 2 hosts at once"
run exec all -f 0 -- true
expect_rc 2 "--fanout 0 is a usage error"
expect_contains "$err" "--fanout '0' is not a number of hosts (1-65536)" \
    "--fanout counts hosts, not seconds"
run exec all -t x -- true
expect_rc 2 "--timeout x is a usage error"
expect_contains "$err" "--timeout 'x' is not a number of seconds (0-604800)" \
    "--timeout counts seconds"

# --- failure isolation ----------------------------------------------------
# Pin every host key first, so a changed one can be noticed.
run exec all -- true
expect_rc 0 "pin all host keys"
fleet break inst-11 refuse
fleet break inst-12 silent
: >"$(instance_dir inst-14)/home/.ssh/authorized_keys"
fleet break inst-15 hostkey >/dev/null
# Deadlines well above what a healthy login takes on a loaded machine (the
# check below compares durations: a 2 s deadline lost to a busy CI box).
run exec all --json -t 8 --connect-timeout 6 -- '
    case $GPUFLEET_INSTANCE in
    inst-13) kill -STOP $$ ;;
    inst-16) exit 3 ;;
    esac; echo "ok $GPUFLEET_INSTANCE"'
expect_rc 1 "failures give exit 1"
reason() { printf '%s\n' "$out" | grep "\"name\":\"$1\"" |
    sed -n 's/.*"error":{"code":"\([a-z_]*\)".*/\1/p'; }
expect_eq "$(reason inst-11)" refused "refused host"
expect_eq "$(reason inst-12)" connect_timeout "silent host"
expect_eq "$(reason inst-13)" timeout "hung command"
expect_eq "$(reason inst-14)" auth "key rejected"
expect_eq "$(reason inst-15)" hostkey_changed "changed host key"
expect_match "$(printf '%s\n' "$out" | grep '"name":"inst-16"')" \
    '"exit_status":3,.*"error":null' "exit 3 host"
healthy=$(printf '%s\n' "$out" | grep -c '"stdout":"ok inst-[0-9]*\\n".*"error":null')
expect_eq "$healthy" 14 "every healthy host ran"
# Not held up: every healthy host finished before the deadlines of the
# silent and hung ones fired (their durations), however slow the machine.
dur() { sed -n 's/.*"duration_ms":\([0-9]*\).*/\1/p'; }
waited=$(printf '%s\n' "$out" | grep -E '"name":"inst-1[23]"' | dur | sort -n | head -1)
slow=$(printf '%s\n' "$out" | grep '"error":null' | grep -v inst-16 | dur |
    awk -v w="${waited:-0}" '$1 >= w' | wc -l)
expect_eq "$slow" 0 "healthy hosts were not held up by broken ones"
expect_match "$err" "20 hosts: 14 ok, 1 exit non-zero, 5 failed \(refused 1, connect_timeout 1, hostkey_changed 1, auth 1, timeout 1\)" \
    "summary by reason"
# The changed key really refused the host: no command ran there.
checks=$((checks + 1))
run exec inst-15 -- 'touch $HOME/ran'
[ ! -e "$(instance_dir inst-15)/home/ran" ] || fail "command ran on a changed key"
expect_match "$err" "HOST KEY CHANGED for inst-15 .*SHA256:.*SHA256:.*gpufleet hostkey accept inst-15" \
    "changed key message names both fingerprints and the fix"
fleet heal inst-13

# --- Ctrl-C ---------------------------------------------------------------
fleet heal inst-11
"$GPUFLEET" exec 'inst-1,inst-2,inst-3' -- sleep 30 >"$T/int.out" 2>"$T/int.err" &
pid=$!
sleep 1
kill -INT $pid
wait $pid
rc=$?
# 130 and "interrupted" (not the end of sleep 30): the signal ended it.
expect_rc 130 "SIGINT exits 130"
expect_match "$(cat "$T/int.err")" "3 failed \(interrupted 3\)" "partial summary"

# --- progress line only on a terminal, never in piped stdout -------------
unset GPUFLEET_NO_PROGRESS
script -qec "'$GPUFLEET' exec 'inst-[1-9]' -- echo hi >'$T/p.out'" "$T/typescript" \
    >/dev/null 2>&1
expect_eq "$(grep -c . "$T/p.out")" 9 "piped stdout has the output"
checks=$((checks + 1))
if grep -q $'\033' "$T/p.out"; then fail "escape codes in piped stdout"; fi
expect_match "$(tr '\r' '\n' <"$T/typescript")" '\[9/9 done, 0 failed\]' \
    "progress on the terminal"

finish

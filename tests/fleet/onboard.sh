#!/usr/bin/env bash
# First contact by password against the harness's --root-login instances
# (root and a password, as AutoDL and featurize hand machines out):
# `add --password-file` pins the host key, installs a managed key of the
# instance's own with every other authorized_keys byte kept, proves it and
# switches to it; a wrong password, or a key that does not log in, leaves
# nothing behind; `keys install` does the same for instances already in the
# inventory, with one password or one per instance (--ask-each). The
# password is never in the database, the logs or any process's argv.
. "$(dirname "$0")/../e2e/lib.sh"
export GPUFLEET_NO_PROGRESS=1
if [ "$(id -u)" != 0 ]; then
	echo "SKIP: not root: the harness's --root-login needs root" >&2
	exit 0
fi
KEYS=$XDG_DATA_HOME/gpufleet/keys
db=$XDG_DATA_HOME/gpufleet/fleet.db

fleet_up 5 --root-login 2 --root-login 3:kbdint --root-login 4 --root-login 5 --log-level DEBUG1
port() { awk -v n="$1" '$1 == n { print $2 }' "$D/instances.tsv"; }
akfile() { printf '%s/home/.ssh/authorized_keys' "$(instance_dir "$1")"; }
pwfile() { printf '%s/password' "$(instance_dir "$1")"; }
# login NAME KEYFILE: a fresh OpenSSH login with only that key works
login() {
	ssh -F /dev/null -i "$2" -o IdentitiesOnly=yes -o BatchMode=yes \
	    -o PreferredAuthentications=publickey -o ControlPath=none \
	    -o UserKnownHostsFile="$D/known_hosts" -o StrictHostKeyChecking=yes \
	    -o ConnectTimeout=5 -p "$(port "$1")" root@127.0.0.1 true </dev/null >/dev/null 2>&1
}
keypath() {
	"$GPUFLEET" keys ls --json | jq -r --arg n "$1" \
	    '.[] | select((.instances | split(",")) | index($n)) | .path'
}
count() { sqlite3 "$db" "$1"; }
# setpw NAME FILE: root's password on NAME is FILE's first line (set in its
# /etc copy, as the harness does; no argv holds it)
setpw() {
	sed -n '1s/^/root:/p' "$2" |
	    unshare -m --propagation private sh -c 'mount --bind "$1" /etc && chpasswd' sh "$(instance_dir "$1")/etc" ||
	    { echo "cannot set $1's password" >&2; exit 1; }
}
echo 'not-the-password-7Hq' >"$T/wrong"
PASSWORDS=("$(cat "$(pwfile inst-2)")" "$(cat "$(pwfile inst-3)")" "$(cat "$T/wrong")")

# Watch every process's argv while gpufleet runs (the password must never be there).
: >"$T/ps"
# (stopped by a file, so that no ps is left running to catch the greps
# below, whose argv holds the passwords)
( while [ ! -e "$T/ps.stop" ]; do ps -eo args >>"$T/ps" 2>/dev/null; sleep 0.05; done ) &
watcher=$!
cleanup_hooks+=("kill $watcher 2>/dev/null")

# A root-login instance's authorized_keys as a user might have it: a
# comment, a key with options and no trailing newline; the harness key too.
other=$(ssh-keygen -q -t ed25519 -N '' -C other -f "$T/other" </dev/null; cat "$T/other.pub")
ak=$(akfile inst-2)
printf '# keep me\r\n%s\nfrom="10.0.0.0/8",no-pty %s' "$(cat "$D/client/id_ed25519.pub")" "$other" >"$ak"
cp "$ak" "$T/ak-before"

# --- bad usage first: nothing touched ---------------------------------------
run add a2 "root@127.0.0.1:$(port inst-2)" --password-file "$T/missing"
expect_rc 2 "a missing --password-file is a usage error"
expect_one_error_line "missing --password-file"
expect_contains "$err" "$T/missing" "the error names the file"
: >"$T/empty"
run add a2 "root@127.0.0.1:$(port inst-2)" --password-file "$T/empty"
expect_rc 2 "an empty --password-file is a usage error"
expect_contains "$err" "first line is empty" "empty password file"
out=$(setsid -w "$GPUFLEET" add a2 "root@127.0.0.1:$(port inst-2)" --password </dev/null 2>&1)
rc=$?
err=$out
expect_rc 2 "--password with no terminal is a usage error"
expect_contains "$out" "no terminal" "--password without a terminal says so"

# --- a wrong password: EF_AUTH, nothing left ---------------------------------
run add a2 "root@127.0.0.1:$(port inst-2)" --password-file "$T/wrong"
expect_rc 1 "a wrong password fails the host"
expect_one_error_line "wrong password"
expect_eq "$err" "gpufleet: add a2: adding the key: root@127.0.0.1 refused the password; not added" \
    "a wrong password is named as refused"
expect_eq "$(count "SELECT count(*) FROM instance WHERE name = 'a2'")" 0 "a refused add leaves no instance"
expect_eq "$(count "SELECT count(*) FROM managed_key")" 0 "a refused add leaves no key row"
expect_eq "$(ls -A "$KEYS" 2>/dev/null | wc -l)" 0 "a refused add leaves no key file"
expect_eq "$(count "SELECT count(*) FROM host_key h JOIN instance i ON i.id = h.instance_id WHERE i.name = 'a2'")" 0 \
    "a refused add pins nothing"
checks=$((checks + 1))
cmp -s "$ak" "$T/ak-before" || fail "a refused add changed authorized_keys"

# --- add --password-file: pinned, installed, proven, switched ----------------
run add a2 "root@127.0.0.1:$(port inst-2)" --password-file "$(pwfile inst-2)" --tag pw
expect_rc 0 "add --password-file (PasswordAuthentication)"
key=$(keypath a2)
expect_match "$key" "^$KEYS/a2-[0-9]{8}-[0-9]{6}\$" "a2 uses a managed key of its own"
expect_contains "$out" "installed key $key on a2" "add says which key it installed"
expect_eq "$(count "SELECT identity FROM instance WHERE name = 'a2'")" "$key" "the inventory switched a2's identity"
expect_eq "$(stat -c %a "$key")" 600 "the new private key is 0600"
pin=$(count "SELECT key_type || ' ' || key_base64 FROM host_key h JOIN instance i ON i.id = h.instance_id WHERE i.name = 'a2'")
expect_eq "$pin" "$(awk -v p="[127.0.0.1]:$(port inst-2)" '$1 == p { print $2, $3 }' "$D/known_hosts")" \
    "first contact pinned a2's real host key"
# every other byte kept (a newline added to the last line), the key appended
want=$(cat "$T/ak-before"; printf '\n%s\n' "$(cat "$key.pub")")
expect_eq "$(cat "$ak")" "$want" "authorized_keys: old bytes kept, the new key appended"
checks=$((checks + 1))
head -c "$(stat -c %s "$T/ak-before")" "$ak" | cmp -s - "$T/ak-before" || fail "authorized_keys' old bytes changed"
checks=$((checks + 1))
login inst-2 "$key" || fail "OpenSSH cannot log in to a2 with only the new key"
run exec a2 -- 'echo "$GPUFLEET_INSTANCE $(id -un)"'
expect_rc 0 "gpufleet exec on the added instance"
expect_contains "$out" "inst-2 root" "exec ran on inst-2 as root"

# keyboard-interactive only (UsePAM yes), password on stdin
run add a3 "root@127.0.0.1:$(port inst-3)" --password-file - <"$(pwfile inst-3)"
expect_rc 0 "add --password-file - over keyboard-interactive"
key3=$(keypath a3)
checks=$((checks + 1))
[ -n "$key3" ] && login inst-3 "$key3" || fail "a3's new key does not log in"

# --- a key that does not log in is taken off again; nothing added ------------
# (the edit goes to a file sshd does not read: the proof fails)
before=$(count "SELECT count(*) FROM managed_key")
run add bad "root@127.0.0.1:$(port inst-2)" --password-file "$(pwfile inst-2)" \
    --authorized-keys-file '~/.ssh/not_read_by_sshd'
expect_rc 1 "add fails where the new key does not log in"
expect_one_error_line "unproven key"
expect_contains "$err" "a fresh login with only the new key failed" "the proof failure is named"
expect_contains "$err" "the key was taken off again" "and that the key was taken off"
expect_eq "$(count "SELECT count(*) FROM instance WHERE name = 'bad'")" 0 "an unproven add leaves no instance"
expect_eq "$(count "SELECT count(*) FROM managed_key")" "$before" "an unproven add leaves no key row"
expect_eq "$(grep -c gpufleet: "$(instance_dir inst-2)/home/.ssh/not_read_by_sshd")" 0 \
    "the unproven key is not left in the file"

# --- keys install: two instances already in the inventory --------------------
# inst-4 and inst-5 share a password; their authorized_keys lose the harness
# key, so only the password gets in.
setpw inst-5 "$(pwfile inst-4)"
for n in inst-4 inst-5; do printf '# %s\n%s\n' "$n" "$other" >"$(akfile "$n")"; done
run exec inst-4,inst-5 -- true
expect_rc 1 "without the harness key inst-4/5 are locked out"
run keys install inst-4,inst-5 --password-file "$(pwfile inst-4)"
expect_rc 0 "keys install on two instances"
expect_contains "$err" "keys install: 2 hosts: 2 installed, 0 failed" "the summary"
for n in inst-4 inst-5; do
	k=$(keypath "$n")
	expect_match "$k" "^$KEYS/$n-" "$n got a key of its own"
	expect_eq "$(cat "$(akfile "$n")")" "$(printf '# %s\n%s\n%s' "$n" "$other" "$(cat "$k.pub")")" \
	    "$n: authorized_keys kept, the key appended"
	checks=$((checks + 1))
	login "$n" "$k" || fail "$n's new key does not log in"
done
run exec inst-4,inst-5 -- true
expect_rc 0 "exec works on both with the installed keys"

# --ask-each: one password per instance, typed on a terminal; a wrong one
# fails only its host, which keeps its key
k4=$(keypath inst-4)
for n in inst-4 inst-5; do printf '# %s again\n' "$n" >"$(akfile "$n")"; done
setpw inst-5 "$(pwfile inst-5)"
# the typist waits for each prompt (and, at the end, for the summary)
waitfor() {
	local i
	for i in $(seq 600); do
		grep -qF -- "$1" "$T/typescript" 2>/dev/null && return 0
		sleep 0.1
	done
	return 1
}
: >"$T/typescript"
{
	waitfor "Password for inst-4" && sleep 0.3 && cat "$T/wrong"
	waitfor "Password for inst-5" && sleep 0.3 && cat "$(pwfile inst-5)"
	waitfor "keys install:"
} | script -qefc "'$GPUFLEET' keys install inst-4,inst-5 --ask-each" "$T/typescript" >"$T/out" 2>&1
rc=$?
out=$(cat "$T/out")
err=$out
expect_rc 1 "--ask-each with one wrong password"
expect_contains "$out" "Password for inst-4 (root@127.0.0.1): " "asked for inst-4"
expect_contains "$out" "Password for inst-5 (root@127.0.0.1): " "asked for inst-5"
# (its key from the last install is tried first, and refused now)
expect_contains "$out" "inst-4: failed: adding the key: root@127.0.0.1 refused our key and the password" \
    "inst-4's wrong password"
expect_match "$out" "inst-5: installed inst-5-" "inst-5 installed with its own password"
expect_eq "$(keypath inst-4)" "$k4" "inst-4 keeps the key it had"
checks=$((checks + 1))
login inst-5 "$(keypath inst-5)" || fail "inst-5's key from --ask-each does not log in"

run keys install inst-4 --password-file "$T/x" --ask-each
expect_rc 2 "--ask-each with --password-file is a usage error"

# --- the merged add: login line + --password + --check (+ --jump) -----------
run add --password-file "$(pwfile inst-3)" --check c3 "ssh -p $(port inst-3) root@127.0.0.1"
expect_rc 0 "add --password-file --check with a login line"
expect_contains "$out" "installed key $KEYS/c3-" "c3: its own key installed"
expect_match "$out" "c3: logged in: " "c3: the first contact's report"
checks=$((checks + 1))
login inst-3 "$(keypath c3)" || fail "c3's new key does not log in"
jfwd() { cat "$D"/groups/*/sshd.log | grep -c "server_request_direct_tcpip: .*port $(port inst-3)\b"; }
before=$(jfwd)
run add --jump inst-1 --password-file "$(pwfile inst-3)" --check c3j ssh -p "$(port inst-3)" root@127.0.0.1
expect_rc 0 "add --jump --password-file --check, the login line as words"
expect_contains "$out" "installed key $KEYS/c3j-" "c3j: its own key installed through the jump"
expect_match "$out" "c3j: logged in: " "c3j: first contact through the jump"
run show c3j --json
expect_contains "$out" '"jump": "inst-1"' "c3j: its jump stored"
checks=$((checks + 1))
[ "$(jfwd)" -gt "$before" ] || fail "c3j: nothing went through inst-1 (no direct-tcpip in its log)"
run add --jump inst-1 --password-file "$T/wrong" --check c3w "ssh -p $(port inst-3) root@127.0.0.1"
expect_rc 1 "a wrong password through the jump"
expect_contains "$err" "not added" "c3w: not added"
expect_eq "$(count "SELECT count(*) FROM instance WHERE name = 'c3w'")" 0 "c3w: nothing left behind"

# a rotation left unfinished (killed after step 2) is not fought over
(GPUFLEET_TEST_CRASH_AT=2 "$GPUFLEET" keys rotate inst-1 >/dev/null 2>&1) 2>/dev/null
run keys status inst-1
expect_contains "$out" "interrupted, step 2/7" "the rotation of inst-1 is unfinished (its process is gone)"
run keys install inst-1 --password-file "$T/wrong"
expect_rc 1 "keys install refuses an instance mid-rotation"
expect_contains "$out" "inst-1: failed: a key rotation of inst-1 is unfinished (step 2, running): run \`gpufleet keys rotate inst-1\` first" \
    "and says what to do"

# --password on a terminal, for add (typed without echo)
: >"$T/typescript"
{
	waitfor "Password for root@127.0.0.1" && sleep 0.3 && cat "$(pwfile inst-3)"
	waitfor "installed key"
} | script -qefc "'$GPUFLEET' add a3b root@127.0.0.1:$(port inst-3) --password" "$T/typescript" >"$T/out" 2>&1
rc=$?
err=$(cat "$T/out")
expect_rc 0 "add --password typed on the terminal"
expect_contains "$err" "installed key $KEYS/a3b-" "a3b got its key"
checks=$((checks + 1))
if grep -qF -- "$(cat "$(pwfile inst-3)")" "$T/typescript"; then fail "the typed password was echoed"; fi

# --- Ctrl-C during add --password: nothing is left ---------------------------
# inst-5 answers TCP but never SSH (its sshd stopped), so the add waits in
# its first login; SIGINT once gpufleet is connected there.
bash "$GPUFLEET_HARNESS" -d "$D" break inst-5 silent >/dev/null || fail "cannot break inst-5"
# (env: a background job of a script starts with SIGINT ignored; a user's
# Ctrl-C finds it at its default.)
env --default-signal=INT "$GPUFLEET" add a9 "root@127.0.0.1:$(port inst-5)" \
    --password-file "$(pwfile inst-5)" >"$T/out9" 2>&1 &
apid=$!
for _ in $(seq 300); do
	ss -Htnp state established "( dport = :$(port inst-5) )" 2>/dev/null | grep -q "pid=$apid," && break
	sleep 0.1
done
ss -Htnp state established "( dport = :$(port inst-5) )" | grep -q "pid=$apid," || fail "add a9 never connected"
kill -INT "$apid"
wait "$apid"
rc=$?
err=$(cat "$T/out9")
expect_rc 1 "add --password interrupted"
expect_eq "$err" "gpufleet: add a9: adding the key: interrupted; not added" "Ctrl-C: one line, not added"
expect_eq "$(count "SELECT count(*) FROM instance WHERE name = 'a9'")" 0 "an interrupted add leaves no instance"
expect_eq "$(count "SELECT count(*) FROM managed_key WHERE name LIKE 'a9-%' AND deleted_at IS NULL")" 0 \
    "an interrupted add leaves no key row"
expect_eq "$(find "$KEYS" -name 'a9-*' | wc -l)" 0 "an interrupted add leaves no key file"
bash "$GPUFLEET_HARNESS" -d "$D" heal inst-5 >/dev/null || fail "cannot heal inst-5"

# --- killed after each step of keys install: keys gc takes what is left ------
k5=$(keypath inst-5)
[ -n "$k5" ] || fail "inst-5 has no managed key to keep"
for step in 1 2 3; do
	nkeys=$(count "SELECT count(*) FROM managed_key")
	nfiles=$(find "$KEYS" -type f | wc -l)
	GPUFLEET_TEST_CRASH_AT=$step "$GPUFLEET" keys install inst-5 \
	    --password-file "$(pwfile inst-5)" >/dev/null 2>&1
	rc=$?
	expect_rc 137 "keys install killed after step $step"
	expect_eq "$(count "SELECT count(*) FROM managed_key")" "$nkeys" "after step $step: no row half-written"
	expect_eq "$(keypath inst-5)" "$k5" "after step $step: inst-5 keeps its key"
	checks=$((checks + 1))
	login inst-5 "$k5" || fail "after step $step: inst-5's key does not log in"
	run keys gc
	expect_rc 0 "keys gc after step $step"
	expect_match "$out" "^removed inst-5-[0-9-]+ \(no database row \(interrupted before it was recorded\)\)$" \
	    "after step $step: gc removes the key the killed install made"
	expect_eq "$(find "$KEYS" -type f | wc -l)" "$nfiles" "after step $step: no key file left"
done
run keys install inst-5 --password-file "$(pwfile inst-5)"
expect_rc 0 "keys install after the kills"

# --- the password is nowhere -------------------------------------------------
: >"$T/ps.stop"
wait "$watcher"
for p in "${PASSWORDS[@]}" "$(cat "$(pwfile inst-4)")" "$(cat "$(pwfile inst-5)")"; do
	checks=$((checks + 1))
	if grep -rqaF -- "$p" "$XDG_DATA_HOME" "$HOME" "$T/ps" "$D"/groups/*/sshd.log "$D/watchdog.log" 2>/dev/null; then
		fail "a password is in the database, a log or a process's argv"
	fi
done
checks=$((checks + 1))
[ "$(wc -l <"$T/ps")" -gt 10 ] || fail "the argv watcher saw nothing"
finish

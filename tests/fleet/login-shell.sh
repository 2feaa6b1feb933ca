#!/usr/bin/env bash
# Commands gpufleet writes itself (deploy and run of the agent, the read of
# authorized_keys after exec) work for a login user whose shell does not
# read POSIX syntax (fish): each is one sh -c word. The login shell records
# every command sshd hands it, then runs it with fish.
. "$(dirname "$0")/../e2e/lib.sh"
export GPUFLEET_NO_PROGRESS=1
: "${GPUFLEET_AGENT:=$(dirname "$GPUFLEET")/gpufleet-agent}"
export GPUFLEET_AGENT
fish=$(command -v fish) || { echo "fish is missing: run scripts/deps.sh" >&2; exit 1; }
if [ "$(id -u)" != 0 ]; then
	echo "SKIP: not root: the harness cannot make a user whose shell is fish" >&2
	exit 0
fi
db=$XDG_DATA_HOME/gpufleet/fleet.db

# The login shell, at a fixed path (the test user keeps it), written whole.
shells=${FLEET_BASE:-/var/lib/gpufleet-test}/shells
mkdir -p "$shells"
chmod 0755 "$shells"
cat >"$shells/.fish-logged.$$" <<EOS
#!/bin/sh
# gpufleet tests: record each command (NUL-terminated), then run it with fish
if [ "\$1" = -c ]; then
	printf '%s\\0' "\$2" >>"\$HOME/.commands"
	exec $fish -c "\$2"
fi
exec $fish "\$@"
EOS
chmod 0755 "$shells/.fish-logged.$$"
mv -f "$shells/.fish-logged.$$" "$shells/fish-logged"

fleet_up 2 --shell "$shells/fish-logged"

# The login shell really is fish and refuses POSIX sh syntax.
sshf() { ssh -F "$D/ssh_config" "$@"; }
checks=$((checks + 1))
[ "$(sshf inst-1 'echo $FISH_VERSION')" != "" ] || fail "the login shell is not fish"
posix=$(sshf inst-1 'd=x; if [ -n "$d" ]; then echo posix; fi' 2>&1)
expect_match "$posix" '^fish: ' "the login shell refuses POSIX syntax"

# --- status deploys the agent, then runs it, through fish -----------------
run status
expect_rc 0 "first status (deploys the agent)"
expect_match "$(printf '%s\n' "$out" | grep '^inst-1 ')" '^inst-1 +up ' "inst-1 up"
expect_match "$(printf '%s\n' "$out" | grep '^inst-2 ')" '^inst-2 +up ' "inst-2 up"
agent=$(ls "$(instance_dir inst-1)"/home/.cache/gpufleet/gpufleet-agent-* 2>/dev/null)
checks=$((checks + 1))
[ -n "$agent" ] && cmp -s "$agent" "$GPUFLEET_AGENT" || fail "agent not deployed intact"
run status
expect_rc 0 "second status (runs the deployed agent)"
expect_match "$(printf '%s\n' "$out" | grep '^inst-1 ')" '^inst-1 +up ' "inst-1 up again"

# --- exec reads authorized_keys for re-injected keys ----------------------
ssh-keygen -q -N '' -t ed25519 -C old -f "$T/old" </dev/null
read -r type blob _ <"$T/old.pub"
cat "$T/old.pub" >>"$(instance_dir inst-1)/home/.ssh/authorized_keys"
sqlite3 "$db" "INSERT INTO retired_key (instance_id, key_type, key_base64, reason, retired_at)
    SELECT id, '$type', '$blob', 'rotated', 1764460800 FROM instance WHERE name = 'inst-1'"
run exec inst-1 -- echo hi
expect_rc 0 "exec for the fish user"
expect_eq "$out" "inst-1: hi" "the user's command ran"
expect_contains "$err" "inst-1: a key gpufleet took off is back" \
    "the re-injected key was found in authorized_keys"

# --- keys and harden, whose scripts are sh -c words too ------------------
run harden inst-2 --json
expect_match "$out" '"name": *"inst-2"' "harden reported on inst-2"
expect_match "$out" '"error": *null' "harden probed inst-2"
run keys rotate inst-2
expect_rc 0 "keys rotate for the fish user"
run exec inst-2 -- echo hi
expect_eq "$out" "inst-2: hi" "the rotated key logs in"

# --- the user's own command: a line for fish, as ssh sends it -------------
run exec inst-1 -- 'df -h / | tail -1'
expect_rc 0 "exec: fish reads the joined line"
expect_match "$out" '^inst-1: [^ ]+ +[0-9.]+[A-Z]? .* [0-9]+% /$' "fish ran the pipe"
run exec inst-1 -- echo '$FISH_VERSION' '|' wc -l
expect_eq "$out" "inst-1: 1" "fish expanded its own variable in the line"
# --argv: each argument reaches printf exactly, through fish too.
args=('a b' "it's" '"q"' '$HOME' '\' 'a\\b' "\\'" '*' '(echo x)' ';' '')
run exec inst-1 --argv -- printf '<%s>\n' "${args[@]}"
expect_rc 0 "exec --argv for the fish user"
expect_eq "$out" "$(printf '<%s>\n' "${args[@]}" | sed 's/^/inst-1: /')" \
    "--argv arguments arrive exactly through fish"

# --- a command past --timeout: its process group ends under fish too -------
run exec inst-1 -t 2 -- "sleep 975.$$"
expect_rc 1 "exec --timeout for the fish user"
expect_match "$err" 'inst-1: command timed out after 2s; killed the remote command \(process group [0-9]+\)' \
    "fish: the timeout says what it killed"
checks=$((checks + 1))
for ((i = 0; i < 150; i++)); do
	pgrep -f "^sleep 975\.$$\$" >/dev/null || break
	sleep 0.2
done
! pgrep -f "^sleep 975\.$$\$" >/dev/null || fail "fish: sleep still runs (30 s on)"

# --- every command sshd handed the shell was an sh -c word ---------------
# (but the user's own exec command, this test's ssh probes, and the bare
# "true" of login checks, which every shell reads alike)
for n in inst-1 inst-2; do
	mapfile -d '' cmds <"$(instance_dir "$n")/home/.commands"
	checks=$((checks + 1))
	[ "${#cmds[@]}" -ge 2 ] || fail "$n: only ${#cmds[@]} commands recorded"
	for c in "${cmds[@]}"; do
		case $c in
		"sh -c '"* | true | 'echo hi' | 'echo $FISH_VERSION' | 'd=x; if'*) ;;
		'df -h / | tail -1' | 'echo $FISH_VERSION | wc -l' | "'printf' "*) ;;
		*)
			checks=$((checks + 1))
			fail "$n: gpufleet sent a command that is not sh -c: [$c]"
			;;
		esac
	done
done

finish

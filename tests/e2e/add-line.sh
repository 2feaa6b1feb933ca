#!/usr/bin/env bash
# gpufleet add from the login line a platform prints (quoted, or as words
# after NAME, or ssh://), the errors it gives for what it cannot honour, and
# identity= naming a managed key, with keys ls listing every user of a key.
. "$(dirname "$0")/lib.sh"
db=$XDG_DATA_HOME/gpufleet/fleet.db
sql() { sqlite3 "$db" "$@"; }
row() { sql "SELECT host || ' ' || port || ' ' || user || ' ' || coalesce(identity, '-') FROM instance WHERE name = '$1'"; }

# --- console lines as AutoDL, vast.ai and featurize print them ----------
run add a1 'ssh -p 38076 root@region-41.seetacloud.com'
expect_rc 0 "quoted login line"
expect_eq "$out" "added a1: root@region-41.seetacloud.com:38076" "its added line"
expect_eq "$(row a1)" "region-41.seetacloud.com 38076 root -" "stored"
expect_eq "$err" \
    "hint: \`gpufleet status a1\` makes first contact now (pins the host key, shows the GPUs); add --check does it while adding" \
    "the --check hint on stderr"

run add a2 ssh -p 40123 root@ssh5.vast.ai -L 8080:localhost:8080 --tag train --provider vast
expect_rc 0 "login line as words, gpufleet options after it"
expect_eq "$(row a2)" "ssh5.vast.ai 40123 root -" "words stored"
expect_eq "$(sql "SELECT provider FROM instance WHERE name = 'a2'")" vast \
    "--provider after the words is gpufleet's"
expect_eq "$(sql "SELECT tag FROM instance_tag t JOIN instance i ON i.id = t.instance_id WHERE i.name = 'a2'")" \
    train "--tag after the words is gpufleet's"
expect_contains "$err" \
    "note: skipped from the login line (they do not change where gpufleet connects): -L" \
    "skipped option noted"

run add --tag x a3 ssh -vvv -A -o 'User ubuntu' -oPort=2201 -i ./id 10.0.0.3
expect_rc 0 "-o in both spellings, -i relative"
expect_eq "$(row a3)" "10.0.0.3 2201 ubuntu $PWD/id" "-o values and -i made absolute"
expect_contains "$err" "-v, -A" "flags noted once each"

run add a4 "ssh -o HostName=10.0.0.4 -o 'IdentityFile \"/k/my key\"' -l dev alias"
expect_rc 0 "HostName and a quoted IdentityFile"
expect_eq "$(row a4)" "10.0.0.4 22 dev /k/my key" "HostName wins over the alias"

run add a5 'ssh://ubuntu@[2001:db8::5]:2222'
expect_rc 0 "ssh:// with IPv6"
expect_eq "$(row a5)" "2001:db8::5 2222 ubuntu -" "ssh:// stored"

run add a6 "ssh -p 2222 root@2001:db8::6" --port 2222 --user root
expect_rc 0 "the same port and user given twice"
expect_eq "$(row a6)" "2001:db8::6 2222 root -" "bare IPv6 after -p"

# --jump with a login line, in every place gpufleet's options may go.
jumpof() { sql "SELECT coalesce(jump, '-') FROM instance WHERE name = '$1'"; }
run add -J a1 b1 ssh -p 2201 root@10.0.1.1
expect_rc 0 "-J JUMP before NAME, login line as words"
expect_eq "$(row b1) $(jumpof b1)" "10.0.1.1 2201 root - a1" "-J before the words"
run add --jump a1 b2 ssh -p 2202 root@10.0.1.2
expect_rc 0 "--jump JUMP before NAME, login line as words"
expect_eq "$(row b2) $(jumpof b2)" "10.0.1.2 2202 root - a1" "--jump before the words"
run add b3 ssh -p 2203 root@10.0.1.3 --jump a1
expect_rc 0 "--jump after the words"
expect_eq "$(row b3) $(jumpof b3)" "10.0.1.3 2203 root - a1" "--jump after the words"
run add -Ja1 b4 'ssh -p 2204 root@10.0.1.4'
expect_rc 0 "-JJUMP, quoted login line"
expect_eq "$(row b4) $(jumpof b4)" "10.0.1.4 2204 root - a1" "-JJUMP quoted"

# A line copied with its shell continuation (backslash, newline).
run add b5 "ssh -p 2205 \\
    root@10.0.1.5"
expect_rc 0 "a login line continued with backslash-newline"
expect_eq "$(row b5)" "10.0.1.5 2205 root -" "continued line stored"
run add b6 "$(printf 'ssh -p 2206 \\\r\nroot@10.0.1.6')"
expect_rc 0 "continued with backslash-CR-LF"
expect_eq "$(row b6)" "10.0.1.6 2206 root -" "CR-LF continued line stored"
run add b7 '/usr/bin/ssh -p 2207 root@10.0.1.7'
expect_rc 0 "a quoted login line starting with a path to ssh (as the words form takes)"
expect_eq "$(row b7)" "10.0.1.7 2207 root -" "path-to-ssh line stored"
for n in b1 b2 b3 b4 b5 b6 b7; do
	run rm "$n" --force
	expect_rc 0 "rm $n"
done

run add --json a7 'ssh -p 7 u@h7'
expect_rc 0 "--json"
expect_eq "$(printf '%s' "$out" | jq -r '.port')" 7 "--json instance"
expect_eq "$err" "" "no hint with --json"

run add a8 root@10.0.0.8:2200
expect_rc 0 "[USER@]HOST[:PORT] still works"
expect_eq "$(row a8)" "10.0.0.8 2200 root -" "hostspec stored"

# --- refused: exit 2, one line, nothing added ----------------------------
cp "$db" "$T/before.db"
bad() {
	local desc=$1 want=$2
	shift 2
	run "$@"
	expect_rc 2 "$desc"
	expect_one_error_line "$desc"
	expect_contains "$err" "$want" "$desc: the message"
	checks=$((checks + 1))
	cmp -s "$db" "$T/before.db" || fail "$desc: database changed"
}
bad "-J quoted" \
    "gpufleet: -J (ProxyJump) is not read from the login line: add the jump host as its own instance and use --jump NAME" \
    add n1 'ssh -J jump@j.example.com -p 22 root@h'
bad "-J as words" "-J (ProxyJump) is not read from the login line" \
    add n1 ssh -J j root@h
bad "-o ProxyJump" "-o ProxyJump (ProxyJump) is not read" \
    add n1 'ssh -o ProxyJump=j root@h'
bad "ProxyCommand" "-o ProxyCommand (a command to connect through) changes how ssh connects" \
    add n1 "ssh -o 'ProxyCommand=nc %h %p' h"
bad "-F" "-F (an ssh_config file; see gpufleet import)" add n1 'ssh -F cfg h'
bad "unknown -o" "-o Foo is not an ssh option" add n1 'ssh -o Foo=1 h'
bad "unknown flag" "'-Z' in the login line is not an ssh option" add n1 ssh -Z h
bad "remote command" "'nvidia-smi' after the host would be a remote command" \
    add n1 'ssh -p 2 root@h nvidia-smi'
bad "no host" "the login line names no host" add n1 'ssh -p 22'
bad "bad port" "port '0' is out of range" add n1 'ssh -p 0 h'
bad "port not a number" "port '2x' is not a number" add n1 ssh -p 2x h
bad "two ports in the line" "two ports: 22 and 23" add n1 'ssh -p 22 -o Port=23 h'
bad "conflict with --port" "port 22 in the login line conflicts with --port 23" \
    add n1 'ssh -p 22 root@h' --port 23
bad "conflict with --user" "user 'root' in the login line conflicts with --user bob" \
    add n1 ssh root@h --user bob
bad "conflict with --identity" \
    "identity '/a' in the login line conflicts with --identity /b" \
    add n1 'ssh -i /a h' --identity /b
bad "shell syntax" "';' outside quotes" add n1 'ssh h; reboot'
bad "unterminated quote" "without its closing" add n1 "ssh 'h"
bad "not ssh" "host 'mosh h' contains ' '" add n1 'mosh h'
bad "words and a target" "needs NAME and [USER@]HOST[:PORT] or the login line" \
    add n1 x ssh h
bad "words, then more" "needs NAME, then the login line" add n1 ssh h --tag t x
bad "no login words" "the login line names no host" add n1 ssh

# --check that cannot even start (no agent to upload): not added either.
GPUFLEET_AGENT=$T/no-such-agent run add --check n1 'ssh -p 2 root@127.0.0.1'
expect_rc 4 "--check without an agent binary"
expect_one_error_line "--check without an agent binary"
expect_contains "$err" "gpufleet: n1 not added: cannot make first contact: " \
    "--check without an agent: the message"
expect_eq "$(sql "SELECT count(*) FROM instance WHERE name = 'n1'")" 0 \
    "--check without an agent: n1 taken back"

# --- identity= a managed key's name ------------------------------------
run keys gen --name lab
expect_rc 0 "keys gen --name lab"
lab=$XDG_DATA_HOME/gpufleet/keys/lab
run add k1 root@10.1.0.1 --identity lab
expect_rc 0 "--identity NAME"
expect_eq "$(row k1)" "10.1.0.1 22 root $lab" "the name stored as the key's file"
run add k2 "ssh -i lab root@10.1.0.2"
expect_rc 0 "-i NAME in the login line"
expect_eq "$(row k2)" "10.1.0.2 22 root $lab" "-i NAME is the managed key"
run add k3 root@10.1.0.3
run set k3 identity=lab
expect_rc 0 "set identity=NAME"
expect_eq "$(row k3)" "10.1.0.3 22 root $lab" "set stores the key's file"
run add k4 root@10.1.0.4 --identity "$lab"
expect_rc 0 "--identity with the key's path"
run add k5 root@10.1.0.5
printf '[defaults]\nidentity = %s\n' "$lab" >"$T/config.ini"
run --config "$T/config.ini" keys ls --json
expect_eq "$(printf '%s' "$out" | jq -r '.[] | select(.name == "lab") | .instances')" \
    "a1,a2,a5,a6,a7,a8,k1,k2,k3,k4,k5" \
    "keys ls: by name, in the line, by set, by path, by the config default"
run keys ls
expect_match "$out" "^lab .* k1,k2,k3,k4$" "keys ls without that config"
run set k3 identity=/other/key
expect_rc 0 "set identity to another file"
run keys ls --json
expect_eq "$(printf '%s' "$out" | jq -r '.[] | select(.name == "lab") | .instances')" \
    "k1,k2,k4" "k3 no longer uses lab"
expect_eq "$(sql "SELECT count(*) FROM instance_key k JOIN instance i ON i.id = k.instance_id WHERE i.name = 'k3'")" \
    0 "nor is lab k3's managed key"

# A bare name that is neither a key nor a file here is refused; a file of
# that name here is still a path; a key's name wins, ./NAME is the file.
cp "$db" "$T/before.db"
bad "unknown key name" \
    "identity 'nokey' is neither a managed key (gpufleet keys ls) nor a file here" \
    add n1 root@h --identity nokey
bad "set identity=unknown" "identity 'nokey' is neither a managed key" \
    set k1 identity=nokey
(
	cd "$T" && touch nokey lab &&
	    "$GPUFLEET" add f1 root@h --identity nokey 2>/dev/null &&
	    "$GPUFLEET" add f2 root@h --identity lab 2>"$T/f2.err" &&
	    "$GPUFLEET" add f3 root@h --identity ./lab 2>/dev/null
) >/dev/null
expect_eq "$(row f1)" "h 22 root $T/nokey" "a file here is a path"
expect_eq "$(row f2)" "h 22 root $lab" "a key's name wins over a file"
expect_contains "$(cat "$T/f2.err")" "identity 'lab' is the managed key lab; ./lab names the file here" \
    "the shadowed file is mentioned"
expect_eq "$(row f3)" "h 22 root $T/lab" "./NAME is the file"

finish

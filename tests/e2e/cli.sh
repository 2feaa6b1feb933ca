#!/usr/bin/env bash
# The inventory CLI end to end: add, ls (every format), show, set, tag, rm,
# help, and the rule that bad input exits 2 and changes no byte of the db.
. "$(dirname "$0")/lib.sh"

db="$XDG_DATA_HOME/gpufleet/fleet.db"

# --- default database location, modes ---------------------------------
run add a100-1 root@10.0.0.1:2222 --provider autodl --region bj-b \
    --tag train --tag a100 --note "spot, ends friday"
expect_rc 0 "add"
expect_eq "$out" "added a100-1: root@10.0.0.1:2222" "add output"
expect_eq "$(stat -c %a "$db")" 600 "database file mode"
expect_eq "$(stat -c %a "$(dirname "$db")")" 700 "database directory mode"
run add h100-1 ubuntu@[2001:db8::7]:30022 --provider runpod -t train
expect_rc 0 "add IPv6"
run add box 192.168.1.5 --user dev --port 2200 --identity keys/box_ed25519
expect_rc 0 "add with --user --port --identity"
run add --json cpu-1 cpu.example.com
expect_rc 0 "add --json"
expect_match "$out" '"name": "cpu-1"' "add --json prints the instance"

run ls
expect_rc 0 "ls"
expect_eq "$out" "NAME    HOST             PORT   USER    PROVIDER  TAGS
a100-1  10.0.0.1         2222   root    autodl    a100,train
box     192.168.1.5      2200   dev     -         -
cpu-1   cpu.example.com  22     root    -         -
h100-1  2001:db8::7      30022  ubuntu  runpod    train" "ls table"

run ls @train,!provider:runpod
expect_eq "$out" "NAME    HOST      PORT  USER  PROVIDER  TAGS
a100-1  10.0.0.1  2222  root  autodl    a100,train" "ls with selector"

run ls 'a100-*' --json
expect_rc 0 "ls --json"
expect_eq "$(printf '%s' "$out" | grep -c '"name"')" 1 "ls --json count"
for f in name host port user provider region tags identity remote_dir \
    authorized_keys_file notes source created_at released_at; do
	expect_match "$out" "\"$f\": " "ls --json has field $f"
done
expect_match "$out" '"remote_dir": "~/.cache/gpufleet"' "default remote_dir"
expect_match "$out" '"authorized_keys_file": "~/.ssh/authorized_keys"' \
    "default authorized_keys_file"

run show box --json
expect_match "$out" "\"identity\": \"$PWD/keys/box_ed25519\"" \
    "relative identity stored absolute"

# ssh-config export is read the same way by OpenSSH itself.
run ls --format ssh-config
expect_rc 0 "ls --format ssh-config"
printf '%s\n' "$out" >"$T/exported"
g=$(ssh -G -F "$T/exported" box 2>&1)
expect_match "$g" "^hostname 192.168.1.5$|hostname 192.168.1.5" "ssh -G hostname"
expect_match "$g" "port 2200" "ssh -G port"
expect_match "$g" "user dev" "ssh -G user"
expect_match "$g" "identityfile $PWD/keys/box_ed25519" "ssh -G identity"
g=$(ssh -G -F "$T/exported" h100-1 2>&1)
expect_match "$g" "hostname 2001:db8::7" "ssh -G IPv6 hostname"

run ls --format ansible
expect_eq "$out" "# gpufleet inventory for Ansible: ansible -i FILE all -m ping
[gpufleet]
a100-1 ansible_host=10.0.0.1 ansible_port=2222 ansible_user=root
box ansible_host=192.168.1.5 ansible_port=2200 ansible_user=dev ansible_ssh_private_key_file=$PWD/keys/box_ed25519
cpu-1 ansible_host=cpu.example.com ansible_port=22 ansible_user=root
h100-1 ansible_host=2001:db8::7 ansible_port=30022 ansible_user=ubuntu

[tag_a100]
a100-1

[tag_train]
a100-1
h100-1

[provider_autodl]
a100-1

[provider_runpod]
h100-1" "ls --format ansible"

# --- show, set, tag ---------------------------------------------------
run show a100-1
expect_match "$out" "notes: +spot, ends friday" "show notes"
expect_match "$out" "region: +bj-b" "show region"
run set a100-1 port=2223 region=bj-c notes=
expect_rc 0 "set"
run show a100-1 --json
expect_match "$out" '"port": 2223' "set port"
expect_match "$out" '"region": "bj-c"' "set region"
expect_match "$out" '"notes": ""' "set notes empty"
run tag a100-1 +big -a100
expect_rc 0 "tag"
expect_eq "$out" "a100-1: big train" "tag output"
run ls @big
expect_match "$out" "a100-1" "tag selects"

# --- bad input: exit 2, one error line, database byte for byte ---------
cp "$db" "$T/before.db"
check_unchanged() {
	checks=$((checks + 1))
	if ! cmp -s "$db" "$T/before.db"; then
		fail "$1: database changed"
	fi
	if [ -e "$db-wal" ] && [ -s "$db-wal" ]; then
		fail "$1: WAL left behind with content"
	fi
}
bad() {
	local desc=$1
	shift
	run "$@"
	expect_rc 2 "$desc"
	expect_one_error_line "$desc"
	check_unchanged "$desc"
}
bad "bad name" add 'bad name' 10.0.0.9
bad "name with slash" add a/b 10.0.0.9
bad "name starting with dash" add -- -x 10.0.0.9
bad "reserved name" add all 10.0.0.9
bad "port 0" add n1 10.0.0.9:0
bad "port 65536" add n1 10.0.0.9:65536
bad "port 22x" add n1 10.0.0.9:22x
bad "--port 0" add n1 10.0.0.9 --port 0
bad "--port 65536" add n1 10.0.0.9 --port 65536
bad "--port 22x" add n1 10.0.0.9 --port 22x
bad "conflicting ports" add n1 10.0.0.9:22 --port 23
bad "host with space" add n1 'bad host'
bad "host with ;" add n1 'h;reboot'
bad "host with \$()" add n1 'h$(reboot)'
bad "host with backquote" add n1 'h`id`'
bad "host with |" add n1 'a|b'
bad "host starting with -" add n1 -oProxyCommand=x
bad "bad user" add n1 'a b@host'
bad "bad tag" add n1 10.0.0.9 --tag 'x y'
bad "duplicate name" add a100-1 10.0.0.9
bad "missing host" add n1
bad "unknown option" add n1 h --nope
bad "unknown field" set a100-1 prot=22
bad "set bad port" set a100-1 port=0
bad "set bad port 65536" set a100-1 port=65536
bad "set bad host" set a100-1 'host=a b'
bad "set one bad of two" set a100-1 region=ok port=x
bad "set rename onto existing" set a100-1 name=box
bad "set not FIELD=VALUE" set a100-1 port
bad "set unknown instance" set nosuch port=22
bad "tag bad" tag a100-1 +'x y'
bad "tag without sign" tag a100-1 x
bad "tag unknown instance" tag nosuch +x
bad "rm unknown" rm a100-1 nosuch
bad "purge without --yes" rm --purge a100-1 </dev/null
bad "selector empty term" ls 'a,,b'
bad "selector bad tag" ls '@'
bad "selector bad provider" ls 'provider:'
bad "selector metachar" ls 'a;b'
bad "selector unknown name" ls nosuch
bad "selector matches nothing" ls 'zz-*'
bad "show unknown" show nosuch
bad "ls bad format" ls --format yaml
expect_match "$(run set a100-1 prot=22; echo "$err")" \
    "valid fields: name, host, port, user" "unknown field lists valid ones"
bad "set: a field twice" set a100-1 port=22 region=x port=23
expect_eq "$err" "gpufleet: set: field 'port' is given twice (try 'gpufleet set --help')" \
    "a field twice is refused, not last-wins"
bad "set: a price field twice" set a100-1 price=1/h price=2/h
bad "set: notes twice, both empty" set a100-1 notes= notes=
bad "exec --fanout 0" exec all -f 0 -- true
expect_eq "$err" "gpufleet: exec: --fanout '0' is not a number of hosts (1-65536) (try 'gpufleet exec --help')" \
    "--fanout is a number of hosts"
bad "exec --fanout too many" exec all --fanout 65537 -- true
bad "exec --setup-timeout 0" exec all --setup-timeout 0 -- true
expect_contains "$err" "--setup-timeout '0' is not a number of seconds (1-604800)" \
    "--setup-timeout is a number of seconds"
expect_match "$(run add n1 h:65536; echo "$err")" "65536" \
    "bad port error names the value"
bad "port given twice, differently" add n1 root@h:22 --port 23
expect_eq "$err" "gpufleet: port 22 in 'root@h:22' conflicts with --port 23" \
    "the port conflict names both"
bad "user given twice, differently" add n1 bob@h --user al
expect_eq "$err" "gpufleet: user 'bob' in 'bob@h' conflicts with --user al" \
    "the user conflict names both"
run add n2 bob@h:2200 --port 2200 --user bob --json
expect_rc 0 "the same port and user both ways"
expect_match "$out" '"port": 2200' "agreeing port taken"
expect_match "$out" '"user": "bob"' "agreeing user taken"
run rm --purge n2 </dev/null

# --- rm: release keeps history, purge deletes ---------------------------
run mark cpu-1 stopped
run rm cpu-1
expect_rc 0 "rm"
expect_eq "$out" "cpu-1: removed from gpufleet (the platform's machine is not touched: release it on the platform); its history stays for cost (gpufleet restore cpu-1 brings it back)" \
    "rm output"
run ls cpu-1
expect_rc 2 "released instance no longer selectable"
run ls --all
expect_match "$out" "cpu-1 .*20[0-9][0-9]-" "ls --all shows the release time"
run add cpu-1 cpu2.example.com
expect_rc 0 "name reusable after release"
run rm --purge --yes --force cpu-1 box
expect_rc 0 "rm --purge --yes"
run ls --all --json
expect_eq "$(printf '%s' "$out" | grep -c '"name": "box"')" 0 "box purged"
expect_eq "$(printf '%s' "$out" | grep -c '"name": "cpu-1"')" 1 \
    "released cpu-1 kept, new one purged"
run rm cpu-1
expect_rc 2 "rm of a released name"
expect_eq "$err" "gpufleet: cpu-1 was removed already (gpufleet restore cpu-1 brings it back; rm --purge deletes it and its history)" \
    "rm says it is released, how to bring it back and how to delete it"
run rm --purge --yes cpu-1
expect_rc 0 "rm --purge of a released instance"
expect_eq "$out" "cpu-1: deleted the removed instances of that name with their history" "purge output"
run ls --all --json
expect_eq "$(printf '%s' "$out" | grep -c '"name": "cpu-1"')" 0 "released cpu-1 purged"
run rm --purge --yes cpu-1
expect_rc 2 "purge of a name that is nowhere"
expect_eq "$err" "gpufleet: no instance named 'cpu-1'" "nothing of that name"

# A name released and added again: two machines, each its own cost row.
run add r1 10.1.1.1 --price 1/h
backdate r1 2026-11-01T00:00:00Z
run mark r1 running --at 2026-11-01T00:00:00Z
run mark r1 stopped --at 2026-11-01T02:00:00Z
run rm r1
run add r1 10.1.1.2 --price 3/h
expect_rc 0 "r1 added again"
backdate r1 2026-11-01T03:00:00Z
run mark r1 running --at 2026-11-01T03:00:00Z
run mark r1 stopped --at 2026-11-01T04:00:00Z
rel=$("$GPUFLEET" ls --all --json | jq -r '.[] | select(.name == "r1" and .released_at != null) | .released_at')
run cost r1 --since 2026-11-01T00:00:00Z --until 2026-11-02T00:00:00Z
expect_match "$out" '^r1 +-' "cost of the r1 in service"
run cost --since 2026-11-01T00:00:00Z --until 2026-11-02T00:00:00Z
expect_rc 0 "cost over both r1"
expect_eq "$(printf '%s\n' "$out" | grep -c '^r1 ')" 2 "two r1 rows"
expect_eq "$(printf '%s\n' "$out" | grep -Ec '^r1 +- +1h00m .* 3\.00 CNY$')" 1 \
    "the r1 in service by its name"
expect_eq "$(printf '%s\n' "$out" | grep -Ec "^r1 \(released $rel\) +- +2h00m .* 2\.00 CNY$")" 1 \
    "the released r1 named with its release"
run cost --since 2026-11-01T00:00:00Z --until 2026-11-02T00:00:00Z --json
expect_eq "$(printf '%s' "$out" | jq -c '[.instances[] | select(.name == "r1") | [.released_at, .total]] | sort')" \
    "[[null,30000],[\"$rel\",20000]]" "--json: released_at tells them apart"
run rm --purge --yes r1
expect_rc 0 "purge r1 in service"
run ls --all --json
expect_eq "$(printf '%s' "$out" | jq -c '[.[] | select(.name == "r1") | .host]')" '["10.1.1.1"]' \
    "purge takes the r1 in service, keeps the released one"
run rm --purge --yes r1
expect_eq "$("$GPUFLEET" ls --all --json | jq '[.[] | select(.name == "r1")] | length')" 0 \
    "then the released r1"

# On a terminal, --purge asks; only "y" deletes.
run add ask-1 10.7.7.7
(sleep 1; printf 'n\n') | script -qec "'$GPUFLEET' rm --purge --force ask-1" "$T/rm1" >/dev/null 2>&1
expect_contains "$(cat "$T/rm1")" "Delete ask-1 and all their history? [y/N]" "purge asks"
run show ask-1
expect_rc 0 "answer n keeps the instance"
(sleep 1; printf 'y\n') | script -qec "'$GPUFLEET' rm --purge --force ask-1" "$T/rm2" >/dev/null 2>&1
run ls --all --json
expect_eq "$(printf '%s' "$out" | grep -c '"ask-1"')" 0 "answer y deletes it"

# --- --db and GPUFLEET_DB ----------------------------------------------
run --db "$T/other/x.db" add o1 10.9.9.9
expect_rc 0 "--db"
expect_eq "$(stat -c %a "$T/other/x.db")" 600 "--db file mode"
GPUFLEET_DB="$T/other/x.db" run ls
expect_match "$out" "o1" "GPUFLEET_DB"
GPUFLEET_DB="$T/nowhere.db" run --db "$T/other/x.db" ls
expect_match "$out" "o1" "--db overrides GPUFLEET_DB"

# A named database where nothing is: readers say so and make nothing;
# writers that fill one (add, import, keys gen, ...) create it.
for c in ls "show o1" cost status "schedule ls" "keys ls" "events" "jobs" \
    "exec all -- true" "rm o1" "set o1 port=2"; do
	# shellcheck disable=SC2086
	run --db "$T/none/sub/x.db" $c
	expect_rc 3 "$c with --db where nothing is"
	expect_eq "$err" "gpufleet: no inventory at $T/none/sub/x.db (gpufleet add or import creates one there)" \
	    "$c: says there is no inventory"
	checks=$((checks + 1))
	[ ! -e "$T/none" ] || fail "$c made $(find "$T/none")"
done
GPUFLEET_DB="$T/none/x.db" run ls
expect_rc 3 "GPUFLEET_DB where nothing is"
expect_eq "$err" "gpufleet: no inventory at $T/none/x.db (gpufleet add or import creates one there)" \
    "GPUFLEET_DB: says there is no inventory"
run --db "$T/none/x.db" --version
expect_rc 0 "--version needs no inventory"
printf 'Host imp1\n  HostName 10.9.9.8\n' >"$T/imp.conf"
run --db "$T/made/by-import.db" import "$T/imp.conf"
expect_rc 0 "import creates a named database"
expect_eq "$(stat -c %a "$T/made/by-import.db")" 600 "made by import, mode 0600"
run --db "$T/made/by-keys.db" keys gen --name k0
expect_rc 0 "keys gen creates a named database"
checks=$((checks + 1))
[ -f "$T/made/by-keys.db" ] || fail "keys gen did not create the named database"
# The default place is made by any command: a first `ls` is an empty table.
(
	export HOME=$T/fresh XDG_DATA_HOME= XDG_CONFIG_HOME=
	mkdir -p "$HOME"
	run ls
	expect_rc 0 "a first ls at the default place"
	expect_eq "$out" "NAME  HOST  PORT  USER  PROVIDER  TAGS" "an empty table"
	exit $((failures))
) || failures=$((failures + 1))

# --- a database from a newer gpufleet is refused untouched -------------
sqlite3 "$T/new.db" "PRAGMA application_id=1195789396; CREATE TABLE x(y);
    PRAGMA user_version=99;" 2>/dev/null ||
    "$GPUFLEET" --db "$T/new.db" ls >/dev/null
if command -v sqlite3 >/dev/null; then
	cp "$T/new.db" "$T/new.before"
	run --db "$T/new.db" ls
	expect_rc 3 "newer database refused"
	expect_match "$err" "newer than this gpufleet" "newer database message"
	checks=$((checks + 1))
	cmp -s "$T/new.db" "$T/new.before" || fail "newer database modified"
fi
printf 'not a database\n' >"$T/text.db"
run --db "$T/text.db" ls
expect_rc 3 "a text file is not a database"
expect_one_error_line "text file database"

# --- a reader that goes away is not an error; a full disk is ----------
"$GPUFLEET" ls | true
expect_eq "${PIPESTATUS[0]}" 0 "ls into a closed pipe exits 0, silently"
if [ -w /dev/full ]; then
	run ls
	"$GPUFLEET" ls >/dev/full 2>"$T/full.err"
	rc=$?
	expect_rc 1 "write error to a full device"
	expect_match "$(cat "$T/full.err")" "write error on standard output" \
	    "full device reported"
fi

# --- help and version --------------------------------------------------
run --version
expect_match "$out" "^gpufleet [0-9]+\.[0-9]+\.[0-9]+$" "--version"
run help
expect_rc 0 "help"
for c in add import ls show set tag rm restore help version; do
	expect_match "$out" "^  $c |
  $c " "help lists $c"
	run "$c" --help
	expect_rc 0 "$c --help"
	expect_match "$out" "^usage: gpufleet $c" "$c --help usage"
	expect_match "$out" "Exit status" "$c --help exit codes"
	run help "$c"
	expect_match "$out" "^usage: gpufleet $c" "help $c"
	run help
done
run s
expect_rc 2 "ambiguous prefix"
expect_match "$err" "ambiguous command 's', could be: show, set" \
    "ambiguous prefix message"
run sho a100-1
expect_rc 0 "unique prefix runs the command"
run frobnicate
expect_rc 2 "unknown command"
expect_one_error_line "unknown command"
run
expect_rc 2 "no command"

# run: what the job's spec (JSON) cannot hold is refused before any
# contact (no such instance is needed), not dropped.
run run nosuch-1 --env $'WANDB_DIR=caf\xe9' -- true
expect_rc 2 "run: an --env value not UTF-8"
expect_contains "$err" "the value of WANDB_DIR is not UTF-8" "run: names the variable"
expect_one_error_line "run: an --env value not UTF-8"
run run nosuch-1 -- printf $'\xe9'
expect_rc 2 "run: a command not UTF-8"
expect_contains "$err" "the command is not UTF-8" "run: says the command"

# --- reading while another process writes -----------------------------------
# A write transaction held elsewhere (a daemon storing a poll, sqlite3) does
# not block a command that only reads: opening the database takes no write
# lock once its schema is current.
checks=$((checks + 1))
lock_db || fail "the write lock was not taken: $(cat "$T/lock.out")"
listed=$(sqlite3 "$db" "SELECT count(*) FROM instance")
run ls --json
expect_rc 0 "ls while another process holds the write lock"
expect_eq "$(printf '%s' "$out" | jq length)" "$listed" "ls lists every instance"
unlock_db

finish

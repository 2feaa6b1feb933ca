#!/usr/bin/env bash
# gpufleet import from an OpenSSH client config: Include, wildcards,
# Host * defaults, ProxyJump warnings, --match, --dry-run, running twice,
# several aliases on one line, well-known non-GPU hosts.
. "$(dirname "$0")/lib.sh"

mkdir -p "$HOME/.ssh/conf.d"
cat >"$HOME/.ssh/config" <<'CFG'
Include conf.d/*.conf

Host a100-1
    HostName 10.1.0.1
    Port 32455
    IdentityFile ~/.ssh/autodl

Host a100-2 a100-3
    HostName connect.example.com
    Port 2200

Host *.corp
    User corpuser

Host behind
    HostName 10.9.9.9
    ProxyJump bastion

Host github.com
    User git

Host gh
    HostName GitHub.com

Host localhost
    Port 2222

Host box-local
    HostName 127.0.0.1
    Port 2223

Host pair-1 pair-2

Host *
    User ubuntu
CFG
cat >"$HOME/.ssh/conf.d/vast.conf" <<'CFG'
Host vast-1
    HostName 203.0.113.7
    User root
    Port 40022
CFG

run import --dry-run
expect_rc 0 "dry run"
expect_match "$out" "would add a100-1: ubuntu@10.1.0.1:32455" "dry run lists"
run ls --json
expect_eq "$out" "[]" "dry run changed nothing"

run import
expect_rc 0 "import ~/.ssh/config"
expect_match "$out" "added vast-1: root@203.0.113.7:40022" "Included file"
expect_match "$out" "added a100-2: ubuntu@connect.example.com:2200 \(also a100-3\)" \
    "two aliases of one place on one Host line are one instance"
expect_eq "$(printf '%s\n' "$out" | grep -c 'a100-3:')" 0 "no instance a100-3"
expect_match "$out" "added pair-1: ubuntu@pair-1:22$" \
    "aliases of one line that are different hosts stay apart (1)"
expect_match "$out" "added pair-2: ubuntu@pair-2:22$" \
    "aliases of one line that are different hosts stay apart (2)"
expect_match "$out" "skipped .*'\*\.corp'.*wildcard" "wildcard reported"
expect_match "$out" "skipped github.com: a code forge, not a GPU machine \(name it with --match to import it\)" \
    "github.com skipped by alias"
expect_match "$out" "skipped gh: HostName github.com is a code forge" \
    "github.com skipped by HostName"
expect_match "$out" "skipped localhost: this machine" "localhost skipped"
expect_match "$out" "skipped box-local: HostName 127.0.0.1 is a loopback address" \
    "loopback HostName skipped"
expect_match "$out" "added 6, unchanged 0, differing 0, skipped 6" "summary"
expect_match "$err" "behind uses ProxyJump bastion, which gpufleet does not support yet" \
    "ProxyJump warning"
run ls --json
expect_eq "$(printf '%s' "$out" | grep -c '"name": "a100-2"')" 1 "a100-2 imported (the count below works)"
for n in github.com gh localhost box-local a100-3; do
	expect_eq "$(printf '%s' "$out" | grep -c "\"name\": \"$n\"")" 0 "$n not imported"
done
run show a100-2 --json
expect_match "$out" "\"notes\": \"also a100-3 in $HOME/.ssh/config\"" \
    "the other alias is in the notes"
run show a100-1 --json
expect_match "$out" "\"identity\": \"$HOME/.ssh/autodl\"" "IdentityFile expanded"
expect_match "$out" "\"source\": \"$HOME/.ssh/config\"" "source recorded"

cp "$XDG_DATA_HOME/gpufleet/fleet.db" "$T/db.before"
run import
expect_rc 0 "second import"
expect_match "$out" "nothing to import: 6 hosts already in the inventory" \
    "running twice changes nothing and says so"
checks=$((checks + 1))
cmp -s "$XDG_DATA_HOME/gpufleet/fleet.db" "$T/db.before" || fail "second import changed the db"

sed -i 's/Port 2200/Port 2201/' "$HOME/.ssh/config"
run import --match 'a100-*'
expect_match "$out" "differs a100-2: already in the inventory with other settings \(port 2200 -> 2201\); not changed" \
    "differences reported, not applied"
# ... but ls and show print what exec will use: the file's Port now.
run ls
expect_match "$out" "a100-2 +connect.example.com +2201 " "ls follows the edited Port"
run ls a100-2 --json
expect_match "$out" '"port": 2201' "ls --json follows the edited Port"
run ls a100-2 --format ssh-config
expect_match "$out" "Port 2201" "ls --format ssh-config follows the edited Port"
run show a100-2
expect_match "$out" "port: +2201" "show follows the edited Port"
run show a100-2 --json
expect_match "$out" '"port": 2201' "show --json follows the edited Port"
run ls a100-1 --json
expect_match "$out" '"port": 32455' "an unedited alias keeps its Port"

run rm --purge --yes --force vast-1
run import --match 'vast-*' --tag rented --provider vast
expect_match "$out" "added vast-1" "--match"
run show vast-1 --json
expect_match "$out" '"provider": "vast"' "--provider"
expect_match "$out" '"rented"' "--tag"

# --match names well-known hosts, and must match something.
run import --match 'box-*'
expect_rc 0 "--match names a loopback host"
expect_match "$out" "added box-local: ubuntu@127.0.0.1:2223" "loopback host imported when named"
expect_match "$out" "added 1, unchanged 0, differing 0, skipped 2$" "only the named one (the 2 are the wildcards)"
cp "$XDG_DATA_HOME/gpufleet/fleet.db" "$T/db.before"
run import --match 'nosuch-*'
expect_rc 2 "--match that matches no alias"
expect_one_error_line "--match that matches no alias"
expect_contains "$err" "no Host alias in $HOME/.ssh/config matches 'nosuch-*'" "names the glob"
expect_eq "$out" "" "nothing printed on stdout"
checks=$((checks + 1))
cmp -s "$XDG_DATA_HOME/gpufleet/fleet.db" "$T/db.before" || fail "a --match error changed the db"
run import --match 'a100-3' --dry-run
expect_match "$out" "would add a100-3: ubuntu@connect.example.com:2201$" \
    "--match on the second alias imports it under its own name"

# The rest of the well-known list, by alias and by HostName.
cat >"$T/known.conf" <<'CFG'
Host bitbucket.org gitlab.com dev.localhost
Host v6
    HostName ::1
Host lo2
    HostName 127.8.0.2
Host fq
    HostName GitHub.com.
Host not-loop
    HostName 128.0.0.1
Host mapped
    HostName ::ffff:127.0.0.1
CFG
run import "$T/known.conf" --dry-run
expect_rc 0 "well-known list"
for n in bitbucket.org gitlab.com dev.localhost v6 lo2 fq mapped; do
	expect_match "$out" "^skipped $n: " "$n skipped"
done
expect_match "$out" "would add not-loop: [^ ]*@128.0.0.1:22$" \
    "128.0.0.1 is not loopback"
expect_match "$out" "would add 1, unchanged 0, differing 0, skipped 7$" "only not-loop"

run import "$T/missing.conf"
expect_rc 4 "missing config file"
expect_one_error_line "missing config file"
printf 'Host x\n    Port 99999\n' >"$T/bad.conf"
run import "$T/bad.conf"
expect_rc 4 "bad port in ssh_config"
expect_match "$err" "bad.conf:2" "names file and line"

finish

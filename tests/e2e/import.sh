#!/usr/bin/env bash
# gpufleet import from an OpenSSH client config: Include, wildcards,
# Host * defaults, ProxyJump warnings, --match, --dry-run, running twice.
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
expect_match "$out" "added a100-2: ubuntu@connect.example.com:2200" "multi-alias Host line"
expect_match "$out" "added a100-3: ubuntu@connect.example.com:2200" "second alias"
expect_match "$out" "skipped .*'\*\.corp'.*wildcard" "wildcard reported"
expect_match "$out" "added 5, unchanged 0, differing 0, skipped 2" "summary"
expect_match "$err" "behind uses ProxyJump bastion, which gpufleet does not support yet" \
    "ProxyJump warning"
run show a100-1 --json
expect_match "$out" "\"identity\": \"$HOME/.ssh/autodl\"" "IdentityFile expanded"
expect_match "$out" "\"source\": \"$HOME/.ssh/config\"" "source recorded"

cp "$XDG_DATA_HOME/gpufleet/fleet.db" "$T/db.before"
run import
expect_rc 0 "second import"
expect_match "$out" "nothing to import: 5 hosts already in the inventory" \
    "running twice changes nothing and says so"
checks=$((checks + 1))
cmp -s "$XDG_DATA_HOME/gpufleet/fleet.db" "$T/db.before" || fail "second import changed the db"

sed -i 's/Port 2200/Port 2201/' "$HOME/.ssh/config"
run import --match 'a100-*'
expect_match "$out" "differs a100-2: already in the inventory with other settings \(port 2200 -> 2201\); not changed" \
    "differences reported, not applied"

run rm --purge --yes vast-1
run import --match 'vast-*' --tag rented --provider vast
expect_match "$out" "added vast-1" "--match"
run show vast-1 --json
expect_match "$out" '"provider": "vast"' "--provider"
expect_match "$out" '"rented"' "--tag"

run import "$T/missing.conf"
expect_rc 4 "missing config file"
expect_one_error_line "missing config file"
printf 'Host x\n    Port 99999\n' >"$T/bad.conf"
run import "$T/bad.conf"
expect_rc 4 "bad port in ssh_config"
expect_match "$err" "bad.conf:2" "names file and line"

finish

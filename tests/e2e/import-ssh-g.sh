#!/usr/bin/env bash
# gpufleet import sees each alias as `ssh -G ALIAS` does: the test asks the
# OpenSSH client itself and compares, on a config with Match all before an
# Include (where vast-h100 used to come out as root@vast-h100:22), Match
# host/originalhost/user/localuser/final, negation, Include inside a Host
# block and first-value-wins.
. "$(dirname "$0")/lib.sh"

command -v ssh >/dev/null || { echo "FAIL: no ssh client (OpenSSH is a dependency)" >&2; exit 1; }
me=$(id -un)
mkdir -p "$HOME/.ssh/conf.d"
cat >"$HOME/.ssh/config" <<CFG
Host laptop
    HostName 192.0.2.10
    User me-on-laptop

Match all
Include conf.d/*.conf

Host gpu-* !gpu-special
    Port 2200

Host gpu-a gpu-b gpu-special
    HostName %h.cluster.example

Host gpu-c
    Include ~/.ssh/inside-host.conf

Match host gpu-b.cluster.example
    User b-by-hostname

Match originalhost GPU-A
    User a-by-originalhost

Match user $me localuser $me
    IdentityFile ~/.ssh/id_default_user

Match !host "*.cluster.example,laptop" !originalhost "vast-*"
    Port 2300

Match exec false
    Port 1

Match final host ssh4.vast.ai
    User final-root

Host *
    ServerAliveInterval 30
CFG
cat >"$HOME/.ssh/conf.d/vast.conf" <<'CFG'
Host vast-h100
    HostName ssh4.vast.ai
    Port 12345

Host vast-a6000
    HostName ssh5.vast.ai
    Port 23456
    User root
CFG
cat >"$HOME/.ssh/inside-host.conf" <<'CFG'
HostName inside.example
User inside-user
Host gpu-d
    HostName d.example
CFG

run import --dry-run
expect_rc 0 "dry run"
names=$(printf '%s\n' "$out" | sed -n 's/^would add \([^:]*\): .*/\1/p')
expect_eq "$(printf '%s\n' "$names" | sort | tr '\n' ' ')" \
    "gpu-a gpu-b gpu-c gpu-d gpu-special laptop vast-a6000 vast-h100 " "every alias listed"
expect_contains "$out" "would add vast-h100: final-root@ssh4.vast.ai:12345" \
    "the reported case: Match all + Include"
expect_eq "$(printf '%s\n' "$out" | grep -c 'never takes effect')" 1 \
    "only gpu-d (in a file Included inside Host gpu-c) never takes effect"
expect_contains "$out" "alias 'gpu-d' never takes effect" "gpu-d noted"
expect_contains "$out" "Match exec is not evaluated" "Match exec noted"

# Each alias, as ssh -G shows it.
for n in $names; do
	want=$(ssh -G -F "$HOME/.ssh/config" "$n" 2>/dev/null </dev/null |
	    awk '$1 == "user" { u = $2 } $1 == "hostname" { h = $2 } $1 == "port" { p = $2 }
		END { printf "%s@%s:%s", u, h, p }')
	got=$(printf '%s\n' "$out" | sed -n "s/^would add $n: \([^ ]*\).*/\1/p")
	expect_eq "$got" "$want" "$n as ssh -G sees it"
done

# IdentityFile too: import, then compare with ssh -G's first identityfile
# (ssh's default list starts with ~/.ssh/id_rsa where none is set).
run import --match '*'
expect_rc 0 "import"
run show gpu-special --json
expect_contains "$out" "\"identity\": \"$HOME/.ssh/id_default_user\"" \
    "gpu-special has the identity of Match user/localuser"
for n in $names; do
	want=$(ssh -G -F "$HOME/.ssh/config" "$n" 2>/dev/null </dev/null |
	    awk '$1 == "identityfile" { print $2; exit }')
	want=${want/#\~/$HOME}
	[ "$want" = "$HOME/.ssh/id_rsa" ] && want=null || want="\"$want\""
	run show "$n" --json
	expect_contains "$out" "\"identity\": $want" "$n identity as ssh -G sees it"
done

finish

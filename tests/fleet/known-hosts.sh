#!/usr/bin/env bash
# The known_hosts file gpufleet writes for `gpufleet ssh` beside its
# database has a name of its own, and gpufleet never replaces a file it did
# not write: a database kept in ~/.ssh leaves the user's known_hosts alone.
. "$(dirname "$0")/../e2e/lib.sh"
export GPUFLEET_NO_PROGRESS=1

fleet_up 2

mkdir -m 0700 "$HOME/.ssh"
printf '# my own known_hosts\nexample.org ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl\n' \
    >"$HOME/.ssh/known_hosts"
cp "$HOME/.ssh/known_hosts" "$T/known_hosts.orig"
export GPUFLEET_DB="$HOME/.ssh/fleet.db"
run import "$D/ssh_config" --match 'inst-*'
expect_rc 0 "import into a database in ~/.ssh"
expect_match "$out" "added inst-1: " "inst-1 imported (loopback, named by --match)"

run exec inst-1 -- true
expect_rc 0 "first contact pins the key"
run ssh inst-1 -- echo via ssh
expect_rc 0 "gpufleet ssh with the database in ~/.ssh"
expect_eq "$out" "via ssh" "ssh ran the command"
checks=$((checks + 1))
cmp -s "$T/known_hosts.orig" "$HOME/.ssh/known_hosts" ||
    fail "~/.ssh/known_hosts was changed: $(cat "$HOME/.ssh/known_hosts")"
expect_match "$(head -1 "$HOME/.ssh/gpufleet_known_hosts")" \
    '^# written by gpufleet' "the pins are in gpufleet_known_hosts"
expect_match "$(cat "$HOME/.ssh/gpufleet_known_hosts")" '^inst-1 ssh-ed25519 ' \
    "inst-1's pin is there"
expect_eq "$(stat -c %a "$HOME/.ssh/gpufleet_known_hosts")" 600 "mode 0600"

# --- a file of that name that gpufleet did not write is left alone --------
rm "$HOME/.ssh/gpufleet_known_hosts"
printf 'not gpufleet\n' >"$HOME/.ssh/gpufleet_known_hosts"
run ssh inst-1 -- true
expect_rc 2 "a foreign gpufleet_known_hosts"
expect_one_error_line "a foreign gpufleet_known_hosts"
expect_contains "$err" "not replacing $HOME/.ssh/gpufleet_known_hosts: gpufleet did not write it" \
    "names the file"
expect_eq "$(cat "$HOME/.ssh/gpufleet_known_hosts")" "not gpufleet" \
    "the foreign file is untouched"

# --- nor a symbolic link, or its target ----------------------------------
rm "$HOME/.ssh/gpufleet_known_hosts"
ln -s known_hosts "$HOME/.ssh/gpufleet_known_hosts"
run ssh inst-1 -- true
expect_rc 2 "a link named gpufleet_known_hosts"
checks=$((checks + 1))
[ -L "$HOME/.ssh/gpufleet_known_hosts" ] || fail "the link was replaced"
checks=$((checks + 1))
cmp -s "$T/known_hosts.orig" "$HOME/.ssh/known_hosts" ||
    fail "the link's target was changed"
expect_eq "$(ls "$HOME/.ssh" | grep -c '\.tmp\.')" 0 "no temporary file left"

finish

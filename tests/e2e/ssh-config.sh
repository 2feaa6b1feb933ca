#!/usr/bin/env bash
# ssh-config without a fleet: what the Host blocks hold, values that could
# break the file, and the installed ~/.ssh/gpufleet.conf: written 0600 and
# atomically, rewritten after changes, never a file gpufleet did not write
# or wrote from another inventory.
. "$(dirname "$0")/lib.sh"

CONF=$HOME/.ssh/gpufleet.conf
KH=$XDG_DATA_HOME/gpufleet/gpufleet_known_hosts
run add a1 root@10.0.0.1:2222 --identity keys/a1 --provider vast --tag train
expect_rc 0 "add a1"
run add v6 'ubuntu@[fe80::1%eth0]:30022'
expect_rc 0 "add an IPv6 instance with a zone"

# --- the blocks, as OpenSSH reads them --------------------------------------
run ssh-config
expect_rc 0 "ssh-config"
printf '%s\n' "$out" >"$T/out.conf"
expect_eq "$(sed -n '/^Host a1$/,/^$/p' "$T/out.conf")" "Host a1
    # provider=vast tags=train
    # no host key pinned yet: ssh refuses this host until \`gpufleet status a1\`
    # (or \`gpufleet hostkey accept a1\`) pins one
    HostName 10.0.0.1
    Port 2222
    User root
    IdentityFile \"$PWD/keys/a1\"
    IdentitiesOnly yes
    HostKeyAlias a1
    UserKnownHostsFile \"$KH\"
    GlobalKnownHostsFile /dev/null
    StrictHostKeyChecking yes
    UpdateHostKeys no" "a1's block"
run ls --format ssh-config
expect_eq "$out" "$(cat "$T/out.conf")" "ls --format ssh-config is the same"
expect_match "$(head -1 "$KH")" '^# written by gpufleet' "the known_hosts file it names exists"
g=$(ssh -G -F "$T/out.conf" v6 2>/dev/null)
expect_match "$g" '^hostname fe80::1%eth0$' "a % in HostName reaches ssh as one %"
run ssh-config v6
expect_rc 0 "ssh-config SELECTOR"
expect_eq "$(printf '%s\n' "$out" | grep -c '^Host ')" 1 "one block"

# A key path ssh_config cannot hold is refused, with nothing printed.
run set v6 identity="$T/we\"ird"
run ssh-config
expect_rc 2 "a quote in a key path"
expect_one_error_line "a quote in a key path"
expect_contains "$err" "v6: cannot name its key" "names the instance"
expect_eq "$out" "" "nothing half-written on stdout"
run set v6 identity="$T/pct%d"
run ssh-config v6
expect_rc 0 "a % in a key path"
expect_contains "$out" "IdentityFile \"$T/pct%%d\"" "doubled, as ssh_config's tokens need"

# --- usage errors ---------------------------------------------------------
run ssh-config --json
expect_rc 2 "--json without --install"
expect_one_error_line "--json without --install"
run ssh-config --install a1
expect_rc 2 "--install with a SELECTOR"
run ssh-config --install --uninstall
expect_rc 2 "--install --uninstall"
checks=$((checks + 1))
[ ! -e "$CONF" ] || fail "a usage error wrote $CONF"

# --- install, then every change follows -------------------------------------
run ssh-config
printf '%s\n' "$out" >"$T/now.conf"
run ssh-config --install
expect_rc 0 "install"
expect_eq "$out" "wrote $CONF (2 hosts)
Add this line at the top of ~/.ssh/config (before any Host or Match):
    Include ~/.ssh/gpufleet.conf
gpufleet rewrites the file when addresses or keys change." "install output"
expect_eq "$(stat -c %a "$HOME/.ssh")" 700 "~/.ssh created 0700"
expect_eq "$(stat -c %a "$CONF")" 600 "the file is 0600"
expect_eq "$(head -2 "$CONF")" "# gpufleet ssh-config: written by gpufleet, do not edit
# inventory: $XDG_DATA_HOME/gpufleet/fleet.db" "the header names the inventory"
expect_eq "$(sed 1,5d "$CONF")" "$(sed 1d "$T/now.conf")" \
    "the blocks are ssh-config's"
printf 'Include %s\n' "$CONF" >"$T/user.conf"
expect_match "$(ssh -G -F "$T/user.conf" a1 2>/dev/null)" '^hostkeyalias a1$' \
    "an Include of the file gives the block"
run ssh-config --install --json
expect_eq "$(printf '%s' "$out" | jq -c .)" \
    "{\"path\":\"$CONF\",\"action\":\"install\",\"changed\":false,\"hosts\":2,\"include\":\"Include ~/.ssh/gpufleet.conf\"}" \
    "install again: up to date"

run set a1 port=2345
expect_rc 0 "set a1's port"
expect_match "$(ssh -G -F "$CONF" a1 2>/dev/null)" '^port 2345$' "the port followed"
run tag a1 +big
expect_contains "$(cat "$CONF")" "# provider=vast tags=big,train" "the tags followed"
run add c1 10.0.0.3
expect_contains "$(cat "$CONF")" "Host c1" "an added instance is there"
run rm c1 --force
expect_rc 0 "rm c1"
checks=$((checks + 1))
grep -q '^Host c1$' "$CONF" && fail "c1 is still in $CONF"
cp "$CONF" "$T/before"
run set a1 port=notaport
expect_rc 2 "a usage error"
checks=$((checks + 1))
cmp -s "$T/before" "$CONF" || fail "a usage error changed $CONF"
expect_eq "$(ls -a "$HOME/.ssh" | grep -c '\.tmp\.')" 0 "no temporary file left"

# --- the user's config Includes the file, then its own Host blocks ---------
# gpufleet reads the user's blocks, not its own export back: an edit there
# is followed, and the file follows it.
printf 'Include ~/.ssh/gpufleet.conf\n\nHost u1\n    HostName 10.2.0.1\n' >"$HOME/.ssh/config"
run import --match u1
expect_rc 0 "import with the export Included at the top"
expect_contains "$out" "added u1: " "u1 imported (the export's blocks are not)"
expect_contains "$(sed -n '/^Host u1$/,/^$/p' "$CONF")" "HostName 10.2.0.1" "u1 in the file"
sed -i 's/10\.2\.0\.1/10.2.0.2/' "$HOME/.ssh/config"
run show u1 --json
expect_contains "$out" '"host": "10.2.0.2"' "the edit of the user's block is followed"
expect_contains "$(sed -n '/^Host u1$/,/^$/p' "$CONF")" "HostName 10.2.0.2" "and the file follows it"
run import
expect_rc 0 "import again"
expect_contains "$out" "unchanged" "nothing new from the export"
run rm u1 --force
expect_rc 0 "rm u1"
rm "$HOME/.ssh/config"
cp "$CONF" "$T/before"

# --- another inventory never takes the file --------------------------------
run --db "$T/other.db" add o1 10.0.0.9
expect_rc 0 "a command on another inventory"
checks=$((checks + 1))
cmp -s "$T/before" "$CONF" || fail "another inventory's command changed $CONF"
run --db "$T/other.db" ssh-config --install
expect_rc 2 "install from another inventory"
expect_one_error_line "install from another inventory"
expect_contains "$err" "was written from the inventory $XDG_DATA_HOME/gpufleet/fleet.db" "names the owner"
run --db "$T/other.db" ssh-config --uninstall
expect_rc 2 "uninstall from another inventory"
checks=$((checks + 1))
cmp -s "$T/before" "$CONF" || fail "another inventory changed $CONF"

# --- a file gpufleet did not write is never touched -------------------------
run ssh-config --uninstall
expect_rc 0 "uninstall"
expect_eq "$out" "removed $CONF (an Include of it in ~/.ssh/config can stay: ssh skips a missing file)" \
    "uninstall output"
expect_match "$(ssh -G -F "$T/user.conf" a1 2>&1)" '^hostname a1$' "ssh skips the missing file"
run import "$T/user.conf" --dry-run
expect_rc 0 "import skips the missing file too (as ssh does)"
run ssh-config --uninstall
expect_rc 0 "uninstall again"
expect_eq "$out" "nothing to remove: $CONF does not exist" "nothing to remove"
printf 'Host mine\n    HostName 10.1.1.1\n' >"$CONF"
cp "$CONF" "$T/mine"
run ssh-config --install
expect_rc 2 "install over a foreign file"
expect_one_error_line "install over a foreign file"
expect_contains "$err" "not replacing $CONF: gpufleet did not write it" "says why"
run set a1 port=2346
expect_rc 0 "a change with a foreign file there"
expect_eq "$err" "" "no warning about a file that is not gpufleet's"
run ssh-config --uninstall
expect_rc 2 "uninstall of a foreign file"
checks=$((checks + 1))
cmp -s "$T/mine" "$CONF" || fail "the foreign file was changed"
rm "$CONF"
ln -s "$T/mine" "$CONF"
run ssh-config --install
expect_rc 2 "install over a link"
checks=$((checks + 1))
[ -L "$CONF" ] && cmp -s "$T/mine" "$CONF" || fail "the link or its target was changed"

finish

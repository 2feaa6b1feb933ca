#!/usr/bin/env bash
# The jump field without a fleet: add --jump, set jump=, rm of a jump host,
# import of `ProxyJump ALIAS`, and a jump that went missing or became a
# second hop after it was set (refused at use time, before any connection).
. "$(dirname "$0")/lib.sh"
db=$XDG_DATA_HOME/gpufleet/fleet.db

run add gw 127.0.0.1:2201
expect_rc 0 "add the jump host"
run add lab-1 10.0.0.1 --jump gw --json
expect_rc 0 "add --jump"
expect_contains "$out" '"jump": "gw"' "add --json shows the jump"
run add lab-2 10.0.0.2 -J nosuch
expect_rc 2 "add --jump to a missing instance"
expect_contains "$err" "jump host 'nosuch' is not in the inventory" "missing jump"
expect_one_error_line "missing jump"
run show lab-2
expect_rc 2 "nothing half-written by a refused add"
run add lab-2 10.0.0.2 -J lab-2
expect_rc 2 "add --jump to itself"
expect_contains "$err" "lab-2 cannot be its own jump host" "self jump"
run add lab-2 10.0.0.2 -J lab-1
expect_rc 2 "add behind a host that is behind a jump"
expect_contains "$err" "jump host lab-1 is itself behind jump host gw; only one hop is supported" \
    "two hops"
run add lab-2 10.0.0.2
run set lab-2 jump=gw
expect_rc 0 "set jump"
run set lab-2 jump=
expect_rc 0 "clear the jump"
run show lab-2 --json
expect_contains "$out" '"jump": null' "cleared"

# Renaming the jump host carries the hosts behind it along.
run set gw name=gw-2
expect_rc 0 "rename the jump host"
run show lab-1 --json
expect_contains "$out" '"jump": "gw-2"' "the jump follows the rename"

run rm gw-2
expect_rc 2 "rm of a jump host in use"
expect_contains "$err" "gw-2 is the jump host of lab-1; change their jump first" "rm says why"
expect_one_error_line "rm refusal"
run rm gw-2 lab-1 --force
expect_rc 0 "rm of the jump host with the hosts behind it"

# --- refused at use time --------------------------------------------------
mkdir -p -m 700 "$HOME/.ssh"
ssh-keygen -q -t ed25519 -N '' -f "$HOME/.ssh/id_ed25519"
run add gw 127.0.0.1:1
run add lab-3 127.0.0.1:2 -J gw
sqlite3 "$db" "UPDATE instance SET jump = 'gone' WHERE name = 'lab-3'"
run exec lab-3 --connect-timeout 2 -- true
expect_rc 1 "a jump that went missing"
expect_contains "$err" "jump host 'gone' is not in the inventory" "use-time: missing"
sqlite3 "$db" "UPDATE instance SET jump = 'gw' WHERE name = 'lab-3';
    UPDATE instance SET jump = 'lab-2' WHERE name = 'gw'"
run exec lab-3 --connect-timeout 2 -- true
expect_rc 1 "a jump that became a second hop"
expect_contains "$err" "jump host gw is itself behind jump host lab-2; only one hop is supported" \
    "use-time: two hops"
sqlite3 "$db" "UPDATE instance SET jump = NULL WHERE name = 'gw'"
run exec lab-3 --connect-timeout 2 --json -- true
expect_rc 1 "a jump that refuses"
expect_contains "$out" "via jump gw: connection refused (127.0.0.1 port 1)" \
    "the failure names the jump"

# --- import: ProxyJump ALIAS becomes the jump -----------------------------
cat >"$T/cfg" <<'CFG'
Host lab-4
    HostName 10.0.0.4
    ProxyJump bastion
Host bastion
    HostName 10.0.0.2
    Port 2202
Host far
    HostName 10.0.0.5
    ProxyJump user@elsewhere:22
Host cmd
    HostName 10.0.0.6
    ProxyCommand nc %h %p
CFG
run import "$T/cfg"
expect_rc 0 "import"
expect_contains "$out" "added lab-4: $(id -un)@10.0.0.4:22 via jump bastion" "ProxyJump alias imported as the jump"
expect_contains "$err" "far uses ProxyJump user@elsewhere:22, which gpufleet does not support yet" \
    "other ProxyJump forms warn"
expect_contains "$err" "cmd uses ProxyCommand nc %h %p, which gpufleet does not support yet" \
    "ProxyCommand warns"
run show lab-4 --json
expect_contains "$out" '"jump": "bastion"' "stored"
run exec cmd --connect-timeout 2 -- true
expect_rc 1 "ProxyCommand stays unsupported"
expect_contains "$err" "ProxyCommand nc %h %p (from $T/cfg) is not supported yet" "clear message"

# A ProxyJump alias the import skips (a code forge) is not made a jump
# that would then be missing; one grouped under its line's first alias
# becomes that alias (the name the inventory has).
cat >"$T/cfg2" <<'CFG'
Host lab-7
    HostName 10.0.0.7
    ProxyJump gh
Host gh
    HostName github.com
    User git
Host gate gate-b
    HostName 10.0.0.8
Host lab-9
    HostName 10.0.0.9
    ProxyJump gate-b
CFG
run import "$T/cfg2"
expect_rc 0 "import with a skipped and a grouped jump alias"
expect_contains "$out" "skipped gh: HostName github.com" "the forge is skipped"
expect_contains "$out" "added lab-7: $(id -un)@10.0.0.7:22"$'\n' "lab-7 is added without a jump"
expect_contains "$err" "lab-7 uses ProxyJump gh, which this import skips; connections to it will fail until gh is in the inventory and \`gpufleet set lab-7 jump=gh\`" \
    "a jump alias not imported warns, saying why and what to do"
expect_contains "$out" "added gate: $(id -un)@10.0.0.8:22 (also gate-b)" "gate-b grouped under gate"
run show lab-7 --json
expect_contains "$out" '"jump": null' "no dangling jump stored"
run show lab-9 --json
expect_contains "$out" '"jump": "gate"' "the grouped alias's leader is the jump"

finish

#!/usr/bin/env bash
# gpufleet add --check against a real sshd fleet: a good login line pins the
# instance's host key (the one sshd really has) and reports its GPUs from the
# fake nvidia-smi; a wrong port, user or key is refused and nothing is
# added; a managed key given by name logs in and keys ls shows its user.
. "$(dirname "$0")/../e2e/lib.sh"
export GPUFLEET_NO_PROGRESS=1
: "${GPUFLEET_AGENT:=$(dirname "$GPUFLEET")/gpufleet-agent}"
export GPUFLEET_AGENT
data=$GPUFLEET_SRC/tests/data/agent
db=$XDG_DATA_HOME/gpufleet/fleet.db
sql() { sqlite3 "$db" "$@"; }

fleet_up 2
port() { awk -v n="$1" '$1 == n { print $2 }' "$D/instances.tsv"; }
user=$(awk '$1 == "inst-1" { print $3 }' "$D/instances.tsv")
p1=$(port inst-1)
p2=$(port inst-2)
key=$D/client/id_ed25519
d1=$(instance_dir inst-1)
cp "$data/fake-nvidia-smi" "$d1/bin/nvidia-smi"
cp -r "$data/gpus/a100/." "$d1/gpu/"
# The fingerprint of the ed25519 key sshd serves for PORT.
sshd_fp() {
	grep "^\[127.0.0.1\]:$1 " "$D/known_hosts" | ssh-keygen -lf - |
	    awk '{ print $2 }'
}
fp1=$(sshd_fp "$p1")
checks=$((checks + 1))
case $fp1 in SHA256:*) ;; *) fail "no fingerprint for inst-1: [$fp1]" ;; esac
instances() { sql "SELECT count(*) FROM instance WHERE name = '$1'"; }
pins() { sql "SELECT count(*) FROM host_key"; }

# --- a good line: pinned, logged in, GPUs and OS reported ---------------
run add --check box-1 "ssh -p $p1 -i $key -o StrictHostKeyChecking=no $user@127.0.0.1"
expect_rc 0 "add --check of a good login line"
expect_eq "$(printf '%s\n' "$out" | head -1)" "added box-1: $user@127.0.0.1:$p1" \
    "added line first"
expect_contains "$out" "box-1: host key ssh-ed25519 $fp1 (pinned)" \
    "the fingerprint shown is sshd's"
expect_match "$out" "box-1: logged in: [^,]+, Linux [^,]+, [0-9]+ CPUs, [0-9.]+ GiB memory" \
    "host and OS reported"
expect_contains "$out" \
    "box-1: GPUs: 2 x NVIDIA A100-SXM4-80GB (81920 MiB); driver 535.104.05, CUDA 12.2" \
    "GPUs from the fake nvidia-smi"
expect_contains "$err" "note: skipped from the login line" "ignored -o noted"
expect_eq "$(sql "SELECT fingerprint FROM host_key k JOIN instance i ON i.id = k.instance_id WHERE i.name = 'box-1'")" \
    "$fp1" "the pin in the inventory"
expect_contains "$(cat "$XDG_DATA_HOME/gpufleet/gpufleet_known_hosts" 2>/dev/null)" \
    "$(grep "^\[127.0.0.1\]:$p1 " "$D/known_hosts" | awk '{ print $3 }')" \
    "known_hosts for gpufleet ssh written"
expect_eq "$(sql "SELECT count(*) FROM sample_gpu g JOIN instance i ON i.id = g.instance_id WHERE i.name = 'box-1'")" \
    2 "the report stored as status stores it"
run exec box-1 -- true
expect_rc 0 "exec works on the checked instance"

# --json: the same facts under "check"; the words form of the line.
run add --check --json box-2 ssh -p "$p1" -i "$key" "$user@127.0.0.1" --tag t
expect_rc 0 "add --check --json (line as words)"
expect_eq "$(printf '%s' "$out" | jq -r .check.host_key_fingerprint)" "$fp1" \
    "--json fingerprint"
expect_eq "$(printf '%s' "$out" | jq -r '.check.gpus | length')" 2 "--json GPUs"
expect_eq "$(printf '%s' "$out" | jq -r '.check.gpus[0].name')" \
    "NVIDIA A100-SXM4-80GB" "--json GPU name"
expect_eq "$(printf '%s' "$out" | jq -r '.check.state + " " + .name + " " + (.port|tostring) + " " + .tags[0]')" \
    "up box-2 $p1 t" "--json instance and state"
expect_eq "$err" "" "no hint with --check --json"

# --- wrong port, user, key: refused, not added ---------------------------
fleet break inst-2 refuse
before=$(pins)
run add --check box-3 "ssh -p $p2 -i $key $user@127.0.0.1"
expect_rc 1 "a wrong port is refused"
expect_match "$err" "^gpufleet: box-3 not added: unreachable: .*[Cc]onnection refused" \
    "one line naming the problem"
expect_one_error_line "wrong port"
expect_eq "$out" "" "nothing on stdout"
expect_eq "$(instances box-3)" 0 "box-3 not in the inventory"
expect_eq "$(pins)" "$before" "no pin left behind"
run show box-3
expect_rc 2 "show box-3 finds nothing"

run add --check box-4 "ssh -p $p1 -i $key nosuchuser@127.0.0.1"
expect_rc 1 "a wrong user is refused"
expect_match "$err" "^gpufleet: box-4 not added: auth failed" "auth failed named"
expect_eq "$(instances box-4)" 0 "box-4 not in the inventory"
expect_eq "$(pins)" "$before" "its first-use pin was taken back"
checks=$((checks + 1))
grep -q '^box-4 ' "$XDG_DATA_HOME/gpufleet/gpufleet_known_hosts" &&
    fail "box-4's key left in gpufleet_known_hosts"

ssh-keygen -q -t ed25519 -N '' -f "$T/stranger"
run add --check box-5 "ssh -p $p1 -i $T/stranger $user@127.0.0.1"
expect_rc 1 "a key the instance does not know is refused"
expect_match "$err" "not added: auth failed" "auth failed for a wrong key"
expect_eq "$(instances box-5)" 0 "box-5 not in the inventory"

# The strict policy and a key nobody pinned: refused, not added.
printf '[ssh]\nhost_key_policy = strict\n' >"$T/strict.ini"
run --config "$T/strict.ini" add --check box-7 "ssh -p $p1 -i $key $user@127.0.0.1"
expect_rc 1 "strict: an unknown host key is refused"
expect_match "$err" "^gpufleet: box-7 not added: host key unknown: " \
    "strict: the reason"
expect_eq "$(instances box-7)" 0 "strict: box-7 not in the inventory"
expect_eq "$(pins)" "$before" "strict: nothing pinned"

# Without --check: added at once, the hint says how to check.
run add box-3 "ssh -p $p2 -i $key $user@127.0.0.1"
expect_rc 0 "add without --check does not connect"
expect_contains "$err" "hint: \`gpufleet status box-3\` makes first contact" \
    "the hint"

# --- a managed key by name ----------------------------------------------
run keys gen --name lab
expect_rc 0 "keys gen --name lab"
cat "$XDG_DATA_HOME/gpufleet/keys/lab.pub" >>"$d1/home/.ssh/authorized_keys"
run add --check box-6 "ssh -p $p1 $user@127.0.0.1" --identity lab
expect_rc 0 "add --check --identity NAME logs in with the managed key"
expect_eq "$(sql "SELECT identity FROM instance WHERE name = 'box-6'")" \
    "$XDG_DATA_HOME/gpufleet/keys/lab" "identity is the key's file"
run keys ls --json
expect_eq "$(printf '%s' "$out" | jq -r '.[] | select(.name == "lab") | .instances')" \
    box-6 "keys ls shows the instance using the key"

finish

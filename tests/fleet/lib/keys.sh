# shellcheck shell=bash
# Key logins and the state a fault must leave (tests/fleet/keys.sh and
# faults-*.sh): logins with one key, whatever step a fault hit.
KEYS=$XDG_DATA_HOME/gpufleet/keys
db=$XDG_DATA_HOME/gpufleet/fleet.db
port() { awk -v n="$1" '$1 == n { print $2 }' "$D/instances.tsv"; }
akfile() { printf '%s/home/.ssh/authorized_keys' "$(instance_dir "$1")"; }

# login NAME KEYFILE: does a fresh ssh login with only that key work?
login() {
	ssh -F /dev/null -i "$2" -o IdentitiesOnly=yes -o BatchMode=yes \
	    -o UserKnownHostsFile="$D/known_hosts" -o StrictHostKeyChecking=yes \
	    -o ControlPath=none -o ConnectTimeout=10 -p "$(port "$1")" \
	    "$(awk -v n="$1" '$1 == n { print $3 }' "$D/instances.tsv")@127.0.0.1" \
	    true </dev/null >/dev/null 2>&1
}

# current_key NAME: the private key file gpufleet logs in to NAME with.
current_key() {
	"$GPUFLEET" keys ls --json | jq -r --arg n "$1" \
	    '.[] | select((.instances // "" | split(",")) | index($n)) | .path'
}

# key_of NAME: the key gpufleet logs in to NAME with, its own or the
# identity the import found.
key_of() {
	local k
	k=$(current_key "$1")
	[ -n "$k" ] || k=$D/client/id_ed25519
	printf '%s' "$k"
}

# not_locked_out NAME WHAT: the key gpufleet has for NAME logs in, and
# authorized_keys is whole (every line a key line, ending in a newline).
not_locked_out() {
	local f
	f=$(akfile "$1")
	checks=$((checks + 1))
	login "$1" "$(key_of "$1")" ||
	    fail "$2: the key gpufleet has for $1 ($(key_of "$1")) does not log in"
	checks=$((checks + 1))
	[ -s "$f" ] && [ -z "$(tail -c 1 "$f")" ] &&
	    ! grep -Ev '^(ssh-ed25519|ssh-rsa|ecdsa-sha2-nistp256) [A-Za-z0-9+/=]+( .*)?$' "$f" |
	    grep -q . ||
	    fail "$2: $1's authorized_keys is empty or partial: $(cat -A "$f")"
}

# db_ok WHAT: PRAGMA integrity_check says ok.
db_ok() {
	expect_eq "$(sqlite3 -cmd '.timeout 20000' "$db" 'PRAGMA integrity_check')" ok \
	    "$1: integrity_check"
}

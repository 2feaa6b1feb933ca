#!/usr/bin/env bash
# config.ini: defaults apply, every bad key or value names file and line and
# exits 4, an explicit missing file is an error, the example parses.
. "$(dirname "$0")/lib.sh"

cfgdir="$XDG_CONFIG_HOME/gpufleet"
mkdir -p "$cfgdir"

run ls
expect_rc 0 "no config file is fine"

printf '[defaults]\nuser = ubuntu\nidentity = /k/id\n[ssh]\nconnect_timeout = 5\nfanout = 64\nhost_key_policy = strict\n' \
    >"$cfgdir/config.ini"
run add n1 10.0.0.1
expect_rc 0 "add with config"
run show n1 --json
expect_match "$out" '"user": "ubuntu"' "default user from config"
run ls --format ssh-config
expect_match "$out" 'IdentityFile "/k/id"' "default identity from config"

badcfg() {
	local desc=$1 body=$2 line=$3 word=$4
	printf '%b' "$body" >"$T/bad.ini"
	run --config "$T/bad.ini" ls
	expect_rc 4 "$desc"
	expect_one_error_line "$desc"
	expect_match "$err" "$T/bad.ini:$line: .*$word" "$desc names file:line"
}
badcfg "unknown key" '[ssh]\nfanout = 4\nfanuot = 8\n' 3 "fanuot"
badcfg "unknown section" '[sssh]\nfanout = 4\n' 2 "sssh"
badcfg "bad number" '[ssh]\nconnect_timeout = 10s\n' 2 "connect_timeout"
badcfg "zero fanout" '[ssh]\nfanout = 0\n' 2 "fanout"
badcfg "zero setup_timeout" '[ssh]\nsetup_timeout = 0\n' 2 "setup_timeout"
badcfg "zero agent_timeout" '[ssh]\nagent_timeout = 0\n' 2 "agent_timeout"
badcfg "bad policy" '[ssh]\nhost_key_policy = no\n' 2 "accept-new or strict"
badcfg "bad user" '[defaults]\nuser = a b\n' 2 "user"
badcfg "syntax" '[ssh\nfanout = 4\n' 1 "syntax"

# A line longer than inih's buffer is refused at its line, never split into
# directives: split in 199-byte pieces, this 4 KiB comment ends in a piece
# "fanout = 1" that would set fanout.
long=$(head -c 4096 /dev/zero | tr '\0' x)
pad=$(head -c $((199 * 20 - 2)) /dev/zero | tr '\0' x)
badcfg "4 KiB comment line" "[ssh]\nfanout = 4\n# ${pad}fanout = 1\n" 3 \
    "line longer than 199 bytes"
badcfg "4 KiB value" "[defaults]\nidentity = /$long\n" 2 "line longer than"
# The longest line that fits (199 bytes) is read whole.
fits=$(head -c 187 /dev/zero | tr '\0' x)
printf '[defaults]\nidentity = /%s\n[ssh]\nfanout = 3\n' "$fits" >"$T/fits.ini"
run --config "$T/fits.ini" add long1 10.0.0.9
expect_rc 0 "a 199-byte line"
run --config "$T/fits.ini" ls --format ssh-config
expect_contains "$out" "IdentityFile \"/$fits\"" "the 199-byte value is whole"

# Binary is refused at its first control byte, and no raw byte of the file
# reaches the message (each byte checked in the file stderr went to).
raw_bytes() { LC_ALL=C tr -d '[:print:]\n' <"$T/err" | wc -c; }
printf '[ssh]\nfanout = 4\000\001\033[2Jx\n' >"$T/nul.ini"
run --config "$T/nul.ini" ls
expect_rc 4 "a NUL in the config"
expect_one_error_line "a NUL in the config"
expect_eq "$err" "gpufleet: $T/nul.ini:2: byte 0x00 at column 11: not a text file" \
    "the NUL named by line and column"
expect_eq "$(raw_bytes)" 0 "no raw byte echoed for a NUL"
run --config "$GPUFLEET" ls
expect_rc 4 "a binary as the config"
expect_one_error_line "a binary as the config"
expect_eq "$err" "gpufleet: $GPUFLEET:1: byte 0x7f at column 1: not a text file" \
    "the ELF header's first byte"
expect_eq "$(raw_bytes)" 0 "no raw byte echoed for a binary"
printf '[ssh]\n\377\376\033]0;x = 1\n' >"$T/high.ini"
run --config "$T/high.ini" ls
expect_rc 4 "a control byte inside a key"
expect_eq "$(raw_bytes)" 0 "no raw byte echoed for a key of odd bytes"
printf '[ssh]\n\377\376 = 1\n' >"$T/high.ini"
run --config "$T/high.ini" ls
expect_rc 4 "a key of invalid UTF-8"
expect_contains "$err" "high.ini:2: unknown key" "the key named, escaped"
expect_eq "$(raw_bytes)" 0 "no raw byte echoed for invalid UTF-8"
# Tabs and CRLF line ends are text.
printf '[ssh]\r\n\tfanout = 4\r\n' >"$T/crlf.ini"
run --config "$T/crlf.ini" ls
expect_rc 0 "tabs and CRLF are text"

run --config "$T/missing.ini" ls
expect_rc 4 "explicit missing config"
expect_match "$err" "missing.ini" "missing config named"
GPUFLEET_CONFIG="$T/bad.ini" run ls
expect_rc 4 "GPUFLEET_CONFIG is read"

# [keys] passphrase_file encrypts the keys gpufleet makes.
printf 'correct horse\n' >"$T/pass"
printf '[keys]\npassphrase_file = %s\n' "$T/pass" >"$T/keys.ini"
run --config "$T/keys.ini" keys gen --name enc
expect_rc 0 "keys gen with a passphrase file"
key=$XDG_DATA_HOME/gpufleet/keys/enc
checks=$((checks + 1))
ssh-keygen -y -P '' -f "$key" >/dev/null 2>&1 && fail "key not encrypted"
checks=$((checks + 1))
ssh-keygen -y -P 'correct horse' -f "$key" >/dev/null 2>&1 ||
    fail "key not encrypted with the configured passphrase"
expect_eq "$(stat -c %a "$key")" 600 "generated key mode"
expect_eq "$(stat -c %a "$(dirname "$key")")" 700 "keys directory mode"

# GPUFLEET_KEYS_PASSPHRASE_FILE overrides [keys] passphrase_file.
printf 'battery staple\n' >"$T/pass2"
GPUFLEET_KEYS_PASSPHRASE_FILE="$T/pass2" run --config "$T/keys.ini" \
    keys gen --name enc2
expect_rc 0 "keys gen with the passphrase file of the environment"
key=$XDG_DATA_HOME/gpufleet/keys/enc2
checks=$((checks + 1))
ssh-keygen -y -P 'battery staple' -f "$key" >/dev/null 2>&1 ||
    fail "the environment's passphrase file did not override the config's"

run --config "$GPUFLEET_SRC/config/gpufleet.ini.example" ls
expect_rc 0 "the shipped example config parses"

finish

#!/usr/bin/env bash
# gpufleet passwd's usage errors, without an sshd: each one clear line,
# exit 2, no --out file left behind and no action recorded.
. "$(dirname "$0")/lib.sh"

run add a100-1 root@127.0.0.1:1
expect_rc 0 "add"
usage() {
	run "$@"
	expect_rc 2 "$*"
	expect_one_error_line "$*"
}
usage passwd a100-1
expect_contains "$err" "needs one of --lock and --random" "neither"
usage passwd a100-1 --lock --random
expect_contains "$err" "needs one of --lock and --random" "both"
usage passwd --lock
expect_contains "$err" "needs one SELECTOR" "no selector"
usage passwd a100-1 --lock --out "$T/pw"
expect_contains "$err" "--out goes with --random" "--out with --lock"
[ ! -e "$T/pw" ] || fail "--out with --lock made the file"
printf 'x\n' >"$T/old"
usage passwd a100-1 --lock --password --password-file "$T/old"
expect_contains "$err" "give one" "--password and --password-file"
printf 'keep\n' >"$T/exists"
usage passwd a100-1 --random --out "$T/exists"
expect_contains "$err" "cannot create $T/exists: it exists (--out makes a new file)" "--out exists"
expect_eq "$(cat "$T/exists")" keep "an existing --out file is untouched"
: >"$T/empty"
usage passwd a100-1 --random --password-file "$T/empty" --out "$T/new"
expect_contains "$err" "the first line is empty" "empty --password-file"
[ ! -e "$T/new" ] || fail "a refused run left its --out file"
usage passwd nosuch --lock
usage passwd nosuch --lock --password-file "$T/old"
expect_contains "$err" "nosuch" "a selector that matches nothing, before any password"

run events --json
expect_eq "$(printf '%s' "$out" | jq 'map(select(.event | startswith("passwd"))) | length')" 0 "no action recorded"

# --password asks on the terminal, naming the instance (no sshd: the run
# then fails to connect, which is not what this checks).
: >"$T/typescript"
{
	for _ in $(seq 300); do
		grep -qF "Password for" "$T/typescript" && break
		sleep 0.1
	done
	echo typed-old
} | script -qefc "'$GPUFLEET' passwd a100-1 --lock --password" "$T/typescript" >/dev/null 2>&1
expect_contains "$(cat "$T/typescript")" "Password for root@127.0.0.1 (the old one): " "the prompt names the instance"
finish

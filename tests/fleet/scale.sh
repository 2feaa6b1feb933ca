#!/usr/bin/env bash
# 500 instances: the harness brings them up (32 sshd), and one gpufleet
# process reaches every one of them with the default fan-out.
. "$(dirname "$0")/../e2e/lib.sh"
export GPUFLEET_NO_PROGRESS=1

fleet_up 500
expect_eq "$(wc -l <"$D/instances.tsv")" 500 "500 instances"
expect_eq "$(ls -d "$D"/groups/g* | wc -l)" 32 "32 sshd processes (16 ports each)"
run ls --json
expect_eq "$(printf '%s\n' "$out" | grep -c '"name"')" 500 "all imported"
# A soft limit gpufleet can raise, then a hard one it must live with (it
# then runs fewer hosts at once instead of failing them).
for lim in "-Sn 256" "-n 256"; do
	(ulimit $lim; "$GPUFLEET" exec all --connect-timeout 60 -- echo up \
	    >"$T/out" 2>"$T/err")
	rc=$?
	expect_rc 0 "exec on 500 instances under ulimit $lim"
	expect_eq "$(grep -c ': up$' "$T/out")" 500 "every instance answered ($lim)"
	expect_match "$(cat "$T/err")" "500 hosts: 500 ok" "summary ($lim)"
done

finish

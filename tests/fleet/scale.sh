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
# then runs fewer hosts at once instead of failing them): all 500, then
# the 333 of inst-1*, 2* and 3*, still more than 256 descriptors' worth.
for run in "-Sn all 500" "-n inst-1*,inst-2*,inst-3* 333"; do
	read -r flag sel n <<<"$run"
	(ulimit "$flag" 256; "$GPUFLEET" exec "$sel" --connect-timeout 60 -- echo up \
	    >"$T/out" 2>"$T/err")
	rc=$?
	expect_rc 0 "exec on $n instances under ulimit $flag 256"
	expect_eq "$(grep -c ': up$' "$T/out")" "$n" "every instance answered ($flag)"
	expect_match "$(cat "$T/err")" "$n hosts: $n ok" "summary ($flag)"
done

finish

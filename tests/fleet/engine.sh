#!/usr/bin/env bash
# The engine on the caller's loop: two runs of different hosts in flight at
# once on one engine, a timer ticking on the same loop, each run reported
# through its own callbacks with its hosts' output and nobody else's.
. "$(dirname "$0")/../e2e/lib.sh"
: "${GPUFLEET_ENGINEPAIR:=$GPUFLEET_SRC/build/tests/enginepair}"

fleet_up 6
key=$(awk '$1 == "IdentityFile" { print $2; exit }' "$D/ssh_config")
user=$(awk '$1 == "User" { print $2; exit }' "$D/ssh_config")
mapfile -t ports < <(awk '$1 == "Port" { print $2 }' "$D/ssh_config")

# A's hosts wait until every B host has run: if the runs went one after the
# other, A would never finish (its 120 s command timeout would end it).
out=$(timeout 300 "$GPUFLEET_ENGINEPAIR" "$key" "$user" "${ports[@]}" 2>"$T/err")
rc=$?
err=$(cat "$T/err")
expect_rc 0 "enginepair ran"
for n in 1 2 3; do
	expect_eq "$(grep "^inst-$n " <<<"$out")" \
	    "inst-$n A ok 0 A inst-$n|A done|" "inst-$n: run A, its own output only"
done
for n in 4 5 6; do
	expect_eq "$(grep "^inst-$n " <<<"$out")" \
	    "inst-$n B ok 0 B inst-$n|B done|" "inst-$n: run B, its own output only"
done
expect_eq "$(grep -c '^finished [AB]$' <<<"$out")" 2 "both runs reported finished"
ticks=$(sed -n 's/^ticks \([0-9]*\)$/\1/p' <<<"$out")
checks=$((checks + 1))
[ "${ticks:-0}" -ge 1 ] || fail "the timer never ran while the runs were in flight: [$out]"

# Backoff: a host that was refused is not tried again at once.
expect_eq "$(grep '^backoff first' <<<"$out")" "backoff first refused fails 1 delay_ok 1" \
    "a refused host records one failure and a wait of 0.5-1.5 s"
line=$(grep '^backoff second' <<<"$out")
expect_match "$line" '^backoff second expect (backoff|refused) got ' "second try reported"
expect_eq "${line##* got }" "$(sed 's/.* expect \([a-z]*\) got .*/\1/' <<<"$line")" \
    "the second try did what the clock says (backoff while its wait runs)"

# A held session that stops answering (its sshd processes frozen between
# two status --watch passes) is replaced by a new login, not waited on.
logins() { grep -h "Accepted publickey" "$D"/groups/*/sshd.log 2>/dev/null | wc -l; }
mkdir -p "$XDG_CONFIG_HOME/gpufleet"
printf '[ssh]\nconnect_timeout = 2\n' >"$XDG_CONFIG_HOME/gpufleet/config.ini"
before=$(logins)
"$GPUFLEET" status inst-1 --watch 8 --count 2 >"$T/watch.out" 2>"$T/watch.err" &
watch=$!
for _ in $(seq 600); do
	grep -q '^inst-1 ' "$T/watch.out" && break
	sleep 0.1
done
listener=$(cat "$D"/groups/*/sshd.pid)
frozen=$(pgrep -P "$listener" | while read -r p; do echo "$p"; pgrep -P "$p"; done)
checks=$((checks + 1))
[ -n "$frozen" ] || fail "no held session to freeze after the first pass"
for p in $frozen; do kill -STOP "$p"; done
cleanup_hooks+=("for p in $frozen; do kill -CONT \$p 2>/dev/null; done")
wait "$watch"
rc=$?
err=$(cat "$T/watch.err")
expect_rc 0 "watch goes on after its held session froze"
expect_eq "$(grep -c '^inst-1 \+up ' "$T/watch.out")" 2 "both passes saw inst-1 up"
expect_eq $(( $(logins) - before )) 2 "the second pass logged in anew"
for p in $frozen; do kill -CONT "$p" 2>/dev/null; done
rm "$XDG_CONFIG_HOME/gpufleet/config.ini"

# libssh's own messages (debugging) come through gpufleet's log: every
# stderr line is gpufleet's, escaped, none in libssh's format.
GPUFLEET_DEBUG=1 GPUFLEET_SSH_DEBUG=1 run exec inst-1 -- true
expect_rc 0 "exec with libssh debugging"
expect_match "$err" "gpufleet: libssh: [a-z_]+: " "libssh's messages in the log"
expect_eq "$(grep -vc '^gpufleet: ' <<<"$err")" 0 "no line outside the log's format"

finish

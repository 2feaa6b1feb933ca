#!/usr/bin/env bash
# The database's write lock held by another process (a sqlite3 in a
# transaction, as a stuck script would): a command that writes waits up to
# its busy timeout (10 s), then fails with one line saying the database is
# locked by another process, changing nothing; `status` still shows what it
# saw; reads go on; a write that is waiting when the lock is let go goes on
# and succeeds. No elapsed time is asserted.
. "$(dirname "$0")/../e2e/lib.sh"
export GPUFLEET_NO_PROGRESS=1
. "$(dirname "$0")/lib/keys.sh"
locked="database is locked: another process held its write lock longer than gpufleet waits (10 s); run it again once that process is done"

fleet_up 1
run status
expect_rc 0 "status before the lock"
before=$(sqlite3 "$db" .dump)

lock_db || fail "the write lock was not taken: $(cat "$T/lock.out")"
run set inst-1 price=2.5/h
expect_rc 3 "set while another process holds the write lock"
expect_one_error_line "set while locked"
expect_contains "$err" "$locked" "set: names the lock"
run status
expect_rc 3 "status cannot record while locked"
expect_match "$out" "^inst-1 +up " "status shows what it saw all the same"
expect_one_error_line "status while locked"
expect_contains "$err" "$locked" "status: names the lock"
run keys rotate inst-1
expect_rc 3 "keys rotate while locked"
expect_contains "$err" "$locked" "keys rotate: names the lock"
run cost
expect_rc 0 "cost only reads: it works while locked"
expect_match "$out" "^inst-1 " "cost lists inst-1"
unlock_db
expect_eq "$(sqlite3 "$db" .dump)" "$before" "the writes refused for the lock changed nothing"
expect_eq "$(sqlite3 "$db" "SELECT count(*) FROM instance_price")" 0 "no price was stored"
db_ok "after the lock"
not_locked_out inst-1 "a rotation refused for the lock"

# --- a write waiting when the lock is let go goes on -----------------------
lock_db || fail "the write lock was not taken again: $(cat "$T/lock.out")"
"$GPUFLEET" set inst-1 price=2.5/h >"$T/set.out" 2>"$T/set.err" &
setter=$!
# (it has the database open: it is waiting for the lock, or about to)
for ((i = 0; i < 300; i++)); do
	ls -l "/proc/$setter/fd" 2>/dev/null | grep -q 'fleet\.db$' && break
	sleep 0.1
done
unlock_db
wait $setter
rc=$?
err=$(cat "$T/set.err")
expect_rc 0 "the waiting write goes on once the lock is let go"
expect_eq "$(sqlite3 "$db" "SELECT count(*) FROM instance_price")" 1 \
    "the waiting write was stored (one price)"
db_ok "at the end"

finish

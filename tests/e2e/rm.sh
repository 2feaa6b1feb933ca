#!/usr/bin/env bash
# rm is safe and restore brings back what it removed: rm refuses (exit 2,
# one line per instance saying why and what to run, nothing removed) an
# instance whose ledger does not say stopped or released, with a running
# job, armed deadlines or autostop, unless --force; its words say that the
# platform's machine is not touched; restore puts the instance back with
# its tags, price history, stop method and ledger, so cost counts it again.
# The job and the watcher's plan are stored as a contact stores them.
. "$(dirname "$0")/lib.sh"
db=$XDG_DATA_HOME/gpufleet/fleet.db
export TZ=UTC
sql() { sqlite3 "$db" "$@"; }
rows() { sql "SELECT name, host, released_at IS NOT NULL FROM instance ORDER BY id"; }
W="--since 2026-11-01T00:00:00Z --until 2026-11-02T00:00:00Z"

# a1: rented 2026-11-01 00:00, 2.00/h, then 3.00/h from 01:00; tagged for
# the nightly schedule; its own stop method; running since 00:00.
run add a1 10.0.0.1 --tag nightly --tag train --price 2/h
backdate a1 2026-11-01T00:00:00Z
run set a1 price=3/h --from 2026-11-01T01:00:00Z
expect_rc 0 "a price change"
run set a1 'stop_command=remote:featurize instance stop' stop_kind=stop
expect_rc 0 "a stop method"
run mark a1 running --at 2026-11-01T00:00:00Z
a1=$(sql "SELECT id FROM instance WHERE name = 'a1'")
run add b1 10.0.0.2
run mark b1 stopped

# --- refused while it may still bill, all or nothing -----------------------
before=$(rows)
run rm b1 a1
expect_rc 2 "rm of an instance its ledger says runs"
expect_eq "$err" "gpufleet: a1 may still be billing (its ledger says running since 2026-11-01T00:00:00Z): stop it first (gpufleet shutdown a1 --now), or mark it (gpufleet mark a1 stopped); or rm --force" \
    "why, and what to run"
expect_eq "$out" "" "nothing said removed"
expect_eq "$(rows)" "$before" "a refused rm removes nothing, b1 neither"

run add e1 10.0.0.3
run rm e1
expect_rc 2 "rm of an instance never seen"
expect_eq "$err" "gpufleet: e1 may still be billing (its ledger is empty: never seen running or stopped): stop it first (gpufleet shutdown e1 --now), or mark it (gpufleet mark e1 stopped); or rm --force" \
    "an empty ledger may bill"

# Stopped, yet it answered status since: still billing.
run add s1 10.0.0.4
run mark s1 stopped --at -1h
sql "INSERT INTO last_status (instance_id, t, state)
    SELECT id, strftime('%s', 'now') - 60, 'up' FROM instance WHERE name = 's1'"
run rm s1
expect_rc 2 "rm of a stopped instance that answered since"
expect_match "$err" "^gpufleet: s1 may still be billing \(marked stopped at [0-9T:-]+Z, yet it answered status at [0-9T:-]+Z\): stop it first" \
    "stopped but answered"

# --- a running job, armed deadlines, autostop: even when stopped -------------
# The plan as status stores it: two deadlines (d-0000000b fired, as its
# journal says) and an autostop policy; job 3 running, job 2 ended.
sql "INSERT INTO watcher_state (instance_id, t, state, generation, plan, skew)
    VALUES ($a1, 1793527200, 'running', 4, '{\"version\":1,\"generation\":4,\"deadlines\":[{\"id\":\"d-0000000a\",\"at\":1893456000,\"warn_minutes\":5},{\"id\":\"d-0000000b\",\"at\":1793530800,\"warn_minutes\":0}],\"autostop\":{\"id\":\"a-0000000c\",\"idle_s\":1800}}', 0);
    INSERT INTO journal (instance_id, epoch, seq, time, t, event, id, entry, received_at)
    VALUES ($a1, 'e1', 1, 1793530800, 1793530800, 'firing', 'd-0000000b', '{}', 1793530800);
    INSERT INTO job (instance_id, job, name, command, fire_id, state, started, updated)
    VALUES ($a1, 3, 'train', 'python train.py', 'j-3-1793527200', 'running', 1793527200, 1793527200),
           ($a1, 2, 'prep', 'true', 'j-2-1793527100', 'succeeded', 1793527100, 1793527200)"
run mark a1 stopped --at 2026-11-01T02:00:00Z
before=$(rows)
run rm a1
expect_rc 2 "rm with a running job, a deadline and autostop"
expect_eq "$err" "gpufleet: a1 has 1 running job (a1:3 train): let it end or kill it (gpufleet jobs a1; gpufleet kill a1:3); it has 1 deadline armed (d-0000000a): cancel it (gpufleet shutdown cancel a1); it has autostop on: turn it off (gpufleet autostop off a1); or rm --force" \
    "each reason with what to run, on one line"
expect_one_error_line "one line for the instance"
expect_eq "$(rows)" "$before" "nothing removed"

# The job ended and the plan was emptied (what jobs and shutdown cancel,
# autostop off store): rm goes through and says what it did not do.
sql "UPDATE job SET state = 'succeeded', ended = 1793534400 WHERE instance_id = $a1;
    UPDATE watcher_state SET plan = '{\"version\":1,\"generation\":5,\"deadlines\":[],\"autostop\":null}',
    generation = 5 WHERE instance_id = $a1"
run cost a1 $W
a1_cost=$(printf '%s\n' "$out" | grep '^a1 ')
expect_match "$a1_cost" '^a1 +- +2h00m .* 5\.00 CNY$' "a1 costs 2.00 + 3.00"
run rm a1
expect_rc 0 "rm once stopped, no job, nothing armed"
expect_eq "$out" "a1: removed from gpufleet (the platform's machine is not touched: release it on the platform); its history stays for cost (gpufleet restore a1 brings it back)" \
    "rm says what it does"
expect_eq "$err" "" "nothing to warn about"
run ls @nightly
expect_rc 2 "a1 left the selectors"
run cost $W
expect_match "$out" '^a1 \(released [0-9T:-]+Z\) ' "cost keeps it as released"

# --- restore -----------------------------------------------------------------
run restore a1
expect_rc 0 "restore"
expect_match "$out" "^a1: back in gpufleet \(removed at [0-9T:-]+Z\) with its tags \(nightly, train\), prices, stop method and history; its ledger says stopped since 2026-11-01T02:00:00Z$" \
    "restore says what came back"
expect_eq "$(sql "SELECT id FROM instance WHERE name = 'a1' AND released_at IS NULL")" "$a1" \
    "the same instance, not a new one"
run ls @nightly
expect_eq "$(printf '%s\n' "$out" | awk 'NR > 1 { print $1 }')" "a1" "its tags: the nightly selector matches it again"
run show a1 --json
expect_eq "$(printf '%s' "$out" | jq -r '.stop_command')" "remote:featurize instance stop" "its stop method"
expect_eq "$(printf '%s' "$out" | jq -c '[.price_history[].price]')" '["2.00/h","3.00/h"]' "its price history"
run cost $W
expect_eq "$(printf '%s\n' "$out" | grep '^a1 ')" "$a1_cost" "cost counts it under its name again, as before"
run jobs a1 --all --json
expect_eq "$(printf '%s' "$out" | jq -c '[.[].job] | sort')" "[2,3]" "its jobs"

run restore a1
expect_rc 2 "restore of an instance in service"
expect_eq "$err" "gpufleet: a1 is in service: an instance of that name was added since; rename it first (gpufleet set a1 name=NEW)" \
    "restore says it is in service"
run restore nosuch
expect_rc 2 "restore of a name never removed"
expect_eq "$err" "gpufleet: no removed instance named 'nosuch' (one deleted with rm --purge is gone with its history)" \
    "purged ones are gone"
run rm e1 --purge --yes --force
run restore e1
expect_rc 2 "restore of a purged instance"
expect_contains "$err" "no removed instance named 'e1' (one deleted with rm --purge" "purge is for good"

# --- --force, and a name added again ---------------------------------------
before=$(sql "SELECT count(*) FROM ledger")
run rm b1 s1 --force
expect_rc 0 "rm --force"
expect_eq "$(printf '%s\n' "$out" | grep -c 'removed from gpufleet (the platform')" 2 "both removed"
expect_match "$err" "^gpufleet: warning: s1: removed with --force, though it may still be billing \(marked stopped at [0-9T:-]+Z, yet it answered status at [0-9T:-]+Z\): nothing watches it now$" \
    "--force says what it left unwatched"
run add s1 10.0.9.9
run restore s1
expect_rc 2 "a new s1 is in service"
run rm s1 --force
run restore s1 b1 --json
expect_rc 0 "restore --json, two at once"
expect_eq "$(printf '%s' "$out" | jq -r '[.[] | .name + "@" + .host] | join(" ")')" "s1@10.0.9.9 b1@10.0.0.2" \
    "of two removed s1, the one removed last"
expect_eq "$(sql "SELECT count(*) FROM ledger")" "$before" "rm and restore write no ledger entry"

# --- a jump host comes back with the hosts behind it -------------------------
run add gw 10.0.1.1
run add lab 10.0.1.2 --jump gw
run rm gw lab --force
run restore lab
expect_rc 2 "restore behind a removed jump host"
expect_eq "$err" "gpufleet: lab: jump host 'gw' is not in the inventory; restore both (gpufleet restore gw lab)" \
    "says to restore both"
expect_eq "$(sql "SELECT count(*) FROM instance WHERE released_at IS NULL AND name IN ('gw', 'lab')")" 0 \
    "nothing restored"
run restore lab gw
expect_rc 0 "restore both, in any order"
run show lab --json
expect_eq "$(printf '%s' "$out" | jq -r '.jump')" "gw" "lab behind gw again"

# --- a release the ledger states: nothing on it runs or fires ----------------
run add r1 10.0.2.1
r1=$(sql "SELECT id FROM instance WHERE name = 'r1'")
sql "INSERT INTO job (instance_id, job, name, command, fire_id, state, started, updated)
    VALUES ($r1, 1, 'x', 'x', 'j-1-1', 'running', 1793527200, 1793527200);
    INSERT INTO ledger (instance_id, t, state, source, note)
    VALUES ($r1, strftime('%s', 'now') - 10, 'released', 'performed', 'released by gpufleet')"
run rm r1
expect_rc 0 "rm of an instance released on the platform"
finish

#!/usr/bin/env bash
# The books survive the laptop: `db backup` makes checked copies (0600 in a
# 0700 folder, the newest [db] backup_keep kept), every command refuses a
# damaged database with one line and leaves its bytes alone, `db check`
# names the newest good backup and the command that restores it, and after
# `db restore` cost says what it said before the damage.
. "$(dirname "$0")/lib.sh"
db=$XDG_DATA_HOME/gpufleet/fleet.db
bk=$XDG_DATA_HOME/gpufleet/backups
export TZ=UTC
at() {
	sqlite3 "$db" "INSERT INTO ledger (instance_id, t, state, source)
	    SELECT id, strftime('%s', '$3'), '$2', 'observed' FROM instance
	    WHERE name = '$1'"
}
# settle: fold the WAL into the file, so its bytes are the whole database.
settle() { sqlite3 "$db" "PRAGMA wal_checkpoint(TRUNCATE)" >/dev/null; }
# garbage FILE PAGE: 4 KiB of noise over page PAGE (1 is the header's).
garbage() {
	head -c 4096 /dev/urandom |
	    dd of="$1" bs=4096 seek=$(($2 - 1)) conv=notrunc 2>/dev/null
}

run add m1 10.0.0.1 --price 2.69/h --provider autodl
expect_rc 0 "add m1"
run set m1 billing=minute min_billed=10m stopped_price=1.20/day
run add h1 10.0.0.2 --price 3/h --provider vast --currency USD
expect_rc 0 "add h1"
sqlite3 "$db" "UPDATE instance SET created_at = strftime('%s', '2026-11-01')"
run set h1 price=4/h --from 2026-11-02T11:00:00Z
expect_rc 0 "a price change"
at m1 running 2026-11-02T01:00:00Z
at m1 stopped 2026-11-02T03:03:20Z
at h1 running 2026-11-02T10:00:00Z
at h1 stopped 2026-11-02T12:05:00Z
W="--since 2026-11-02T00:00:00Z --until 2026-11-03T00:00:00Z"
run cost $W --json
expect_rc 0 "cost before"
before=$out
expect_match "$before" '"total"' "cost --json has totals"

# --- backup: checked, private, rotated ---------------------------------------
run db ls
expect_eq "$out" "no backups in $bk (gpufleet db backup makes one)" "ls before any backup"
run db backup --json
expect_rc 0 "db backup"
first=$(printf '%s' "$out" | sed -n 's/.*"file": "\(.*\)".*/\1/p')
expect_match "$first" "^$bk/fleet-[0-9]{8}T[0-9]{6}Z\\.db\$" "named by UTC time"
expect_eq "$(stat -c %a "$bk")" 700 "the backups folder is 0700"
expect_eq "$(stat -c %a "$first")" 600 "a backup is 0600"
expect_eq "$(sqlite3 "$first" 'PRAGMA integrity_check')" ok "the backup is whole"
expect_eq "$(sqlite3 "$first" 'SELECT count(*) FROM ledger')" \
    "$(sqlite3 "$db" 'SELECT count(*) FROM ledger')" "the backup has the ledger"
run db backup "$first"
expect_rc 2 "backup onto an existing file"
expect_one_error_line "backup onto an existing file"
run db backup "$T/mine.db"
expect_rc 0 "backup to a named file"
expect_eq "$(stat -c %a "$T/mine.db")" 600 "a named backup is 0600"

# A backup killed before it finished (the daemon's, stopped with it) left
# its partial copy: the next backup removes it, not one whose process runs.
gone=$(sh -c 'echo $$')
: >"$bk/.fleet-backup.$gone.partial"
: >"$bk/.fleet-backup.$$.partial"
run db backup
expect_rc 0 "backup beside partial copies"
checks=$((checks + 1))
[ ! -e "$bk/.fleet-backup.$gone.partial" ] ||
    fail "the partial copy of a process gone was left"
checks=$((checks + 1))
[ -e "$bk/.fleet-backup.$$.partial" ] ||
    fail "the partial copy of a running process was removed"
rm -f "$bk/.fleet-backup.$$.partial"

mkdir -p "$XDG_CONFIG_HOME/gpufleet"
printf '[db]\nbackup_keep = 3\n' >"$XDG_CONFIG_HOME/gpufleet/config.ini"
made=()
for i in 1 2 3 4; do
	run db backup --json
	expect_rc 0 "backup $i"
	made+=("$(printf '%s' "$out" | sed -n 's/.*"file": "\(.*\)".*/\1/p')")
done
expect_match "$out" '"removed": 1' "the last backup removed one"
run db ls
expect_rc 0 "db ls"
expect_eq "$(ls "$bk" | wc -l)" 3 "rotation keeps backup_keep"
expect_eq "$(printf '%s\n' "$out" | sed 1d | awk '{print $3}')" \
    "$(printf '%s\n' "${made[3]}" "${made[2]}" "${made[1]}")" \
    "the newest three are kept, newest first"
run db ls --json
expect_match "$(printf '%s' "$out" | tr -d ' \n')" \
    "^\\[\\{\"file\":\"${made[3]}\",\"time\":\"[-0-9T:]+Z\",\"bytes\":[0-9]+\\}" \
    "ls --json: newest first"

# --- a damaged database is refused, and its bytes stay -----------------------
settle
cp "$db" "$T/good.db"
size=$(stat -c %s "$db")
# The instance table's first page, which every command reads. (Damage in a
# page that no command reads is found by db check and by backup.)
root=$(sqlite3 "$db" "SELECT rootpage FROM sqlite_schema WHERE name = 'instance'")
head -c $((size / 2)) "$T/good.db" >"$T/half.db"
cp "$T/good.db" "$T/page1.db" && garbage "$T/page1.db" 1
cp "$T/good.db" "$T/pageN.db" && garbage "$T/pageN.db" "$root"
printf 'not a database at all\n' >"$T/text.db"
for kind in half page1 pageN text; do
	for cmd in "ls" "cost $W" "add z1 10.0.0.9" "mark m1 stopped"; do
		cp "$T/$kind.db" "$db"
		rm -f "$db-wal" "$db-shm"
		run $cmd
		expect_rc 3 "$kind: $cmd"
		expect_one_error_line "$kind: $cmd"
		expect_match "$err" \
		    "^gpufleet: $db is damaged \\(.+\\); see \`gpufleet db check\`\$" \
		    "$kind: $cmd says the database is damaged"
		checks=$((checks + 1))
		cmp -s "$db" "$T/$kind.db" ||
		    fail "$kind: $cmd changed the damaged file"
	done
	run db check
	expect_rc 3 "$kind: db check"
	expect_match "$out" "^$db: damaged" "$kind: db check says damaged"
	cmp -s "$db" "$T/$kind.db" || fail "$kind: db check changed the file"
done
run db backup
expect_rc 3 "a damaged database is not backed up"
expect_contains "$err" "is damaged" "backup says why"
expect_eq "$(ls "$bk" | wc -l)" 3 "no good backup was rotated away"

# --- check names the newest good backup; restore brings the books back -------
garbage "${made[3]}" 2 # the newest backup is damaged too
run db check
expect_rc 3 "db check on the damaged database"
expect_contains "$out" "newest good backup: ${made[2]} (" \
    "check skips the damaged backup and names the newest good one"
expect_contains "$out" "restore it with: gpufleet db restore ${made[2]}" \
    "check says the command that restores"
run db check --json
expect_match "$(printf '%s' "$out" | tr -d ' \n')" \
    "\"ok\":false,.*\"backup\":\"${made[2]}\"" "check --json names it"
run db restore "${made[3]}"
expect_rc 2 "restore from a damaged backup"
expect_one_error_line "restore from a damaged backup"
cmp -s "$db" "$T/text.db" || fail "a refused restore changed the database"

run db check
cmd=$(printf '%s\n' "$out" | sed -n 's/^restore it with: gpufleet //p')
run $cmd
expect_rc 0 "the restore check printed"
aside=$(ls "$db".damaged-*)
checks=$((checks + 1))
cmp -s "$aside" "$T/text.db" || fail "the damaged database was kept aside"
run db check
expect_rc 0 "restored database passes the check"
expect_match "$out" "^$db: ok \\(schema version [0-9]+\\)\$" "check says ok"
run cost $W --json
expect_rc 0 "cost after restore"
expect_eq "$out" "$before" "cost --json after restore is what it was"
settle
cp "$db" "$T/restored.db"
run db restore "${made[1]}"
expect_rc 2 "restore over a good database needs --force"
cmp -s "$db" "$T/restored.db" || fail "a refused restore changed the database"

# --- the daemon backs up once a day -----------------------------------------
export XDG_STATE_HOME="$T/state"
wait_for() { # SECONDS DESCRIPTION COMMAND...: until COMMAND succeeds
	local limit=$1 end=$((SECONDS + $1)) what=$2
	shift 2
	checks=$((checks + 1))
	while ! "$@"; do
		[ "$SECONDS" -lt "$end" ] || { fail "$what (not within ${limit}s)"; return 1; }
		sleep 0.2
	done
}
backups() { [ "$(ls "$bk" | wc -l)" = "$1" ]; }
logged() { grep -q "daily backup: $bk/fleet-.*\.db" "$XDG_STATE_HOME/gpufleet/daemon.log" 2>/dev/null; }
gone() { ! kill -0 "$1" 2>/dev/null; }
rm -rf "$bk"
mkdir -m 700 "$bk"
cp "$T/mine.db" "$bk/fleet-$(date -u -d '2 days ago' +%Y%m%dT%H%M%SZ).db"
"$GPUFLEET" daemon --listen none >"$T/daemon.out" 2>&1 &
dpid=$!
cleanup_hooks+=("kill -9 $dpid 2>/dev/null")
wait_for 120 "the daemon backs up when the newest is 2 days old" backups 2
wait_for 60 "the daemon's log says so" logged
# Another process opens and closes the database while the daemon runs: the
# backup must have left the daemon's locks alone, or that process takes the
# WAL for its own and deletes it, and what the daemon writes next is lost.
run ls
expect_rc 0 "ls while the daemon runs"
checks=$((checks + 1))
! ls -l "/proc/$dpid/fd" 2>/dev/null | grep -q 'fleet\.db-wal (deleted)' ||
    fail "the daemon writes into a WAL that another process deleted"
kill -TERM "$dpid"
wait_for 60 "the daemon stops" gone "$dpid"
run events
expect_contains "$out" "daemon_stop" \
    "what the daemon wrote after its backup is in the database"
newest=$(ls "$bk" | sort | tail -1)
expect_eq "$(stat -c %a "$bk/$newest")" 600 "the daemon's backup is 0600"
expect_eq "$(sqlite3 "$bk/$newest" 'PRAGMA integrity_check')" ok "and whole"

finish

/*
 * The inventory's schema: every migration step, in order. inventory.c
 * applies them at open; the store modules (ledger.c, keys.c, samples.c,
 * hostkey.c) read and write the tables they create.
 */

#include "schema.h"

/*
 * The migrations, in order: step i takes the schema from version i to i + 1.
 * Never edit a released step; add a new one. The pricing tables of the cost
 * work arrive as a later step keyed by instance(id).
 */
static const char *const steps[] = {
	/* 0 -> 1: instances and their tags; 1195789396 is "GFLT". */
	"PRAGMA application_id = 1195789396;"
	"CREATE TABLE instance ("
	"  id INTEGER PRIMARY KEY,"
	"  name TEXT NOT NULL,"
	"  host TEXT NOT NULL,"
	"  port INTEGER NOT NULL DEFAULT 22 CHECK (port BETWEEN 1 AND 65535),"
	"  user TEXT NOT NULL DEFAULT 'root',"
	"  provider TEXT NOT NULL DEFAULT '',"
	"  region TEXT NOT NULL DEFAULT '',"
	"  identity TEXT,"
	"  remote_dir TEXT NOT NULL DEFAULT '~/.cache/gpufleet',"
	"  authorized_keys_file TEXT NOT NULL"
	"    DEFAULT '~/.ssh/authorized_keys',"
	"  notes TEXT NOT NULL DEFAULT '',"
	"  source TEXT,"
	"  created_at INTEGER NOT NULL,"
	"  released_at INTEGER"
	");"
	"CREATE UNIQUE INDEX instance_active_name ON instance(name)"
	"  WHERE released_at IS NULL;"
	"CREATE TABLE instance_tag ("
	"  instance_id INTEGER NOT NULL REFERENCES instance(id)"
	"    ON DELETE CASCADE,"
	"  tag TEXT NOT NULL,"
	"  PRIMARY KEY (instance_id, tag)"
	") WITHOUT ROWID;",

	/* 1 -> 2: host keys pinned per instance, not per address. */
	"CREATE TABLE host_key ("
	"  instance_id INTEGER PRIMARY KEY REFERENCES instance(id)"
	"    ON DELETE CASCADE,"
	"  key_type TEXT NOT NULL,"
	"  key_base64 TEXT NOT NULL,"
	"  fingerprint TEXT NOT NULL,"
	"  source TEXT NOT NULL,"
	"  first_seen INTEGER NOT NULL"
	");",

	/*
	 * 2 -> 3: what status saw. Raw samples (kept 48 h by default), then
	 * 5-minute aggregates (mean and max, kept 90 days); the last report
	 * of each instance for the controller's own view.
	 */
	"CREATE TABLE sample_host ("
	"  instance_id INTEGER NOT NULL REFERENCES instance(id)"
	"    ON DELETE CASCADE,"
	"  t INTEGER NOT NULL,"
	"  container_start INTEGER,"
	"  load1 REAL,"
	"  mem_available_kib INTEGER,"
	"  net_rx_bytes INTEGER,"
	"  net_tx_bytes INTEGER,"
	"  sessions INTEGER,"
	"  PRIMARY KEY (instance_id, t)"
	") WITHOUT ROWID;"
	"CREATE TABLE sample_gpu ("
	"  instance_id INTEGER NOT NULL REFERENCES instance(id)"
	"    ON DELETE CASCADE,"
	"  t INTEGER NOT NULL,"
	"  gpu INTEGER NOT NULL,"
	"  util REAL,"
	"  mem_used_mib REAL,"
	"  mem_total_mib REAL,"
	"  temp_c REAL,"
	"  power_w REAL,"
	"  nprocs INTEGER,"
	"  PRIMARY KEY (instance_id, t, gpu)"
	") WITHOUT ROWID;"
	"CREATE TABLE sample_gpu_5m ("
	"  instance_id INTEGER NOT NULL REFERENCES instance(id)"
	"    ON DELETE CASCADE,"
	"  t INTEGER NOT NULL,"
	"  gpu INTEGER NOT NULL,"
	"  n INTEGER NOT NULL,"
	"  util_mean REAL, util_max REAL,"
	"  mem_mean REAL, mem_max REAL,"
	"  mem_total_mib REAL,"
	"  temp_max REAL, power_mean REAL,"
	"  PRIMARY KEY (instance_id, t, gpu)"
	") WITHOUT ROWID;"
	"CREATE INDEX sample_host_t ON sample_host(t);"
	"CREATE INDEX sample_gpu_t ON sample_gpu(t);"
	"CREATE INDEX sample_gpu_5m_t ON sample_gpu_5m(t);"
	"CREATE TABLE last_status ("
	"  instance_id INTEGER PRIMARY KEY REFERENCES instance(id)"
	"    ON DELETE CASCADE,"
	"  t INTEGER NOT NULL,"
	"  state TEXT NOT NULL,"
	"  error TEXT,"
	"  report TEXT"
	");",

	/* 3 -> 4: prices, the ledger, incidents, providers (ledger.c). */
	"CREATE TABLE instance_price ("
	"  instance_id INTEGER PRIMARY KEY REFERENCES instance(id)"
	"    ON DELETE CASCADE,"
	"  price INTEGER NOT NULL,"
	"  price_per TEXT NOT NULL,"
	"  unit TEXT NOT NULL,"
	"  min_billed INTEGER NOT NULL,"
	"  stopped_per_day INTEGER NOT NULL,"
	"  monthly_price INTEGER NOT NULL,"
	"  egress_per_gb INTEGER NOT NULL,"
	"  currency TEXT NOT NULL"
	");"
	"CREATE TABLE ledger ("
	"  id INTEGER PRIMARY KEY,"
	"  instance_id INTEGER NOT NULL REFERENCES instance(id)"
	"    ON DELETE CASCADE,"
	"  t INTEGER NOT NULL,"
	"  state TEXT NOT NULL CHECK (state IN"
	"    ('running', 'stopped', 'released', 'unknown')),"
	"  source TEXT NOT NULL CHECK (source IN"
	"    ('observed', 'performed', 'stated')),"
	"  note TEXT"
	");"
	"CREATE INDEX ledger_instance_t ON ledger(instance_id, t);"
	"CREATE TABLE incident ("
	"  id INTEGER PRIMARY KEY,"
	"  instance_id INTEGER NOT NULL REFERENCES instance(id)"
	"    ON DELETE CASCADE,"
	"  t INTEGER NOT NULL,"
	"  kind TEXT NOT NULL,"
	"  detail TEXT"
	");"
	"CREATE TABLE provider ("
	"  name TEXT PRIMARY KEY,"
	"  currency TEXT NOT NULL,"
	"  balance INTEGER,"
	"  balance_at INTEGER,"
	"  low_balance INTEGER,"
	"  release_after_days INTEGER"
	");",

	/*
	 * 4 -> 5: managed SSH keys and key rotations (keys.c).
	 * managed_key: every key gpufleet generated; the private key stays at
	 * path until deleted_at. instance_key: the key each instance logs in
	 * with now (step 4 of a rotation switches it). key_rotation: one row
	 * per instance being (or last) rotated, with the last step done; a
	 * rerun continues from it. retired_key: keys taken off an instance
	 * (rotated out or revoked), to notice a platform putting one back.
	 * key_lock: at most one rotation per database, by pid.
	 */
	"CREATE TABLE managed_key ("
	"  id INTEGER PRIMARY KEY,"
	"  name TEXT NOT NULL UNIQUE,"
	"  key_type TEXT NOT NULL,"
	"  path TEXT NOT NULL,"
	"  pubkey TEXT NOT NULL,"
	"  key_base64 TEXT NOT NULL,"
	"  fingerprint TEXT NOT NULL,"
	"  created_at INTEGER NOT NULL,"
	"  deleted_at INTEGER"
	");"
	"CREATE TABLE instance_key ("
	"  instance_id INTEGER PRIMARY KEY REFERENCES instance(id)"
	"    ON DELETE CASCADE,"
	"  key_id INTEGER NOT NULL REFERENCES managed_key(id),"
	"  since INTEGER NOT NULL"
	");"
	"CREATE TABLE key_rotation ("
	"  instance_id INTEGER PRIMARY KEY REFERENCES instance(id)"
	"    ON DELETE CASCADE,"
	"  old_key_id INTEGER REFERENCES managed_key(id),"
	"  old_path TEXT NOT NULL,"
	"  old_type TEXT NOT NULL,"
	"  old_base64 TEXT NOT NULL,"
	"  new_key_id INTEGER NOT NULL REFERENCES managed_key(id),"
	"  step INTEGER NOT NULL CHECK (step BETWEEN 0 AND 7),"
	"  state TEXT NOT NULL,"
	"  error TEXT,"
	"  keep_old INTEGER NOT NULL DEFAULT 0,"
	"  updated_at INTEGER NOT NULL"
	");"
	"CREATE TABLE retired_key ("
	"  instance_id INTEGER NOT NULL REFERENCES instance(id)"
	"    ON DELETE CASCADE,"
	"  key_type TEXT NOT NULL,"
	"  key_base64 TEXT NOT NULL,"
	"  reason TEXT NOT NULL,"
	"  retired_at INTEGER NOT NULL,"
	"  PRIMARY KEY (instance_id, key_base64)"
	") WITHOUT ROWID;"
	"CREATE TABLE key_lock ("
	"  id INTEGER PRIMARY KEY CHECK (id = 1),"
	"  pid INTEGER NOT NULL,"
	"  started_at INTEGER NOT NULL"
	");",

	/*
	 * 5 -> 6: the watcher (stopmethod.c, watcher.c). Per instance the
	 * platform's own id of it (platform_id, for stop commands), its stop
	 * method (stop_command NULL: the provider's default; 'none':
	 * none), the last plan read back from it (watcher_state), every
	 * journal entry once (journal; time is the instance's clock, t the
	 * controller's), alerts (stop_failed) and the local stop commands
	 * run for `action: local` deadlines (local_stop: once per id).
	 */
	"ALTER TABLE instance ADD COLUMN platform_id TEXT NOT NULL DEFAULT '';"
	"ALTER TABLE instance ADD COLUMN stop_command TEXT;"
	"ALTER TABLE instance ADD COLUMN stop_kind TEXT"
	"  CHECK (stop_kind IN ('stop', 'release'));"
	"ALTER TABLE instance ADD COLUMN allow_release INTEGER NOT NULL"
	"  DEFAULT 0 CHECK (allow_release IN (0, 1));"
	"CREATE TABLE watcher_state ("
	"  instance_id INTEGER PRIMARY KEY REFERENCES instance(id)"
	"    ON DELETE CASCADE,"
	"  t INTEGER NOT NULL,"
	"  state TEXT NOT NULL,"
	"  pid INTEGER,"
	"  current INTEGER,"
	"  error TEXT,"
	"  generation INTEGER NOT NULL,"
	"  plan TEXT,"
	"  skew INTEGER NOT NULL,"
	"  journal_epoch TEXT"
	");"
	"CREATE TABLE journal ("
	"  instance_id INTEGER NOT NULL REFERENCES instance(id)"
	"    ON DELETE CASCADE,"
	"  epoch TEXT NOT NULL,"
	"  seq INTEGER NOT NULL,"
	"  time INTEGER NOT NULL,"
	"  t INTEGER NOT NULL,"
	"  event TEXT NOT NULL,"
	"  id TEXT,"
	"  entry TEXT NOT NULL,"
	"  received_at INTEGER NOT NULL,"
	"  UNIQUE (instance_id, epoch, seq)"
	");"
	"CREATE INDEX journal_t ON journal(t);"
	"CREATE INDEX journal_instance_id ON journal(instance_id, id);"
	"CREATE TABLE alert ("
	"  id INTEGER PRIMARY KEY,"
	"  instance_id INTEGER NOT NULL REFERENCES instance(id)"
	"    ON DELETE CASCADE,"
	"  t INTEGER NOT NULL,"
	"  kind TEXT NOT NULL,"
	"  deadline TEXT,"
	"  detail TEXT,"
	"  cleared_at INTEGER"
	");"
	"CREATE TABLE local_stop ("
	"  instance_id INTEGER NOT NULL REFERENCES instance(id)"
	"    ON DELETE CASCADE,"
	"  deadline TEXT NOT NULL,"
	"  t INTEGER NOT NULL,"
	"  started_at INTEGER,"
	"  status INTEGER,"
	"  PRIMARY KEY (instance_id, deadline)"
	") WITHOUT ROWID;",

	/*
	 * 6 -> 7: schedules, guards and what the laptop side did
	 * (controller/SCHEDULE.md). A schedule_run row is the claim of an
	 * occurrence, inserted before anything runs; action_log feeds events.
	 */
	"CREATE TABLE schedule ("
	"  id INTEGER PRIMARY KEY AUTOINCREMENT,"
	"  name TEXT NOT NULL UNIQUE,"
	"  tag TEXT NOT NULL UNIQUE,"
	"  selector TEXT NOT NULL,"
	"  cron TEXT NOT NULL,"
	"  tz TEXT,"
	"  action TEXT NOT NULL"
	"    CHECK (action IN ('shutdown', 'exec', 'rotate-keys', 'status')),"
	"  command TEXT,"
	"  unless_busy INTEGER NOT NULL DEFAULT 0 CHECK (unless_busy IN (0, "
	"1)),"
	"  catchup_s INTEGER NOT NULL DEFAULT 3600 CHECK (catchup_s >= 0),"
	"  warn_minutes INTEGER NOT NULL DEFAULT 5"
	"    CHECK (warn_minutes BETWEEN 0 AND 1440),"
	"  before_stop TEXT,"
	"  paused INTEGER NOT NULL DEFAULT 0 CHECK (paused IN (0, 1)),"
	"  created_at INTEGER NOT NULL,"
	"  considered_until INTEGER NOT NULL"
	");"
	"CREATE TABLE schedule_run ("
	"  id INTEGER PRIMARY KEY,"
	"  schedule_id INTEGER NOT NULL REFERENCES schedule(id)"
	"    ON DELETE CASCADE,"
	"  occurrence INTEGER NOT NULL,"
	"  manual INTEGER NOT NULL DEFAULT 0 CHECK (manual IN (0, 1)),"
	"  state TEXT NOT NULL CHECK (state IN ('running', 'ok', 'failed',"
	"    'missed', 'skipped', 'abandoned')),"
	"  reason TEXT,"
	"  pid INTEGER,"
	"  pid_start INTEGER,"
	"  started_at INTEGER,"
	"  ended_at INTEGER,"
	"  output TEXT,"
	"  result TEXT,"
	"  UNIQUE (schedule_id, occurrence, manual)"
	");"
	"CREATE INDEX schedule_run_state ON schedule_run(state);"
	"CREATE TABLE guard ("
	"  id INTEGER PRIMARY KEY AUTOINCREMENT,"
	"  name TEXT NOT NULL UNIQUE,"
	"  selector TEXT NOT NULL,"
	"  max_cost INTEGER CHECK (max_cost >= 0),"
	"  per TEXT CHECK (per IN ('day', 'month')),"
	"  min_runway_s INTEGER CHECK (min_runway_s > 0),"
	"  action TEXT NOT NULL CHECK (action IN ('warn', 'shutdown')),"
	"  created_at INTEGER NOT NULL,"
	"  CHECK ((max_cost IS NULL) <> (min_runway_s IS NULL))"
	");"
	"CREATE TABLE guard_fire ("
	"  guard_id INTEGER NOT NULL REFERENCES guard(id) ON DELETE CASCADE,"
	"  instance_id INTEGER NOT NULL REFERENCES instance(id)"
	"    ON DELETE CASCADE,"
	"  period TEXT NOT NULL,"
	"  t INTEGER NOT NULL,"
	"  PRIMARY KEY (guard_id, instance_id, period)"
	") WITHOUT ROWID;"
	"CREATE TABLE action_log ("
	"  id INTEGER PRIMARY KEY,"
	"  t INTEGER NOT NULL,"
	"  kind TEXT NOT NULL,"
	"  name TEXT,"
	"  instances TEXT NOT NULL DEFAULT '[]',"
	"  why TEXT,"
	"  result TEXT"
	");"
	"CREATE INDEX action_log_t ON action_log(t);",

	/*
	 * 7 -> 8: who runs a guard_shutdown entry's stop while its result is
	 * NULL: the runner's pid and its start time (field 22 of
	 * /proc/PID/stat), so that a stop whose runner died is run again.
	 */
	"ALTER TABLE action_log ADD COLUMN runner_pid INTEGER;"
	"ALTER TABLE action_log ADD COLUMN runner_start INTEGER;",

	/*
	 * 8 -> 9: who runs a schedule_run row while it is running (the daemon
	 * or the `schedule run` CLI): its pid and start time, so that a row
	 * whose child and runner are both gone is finished, not waited for.
	 */
	"ALTER TABLE schedule_run ADD COLUMN runner_pid INTEGER;"
	"ALTER TABLE schedule_run ADD COLUMN runner_start INTEGER;",

	/*
	 * 9 -> 10: the jobs `gpufleet run` started (agent/JOBS.md), as last
	 * seen: by run itself, by `jobs` (the agent's job ls) and by the
	 * watcher's job_started and job_ended entries. fire_id (j-N-STARTED)
	 * names a job for good; N alone may come back when D/jobs was
	 * emptied by hand. Times are the controller's clock; updated is when
	 * the row was last confirmed.
	 */
	"CREATE TABLE job ("
	"  id INTEGER PRIMARY KEY,"
	"  instance_id INTEGER NOT NULL REFERENCES instance(id)"
	"    ON DELETE CASCADE,"
	"  job INTEGER NOT NULL CHECK (job > 0),"
	"  name TEXT NOT NULL,"
	"  command TEXT NOT NULL DEFAULT '',"
	"  then_stop TEXT CHECK (then_stop IN ('stop', 'stop-if-ok')),"
	"  fire_id TEXT NOT NULL,"
	"  pid INTEGER,"
	"  state TEXT NOT NULL CHECK (state IN ('running', 'succeeded',"
	"    'failed', 'killed', 'lost')),"
	"  started INTEGER NOT NULL,"
	"  ended INTEGER,"
	"  exit INTEGER CHECK (exit BETWEEN 0 AND 255),"
	"  signal TEXT,"
	"  reason TEXT,"
	"  last_line TEXT,"
	"  updated INTEGER NOT NULL,"
	"  UNIQUE (instance_id, fire_id)"
	");"
	"CREATE INDEX job_instance ON job(instance_id, job);",

	/*
	 * 10 -> 11: the notification queue (notify.h). notify_msg: one row
	 * per event, queued once (dedupe: "journal:INSTANCE_ID:EPOCH:SEQ",
	 * "action:ID", ...). notify_send: one row per message and target;
	 * sender_pid and sender_start (field 22 of /proc/PID/stat) name the
	 * process of a 'sending' row, so that one whose sender died becomes
	 * 'unknown', never sent again; 'instance': sent by the instance's
	 * watcher, waiting for its word (next_at: until when).
	 */
	"CREATE TABLE notify_msg ("
	"  id INTEGER PRIMARY KEY,"
	"  kind TEXT NOT NULL,"
	"  instance TEXT,"
	"  t INTEGER NOT NULL,"
	"  text TEXT NOT NULL,"
	"  next TEXT,"
	"  dedupe TEXT NOT NULL UNIQUE,"
	"  created_at INTEGER NOT NULL"
	");"
	"CREATE TABLE notify_send ("
	"  msg_id INTEGER NOT NULL REFERENCES notify_msg(id) ON DELETE CASCADE,"
	"  target TEXT NOT NULL,"
	"  state TEXT NOT NULL CHECK (state IN ('pending', 'sending', 'sent',"
	"    'failed', 'unknown', 'instance')),"
	"  attempts INTEGER NOT NULL DEFAULT 0,"
	"  next_at INTEGER NOT NULL,"
	"  last_at INTEGER,"
	"  last_error TEXT,"
	"  sender_pid INTEGER,"
	"  sender_start INTEGER,"
	"  PRIMARY KEY (msg_id, target)"
	");"
	"CREATE INDEX notify_send_state ON notify_send(state, next_at);",

	/*
	 * 11 -> 12: an instance reached through another one (ProxyJump):
	 * jump holds that instance's name, NULL for a direct connection.
	 */
	"ALTER TABLE instance ADD COLUMN jump TEXT;",

	/*
	 * 12 -> 13: the billing preset an instance's price came from
	 * (preset.c), as it was when applied; no row: set by hand or none.
	 */
	"CREATE TABLE instance_preset ("
	"  instance_id INTEGER PRIMARY KEY REFERENCES instance(id)"
	"    ON DELETE CASCADE,"
	"  name TEXT NOT NULL,"
	"  date TEXT NOT NULL,"
	"  source TEXT NOT NULL,"
	"  file TEXT NOT NULL,"
	"  applied_at INTEGER NOT NULL"
	");",

	/*
	 * 13 -> 14: schedules that pull files home (--do backup; command:
	 * a JSON array, the REMOTE_PATHs then LOCAL_DIR). SQLite cannot
	 * change a CHECK constraint, so the table is made again with the
	 * same rows (foreign keys are off while steps run: dropping the old
	 * table leaves schedule_run's rows alone).
	 */
	"CREATE TABLE schedule_new ("
	"  id INTEGER PRIMARY KEY AUTOINCREMENT,"
	"  name TEXT NOT NULL UNIQUE,"
	"  tag TEXT NOT NULL UNIQUE,"
	"  selector TEXT NOT NULL,"
	"  cron TEXT NOT NULL,"
	"  tz TEXT,"
	"  action TEXT NOT NULL CHECK (action IN ('shutdown', 'exec',"
	"    'rotate-keys', 'status', 'backup')),"
	"  command TEXT,"
	"  unless_busy INTEGER NOT NULL DEFAULT 0 CHECK (unless_busy IN (0, "
	"1)),"
	"  catchup_s INTEGER NOT NULL DEFAULT 3600 CHECK (catchup_s >= 0),"
	"  warn_minutes INTEGER NOT NULL DEFAULT 5"
	"    CHECK (warn_minutes BETWEEN 0 AND 1440),"
	"  before_stop TEXT,"
	"  paused INTEGER NOT NULL DEFAULT 0 CHECK (paused IN (0, 1)),"
	"  created_at INTEGER NOT NULL,"
	"  considered_until INTEGER NOT NULL"
	");"
	"INSERT INTO schedule_new SELECT id, name, tag, selector, cron, tz,"
	"  action, command, unless_busy, catchup_s, warn_minutes, before_stop,"
	"  paused, created_at, considered_until FROM schedule;"
	/* AUTOINCREMENT goes on from the old table's count. */
	"DELETE FROM sqlite_sequence WHERE name = 'schedule_new';"
	"UPDATE sqlite_sequence SET name = 'schedule_new'"
	"  WHERE name = 'schedule';"
	"DROP TABLE schedule;"
	"ALTER TABLE schedule_new RENAME TO schedule;",

	/*
	 * 14 -> 15: gpufleet speed runs (speed.c), the newest SPEED_KEEP
	 * per instance: bytes per second each way, the round trip in
	 * milliseconds and the bytes sent each way.
	 */
	"CREATE TABLE speed ("
	"  id INTEGER PRIMARY KEY,"
	"  instance_id INTEGER NOT NULL REFERENCES instance(id)"
	"    ON DELETE CASCADE,"
	"  at INTEGER NOT NULL,"
	"  up_Bps REAL NOT NULL CHECK (up_Bps > 0),"
	"  down_Bps REAL NOT NULL CHECK (down_Bps > 0),"
	"  rtt_ms REAL NOT NULL CHECK (rtt_ms >= 0),"
	"  size INTEGER NOT NULL CHECK (size > 0)"
	");"
	"CREATE INDEX speed_instance ON speed(instance_id, at);",

	/*
	 * 15 -> 16: price history (ledger.c). instance_price holds every
	 * price an instance has had, each in force from valid_from until the
	 * next one (the first also before it); the price so far is valid
	 * from when the instance was added.
	 */
	"CREATE TABLE instance_price_history ("
	"  instance_id INTEGER NOT NULL REFERENCES instance(id)"
	"    ON DELETE CASCADE,"
	"  valid_from INTEGER NOT NULL,"
	"  price INTEGER NOT NULL,"
	"  price_per TEXT NOT NULL,"
	"  unit TEXT NOT NULL,"
	"  min_billed INTEGER NOT NULL,"
	"  stopped_per_day INTEGER NOT NULL,"
	"  monthly_price INTEGER NOT NULL,"
	"  egress_per_gb INTEGER NOT NULL,"
	"  currency TEXT NOT NULL,"
	"  PRIMARY KEY (instance_id, valid_from)"
	") WITHOUT ROWID;"
	"INSERT INTO instance_price_history SELECT p.instance_id, "
	"  i.created_at, p.price, p.price_per, p.unit, p.min_billed, "
	"  p.stopped_per_day, p.monthly_price, p.egress_per_gb, p.currency "
	"  FROM instance_price p JOIN instance i ON i.id = p.instance_id;"
	"DROP TABLE instance_price;"
	"ALTER TABLE instance_price_history RENAME TO instance_price;",

	/*
	 * 16 -> 17: held stops (stophold.c). A deadline armed with --pull
	 * keeps its pull here, never on the instance: pulls, a JSON array
	 * of {"remote","local"}; must: no release unless it came home.
	 * held_at: the watcher journaled "held" (the controller's clock);
	 * state: armed, pulling (claimed by one gpufleet), released or
	 * failed; detail: the pull's error, or who released it.
	 */
	"CREATE TABLE stop_hold ("
	"  instance_id INTEGER NOT NULL REFERENCES instance(id)"
	"    ON DELETE CASCADE,"
	"  deadline TEXT NOT NULL,"
	"  pulls TEXT NOT NULL,"
	"  must INTEGER NOT NULL CHECK (must IN (0, 1)),"
	"  created_at INTEGER NOT NULL,"
	"  held_at INTEGER,"
	"  state TEXT NOT NULL DEFAULT 'armed' CHECK (state IN ('armed',"
	"    'pulling', 'released', 'failed')),"
	"  detail TEXT,"
	"  PRIMARY KEY (instance_id, deadline)"
	") WITHOUT ROWID;",

	/*
	 * 17 -> 18: what the books may believe (ledger.c, "Who may assert
	 * what" in controller/LEDGER.md). armed: every id gpufleet wrote
	 * into an instance's plan (a deadline, an autostop policy) or gave
	 * a job it started (its fire id), from when (written_at, the
	 * controller's clock); at: a deadline's time on the controller's
	 * clock; local: its stop runs on the laptop; release: the method
	 * it was armed with releases; removed_at: a plan written without
	 * it. Only these ids may change the ledger; journal.rejected marks
	 * an entry that claimed anything else (it decides nothing).
	 * stop_request: a stop gpufleet caused, requested -> confirmed
	 * (evidence: unreachable after it, or a later container start) or
	 * failed; ok_at: its command exited 0 (read then); seen_at: the same
	 * container answered after it (the stop took effect after that, if at
	 * all); confirmed_by: unreachable or restart. since: the rental began
	 * before the instance was added (add
	 * --since). The plans stored so far seed armed.
	 */
	"CREATE TABLE armed ("
	"  instance_id INTEGER NOT NULL REFERENCES instance(id)"
	"    ON DELETE CASCADE,"
	"  id TEXT NOT NULL,"
	"  kind TEXT NOT NULL CHECK (kind IN ('deadline', 'autostop',"
	"    'job')),"
	"  written_at INTEGER NOT NULL,"
	"  at INTEGER,"
	"  local INTEGER NOT NULL DEFAULT 0,"
	"  release INTEGER NOT NULL DEFAULT 0,"
	"  removed_at INTEGER,"
	"  PRIMARY KEY (instance_id, id)"
	") WITHOUT ROWID;"
	"CREATE TABLE stop_request ("
	"  instance_id INTEGER NOT NULL REFERENCES instance(id)"
	"    ON DELETE CASCADE,"
	"  fire_id TEXT NOT NULL,"
	"  cause TEXT NOT NULL,"
	"  kind TEXT NOT NULL DEFAULT 'stop' CHECK (kind IN ('stop',"
	"    'release')),"
	"  requested_at INTEGER NOT NULL,"
	"  state TEXT NOT NULL CHECK (state IN ('requested', 'confirmed',"
	"    'failed')),"
	"  ok_at INTEGER,"
	"  seen_at INTEGER,"
	"  decided_at INTEGER,"
	"  confirmed_by TEXT,"
	"  detail TEXT,"
	"  PRIMARY KEY (instance_id, fire_id)"
	") WITHOUT ROWID;"
	"ALTER TABLE instance ADD COLUMN since INTEGER;"
	"ALTER TABLE journal ADD COLUMN rejected INTEGER NOT NULL DEFAULT 0;"
	"CREATE TABLE clock ("
	"  name TEXT PRIMARY KEY,"
	"  t INTEGER NOT NULL"
	") WITHOUT ROWID;"
	"INSERT OR IGNORE INTO armed (instance_id, id, kind, written_at, at, "
	"  local, release) SELECT w.instance_id, json_extract(d.value, "
	"  '$.id'), 'deadline', max(i.created_at, coalesce(json_extract("
	"  w.plan, '$.written_at'), 0)), json_extract(d.value, '$.at') - "
	"  w.skew, coalesce(json_extract(d.value, '$.action') = 'local', 0), "
	"  coalesce(json_extract(w.plan, '$.stop.kind') = 'release', 0) "
	"  FROM watcher_state w JOIN instance i ON i.id = w.instance_id, "
	"  json_each(w.plan, '$.deadlines') d WHERE json_valid(w.plan) AND "
	"  json_type(d.value, '$.id') = 'text' AND json_type(d.value, "
	"  '$.at') = 'integer';"
	"INSERT OR IGNORE INTO armed (instance_id, id, kind, written_at, "
	"  release) SELECT w.instance_id, json_extract(w.plan, "
	"  '$.autostop.id'), 'autostop', max(i.created_at, coalesce("
	"  json_extract(w.plan, '$.written_at'), 0)), coalesce(json_extract("
	"  w.plan, '$.stop.kind') = 'release', 0) FROM watcher_state w JOIN "
	"  instance i ON i.id = w.instance_id WHERE json_valid(w.plan) AND "
	"  json_type(w.plan, '$.autostop.id') = 'text';"
	"INSERT OR IGNORE INTO armed (instance_id, id, kind, written_at, "
	"  local) SELECT j.instance_id, j.fire_id, 'job', j.started - 1, "
	"  coalesce(i.stop_command LIKE 'local:%', 0) FROM job j JOIN "
	"  instance i ON i.id = j.instance_id"
	"  WHERE j.then_stop IS NOT NULL;",

	/*
	 * 18 -> 19: the journal has a life cycle (controller/watcher.c).
	 * The cursor is watcher_state.journal_seq, the highest seq read of
	 * journal_epoch whether it was stored or dropped (a flood), since
	 * what is below it may be pruned; journal_received serves the
	 * pruning and the per-day caps.
	 */
	"ALTER TABLE watcher_state ADD COLUMN journal_seq INTEGER;"
	"UPDATE watcher_state SET journal_seq = (SELECT max(j.seq) FROM "
	"  journal j WHERE j.instance_id = watcher_state.instance_id AND "
	"  j.epoch = watcher_state.journal_epoch);"
	"CREATE INDEX journal_received ON journal(instance_id, received_at);",
};

#define NSTEPS ((int)(sizeof steps / sizeof steps[0]))

/* The migration steps; *n is their count, the version this build writes. */
const char *const *
schema_steps(int *n)
{
	*n = NSTEPS;
	return steps;
}

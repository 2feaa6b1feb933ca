/* The watcher's state, journal and their effects, in the inventory. */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "db.h"
#include "actionlog.h"
#include "armed.h"
#include "job.h"
#include "ledger.h"
#include "log.h"
#include "notify.h"
#include "status.h"
#include "timeparse.h"
#include "stophold.h"
#include "stoprequest.h"
#include "vis.h"
#include "watcher.h"
#include "xmalloc.h"

static int knob(const char *, long, long, long, long *, char **);
static int store_state(struct inventory *, int64_t, int64_t, int64_t,
    const struct report *, char **);
static int reject(struct inventory *, const struct instance *, int64_t,
    const struct report_entry *, char **);
static int local_due_ok(
    struct inventory *, int64_t, const char *, const struct armed *, int64_t);
static int ingest(struct inventory *, const struct instance *, int64_t, int64_t,
    const struct report_entry *, char **);
static int notify_entry(struct inventory *, const struct instance *, int64_t,
    int64_t, int64_t, const struct report *, const struct report_entry *,
    char **);
static int notify_by_instance(struct inventory *, const struct instance *,
    const struct report_watcher *, int, const char *,
    const struct report_entry *, int64_t, int64_t, char **);
static int day_usage(
    struct inventory *, int64_t, int64_t, int64_t *, int64_t *, char **);
static int admit(struct inventory *, const struct instance *, int64_t, int64_t,
    const struct report_entry *, size_t, char **);
static int flood(
    struct inventory *, const struct instance *, int64_t, size_t, char **);
static int epoch_first_read(
    struct inventory *, int64_t, const char *, int64_t, int64_t *, char **);
static int notify_ingest(struct inventory *, const struct instance *, int64_t,
    const struct report_entry *, char **);
static int notify_settle(struct inventory *, const struct instance *, int64_t,
    const char *, const char *, json_t *, char **);
static char *entry_str(json_t *, const char *, size_t);
static json_t *stopping_json(struct inventory *, int64_t);

/* One knob from the environment, in [lo, hi], def when unset. */
static int
knob(const char *name, long def, long lo, long hi, long *out, char **cause)
{
	const char *v = getenv(name);
	char *end;
	long n;

	*out = def;
	if (v == NULL || *v == '\0')
		return 0;
	n = strtol(v, &end, 10);
	if (*end != '\0' || n < lo || n > hi) {
		xasprintf(cause,
		    "%s '%s' is not a number of seconds from %ld "
		    "to %ld",
		    name, v, lo, hi);
		return -GF_EUSAGE;
	}
	*out = n;
	return 0;
}

/*
 * The test knobs: GPUFLEET_CHECK_INTERVAL (default 60),
 * GPUFLEET_STOP_CONFIRM (600) and GPUFLEET_MIN_IDLE (300).
 */
int
watcher_knobs(struct watcher_knobs *k, char **cause)
{
	long ci, sc, mi;
	int r;

	if ((r = knob("GPUFLEET_CHECK_INTERVAL", 60, 1, 3600, &ci, cause)) !=
		0 ||
	    (r = knob("GPUFLEET_STOP_CONFIRM", 600, 1, 86400, &sc, cause)) !=
		0 ||
	    (r = knob("GPUFLEET_MIN_IDLE", 300, 1, 86400, &mi, cause)) != 0)
		return r;
	k->check_interval_s = (int)ci;
	k->stop_confirm_s = (int)sc;
	k->min_idle_s = mi;
	return 0;
}

/*
 * The events that decide the books (controller/LEDGER.md): what armed_due,
 * the stop requests and the fired ids read. As SQL and as a list.
 */
#define BOOKS_SQL                                                              \
	"('firing', 'before_stop', 'skipped', 'stopping', 'stop_result', "     \
	"'stopped', 'stop_retry', 'stop_failed', 'local_due', 'cancelled', "   \
	"'held', 'released')"
static const char *const books[] = { "firing", "before_stop", "skipped",
	"stopping", "stop_result", "stopped", "stop_retry", "stop_failed",
	"local_due", "cancelled", "held", "released", NULL };

/*
 * The --journal-after cursor for an instance: "EPOCH:SEQ" of the highest
 * entry read (stored, or dropped as a flood) of the journal it last
 * reported, or "-" (from the start). Caller frees *cursor.
 */
int
watcher_cursor(struct inventory *inv, int64_t id, char **cursor, char **cause)
{
	sqlite3_stmt *st;
	int r;

	*cursor = NULL;
	if ((r = db_prepare(inv, &st,
		 "SELECT journal_epoch, journal_seq FROM watcher_state "
		 "WHERE instance_id = ? AND journal_seq IS NOT NULL",
		 "cannot read the journal", cause, "I", id)) != 0)
		return r;
	if ((r = sqlite3_step(st)) == SQLITE_ROW &&
	    sqlite3_column_type(st, 0) == SQLITE_TEXT)
		xasprintf(cursor, "%s:%lld", sqlite3_column_text(st, 0),
		    (long long)sqlite3_column_int64(st, 1));
	r = db_finish(inv, st, r, "cannot read the journal", cause);
	if (r < 0)
		return r;
	if (*cursor == NULL)
		*cursor = xstrdup("-");
	return 0;
}

/* The watcher's state of one report (no section: an older agent). */
static int
store_state(struct inventory *inv, int64_t id, int64_t now, int64_t skew,
    const struct report *rep, char **cause)
{
	const struct report_watcher *w = &rep->watcher;

	if (!w->present)
		return db_exec(inv,
		    "INSERT INTO watcher_state (instance_id, t, state, "
		    "generation, skew) VALUES (?, ?, 'unknown', 0, ?) "
		    "ON CONFLICT (instance_id) DO UPDATE SET t = excluded.t, "
		    "state = 'unknown', skew = excluded.skew",
		    "storing the watcher's state", cause, "III", id, now, skew);
	/* The cursor stays while the epoch does. */
	return db_exec(inv,
	    "INSERT INTO watcher_state (instance_id, t, state, pid, "
	    "current, error, generation, plan, skew, journal_epoch) VALUES "
	    "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (instance_id) DO "
	    "UPDATE SET t = excluded.t, state = excluded.state, pid = "
	    "excluded.pid, current = excluded.current, error = "
	    "excluded.error, generation = excluded.generation, plan = "
	    "excluded.plan, skew = excluded.skew, journal_seq = CASE WHEN "
	    "journal_epoch IS excluded.journal_epoch THEN journal_seq END, "
	    "journal_epoch = excluded.journal_epoch",
	    "storing the watcher's state", cause, "IItNitItIt", id, now,
	    w->state, w->pid, w->current, w->error, w->generation, w->plan,
	    skew, w->epoch[0] != '\0' ? w->epoch : NULL);
}

/*
 * An entry about a stop of an id gpufleet never armed on in: kept in the
 * journal, an alert (the first WATCHER_CLAIM_ALERTS_DAY of the instance's
 * day), and nothing else. Returns 1 (rejected) or a negative status.
 */
static int
reject(struct inventory *inv, const struct instance *in, int64_t now,
    const struct report_entry *e, char **cause)
{
	char *id = vis_buf(e->id, strnlen(e->id, 64)), *detail;
	sqlite3_stmt *st;
	int r, told = 0;

	/* Kept, marked: it decides nothing (fired ids, what is due). */
	r = db_exec(inv,
	    "UPDATE journal SET rejected = 1 WHERE instance_id = ? AND "
	    "epoch = ? AND seq = ?",
	    "storing the journal", cause, "ItI", in->id, e->epoch, e->seq);
	if (r >= 0 &&
	    (r = db_prepare(inv, &st,
		 "SELECT count(*) FROM alert WHERE instance_id = ? AND kind = "
		 "'claim_rejected' AND t >= ?",
		 "reading the alerts", cause, "II", in->id,
		 now - now % 86400)) == 0) {
		if ((r = sqlite3_step(st)) == SQLITE_ROW)
			told = sqlite3_column_int(st, 0);
		r = db_finish(inv, st, r, "reading the alerts", cause);
	}
	if (r < 0 || told >= WATCHER_CLAIM_ALERTS_DAY) {
		free(id);
		return r < 0 ? r : 1;
	}
	xasprintf(&detail, "%s claimed a stop gpufleet never armed (%s %s)",
	    in->name, e->event, id);
	warn_msg("%s", detail);
	r = stoprequest_alert(
	    inv, in->id, now, "claim_rejected", id, detail, cause);
	if (r == 0) {
		json_t *names = json_pack("[s]", in->name);
		r = actionlog_add(inv, now, "claim_rejected", id, names, detail,
		    NULL, NULL, cause);
		json_decref(names);
	}
	free(detail);
	free(id);
	return r < 0 ? r : 1;
}

/*
 * Whether a local stop of fire_id (armed as a) may be due at t: its stop
 * runs on the laptop, it was still armed then (not removed before t),
 * its time came (a deadline: not a minute before its at) and, for a
 * job's, the job ended. Anything else would run the laptop's command for
 * the instance's word alone.
 */
static int
local_due_ok(struct inventory *inv, int64_t id, const char *fire_id,
    const struct armed *a, int64_t t)
{
	if (!a->local || (a->removed_at != 0 && t > a->removed_at))
		return 0;
	if (strcmp(a->kind, "deadline") == 0)
		return t >= a->at - WATCHER_LOCAL_EARLY;
	if (strcmp(a->kind, "job") == 0)
		return db_exec(inv,
			   "SELECT 1 FROM job WHERE instance_id = ? AND "
			   "fire_id "
			   "= ? AND state <> 'running'",
			   "reading the jobs", NULL, "It", id, fire_id) == 1;
	return 0;
}

/*
 * What a new journal entry means here (controller/LEDGER.md); skew turns
 * the instance's clock into the controller's. Only an entry about an id
 * gpufleet armed on this instance counts, at a time clamped to [when it
 * was armed, now]; any other is rejected. `stopping` (or `stopped`, seen
 * after a restart) requests the stop: the books take it once evidence
 * confirms it (stoprequest.c); `stop_result` says how its command went;
 * `stop_failed` fails it (an alert); a held stop is marked held in
 * stop_hold, for its pull (the daemon's); a due local stop waits in
 * local_stop for the controller to run it once; a job's start and end
 * update the job table. Returns 0, 1 when the entry was rejected, or a
 * negative status.
 */
static int
ingest(struct inventory *inv, const struct instance *in, int64_t skew,
    int64_t now, const struct report_entry *e, char **cause)
{
	static const char *const stops[] = { "stopping", "stopped",
		"stop_result", "stop_retry", "stop_failed", "local_due", "held",
		NULL };
	const char *ev = e->event;
	int64_t t = e->time - skew, id = in->id;
	struct armed a;
	char *detail;
	size_t i;
	int r;

	if (strncmp(ev, "job_", 4) == 0)
		return job_ingest(inv, id, skew, now, e, cause);
	if (e->id == NULL)
		return 0;
	for (i = 0; stops[i] != NULL && strcmp(stops[i], ev) != 0; i++)
		;
	if (stops[i] == NULL)
		return 0;
	if ((r = armed_find(inv, id, e->id, &a, cause)) < 0)
		return r;
	if (r == 0)
		return reject(inv, in, now, e, cause);
	if (t < a.written_at)
		t = a.written_at;
	if (t > now)
		t = now;
	if (strcmp(ev, "stopping") == 0 || strcmp(ev, "stopped") == 0)
		return stoprequest_open(inv, in, e->id, armed_cause(e->id, &a),
		    a.release ? "release" : "stop", t,
		    strcmp(ev, "stopping") == 0, cause);
	if (strcmp(ev, "stop_result") == 0) {
		json_t *o = json_loads(e->entry, 0, NULL), *st;
		const char *out =
		    json_string_value(json_object_get(o, "output"));
		size_t len = out != NULL ? strnlen(out, 1024) : 0;
		st = json_object_get(o, "status");
		/* Its last line or so, without the newline that ends it. */
		while (len > 0 && (out[len - 1] == '\n' || out[len - 1] == ' '))
			len--;
		detail = len > 0 ? vis_buf(out + (len > 200 ? len - 200 : 0),
				       len > 200 ? 200 : len)
				 : NULL;
		if (json_is_integer(st) && json_integer_value(st) != 0) {
			char *s;
			xasprintf(&s, "exit %lld%s%s",
			    (long long)json_integer_value(st),
			    detail != NULL ? ": " : "",
			    detail != NULL ? detail : "");
			free(detail);
			detail = s;
		}
		r = stoprequest_result(inv, id, e->id,
		    json_is_integer(st) && json_integer_value(st) == 0, detail,
		    now, cause);
		free(detail);
		json_decref(o);
		return r;
	}
	if (strcmp(ev, "stop_failed") == 0) {
		json_t *o = json_loads(e->entry, 0, NULL);
		detail = entry_str(o, "reason", 200);
		json_decref(o);
		r = stoprequest_fail(inv, in, e->id,
		    detail != NULL ? detail : "the watcher gave up", now,
		    cause);
		if (r == 1)
			r = stoprequest_alert(inv, id, t, "stop_failed", e->id,
			    detail != NULL ? detail : "stop_failed", cause);
		free(detail);
		return r;
	}
	if (strcmp(ev, "held") == 0)
		return stophold_held(inv, id, e->id, t, cause);
	if (strcmp(ev, "local_due") == 0 && local_due_ok(inv, id, e->id, &a, t))
		return db_exec(inv,
		    "INSERT OR IGNORE INTO local_stop (instance_id, deadline, "
		    "t) VALUES (?, ?, ?)",
		    "recording a local stop", cause, "ItI", id, e->id, t);
	if (strcmp(ev, "local_due") == 0)
		return reject(inv, in, now, e, cause);
	return 0;
}

/* Member key of o as text, escaped and cut to max bytes; NULL if absent. */
static char *
entry_str(json_t *o, const char *key, size_t max)
{
	const char *v = json_string_value(json_object_get(o, key));
	char *s;

	if (v == NULL)
		return NULL;
	s = vis_buf(v, strnlen(v, max));
	return s;
}

/*
 * The notification a new journal entry makes, if any: a job's end, a
 * stop done or failed, an autostop firing. Entries journaled more than a
 * day before the controller first read their epoch (first_read: at the
 * first contact with a new instance, a journal made again; its first
 * pages too) are history, not news; one journaled after that is news
 * however late it is read: a box stopped by its job's --then stop is read
 * again only once it runs again, days later maybe. Each is
 * queued once by the entry; a stop once by its deadline: `stopped` (seen
 * after a restart), or a stop_result with status 0 when the container
 * (container_start, the instance's clock; 0 unknown) started after it. A
 * stop_result read while the same container runs says nothing yet: the
 * machine answered, so it is not stopped (stop_failed may follow).
 */
static int
notify_entry(struct inventory *inv, const struct instance *in, int64_t now,
    int64_t first_read, int64_t skew, const struct report *rep,
    const struct report_entry *e, char **cause)
{
	int64_t container_start = rep->container_start;
	const char *ev = e->event;
	int64_t t = e->time - skew, job = 0;
	char *what = NULL, *next = NULL, *key = NULL, *name = NULL, *s;
	json_t *o, *v;
	int kind = -1, r = 0;

	if (t < first_read - 86400 ||
	    (o = json_loads(e->entry, 0, NULL)) == NULL)
		return 0;
	xasprintf(&key, "journal:%lld:%s:%lld", (long long)in->id, e->epoch,
	    (long long)e->seq);
	if (strcmp(ev, "job_ended") == 0) {
		const char *state =
		    json_string_value(json_object_get(o, "state"));
		v = json_object_get(o, "job");
		if (json_is_integer(v) && json_integer_value(v) > 0)
			job = json_integer_value(v);
		if (state == NULL || job == 0)
			goto out;
		if ((name = entry_str(o, "name", 64)) != NULL) {
			xasprintf(&s, " (%s)", name);
			free(name);
			name = s;
		} else
			name = xstrdup("");
		xasprintf(
		    &next, "gpufleet logs %s:%lld", in->name, (long long)job);
		if (strcmp(state, "succeeded") == 0) {
			kind = NOTIFY_JOB_FINISHED;
			xasprintf(
			    &what, "job %lld%s finished", (long long)job, name);
		} else if (strcmp(state, "failed") == 0) {
			kind = NOTIFY_JOB_FAILED;
			v = json_object_get(o, "exit");
			xasprintf(&what, "job %lld%s failed (exit %lld)",
			    (long long)job, name,
			    json_is_integer(v)
				? (long long)json_integer_value(v)
				: -1LL);
		} else if (strcmp(state, "killed") == 0 ||
		    strcmp(state, "lost") == 0) {
			kind = NOTIFY_JOB_FAILED;
			s = entry_str(
			    o, state[0] == 'k' ? "signal" : "reason", 200);
			xasprintf(&what, "job %lld%s was %s%s%s%s",
			    (long long)job, name, state, s != NULL ? " (" : "",
			    s != NULL ? s : "", s != NULL ? ")" : "");
			free(s);
		}
	} else if ((strcmp(ev, "stop_result") == 0 &&
		       json_is_integer(json_object_get(o, "status")) &&
		       json_integer_value(json_object_get(o, "status")) == 0 &&
		       container_start > e->time) ||
	    strcmp(ev, "stopped") == 0) {
		if (e->id == NULL)
			goto out;
		kind = NOTIFY_STOPPED;
		free(key);
		xasprintf(&key, "stop:%lld:%s", (long long)in->id, e->id);
		xasprintf(&what, "was stopped (%s)", e->id);
		xasprintf(&next, "gpufleet events %s", in->name);
	} else if (strcmp(ev, "stop_failed") == 0) {
		kind = NOTIFY_STOP_FAILED;
		s = entry_str(o, "reason", 200);
		xasprintf(&what, "did not stop (%s)%s%s",
		    e->id != NULL ? e->id : "?", s != NULL ? ": " : "",
		    s != NULL ? s : "");
		free(s);
		xasprintf(&next, "gpufleet status %s", in->name);
	} else if (strcmp(ev, "firing") == 0) {
		const char *why =
		    json_string_value(json_object_get(o, "reason"));
		if (why == NULL ||
		    (strcmp(why, "idle") != 0 && strcmp(why, "stalled") != 0 &&
			strcmp(why, "max_runtime") != 0))
			goto out;
		kind = NOTIFY_AUTOSTOPPED;
		xasprintf(&what, "is being stopped by autostop (%s)", why);
		xasprintf(&next, "gpufleet events %s", in->name);
	}
	if (kind >= 0 &&
	    (r = notifyqueue_add(
		 inv, kind, in->name, t, what, next, key, cause)) == 0)
		r = notify_by_instance(inv, in, &rep->watcher, kind, key, e,
		    now, first_read, cause);
out:
	json_decref(o);
	free(what);
	free(next);
	free(key);
	free(name);
	return r;
}

/*
 * When the controller first read journal epoch of instance id (the
 * earliest entry it stored of it), or now when it never did: *t.
 */
static int
epoch_first_read(struct inventory *inv, int64_t id, const char *epoch,
    int64_t now, int64_t *t, char **cause)
{
	sqlite3_stmt *st;
	int r;

	*t = now;
	if ((r = db_prepare(inv, &st,
		 "SELECT min(received_at) FROM journal WHERE instance_id = ? "
		 "AND epoch = ?",
		 "cannot read the journal", cause, "It", id, epoch)) != 0)
		return r;
	if ((r = sqlite3_step(st)) == SQLITE_ROW &&
	    sqlite3_column_type(st, 0) == SQLITE_INTEGER)
		*t = sqlite3_column_int64(st, 0);
	r = db_finish(inv, st, r, "cannot read the journal", cause);
	return r < 0 ? r : 0;
}

/*
 * The action_log entry and state of send row (dedupe, target) after the
 * instance's "notify" entry n said how its own send went: ok, sent (by
 * the instance); else pending, for the laptop to send. Only a row waiting
 * in 'instance' (or, from notify_by_instance, a new pending one) moves.
 */
static int
notify_settle(struct inventory *inv, const struct instance *in, int64_t now,
    const char *dedupe, const char *target, json_t *n, char **cause)
{
	const char *kind = json_string_value(json_object_get(n, "kind"));
	json_t *st = json_object_get(n, "status"), *names;
	int ok = json_is_true(json_object_get(n, "ok"));
	char *err = entry_str(n, "error", 200), *line, *last;
	int r;

	if (ok)
		xasprintf(&line,
		    "%s %s to %s: sent by the instance (HTTP %lld)", kind,
		    in->name, target,
		    json_is_integer(st) ? (long long)json_integer_value(st)
					: 0LL);
	else
		xasprintf(&line,
		    "%s %s to %s: the instance could not send it (%s); the "
		    "laptop sends it",
		    kind, in->name, target, err != NULL ? err : "?");
	xasprintf(&last, "the instance: %s", err != NULL ? err : "?");
	r = db_exec(inv,
	    "UPDATE notify_send SET state = ?, next_at = ?, last_error = ? "
	    "WHERE target = ? AND state IN ('instance', 'pending') AND "
	    "attempts = 0 AND msg_id = (SELECT id FROM notify_msg WHERE "
	    "dedupe = ?)",
	    "recording a notification", cause, "tIttt", ok ? "sent" : "pending",
	    now, ok ? NULL : last, target, dedupe);
	free(last);
	if (r >= 0 && sqlite3_changes(inv->db) == 1) {
		names = json_pack("[s]", in->name);
		r = actionlog_add(inv, now,
		    ok ? "notify_sent" : "notify_failed", target, names, line,
		    NULL, NULL, cause);
		json_decref(names);
	}
	free(line);
	free(err);
	return r < 0 ? r : 0;
}

/*
 * A message just queued from entry e (dedupe key): each target marked
 * from_instances that the instance holds (its report names it in
 * notify.json) and that takes kind was sent by the watcher itself. Its
 * row is settled by the watcher's "notify" entry when one is stored
 * already (a stop's, matched by the stop's id, comes before the entry
 * the stop is learned from); else it waits in 'instance' for it, at most
 * NOTIFY_INSTANCE_WAIT (then the laptop sends it: the watcher may have
 * died first).
 */
static int
notify_by_instance(struct inventory *inv, const struct instance *in,
    const struct report_watcher *w, int kind, const char *key,
    const struct report_entry *e, int64_t now, int64_t first_read, char **cause)
{
	const struct config *cf = inv->config;
	const struct config_notify *n;
	sqlite3_stmt *st;
	json_t *o, *found;
	const char *id;
	size_t i;
	int r = 0, rc;

	for (i = 0; cf != NULL && i < cf->nnotifies && r == 0; i++) {
		n = &cf->notifies[i];
		if (!n->from_instances || (n->events & (1u << kind)) == 0 ||
		    !w->notify_present || !report_notify_has(w, n->name))
			continue;
		if ((r = db_prepare(inv, &st,
			 "SELECT epoch, id, entry FROM journal WHERE "
			 "instance_id = ? AND event = 'notify' AND t > ? "
			 "ORDER BY epoch, seq",
			 "reading the journal", cause, "II", in->id,
			 first_read - 86400)) != 0)
			return r;
		found = NULL;
		while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
			id = (const char *)sqlite3_column_text(st, 1);
			o = json_loads(
			    (const char *)sqlite3_column_text(st, 2), 0, NULL);
			if (o != NULL &&
			    strcmp(
				json_string_value(json_object_get(o, "target"))
				    ?: "",
				n->name) == 0 &&
			    strcmp(json_string_value(json_object_get(o, "kind"))
				    ?: "",
				notify_kind_name(kind)) == 0 &&
			    (kind == NOTIFY_STOPPED
				    ? e->id != NULL && id != NULL &&
					strcmp(id, e->id) == 0
				    : strcmp((const char *)sqlite3_column_text(
						 st, 0),
					  e->epoch) == 0 &&
					json_integer_value(json_object_get(
					    o, "about")) == e->seq)) {
				json_decref(found);
				found = o; /* the last one says */
			} else
				json_decref(o);
		}
		r = db_finish(inv, st, rc, "reading the journal", cause);
		if (r < 0) {
			json_decref(found);
			return r;
		}
		if (found != NULL)
			r = notify_settle(
			    inv, in, now, key, n->name, found, cause);
		else
			r = db_exec(inv,
			    "UPDATE notify_send SET state = 'instance', "
			    "next_at "
			    "= ? WHERE target = ? AND state = 'pending' AND "
			    "attempts = 0 AND msg_id = (SELECT id FROM "
			    "notify_msg WHERE dedupe = ?)",
			    "queueing a notification", cause, "Itt",
			    now + NOTIFY_INSTANCE_WAIT, n->name, key);
		json_decref(found);
		r = r < 0 ? r : 0;
	}
	return r;
}

/*
 * The watcher's "notify" entry: how it sent a message itself. The row of
 * that message (queued from the entry it is about, or from the stop's id)
 * waiting for it in 'instance' is settled.
 */
static int
notify_ingest(struct inventory *inv, const struct instance *in, int64_t now,
    const struct report_entry *e, char **cause)
{
	const char *target, *kind;
	char *key = NULL;
	json_t *o, *about;
	int r = 0;

	if ((o = json_loads(e->entry, 0, NULL)) == NULL)
		return 0;
	target = json_string_value(json_object_get(o, "target"));
	kind = json_string_value(json_object_get(o, "kind"));
	about = json_object_get(o, "about");
	if (target == NULL || kind == NULL || notify_kind_parse(kind) < 0)
		goto out;
	if (strcmp(kind, "stopped") == 0 && e->id != NULL)
		xasprintf(&key, "stop:%lld:%s", (long long)in->id, e->id);
	else if (json_is_integer(about))
		xasprintf(&key, "journal:%lld:%s:%lld", (long long)in->id,
		    e->epoch, (long long)json_integer_value(about));
	else
		goto out;
	r = db_exec(inv,
	    "SELECT 1 FROM notify_send s JOIN notify_msg m ON m.id = "
	    "s.msg_id WHERE m.dedupe = ? AND s.target = ? AND s.state = "
	    "'instance'",
	    "reading the queue", cause, "tt", key, target);
	if (r > 0)
		r = notify_settle(inv, in, now, key, target, o, cause);
out:
	free(key);
	json_decref(o);
	return r < 0 ? r : 0;
}

/*
 * How many journal entries of instance id were received since since, and
 * their bytes.
 */
static int
day_usage(struct inventory *inv, int64_t id, int64_t since, int64_t *rows,
    int64_t *bytes, char **cause)
{
	sqlite3_stmt *st;
	int r;

	*rows = *bytes = 0;
	if ((r = db_prepare(inv, &st,
		 "SELECT count(*), coalesce(sum(length(CAST(entry AS BLOB))), "
		 "0) FROM journal WHERE instance_id = ? AND received_at >= ?",
		 "cannot read the journal", cause, "II", id, since)) != 0)
		return r;
	if ((r = sqlite3_step(st)) == SQLITE_ROW) {
		*rows = sqlite3_column_int64(st, 0);
		*bytes = sqlite3_column_int64(st, 1);
	}
	r = db_finish(inv, st, r, "cannot read the journal", cause);
	return r < 0 ? r : 0;
}

/*
 * Whether entry e (len bytes) fits in what the instance added today (rows,
 * bytes): within the caps, or within twice them for a stop of an id
 * gpufleet armed there. 1, 0 (dropped) or a negative status.
 */
static int
admit(struct inventory *inv, const struct instance *in, int64_t rows,
    int64_t bytes, const struct report_entry *e, size_t len, char **cause)
{
	struct armed a;
	size_t i;
	int r;

	if (rows < WATCHER_JOURNAL_DAY_ROWS &&
	    bytes + (int64_t)len <= WATCHER_JOURNAL_DAY_BYTES)
		return 1;
	if (rows >= 2 * WATCHER_JOURNAL_DAY_ROWS ||
	    bytes + (int64_t)len > 2 * WATCHER_JOURNAL_DAY_BYTES ||
	    e->id == NULL)
		return 0;
	for (i = 0; books[i] != NULL && strcmp(books[i], e->event) != 0; i++)
		;
	if (books[i] == NULL)
		return 0;
	if ((r = armed_find(inv, in->id, e->id, &a, cause)) < 0)
		return r;
	return r > 0;
}

/*
 * Entries dropped over the day's caps: one journal_flood alert (and
 * action log line) per instance per day. 0 or a negative status.
 */
static int
flood(struct inventory *inv, const struct instance *in, int64_t now,
    size_t dropped, char **cause)
{
	sqlite3_stmt *st;
	json_t *names;
	char *detail;
	int r, seen = 0;

	if ((r = db_prepare(inv, &st,
		 "SELECT count(*) FROM alert WHERE instance_id = ? AND kind = "
		 "'journal_flood' AND t >= ?",
		 "reading the alerts", cause, "II", in->id,
		 now - now % 86400)) != 0)
		return r;
	if ((r = sqlite3_step(st)) == SQLITE_ROW)
		seen = sqlite3_column_int(st, 0) > 0;
	if ((r = db_finish(inv, st, r, "reading the alerts", cause)) < 0)
		return r;
	if (seen)
		return 0;
	xasprintf(&detail,
	    "%s floods its journal: %zu entr%s dropped (at most %d entries "
	    "or %d KiB a day are kept)",
	    in->name, dropped, dropped == 1 ? "y" : "ies",
	    WATCHER_JOURNAL_DAY_ROWS, WATCHER_JOURNAL_DAY_BYTES / 1024);
	warn_msg("%s", detail);
	r = stoprequest_alert(
	    inv, in->id, now, "journal_flood", NULL, detail, cause);
	if (r == 0) {
		names = json_pack("[s]", in->name);
		r = actionlog_add(inv, now, "journal_flood", NULL, names,
		    detail, NULL, NULL, cause);
		json_decref(names);
	}
	free(detail);
	return r < 0 ? r : 0;
}

/*
 * Drop the journal entries received before before, but for each id
 * gpufleet armed on an instance (an autostop's ID@CONTAINER_START by its
 * ID) the first entry of each event that decides the books (BOOKS_SQL,
 * not rejected): what armed_due, the stop requests and the fired ids
 * still read, less their evidence and output (the firing's samples, a
 * command's last KiB). Only the entries that passed the line since the last
 * prune (clock 'journal_pruned') are looked at, so a prune on every poll
 * costs what crossed it. 0 or a negative status.
 */
int
watcher_prune(struct inventory *inv, int64_t before, char **cause)
{
	sqlite3_stmt *st;
	int64_t since = 0;
	int r;

	if ((r = db_prepare(inv, &st,
		 "SELECT t FROM clock WHERE name = 'journal_pruned'",
		 "pruning the journal", cause, "")) != 0)
		return r;
	if ((r = sqlite3_step(st)) == SQLITE_ROW)
		since = sqlite3_column_int64(st, 0);
	if ((r = db_finish(inv, st, r, "pruning the journal", cause)) < 0)
		return r;
	if (before <= since)
		return 0; /* done, or this machine's clock went back */
	r = db_exec(inv,
	    "DELETE FROM journal WHERE instance_id IN (SELECT id FROM "
	    "instance) AND received_at >= ?2 AND received_at < ?1 AND NOT "
	    "(NOT rejected AND id IS NOT NULL AND event IN " BOOKS_SQL
	    " AND EXISTS (SELECT 1 FROM armed a WHERE a.instance_id = "
	    "journal.instance_id AND a.id IN (journal.id, substr(journal.id, "
	    "1, instr(journal.id, '@') - 1))) AND NOT EXISTS (SELECT 1 FROM "
	    "journal o WHERE o.instance_id = journal.instance_id AND o.id = "
	    "journal.id AND o.event = journal.event AND NOT o.rejected AND "
	    "(o.t < journal.t OR (o.t = journal.t AND o.rowid < "
	    "journal.rowid))))",
	    "pruning the journal", cause, "II", before, since);
	/* What is kept keeps its word, not its evidence or output. */
	if (r >= 0)
		r = db_exec(inv,
		    "UPDATE journal SET entry = json_remove(entry, "
		    "'$.evidence', '$.output') WHERE instance_id IN (SELECT id "
		    "FROM instance) AND received_at >= ?2 AND received_at < ?1 "
		    "AND json_valid(entry) AND (json_type(entry, '$.evidence') "
		    "IS NOT NULL OR json_type(entry, '$.output') IS NOT NULL)",
		    "pruning the journal", cause, "II", before, since);
	if (r >= 0)
		r = db_exec(inv,
		    "INSERT OR REPLACE INTO clock (name, t) VALUES "
		    "('journal_pruned', ?)",
		    "pruning the journal", cause, "I", before);
	return r < 0 ? r : 0;
}

/*
 * Store what one report says of the watcher, read at now with the clock
 * skew the probe measured (instance - controller): its state, plan and
 * skew, and each journal entry not stored yet, with its effects, to the
 * day's caps (WATCHER_JOURNAL_DAY_*); the cursor moves past every entry
 * of the page of the reported epoch, stored or dropped, not past the
 * stops read ahead (journal_urgent: stored now, found stored when the
 * page reaches them). Runs in the caller's transaction.
 */
int
watcher_store(struct inventory *inv, const struct instance *in, int64_t now,
    int64_t skew, const struct report *rep, char **cause)
{
	const struct report_watcher *w = &rep->watcher;
	const char *epoch = NULL;
	sqlite3_stmt *st;
	int64_t first = now, rows, bytes, last = 0;
	size_t i, len, dropped = 0;
	int r;

	if ((r = store_state(inv, in->id, now, skew, rep, cause)) != 0 ||
	    (r = day_usage(
		 inv, in->id, now - now % 86400, &rows, &bytes, cause)) != 0)
		return r;
	if (w->nskipped > 0)
		warn_msg("%s: %zu journal entr%s not valid, left out", in->name,
		    w->nskipped, w->nskipped == 1 ? "y" : "ies");
	/* The page, then the stops read ahead: the cursor stays at the page. */
	for (i = 0; i < w->njournal + w->nurgent; i++) {
		const struct report_entry *e = i < w->njournal
		    ? &w->journal[i]
		    : &w->urgent[i - w->njournal];
		/* Asked before this report stores any of the epoch. */
		if ((epoch == NULL || strcmp(epoch, e->epoch) != 0) &&
		    (r = epoch_first_read(
			 inv, in->id, e->epoch, now, &first, cause)) != 0)
			return r;
		epoch = e->epoch;
		if (i < w->njournal && strcmp(e->epoch, w->epoch) == 0 &&
		    e->seq > last)
			last = e->seq;
		len = strlen(e->entry);
		if ((r = admit(inv, in, rows, bytes, e, len, cause)) < 0)
			return r;
		if (r == 0) {
			dropped++;
			continue;
		}
		if ((r = db_prepare(inv, &st,
			 "INSERT OR IGNORE INTO journal (instance_id, epoch, "
			 "seq, time, t, event, id, entry, received_at) VALUES "
			 "(?, ?, ?, ?, ?, ?, ?, ?, ?)",
			 "storing the journal", cause, "ItIIItttI", in->id,
			 e->epoch, e->seq, e->time, e->time - skew, e->event,
			 e->id, e->entry, now)) != 0)
			return r;
		if ((r = db_finish(inv, st, sqlite3_step(st),
			 "storing the journal", cause)) < 0)
			return r;
		if (sqlite3_changes(inv->db) != 1)
			continue;
		rows++;
		bytes += (int64_t)len;
		if ((r = ingest(inv, in, skew, now, e, cause)) < 0)
			return r;
		if (r > 0) /* a claim rejected: no news either */
			continue;
		if ((r = notify_entry(
			 inv, in, now, first, skew, rep, e, cause)) != 0 ||
		    (strcmp(e->event, "notify") == 0 &&
			(r = notify_ingest(inv, in, now, e, cause)) != 0))
			return r;
	}
	if (last > 0 &&
	    (r = db_exec(inv,
		 "UPDATE watcher_state SET journal_seq = max(coalesce("
		 "journal_seq, 0), ?) WHERE instance_id = ? AND journal_epoch "
		 "= ?",
		 "storing the journal's cursor", cause, "IIt", last, in->id,
		 w->epoch)) < 0)
		return r;
	return dropped > 0 ? flood(inv, in, now, dropped, cause) : 0;
}

/* The stored view of an instance's watcher; v->have is 0 if none. */
int
watcher_get(
    struct inventory *inv, int64_t id, struct watcher_view *v, char **cause)
{
	sqlite3_stmt *st;
	int r;

	memset(v, 0, sizeof *v);
	if ((r = db_prepare(inv, &st,
		 "SELECT t, state, pid, current, error, generation, plan, "
		 "skew FROM watcher_state WHERE instance_id = ?",
		 "cannot read the watcher's state", cause, "I", id)) != 0)
		return r;
	if ((r = sqlite3_step(st)) == SQLITE_ROW) {
		v->have = 1;
		v->t = sqlite3_column_int64(st, 0);
		snprintf(v->state, sizeof v->state, "%s",
		    (const char *)sqlite3_column_text(st, 1));
		v->pid = sqlite3_column_int64(st, 2);
		v->current = sqlite3_column_int(st, 3);
		v->error = db_text(st, 4);
		v->generation = sqlite3_column_int64(st, 5);
		v->plan = db_text(st, 6);
		v->skew = sqlite3_column_int64(st, 7);
	}
	r = db_finish(inv, st, r, "cannot read the watcher's state", cause);
	return r < 0 ? r : 0;
}

void
watcher_view_free(struct watcher_view *v)
{
	free(v->error);
	free(v->plan);
	memset(v, 0, sizeof *v);
}

/*
 * The ids the journal shows fired (firing or anything after it): they are
 * never armed again. Free with watcher_ids_free.
 */
int
watcher_fired_ids(
    struct inventory *inv, int64_t id, char ***ids, size_t *n, char **cause)
{
	sqlite3_stmt *st;
	int rc, r;

	*ids = NULL;
	*n = 0;
	if ((r = db_prepare(inv, &st,
		 "SELECT DISTINCT id FROM journal WHERE instance_id = ? AND "
		 "id IS NOT NULL AND NOT rejected AND event IN ('firing', "
		 "'before_stop', "
		 "'skipped', 'stopping', 'stop_result', 'stopped', "
		 "'stop_retry', 'stop_failed', 'local_due') ORDER BY id",
		 "cannot read the journal", cause, "I", id)) != 0)
		return r;
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		*ids = xreallocarray(*ids, *n + 1, sizeof **ids);
		(*ids)[(*n)++] = db_text(st, 0);
	}
	r = db_finish(inv, st, rc, "cannot read the journal", cause);
	return r < 0 ? r : 0;
}

void
watcher_ids_free(char **ids, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		free(ids[i]);
	free(ids);
}

/* The alerts of an instance not cleared yet, oldest first. */
int
watcher_alerts(struct inventory *inv, int64_t id, struct watcher_alert **out,
    size_t *n, char **cause)
{
	sqlite3_stmt *st;
	struct watcher_alert *a;
	int rc, r;

	*out = NULL;
	*n = 0;
	if ((r = db_prepare(inv, &st,
		 "SELECT t, kind, deadline, detail FROM alert WHERE "
		 "instance_id = ? AND cleared_at IS NULL ORDER BY t, id",
		 "cannot read the alerts", cause, "I", id)) != 0)
		return r;
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		*out = xreallocarray(*out, *n + 1, sizeof **out);
		a = &(*out)[(*n)++];
		a->t = sqlite3_column_int64(st, 0);
		snprintf(a->kind, sizeof a->kind, "%s",
		    (const char *)sqlite3_column_text(st, 1));
		a->deadline = db_text(st, 2);
		a->detail = db_text(st, 3);
	}
	r = db_finish(inv, st, rc, "cannot read the alerts", cause);
	return r < 0 ? r : 0;
}

void
watcher_alerts_free(struct watcher_alert *a, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++) {
		free(a[i].deadline);
		free(a[i].detail);
	}
	free(a);
}

/* Clear an instance's alerts: the user wrote it a new plan. */
int
watcher_alerts_clear(
    struct inventory *inv, int64_t id, int64_t now, char **cause)
{
	int r = db_exec(inv,
	    "UPDATE alert SET cleared_at = ? WHERE instance_id = ? AND "
	    "cleared_at IS NULL",
	    "clearing alerts", cause, "II", now, id);

	return r < 0 ? r : 0;
}

/* "2026-12-02 02:00 CST" in local time. Caller frees. */
char *
watcher_local_time(int64_t t)
{
	char buf[64];
	time_t tt = (time_t)t;
	struct tm tm;

	if (localtime_r(&tt, &tm) == NULL ||
	    strftime(buf, sizeof buf, "%Y-%m-%d %H:%M %Z", &tm) == 0)
		return xstrdup("?");
	return xstrdup(buf);
}

/* "02:00:03", the instance's clock shown in local time. Caller frees. */
char *
watcher_clock(int64_t t)
{
	char buf[32];
	time_t tt = (time_t)t;
	struct tm tm;

	if (localtime_r(&tt, &tm) == NULL ||
	    strftime(buf, sizeof buf, "%H:%M:%S", &tm) == 0)
		return xstrdup("?");
	return xstrdup(buf);
}

/* An autostop policy of a plan in one line. Caller frees. */
char *
watcher_autostop_line(json_t *as)
{
	json_t *w, *v;
	char *idle, *s, *extra = xstrdup(""), *tmp, wait[32] = "";
	size_t i;

	json_array_foreach(json_object_get(as, "wait_for"), i, v)
	{
		if (json_is_string(v) && strlen(wait) + 10 < sizeof wait)
			snprintf(wait + strlen(wait),
			    sizeof wait - strlen(wait), "%s%s",
			    *wait ? "," : "", json_string_value(v));
	}
	w = json_object_get(as, "stalled_s");
	if (json_integer_value(w) > 0) {
		idle = timeparse_duration(json_integer_value(w));
		xasprintf(&tmp, "%s, stalled %s", extra, idle);
		free(idle);
		free(extra);
		extra = tmp;
	}
	w = json_object_get(as, "max_runtime_s");
	if (json_integer_value(w) > 0) {
		idle = timeparse_duration(json_integer_value(w));
		xasprintf(&tmp, "%s, max runtime %s", extra, idle);
		free(idle);
		free(extra);
		extra = tmp;
	}
	idle = timeparse_duration(
	    json_integer_value(json_object_get(as, "idle_s")));
	xasprintf(&s, "autostop %s: idle %s (GPUs below %lld%%, wait for %s%s)",
	    json_string_value(json_object_get(as, "id")) != NULL
		? json_string_value(json_object_get(as, "id"))
		: "?",
	    idle,
	    (long long)json_integer_value(json_object_get(as, "gpu_below")),
	    *wait ? wait : "none", extra);
	free(idle);
	free(extra);
	return s;
}

/*
 * The watcher of an instance as `status --json` and `shutdown ls --json`
 * show it: {state, pid, generation, skew_s, checked_at, deadlines,
 * autostop, alerts, held}, from the stored view v; held: the stops held
 * for their pull (stophold_json).
 */
json_t *
watcher_json(struct inventory *inv, int64_t id, const struct watcher_view *v)
{
	json_t *o = json_object(), *plan, *dl = json_array(), *d, *al;
	struct watcher_alert *a = NULL;
	size_t i, n = 0;
	char *cause = NULL, *s;

	plan = v->plan != NULL ? json_loads(v->plan, 0, NULL) : NULL;
	json_object_set_new(
	    o, "state", json_string(v->have ? v->state : "unknown"));
	json_object_set_new(
	    o, "pid", v->pid > 0 ? json_integer(v->pid) : json_null());
	json_object_set_new(
	    o, "error", v->error != NULL ? json_string(v->error) : json_null());
	json_object_set_new(o, "generation", json_integer(v->generation));
	json_object_set_new(o, "skew_s", json_integer(v->skew));
	s = instance_format_time(v->t);
	json_object_set_new(
	    o, "checked_at", v->have ? json_string(s) : json_null());
	free(s);
	json_array_foreach(json_object_get(plan, "deadlines"), i, d)
	{
		json_t *c = json_deep_copy(d);
		int64_t at = json_integer_value(json_object_get(d, "at"));
		const char *did = json_string_value(json_object_get(d, "id"));
		int64_t fired =
		    did != NULL ? watcher_fired_at(inv, id, did) : 0;
		s = instance_format_time(at - v->skew);
		json_object_set_new(c, "at_local", json_string(s));
		free(s);
		s = instance_format_time(at);
		json_object_set_new(c, "at_instance", json_string(s));
		free(s);
		s = instance_format_time(fired);
		json_object_set_new(
		    c, "fired_at", fired != 0 ? json_string(s) : json_null());
		free(s);
		s = did != NULL ? watcher_skipped(inv, id, did) : NULL;
		json_object_set_new(
		    c, "skipped", s != NULL ? json_string(s) : json_null());
		free(s);
		json_object_set_new(c, "unless_busy",
		    json_boolean(
			json_is_true(json_object_get(d, "unless_busy"))));
		json_array_append_new(dl, c);
	}
	json_object_set_new(o, "deadlines", dl);
	d = json_object_get(plan, "autostop");
	json_object_set_new(
	    o, "autostop", json_is_object(d) ? json_deep_copy(d) : json_null());
	d = json_object_get(plan, "stop");
	json_object_set_new(
	    o, "stop", json_is_object(d) ? json_deep_copy(d) : json_null());
	al = json_array();
	if (watcher_alerts(inv, id, &a, &n, &cause) != 0)
		free(cause);
	for (i = 0; i < n; i++) {
		/* The journal entry it came from, or gpufleet's words. */
		json_t *entry = a[i].detail != NULL
		    ? json_loads(a[i].detail, 0, NULL)
		    : NULL;
		if (entry == NULL)
			entry = a[i].detail != NULL ? json_string(a[i].detail)
						    : json_null();
		s = instance_format_time(a[i].t);
		json_array_append_new(al,
		    json_pack("{s:s, s:s, s:o, s:o}", "kind", a[i].kind, "time",
			s, "id",
			a[i].deadline != NULL ? json_string(a[i].deadline)
					      : json_null(),
			"entry", entry));
		free(s);
	}
	watcher_alerts_free(a, n);
	json_object_set_new(o, "alerts", al);
	json_object_set_new(o, "stopping", stopping_json(inv, id));
	json_object_set_new(o, "held", stophold_json(inv, id));
	json_decref(plan);
	return o;
}

/*
 * The stops gpufleet requested of instance id that no evidence confirmed
 * yet ("stopping (unconfirmed)": billed as running): [{id, cause, kind,
 * since, detail}].
 */
static json_t *
stopping_json(struct inventory *inv, int64_t id)
{
	struct stoprequest *v;
	json_t *arr = json_array();
	char *cause = NULL, *s;
	size_t n, i;

	if (stoprequest_list(inv, id, 0, &v, &n, &cause) != 0) {
		free(cause);
		return arr;
	}
	for (i = 0; i < n; i++) {
		if (strcmp(v[i].state, "requested") != 0)
			continue;
		s = instance_format_time(v[i].requested_at);
		json_array_append_new(arr,
		    json_pack("{s:s, s:s, s:s, s:s, s:o}", "id", v[i].fire_id,
			"cause", v[i].cause, "kind", v[i].kind, "since", s,
			"detail",
			v[i].detail != NULL ? json_string(v[i].detail)
					    : json_null()));
		free(s);
	}
	stoprequest_list_free(v, n);
	return arr;
}

/*
 * The instance whose plan (as last read) or journal holds deadline or
 * policy id: *name (caller frees), or NULL when none does.
 */
int
watcher_find_id(
    struct inventory *inv, const char *id, char **name, char **cause)
{
	sqlite3_stmt *st;
	char *needle;
	int r;

	*name = NULL;
	xasprintf(&needle, "\"id\":\"%s\"", id);
	r = db_prepare(inv, &st,
	    "SELECT i.name FROM instance i WHERE i.released_at IS NULL AND "
	    "(EXISTS (SELECT 1 FROM watcher_state w WHERE w.instance_id = "
	    "i.id AND instr(w.plan, ?) > 0) OR EXISTS (SELECT 1 FROM journal "
	    "j WHERE j.instance_id = i.id AND j.id = ?)) ORDER BY i.name "
	    "LIMIT 1",
	    "cannot read the plans", cause, "tt", needle, id);
	if (r == 0) {
		if ((r = sqlite3_step(st)) == SQLITE_ROW)
			*name = db_text(st, 0);
		r = db_finish(inv, st, r, "cannot read the plans", cause);
	}
	free(needle);
	return r < 0 ? r : 0;
}

/* When the journal shows id fired (its firing entry), or 0. */
int64_t
watcher_fired_at(struct inventory *inv, int64_t instance, const char *id)
{
	sqlite3_stmt *st;
	int64_t t = 0;

	if (db_prepare(inv, &st,
		"SELECT min(t) FROM journal WHERE instance_id = ? AND id = ? "
		"AND NOT rejected AND event IN ('firing', 'local_due', "
		"'stopping')",
		NULL, NULL, "It", instance, id) != 0)
		return 0;
	if (sqlite3_step(st) == SQLITE_ROW)
		t = sqlite3_column_int64(st, 0);
	sqlite3_finalize(st);
	return t;
}

/*
 * Why the journal shows id skipped (an unless_busy deadline found busy, a
 * failed before-stop, ...), or NULL when it was not. Caller frees.
 */
char *
watcher_skipped(struct inventory *inv, int64_t instance, const char *id)
{
	sqlite3_stmt *st;
	json_t *o = NULL;
	char *entry = NULL, *reason = NULL;
	const char *r;

	if (db_prepare(inv, &st,
		"SELECT entry FROM journal WHERE instance_id = ? AND id = ? "
		"AND NOT rejected AND event = 'skipped' ORDER BY t LIMIT 1",
		NULL, NULL, "It", instance, id) != 0)
		return NULL;
	if (sqlite3_step(st) == SQLITE_ROW)
		entry = db_text(st, 0);
	sqlite3_finalize(st);
	if (entry != NULL)
		o = json_loads(entry, 0, NULL);
	r = json_string_value(json_object_get(o, "reason"));
	if (entry != NULL)
		reason = xstrdup(r != NULL ? r : "skipped");
	json_decref(o);
	free(entry);
	return reason;
}

/* A new id: prefix, '-' and 8 random hex digits (d-3f2a9c01). */
void
watcher_new_id(char *buf, size_t len, char prefix)
{
	unsigned char r[4];
	size_t got = 0;
	ssize_t n;

	while (got < sizeof r) {
		if ((n = getrandom(r + got, sizeof r - got, 0)) <= 0)
			fatal_f("getrandom failed");
		got += (size_t)n;
	}
	snprintf(
	    buf, len, "%c-%02x%02x%02x%02x", prefix, r[0], r[1], r[2], r[3]);
}

/*
 * Flag in only (n entries, parallel to list) the instances with a stored
 * plan (generation above 0), in one query; returns how many. A database
 * error flags none.
 */
size_t
watcher_planned(struct inventory *inv, const struct instance *list, size_t n,
    unsigned char *only)
{
	sqlite3_stmt *st;
	char *cause = NULL;
	int64_t id;
	size_t i, count = 0;
	int r;

	memset(only, 0, n);
	if (db_prepare(inv, &st,
		"SELECT instance_id FROM watcher_state WHERE generation > 0",
		"cannot read the watchers' state", &cause, "") != 0) {
		free(cause);
		return 0;
	}
	while ((r = sqlite3_step(st)) == SQLITE_ROW) {
		id = sqlite3_column_int64(st, 0);
		for (i = 0; i < n; i++) {
			if (list[i].id == id && !only[i]) {
				only[i] = 1;
				count++;
			}
		}
	}
	if (db_finish(inv, st, r, "cannot read the watchers' state", &cause) <
	    0) {
		free(cause);
		memset(only, 0, n);
		return 0;
	}
	return count;
}

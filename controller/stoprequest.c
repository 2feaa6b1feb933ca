/* Stops gpufleet caused: requested, confirmed by evidence, or failed. */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "actionlog.h"
#include "armed.h"
#include "db.h"
#include "ledger.h"
#include "log.h"
#include "notify.h"
#include "stopmethod.h"
#include "stoprequest.h"
#include "timeparse.h"
#include "xmalloc.h"

static int confirm(struct inventory *, const struct instance *,
    const struct stoprequest *, const char *, int64_t, int64_t, int64_t,
    char **);
static int restart_at(struct inventory *, const struct instance *,
    const struct stoprequest *, size_t, int64_t, int64_t, int64_t *, char **);
static int unconfirm(struct inventory *, const struct instance *,
    const struct stoprequest *, int64_t, char **);
static int move(struct inventory *, const struct instance *,
    const struct stoprequest *, int64_t, char **);
static int booked_at(struct inventory *, const struct instance *,
    const struct stoprequest *, int64_t *, char **);
static int undo_attempt(struct inventory *, int64_t, const char *, char **);
static void note_of(const struct stoprequest *, char *, size_t);
static int64_t effect_at(const struct stoprequest *, int64_t);
static int record(struct inventory *, const struct instance *, int64_t,
    const char *, const char *, const char *, char **);

/* What happened to a stop, for `gpufleet events` (action_log). */
static int
record(struct inventory *inv, const struct instance *in, int64_t now,
    const char *kind, const char *fire_id, const char *why, char **cause)
{
	json_t *names = json_pack("[s]", in->name);
	int r = actionlog_add(
	    inv, now, kind, fire_id, names, why, NULL, NULL, cause);

	json_decref(names);
	return r;
}

/* An alert of instance at t: kind, the fire id it is about, the detail. */
int
stoprequest_alert(struct inventory *inv, int64_t instance, int64_t t,
    const char *kind, const char *fire_id, const char *detail, char **cause)
{
	int r = db_exec(inv,
	    "INSERT INTO alert (instance_id, t, kind, deadline, detail) "
	    "VALUES (?, ?, ?, ?, ?)",
	    "recording an alert", cause, "IIttt", instance, t, kind, fire_id,
	    detail);

	return r < 0 ? r : 0;
}

/*
 * A stop of fire_id (cause: shutdown, schedule, autostop, job, local; kind:
 * stop or release, as it was armed)
 * requested at t, read at now. Once per fire id; a new attempt (the
 * watcher's retry, another `stopping`) of one not confirmed moves it to
 * its own time, since only the last attempt can have stopped it; one
 * confirmed before its `stopping` entries were read moves to the last
 * of them (move). Not an attempt (`stopped`, read after the fact): only
 * a stop not known yet. A new one is never before the latest the
 * ledger knows it ran or stopped: a stop claimed before what the books
 * already know did not stop the instance then.
 */
int
stoprequest_open(struct inventory *inv, const struct instance *in,
    const char *fire_id, const char *why, const char *kind, int64_t t,
    int attempt, char **cause)
{
	struct stoprequest *v;
	size_t n, i;
	int r;

	if ((r = stoprequest_list(inv, in->id, 1, &v, &n, cause)) != 0)
		return r;
	for (i = 0; i < n && strcmp(v[i].fire_id, fire_id) != 0; i++)
		;
	if (i < n && !attempt)
		; /* known: its time is its attempts' */
	else if (i == n)
		r = db_exec(inv,
		    "INSERT INTO stop_request (instance_id, fire_id, cause, "
		    "kind, requested_at, state) VALUES (?1, ?2, ?3, ?4, "
		    "max(?5, coalesce((SELECT max(t) FROM ledger WHERE "
		    "instance_id = ?1 AND state <> 'unknown'), ?5)), "
		    "'requested')",
		    "recording a stop", cause, "ItttI", in->id, fire_id, why,
		    kind, t);
	else if (strcmp(v[i].state, "confirmed") != 0 && t > v[i].requested_at)
		r = db_exec(inv,
		    "UPDATE stop_request SET requested_at = ?, state = "
		    "'requested', ok_at = NULL, seen_at = NULL, decided_at = "
		    "NULL, detail = NULL WHERE instance_id = ? AND fire_id = ?",
		    "recording a stop", cause, "IIt", t, in->id, fire_id);
	else if (strcmp(v[i].state, "confirmed") == 0)
		r = move(inv, in, &v[i], t, cause);
	stoprequest_list_free(v, n);
	return r < 0 ? r : 0;
}

/*
 * When confirmed stop q of in is booked: *t. Returns 1, 0 when it is not
 * in the ledger, or a negative status.
 */
static int
booked_at(struct inventory *inv, const struct instance *in,
    const struct stoprequest *q, int64_t *t, char **cause)
{
	sqlite3_stmt *st;
	char note[96];
	int r, rc;

	note_of(q, note, sizeof note);
	if ((r = db_prepare(inv, &st,
		 "SELECT t FROM ledger WHERE instance_id = ? AND note = ? AND "
		 "source = 'performed' ORDER BY t LIMIT 1",
		 "reading the ledger", cause, "It", in->id, note)) != 0)
		return r;
	if ((rc = sqlite3_step(st)) == SQLITE_ROW)
		*t = sqlite3_column_int64(st, 0);
	if ((r = db_finish(inv, st, rc, "reading the ledger", cause)) < 0)
		return r;
	return rc == SQLITE_ROW;
}

/*
 * Confirmed stop q of in, and an attempt of it at t read after the
 * confirmation: the books move to t when t is the attempt that can have
 * stopped it. It is not when the same container answered after t
 * (seen_at), nor when the instance ran again or answered between the
 * booking and t (an attempt after the machine came back is no attempt
 * of this stop). A later attempt moves it forward (the watcher ran the
 * command again, so the machine was up); an earlier one only a booking
 * that was no attempt's time (the unreachable sighting a due deadline
 * was taken as requested at: requested_at is decided_at). Returns 0 or
 * a negative status.
 */
static int
move(struct inventory *inv, const struct instance *in,
    const struct stoprequest *q, int64_t t, char **cause)
{
	sqlite3_stmt *st;
	char note[96];
	int64_t booked = 0, ran = 1;
	int r, rc;

	if (t <= q->seen_at || t == q->requested_at ||
	    (t < q->requested_at && q->requested_at != q->decided_at))
		return 0;
	note_of(q, note, sizeof note);
	if ((r = booked_at(inv, in, q, &booked, cause)) != 1)
		return r;
	if ((r = db_prepare(inv, &st,
		 "SELECT (SELECT count(*) FROM ledger WHERE instance_id = ?1 "
		 "AND state = 'running' AND t > min(?2, ?3) AND t <= max(?2, "
		 "?3)) + (SELECT count(*) FROM sample_host WHERE instance_id "
		 "= ?1 AND t >= min(?2, ?3) AND t <= max(?2, ?3) AND t <> ?2)",
		 "reading the ledger", cause, "III", in->id, booked, t)) != 0)
		return r;
	if ((rc = sqlite3_step(st)) == SQLITE_ROW)
		ran = sqlite3_column_int64(st, 0);
	if ((r = db_finish(inv, st, rc, "reading the ledger", cause)) < 0)
		return r;
	if (ran > 0)
		return 0;
	/* Unreachable sightings in between were of a stopped instance. */
	if ((r = db_exec(inv,
		 "UPDATE stop_request SET requested_at = ? WHERE instance_id = "
		 "? AND fire_id = ?",
		 "recording a stop", cause, "IIt", t, in->id, q->fire_id)) <
		0 ||
	    (r = db_exec(inv,
		 "DELETE FROM ledger WHERE instance_id = ? AND state = "
		 "'unknown' AND source = 'observed' AND t >= ? AND t <= ?",
		 "writing the ledger", cause, "III", in->id, t,
		 booked > t ? booked : t)) < 0)
		return r;
	return db_exec(inv,
	    "UPDATE ledger SET t = ? WHERE instance_id = ? AND note = ? AND "
	    "source = 'performed'",
	    "writing the ledger", cause, "IIt", t, in->id, note);
}

/*
 * A confirmed stop of fire_id booked at an attempt read after the
 * confirmation (move), and that attempt did not stop the instance (its
 * command failed, the watcher gave the stop up): the booking goes back
 * to the latest the truth can be, when the stop was decided or the
 * instance ran again if sooner. Returns 0 or a negative status.
 */
static int
undo_attempt(
    struct inventory *inv, int64_t instance, const char *fire_id, char **cause)
{
	int r;

	if ((r = db_exec(inv,
		 "UPDATE stop_request SET requested_at = min(decided_at, "
		 "coalesce((SELECT min(t) FROM ledger WHERE instance_id = ?1 "
		 "AND state = 'running' AND t > requested_at), decided_at)) "
		 "WHERE instance_id = ?1 AND fire_id = ?2 AND state = "
		 "'confirmed' AND EXISTS (SELECT 1 FROM ledger WHERE "
		 "instance_id = ?1 AND source = 'performed' AND note = 'stop ' "
		 "|| fire_id || ' (' || cause || ')' AND t = requested_at)",
		 "recording a stop", cause, "It", instance, fire_id)) < 0 ||
	    sqlite3_changes(inv->db) == 0)
		return r < 0 ? r : 0;
	r = db_exec(inv,
	    "UPDATE ledger SET t = (SELECT requested_at FROM stop_request "
	    "WHERE instance_id = ?1 AND fire_id = ?2) WHERE instance_id = ?1 "
	    "AND source = 'performed' AND note = (SELECT 'stop ' || fire_id "
	    "|| ' (' || cause || ')' FROM stop_request WHERE instance_id = ?1 "
	    "AND fire_id = ?2)",
	    "writing the ledger", cause, "It", instance, fire_id);
	return r < 0 ? r : 0;
}

/*
 * The stop command of fire_id ended: ok (exit 0; the machine should go
 * down now) or not, with what it said (detail); one that failed was no
 * stop of a confirmed booking made at its attempt (undo_attempt).
 */
int
stoprequest_result(struct inventory *inv, int64_t instance, const char *fire_id,
    int ok, const char *detail, int64_t now, char **cause)
{
	int r = 0;

	if (!ok && (r = undo_attempt(inv, instance, fire_id, cause)) < 0)
		return r;
	if (ok)
		r = db_exec(inv,
		    "UPDATE stop_request SET ok_at = coalesce(ok_at, ?) WHERE "
		    "instance_id = ? AND fire_id = ? AND state = 'requested'",
		    "recording a stop", cause, "IIt", now, instance, fire_id);
	else
		r = db_exec(inv,
		    "UPDATE stop_request SET detail = ? WHERE instance_id = ? "
		    "AND fire_id = ? AND state = 'requested'",
		    "recording a stop", cause, "tIt", detail, instance,
		    fire_id);
	return r < 0 ? r : 0;
}

/*
 * When confirmed stop q took effect, as far as gpufleet knows: when it
 * was requested. Once the same container answered after that (seen_at),
 * that request had not stopped it, and what did and when is not known
 * (a retry not read yet, another stop): then the latest the truth can
 * be, latest (the unreachable sighting that confirms it, the start of
 * the container after it), so that the time in between bills.
 */
static int64_t
effect_at(const struct stoprequest *q, int64_t latest)
{
	if (q->seen_at == 0 || q->seen_at < q->requested_at)
		return q->requested_at;
	return latest > q->seen_at ? latest : q->seen_at;
}

/* The ledger note of a confirmed stop: "stop FIRE_ID (CAUSE)". */
static void
note_of(const struct stoprequest *q, char *note, size_t size)
{
	snprintf(note, size, "stop %s (%s)", q->fire_id, q->cause);
}

/*
 * Stop fire_id, requested and not confirmed, failed (why): it never
 * enters the books. One confirmed by evidence stays: a claim does not
 * undo it, only a booking at an attempt the stop's end says did not
 * work moves to the latest the truth can be (undo_attempt). Returns 1
 * when it failed now, 0 when it did not.
 */
int
stoprequest_fail(struct inventory *inv, const struct instance *in,
    const char *fire_id, const char *why, int64_t now, char **cause)
{
	struct stoprequest *v;
	char note[96];
	size_t n, i;
	int r = 0;

	if ((r = stoprequest_list(inv, in->id, 1, &v, &n, cause)) != 0)
		return r;
	for (i = 0; i < n && strcmp(v[i].fire_id, fire_id) != 0; i++)
		;
	if (i < n && strcmp(v[i].state, "confirmed") == 0)
		r = undo_attempt(inv, in->id, fire_id, cause);
	if (i == n || strcmp(v[i].state, "requested") != 0)
		goto out;
	note_of(&v[i], note, sizeof note);
	if ((r = db_exec(inv,
		 "UPDATE stop_request SET state = 'failed', decided_at = ?, "
		 "confirmed_by = NULL, detail = ? WHERE instance_id = ? AND "
		 "fire_id = ?",
		 "recording a stop", cause, "ItIt", now, why, in->id,
		 fire_id)) < 0 ||
	    (r = db_exec(inv,
		 "DELETE FROM ledger WHERE instance_id = ? AND note = ? AND "
		 "source = 'performed'",
		 "writing the ledger", cause, "It", in->id, note)) < 0 ||
	    (r = record(inv, in, now, "stop_failed", fire_id, why, cause)) != 0)
		goto out;
	r = 1;
out:
	stoprequest_list_free(v, n);
	return r;
}

/* Queue the notification that stop fire_id of in failed (why). */
int
stoprequest_notify_failed(struct inventory *inv, const struct instance *in,
    const char *fire_id, const char *why, int64_t now, char **cause)
{
	char *what, *key, *next;
	int r;

	xasprintf(&what, "did not stop (%s): %s", fire_id, why);
	xasprintf(&key, "stop_failed:%lld:%s", (long long)in->id, fire_id);
	xasprintf(&next, "gpufleet status %s", in->name);
	r = notifyqueue_add(
	    inv, NOTIFY_STOP_FAILED, in->name, now, what, next, key, cause);
	free(what);
	free(key);
	free(next);
	return r;
}

/*
 * When a container that started at container_start, seen at now, says
 * the stops pending before it (of v, n of them) took effect: *at. One
 * restart ended them all and those confirmed since the instance last
 * ran, and which of them stopped it is not known, so all are booked at
 * the latest (effect_at, a confirmed one's booking), before that
 * container. Returns 0 or a negative status.
 */
static int
restart_at(struct inventory *inv, const struct instance *in,
    const struct stoprequest *v, size_t n, int64_t container_start, int64_t now,
    int64_t *at, char **cause)
{
	int64_t t;
	size_t i;
	int r;

	*at = 0;
	for (i = 0; i < n; i++) {
		if (v[i].requested_at > now ||
		    container_start <= v[i].requested_at)
			continue;
		if (strcmp(v[i].state, "requested") == 0)
			t = effect_at(&v[i], container_start - 1);
		else if ((r = booked_at(inv, in, &v[i], &t, cause)) < 0)
			return r;
		else if (r == 0)
			continue;
		if (t > *at)
			*at = t;
	}
	if (*at > container_start - 1)
		*at = container_start - 1;
	return 0;
}

/*
 * Book confirmed stop q of in (by: unreachable, restart) at t, decided
 * at now.
 */
static int
confirm(struct inventory *inv, const struct instance *in,
    const struct stoprequest *q, const char *by, int64_t now, int64_t t,
    int64_t before, char **cause)
{
	int release = strcmp(q->kind, "release") == 0;
	char note[96], *when, *why;
	sqlite3_stmt *st;
	int r, rc;

	/*
	 * Never before a contact that found it up (before the container
	 * that followed, or before now): it ran then, whatever a journal
	 * line on a wrong clock says.
	 */
	if ((r = db_prepare(inv, &st,
		 "SELECT max(t) FROM sample_host WHERE instance_id = ? AND t < "
		 "?",
		 "reading the samples", cause, "II", in->id, before)) != 0)
		return r;
	if ((rc = sqlite3_step(st)) == SQLITE_ROW &&
	    sqlite3_column_int64(st, 0) > t)
		t = sqlite3_column_int64(st, 0);
	if ((r = db_finish(inv, st, rc, "reading the samples", cause)) < 0)
		return r;
	note_of(q, note, sizeof note);
	if ((r = ledger_add(inv, in->id, t, release ? "released" : "stopped",
		 "performed", note, cause)) != 0 ||
	    (r = db_exec(inv,
		 "DELETE FROM ledger WHERE instance_id = ? AND state = "
		 "'unknown' AND source = 'observed' AND t >= ?",
		 "writing the ledger", cause, "II", in->id, t)) < 0 ||
	    (r = db_exec(inv,
		 "DELETE FROM incident WHERE instance_id = ? AND kind IN "
		 "('outage_start', 'outage_end') AND t >= ?",
		 "writing the ledger", cause, "II", in->id, t)) < 0 ||
	    (r = db_exec(inv,
		 "UPDATE alert SET cleared_at = ? WHERE instance_id = ? AND "
		 "deadline = ? AND kind = 'stop_failed' AND cleared_at IS "
		 "NULL",
		 "clearing an alert", cause, "IIt", now, in->id, q->fire_id)) <
		0 ||
	    (r = db_exec(inv,
		 "UPDATE stop_request SET state = 'confirmed', decided_at = "
		 "?, confirmed_by = ? WHERE instance_id = ? AND fire_id = ?",
		 "recording a stop", cause, "ItIt", now, by, in->id,
		 q->fire_id)) < 0)
		return r;
	/*
	 * Out of service only on firm evidence (its command exited 0):
	 * a release is never contacted again, so one unreachable sighting
	 * (a blip) must not end it; settle does once it stays unreachable.
	 */
	if (release && q->ok_at != 0 &&
	    (r = inventory_release(inv, in->id, t, cause)) != 0)
		return r;
	when = instance_format_time(t);
	xasprintf(&why, "%s at %s: %s", release ? "released" : "stopped", when,
	    strcmp(by, "unreachable") == 0 ? "unreachable after it"
					   : "a container started after it");
	r = record(inv, in, now, "stop_confirmed", q->fire_id, why, cause);
	free(when);
	free(why);
	return r;
}

/*
 * A stop confirmed because the instance was unreachable, contradicted:
 * it answers with the container it had before the request. The stop
 * leaves the books and waits for evidence again.
 */
static int
unconfirm(struct inventory *inv, const struct instance *in,
    const struct stoprequest *q, int64_t now, char **cause)
{
	char note[96];
	int r;

	note_of(q, note, sizeof note);
	if ((r = db_exec(inv,
		 "DELETE FROM ledger WHERE instance_id = ? AND note = ? AND "
		 "source = 'performed'",
		 "writing the ledger", cause, "It", in->id, note)) < 0 ||
	    (r = db_exec(inv,
		 "UPDATE stop_request SET state = 'requested', decided_at = "
		 "NULL, confirmed_by = NULL WHERE instance_id = ? AND "
		 "fire_id = ?",
		 "recording a stop", cause, "It", in->id, q->fire_id)) < 0)
		return r;
	warn_msg("%s answers with the container it had before stop %s: not "
		 "stopped after all",
	    in->name, q->fire_id);
	return record(inv, in, now, "stop_unconfirmed", q->fire_id,
	    "it answers with the container it had before the stop", cause);
}

/*
 * What a contact at now says of the stops of in: reachable with the
 * container started at container_start (0: unknown), or not; since: when
 * its current running stretch began (the deadlines that could stop it).
 * Unreachable: each pending stop is confirmed, and a deadline due by now
 * of which nothing was read is taken as requested now (the latest it can
 * have been). Reachable with a later container: confirmed (it went down
 * and came back). Reachable with the same container stop_confirm seconds
 * after the stop command exited 0: failed. A stop confirmed by
 * unreachability that the same container contradicts is taken back.
 */
int
stoprequest_settle(struct inventory *inv, const struct instance *in,
    int64_t now, int64_t container_start, int reachable, int64_t since,
    char **cause)
{
	const struct config *cf = inv->config;
	int64_t confirm_s = cf != NULL ? cf->status_stop_confirm : 180;
	struct stoprequest *v = NULL;
	struct armed a;
	char **due = NULL, *why, *dur, note[96];
	int64_t at;
	size_t n = 0, ndue = 0, i;
	int r;

	if (!reachable) {
		if ((r = armed_due(
			 inv, in->id, since, now, &due, &ndue, cause)) != 0)
			return r;
		for (i = 0; i < ndue && r == 0; i++) {
			if ((r = armed_find(inv, in->id, due[i], &a, cause)) ==
			    1)
				r = stoprequest_open(inv, in, due[i],
				    armed_cause(due[i], &a),
				    a.release ? "release" : "stop", now, 1,
				    cause);
			free(due[i]);
		}
		for (; i < ndue; i++)
			free(due[i]);
		free(due);
		if (r < 0)
			return r;
		/*
		 * A stop gpufleet's own timer failed (still up after the
		 * command exited 0) in this running stretch is not over
		 * while the watcher has not given it up: it runs the
		 * command again stop_confirm_s after the last run
		 * (agent/WATCH.md), and that run, not read yet, may be
		 * what took the instance away. Requested again, now.
		 */
		if ((r = db_exec(inv,
			 "UPDATE stop_request SET state = 'requested', "
			 "requested_at = ?1, ok_at = NULL, seen_at = NULL, "
			 "decided_at = NULL, confirmed_by = NULL WHERE "
			 "instance_id = ?2 AND state = 'failed' AND "
			 "ok_at IS NOT NULL AND requested_at >= ?3 AND "
			 "requested_at <= ?1 AND NOT EXISTS (SELECT 1 FROM "
			 "journal j WHERE j.instance_id = ?2 AND j.id = "
			 "stop_request.fire_id AND j.event = 'stop_failed')",
			 "recording a stop", cause, "III", now, in->id,
			 since)) < 0)
			return r;
	}
	if ((r = stoprequest_list(inv, in->id, 0, &v, &n, cause)) != 0)
		return r;
	for (i = 0; i < n && r == 0; i++) {
		const struct stoprequest *q = &v[i];
		int same =
		    container_start != 0 && container_start <= q->requested_at;
		if (q->requested_at > now)
			continue;
		if (strcmp(q->state, "requested") == 0 && !reachable)
			r = confirm(inv, in, q, "unreachable", now,
			    effect_at(q, now), now, cause);
		else if (strcmp(q->state, "requested") == 0 &&
		    container_start > q->requested_at) {
			if ((r = restart_at(inv, in, v, n, container_start, now,
				 &at, cause)) == 0)
				r = confirm(inv, in, q, "restart", now, at,
				    container_start, cause);
		} else if (strcmp(q->state, "requested") == 0 && same &&
		    q->ok_at != 0 && now - q->ok_at >= confirm_s) {
			dur = timeparse_duration(now - q->ok_at);
			xasprintf(&why,
			    "still up %s after the stop command exited 0", dur);
			free(dur);
			if ((r = stoprequest_fail(
				 inv, in, q->fire_id, why, now, cause)) == 1 &&
			    (r = stoprequest_alert(inv, in->id, now,
				 "stop_failed", q->fire_id, why, cause)) == 0)
				r = stoprequest_notify_failed(
				    inv, in, q->fire_id, why, now, cause);
			free(why);
		} else if (strcmp(q->state, "confirmed") == 0 && reachable &&
		    same && strcmp(q->by, "unreachable") == 0)
			r = unconfirm(inv, in, q, now, cause);
		else if (strcmp(q->state, "confirmed") == 0 && !reachable &&
		    strcmp(q->kind, "release") == 0 && in->released_at == 0 &&
		    now - q->decided_at >= confirm_s)
			/* Released, and still gone: out of service. */
			r = inventory_release(inv, in->id, now, cause);
		else if (strcmp(q->state, "confirmed") == 0 && reachable &&
		    !same && container_start != 0) {
			/*
			 * It answers from a container that started after
			 * the stop: the stop was before that container.
			 */
			note_of(q, note, sizeof note);
			r = db_exec(inv,
			    "UPDATE ledger SET t = ? WHERE instance_id = ? "
			    "AND note = ? AND source = 'performed' AND t >= ?",
			    "writing the ledger", cause, "IItI",
			    container_start - 1, in->id, note, container_start);
		}
		/* Up after it, in the same container: not stopped yet. */
		if (r == 0 && reachable && container_start <= q->requested_at &&
		    strcmp(q->state, "failed") != 0)
			r = db_exec(inv,
			    "UPDATE stop_request SET seen_at = ? WHERE "
			    "instance_id = ? AND fire_id = ?",
			    "recording a stop", cause, "IIt", now, in->id,
			    q->fire_id);
		r = r < 0 ? r : 0;
	}
	stoprequest_list_free(v, n);
	return r;
}

/*
 * The stop requests of instance, oldest first: all of them, or (all 0)
 * those a contact may still decide: requested, or confirmed by
 * unreachability (decided) since the instance last ran. Free with
 * stoprequest_list_free.
 */
int
stoprequest_list(struct inventory *inv, int64_t instance, int all,
    struct stoprequest **out, size_t *n, char **cause)
{
	struct stoprequest *q;
	sqlite3_stmt *st;
	int r, rc;

	*out = NULL;
	*n = 0;
	if ((r = db_prepare(inv, &st,
		 "SELECT fire_id, cause, kind, requested_at, state, "
		 "coalesce(ok_at, 0), coalesce(decided_at, 0), "
		 "coalesce(confirmed_by, ''), detail, coalesce(seen_at, 0) "
		 "FROM stop_request WHERE "
		 "instance_id = ?1 AND (?2 OR state = 'requested' OR (state = "
		 "'confirmed' AND confirmed_by = 'unreachable' AND "
		 "decided_at >= (SELECT max(t) FROM ledger WHERE "
		 "instance_id = ?1 AND state = 'running'))) ORDER BY "
		 "requested_at, fire_id",
		 "reading the stops", cause, "Ii", instance, all)) != 0)
		return r;
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		*out = xreallocarray(*out, *n + 1, sizeof **out);
		q = &(*out)[(*n)++];
		memset(q, 0, sizeof *q);
		q->fire_id = db_text(st, 0);
		snprintf(q->cause, sizeof q->cause, "%s",
		    (const char *)sqlite3_column_text(st, 1));
		snprintf(q->kind, sizeof q->kind, "%s",
		    (const char *)sqlite3_column_text(st, 2));
		q->requested_at = sqlite3_column_int64(st, 3);
		snprintf(q->state, sizeof q->state, "%s",
		    (const char *)sqlite3_column_text(st, 4));
		q->ok_at = sqlite3_column_int64(st, 5);
		q->decided_at = sqlite3_column_int64(st, 6);
		snprintf(q->by, sizeof q->by, "%s",
		    (const char *)sqlite3_column_text(st, 7));
		q->detail = db_text(st, 8);
		q->seen_at = sqlite3_column_int64(st, 9);
	}
	r = db_finish(inv, st, rc, "reading the stops", cause);
	if (r < 0) {
		stoprequest_list_free(*out, *n);
		*out = NULL;
		*n = 0;
		return r;
	}
	return 0;
}

void
stoprequest_list_free(struct stoprequest *v, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++) {
		free(v[i].fire_id);
		free(v[i].detail);
	}
	free(v);
}

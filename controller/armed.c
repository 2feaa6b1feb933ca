/* The ids gpufleet armed on each instance (table armed). */

#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "armed.h"
#include "db.h"
#include "xmalloc.h"

static int put(struct inventory *, int64_t, const char *, const char *, int64_t,
    int64_t, int, int, int, char **);

/*
 * Arm id (again: a new time, back in the plan) on instance; intent: the
 * plan is about to be written, and may not be (removed now, unless it is
 * armed already).
 */
static int
put(struct inventory *inv, int64_t instance, const char *id, const char *kind,
    int64_t now, int64_t at, int local, int release, int intent, char **cause)
{
	if (intent)
		return db_exec(inv,
		    "INSERT OR IGNORE INTO armed (instance_id, id, kind, "
		    "written_at, at, local, release, removed_at) VALUES (?, ?, "
		    "?, ?, ?, ?, ?, ?)",
		    "recording what was armed", cause, "IttINiiI", instance, id,
		    kind, now, at, local, release, now);
	return db_exec(inv,
	    "INSERT INTO armed (instance_id, id, kind, written_at, at, local, "
	    "release) VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (instance_id, "
	    "id) DO UPDATE SET at = excluded.at, local = excluded.local, "
	    "release = excluded.release, removed_at = NULL",
	    "recording what was armed", cause, "IttINii", instance, id, kind,
	    now, at, local, release);
}

/*
 * The plan (JSON, as `plan set` took it) was written on instance at now
 * with the clock skew (instance - controller): its deadlines and autostop
 * policy are armed; the ones the plan no longer has were removed now.
 * With intent, it is about to be written: its new ids are known (an
 * instance that journals them is not lying, even if this process dies
 * before it hears the write went through), not yet armed.
 */
int
armed_plan(struct inventory *inv, int64_t instance, const char *plan,
    int64_t skew, int64_t now, int intent, char **cause)
{
	json_t *o = json_loads(plan, 0, NULL), *d, *ids = json_array();
	const char *id, *action, *kind;
	char *list = NULL;
	size_t i;
	int r = 0, release;

	kind = json_string_value(
	    json_object_get(json_object_get(o, "stop"), "kind"));
	release = kind != NULL && strcmp(kind, "release") == 0;

	json_array_foreach(json_object_get(o, "deadlines"), i, d)
	{
		id = json_string_value(json_object_get(d, "id"));
		action = json_string_value(json_object_get(d, "action"));
		if (id == NULL)
			continue;
		json_array_append_new(ids, json_string(id));
		if ((r = put(inv, instance, id, "deadline", now,
			 json_integer_value(json_object_get(d, "at")) - skew,
			 action != NULL && strcmp(action, "local") == 0,
			 release, intent, cause)) != 0)
			goto out;
	}
	id = json_string_value(
	    json_object_get(json_object_get(o, "autostop"), "id"));
	if (id != NULL) {
		json_array_append_new(ids, json_string(id));
		if ((r = put(inv, instance, id, "autostop", now, 0, 0, release,
			 intent, cause)) != 0)
			goto out;
	}
	if (intent)
		goto out;
	list = json_dumps(ids, JSON_COMPACT);
	r = db_exec(inv,
	    "UPDATE armed SET removed_at = ? WHERE instance_id = ? AND kind "
	    "<> 'job' AND removed_at IS NULL AND id NOT IN (SELECT value "
	    "FROM json_each(?))",
	    "recording what was armed", cause, "IIt", now, instance, list);
	r = r < 0 ? r : 0;
out:
	free(list);
	json_decref(ids);
	json_decref(o);
	return r;
}

/*
 * A job gpufleet started on instance at started with --then, by its fire
 * id; local: its stop runs on the laptop; release: its method releases.
 */
int
armed_job(struct inventory *inv, int64_t instance, const char *fire_id,
    int64_t started, int local, int release, char **cause)
{
	return put(inv, instance, fire_id, "job", started, 0, local, release, 0,
	    cause);
}

/*
 * Whether fire_id (a deadline's id, ID@CONTAINER_START of an autostop
 * policy, a job's fire id) is one gpufleet armed on instance: 1 with *a
 * filled, 0 when it never did, or a negative status with *cause.
 */
int
armed_find(struct inventory *inv, int64_t instance, const char *fire_id,
    struct armed *a, char **cause)
{
	const char *at = strchr(fire_id, '@');
	sqlite3_stmt *st;
	char *id;
	int r;

	memset(a, 0, sizeof *a);
	id = at != NULL ? xstrndup(fire_id, at - fire_id) : xstrdup(fire_id);
	r = db_prepare(inv, &st,
	    "SELECT kind, written_at, at, local, removed_at, release FROM "
	    "armed WHERE "
	    "instance_id = ? AND id = ? AND (kind = 'autostop') = ?",
	    "reading what was armed", cause, "Iti", instance, id, at != NULL);
	if (r != 0) {
		free(id);
		return r;
	}
	if ((r = sqlite3_step(st)) == SQLITE_ROW) {
		snprintf(a->kind, sizeof a->kind, "%s",
		    (const char *)sqlite3_column_text(st, 0));
		a->written_at = sqlite3_column_int64(st, 1);
		a->at = sqlite3_column_int64(st, 2);
		a->local = sqlite3_column_int(st, 3);
		a->removed_at = sqlite3_column_int64(st, 4);
		a->release = sqlite3_column_int(st, 5);
	}
	r = db_finish(inv, st, r, "reading what was armed", cause);
	free(id);
	return r;
}

/*
 * The deadlines of instance that were due by now in the plan gpufleet
 * wrote (not local, not removed before their time, at or after since:
 * the running stretch they could stop) and of which nothing is known:
 * no stop request, no stop, skip or failure journaled. Caller frees
 * *ids (each, then the array).
 */
int
armed_due(struct inventory *inv, int64_t instance, int64_t since, int64_t now,
    char ***ids, size_t *n, char **cause)
{
	sqlite3_stmt *st;
	int r, rc;

	*ids = NULL;
	*n = 0;
	if ((r = db_prepare(inv, &st,
		 "SELECT a.id FROM armed a WHERE a.instance_id = ?1 AND "
		 "a.kind = 'deadline' AND NOT a.local AND a.at <= ?2 AND "
		 "a.at >= ?3 AND (a.removed_at IS NULL OR a.removed_at > "
		 "a.at) AND NOT EXISTS (SELECT 1 FROM stop_request s WHERE "
		 "s.instance_id = ?1 AND s.fire_id = a.id) AND NOT EXISTS "
		 "(SELECT 1 FROM journal j WHERE j.instance_id = ?1 AND "
		 "j.id = a.id AND NOT j.rejected AND j.event IN ('stopping', "
		 "'stopped', "
		 "'skipped', 'stop_failed', 'local_due', 'cancelled')) "
		 "ORDER BY a.at",
		 "reading what was armed", cause, "III", instance, now,
		 since)) != 0)
		return r;
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		*ids = xreallocarray(*ids, *n + 1, sizeof **ids);
		(*ids)[(*n)++] = db_text(st, 0);
	}
	r = db_finish(inv, st, rc, "reading what was armed", cause);
	if (r < 0) {
		while (*n > 0)
			free((*ids)[--*n]);
		free(*ids);
		*ids = NULL;
		return r;
	}
	return 0;
}

/*
 * The cause of a stop of fire_id armed as a: job, autostop, local,
 * schedule (an s- deadline), guard (g-) or shutdown (any other).
 */
const char *
armed_cause(const char *fire_id, const struct armed *a)
{
	if (strcmp(a->kind, "job") == 0 || strcmp(a->kind, "autostop") == 0)
		return a->kind;
	if (a->local)
		return "local";
	if (strncmp(fire_id, "s-", 2) == 0)
		return "schedule";
	return strncmp(fire_id, "g-", 2) == 0 ? "guard" : "shutdown";
}

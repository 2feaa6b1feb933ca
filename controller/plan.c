/* The watcher's plan: read back, changed, written anew. */

#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "plan.h"
#include "report.h"
#include "xmalloc.h"

static int int_member(
    json_t *, const char *, int64_t, int64_t, int64_t, int64_t *);
static json_t *deadline_copy(json_t *);
static json_t *deadline_json(const struct plan_deadline *);
static json_t *autostop_json(const struct plan_autostop *);
static int is_fired(const char *, const char *const *, size_t);
static json_t *keep_deadlines(json_t *, const char *const *, size_t,
    const struct plan_change *, struct plan_result *);
static int sync_keeps(const struct plan_change *, const char *);
static int sync_at_near(int64_t, int64_t);
static int64_t sync_at(json_t *, const struct plan_deadline *);
static void sync_add(json_t *, json_t *, const char *const *, size_t,
    const struct plan_change *, struct plan_result *);
static json_t *sync_set(const char *);

/* An integer member in [lo, hi], or def when absent; -1 when invalid. */
static int
int_member(json_t *o, const char *key, int64_t lo, int64_t hi, int64_t def,
    int64_t *out)
{
	json_t *v = json_object_get(o, key);

	if (v == NULL) {
		*out = def;
		return def >= lo ? 0 : -1;
	}
	if (!json_is_integer(v) || json_integer_value(v) < lo ||
	    json_integer_value(v) > hi)
		return -1;
	*out = json_integer_value(v);
	return 0;
}

/*
 * A deadline of the read-back plan rebuilt from its known members, or
 * NULL when it is not a valid one (the plan came from the instance).
 */
static json_t *
deadline_copy(json_t *o)
{
	struct plan_deadline d;
	json_t *id, *action, *before, *must, *busy, *hold, *out;
	int64_t warn, timeout;

	memset(&d, 0, sizeof d);
	id = json_object_get(o, "id");
	action = json_object_get(o, "action");
	before = json_object_get(o, "before_stop");
	must = json_object_get(o, "before_must_succeed");
	busy = json_object_get(o, "unless_busy");
	hold = json_object_get(o, "hold");
	if (!json_is_object(o) || !json_is_string(id) ||
	    strlen(json_string_value(id)) >= sizeof d.id ||
	    !report_check_id(json_string_value(id)) ||
	    int_member(o, "at", 0, 1LL << 40, -1, &d.at) != 0 ||
	    int_member(o, "warn_minutes", 0, 1440, 0, &warn) != 0 ||
	    int_member(o, "before_stop_timeout_s", 1, 86400, 600, &timeout) !=
		0 ||
	    !json_is_string(action) ||
	    (before != NULL && !json_is_null(before) &&
		!json_is_string(before)) ||
	    (must != NULL && !json_is_boolean(must)) ||
	    (busy != NULL && !json_is_boolean(busy)) ||
	    (hold != NULL &&
		(!json_is_object(hold) ||
		    int_member(hold, "wait", 1, 30 * 86400, 7200,
			&d.hold_wait_s) != 0)))
		return NULL;
	if (strcmp(json_string_value(action), "stop") != 0 &&
	    strcmp(json_string_value(action), "local") != 0)
		return NULL;
	memcpy(d.id, json_string_value(id), strlen(json_string_value(id)) + 1);
	d.local = strcmp(json_string_value(action), "local") == 0;
	d.warn_minutes = (int)warn;
	d.before_stop =
	    json_is_string(before) ? json_string_value(before) : NULL;
	d.before_stop_timeout_s = timeout;
	d.before_must_succeed = json_is_true(must);
	d.unless_busy = json_is_true(busy);
	d.hold = hold != NULL;
	d.hold_must = json_is_true(json_object_get(hold, "must"));
	out = deadline_json(&d);
	return out;
}

/*
 * A deadline as the plan holds it; unless_busy and hold only when set,
 * so that a plan without them reads as an agent without the fields
 * expects.
 */
static json_t *
deadline_json(const struct plan_deadline *d)
{
	json_t *o;

	o = json_pack("{s:s, s:I, s:s, s:i, s:o, s:I, s:b}", "id", d->id, "at",
	    (json_int_t)d->at, "action", d->local ? "local" : "stop",
	    "warn_minutes", d->warn_minutes, "before_stop",
	    d->before_stop != NULL ? json_string(d->before_stop) : json_null(),
	    "before_stop_timeout_s", (json_int_t)d->before_stop_timeout_s,
	    "before_must_succeed", d->before_must_succeed);
	if (o != NULL && d->unless_busy)
		json_object_set_new(o, "unless_busy", json_true());
	if (o != NULL && d->hold)
		json_object_set_new(o, "hold",
		    json_pack("{s:s, s:I, s:b}", "for", "pull", "wait",
			(json_int_t)d->hold_wait_s, "must", d->hold_must));
	return o;
}

/* An autostop policy as the plan holds it. */
static json_t *
autostop_json(const struct plan_autostop *a)
{
	json_t *w = json_array();

	if (a->wait_sessions)
		json_array_append_new(w, json_string("sessions"));
	if (a->wait_jobs)
		json_array_append_new(w, json_string("jobs"));
	return json_pack("{s:s, s:I, s:i, s:I, s:o, s:I, s:I, s:o, s:o}", "id",
	    a->id, "idle_s", (json_int_t)a->idle_s, "gpu_below", a->gpu_below,
	    "gpu_mem_mib", (json_int_t)a->gpu_mem_mib, "wait_for", w,
	    "stalled_s", (json_int_t)a->stalled_s, "max_runtime_s",
	    (json_int_t)a->max_runtime_s, "progress",
	    a->progress != NULL ? json_string(a->progress) : json_null(),
	    "nvidia_smi",
	    a->nvidia_smi != NULL ? json_string(a->nvidia_smi) : json_null());
}

static int
is_fired(const char *id, const char *const *fired, size_t nfired)
{
	size_t i;

	for (i = 0; i < nfired; i++) {
		if (strcmp(id, fired[i]) == 0)
			return 1;
	}
	return 0;
}

/* The read-back deadlines that stay: valid, not fired, not cancelled. */
static json_t *
keep_deadlines(json_t *old, const char *const *fired, size_t nfired,
    const struct plan_change *c, struct plan_result *res)
{
	json_t *out = json_array(), *d, *copy;
	const char *id;
	size_t i;

	json_array_foreach(old, i, d)
	{
		if ((copy = deadline_copy(d)) == NULL) {
			res->dropped++;
			continue;
		}
		id = json_string_value(json_object_get(copy, "id"));
		if (is_fired(id, fired, nfired)) {
			res->dropped++;
			json_decref(copy);
			continue;
		}
		if (c->sync.on && plan_is_sync_id(id) &&
		    (c->kind != PLAN_CANCEL_ID ||
			strcmp(id, c->cancel_id) != 0)) {
			if (sync_keeps(c, id)) {
				res->synced++;
				json_array_append_new(out, copy);
			} else
				json_decref(copy);
			continue;
		}
		if (c->kind == PLAN_CANCEL_ALL ||
		    (c->kind == PLAN_CANCEL_ID &&
			strcmp(id, c->cancel_id) == 0)) {
			res->removed++;
			json_decref(copy);
			continue;
		}
		res->kept++;
		json_array_append_new(out, copy);
	}
	return out;
}

/* Whether id is a schedule's deadline: s-TAG-UNIXTIME. */
int
plan_is_sync_id(const char *id)
{
	return strncmp(id, "s-", 2) == 0;
}

/*
 * Whether the read-back schedule deadline id stays through the sync: its
 * occurrence has come (the watcher may be firing it) and its schedule
 * still applies here.
 */
static int
sync_keeps(const struct plan_change *c, const char *id)
{
	const char *tag = id + 2, *dash = strchr(tag, '-');
	char *end;
	long long t;
	size_t i;

	if (dash == NULL)
		return 0;
	t = strtoll(dash + 1, &end, 10);
	if (*end != '\0' || end == dash + 1 || t > c->now)
		return 0;
	for (i = 0; i < c->sync.ntags; i++) {
		if (strlen(c->sync.tags[i]) == (size_t)(dash - tag) &&
		    strncmp(c->sync.tags[i], tag, (size_t)(dash - tag)) == 0)
			return 1;
	}
	return 0;
}

/*
 * Whether two times of one schedule deadline are the same to the sync:
 * at most PLAN_SYNC_AT_TOLERANCE_S apart.
 */
static int
sync_at_near(int64_t a, int64_t b)
{
	return a - b <= PLAN_SYNC_AT_TOLERANCE_S &&
	    b - a <= PLAN_SYNC_AT_TOLERANCE_S;
}

/*
 * The at to write for wanted deadline w: the read-back one's (in old, the
 * read-back deadlines) when it is near w's, else w's.
 */
static int64_t
sync_at(json_t *old, const struct plan_deadline *w)
{
	json_t *d, *id, *at;
	size_t i;

	json_array_foreach(old, i, d)
	{
		id = json_object_get(d, "id");
		at = json_object_get(d, "at");
		if (json_is_string(id) && json_is_integer(at) &&
		    strcmp(json_string_value(id), w->id) == 0 &&
		    sync_at_near(json_integer_value(at), w->at))
			return json_integer_value(at);
	}
	return w->at;
}

/*
 * Append the wanted schedule deadlines that fit, soonest first; old (the
 * read-back deadlines) gives the at of one that barely moved.
 */
static void
sync_add(json_t *deadlines, json_t *old, const char *const *fired,
    size_t nfired, const struct plan_change *c, struct plan_result *res)
{
	struct plan_deadline w;
	json_t *d;
	size_t i, j;

	for (i = 0; i < c->sync.nwant; i++) {
		w = c->sync.want[i];
		w.at = sync_at(old, &w);
		if (is_fired(w.id, fired, nfired) ||
		    (c->kind == PLAN_CANCEL_ID &&
			strcmp(w.id, c->cancel_id) == 0))
			continue;
		json_array_foreach(deadlines, j, d)
		{
			if (strcmp(json_string_value(json_object_get(d, "id")),
				w.id) == 0)
				break;
		}
		if (j < json_array_size(deadlines))
			continue;
		if (json_array_size(deadlines) >= PLAN_MAX_DEADLINES) {
			res->sync_cut++;
			continue;
		}
		json_array_append_new(deadlines, deadline_json(&w));
		res->synced++;
	}
}

/*
 * The schedule deadlines of a plan (compact JSON or NULL), as an object
 * from id to the deadline as plan_build would write it.
 */
static json_t *
sync_set(const char *plan)
{
	json_t *o = plan != NULL ? json_loads(plan, 0, NULL) : NULL;
	json_t *set = json_object(), *d, *copy;
	const char *id;
	size_t i;

	json_array_foreach(json_object_get(o, "deadlines"), i, d)
	{
		if ((copy = deadline_copy(d)) == NULL)
			continue;
		id = json_string_value(json_object_get(copy, "id"));
		if (plan_is_sync_id(id))
			json_object_set_new(set, id, copy);
		else
			json_decref(copy);
	}
	json_decref(o);
	return set;
}

/*
 * Whether two plans (compact JSON or NULL) hold the same s- deadlines:
 * the same ids, the same members, the at of each within
 * PLAN_SYNC_AT_TOLERANCE_S.
 */
int
plan_sync_equal(const char *a, const char *b)
{
	json_t *sa = sync_set(a), *sb = sync_set(b), *da, *db;
	const char *id;
	int eq = json_object_size(sa) == json_object_size(sb);

	json_object_foreach(sa, id, da)
	{
		if (!eq)
			break;
		db = json_object_get(sb, id);
		eq = db != NULL &&
		    sync_at_near(json_integer_value(json_object_get(da, "at")),
			json_integer_value(json_object_get(db, "at")));
		if (eq) {
			/* The rest must match exactly. */
			json_object_set(da, "at", json_object_get(db, "at"));
			eq = json_equal(da, db);
		}
	}
	json_decref(sa);
	json_decref(sb);
	return eq;
}

/*
 * Whether plans a and b (compact JSON, or NULL) give the same stop method
 * (their "stop" members).
 */
int
plan_stop_equal(const char *a, const char *b)
{
	json_t *ja = a != NULL ? json_loads(a, 0, NULL) : NULL;
	json_t *jb = b != NULL ? json_loads(b, 0, NULL) : NULL;
	json_t *sa = json_object_get(ja, "stop"),
	       *sb = json_object_get(jb, "stop");
	int eq = (sa == NULL || json_is_null(sa))
	    ? (sb == NULL || json_is_null(sb))
	    : json_equal(sa, sb);

	json_decref(ja);
	json_decref(jb);
	return eq;
}

/*
 * Whether plan p (compact JSON, or NULL) allows its stop, command, to
 * release the instance (`shutdown --yes` set it for a release method):
 * a write that keeps that method keeps the permission.
 */
int
plan_release_allowed(const char *p, const char *command)
{
	json_t *j = p != NULL ? json_loads(p, 0, NULL) : NULL;
	json_t *stop = json_object_get(j, "stop");
	const char *c = json_string_value(json_object_get(stop, "command"));
	int yes = command != NULL && c != NULL && strcmp(c, command) == 0 &&
	    json_is_true(json_object_get(stop, "allow_release"));

	json_decref(j);
	return yes;
}

/*
 * What plan p (compact JSON, or NULL) arms that a stop method serves:
 * *deadlines, less the nfired ids in fired (dropped when it is next
 * written), and *autostop (0 or 1).
 */
void
plan_armed(const char *p, const char *const *fired, size_t nfired,
    size_t *deadlines, int *autostop)
{
	json_t *j = p != NULL ? json_loads(p, 0, NULL) : NULL, *d;
	const char *id;
	size_t i, k;

	*deadlines = 0;
	json_array_foreach(json_object_get(j, "deadlines"), i, d)
	{
		id = json_string_value(json_object_get(d, "id"));
		for (k = 0; id != NULL && k < nfired; k++) {
			if (strcmp(fired[k], id) == 0)
				break;
		}
		*deadlines += id != NULL && k == nfired;
	}
	*autostop = json_is_object(json_object_get(j, "autostop"));
	json_decref(j);
}

/*
 * The plan to write over readback (the plan as read from the instance,
 * compact JSON, or NULL: none) at generation, with the deadlines in fired
 * left out and change applied. *out is compact JSON (caller frees).
 * Returns -1 with *cause when the change cannot be made (the plan is
 * full, the id is taken, the read-back plan is not an object).
 */
int
plan_build(const char *readback, int64_t generation, const char *const *fired,
    size_t nfired, const struct plan_change *c, char **out,
    struct plan_result *res, char **cause)
{
	json_t *old = NULL, *plan, *deadlines, *as = NULL, *stop, *d;
	size_t i;

	*out = NULL;
	memset(res, 0, sizeof *res);
	if (readback != NULL)
		old = json_loads(readback, 0, NULL);
	if (readback != NULL && !json_is_object(old)) {
		json_decref(old);
		*cause = xstrdup("the plan on the instance is not an object");
		return -1;
	}
	deadlines = keep_deadlines(
	    json_object_get(old, "deadlines"), fired, nfired, c, res);
	if (c->kind == PLAN_ADD) {
		json_array_foreach(deadlines, i, d)
		{
			if (strcmp(json_string_value(json_object_get(d, "id")),
				c->deadline.id) == 0) {
				xasprintf(cause, "deadline %s is already armed",
				    c->deadline.id);
				goto fail;
			}
		}
		if (json_array_size(deadlines) >= PLAN_MAX_DEADLINES) {
			/* The schedules' future deadlines are not in yet. */
			xasprintf(cause,
			    "%d deadlines are armed already (the most a "
			    "plan holds); cancel one first",
			    PLAN_MAX_DEADLINES);
			goto fail;
		}
		json_array_append_new(deadlines, deadline_json(&c->deadline));
	}
	if (c->sync.on)
		sync_add(deadlines, json_object_get(old, "deadlines"), fired,
		    nfired, c, res);
	res->had_autostop = json_is_object(json_object_get(old, "autostop"));
	if (c->kind == PLAN_AUTOSTOP)
		as = autostop_json(&c->autostop);
	else if (c->kind != PLAN_AUTOSTOP_OFF && res->had_autostop)
		as = json_deep_copy(json_object_get(old, "autostop"));
	stop = c->stop_command == NULL
	    ? json_null()
	    : json_pack("{s:s, s:s, s:b}", "command", c->stop_command, "kind",
		  c->stop_kind, "allow_release", c->allow_release);
	plan = json_pack("{s:i, s:I, s:I, s:s, s:s, s:i, s:i, s:o, s:o, s:o}",
	    "version", 1, "generation", (json_int_t)generation, "written_at",
	    (json_int_t)c->now, "written_by", c->written_by, "instance",
	    c->instance, "check_interval_s", c->check_interval_s,
	    "stop_confirm_s", c->stop_confirm_s, "stop", stop, "deadlines",
	    deadlines, "autostop", as != NULL ? as : json_null());
	json_decref(old);
	if (plan == NULL) {
		*cause = xstrdup("cannot build the plan (text that is not "
				 "UTF-8?)");
		return -1;
	}
	*out = json_dumps(plan, JSON_COMPACT);
	json_decref(plan);
	return 0;
fail:
	json_decref(deadlines);
	json_decref(old);
	return -1;
}

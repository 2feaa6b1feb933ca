/* Budget guards: the store, their evaluation from the ledger, their stops. */

#include <sys/wait.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "actionlog.h"
#include "child.h"
#include "cost.h"
#include "db.h"
#include "guard.h"
#include "log.h"
#include "notify.h"
#include "schedrun.h"
#include "selector.h"
#include "status.h"
#include "timeparse.h"
#include "xmalloc.h"

static int64_t day_start(int64_t);
static char *money_text(money_t, const char *);
static int cost_values(struct inventory *, const struct config *,
    const struct guard *, struct instance *, size_t, int64_t,
    struct guard_value *, char **);
static int runway_values(struct inventory *, const struct config *,
    const struct guard *, struct instance *, size_t, int64_t,
    struct guard_value *, char **);
static int fired(struct inventory *, int64_t, struct guard_value *, char **);
static int evaluate_one(struct inventory *, const struct config *,
    const struct guard *, int64_t, int, struct guard_action *, char **);
static int evaluate(struct inventory *, const struct config *, int64_t, int,
    struct guard_action **, size_t *, char **);
static int claim(struct inventory *, const struct guard *, struct guard_value *,
    size_t, int64_t, struct guard_action *, char **);
static void action_clear(struct guard_action *);
static int notify(struct inventory *, const struct guard *,
    const struct guard_action *, int64_t, char **);
static int runner_set(struct inventory *, int64_t, char **);
static int take_over(
    struct inventory *, struct guard_action *, int64_t, int64_t, char **);
static int resume(
    struct inventory *, int, struct guard_action **, size_t *, char **);
static int running(int64_t);
static json_t *stop_result(
    const struct guard_action *, const char *, int, const char *);
static json_t *stop_result(
    const struct guard_action *, const char *, int, const char *);

/*
 * Store a new guard (g->id and g->created_at are set). -GF_EUSAGE when
 * the name is taken.
 */
int
guard_add(struct inventory *inv, struct guard *g, char **cause)
{
	char cost[24];
	int r;

	/* As text, so that a cap of 0 is not NULL; the column's INTEGER
	 * affinity stores it as the number. */
	snprintf(cost, sizeof cost, "%lld", (long long)g->max_cost);
	r = db_exec(inv,
	    "INSERT INTO guard (name, selector, max_cost, per, min_runway_s, "
	    "action, created_at) SELECT ?, ?, ?, ?, ?, ?, ? WHERE NOT EXISTS "
	    "(SELECT 1 FROM guard WHERE name = ?1)",
	    "adding a guard", cause, "ttttNtI", g->name, g->selector,
	    g->has_cost ? cost : NULL, g->has_cost ? g->per : NULL,
	    g->has_cost ? 0 : g->min_runway_s,
	    g->shutdown ? "shutdown" : "warn", g->created_at);
	if (r < 0)
		return r;
	if (sqlite3_changes(inv->db) == 0) {
		xasprintf(cause, "a guard named '%s' exists", g->name);
		return -GF_EUSAGE;
	}
	g->id = sqlite3_last_insert_rowid(inv->db);
	return 0;
}

/*
 * Every guard by name, each with when it last fired. Caller frees *out
 * with guard_list_free.
 */
int
guard_list(struct inventory *inv, struct guard **out, size_t *n, char **cause)
{
	sqlite3_stmt *st;
	struct guard *g;
	int rc, r;

	*out = NULL;
	*n = 0;
	if ((r = db_prepare(inv, &st,
		 "SELECT id, name, selector, max_cost, per, min_runway_s, "
		 "action, created_at, (SELECT max(t) FROM guard_fire WHERE "
		 "guard_id = guard.id) FROM guard ORDER BY name",
		 "cannot read the guards", cause, "")) != 0)
		return r;
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		*out = xreallocarray(*out, *n + 1, sizeof **out);
		g = &(*out)[(*n)++];
		memset(g, 0, sizeof *g);
		g->id = sqlite3_column_int64(st, 0);
		g->name = db_text(st, 1);
		g->selector = db_text(st, 2);
		g->has_cost = sqlite3_column_type(st, 3) != SQLITE_NULL;
		g->max_cost = sqlite3_column_int64(st, 3);
		g->per = db_text(st, 4);
		g->min_runway_s = sqlite3_column_int64(st, 5);
		g->shutdown = strcmp((const char *)sqlite3_column_text(st, 6),
				  "shutdown") == 0;
		g->created_at = sqlite3_column_int64(st, 7);
		g->last_fired = sqlite3_column_int64(st, 8);
	}
	r = db_finish(inv, st, rc, "cannot read the guards", cause);
	return r < 0 ? r : 0;
}

/* Remove the guard name (and its firings). -GF_EUSAGE when there is none. */
int
guard_remove(struct inventory *inv, const char *name, char **cause)
{
	int r;

	r = db_exec(inv, "DELETE FROM guard WHERE name = ?", "removing a guard",
	    cause, "t", name);
	if (r < 0)
		return r;
	if (sqlite3_changes(inv->db) == 0) {
		xasprintf(cause, "no guard named '%s'", name);
		return -GF_EUSAGE;
	}
	return 0;
}

void
guard_clear(struct guard *g)
{
	free(g->name);
	free(g->selector);
	free(g->per);
	memset(g, 0, sizeof *g);
}

void
guard_list_free(struct guard *v, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		guard_clear(&v[i]);
	free(v);
}

/* The rule as a user reads it: "max-cost 10.00/day". Caller frees. */
char *
guard_rule(const struct guard *g)
{
	char *s, *m;

	if (!g->has_cost) {
		m = timeparse_duration(g->min_runway_s);
		xasprintf(&s, "min-runway %s", m);
	} else {
		m = billing_format_exact(g->max_cost);
		xasprintf(&s, "max-cost %s%s%s", m, g->per != NULL ? "/" : "",
		    g->per != NULL ? g->per : "");
	}
	free(m);
	return s;
}

/* Local midnight starting t's day. */
static int64_t
day_start(int64_t t)
{
	time_t tt = (time_t)t;
	struct tm tm;

	localtime_r(&tt, &tm);
	tm.tm_hour = tm.tm_min = tm.tm_sec = 0;
	tm.tm_isdst = -1;
	return (int64_t)mktime(&tm);
}

/* "12.40 CNY", exact to the minor unit. Caller frees. */
static char *
money_text(money_t m, const char *currency)
{
	char *a = billing_format_exact(m), *s;

	xasprintf(&s, "%s %s", a, currency);
	free(a);
	return s;
}

/* The cost of each of the n instances in the guard's window, against it. */
static int
cost_values(struct inventory *inv, const struct config *cf,
    const struct guard *g, struct instance *list, size_t n, int64_t now,
    struct guard_value *v, char **cause)
{
	struct cost_report rep;
	const struct ledger_cost *c;
	const char *when = "since added";
	char period[16], *a, *lim;
	time_t tt = (time_t)now;
	struct tm tm;
	int64_t from = 0;
	size_t i;
	int r = 0;

	localtime_r(&tt, &tm);
	snprintf(period, sizeof period, "all");
	if (g->per != NULL && strcmp(g->per, "day") == 0) {
		from = day_start(now);
		strftime(period, sizeof period, "%Y-%m-%d", &tm);
		when = "today";
	} else if (g->per != NULL) {
		from = cost_month_start(now, 0);
		strftime(period, sizeof period, "%Y-%m", &tm);
		when = "this month";
	}
	lim = billing_format_exact(g->max_cost);
	for (i = 0; i < n; i++) {
		/* One at a time: an instance that cannot be costed (a price
		 * stored before the ceiling, the database busy) is that
		 * instance's value, not every guard's failure. */
		r = cost_by_instance(
		    inv, cf, &list[i], 1, from, now, now, &rep, cause);
		c = &rep.rows[0];
		if (r != 0) {
			xasprintf(&v[i].value, "cannot cost: %s", *cause);
			free(*cause);
			*cause = NULL;
		} else if (c->priced) {
			a = money_text(c->amount, c->rule.currency);
			xasprintf(&v[i].value, "%s %s", a, when);
			xasprintf(
			    &v[i].why, "cost %s %s passed %s", a, when, lim);
			v[i].hit = c->amount > g->max_cost;
			free(a);
		} else
			v[i].value = xstrdup("(no price)");
		v[i].period = r == 0 ? xstrdup(period) : NULL;
		cost_report_free(&rep);
	}
	free(lim);
	return 0;
}

/*
 * The balance runway of each instance's provider against the guard; one
 * whose provider has no balance stated is never hit.
 */
static int
runway_values(struct inventory *inv, const struct config *cf,
    const struct guard *g, struct instance *list, size_t n, int64_t now,
    struct guard_value *v, char **cause)
{
	struct provider_info *pv = NULL, *p;
	struct instance *all = NULL;
	size_t np = 0, nall = 0, i;
	char *a, *lim;
	int r;

	/* Released instances too: what they cost came off the balance. */
	if ((r = provider_list(inv, &pv, &np, cause)) != 0 ||
	    (r = inventory_list(inv, 1, &all, &nall, cause)) != 0)
		goto out;
	for (i = 0; i < np; i++) {
		if (pv[i].has_balance &&
		    (r = cost_provider_runway(
			 inv, cf, all, nall, &pv[i], now, 1, cause)) != 0)
			goto out;
	}
	for (i = 0; i < n; i++) {
		p = (struct provider_info *)provider_find(
		    pv, np, list[i].provider);
		if (p == NULL || !p->has_balance) {
			v[i].value = xstrdup("(no balance)");
			continue;
		}
		a = p->runway < 0 ? xstrdup("never")
				  : timeparse_duration(p->runway);
		lim = timeparse_duration(g->min_runway_s);
		xasprintf(&v[i].value, "runway %s", a);
		xasprintf(&v[i].why, "%s balance runway %s is below %s",
		    p->name, a, lim);
		xasprintf(
		    &v[i].period, "runway@%lld", (long long)p->balance_at);
		v[i].hit = p->runway >= 0 && p->runway < g->min_runway_s;
		free(a);
		free(lim);
	}
out:
	provider_free(pv, np);
	instance_free_array(all, nall);
	return r;
}

/* Whether v already fired for guard_id in its period. */
static int
fired(struct inventory *inv, int64_t guard_id, struct guard_value *v,
    char **cause)
{
	sqlite3_stmt *st;
	int r;

	if ((r = db_prepare(inv, &st,
		 "SELECT 1 FROM guard_fire WHERE guard_id = ? AND "
		 "instance_id = ? AND period = ?",
		 "cannot read the guard firings", cause, "IIt", guard_id,
		 v->instance_id, v->period)) != 0)
		return r;
	r = db_finish(
	    inv, st, sqlite3_step(st), "cannot read the guard firings", cause);
	if (r < 0)
		return r;
	v->fired = r == 1;
	return 0;
}

/*
 * Every instance in service that g selects, with its value against g at
 * now and whether it fired in this period. Caller frees *out with
 * guard_values_free.
 */
int
guard_values(struct inventory *inv, const struct config *cf,
    const struct guard *g, int64_t now, struct guard_value **out, size_t *nout,
    char **cause)
{
	struct instance *list = NULL;
	struct selector *sel = NULL;
	struct guard_value *v;
	size_t n = 0, i, j;
	int r;

	*out = NULL;
	*nout = 0;
	if (selector_parse(g->selector, &sel, cause) != 0)
		return -GF_EUSAGE;
	if ((r = inventory_list(inv, 0, &list, &n, cause)) != 0)
		goto out;
	for (i = j = 0; i < n; i++) {
		if (selector_match(sel, &list[i]))
			list[j++] = list[i];
		else
			instance_clear(&list[i]);
	}
	n = j;
	v = xcalloc(n + 1, sizeof *v);
	for (i = 0; i < n; i++) {
		v[i].instance_id = list[i].id;
		v[i].instance = xstrdup(list[i].name);
	}
	*out = v;
	*nout = n;
	r = g->has_cost ? cost_values(inv, cf, g, list, n, now, v, cause)
			: runway_values(inv, cf, g, list, n, now, v, cause);
	for (i = 0; r == 0 && i < n; i++) {
		if (v[i].period != NULL)
			r = fired(inv, g->id, &v[i], cause);
	}
out:
	instance_free_array(list, n);
	selector_free(sel);
	return r;
}

void
guard_values_free(struct guard_value *v, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++) {
		free(v[i].instance);
		free(v[i].value);
		free(v[i].period);
		free(v[i].why);
	}
	free(v);
}

/*
 * Queue the notification of a firing (a balance runway guard's is a
 * low_balance, a cost guard's a guard), keyed by its action_log entry.
 */
static int
notify(struct inventory *inv, const struct guard *g,
    const struct guard_action *a, int64_t now, char **cause)
{
	char *what, *key;
	int r;

	xasprintf(&what, "guard %s %s: %s", g->name,
	    g->shutdown ? "is stopping" : "warns", a->why);
	xasprintf(&key, "action:%lld", (long long)a->log_id);
	r = notifyqueue_add(inv,
	    g->has_cost ? NOTIFY_GUARD : NOTIFY_LOW_BALANCE,
	    a->nnames == 1 ? a->names[0] : NULL, now, what,
	    g->has_cost ? "gpufleet cost" : "gpufleet guard ls", key, cause);
	free(what);
	free(key);
	return r;
}

/*
 * Claim the hits of g among v (those not fired yet) and log them as one
 * action (the caller holds the transaction); with inv NULL (a dry run)
 * only describe them. a->nnames is 0 when nothing was new.
 */
static int
claim(struct inventory *inv, const struct guard *g, struct guard_value *v,
    size_t n, int64_t now, struct guard_action *a, char **cause)
{
	json_t *names = json_array();
	char *why = NULL, *tmp;
	size_t i;
	int r = 0;

	memset(a, 0, sizeof a[0]);
	a->guard = xstrdup(g->name);
	a->shutdown = g->shutdown;
	for (i = 0; i < n; i++) {
		if (!v[i].hit || v[i].fired)
			continue;
		/* Claimed here: another evaluator (the daemon, guard check)
		 * may have fired it since v was read. */
		if (inv != NULL &&
		    (r = db_exec(inv,
			 "INSERT OR IGNORE INTO guard_fire (guard_id, "
			 "instance_id, period, t) VALUES (?, ?, ?, ?)",
			 "claiming a guard firing", cause, "IItI", g->id,
			 v[i].instance_id, v[i].period, now)) < 0)
			goto out;
		if (inv != NULL && sqlite3_changes(inv->db) == 0)
			continue;
		a->names =
		    xreallocarray(a->names, a->nnames + 1, sizeof *a->names);
		a->names[a->nnames++] = xstrdup(v[i].instance);
		json_array_append_new(names, json_string(v[i].instance));
		xasprintf(&tmp, "%s%s%s: %s", why != NULL ? why : "",
		    why != NULL ? "; " : "", v[i].instance, v[i].why);
		free(why);
		why = tmp;
	}
	a->why = why;
	why = NULL;
	r = 0;
	if (inv != NULL && a->nnames > 0)
		r = actionlog_add(inv, now,
		    g->shutdown ? "guard_shutdown" : "guard_warn", g->name,
		    names, a->why, NULL, &a->log_id, cause);
	if (r == 0 && inv != NULL && a->nnames > 0 && g->shutdown)
		r = runner_set(inv, a->log_id, cause);
	if (r == 0 && inv != NULL && a->nnames > 0)
		r = notify(inv, g, a, now, cause);
out:
	free(why);
	json_decref(names);
	return r < 0 ? r : 0;
}

/* Judge guard g at now and claim its new hits into *a (dry_run: none). */
static int
evaluate_one(struct inventory *inv, const struct config *cf,
    const struct guard *g, int64_t now, int dry_run, struct guard_action *a,
    char **cause)
{
	struct guard_value *v = NULL;
	size_t nv = 0;
	int r;

	memset(a, 0, sizeof *a);
	r = guard_values(inv, cf, g, now, &v, &nv, cause);
	if (r == 0 && !dry_run)
		r = inventory_begin(inv, cause);
	if (r == 0) {
		r = claim(dry_run ? NULL : inv, g, v, nv, now, a, cause);
		if (!dry_run && r == 0)
			r = inventory_commit(inv, cause);
		else if (!dry_run)
			inventory_rollback(inv);
	}
	guard_values_free(v, nv);
	return r;
}

/*
 * guard_evaluate, or with dry_run guard_preview. A guard that cannot be
 * judged stops no other: the first such error is returned, with every
 * action claimed (which the caller still runs).
 */
static int
evaluate(struct inventory *inv, const struct config *cf, int64_t now,
    int dry_run, struct guard_action **out, size_t *nout, char **cause)
{
	struct guard *gs = NULL;
	struct guard_action a;
	size_t ng = 0, i;
	char *why = NULL;
	int r, first = 0;

	*out = NULL;
	*nout = 0;
	if ((r = resume(inv, dry_run, out, nout, cause)) != 0 ||
	    (r = guard_list(inv, &gs, &ng, cause)) != 0)
		return r;
	for (i = 0; i < ng; i++) {
		if ((r = evaluate_one(
			 inv, cf, &gs[i], now, dry_run, &a, &why)) != 0) {
			if (first == 0) {
				first = r;
				xasprintf(
				    cause, "guard %s: %s", gs[i].name, why);
			}
			free(why);
			why = NULL;
		}
		if (r == 0 && a.nnames > 0) {
			*out = xreallocarray(*out, *nout + 1, sizeof **out);
			(*out)[(*nout)++] = a;
		} else
			action_clear(&a);
	}
	guard_list_free(gs, ng);
	return first;
}

/* Record this process as the runner of entry id's stop. */
static int
runner_set(struct inventory *inv, int64_t id, char **cause)
{
	pid_t self = getpid();
	int r;

	r = db_exec(inv,
	    "UPDATE action_log SET runner_pid = ?, runner_start = ? WHERE id "
	    "= ? AND result IS NULL",
	    "recording who runs a guard's stop", cause, "III", (int64_t)self,
	    schedrun_pid_start(self), id);
	return r < 0 ? r : 0;
}

/*
 * Whether the runner pid (started at start) still runs a stop: alive
 * with that start time, and not this process, which runs none while it
 * evaluates.
 */
static int
runner_live(int64_t pid, int64_t start)
{
	return pid > 0 && start != 0 && pid != (int64_t)getpid() &&
	    schedrun_pid_start((pid_t)pid) == start;
}

/* The pending stop of row st (id, name, instances, why) as an action. */
static void
pending_action(sqlite3_stmt *st, struct guard_action *a)
{
	json_t *arr = json_loads(
		   (const char *)sqlite3_column_text(st, 2), 0, NULL),
	       *v;
	size_t i;

	memset(a, 0, sizeof *a);
	a->log_id = sqlite3_column_int64(st, 0);
	a->guard = db_text(st, 1);
	a->why = db_text(st, 3);
	a->shutdown = a->resumed = 1;
	json_array_foreach(arr, i, v)
	{
		if (json_string_value(v) == NULL)
			continue;
		a->names =
		    xreallocarray(a->names, a->nnames + 1, sizeof *a->names);
		a->names[a->nnames++] = xstrdup(json_string_value(v));
	}
	json_decref(arr);
}

/*
 * Make this process the runner of a's stop, unless another evaluator
 * took it over since it was read with runner pid (started at start).
 * Returns 1 when taken, 0 when not, or -GF_x.
 */
static int
take_over(struct inventory *inv, struct guard_action *a, int64_t pid,
    int64_t start, char **cause)
{
	int r;

	r = db_exec(inv,
	    "UPDATE action_log SET runner_pid = ?, runner_start = ? WHERE id "
	    "= ? AND result IS NULL AND coalesce(runner_pid, 0) = ? AND "
	    "coalesce(runner_start, 0) = ?",
	    "taking over a guard's stop", cause, "IIIII", (int64_t)getpid(),
	    schedrun_pid_start(getpid()), a->log_id, pid, start);
	if (r < 0)
		return r;
	return sqlite3_changes(inv->db) > 0;
}

/*
 * Append to *out the guard_shutdown entries whose stop never finished
 * (result NULL), whose runner is gone and whose guard still exists, each
 * taken over by this process (with dry_run only described).
 */
static int
resume(struct inventory *inv, int dry_run, struct guard_action **out,
    size_t *nout, char **cause)
{
	struct guard_action *v = NULL;
	int64_t *owner = NULL;
	sqlite3_stmt *st;
	size_t n = 0, i;
	int rc, r;

	if ((r = db_prepare(inv, &st,
		 "SELECT a.id, a.name, a.instances, a.why, a.runner_pid, "
		 "a.runner_start FROM action_log a WHERE a.kind = "
		 "'guard_shutdown' AND a.result IS NULL AND EXISTS (SELECT 1 "
		 "FROM guard g WHERE g.name = a.name AND g.action = "
		 "'shutdown' AND g.created_at <= a.t) ORDER BY a.id",
		 "cannot read the pending guard stops", cause, "")) != 0)
		return r;
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		if (runner_live(sqlite3_column_int64(st, 4),
			sqlite3_column_int64(st, 5)) ||
		    running(sqlite3_column_int64(st, 0)))
			continue;
		v = xreallocarray(v, n + 1, sizeof *v);
		owner = xreallocarray(owner, 2 * (n + 1), sizeof *owner);
		owner[2 * n] = sqlite3_column_int64(st, 4);
		owner[2 * n + 1] = sqlite3_column_int64(st, 5);
		pending_action(st, &v[n++]);
	}
	r = db_finish(
	    inv, st, rc, "cannot read the pending guard stops", cause);
	for (i = 0; i < n; i++) {
		if (dry_run)
			v[i].log_id = 0; /* nothing claimed */
		if (r >= 0)
			r = dry_run ? 1
				    : take_over(inv, &v[i], owner[2 * i],
					  owner[2 * i + 1], cause);
		if (r > 0) {
			*out = xreallocarray(*out, *nout + 1, sizeof **out);
			(*out)[(*nout)++] = v[i];
		} else
			action_clear(&v[i]);
	}
	free(v);
	free(owner);
	return r < 0 ? r : 0;
}

int
guard_evaluate(struct inventory *inv, const struct config *cf, int64_t now,
    struct guard_action **out, size_t *nout, char **cause)
{
	return evaluate(inv, cf, now, 0, out, nout, cause);
}

int
guard_preview(struct inventory *inv, const struct config *cf, int64_t now,
    struct guard_action **out, size_t *nout, char **cause)
{
	return evaluate(inv, cf, now, 1, out, nout, cause);
}

static void
action_clear(struct guard_action *a)
{
	size_t i;

	for (i = 0; i < a->nnames; i++)
		free(a->names[i]);
	free(a->names);
	free(a->guard);
	free(a->why);
	memset(a, 0, sizeof *a);
}

void
guard_actions_free(struct guard_action *v, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		action_clear(&v[i]);
	free(v);
}

/* Read all of path. Caller frees. */
static char *
slurp(const char *path)
{
	char *s = NULL, buf[4096];
	size_t len = 0, got;
	FILE *fp;

	if ((fp = fopen(path, "r")) == NULL)
		return xstrdup("");
	while ((got = fread(buf, 1, sizeof buf, fp)) > 0) {
		s = xreallocarray(s, len + got + 1, 1);
		memcpy(s + len, buf, got);
		len += got;
	}
	fclose(fp);
	if (s == NULL)
		return xstrdup("");
	s[len] = '\0';
	return s;
}

/* A shutdown action's child: what it stops, where its output goes. */
struct stop_run {
	struct inventory *inv;
	struct guard_action a; /* log_id, guard, names */
	char out[64], err[64]; /* its stdout, its stderr */
	int r;
	char *cause;
	json_t *result;
	struct stop_run *next;
};

static struct stop_run *inflight; /* beside the daemon's loop */

/* Whether the stop of action_log entry id runs beside the loop now. */
static int
running(int64_t id)
{
	struct stop_run *s;

	for (s = inflight; s != NULL; s = s->next) {
		if (s->a.log_id == id)
			return 1;
	}
	return 0;
}

static void
stop_run_free(struct stop_run *s)
{
	if (s->out[0] != '\0')
		unlink(s->out);
	if (s->err[0] != '\0')
		unlink(s->err);
	action_clear(&s->a);
	free(s->cause);
	json_decref(s->result);
	free(s);
}

/* A temporary file's path in buf (made, empty). */
static int
temp_path(char *buf, size_t len, char **cause)
{
	const char *dir = getenv("TMPDIR");
	int fd;

	snprintf(buf, len, "%s/gpufleet-guard.XXXXXX",
	    dir != NULL && *dir != '\0' && strlen(dir) < len - 32 ? dir
								  : "/tmp");
	if ((fd = mkstemp(buf)) == -1) {
		xasprintf(
		    cause, "cannot make a temporary file: %s", strerror(errno));
		buf[0] = '\0';
		return -GF_EHOSTS;
	}
	close(fd);
	return 0;
}

/*
 * The child s ran is over: store the result per host. A child stopped
 * with the daemon stores none: the entry stays pending, and the next
 * evaluator runs its stop again (resume).
 */
static void
stop_finish(struct stop_run *s, const struct child_result *res)
{
	char *out, *err, *nl, *why;
	int status;

	if (res->killed == 2) {
		s->r = -GF_EHOSTS;
		s->cause = xstrdup("its stop was stopped with the daemon; the "
				   "next evaluation runs it again");
		return;
	}
	out = slurp(s->out);
	err = slurp(s->err);
	if ((nl = strchr(err, '\n')) != NULL)
		*nl = '\0';
	if ((why = child_why(res, GUARD_STOP_TIMEOUT)) != NULL &&
	    (res->killed || res->status == -1 || !WIFEXITED(res->status))) {
		free(err);
		err = why; /* killed: say so rather than its last words */
		why = NULL;
	}
	free(why);
	status = res->status != -1 && WIFEXITED(res->status)
	    ? WEXITSTATUS(res->status)
	    : -1;
	s->result = stop_result(&s->a, out, status, err);
	free(out);
	free(err);
	s->r = actionlog_result(s->inv, s->a.log_id, s->result, &s->cause);
}

/* A guard's stop beside the loop is over: store it, log what failed. */
static void
on_stop_done(const struct child_result *res, void *arg)
{
	struct stop_run *s = arg, **pp;

	for (pp = &inflight; *pp != NULL && *pp != s; pp = &(*pp)->next)
		;
	if (*pp != NULL)
		*pp = s->next;
	stop_finish(s, res);
	if (s->r != 0)
		warn_msg("guard %s: %s", s->a.guard, s->cause);
	stop_run_free(s);
}

/*
 * The result per host from shutdown --json's output: "ok", its error, or
 * for a host it does not name why the child failed.
 */
static json_t *
stop_result(
    const struct guard_action *a, const char *out, int status, const char *err)
{
	json_t *arr = json_loads(out, 0, NULL), *res = json_object(), *o;
	const char *name, *e;
	char *why;
	size_t i;

	json_array_foreach(arr, i, o)
	{
		name = json_string_value(json_object_get(o, "name"));
		e = json_string_value(json_object_get(o, "error"));
		if (name != NULL)
			json_object_set_new(
			    res, name, json_string(e != NULL ? e : "ok"));
	}
	json_decref(arr);
	if (err != NULL && *err != '\0')
		why = xstrdup(err);
	else
		xasprintf(&why, "shutdown exited with status %d", status);
	for (i = 0; i < a->nnames; i++) {
		if (json_object_get(res, a->names[i]) == NULL)
			json_object_set_new(res, a->names[i], json_string(why));
	}
	free(why);
	return res;
}

int
guard_stop(struct fleet *fleet, const char *self, const struct guard_action *a,
    char **cause)
{
	return guard_stop_result(fleet, self, a, NULL, cause);
}

/*
 * Start the stop of action a (async: beside the daemon's loop, stored
 * when it ends; else run it now, stored here). *sp is its record, NULL
 * when a names nobody. Returns 0 or -GF_x with *cause.
 */
static int
stop_start(struct fleet *fleet, const char *self, const struct guard_action *a,
    int async, struct stop_run **sp, char **cause)
{
	struct inventory *inv;
	struct stop_run *s;
	struct child_result res;
	char *argv[12], *names, *tmp;
	/* Its deadlines are the guard's (g-): the books say why. */
	char *env[] = { (char *)"GPUFLEET_STOP_BY=guard", NULL };
	struct child_spec spec = {
		.argv = argv, .env = env, .timeout = GUARD_STOP_TIMEOUT
	};
	size_t i, k = 0;
	int r;

	*sp = NULL;
	if (a->nnames == 0)
		return 0;
	if ((r = fleet_inventory(fleet, &inv, cause)) != 0 ||
	    (r = runner_set(inv, a->log_id, cause)) != 0)
		return r;
	s = xcalloc(1, sizeof *s);
	s->inv = inv;
	s->a.log_id = a->log_id;
	s->a.guard = xstrdup(a->guard);
	s->a.names = xcalloc(a->nnames, sizeof *s->a.names);
	for (i = 0; i < a->nnames; i++)
		s->a.names[s->a.nnames++] = xstrdup(a->names[i]);
	if ((r = temp_path(s->out, sizeof s->out, cause)) != 0 ||
	    (r = temp_path(s->err, sizeof s->err, cause)) != 0) {
		stop_run_free(s);
		return r;
	}
	names = xstrdup("");
	for (i = 0; i < a->nnames; i++) {
		xasprintf(&tmp, "%s%s%s", names, i > 0 ? "," : "", a->names[i]);
		free(names);
		names = tmp;
	}
	argv[k++] = (char *)(self != NULL ? self : "/proc/self/exe");
	argv[k++] = (char *)"--db";
	argv[k++] = inv->path;
	if (fleet->config != NULL && fleet->config->path != NULL) {
		argv[k++] = (char *)"--config";
		argv[k++] = fleet->config->path;
	}
	argv[k++] = (char *)"shutdown";
	argv[k++] = names;
	argv[k++] = (char *)"--now";
	argv[k++] = (char *)"--warn";
	argv[k++] = (char *)"0";
	argv[k++] = (char *)"--json";
	argv[k] = NULL;
	spec.out = s->out;
	spec.err = s->err;
	if (async) {
		r = child_start(&spec, on_stop_done, s, NULL, &s->cause);
		if (r == 0) {
			s->next = inflight;
			inflight = s;
		}
	} else if ((r = child_run(&spec, &res, &s->cause)) == 0)
		stop_finish(s, &res);
	free(names);
	if (r != 0 && s->result == NULL) {
		/* Not started: the result per host says why. */
		s->result = stop_result(&s->a, "", -1, s->cause);
		s->r = actionlog_result(inv, s->a.log_id, s->result, &s->cause);
	}
	*sp = s;
	return 0;
}

/* guard_stop, with the result per host in *result (NULL: not wanted). */
int
guard_stop_result(struct fleet *fleet, const char *self,
    const struct guard_action *a, json_t **result, char **cause)
{
	struct stop_run *s;
	int r;

	if ((r = stop_start(fleet, self, a, 0, &s, cause)) != 0 || s == NULL)
		return r;
	if ((r = s->r) != 0) {
		*cause = s->cause;
		s->cause = NULL;
	} else if (result != NULL) {
		*result = s->result;
		s->result = NULL;
	}
	stop_run_free(s);
	return r;
}

/*
 * Start the stop of action a beside the daemon's loop (child.c); its
 * result per host is stored when its child ends (a failure logged).
 * Until then the entry is not resumed by this process. Runs it now when
 * there is no loop. 0 or -GF_x with *cause.
 */
int
guard_stop_start(struct fleet *fleet, const char *self,
    const struct guard_action *a, char **cause)
{
	struct stop_run *s;
	int r;

	if (!child_looping())
		return guard_stop(fleet, self, a, cause);
	if ((r = stop_start(fleet, self, a, 1, &s, cause)) != 0 || s == NULL)
		return r;
	if (running(a->log_id))
		return 0; /* on_stop_done's */
	r = s->r;
	if (r != 0) {
		*cause = s->cause;
		s->cause = NULL;
	}
	stop_run_free(s);
	return r;
}

/*
 * Shutdown schedules on the watchers (controller/SCHEDULE.md): each
 * instance a shutdown schedule selects carries the schedule's next
 * occurrences as deadlines s-TAG-UNIXTIME in its plan. Every plan written
 * carries them (planwrite_change fills the sync), and schedsync_run tops
 * them up over sessions already open, writing only where the read-back
 * plan's s- deadlines differ from the wanted ones, or its stop method
 * from the one set now while it arms something (deadlines, autostop, a
 * running job's --then): a changed method reaches them at the next
 * contact.
 */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "db.h"
#include "job.h"
#include "log.h"
#include "planwrite.h"
#include "schedule.h"
#include "selector.h"
#include "vis.h"
#include "xmalloc.h"

static void load(struct planwrite *);
static int method_ok(struct planwrite_host *);
static void want_schedule(
    struct planwrite *, struct planwrite_host *, const struct schedule *);
static void want_host(struct planwrite *, struct planwrite_host *);
static int by_at(const void *, const void *);

/*
 * The shutdown schedules and their parsed selectors, once per planwrite.
 * A database error leaves the sync off (s- deadlines kept as they are).
 */
static void
load(struct planwrite *pw)
{
	char *cause = NULL, *safe;
	size_t i;

	if (pw->scheds_loaded)
		return;
	pw->scheds_loaded = 1;
	if (schedule_list(pw->rm->inv, &pw->scheds, &pw->nscheds, &cause) !=
	    0) {
		error("schedules: %s", cause);
		free(cause);
		pw->scheds_failed = 1;
		return;
	}
	pw->sels = xcalloc(pw->nscheds + 1, sizeof *pw->sels);
	for (i = 0; i < pw->nscheds; i++) {
		const struct schedule *s = &pw->scheds[i];
		if (s->action != SCHED_SHUTDOWN || s->paused)
			continue;
		if (selector_parse(s->selector, &pw->sels[i], &cause) != 0) {
			safe = vis_str(cause);
			error("schedule %s: %s", s->name, safe);
			free(safe);
			free(cause);
			cause = NULL;
			pw->sels[i] = NULL;
		}
	}
}

/* Whether h's stop method can run a schedule's stop; else say why. */
static int
method_ok(struct planwrite_host *h)
{
	const char *why = NULL;

	if (h->method_error != NULL)
		why = h->method_error;
	else if (h->method.where == STOP_NONE)
		why = "no stop method";
	else if (strcmp(h->method.kind, "release") == 0)
		why = "its stop method releases the instance (a schedule "
		      "never arms a release)";
	if (why == NULL)
		return 1;
	if (h->sync_note == NULL)
		h->sync_note = xstrdup(why);
	return 0;
}

/* Add schedule s's next occurrences (at most 48, 30 days) to h's want. */
static void
want_schedule(
    struct planwrite *pw, struct planwrite_host *h, const struct schedule *s)
{
	struct plan_deadline *d;
	char *cause = NULL;
	int64_t t = pw->now, o;
	int k;

	for (k = 0; k < SCHEDSYNC_PER_SCHEDULE; k++, t = o) {
		if (schedule_next(s, pw->fleet->config, t, &o, &cause) != 0) {
			error("schedule %s: %s", s->name, cause);
			free(cause);
			return;
		}
		if (o > pw->now + SCHEDSYNC_HORIZON)
			return;
		h->want = xreallocarray(h->want, h->nwant + 1, sizeof *h->want);
		d = &h->want[h->nwant++];
		memset(d, 0, sizeof *d);
		snprintf(
		    d->id, sizeof d->id, "s-%s-%lld", s->tag, (long long)o);
		d->at = o + h->skew;
		d->local = h->method.where == STOP_LOCAL;
		d->warn_minutes = s->warn_minutes;
		d->before_stop = s->before_stop;
		d->before_stop_timeout_s = 600;
		d->unless_busy = s->unless_busy;
	}
}

static int
by_at(const void *a, const void *b)
{
	const struct plan_deadline *x = a, *y = b;

	if (x->at != y->at)
		return x->at < y->at ? -1 : 1;
	return strcmp(x->id, y->id);
}

/* The deadlines and tags the schedules want on h, soonest first. */
static void
want_host(struct planwrite *pw, struct planwrite_host *h)
{
	size_t i;
	int ok;

	h->want_done = 1;
	ok = method_ok(h);
	for (i = 0; i < pw->nscheds; i++) {
		if (pw->sels[i] == NULL || !selector_match(pw->sels[i], h->in))
			continue;
		h->tags = xreallocarray(h->tags, h->ntags + 1, sizeof *h->tags);
		h->tags[h->ntags++] = pw->scheds[i].tag;
		if (ok)
			want_schedule(pw, h, &pw->scheds[i]);
	}
	if (h->nwant > 1)
		qsort(h->want, h->nwant, sizeof *h->want, by_at);
}

/* Fill c's sync for host h (after its plan was read back). */
void
schedsync_fill(
    struct planwrite *pw, struct planwrite_host *h, struct plan_change *c)
{
	load(pw);
	if (pw->scheds_failed)
		return;
	if (!h->want_done)
		want_host(pw, h);
	c->sync.on = 1;
	c->sync.want = h->want;
	c->sync.nwant = h->nwant;
	c->sync.tags = h->tags;
	c->sync.ntags = h->ntags;
}

/*
 * Top-up: for each reached host whose read-back s- deadlines differ from
 * the wanted ones, write the plan (plan set --expect) over the sessions
 * held, kept open when pw->keep_open. A host already given a plan by its
 * caller is left to that write. The write runs the engine's loop until
 * it is over (engine_run): call this outside any event callback. Returns
 * 0 or -GF_x with *cause; per-host failures in h->error.
 */
int
schedsync_run(struct planwrite *pw, char **cause)
{
	struct plan_change c;
	struct plan_result res;
	size_t i, n = 0;

	for (i = 0; i < pw->n; i++) {
		struct planwrite_host *h = &pw->hosts[i];
		const char *rb;
		char **fired, *why = NULL;
		size_t nd, jobs, nfired;
		int as, same_sync, same_stop;
		if (!h->reached || h->error != NULL || h->plan != NULL)
			continue;
		rb = h->probe->rep.watcher.plan;
		if (watcher_fired_ids(
			pw->rm->inv, h->in->id, &fired, &nfired, &why) != 0) {
			free(why);
			why = NULL;
			fired = NULL;
			nfired = 0;
		}
		plan_armed(rb, (const char *const *)fired, nfired, &nd, &as);
		watcher_ids_free(fired, nfired);
		jobs = job_then_running(pw->rm->inv, h->in->id);
		planwrite_change(pw, h, &c);
		if (!c.sync.on && nd == 0 && !as && jobs == 0)
			continue;
		/* A release --yes allowed stays allowed for that method. */
		if (!c.allow_release &&
		    plan_release_allowed(rb, c.stop_command))
			c.allow_release = 1;
		c.kind = PLAN_SYNC;
		if (planwrite_build(pw, h, &c, &res) != 0)
			continue;
		h->sync_cut = res.sync_cut;
		same_sync = !c.sync.on || plan_sync_equal(rb, h->plan);
		/*
		 * The stop method is the one set now (LEDGER.md), when it
		 * is one the watcher can run: one that cannot be expanded,
		 * or a move to a local method (or none), would disarm what
		 * is armed; those are re-armed by hand.
		 */
		same_stop = (nd == 0 && !as && jobs == 0) ||
		    h->method_error != NULL || c.stop_command == NULL ||
		    plan_stop_equal(rb, h->plan);
		if (same_sync && same_stop) {
			free(h->plan);
			h->plan = NULL;
			continue;
		}
		if (!same_stop)
			warn_msg(
			    "%s: the stop method set now replaces the one in "
			    "its plan (%zu deadline%s, autostop %s, %zu "
			    "%s --then)",
			    h->in->name, nd, nd == 1 ? "" : "s",
			    as ? "on" : "off", jobs,
			    jobs == 1 ? "job's" : "jobs'");
		debug_f("%s: schedules: %zu deadlines (%zu left out: the plan "
			"is full)",
		    h->in->name, res.synced, res.sync_cut);
		n++;
	}
	if (n == 0)
		return 0;
	return planwrite_write(pw, cause);
}

/*
 * The top-up after a stored pass of p over rm (status, the daemon): write
 * the plans whose schedule deadlines differ, over the held sessions (kept
 * open with keep_open); what fails is a warning.
 */
void
schedsync_topup(struct remote *rm, struct probe *p, int keep_open)
{
	struct planwrite *pw = NULL;
	char *cause = NULL, *safe;
	size_t i;
	int r;

	if ((r = planwrite_adopt(rm->fleet, rm, p, &pw, &cause)) == 0) {
		pw->keep_open = keep_open;
		r = schedsync_run(pw, &cause);
		for (i = 0; r == 0 && i < pw->n; i++) {
			if (pw->hosts[i].plan == NULL ||
			    pw->hosts[i].error == NULL)
				continue;
			safe = vis_str(pw->hosts[i].error);
			warn_msg("%s: schedules not armed: %s",
			    pw->hosts[i].in->name, safe);
			free(safe);
		}
	}
	if (r != 0) {
		warn_msg("schedules: %s", cause);
		free(cause);
	}
	planwrite_free(pw);
}

/*
 * Whether shutdown schedules are in play: a shutdown schedule runs, or
 * a stored plan still holds a schedule's deadline (to disarm). Then
 * every reached instance is topped up (a selector may pick any).
 */
int
schedsync_scheduled(struct inventory *inv)
{
	return db_exec(inv,
		   "SELECT 1 WHERE EXISTS (SELECT 1 FROM schedule WHERE action "
		   "= 'shutdown' AND paused = 0) OR EXISTS (SELECT 1 FROM "
		   "watcher_state WHERE plan LIKE '%\"id\":\"s-%')",
		   "reading the schedules", NULL, "") == 1;
}

/*
 * Whether a top-up may have anything to do: schedules are in play, or
 * an instance in service has something armed that a changed stop method
 * must reach (its plan's deadlines or autostop, a running job's --then).
 */
int
schedsync_needed(struct inventory *inv)
{
	return schedsync_scheduled(inv) ||
	    db_exec(inv,
		"SELECT 1 WHERE EXISTS (SELECT 1 FROM watcher_state w JOIN "
		"instance i ON i.id = w.instance_id WHERE i.released_at IS "
		"NULL AND json_valid(w.plan) AND (json_array_length(w.plan, "
		"'$.deadlines') > 0 OR json_type(w.plan, '$.autostop') = "
		"'object')) OR EXISTS (SELECT 1 FROM job WHERE state = "
		"'running' AND then_stop IS NOT NULL)",
		"reading the plans", NULL, "") == 1;
}

/* Free what load kept in pw. */
void
schedsync_free(struct planwrite *pw)
{
	size_t i;

	for (i = 0; pw->sels != NULL && i < pw->nscheds; i++)
		selector_free(pw->sels[i]);
	free(pw->sels);
	schedule_list_free(pw->scheds, pw->nscheds);
}

/*
 * The schedule store and the schedule clock (controller/SCHEDULE.md).
 *
 * A schedule's tag (8 random hex digits from getrandom) names it in the
 * deadline ids of the watchers' plans. It is UNIQUE in the table, and a
 * new one is also drawn again when a stored watcher plan still names it
 * (the deadlines of a removed schedule, not yet disarmed), so deadlines
 * are never taken for another schedule's.
 */

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "cron.h"
#include "db.h"
#include "schedule.h"
#include "status.h"
#include "xmalloc.h"

#define SCHEDULE_COLUMNS                                                       \
	"id, name, tag, selector, cron, tz, action, command, unless_busy, "    \
	"catchup_s, warn_minutes, before_stop, paused, created_at, "           \
	"considered_until"

static const char *const action_names[] = { "shutdown", "exec", "rotate-keys",
	"status", "backup" };

static void read_row(sqlite3_stmt *, struct schedule *);
static int test_clock(int64_t *, int64_t *);
static int64_t floor_div(int64_t, int64_t);
static int new_tag(struct inventory *, char *, size_t, char **);
static int newest_before(
    const struct cron *, const char *, int64_t, int64_t, int64_t *, char **);

const char *
schedule_action_name(enum schedule_action a)
{
	return action_names[a];
}

/* The action named s (as schedule_action_name writes it); 0 or -1. */
int
schedule_action_parse(const char *s, enum schedule_action *a)
{
	size_t i;

	for (i = 0; i < sizeof action_names / sizeof action_names[0]; i++) {
		if (strcmp(s, action_names[i]) == 0) {
			*a = (enum schedule_action)i;
			return 0;
		}
	}
	return -1;
}

/* Fill s from a row of SCHEDULE_COLUMNS. */
static void
read_row(sqlite3_stmt *st, struct schedule *s)
{
	enum schedule_action a = SCHED_STATUS;

	memset(s, 0, sizeof *s);
	s->id = sqlite3_column_int64(st, 0);
	s->name = db_text(st, 1);
	s->tag = db_text(st, 2);
	s->selector = db_text(st, 3);
	s->cron = db_text(st, 4);
	s->tz = db_text(st, 5);
	schedule_action_parse((const char *)sqlite3_column_text(st, 6), &a);
	s->action = a;
	s->command = db_text(st, 7);
	s->unless_busy = sqlite3_column_int(st, 8);
	s->catchup_s = sqlite3_column_int64(st, 9);
	s->warn_minutes = sqlite3_column_int(st, 10);
	s->before_stop = db_text(st, 11);
	s->paused = sqlite3_column_int(st, 12);
	s->created_at = sqlite3_column_int64(st, 13);
	s->considered_until = sqlite3_column_int64(st, 14);
}

/* Every schedule, by name. Caller frees with schedule_list_free. */
int
schedule_list(
    struct inventory *inv, struct schedule **list, size_t *n, char **cause)
{
	sqlite3_stmt *st;
	int r;

	*list = NULL;
	*n = 0;
	if ((r = db_prepare(inv, &st,
		 "SELECT " SCHEDULE_COLUMNS " FROM schedule ORDER BY name",
		 "reading the schedules", cause, "")) != 0)
		return r;
	while ((r = sqlite3_step(st)) == SQLITE_ROW) {
		*list = xreallocarray(*list, *n + 1, sizeof **list);
		read_row(st, &(*list)[(*n)++]);
	}
	if ((r = db_finish(inv, st, r, "reading the schedules", cause)) < 0) {
		schedule_list_free(*list, *n);
		*list = NULL;
		*n = 0;
		return r;
	}
	return 0;
}

/* The schedule named name; -GF_EUSAGE "no schedule NAME". Caller clears. */
int
schedule_get(
    struct inventory *inv, const char *name, struct schedule *s, char **cause)
{
	sqlite3_stmt *st;
	int r;

	memset(s, 0, sizeof *s);
	if ((r = db_prepare(inv, &st,
		 "SELECT " SCHEDULE_COLUMNS " FROM schedule WHERE name = ?",
		 "reading a schedule", cause, "t", name)) != 0)
		return r;
	if ((r = sqlite3_step(st)) == SQLITE_ROW)
		read_row(st, s);
	if ((r = db_finish(inv, st, r, "reading a schedule", cause)) < 0)
		return r;
	if (r == 0) {
		xasprintf(cause, "no schedule %s", name);
		return -GF_EUSAGE;
	}
	return 0;
}

/*
 * A tag no schedule has and no stored watcher plan names in a deadline id
 * (s-TAG-): so an old plan's deadlines are never taken for a new schedule.
 */
static int
new_tag(struct inventory *inv, char *buf, size_t len, char **cause)
{
	unsigned char b[4];
	char like[32];
	sqlite3_stmt *st;
	size_t got;
	ssize_t k;
	int tries, r;

	for (tries = 0; tries < 16; tries++) {
		for (got = 0; got < sizeof b; got += (size_t)k) {
			if ((k = getrandom(b + got, sizeof b - got, 0)) <= 0) {
				xasprintf(
				    cause, "getrandom: %s", strerror(errno));
				return -GF_EDB;
			}
		}
		snprintf(buf, len, "%02x%02x%02x%02x", b[0], b[1], b[2], b[3]);
		snprintf(like, sizeof like, "%%\"s-%s-%%", buf);
		if ((r = db_prepare(inv, &st,
			 "SELECT 1 FROM schedule WHERE tag = ? UNION ALL "
			 "SELECT 1 FROM watcher_state WHERE plan LIKE ?",
			 "choosing a schedule tag", cause, "tt", buf, like)) !=
		    0)
			return r;
		r = db_finish(inv, st, sqlite3_step(st),
		    "choosing a schedule tag", cause);
		if (r <= 0)
			return r;
	}
	xasprintf(cause, "no free schedule tag after %d tries", tries);
	return -GF_EDB;
}

/*
 * Store a new schedule: s->tag and s->id are set here (s->tag replaced).
 * A name taken is -GF_EUSAGE. considered_until is s->created_at.
 */
int
schedule_add(struct inventory *inv, struct schedule *s, char **cause)
{
	sqlite3_stmt *st;
	char tag[16];
	int r;

	if ((r = inventory_begin(inv, cause)) != 0)
		return r;
	if ((r = db_prepare(inv, &st, "SELECT 1 FROM schedule WHERE name = ?",
		 "adding a schedule", cause, "t", s->name)) != 0)
		goto fail;
	r = db_finish(inv, st, sqlite3_step(st), "adding a schedule", cause);
	if (r > 0) {
		xasprintf(
		    cause, "a schedule named '%s' already exists", s->name);
		r = -GF_EUSAGE;
	}
	if (r != 0 || (r = new_tag(inv, tag, sizeof tag, cause)) != 0)
		goto fail;
	if ((r = db_exec(inv,
		 "INSERT INTO schedule (name, tag, selector, cron, tz, action, "
		 "command, unless_busy, catchup_s, warn_minutes, before_stop, "
		 "paused, created_at, considered_until) VALUES (?, ?, ?, ?, ?, "
		 "?, ?, ?, ?, ?, ?, ?, ?, ?)",
		 "adding a schedule", cause, "tttttttiIitiII", s->name, tag,
		 s->selector, s->cron, s->tz, schedule_action_name(s->action),
		 s->command, s->unless_busy, s->catchup_s, s->warn_minutes,
		 s->before_stop, s->paused, s->created_at, s->created_at)) < 0)
		goto fail;
	s->id = sqlite3_last_insert_rowid(inv->db);
	free(s->tag);
	s->tag = xstrdup(tag);
	s->considered_until = s->created_at;
	return inventory_commit(inv, cause);
fail:
	inventory_rollback(inv);
	return r;
}

/* Remove the schedule named name (its runs go with it). */
int
schedule_remove(struct inventory *inv, const char *name, char **cause)
{
	int r;

	if ((r = db_exec(inv, "DELETE FROM schedule WHERE name = ?",
		 "removing a schedule", cause, "t", name)) < 0)
		return r;
	if (sqlite3_changes(inv->db) == 0) {
		xasprintf(cause, "no schedule %s", name);
		return -GF_EUSAGE;
	}
	return 0;
}

/*
 * Pause (paused 1) or resume (0) the schedule named name. Resuming sets
 * considered_until to now at least: what fell while it was paused is not
 * caught up.
 */
int
schedule_set_paused(struct inventory *inv, const char *name, int paused,
    int64_t now, char **cause)
{
	int r;

	if ((r = db_exec(inv,
		 "UPDATE schedule SET paused = ?, considered_until = CASE "
		 "WHEN ? = 0 AND paused = 1 THEN max(considered_until, ?) "
		 "ELSE considered_until END WHERE name = ?",
		 "changing a schedule", cause, "iiIt", paused, paused, now,
		 name)) < 0)
		return r;
	if (sqlite3_changes(inv->db) == 0) {
		xasprintf(cause, "no schedule %s", name);
		return -GF_EUSAGE;
	}
	return 0;
}

void
schedule_clear(struct schedule *s)
{
	free(s->name);
	free(s->tag);
	free(s->selector);
	free(s->cron);
	free(s->tz);
	free(s->command);
	free(s->before_stop);
	memset(s, 0, sizeof *s);
}

void
schedule_list_free(struct schedule *list, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		schedule_clear(&list[i]);
	free(list);
}

/* The zone of s: its own, else [schedule] tz, else NULL (the system's). */
const char *
schedule_zone(const struct schedule *s, const struct config *c)
{
	if (s->tz != NULL && *s->tz != '\0')
		return s->tz;
	if (c != NULL && c->schedule_tz != NULL && *c->schedule_tz != '\0')
		return c->schedule_tz;
	return NULL;
}

/* The test clock's S and ANCHOR; 0 when it is not set (or malformed). */
static int
test_clock(int64_t *secs, int64_t *anchor)
{
	const char *v = getenv("GPUFLEET_TEST_CRON_MINUTE");
	char *end;
	long long s, a;

	if (v == NULL || *v == '\0')
		return 0;
	errno = 0;
	s = strtoll(v, &end, 10);
	if (errno != 0 || end == v || *end != '@' || s < 1 || s > 3600)
		return 0;
	v = end + 1;
	a = strtoll(v, &end, 10);
	if (errno != 0 || end == v || *end != '\0' || a < 0)
		return 0;
	*secs = s;
	*anchor = a;
	return 1;
}

/* a / b rounded towards minus infinity (b > 0). */
static int64_t
floor_div(int64_t a, int64_t b)
{
	int64_t q = a / b;

	return (a % b != 0 && a < 0) ? q - 1 : q;
}

/* The schedule clock at real time t: ANCHOR + (t - ANCHOR) * 60 / S. */
int64_t
schedule_clock(int64_t t)
{
	int64_t s, a;

	if (!test_clock(&s, &a))
		return t;
	return a + floor_div((t - a) * 60, s);
}

/*
 * The real time of schedule time t: the first real second whose schedule
 * clock has reached t (rounded up, so schedule_clock(schedule_real(t)) >=
 * t).
 */
int64_t
schedule_real(int64_t t)
{
	int64_t s, a;

	if (!test_clock(&s, &a))
		return t;
	return a - floor_div(-(t - a) * s, 60);
}

/* The next occurrence of s strictly after real time after (real). */
int
schedule_next(const struct schedule *s, const struct config *c, int64_t after,
    int64_t *next, char **cause)
{
	struct cron cr;
	int64_t n;

	if (cron_parse(s->cron, &cr, cause) != 0)
		return -1;
	if (cron_next(&cr, schedule_zone(s, c), schedule_clock(after), &n,
		cause) != 0)
		return -1;
	*next = schedule_real(n);
	return 0;
}

/*
 * The newest occurrence in (lo, hi] (schedule clock), known to exist and
 * to have more than SCHEDULE_MISSED_CAP before it: found in a window
 * before hi that grows until it holds one.
 */
static int
newest_before(const struct cron *cr, const char *tz, int64_t lo, int64_t hi,
    int64_t *newest, char **cause)
{
	int64_t w, start, t, n;

	for (w = 7200;; w *= 2) {
		start = hi - w > lo ? hi - w : lo;
		*newest = 0;
		for (t = start;; t = n) {
			if (cron_next(cr, tz, t, &n, cause) != 0)
				return -1;
			if (n > hi)
				break;
			*newest = n;
		}
		if (*newest != 0 || start == lo)
			return 0;
	}
}

/*
 * Due at real time now: the newest occurrence O with considered_until <
 * O <= now, in *occ; *nmissed how many older ones fall in that range (at
 * most SCHEDULE_MISSED_CAP), *first_missed the oldest of them (0: none).
 * A paused schedule is never due. Returns 1 due, 0 nothing due, -1 cause.
 */
int
schedule_due(const struct schedule *s, const struct config *c, int64_t now,
    int64_t *occ, long *nmissed, int64_t *first_missed, char **cause)
{
	const char *tz = schedule_zone(s, c);
	struct cron cr;
	int64_t lo, hi, t, n, newest = 0;
	long count = 0;

	*occ = 0;
	*nmissed = 0;
	*first_missed = 0;
	if (s->paused)
		return 0;
	if (cron_parse(s->cron, &cr, cause) != 0)
		return -1;
	lo = schedule_clock(s->considered_until);
	hi = schedule_clock(now);
	for (t = lo; t < hi; t = n) {
		if (cron_next(&cr, tz, t, &n, cause) != 0)
			return -1;
		if (n > hi)
			break;
		if (newest != 0 && count++ == 0)
			*first_missed = newest;
		newest = n;
		if (count == SCHEDULE_MISSED_CAP) {
			if (newest_before(&cr, tz, n, hi, &t, cause) != 0)
				return -1;
			if (t != 0)
				newest = t;
			break;
		}
	}
	if (newest == 0)
		return 0;
	*occ = schedule_real(newest);
	*nmissed = count;
	*first_missed = schedule_real(*first_missed);
	if (count == 0)
		*first_missed = 0;
	return 1;
}

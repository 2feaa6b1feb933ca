/*
 * What happened, in one time line: `gpufleet events` merges the watcher
 * journal entries stored from every contact (status, shutdown ls, ...)
 * with what the laptop side did (action_log: schedule runs, missed and
 * skipped ones, guard firings, the daemon starting and stopping), oldest
 * first; --follow keeps printing new rows. Everything that comes from an
 * instance or a user is shown escaped.
 */

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cmd.h"
#include "db.h"
#include "jobspec.h"
#include "status.h"
#include "timeparse.h"
#include "vis.h"
#include "xmalloc.h"

#define EVENTS_LIMIT_MAX 1000000
/* At most this many names in the INSTANCE column, then "+N". */
#define EVENTS_NAMES_SHOWN 3
/* A run of this many "armed" entries at once is shown as one row. */
#define EVENTS_FOLD_ARMED 3
/*
 * "At once": within this many seconds of the run's first entry (a plan of
 * 48 deadlines may be journaled across a second's boundary).
 */
#define EVENTS_FOLD_SPAN_S 2

/*
 * One row of either source. A watcher row has instance, epoch, seq, time
 * (the instance's clock), id and entry; an action row (gpufleet) has
 * log_id, names (a JSON array), name (in id), why and result (JSON or
 * NULL); again: it is printed again, now that its result is stored.
 */
struct event_row {
	int gpufleet, again;
	int64_t t, seq, time, log_id;
	char *instance, *epoch, *event, *id, *entry;
	char *names, *why, *result;
};

/* What is shown: the instances (NULL: every row, no SELECTOR) and when. */
struct events_filter {
	const char *selector;
	struct instance *list;
	size_t n;
	int64_t since;
};

/* --follow: the guard_shutdown entries printed before their result. */
struct events_watch {
	int64_t *ids;
	size_t n;
};

static volatile sig_atomic_t events_stop;

static int cmd_events_exec(
    const struct cmd_entry *, struct cmd_ctx *, int, char **);
static char *details(const char *);
static char *local_seconds(int64_t);
static int load(struct inventory *, const struct events_filter *,
    const int64_t *, const int64_t *, struct event_row **, size_t *, char **);
static int select_instances(
    struct inventory *, struct events_filter *, char **);
static int follow(struct inventory *, struct events_filter *, int64_t *, int,
    struct events_watch *);
static void watch_add(struct events_watch *, const struct event_row *, size_t);
static void render(const struct event_row *, size_t, int, int);

const struct cmd_entry cmd_events_entry = {
	.name = "events",
	.usage = "[SELECTOR] [--since TIME] [--limit N] [--json] [--follow]",
	.summary = "what gpufleet and the watchers on the instances did",
	.help =
	    "One time line, oldest first, of the journal entries of the "
	    "instances'\nwatchers that gpufleet has read (every status, "
	    "shutdown ls, ... reads them;\nnothing is fetched: run status "
	    "first for the latest) and of what gpufleet\ndid on this side "
	    "(schedule_run, schedule_missed, schedule_skipped,\nguard_warn, "
	    "guard_shutdown, daemon_start, daemon_stop, job_kill, "
	    "notify_sent,\n"
	    "notify_failed, passwd_lock, passwd_random, harden_fix). "
	    "Columns: TIME (local, the controller's clock),\n"
	    "INSTANCE (the instance, or the instances an action named), EVENT "
	    "(armed,\nwarned, firing, stopping, stop_failed, job_started, "
	    "job_ended, ... see\nREADME, \"The watcher\"; or the action), ID "
	    "(deadline, autostop policy, a\njob's fire id j-N-STARTED, or the "
	    "schedule's or guard's name) and DETAILS\n(an action's why and its "
	    "result per host; a job's start, end and stop in\nwords: job 7 "
	    "(train) succeeded, exit 0, 2h13m). With a SELECTOR: the selected\n"
	    "instances' journal entries and the actions naming one of them; "
	    "actions\nnaming no instance (daemon_start, daemon_stop) show only "
	    "without a SELECTOR.\n\n"
	    "      --since TIME   rows from TIME on (-2h, yesterday, "
	    "2026-12-01)\n"
	    "      --limit N      the last N rows only (before --follow's)\n"
	    "      --follow       then print new rows as they are stored, "
	    "until\n                     interrupted (SIGINT, SIGTERM: exit "
	    "0); a guard_shutdown\n                     printed before its "
	    "stop's result was stored is\n                     printed "
	    "again, once, when it is: DETAILS \"result:\n                     "
	    "NAME: ok, ...\", or with --json the object again\n"
	    "      --json         an array of objects, \"source\": "
	    "\"watcher\" ({instance,\n                     epoch, seq, time, "
	    "time_instance, event, id, entry}) or\n                     "
	    "\"gpufleet\" ({time, event, name, instances, why, result});\n   "
	    "                  with --follow one object per line\n\n"
	    "Examples:\n"
	    "  gpufleet events --since yesterday\n"
	    "  gpufleet events a100-1 --limit 20\n"
	    "  gpufleet events @train --follow\n",
	.exec = cmd_events_exec,
};

enum { OPT_JSON = 256, OPT_SINCE, OPT_LIMIT, OPT_FOLLOW };

static const struct option events_options[] = { { "json", no_argument, NULL,
						    OPT_JSON },
	{ "since", required_argument, NULL, OPT_SINCE },
	{ "limit", required_argument, NULL, OPT_LIMIT },
	{ "follow", no_argument, NULL, OPT_FOLLOW },
	{ "help", no_argument, NULL, 'h' }, { NULL, 0, NULL, 0 } };

/* The entry's fields other than its id fields, as "k=v ...". Caller frees. */
static char *
details(const char *entry)
{
	json_t *o = json_loads(entry, 0, NULL), *v;
	const char *k;
	char *s = xstrdup(""), *val, *tmp;

	json_object_foreach(o, k, v)
	{
		if (strcmp(k, "epoch") == 0 || strcmp(k, "seq") == 0 ||
		    strcmp(k, "time") == 0 || strcmp(k, "event") == 0 ||
		    strcmp(k, "id") == 0)
			continue;
		val = json_is_string(v)
		    ? xstrdup(json_string_value(v))
		    : json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
		xasprintf(&tmp, "%s%s%s=%s", s, *s ? " " : "", k,
		    val != NULL ? val : "?");
		free(val);
		free(s);
		s = tmp;
	}
	json_decref(o);
	return s;
}

/*
 * An action's DETAILS: its why, then "NAME: result" per host; printed
 * again (its result stored later), "result: NAME: result, ...".
 */
static char *
action_details(const struct event_row *w)
{
	json_t *res = w->result != NULL ? json_loads(w->result, 0, NULL) : NULL;
	char *s =
		 xstrdup(w->again ? "result:" : (w->why != NULL ? w->why : "")),
	     *tmp, *val;
	const char *k, *sep = w->again ? " " : (*s != '\0' ? " -> " : "");
	json_t *v;

	json_object_foreach(res, k, v)
	{
		val = json_is_string(v)
		    ? xstrdup(json_string_value(v))
		    : json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
		xasprintf(
		    &tmp, "%s%s%s: %s", s, sep, k, val != NULL ? val : "?");
		free(val);
		free(s);
		s = tmp;
		sep = ", ";
	}
	json_decref(res);
	return s;
}

/* An action's INSTANCE column: "a1,a2,a3 +4", or NULL for none. */
static char *
action_names(const char *names)
{
	json_t *arr = json_loads(names, 0, NULL), *v;
	char *s = NULL, *tmp;
	size_t i, n = json_array_size(arr);

	json_array_foreach(arr, i, v)
	{
		if (i == EVENTS_NAMES_SHOWN) {
			xasprintf(&tmp, "%s +%zu", s, n - i);
			free(s);
			s = tmp;
			break;
		}
		xasprintf(&tmp, "%s%s%s", s != NULL ? s : "",
		    s != NULL ? "," : "",
		    json_string_value(v) != NULL ? json_string_value(v) : "?");
		free(s);
		s = tmp;
	}
	json_decref(arr);
	return s;
}

/* "2026-12-02 02:00:03" local. Caller frees. */
static char *
local_seconds(int64_t t)
{
	char buf[32];
	time_t tt = (time_t)t;
	struct tm tm;

	if (localtime_r(&tt, &tm) == NULL ||
	    strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S", &tm) == 0)
		return xstrdup("?");
	return xstrdup(buf);
}

/* Free the strings of the first n rows. */
static void
rows_free_some(struct event_row *rows, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++) {
		free(rows[i].instance);
		free(rows[i].epoch);
		free(rows[i].event);
		free(rows[i].id);
		free(rows[i].entry);
		free(rows[i].names);
		free(rows[i].why);
		free(rows[i].result);
	}
}

static void
rows_free(struct event_row *rows, size_t n)
{
	rows_free_some(rows, n);
	free(rows);
}

/* The name of instance id among f's, or NULL when it is not shown. */
static const char *
shown_instance(const struct events_filter *f, int64_t id)
{
	size_t i;

	for (i = 0; i < f->n; i++) {
		if (f->list[i].id == id)
			return f->list[i].name;
	}
	return NULL;
}

/* Whether an action naming names (a JSON array) is shown under f. */
static int
shown_action(const struct events_filter *f, const char *names)
{
	json_t *arr, *v;
	size_t i, j;
	int shown = 0;

	if (f->selector == NULL)
		return 1;
	arr = json_loads(names, 0, NULL);
	json_array_foreach(arr, i, v)
	{
		for (j = 0; j < f->n && !shown; j++) {
			shown = json_string_value(v) != NULL &&
			    strcmp(json_string_value(v), f->list[j].name) == 0;
		}
	}
	json_decref(arr);
	return shown;
}

/* A new empty row at the end of *rows. */
static struct event_row *
row_new(struct event_row **rows, size_t *nrows)
{
	struct event_row *w;

	*rows = xreallocarray(*rows, *nrows + 1, sizeof **rows);
	w = &(*rows)[(*nrows)++];
	memset(w, 0, sizeof *w);
	return w;
}

/* Append f's journal rows with lo < rowid <= hi, in time order. */
static int
load_journal(struct inventory *inv, const struct events_filter *f, int64_t lo,
    int64_t hi, struct event_row **rows, size_t *nrows, char **cause)
{
	sqlite3_stmt *st;
	struct event_row *w;
	const char *name;
	int rc, r;

	if ((r = db_prepare(inv, &st,
		 "SELECT instance_id, epoch, seq, t, time, event, id, entry "
		 "FROM journal WHERE t >= ? AND rowid > ? AND rowid <= ? "
		 "ORDER BY t, received_at, epoch, seq",
		 "cannot read the journal", cause, "III", f->since, lo, hi)) !=
	    0)
		return r;
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		if ((name = shown_instance(f, sqlite3_column_int64(st, 0))) ==
		    NULL)
			continue;
		w = row_new(rows, nrows);
		w->instance = xstrdup(name);
		w->epoch = db_text(st, 1);
		w->seq = sqlite3_column_int64(st, 2);
		w->t = sqlite3_column_int64(st, 3);
		w->time = sqlite3_column_int64(st, 4);
		w->event = db_text(st, 5);
		w->id = db_text(st, 6);
		w->entry = db_text(st, 7);
	}
	r = db_finish(inv, st, rc, "cannot read the journal", cause);
	return r < 0 ? r : 0;
}

/*
 * Append the action_log rows st gives (id, t, kind, name, instances, why,
 * result) that f shows (f NULL: all), then finalize st.
 */
static int
read_actions(struct inventory *inv, sqlite3_stmt *st,
    const struct events_filter *f, struct event_row **rows, size_t *nrows,
    char **cause)
{
	struct event_row *w;
	int rc, r;

	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		if (f != NULL &&
		    !shown_action(f, (const char *)sqlite3_column_text(st, 4)))
			continue;
		w = row_new(rows, nrows);
		w->gpufleet = 1;
		w->log_id = sqlite3_column_int64(st, 0);
		w->t = sqlite3_column_int64(st, 1);
		w->event = db_text(st, 2);
		w->id = db_text(st, 3);
		w->names = db_text(st, 4);
		w->why = db_text(st, 5);
		w->result = db_text(st, 6);
	}
	r = db_finish(inv, st, rc, "cannot read the action log", cause);
	return r < 0 ? r : 0;
}

/* Append f's action_log rows with lo < id <= hi, in time order. */
static int
load_actions(struct inventory *inv, const struct events_filter *f, int64_t lo,
    int64_t hi, struct event_row **rows, size_t *nrows, char **cause)
{
	sqlite3_stmt *st;
	int r;

	if ((r = db_prepare(inv, &st,
		 "SELECT id, t, kind, name, instances, why, result FROM "
		 "action_log WHERE t >= ? AND id > ? AND id <= ? ORDER BY t, "
		 "id",
		 "cannot read the action log", cause, "III", f->since, lo,
		 hi)) != 0)
		return r;
	return read_actions(inv, st, f, rows, nrows, cause);
}

/*
 * Merge rows[0, nj) and rows[nj, n), each in time order, into one; at the
 * same second the watcher's rows come first.
 */
static void
merge(struct event_row *rows, size_t nj, size_t n)
{
	struct event_row *v;
	size_t i = 0, j = nj, k = 0;

	if (n == 0)
		return;
	v = xcalloc(n, sizeof *v);
	while (i < nj || j < n) {
		if (j == n || (i < nj && rows[i].t <= rows[j].t))
			v[k++] = rows[i++];
		else
			v[k++] = rows[j++];
	}
	memcpy(rows, v, n * sizeof *v);
	free(v);
}

/*
 * Both sources' rows with lo[k] < rowid <= hi[k] (k 0: journal, 1:
 * action_log), merged in time order. Caller frees with rows_free.
 */
static int
load(struct inventory *inv, const struct events_filter *f, const int64_t *lo,
    const int64_t *hi, struct event_row **rows, size_t *nrows, char **cause)
{
	size_t nj;
	int r;

	*rows = NULL;
	*nrows = 0;
	if ((r = load_journal(inv, f, lo[0], hi[0], rows, nrows, cause)) != 0)
		return r;
	nj = *nrows;
	if ((r = load_actions(inv, f, lo[1], hi[1], rows, nrows, cause)) != 0)
		return r;
	merge(*rows, nj, *nrows);
	return 0;
}

/* The newest rowid of the journal (hi[0]) and of action_log (hi[1]). */
static int
newest(struct inventory *inv, int64_t *hi, char **cause)
{
	sqlite3_stmt *st;
	int r;

	if ((r = db_prepare(inv, &st,
		 "SELECT (SELECT coalesce(max(rowid), 0) FROM journal), "
		 "(SELECT coalesce(max(id), 0) FROM action_log)",
		 "cannot read the events", cause, "")) != 0)
		return r;
	if ((r = sqlite3_step(st)) == SQLITE_ROW) {
		hi[0] = sqlite3_column_int64(st, 0);
		hi[1] = sqlite3_column_int64(st, 1);
	}
	r = db_finish(inv, st, r, "cannot read the events", cause);
	return r < 0 ? r : 0;
}

/* Stored JSON text as a value: null when absent or unreadable. */
static json_t *
stored(const char *text)
{
	json_t *v =
	    text != NULL ? json_loads(text, JSON_DECODE_ANY, NULL) : NULL;

	return v != NULL ? v : json_null();
}

/* One row as a JSON object. */
static json_t *
row_json(const struct event_row *w)
{
	char *when = instance_format_time(w->t), *ti;
	json_t *o;

	if (w->gpufleet) {
		o = json_pack("{s:s, s:s, s:s, s:s?, s:o, s:s?, s:o}", "source",
		    "gpufleet", "time", when, "event", w->event, "name", w->id,
		    "instances", stored(w->names), "why", w->why, "result",
		    stored(w->result));
		free(when);
		return o;
	}
	ti = instance_format_time(w->time);
	o = json_pack("{s:s, s:s, s:s, s:I, s:s, s:s, s:s, s:o, s:o}", "source",
	    "watcher", "instance", w->instance, "epoch", w->epoch, "seq",
	    (json_int_t)w->seq, "time", when, "time_instance", ti, "event",
	    w->event, "id", w->id != NULL ? json_string(w->id) : json_null(),
	    "entry", stored(w->entry));
	free(when);
	free(ti);
	return o;
}

/* Row w's five text columns, unescaped; free with cells_free. */
static void
row_cells(const struct event_row *w, char **c)
{
	c[0] = local_seconds(w->t);
	if (w->gpufleet) {
		c[1] = action_names(w->names);
		c[3] = action_details(w);
	} else {
		c[1] = xstrdup(w->instance);
		c[3] = jobspec_event_text(w->event, w->id, w->entry);
		if (c[3] == NULL)
			c[3] = details(w->entry);
	}
	c[2] = w->event;
	c[4] = w->id;
}

/*
 * How many rows from i on are one plan's arming or disarming: watcher
 * "armed" (or "cancelled") entries of one instance at one time (a
 * schedule arms 48 at once, and its removal cancels them all).
 */
static size_t
armed_run(const struct event_row *rows, size_t i, size_t n)
{
	size_t j;

	if (rows[i].gpufleet ||
	    (strcmp(rows[i].event, "armed") != 0 &&
		strcmp(rows[i].event, "cancelled") != 0))
		return 1;
	for (j = i; j < n; j++) {
		if (rows[j].gpufleet || rows[j].again ||
		    strcmp(rows[j].event, rows[i].event) != 0 ||
		    strcmp(rows[j].instance, rows[i].instance) != 0 ||
		    rows[j].t - rows[i].t > EVENTS_FOLD_SPAN_S)
			break;
	}
	return j - i;
}

/*
 * Print rows: a JSON array, JSON lines (--follow --json), a table, or
 * lines (--follow). In text a run of EVENTS_FOLD_ARMED or more "armed"
 * (or "cancelled") entries of one instance at one time is one row.
 */
static void
render(const struct event_row *rows, size_t n, int json, int lines)
{
	struct table *t =
	    table_new(5, "TIME", "INSTANCE", "EVENT", "ID", "DETAILS");
	json_t *arr = json_array(), *o;
	char *c[5], *e[5], *ids = NULL, *first;
	size_t i, k, fold;

	for (i = 0; i < n; i++) {
		if (json && lines) {
			o = row_json(&rows[i]);
			json_dumpf(o, stdout, JSON_COMPACT);
			fputc('\n', stdout);
			json_decref(o);
			continue;
		}
		if (json) {
			json_array_append_new(arr, row_json(&rows[i]));
			continue;
		}
		row_cells(&rows[i], c);
		fold = armed_run(rows, i, n);
		if (fold >= EVENTS_FOLD_ARMED) {
			xasprintf(&ids, "%s +%zu", c[4] != NULL ? c[4] : "-",
			    fold - 1);
			c[4] = ids;
			first = c[3];
			if (strcmp(rows[i].event, "armed") == 0)
				xasprintf(&c[3],
				    "%zu deadlines armed; the first: %s", fold,
				    first);
			else
				xasprintf(
				    &c[3], "%zu deadlines cancelled", fold);
			free(first);
			i += fold - 1;
		}
		if (!lines)
			table_add(t, c[0], c[1], c[2], c[4], c[3]);
		for (k = 0; lines && k < 5; k++)
			e[k] = vis_str(c[k] != NULL && *c[k] ? c[k] : "-");
		if (lines)
			printf("%s  %s  %s  %s  %s\n", e[0], e[1], e[2], e[4],
			    e[3]);
		for (k = 0; lines && k < 5; k++)
			free(e[k]);
		free(c[0]);
		free(c[1]);
		free(c[3]);
		free(ids);
		ids = NULL;
	}
	if (json && !lines)
		json_print(arr, stdout);
	else
		json_decref(arr);
	if (!json && !lines)
		table_print(t, stdout);
	table_free(t);
	fflush(stdout);
}

static void
on_signal(int sig)
{
	(void)sig;
	events_stop = 1;
}

/*
 * --follow ends on SIGINT or SIGTERM with exit 0: caught before the first
 * read, so that one sent as soon as the first rows are seen (or sooner)
 * ends it the same way.
 */
static void
catch_stop(void)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_signal;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
}

/*
 * The instances whose rows are shown: the selected ones, or every one
 * (released ones too) without a SELECTOR. Replaces f->list.
 */
static int
select_instances(struct inventory *inv, struct events_filter *f, char **cause)
{
	struct instance *list = NULL;
	size_t n = 0;
	int r;

	if (f->selector != NULL)
		r = inventory_select(inv, f->selector, &list, &n, cause);
	else
		r = inventory_list(inv, 1, &list, &n, cause);
	if (r != 0)
		return r;
	instance_free_array(f->list, f->n);
	f->list = list;
	f->n = n;
	return 0;
}

/* Watch the guard_shutdown rows among rows[0, n) printed with no result. */
static void
watch_add(struct events_watch *wa, const struct event_row *rows, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++) {
		if (!rows[i].gpufleet || rows[i].result != NULL ||
		    strcmp(rows[i].event, "guard_shutdown") != 0)
			continue;
		wa->ids = xreallocarray(wa->ids, wa->n + 1, sizeof *wa->ids);
		wa->ids[wa->n++] = rows[i].log_id;
	}
}

/*
 * The watched rows whose result is stored now, as rows to print again
 * (once: they leave the watch).
 */
static int
watch_results(struct inventory *inv, struct events_watch *wa,
    struct event_row **rows, size_t *nrows, char **cause)
{
	sqlite3_stmt *st;
	size_t i, j, had;
	int r;

	*rows = NULL;
	*nrows = 0;
	for (i = j = 0; i < wa->n; i++) {
		had = *nrows;
		if ((r = db_prepare(inv, &st,
			 "SELECT id, t, kind, name, instances, why, result "
			 "FROM action_log WHERE id = ? AND result IS NOT NULL",
			 "cannot read the action log", cause, "I",
			 wa->ids[i])) != 0 ||
		    (r = read_actions(inv, st, NULL, rows, nrows, cause)) != 0)
			return r;
		if (*nrows > had)
			(*rows)[had].again = 1;
		else
			wa->ids[j++] = wa->ids[i];
	}
	wa->n = j;
	return 0;
}

/*
 * --follow: every second, print the rows stored after hi (the newest
 * rowids printed), until SIGINT or SIGTERM (caught by catch_stop), and
 * again, once, the guard_shutdown rows printed before their stop's result
 * was stored, when it is. The instances are selected again each time (a
 * new one shows; on an error the last ones stay).
 */
static int
follow(struct inventory *inv, struct events_filter *f, int64_t *hi, int json,
    struct events_watch *wa)
{
	struct timespec ts = { 1, 0 };
	struct event_row *rows;
	int64_t lo[2];
	size_t n;
	char *cause = NULL;
	int r;

	while (!events_stop) {
		nanosleep(&ts, NULL);
		if (events_stop)
			break;
		if (select_instances(inv, f, &cause) != 0) {
			free(cause);
			cause = NULL;
		}
		lo[0] = hi[0];
		lo[1] = hi[1];
		if ((r = watch_results(inv, wa, &rows, &n, &cause)) == 0)
			render(rows, n, json, 1);
		rows_free(rows, n);
		rows = NULL;
		n = 0;
		if (r == 0 && (r = newest(inv, hi, &cause)) == 0 &&
		    (r = load(inv, f, lo, hi, &rows, &n, &cause)) == 0) {
			render(rows, n, json, 1);
			watch_add(wa, rows, n);
		}
		rows_free(rows, n);
		if (r != 0)
			return cmd_fail(-r, cause);
	}
	return GF_OK;
}

/* Keep only the last limit of the n rows. */
static void
keep_last(struct event_row *rows, size_t *n, long limit)
{
	size_t drop;

	if (limit <= 0 || *n <= (size_t)limit)
		return;
	drop = *n - (size_t)limit;
	rows_free_some(rows, drop);
	memmove(rows, rows + drop, (size_t)limit * sizeof *rows);
	*n = (size_t)limit;
}

static int
cmd_events_exec(
    const struct cmd_entry *e, struct cmd_ctx *ctx, int argc, char **argv)
{
	struct events_filter f = { NULL, NULL, 0, 0 };
	struct events_watch wa = { NULL, 0 };
	struct inventory *inv = NULL;
	struct event_row *rows = NULL;
	size_t nrows = 0;
	int64_t lo[2] = { 0, 0 }, hi[2] = { 0, 0 };
	long limit = 0;
	char *cause = NULL, *end;
	int ch, status, json = 0, follow_ = 0, r;

	while ((ch = cmd_getopt(e, argc, argv, "h", events_options, &status)) !=
	    -1) {
		switch (ch) {
		case -2:
			return status;
		case OPT_JSON:
			json = 1;
			break;
		case OPT_FOLLOW:
			follow_ = 1;
			break;
		case OPT_SINCE:
			if (timeparse(optarg, (int64_t)time(NULL), &f.since,
				&cause) != 0) {
				status =
				    cmd_usage_error(e, "--since: %s", cause);
				free(cause);
				return status;
			}
			break;
		case OPT_LIMIT:
			limit = strtol(optarg, &end, 10);
			if (*optarg == '\0' || *end != '\0' || limit < 1 ||
			    limit > EVENTS_LIMIT_MAX)
				return cmd_usage_error(e,
				    "--limit '%s' is not a number from 1 to %d",
				    optarg, EVENTS_LIMIT_MAX);
			break;
		}
	}
	if (argc - optind > 1)
		return cmd_usage_error(e, "takes at most one SELECTOR");
	if (argc - optind == 1)
		f.selector = argv[optind];
	if (follow_)
		catch_stop();
	if ((status = cmd_open(ctx, &inv)) != 0)
		return status;
	if ((r = select_instances(inv, &f, &cause)) != 0 ||
	    (r = newest(inv, hi, &cause)) != 0 ||
	    (r = load(inv, &f, lo, hi, &rows, &nrows, &cause)) != 0)
		status = cmd_fail(-r, cause);
	else {
		keep_last(rows, &nrows, limit);
		render(rows, nrows, json, json && follow_);
		watch_add(&wa, rows, nrows);
		status = follow_ ? follow(inv, &f, hi, json, &wa) : GF_OK;
	}
	rows_free(rows, nrows);
	free(wa.ids);
	instance_free_array(f.list, f.n);
	inventory_close(inv);
	return status;
}

/*
 * What the watchers did while the laptop was away: `gpufleet events`
 * lists the journal entries stored from every contact (status, shutdown
 * ls, ...), oldest first. Everything in them comes from the instance and
 * is shown escaped.
 */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cmd.h"
#include "db.h"
#include "status.h"
#include "timeparse.h"
#include "vis.h"
#include "xmalloc.h"

#define EVENTS_LIMIT_MAX 1000000

struct event_row {
	const char *instance;
	char *epoch;
	int64_t seq, t, time;
	char *event, *id, *entry;
};

static int cmd_events_exec(
    const struct cmd_entry *, struct cmd_ctx *, int, char **);
static char *details(const char *);
static char *local_seconds(int64_t);
static int load(struct inventory *, const struct instance *, size_t, int64_t,
    long, struct event_row **, size_t *, char **);
static void render(const struct event_row *, size_t, int);

const struct cmd_entry cmd_events_entry = {
	.name = "events",
	.usage = "[SELECTOR] [--since TIME] [--limit N] [--json]",
	.summary = "what the watchers on the instances did (their journals)",
	.help =
	    "Lists the journal entries of the instances' watchers that "
	    "gpufleet has read\n(every status, shutdown ls, ... reads them), "
	    "oldest first: TIME (local,\nthe controller's clock), INSTANCE, "
	    "EVENT (armed, warned, firing, stopping,\nstop_failed, ...; see "
	    "README, \"The watcher\"), ID (deadline or autostop\npolicy) and "
	    "DETAILS. Nothing is fetched: run status first for the latest.\n\n"
	    "      --since TIME   entries from TIME on (-2h, yesterday, "
	    "2026-12-01)\n"
	    "      --limit N      the last N entries only\n"
	    "      --json         [{instance, epoch, seq, time, time_instance, "
	    "event, id,\n                      entry}], entry the stored "
	    "object\n\n"
	    "Examples:\n"
	    "  gpufleet events --since yesterday\n"
	    "  gpufleet events a100-1 --limit 20\n",
	.exec = cmd_events_exec,
};

enum { OPT_JSON = 256, OPT_SINCE, OPT_LIMIT };

static const struct option events_options[] = { { "json", no_argument, NULL,
						    OPT_JSON },
	{ "since", required_argument, NULL, OPT_SINCE },
	{ "limit", required_argument, NULL, OPT_LIMIT },
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

/* The selected instances' entries since since, the last limit of them. */
static int
load(struct inventory *inv, const struct instance *list, size_t n,
    int64_t since, long limit, struct event_row **rows, size_t *nrows,
    char **cause)
{
	sqlite3_stmt *st;
	struct event_row *w;
	size_t i;
	int64_t id;
	int rc, r;

	*rows = NULL;
	*nrows = 0;
	if ((r = db_prepare(inv, &st,
		 "SELECT instance_id, epoch, seq, t, time, event, id, entry "
		 "FROM journal WHERE t >= ? ORDER BY t, received_at, epoch, "
		 "seq",
		 "cannot read the journal", cause, "I", since)) != 0)
		return r;
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		id = sqlite3_column_int64(st, 0);
		for (i = 0; i < n && list[i].id != id; i++)
			;
		if (i == n)
			continue;
		*rows = xreallocarray(*rows, *nrows + 1, sizeof **rows);
		w = &(*rows)[(*nrows)++];
		w->instance = list[i].name;
		w->epoch = db_text(st, 1);
		w->seq = sqlite3_column_int64(st, 2);
		w->t = sqlite3_column_int64(st, 3);
		w->time = sqlite3_column_int64(st, 4);
		w->event = db_text(st, 5);
		w->id = db_text(st, 6);
		w->entry = db_text(st, 7);
	}
	r = db_finish(inv, st, rc, "cannot read the journal", cause);
	if (limit > 0 && *nrows > (size_t)limit) {
		size_t drop = *nrows - (size_t)limit;
		for (i = 0; i < drop; i++) {
			free((*rows)[i].epoch);
			free((*rows)[i].event);
			free((*rows)[i].id);
			free((*rows)[i].entry);
		}
		memmove(*rows, *rows + drop, (size_t)limit * sizeof **rows);
		*nrows = (size_t)limit;
	}
	return r < 0 ? r : 0;
}

/* Print the rows as a table, or as JSON. */
static void
render(const struct event_row *rows, size_t n, int json)
{
	struct table *t;
	json_t *arr = json_array(), *o;
	char *when, *d, *ti;
	size_t i;

	t = table_new(5, "TIME", "INSTANCE", "EVENT", "ID", "DETAILS");
	for (i = 0; i < n; i++) {
		const struct event_row *w = &rows[i];
		if (json) {
			when = instance_format_time(w->t);
			ti = instance_format_time(w->time);
			o = json_pack(
			    "{s:s, s:s, s:I, s:s, s:s, s:s, s:o, s:o}",
			    "instance", w->instance, "epoch", w->epoch, "seq",
			    (json_int_t)w->seq, "time", when, "time_instance",
			    ti, "event", w->event, "id",
			    w->id != NULL ? json_string(w->id) : json_null(),
			    "entry", json_loads(w->entry, 0, NULL));
			json_array_append_new(arr, o);
			free(when);
			free(ti);
			continue;
		}
		when = local_seconds(w->t);
		d = details(w->entry);
		table_add(t, when, w->instance, w->event, w->id, d);
		free(when);
		free(d);
	}
	if (json)
		json_print(arr, stdout);
	else {
		json_decref(arr);
		table_print(t, stdout);
	}
	table_free(t);
}

static int
cmd_events_exec(
    const struct cmd_entry *e, struct cmd_ctx *ctx, int argc, char **argv)
{
	struct inventory *inv = NULL;
	struct instance *list = NULL;
	struct event_row *rows = NULL;
	size_t n = 0, nrows = 0, i;
	int64_t since = 0;
	long limit = 0;
	char *cause = NULL, *end;
	int ch, status, json = 0, r;

	while ((ch = cmd_getopt(e, argc, argv, "h", events_options, &status)) !=
	    -1) {
		switch (ch) {
		case -2:
			return status;
		case OPT_JSON:
			json = 1;
			break;
		case OPT_SINCE:
			if (timeparse(optarg, (int64_t)time(NULL), &since,
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
	if ((status = cmd_open(ctx, &inv)) != 0)
		return status;
	if ((r = inventory_select(inv,
		 argc - optind == 1 ? argv[optind] : "all", &list, &n,
		 &cause)) != 0 ||
	    (r = load(inv, list, n, since, limit, &rows, &nrows, &cause)) !=
		0) {
		instance_free_array(list, n);
		inventory_close(inv);
		return cmd_fail(-r, cause);
	}
	render(rows, nrows, json);
	for (i = 0; i < nrows; i++) {
		free(rows[i].epoch);
		free(rows[i].event);
		free(rows[i].id);
		free(rows[i].entry);
	}
	free(rows);
	instance_free_array(list, n);
	inventory_close(inv);
	return GF_OK;
}

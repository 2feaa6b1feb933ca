/*
 * Speed runs in the inventory and what they add up to per platform: the
 * median of every stored run of the platform's instances, each direction
 * and the round trip on their own.
 */

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "db.h"
#include "speed.h"
#include "status.h"
#include "xmalloc.h"

/* The runs of one platform while they are gathered. */
struct speed_group {
	const char *provider; /* borrowed from the instance list */
	double *up, *down, *rtt;
	size_t n;
};

static int cmp_double(const void *, const void *);
static char *format_scaled(double, const char *);
static int load_runs(
    struct inventory *, int64_t, struct speed_group *, char **);

static int
cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

/*
 * The median of v[0..n) (sorted in place): the middle value, or the mean
 * of the two middle ones for an even n; NAN for none.
 */
double
speed_median(double *v, size_t n)
{
	if (n == 0)
		return NAN;
	qsort(v, n, sizeof *v, cmp_double);
	if (n % 2 == 1)
		return v[n / 2];
	return (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* v with unit: whole numbers from 10 up, one decimal below. Caller frees. */
static char *
format_scaled(double v, const char *unit)
{
	char *s;

	if (v >= 9.95)
		xasprintf(&s, "%.0f %s", v, unit);
	else
		xasprintf(&s, "%.1f %s", v, unit);
	return s;
}

/*
 * A rate in decimal units as transfer tools print it: "38 MB/s",
 * "2.5 MB/s", "640 kB/s", "1.2 GB/s". Caller frees.
 */
char *
speed_format_rate(double Bps)
{
	char *s;

	if (!isfinite(Bps) || Bps < 0)
		return xstrdup("-");
	if (Bps >= 1e9)
		return format_scaled(Bps / 1e9, "GB/s");
	if (Bps >= 1e6)
		return format_scaled(Bps / 1e6, "MB/s");
	if (Bps >= 1e3)
		return format_scaled(Bps / 1e3, "kB/s");
	xasprintf(&s, "%.0f B/s", Bps);
	return s;
}

/* A round trip: "120 ms", "0.4 ms". Caller frees. */
char *
speed_format_rtt(double ms)
{
	if (!isfinite(ms) || ms < 0)
		return xstrdup("-");
	return format_scaled(ms, "ms");
}

/*
 * A platform's medians, "download 38 MB/s, upload 11 MB/s, rtt 120 ms over
 * 6 runs", to follow "PROVIDER: ". Caller frees.
 */
char *
speed_format_summary(const struct speed_summary *s)
{
	char *d = speed_format_rate(s->median.down_Bps),
	     *u = speed_format_rate(s->median.up_Bps),
	     *t = speed_format_rtt(s->median.rtt_ms), *line;

	xasprintf(&line, "download %s, upload %s, rtt %s over %zu run%s", d, u,
	    t, s->runs, s->runs == 1 ? "" : "s");
	free(d);
	free(u);
	free(t);
	return line;
}

/*
 * Store one run of instance id at time at, then drop all but its newest
 * SPEED_KEEP runs, in one transaction.
 */
int
speed_store(struct inventory *inv, int64_t id, int64_t at,
    const struct speed_result *res, char **cause)
{
	const char *what = "storing a speed run";
	int r;

	if ((r = inventory_begin(inv, cause)) != 0)
		return r;
	if ((r = db_exec(inv,
		 "INSERT INTO speed (instance_id, at, up_Bps, down_Bps, "
		 "rtt_ms, size) VALUES (?, ?, ?, ?, ?, ?)",
		 what, cause, "IIdddI", id, at, res->up_Bps, res->down_Bps,
		 res->rtt_ms, res->size)) < 0)
		goto fail;
	if ((r = db_exec(inv,
		 "DELETE FROM speed WHERE instance_id = ?1 AND id NOT IN "
		 "(SELECT id FROM speed WHERE instance_id = ?1 "
		 "ORDER BY at DESC, id DESC LIMIT ?2)",
		 what, cause, "Ii", id, SPEED_KEEP)) < 0)
		goto fail;
	return inventory_commit(inv, cause);
fail:
	inventory_rollback(inv);
	return r;
}

/* Append the stored runs of instance id to g. */
static int
load_runs(
    struct inventory *inv, int64_t id, struct speed_group *g, char **cause)
{
	const char *what = "reading speed runs";
	sqlite3_stmt *st;
	int rc, r;

	if ((r = db_prepare(inv, &st,
		 "SELECT up_Bps, down_Bps, rtt_ms FROM speed "
		 "WHERE instance_id = ?",
		 what, cause, "I", id)) != 0)
		return r;
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		g->up = xreallocarray(g->up, g->n + 1, sizeof *g->up);
		g->down = xreallocarray(g->down, g->n + 1, sizeof *g->down);
		g->rtt = xreallocarray(g->rtt, g->n + 1, sizeof *g->rtt);
		g->up[g->n] = sqlite3_column_double(st, 0);
		g->down[g->n] = sqlite3_column_double(st, 1);
		g->rtt[g->n] = sqlite3_column_double(st, 2);
		g->n++;
	}
	r = db_finish(inv, st, rc, what, cause);
	return r < 0 ? r : 0;
}

/*
 * The medians per provider over the stored runs of the n instances of
 * list, in the order each provider first appears there; providers without
 * a run are left out. Free *out with speed_summary_free.
 */
int
speed_by_provider(struct inventory *inv, const struct instance *list, size_t n,
    struct speed_summary **out, size_t *nout, char **cause)
{
	struct speed_group *g = NULL;
	size_t ng = 0, i, j;
	int r = 0;

	*out = NULL;
	*nout = 0;
	for (i = 0; i < n && r == 0; i++) {
		for (j = 0; j < ng; j++) {
			if (strcmp(g[j].provider, list[i].provider) == 0)
				break;
		}
		if (j == ng) {
			g = xreallocarray(g, ng + 1, sizeof *g);
			memset(&g[ng], 0, sizeof *g);
			g[ng++].provider = list[i].provider;
		}
		r = load_runs(inv, list[i].id, &g[j], cause);
	}
	for (j = 0; j < ng; j++) {
		struct speed_summary *s;
		if (r == 0 && g[j].n > 0) {
			*out = xreallocarray(*out, *nout + 1, sizeof **out);
			s = &(*out)[(*nout)++];
			s->provider =
			    xstrdup(*g[j].provider != '\0' ? g[j].provider
							   : SPEED_NO_PROVIDER);
			s->median.up_Bps = speed_median(g[j].up, g[j].n);
			s->median.down_Bps = speed_median(g[j].down, g[j].n);
			s->median.rtt_ms = speed_median(g[j].rtt, g[j].n);
			s->median.size = 0;
			s->runs = g[j].n;
		}
		free(g[j].up);
		free(g[j].down);
		free(g[j].rtt);
	}
	free(g);
	if (r != 0) {
		speed_summary_free(*out, *nout);
		*out = NULL;
		*nout = 0;
	}
	return r;
}

void
speed_summary_free(struct speed_summary *v, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		free(v[i].provider);
	free(v);
}

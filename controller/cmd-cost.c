/*
 * What the fleet really cost, to the minor unit, under each platform's
 * billing rules: derived from every instance's price and ledger (never a
 * stored running total), with idle cost from the GPU samples, egress from
 * the network counters, unknown stretches billed as running and said so,
 * totals per currency, month to date and a projection to the end of the
 * month. As CSV for spreadsheets, and with --explain as a bill: each run
 * with its rounding, to check line by line against the platform's.
 */

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cmd.h"
#include "cost.h"
#include "ledger.h"
#include "speed.h"
#include "status.h"
#include "stoprequest.h"
#include "timeparse.h"
#include "watcher.h"
#include "xmalloc.h"

enum cost_by { BY_INSTANCE, BY_PROVIDER, BY_DAY };
enum cost_format { FMT_TABLE, FMT_CSV, FMT_JSON };

static int cmd_cost_exec(
    const struct cmd_entry *, struct cmd_ctx *, int, char **);
static int render_json(struct inventory *, const struct instance *, size_t,
    const struct cost_report *, char **);
static int unknown_json(struct inventory *, const struct cost_report *,
    const struct ledger_cost *, json_t **, char **);
static void render_instances(const struct cost_report *);
static void render_stops(struct inventory *, const struct instance *);
static int render_providers(struct inventory *, const struct instance *, size_t,
    const struct cost_report *, char **);
static int render_days(struct inventory *, const struct config *,
    const struct cost_report *, char **);
static int render_totals(
    struct inventory *, const struct cost_report *, int, char **);
static void csv_instances(const struct cost_report *);
static int csv_providers(const struct cost_report *, char **);
static int csv_days(struct inventory *, const struct config *,
    const struct cost_report *, char **);
static int render(struct inventory *, const struct config *,
    const struct instance *, size_t, const struct cost_report *, enum cost_by,
    enum cost_format, char **);
static int explain(struct inventory *, const struct config *,
    const struct instance *, size_t, int64_t, int64_t, int64_t,
    enum cost_format, char **);

const struct cmd_entry cmd_cost_entry = {
	.name = "cost",
	.usage = "[SELECTOR] [--since TIME] [--until TIME] "
		 "[--by instance|provider|day] [--explain] "
		 "[--format table|csv|json] [--json]",
	.summary = "what instances cost under their platforms' billing rules",
	.help =
	    "Per instance: running time, billed time after rounding, compute, "
	    "storage\nwhile stopped, egress, idle cost (billed time with every "
	    "GPU below\n[status] idle_util_percent, from samples; '?' without "
	    "samples), total.\nTotals per currency (never added across "
	    "currencies), month to date and\na projection to the end of the "
	    "month at the burn: the price of running\ninstances plus the "
	    "storage of stopped ones (egress not included). Shown\nparts add "
	    "up to shown totals (largest remainder rounding). An instance "
	    "with\nno price shows '?' and a total with one '12.30 CNY + ?'. "
	    "An instance\nthe ledger says is stopped that answered status "
	    "since is flagged\n'" INSTANCE_STILL_BILLING "'. A stretch "
	    "gpufleet cannot account for\n(unreachable) is billed as "
	    "running, in the cost, the burn and the\nguards, and said so "
	    "below the table, as is a stop that failed or is\nnot "
	    "confirmed yet (billed as running until the instance is seen "
	    "down).\nDefault window: this month.\nTIME: "
	    "2026-11-01T02:00:00Z, '2026-11-01 02:00', 2026-11-01,\n-2h, "
	    "yesterday, now.\n\n"
	    "      --since TIME, --until TIME   the window\n"
	    "      --by provider   per provider: cost, restarts, outages, "
	    "availability;\n"
	    "                      then the median speed per provider "
	    "(gpufleet speed)\n"
	    "      --by day        per day and currency\n"
	    "      --explain       a bill per instance: each run (start, stop, "
	    "duration,\n"
	    "                      billed units, minimum applied, price, "
	    "amount), each\n"
	    "                      stretch stopped (storage) or unknown, "
	    "egress, total;\n"
	    "                      over a price change, the units or time "
	    "at each price\n"
	    "      --format csv    RFC 4180 (CRLF) with a header row: exact "
	    "amounts in\n"
	    "                      major units, at least the currency's "
	    "decimals, empty\n"
	    "                      when unknown; times in UTC; text that a "
	    "spreadsheet\n"
	    "                      would run as a formula (= + - @) gets a "
	    "leading '\n"
	    "      --json          same as --format json: exact amounts in "
	    "minor units\n"
	    "                      (1/10000), null when unknown\n\n"
	    "Examples:\n"
	    "  gpufleet cost @train --since yesterday --until today\n"
	    "  gpufleet cost --by day --format csv > november.csv\n"
	    "  gpufleet cost a100-1 --explain --since 2026-11-01 --until "
	    "2026-11-02\n",
	.exec = cmd_cost_exec,
};

enum { OPT_SINCE = 256, OPT_UNTIL, OPT_BY, OPT_JSON, OPT_FORMAT, OPT_EXPLAIN };

static const struct option cost_options[] = {
	{ "since", required_argument, NULL, OPT_SINCE },
	{ "until", required_argument, NULL, OPT_UNTIL },
	{ "by", required_argument, NULL, OPT_BY },
	{ "json", no_argument, NULL, OPT_JSON },
	{ "format", required_argument, NULL, OPT_FORMAT },
	{ "explain", no_argument, NULL, OPT_EXPLAIN },
	{ "help", no_argument, NULL, 'h' },
	{ NULL, 0, NULL, 0 },
};

/* An instance's amount in minor units; null when it has no price. */
static json_t *
money_json(const struct ledger_cost *cr, money_t m)
{
	return cr == NULL || cr->priced ? json_integer(m) : json_null();
}

/* How many of the report's rows in currency have a price. */
static int
priced_in(const struct cost_report *rep, const char *currency)
{
	size_t i;
	int k = 0;

	for (i = 0; i < rep->n; i++)
		k += rep->rows[i].priced &&
		    strcmp(rep->rows[i].rule.currency, currency) == 0;
	return k;
}

/*
 * An amount as shown next to unpriced ones: "12.30 CNY + ?" when some of
 * what it sums has no price, "?" when none has. Caller frees.
 */
static char *
format_partial(money_t m, const char *currency, int unpriced, int priced)
{
	char *a, *s;

	if (priced == 0 && unpriced > 0)
		return xstrdup("?");
	a = billing_format(m, currency);
	if (unpriced == 0)
		return a;
	xasprintf(&s, "%s + ?", a);
	free(a);
	return s;
}

/*
 * The amounts of n items (stride bytes apart, the money_t at offset off,
 * currency() naming each one's) but those skip[] marks, rounded so that
 * per currency the shown ones add up to their shown sum. Caller frees.
 */
static money_t *
shown_by_currency(const void *base, size_t n, size_t stride, size_t off,
    const char *(*currency)(const void *), const int *skip)
{
	money_t *shown = xcalloc(n + 1, sizeof *shown), *parts, *out;
	size_t *idx = xcalloc(n + 1, sizeof *idx), i, j, k;
	const char *cur;

	parts = xcalloc(n + 1, sizeof *parts);
	out = xcalloc(n + 1, sizeof *out);
	for (i = 0; i < n; i++) {
		const char *item = (const char *)base + i * stride;
		money_t sum = 0;
		int first = 1;
		if (skip != NULL && skip[i])
			continue;
		cur = currency(item);
		for (j = 0; j < i && first; j++)
			first = (skip != NULL && skip[j]) ||
			    strcmp(currency((const char *)base + j * stride),
				cur) != 0;
		if (!first)
			continue;
		for (k = 0, j = i; j < n; j++) {
			const char *it = (const char *)base + j * stride;
			if ((skip != NULL && skip[j]) ||
			    strcmp(currency(it), cur) != 0)
				continue;
			memcpy(&parts[k], it + off, sizeof parts[k]);
			sum += parts[k];
			idx[k++] = j;
		}
		billing_round_parts(parts, k, billing_cents(sum), out);
		for (j = 0; j < k; j++)
			shown[idx[j]] = out[j];
	}
	free(parts);
	free(out);
	free(idx);
	return shown;
}

static const char *
row_currency(const void *p)
{
	return ((const struct ledger_cost *)p)->rule.currency;
}

static const char *
group_currency(const void *p)
{
	return ((const struct cost_group *)p)->currency;
}

static const char *
day_currency(const void *p)
{
	return ((const struct cost_day *)p)->currency;
}

/*
 * The name a row is shown by: a released instance's with when it was
 * released, so a name added again is not two rows of one name. Caller
 * frees.
 */
static char *
row_name(const struct ledger_cost *cr)
{
	char *when, *s;

	if (cr->in->released_at == 0)
		return xstrdup(cr->in->name);
	when = instance_format_time(cr->in->released_at);
	xasprintf(&s, "%s (released %s)", cr->in->name, when);
	free(when);
	return s;
}

/*
 * The unknown stretches of cr's row in rep's window, billed as running, as
 * a JSON array: start, stop, ongoing, window_s and why.
 */
static int
unknown_json(struct inventory *inv, const struct cost_report *rep,
    const struct ledger_cost *cr, json_t **out, char **cause)
{
	struct cost_unknown *u;
	size_t n, i;
	json_t *x;
	char *s;
	int r;

	*out = json_array();
	if (cr->total.unknown_secs == 0)
		return 0;
	if ((r = cost_unknown_stretches_from(inv, rep->books, cr->in, rep->from,
		 rep->to, rep->now, &u, &n, cause)) != 0) {
		json_decref(*out);
		return r;
	}
	for (i = 0; i < n; i++) {
		x = json_object();
		s = instance_format_time(u[i].start);
		json_object_set_new(x, "start", json_string(s));
		free(s);
		s = instance_format_time(u[i].end);
		json_object_set_new(x, "stop", json_string(s));
		free(s);
		json_object_set_new(x, "ongoing", json_boolean(u[i].ongoing));
		json_object_set_new(x, "window_s", json_integer(u[i].secs));
		json_object_set_new(x, "why", json_string(u[i].why));
		json_object_set_new(x, "billed_as", json_string("running"));
		json_array_append_new(*out, x);
	}
	free(u);
	return 0;
}

/*
 * One instance's row of --json; unknown (its unknown stretches, see
 * unknown_json) is taken.
 */
static json_t *
row_json(const struct ledger_cost *cr, json_t *unknown)
{
	json_t *x = json_object();

	char *released = cr->in->released_at != 0
	    ? instance_format_time(cr->in->released_at)
	    : NULL;

	json_object_set_new(x, "name", json_string(cr->in->name));
	json_object_set_new(x, "released_at",
	    released != NULL ? json_string(released) : json_null());
	free(released);
	json_object_set_new(x, "provider", json_string(cr->in->provider));
	json_object_set_new(x, "currency", json_string(cr->rule.currency));
	json_object_set_new(x, "priced", json_boolean(cr->priced));
	json_object_set_new(
	    x, "running_s", json_integer(cr->total.running_secs));
	json_object_set_new(x, "billed_s", json_integer(cr->total.billed_secs));
	json_object_set_new(
	    x, "stopped_s", json_integer(cr->total.stopped_secs));
	json_object_set_new(
	    x, "unknown_s", json_integer(cr->total.unknown_secs));
	json_object_set_new(x, "starts", json_integer(cr->total.starts));
	json_object_set_new(x, "compute", money_json(cr, cr->total.compute));
	json_object_set_new(x, "storage", money_json(cr, cr->total.storage));
	json_object_set_new(x, "egress", money_json(cr, cr->egress));
	json_object_set_new(x, "idle",
	    isnan(cr->idle_frac) ? json_null() : money_json(cr, cr->idle));
	json_object_set_new(x, "total", money_json(cr, cr->amount));
	json_object_set_new(x, "burn_per_hour",
	    money_json(cr, cost_hourly(cost_burn_per_day(cr))));
	json_object_set_new(x, "restarts", json_integer(cr->restarts));
	json_object_set_new(x, "outages", json_integer(cr->outages));
	json_object_set_new(
	    x, "still_billing", json_boolean(instance_still_billing(cr->in)));
	/* Billed as running, in compute: what it cost and why. */
	json_object_set_new(
	    x, "unknown_compute", money_json(cr, cr->total.unknown));
	json_object_set_new(x, "unknown_stretches", unknown);
	return x;
}

/*
 * The medians per provider of the stored speed runs of the n instances of
 * list, as cost --by provider shows them below its table.
 */
static int
speed_json(struct inventory *inv, const struct instance *list, size_t n,
    json_t **out, char **cause)
{
	struct speed_summary *sv;
	size_t ns, i;
	json_t *x;
	int r;

	if ((r = speed_by_provider(inv, list, n, &sv, &ns, cause)) != 0)
		return r;
	*out = json_array();
	for (i = 0; i < ns; i++) {
		x = json_object();
		json_object_set_new(x, "provider",
		    json_string(strcmp(sv[i].provider, SPEED_NO_PROVIDER) == 0
			    ? ""
			    : sv[i].provider));
		json_object_set_new(x, "download_Bps",
		    json_integer(llround(sv[i].median.down_Bps)));
		json_object_set_new(x, "upload_Bps",
		    json_integer(llround(sv[i].median.up_Bps)));
		json_object_set_new(
		    x, "rtt_ms", json_real(sv[i].median.rtt_ms));
		json_object_set_new(
		    x, "runs", json_integer((json_int_t)sv[i].runs));
		json_array_append_new(*out, x);
	}
	speed_summary_free(sv, ns);
	return 0;
}

/*
 * The window, every instance, the totals and the speed medians per provider
 * as one JSON object.
 */
static int
render_json(struct inventory *inv, const struct instance *list, size_t n,
    const struct cost_report *rep, char **cause)
{
	json_t *o, *arr, *tot, *w, *speed, *unknown;
	char *s1, *s2;
	size_t i;
	int unpriced = 0, r;

	if ((r = speed_json(inv, list, n, &speed, cause)) != 0)
		return r;
	arr = json_array();
	for (i = 0; i < rep->n; i++) {
		if ((r = unknown_json(
			 inv, rep, &rep->rows[i], &unknown, cause)) != 0) {
			json_decref(arr);
			json_decref(speed);
			return r;
		}
		json_array_append_new(arr, row_json(&rep->rows[i], unknown));
	}
	o = json_object();
	tot = json_array();
	w = json_object();
	s1 = instance_format_time(rep->from);
	s2 = instance_format_time(rep->to);

	json_object_set_new(w, "since", json_string(s1));
	json_object_set_new(w, "until", json_string(s2));
	free(s1);
	free(s2);
	json_object_set_new(o, "window", w);
	json_object_set_new(
	    o, "minor_per_unit", json_integer(BILLING_MINOR_PER_UNIT));
	for (i = 0; i < rep->ntotals; i++) {
		const struct cost_total *ct = &rep->totals[i];
		json_t *x = json_object();
		json_object_set_new(x, "currency", json_string(ct->currency));
		json_object_set_new(x, "total", money_json(NULL, ct->amount));
		json_object_set_new(
		    x, "burn_per_hour", money_json(NULL, ct->burn_per_hour));
		if (rep->projecting)
			json_object_set_new(x, "projected_month_end",
			    money_json(NULL, ct->projected));
		json_object_set_new(
		    x, "burn_per_day", money_json(NULL, ct->burn_per_day));
		json_object_set_new(x, "unpriced", json_integer(ct->unpriced));
		unpriced += ct->unpriced;
		json_array_append_new(tot, x);
	}
	json_object_set_new(o, "instances", arr);
	json_object_set_new(o, "totals", tot);
	json_object_set_new(o, "speed_by_provider", speed);
	json_object_set_new(o, "unpriced_instances", json_integer(unpriced));
	json_print(o, stdout);
	return 0;
}

/*
 * The table of instances. Each currency's rows are rounded to add up to
 * its shown total, and each row's compute, storage and egress to add up
 * to its shown total (largest remainder); unpriced rows show '?'.
 */
static void
render_instances(const struct cost_report *rep)
{
	struct table *t;
	money_t *rowshown, parts[3], cols[3];
	int *skip = xcalloc(rep->n + 1, sizeof *skip);
	size_t i;

	for (i = 0; i < rep->n; i++)
		skip[i] = !rep->rows[i].priced;
	rowshown = shown_by_currency(rep->rows, rep->n, sizeof *rep->rows,
	    offsetof(struct ledger_cost, amount), row_currency, skip);
	t = table_new(10, "NAME", "PROVIDER", "RUNNING", "BILLED", "UNKNOWN",
	    "COMPUTE", "STORAGE", "EGRESS", "IDLE", "TOTAL");
	for (i = 0; i < rep->n; i++) {
		const struct ledger_cost *cr = &rep->rows[i];
		char *a, *b, *c2, *d, *f, *g, *idle, *tot, *name;
		a = timeparse_duration(cr->total.running_secs);
		b = timeparse_duration(cr->total.billed_secs);
		c2 = cr->total.unknown_secs
		    ? timeparse_duration(cr->total.unknown_secs)
		    : NULL;
		parts[0] = cr->total.compute;
		parts[1] = cr->total.storage;
		parts[2] = cr->egress;
		billing_round_parts(parts, 3, rowshown[i], cols);
		if (!cr->priced) {
			d = xstrdup("?");
			f = xstrdup("?");
			g = xstrdup("?");
		} else {
			d = billing_format(cols[0], NULL);
			f = billing_format(cols[1], NULL);
			g = billing_format(cols[2], NULL);
		}
		if (isnan(cr->idle_frac) || !cr->priced)
			idle = xstrdup("?");
		else {
			char *m = billing_format(cr->idle, NULL);
			xasprintf(&idle, "%s (%.0f%%)", m, cr->idle_frac * 100);
			free(m);
		}
		if (cr->priced)
			tot = billing_format(rowshown[i], cr->rule.currency);
		else
			tot = xstrdup("? (no price)");
		name = row_name(cr);
		table_add(
		    t, name, cr->in->provider, a, b, c2, d, f, g, idle, tot);
		free(name);
		free(a);
		free(b);
		free(c2);
		free(d);
		free(f);
		free(g);
		free(idle);
		free(tot);
	}
	table_print(t, stdout);
	table_free(t);
	free(rowshown);
	free(skip);
}

/*
 * The table of providers, one row per provider and currency, then the
 * median speed per provider of the instances of list (gpufleet speed).
 */
static int
render_providers(struct inventory *inv, const struct instance *list,
    size_t nlist, const struct cost_report *rep, char **cause)
{
	struct cost_group *v;
	struct speed_summary *sv;
	struct table *t;
	money_t *shown;
	size_t n, i, ns;
	char *line;
	int r;

	if ((r = cost_by_provider(rep, &v, &n, cause)) != 0)
		return r;
	shown = shown_by_currency(v, n, sizeof *v,
	    offsetof(struct cost_group, amount), group_currency, NULL);
	t = table_new(7, "PROVIDER", "INSTANCES", "RUNNING", "TOTAL",
	    "RESTARTS", "OUTAGES", "AVAILABILITY");
	for (i = 0; i < n; i++) {
		const struct cost_group *g = &v[i];
		char cs[16], rss[16], os[16], av[32], *a, *b;
		int64_t seen = g->running_secs + g->unknown_secs;
		snprintf(cs, sizeof cs, "%d", g->instances);
		snprintf(rss, sizeof rss, "%d", g->restarts);
		snprintf(os, sizeof os, "%d", g->outages);
		if (seen > 0)
			snprintf(av, sizeof av, "%.2f%%",
			    100.0 * g->running_secs / seen);
		else
			snprintf(av, sizeof av, "-");
		a = timeparse_duration(g->running_secs);
		b = format_partial(shown[i], g->currency, g->unpriced,
		    g->instances - g->unpriced);
		table_add(t, g->provider, cs, a, b, rss, os, av);
		free(a);
		free(b);
	}
	table_print(t, stdout);
	table_free(t);
	free(shown);
	free(v);
	if ((r = speed_by_provider(inv, list, nlist, &sv, &ns, cause)) != 0)
		return r;
	for (i = 0; i < ns; i++) {
		line = speed_format_summary(&sv[i]);
		printf("%s%s: %s\n", i == 0 ? "speed (median):\n  " : "  ",
		    sv[i].provider, line);
		free(line);
	}
	speed_summary_free(sv, ns);
	return 0;
}

/* The table of days. */
static int
render_days(struct inventory *inv, const struct config *cf,
    const struct cost_report *rep, char **cause)
{
	struct cost_day *v;
	struct table *t;
	money_t *shown;
	size_t n, i;
	int r;

	if ((r = cost_by_day(inv, cf, rep, &v, &n, cause)) != 0)
		return r;
	shown = shown_by_currency(v, n, sizeof *v,
	    offsetof(struct cost_day, amount), day_currency, NULL);
	t = table_new(2, "DAY", "TOTAL");
	for (i = 0; i < n; i++) {
		char *a = format_partial(shown[i], v[i].currency, v[i].unpriced,
		    priced_in(rep, v[i].currency));
		table_add(t, v[i].day, a);
		free(a);
	}
	table_print(t, stdout);
	table_free(t);
	free(shown);
	free(v);
	return 0;
}

/*
 * The note under the table for cr's unknown stretches in rep's window:
 * "a100-2: 25m unknown (unreachable since T) billed as running, 2.24 CNY:
 * gpufleet does not know it stopped".
 */
static int
render_unknown(struct inventory *inv, const struct cost_report *rep,
    const struct ledger_cost *cr, char **cause)
{
	struct cost_unknown *u, *last;
	char *d, *a, *b, *when, *what, *m, *name;
	size_t n;
	int r;

	if ((r = cost_unknown_stretches_from(inv, rep->books, cr->in, rep->from,
		 rep->to, rep->now, &u, &n, cause)) != 0)
		return r;
	if (n == 0) {
		free(u);
		return 0;
	}
	last = &u[n - 1];
	a = instance_format_time(last->start);
	b = instance_format_time(last->end);
	if (last->ongoing)
		xasprintf(&when, "%s since %s", last->why, a);
	else
		xasprintf(&when, "%s from %s to %s", last->why, a, b);
	if (n > 1)
		xasprintf(&what, "in %zu stretches (the last %s)", n, when);
	else
		xasprintf(&what, "(%s)", when);
	m = cr->priced ? billing_format(cr->total.unknown, cr->rule.currency)
		       : NULL;
	d = timeparse_duration(cr->total.unknown_secs);
	name = row_name(cr);
	printf("%s: %s unknown %s billed as running%s%s: gpufleet does not "
	       "know it stopped\n",
	    name, d, what, m != NULL ? ", " : "", m != NULL ? m : "");
	free(name);
	free(d);
	free(m);
	free(what);
	free(when);
	free(b);
	free(a);
	free(u);
	return 0;
}

/*
 * "total ... month to date; burning .../h, projected ..." per currency,
 * then how many instances have no price, those still billing and what
 * was billed as running for not knowing.
 */
static int
render_totals(struct inventory *inv, const struct cost_report *rep, int month,
    char **cause)
{
	size_t i;
	int unpriced = 0, r;

	for (i = 0; i < rep->ntotals; i++) {
		const struct cost_total *ct = &rep->totals[i];
		int priced = priced_in(rep, ct->currency);
		char *a = format_partial(
			 ct->amount, ct->currency, ct->unpriced, priced),
		     *b, *c;
		printf("total %s", a);
		free(a);
		if (month && rep->projecting) {
			b = format_partial(
			    ct->projected, ct->currency, ct->unpriced, priced);
			c = billing_format(ct->burn_per_hour, ct->currency);
			printf(" month to date; burning %s/h, projected %s by "
			       "the end of the month",
			    c, b);
			free(b);
			free(c);
		}
		printf("\n");
		unpriced += ct->unpriced;
	}
	if (unpriced > 0)
		printf("%d instance%s no price: '?' above (gpufleet set NAME "
		       "price=...)\n",
		    unpriced, unpriced == 1 ? " has" : "s have");
	for (i = 0; i < rep->n; i++) {
		if (instance_still_billing(rep->rows[i].in))
			printf("%s: " INSTANCE_STILL_BILLING
			       " (costed as stopped)\n",
			    rep->rows[i].in->name);
	}
	for (i = 0; i < rep->n; i++) {
		if (rep->rows[i].total.unknown_secs > 0 &&
		    (r = render_unknown(inv, rep, &rep->rows[i], cause)) != 0)
			return r;
	}
	for (i = 0; i < rep->n; i++)
		render_stops(inv, rep->rows[i].in);
	return 0;
}

/*
 * The stops of in that the books do not take (LEDGER.md): one that
 * failed (an alert: it still runs and bills) and one not confirmed yet
 * (billed as running until it is seen down).
 */
static void
render_stops(struct inventory *inv, const struct instance *in)
{
	struct watcher_alert *a;
	struct stoprequest *q;
	char *cause = NULL, *when;
	size_t n, i;

	if (watcher_alerts(inv, in->id, &a, &n, &cause) == 0) {
		for (i = 0; i < n; i++) {
			if (strcmp(a[i].kind, "stop_failed") != 0)
				continue;
			when = instance_format_time(a[i].t);
			printf(
			    "%s: the stop %s failed at %s: it still runs and "
			    "is billed as running (gpufleet status %s)\n",
			    in->name,
			    a[i].deadline != NULL ? a[i].deadline : "-", when,
			    in->name);
			free(when);
		}
		watcher_alerts_free(a, n);
	} else {
		free(cause);
		cause = NULL;
	}
	if (stoprequest_list(inv, in->id, 0, &q, &n, &cause) != 0) {
		free(cause);
		return;
	}
	for (i = 0; i < n; i++) {
		if (strcmp(q[i].state, "requested") != 0)
			continue;
		when = instance_format_time(q[i].requested_at);
		printf("%s: stopping (unconfirmed, since %s): stop %s (%s) is "
		       "billed as running until it is seen down\n",
		    in->name, when, q[i].fire_id, q[i].cause);
		free(when);
	}
	stoprequest_list_free(q, n);
}

/* An exact amount for CSV (major units), empty when unknown. Caller frees. */
static char *
csv_money(money_t m, const char *currency, int known)
{
	return known ? billing_format_major(m, currency) : NULL;
}

/* An integer as text. Caller frees. */
static char *
csv_int(int64_t v)
{
	char *s;

	xasprintf(&s, "%lld", (long long)v);
	return s;
}

/* The instances as CSV: one record each, exact amounts. */
static void
csv_instances(const struct cost_report *rep)
{
	size_t i, k;

	csv_row(stdout, 17, "name", "released_at", "provider", "currency",
	    "priced", "running_s", "billed_s", "stopped_s", "unknown_s",
	    "starts", "compute", "storage", "egress", "idle", "total",
	    "restarts", "outages");
	for (i = 0; i < rep->n; i++) {
		const struct ledger_cost *c = &rep->rows[i];
		const char *cur = c->rule.currency;
		char *v[17];

		v[0] = xstrdup(c->in->name);
		v[1] = c->in->released_at != 0
		    ? instance_format_time(c->in->released_at)
		    : NULL;
		v[2] = xstrdup(c->in->provider);
		v[3] = xstrdup(cur);
		v[4] = xstrdup(c->priced ? "yes" : "no");
		v[5] = csv_int(c->total.running_secs);
		v[6] = csv_int(c->total.billed_secs);
		v[7] = csv_int(c->total.stopped_secs);
		v[8] = csv_int(c->total.unknown_secs);
		v[9] = csv_int(c->total.starts);
		v[10] = csv_money(c->total.compute, cur, c->priced);
		v[11] = csv_money(c->total.storage, cur, c->priced);
		v[12] = csv_money(c->egress, cur, c->priced);
		v[13] =
		    csv_money(c->idle, cur, c->priced && !isnan(c->idle_frac));
		v[14] = csv_money(c->amount, cur, c->priced);
		v[15] = csv_int(c->restarts);
		v[16] = csv_int(c->outages);
		csv_row(stdout, 17, v[0], v[1], v[2], v[3], v[4], v[5], v[6],
		    v[7], v[8], v[9], v[10], v[11], v[12], v[13], v[14], v[15],
		    v[16]);
		for (k = 0; k < 17; k++)
			free(v[k]);
	}
}

/* The providers as CSV, one record per provider and currency. */
static int
csv_providers(const struct cost_report *rep, char **cause)
{
	struct cost_group *v;
	size_t n, i, k;
	int r;

	if ((r = cost_by_provider(rep, &v, &n, cause)) != 0)
		return r;
	csv_row(stdout, 10, "provider", "currency", "instances", "unpriced",
	    "running_s", "unknown_s", "total", "restarts", "outages",
	    "availability_percent");
	for (i = 0; i < n; i++) {
		const struct cost_group *g = &v[i];
		int64_t seen = g->running_secs + g->unknown_secs;
		char *f[10];

		f[0] = xstrdup(g->provider);
		f[1] = xstrdup(g->currency);
		f[2] = csv_int(g->instances);
		f[3] = csv_int(g->unpriced);
		f[4] = csv_int(g->running_secs);
		f[5] = csv_int(g->unknown_secs);
		f[6] = csv_money(
		    g->amount, g->currency, g->instances > g->unpriced);
		f[7] = csv_int(g->restarts);
		f[8] = csv_int(g->outages);
		f[9] = NULL;
		if (seen > 0)
			xasprintf(&f[9], "%.2f",
			    100.0 * (double)g->running_secs / (double)seen);
		csv_row(stdout, 10, f[0], f[1], f[2], f[3], f[4], f[5], f[6],
		    f[7], f[8], f[9]);
		for (k = 0; k < 10; k++)
			free(f[k]);
	}
	free(v);
	return 0;
}

/* The days as CSV, one record per day and currency. */
static int
csv_days(struct inventory *inv, const struct config *cf,
    const struct cost_report *rep, char **cause)
{
	struct cost_day *v;
	size_t n, i;
	int r;

	if ((r = cost_by_day(inv, cf, rep, &v, &n, cause)) != 0)
		return r;
	csv_row(stdout, 4, "day", "currency", "total", "unpriced");
	for (i = 0; i < n; i++) {
		char *a = csv_money(v[i].amount, v[i].currency,
			 priced_in(rep, v[i].currency) > 0),
		     *u = csv_int(v[i].unpriced);
		csv_row(stdout, 4, v[i].day, v[i].currency, a, u);
		free(a);
		free(u);
	}
	free(v);
	return 0;
}

/*
 * How a bill's line is shown and written: its times, what it was billed
 * and its amount, as text (exact amounts); NULL fields are empty. ongoing:
 * it goes on, counted up to now.
 */
struct explain_cells {
	char *start, *stop, *state, *duration, *billed, *minimum, *price;
	char *amount;
	int ongoing;
};

/* The unit's name for n of them: "1 hour", "10 minutes". */
static char *
units_text(int64_t n, enum billing_unit unit)
{
	char *s;

	xasprintf(&s, "%lld %s%s", (long long)n, billing_unit_name(unit),
	    n == 1 ? "" : "s");
	return s;
}

/*
 * The pieces of line k of a bill: those from *at on naming it; *at moves
 * past them.
 */
static const struct billing_piece *
pieces_of(
    const struct billing_piece *pc, size_t npc, size_t k, size_t *at, size_t *n)
{
	size_t first = *at;

	while (*at < npc && pc[*at].line == k)
		(*at)++;
	*n = *at - first;
	return *n > 0 ? pc + first : NULL;
}

/* A piece's price: a run's per its period, storage per day. */
static char *
piece_price(const struct billing_line *l, const struct billing_piece *pc)
{
	if (l->state != BILL_STOPPED)
		return billing_format_price(pc->rule.price, pc->rule.price_per);
	return billing_format_price(pc->rule.stopped_per_day, BILL_PER_DAY);
}

/*
 * The price of a line: its one price, or with pieces at several (a price
 * change), each with how much was charged at it: "60 at 2.69/h + 51 at
 * 2.28/h" (billed units), "4h00m00s at 1.20/day + ..." (stopped time).
 * NULL for storage at no price.
 */
static char *
line_price(const struct billing_line *l, const struct billing_piece *pc,
    size_t npc, const struct billing_rule *rule)
{
	char *s = NULL, *t, *p, *q;
	size_t i;

	if (npc <= 1) {
		if (l->state != BILL_STOPPED)
			return billing_format_price(
			    rule->price, rule->price_per);
		if (rule->stopped_per_day > 0)
			return billing_format_price(
			    rule->stopped_per_day, BILL_PER_DAY);
		return NULL;
	}
	for (i = 0; i < npc; i++) {
		p = piece_price(l, &pc[i]);
		if (l->state != BILL_STOPPED)
			xasprintf(&q, "%lld", (long long)pc[i].units);
		else
			q = timeparse_duration_exact(pc[i].secs);
		t = s;
		xasprintf(&s, "%s%s%s at %s", t != NULL ? t : "",
		    t != NULL ? " + " : "", q, p);
		free(t);
		free(p);
		free(q);
	}
	return s;
}

/*
 * The cells of line l of c's bill in a window ending at cut (the window
 * end, or now if sooner), pc its npc pieces (the first's rule in force at
 * its start).
 */
static void
explain_cells(const struct ledger_cost *c, const struct billing_line *l,
    const struct billing_piece *pc, size_t npc, int64_t cut, int64_t now,
    struct explain_cells *x)
{
	const struct billing_rule *rule = npc > 0 ? &pc[0].rule : &c->rule;
	const char *cur = c->rule.currency;
	char *a, *b;

	memset(x, 0, sizeof *x);
	x->start = instance_format_time(l->start);
	x->stop = instance_format_time(l->end);
	x->ongoing = l->end >= cut && cut == now;
	x->duration = timeparse_duration_exact(l->secs);
	switch (l->state) {
	case BILL_RUNNING:
	case BILL_UNKNOWN: /* billed as running */
		x->state =
		    xstrdup(l->state == BILL_RUNNING ? "running" : "unknown");
		x->billed = units_text(l->units, rule->unit);
		x->minimum = l->min_applied
		    ? timeparse_duration_exact(rule->min_billed)
		    : NULL;
		x->price = line_price(l, pc, npc, rule);
		break;
	case BILL_STOPPED:
		x->state = xstrdup("stopped");
		x->price = line_price(l, pc, npc, rule);
		break;
	}
	if (!c->priced) {
		free(x->price);
		x->price = xstrdup("?");
		x->amount = xstrdup("?");
		return;
	}
	x->amount = billing_format_major(l->amount, cur);
	if (l->before != 0) {
		a = x->amount;
		b = billing_format_major(l->before, cur);
		xasprintf(&x->amount, "%s (%s before the window)", a, b);
		free(a);
		free(b);
	}
}

static void
explain_cells_free(struct explain_cells *x)
{
	free(x->start);
	free(x->stop);
	free(x->state);
	free(x->duration);
	free(x->billed);
	free(x->minimum);
	free(x->price);
	free(x->amount);
}

/*
 * Whether a piece of the bill was charged under other prices than now: a
 * run's price, unit or minimum, or a stretch stopped's storage price.
 */
static int
earlier_prices(const struct ledger_cost *c, const struct billing_line *lines,
    const struct billing_piece *pc, size_t npc)
{
	const struct billing_rule *now = &c->rule, *r;
	size_t i;

	for (i = 0; i < npc; i++) {
		r = &pc[i].rule;
		if (lines[pc[i].line].state == BILL_STOPPED) {
			if (r->stopped_per_day != now->stopped_per_day)
				return 1;
		} else if (r->price != now->price ||
		    r->price_per != now->price_per || r->unit != now->unit ||
		    r->min_billed != now->min_billed)
			return 1;
	}
	return 0;
}

/*
 * The rule a bill is made under: "2.69 CNY/h, billed per minute, minimum
 * 10m00s, stopped 1.20 CNY/day", the price now; if lines were charged
 * under earlier prices, it says so (their PRICE shows them). Caller frees.
 */
static char *
explain_rule(const struct ledger_cost *c, const struct billing_line *lines,
    const struct billing_piece *pc, size_t npc)
{
	const struct billing_rule *rule = &c->rule;
	char *p, *m = NULL, *st = NULL, *s, *t;

	if (!c->priced) {
		xasprintf(
		    &s, "no price (gpufleet set %s price=...)", c->in->name);
		return s;
	}
	p = billing_format_exact(rule->price);
	if (rule->min_billed > 0)
		m = timeparse_duration_exact(rule->min_billed);
	if (rule->stopped_per_day > 0)
		st = billing_format_exact(rule->stopped_per_day);
	xasprintf(&s, "%s %s/%s, billed per %s%s%s%s%s%s%s%s", p,
	    rule->currency, billing_per_name(rule->price_per),
	    billing_unit_name(rule->unit), m != NULL ? ", minimum " : "",
	    m != NULL ? m : "", st != NULL ? ", stopped " : "",
	    st != NULL ? st : "", st != NULL ? " " : "",
	    st != NULL ? rule->currency : "", st != NULL ? "/day" : "");
	free(p);
	free(m);
	free(st);
	if (earlier_prices(c, lines, pc, npc)) {
		t = s;
		xasprintf(&s,
		    "%s (now; lines show the prices they were "
		    "charged at)",
		    t);
		free(t);
	}
	return s;
}

/* The egress price as set: "0.80/GB". Caller frees. */
static char *
egress_price(const struct ledger_cost *c)
{
	char *a = billing_format_exact(c->rule.egress_per_gb), *s;

	xasprintf(&s, "%s/GB", a);
	free(a);
	return s;
}

/*
 * Why gpufleet does not know what unknown line l was: its stretch's why
 * among the n of u ("unreachable").
 */
static const char *
line_why(const struct billing_line *l, const struct cost_unknown *u, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++) {
		if (u[i].start == l->start)
			return u[i].why;
	}
	return "unknown";
}

/* One instance's bill for humans; u its n unknown stretches. */
static void
explain_text(const struct ledger_cost *c, const struct billing_line *lines,
    size_t n, const struct billing_piece *pc, size_t npc, money_t sum,
    int64_t cut, int64_t now, const struct cost_unknown *u, size_t nu)
{
	const struct billing_piece *lp;
	struct explain_cells x;
	struct table *t;
	char *rule = explain_rule(c, lines, pc, npc), *name = row_name(c), *a,
	     *b, *g;
	size_t i, at = 0, nlp;

	printf("%s%s%s: %s\n", name, *c->in->provider != '\0' ? " on " : "",
	    c->in->provider, rule);
	free(rule);
	free(name);
	t = table_new(8, "START", "STOP", "STATE", "DURATION", "BILLED",
	    "MINIMUM", "PRICE", "AMOUNT");
	for (i = 0; i < n; i++) {
		lp = pieces_of(pc, npc, i, &at, &nlp);
		explain_cells(c, &lines[i], lp, nlp, cut, now, &x);
		table_add(t, x.start, x.ongoing ? "now" : x.stop, x.state,
		    x.duration, x.billed, x.minimum, x.price, x.amount);
		explain_cells_free(&x);
	}
	table_print(t, stdout);
	table_free(t);
	if (n == 0)
		printf("(nothing in the window)\n");
	for (i = 0; i < n; i++) {
		if (lines[i].state != BILL_UNKNOWN)
			continue;
		a = instance_format_time(lines[i].start);
		b = instance_format_time(lines[i].end);
		if (lines[i].end >= cut && cut == now)
			printf("unknown since %s: %s, billed as running: "
			       "gpufleet does not know it stopped\n",
			    a, line_why(&lines[i], u, nu));
		else
			printf("unknown from %s to %s: %s, billed as running: "
			       "gpufleet does not know it stopped\n",
			    a, b, line_why(&lines[i], u, nu));
		free(a);
		free(b);
	}
	if (c->egress_bytes > 0 || c->egress != 0) {
		g = c->priced ? egress_price(c) : xstrdup("?");
		a = c->priced
		    ? billing_format_major(c->egress, c->rule.currency)
		    : xstrdup("?");
		printf("egress %lld bytes at %s: %s\n",
		    (long long)c->egress_bytes, g, a);
		free(a);
		free(g);
	}
	if (!c->priced) {
		printf("total ? (no price)\n");
		return;
	}
	a = billing_format(sum, c->rule.currency);
	b = billing_format_major(sum, c->rule.currency);
	if (billing_cents(sum) == sum)
		printf("total %s\n", a);
	else
		printf("total %s (exactly %s)\n", a, b);
	free(a);
	free(b);
}

/* One instance's bill as a JSON object; u its nu unknown stretches. */
static json_t *
explain_json(const struct ledger_cost *c, const struct billing_line *lines,
    size_t n, const struct billing_piece *pc, size_t npc, money_t sum,
    int64_t cut, int64_t now, const struct cost_unknown *u, size_t nu)
{
	const struct billing_rule *rule = &c->rule;
	const struct billing_piece *lp;
	json_t *o = json_object(), *r = json_object(), *arr = json_array(),
	       *e = json_object(), *ps, *pj;
	struct explain_cells x;
	size_t i, k, at = 0, nlp;
	char *s;

	json_object_set_new(o, "name", json_string(c->in->name));
	json_object_set_new(o, "provider", json_string(c->in->provider));
	json_object_set_new(o, "currency", json_string(rule->currency));
	json_object_set_new(o, "priced", json_boolean(c->priced));
	json_object_set_new(r, "price", money_json(c, rule->price));
	json_object_set_new(
	    r, "per", json_string(billing_per_name(rule->price_per)));
	json_object_set_new(
	    r, "unit", json_string(billing_unit_name(rule->unit)));
	json_object_set_new(r, "min_billed_s", json_integer(rule->min_billed));
	json_object_set_new(
	    r, "stopped_per_day", money_json(c, rule->stopped_per_day));
	json_object_set_new(
	    r, "egress_per_gb", money_json(c, rule->egress_per_gb));
	json_object_set_new(o, "rule", r);
	for (i = 0; i < n; i++) {
		const struct billing_line *l = &lines[i];
		json_t *j = json_object();
		lp = pieces_of(pc, npc, i, &at, &nlp);
		explain_cells(c, l, lp, nlp, cut, now, &x);
		/* A line billed as part of the run before it, and why. */
		json_object_set_new(
		    j, "continues_run", json_boolean(l->continues));
		if (l->state == BILL_UNKNOWN) {
			json_object_set_new(
			    j, "why", json_string(line_why(l, u, nu)));
			json_object_set_new(
			    j, "billed_as", json_string("running"));
		}
		/* What it was charged at first (the lines' figures follow). */
		if (l->state != BILL_STOPPED && nlp > 0)
			json_object_set_new(j, "unit",
			    json_string(billing_unit_name(lp[0].rule.unit)));
		ps = json_array();
		for (k = 0; k < nlp; k++) {
			pj = json_object();
			s = instance_format_time(lp[k].start);
			json_object_set_new(pj, "start", json_string(s));
			free(s);
			json_object_set_new(
			    pj, "secs", json_integer(lp[k].secs));
			if (l->state != BILL_STOPPED) {
				json_object_set_new(
				    pj, "units", json_integer(lp[k].units));
				json_object_set_new(pj, "price",
				    money_json(c, lp[k].rule.price));
				json_object_set_new(pj, "per",
				    json_string(billing_per_name(
					lp[k].rule.price_per)));
			} else {
				json_object_set_new(pj, "price",
				    money_json(c, lp[k].rule.stopped_per_day));
				json_object_set_new(pj, "per",
				    json_string(
					billing_per_name(BILL_PER_DAY)));
			}
			json_array_append_new(ps, pj);
		}
		json_object_set_new(j, "pieces", ps);
		json_object_set_new(j, "state", json_string(x.state));
		json_object_set_new(j, "start", json_string(x.start));
		json_object_set_new(j, "stop", json_string(x.stop));
		json_object_set_new(j, "ongoing", json_boolean(x.ongoing));
		json_object_set_new(j, "duration_s", json_integer(l->secs));
		json_object_set_new(
		    j, "window_s", json_integer(l->window_secs));
		json_object_set_new(
		    j, "billed_s", json_integer(l->billed_secs));
		json_object_set_new(j, "units", json_integer(l->units));
		json_object_set_new(
		    j, "minimum_applied", json_boolean(l->min_applied));
		json_object_set_new(j, "charge", money_json(c, l->charge));
		json_object_set_new(
		    j, "before_window", money_json(c, l->before));
		json_object_set_new(j, "amount", money_json(c, l->amount));
		json_array_append_new(arr, j);
		explain_cells_free(&x);
	}
	json_object_set_new(o, "lines", arr);
	json_object_set_new(e, "bytes", json_integer(c->egress_bytes));
	json_object_set_new(e, "amount", money_json(c, c->egress));
	json_object_set_new(o, "egress", e);
	json_object_set_new(o, "total", money_json(c, sum));
	return o;
}

/* One instance's bill as CSV records (no header). */
static void
explain_csv(const struct ledger_cost *c, const struct billing_line *lines,
    size_t n, const struct billing_piece *pc, size_t npc, int64_t from,
    int64_t to, int64_t cut, int64_t now)
{
	const char *cur = c->rule.currency;
	const struct billing_piece *lp;
	struct explain_cells x;
	char *v[7];
	size_t i, k, at = 0, nlp;

	for (i = 0; i < n; i++) {
		const struct billing_line *l = &lines[i];
		lp = pieces_of(pc, npc, i, &at, &nlp);
		explain_cells(c, l, lp, nlp, cut, now, &x);
		v[0] = csv_int(l->secs);
		v[1] = csv_int(l->window_secs);
		v[2] =
		    l->state != BILL_STOPPED ? csv_int(l->billed_secs) : NULL;
		v[3] = l->state != BILL_STOPPED ? csv_int(l->units) : NULL;
		v[4] = csv_money(l->amount, cur, c->priced);
		v[5] = csv_money(l->before, cur, c->priced);
		v[6] = c->priced && x.price != NULL ? xstrdup(x.price) : NULL;
		csv_row(stdout, 14, c->in->name, x.state, x.start, x.stop, v[0],
		    v[1],
		    l->state != BILL_STOPPED
			? billing_unit_name(
			      (nlp > 0 ? &lp[0].rule : &c->rule)->unit)
			: NULL,
		    v[2], v[3],
		    l->state != BILL_STOPPED ? (l->min_applied ? "yes" : "no")
					     : NULL,
		    v[6], cur, v[4], v[5]);
		explain_cells_free(&x);
		for (k = 0; k < 7; k++)
			free(v[k]);
	}
	if (c->egress_bytes > 0 || c->egress != 0) {
		v[0] = instance_format_time(from);
		v[1] = instance_format_time(to);
		v[2] = c->priced ? egress_price(c) : NULL;
		v[3] = csv_money(c->egress, cur, c->priced);
		v[4] = csv_money(0, cur, c->priced);
		csv_row(stdout, 14, c->in->name, "egress", v[0], v[1], NULL,
		    NULL, NULL, NULL, NULL, NULL, v[2], cur, v[3], v[4]);
		for (k = 0; k < 5; k++)
			free(v[k]);
	}
}

/*
 * Each instance's bill over [from, to): the lines billing_window sums, so
 * each total is what cost says for the window.
 */
static int
explain(struct inventory *inv, const struct config *cf,
    const struct instance *list, size_t n, int64_t from, int64_t to,
    int64_t now, enum cost_format format, char **cause)
{
	struct billing_line *lines;
	struct billing_piece *pc;
	struct cost_unknown *u;
	struct ledger_cost c;
	json_t *o = NULL, *arr = NULL, *w;
	money_t sum;
	int64_t cut = to < now ? to : now;
	size_t i, k, nl, npc, nu;
	char *s1, *s2;
	int r = 0;

	s1 = instance_format_time(from);
	s2 = instance_format_time(to);
	if (format == FMT_JSON) {
		o = json_object();
		w = json_object();
		json_object_set_new(w, "since", json_string(s1));
		json_object_set_new(w, "until", json_string(s2));
		json_object_set_new(o, "window", w);
		json_object_set_new(
		    o, "minor_per_unit", json_integer(BILLING_MINOR_PER_UNIT));
		arr = json_array();
	} else if (format == FMT_CSV)
		csv_row(stdout, 14, "name", "state", "start", "stop",
		    "duration_s", "window_s", "unit", "billed_s",
		    "billed_units", "minimum_applied", "price", "currency",
		    "amount", "before_window");
	else
		printf("window %s to %s\n", s1, s2);
	free(s1);
	free(s2);
	for (i = 0; i < n && r == 0; i++) {
		memset(&c, 0, sizeof c);
		c.in = &list[i];
		r = ledger_explain(
		    inv, cf, &c, from, to, now, &lines, &nl, &pc, &npc, cause);
		u = NULL;
		nu = 0;
		if (r == 0 && c.total.unknown_secs > 0)
			r = cost_unknown_stretches(
			    inv, c.in, from, to, now, &u, &nu, cause);
		sum = c.egress;
		for (k = 0; r == 0 && k < nl; k++) {
			if (billing_add(&sum, lines[k].amount, cause) != 0)
				r = -GF_EUSAGE;
		}
		if (r == 0 && format == FMT_JSON)
			json_array_append_new(arr,
			    explain_json(
				&c, lines, nl, pc, npc, sum, cut, now, u, nu));
		else if (r == 0 && format == FMT_CSV)
			explain_csv(&c, lines, nl, pc, npc, from, to, cut, now);
		else if (r == 0) {
			if (i > 0)
				printf("\n");
			explain_text(
			    &c, lines, nl, pc, npc, sum, cut, now, u, nu);
		}
		free(u);
		free(lines);
		free(pc);
	}
	if (o != NULL) {
		json_object_set_new(o, "instances", arr);
		if (r == 0)
			json_print(o, stdout);
		else
			json_decref(o);
	}
	return r;
}

/* The report as the table, CSV or JSON asked for (totals aside). */
static int
render(struct inventory *inv, const struct config *cf,
    const struct instance *list, size_t n, const struct cost_report *rep,
    enum cost_by by, enum cost_format format, char **cause)
{
	if (format == FMT_JSON)
		return render_json(inv, list, n, rep, cause);
	if (format == FMT_CSV) {
		if (by == BY_INSTANCE) {
			csv_instances(rep);
			return 0;
		}
		if (by == BY_PROVIDER)
			return csv_providers(rep, cause);
		return csv_days(inv, cf, rep, cause);
	}
	if (by == BY_INSTANCE) {
		render_instances(rep);
		return 0;
	}
	if (by == BY_PROVIDER)
		return render_providers(inv, list, n, rep, cause);
	return render_days(inv, cf, rep, cause);
}

static int
cmd_cost_exec(
    const struct cmd_entry *e, struct cmd_ctx *ctx, int argc, char **argv)
{
	struct inventory *inv = NULL;
	struct instance *list = NULL;
	struct cost_report rep;
	enum cost_by by = BY_INSTANCE;
	enum cost_format format = FMT_TABLE;
	const char *since_s = NULL, *until_s = "now";
	int64_t now = (int64_t)time(NULL), from, to;
	char *cause = NULL;
	size_t n = 0;
	int ch, status, by_given = 0, explaining = 0, r;

	while ((ch = cmd_getopt(e, argc, argv, "h", cost_options, &status)) !=
	    -1) {
		switch (ch) {
		case -2:
			return status;
		case OPT_SINCE:
			since_s = optarg;
			break;
		case OPT_UNTIL:
			until_s = optarg;
			break;
		case OPT_JSON:
			format = FMT_JSON;
			break;
		case OPT_FORMAT:
			if (strcmp(optarg, "table") == 0)
				format = FMT_TABLE;
			else if (strcmp(optarg, "csv") == 0)
				format = FMT_CSV;
			else if (strcmp(optarg, "json") == 0)
				format = FMT_JSON;
			else
				return cmd_usage_error(e,
				    "--format '%s' must be table, csv or json",
				    optarg);
			break;
		case OPT_EXPLAIN:
			explaining = 1;
			break;
		case OPT_BY:
			by_given = 1;
			if (strcmp(optarg, "instance") == 0)
				by = BY_INSTANCE;
			else if (strcmp(optarg, "provider") == 0)
				by = BY_PROVIDER;
			else if (strcmp(optarg, "day") == 0)
				by = BY_DAY;
			else
				return cmd_usage_error(e,
				    "--by '%s' must be "
				    "instance, provider or day",
				    optarg);
			break;
		}
	}
	if (argc - optind > 1)
		return cmd_usage_error(e, "takes at most one SELECTOR");
	if (explaining && by_given)
		return cmd_usage_error(
		    e, "--explain lists each instance's runs: not with --by");
	if (timeparse(until_s, now, &to, &cause) != 0)
		return cmd_fail(GF_EUSAGE, cause);
	if (since_s == NULL)
		from = cost_month_start(to > 0 ? to - 1 : to, 0);
	else if (timeparse(since_s, now, &from, &cause) != 0)
		return cmd_fail(GF_EUSAGE, cause);
	if (from > to)
		return cmd_usage_error(e, "--since is after --until");

	if ((status = cmd_open(ctx, &inv)) != 0)
		return status;
	memset(&rep, 0, sizeof rep);
	if (argc - optind == 1)
		r = inventory_select(inv, argv[optind], &list, &n, &cause);
	else /* Everything, released ones included while in the window. */
		r = cost_load_all(inv, from, &list, &n, &cause);
	if (r == 0 && explaining)
		r = explain(inv, ctx->fleet->config, list, n, from, to, now,
		    format, &cause);
	else if (r == 0)
		r = cost_by_instance(inv, ctx->fleet->config, list, n, from, to,
		    now, &rep, &cause);
	if (r == 0 && !explaining)
		r = render(
		    inv, ctx->fleet->config, list, n, &rep, by, format, &cause);
	if (r == 0 && !explaining && format == FMT_TABLE)
		r = render_totals(inv, &rep, since_s == NULL, &cause);
	status = r == 0 ? GF_OK : cmd_fail(-r, cause);
	cost_report_free(&rep);
	instance_free_array(list, n);
	inventory_close(inv);
	return status;
}

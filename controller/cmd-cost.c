/*
 * What the fleet really cost, to the minor unit, under each platform's
 * billing rules: derived from every instance's price and ledger (never a
 * stored running total), with idle cost from the GPU samples, egress from
 * the network counters, unknown stretches shown as unknown, totals per
 * currency, month to date and a projection to the end of the month.
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
#include "timeparse.h"
#include "xmalloc.h"

enum cost_by { BY_INSTANCE, BY_PROVIDER, BY_DAY };

static int cmd_cost_exec(
    const struct cmd_entry *, struct cmd_ctx *, int, char **);
static void render_json(const struct cost_report *);
static void render_instances(const struct cost_report *);
static int render_providers(struct inventory *, const struct instance *, size_t,
    const struct cost_report *, char **);
static int render_days(struct inventory *, const struct config *,
    const struct cost_report *, char **);
static void render_totals(const struct cost_report *, int);

const struct cmd_entry cmd_cost_entry = {
	.name = "cost",
	.usage = "[SELECTOR] [--since TIME] [--until TIME] "
		 "[--by instance|provider|day] [--json]",
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
	    "Default window:\nthis month. TIME: "
	    "2026-11-01T02:00:00Z, '2026-11-01 02:00', 2026-11-01,\n-2h, "
	    "yesterday, now.\n\n"
	    "      --since TIME, --until TIME   the window\n"
	    "      --by provider   per provider: cost, restarts, outages, "
	    "availability;\n"
	    "                      then the median speed per provider "
	    "(gpufleet speed)\n"
	    "      --by day        per day and currency\n"
	    "      --json          exact amounts in minor units (1/10000), "
	    "null "
	    "when unknown\n\n"
	    "Example: gpufleet cost @train --since yesterday --until today\n",
	.exec = cmd_cost_exec,
};

enum { OPT_SINCE = 256, OPT_UNTIL, OPT_BY, OPT_JSON };

static const struct option cost_options[] = { { "since", required_argument,
						  NULL, OPT_SINCE },
	{ "until", required_argument, NULL, OPT_UNTIL },
	{ "by", required_argument, NULL, OPT_BY },
	{ "json", no_argument, NULL, OPT_JSON },
	{ "help", no_argument, NULL, 'h' }, { NULL, 0, NULL, 0 } };

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

/* One instance's row of --json. */
static json_t *
row_json(const struct ledger_cost *cr)
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
	json_object_set_new(x, "restarts", json_integer(cr->restarts));
	json_object_set_new(x, "outages", json_integer(cr->outages));
	return x;
}

/* The window, every instance and the totals as one JSON object. */
static void
render_json(const struct cost_report *rep)
{
	json_t *o = json_object(), *arr = json_array(), *tot = json_array(),
	       *w = json_object();
	char *s1 = instance_format_time(rep->from),
	     *s2 = instance_format_time(rep->to);
	size_t i;
	int unpriced = 0;

	json_object_set_new(w, "since", json_string(s1));
	json_object_set_new(w, "until", json_string(s2));
	free(s1);
	free(s2);
	json_object_set_new(o, "window", w);
	json_object_set_new(
	    o, "minor_per_unit", json_integer(BILLING_MINOR_PER_UNIT));
	for (i = 0; i < rep->n; i++)
		json_array_append_new(arr, row_json(&rep->rows[i]));
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
	json_object_set_new(o, "unpriced_instances", json_integer(unpriced));
	json_print(o, stdout);
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
 * "total ... month to date; burning .../h, projected ..." per currency,
 * then how many instances have no price.
 */
static void
render_totals(const struct cost_report *rep, int month)
{
	size_t i;
	int unpriced = 0;

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
}

static int
cmd_cost_exec(
    const struct cmd_entry *e, struct cmd_ctx *ctx, int argc, char **argv)
{
	struct inventory *inv = NULL;
	struct instance *list = NULL;
	struct cost_report rep;
	enum cost_by by = BY_INSTANCE;
	const char *since_s = NULL, *until_s = "now";
	int64_t now = (int64_t)time(NULL), from, to;
	char *cause = NULL;
	size_t n = 0;
	int ch, status, json = 0, r;

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
			json = 1;
			break;
		case OPT_BY:
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
	if (argc - optind == 1)
		r = inventory_select(inv, argv[optind], &list, &n, &cause);
	else /* Everything, released ones included while in the window. */
		r = cost_load_all(inv, from, &list, &n, &cause);
	if (r == 0)
		r = cost_by_instance(inv, ctx->fleet->config, list, n, from, to,
		    now, &rep, &cause);
	else
		memset(&rep, 0, sizeof rep);
	if (r == 0 && json)
		render_json(&rep);
	else if (r == 0 && by == BY_INSTANCE)
		render_instances(&rep);
	else if (r == 0 && by == BY_PROVIDER)
		r = render_providers(inv, list, n, &rep, &cause);
	else if (r == 0)
		r = render_days(inv, ctx->fleet->config, &rep, &cause);
	if (r == 0 && !json)
		render_totals(&rep, since_s == NULL);
	status = r == 0 ? GF_OK : cmd_fail(-r, cause);
	cost_report_free(&rep);
	instance_free_array(list, n);
	inventory_close(inv);
	return status;
}

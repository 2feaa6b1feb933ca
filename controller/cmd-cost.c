/*
 * What the fleet really cost, to the minor unit, under each platform's
 * billing rules: derived from every instance's price and ledger (never a
 * stored running total), with idle cost from the GPU samples, egress from
 * the network counters, unknown stretches shown as unknown, totals per
 * currency, month to date and a projection to the end of the month.
 */

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cmd.h"
#include "ledger.h"
#include "status.h"
#include "timeparse.h"
#include "xmalloc.h"

enum cost_by { BY_INSTANCE, BY_PROVIDER, BY_DAY };

static int projection(money_t, money_t, int64_t, money_t *, char **);
static int cmd_cost_exec(
    const struct cmd_entry *, struct cmd_ctx *, int, char **);

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
	    "month at the current state. Default window:\nthis month. TIME: "
	    "2026-11-01T02:00:00Z, '2026-11-01 02:00', 2026-11-01,\n-2h, "
	    "yesterday, now.\n\n"
	    "      --since TIME, --until TIME   the window\n"
	    "      --by provider   per provider: cost, restarts, outages, "
	    "availability\n"
	    "      --by day        per day and currency\n"
	    "      --json          exact amounts in minor units (1/10000)\n\n"
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

/* Local midnight of the first day of the month of t. */
static int64_t
month_start(int64_t t, int next)
{
	time_t tt = (time_t)t;
	struct tm tm;

	localtime_r(&tt, &tm);
	tm.tm_mday = 1;
	tm.tm_hour = tm.tm_min = tm.tm_sec = 0;
	tm.tm_mon += next;
	tm.tm_isdst = -1;
	return (int64_t)mktime(&tm);
}

/*
 * The month-end projection: total plus burn_per_hour for secs more, or -1
 * with *cause where that leaves the money range.
 */
static int
projection(money_t total, money_t burn_per_hour, int64_t secs, money_t *out,
    char **cause)
{
	*out = total;
	return billing_add(
	    out, billing_price_for(burn_per_hour, BILL_PER_HOUR, secs), cause);
}

static json_t *
money_json(money_t m)
{
	return json_integer(m);
}

static int
cmd_cost_exec(
    const struct cmd_entry *e, struct cmd_ctx *ctx, int argc, char **argv)
{
	struct inventory *inv = NULL;
	struct instance *list = NULL;
	struct ledger_cost *rows = NULL;
	struct billing_sums totals = { NULL, 0 }, burn = { NULL, 0 };
	enum cost_by by = BY_INSTANCE;
	const char *since_s = NULL, *until_s = "now";
	int64_t now = (int64_t)time(NULL), from, to, eom;
	char *cause = NULL, *a, *b, *c2, *d, *f, *g;
	size_t n = 0, i, j, nrows = 0;
	int ch, status, json = 0, r;
	struct table *t;

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
		from = month_start(to > 0 ? to - 1 : to, 0);
	else if (timeparse(since_s, now, &from, &cause) != 0)
		return cmd_fail(GF_EUSAGE, cause);
	if (from > to)
		return cmd_usage_error(e, "--since is after --until");

	if ((status = cmd_open(ctx, &inv)) != 0)
		return status;
	if (argc - optind == 1)
		r = inventory_select(inv, argv[optind], &list, &n, &cause);
	else {
		/* Everything, released ones included while in the window. */
		r = inventory_list(inv, 1, &list, &n, &cause);
		for (i = j = 0; r == 0 && i < n; i++) {
			if (list[i].released_at == 0 ||
			    list[i].released_at >= from)
				list[j++] = list[i];
			else
				instance_clear(&list[i]);
		}
		if (r == 0)
			n = j;
	}
	if (r != 0) {
		inventory_close(inv);
		return cmd_fail(-r, cause);
	}
	rows = xcalloc(n + 1, sizeof *rows);
	for (i = 0; i < n; i++) {
		rows[i].in = &list[i];
		if ((r = ledger_cost(inv, ctx->config, &rows[i], from, to, now,
			 &cause)) != 0) {
			status = cmd_fail(-r, cause);
			goto out;
		}
		if (billing_sums_add(&totals, rows[i].rule.currency,
			rows[i].amount, &cause) != 0 ||
		    (rows[i].running_now && rows[i].priced &&
			billing_sums_add(&burn, rows[i].rule.currency,
			    billing_hourly_price(&rows[i].rule),
			    &cause) != 0)) {
			status = cmd_fail(GF_EUSAGE, cause);
			goto out;
		}
	}
	eom = month_start(to > 0 ? to - 1 : to, 1);

	if (json) {
		json_t *o = json_object(), *arr = json_array(),
		       *tot = json_array(), *w = json_object();
		char *s1 = instance_format_time(from),
		     *s2 = instance_format_time(to);
		json_object_set_new(w, "since", json_string(s1));
		json_object_set_new(w, "until", json_string(s2));
		free(s1);
		free(s2);
		json_object_set_new(o, "window", w);
		json_object_set_new(
		    o, "minor_per_unit", json_integer(BILLING_MINOR_PER_UNIT));
		for (i = 0; i < n; i++) {
			struct ledger_cost *cr = &rows[i];
			json_t *x = json_object();
			json_object_set_new(
			    x, "name", json_string(cr->in->name));
			json_object_set_new(
			    x, "provider", json_string(cr->in->provider));
			json_object_set_new(
			    x, "currency", json_string(cr->rule.currency));
			json_object_set_new(
			    x, "priced", json_boolean(cr->priced));
			json_object_set_new(x, "running_s",
			    json_integer(cr->total.running_secs));
			json_object_set_new(
			    x, "billed_s", json_integer(cr->total.billed_secs));
			json_object_set_new(x, "stopped_s",
			    json_integer(cr->total.stopped_secs));
			json_object_set_new(x, "unknown_s",
			    json_integer(cr->total.unknown_secs));
			json_object_set_new(
			    x, "starts", json_integer(cr->total.starts));
			json_object_set_new(
			    x, "compute", money_json(cr->total.compute));
			json_object_set_new(
			    x, "storage", money_json(cr->total.storage));
			json_object_set_new(
			    x, "egress", money_json(cr->egress));
			json_object_set_new(x, "idle",
			    isnan(cr->idle_frac) ? json_null()
						 : money_json(cr->idle));
			json_object_set_new(x, "total", money_json(cr->amount));
			json_object_set_new(
			    x, "restarts", json_integer(cr->restarts));
			json_object_set_new(
			    x, "outages", json_integer(cr->outages));
			json_array_append_new(arr, x);
		}
		for (i = 0; i < totals.n; i++) {
			json_t *x = json_object();
			money_t bh = billing_sums_get(
				    &burn, totals.v[i].currency),
				proj;
			json_object_set_new(
			    x, "currency", json_string(totals.v[i].currency));
			json_object_set_new(
			    x, "total", money_json(totals.v[i].amount));
			json_object_set_new(x, "burn_per_hour", money_json(bh));
			if (to >= now - 60 && eom > now) {
				if (projection(totals.v[i].amount, bh,
					eom - now, &proj, &cause) != 0) {
					json_decref(o);
					json_decref(arr);
					json_decref(tot);
					status = cmd_fail(GF_EUSAGE, cause);
					goto out;
				}
				json_object_set_new(
				    x, "projected_month_end", money_json(proj));
			}
			json_array_append_new(tot, x);
		}
		json_object_set_new(o, "instances", arr);
		json_object_set_new(o, "totals", tot);
		json_print(o, stdout);
		status = GF_OK;
		goto out;
	}

	if (by == BY_INSTANCE) {
		t = table_new(10, "NAME", "PROVIDER", "RUNNING", "BILLED",
		    "UNKNOWN", "COMPUTE", "STORAGE", "EGRESS", "IDLE", "TOTAL");
		for (i = 0; i < n; i++) {
			struct ledger_cost *cr = &rows[i];
			char *idle;
			a = timeparse_duration(cr->total.running_secs);
			b = timeparse_duration(cr->total.billed_secs);
			c2 = cr->total.unknown_secs
			    ? timeparse_duration(cr->total.unknown_secs)
			    : NULL;
			d = billing_format(cr->total.compute, NULL);
			f = billing_format(cr->total.storage, NULL);
			g = billing_format(cr->egress, NULL);
			if (isnan(cr->idle_frac))
				idle = xstrdup("?");
			else {
				char *m = billing_format(cr->idle, NULL);
				xasprintf(&idle, "%s (%.0f%%)", m,
				    cr->idle_frac * 100);
				free(m);
			}
			char *tot =
			    billing_format(cr->amount, cr->rule.currency);
			if (!cr->priced) {
				free(tot);
				tot = xstrdup("(no price)");
			}
			table_add(t, cr->in->name, cr->in->provider, a, b, c2,
			    d, f, g, idle, tot);
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
	} else if (by == BY_PROVIDER) {
		t = table_new(7, "PROVIDER", "INSTANCES", "RUNNING", "TOTAL",
		    "RESTARTS", "OUTAGES", "AVAILABILITY");
		for (i = 0; i < n; i++) {
			int64_t run = 0, unk = 0;
			money_t sum = 0;
			int cnt = 0, rs = 0, out = 0, seen = 0;
			for (j = 0; j < i && !seen; j++)
				seen = strcmp(rows[j].in->provider,
					   rows[i].in->provider) == 0 &&
				    strcmp(rows[j].rule.currency,
					rows[i].rule.currency) == 0;
			if (seen)
				continue;
			for (j = i; j < n; j++) {
				if (strcmp(rows[j].in->provider,
					rows[i].in->provider) != 0 ||
				    strcmp(rows[j].rule.currency,
					rows[i].rule.currency) != 0)
					continue;
				cnt++;
				run += rows[j].total.running_secs;
				unk += rows[j].total.unknown_secs;
				if (billing_add(&sum, rows[j].amount, &cause) !=
				    0) {
					table_free(t);
					status = cmd_fail(GF_EUSAGE, cause);
					goto out;
				}
				rs += rows[j].restarts;
				out += rows[j].outages;
			}
			char cs[16], rss[16], os[16], av[32];
			snprintf(cs, sizeof cs, "%d", cnt);
			snprintf(rss, sizeof rss, "%d", rs);
			snprintf(os, sizeof os, "%d", out);
			if (run + unk > 0)
				snprintf(av, sizeof av, "%.2f%%",
				    100.0 * run / (run + unk));
			else
				snprintf(av, sizeof av, "-");
			a = timeparse_duration(run);
			b = billing_format(sum, rows[i].rule.currency);
			table_add(
			    t, rows[i].in->provider, cs, a, b, rss, os, av);
			free(a);
			free(b);
		}
		table_print(t, stdout);
		table_free(t);
	} else {
		int64_t day, next;
		t = table_new(2, "DAY", "TOTAL");
		for (day = from; day < to; day = next) {
			time_t tt = (time_t)day;
			struct tm tm;
			char label[16];
			struct billing_sums ds = { NULL, 0 };
			localtime_r(&tt, &tm);
			strftime(label, sizeof label, "%Y-%m-%d", &tm);
			tm.tm_mday++;
			tm.tm_hour = tm.tm_min = tm.tm_sec = 0;
			tm.tm_isdst = -1;
			next = (int64_t)mktime(&tm);
			if (next > to)
				next = to;
			for (i = 0; i < n; i++) {
				struct ledger_cost dr;
				memset(&dr, 0, sizeof dr);
				dr.in = rows[i].in;
				if (ledger_cost(inv, ctx->config, &dr, day,
					next, now, &cause) != 0) {
					free(cause);
					cause = NULL;
					continue;
				}
				if (billing_sums_add(&ds, dr.rule.currency,
					dr.amount, &cause) != 0) {
					billing_sums_free(&ds);
					table_free(t);
					status = cmd_fail(GF_EUSAGE, cause);
					goto out;
				}
			}
			for (i = 0; i < ds.n; i++) {
				a = billing_format(
				    ds.v[i].amount, ds.v[i].currency);
				table_add(t, label, a);
				free(a);
			}
			billing_sums_free(&ds);
		}
		table_print(t, stdout);
		table_free(t);
	}
	for (i = 0; i < totals.n; i++) {
		money_t bh = billing_sums_get(&burn, totals.v[i].currency),
			proj;
		if (to >= now - 60 && eom > now && since_s == NULL &&
		    projection(totals.v[i].amount, bh, eom - now, &proj,
			&cause) != 0) {
			status = cmd_fail(GF_EUSAGE, cause);
			goto out;
		}
		a = billing_format(totals.v[i].amount, totals.v[i].currency);
		printf("total %s", a);
		free(a);
		if (to >= now - 60 && eom > now && since_s == NULL) {
			b = billing_format(proj, totals.v[i].currency);
			c2 = billing_format(bh, totals.v[i].currency);
			printf(" month to date; burning %s/h, projected %s by "
			       "the end of the month",
			    c2, b);
			free(b);
			free(c2);
		}
		printf("\n");
	}
	status = GF_OK;
out:
	billing_sums_free(&totals);
	billing_sums_free(&burn);
	free(rows);
	instance_free_array(list, n);
	inventory_close(inv);
	(void)nrows;
	return status;
}

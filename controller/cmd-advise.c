/*
 * Recommendations with the numbers behind them: monthly plan or hourly,
 * idle spend, storage paid while stopped, platform release deadlines, and
 * balances about to run out.
 */

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cmd.h"
#include "ledger.h"
#include "status.h"
#include "timeparse.h"
#include "xmalloc.h"

static int cmd_advise_exec(
    const struct cmd_entry *, struct cmd_ctx *, int, char **);

const struct cmd_entry cmd_advise_entry = {
	.name = "advise",
	.usage = "[SELECTOR] [--json]",
	.summary = "what to change to pay less, with the numbers behind it",
	.help =
	    "  - monthly vs hourly: hours used per day over the last 7 and 30 "
	    "days\n    against the monthly plan's break-even (monthly_price);\n"
	    "  - idle: the share of this week's billed time with every GPU "
	    "idle, and\n    its cost (from status samples);\n"
	    "  - stopped instances still paying storage, and those near their\n"
	    "    provider's release-after-stopped deadline;\n"
	    "  - provider balances that run out within a day.\n\n"
	    "Example: gpufleet advise @train\n",
	.exec = cmd_advise_exec,
};

enum { OPT_JSON = 256 };

static const struct option advise_options[] = { { "json", no_argument, NULL,
						    OPT_JSON },
	{ "help", no_argument, NULL, 'h' }, { NULL, 0, NULL, 0 } };

static void emit(json_t *arr, int json, const char *kind, const char *name,
    const char *fmt, ...) __attribute__((format(printf, 5, 6)));

/* Print one recommendation, or add it to the JSON array. */
static void
emit(json_t *arr, int json, const char *kind, const char *name, const char *fmt,
    ...)
{
	va_list ap;
	char *msg;

	va_start(ap, fmt);
	xvasprintf(&msg, fmt, ap);
	va_end(ap);
	if (json) {
		json_t *o = json_object();
		json_object_set_new(o, "kind", json_string(kind));
		json_object_set_new(o, "name", json_string(name));
		json_object_set_new(o, "message", json_string(msg));
		json_array_append_new(arr, o);
	} else
		printf("%s: %s\n", name, msg);
	free(msg);
}

static int
cmd_advise_exec(
    const struct cmd_entry *e, struct cmd_ctx *ctx, int argc, char **argv)
{
	struct inventory *inv = NULL;
	struct instance *list = NULL;
	struct ledger_event *ev = NULL;
	json_t *arr = json_array();
	int64_t now = (int64_t)time(NULL);
	char *cause = NULL, *a, *b;
	size_t n = 0, i, nev;
	int ch, status, json = 0, r, said = 0;

	while ((ch = cmd_getopt(e, argc, argv, "h", advise_options, &status)) !=
	    -1) {
		if (ch == -2) {
			json_decref(arr);
			return status;
		}
		if (ch == OPT_JSON)
			json = 1;
	}
	if (argc - optind > 1) {
		json_decref(arr);
		return cmd_usage_error(e, "takes at most one SELECTOR");
	}
	if ((status = cmd_open(ctx, &inv)) != 0) {
		json_decref(arr);
		return status;
	}
	r = inventory_select(
	    inv, argc - optind == 1 ? argv[optind] : "all", &list, &n, &cause);
	if (r != 0) {
		inventory_close(inv);
		json_decref(arr);
		return cmd_fail(-r, cause);
	}
	for (i = 0; i < n; i++) {
		struct ledger_cost w7, w30, week;
		struct billing_advice adv;
		const char *name = list[i].name;
		int days;

		memset(&w7, 0, sizeof w7);
		memset(&w30, 0, sizeof w30);
		memset(&week, 0, sizeof week);
		w7.in = w30.in = week.in = &list[i];
		if ((r = ledger_cost(inv, ctx->config, &w7, now - 7 * 86400,
			 now, now, &cause)) != 0 ||
		    (r = ledger_cost(inv, ctx->config, &w30, now - 30 * 86400,
			 now, now, &cause)) != 0)
			goto fail;
		if (!w7.priced)
			continue;
		/* Monthly plan against hourly, at 7- and 30-day usage. */
		if (w7.rule.monthly_price > 0) {
			double h7 = w7.total.running_secs / 3600.0 / 7;
			double h30 = w30.total.running_secs / 3600.0 / 30;
			if (billing_advise_monthly(&w7.rule, h7, &adv) == 0) {
				a = billing_format(adv.savings > 0
					? adv.savings
					: -adv.savings,
				    w7.rule.currency);
				emit(arr, json, "monthly", name,
				    "used %.1f h/day "
				    "(7 days; %.1f over 30), break-even %.1f "
				    "h/day: the monthly plan %s %s/month",
				    h7, h30, adv.breakeven_hours_per_day,
				    adv.savings > 0 ? "saves" : "would cost",
				    a);
				free(a);
				said++;
			}
		}
		/* Idle share of this week's billed time. */
		week = w7;
		if (!isnan(week.idle_frac) && week.idle_frac >= 0.05 &&
		    week.total.compute > 0) {
			a = billing_format(week.idle, week.rule.currency);
			emit(arr, json, "idle", name,
			    "idle %.0f%% of its billed "
			    "time this week (%s)",
			    week.idle_frac * 100, a);
			free(a);
			said++;
		}
		/* Stopped but paying storage; release deadline. */
		if ((r = ledger_events(inv, list[i].id, &ev, &nev, &cause)) !=
		    0)
			goto fail;
		if (nev > 0 && strcmp(ev[nev - 1].state, "stopped") == 0) {
			int64_t since = ev[nev - 1].t;
			days = (int)((now - since) / 86400);
			if (w7.rule.stopped_per_day > 0) {
				a = billing_format(
				    billing_stopped_cost(&w7.rule, now - since),
				    w7.rule.currency);
				b = timeparse_duration(now - since);
				emit(arr, json, "stopped", name,
				    "stopped for %s "
				    "and paying storage (%s so far); release "
				    "it "
				    "if it is not coming back",
				    b, a);
				free(a);
				free(b);
				said++;
			}
			sqlite3_stmt *st;
			if (sqlite3_prepare_v2(inv->db,
				"SELECT "
				"release_after_days FROM provider WHERE name = "
				"? "
				"AND release_after_days IS NOT NULL",
				-1, &st, NULL) == SQLITE_OK) {
				sqlite3_bind_text(
				    st, 1, list[i].provider, -1, SQLITE_STATIC);
				if (sqlite3_step(st) == SQLITE_ROW) {
					int lim = sqlite3_column_int(st, 0);
					if (days >= lim - 2)
						emit(arr, json, "release", name,
						    "stopped %d days; %s "
						    "releases "
						    "instances stopped %d days "
						    "(data lost)",
						    days, list[i].provider,
						    lim);
					said += days >= lim - 2;
				}
				sqlite3_finalize(st);
			}
		}
		free(ev);
		ev = NULL;
	}
	/* Observed availability and restarts per provider, last 30 days. */
	for (i = 0; i < n; i++) {
		int64_t run = 0, unk = 0;
		int restarts = 0, outages = 0, seen = 0;
		size_t j;
		for (j = 0; j < i && !seen; j++)
			seen = strcmp(list[j].provider, list[i].provider) == 0;
		if (seen || *list[i].provider == '\0')
			continue;
		for (j = i; j < n; j++) {
			struct ledger_cost c;
			if (strcmp(list[j].provider, list[i].provider) != 0)
				continue;
			memset(&c, 0, sizeof c);
			c.in = &list[j];
			if ((r = ledger_cost(inv, ctx->config, &c,
				 now - 30 * 86400, now, now, &cause)) != 0)
				goto fail;
			run += c.total.running_secs;
			unk += c.total.unknown_secs;
			restarts += c.restarts;
			outages += c.outages;
		}
		if (run + unk == 0)
			continue;
		emit(arr, json, "availability", list[i].provider,
		    "observed "
		    "availability %.2f%% over 30 days, %d outage%s, %d "
		    "unexpected restart%s",
		    100.0 * run / (run + unk), outages, outages == 1 ? "" : "s",
		    restarts, restarts == 1 ? "" : "s");
	}

	/* Provider balances that run out within a day. */
	{
		struct instance *all = NULL;
		size_t na = 0, k;
		sqlite3_stmt *st;
		if (sqlite3_prepare_v2(inv->db,
			"SELECT name, currency, "
			"balance, balance_at FROM provider WHERE balance IS "
			"NOT "
			"NULL",
			-1, &st, NULL) == SQLITE_OK &&
		    inventory_list(inv, 0, &all, &na, &cause) == 0) {
			while (sqlite3_step(st) == SQLITE_ROW) {
				const char *pn =
				    (const char *)sqlite3_column_text(st, 0);
				const char *cur =
				    (const char *)sqlite3_column_text(st, 1);
				money_t left = sqlite3_column_int64(st, 2);
				int64_t at = sqlite3_column_int64(st, 3), secs;
				money_t burnh = 0;
				for (k = 0; k < na; k++) {
					struct ledger_cost c;
					if (strcmp(all[k].provider, pn) != 0)
						continue;
					memset(&c, 0, sizeof c);
					c.in = &all[k];
					if (ledger_cost(inv, ctx->config, &c,
						at, now, now, &cause) != 0 ||
					    !c.priced ||
					    strcmp(c.rule.currency, cur) != 0) {
						free(cause);
						cause = NULL;
						continue;
					}
					if (billing_add(&left, -c.amount,
						&cause) != 0 ||
					    (c.running_now &&
						billing_add(&burnh,
						    billing_hourly_price(
							&c.rule),
						    &cause) != 0)) {
						r = -GF_EUSAGE;
						break;
					}
				}
				if (r != 0)
					break;
				if (billing_runway(left, burnh, &secs) == 0 &&
				    secs < 86400) {
					a = billing_format(left, cur);
					b = timeparse_duration(secs);
					emit(arr, json, "runway", pn,
					    "%s left runs "
					    "out in %s: top up or stop "
					    "instances",
					    a, b);
					free(a);
					free(b);
					said++;
				}
			}
		}
		sqlite3_finalize(st);
		instance_free_array(all, na);
		if (r != 0)
			goto fail;
		free(cause);
	}
	if (json)
		json_print(arr, stdout);
	else {
		json_decref(arr);
		if (said == 0)
			printf("nothing to advise for %zu instance%s\n", n,
			    n == 1 ? "" : "s");
	}
	instance_free_array(list, n);
	inventory_close(inv);
	return GF_OK;
fail:
	free(ev);
	json_decref(arr);
	instance_free_array(list, n);
	inventory_close(inv);
	return cmd_fail(-r, cause);
}

/*
 * Rental platforms and their prepaid balances: a balance as of a time, the
 * spend since then from the ledger, the burn rate of the provider's running
 * instances, and so the runway: "autodl: 182.40 CNY left, burning 7.38/h,
 * runs out in 24h40m (Tue 09:10)".
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

struct provider_info {
	char *name;
	char currency[8];
	int has_balance;
	money_t balance;
	int64_t balance_at;
	int has_low;
	money_t low;
	int release_after_days; /* 0: none */
	money_t left;
	money_t burn;
	int64_t runway; /* seconds, -1: never */
};

static int cmd_provider_exec(
    const struct cmd_entry *, struct cmd_ctx *, int, char **);

const struct cmd_entry cmd_provider_entry = {
	.name = "provider",
	.usage = "add|set NAME [--balance AMOUNT [--at TIME]] [--currency C]\n"
		 "       [--low-balance AMOUNT] [--release-after DAYS] | "
		 "ls [--json]",
	.summary = "prepaid balances and runway per rental platform",
	.help =
	    "A balance is stated as of a time (--at, default now); what the "
	    "provider's\ninstances cost since then (from the ledger) is "
	    "subtracted. The runway is\nwhat is left divided by the hourly "
	    "price of its running instances. Below\n--low-balance it is "
	    "flagged. --release-after DAYS: the platform releases\ninstances "
	    "stopped that long (advise warns before).\n\n"
	    "Examples:\n"
	    "  gpufleet provider add autodl --balance 500 --currency CNY "
	    "--low-balance 50\n"
	    "  gpufleet provider ls\n",
	.exec = cmd_provider_exec,
};

enum {
	OPT_BALANCE = 256,
	OPT_AT,
	OPT_CURRENCY,
	OPT_LOW,
	OPT_RELEASE,
	OPT_JSON
};

static const struct option provider_options[] = {
	{ "balance", required_argument, NULL, OPT_BALANCE },
	{ "at", required_argument, NULL, OPT_AT },
	{ "currency", required_argument, NULL, OPT_CURRENCY },
	{ "low-balance", required_argument, NULL, OPT_LOW },
	{ "release-after", required_argument, NULL, OPT_RELEASE },
	{ "json", no_argument, NULL, OPT_JSON },
	{ "help", no_argument, NULL, 'h' }, { NULL, 0, NULL, 0 }
};

/* Fill spend, burn and runway of one provider at time now. */
static int
provider_runway(struct inventory *inv, const struct config *cf,
    struct provider_info *p, int64_t now, char **cause)
{
	struct instance *list = NULL;
	struct ledger_cost c;
	money_t spent = 0;
	size_t n = 0, i;
	int r;

	p->burn = 0;
	p->runway = -1;
	if ((r = inventory_list(inv, 1, &list, &n, cause)) != 0)
		return r;
	for (i = 0; i < n; i++) {
		if (strcmp(list[i].provider, p->name) != 0)
			continue;
		memset(&c, 0, sizeof c);
		c.in = &list[i];
		if ((r = ledger_cost(inv, cf, &c,
			 p->has_balance ? p->balance_at : now, now, now,
			 cause)) != 0)
			break;
		if (!c.priced || strcmp(c.rule.currency, p->currency) != 0)
			continue;
		if (billing_add(&spent, c.amount, cause) != 0 ||
		    (c.running_now && list[i].released_at == 0 &&
			billing_add(&p->burn, billing_hourly_price(&c.rule),
			    cause) != 0)) {
			r = -GF_EUSAGE;
			break;
		}
	}
	instance_free_array(list, n);
	if (r != 0)
		return r;
	p->left = p->balance;
	if (billing_add(&p->left, -spent, cause) != 0)
		return -GF_EUSAGE;
	if (p->has_balance && billing_runway(p->left, p->burn, &p->runway) == 1)
		p->runway = -1;
	return 0;
}

static int
provider_list(
    struct inventory *inv, struct provider_info **out, size_t *n, char **cause)
{
	sqlite3_stmt *st;
	struct provider_info *v = NULL;
	size_t len = 0;
	int rc;

	if (sqlite3_prepare_v2(inv->db,
		"SELECT name, currency, balance, "
		"balance_at, low_balance, release_after_days FROM provider "
		"ORDER "
		"BY name",
		-1, &st, NULL) != SQLITE_OK)
		goto fail;
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		struct provider_info *p;
		v = xreallocarray(v, len + 1, sizeof *v);
		p = &v[len++];
		memset(p, 0, sizeof *p);
		p->name = xstrdup((const char *)sqlite3_column_text(st, 0));
		snprintf(p->currency, sizeof p->currency, "%s",
		    sqlite3_column_text(st, 1));
		p->has_balance = sqlite3_column_type(st, 2) != SQLITE_NULL;
		p->balance = sqlite3_column_int64(st, 2);
		p->balance_at = sqlite3_column_int64(st, 3);
		p->has_low = sqlite3_column_type(st, 4) != SQLITE_NULL;
		p->low = sqlite3_column_int64(st, 4);
		p->release_after_days = sqlite3_column_int(st, 5);
	}
	sqlite3_finalize(st);
	if (rc != SQLITE_DONE)
		goto fail;
	*out = v;
	*n = len;
	return 0;
fail:
	xasprintf(cause, "database %s: providers: %s", inv->path,
	    sqlite3_errmsg(inv->db));
	return -GF_EDB;
}

static void
provider_free(struct provider_info *v, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		free(v[i].name);
	free(v);
}

/* One line: "autodl: 182.40 CNY left, burning 7.38/h, runs out in ...". */
static void
provider_line(const struct provider_info *p, int64_t now)
{
	char *left, *burn, *dur, when[32];
	time_t at;
	struct tm tm;

	if (!p->has_balance) {
		printf("%s: no balance recorded (%s)\n", p->name, p->currency);
		return;
	}
	left = billing_format(p->left, p->currency);
	burn = billing_format(p->burn, NULL);
	printf("%s: %s left, burning %s/h", p->name, left, burn);
	if (p->runway >= 0) {
		dur = timeparse_duration(p->runway);
		at = (time_t)(now + p->runway);
		localtime_r(&at, &tm);
		strftime(when, sizeof when, "%a %H:%M", &tm);
		printf(", runs out in %s (%s)", dur, when);
		free(dur);
	} else if (p->left > 0)
		printf(", nothing running");
	if (p->has_low && p->left < p->low)
		printf("  [LOW BALANCE]");
	printf("\n");
	free(left);
	free(burn);
}

static int
cmd_provider_exec(
    const struct cmd_entry *e, struct cmd_ctx *ctx, int argc, char **argv)
{
	struct inventory *inv = NULL;
	struct provider_info *v = NULL;
	const char *balance = NULL, *at = "now", *currency = NULL, *low = NULL;
	const char *release = NULL, *verb;
	char cur[8] = "", *cause = NULL, *end;
	int64_t now = (int64_t)time(NULL), t = now;
	money_t bal = 0, lowv = 0;
	long rel = 0;
	size_t n = 0, i;
	int ch, status, json = 0, r;
	sqlite3_stmt *st;

	while ((ch = cmd_getopt(
		    e, argc, argv, "h", provider_options, &status)) != -1) {
		switch (ch) {
		case -2:
			return status;
		case OPT_BALANCE:
			balance = optarg;
			break;
		case OPT_AT:
			at = optarg;
			break;
		case OPT_CURRENCY:
			currency = optarg;
			break;
		case OPT_LOW:
			low = optarg;
			break;
		case OPT_RELEASE:
			release = optarg;
			break;
		case OPT_JSON:
			json = 1;
			break;
		}
	}
	if (argc - optind < 1)
		return cmd_usage_error(e, "needs add, set or ls");
	verb = argv[optind];
	if (strcmp(verb, "ls") == 0) {
		if (argc - optind != 1)
			return cmd_usage_error(e, "ls takes no NAME");
		if ((status = cmd_open(ctx, &inv)) != 0)
			return status;
		if ((r = provider_list(inv, &v, &n, &cause)) != 0)
			goto fail;
		for (i = 0; i < n; i++) {
			if ((r = provider_runway(
				 inv, ctx->config, &v[i], now, &cause)) != 0)
				goto fail;
		}
		if (json) {
			json_t *arr = json_array();
			for (i = 0; i < n; i++) {
				json_t *o = json_object();
				json_object_set_new(
				    o, "name", json_string(v[i].name));
				json_object_set_new(
				    o, "currency", json_string(v[i].currency));
				json_object_set_new(o, "left",
				    v[i].has_balance ? json_integer(v[i].left)
						     : json_null());
				json_object_set_new(o, "burn_per_hour",
				    json_integer(v[i].burn));
				json_object_set_new(o, "runway_s",
				    v[i].runway >= 0 ? json_integer(v[i].runway)
						     : json_null());
				json_object_set_new(o, "low",
				    json_boolean(
					v[i].has_low && v[i].left < v[i].low));
				json_array_append_new(arr, o);
			}
			json_print(arr, stdout);
		} else {
			for (i = 0; i < n; i++)
				provider_line(&v[i], now);
			if (n == 0)
				printf(
				    "no providers recorded (gpufleet provider "
				    "add NAME --balance AMOUNT)\n");
		}
		provider_free(v, n);
		inventory_close(inv);
		return GF_OK;
	}
	if (strcmp(verb, "add") != 0 && strcmp(verb, "set") != 0)
		return cmd_usage_error(
		    e, "unknown action '%s' (add, set, ls)", verb);
	if (argc - optind != 2)
		return cmd_usage_error(e, "%s needs NAME", verb);
	if (instance_check_tag(argv[optind + 1], &cause) != 0 ||
	    (balance != NULL &&
		billing_parse_amount(balance, &bal, &cause) != 0) ||
	    (low != NULL && billing_parse_amount(low, &lowv, &cause) != 0) ||
	    (currency != NULL &&
		billing_parse_currency(currency, cur, sizeof cur, &cause) !=
		    0) ||
	    timeparse(at, now, &t, &cause) != 0)
		return cmd_fail(GF_EUSAGE, cause);
	if (release != NULL) {
		rel = strtol(release, &end, 10);
		if (*release == '\0' || *end != '\0' || rel < 1 || rel > 3650)
			return cmd_usage_error(e,
			    "--release-after '%s' is not "
			    "a number of days",
			    release);
	}
	if ((status = cmd_open(ctx, &inv)) != 0)
		return status;
	if ((r = inventory_begin(inv, &cause)) != 0)
		goto fail;
	if (sqlite3_prepare_v2(inv->db,
		strcmp(verb, "add") == 0
		    ? "INSERT INTO provider (name, currency) VALUES (?1, "
		      "coalesce(?2, 'CNY'))"
		    : "UPDATE provider SET currency = coalesce(?2, currency) "
		      "WHERE "
		      "name = ?1",
		-1, &st, NULL) != SQLITE_OK)
		goto dbfail;
	sqlite3_bind_text(st, 1, argv[optind + 1], -1, SQLITE_STATIC);
	if (*cur != '\0')
		sqlite3_bind_text(st, 2, cur, -1, SQLITE_STATIC);
	r = sqlite3_step(st);
	sqlite3_finalize(st);
	if (r == SQLITE_CONSTRAINT_PRIMARYKEY || r == SQLITE_CONSTRAINT) {
		xasprintf(&cause, "provider '%s' exists (use provider set)",
		    argv[optind + 1]);
		r = -GF_EUSAGE;
		goto fail;
	}
	if (r != SQLITE_DONE)
		goto dbfail;
	if (sqlite3_changes(inv->db) == 0) {
		xasprintf(&cause, "no provider '%s' (use provider add)",
		    argv[optind + 1]);
		r = -GF_EUSAGE;
		goto fail;
	}
	if (sqlite3_prepare_v2(inv->db,
		"UPDATE provider SET "
		"balance = CASE WHEN ?2 THEN ?3 ELSE balance END, "
		"balance_at = CASE WHEN ?2 THEN ?4 ELSE balance_at END, "
		"low_balance = CASE WHEN ?5 THEN ?6 ELSE low_balance END, "
		"release_after_days = CASE WHEN ?7 THEN ?8 ELSE "
		"release_after_days END WHERE name = ?1",
		-1, &st, NULL) != SQLITE_OK)
		goto dbfail;
	sqlite3_bind_text(st, 1, argv[optind + 1], -1, SQLITE_STATIC);
	sqlite3_bind_int(st, 2, balance != NULL);
	sqlite3_bind_int64(st, 3, bal);
	sqlite3_bind_int64(st, 4, t);
	sqlite3_bind_int(st, 5, low != NULL);
	sqlite3_bind_int64(st, 6, lowv);
	sqlite3_bind_int(st, 7, release != NULL);
	sqlite3_bind_int64(st, 8, rel);
	r = sqlite3_step(st);
	sqlite3_finalize(st);
	if (r != SQLITE_DONE)
		goto dbfail;
	if ((r = inventory_commit(inv, &cause)) != 0)
		goto fail;
	inventory_close(inv);
	printf("provider %s %s\n", argv[optind + 1],
	    strcmp(verb, "add") == 0 ? "added" : "updated");
	return GF_OK;
dbfail:
	xasprintf(&cause, "database %s: providers: %s", inv->path,
	    sqlite3_errmsg(inv->db));
	r = -GF_EDB;
fail:
	provider_free(v, n);
	inventory_close(inv);
	return cmd_fail(-r, cause);
}

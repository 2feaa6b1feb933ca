/*
 * Rental platforms and their prepaid balances: a balance as of a time, the
 * spend since then from the ledger, the burn rate of the provider's running
 * instances and the storage of its stopped ones, and so the runway: "autodl:
 * 182.40 CNY left, burning 7.38/h, runs out in 24h40m (Tue 09:10)".
 */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cmd.h"
#include "cost.h"
#include "provider.h"
#include "status.h"
#include "timeparse.h"
#include "xmalloc.h"

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
	    "subtracted. The runway is\nwhat is left divided by the burn: the "
	    "price of its running instances\nplus the storage of its stopped "
	    "ones (egress is not included). Below\n--low-balance it is "
	    "flagged. --release-after DAYS: the platform releases\ninstances "
	    "stopped that long (advise warns before, and a release_deadline\n"
	    "notification is queued [notify] release_warn, default 2d, "
	    "before).\n\n"
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

/* One line: "autodl: 182.40 CNY left, burning 7.38/h, runs out in ...". */
static void
render_line(const struct provider_info *p, int64_t now)
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
	if (p->stopped > 0 && p->running > 0)
		printf(" (%d running, storage of %d stopped)", p->running,
		    p->stopped);
	else if (p->stopped > 0)
		printf(" (storage of %d stopped)", p->stopped);
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

/* Every provider's balance as JSON. */
static void
render_json(const struct provider_info *v, size_t n)
{
	json_t *arr = json_array();
	size_t i;

	for (i = 0; i < n; i++) {
		json_t *o = json_object();
		json_object_set_new(o, "name", json_string(v[i].name));
		json_object_set_new(o, "currency", json_string(v[i].currency));
		json_object_set_new(o, "left",
		    v[i].has_balance ? json_integer(v[i].left) : json_null());
		json_object_set_new(
		    o, "burn_per_hour", json_integer(v[i].burn));
		json_object_set_new(
		    o, "burn_per_day", json_integer(v[i].burn_per_day));
		json_object_set_new(o, "running", json_integer(v[i].running));
		json_object_set_new(o, "stopped", json_integer(v[i].stopped));
		json_object_set_new(o, "runway_s",
		    v[i].runway >= 0 ? json_integer(v[i].runway) : json_null());
		json_object_set_new(o, "low",
		    json_boolean(v[i].has_low && v[i].left < v[i].low));
		json_array_append_new(arr, o);
	}
	json_print(arr, stdout);
}

/* provider ls: every provider's balance, burn and runway. */
static int
provider_ls(struct cmd_ctx *ctx, int json)
{
	struct inventory *inv = NULL;
	struct provider_info *v = NULL;
	struct instance *list = NULL;
	int64_t now = (int64_t)time(NULL);
	char *cause = NULL;
	size_t n = 0, nlist = 0, i;
	int status, r;

	if ((status = cmd_open(ctx, &inv)) != 0)
		return status;
	/* Released instances too: what they cost came off the balance. */
	if ((r = provider_list(inv, &v, &n, &cause)) != 0 ||
	    (r = inventory_list(inv, 1, &list, &nlist, &cause)) != 0)
		goto fail;
	for (i = 0; i < n; i++) {
		if ((r = cost_provider_runway(inv, ctx->fleet->config, list,
			 nlist, &v[i], now, 0, &cause)) != 0)
			goto fail;
	}
	if (json)
		render_json(v, n);
	else {
		for (i = 0; i < n; i++)
			render_line(&v[i], now);
		if (n == 0)
			printf("no providers recorded (gpufleet provider "
			       "add NAME --balance AMOUNT)\n");
	}
	r = 0;
fail:
	instance_free_array(list, nlist);
	provider_free(v, n);
	inventory_close(inv);
	return r == 0 ? GF_OK : cmd_fail(-r, cause);
}

static int
cmd_provider_exec(
    const struct cmd_entry *e, struct cmd_ctx *ctx, int argc, char **argv)
{
	struct inventory *inv = NULL;
	struct provider_change chg;
	const char *balance = NULL, *at = "now", *currency = NULL, *low = NULL;
	const char *release = NULL, *verb;
	char cur[8] = "", *cause = NULL, *end;
	int64_t now = (int64_t)time(NULL), t = now;
	money_t bal = 0, lowv = 0;
	long rel = 0;
	int ch, status, json = 0, r;

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
		return provider_ls(ctx, json);
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
	memset(&chg, 0, sizeof chg);
	chg.currency = *cur != '\0' ? cur : NULL;
	chg.set_balance = balance != NULL;
	chg.balance = bal;
	chg.balance_at = t;
	chg.set_low = low != NULL;
	chg.low = lowv;
	chg.set_release = release != NULL;
	chg.release_after_days = (int)rel;
	if ((status = cmd_open(ctx, &inv)) != 0)
		return status;
	r = provider_write(
	    inv, argv[optind + 1], strcmp(verb, "add") == 0, &chg, &cause);
	inventory_close(inv);
	if (r != 0)
		return cmd_fail(-r, cause);
	printf("provider %s %s\n", argv[optind + 1],
	    strcmp(verb, "add") == 0 ? "added" : "updated");
	return GF_OK;
}

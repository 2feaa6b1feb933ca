/*
 * Recommendations with the numbers behind them: monthly plan or hourly,
 * idle spend, storage paid while stopped, platform release deadlines, and
 * balances about to run out.
 */

#include <stdio.h>
#include <time.h>

#include "advise.h"
#include "cmd.h"
#include "log.h"
#include "status.h"

static int cmd_advise_exec(
    const struct cmd_entry *, struct cmd_ctx *, int, char **);

const struct cmd_entry cmd_advise_entry = {
	.name = "advise",
	.usage = "[SELECTOR] [--json]",
	.summary = "what to change to pay less, with the numbers behind it",
	.help =
	    "  - monthly vs hourly: hours used per day over the span observed "
	    "(since\n    the first ledger entry or the adding, at most 30 "
	    "days; "
	    "'thin' under a\n    day) against the monthly plan's break-even "
	    "(monthly_price): it saves\n    X or costs X more; --json adds "
	    "the numbers (money in minor units);\n"
	    "  - idle: the share of this week's billed time with every GPU "
	    "idle, and\n    its cost (from status samples);\n"
	    "  - stopped instances still paying storage, and those near their\n"
	    "    provider's release-after-stopped deadline;\n"
	    "  - instances the ledger says are stopped that answered status "
	    "since\n    (" INSTANCE_STILL_BILLING ");\n"
	    "  - provider balances that run out within a day;\n"
	    "  - the median speed per provider over the stored gpufleet "
	    "speed runs\n    of the instances (informs only).\n\n"
	    "Example: gpufleet advise @train\n",
	.exec = cmd_advise_exec,
};

enum { OPT_JSON = 256 };

static const struct option advise_options[] = { { "json", no_argument, NULL,
						    OPT_JSON },
	{ "help", no_argument, NULL, 'h' }, { NULL, 0, NULL, 0 } };

/* The numbers behind a monthly-plan advice; money in minor units. */
static json_t *
monthly_json(const struct advice *a)
{
	const struct billing_advice *m = &a->monthly;

	return json_pack("{s:s, s:I, s:f, s:f, s:f, s:I, s:I, s:I, s:b, s:I}",
	    "currency", a->currency, "evidence_s", (json_int_t)a->evidence_s,
	    "evidence_days", a->evidence_s / 86400.0, "used_hours_per_day",
	    m->used_hours_per_day, "breakeven_hours_per_day",
	    m->breakeven_hours_per_day, "hourly_month",
	    (json_int_t)m->hourly_month, "monthly_price",
	    (json_int_t)m->monthly_price, "savings", (json_int_t)m->savings,
	    "thin_evidence", a->evidence_s < 86400, "minor_per_unit",
	    (json_int_t)BILLING_MINOR_PER_UNIT);
}

/* Every piece of advice as "NAME: message", or as one JSON array. */
static void
render(const struct advice *v, size_t n, size_t ninstances, int json)
{
	json_t *arr;
	size_t i, said = 0;

	if (json) {
		arr = json_array();
		for (i = 0; i < n; i++) {
			json_t *o = json_object();
			json_object_set_new(o, "kind", json_string(v[i].kind));
			json_object_set_new(o, "name", json_string(v[i].name));
			json_object_set_new(
			    o, "message", json_string(v[i].message));
			if (v[i].has_monthly)
				json_object_set_new(
				    o, "monthly", monthly_json(&v[i]));
			json_array_append_new(arr, o);
		}
		json_print(arr, stdout);
		return;
	}
	for (i = 0; i < n; i++) {
		printf("%s: %s\n", v[i].name, v[i].message);
		said += advise_counts(&v[i]);
	}
	if (said == 0)
		printf("nothing to advise for %zu instance%s\n", ninstances,
		    ninstances == 1 ? "" : "s");
}

static int
cmd_advise_exec(
    const struct cmd_entry *e, struct cmd_ctx *ctx, int argc, char **argv)
{
	struct inventory *inv = NULL;
	struct instance *list = NULL;
	struct advice *v = NULL;
	char *cause = NULL;
	size_t n = 0, nv = 0;
	int ch, status, json = 0, r;

	while ((ch = cmd_getopt(e, argc, argv, "h", advise_options, &status)) !=
	    -1) {
		if (ch == -2)
			return status;
		if (ch == OPT_JSON)
			json = 1;
	}
	if (argc - optind > 1)
		return cmd_usage_error(e, "takes at most one SELECTOR");
	if ((status = cmd_open(ctx, &inv)) != 0)
		return status;
	r = inventory_select(
	    inv, argc - optind == 1 ? argv[optind] : "all", &list, &n, &cause);
	if (r == 0)
		r = advise_run(inv, ctx->fleet->config, list, n,
		    (int64_t)time(NULL), &v, &nv, &cause);
	if (r == 0 &&
	    advise_notify_release(
		inv, ctx->fleet->config, (int64_t)time(NULL), &cause) != 0) {
		warn_msg("release deadlines: %s", cause);
		free(cause);
		cause = NULL;
	}
	if (r == 0)
		render(v, nv, n, json);
	advise_free(v, nv);
	instance_free_array(list, n);
	inventory_close(inv);
	return r == 0 ? GF_OK : cmd_fail(-r, cause);
}

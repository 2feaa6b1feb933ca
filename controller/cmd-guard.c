/*
 * Budget guards: `gpufleet guard add` stores a rule over a selector (a
 * cost cap per instance per day, per month or since it was added, or a
 * minimum balance runway of its provider) with what to do when it is
 * passed (warn, or shut the instances down through their stop methods).
 * The daemon evaluates them after every poll; `guard check` does it now.
 */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cmd.h"
#include "guard.h"
#include "log.h"
#include "selector.h"
#include "status.h"
#include "timeparse.h"
#include "vis.h"
#include "xmalloc.h"

static int cmd_guard_exec(
    const struct cmd_entry *, struct cmd_ctx *, int, char **);

const struct cmd_entry cmd_guard_entry = {
	.name = "guard",
	.usage =
	    "add SELECTOR (--max-cost AMOUNT [--per day|month] | "
	    "--min-runway DURATION)\n"
	    "       --do warn|shutdown [--name NAME]\n"
	    "       gpufleet guard ls [--json] | rm NAME | check [--dry-run] "
	    "[--json]",
	.summary = "budget guards: warn or stop when a cost cap or runway is "
		   "passed",
	.help =
	    "--max-cost AMOUNT is per instance, in each instance's billing "
	    "currency, over\nthe current local day (--per day), month (--per "
	    "month) or since the\ninstance was added (no --per), from the "
	    "ledger as `gpufleet cost` computes\nit; it is passed when the "
	    "cost is above AMOUNT. --min-runway DURATION: the\ninstance's "
	    "provider's balance runway (gpufleet provider ls) is below it.\n"
	    "A hit fires once per instance per period (day, month, ever, or "
	    "until the\nprovider's balance is stated again), is recorded in "
	    "`gpufleet events`, and\nwith --do shutdown stops the instances "
	    "now through their stop methods\n(shutdown --now --warn 0). "
	    "Released instances are never guarded.\n`gpufleet daemon` "
	    "evaluates every guard after each poll; `guard check` does\nit "
	    "now (--dry-run: show what would fire, change nothing; exit 1 when "
	    "a\n"
	    "stop failed on a host). A stop interrupted before its result was "
	    "stored\n(Ctrl-C, the daemon killed) is run again, \"resumed\", "
	    "by the next\nevaluation, unless the process running it still "
	    "runs.\nA guard that cannot be judged, or whose stop cannot be run "
	    "or recorded, is\nnamed with its error; the others still run.\n"
	    "guard ls: NOW is each selected instance's value, "
	    "\"(over)\" past the limit;\nLAST the last firing. "
	    "Default NAME: guard-N.\n\n"
	    "      --json   ls: [{name, selector, rule, max_cost (minor "
	    "units), per,\n               min_runway_s, action, last_fired, "
	    "instances: [{name, value,\n               hit, fired}]}]; check: "
	    "[{guard, action, instances, why,\n               resumed, result, "
	    "error}]\n\n"
	    "Examples:\n"
	    "  gpufleet guard add @train --max-cost 50 --per day --do "
	    "shutdown\n"
	    "  gpufleet guard add provider:vast --min-runway 6h --do shutdown "
	    "--name vast-low\n"
	    "  gpufleet guard ls\n"
	    "  gpufleet guard check --dry-run\n",
	.exec = cmd_guard_exec,
};

enum {
	OPT_MAX_COST = 256,
	OPT_PER,
	OPT_MIN_RUNWAY,
	OPT_DO,
	OPT_NAME,
	OPT_JSON,
	OPT_DRY_RUN
};

static const struct option guard_options[] = { { "max-cost", required_argument,
						   NULL, OPT_MAX_COST },
	{ "per", required_argument, NULL, OPT_PER },
	{ "min-runway", required_argument, NULL, OPT_MIN_RUNWAY },
	{ "do", required_argument, NULL, OPT_DO },
	{ "name", required_argument, NULL, OPT_NAME },
	{ "json", no_argument, NULL, OPT_JSON },
	{ "dry-run", no_argument, NULL, OPT_DRY_RUN },
	{ "help", no_argument, NULL, 'h' }, { NULL, 0, NULL, 0 } };

struct guard_args {
	const char *max_cost, *per, *min_runway, *action, *name;
	int json, dry_run;
};

/* The options of every verb; returns 0 or an exit status. */
static int
parse_options(const struct cmd_entry *e, int argc, char **argv,
    struct guard_args *a, int *status)
{
	int ch;

	memset(a, 0, sizeof *a);
	while ((ch = cmd_getopt(e, argc, argv, "h", guard_options, status)) !=
	    -1) {
		switch (ch) {
		case -2:
			return -1;
		case OPT_MAX_COST:
			a->max_cost = optarg;
			break;
		case OPT_PER:
			a->per = optarg;
			break;
		case OPT_MIN_RUNWAY:
			a->min_runway = optarg;
			break;
		case OPT_DO:
			a->action = optarg;
			break;
		case OPT_NAME:
			a->name = optarg;
			break;
		case OPT_JSON:
			a->json = 1;
			break;
		case OPT_DRY_RUN:
			a->dry_run = 1;
			break;
		}
	}
	return 0;
}

/* The guard that add's options describe; returns 0 or an exit status. */
static int
build(const struct cmd_entry *e, const char *selector,
    const struct guard_args *a, struct guard *g)
{
	struct selector *sel;
	char *cause = NULL;
	int status;

	memset(g, 0, sizeof *g);
	if ((a->max_cost == NULL) == (a->min_runway == NULL))
		return cmd_usage_error(
		    e, "add needs exactly one of --max-cost and --min-runway");
	if (a->per != NULL && a->max_cost == NULL)
		return cmd_usage_error(e, "--per goes with --max-cost");
	if (a->per != NULL && strcmp(a->per, "day") != 0 &&
	    strcmp(a->per, "month") != 0)
		return cmd_usage_error(
		    e, "--per '%s' must be day or month", a->per);
	if (a->action == NULL)
		return cmd_usage_error(e, "add needs --do warn|shutdown");
	if (strcmp(a->action, "warn") != 0 && strcmp(a->action, "shutdown"))
		return cmd_usage_error(
		    e, "--do '%s' must be warn or shutdown", a->action);
	if (a->name != NULL && instance_check_name(a->name, &cause) != 0)
		goto bad;
	if (selector_parse(selector, &sel, &cause) != 0)
		goto bad;
	selector_free(sel);
	if (a->max_cost != NULL &&
	    billing_parse_amount(a->max_cost, &g->max_cost, &cause) != 0) {
		status = cmd_usage_error(e, "--max-cost: %s", cause);
		free(cause);
		return status;
	}
	if (a->min_runway != NULL &&
	    (status = cmd_duration(e, "min-runway", a->min_runway, 1,
		 BILLING_DURATION_MAX, &g->min_runway_s)) != 0)
		return status;
	g->has_cost = a->max_cost != NULL;
	g->per = a->per != NULL ? xstrdup(a->per) : NULL;
	g->shutdown = strcmp(a->action, "shutdown") == 0;
	g->selector = xstrdup(selector);
	g->created_at = (int64_t)time(NULL);
	return 0;
bad:
	status = cmd_usage_error(e, "%s", cause);
	free(cause);
	return status;
}

/* guard add: store it under its name, or the first free guard-N. */
static int
guard_add_cmd(const struct cmd_entry *e, struct cmd_ctx *ctx,
    const char *selector, const struct guard_args *a)
{
	struct inventory *inv;
	struct guard g;
	char *cause = NULL, *rule;
	int status, r, i;

	if ((status = build(e, selector, a, &g)) != 0)
		return status;
	if ((status = cmd_open(ctx, &inv)) != 0) {
		guard_clear(&g);
		return status;
	}
	for (i = 1, r = -GF_EUSAGE; r == -GF_EUSAGE && i <= 10000; i++) {
		free(g.name);
		if (a->name != NULL)
			g.name = xstrdup(a->name);
		else
			xasprintf(&g.name, "guard-%d", i);
		free(cause);
		cause = NULL;
		r = guard_add(inv, &g, &cause);
		if (a->name != NULL)
			break;
	}
	if (r == 0) {
		rule = guard_rule(&g);
		printf("guard %s: %s on %s, %s\n", g.name, rule, g.selector,
		    g.shutdown ? "shutdown" : "warn");
		free(rule);
	}
	guard_clear(&g);
	inventory_close(inv);
	return r == 0 ? GF_OK : cmd_fail(-r, cause);
}

/* "a1 12.40 CNY today (over), a2 ..." for guard ls. Caller frees. */
static char *
values_text(const struct guard_value *v, size_t n)
{
	char *s = xstrdup(""), *tmp;
	size_t i;

	for (i = 0; i < n; i++) {
		xasprintf(&tmp, "%s%s%s %s%s", s, i > 0 ? ", " : "",
		    v[i].instance, v[i].value != NULL ? v[i].value : "?",
		    v[i].hit ? " (over)" : "");
		free(s);
		s = tmp;
	}
	return s;
}

/* One guard of ls --json. */
static json_t *
guard_json(const struct guard *g, const struct guard_value *v, size_t n)
{
	json_t *o, *arr = json_array();
	char *rule = guard_rule(g),
	     *last = g->last_fired ? instance_format_time(g->last_fired) : NULL;
	size_t i;

	for (i = 0; i < n; i++)
		json_array_append_new(arr,
		    json_pack("{s:s, s:s?, s:b, s:b}", "name", v[i].instance,
			"value", v[i].value, "hit", v[i].hit, "fired",
			v[i].fired));
	o = json_pack("{s:s, s:s, s:s, s:o, s:s?, s:o, s:s, s:s?, s:o}", "name",
	    g->name, "selector", g->selector, "rule", rule, "max_cost",
	    g->has_cost ? json_integer(g->max_cost) : json_null(), "per",
	    g->per, "min_runway_s",
	    g->has_cost ? json_null() : json_integer(g->min_runway_s), "action",
	    g->shutdown ? "shutdown" : "warn", "last_fired", last, "instances",
	    arr);
	free(rule);
	free(last);
	return o;
}

/* guard ls: every guard with each selected instance's value now. */
static int
guard_ls(struct cmd_ctx *ctx, int json)
{
	struct inventory *inv;
	struct guard *gs = NULL;
	struct guard_value *v = NULL;
	struct table *t =
	    table_new(6, "NAME", "SELECTOR", "RULE", "ACTION", "NOW", "LAST");
	json_t *arr = json_array();
	int64_t now = (int64_t)time(NULL);
	size_t ng = 0, nv = 0, i;
	char *cause = NULL, *rule, *vals, *last;
	int status, r;

	if ((status = cmd_open(ctx, &inv)) != 0)
		goto out;
	if ((r = guard_list(inv, &gs, &ng, &cause)) != 0)
		status = cmd_fail(-r, cause);
	for (i = 0; status == 0 && i < ng; i++) {
		if ((r = guard_values(inv, ctx->fleet->config, &gs[i], now, &v,
			 &nv, &cause)) != 0) {
			status = cmd_fail(-r, cause);
			break;
		}
		rule = guard_rule(&gs[i]);
		vals = values_text(v, nv);
		last = gs[i].last_fired ? instance_format_time(gs[i].last_fired)
					: NULL;
		table_add(t, gs[i].name, gs[i].selector, rule,
		    gs[i].shutdown ? "shutdown" : "warn", vals, last);
		if (json)
			json_array_append_new(arr, guard_json(&gs[i], v, nv));
		free(rule);
		free(vals);
		free(last);
		guard_values_free(v, nv);
	}
	if (status == 0 && json) {
		json_print(arr, stdout); /* consumes it */
		arr = NULL;
	} else if (status == 0)
		table_print(t, stdout);
	guard_list_free(gs, ng);
	inventory_close(inv);
out:
	json_decref(arr);
	table_free(t);
	return status;
}

/*
 * Print one action of guard check and its result per host, or why its
 * stop could not be run or recorded (err).
 */
static void
check_print(
    const struct guard_action *a, json_t *result, const char *err, int dry_run)
{
	const char *k;
	char *why = vis_str(a->why), *s;
	json_t *v;

	printf("%s %s%s%s: %s\n", a->guard, dry_run ? "would " : "",
	    a->shutdown ? "shutdown" : "warn",
	    a->resumed ? " (resumed: its stop was interrupted)" : "", why);
	free(why);
	json_object_foreach(result, k, v)
	{
		s = vis_str(json_string_value(v));
		printf("  %s  %s\n", k, s);
		free(s);
	}
	if (err != NULL) {
		s = vis_str(err);
		printf("  error: %s\n", s);
		free(s);
	}
}

/* One action of guard check --json. */
static json_t *
check_json(const struct guard_action *a, json_t *result, const char *err)
{
	json_t *names = json_array();
	size_t j;

	for (j = 0; j < a->nnames; j++)
		json_array_append_new(names, json_string(a->names[j]));
	return json_pack("{s:s, s:s, s:o, s:s, s:b, s:O?, s:s?}", "guard",
	    a->guard, "action", a->shutdown ? "shutdown" : "warn", "instances",
	    names, "why", a->why, "resumed", a->resumed, "result", result,
	    "error", err);
}

/*
 * guard check: evaluate every guard now and run the shutdowns, as the
 * daemon does after a poll; every one is run and reported even when one
 * of them cannot be (its error on stderr too). Exit: the first such
 * error's status, else 1 when a stop failed on a host.
 */
static int
guard_check(struct cmd_ctx *ctx, const struct guard_args *ga)
{
	struct inventory *inv;
	struct guard_action *acts = NULL;
	json_t *arr = json_array(), *res, *v;
	size_t n = 0, i;
	const char *k;
	char *cause = NULL, *err;
	int status, r, failed = 0, first = 0;

	if ((status = cmd_open(ctx, &inv)) != 0) {
		json_decref(arr);
		return status;
	}
	r = (ga->dry_run ? guard_preview : guard_evaluate)(
	    inv, ctx->fleet->config, (int64_t)time(NULL), &acts, &n, &cause);
	/* What was claimed is run even when a guard could not be judged. */
	for (i = 0; i < n; i++) {
		res = NULL;
		err = NULL;
		if (acts[i].shutdown && !ga->dry_run &&
		    (status = guard_stop_result(
			 ctx->fleet, NULL, &acts[i], &res, &err)) != 0) {
			error("guard %s: %s", acts[i].guard, err);
			if (first == 0)
				first = -status;
		}
		json_object_foreach(res, k, v)
		{
			if (strcmp(json_string_value(v), "ok") != 0)
				failed = 1;
		}
		if (ga->json)
			json_array_append_new(
			    arr, check_json(&acts[i], res, err));
		else
			check_print(&acts[i], res, err, ga->dry_run);
		json_decref(res);
		free(err);
	}
	if (ga->json)
		json_print(arr, stdout); /* consumes it */
	else {
		if (r == 0 && n == 0)
			printf("no guard fires\n");
		json_decref(arr);
	}
	guard_actions_free(acts, n);
	inventory_close(inv);
	if (r != 0)
		return cmd_fail(-r, cause);
	if (first != 0)
		return first;
	return failed ? GF_EHOSTS : GF_OK;
}

static int
cmd_guard_exec(
    const struct cmd_entry *e, struct cmd_ctx *ctx, int argc, char **argv)
{
	struct guard_args a;
	struct inventory *inv;
	const char *verb;
	char *cause = NULL;
	int status, r, nargs;

	if (parse_options(e, argc, argv, &a, &status) != 0)
		return status;
	if (argc - optind < 1)
		return cmd_usage_error(e, "needs add, ls, rm or check");
	verb = argv[optind];
	nargs = argc - optind - 1;
	if (strcmp(verb, "add") != 0 &&
	    (a.max_cost || a.per || a.min_runway || a.action || a.name))
		return cmd_usage_error(e,
		    "--max-cost, --per, --min-runway, --do and --name go with "
		    "add");
	if (strcmp(verb, "check") != 0 && a.dry_run)
		return cmd_usage_error(e, "--dry-run goes with check");
	if (strcmp(verb, "add") == 0 && nargs == 1)
		return guard_add_cmd(e, ctx, argv[optind + 1], &a);
	if (strcmp(verb, "ls") == 0 && nargs == 0)
		return guard_ls(ctx, a.json);
	if (strcmp(verb, "check") == 0 && nargs == 0)
		return guard_check(ctx, &a);
	if (strcmp(verb, "rm") == 0 && nargs == 1) {
		if ((status = cmd_open(ctx, &inv)) != 0)
			return status;
		r = guard_remove(inv, argv[optind + 1], &cause);
		inventory_close(inv);
		return r == 0 ? GF_OK : cmd_fail(-r, cause);
	}
	if (strcmp(verb, "add") == 0 || strcmp(verb, "rm") == 0)
		return cmd_usage_error(e, "%s takes one %s", verb,
		    strcmp(verb, "add") == 0 ? "SELECTOR" : "NAME");
	if (strcmp(verb, "ls") == 0 || strcmp(verb, "check") == 0)
		return cmd_usage_error(e, "%s takes no argument", verb);
	return cmd_usage_error(
	    e, "unknown verb '%s' (add, ls, rm or check)", verb);
}

/*
 * Change fields of one instance: `gpufleet set NAME FIELD=VALUE...`. All
 * assignments are validated first and stored in one transaction, or none,
 * and what changed is printed, old -> new. A price change is a new entry
 * of the price history from --from (default now): time before it keeps
 * the earlier price.
 */

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cmd.h"
#include "job.h"
#include "keys.h"
#include "ledger.h"
#include "log.h"
#include "plan.h"
#include "preset.h"
#include "status.h"
#include "stopmethod.h"
#include "timeparse.h"
#include "vis.h"
#include "watcher.h"
#include "xmalloc.h"

/* A preset=NAME of the command line and what it stands for. */
struct set_preset {
	struct preset *v; /* every preset, or NULL when none was given */
	size_t n;
	const struct preset *p;
	char **fields; /* its FIELD=VALUE assignments */
	size_t nfields;
	char **argv; /* the command line with them in place of preset= */
};

/* What one instance looks like to `set`, before or after. */
struct set_view {
	struct instance in;
	struct stopmethod_fields sf;
	struct billing_rule rule;
	int priced;
	struct preset_origin origin;
};

static int set_expand_preset(int *, char ***, struct set_preset *, char **);
static void set_method_note(struct inventory *, const struct instance *);
static char *set_value(const struct set_view *, const char *);
static int set_check_from(
    struct inventory *, const struct instance *, int64_t, int64_t, char **);
static json_t *set_changes(
    const struct set_view *, const struct set_view *, int64_t, int, int);
static void set_preset_clear(struct set_preset *);
static int cmd_set_exec(
    const struct cmd_entry *, struct cmd_ctx *, int, char **);

const struct cmd_entry cmd_set_entry = {
	.name = "set",
	.usage = "NAME FIELD=VALUE... [--from TIME] [--json]",
	.summary = "change fields of an instance",
	.help =
	    "FIELD is one of: name, host, port, user, provider, region,\n"
	    "identity (a managed key's name or a key file; empty: the "
	    "config default),\nremote_dir, "
	    "authorized_keys_file, notes, platform_id (the platform's id of "
	    "the\ninstance), jump (the instance to reach it through, "
	    "ProxyJump; empty:\ndirect), since (the rental began then, before "
	    "it was added: the books\nmay go back to it; empty: when added). "
	    "Tags: see `gpufleet tag`.\n\n"
	    "Pricing (see README, \"Billing\"):\n"
	    "  price=2.69/h (also /min, /s, /day)   currency=CNY\n"
	    "  billing=second|minute|hour           min_billed=10m\n"
	    "  stopped_price=5/day  monthly_price=1500  egress_price=0.8/GB\n"
	    "Prices above 1000000 an hour (or /GB) are refused.\n"
	    "A price change does not rewrite the past: it is in force from "
	    "--from TIME\n(default now; as `mark --at` takes it: not in the "
	    "future, nor before the\ninstance's ledger and 7 days before it "
	    "was added) until the next\nchange, and time before it keeps the "
	    "earlier price (`show` lists the\nhistory); while the ledger is "
	    "empty there is no past and a change replaces\nthe price. The "
	    "currency is the whole history's.\n\n"
	    "preset=NAME applies a billing preset (gpufleet preset ls): its "
	    "whole price\nrule, and its provider and stop method where it "
	    "gives them; `show` then\nsays the price came from it, until a "
	    "pricing field is set by hand.\n\n"
	    "Stopping (see README, \"Stop methods\"):\n"
	    "  stop_command='remote:CMD'|'local:CMD'|none|default\n"
	    "  stop_kind=stop|release|default   allow_release=yes|no\n"
	    "CMD may use {name} {host} {port} {provider} {instance_id} (the "
	    "platform_id).\n\n"
	    "Each FIELD at most once. Prints each field changed, old -> new "
	    "(--json: the\nsame as a JSON object).\n\n"
	    "Examples:\n"
	    "  gpufleet set a100-1 port=32456 price=2.69/h billing=second\n"
	    "  gpufleet set a100-1 price=2.28/h --from '2026-12-01 00:00'\n"
	    "  gpufleet set a100-1 preset=autodl.a100-80g\n",
	.exec = cmd_set_exec,
};

/*
 * Put the preset's FIELD=VALUE assignments in place of a preset=NAME of
 * *argvp (at its end), so that they take the path of any other; a field
 * given by hand as well is refused. *argvp then points into sp, which the
 * caller clears.
 */
static int
set_expand_preset(
    int *argcp, char ***argvp, struct set_preset *sp, char **cause)
{
	char **argv = *argvp;
	const char *name = NULL;
	size_t k, len;
	int i, n = 0;

	memset(sp, 0, sizeof *sp);
	for (i = optind + 1; i < *argcp; i++) {
		if (strncmp(argv[i], "preset=", 7) == 0)
			name = argv[i] + 7;
	}
	if (name == NULL)
		return 0;
	if (preset_load(NULL, &sp->v, &sp->n, cause) != 0 ||
	    (sp->p = preset_find(sp->v, sp->n, name, cause)) == NULL)
		return -1;
	sp->fields = preset_assignments(sp->p, &sp->nfields);
	sp->argv = xcalloc(*argcp + sp->nfields, sizeof *sp->argv);
	for (i = 0; i < *argcp; i++) {
		if (i > optind && strncmp(argv[i], "preset=", 7) == 0)
			continue;
		for (k = 0; i > optind && k < sp->nfields; k++) {
			len = strchr(sp->fields[k], '=') - sp->fields[k] + 1;
			if (strncmp(argv[i], sp->fields[k], len) == 0) {
				xasprintf(cause,
				    "field '%.*s' is set by preset %s too: "
				    "give one of them",
				    (int)len - 1, argv[i], name);
				return -1;
			}
		}
		sp->argv[n++] = argv[i];
	}
	for (k = 0; k < sp->nfields; k++)
		sp->argv[n++] = sp->fields[k];
	*argcp = n;
	*argvp = sp->argv;
	return 0;
}

static void
set_preset_clear(struct set_preset *sp)
{
	size_t k;

	for (k = 0; k < sp->nfields; k++)
		free(sp->fields[k]);
	free(sp->fields);
	free(sp->argv);
	preset_free(sp->v, sp->n);
	memset(sp, 0, sizeof *sp);
}

/* Every field `set` reports, in the order it lists changes. */
static const char *const set_fields[] = { "name", "host", "port", "user",
	"provider", "region", "identity", "remote_dir", "authorized_keys_file",
	"notes", "platform_id", "jump", "source", "since", "stop_command",
	"stop_kind", "allow_release", "price", "currency", "billing",
	"min_billed", "stopped_price", "monthly_price", "egress_price",
	"price_from" };

/* One field of v for people, as `show` puts it. Caller frees. */
static char *
set_value(const struct set_view *v, const char *field)
{
	const struct instance *in = &v->in;
	char *s;
	int k;

	if (strcmp(field, "port") == 0) {
		xasprintf(&s, "%d", in->port);
		return s;
	}
	if (strcmp(field, "allow_release") == 0)
		return xstrdup(v->sf.allow_release ? "yes" : "no");
	if (strcmp(field, "stop_command") == 0 ||
	    strcmp(field, "stop_kind") == 0) {
		s = field[5] == 'c' ? v->sf.command : v->sf.kind;
		return xstrdup(s != NULL ? s : "(default)");
	}
	if (strcmp(field, "price_from") == 0) {
		if (v->origin.name != NULL) {
			xasprintf(&s, "preset %s", v->origin.name);
			return s;
		}
		return xstrdup(v->priced ? "set by hand" : "(no price)");
	}
	for (k = 0; k < LEDGER_NPRICE_FIELDS; k++) {
		if (strcmp(field, ledger_price_fields[k]) != 0)
			continue;
		if (!v->priced && k == 0)
			return xstrdup("(no price)");
		return ledger_price_value(&v->rule, field);
	}
	if (strcmp(field, "identity") == 0)
		return xstrdup(
		    in->identity != NULL ? in->identity : "(config default)");
	if (strcmp(field, "jump") == 0)
		return xstrdup(in->jump != NULL ? in->jump : "(direct)");
	if (strcmp(field, "source") == 0)
		return xstrdup(
		    in->source != NULL ? in->source : "(added by hand)");
	if (strcmp(field, "since") == 0)
		return in->since != 0 ? instance_format_time(in->since)
				      : xstrdup("(when added)");
	s = strcmp(field, "name") == 0	       ? in->name
	    : strcmp(field, "host") == 0       ? in->host
	    : strcmp(field, "user") == 0       ? in->user
	    : strcmp(field, "provider") == 0   ? in->provider
	    : strcmp(field, "region") == 0     ? in->region
	    : strcmp(field, "remote_dir") == 0 ? in->remote_dir
	    : strcmp(field, "authorized_keys_file") == 0
	    ? in->authorized_keys_file
	    : strcmp(field, "notes") == 0 ? in->notes
					  : in->platform_id;
	return xstrdup(s != NULL ? s : "");
}

/*
 * What changed from old to now as JSON: {"name", "changed": [{"field",
 * "old", "new"}...], "prices_from"} (prices_from: the time the new price
 * is in force from, null when no price changed).
 */
static json_t *
set_changes(const struct set_view *old, const struct set_view *now,
    int64_t from, int repriced, int recurrency)
{
	json_t *o = json_object(), *arr = json_array(), *c;
	char *a, *b, *when;
	size_t i;

	for (i = 0; i < sizeof set_fields / sizeof set_fields[0]; i++) {
		a = set_value(old, set_fields[i]);
		b = set_value(now, set_fields[i]);
		if (strcmp(a, b) != 0) {
			c = json_object();
			json_object_set_new(
			    c, "field", json_string(set_fields[i]));
			json_object_set_new(c, "old", json_string(a));
			json_object_set_new(c, "new", json_string(b));
			json_array_append_new(arr, c);
		}
		free(a);
		free(b);
	}
	json_object_set_new(o, "name", json_string(now->in.name));
	json_object_set_new(o, "changed", arr);
	when = repriced ? instance_format_time(from) : NULL;
	json_object_set_new(
	    o, "prices_from", when != NULL ? json_string(when) : json_null());
	json_object_set_new(
	    o, "currency_whole_history", json_boolean(recurrency));
	free(when);
	return o;
}

/*
 * A stop method changed: what on the instance still has the old one (its
 * plan's deadlines and autostop, running jobs' --then) takes the new one
 * at the next contact (schedsync.c); say so, on stderr.
 */
static void
set_method_note(struct inventory *inv, const struct instance *in)
{
	struct watcher_view v;
	char *cause = NULL, **fired = NULL;
	size_t nd = 0, nfired = 0, jobs = job_then_running(inv, in->id);
	int as = 0;

	if (watcher_get(inv, in->id, &v, &cause) != 0) {
		free(cause);
		return;
	}
	if (watcher_fired_ids(inv, in->id, &fired, &nfired, &cause) != 0) {
		free(cause);
		fired = NULL;
		nfired = 0;
	}
	plan_armed(v.plan, (const char *const *)fired, nfired, &nd, &as);
	watcher_ids_free(fired, nfired);
	watcher_view_free(&v);
	if (nd == 0 && !as && jobs == 0)
		return;
	warn_msg("%s: its plan arms %zu deadline%s, autostop %s and %zu "
		 "%s --then with the old stop method; the next contact "
		 "(gpufleet status %s, the daemon's poll) gives it the new one",
	    in->name, nd, nd == 1 ? "" : "s", as ? "on" : "off", jobs,
	    jobs == 1 ? "job's" : "jobs'", in->name);
}

/* The changes for people: one line a field, or that nothing changed. */
static void
set_print(const json_t *o)
{
	const json_t *arr = json_object_get(o, "changed"), *c;
	const char *field, *from = NULL;
	char *a, *b;
	size_t i;
	int k, priced;

	if (json_is_string(json_object_get(o, "prices_from")))
		from = json_string_value(json_object_get(o, "prices_from"));
	if (json_array_size(arr) == 0) {
		a = vis_str(json_string_value(json_object_get(o, "name")));
		printf("%s: nothing changed\n", a);
		free(a);
		return;
	}
	json_array_foreach(arr, i, c)
	{
		field = json_string_value(json_object_get(c, "field"));
		a = vis_str(json_string_value(json_object_get(c, "old")));
		b = vis_str(json_string_value(json_object_get(c, "new")));
		for (k = 0, priced = 0; k < LEDGER_NPRICE_FIELDS; k++)
			priced |= strcmp(field, ledger_price_fields[k]) == 0;
		printf("%s: %s -> %s", field, *a != '\0' ? a : "''",
		    *b != '\0' ? b : "''");
		if (strcmp(field, "currency") == 0 &&
		    json_is_true(json_object_get(o, "currency_whole_history")))
			printf(" (the whole price history)");
		else if (priced && from != NULL)
			printf(" from %s", from);
		printf("\n");
		free(a);
		free(b);
	}
}

/* Read what set_value shows of instance name into v. */
static int
set_view_get(
    struct inventory *inv, const char *name, struct set_view *v, char **cause)
{
	int r, has;

	if ((r = inventory_get(inv, name, &v->in, cause)) != 0 ||
	    (r = ledger_price_get(
		 inv, v->in.id, &v->rule, &v->priced, cause)) != 0 ||
	    (r = inventory_stop_get(inv, v->in.id, &v->sf, cause)) != 0 ||
	    (r = preset_origin_get(inv, v->in.id, &v->origin, &has, cause)) !=
		0)
		return r;
	return 0;
}

static void
set_view_clear(struct set_view *v)
{
	instance_clear(&v->in);
	stopmethod_fields_clear(&v->sf);
	preset_origin_clear(&v->origin);
}

/* Do two rules state the same prices (the currency aside)? */
static int
set_rule_same(const struct billing_rule *a, const struct billing_rule *b)
{
	return a->price == b->price && a->price_per == b->price_per &&
	    a->unit == b->unit && a->min_billed == b->min_billed &&
	    a->stopped_per_day == b->stopped_per_day &&
	    a->monthly_price == b->monthly_price &&
	    a->egress_per_gb == b->egress_per_gb;
}

/*
 * Refuse a --from in the future, or before the instance's ledger begins
 * and more than LEDGER_BACKDATE_MAX before it was added.
 */
static int
set_check_from(struct inventory *inv, const struct instance *in, int64_t from,
    int64_t now, char **cause)
{
	int64_t earliest;
	char *a, *b;
	int r;

	if (ledger_check_time(from, 0, now, cause) != 0)
		return -GF_EUSAGE;
	if ((r = ledger_price_earliest(inv, in, &earliest, cause)) != 0)
		return r;
	if (from >= earliest)
		return 0;
	a = instance_format_time(from);
	b = instance_format_time(earliest);
	xasprintf(cause,
	    "--from %s is before %s's ledger begins and more than 7 days "
	    "before it was added (earliest %s)",
	    a, in->name, b);
	free(a);
	free(b);
	return -GF_EUSAGE;
}

enum { OPT_FROM = 256 };

static const struct option set_options[] = { { "from", required_argument, NULL,
						 OPT_FROM },
	{ "json", no_argument, NULL, 'j' }, { "help", no_argument, NULL, 'h' },
	{ NULL, 0, NULL, 0 } };

static int
cmd_set_exec(
    const struct cmd_entry *e, struct cmd_ctx *ctx, int argc, char **argv)
{
	struct inventory *inv = NULL;
	struct set_view old, now;
	struct instance *in = &now.in;
	char *cause = NULL, *field, *eq;
	struct billing_rule *rule = &now.rule, base;
	struct billing_price *hist = NULL;
	struct stopmethod_fields *sf = &now.sf;
	struct set_preset sp;
	const char *from_text = NULL;
	json_t *changes = NULL;
	int ch, status, i, k, r, detaches = 0, known, priced = 0, json = 0;
	int repriced = 0, recurrency = 0;
	struct ledger_event *ev;
	size_t len, nhist = 0, nev;
	int identity_set = 0;
	int64_t key_id = 0, t_now = (int64_t)time(NULL), from = t_now;
	int jumped = 0;

	memset(&old, 0, sizeof old);
	memset(&now, 0, sizeof now);
	memset(&sp, 0, sizeof sp);
	while ((ch = cmd_getopt(e, argc, argv, "jh", set_options, &status)) !=
	    -1) {
		if (ch == -2)
			return status;
		if (ch == 'j')
			json = 1;
		else if (ch == OPT_FROM)
			from_text = optarg;
	}
	if (argc - optind < 2)
		return cmd_usage_error(e, "needs NAME and FIELD=VALUE");
	if (instance_check_name(argv[optind], &cause) != 0 ||
	    (from_text != NULL &&
		timeparse(from_text, t_now, &from, &cause) != 0))
		return cmd_fail(GF_EUSAGE, cause);
	for (i = optind + 1; i < argc; i++) {
		if (strchr(argv[i], '=') == NULL || argv[i][0] == '=')
			return cmd_usage_error(
			    e, "'%s' is not FIELD=VALUE", argv[i]);
		/* Two values for one field: which was meant? */
		len = strchr(argv[i], '=') - argv[i] + 1;
		for (k = optind + 1; k < i; k++) {
			if (strncmp(argv[k], argv[i], len) == 0)
				return cmd_usage_error(e,
				    "field '%.*s' is given twice", (int)len - 1,
				    argv[i]);
		}
	}

	if (set_expand_preset(&argc, &argv, &sp, &cause) != 0) {
		set_preset_clear(&sp);
		return cmd_fail(GF_EUSAGE, cause);
	}

	if ((status = cmd_open(ctx, &inv)) != 0) {
		set_preset_clear(&sp);
		return status;
	}
	if ((r = inventory_begin(inv, &cause)) != 0 ||
	    (r = set_view_get(inv, argv[optind], &old, &cause)) != 0 ||
	    (r = set_view_get(inv, argv[optind], &now, &cause)) != 0 ||
	    (r = ledger_prices(inv, in->id, &hist, &nhist, &cause)) != 0)
		goto fail;
	if (from_text != NULL &&
	    (r = set_check_from(inv, in, from, t_now, &cause)) != 0)
		goto fail;
	/*
	 * A change from a past time applies to the price in force then; an
	 * instance's first price is in force since it was added.
	 */
	if (nhist > 0)
		*rule = *billing_price_at(hist, nhist, from);
	else if (from_text == NULL)
		from = in->created_at;
	/* Nothing in the ledger yet: no past to keep, the price is replaced. */
	if (nhist > 0 && from_text == NULL) {
		if ((r = ledger_events(inv, in->id, &ev, &nev, &cause)) != 0)
			goto fail;
		free(ev);
		if (nev == 0)
			from = hist[nhist - 1].from;
	}
	base = *rule;
	old.rule = base;
	for (i = optind + 1; i < argc; i++) {
		eq = strchr(argv[i], '=');
		field = xstrndup(argv[i], eq - argv[i]);
		if (strcmp(field, "host") == 0 || strcmp(field, "port") == 0 ||
		    strcmp(field, "user") == 0 ||
		    strcmp(field, "identity") == 0)
			detaches = 1;
		if (strcmp(field, "jump") == 0 || strcmp(field, "name") == 0)
			jumped = 1;
		r = stopmethod_field(sf, field, eq + 1, &known, &cause);
		if (!known)
			r = ledger_price_field(
			    rule, field, eq + 1, &known, &cause);
		else
			known = 2;
		if (known == 1)
			priced = 1;
		else if (!known && r == 0)
			r = instance_set_field(in, field, eq + 1, &cause);
		if (r == 0 && strcmp(field, "identity") == 0) {
			free(in->identity);
			in->identity = NULL;
			if ((r = keys_resolve_identity(inv, eq + 1,
				 &in->identity, &key_id, &cause)) != 0) {
				free(field);
				goto fail;
			}
			identity_set = 1;
		}
		if (r != 0 && !known &&
		    strstr(cause, "unknown field") != NULL) {
			free(cause);
			xasprintf(&cause,
			    "unknown field '%s' (valid fields: %s, "
			    "preset, price, currency, billing, min_billed, "
			    "stopped_price, monthly_price, egress_price, "
			    "stop_command, stop_kind, allow_release)",
			    field, instance_field_names());
		}
		free(field);
		if (r != 0) {
			r = -GF_EUSAGE;
			goto fail;
		}
	}
	if (from_text != NULL && !priced) {
		xasprintf(&cause,
		    "--from is when a price change takes effect: give a "
		    "pricing field (price, currency, billing, min_billed, "
		    "stopped_price, monthly_price, egress_price) or preset");
		r = -GF_EUSAGE;
		goto fail;
	}
	/*
	 * Setting what an ssh_config says takes the instance over by hand:
	 * from now on it no longer follows that file.
	 */
	if (in->source != NULL && detaches) {
		warn_msg("%s no longer follows %s (set by hand)", in->name,
		    in->source);
		free(in->source);
		in->source = NULL;
	}
	/* A new currency alone corrects the history; anything else is new. */
	recurrency =
	    priced && nhist > 0 && strcmp(base.currency, rule->currency) != 0;
	repriced = priced && (!now.priced || !set_rule_same(&base, rule));
	if (recurrency &&
	    ((r = billing_rule_validate(rule, &cause)) != 0 ||
		(r = ledger_price_currency(
		     inv, in->id, rule->currency, &cause)) != 0)) {
		if (r == -1)
			r = -GF_EUSAGE;
		goto fail;
	}
	if (repriced &&
	    ((r = billing_rule_validate(rule, &cause)) != 0 ||
		(r = ledger_price_set(inv, in->id, from, rule, &cause)) != 0)) {
		if (r == -1)
			r = -GF_EUSAGE;
		goto fail;
	}
	now.priced |= priced;
	/* The first price, if the change is before it, holds until it. */
	for (k = 1; repriced && (size_t)k < nhist; k++) {
		if (hist[k].from > from) {
			eq = instance_format_time(hist[k].from);
			warn_msg("%s: the later price from %s stays in force "
				 "from then",
			    in->name, eq);
			free(eq);
			break;
		}
	}
	/* Where the price came from: the preset, else by hand from now on. */
	if (priced &&
	    (r = sp.p != NULL
		    ? preset_origin_put(inv, in->id, sp.p, t_now, &cause)
		    : preset_origin_forget(inv, in->id, &cause)) != 0)
		goto fail;
	preset_origin_clear(&now.origin);
	if ((r = preset_origin_get(inv, in->id, &now.origin, &k, &cause)) != 0)
		goto fail;
	if ((jumped && (r = inventory_check_jump(inv, in, &cause)) != 0) ||
	    (r = inventory_update(inv, in, &cause)) != 0 ||
	    (identity_set && key_id != 0 &&
		(r = keys_set_instance_key(inv, in->id,
		     &(struct keys_key){ .id = key_id, .path = in->identity },
		     &cause)) != 0) ||
	    (identity_set && key_id == 0 &&
		(r = keys_clear_instance_key(inv, in->id, &cause)) != 0) ||
	    (sf->changed &&
		(r = inventory_stop_put(inv, in->id, sf, &cause)) != 0) ||
	    (r = inventory_commit(inv, &cause)) != 0)
		goto fail;
	if (sf->changed)
		set_method_note(inv, in);
	inventory_close(inv);
	/* Now the rule is the price from `from` on; old was the one then. */
	changes = set_changes(&old, &now, from, repriced, recurrency);
	if (json)
		json_print(changes, stdout);
	else {
		set_print(changes);
		json_decref(changes);
	}
	free(hist);
	set_view_clear(&old);
	set_view_clear(&now);
	set_preset_clear(&sp);
	return GF_OK;
fail:
	inventory_close(inv);
	free(hist);
	set_view_clear(&old);
	set_view_clear(&now);
	set_preset_clear(&sp);
	return cmd_fail(-r, cause);
}

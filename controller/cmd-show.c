/* Show every field of one instance, its pricing and its price history. */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd.h"
#include "ledger.h"
#include "preset.h"
#include "remote.h"
#include "status.h"
#include "stopmethod.h"
#include "vis.h"
#include "xmalloc.h"

static int cmd_show_exec(
    const struct cmd_entry *, struct cmd_ctx *, int, char **);

const struct cmd_entry cmd_show_entry = {
	.name = "show",
	.usage = "NAME [--json]",
	.summary = "show one instance",
	.help = "      --json    print the instance as a JSON object\n\n"
		"Pricing fields are shown as `gpufleet set` takes them; "
		"price_history lists\nevery price with the time it is in "
		"force from (the first also before it).\n\n"
		"Example: gpufleet show a100-1\n",
	.exec = cmd_show_exec,
};

/*
 * Where the price came from, for people: "preset NAME (DATE, ...)", "set
 * by hand" or "(no price)". Caller frees.
 */
static char *
price_from(int priced, const struct preset_origin *o)
{
	char *s;

	if (o->name != NULL)
		xasprintf(&s, "preset %s (%s, an example: check it against %s)",
		    o->name, o->date, o->source);
	else
		s = xstrdup(priced ? "set by hand" : "(no price)");
	return s;
}

/* The same as JSON: null (no price), {"preset": null} or the origin. */
static json_t *
price_from_json(int priced, const struct preset_origin *o)
{
	json_t *j;

	if (!priced && o->name == NULL)
		return json_null();
	j = json_object();
	json_object_set_new(
	    j, "preset", o->name != NULL ? json_string(o->name) : json_null());
	if (o->name != NULL) {
		json_object_set_new(j, "date", json_string(o->date));
		json_object_set_new(j, "source", json_string(o->source));
		json_object_set_new(j, "file", json_string(o->file));
		json_object_set_new(
		    j, "applied_at", json_integer(o->applied_at));
	}
	return j;
}

/* The instance's JSON form plus its stop settings and effective method. */
static json_t *
show_json(const struct instance *in, const struct stopmethod_fields *sf,
    const struct stopmethod *m)
{
	json_t *o = instance_to_json(in), *e = json_object();
	static const char *const where[] = { "none", "remote", "local" };

	json_object_set_new(o, "stop_command",
	    sf->command != NULL ? json_string(sf->command) : json_null());
	json_object_set_new(o, "stop_kind",
	    sf->kind != NULL ? json_string(sf->kind) : json_null());
	json_object_set_new(
	    o, "allow_release", json_boolean(sf->allow_release));
	json_object_set_new(e, "where", json_string(where[m->where]));
	json_object_set_new(e, "command",
	    m->command != NULL ? json_string(m->command) : json_null());
	json_object_set_new(e, "kind", json_string(m->kind));
	json_object_set_new(e, "from", json_string(m->from));
	json_object_set_new(o, "stop_method", e);
	return o;
}

/* One history entry as `set` assignments (currency left out). */
static char *
history_line(const struct billing_price *p)
{
	char *v[LEDGER_NPRICE_FIELDS], *when, *s;
	int k;

	for (k = 0; k < LEDGER_NPRICE_FIELDS; k++)
		v[k] = ledger_price_value(&p->rule, ledger_price_fields[k]);
	when = instance_format_time(p->from);
	xasprintf(&s, "%s %s=%s %s=%s %s=%s %s=%s %s=%s %s=%s", when,
	    ledger_price_fields[0], v[0], ledger_price_fields[2], v[2],
	    ledger_price_fields[3], v[3], ledger_price_fields[4], v[4],
	    ledger_price_fields[5], v[5], ledger_price_fields[6], v[6]);
	for (k = 0; k < LEDGER_NPRICE_FIELDS; k++)
		free(v[k]);
	free(when);
	return s;
}

/* The pricing (null when none) and the price history as JSON, into o. */
static void
pricing_json(json_t *o, int priced, const struct billing_rule *rule,
    const struct billing_price *hist, size_t nhist)
{
	json_t *arr = json_array(), *x;
	char *when;
	size_t i;

	json_object_set_new(
	    o, "pricing", priced ? ledger_price_json(rule) : json_null());
	for (i = 0; i < nhist; i++) {
		x = ledger_price_json(&hist[i].rule);
		when = instance_format_time(hist[i].from);
		json_object_set_new(x, "from", json_string(when));
		json_object_set_new(x, "from_unix", json_integer(hist[i].from));
		free(when);
		json_array_append_new(arr, x);
	}
	json_object_set_new(o, "price_history", arr);
}

static const struct option show_options[] = { { "json", no_argument, NULL,
						  'j' },
	{ "help", no_argument, NULL, 'h' }, { NULL, 0, NULL, 0 } };

static int
cmd_show_exec(
    const struct cmd_entry *e, struct cmd_ctx *ctx, int argc, char **argv)
{
	struct inventory *inv = NULL;
	struct instance in;
	struct stopmethod_fields sf;
	struct stopmethod m;
	struct billing_rule rule;
	struct billing_price *hist = NULL;
	struct preset_origin origin;
	char *cause = NULL, *tags, *created, *since, *method, *from, *v;
	int ch, status, json = 0, r, priced, has_origin, k;
	size_t nhist = 0;

	while ((ch = cmd_getopt(e, argc, argv, "jh", show_options, &status)) !=
	    -1) {
		if (ch == -2)
			return status;
		if (ch == 'j')
			json = 1;
	}
	if (argc - optind != 1)
		return cmd_usage_error(e, "needs exactly one NAME");
	if (instance_check_name(argv[optind], &cause) != 0)
		return cmd_fail(GF_EUSAGE, cause);
	if ((status = cmd_open(ctx, &inv)) != 0)
		return status;
	if ((r = inventory_get(inv, argv[optind], &in, &cause)) != 0) {
		inventory_close(inv);
		return cmd_fail(-r, cause);
	}
	if ((r = inventory_stop_get(inv, in.id, &sf, &cause)) != 0 ||
	    (r = ledger_price_get(inv, in.id, &rule, &priced, &cause)) != 0 ||
	    (r = ledger_prices(inv, in.id, &hist, &nhist, &cause)) != 0 ||
	    (r = preset_origin_get(inv, in.id, &origin, &has_origin, &cause)) !=
		0) {
		inventory_close(inv);
		free(hist);
		instance_clear(&in);
		stopmethod_fields_clear(&sf);
		return cmd_fail(-r, cause);
	}
	remote_follow_ssh_config(&in, 1, NULL); /* the address exec will use */
	inventory_close(inv);
	stopmethod_resolve(&in, &sf, ctx->fleet->config, &m);
	method = stopmethod_format(&m);
	from = price_from(priced, &origin);

	if (json) {
		json_t *o = show_json(&in, &sf, &m);
		pricing_json(o, priced, &rule, hist, nhist);
		json_object_set_new(
		    o, "price_from", price_from_json(priced, &origin));
		json_print(o, stdout);
	} else {
		char port[16], *safe;
		size_t i;
		tags = tags_join(&in, ",");
		created = instance_format_time(in.created_at);
		since = in.since != 0 ? instance_format_time(in.since) : NULL;
		snprintf(port, sizeof port, "%d", in.port);
		const char *fields[][2] = { { "name", in.name },
			{ "host", in.host }, { "port", port },
			{ "user", in.user }, { "provider", in.provider },
			{ "region", in.region }, { "tags", tags },
			{ "identity",
			    in.identity != NULL ? in.identity
						: "(config default)" },
			{ "remote_dir", in.remote_dir },
			{ "authorized_keys_file", in.authorized_keys_file },
			{ "notes", in.notes },
			{ "platform_id", in.platform_id },
			{ "source",
			    in.source != NULL ? in.source : "(added by hand)" },
			{ "jump", in.jump != NULL ? in.jump : "(direct)" },
			{ "created_at", created },
			{ "since", since != NULL ? since : "(when added)" },
			{ "stop_command",
			    sf.command != NULL ? sf.command : "(default)" },
			{ "stop_kind",
			    sf.kind != NULL ? sf.kind : "(default)" },
			{ "allow_release", sf.allow_release ? "yes" : "no" },
			{ "stop_method", method },
			{ "stop_method_from", m.from },
			{ "price_from", from } };
		/* Imported fields are text from elsewhere: shown escaped. */
		for (i = 0; i < sizeof fields / sizeof fields[0]; i++) {
			safe =
			    vis_str(fields[i][1] != NULL ? fields[i][1] : "");
			printf("%s:%*s%s\n", fields[i][0],
			    (int)(21 - strlen(fields[i][0])), "", safe);
			free(safe);
		}
		for (k = 0; k < LEDGER_NPRICE_FIELDS; k++) {
			v = !priced && k == 0
			    ? xstrdup("(no price)")
			    : ledger_price_value(&rule, ledger_price_fields[k]);
			printf("%s:%*s%s\n", ledger_price_fields[k],
			    (int)(21 - strlen(ledger_price_fields[k])), "", v);
			free(v);
		}
		if (nhist == 0)
			printf("price_history:%*s(none)\n", 21 - 13, "");
		else
			printf("price_history:%*s%zu price%s, oldest first\n",
			    21 - 13, "", nhist, nhist == 1 ? "" : "s");
		for (i = 0; i < nhist; i++) {
			v = history_line(&hist[i]);
			printf("  %s\n", v);
			free(v);
		}
		free(tags);
		free(created);
		free(since);
	}
	free(method);
	free(from);
	free(hist);
	preset_origin_clear(&origin);
	stopmethod_clear(&m);
	stopmethod_fields_clear(&sf);
	instance_clear(&in);
	return GF_OK;
}

/*
 * Billing presets by name: `gpufleet preset ls` lists the example price
 * rules of config/providers.ini (built in) and of the user's own
 * providers.ini, with where and when their values were read, so that a
 * rule can be applied with `set NAME preset=...` or `add ... --preset`.
 */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd.h"
#include "preset.h"
#include "status.h"
#include "stopmethod.h"
#include "xmalloc.h"

static int cmd_preset_exec(
    const struct cmd_entry *, struct cmd_ctx *, int, char **);

const struct cmd_entry cmd_preset_entry = {
	.name = "preset",
	.usage = "ls [--json]",
	.summary = "list the billing presets set and add can apply",
	.help =
	    "      --json    print the presets as a JSON array\n\n"
	    "Presets come from config/providers.ini (built in) and from\n"
	    "$XDG_CONFIG_HOME/gpufleet/providers.ini (default ~/.config/...), "
	    "whose\npresets add to the built-in ones or replace those of the "
	    "same name.\nEach states its source and date: the values are "
	    "examples to check against\nthe platform's price page, not "
	    "quotes. STOP is the stop method an\ninstance gets from the "
	    "preset (its provider's unless it names one).\n\n"
	    "Examples:\n"
	    "  gpufleet preset ls\n"
	    "  gpufleet set a100-1 preset=autodl.a100-80g\n",
	.exec = cmd_preset_exec,
};

static const struct option preset_options[] = { { "json", no_argument, NULL,
						    'j' },
	{ "help", no_argument, NULL, 'h' }, { NULL, 0, NULL, 0 } };

/* The stop method an instance gets from p. Caller frees. */
static char *
stop_of(const struct preset *p, const struct config *cf)
{
	struct instance in;
	struct stopmethod_fields sf;
	struct stopmethod m;
	const char *v;
	char *s, *why = NULL;
	int known;

	instance_init(&in);
	memset(&sf, 0, sizeof sf);
	if ((v = preset_value(p, "provider")) != NULL)
		instance_set_field(&in, "provider", v, &why);
	if ((v = preset_value(p, "stop_command")) != NULL)
		stopmethod_field(&sf, "stop_command", v, &known, &why);
	if ((v = preset_value(p, "stop_kind")) != NULL)
		stopmethod_field(&sf, "stop_kind", v, &known, &why);
	free(why); /* checked when the file was read */
	stopmethod_resolve(&in, &sf, cf, &m);
	s = stopmethod_format(&m);
	stopmethod_clear(&m);
	stopmethod_fields_clear(&sf);
	instance_clear(&in);
	return s;
}

static json_t *
preset_json(const struct preset *p, const struct config *cf)
{
	json_t *o = json_object();
	const char *v;
	char *stop = stop_of(p, cf);
	int k;

	json_object_set_new(o, "name", json_string(p->name));
	for (k = 0; k < PRESET_NFIELDS; k++) {
		v = p->values[k];
		json_object_set_new(o, preset_fields[k],
		    v != NULL ? json_string(v) : json_null());
	}
	json_object_set_new(o, "stop_method", json_string(stop));
	json_object_set_new(o, "source", json_string(p->source));
	json_object_set_new(o, "date", json_string(p->date));
	json_object_set_new(o, "file", json_string(p->file));
	json_object_set_new(o, "line", json_integer(p->line));
	free(stop);
	return o;
}

static int
cmd_preset_exec(
    const struct cmd_entry *e, struct cmd_ctx *ctx, int argc, char **argv)
{
	struct preset *v = NULL;
	struct table *t;
	json_t *a;
	char *cause = NULL, *price, *stop;
	const char *storage, *file;
	size_t n = 0, i;
	int ch, status, json = 0;

	while ((ch = cmd_getopt(e, argc, argv, "h", preset_options, &status)) !=
	    -1) {
		if (ch == -2)
			return status;
		if (ch == 'j')
			json = 1;
	}
	if (argc - optind != 1 || strcmp(argv[optind], "ls") != 0)
		return cmd_usage_error(e, "needs ls");
	if (preset_load(NULL, &v, &n, &cause) != 0)
		return cmd_fail(GF_EUSAGE, cause);
	if (json) {
		a = json_array();
		for (i = 0; i < n; i++)
			json_array_append_new(
			    a, preset_json(&v[i], ctx->fleet->config));
		json_print(a, stdout);
		preset_free(v, n);
		return GF_OK;
	}
	t = table_new(9, "NAME", "PRICE", "BILLING", "MIN", "STORAGE", "STOP",
	    "DATE", "SOURCE", "FILE");
	for (i = 0; i < n; i++) {
		xasprintf(&price, "%s %s", preset_value(&v[i], "price"),
		    preset_value(&v[i], "currency"));
		stop = stop_of(&v[i], ctx->fleet->config);
		storage = preset_value(&v[i], "stopped_price");
		file = strcmp(v[i].file, PRESET_BUILTIN) == 0 ? "built in"
							      : v[i].file;
		table_add(t, v[i].name, price, preset_value(&v[i], "billing"),
		    preset_value(&v[i], "min_billed"),
		    storage != NULL ? storage : "none", stop, v[i].date,
		    v[i].source, file);
		free(price);
		free(stop);
	}
	table_print(t, stdout);
	table_free(t);
	printf("These are examples, not quotes: check each against its "
	       "source, the platform's\ncurrent price page, before relying "
	       "on it (built in: config/providers.ini).\n");
	preset_free(v, n);
	return GF_OK;
}

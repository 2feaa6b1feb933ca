/*
 * Change fields of one instance: `gpufleet set NAME FIELD=VALUE...`. All
 * assignments are validated first and stored in one transaction, or none.
 */

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cmd.h"
#include "keys.h"
#include "ledger.h"
#include "log.h"
#include "preset.h"
#include "status.h"
#include "stopmethod.h"
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

static int set_expand_preset(int *, char ***, struct set_preset *, char **);
static void set_preset_clear(struct set_preset *);
static int cmd_set_exec(
    const struct cmd_entry *, struct cmd_ctx *, int, char **);

const struct cmd_entry cmd_set_entry = {
	.name = "set",
	.usage = "NAME FIELD=VALUE...",
	.summary = "change fields of an instance",
	.help =
	    "FIELD is one of: name, host, port, user, provider, region,\n"
	    "identity (a managed key's name or a key file; empty: the "
	    "config default),\nremote_dir, "
	    "authorized_keys_file, notes, platform_id (the platform's id of "
	    "the\ninstance), jump (the instance to reach it through, "
	    "ProxyJump; empty:\ndirect). Tags: see `gpufleet tag`.\n\n"
	    "Pricing (see README, \"Billing\"):\n"
	    "  price=2.69/h (also /min, /s, /day)   currency=CNY\n"
	    "  billing=second|minute|hour           min_billed=10m\n"
	    "  stopped_price=5/day  monthly_price=1500  egress_price=0.8/GB\n"
	    "Prices above 1000000 an hour (or /GB) are refused.\n\n"
	    "preset=NAME applies a billing preset (gpufleet preset ls): its "
	    "whole price\nrule, and its provider and stop method where it "
	    "gives them; `show` then\nsays the price came from it, until a "
	    "pricing field is set by hand.\n\n"
	    "Stopping (see README, \"Stop methods\"):\n"
	    "  stop_command='remote:CMD'|'local:CMD'|none|default\n"
	    "  stop_kind=stop|release|default   allow_release=yes|no\n"
	    "CMD may use {name} {host} {port} {provider} {instance_id} (the "
	    "platform_id).\n\n"
	    "Each FIELD at most once.\n\n"
	    "Examples:\n"
	    "  gpufleet set a100-1 port=32456 price=2.69/h billing=second\n"
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

static const struct option set_options[] = { { "help", no_argument, NULL, 'h' },
	{ NULL, 0, NULL, 0 } };

static int
cmd_set_exec(
    const struct cmd_entry *e, struct cmd_ctx *ctx, int argc, char **argv)
{
	struct inventory *inv = NULL;
	struct instance in;
	char *cause = NULL, *field, *eq;
	struct billing_rule rule;
	struct stopmethod_fields sf;
	struct set_preset sp;
	int ch, status, i, k, r, detaches = 0, known, priced = 0, has_price;
	size_t len;
	int identity_set = 0;
	int64_t key_id = 0;
	int jumped = 0;

	memset(&in, 0, sizeof in);
	memset(&sf, 0, sizeof sf);
	memset(&sp, 0, sizeof sp);
	while ((ch = cmd_getopt(e, argc, argv, "+h", set_options, &status)) !=
	    -1) {
		if (ch == -2)
			return status;
	}
	if (argc - optind < 2)
		return cmd_usage_error(e, "needs NAME and FIELD=VALUE");
	if (instance_check_name(argv[optind], &cause) != 0)
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
	    (r = inventory_get(inv, argv[optind], &in, &cause)) != 0 ||
	    (r = ledger_price_get(inv, in.id, &rule, &has_price, &cause)) !=
		0 ||
	    (r = inventory_stop_get(inv, in.id, &sf, &cause)) != 0)
		goto fail;
	for (i = optind + 1; i < argc; i++) {
		eq = strchr(argv[i], '=');
		field = xstrndup(argv[i], eq - argv[i]);
		if (strcmp(field, "host") == 0 || strcmp(field, "port") == 0 ||
		    strcmp(field, "user") == 0 ||
		    strcmp(field, "identity") == 0)
			detaches = 1;
		if (strcmp(field, "jump") == 0 || strcmp(field, "name") == 0)
			jumped = 1;
		r = stopmethod_field(&sf, field, eq + 1, &known, &cause);
		if (!known)
			r = ledger_price_field(
			    &rule, field, eq + 1, &known, &cause);
		else
			known = 2;
		if (known == 1)
			priced = 1;
		else if (!known && r == 0)
			r = instance_set_field(&in, field, eq + 1, &cause);
		if (r == 0 && strcmp(field, "identity") == 0) {
			free(in.identity);
			in.identity = NULL;
			if ((r = keys_resolve_identity(inv, eq + 1,
				 &in.identity, &key_id, &cause)) != 0) {
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
	/*
	 * Setting what an ssh_config says takes the instance over by hand:
	 * from now on it no longer follows that file.
	 */
	if (in.source != NULL && detaches) {
		warn_msg("%s no longer follows %s (set by hand)", in.name,
		    in.source);
		free(in.source);
		in.source = NULL;
	}
	if (priced &&
	    ((r = billing_rule_validate(&rule, &cause)) != 0 ||
		(r = ledger_price_put(inv, in.id, &rule, &cause)) != 0)) {
		if (r == -1)
			r = -GF_EUSAGE;
		goto fail;
	}
	/* Where the price came from: the preset, else by hand from now on. */
	if (priced &&
	    (r = sp.p != NULL ? preset_origin_put(inv, in.id, sp.p,
				    (int64_t)time(NULL), &cause)
			      : preset_origin_forget(inv, in.id, &cause)) != 0)
		goto fail;
	if ((jumped && (r = inventory_check_jump(inv, &in, &cause)) != 0) ||
	    (r = inventory_update(inv, &in, &cause)) != 0 ||
	    (identity_set && key_id != 0 &&
		(r = keys_set_instance_key(inv, in.id,
		     &(struct keys_key){ .id = key_id, .path = in.identity },
		     &cause)) != 0) ||
	    (identity_set && key_id == 0 &&
		(r = keys_clear_instance_key(inv, in.id, &cause)) != 0) ||
	    (sf.changed &&
		(r = inventory_stop_put(inv, in.id, &sf, &cause)) != 0) ||
	    (r = inventory_commit(inv, &cause)) != 0)
		goto fail;
	inventory_close(inv);
	instance_clear(&in);
	stopmethod_fields_clear(&sf);
	set_preset_clear(&sp);
	return GF_OK;
fail:
	inventory_close(inv);
	instance_clear(&in);
	stopmethod_fields_clear(&sf);
	set_preset_clear(&sp);
	return cmd_fail(-r, cause);
}

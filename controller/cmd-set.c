/*
 * Change fields of one instance: `gpufleet set NAME FIELD=VALUE...`. All
 * assignments are validated first and stored in one transaction, or none.
 */

#include <stdlib.h>
#include <string.h>

#include "cmd.h"
#include "keys.h"
#include "ledger.h"
#include "log.h"
#include "status.h"
#include "stopmethod.h"
#include "xmalloc.h"

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
	    "Stopping (see README, \"Stop methods\"):\n"
	    "  stop_command='remote:CMD'|'local:CMD'|none|default\n"
	    "  stop_kind=stop|release|default   allow_release=yes|no\n"
	    "CMD may use {name} {host} {port} {provider} {instance_id} (the "
	    "platform_id).\n\n"
	    "Each FIELD at most once.\n\n"
	    "Example: gpufleet set a100-1 port=32456 price=2.69/h "
	    "billing=second\n",
	.exec = cmd_set_exec,
};

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
	int ch, status, i, k, r, detaches = 0, known, priced = 0, has_price;
	size_t len;
	int identity_set = 0;
	int64_t key_id = 0;
	int jumped = 0;

	memset(&in, 0, sizeof in);
	memset(&sf, 0, sizeof sf);
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

	if ((status = cmd_open(ctx, &inv)) != 0)
		return status;
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
			    "price, currency, billing, min_billed, "
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
	return GF_OK;
fail:
	inventory_close(inv);
	instance_clear(&in);
	stopmethod_fields_clear(&sf);
	return cmd_fail(-r, cause);
}

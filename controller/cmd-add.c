/*
 * Add one rented instance to the inventory. Everything is validated before
 * the database is opened, so a bad value leaves it untouched.
 */

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cmd.h"
#include "ledger.h"
#include "inventory.h"
#include "status.h"
#include "xmalloc.h"

static int set_target(
    struct instance *, const char *, const char *, const char *, char **);
static int cmd_add_exec(
    const struct cmd_entry *, struct cmd_ctx *, int, char **);

const struct cmd_entry cmd_add_entry = {
	.name = "add",
	.usage = "NAME [USER@]HOST[:PORT] [--port N] [--user U] "
		 "[--identity PATH] [--jump NAME]\n"
		 "       [--provider P] [--region R] [--tag T]... "
		 "[--note TEXT] [--json]",
	.summary = "add an instance to the inventory",
	.help = "NAME is [A-Za-z0-9][A-Za-z0-9._-]{0,62}; IPv6 hosts are "
		"written [ADDR]:PORT.\n\n"
		"  -p, --port N          SSH port (default 22)\n"
		"  -u, --user U          login user (default from config, "
		"else root)\n"
		"  -i, --identity PATH   private key file (default: the "
		"config's identity)\n"
		"  -J, --jump NAME       reach it through instance NAME "
		"(ProxyJump)\n"
		"      --provider P      rental platform (autodl, vast, ...)\n"
		"      --region R        region or zone\n"
		"  -t, --tag T           a tag; repeat for more\n"
		"      --note TEXT       free text\n"
		"      --remote-dir DIR  where the agent lives (default "
		"~/.cache/gpufleet)\n"
		"      --authorized-keys-file PATH  (default "
		"~/.ssh/authorized_keys)\n"
		"      --price P         e.g. 2.69/h (more pricing fields: "
		"gpufleet set)\n"
		"      --billing U       second, minute or hour\n"
		"      --currency C      e.g. CNY (default), USD\n"
		"      --json            print the added instance as JSON\n\n"
		"Example: gpufleet add a100-1 root@connect.example.com:"
		"32455 --provider autodl --tag train\n",
	.exec = cmd_add_exec,
};

enum {
	OPT_PROVIDER = 256,
	OPT_REGION,
	OPT_NOTE,
	OPT_REMOTE_DIR,
	OPT_AUTHKEYS,
	OPT_JSON,
	OPT_PRICE,
	OPT_BILLING,
	OPT_CURRENCY
};

static const struct option add_options[] = { { "port", required_argument, NULL,
						 'p' },
	{ "user", required_argument, NULL, 'u' },
	{ "identity", required_argument, NULL, 'i' },
	{ "jump", required_argument, NULL, 'J' },
	{ "provider", required_argument, NULL, OPT_PROVIDER },
	{ "region", required_argument, NULL, OPT_REGION },
	{ "tag", required_argument, NULL, 't' },
	{ "note", required_argument, NULL, OPT_NOTE },
	{ "remote-dir", required_argument, NULL, OPT_REMOTE_DIR },
	{ "authorized-keys-file", required_argument, NULL, OPT_AUTHKEYS },
	{ "json", no_argument, NULL, OPT_JSON },
	{ "price", required_argument, NULL, OPT_PRICE },
	{ "billing", required_argument, NULL, OPT_BILLING },
	{ "currency", required_argument, NULL, OPT_CURRENCY },
	{ "help", no_argument, NULL, 'h' }, { NULL, 0, NULL, 0 } };

/*
 * Set host, port and user from [USER@]HOST[:PORT] and the --port and
 * --user options (either may be NULL); a value given both ways must agree.
 * Returns 0, or -1 with *cause set.
 */
static int
set_target(struct instance *in, const char *spec, const char *port,
    const char *user, char **cause)
{
	char *spec_user = NULL, *spec_host = NULL;
	int spec_port = 0, p, r = -1;

	if (instance_parse_hostspec(
		spec, &spec_user, &spec_host, &spec_port, cause) != 0)
		return -1;
	free(in->host);
	in->host = spec_host;
	if (port != NULL) {
		if (instance_parse_port(port, &p, cause) != 0)
			goto out;
		if (spec_port != 0 && spec_port != p) {
			xasprintf(cause,
			    "port %d in '%s' conflicts with --port %d",
			    spec_port, spec, p);
			goto out;
		}
		in->port = p;
	} else if (spec_port != 0)
		in->port = spec_port;
	if (user != NULL && spec_user != NULL && strcmp(user, spec_user)) {
		xasprintf(cause, "user '%s' in '%s' conflicts with --user %s",
		    spec_user, spec, user);
		goto out;
	}
	if (user == NULL)
		user = spec_user;
	if (user != NULL && instance_set_field(in, "user", user, cause) != 0)
		goto out;
	r = 0;
out:
	free(spec_user);
	return r;
}

static int
cmd_add_exec(
    const struct cmd_entry *e, struct cmd_ctx *ctx, int argc, char **argv)
{
	struct instance in;
	struct inventory *inv = NULL;
	const char *port = NULL, *user = NULL, *field = NULL;
	char *cause = NULL;
	struct billing_rule rule;
	int ch, status, json = 0, r, known, priced = 0;

	instance_init(&in);
	billing_rule_init(&rule, "CNY");
	free(in.user);
	in.user = xstrdup(ctx->fleet->config->user);
	while ((ch = cmd_getopt(e, argc, argv, "p:u:i:J:t:h", add_options,
		    &status)) != -1) {
		field = NULL;
		switch (ch) {
		case -2:
			goto out;
		case 'p':
			port = optarg;
			break;
		case 'u':
			user = optarg;
			break;
		case 'i':
			field = "identity";
			break;
		case 'J':
			field = "jump";
			break;
		case OPT_PROVIDER:
			field = "provider";
			break;
		case OPT_REGION:
			field = "region";
			break;
		case OPT_NOTE:
			field = "notes";
			break;
		case OPT_REMOTE_DIR:
			field = "remote_dir";
			break;
		case OPT_AUTHKEYS:
			field = "authorized_keys_file";
			break;
		case 't':
			if (instance_check_tag(optarg, &cause) != 0)
				goto usage_fail;
			instance_add_tag(&in, optarg);
			break;
		case OPT_JSON:
			json = 1;
			break;
		case OPT_PRICE:
		case OPT_BILLING:
		case OPT_CURRENCY:
			if (ledger_price_field(&rule,
				ch == OPT_PRICE		? "price"
				    : ch == OPT_BILLING ? "billing"
							: "currency",
				optarg, &known, &cause) != 0)
				goto usage_fail;
			priced = 1;
			break;
		}
		if (field != NULL &&
		    instance_set_field(&in, field, optarg, &cause) != 0)
			goto usage_fail;
	}
	if (argc - optind != 2) {
		status =
		    cmd_usage_error(e, "needs NAME and [USER@]HOST[:PORT]");
		goto out;
	}
	if (instance_set_field(&in, "name", argv[optind], &cause) != 0 ||
	    set_target(&in, argv[optind + 1], port, user, &cause) != 0)
		goto usage_fail;
	in.created_at = time(NULL);

	if ((status = cmd_open(ctx, &inv)) != 0)
		goto out;
	if ((r = inventory_begin(inv, &cause)) != 0 ||
	    (r = inventory_check_jump(inv, &in, &cause)) != 0 ||
	    (r = inventory_add(inv, &in, &cause)) != 0 ||
	    (priced &&
		(r = ledger_price_put(inv, in.id, &rule, &cause)) != 0) ||
	    (r = inventory_commit(inv, &cause)) != 0) {
		status = cmd_fail(-r, cause);
		goto out;
	}
	if (json)
		json_print(instance_to_json(&in), stdout);
	else {
		char *target = instance_target(&in);
		printf("added %s: %s\n", in.name, target);
		free(target);
	}
	status = GF_OK;
	goto out;

usage_fail:
	status = cmd_fail(GF_EUSAGE, cause);
out:
	inventory_close(inv);
	instance_clear(&in);
	return status;
}

/*
 * Pinned host keys: show them, re-trust an instance that was really
 * replaced (accept), or forget a pin so the next contact decides by policy.
 */

#include <stdlib.h>
#include <string.h>

#include "cmd.h"
#include "hostkey.h"
#include "log.h"
#include "remote.h"
#include "status.h"
#include "xmalloc.h"

static int cmd_hostkey_exec(
    const struct cmd_entry *, struct cmd_ctx *, int, char **);

const struct cmd_entry cmd_hostkey_entry = {
	.name = "hostkey",
	.usage = "show|accept|forget NAME [--json] [--fingerprint SHA256:...]",
	.summary = "show, re-trust or forget an instance's pinned host key",
	.help =
	    "Host keys are pinned per instance on first contact (policy "
	    "accept-new)\nor only when your known_hosts files list them "
	    "(policy strict). First\ncontact reads the known_hosts files ssh "
	    "would (UserKnownHostsFile,\nGlobalKnownHostsFile): a key listed "
	    "there is pinned as known_hosts; a host\nlisted with other keys "
	    "only, or with this key @revoked, is refused. A\nchanged key is "
	    "refused until you re-trust it.\n\n"
	    "  show NAME      the pinned key type, fingerprint, source and "
	    "date\n"
	    "  accept NAME    connect, and pin the key the instance presents "
	    "now\n"
	    "                 (--fingerprint FP: only if it is that key)\n"
	    "  forget NAME    drop the pin; the next contact decides by "
	    "policy\n\n"
	    "Examples:\n"
	    "  gpufleet hostkey show a100-1\n"
	    "  gpufleet hostkey accept a100-1 --fingerprint "
	    "SHA256:3VJr0mfXy...\n",
	.exec = cmd_hostkey_exec,
};

enum { OPT_JSON = 256, OPT_FP };

static const struct option hostkey_options[] = { { "json", no_argument, NULL,
						     OPT_JSON },
	{ "fingerprint", required_argument, NULL, OPT_FP },
	{ "help", no_argument, NULL, 'h' }, { NULL, 0, NULL, 0 } };

static int
hostkey_show(struct cmd_ctx *ctx, const char *name, int json)
{
	struct inventory *inv = NULL;
	struct instance in;
	struct hostkey k;
	char *cause = NULL, *when;
	json_t *j;
	int r, status;

	if ((status = cmd_open(ctx, &inv)) != 0)
		return status;
	if ((r = inventory_get(inv, name, &in, &cause)) != 0) {
		inventory_close(inv);
		return cmd_fail(-r, cause);
	}
	r = hostkey_get(inv, in.id, &k, &cause);
	inventory_close(inv);
	if (r < 0) {
		instance_clear(&in);
		return cmd_fail(-r, cause);
	}
	if (json) {
		j = json_object();
		json_object_set_new(j, "name", json_string(in.name));
		if (r == 0) {
			when = instance_format_time(k.first_seen);
			json_object_set_new(j, "type", json_string(k.type));
			json_object_set_new(
			    j, "fingerprint", json_string(k.fingerprint));
			json_object_set_new(j, "key", json_string(k.base64));
			json_object_set_new(j, "source", json_string(k.source));
			json_object_set_new(j, "pinned_at", json_string(when));
			free(when);
		} else
			json_object_set_new(j, "type", json_null());
		json_print(j, stdout);
	} else if (r == 0) {
		when = instance_format_time(k.first_seen);
		printf("%s %s %s (%s, pinned %s)\n", in.name, k.type,
		    k.fingerprint, k.source, when);
		free(when);
	} else
		printf("%s: no host key pinned yet\n", in.name);
	hostkey_clear(&k);
	instance_clear(&in);
	return GF_OK;
}

static int
hostkey_forget_cmd(struct cmd_ctx *ctx, const char *name)
{
	struct inventory *inv = NULL;
	struct instance in;
	char *cause = NULL;
	int r, status;

	if ((status = cmd_open(ctx, &inv)) != 0)
		return status;
	if ((r = inventory_get(inv, name, &in, &cause)) == 0) {
		if ((r = inventory_begin(inv, &cause)) == 0 &&
		    (r = hostkey_forget(inv, in.id, &cause)) == 0 &&
		    (r = inventory_commit(inv, &cause)) == 0)
			r = hostkey_sync(inv, &cause);
		instance_clear(&in);
	}
	inventory_close(inv);
	if (r != 0)
		return cmd_fail(-r, cause);
	printf("%s: host key forgotten\n", name);
	return GF_OK;
}

static int
hostkey_accept(struct cmd_ctx *ctx, const char *name, const char *fp)
{
	struct engine_settings set;
	struct remote *rm = NULL;
	struct hostkey k;
	char *cause = NULL;
	int r;

	if ((r = remote_open(ctx->fleet, name, &rm, &cause)) != 0)
		return cmd_fail(-r, cause);
	memset(&set, 0, sizeof set);
	set.command = NULL;
	set.fanout = 1;
	set.connect_timeout = ctx->fleet->config->connect_timeout;
	set.setup_timeout = ctx->fleet->config->setup_timeout;
	rm->repin = 1;
	rm->expect_fp = fp;
	if (remote_run(rm, &set) != 0 || rm->hosts[0].fail != EF_NONE) {
		error("%s: %s", name,
		    rm->hosts[0].fail_msg != NULL ? rm->hosts[0].fail_msg
						  : "cannot start");
		remote_close(rm);
		return GF_EHOSTS;
	}
	if (hostkey_get(rm->inv, rm->list[0].id, &k, &cause) == 0) {
		printf("%s: pinned %s %s\n", name, k.type, k.fingerprint);
		hostkey_clear(&k);
	}
	free(cause);
	remote_close(rm);
	return GF_OK;
}

static int
cmd_hostkey_exec(
    const struct cmd_entry *e, struct cmd_ctx *ctx, int argc, char **argv)
{
	const char *fp = NULL, *verb, *name;
	char *cause = NULL;
	int ch, status, json = 0;

	while ((ch = cmd_getopt(
		    e, argc, argv, "h", hostkey_options, &status)) != -1) {
		switch (ch) {
		case -2:
			return status;
		case OPT_JSON:
			json = 1;
			break;
		case OPT_FP:
			fp = optarg;
			break;
		}
	}
	if (argc - optind != 2)
		return cmd_usage_error(e, "needs show|accept|forget and NAME");
	verb = argv[optind];
	name = argv[optind + 1];
	if (instance_check_name(name, &cause) != 0)
		return cmd_fail(GF_EUSAGE, cause);
	if (fp != NULL && strncmp(fp, "SHA256:", 7) != 0)
		return cmd_usage_error(e,
		    "--fingerprint must look like "
		    "SHA256:...");
	if (strcmp(verb, "show") == 0)
		return hostkey_show(ctx, name, json);
	if (strcmp(verb, "accept") == 0)
		return hostkey_accept(ctx, name, fp);
	if (strcmp(verb, "forget") == 0)
		return hostkey_forget_cmd(ctx, name);
	return cmd_usage_error(
	    e, "unknown action '%s' (show, accept, forget)", verb);
}

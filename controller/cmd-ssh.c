/*
 * Open an interactive OpenSSH session to an instance: exec of the system
 * ssh with the instance's identity and a known_hosts file written from
 * gpufleet's pinned keys (HostKeyAlias=NAME), so ssh and gpufleet always
 * agree on trust. An instance without a pin is contacted first so that the
 * policy decides, exactly as for exec.
 */

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cmd.h"
#include "hostkey.h"
#include "keyring.h"
#include "log.h"
#include "misc.h"
#include "remote.h"
#include "status.h"
#include "xmalloc.h"

static int cmd_ssh_exec(
    const struct cmd_entry *, struct cmd_ctx *, int, char **);

const struct cmd_entry cmd_ssh_entry = {
	.name = "ssh",
	.usage = "NAME [--argv] [-- COMMAND [ARG...]]",
	.summary = "log in to an instance with OpenSSH (pinned host key)",
	.help =
	    "Runs the system ssh with the instance's user, port and identity,"
	    "\nStrictHostKeyChecking=yes and a known_hosts file that gpufleet "
	    "keeps\nin sync with its pinned keys. As with ssh and exec, the "
	    "words after --\nare joined into one line for the remote shell; "
	    "with --argv each ARG\nreaches the command exactly. GPUFLEET_SSH "
	    "names another ssh binary.\n\n"
	    "Examples:\n"
	    "  gpufleet ssh a100-1\n"
	    "  gpufleet ssh a100-1 -- tail -f train.log\n",
	.exec = cmd_ssh_exec,
};

enum { OPT_ARGV = 256 };

static const struct option ssh_options[] = { { "argv", no_argument, NULL,
						 OPT_ARGV },
	{ "help", no_argument, NULL, 'h' }, { NULL, 0, NULL, 0 } };

static int
cmd_ssh_exec(
    const struct cmd_entry *e, struct cmd_ctx *ctx, int argc, char **argv)
{
	struct engine_settings set;
	struct remote *rm = NULL;
	const struct instance *in;
	const char *ssh = getenv("GPUFLEET_SSH");
	char *cause = NULL, *kh = NULL, *opt_alias, *opt_kh, *port, *id;
	char *command = NULL, **args;
	int ch, status, r, dashdash = 0, k, n = 0, exact = 0;

	for (k = 1; k < argc; k++) {
		if (strcmp(argv[k], "--") == 0) {
			dashdash = k;
			break;
		}
	}
	while ((ch = cmd_getopt(e, dashdash ? dashdash : argc, argv, "h",
		    ssh_options, &status)) != -1) {
		if (ch == -2)
			return status;
		if (ch == OPT_ARGV)
			exact = 1;
	}
	if ((dashdash ? dashdash : argc) - optind != 1)
		return cmd_usage_error(e, "needs exactly one NAME");
	if (instance_check_name(argv[optind], &cause) != 0)
		return cmd_fail(GF_EUSAGE, cause);
	if ((r = remote_open(ctx->fleet, argv[optind], &rm, &cause)) != 0)
		return cmd_fail(-r, cause);
	in = &rm->list[0];
	if (rm->hosts[0].fail != EF_NONE) {
		error("%s: %s", in->name, rm->hosts[0].fail_msg);
		remote_close(rm);
		return GF_EHOSTS;
	}
	if (rm->pinned_type[0] == NULL) {
		memset(&set, 0, sizeof set);
		set.fanout = 1;
		set.connect_timeout = ctx->fleet->config->connect_timeout;
		set.setup_timeout = ctx->fleet->config->setup_timeout;
		if (remote_run(rm, &set) != 0 || rm->hosts[0].fail != EF_NONE) {
			error("%s: %s", in->name,
			    rm->hosts[0].fail_msg != NULL
				? rm->hosts[0].fail_msg
				: "cannot connect");
			remote_close(rm);
			return GF_EHOSTS;
		}
	}
	if ((r = hostkey_sync(rm->inv, &cause)) != 0) {
		remote_close(rm);
		return cmd_fail(-r, cause);
	}
	kh = hostkey_known_hosts_path(rm->inv);

	args = xcalloc(32, sizeof *args);
	args[n++] = xstrdup(ssh != NULL && *ssh != '\0' ? ssh : "ssh");
	xasprintf(&opt_alias, "HostKeyAlias=%s", in->name);
	xasprintf(&opt_kh, "UserKnownHostsFile=%s", kh);
	xasprintf(&port, "%d", in->port);
	args[n++] = xstrdup("-o");
	args[n++] = opt_alias;
	args[n++] = xstrdup("-o");
	args[n++] = opt_kh;
	args[n++] = xstrdup("-o");
	args[n++] = xstrdup("GlobalKnownHostsFile=/dev/null");
	args[n++] = xstrdup("-o");
	args[n++] = xstrdup("StrictHostKeyChecking=yes");
	args[n++] = xstrdup("-o");
	args[n++] = xstrdup("UpdateHostKeys=no");
	args[n++] = xstrdup("-p");
	args[n++] = port;
	args[n++] = xstrdup("-l");
	args[n++] = xstrdup(in->user);
	id = in->identity != NULL ? in->identity : ctx->fleet->config->identity;
	if (id != NULL) {
		args[n++] = xstrdup("-i");
		args[n++] = misc_expand_home(id);
		args[n++] = xstrdup("-o");
		args[n++] = xstrdup("IdentitiesOnly=yes");
	}
	args[n++] = xstrdup(in->host);
	if (dashdash && dashdash + 1 < argc) {
		command = exact
		    ? misc_quote_argv(argc - dashdash - 1, argv + dashdash + 1)
		    : misc_join_argv(argc - dashdash - 1, argv + dashdash + 1);
		args[n++] = xstrdup("--");
		args[n++] = command;
	}
	args[n] = NULL;
	free(kh);
	remote_close(rm);
	fflush(stdout);
	execvp(args[0], args);
	error("cannot run %s: %s", args[0], strerror(errno));
	return GF_EHOSTS;
}

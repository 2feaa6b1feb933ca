/*
 * The fleet for OpenSSH's own tools: print the Host blocks (as ls --format
 * ssh-config), or install them as ~/.ssh/gpufleet.conf, which every later
 * gpufleet command keeps up to date (sshexport.h), or remove that file.
 */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd.h"
#include "hostkey.h"
#include "sshexport.h"
#include "status.h"
#include "xmalloc.h"

static int cmd_ssh_config_exec(
    const struct cmd_entry *, struct cmd_ctx *, int, char **);
static int print_config(struct cmd_ctx *, const char *);

const struct cmd_entry cmd_ssh_config_entry = {
	.name = "ssh-config",
	.usage = "[SELECTOR] | --install [--json] | --uninstall [--json]",
	.summary = "the fleet as an ssh_config for ssh, scp, sftp, rsync",
	.help =
	    "Prints one Host block per instance (as ls --format ssh-config): "
	    "HostName,\nPort, User, the current key (IdentityFile, "
	    "IdentitiesOnly) and the pinned\nhost key (HostKeyAlias NAME, "
	    "UserKnownHostsFile the known_hosts file\ngpufleet writes from "
	    "its pins, StrictHostKeyChecking yes). An instance\nwith no pin "
	    "yet is refused by ssh until `gpufleet status NAME` pins one.\n"
	    "An instance behind a jump host gets ProxyJump JUMP, and the "
	    "jump's block\nis written too when SELECTOR leaves it out.\n\n"
	    "      --install    write ~/.ssh/gpufleet.conf (0600) for every "
	    "instance in\n"
	    "                   service; gpufleet rewrites it after every "
	    "command that\n"
	    "                   changes addresses or keys. Add the Include "
	    "line it\n"
	    "                   prints at the top of ~/.ssh/config. A file "
	    "gpufleet did\n"
	    "                   not write, or wrote from another inventory, "
	    "is never\n"
	    "                   replaced.\n"
	    "      --uninstall  remove that file (only if gpufleet wrote it "
	    "from this\n"
	    "                   inventory)\n"
	    "      --json       with --install/--uninstall: the result as "
	    "JSON\n\n"
	    "Examples:\n"
	    "  gpufleet ssh-config > fleet.conf && scp -F fleet.conf x "
	    "a100-1:\n"
	    "  gpufleet ssh-config --install     # then: ssh a100-1, "
	    "rsync -a d/ a100-1:d/\n",
	.exec = cmd_ssh_config_exec,
};

static const struct option ssh_config_options[] = { { "install", no_argument,
							NULL, 'i' },
	{ "uninstall", no_argument, NULL, 'u' },
	{ "json", no_argument, NULL, 'j' }, { "help", no_argument, NULL, 'h' },
	{ NULL, 0, NULL, 0 } };

/* Print the Host blocks of the instances selected (all in service). */
static int
print_config(struct cmd_ctx *ctx, const char *selector)
{
	struct inventory *inv;
	struct instance *list = NULL;
	char *cause = NULL, *text = NULL;
	size_t n = 0;
	int r;

	if ((r = fleet_inventory(ctx->fleet, &inv, &cause)) != 0)
		return cmd_fail(-r, cause);
	if (selector != NULL)
		r = inventory_select(inv, selector, &list, &n, &cause);
	else
		r = inventory_list(inv, 0, &list, &n, &cause);
	if (r == 0)
		r = sshexport_render(
		    inv, ctx->fleet->config, list, n, NULL, &text, &cause);
	if (r == 0)
		r = hostkey_sync(inv, &cause);
	instance_free_array(list, n);
	if (r != 0) {
		free(text);
		return cmd_fail(-r, cause);
	}
	fputs(text, stdout);
	free(text);
	return GF_OK;
}

static int
cmd_ssh_config_exec(
    const struct cmd_entry *e, struct cmd_ctx *ctx, int argc, char **argv)
{
	char *cause = NULL, *path = NULL;
	int ch, status, install = 0, uninstall = 0, json = 0, r, done;
	size_t nhosts = 0;
	json_t *o;

	while ((ch = cmd_getopt(
		    e, argc, argv, "h", ssh_config_options, &status)) != -1) {
		switch (ch) {
		case -2:
			return status;
		case 'i':
			install = 1;
			break;
		case 'u':
			uninstall = 1;
			break;
		case 'j':
			json = 1;
			break;
		}
	}
	if (install && uninstall)
		return cmd_usage_error(
		    e, "--install and --uninstall exclude each other");
	if (!install && !uninstall) {
		if (json)
			return cmd_usage_error(
			    e, "--json goes with --install or --uninstall");
		if (argc - optind > 1)
			return cmd_usage_error(e, "takes at most one SELECTOR");
		return print_config(
		    ctx, argc - optind == 1 ? argv[optind] : NULL);
	}
	if (argc - optind != 0)
		return cmd_usage_error(e,
		    "--%s takes no SELECTOR (the file holds every instance)",
		    install ? "install" : "uninstall");

	if (install)
		r = sshexport_install(
		    ctx->fleet, &path, &done, &nhosts, &cause);
	else
		r = sshexport_uninstall(ctx->fleet, &path, &done, &cause);
	if (r != 0) {
		free(path);
		return cmd_fail(-r, cause);
	}
	if (json) {
		o = json_pack("{s:s, s:s, s:b}", "path", path, "action",
		    install ? "install" : "uninstall",
		    install ? "changed" : "removed", done);
		if (install) {
			json_object_set_new(o, "hosts", json_integer(nhosts));
			json_object_set_new(
			    o, "include", json_string(SSHEXPORT_INCLUDE));
		}
		json_print(o, stdout);
	} else if (install) {
		printf("%s %s (%zu host%s)\n",
		    done ? "wrote" : "up to date:", path, nhosts,
		    nhosts == 1 ? "" : "s");
		printf("Add this line at the top of ~/.ssh/config (before any "
		       "Host or Match):\n    " SSHEXPORT_INCLUDE "\n"
		       "gpufleet rewrites the file when addresses or keys "
		       "change.\n");
	} else if (done)
		printf("removed %s (an Include of it in ~/.ssh/config can "
		       "stay: ssh skips a missing file)\n",
		    path);
	else
		printf("nothing to remove: %s does not exist\n", path);
	free(path);
	return GF_OK;
}

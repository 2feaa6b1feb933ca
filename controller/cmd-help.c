/* Print the list of commands, or the full help of one command. */

#include <stdio.h>
#include <string.h>

#include "cmd.h"
#include "status.h"

static int cmd_help_exec(
    const struct cmd_entry *, struct cmd_ctx *, int, char **);

const struct cmd_entry cmd_help_entry = {
	.name = "help",
	.usage = "[COMMAND]",
	.summary = "show help for gpufleet or one command",
	.help = "",
	.exec = cmd_help_exec,
};

static int
cmd_help_exec(
    const struct cmd_entry *e, struct cmd_ctx *ctx, int argc, char **argv)
{
	(void)ctx;
	if (argc == 2 &&
	    (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0))
		return cmd_help(stdout, e->name);
	if (argc > 2)
		return cmd_usage_error(e, "takes at most one COMMAND");
	return cmd_help(stdout, argc == 2 ? argv[1] : NULL);
}

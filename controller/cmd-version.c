/* Print the version of gpufleet (and of the agent it would deploy). */

#include <stdio.h>

#include "cmd.h"
#include "gpufleet/version.h"
#include "status.h"

static int cmd_version_exec(
    const struct cmd_entry *, struct cmd_ctx *, int, char **);

const struct cmd_entry cmd_version_entry = {
	.name = "version",
	.usage = "",
	.summary = "print the version",
	.help = "",
	.exec = cmd_version_exec,
};

static int
cmd_version_exec(
    const struct cmd_entry *e, struct cmd_ctx *ctx, int argc, char **argv)
{
	static const struct option lo[] = { { "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 } };
	int ch, status;

	(void)ctx;
	while ((ch = cmd_getopt(e, argc, argv, "h", lo, &status)) != -1) {
		if (ch == -2)
			return status;
	}
	if (optind != argc)
		return cmd_usage_error(e, "takes no arguments");
	printf("gpufleet %s\n", GPUFLEET_VERSION);
	return GF_OK;
}

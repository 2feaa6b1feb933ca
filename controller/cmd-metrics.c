/*
 * The fleet's stored state as Prometheus metrics, without contacting any
 * instance: what the last status pass saw of each GPU, whether each
 * instance was up, its price, its cost this month and its next armed
 * stop, and each provider's balance and runway. Printed, or written
 * atomically to a file for node_exporter's textfile collector. The
 * daemon serves the same text (plus its own metrics) on GET /metrics.
 */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cmd.h"
#include "metrics.h"
#include "misc.h"
#include "status.h"
#include "xmalloc.h"

static int cmd_metrics_exec(
    const struct cmd_entry *, struct cmd_ctx *, int, char **);

const struct cmd_entry cmd_metrics_entry = {
	.name = "metrics",
	.usage = "[SELECTOR] [--output FILE]",
	.summary = "the stored fleet state as Prometheus metrics",
	.help =
	    "Prints Prometheus text format 0.0.4 from the database: no "
	    "instance is\ncontacted, so the GPU numbers are those of each "
	    "instance's last report\n(gpufleet status or the daemon's poll). "
	    "Per GPU: utilization ratio,\nmemory used and total (bytes), "
	    "temperature, power; per instance: up,\nsessions, cost this month "
	    "and price per hour (major units, label\ncurrency), the next armed "
	    "stop (Unix time); per provider with a\nbalance: the balance left "
	    "and the runway (seconds). What is not known\nis left out. "
	    "SELECTOR picks instances (default: every one in service);\n"
	    "providers are always all of them. The daemon's GET /metrics "
	    "serves the\nsame plus its own (poll durations, events by "
	    "kind).\n\n"
	    "      --output FILE   write FILE instead (mode 0644, through a "
	    "temporary\n"
	    "                      file in its directory renamed over it), "
	    "e.g. for\n"
	    "                      node_exporter's textfile collector "
	    "(a .prom file in\n"
	    "                      its --collector.textfile.directory)\n\n"
	    "Examples:\n"
	    "  gpufleet metrics @train\n"
	    "  gpufleet metrics --output "
	    "/var/lib/node_exporter/textfile/gpufleet.prom\n",
	.exec = cmd_metrics_exec,
};

enum { OPT_OUTPUT = 256 };

static const struct option metrics_options[] = {
	{ "output", required_argument, NULL, OPT_OUTPUT },
	{ "help", no_argument, NULL, 'h' },
	{ NULL, 0, NULL, 0 },
};

static int
cmd_metrics_exec(
    const struct cmd_entry *e, struct cmd_ctx *ctx, int argc, char **argv)
{
	struct inventory *inv = NULL;
	struct instance *list = NULL;
	struct metrics_input in;
	const char *output = NULL;
	int64_t now = (int64_t)time(NULL);
	char *cause = NULL, *text = NULL;
	size_t n = 0;
	int ch, status, r;

	while ((ch = cmd_getopt(
		    e, argc, argv, "h", metrics_options, &status)) != -1) {
		if (ch == -2)
			return status;
		if (ch == OPT_OUTPUT)
			output = optarg;
	}
	if (argc - optind > 1)
		return cmd_usage_error(e, "takes at most one SELECTOR");
	if (output != NULL && *output == '\0')
		return cmd_usage_error(e, "--output needs a file name");
	if ((status = cmd_open(ctx, &inv)) != 0)
		return status;
	memset(&in, 0, sizeof in);
	if (argc - optind == 1)
		r = inventory_select(inv, argv[optind], &list, &n, &cause);
	else
		r = inventory_list(inv, 0, &list, &n, &cause);
	if (r == 0)
		r = metrics_gather_list(
		    inv, ctx->fleet->config, list, n, now, &in, &cause);
	if (r == 0) {
		text = metrics_render(&in, NULL);
		if (output == NULL)
			fputs(text, stdout);
		else if (misc_write_atomic_mode(
			     output, text, strlen(text), 0644, &cause) != 0)
			r = -GF_EUSAGE;
	}
	status = r == 0 ? GF_OK : cmd_fail(-r, cause);
	free(text);
	metrics_input_free(&in);
	instance_free_array(list, n);
	inventory_close(inv);
	return status;
}

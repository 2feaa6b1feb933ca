/*
 * State what happened to an instance, for the ledger that costs derive
 * from: `gpufleet mark a100-1 stopped --at '2026-11-29 23:10'`.
 */

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cmd.h"
#include "ledger.h"
#include "status.h"
#include "timeparse.h"
#include "xmalloc.h"

static int cmd_mark_exec(
    const struct cmd_entry *, struct cmd_ctx *, int, char **);

const struct cmd_entry cmd_mark_entry = {
	.name = "mark",
	.usage = "NAME running|stopped|released [--at TIME] [--note TEXT]",
	.summary = "record that an instance started, stopped or was released",
	.help =
	    "Adds a 'stated' entry to the instance's ledger; costs are always "
	    "derived\nfrom the ledger, so a corrected entry corrects every "
	    "report. TIME:\n2026-11-01T02:00:00Z, '2026-11-01 02:00', "
	    "2026-11-01, -2h, yesterday, now\n(default now); not in the "
	    "future, "
	    "nor more than 7 days before the instance\nwas added.\n\n"
	    "Example: gpufleet mark a100-2 stopped --at -3h\n",
	.exec = cmd_mark_exec,
};

enum { OPT_AT = 256, OPT_NOTE };

static const struct option mark_options[] = { { "at", required_argument, NULL,
						  OPT_AT },
	{ "note", required_argument, NULL, OPT_NOTE },
	{ "help", no_argument, NULL, 'h' }, { NULL, 0, NULL, 0 } };

static int
cmd_mark_exec(
    const struct cmd_entry *e, struct cmd_ctx *ctx, int argc, char **argv)
{
	struct inventory *inv = NULL;
	struct instance in;
	const char *at = "now", *note = NULL, *state;
	char *cause = NULL, *when;
	int64_t t, now = (int64_t)time(NULL);
	int ch, status, r;

	memset(&in, 0, sizeof in);
	while ((ch = cmd_getopt(e, argc, argv, "h", mark_options, &status)) !=
	    -1) {
		switch (ch) {
		case -2:
			return status;
		case OPT_AT:
			at = optarg;
			break;
		case OPT_NOTE:
			note = optarg;
			break;
		}
	}
	if (argc - optind != 2)
		return cmd_usage_error(e, "needs NAME and a state");
	state = argv[optind + 1];
	if (strcmp(state, "running") != 0 && strcmp(state, "stopped") != 0 &&
	    strcmp(state, "released") != 0)
		return cmd_usage_error(e,
		    "state '%s' must be running, stopped "
		    "or released",
		    state);
	if (instance_check_name(argv[optind], &cause) != 0 ||
	    timeparse(at, now, &t, &cause) != 0)
		return cmd_fail(GF_EUSAGE, cause);
	if ((status = cmd_open(ctx, &inv)) != 0)
		return status;
	if ((r = inventory_begin(inv, &cause)) != 0 ||
	    (r = inventory_get(inv, argv[optind], &in, &cause)) != 0 ||
	    (r = ledger_check_time(t, ledger_begin(&in), now, &cause)) != 0 ||
	    (r = ledger_add(inv, in.id, t, state, "stated", note, &cause)) !=
		0 ||
	    (strcmp(state, "released") == 0 &&
		(r = inventory_release(inv, in.id, t, &cause)) != 0) ||
	    (r = inventory_commit(inv, &cause)) != 0) {
		inventory_close(inv);
		instance_clear(&in);
		return cmd_fail(-r, cause);
	}
	when = instance_format_time(t);
	printf("%s: %s since %s\n", in.name, state, when);
	free(when);
	inventory_close(inv);
	instance_clear(&in);
	return GF_OK;
}

/*
 * Read and repair an instance's ledger, the state changes its cost derives
 * from: list the entries with their ids, delete one that is wrong (an
 * observation from a broken report) or move one to the time it really
 * happened. `mark` adds entries; this corrects them.
 */

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cmd.h"
#include "ledger.h"
#include "status.h"
#include "timeparse.h"
#include "xmalloc.h"

static int cmd_ledger_exec(
    const struct cmd_entry *, struct cmd_ctx *, int, char **);
static int parse_entry(const char *, int64_t *);
static void print_entries(const struct ledger_entry *, size_t, int);

const struct cmd_entry cmd_ledger_entry = {
	.name = "ledger",
	.usage = "NAME [--json] | NAME --delete ID | NAME --move ID --at TIME",
	.summary = "list, delete or correct the ledger entries of an instance",
	.help =
	    "Without an option, lists the instance's ledger: ID, TIME, "
	    "STATE, SOURCE\n(observed, performed or stated) and NOTE. Costs "
	    "are derived from it, so\na corrected entry corrects every "
	    "report.\n\n"
	    "      --delete ID       delete entry ID (e.g. an observation from "
	    "a wrong\n                        report)\n"
	    "      --move ID --at TIME  move entry ID to TIME (formats as in "
	    "mark)\n"
	    "      --json            the entries as a JSON array\n"
	    "A release is not deleted or moved here.\n\n"
	    "Examples:\n"
	    "  gpufleet ledger a100-2\n"
	    "  gpufleet ledger a100-2 --delete 17\n"
	    "  gpufleet ledger a100-2 --move 18 --at '2026-11-29 23:10'\n",
	.exec = cmd_ledger_exec,
};

enum { OPT_DELETE = 256, OPT_MOVE, OPT_AT, OPT_JSON };

static const struct option ledger_options[] = { { "delete", required_argument,
						    NULL, OPT_DELETE },
	{ "move", required_argument, NULL, OPT_MOVE },
	{ "at", required_argument, NULL, OPT_AT },
	{ "json", no_argument, NULL, OPT_JSON },
	{ "help", no_argument, NULL, 'h' }, { NULL, 0, NULL, 0 } };

/* An entry id: a positive decimal. */
static int
parse_entry(const char *s, int64_t *out)
{
	char *end;
	long long v;

	errno = 0;
	v = strtoll(s, &end, 10);
	if (*s == '\0' || *end != '\0' || errno != 0 || v < 1)
		return -1;
	*out = v;
	return 0;
}

static void
print_entries(const struct ledger_entry *v, size_t n, int json)
{
	struct table *t;
	json_t *arr, *o;
	char id[24], *when;
	size_t i;

	if (json) {
		arr = json_array();
		for (i = 0; i < n; i++) {
			o = json_object();
			when = instance_format_time(v[i].t);
			json_object_set_new(o, "id", json_integer(v[i].id));
			json_object_set_new(o, "t", json_integer(v[i].t));
			json_object_set_new(o, "time", json_string(when));
			json_object_set_new(
			    o, "state", json_string(v[i].state));
			json_object_set_new(
			    o, "source", json_string(v[i].source));
			json_object_set_new(o, "note",
			    v[i].note != NULL ? json_string(v[i].note)
					      : json_null());
			json_array_append_new(arr, o);
			free(when);
		}
		json_print(arr, stdout);
		return;
	}
	t = table_new(5, "ID", "TIME", "STATE", "SOURCE", "NOTE");
	for (i = 0; i < n; i++) {
		snprintf(id, sizeof id, "%lld", (long long)v[i].id);
		when = instance_format_time(v[i].t);
		table_add(t, id, when, v[i].state, v[i].source, v[i].note);
		free(when);
	}
	table_print(t, stdout);
	table_free(t);
}

static int
cmd_ledger_exec(
    const struct cmd_entry *e, struct cmd_ctx *ctx, int argc, char **argv)
{
	struct inventory *inv = NULL;
	struct instance in;
	struct ledger_entry *v = NULL;
	const char *del = NULL, *move = NULL, *at = NULL;
	char *cause = NULL, *when;
	int64_t entry = 0, t = 0;
	size_t n = 0;
	int ch, status, r, json = 0;

	memset(&in, 0, sizeof in);
	while ((ch = cmd_getopt(e, argc, argv, "h", ledger_options, &status)) !=
	    -1) {
		switch (ch) {
		case -2:
			return status;
		case OPT_DELETE:
			del = optarg;
			break;
		case OPT_MOVE:
			move = optarg;
			break;
		case OPT_AT:
			at = optarg;
			break;
		case OPT_JSON:
			json = 1;
			break;
		}
	}
	if (argc - optind != 1)
		return cmd_usage_error(e, "needs one NAME");
	if (del != NULL && move != NULL)
		return cmd_usage_error(e, "takes --delete or --move, not both");
	if ((move != NULL) != (at != NULL))
		return cmd_usage_error(e, "--move ID needs --at TIME");
	if ((del != NULL && parse_entry(del, &entry) != 0) ||
	    (move != NULL && parse_entry(move, &entry) != 0))
		return cmd_usage_error(e, "entry '%s' is not an entry id",
		    del != NULL ? del : move);
	if (instance_check_name(argv[optind], &cause) != 0 ||
	    (at != NULL && timeparse(at, (int64_t)time(NULL), &t, &cause) != 0))
		return cmd_fail(GF_EUSAGE, cause);
	if ((status = cmd_open(ctx, &inv)) != 0)
		return status;
	if ((r = inventory_begin(inv, &cause)) != 0 ||
	    (r = inventory_get(inv, argv[optind], &in, &cause)) != 0)
		goto fail;
	if (del == NULL && move == NULL) {
		if ((r = ledger_entries(inv, in.id, &v, &n, &cause)) != 0)
			goto fail;
		inventory_rollback(inv);
		print_entries(v, n, json);
		ledger_entries_free(v, n);
		goto out;
	}
	if ((r = del != NULL
		    ? ledger_delete(inv, in.id, entry, &cause)
		    : ledger_move(inv, in.id, entry, t, &cause)) != 0 ||
	    (r = inventory_commit(inv, &cause)) != 0)
		goto fail;
	if (del != NULL)
		printf("%s: ledger entry %lld deleted\n", in.name,
		    (long long)entry);
	else {
		when = instance_format_time(t);
		printf("%s: ledger entry %lld moved to %s\n", in.name,
		    (long long)entry, when);
		free(when);
	}
out:
	inventory_close(inv);
	instance_clear(&in);
	return GF_OK;
fail:
	inventory_rollback(inv);
	inventory_close(inv);
	instance_clear(&in);
	return cmd_fail(-r, cause);
}

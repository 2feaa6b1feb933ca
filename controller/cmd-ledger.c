/*
 * Read and repair the ledger, the state changes costs derive from: list
 * an instance's entries with their ids, remove one that is wrong (an
 * observation from a broken report, an impossible container start) or
 * move one to the time it really happened. Entry ids are global; every
 * correction is recorded in events. `mark` adds entries; this corrects
 * them.
 */

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "actionlog.h"
#include "cmd.h"
#include "ledger.h"
#include "status.h"
#include "timeparse.h"
#include "xmalloc.h"

static int cmd_ledger_exec(
    const struct cmd_entry *, struct cmd_ctx *, int, char **);
static int parse_entry(const char *, int64_t *);
static void print_entries(const struct ledger_entry *, size_t, int);
static int correct(struct cmd_ctx *, const char *, int64_t, const char *);

const struct cmd_entry cmd_ledger_entry = {
	.name = "ledger",
	.usage = "NAME [--json] | rm ID | amend ID --at TIME",
	.summary = "list, remove or correct the ledger entries of an instance",
	.help =
	    "With NAME, lists the instance's ledger: ID, TIME, STATE, SOURCE\n"
	    "(observed, performed or stated) and NOTE. Costs are derived from "
	    "it, so\na corrected entry corrects every report. Entry ids are "
	    "unique across\ninstances; each correction is recorded in "
	    "`gpufleet events`.\n\n"
	    "  rm ID                 remove entry ID (e.g. an observation from "
	    "a wrong\n                        report)\n"
	    "  amend ID --at TIME    move entry ID to TIME (formats and limits "
	    "as in\n                        mark)\n"
	    "      --json            the entries as a JSON array\n"
	    "NAME --delete ID and NAME --move ID --at TIME are the same as rm "
	    "and\namend, for an entry of NAME. A release is not removed or "
	    "moved here.\n\n"
	    "Examples:\n"
	    "  gpufleet ledger a100-2\n"
	    "  gpufleet ledger rm 17\n"
	    "  gpufleet ledger amend 18 --at '2026-11-29 23:10'\n",
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

/*
 * Remove entry (at NULL) or move it to at, checked against its instance;
 * name (or NULL: any instance) must own it. Recorded in events.
 */
static int
correct(struct cmd_ctx *ctx, const char *name, int64_t entry, const char *at)
{
	struct inventory *inv = NULL;
	struct instance in, owner;
	struct ledger_entry was;
	json_t *names;
	char *cause = NULL, *old, *when = NULL, *why;
	int64_t id = 0, owner_id = 0, t = 0, now = (int64_t)time(NULL);
	int status, r;

	memset(&in, 0, sizeof in);
	memset(&owner, 0, sizeof owner);
	memset(&was, 0, sizeof was);
	if ((at != NULL && timeparse(at, now, &t, &cause) != 0) ||
	    (name != NULL && instance_check_name(name, &cause) != 0))
		return cmd_fail(GF_EUSAGE, cause);
	if ((status = cmd_open(ctx, &inv)) != 0)
		return status;
	if ((r = inventory_begin(inv, &cause)) != 0 ||
	    (name != NULL && (r = inventory_get(inv, name, &in, &cause)) != 0))
		goto fail;
	id = in.id;
	if (at == NULL)
		r = ledger_remove(inv, id, entry, &owner_id, &was, &cause);
	else
		r = ledger_amend(inv, id, entry, t, &owner_id, &was, &cause);
	if (r != 0 ||
	    (r = inventory_get_id(inv, owner_id, &owner, &cause)) != 0)
		goto fail;
	if (at != NULL &&
	    (r = ledger_check_time(t, ledger_begin(&owner), now, &cause)) != 0)
		goto fail;
	old = instance_format_time(was.t);
	if (at != NULL) {
		when = instance_format_time(t);
		xasprintf(&why, "entry %lld (%s, %s) moved from %s to %s",
		    (long long)entry, was.state, was.source, old, when);
	} else
		xasprintf(&why, "entry %lld (%s at %s, %s) removed",
		    (long long)entry, was.state, old, was.source);
	names = json_pack("[s]", owner.name);
	r = actionlog_add(inv, now, at != NULL ? "ledger_amend" : "ledger_rm",
	    NULL, names, why, NULL, NULL, &cause);
	json_decref(names);
	if (r == 0)
		r = inventory_commit(inv, &cause);
	if (r == 0 && at != NULL)
		printf("%s: ledger entry %lld moved to %s\n", owner.name,
		    (long long)entry, when);
	else if (r == 0)
		printf("%s: ledger entry %lld deleted\n", owner.name,
		    (long long)entry);
	free(why);
	free(old);
	free(when);
	if (r != 0)
		goto fail;
	inventory_close(inv);
	instance_clear(&in);
	instance_clear(&owner);
	free(was.note);
	return GF_OK;
fail:
	inventory_rollback(inv);
	inventory_close(inv);
	instance_clear(&in);
	instance_clear(&owner);
	free(was.note);
	return cmd_fail(-r, cause);
}

static int
cmd_ledger_exec(
    const struct cmd_entry *e, struct cmd_ctx *ctx, int argc, char **argv)
{
	struct inventory *inv = NULL;
	struct instance in;
	struct ledger_entry *v = NULL;
	const char *del = NULL, *move = NULL, *at = NULL, *verb, *id;
	char *cause = NULL;
	int64_t entry = 0;
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
	if (argc - optind == 2) {
		verb = argv[optind];
		id = argv[optind + 1];
		if (strcmp(verb, "rm") != 0 && strcmp(verb, "amend") != 0)
			return cmd_usage_error(
			    e, "'%s' is not rm or amend", verb);
		if (del != NULL || move != NULL || json)
			return cmd_usage_error(
			    e, "%s takes no --delete, --move or --json", verb);
		if ((strcmp(verb, "amend") == 0) != (at != NULL))
			return cmd_usage_error(e,
			    at != NULL ? "rm takes no --at"
				       : "amend ID needs --at TIME");
		if (parse_entry(id, &entry) != 0)
			return cmd_usage_error(
			    e, "entry '%s' is not an entry id", id);
		return correct(ctx, NULL, entry, at);
	}
	if (argc - optind != 1)
		return cmd_usage_error(e, "needs one NAME, or rm or amend ID");
	if (del != NULL && move != NULL)
		return cmd_usage_error(e, "takes --delete or --move, not both");
	if ((move != NULL) != (at != NULL))
		return cmd_usage_error(e, "--move ID needs --at TIME");
	if ((del != NULL && parse_entry(del, &entry) != 0) ||
	    (move != NULL && parse_entry(move, &entry) != 0))
		return cmd_usage_error(e, "entry '%s' is not an entry id",
		    del != NULL ? del : move);
	if (del != NULL || move != NULL)
		return correct(ctx, argv[optind], entry, at);
	if (instance_check_name(argv[optind], &cause) != 0)
		return cmd_fail(GF_EUSAGE, cause);
	if ((status = cmd_open(ctx, &inv)) != 0)
		return status;
	if ((r = inventory_begin(inv, &cause)) != 0 ||
	    (r = inventory_get(inv, argv[optind], &in, &cause)) != 0 ||
	    (r = ledger_entries(inv, in.id, &v, &n, &cause)) != 0) {
		inventory_rollback(inv);
		inventory_close(inv);
		instance_clear(&in);
		return cmd_fail(-r, cause);
	}
	inventory_rollback(inv);
	print_entries(v, n, json);
	ledger_entries_free(v, n);
	inventory_close(inv);
	instance_clear(&in);
	return GF_OK;
}

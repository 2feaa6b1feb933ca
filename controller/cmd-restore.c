/*
 * Bring back instances that `gpufleet rm` removed. rm only marks an
 * instance released and keeps everything it had, so restore puts the last
 * removed instance of each name back in service as it was: tags (schedules
 * and selectors match it again), prices and their history, stop method,
 * ledger, jobs and watcher plan. Instances deleted with rm --purge are gone.
 */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd.h"
#include "log.h"
#include "status.h"
#include "xmalloc.h"

static int cmd_restore_exec(
    const struct cmd_entry *, struct cmd_ctx *, int, char **);
static int pick(struct inventory *, const char *, const struct instance *,
    size_t, size_t *, char **);
static int check_jump(struct inventory *, const struct instance *,
    const struct instance *, size_t, char **);
static void print_restored(const struct instance *);

const struct cmd_entry cmd_restore_entry = {
	.name = "restore",
	.usage = "NAME... [--json]",
	.summary = "bring back instances removed with rm, with their history",
	.help =
	    "Puts each instance that `gpufleet rm` removed (with --force too) "
	    "back in\nservice as it was: its tags, so schedules and selectors "
	    "match it again,\nits prices and their history, its stop method, "
	    "its ledger, jobs and\nwatcher plan; cost counts it under its "
	    "name again. Of several removed\ninstances of one name, the one "
	    "removed last comes back. The machine is\nnot contacted "
	    "(gpufleet status NAME does that).\n\n"
	    "Refused (exit 2, nothing restored) when an instance of that name "
	    "is in\nservice (rename it first: gpufleet set NAME name=NEW), or "
	    "when its jump\nhost is not (restore both in one command). An "
	    "instance deleted with\nrm --purge is gone with its history and "
	    "cannot be restored.\n\n"
	    "      --json   print the restored instances as a JSON array\n\n"
	    "Example: gpufleet restore a100-2\n",
	.exec = cmd_restore_exec,
};

enum { OPT_JSON = 256 };

static const struct option restore_options[] = { { "json", no_argument, NULL,
						     OPT_JSON },
	{ "help", no_argument, NULL, 'h' }, { NULL, 0, NULL, 0 } };

/*
 * The index in all (every instance, removed ones too) of the instance
 * named name to restore: the one removed last. 0, or -GF_EUSAGE with
 * *cause when one of that name is in service or none was removed.
 */
static int
pick(struct inventory *inv, const char *name, const struct instance *all,
    size_t n, size_t *at, char **cause)
{
	struct instance in;
	size_t i, best = n;
	int r;

	memset(&in, 0, sizeof in);
	if ((r = inventory_get(inv, name, &in, cause)) == 0) {
		instance_clear(&in);
		xasprintf(cause,
		    "%s is in service: an instance of that name was added "
		    "since; rename it first (gpufleet set %s name=NEW)",
		    name, name);
		return -GF_EUSAGE;
	}
	if (r != -GF_EUSAGE)
		return r;
	free(*cause);
	*cause = NULL;
	for (i = 0; i < n; i++) {
		if (strcmp(all[i].name, name) != 0 || all[i].released_at == 0)
			continue;
		if (best == n || all[i].released_at > all[best].released_at ||
		    (all[i].released_at == all[best].released_at &&
			all[i].id > all[best].id))
			best = i;
	}
	if (best == n) {
		xasprintf(cause,
		    "no removed instance named '%s' (one deleted with rm "
		    "--purge is gone with its history)",
		    name);
		return -GF_EUSAGE;
	}
	*at = best;
	return 0;
}

/*
 * Whether restored instance in may use its jump host now that the
 * restored ones are back: else -GF_EUSAGE with *cause saying how to
 * bring the jump host back too.
 */
static int
check_jump(struct inventory *inv, const struct instance *in,
    const struct instance *all, size_t n, char **cause)
{
	char *why = NULL;
	size_t i;
	int r;

	if ((r = inventory_check_jump(inv, in, &why)) == 0)
		return 0;
	if (r != -GF_EUSAGE) {
		*cause = why;
		return r;
	}
	for (i = 0; i < n; i++) {
		if (all[i].released_at != 0 &&
		    strcmp(all[i].name, in->jump) == 0)
			break;
	}
	if (i < n)
		xasprintf(cause,
		    "%s: %s; restore both (gpufleet restore %s %s)", in->name,
		    why, in->jump, in->name);
	else
		xasprintf(cause,
		    "%s: %s (rm --purge deleted it); add it again first "
		    "(gpufleet add %s HOST)",
		    in->name, why, in->jump);
	free(why);
	return -GF_EUSAGE;
}

/* One restored instance's line. */
static void
print_restored(const struct instance *in)
{
	char *tags = tags_join(in, ", "), *removed, *since;

	removed = instance_format_time(in->released_at);
	printf("%s: back in gpufleet (removed at %s) with its tags (%s), "
	       "prices, stop method and history; ",
	    in->name, removed, *tags != '\0' ? tags : "none");
	if (in->state[0] != '\0') {
		since = instance_format_time(in->state_since);
		printf("its ledger says %s since %s\n", in->state, since);
		free(since);
	} else
		printf("its ledger is empty\n");
	free(removed);
	free(tags);
}

static int
cmd_restore_exec(
    const struct cmd_entry *e, struct cmd_ctx *ctx, int argc, char **argv)
{
	struct inventory *inv = NULL;
	struct instance *all = NULL, in;
	char *cause = NULL;
	size_t nall = 0, *at = NULL;
	json_t *arr = NULL;
	int ch, status, json = 0, i, j, r = 0;

	memset(&in, 0, sizeof in);
	while ((ch = cmd_getopt(
		    e, argc, argv, "h", restore_options, &status)) != -1) {
		switch (ch) {
		case -2:
			return status;
		case OPT_JSON:
			json = 1;
			break;
		}
	}
	if (optind == argc)
		return cmd_usage_error(e, "needs at least one NAME");
	for (i = optind; i < argc; i++) {
		if (instance_check_name(argv[i], &cause) != 0)
			return cmd_fail(GF_EUSAGE, cause);
	}
	if ((status = cmd_open(ctx, &inv)) != 0)
		return status;
	at = xcalloc(argc + 1, sizeof *at);
	if ((r = inventory_begin(inv, &cause)) != 0 ||
	    (r = inventory_list(inv, 1, &all, &nall, &cause)) != 0)
		goto out;
	for (i = optind; i < argc; i++) {
		at[i] = nall; /* a name given twice: once */
		for (j = optind; j < i && strcmp(argv[i], argv[j]) != 0; j++)
			;
		if (j == i &&
		    (r = pick(inv, argv[i], all, nall, &at[i], &cause)) != 0)
			goto out;
	}
	for (i = optind; i < argc; i++) {
		if (at[i] < nall &&
		    (r = inventory_restore(inv, &all[at[i]], &cause)) != 0)
			goto out;
	}
	/* Jump hosts are checked once every named one is back. */
	for (i = optind; i < argc; i++) {
		if (at[i] < nall &&
		    (r = check_jump(inv, &all[at[i]], all, nall, &cause)) != 0)
			goto out;
	}
	if ((r = inventory_commit(inv, &cause)) != 0)
		goto out;
	arr = json_array();
	for (i = optind; i < argc; i++) {
		if (at[i] == nall)
			continue;
		if (json) {
			if ((r = inventory_get_id(
				 inv, all[at[i]].id, &in, &cause)) != 0)
				goto out;
			json_array_append_new(arr, instance_to_json(&in));
			instance_clear(&in);
		} else
			print_restored(&all[at[i]]);
	}
	if (json) {
		json_print(arr, stdout);
		arr = NULL;
	}
out:
	json_decref(arr);
	inventory_close(inv);
	instance_free_array(all, nall);
	free(at);
	return r != 0 ? cmd_fail(-r, cause) : GF_OK;
}

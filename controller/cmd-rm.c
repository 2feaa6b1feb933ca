/*
 * Remove instances. By default an instance is only marked released, so its
 * history still counts in cost reports; --purge deletes it and its history,
 * which needs a yes on the terminal or --yes.
 */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cmd.h"
#include "log.h"
#include "status.h"
#include "xmalloc.h"

static int cmd_rm_exec(
    const struct cmd_entry *, struct cmd_ctx *, int, char **);
static int confirm(int, char **);
static int jump_users_go(const char *, int, char **);
static int find(struct inventory *, const char *, int, const struct instance *,
    size_t, char **);

const struct cmd_entry cmd_rm_entry = {
	.name = "rm",
	.usage = "NAME... [--purge [--yes]]",
	.summary = "release instances (or delete them with --purge)",
	.help = "Marks each instance released: it leaves `ls` and selectors,\n"
		"and its history is kept for cost reports (`ls --all` shows "
		"it).\nAn instance that others reach through (their jump) "
		"is refused unless\nthey go too.\n\n"
		"      --purge   delete the instances and all their history; "
		"a NAME with\n"
		"                none in service: every released one of that "
		"name\n"
		"  -y, --yes     do not ask before --purge (required when "
		"stdin is\n"
		"                not a terminal)\n\n"
		"Example: gpufleet rm a100-2 a100-3\n",
	.exec = cmd_rm_exec,
};

enum { OPT_PURGE = 256 };

static const struct option rm_options[] = { { "purge", no_argument, NULL,
						OPT_PURGE },
	{ "yes", no_argument, NULL, 'y' }, { "help", no_argument, NULL, 'h' },
	{ NULL, 0, NULL, 0 } };

/* Ask on the terminal whether to delete n instances; 1 for yes. */
static int
confirm(int n, char **names)
{
	char line[16];
	int i;

	fprintf(stderr, "Delete");
	for (i = 0; i < n; i++)
		fprintf(stderr, " %s", names[i]);
	fprintf(stderr, " and all their history? [y/N] ");
	fflush(stderr);
	if (fgets(line, sizeof line, stdin) == NULL)
		return 0;
	return line[0] == 'y' || line[0] == 'Y';
}

/* Whether every name of users ("a, b") is among the arguments too. */
static int
jump_users_go(const char *users, int argc, char **argv)
{
	char *copy = xstrdup(users), *p, *save = NULL;
	int i, all = 1;

	for (p = strtok_r(copy, ", ", &save); p != NULL && all;
	     p = strtok_r(NULL, ", ", &save)) {
		for (i = optind; i < argc; i++) {
			if (strcmp(argv[i], p) == 0)
				break;
		}
		all = i < argc;
	}
	free(copy);
	return all;
}

/*
 * Check that name is there to remove: in service, or with purge in any
 * row (all: every instance, released ones too). Returns 0 or a negative
 * status with *cause set.
 */
static int
find(struct inventory *inv, const char *name, int purge,
    const struct instance *all, size_t n, char **cause)
{
	struct instance in;
	size_t i;
	int r, released = 0;

	memset(&in, 0, sizeof in);
	if ((r = inventory_get(inv, name, &in, cause)) == 0) {
		instance_clear(&in);
		return 0;
	}
	if (r != -GF_EUSAGE)
		return r;
	for (i = 0; i < n; i++)
		released += strcmp(all[i].name, name) == 0;
	if (released == 0)
		return r;
	if (purge) {
		free(*cause);
		*cause = NULL;
		return 0;
	}
	free(*cause);
	xasprintf(cause,
	    "%s is released already (rm --purge deletes it and its history)",
	    name);
	return -GF_EUSAGE;
}

static int
cmd_rm_exec(
    const struct cmd_entry *e, struct cmd_ctx *ctx, int argc, char **argv)
{
	struct inventory *inv = NULL;
	struct instance in, *all = NULL;
	char *cause = NULL, *users = NULL;
	size_t nall = 0, k;
	int ch, status, purge = 0, yes = 0, i, j, r = 0;
	time_t now = time(NULL);

	memset(&in, 0, sizeof in);
	while (
	    (ch = cmd_getopt(e, argc, argv, "yh", rm_options, &status)) != -1) {
		switch (ch) {
		case -2:
			return status;
		case OPT_PURGE:
			purge = 1;
			break;
		case 'y':
			yes = 1;
			break;
		}
	}
	if (optind == argc)
		return cmd_usage_error(e, "needs at least one NAME");
	for (i = optind; i < argc; i++) {
		if (instance_check_name(argv[i], &cause) != 0)
			return cmd_fail(GF_EUSAGE, cause);
	}
	if (purge && !yes && !(isatty(STDIN_FILENO) && isatty(STDERR_FILENO)))
		return cmd_usage_error(e,
		    "--purge deletes history; add --yes "
		    "to confirm (stdin is not a terminal)");

	if ((status = cmd_open(ctx, &inv)) != 0)
		return status;
	/* Check every name before asking, so the question is about facts. */
	if ((r = inventory_list(inv, 1, &all, &nall, &cause)) != 0)
		goto fail;
	for (i = optind; i < argc; i++) {
		if ((r = find(inv, argv[i], purge, all, nall, &cause)) != 0)
			goto fail;
		if ((r = inventory_jump_users(inv, argv[i], &users, &cause)) !=
		    0)
			goto fail;
		if (users != NULL && !jump_users_go(users, argc, argv)) {
			xasprintf(&cause,
			    "%s is the jump host of %s; change their jump "
			    "first (gpufleet set NAME jump=) or remove them "
			    "too",
			    argv[i], users);
			free(users);
			r = -GF_EUSAGE;
			goto fail;
		}
		free(users);
	}
	if (purge && !yes && !confirm(argc - optind, argv + optind)) {
		inventory_close(inv);
		instance_free_array(all, nall);
		error("rm: not confirmed; nothing deleted");
		return GF_EUSAGE;
	}

	if ((r = inventory_begin(inv, &cause)) != 0)
		goto fail;
	for (i = optind; i < argc; i++) {
		for (j = optind; j < i; j++) {
			if (strcmp(argv[i], argv[j]) == 0)
				break;
		}
		if (j < i)
			continue;
		/*
		 * The one in service; for --purge of a name with none, every
		 * released one of that name.
		 */
		r = inventory_get(inv, argv[i], &in, &cause);
		if (r == 0 && purge)
			r = inventory_purge(inv, in.id, &cause);
		else if (r == 0)
			r = inventory_release(inv, in.id, now, &cause);
		else if (r == -GF_EUSAGE && purge) {
			free(cause);
			cause = NULL;
			for (k = 0, r = 0; k < nall && r == 0; k++) {
				if (strcmp(all[k].name, argv[i]) == 0)
					r = inventory_purge(
					    inv, all[k].id, &cause);
			}
		}
		instance_clear(&in);
		if (r != 0)
			goto fail;
	}
	if ((r = inventory_commit(inv, &cause)) != 0)
		goto fail;
	inventory_close(inv);
	instance_free_array(all, nall);
	for (i = optind; i < argc; i++)
		printf("%s %s\n", purge ? "deleted" : "released", argv[i]);
	return GF_OK;
fail:
	inventory_close(inv);
	instance_clear(&in);
	instance_free_array(all, nall);
	return cmd_fail(-r, cause);
}

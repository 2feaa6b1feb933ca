/*
 * Remove instances from gpufleet; the platform's machine is not touched.
 * By default an instance is only marked released, so its history still
 * counts in cost reports and `gpufleet restore` brings it back; --purge
 * deletes it and its history, which needs a yes on the terminal or --yes.
 * An instance that may still cost money or still has work planned (its
 * ledger does not say stopped or released, a job runs, a deadline or
 * autostop is armed) is refused unless --force: nothing would watch it.
 */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cmd.h"
#include "job.h"
#include "log.h"
#include "status.h"
#include "vis.h"
#include "watcher.h"
#include "xmalloc.h"

/*
 * Why an instance is not removed: each part a reason (why) and what to
 * run about it (fix), in the order they are told.
 */
struct kept {
	char *why[4];
	char *fix[4];
	size_t n;
};

static int cmd_rm_exec(
    const struct cmd_entry *, struct cmd_ctx *, int, char **);
static int confirm(int, char **);
static int jump_users_go(const char *, int, char **);
static int given_before(char **, int);
static int find(struct inventory *, const char *, int, const struct instance *,
    size_t, char **);
static void kept_add(struct kept *, char *, char *);
static void kept_clear(struct kept *);
static char *kept_line(const struct kept *, const char *, int);
static int kept_billing(const struct instance *, struct kept *);
static int kept_jobs(
    struct inventory *, const struct instance *, struct kept *, char **);
static int kept_watcher(
    struct inventory *, const struct instance *, struct kept *, char **);
static int kept_check(struct inventory *, const char *, struct kept *, char **);
static int kept_lines(
    struct inventory *, int, char **, int, char **, size_t *, char **);

const struct cmd_entry cmd_rm_entry = {
	.name = "rm",
	.usage = "NAME... [--force] [--purge [--yes]]",
	.summary = "remove instances from gpufleet (their machines are not "
		   "touched)",
	.help =
	    "Removes each instance from gpufleet: it leaves `ls`, selectors, "
	    "status,\njobs, shutdown ls and the daemon. Nothing is done to "
	    "the machine on the\nplatform: release it there, or it goes on "
	    "billing with nothing to watch it.\nIts history is kept for cost "
	    "reports (`ls --all` shows it) and\n`gpufleet restore NAME` "
	    "brings it back with its tags, prices, stop method\nand "
	    "history.\n\n"
	    "Refused (exit 2, nothing removed; one line per instance says why "
	    "and what\nto run) while an instance may still bill or has work "
	    "planned: its ledger\ndoes not say stopped or released, or it "
	    "answered status since it stopped\n(gpufleet shutdown NAME --now; "
	    "after a stop on the platform's console:\ngpufleet mark NAME "
	    "stopped), a job runs (gpufleet jobs), a deadline is armed\n"
	    "(gpufleet shutdown cancel) or autostop is on (gpufleet autostop "
	    "off). An\ninstance that others reach through (their jump) is "
	    "refused unless they go\ntoo.\n\n"
	    "      --force   remove them all the same\n"
	    "      --purge   delete the instances and all their history (no "
	    "restore);\n"
	    "                a NAME with none in service: every removed one "
	    "of that name\n"
	    "  -y, --yes     do not ask before --purge (required when stdin "
	    "is\n"
	    "                not a terminal)\n\n"
	    "Examples:\n"
	    "  gpufleet mark a100-2 stopped; gpufleet rm a100-2\n"
	    "  gpufleet rm a100-3 --force\n",
	.exec = cmd_rm_exec,
};

enum { OPT_PURGE = 256, OPT_FORCE };

static const struct option rm_options[] = { { "purge", no_argument, NULL,
						OPT_PURGE },
	{ "force", no_argument, NULL, OPT_FORCE },
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

/* Whether argv[i] is a NAME given already (from optind on). */
static int
given_before(char **argv, int i)
{
	int j;

	for (j = optind; j < i; j++) {
		if (strcmp(argv[i], argv[j]) == 0)
			return 1;
	}
	return 0;
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
	    "%s was removed already (gpufleet restore %s brings it back; rm "
	    "--purge deletes it and its history)",
	    name, name);
	return -GF_EUSAGE;
}

/* Add a reason and its remedy to k (both given over). */
static void
kept_add(struct kept *k, char *why, char *fix)
{
	if (k->n == sizeof k->why / sizeof k->why[0]) {
		free(why);
		free(fix);
		return;
	}
	k->why[k->n] = why;
	k->fix[k->n++] = fix;
}

static void
kept_clear(struct kept *k)
{
	size_t i;

	for (i = 0; i < k->n; i++) {
		free(k->why[i]);
		free(k->fix[i]);
	}
	memset(k, 0, sizeof *k);
}

/*
 * The one line said about instance name: with force, that it was removed
 * all the same and why that matters; else why it is kept and what to run.
 * Made safe for a terminal (job names and plans come from the instance).
 * Caller frees.
 */
static char *
kept_line(const struct kept *k, const char *name, int force)
{
	char *s, *t;
	size_t i;

	if (force)
		xasprintf(&s, "%s: removed with --force, though it", name);
	else
		s = xstrdup(name);
	for (i = 0; i < k->n; i++) {
		if (force)
			xasprintf(
			    &t, "%s%s %s", s, i > 0 ? "; it" : "", k->why[i]);
		else
			xasprintf(&t, "%s%s %s: %s", s, i > 0 ? "; it" : "",
			    k->why[i], k->fix[i]);
		free(s);
		s = t;
	}
	if (force)
		xasprintf(&t, "%s: nothing watches it now", s);
	else
		xasprintf(&t, "%s; or rm --force", s);
	free(s);
	s = vis_str(t);
	free(t);
	return s;
}

/*
 * Whether in may still be billing: its ledger's last word is neither
 * stopped nor released (running, unknown, or no entry at all), or it is
 * stopped yet answered since. Returns 1 and adds the reason to k, or 0.
 */
static int
kept_billing(const struct instance *in, struct kept *k)
{
	char *since, *up, *why, *fix;

	if (strcmp(in->state, "stopped") == 0 && !instance_still_billing(in))
		return 0;
	since = instance_format_time(in->state_since);
	if (in->state[0] == '\0')
		why = xstrdup("may still be billing (its ledger is empty: "
			      "never seen running or stopped)");
	else if (strcmp(in->state, "stopped") == 0) {
		up = instance_format_time(in->up_at);
		xasprintf(&why,
		    "may still be billing (marked stopped at %s, yet it "
		    "answered status at %s)",
		    since, up);
		free(up);
	} else
		xasprintf(&why,
		    "may still be billing (its ledger says %s since %s)",
		    in->state, since);
	free(since);
	xasprintf(&fix,
	    "stop it first (gpufleet shutdown %s --now), or mark it "
	    "(gpufleet mark %s stopped)",
	    in->name, in->name);
	kept_add(k, why, fix);
	return 1;
}

/* Add in's running jobs (the job table's word) to k. */
static int
kept_jobs(struct inventory *inv, const struct instance *in, struct kept *k,
    char **cause)
{
	struct job_row *rows = NULL;
	size_t n = 0, i, nrun = 0;
	char *list = xstrdup(""), *t, *fix, *why;
	int64_t first = 0;
	int r;

	if ((r = job_list(inv, in->id, &rows, &n, cause)) != 0) {
		free(list);
		return r;
	}
	for (i = 0; i < n; i++) {
		if (strcmp(rows[i].end.state, "running") != 0)
			continue;
		if (nrun++ == 0)
			first = rows[i].job;
		xasprintf(&t, "%s%s%s:%lld%s%s", list,
		    *list != '\0' ? ", " : "", in->name, (long long)rows[i].job,
		    rows[i].name != NULL && *rows[i].name != '\0' ? " " : "",
		    rows[i].name != NULL ? rows[i].name : "");
		free(list);
		list = t;
	}
	job_rows_free(rows, n);
	if (nrun == 0) {
		free(list);
		return 0;
	}
	xasprintf(&why, "has %zu running job%s (%s)", nrun,
	    nrun == 1 ? "" : "s", list);
	free(list);
	xasprintf(&fix,
	    "let %s end or kill %s (gpufleet jobs %s; gpufleet kill %s:%lld)",
	    nrun == 1 ? "it" : "them", nrun == 1 ? "it" : "them", in->name,
	    in->name, (long long)first);
	kept_add(k, why, fix);
	return 0;
}

/*
 * Add what in's stored watcher plan still has armed to k: deadlines that
 * neither fired nor were skipped (as `shutdown ls` counts them), autostop.
 */
static int
kept_watcher(struct inventory *inv, const struct instance *in, struct kept *k,
    char **cause)
{
	struct watcher_view v;
	json_t *w, *d;
	size_t i, narmed = 0;
	char *list = xstrdup(""), *t, *why, *fix;
	const char *id;
	int r;

	if ((r = watcher_get(inv, in->id, &v, cause)) != 0) {
		free(list);
		return r;
	}
	if (!v.have || v.plan == NULL) {
		watcher_view_free(&v);
		free(list);
		return 0;
	}
	w = watcher_json(inv, in->id, &v);
	json_array_foreach(json_object_get(w, "deadlines"), i, d)
	{
		if (!json_is_null(json_object_get(d, "fired_at")) ||
		    !json_is_null(json_object_get(d, "skipped")))
			continue;
		id = json_string_value(json_object_get(d, "id"));
		narmed++;
		xasprintf(&t, "%s%s%s", list, *list != '\0' ? ", " : "",
		    id != NULL ? id : "?");
		free(list);
		list = t;
	}
	if (narmed > 0) {
		xasprintf(&why, "has %zu deadline%s armed (%s)", narmed,
		    narmed == 1 ? "" : "s", list);
		xasprintf(&fix, "cancel %s (gpufleet shutdown cancel %s)",
		    narmed == 1 ? "it" : "them", in->name);
		kept_add(k, why, fix);
	}
	if (json_is_object(json_object_get(w, "autostop"))) {
		xasprintf(
		    &fix, "turn it off (gpufleet autostop off %s)", in->name);
		kept_add(k, xstrdup("has autostop on"), fix);
	}
	json_decref(w);
	watcher_view_free(&v);
	free(list);
	return 0;
}

/*
 * Why the instance in service named name should not be forgotten, in k
 * (k->n 0: nothing; none in service: nothing either). One whose ledger
 * says released is gone from the platform: nothing on it runs or fires.
 */
static int
kept_check(
    struct inventory *inv, const char *name, struct kept *k, char **cause)
{
	struct instance in;
	int r;

	memset(k, 0, sizeof *k);
	memset(&in, 0, sizeof in);
	if ((r = inventory_get(inv, name, &in, cause)) != 0) {
		if (r != -GF_EUSAGE)
			return r;
		free(*cause);
		*cause = NULL;
		return 0;
	}
	if (strcmp(in.state, "released") != 0) {
		kept_billing(&in, k);
		if ((r = kept_jobs(inv, &in, k, cause)) != 0 ||
		    (r = kept_watcher(inv, &in, k, cause)) != 0)
			kept_clear(k);
	}
	instance_clear(&in);
	return r;
}

/*
 * For each name given (once), the line said about it when it may still
 * cost money or has work planned (kept_line), in said[i] (caller frees);
 * *n: how many.
 */
static int
kept_lines(struct inventory *inv, int argc, char **argv, int force, char **said,
    size_t *n, char **cause)
{
	struct kept k;
	int i, r;

	*n = 0;
	for (i = optind; i < argc; i++) {
		if (given_before(argv, i))
			continue;
		if ((r = kept_check(inv, argv[i], &k, cause)) != 0)
			return r;
		if (k.n > 0) {
			said[i] = kept_line(&k, argv[i], force);
			(*n)++;
		}
		kept_clear(&k);
	}
	return 0;
}

static int
cmd_rm_exec(
    const struct cmd_entry *e, struct cmd_ctx *ctx, int argc, char **argv)
{
	struct inventory *inv = NULL;
	struct instance in, *all = NULL;
	char *cause = NULL, *users = NULL, **said = NULL;
	size_t nall = 0, nkept = 0, x;
	int ch, status, purge = 0, force = 0, yes = 0, i, r = 0;
	int *had = NULL;
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
		case OPT_FORCE:
			force = 1;
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
	said = xcalloc(argc + 1, sizeof *said);
	had = xcalloc(argc + 1, sizeof *had);
	/* Check every name before asking, so the question is about facts. */
	if ((r = inventory_list(inv, 1, &all, &nall, &cause)) != 0)
		goto out;
	for (i = optind; i < argc; i++) {
		if ((r = find(inv, argv[i], purge, all, nall, &cause)) != 0)
			goto out;
		if ((r = inventory_jump_users(inv, argv[i], &users, &cause)) !=
		    0)
			goto out;
		if (users != NULL && !jump_users_go(users, argc, argv)) {
			xasprintf(&cause,
			    "%s is the jump host of %s; change their jump "
			    "first (gpufleet set NAME jump=) or remove them "
			    "too",
			    argv[i], users);
			free(users);
			r = -GF_EUSAGE;
			goto out;
		}
		free(users);
	}
	if ((r = kept_lines(inv, argc, argv, force, said, &nkept, &cause)) != 0)
		goto out;
	if (nkept > 0 && !force) {
		for (i = optind; i < argc; i++) {
			if (said[i] != NULL)
				error("%s", said[i]);
		}
		r = -GF_EUSAGE;
		goto out;
	}
	if (purge && !yes && !confirm(argc - optind, argv + optind)) {
		error("rm: not confirmed; nothing deleted");
		r = -GF_EUSAGE;
		goto out;
	}

	if ((r = inventory_begin(inv, &cause)) != 0)
		goto out;
	for (i = optind; i < argc; i++) {
		if (given_before(argv, i))
			continue;
		/*
		 * The one in service; for --purge of a name with none, every
		 * released one of that name.
		 */
		r = inventory_get(inv, argv[i], &in, &cause);
		had[i] = r == 0;
		if (r == 0 && purge)
			r = inventory_purge(inv, in.id, &cause);
		else if (r == 0)
			r = inventory_release(inv, in.id, now, &cause);
		else if (r == -GF_EUSAGE && purge) {
			free(cause);
			cause = NULL;
			for (x = 0, r = 0; x < nall && r == 0; x++) {
				if (strcmp(all[x].name, argv[i]) == 0)
					r = inventory_purge(
					    inv, all[x].id, &cause);
			}
		}
		instance_clear(&in);
		if (r != 0)
			goto out;
	}
	if ((r = inventory_commit(inv, &cause)) != 0)
		goto out;
	for (i = optind; i < argc; i++) {
		if (given_before(argv, i))
			continue;
		if (!purge)
			printf("%s: removed from gpufleet (the platform's "
			       "machine is not touched: release it on the "
			       "platform); its history stays for cost "
			       "(gpufleet restore %s brings it back)\n",
			    argv[i], argv[i]);
		else if (had[i])
			printf("%s: deleted from gpufleet with its history "
			       "(the platform's machine is not touched: "
			       "release it on the platform)\n",
			    argv[i]);
		else
			printf("%s: deleted the removed instances of that "
			       "name with their history\n",
			    argv[i]);
		if (said[i] != NULL)
			warn_msg("%s", said[i]);
	}
out:
	inventory_close(inv);
	instance_clear(&in);
	instance_free_array(all, nall);
	for (i = 0; i < argc; i++)
		free(said[i]);
	free(said);
	free(had);
	if (cause != NULL)
		return cmd_fail(-r, cause);
	return -r;
}

/*
 * Stop instances at a time, with the laptop closed: `gpufleet shutdown`
 * arms a deadline in each instance's watcher plan (agent/WATCH.md), which
 * warns the users logged in, runs the --before command and stops the
 * instance with its stop method on the instance's own clock. `shutdown
 * ls` lists what is armed, `shutdown cancel` takes it back. With --now,
 * --pull fetches results home first (xfer.c) and a failed pull can hold
 * the stop back; with --in or --at the deadline's stop is held on the
 * instance until the pull has run (stophold.c): `--pull-held` runs it
 * (the daemon does on its poll), `--release` lets the stop go on
 * without it.
 */

#include <sys/stat.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "actionlog.h"
#include "cmd.h"
#include "localstop.h"
#include "log.h"
#include "notify.h"
#include "planwrite.h"
#include "status.h"
#include "stophold.h"
#include "timeparse.h"
#include "vis.h"
#include "watcher.h"
#include "xfer.h"
#include "xmalloc.h"

#define PULL_MAX     8	 /* --pull options */
#define PULL_FANOUT  4	 /* as pull's default */
#define PULL_TIMEOUT 120 /* seconds without data, as pull's default */

/* What `shutdown` was asked to arm. */
struct arm {
	int now_, json, dry_run, yes;
	int64_t at;	    /* the controller's clock */
	int warn;	    /* minutes */
	const char *before; /* or NULL */
	int64_t before_timeout_s;
	int must_succeed;
	int unless_busy;
	char *pull_remote[PULL_MAX]; /* --pull REMOTE:LOCAL, split */
	char *pull_local[PULL_MAX];
	size_t npull;
	int pull_must;	     /* --pull-must-succeed */
	int64_t pull_wait_s; /* --pull-wait: a deadline's hold */
	int pull_wait_set;
};

/* What --pull brought home from one instance (all its --pull options). */
struct pulled {
	int ran;
	int ok;
	char *error; /* the first failed pull's reason, or NULL */
	uint64_t bytes, files;
};

static int cmd_shutdown_exec(
    const struct cmd_entry *, struct cmd_ctx *, int, char **);
static int parse_arm(
    const struct cmd_entry *, int, char **, struct arm *, int *);
static int check_method(struct planwrite_host *, const struct arm *);
static void arm_host(
    struct planwrite *, struct planwrite_host *, const struct arm *, char *);
static int parse_pull(const struct cmd_entry *, const char *, struct arm *);
static struct planwrite_host *host_named(struct planwrite *, const char *);
static int pull_first(struct cmd_ctx *, const char *, struct planwrite *,
    const struct arm *, struct pulled *, char **);
static void arm_free(struct arm *);
static json_t *pull_json(const struct arm *, const struct pulled *);
static json_t *arm_json(const struct planwrite_host *, const struct arm *,
    const char *, const struct pulled *);
static void arm_print(
    const struct planwrite_host *, const struct arm *, const char *);
static void local_now(
    struct planwrite *, struct planwrite_host *, const struct arm *);
static void stored_skews(struct planwrite *);
static size_t arm_report(struct planwrite *, const struct arm *, char (*)[16],
    const int *, const struct pulled *);
static int shutdown_arm(struct cmd_ctx *, const char *, struct arm *);
static int ls_deadline(struct planwrite *, const struct planwrite_host *,
    json_t *, json_t *, int64_t);
static void ls_host(struct planwrite *, const struct planwrite_host *,
    const struct watcher_view *);
static json_t *ls_show(struct planwrite *, struct planwrite_host *,
    const struct watcher_view *, int);
static int shutdown_ls(struct cmd_ctx *, int, char **);
static int is_deadline_id(const char *);
static void cancel_host(
    struct planwrite *, struct planwrite_host *, const char *, size_t *);
static int shutdown_cancel(struct cmd_ctx *, int, char **);
static json_t *hold_pulls(const struct arm *);
static void hold_save(struct planwrite *, const struct arm *, char (*)[16]);
static int hold_must(const struct planwrite_host *, const struct arm *);
static void hold_log(
    struct inventory *, const struct stophold *, const char *, const char *);
static int held_one(struct fleet *, const struct stophold *, int);
static int shutdown_held(struct cmd_ctx *, int, char **, int);
static int cancel_held(
    struct fleet *, struct inventory *, struct planwrite_host *, const char *);

const struct cmd_entry cmd_shutdown_entry = {
	.name = "shutdown",
	.usage =
	    "SELECTOR (--now | --in DURATION | --at TIME) [--warn MINUTES]\n"
	    "       [--before CMD] [--before-timeout DURATION] "
	    "[--before-must-succeed]\n"
	    "       [--unless-busy] [--pull REMOTE:LOCAL_DIR] "
	    "[--pull-must-succeed]\n"
	    "       [--pull-wait DURATION] [--dry-run] [--yes] [--json]\n"
	    "       gpufleet shutdown ls [SELECTOR] [--json]\n"
	    "       gpufleet shutdown cancel SELECTOR|ID\n"
	    "       gpufleet shutdown --pull-held SELECTOR\n"
	    "       gpufleet shutdown --release SELECTOR",
	.summary = "stop instances at a time, even with the laptop closed",
	.help =
	    "Arms a deadline in the watcher on each selected instance (started "
	    "over SSH,\nit runs there on its own): at the time it warns the "
	    "users logged in, runs\n--before, and stops the instance with its "
	    "stop method (gpufleet show NAME;\nREADME, \"Stop methods\"). "
	    "Times are written in the instance's clock.\n\n"
	    "      --now              stop now (the warning, if any, at once)\n"
	    "      --in DURATION      stop in 90s, 30m, 2h, 1h30m ...\n"
	    "      --at TIME          stop at 02:00 (the next), '2026-12-02 "
	    "02:00',\n"
	    "                         2026-12-02T02:00:00+08:00\n"
	    "      --warn MINUTES     warn logged-in users this long before "
	    "(default 5; 0: no)\n"
	    "      --before CMD       run CMD on the instance first (save a "
	    "checkpoint)\n"
	    "      --before-timeout DURATION   its time limit (default 10m)\n"
	    "      --before-must-succeed       no stop when CMD fails\n"
	    "      --unless-busy      at the time, the watcher skips the stop "
	    "if a GPU is busy\n"
	    "                         or the progress file changed in the "
	    "last 10 minutes\n"
	    "      --pull REMOTE:LOCAL_DIR   pull REMOTE into LOCAL_DIR/NAME/ "
	    "as\n"
	    "                         `gpufleet pull` does, before the stop "
	    "(up to 8);\n"
	    "                         with --in/--at the stop is held on the "
	    "instance\n"
	    "                         (after --before) until the pull ran: "
	    "`gpufleet daemon`\n"
	    "                         runs it on its poll (without a daemon: "
	    "--pull-held)\n"
	    "      --pull-must-succeed  no stop where a pull failed (always so "
	    "for a\n"
	    "                         release method); without it the stop "
	    "goes on\n"
	    "      --pull-wait DURATION  with --in/--at: how long the held "
	    "stop waits for\n"
	    "                         the pull (default 2h); then a stop "
	    "method stops\n"
	    "                         anyway, a release method (or "
	    "--pull-must-succeed)\n"
	    "                         waits on until --release\n"
	    "      --dry-run          print what would be armed; change "
	    "nothing\n"
	    "      --yes              allow a release method (deletes the "
	    "instance and its data)\n"
	    "      --json             print the results as a JSON array\n\n"
	    "shutdown ls lists the armed deadlines, the autostop policy, the "
	    "watcher's\nstate, clock skew and alerts (stop_failed), after "
	    "contacting the instances.\nshutdown cancel takes deadlines back: "
	    "every one of the selected instances,\nor the one with that "
	    "ID; a stop held for its pull is cancelled there (never\n"
	    "stopped).\nshutdown --pull-held runs the "
	    "pull of the selected instances' held stops\nnow and, when it "
	    "came home, lets the stop go on (what the daemon does;\nagain "
	    "after a failed pull). shutdown --release lets held stops go on "
	    "without\nthe pull (their results are not home).\n\n"
	    "Examples:\n"
	    "  gpufleet shutdown a100-1 --at 02:00 --before 'python save.py'\n"
	    "  gpufleet shutdown @train --in 2h --warn 10\n"
	    "  gpufleet shutdown f-1 --now --yes --pull '~/ckpt/:results'\n"
	    "  gpufleet shutdown a100-1 --at 02:00 --pull '~/out/:results'\n"
	    "  gpufleet shutdown --release a100-1\n"
	    "  gpufleet shutdown ls\n"
	    "  gpufleet shutdown cancel d-3f2a9c01\n",
	.exec = cmd_shutdown_exec,
};

enum {
	OPT_NOW = 256,
	OPT_IN,
	OPT_AT,
	OPT_WARN,
	OPT_BEFORE,
	OPT_BEFORE_TIMEOUT,
	OPT_MUST,
	OPT_UNLESS_BUSY,
	OPT_DRY,
	OPT_YES,
	OPT_JSON,
	OPT_PULL,
	OPT_PULL_MUST,
	OPT_PULL_WAIT
};

static const struct option arm_options[] = { { "now", no_argument, NULL,
						 OPT_NOW },
	{ "in", required_argument, NULL, OPT_IN },
	{ "at", required_argument, NULL, OPT_AT },
	{ "warn", required_argument, NULL, OPT_WARN },
	{ "before", required_argument, NULL, OPT_BEFORE },
	{ "before-timeout", required_argument, NULL, OPT_BEFORE_TIMEOUT },
	{ "before-must-succeed", no_argument, NULL, OPT_MUST },
	{ "unless-busy", no_argument, NULL, OPT_UNLESS_BUSY },
	{ "dry-run", no_argument, NULL, OPT_DRY },
	{ "yes", no_argument, NULL, OPT_YES },
	{ "json", no_argument, NULL, OPT_JSON },
	{ "pull", required_argument, NULL, OPT_PULL },
	{ "pull-must-succeed", no_argument, NULL, OPT_PULL_MUST },
	{ "pull-wait", required_argument, NULL, OPT_PULL_WAIT },
	{ "help", no_argument, NULL, 'h' }, { NULL, 0, NULL, 0 } };

static int
cmd_shutdown_exec(
    const struct cmd_entry *e, struct cmd_ctx *ctx, int argc, char **argv)
{
	struct arm a;
	int status;

	if (argc >= 2 && strcmp(argv[1], "ls") == 0)
		return shutdown_ls(ctx, argc - 1, argv + 1);
	if (argc >= 2 && strcmp(argv[1], "cancel") == 0)
		return shutdown_cancel(ctx, argc - 1, argv + 1);
	if (argc >= 2 && strcmp(argv[1], "--pull-held") == 0)
		return shutdown_held(ctx, argc - 1, argv + 1, 1);
	if (argc >= 2 && strcmp(argv[1], "--release") == 0)
		return shutdown_held(ctx, argc - 1, argv + 1, 0);
	if (parse_arm(e, argc, argv, &a, &status) != 0) {
		arm_free(&a);
		return status;
	}
	status = shutdown_arm(ctx, argv[optind], &a);
	arm_free(&a);
	return status;
}

static void
arm_free(struct arm *a)
{
	size_t i;

	for (i = 0; i < a->npull; i++) {
		free(a->pull_remote[i]);
		free(a->pull_local[i]);
	}
	a->npull = 0;
}

/*
 * One --pull REMOTE:LOCAL_DIR, split at the first colon (a remote path
 * holds none; the local one may). Returns 0 or the exit status (said).
 */
static int
parse_pull(const struct cmd_entry *e, const char *arg, struct arm *a)
{
	const char *colon = strchr(arg, ':');
	char *remote, *local, *cause = NULL;
	struct stat st;
	int status;

	if (a->npull == PULL_MAX)
		return cmd_usage_error(e, "at most %d --pull", PULL_MAX);
	if (colon == NULL || colon == arg || colon[1] == '\0')
		return cmd_usage_error(
		    e, "--pull '%s' is not REMOTE:LOCAL_DIR", arg);
	remote = xstrndup(arg, (size_t)(colon - arg));
	local = xstrdup(colon + 1);
	if (xfer_check_path(remote, &cause) != 0 ||
	    xfer_check_path(local, &cause) != 0) {
		status = cmd_usage_error(e, "--pull: %s", cause);
		goto fail;
	}
	if (stat(local, &st) == 0 && !S_ISDIR(st.st_mode)) {
		status =
		    cmd_usage_error(e, "--pull: %s is not a directory", local);
		goto fail;
	}
	a->pull_remote[a->npull] = remote;
	a->pull_local[a->npull++] = local;
	return 0;
fail:
	free(cause);
	free(remote);
	free(local);
	return status;
}

/* The options of `shutdown SELECTOR ...`; *status is the exit on error. */
static int
parse_arm(const struct cmd_entry *e, int argc, char **argv, struct arm *a,
    int *status)
{
	int64_t now = (int64_t)time(NULL), d;
	char *cause = NULL;
	int ch, whens = 0;

	memset(a, 0, sizeof *a);
	a->warn = 5;
	a->before_timeout_s = 600;
	a->pull_wait_s = 7200;
	while (
	    (ch = cmd_getopt(e, argc, argv, "h", arm_options, status)) != -1) {
		switch (ch) {
		case -2:
			return -1;
		case OPT_NOW:
			a->now_ = 1;
			a->at = now;
			whens++;
			break;
		case OPT_IN:
			if ((*status = cmd_duration(
				 e, "in", optarg, 1, 3650LL * 86400, &d)) != 0)
				return -1;
			a->at = now + d;
			whens++;
			break;
		case OPT_AT:
			if (timeparse_next(optarg, now, &a->at, &cause) != 0) {
				*status = cmd_usage_error(e, "--at: %s", cause);
				free(cause);
				return -1;
			}
			if (a->at <= now) {
				*status = cmd_usage_error(
				    e, "--at '%s' is in the past", optarg);
				return -1;
			}
			whens++;
			break;
		case OPT_WARN:
			if ((*status = cmd_warn_minutes(e, optarg, &a->warn)) !=
			    0)
				return -1;
			break;
		case OPT_BEFORE:
			if ((*status = cmd_before(e, optarg)) != 0)
				return -1;
			a->before = optarg;
			break;
		case OPT_BEFORE_TIMEOUT:
			if ((*status = cmd_duration(e, "before-timeout", optarg,
				 1, 86400, &a->before_timeout_s)) != 0)
				return -1;
			break;
		case OPT_MUST:
			a->must_succeed = 1;
			break;
		case OPT_UNLESS_BUSY:
			a->unless_busy = 1;
			break;
		case OPT_DRY:
			a->dry_run = 1;
			break;
		case OPT_YES:
			a->yes = 1;
			break;
		case OPT_JSON:
			a->json = 1;
			break;
		case OPT_PULL:
			if ((*status = parse_pull(e, optarg, a)) != 0)
				return -1;
			break;
		case OPT_PULL_MUST:
			a->pull_must = 1;
			break;
		case OPT_PULL_WAIT:
			if ((*status = cmd_duration(e, "pull-wait", optarg, 1,
				 30LL * 86400, &a->pull_wait_s)) != 0)
				return -1;
			a->pull_wait_set = 1;
			break;
		}
	}
	if (argc - optind != 1) {
		*status = cmd_usage_error(e, "needs exactly one SELECTOR");
		return -1;
	}
	if (whens != 1) {
		*status = cmd_usage_error(
		    e, "needs exactly one of --now, --in DURATION, --at TIME");
		return -1;
	}
	if (a->must_succeed && a->before == NULL) {
		*status = cmd_usage_error(e,
		    "--before-must-succeed needs "
		    "--before");
		return -1;
	}
	if (a->pull_must && a->npull == 0) {
		*status =
		    cmd_usage_error(e, "--pull-must-succeed needs --pull");
		return -1;
	}
	if (a->pull_wait_set && (a->npull == 0 || a->now_)) {
		*status = cmd_usage_error(
		    e, "--pull-wait needs --pull with --in or --at");
		return -1;
	}
	if (a->npull > 0 && a->now_ && a->before != NULL) {
		*status = cmd_usage_error(e,
		    "--pull with --before: the pull would come before CMD; "
		    "run CMD with gpufleet exec first");
		return -1;
	}
	return 0;
}

/* The host of pw named name, or NULL. */
static struct planwrite_host *
host_named(struct planwrite *pw, const char *name)
{
	size_t i;

	for (i = 0; i < pw->n; i++) {
		if (strcmp(pw->hosts[i].in->name, name) == 0)
			return &pw->hosts[i];
	}
	return NULL;
}

/*
 * --pull: fetch each REMOTE into LOCAL_DIR/NAME/ from the hosts whose stop
 * goes on (no error yet), before anything is armed or stopped; pl (one per
 * host of pw) says what came. A host whose pull failed is failed, so not
 * stopped, when the pull must succeed: --pull-must-succeed, and always
 * for a release method (a machine is never released while its results
 * are not home). Returns 0, or a negative status with *cause when the
 * pulls could not run or were interrupted: then nothing is stopped.
 */
static int
pull_first(struct cmd_ctx *ctx, const char *selector, struct planwrite *pw,
    const struct arm *a, struct pulled *pl, char **cause)
{
	struct inventory *inv;
	struct instance *list = NULL;
	struct planwrite_host *h;
	struct xfer_req req;
	struct xfer_result res;
	struct pulled *p;
	size_t n = 0, m = 0, i, k;
	int r, release;

	if (!xfer_have_rsync()) {
		*cause = xstrdup("rsync is not installed on this machine "
				 "(--pull runs it): install rsync");
		return -GF_ECONFIG;
	}
	if ((r = fleet_inventory(ctx->fleet, &inv, cause)) != 0 ||
	    (r = inventory_select(inv, selector, &list, &n, cause)) != 0)
		return r;
	for (i = 0; i < n; i++) { /* keep those whose stop goes on */
		h = host_named(pw, list[i].name);
		if (h == NULL || h->error != NULL) {
			instance_clear(&list[i]);
			continue;
		}
		pl[h - pw->hosts].ran = pl[h - pw->hosts].ok = 1;
		list[m++] = list[i];
	}
	for (k = 0; k < a->npull && m > 0; k++) {
		memset(&req, 0, sizeof req);
		req.dir = XFER_PULL;
		req.paths = (const char *const *)&a->pull_remote[k];
		req.npaths = 1;
		req.dest = a->pull_local[k];
		req.fanout = PULL_FANOUT;
		req.timeout = PULL_TIMEOUT;
		req.dry_run = a->dry_run;
		req.progress = !a->json && isatty(STDERR_FILENO) &&
		    getenv("GPUFLEET_NO_PROGRESS") == NULL;
		if ((r = xfer_run(ctx->fleet, list, m, &req, &res, cause)) != 0)
			goto out;
		for (i = 0; i < res.n; i++) {
			if ((h = host_named(pw, res.hosts[i].name)) == NULL)
				continue;
			p = &pl[h - pw->hosts];
			p->bytes += res.hosts[i].bytes;
			p->files += res.hosts[i].files;
			if (res.hosts[i].ok && !a->json)
				cmd_xfer_print(&req, &res.hosts[i]);
			if (!res.hosts[i].ok && p->ok) {
				p->ok = 0;
				xasprintf(&p->error, "%s: %s",
				    a->pull_remote[k], res.hosts[i].error);
			}
		}
		r = res.interrupted;
		xfer_result_free(&res);
		if (r) {
			*cause = xstrdup("interrupted while pulling: nothing "
					 "stopped");
			r = -130;
			goto out;
		}
	}
	for (i = 0; i < pw->n; i++) {
		h = &pw->hosts[i];
		if (!pl[i].ran || pl[i].ok)
			continue;
		release = strcmp(h->method.kind, "release") == 0;
		if (a->pull_must || release)
			planwrite_fail(h,
			    "not stopped: the pull failed (%s): %s",
			    release ? "a release method waits until the "
				      "results are home"
				    : "--pull-must-succeed",
			    pl[i].error);
		else if (!a->json) {
			char *safe = vis_str(pl[i].error);
			error("%s: the pull failed, stopping anyway (no "
			      "--pull-must-succeed): %s",
			    h->in->name, safe);
			free(safe);
		}
	}
	r = 0;
out:
	instance_free_array(list, m);
	return r;
}

/* A method this deadline may use; else fail the host and return -1. */
static int
check_method(struct planwrite_host *h, const struct arm *a)
{
	if (h->method_error != NULL) {
		planwrite_fail(h, "%s", h->method_error);
		return -1;
	}
	if (h->method.where == STOP_NONE) {
		planwrite_fail(h,
		    "no stop method (%s); set one: gpufleet set %s "
		    "stop_command='remote:/usr/bin/shutdown'",
		    strcmp(h->method.from, "instance") == 0
			? "stop_command is none"
			: h->method.from + strlen("none: "),
		    h->in->name);
		return -1;
	}
	if (strcmp(h->method.kind, "release") == 0 && !a->yes) {
		planwrite_fail(h,
		    "its stop method %s:%s releases the instance and deletes "
		    "its data; add --yes",
		    h->method.where == STOP_REMOTE ? "remote" : "local",
		    h->method.command);
		return -1;
	}
	return 0;
}

/* Build host h's plan with the new deadline id. */
static void
arm_host(struct planwrite *pw, struct planwrite_host *h, const struct arm *a,
    char *id)
{
	struct plan_change c;
	struct plan_result res;

	planwrite_change(pw, h, &c);
	c.kind = PLAN_ADD;
	memcpy(c.deadline.id, id, strlen(id) + 1);
	c.deadline.at = (a->now_ ? pw->now : a->at) + h->skew;
	c.deadline.local = h->method.where == STOP_LOCAL;
	c.deadline.warn_minutes = a->warn;
	c.deadline.before_stop = a->before;
	c.deadline.before_stop_timeout_s = a->before_timeout_s;
	c.deadline.before_must_succeed = a->must_succeed;
	c.deadline.unless_busy = a->unless_busy;
	if (strcmp(h->method.kind, "release") == 0 && a->yes)
		c.allow_release = 1;
	if (a->npull > 0 && !a->now_) { /* held for the pull */
		c.deadline.hold = 1;
		c.deadline.hold_wait_s = a->pull_wait_s;
		c.deadline.hold_must = hold_must(h, a);
	}
	planwrite_build(pw, h, &c, &res);
}

/* What --pull brought from one host, for --json: null if it ran none. */
static json_t *
pull_json(const struct arm *a, const struct pulled *pl)
{
	if (a->npull == 0 || !pl->ran)
		return json_null();
	return json_pack("{s:s, s:I, s:I, s:o}", "result",
	    pl->ok ? "ok" : "failed", "bytes", (json_int_t)pl->bytes, "files",
	    (json_int_t)pl->files, "error",
	    pl->error != NULL ? json_string(pl->error) : json_null());
}

/* One host's result as --json shows it. */
static json_t *
arm_json(const struct planwrite_host *h, const struct arm *a, const char *id,
    const struct pulled *pl)
{
	char *at = instance_format_time(a->at),
	     *ati = instance_format_time(a->at + h->skew),
	     *m = stopmethod_spec(&h->method);
	json_t *o;

	o = json_pack("{s:s, s:s, s:s, s:s, s:i, s:o, s:b, s:s, s:s, s:o, s:o, "
		      "s:o}",
	    "name", h->in->name, "id", id, "at", at, "at_instance", ati,
	    "warn_minutes", a->warn, "before_stop",
	    a->before != NULL ? json_string(a->before) : json_null(),
	    "unless_busy", a->unless_busy, "method", m, "kind", h->method.kind,
	    "watcher", h->written ? json_string(h->watcher) : json_null(),
	    "pull", pull_json(a, pl), "error",
	    h->error != NULL ? json_string(h->error) : json_null());
	if (o != NULL)
		json_object_set_new(o, "hold",
		    a->npull > 0 && !a->now_ ? json_pack("{s:I, s:b}", "wait_s",
						   (json_int_t)a->pull_wait_s,
						   "must", hold_must(h, a))
					     : json_null());
	free(at);
	free(ati);
	free(m);
	return o;
}

/* One host's result as a line. */
static void
arm_print(const struct planwrite_host *h, const struct arm *a, const char *id)
{
	char *when = watcher_local_time(a->at),
	     *clock = watcher_clock(a->at + h->skew),
	     *m = stopmethod_format(&h->method), *safe = vis_str(m);

	printf("%s  %s %s (instance clock %s)%s  warn %d min  %s  id %s%s\n",
	    h->in->name, a->dry_run ? "would stop at" : "stop at", when, clock,
	    a->unless_busy ? " unless busy" : "", a->warn, safe, id,
	    a->before != NULL ? "  (before-stop set)" : "");
	if (a->npull > 0 && !a->now_) {
		char *wait = timeparse_duration(a->pull_wait_s);
		printf(
		    "%s  the stop is held for the pull (%zu path%s) until it "
		    "came home; %s after %s\n",
		    h->in->name, a->npull, a->npull == 1 ? "" : "s",
		    hold_must(h, a) ? "it waits on" : "it stops anyway", wait);
		free(wait);
	}
	if (h->method.where == STOP_LOCAL && !a->now_)
		printf("%s  the stop runs on this machine: it must be awake "
		       "then (gpufleet status or shutdown ls after %s runs "
		       "it)\n",
		    h->in->name, when);
	free(when);
	free(clock);
	free(m);
	free(safe);
}

/*
 * A local method with --now: run it here at once (the instance may even
 * be unreachable: a platform CLI stops it from outside).
 */
static void
local_now(struct planwrite *pw, struct planwrite_host *h, const struct arm *a)
{
	char *cause = NULL;

	free(h->error);
	h->error = NULL;
	if (a->before != NULL || a->unless_busy) {
		planwrite_fail(h,
		    "%s on the instance before the stop; with a local stop "
		    "method use --in or --at",
		    a->before != NULL ? "--before runs"
				      : "--unless-busy is judged");
		return;
	}
	if (!a->dry_run &&
	    localstop_run(pw->rm->inv, pw->fleet->config, h->in, NULL,
		(int64_t)time(NULL), &cause) != 0) {
		planwrite_fail(h, "%s", cause);
		free(cause);
	}
}

/* The stored skews, for --dry-run (which contacts nothing). */
static void
stored_skews(struct planwrite *pw)
{
	struct watcher_view v;
	char *cause = NULL;
	size_t i;

	for (i = 0; i < pw->n; i++) {
		if (watcher_get(pw->rm->inv, pw->hosts[i].in->id, &v, &cause) ==
		    0)
			pw->hosts[i].skew = v.skew;
		free(cause);
		cause = NULL;
		watcher_view_free(&v);
	}
}

/* Print the results; returns how many hosts failed. */
static size_t
arm_report(struct planwrite *pw, const struct arm *a, char (*ids)[16],
    const int *local, const struct pulled *pl)
{
	json_t *arr = json_array();
	size_t i, failed = 0;
	char *safe, *m;

	for (i = 0; i < pw->n; i++) {
		struct planwrite_host *h = &pw->hosts[i];
		failed += h->error != NULL || (pl[i].ran && !pl[i].ok);
		if (a->json)
			json_array_append_new(
			    arr, arm_json(h, a, ids[i], &pl[i]));
		else if (h->error != NULL) {
			safe = vis_str(h->error);
			error("%s: %s", h->in->name, safe);
			free(safe);
		} else if (local[i]) {
			m = stopmethod_format(&h->method);
			safe = vis_str(m);
			printf("%s  %s with %s on this machine\n", h->in->name,
			    a->dry_run ? "would stop now" : "stopped now",
			    safe);
			free(safe);
			free(m);
		} else
			arm_print(h, a, ids[i]);
	}
	if (a->json)
		json_print(arr, stdout);
	else
		json_decref(arr);
	return failed;
}

/* Arm one deadline on every selected instance. */
static int
shutdown_arm(struct cmd_ctx *ctx, const char *selector, struct arm *a)
{
	struct planwrite *pw = NULL;
	struct pulled *pl;
	char *cause = NULL, (*ids)[16];
	size_t i;
	int r, *local, guard;

	if ((r = planwrite_open(ctx->fleet, selector, &pw, &cause)) != 0)
		return cmd_fail(-r, cause);
	/* A guard's stop (guard.c runs this command for it): g- ids. */
	guard = getenv("GPUFLEET_STOP_BY") != NULL &&
	    strcmp(getenv("GPUFLEET_STOP_BY"), "guard") == 0;
	ids = xcalloc(pw->n + 1, sizeof *ids);
	local = xcalloc(pw->n + 1, sizeof *local);
	pl = xcalloc(pw->n + 1, sizeof *pl);
	for (i = 0; i < pw->n; i++) {
		watcher_new_id(ids[i], sizeof ids[i], guard ? 'g' : 'd');
		if (check_method(&pw->hosts[i], a) == 0)
			local[i] =
			    a->now_ && pw->hosts[i].method.where == STOP_LOCAL;
	}
	if (a->npull > 0 && a->now_ &&
	    (r = pull_first(ctx, selector, pw, a, pl, &cause)) != 0)
		goto out;
	for (i = 0; i < pw->n; i++) {
		if (pw->hosts[i].error != NULL)
			local[i] = 0; /* held back by its pull */
	}
	if (a->dry_run)
		stored_skews(pw);
	else if ((r = planwrite_probe(pw, &cause)) != 0)
		goto out;
	for (i = 0; i < pw->n; i++) {
		if (local[i])
			local_now(pw, &pw->hosts[i], a);
		else if (!a->dry_run && pw->hosts[i].reached &&
		    pw->hosts[i].error == NULL)
			arm_host(pw, &pw->hosts[i], a, ids[i]);
	}
	if (!a->dry_run && (r = planwrite_write(pw, &cause)) != 0)
		goto out;
	if (!a->dry_run && a->npull > 0 && !a->now_)
		hold_save(pw, a, ids);
	r = arm_report(pw, a, ids, local, pl) > 0 ? -GF_EHOSTS : 0;
out:
	for (i = 0; i < pw->n; i++)
		free(pl[i].error);
	free(pl);
	free(ids);
	free(local);
	planwrite_free(pw);
	if (cause != NULL)
		return cmd_fail(-r, cause);
	return -r;
}

static const struct option ls_options[] = { { "json", no_argument, NULL,
						OPT_JSON },
	{ "help", no_argument, NULL, 'h' }, { NULL, 0, NULL, 0 } };

/* One deadline of a plan as a line of `shutdown ls`; 1 if still armed. */
static int
ls_deadline(struct planwrite *pw, const struct planwrite_host *h, json_t *plan,
    json_t *d, int64_t skew)
{
	int64_t at = json_integer_value(json_object_get(d, "at"));
	json_t *stop = json_object_get(plan, "stop");
	const char *before =
	    json_string_value(json_object_get(d, "before_stop"));
	char *when = watcher_local_time(at - skew), *clock = watcher_clock(at),
	     *m, *line;
	const char *did = json_string_value(json_object_get(d, "id"));
	int64_t fired =
	    did != NULL ? watcher_fired_at(pw->rm->inv, h->in->id, did) : 0;
	char *skipped =
	    did != NULL ? watcher_skipped(pw->rm->inv, h->in->id, did) : NULL;
	int local = json_is_string(json_object_get(d, "action")) &&
	    strcmp(json_string_value(json_object_get(d, "action")), "local") ==
		0;

	if (local)
		m = stopmethod_format(&h->method);
	else if (json_is_object(stop))
		xasprintf(&m, "remote:%s (%s)",
		    json_string_value(json_object_get(stop, "command")),
		    json_string_value(json_object_get(stop, "kind")));
	else
		m = xstrdup("no stop method");
	xasprintf(&line,
	    "  %s  %s %s (instance clock %s)%s  warn %lld min%s%s  %s%s%s",
	    did != NULL ? did : "?",
	    skipped != NULL  ? "skipped, due at"
		: fired != 0 ? "fired, due at"
			     : "stop at",
	    when, clock,
	    json_is_true(json_object_get(d, "unless_busy")) ? " unless busy"
							    : "",
	    (long long)json_integer_value(json_object_get(d, "warn_minutes")),
	    before != NULL ? "  before: " : "", before != NULL ? before : "", m,
	    skipped != NULL ? "  skipped: " : "",
	    skipped != NULL ? skipped : "");
	free(m);
	m = vis_str(line);
	printf("%s\n", m);
	free(m);
	free(line);
	free(when);
	free(clock);
	fired = fired != 0 || skipped != NULL;
	free(skipped);
	return fired == 0;
}

/* One instance of `shutdown ls`, from its stored view. */
static void
ls_host(struct planwrite *pw, const struct planwrite_host *h,
    const struct watcher_view *v)
{
	json_t *plan = v->plan != NULL ? json_loads(v->plan, 0, NULL) : NULL,
	       *d, *as, *held;
	struct watcher_alert *al = NULL;
	size_t i, nal = 0, nd = 0;
	char *cause = NULL, *s, *safe;

	printf("%s  watcher %s", h->in->name, v->have ? v->state : "unknown");
	if (v->pid > 0)
		printf(" (pid %lld)", (long long)v->pid);
	if (v->error != NULL) {
		safe = vis_str(v->error);
		printf(": %s", safe);
		free(safe);
	}
	if (v->have &&
	    (v->skew > WATCHER_SKEW_SHOWN || v->skew < -WATCHER_SKEW_SHOWN))
		printf("  clock skew %+llds", (long long)v->skew);
	if (h->probe->state == NULL || !h->probe->have_report) {
		s = watcher_local_time(v->t);
		printf("  (as of %s; %s)", v->have ? s : "never",
		    h->probe->state != NULL ? h->probe->state : "unreachable");
		free(s);
	}
	printf("\n");
	json_array_foreach(json_object_get(plan, "deadlines"), i, d)
	{
		nd += ls_deadline(pw, h, plan, d, v->skew);
	}
	as = json_object_get(plan, "autostop");
	if (json_is_object(as)) {
		s = watcher_autostop_line(as);
		safe = vis_str(s);
		printf("  %s\n", safe);
		free(safe);
		free(s);
	} else if (nd == 0)
		printf("  nothing armed\n");
	held = stophold_json(pw->rm->inv, h->in->id);
	json_array_foreach(held, i, d)
	{
		s = stophold_line(h->in->name, d);
		safe = vis_str(s);
		printf("  %s\n", safe);
		free(safe);
		free(s);
	}
	json_decref(held);
	if (watcher_alerts(pw->rm->inv, h->in->id, &al, &nal, &cause) != 0)
		free(cause);
	for (i = 0; i < nal; i++) {
		s = watcher_local_time(al[i].t);
		printf("  ALERT %s %s at %s (gpufleet events %s)\n", al[i].kind,
		    al[i].deadline != NULL ? al[i].deadline : "-", s,
		    h->in->name);
		free(s);
	}
	watcher_alerts_free(al, nal);
	json_decref(plan);
}

/* One instance of `shutdown ls`: a line, or with json its object. */
static json_t *
ls_show(struct planwrite *pw, struct planwrite_host *h,
    const struct watcher_view *v, int json)
{
	if (!json) {
		ls_host(pw, h, v);
		return NULL;
	}
	return json_pack("{s:s, s:b, s:o, s:o}", "name", h->in->name,
	    "reachable", h->probe->have_report, "error",
	    h->error != NULL ? json_string(h->error) : json_null(), "watcher",
	    watcher_json(pw->rm->inv, h->in->id, v));
}

/* `shutdown ls [SELECTOR] [--json]`: contact, ingest, list. */
static int
shutdown_ls(struct cmd_ctx *ctx, int argc, char **argv)
{
	return planwrite_ls(&cmd_shutdown_entry, ctx, argc, argv, ls_show);
}

/* Whether text is a deadline id as shutdown makes them (d-XXXXXXXX). */
static int
is_deadline_id(const char *text)
{
	return strlen(text) == 10 && strncmp(text, "d-", 2) == 0 &&
	    strspn(text + 2, "0123456789abcdef") == 8;
}

/* Build host h's plan without the deadline(s); report what was done. */
static void
cancel_host(struct planwrite *pw, struct planwrite_host *h, const char *id,
    size_t *removed)
{
	struct plan_change c;
	struct plan_result res;
	int64_t fired;
	char *when;

	planwrite_change(pw, h, &c);
	c.kind = id != NULL ? PLAN_CANCEL_ID : PLAN_CANCEL_ALL;
	c.cancel_id = id;
	if (planwrite_build(pw, h, &c, &res) != 0)
		return;
	*removed = res.removed;
	if (res.removed > 0)
		return;
	free(h->plan);
	h->plan = NULL;
	if (id == NULL)
		return;
	if ((fired = watcher_fired_at(pw->rm->inv, h->in->id, id)) != 0) {
		when = watcher_local_time(fired);
		planwrite_fail(h, "deadline %s already fired at %s", id, when);
		free(when);
	} else
		planwrite_fail(h, "no deadline %s is armed", id);
}

/*
 * Cancel host h's held stops (id, or every one when id is NULL): a
 * release "cancelled", after which the watcher skips the stop. Returns
 * how many were cancelled; a failure is h's error.
 */
static int
cancel_held(struct fleet *fleet, struct inventory *inv,
    struct planwrite_host *h, const char *id)
{
	struct stophold *hs = NULL;
	char *cause = NULL;
	size_t n = 0, k;
	int done = 0;

	if (stophold_list(inv, h->in->id, &hs, &n, &cause) != 0) {
		free(cause);
		return 0;
	}
	for (k = 0; k < n; k++) {
		if (id != NULL && strcmp(hs[k].deadline, id) != 0)
			continue;
		if (stophold_release(fleet, h->in->name, hs[k].deadline,
			"cancelled", &cause) != 0) {
			free(h->error);
			xasprintf(&h->error, "cannot cancel held stop %s: %s",
			    hs[k].deadline, cause);
			free(cause);
			cause = NULL;
			continue;
		}
		stophold_finish(
		    inv, &hs[k], "released", "cancelled by the user", &cause);
		free(cause);
		cause = NULL;
		hold_log(inv, &hs[k], "cancelled by the user", NULL);
		printf("%s  cancelled held stop %s (not stopped; its results "
		       "were not pulled)\n",
		    h->in->name, hs[k].deadline);
		done++;
	}
	stophold_free(hs, n);
	return done;
}

/* `shutdown cancel SELECTOR | ID`. */
static int
shutdown_cancel(struct cmd_ctx *ctx, int argc, char **argv)
{
	const struct cmd_entry *e = &cmd_shutdown_entry;
	struct planwrite *pw = NULL;
	const char *id = NULL, *target;
	char *cause = NULL, *name = NULL;
	struct inventory *inv;
	size_t i, failed = 0, *removed;
	int ch, status, r;

	while ((ch = cmd_getopt(e, argc, argv, "h", ls_options + 1, &status)) !=
	    -1) {
		if (ch == -2)
			return status;
	}
	if (argc - optind != 1)
		return cmd_usage_error(e, "cancel needs SELECTOR or ID");
	target = argv[optind];
	if (is_deadline_id(target)) {
		/* An id: the instance whose plan or journal has it. */
		id = target;
		if ((r = fleet_inventory(ctx->fleet, &inv, &cause)) != 0 ||
		    (r = watcher_find_id(inv, id, &name, &cause)) != 0)
			return cmd_fail(-r, cause);
		if (name == NULL) {
			error("no instance has a deadline %s (gpufleet "
			      "shutdown ls lists them)",
			    id);
			return GF_EHOSTS;
		}
		target = name;
	}
	r = planwrite_contact(ctx->fleet, target, &pw, &cause);
	free(name);
	if (r != 0)
		return cmd_fail(-r, cause);
	removed = xcalloc(pw->n + 1, sizeof *removed);
	for (i = 0; i < pw->n; i++) {
		if (pw->hosts[i].reached && pw->hosts[i].error == NULL)
			cancel_host(pw, &pw->hosts[i], id, &removed[i]);
	}
	if ((r = planwrite_write(pw, &cause)) != 0) {
		free(removed);
		planwrite_free(pw);
		return cmd_fail(-r, cause);
	}
	for (i = 0; i < pw->n; i++) {
		struct planwrite_host *h = &pw->hosts[i];
		char *safe;
		if (h->reached &&
		    cancel_held(ctx->fleet, pw->rm->inv, h, id) > 0 &&
		    (id != NULL || removed[i] == 0))
			continue; /* said: a held stop is cancelled */
		if (h->error != NULL) {
			safe = vis_str(h->error);
			error("%s: %s", h->in->name, safe);
			free(safe);
			failed++;
		} else if (removed[i] == 0)
			printf("%s  nothing armed\n", h->in->name);
		else if (id != NULL)
			printf("%s  cancelled %s\n", h->in->name, id);
		else
			printf("%s  cancelled %zu deadline%s\n", h->in->name,
			    removed[i], removed[i] == 1 ? "" : "s");
	}
	free(removed);
	planwrite_free(pw);
	return failed > 0 ? GF_EHOSTS : GF_OK;
}

/* Whether h's held stop may not go on without its pull. */
static int
hold_must(const struct planwrite_host *h, const struct arm *a)
{
	return a->pull_must || strcmp(h->method.kind, "release") == 0;
}

/*
 * The --pull options as stop_hold keeps them: [{"remote","local"}...],
 * local made absolute (the daemon that runs the pull has another working
 * directory).
 */
static json_t *
hold_pulls(const struct arm *a)
{
	json_t *arr = json_array();
	char cwd[4096], *local;
	size_t i;

	if (getcwd(cwd, sizeof cwd) == NULL)
		cwd[0] = '\0';
	for (i = 0; i < a->npull; i++) {
		if (a->pull_local[i][0] == '/' || cwd[0] == '\0')
			local = xstrdup(a->pull_local[i]);
		else
			xasprintf(&local, "%s/%s", cwd, a->pull_local[i]);
		json_array_append_new(arr,
		    json_pack("{s:s, s:s}", "remote", a->pull_remote[i],
			"local", local));
		free(local);
	}
	return arr;
}

/*
 * Keep the pulls of each deadline written with a hold; a host whose pulls
 * could not be kept fails (its stop would wait for nothing).
 */
static void
hold_save(struct planwrite *pw, const struct arm *a, char (*ids)[16])
{
	json_t *pulls = hold_pulls(a);
	char *cause = NULL;
	size_t i;

	for (i = 0; i < pw->n; i++) {
		struct planwrite_host *h = &pw->hosts[i];
		if (!h->written || h->error != NULL ||
		    h->method.where == STOP_NONE)
			continue;
		if (stophold_save(pw->rm->inv, h->in->id, ids[i], pulls,
			hold_must(h, a), pw->now, &cause) != 0) {
			planwrite_fail(h,
			    "armed, but its pull could not be kept (%s): "
			    "gpufleet shutdown cancel %s",
			    cause, ids[i]);
			free(cause);
			cause = NULL;
		}
	}
	json_decref(pulls);
}

/*
 * What happened to held stop h, in the action log (gpufleet events) and,
 * when the stop waits for the user, as a stop_held notification.
 */
static void
hold_log(struct inventory *inv, const struct stophold *h, const char *what,
    const char *notify)
{
	json_t *names = json_pack("[s]", h->name),
	       *res = json_pack("{s:s}", h->name, what);
	char *cause = NULL, *why, *key, *next;

	xasprintf(&why, "held stop %s", h->deadline);
	if (actionlog_add(inv, (int64_t)time(NULL), "stop_hold", h->deadline,
		names, why, res, NULL, &cause) != 0) {
		error("%s", cause);
		free(cause);
		cause = NULL;
	}
	if (notify != NULL) {
		xasprintf(&key, "stop_held:%lld:%s", (long long)h->instance_id,
		    h->deadline);
		xasprintf(&next, "gpufleet shutdown --release %s", h->name);
		if (notifyqueue_add(inv, NOTIFY_STOP_HELD, h->name,
			(int64_t)time(NULL), notify, next, key, &cause) != 0) {
			error("%s", cause);
			free(cause);
		}
		free(key);
		free(next);
	}
	json_decref(names);
	json_decref(res);
	free(why);
}

/*
 * One held stop: pull (pull set) and release it when its results came
 * home (or it need not wait for them), else leave it held for the user;
 * without pull, release it as the user's. Returns 0 or GF_EHOSTS.
 */
static int
held_one(struct fleet *fleet, const struct stophold *h, int pull)
{
	struct inventory *inv = NULL;
	char *error = NULL, *cause = NULL, *what = NULL, *size, *safe;
	const char *by = "user";
	uint64_t bytes = 0;
	int claimed;

	if (fleet_inventory(fleet, &inv, &cause) != 0) {
		error("%s", cause);
		free(cause);
		return GF_EHOSTS;
	}
	if (pull && (claimed = stophold_claim(inv, h, 1, &cause)) != 1) {
		if (claimed < 0) {
			error("%s", cause);
			free(cause);
		} else
			error("%s: the pull of held stop %s is running "
			      "already",
			    h->name, h->deadline);
		return GF_EHOSTS;
	}
	if (pull && stophold_pull(fleet, h, &bytes, &error) != 0) {
		safe = vis_str(error);
		if (h->must) {
			xasprintf(
			    &what, "pull failed: %s; the stop waits", safe);
			stophold_finish(inv, h, "failed", error, &cause);
			hold_log(inv, h, what,
			    "is held: its results did not come home, the stop "
			    "waits");
			error("%s: the pull failed (%s): the stop stays held "
			      "(gpufleet shutdown --release %s stops without "
			      "it)",
			    h->name, safe, h->name);
			free(safe);
			free(error);
			free(what);
			free(cause);
			return GF_EHOSTS;
		}
		error("%s: the pull failed (%s): stopping anyway (no "
		      "--pull-must-succeed)",
		    h->name, safe);
		free(safe);
		by = "pull_failed";
	} else if (pull)
		by = "pulled";
	if (stophold_release(fleet, h->name, h->deadline, by, &cause) != 0) {
		safe = vis_str(cause);
		error("%s: cannot release held stop %s: %s", h->name,
		    h->deadline, safe);
		free(safe);
		free(cause);
		cause = NULL;
		if (pull) /* the next --pull-held tries again */
			stophold_finish(inv, h, "failed",
			    "the release could not be written", &cause);
		free(cause);
		free(error);
		return GF_EHOSTS;
	}
	size = xfer_size(bytes);
	if (strcmp(by, "pulled") == 0)
		xasprintf(&what, "pulled %s; released", size);
	else if (strcmp(by, "pull_failed") == 0)
		xasprintf(
		    &what, "pull failed: %s; released all the same", error);
	else
		xasprintf(&what, "released by the user, without the pull");
	stophold_finish(inv, h, "released", what, &cause);
	free(cause);
	hold_log(inv, h, what, NULL);
	safe = vis_str(what);
	printf("%s  held stop %s: %s (the watcher stops it now)\n", h->name,
	    h->deadline, safe);
	free(safe);
	free(size);
	free(what);
	free(error);
	return GF_OK;
}

/*
 * `shutdown --pull-held SELECTOR` (pull set) and `shutdown --release
 * SELECTOR`: contact the instances (their journals say what is held),
 * then take each held stop on.
 */
static int
shutdown_held(struct cmd_ctx *ctx, int argc, char **argv, int pull)
{
	const struct cmd_entry *e = &cmd_shutdown_entry;
	struct planwrite *pw = NULL;
	struct stophold *h = NULL;
	char *cause = NULL;
	size_t n = 0, i, k, found;
	int ch, status, r, failed = 0;

	while ((ch = cmd_getopt(e, argc, argv, "h", ls_options + 1, &status)) !=
	    -1) {
		if (ch == -2)
			return status;
	}
	if (argc - optind != 1)
		return cmd_usage_error(
		    e, "%s needs SELECTOR", pull ? "--pull-held" : "--release");
	if ((r = planwrite_contact(ctx->fleet, argv[optind], &pw, &cause)) != 0)
		return cmd_fail(-r, cause);
	for (i = 0; i < pw->n; i++) {
		struct planwrite_host *ph = &pw->hosts[i];
		if (stophold_list(pw->rm->inv, ph->in->id, &h, &n, &cause) !=
		    0) {
			planwrite_free(pw);
			return cmd_fail(GF_EDB, cause);
		}
		for (k = found = 0; k < n; k++) {
			found++;
			failed |= held_one(ctx->fleet, &h[k], pull) != GF_OK;
		}
		if (found == 0) {
			error("%s: no stop is held%s%s", ph->in->name,
			    ph->error != NULL ? ": " : "",
			    ph->error != NULL ? ph->error : "");
			failed = 1;
		}
		stophold_free(h, n);
	}
	planwrite_free(pw);
	return failed ? GF_EHOSTS : GF_OK;
}

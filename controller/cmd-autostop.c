/*
 * Stop instances that have nothing to do: `gpufleet autostop` sets an
 * autostop policy in each instance's watcher plan (agent/WATCH.md); the
 * watcher judges idleness on the instance (GPUs, sessions, jobs, a stalled
 * progress file, a maximum runtime) and stops it with its stop method,
 * laptop closed or not. `autostop ls` lists the policies, `autostop off`
 * removes them.
 */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd.h"
#include "log.h"
#include "planwrite.h"
#include "status.h"
#include "timeparse.h"
#include "vis.h"
#include "watcher.h"
#include "xmalloc.h"

#define DURATION_MAX (3650LL * 86400)
#define GPU_MEM_MAX  (1LL << 32)

/* What `autostop SELECTOR` was asked to set. */
struct policy {
	const char *idle, *stalled, *max_runtime; /* as given */
	struct plan_autostop a;
};

static int cmd_autostop_exec(
    const struct cmd_entry *, struct cmd_ctx *, int, char **);
static int parse_policy(
    const struct cmd_entry *, int, char **, struct policy *, int *);
static int number(const struct cmd_entry *, const char *, const char *,
    long long, long long, long long *, int *);
static int wait_for(
    const struct cmd_entry *, const char *, struct plan_autostop *, int *);
static int autostop_set(struct cmd_ctx *, const char *, struct policy *);
static json_t *ls_show(struct planwrite *, struct planwrite_host *,
    const struct watcher_view *, int);
static int autostop_ls(struct cmd_ctx *, int, char **);
static int autostop_off(struct cmd_ctx *, int, char **);

const struct cmd_entry cmd_autostop_entry = {
	.name = "autostop",
	.usage =
	    "SELECTOR --idle DURATION [--gpu-below PERCENT] [--gpu-mem MIB]\n"
	    "       [--wait-for sessions,jobs|jobs|sessions|none] "
	    "[--stalled DURATION]\n"
	    "       [--max-runtime DURATION] [--yes]\n"
	    "       gpufleet autostop ls [SELECTOR] [--json]\n"
	    "       gpufleet autostop off SELECTOR",
	.summary = "stop instances whose GPUs have been idle, on the instance",
	.help =
	    "Sets an autostop policy in the watcher on each selected instance. "
	    "Every check\ninterval it samples the GPUs (one nvidia-smi query), "
	    "the sessions and jobs;\nidle continuously for --idle, it stops "
	    "the instance with its stop method\n(gpufleet show NAME). Idle: "
	    "every GPU below --gpu-below percent, no GPU\nprocess above "
	    "--gpu-mem MiB, and per --wait-for no interactive session and\nno "
	    "gpufleet job. A failing nvidia-smi counts as busy. Each new "
	    "setting gets\na new policy id (a-XXXXXXXX). A release method "
	    "(deletes the instance) is\nused only with `gpufleet set NAME "
	    "allow_release=yes`.\n\n"
	    "      --idle DURATION       idle this long (at least 5m)\n"
	    "      --gpu-below PERCENT   a GPU at or above this is busy "
	    "(default 5)\n"
	    "      --gpu-mem MIB         a GPU process above this is work "
	    "(default 1024)\n"
	    "      --wait-for WHAT       sessions,jobs (default), jobs, "
	    "sessions or none\n"
	    "      --stalled DURATION    a progress file unchanged this long "
	    "is idle even\n"
	    "                            with busy GPUs (a hung job)\n"
	    "      --max-runtime DURATION  stop this long after the container "
	    "started,\n"
	    "                            whatever the load\n"
	    "      --yes                 accepted; autostop never releases "
	    "unless the\n"
	    "                            instance has allow_release=yes\n\n"
	    "Examples:\n"
	    "  gpufleet autostop @train --idle 30m\n"
	    "  gpufleet autostop a100-1 --idle 20m --wait-for jobs --stalled "
	    "1h\n"
	    "  gpufleet autostop ls\n"
	    "  gpufleet autostop off a100-1\n",
	.exec = cmd_autostop_exec,
};

enum {
	OPT_IDLE = 256,
	OPT_GPU_BELOW,
	OPT_GPU_MEM,
	OPT_WAIT_FOR,
	OPT_STALLED,
	OPT_MAX_RUNTIME,
	OPT_YES,
	OPT_JSON
};

static const struct option set_options[] = { { "idle", required_argument, NULL,
						 OPT_IDLE },
	{ "gpu-below", required_argument, NULL, OPT_GPU_BELOW },
	{ "gpu-mem", required_argument, NULL, OPT_GPU_MEM },
	{ "wait-for", required_argument, NULL, OPT_WAIT_FOR },
	{ "stalled", required_argument, NULL, OPT_STALLED },
	{ "max-runtime", required_argument, NULL, OPT_MAX_RUNTIME },
	{ "yes", no_argument, NULL, OPT_YES },
	{ "help", no_argument, NULL, 'h' }, { NULL, 0, NULL, 0 } };

static const struct option ls_options[] = { { "json", no_argument, NULL,
						OPT_JSON },
	{ "help", no_argument, NULL, 'h' }, { NULL, 0, NULL, 0 } };

static int
cmd_autostop_exec(
    const struct cmd_entry *e, struct cmd_ctx *ctx, int argc, char **argv)
{
	struct policy p;
	int status;

	if (argc >= 2 && strcmp(argv[1], "ls") == 0)
		return autostop_ls(ctx, argc - 1, argv + 1);
	if (argc >= 2 && strcmp(argv[1], "off") == 0)
		return autostop_off(ctx, argc - 1, argv + 1);
	if (parse_policy(e, argc, argv, &p, &status) != 0)
		return status;
	return autostop_set(ctx, argv[optind], &p);
}

/* An integer option in [lo, hi]. */
static int
number(const struct cmd_entry *e, const char *opt, const char *text,
    long long lo, long long hi, long long *out, int *status)
{
	char *end;

	*out = strtoll(text, &end, 10);
	if (*text == '\0' || *end != '\0' || *out < lo || *out > hi) {
		*status = cmd_usage_error(e,
		    "--%s '%s' is not a number from %lld to %lld", opt, text,
		    lo, hi);
		return -1;
	}
	return 0;
}

/* The --wait-for list. */
static int
wait_for(const struct cmd_entry *e, const char *text, struct plan_autostop *a,
    int *status)
{
	if (strcmp(text, "sessions,jobs") == 0 ||
	    strcmp(text, "jobs,sessions") == 0)
		a->wait_sessions = a->wait_jobs = 1;
	else if (strcmp(text, "jobs") == 0)
		a->wait_sessions = 0, a->wait_jobs = 1;
	else if (strcmp(text, "sessions") == 0)
		a->wait_sessions = 1, a->wait_jobs = 0;
	else if (strcmp(text, "none") == 0)
		a->wait_sessions = a->wait_jobs = 0;
	else {
		*status = cmd_usage_error(e,
		    "--wait-for '%s' is not sessions,jobs, jobs, sessions or "
		    "none",
		    text);
		return -1;
	}
	return 0;
}

/* The options of `autostop SELECTOR ...`; *status is the exit on error. */
static int
parse_policy(const struct cmd_entry *e, int argc, char **argv, struct policy *p,
    int *status)
{
	struct watcher_knobs k;
	char *cause = NULL;
	long long n;
	int ch;

	memset(p, 0, sizeof *p);
	p->a.gpu_below = 5;
	p->a.gpu_mem_mib = 1024;
	p->a.wait_sessions = p->a.wait_jobs = 1;
	if (watcher_knobs(&k, &cause) != 0) {
		*status = cmd_fail(GF_EUSAGE, cause);
		return -1;
	}
	while (
	    (ch = cmd_getopt(e, argc, argv, "h", set_options, status)) != -1) {
		switch (ch) {
		case -2:
			return -1;
		case OPT_IDLE:
			if ((*status = cmd_duration(e, "idle", optarg,
				 k.min_idle_s, DURATION_MAX, &p->a.idle_s)) !=
			    0)
				return -1;
			p->idle = optarg;
			break;
		case OPT_GPU_BELOW:
			if (number(e, "gpu-below", optarg, 0, 100, &n,
				status) != 0)
				return -1;
			p->a.gpu_below = (int)n;
			break;
		case OPT_GPU_MEM:
			if (number(e, "gpu-mem", optarg, 0, GPU_MEM_MAX, &n,
				status) != 0)
				return -1;
			p->a.gpu_mem_mib = n;
			break;
		case OPT_WAIT_FOR:
			if (wait_for(e, optarg, &p->a, status) != 0)
				return -1;
			break;
		case OPT_STALLED:
			if ((*status = cmd_duration(e, "stalled", optarg, 1,
				 DURATION_MAX, &p->a.stalled_s)) != 0)
				return -1;
			break;
		case OPT_MAX_RUNTIME:
			if ((*status = cmd_duration(e, "max-runtime", optarg, 1,
				 DURATION_MAX, &p->a.max_runtime_s)) != 0)
				return -1;
			break;
		case OPT_YES:
			break;
		}
	}
	if (argc - optind != 1) {
		*status = cmd_usage_error(e, "needs exactly one SELECTOR");
		return -1;
	}
	if (p->idle == NULL) {
		*status = cmd_usage_error(e, "needs --idle DURATION");
		return -1;
	}
	return 0;
}

/* Set the policy on every selected instance. */
static int
autostop_set(struct cmd_ctx *ctx, const char *selector, struct policy *p)
{
	struct planwrite *pw = NULL;
	struct plan_change c;
	struct plan_result res;
	char *cause = NULL, *line, *safe;
	const struct config *cf = ctx->fleet->config;
	size_t i, failed;
	int r;

	if ((r = planwrite_open(ctx->fleet, selector, &pw, &cause)) != 0)
		return cmd_fail(-r, cause);
	for (i = 0; i < pw->n; i++) {
		struct planwrite_host *h = &pw->hosts[i];
		if (h->method.where != STOP_REMOTE)
			planwrite_fail(h,
			    "autostop needs a remote stop method (it has %s); "
			    "set one: gpufleet set %s "
			    "stop_command='remote:/usr/bin/shutdown'",
			    h->method.where == STOP_LOCAL ? "a local one"
							  : "none",
			    h->in->name);
		else if (strcmp(h->method.kind, "release") == 0 &&
		    !h->method.allow_release)
			planwrite_fail(h,
			    "its stop method releases the instance (deletes "
			    "it and its data); allow that first: gpufleet set "
			    "%s allow_release=yes",
			    h->in->name);
	}
	if ((r = planwrite_probe(pw, &cause)) != 0)
		goto out;
	for (i = 0; i < pw->n; i++) {
		struct planwrite_host *h = &pw->hosts[i];
		if (!h->reached || h->error != NULL)
			continue;
		planwrite_change(pw, h, &c);
		c.kind = PLAN_AUTOSTOP;
		c.autostop = p->a;
		watcher_new_id(c.autostop.id, sizeof c.autostop.id, 'a');
		c.autostop.progress = cf->progress_file;
		c.autostop.nvidia_smi = cf->nvidia_smi;
		planwrite_build(pw, h, &c, &res);
	}
	if ((r = planwrite_write(pw, &cause)) != 0)
		goto out;
	failed = planwrite_print_errors(pw);
	for (i = 0; i < pw->n; i++) {
		struct planwrite_host *h = &pw->hosts[i];
		json_t *plan;
		if (h->error != NULL || !h->written)
			continue;
		plan = json_loads(h->plan, 0, NULL);
		line = watcher_autostop_line(json_object_get(plan, "autostop"));
		safe = vis_str(line);
		printf("%s  %s  watcher %s\n", h->in->name, safe, h->watcher);
		free(safe);
		free(line);
		json_decref(plan);
	}
	r = failed > 0 ? -GF_EHOSTS : 0;
out:
	planwrite_free(pw);
	if (cause != NULL)
		return cmd_fail(-r, cause);
	return -r;
}

/* One instance of `autostop ls`: a line, or with json its object. */
static json_t *
ls_show(struct planwrite *pw, struct planwrite_host *h,
    const struct watcher_view *v, int json)
{
	json_t *plan = v->plan != NULL ? json_loads(v->plan, 0, NULL) : NULL,
	       *as = json_object_get(plan, "autostop"), *o = NULL;
	char *line, *safe;

	(void)pw;
	if (json)
		o = json_pack("{s:s, s:b, s:s, s:o}", "name", h->in->name,
		    "reachable", h->probe->have_report, "watcher",
		    v->have ? v->state : "unknown", "autostop",
		    json_is_object(as) ? json_deep_copy(as) : json_null());
	else if (json_is_object(as)) {
		line = watcher_autostop_line(as);
		safe = vis_str(line);
		printf("%s  %s  watcher %s%s\n", h->in->name, safe,
		    v->have ? v->state : "unknown",
		    h->probe->have_report ? "" : " (unreachable)");
		free(safe);
		free(line);
	} else
		printf("%s  no autostop\n", h->in->name);
	json_decref(plan);
	return o;
}

/* `autostop ls [SELECTOR] [--json]`: contact, then each policy. */
static int
autostop_ls(struct cmd_ctx *ctx, int argc, char **argv)
{
	return planwrite_ls(&cmd_autostop_entry, ctx, argc, argv, ls_show);
}

/* `autostop off SELECTOR`. */
static int
autostop_off(struct cmd_ctx *ctx, int argc, char **argv)
{
	const struct cmd_entry *e = &cmd_autostop_entry;
	struct planwrite *pw = NULL;
	struct plan_change c;
	struct plan_result res;
	char *cause = NULL;
	int ch, status, r, *had;
	size_t i, failed;

	while ((ch = cmd_getopt(e, argc, argv, "h", ls_options + 1, &status)) !=
	    -1) {
		if (ch == -2)
			return status;
	}
	if (argc - optind != 1)
		return cmd_usage_error(e, "off needs a SELECTOR");
	if ((r = planwrite_contact(ctx->fleet, argv[optind], &pw, &cause)) != 0)
		return cmd_fail(-r, cause);
	had = xcalloc(pw->n + 1, sizeof *had);
	for (i = 0; i < pw->n; i++) {
		struct planwrite_host *h = &pw->hosts[i];
		if (!h->reached || h->error != NULL)
			continue;
		planwrite_change(pw, h, &c);
		c.kind = PLAN_AUTOSTOP_OFF;
		if (planwrite_build(pw, h, &c, &res) == 0 &&
		    !(had[i] = res.had_autostop)) {
			free(h->plan);
			h->plan = NULL;
		}
	}
	if ((r = planwrite_write(pw, &cause)) != 0) {
		free(had);
		planwrite_free(pw);
		return cmd_fail(-r, cause);
	}
	failed = planwrite_print_errors(pw);
	for (i = 0; i < pw->n; i++) {
		if (pw->hosts[i].error == NULL)
			printf("%s  %s\n", pw->hosts[i].in->name,
			    had[i] ? "autostop off" : "no autostop was set");
	}
	free(had);
	planwrite_free(pw);
	return failed > 0 ? GF_EHOSTS : GF_OK;
}

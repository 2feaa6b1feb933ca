/*
 * Live state of every instance in about a second: up or why not, what each
 * GPU is doing and who uses it, whether the job still makes progress, and
 * since when the instance has been running (and so billing). One round trip
 * per instance runs the agent (deploying it first where it is missing);
 * each report is stored for cost, idle detection and history.
 */

#include <math.h>
#include <stdarg.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cmd.h"
#include "deploy.h"
#include "keys.h"
#include "ledger.h"
#include "log.h"
#include "remote.h"
#include "report.h"
#include "samples.h"
#include "status.h"
#include "timeparse.h"
#include "vis.h"
#include "xmalloc.h"

#define ERR_CAP		   4096
#define STATUS_INTERRUPTED 130

struct capture {
	char *data;
	size_t len;
	size_t cap;
	int over;
};

struct shost {
	struct capture out;
	struct capture err;
	const char *state;
	char *error;
	int have_report;
	struct report rep;
	char *prefail; /* failed before any run (ProxyJump) */
	enum engine_fail prefail_kind;
};

struct status_run {
	struct cmd_ctx *ctx;
	struct remote *rm;
	struct agent_bin ab;
	struct shost *sh;
	char *args;
	int color;
	int64_t now;
};

static int cmd_status_exec(
    const struct cmd_entry *, struct cmd_ctx *, int, char **);
static void capture_add(struct capture *, const char *, size_t, size_t);
static void on_output(struct engine_host *, int, const char *, size_t, void *);
static int run_once(struct status_run *, int, char **);
static void classify(struct status_run *, size_t);
static int store(struct status_run *, char **);
static void render_table(struct status_run *);
static void render_json(struct status_run *);
static char *gpu_summary(const struct report *);
static volatile sig_atomic_t stop_watch;

const struct cmd_entry cmd_status_entry = {
	.name = "status",
	.usage = "[SELECTOR] [--json] [--watch SECS [--count N]]",
	.summary = "live GPU and host state of every instance",
	.help =
	    "Runs the agent on every selected instance (all by default) in one "
	    "round\ntrip, uploading it first where it is missing, and shows:"
	    "\n  NAME STATE GPUS UTIL% MEM(GiB) TEMP POWER PROCS SESS LOAD UP "
	    "PROGRESS\n"
	    "STATE is up, unreachable, auth failed, host key changed, agent "
	    "error\nor error. UP is the time since the container started "
	    "(when billing\nstarted). On a terminal idle GPUs and stale "
	    "progress stand out in\ncolour (NO_COLOR turns it off). Every "
	    "report is stored (see history).\n\n"
	    "      --json        the full reports plus the controller's view "
	    "(state,\n                    error), as one JSON array\n"
	    "  -w, --watch SECS  refresh every SECS seconds, reusing the SSH "
	    "sessions\n"
	    "  -n, --count N     with --watch, stop after N refreshes\n\n"
	    "Examples:\n"
	    "  gpufleet status\n"
	    "  gpufleet status @train --watch 5\n",
	.exec = cmd_status_exec,
};

enum { OPT_JSON = 256 };

static const struct option status_options[] = { { "json", no_argument, NULL,
						    OPT_JSON },
	{ "watch", required_argument, NULL, 'w' },
	{ "count", required_argument, NULL, 'n' },
	{ "help", no_argument, NULL, 'h' }, { NULL, 0, NULL, 0 } };

static void
capture_add(struct capture *c, const char *data, size_t len, size_t cap)
{
	if (c->len + len > cap) {
		c->over = 1;
		len = c->len < cap ? cap - c->len : 0;
	}
	if (len == 0)
		return;
	if (c->len + len + 1 > c->cap) {
		c->cap = (c->len + len + 1) * 2;
		c->data = xreallocarray(c->data, 1, c->cap);
	}
	memcpy(c->data + c->len, data, len);
	c->len += len;
	c->data[c->len] = '\0';
}

static void
on_output(struct engine_host *h, int is_stderr, const char *data, size_t len,
    void *arg)
{
	struct status_run *run = arg;
	struct shost *s = &run->sh[h - run->rm->hosts];

	if (is_stderr)
		capture_add(&s->err, data, len, ERR_CAP);
	else
		capture_add(&s->out, data, len, REPORT_MAX_BYTES);
}

/* Decide one host's state from its run. */
static void
classify(struct status_run *run, size_t i)
{
	struct engine_host *h = &run->rm->hosts[i];
	struct shost *s = &run->sh[i];
	char *cause = NULL;

	switch (h->fail) {
	case EF_NONE:
		break;
	case EF_RESOLVE:
	case EF_REFUSED:
	case EF_UNREACHABLE:
	case EF_CONNECT_TIMEOUT:
		s->state = "unreachable";
		goto failed;
	case EF_AUTH:
		s->state = "auth failed";
		goto failed;
	case EF_HOSTKEY_CHANGED:
	case EF_HOSTKEY_UNKNOWN:
		s->state = "host key changed";
		if (h->fail == EF_HOSTKEY_UNKNOWN)
			s->state = "host key unknown";
		goto failed;
	case EF_TIMEOUT:
		s->state = "agent error";
		xasprintf(&s->error, "the agent did not answer within %ds",
		    run->ctx->config->status_timeout);
		return;
	default:
		s->state = "error";
		goto failed;
	}
	if (h->exit_signal != NULL) {
		s->state = "agent error";
		xasprintf(&s->error, "the agent was killed by signal %s",
		    h->exit_signal);
		return;
	}
	if (h->exit_status != 0) {
		s->state = "agent error";
		s->error = deploy_explain(h->exit_status, s->err.data, h->in);
		return;
	}
	if (s->out.over) {
		s->state = "agent error";
		xasprintf(&s->error, "agent report is larger than %d bytes",
		    REPORT_MAX_BYTES);
		return;
	}
	if (report_parse(s->out.data != NULL ? s->out.data : "", s->out.len,
		run->now, &s->rep, &cause) != 0) {
		s->state = "agent error";
		s->error = cause;
		return;
	}
	s->have_report = 1;
	s->state = "up";
	return;
failed:
	s->error = xstrdup(h->fail_msg != NULL ? h->fail_msg : "failed");
}

/*
 * One refresh: run the agent everywhere; where it is missing, upload and
 * run it in a second pass over those hosts only.
 */
static int
run_once(struct status_run *run, int keep, char **cause)
{
	struct remote *rm = run->rm;
	struct engine_settings set;
	size_t i, nmissing = 0;
	char **cmds = xcalloc(rm->n + 1, sizeof *cmds);
	int r = 0;

	memset(&set, 0, sizeof set);
	set.fanout = run->ctx->config->fanout;
	set.connect_timeout = run->ctx->config->connect_timeout;
	set.setup_timeout = run->ctx->config->setup_timeout;
	set.command_timeout = run->ctx->config->status_timeout;
	set.handle_sigint = 1;
	set.keep_open = keep;
	for (i = 0; i < rm->n; i++) {
		struct shost *s = &run->sh[i];
		struct engine_host *h = &rm->hosts[i];
		free(s->out.data);
		free(s->err.data);
		memset(&s->out, 0, sizeof s->out);
		memset(&s->err, 0, sizeof s->err);
		free(s->error);
		s->error = NULL;
		if (s->have_report)
			report_free(&s->rep);
		s->have_report = 0;
		free(h->fail_msg);
		h->fail_msg = s->prefail != NULL ? xstrdup(s->prefail) : NULL;
		h->fail = s->prefail != NULL ? s->prefail_kind : EF_NONE;
		h->skip = 0;
		cmds[i] = deploy_run_command(h->in, &run->ab, run->args);
		h->command = cmds[i];
	}
	if (remote_run(rm, &set) != 0) {
		*cause = xstrdup("cannot start the event loop");
		r = -GF_EHOSTS;
		goto out;
	}
	for (i = 0; i < rm->n; i++) {
		if (rm->hosts[i].fail == EF_INTERRUPTED) {
			/* Ctrl-C: no upload pass, nothing stored. */
			r = -STATUS_INTERRUPTED;
			goto out;
		}
	}
	for (i = 0; i < rm->n; i++) {
		struct engine_host *h = &rm->hosts[i];
		h->skip = !(h->fail == EF_NONE &&
		    h->exit_status == DEPLOY_EXIT_MISSING);
		if (h->skip)
			continue;
		nmissing++;
		free(cmds[i]);
		cmds[i] = deploy_upload_command(h->in, &run->ab, run->args);
		h->command = cmds[i];
		free(run->sh[i].out.data);
		memset(&run->sh[i].out, 0, sizeof run->sh[i].out);
		free(run->sh[i].err.data);
		memset(&run->sh[i].err, 0, sizeof run->sh[i].err);
	}
	if (nmissing > 0) {
		debug_f("deploying the agent to %zu instance(s)", nmissing);
		set.stdin_data = run->ab.data;
		set.stdin_len = run->ab.len;
		if (remote_run(rm, &set) != 0) {
			*cause = xstrdup("cannot start the event loop");
			r = -GF_EHOSTS;
			goto out;
		}
		for (i = 0; i < rm->n; i++) {
			if (rm->hosts[i].fail == EF_INTERRUPTED) {
				r = -STATUS_INTERRUPTED;
				goto out;
			}
		}
	}
	run->now = (int64_t)time(NULL);
	for (i = 0; i < rm->n; i++) {
		rm->hosts[i].skip = 0;
		classify(run, i);
	}
out:
	for (i = 0; i < rm->n; i++) {
		rm->hosts[i].command = NULL;
		free(cmds[i]);
	}
	free(cmds);
	return r;
}

/* Store every report and the controller's view, in one transaction. */
static int
store(struct status_run *run, char **cause)
{
	struct inventory *inv = run->rm->inv;
	const struct config *cf = run->ctx->config;
	size_t i;
	int r;

	if ((r = inventory_begin(inv, cause)) != 0)
		return r;
	for (i = 0; i < run->rm->n; i++) {
		struct shost *s = &run->sh[i];
		int64_t id = run->rm->list[i].id;
		if (s->have_report &&
		    (r = samples_store(inv, id, run->now, &s->rep, cause)) != 0)
			goto fail;
		/* A key rotated out that a platform put back. */
		if (s->have_report && s->rep.authorized_keys != NULL &&
		    (r = keys_warn_reinjected(inv, &run->rm->list[i],
			 s->rep.authorized_keys, cause)) < 0)
			goto fail;
		/* The ledger: first sighting, restarts, outages. */
		if ((s->have_report || strcmp(s->state, "unreachable") == 0) &&
		    (r = ledger_observe(inv, id, run->now,
			 s->have_report ? s->rep.container_start : 0,
			 s->have_report, cause)) != 0)
			goto fail;
		if ((r = samples_last_status(inv, id, run->now, s->state,
			 s->error, s->have_report ? s->out.data : NULL,
			 cause)) != 0)
			goto fail;
	}
	if ((r = samples_rollup(inv, run->now, cf->status_raw_hours,
		 cf->status_agg_days, cause)) != 0)
		goto fail;
	return inventory_commit(inv, cause);
fail:
	inventory_rollback(inv);
	return r;
}

/* "2xA100-80G", or models joined with '+' when they differ. Caller frees. */
static char *
gpu_summary(const struct report *r)
{
	char *out = xstrdup(""), *tmp, **names;
	size_t i, j, count;

	if (r->ngpus == 0)
		return out;
	names = xcalloc(r->ngpus, sizeof *names);
	for (i = 0; i < r->ngpus; i++) {
		const char *n = r->gpus[i].name != NULL ? r->gpus[i].name : "?";
		char model[64];
		size_t k;
		if (strncmp(n, "NVIDIA ", 7) == 0)
			n += 7;
		if (strncmp(n, "GeForce ", 8) == 0)
			n += 8;
		if (strncmp(n, "Tesla ", 6) == 0)
			n += 6;
		k = strcspn(n, " -");
		if (k >= sizeof model)
			k = sizeof model - 1;
		memcpy(model, n, k);
		model[k] = '\0';
		if ((strcmp(model, "RTX") == 0 || strcmp(model, "GTX") == 0) &&
		    n[k] == ' ') {
			size_t k2 = strcspn(n + k + 1, " -");
			snprintf(model, sizeof model, "%.*s%.*s", (int)k, n,
			    (int)k2, n + k + 1);
		}
		if (!isnan(r->gpus[i].mem_total_mib))
			xasprintf(&names[i], "%s-%.0fG", model,
			    r->gpus[i].mem_total_mib / 1024.0);
		else
			names[i] = xstrdup(model);
	}
	for (i = 0; i < r->ngpus; i++) {
		if (names[i] == NULL)
			continue;
		for (count = 1, j = i + 1; j < r->ngpus; j++) {
			if (names[j] != NULL &&
			    strcmp(names[i], names[j]) == 0) {
				count++;
				free(names[j]);
				names[j] = NULL;
			}
		}
		xasprintf(
		    &tmp, "%s%s%zux%s", out, *out ? "+" : "", count, names[i]);
		free(out);
		out = tmp;
		free(names[i]);
	}
	free(names);
	return out;
}

/* Append to a growing string. */
static void cat(char **s, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void
cat(char **s, const char *fmt, ...)
{
	va_list ap;
	char *add, *tmp;

	va_start(ap, fmt);
	xvasprintf(&add, fmt, ap);
	va_end(ap);
	xasprintf(&tmp, "%s%s", *s != NULL ? *s : "", add);
	free(*s);
	free(add);
	*s = tmp;
}

static void
render_table(struct status_run *run)
{
	const struct config *cf = run->ctx->config;
	const char *hl = run->color ? "\033[33m" : "",
		   *stale_c = run->color ? "\033[31m" : "",
		   *off = run->color ? "\033[0m" : "";
	struct table *t;
	size_t i, j, k;

	t = table_new(12, "NAME", "STATE", "GPUS", "UTIL%", "MEM(GiB)", "TEMP",
	    "POWER", "PROCS", "SESS", "LOAD", "UP", "PROGRESS");
	/* Every remote string below goes through vis_str; the colours are
	   ours. */
	table_raw(t);
	for (i = 0; i < run->rm->n; i++) {
		struct shost *s = &run->sh[i];
		const struct report *r = &s->rep;
		char *gpus = NULL, *util = NULL, *mem = NULL, *temp = NULL;
		char *power = NULL, *procs = NULL, *load = NULL, *up = NULL;
		char *prog = NULL, *state = NULL, *sess, *safe, *text;
		char *name = vis_str(run->rm->list[i].name);
		double tmax = NAN, pw = 0, pl = 0;
		size_t nprocs = 0;

		if (!s->have_report) {
			safe = vis_str(s->error != NULL ? s->error : "");
			xasprintf(&state, "%s: %s", s->state, safe);
			table_add(t, name, state, NULL, NULL, NULL, NULL, NULL,
			    NULL, NULL, NULL, NULL, NULL);
			free(safe);
			free(state);
			free(name);
			continue;
		}
		text = gpu_summary(r);
		gpus = vis_str(text);
		free(text);
		for (j = 0; j < r->ngpus; j++) {
			const struct report_gpu *g = &r->gpus[j];
			int idle = !isnan(g->util_gpu) &&
			    g->util_gpu < cf->status_idle_util;
			if (isnan(g->util_gpu))
				cat(&util, "%s-", j ? "," : "");
			else
				cat(&util, "%s%s%.0f%s", j ? "," : "",
				    idle ? hl : "", g->util_gpu,
				    idle ? off : "");
			if (isnan(g->mem_used_mib))
				cat(&mem, "%s-", j ? "," : "");
			else
				cat(&mem, "%s%.0f", j ? "," : "",
				    g->mem_used_mib / 1024.0);
			if (!isnan(g->temp_c) &&
			    (isnan(tmax) || g->temp_c > tmax))
				tmax = g->temp_c;
			if (!isnan(g->power_w))
				pw += g->power_w;
			if (!isnan(g->power_limit_w))
				pl += g->power_limit_w;
			for (k = 0; k < g->nprocs; k++) {
				const char *pn = g->procs[k].name != NULL
				    ? g->procs[k].name
				    : "?";
				if (strrchr(pn, '/') != NULL)
					pn = strrchr(pn, '/') + 1;
				if (nprocs++ < 2) {
					safe = vis_str(pn);
					cat(&procs, "%s%s", procs ? "," : "",
					    safe);
					free(safe);
				}
			}
		}
		if (r->ngpus > 0 && !isnan(r->gpus[0].mem_total_mib))
			cat(&mem, "/%.0f", r->gpus[0].mem_total_mib / 1024.0);
		if (!isnan(tmax))
			xasprintf(&temp, "%.0fC", tmax);
		if (r->ngpus > 0)
			xasprintf(&power, "%.0f/%.0fW", pw, pl);
		if (nprocs > 2)
			cat(&procs, "+%zu", nprocs - 2);
		if (!isnan(r->load[0]))
			xasprintf(&load, "%.2f", r->load[0]);
		if (r->container_start != 0)
			up = timeparse_duration(r->time - r->container_start);
		if (r->has_progress) {
			int64_t age = r->time - r->progress_mtime;
			int stale =
			    age > (int64_t)cf->status_stale_minutes * 60;
			char *ago = timeparse_duration(age);
			size_t l = strcspn(r->progress_text, "\n");
			if (l > 40)
				l = 40;
			safe = vis_buf(r->progress_text, l);
			xasprintf(&prog, "%s%s (%s ago)%s",
			    stale ? stale_c : "", safe, ago, stale ? off : "");
			free(safe);
			free(ago);
		}
		if (r->ngpus == 0 && r->gpu_error != NULL) {
			free(gpus);
			safe = vis_str(r->gpu_error);
			xasprintf(&gpus, "(%s)", safe);
			free(safe);
		}
		xasprintf(&sess, "%d", r->sessions);
		table_add(t, name, s->state, gpus, util, mem, temp, power,
		    procs, sess, load, up, prog);
		free(name);
		free(sess);
		free(gpus);
		free(util);
		free(mem);
		free(temp);
		free(power);
		free(procs);
		free(load);
		free(up);
		free(prog);
	}
	table_print(t, stdout);
	table_free(t);
}

static void
render_json(struct status_run *run)
{
	json_t *arr = json_array(), *o, *rep;
	char *seen;
	size_t i;

	for (i = 0; i < run->rm->n; i++) {
		struct shost *s = &run->sh[i];
		o = json_object();
		json_object_set_new(
		    o, "name", json_string(run->rm->list[i].name));
		json_object_set_new(o, "state", json_string(s->state));
		json_object_set_new(o, "error",
		    s->error != NULL ? json_string(s->error) : json_null());
		seen = instance_format_time(run->now);
		json_object_set_new(o, "checked_at", json_string(seen));
		free(seen);
		rep = s->have_report
		    ? json_loadb(s->out.data, s->out.len, 0, NULL)
		    : NULL;
		json_object_set_new(
		    o, "report", rep != NULL ? rep : json_null());
		json_array_append_new(arr, o);
	}
	json_print(arr, stdout);
}

static void
on_sigint(int sig)
{
	(void)sig;
	stop_watch = 1;
}

static int
cmd_status_exec(
    const struct cmd_entry *e, struct cmd_ctx *ctx, int argc, char **argv)
{
	struct status_run run;
	const struct config *cf = ctx->config;
	char *cause = NULL, *end;
	long watch = 0, count = 0, n;
	int ch, status, json = 0, r, refreshes = 0;
	size_t i, nbad;

	while ((ch = cmd_getopt(
		    e, argc, argv, "w:n:h", status_options, &status)) != -1) {
		switch (ch) {
		case -2:
			return status;
		case OPT_JSON:
			json = 1;
			break;
		case 'w':
		case 'n':
			n = strtol(optarg, &end, 10);
			if (*optarg == '\0' || *end != '\0' || n < 1 ||
			    n > 86400)
				return cmd_usage_error(e,
				    "--%s '%s' is not a "
				    "number from 1 to 86400",
				    ch == 'w' ? "watch" : "count", optarg);
			*(ch == 'w' ? &watch : &count) = n;
			break;
		}
	}
	if (argc - optind > 1)
		return cmd_usage_error(e, "takes at most one SELECTOR");

	memset(&run, 0, sizeof run);
	run.ctx = ctx;
	run.color =
	    !json && isatty(STDOUT_FILENO) && getenv("NO_COLOR") == NULL;
	xasprintf(&run.args, "%s%s%s%s", cf->progress_file ? "--progress " : "",
	    cf->progress_file ? cf->progress_file : "",
	    cf->nvidia_smi ? " --nvidia-smi " : "",
	    cf->nvidia_smi ? cf->nvidia_smi : "");
	if (deploy_load(&run.ab, &cause) != 0) {
		free(run.args);
		return cmd_fail(GF_ECONFIG, cause);
	}
	if ((r = remote_open(ctx->fleet,
		 argc - optind == 1 ? argv[optind] : "all", &run.rm, &cause)) !=
	    0) {
		deploy_free(&run.ab);
		free(run.args);
		return cmd_fail(-r, cause);
	}
	run.sh = xcalloc(run.rm->n + 1, sizeof *run.sh);
	run.rm->ops.output = on_output;
	run.rm->ops.arg = &run;
	for (i = 0; i < run.rm->n; i++) {
		if (run.rm->hosts[i].fail != EF_NONE) {
			run.sh[i].prefail = xstrdup(run.rm->hosts[i].fail_msg);
			run.sh[i].prefail_kind = run.rm->hosts[i].fail;
		}
	}
	if (watch > 0)
		signal(SIGINT, on_sigint);

	for (;;) {
		r = run_once(&run, watch > 0, &cause);
		if (r == -STATUS_INTERRUPTED) {
			error("status: interrupted; nothing stored");
			status = STATUS_INTERRUPTED;
			break;
		}
		if (r != 0 || (r = store(&run, &cause)) != 0) {
			status = cmd_fail(-r, cause);
			break;
		}
		for (nbad = 0, i = 0; i < run.rm->n; i++)
			nbad += !run.sh[i].have_report;
		if (watch > 0 && isatty(STDOUT_FILENO) && !json)
			printf("\033[H\033[2J");
		if (watch > 0 && !json) {
			char *when = instance_format_time(run.now);
			printf(
			    "gpufleet status, every %lds, %s\n", watch, when);
			free(when);
		}
		if (json)
			render_json(&run);
		else
			render_table(&run);
		fflush(stdout);
		status = nbad == 0 ? GF_OK : GF_EHOSTS;
		refreshes++;
		if (watch == 0 || (count > 0 && refreshes >= count))
			break;
		for (n = 0; n < watch * 10 && !stop_watch; n++)
			usleep(100000);
		if (stop_watch)
			break;
		signal(SIGINT, on_sigint);
	}
	for (i = 0; i < run.rm->n; i++) {
		free(run.sh[i].out.data);
		free(run.sh[i].err.data);
		free(run.sh[i].error);
		free(run.sh[i].prefail);
		if (run.sh[i].have_report)
			report_free(&run.sh[i].rep);
	}
	free(run.sh);
	remote_close(run.rm);
	deploy_free(&run.ab);
	free(run.args);
	return status;
}

/* Writing the watcher's plan: read back, change, plan set --expect. */

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <event2/event.h>
#include <jansson.h>

#include "cmd.h"
#include "db.h"
#include "deploy.h"
#include "gpufleet/version.h"
#include "localstop.h"
#include "log.h"
#include "notify.h"
#include "armed.h"
#include "planwrite.h"
#include "status.h"
#include "vis.h"
#include "xmalloc.h"

#define PLAN_SET_EXIT_GENERATION 3
#define PLAN_SET_EXIT_INVALID	 4
#define PLAN_SET_EXIT_WRITE	 5
#define PLAN_SET_EXIT_WATCHER	 6
#define OUT_CAP			 4096
#define PLANWRITE_MAX		 65536 /* plan set reads at most this */

static void on_probe(struct probe *, int, void *);
static void on_output(struct engine_host *, int, const char *, size_t, void *);
static void read_back(struct planwrite_host *);
static int hosts_init(struct planwrite *, char **);
static void prepare(struct planwrite *, size_t);
static void notify_prepare(struct planwrite *, struct planwrite_host *);
static void result(struct planwrite *, size_t);
static int store_written(struct planwrite *, char **);

/* Fail one host with a reason (formatted); the first reason stays. */
void
planwrite_fail(struct planwrite_host *h, const char *fmt, ...)
{
	va_list ap;

	if (h->error != NULL)
		return;
	va_start(ap, fmt);
	xvasprintf(&h->error, fmt, ap);
	va_end(ap);
}

/* Each host of pw->rm, parallel to it, with its stop method resolved. */
static int
hosts_init(struct planwrite *pw, char **cause)
{
	const struct config *cf = pw->fleet->config;
	struct stopmethod_fields f;
	size_t i;
	int r;

	pw->n = pw->rm->n;
	pw->hosts = xcalloc(pw->n + 1, sizeof *pw->hosts);
	pw->cmds = xcalloc(pw->n + 1, sizeof *pw->cmds);
	for (i = 0; i < pw->n; i++) {
		struct planwrite_host *h = &pw->hosts[i];
		h->in = &pw->rm->list[i];
		h->probe = &pw->p->hosts[i];
		if ((r = inventory_stop_get(
			 pw->rm->inv, h->in->id, &f, cause)) != 0)
			return r;
		stopmethod_resolve(h->in, &f, cf, &h->method);
		stopmethod_fields_clear(&f);
		/* A local command is substituted when it runs: checked now. */
		if (h->method.where != STOP_NONE)
			h->stop_command = stopmethod_expand(
			    h->method.command, h->in, &h->method_error);
		if (h->method.where == STOP_LOCAL) {
			free(h->stop_command);
			h->stop_command = NULL;
		}
	}
	return 0;
}

/*
 * Select the instances of selector and their stop methods, for a probe
 * and a write. Free with planwrite_free.
 */
int
planwrite_open(struct fleet *fleet, const char *selector,
    struct planwrite **out, char **cause)
{
	struct planwrite *pw = xcalloc(1, sizeof *pw);
	int r;

	*out = NULL;
	pw->fleet = fleet;
	if ((r = watcher_knobs(&pw->knobs, cause)) != 0 ||
	    (r = probe_new(fleet->config, &pw->p, cause)) != 0 ||
	    (r = remote_open(fleet, selector, &pw->rm, cause)) != 0) {
		planwrite_free(pw);
		return r;
	}
	probe_attach(pw->p, pw->rm);
	if ((r = hosts_init(pw, cause)) != 0) {
		planwrite_free(pw);
		return r;
	}
	*out = pw;
	return 0;
}

/*
 * A planwrite over a remote and a probe someone else owns (the daemon's
 * held sessions, status's), after that probe's pass was stored: each
 * plan is read back from it. planwrite_free frees neither.
 */
int
planwrite_adopt(struct fleet *fleet, struct remote *rm, struct probe *p,
    struct planwrite **out, char **cause)
{
	struct planwrite *pw = xcalloc(1, sizeof *pw);
	size_t i;
	int r;

	*out = NULL;
	pw->fleet = fleet;
	pw->rm = rm;
	pw->p = p;
	pw->adopted = 1;
	pw->saved_ops = rm->ops;
	pw->now = p->now;
	if ((r = watcher_knobs(&pw->knobs, cause)) != 0 ||
	    (r = hosts_init(pw, cause)) != 0) {
		planwrite_free(pw);
		return r;
	}
	for (i = 0; i < pw->n; i++)
		read_back(&pw->hosts[i]);
	*out = pw;
	return 0;
}

static void
on_probe(struct probe *p, int r, void *arg)
{
	struct planwrite *pw = arg;

	(void)p;
	pw->probe_r = r;
	pw->probe_done = 1;
}

/* What the probe read of one host's watcher. */
static void
read_back(struct planwrite_host *h)
{
	const struct probe_host *s = h->probe;
	const struct report_watcher *w = &s->rep.watcher;

	if (!s->have_report) {
		planwrite_fail(h, "%s: %s", s->state,
		    s->error != NULL ? s->error : "no report");
		return;
	}
	h->skew = s->skew;
	if (!w->present) {
		planwrite_fail(h,
		    "the agent on the instance has no watcher "
		    "(an older agent)");
		return;
	}
	if (w->generation < 0) {
		planwrite_fail(h, "the watcher's plan cannot be read: %s",
		    w->error != NULL ? w->error : "bad generation");
		return;
	}
	h->reached = 1;
	h->expect = w->generation;
}

/*
 * The first pass: probe every instance (sessions kept for the write),
 * store what came (the journal with it), and read each plan back.
 * Returns 0, or the negated exit code with *cause.
 */
int
planwrite_probe(struct planwrite *pw, char **cause)
{
	size_t i;
	int r;

	if ((r = probe_start(pw->p, 1, on_probe, pw, cause)) != 0)
		return r;
	while (!pw->probe_done)
		event_base_loop(pw->fleet->base, EVLOOP_ONCE);
	if (pw->probe_r == -PROBE_INTERRUPTED) {
		*cause = xstrdup("interrupted; nothing stored");
		return -PROBE_INTERRUPTED;
	}
	if ((r = probe_store(pw->p, cause)) != 0)
		return r;
	pw->now = pw->p->now;
	localstop_run_due(pw->rm->inv, pw->fleet->config, pw->now);
	for (i = 0; i < pw->n; i++)
		read_back(&pw->hosts[i]);
	return 0;
}

/* Open and probe in one (the commands that only read back). */
int
planwrite_contact(struct fleet *fleet, const char *selector,
    struct planwrite **out, char **cause)
{
	int r;

	if ((r = planwrite_open(fleet, selector, out, cause)) != 0)
		return r;
	if ((r = planwrite_probe(*out, cause)) != 0) {
		planwrite_free(*out);
		*out = NULL;
	}
	return r;
}

/* Print each failed host's reason (escaped); returns how many failed. */
size_t
planwrite_print_errors(const struct planwrite *pw)
{
	size_t i, failed = 0;
	char *safe;

	for (i = 0; i < pw->n; i++) {
		if (pw->hosts[i].error == NULL)
			continue;
		safe = vis_str(pw->hosts[i].error);
		error("%s: %s", pw->hosts[i].in->name, safe);
		free(safe);
		failed++;
	}
	return failed;
}

/*
 * The change's common part for host h: its stop method, the knobs, and
 * the shutdown schedules' deadlines (the sync).
 */
void
planwrite_change(
    struct planwrite *pw, struct planwrite_host *h, struct plan_change *c)
{
	memset(c, 0, sizeof *c);
	c->instance = h->in->name;
	c->stop_command = h->stop_command;
	c->stop_kind = h->method.kind;
	c->allow_release = h->method.allow_release;
	c->check_interval_s = pw->knobs.check_interval_s;
	c->stop_confirm_s = pw->knobs.stop_confirm_s;
	c->written_by = "gpufleet " GPUFLEET_VERSION;
	c->now = pw->now;
	schedsync_fill(pw, h, c);
}

/*
 * Build host h's new plan from the one read back and change c, leaving
 * out what the journal shows fired. Returns 0, or -1 with h->error.
 */
int
planwrite_build(struct planwrite *pw, struct planwrite_host *h,
    const struct plan_change *c, struct plan_result *res)
{
	char **fired = NULL, *cause = NULL;
	size_t nfired = 0;
	int r;

	if ((r = watcher_fired_ids(
		 pw->rm->inv, h->in->id, &fired, &nfired, &cause)) == 0)
		r = plan_build(h->probe->rep.watcher.plan, h->expect,
		    (const char *const *)fired, nfired, c, &h->plan, res,
		    &cause);
	watcher_ids_free(fired, nfired);
	if (r != 0) {
		planwrite_fail(h, "%s", cause);
		free(cause);
		return -1;
	}
	if (strlen(h->plan) > PLANWRITE_MAX) {
		planwrite_fail(h,
		    "the plan would be larger than %d bytes (the most the "
		    "agent takes); cancel deadlines or shorten --before",
		    PLANWRITE_MAX);
		free(h->plan);
		h->plan = NULL;
		return -1;
	}
	return 0;
}

static void
on_output(struct engine_host *eh, int is_stderr, const char *data, size_t len,
    void *arg)
{
	struct planwrite *pw = arg;
	struct planwrite_host *h = &pw->hosts[eh - pw->rm->hosts];

	misc_buf_add(is_stderr ? &h->err : &h->out, data, len, OUT_CAP);
}

/* Give host i the plan set command and its plan, or leave it out. */
static void
prepare(struct planwrite *pw, size_t i)
{
	struct planwrite_host *h = &pw->hosts[i];
	struct engine_host *eh = &pw->rm->hosts[i];
	const struct agent_bin *ab = probe_agent(pw->p);
	char args[128], *s;

	notify_prepare(pw, h);
	eh->skip = (h->plan == NULL && h->notify == NULL) || h->error != NULL;
	if (eh->skip)
		return;
	free(eh->fail_msg);
	eh->fail_msg = NULL;
	eh->fail = EF_NONE;
	h->notify_only = h->plan == NULL;
	if (h->notify_only)
		snprintf(args, sizeof args, "notify set --dir \"$d\"");
	else if (h->notify != NULL)
		snprintf(args, sizeof args,
		    "plan set --dir \"$d\" --expect %lld --notify-bytes %zu",
		    (long long)h->expect, strlen(h->notify));
	else
		snprintf(args, sizeof args,
		    "plan set --dir \"$d\" --expect %lld",
		    (long long)h->expect);
	s = deploy_agent_command(h->in, ab, args, 0);
	pw->cmds[i] = deploy_sh_command(s);
	free(s);
	eh->command = pw->cmds[i];
	if (h->notify != NULL && h->plan != NULL)
		xasprintf(&h->input, "%s%s", h->notify, h->plan);
	else
		h->input = xstrdup(h->plan != NULL ? h->plan : h->notify);
	eh->stdin_data = h->input;
	eh->stdin_len = strlen(h->input);
}

/*
 * The D/notify.json h should have (notify_instance_doc) when it differs
 * from what its report says is there: h->notify, or NULL. No target
 * marked from_instances and no file there: nothing.
 */
static void
notify_prepare(struct planwrite *pw, struct planwrite_host *h)
{
	const struct report_watcher *w = &h->probe->rep.watcher;
	const struct config *cf = pw->fleet->config;
	char sha[65], *why = NULL;

	free(h->notify);
	h->notify = NULL;
	if (!h->reached || h->error != NULL)
		return;
	if (!notify_any_from_instances(cf) && !w->notify_present)
		return;
	h->notify = notify_instance_doc(cf, h->in->name, sha, &why);
	if (why != NULL) {
		warn_msg("%s: %s", h->in->name, why);
		free(why);
	}
	if (w->notify_present && strcmp(sha, w->notify_sha) == 0) {
		explicit_bzero(h->notify, strlen(h->notify));
		free(h->notify);
		h->notify = NULL;
	}
}

/*
 * Read plan set's answer for h: its exit status, stdout (the JSON line)
 * and stderr. Fills h->written, generation, watcher and pid, or
 * h->error. Returns -1 for an exit status that is not plan set's own
 * (the deploy wrapper's: the caller explains it).
 */
int
planwrite_answer(struct planwrite_host *h, int status, const char *out,
    size_t outlen, const char *err)
{
	json_t *o = NULL, *g, *w;
	char *line = xstrndup(
	    err != NULL ? err : "", err != NULL ? strcspn(err, "\n") : 0);
	int r = 0;

	if (out != NULL)
		o = json_loadb(out, outlen, JSON_DISABLE_EOF_CHECK, NULL);
	g = json_object_get(o, "generation");
	switch (status) {
	case 0:
	case PLAN_SET_EXIT_WATCHER:
		if (!json_is_integer(g)) {
			planwrite_fail(h, "plan set answered no generation");
			break;
		}
		h->written = 1;
		h->generation = json_integer_value(g);
		w = json_object_get(o, "watcher");
		snprintf(h->watcher, sizeof h->watcher, "%s",
		    json_is_string(w) ? json_string_value(w) : "unknown");
		g = json_object_get(o, "pid");
		h->pid = json_is_integer(g) ? json_integer_value(g) : 0;
		if (status == PLAN_SET_EXIT_WATCHER)
			planwrite_fail(h,
			    "the plan was written (generation %lld) but the "
			    "watcher did not start: %s",
			    (long long)h->generation, line);
		break;
	case PLAN_SET_EXIT_GENERATION:
		h->moved = 1;
		planwrite_fail(h,
		    "the plan changed on the instance since it was read "
		    "(generation %lld -> %lld: another gpufleet wrote it); "
		    "nothing changed, run it again",
		    (long long)h->expect,
		    json_is_integer(g) ? (long long)json_integer_value(g) : -1);
		break;
	case PLAN_SET_EXIT_INVALID:
		planwrite_fail(h, "the agent refused the plan: %s", line);
		break;
	case PLAN_SET_EXIT_WRITE:
		planwrite_fail(h, "the plan could not be written: %s", line);
		break;
	default:
		r = -1;
		break;
	}
	free(line);
	json_decref(o);
	return r;
}

/* Read host i's plan set result. */
static void
result(struct planwrite *pw, size_t i)
{
	struct planwrite_host *h = &pw->hosts[i];
	struct engine_host *eh = &pw->rm->hosts[i];

	if (eh->skip)
		return;
	if (h->notify_only) {
		/* Not the host's failure: the laptop sends what it would. */
		if (eh->fail != EF_NONE || eh->exit_status != 0)
			warn_msg("%s: notify.json not written: %s", h->in->name,
			    eh->fail != EF_NONE && eh->fail_msg != NULL
				? eh->fail_msg
				: h->err.data != NULL ? h->err.data
						      : "notify set failed");
		return;
	}
	if (eh->fail != EF_NONE) {
		planwrite_fail(
		    h, "%s", eh->fail_msg != NULL ? eh->fail_msg : "failed");
		return;
	}
	if (planwrite_answer(
		h, eh->exit_status, h->out.data, h->out.len, h->err.data) != 0)
		h->error = deploy_explain(eh->exit_status, h->err.data, h->in);
}

/* Keep what was written as the stored view; the user's alerts are seen. */
static int
store_written(struct planwrite *pw, char **cause)
{
	struct inventory *inv = pw->rm->inv;
	size_t i;
	int r;

	if ((r = inventory_begin(inv, cause)) != 0)
		return r;
	for (i = 0; i < pw->n; i++) {
		struct planwrite_host *h = &pw->hosts[i];
		json_t *o;
		char *plan;
		if (!h->written)
			continue;
		/* The stored plan carries the generation plan set gave it. */
		o = json_loads(h->plan, 0, NULL);
		json_object_set_new(
		    o, "generation", json_integer(h->generation));
		plan = json_dumps(o, JSON_COMPACT);
		json_decref(o);
		r = db_exec(inv,
		    "UPDATE watcher_state SET generation = ?, plan = ?, "
		    "state = ?, pid = ? WHERE instance_id = ?",
		    "storing the plan", cause, "IttNI", h->generation, plan,
		    h->watcher, h->pid, h->in->id);
		free(plan);
		if (r < 0 ||
		    (!h->notify_only &&
			(r = armed_plan(inv, h->in->id, h->plan, h->skew,
			     pw->now, 0, cause)) != 0) ||
		    (r = watcher_alerts_clear(
			 inv, h->in->id, pw->now, cause)) != 0) {
			inventory_rollback(inv);
			return r < 0 ? r : -GF_EDB;
		}
	}
	return inventory_commit(inv, cause);
}

/*
 * The second pass: plan set on every host with a new plan and no error,
 * over the sessions of the probe. Per-host failures go to h->error.
 */
int
planwrite_write(struct planwrite *pw, char **cause)
{
	struct engine_settings set;
	const struct config *cf = pw->fleet->config;
	size_t i, n = 0;

	for (i = 0; i < pw->n; i++) {
		struct planwrite_host *h = &pw->hosts[i];
		char *why = NULL;
		prepare(pw, i);
		n += !pw->rm->hosts[i].skip;
		/* Its ids are gpufleet's before the instance can use them. */
		if (!pw->rm->hosts[i].skip && h->plan != NULL &&
		    armed_plan(pw->rm->inv, h->in->id, h->plan, h->skew,
			pw->now, 1, &why) != 0) {
			planwrite_fail(h, "%s", why);
			pw->rm->hosts[i].skip = 1;
			n--;
		}
		free(why);
	}
	if (n == 0)
		return 0;
	memset(&set, 0, sizeof set);
	set.fanout = cf->fanout;
	set.handshake_window = cf->handshake_window;
	set.connect_timeout = cf->connect_timeout;
	set.setup_timeout = cf->setup_timeout;
	set.command_timeout = cf->status_timeout;
	set.keep_open = pw->keep_open;
	pw->rm->ops.output = on_output;
	pw->rm->ops.done = NULL;
	pw->rm->ops.arg = pw;
	if (remote_run(pw->rm, &set) != 0) {
		*cause = xstrdup("cannot start the event loop");
		return -GF_EHOSTS;
	}
	for (i = 0; i < pw->n; i++)
		result(pw, i);
	return store_written(pw, cause);
}

void
planwrite_free(struct planwrite *pw)
{
	size_t i;

	if (pw == NULL)
		return;
	for (i = 0; i < pw->n; i++) {
		struct planwrite_host *h = &pw->hosts[i];
		free(h->error);
		free(h->plan);
		free(h->stop_command);
		free(h->method_error);
		stopmethod_clear(&h->method);
		free(h->out.data);
		free(h->err.data);
		if (h->notify != NULL)
			explicit_bzero(h->notify, strlen(h->notify));
		free(h->notify);
		if (h->input != NULL)
			explicit_bzero(h->input, strlen(h->input));
		free(h->input);
		free(h->want);
		free(h->tags);
		free(h->sync_note);
		free(pw->cmds[i]);
		pw->rm->hosts[i].command = NULL;
		pw->rm->hosts[i].stdin_data = NULL;
	}
	free(pw->hosts);
	free(pw->cmds);
	schedsync_free(pw);
	if (pw->adopted) {
		pw->rm->ops = pw->saved_ops;
		free(pw);
		return;
	}
	probe_free(pw->p);
	remote_close(pw->rm);
	free(pw);
}

static const struct option ls_options[] = { { "json", no_argument, NULL, 'j' },
	{ "help", no_argument, NULL, 'h' }, { NULL, 0, NULL, 0 } };

/*
 * `ls [SELECTOR] [--json]` of e (shutdown, autostop): contact the
 * selected instances (journals stored, watchers restarted), then show
 * each from its stored view: show prints it, or with --json returns its
 * object for the array printed at the end. Returns the exit status.
 */
int
planwrite_ls(const struct cmd_entry *e, struct cmd_ctx *ctx, int argc,
    char **argv, planwrite_show_fn show)
{
	struct planwrite *pw = NULL;
	struct watcher_view v;
	char *cause = NULL;
	json_t *arr;
	int ch, status, json = 0, r;
	size_t i, failed = 0;

	while (
	    (ch = cmd_getopt(e, argc, argv, "h", ls_options, &status)) != -1) {
		if (ch == -2)
			return status;
		json = 1;
	}
	if (argc - optind > 1)
		return cmd_usage_error(e, "ls takes at most one SELECTOR");
	if ((r = planwrite_contact(ctx->fleet,
		 argc - optind == 1 ? argv[optind] : "all", &pw, &cause)) != 0)
		return cmd_fail(-r, cause);
	arr = json_array();
	for (i = 0; i < pw->n; i++) {
		struct planwrite_host *h = &pw->hosts[i];
		if (watcher_get(pw->rm->inv, h->in->id, &v, &cause) != 0) {
			free(cause);
			cause = NULL;
		}
		failed += !h->probe->have_report;
		if (json)
			json_array_append_new(arr, show(pw, h, &v, 1));
		else
			show(pw, h, &v, 0);
		watcher_view_free(&v);
	}
	if (json)
		json_print(arr, stdout);
	else
		json_decref(arr);
	planwrite_free(pw);
	return failed > 0 ? GF_EHOSTS : GF_OK;
}

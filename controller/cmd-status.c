/*
 * Live state of every instance in about a second: up or why not, what each
 * GPU is doing and who uses it, whether the job still makes progress, and
 * since when the instance has been running (and so billing). One round trip
 * per instance runs the agent (deploying it first where it is missing);
 * each report is stored for cost, idle detection and history. An instance
 * the ledger says is stopped is only knocked on (knock.c) unless asked for
 * (--all); one that answers is contacted.
 */

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>

#include "advise.h"
#include "cmd.h"
#include "knock.h"
#include "ledger.h"
#include "localstop.h"
#include "log.h"
#include "misc.h"
#include "planwrite.h"
#include "probe.h"
#include "remote.h"
#include "status.h"
#include "stophold.h"
#include "timeparse.h"
#include "vis.h"
#include "watcher.h"
#include "xmalloc.h"

/* A status command: its passes, its refresh timer and its Ctrl-C. */
struct status_cmd {
	struct probe *p;
	int json;
	int color;
	long watch; /* seconds between refreshes, 0: one pass */
	long count; /* with watch: refreshes, 0: until Ctrl-C */
	int refreshes;
	int status; /* the exit code so far */
	int busy;   /* a pass is in flight */
	int over;
	char *cause;  /* why it failed */
	int sync;     /* top up the schedules' deadlines after each pass */
	int sync_due; /* a pass is stored: top up, then wait for the next */
	unsigned char *asked;	/* rm->n: 0 for a stopped one not contacted */
	unsigned char *billing; /* rm->n: stopped, yet it answered */
	struct event *timer;
	struct event *sigint;
};

static int cmd_status_exec(
    const struct cmd_entry *, struct cmd_ctx *, int, char **);
static int stopped(const struct instance *);
static void knock_stopped(struct status_cmd *, struct remote *);
static void reload_states(struct status_cmd *);
static char *stopped_since(const struct instance *);
static void render_table(const struct status_cmd *);
static void render_json(const struct status_cmd *);
static void render(struct status_cmd *);
static void render_watchers(const struct probe *);
static char *gpu_model(const struct report_gpu *);
static char *gpu_summary(const struct report *);
static void start_pass(struct status_cmd *);
static void on_pass(struct probe *, int, void *);
static void on_timer(evutil_socket_t, short, void *);
static void on_sigint(evutil_socket_t, short, void *);
static void top_up(struct status_cmd *);
static void still_billing(struct status_cmd *);
static int pass_status(const struct status_cmd *);

const struct cmd_entry cmd_status_entry = {
	.name = "status",
	.usage = "[SELECTOR] [--all] [--json] [--watch SECS [--count N]]",
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
	    "report is stored (see history).\nAn instance the ledger says is "
	    "stopped (gpufleet ledger NAME) shows\n'stopped (since TIME)': it "
	    "is only knocked on (a connect and the SSH\nbanner, 3 s at most, "
	    "no login); one that answers was started outside\ngpufleet: it is "
	    "contacted and booked running. A stop gpufleet requested\nshows "
	    "'stopping (unconfirmed, since TIME)' and bills until the "
	    "instance\nis seen down; alerts (a stop that failed, a claim "
	    "gpufleet rejected) are\nlisted below the table.\nExit 0 when "
	    "every instance is up or stopped, 1 when one is not.\n\n"
	    "      --all         log in to stopped instances too\n"
	    "      --json        the full reports plus the controller's view "
	    "(state,\n                    error, ledger state), as one JSON "
	    "array\n"
	    "  -w, --watch SECS  refresh every SECS seconds, reusing the SSH "
	    "sessions\n"
	    "  -n, --count N     with --watch, stop after N refreshes\n\n"
	    "Examples:\n"
	    "  gpufleet status\n"
	    "  gpufleet status @train --watch 5\n"
	    "  gpufleet status state:stopped --all\n",
	.exec = cmd_status_exec,
};

enum { OPT_JSON = 256, OPT_ALL };

static const struct option status_options[] = { { "json", no_argument, NULL,
						    OPT_JSON },
	{ "all", no_argument, NULL, OPT_ALL },
	{ "watch", required_argument, NULL, 'w' },
	{ "count", required_argument, NULL, 'n' },
	{ "help", no_argument, NULL, 'h' }, { NULL, 0, NULL, 0 } };

/* "A100-80G" for "NVIDIA A100-SXM4-80GB" with 81920 MiB. Caller frees. */
static char *
gpu_model(const struct report_gpu *g)
{
	const char *n = g->name != NULL ? g->name : "?";
	char model[64], *out;
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
		snprintf(model, sizeof model, "%.*s%.*s", (int)k, n, (int)k2,
		    n + k + 1);
	}
	if (!isnan(g->mem_total_mib))
		xasprintf(&out, "%s-%.0fG", model, g->mem_total_mib / 1024.0);
	else
		out = xstrdup(model);
	return out;
}

/* "2xA100-80G", or models joined with '+' when they differ. Caller frees. */
static char *
gpu_summary(const struct report *r)
{
	char *out = xstrdup(""), *tmp, **names = NULL;
	size_t *count, n = 0, i;

	count = xcalloc(r->ngpus + 1, sizeof *count);
	for (i = 0; i < r->ngpus; i++)
		count[misc_names_add(&names, &n, gpu_model(&r->gpus[i]))]++;
	for (i = 0; i < n; i++) {
		xasprintf(&tmp, "%s%s%zux%s", out, *out ? "+" : "", count[i],
		    names[i]);
		free(out);
		out = tmp;
		free(names[i]);
	}
	free(names);
	free(count);
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

/* The columns of an instance that is up; every one may be NULL. */
struct row {
	char *gpus, *util, *mem, *temp, *power, *procs;
	char *sess, *load, *up, *prog;
};

/* The colours: idle GPUs, stale progress, back to normal. */
struct colours {
	const char *hl, *stale, *off;
};

/* GPUS, UTIL%, MEM, TEMP, POWER and PROCS of a report. */
static void
row_gpus(struct row *w, const struct report *r, const struct config *cf,
    const struct colours *c)
{
	double tmax = NAN, pw = 0, pl = 0;
	size_t j, k, nprocs = 0;
	char *text, *safe;

	text = gpu_summary(r);
	w->gpus = vis_str(text);
	free(text);
	for (j = 0; j < r->ngpus; j++) {
		const struct report_gpu *g = &r->gpus[j];
		int idle =
		    !isnan(g->util_gpu) && g->util_gpu < cf->status_idle_util;
		if (isnan(g->util_gpu))
			cat(&w->util, "%s-", j ? "," : "");
		else
			cat(&w->util, "%s%s%.0f%s", j ? "," : "",
			    idle ? c->hl : "", g->util_gpu, idle ? c->off : "");
		if (isnan(g->mem_used_mib))
			cat(&w->mem, "%s-", j ? "," : "");
		else
			cat(&w->mem, "%s%.0f", j ? "," : "",
			    g->mem_used_mib / 1024.0);
		if (!isnan(g->temp_c) && (isnan(tmax) || g->temp_c > tmax))
			tmax = g->temp_c;
		if (!isnan(g->power_w))
			pw += g->power_w;
		if (!isnan(g->power_limit_w))
			pl += g->power_limit_w;
		for (k = 0; k < g->nprocs; k++) {
			const char *pn =
			    g->procs[k].name != NULL ? g->procs[k].name : "?";
			if (strrchr(pn, '/') != NULL)
				pn = strrchr(pn, '/') + 1;
			if (nprocs++ < 2) {
				safe = vis_str(pn);
				cat(&w->procs, "%s%s", w->procs ? "," : "",
				    safe);
				free(safe);
			}
		}
	}
	if (r->ngpus > 0 && !isnan(r->gpus[0].mem_total_mib))
		cat(&w->mem, "/%.0f", r->gpus[0].mem_total_mib / 1024.0);
	if (!isnan(tmax))
		xasprintf(&w->temp, "%.0fC", tmax);
	if (r->ngpus > 0)
		xasprintf(&w->power, "%.0f/%.0fW", pw, pl);
	if (nprocs > 2)
		cat(&w->procs, "+%zu", nprocs - 2);
	if (r->ngpus == 0 && r->gpu_error != NULL) {
		free(w->gpus);
		safe = vis_str(r->gpu_error);
		xasprintf(&w->gpus, "(%s)", safe);
		free(safe);
	}
}

/* SESS, LOAD, UP and PROGRESS of a report. */
static void
row_host(struct row *w, const struct report *r, const struct config *cf,
    const struct colours *c)
{
	char *safe, *ago;
	int64_t age;
	size_t l;
	int stale;

	xasprintf(&w->sess, "%d", r->sessions);
	if (!isnan(r->load[0]))
		xasprintf(&w->load, "%.2f", r->load[0]);
	if (r->container_start != 0)
		w->up = timeparse_duration(r->time - r->container_start);
	if (!r->has_progress)
		return;
	age = r->time - r->progress_mtime;
	stale = age > (int64_t)cf->status_stale_minutes * 60;
	ago = timeparse_duration(age);
	l = strcspn(r->progress_text, "\n");
	if (l > 40)
		l = 40;
	safe = vis_buf(r->progress_text, l);
	xasprintf(&w->prog, "%s%s (%s ago)%s", stale ? c->stale : "", safe, ago,
	    stale ? c->off : "");
	free(safe);
	free(ago);
}

/* Whether the ledger's last word on in is stopped. */
static int
stopped(const struct instance *in)
{
	return strcmp(in->state, "stopped") == 0;
}

/* "stopped (since TIME)". Caller frees. */
static char *
stopped_since(const struct instance *in)
{
	char *when, *s;

	when = instance_format_time(in->state_since);
	xasprintf(&s, "stopped (since %s)", when);
	free(when);
	return s;
}

/*
 * The instances the books say are stopped are knocked on (knock.c); one
 * whose SSH server answers is contacted like the others, so the books see
 * it running again (started outside gpufleet).
 */
static void
knock_stopped(struct status_cmd *sc, struct remote *rm)
{
	unsigned char *want = xcalloc(rm->n + 1, 1);
	unsigned char *answered = xcalloc(rm->n + 1, 1);
	size_t i, n = 0;

	for (i = 0; i < rm->n; i++)
		n += want[i] = !sc->asked[i];
	if (n > 0 &&
	    knock_banners(rm->list, rm->n, want,
		sc->p->cf->connect_timeout * 1000, answered) > 0) {
		for (i = 0; i < rm->n; i++) {
			if (!answered[i])
				continue;
			sc->asked[i] = 1;
			warn_msg("%s is booked stopped but its SSH server "
				 "answers: contacting it",
			    rm->list[i].name);
		}
	}
	free(want);
	free(answered);
}

/* The table, every remote string made safe to print. */
static void
render_table(const struct status_cmd *sc)
{
	const struct probe *run = sc->p;
	struct colours c = { sc->color ? "\033[33m" : "",
		sc->color ? "\033[31m" : "", sc->color ? "\033[0m" : "" };
	struct table *t;
	struct row w;
	size_t i;
	char *since;

	t = table_new(12, "NAME", "STATE", "GPUS", "UTIL%", "MEM(GiB)", "TEMP",
	    "POWER", "PROCS", "SESS", "LOAD", "UP", "PROGRESS");
	/* Every remote string below goes through vis_str; the colours are
	   ours. */
	table_raw(t);
	for (i = 0; i < run->rm->n; i++) {
		const struct probe_host *s = &run->hosts[i];
		const struct instance *in = &run->rm->list[i];
		char *name = vis_str(in->name), *safe, *state;

		if (!sc->asked[i]) {
			state = stopped_since(in);
			table_add(t, name, state, NULL, NULL, NULL, NULL, NULL,
			    NULL, NULL, NULL, NULL, NULL);
			free(state);
			free(name);
			continue;
		}
		if (!s->have_report) {
			safe = vis_str(s->error != NULL ? s->error : "");
			since = stopped(in) ? stopped_since(in) : NULL;
			xasprintf(&state, "%s%s%s: %s",
			    since != NULL ? since : "",
			    since != NULL ? ", " : "", s->state, safe);
			free(since);
			table_add(t, name, state, NULL, NULL, NULL, NULL, NULL,
			    NULL, NULL, NULL, NULL, NULL);
			free(safe);
			free(state);
			free(name);
			continue;
		}
		memset(&w, 0, sizeof w);
		row_gpus(&w, &s->rep, run->cf, &c);
		row_host(&w, &s->rep, run->cf, &c);
		table_add(t, name, s->state, w.gpus, w.util, w.mem, w.temp,
		    w.power, w.procs, w.sess, w.load, w.up, w.prog);
		free(name);
		free(w.gpus);
		free(w.util);
		free(w.mem);
		free(w.temp);
		free(w.power);
		free(w.procs);
		free(w.sess);
		free(w.load);
		free(w.up);
		free(w.prog);
	}
	table_print(t, stdout);
	table_free(t);
	for (i = 0; i < run->rm->n; i++) {
		if (!sc->billing[i])
			continue;
		since = instance_format_time(run->rm->list[i].state_since);
		printf("%s  " INSTANCE_STILL_BILLING
		       " (the ledger says stopped since %s)\n",
		    run->rm->list[i].name, since);
		free(since);
	}
	render_watchers(run);
}

/*
 * Below the table, one line per instance whose watcher holds something
 * (running, started, down), its clock skew when over a minute, and its
 * alerts (a stop that did not stop it).
 */
static void
render_watchers(const struct probe *run)
{
	json_t *w, *d, *a;
	size_t i, j, armed;
	int64_t skew;
	const char *state, *when;

	for (i = 0; i < run->rm->n; i++) {
		const char *name = run->rm->list[i].name;
		w = probe_watcher_json(run, i);
		state = json_string_value(json_object_get(w, "state"));
		skew = json_integer_value(json_object_get(w, "skew_s"));
		armed = 0;
		json_array_foreach(json_object_get(w, "deadlines"), j, d)
		    armed += json_is_null(json_object_get(d, "fired_at")) &&
		    json_is_null(json_object_get(d, "skipped"));
		if (state != NULL &&
		    (strcmp(state, "running") == 0 ||
			strcmp(state, "started") == 0 ||
			strcmp(state, "down") == 0)) {
			const char *err =
			    json_string_value(json_object_get(w, "error"));
			char *safe = err != NULL ? vis_str(err) : NULL;
			printf("%s  watcher %s: %zu deadline%s armed%s%s%s\n",
			    name, state, armed, armed == 1 ? "" : "s",
			    json_is_object(json_object_get(w, "autostop"))
				? ", autostop on"
				: "",
			    safe != NULL ? "; " : "", safe != NULL ? safe : "");
			free(safe);
		}
		if (skew > WATCHER_SKEW_SHOWN || skew < -WATCHER_SKEW_SHOWN)
			printf("%s  clock skew %+llds (the instance's clock "
			       "against this one)\n",
			    name, (long long)skew);
		json_array_foreach(json_object_get(w, "alerts"), j, a)
		{
			const char *kind =
			    json_string_value(json_object_get(a, "kind"));
			when = json_string_value(json_object_get(a, "time"));
			printf("%s  ALERT %s %s at %s: %s (gpufleet events "
			       "%s)\n",
			    name, kind,
			    json_is_string(json_object_get(a, "id"))
				? json_string_value(json_object_get(a, "id"))
				: "-",
			    when,
			    strcmp(kind, "claim_rejected") == 0
				? "it claimed a stop gpufleet never armed; "
				  "the books are unchanged"
				: strcmp(kind, "journal_flood") == 0
				? "it floods its journal; entries past the "
				  "day's caps were dropped"
				: "the stop did not stop it; it still runs and "
				  "bills",
			    name);
		}
		json_array_foreach(json_object_get(w, "stopping"), j, a)
		{
			const char *detail =
			    json_string_value(json_object_get(a, "detail"));
			char *safe = detail != NULL ? vis_str(detail) : NULL;
			printf("%s  stopping (unconfirmed, since %s): stop %s "
			       "(%s), billed as running until it is seen "
			       "down%s%s\n",
			    name,
			    json_string_value(json_object_get(a, "since")),
			    json_string_value(json_object_get(a, "id")),
			    json_string_value(json_object_get(a, "cause")),
			    safe != NULL ? "; the stop command failed: " : "",
			    safe != NULL ? safe : "");
			free(safe);
		}
		json_array_foreach(json_object_get(w, "held"), j, a)
		{
			char *line = stophold_line(name, a),
			     *safe = vis_str(line);
			printf("%s  %s\n", name, safe);
			free(safe);
			free(line);
		}
		json_decref(w);
	}
}

/* The reports and the controller's view, as one JSON array (probe_json). */
static void
render_json(const struct status_cmd *sc)
{
	json_print(probe_json(sc->p, sc->asked, sc->billing), stdout);
}

/* One refresh on stdout: the header of --watch, then table or JSON. */
static void
render(struct status_cmd *sc)
{
	if (sc->watch > 0 && isatty(STDOUT_FILENO) && !sc->json)
		printf("\033[H\033[2J");
	if (sc->watch > 0 && !sc->json) {
		char *when = instance_format_time(sc->p->now);
		printf("gpufleet status, every %lds, %s\n", sc->watch, when);
		free(when);
	}
	if (sc->json)
		render_json(sc);
	else
		render_table(sc);
	fflush(stdout);
}

/* Start a pass; with --watch the sessions stay open for the next. */
static void
start_pass(struct status_cmd *sc)
{
	int r;

	if ((r = probe_start(sc->p, sc->watch > 0 || sc->sync, on_pass, sc,
		 &sc->cause)) != 0) {
		sc->status = -r;
		sc->over = 1;
		return;
	}
	sc->busy = 1;
}

/* A pass is over: store it, show it, and wait for the next if watching. */
static void
on_pass(struct probe *p, int r, void *arg)
{
	struct status_cmd *sc = arg;
	struct timeval tv;
	char *cause = NULL;

	sc->busy = 0;
	if (r == -PROBE_INTERRUPTED) {
		error("status: interrupted; nothing stored");
		sc->status = PROBE_INTERRUPTED;
		sc->over = 1;
		return;
	}
	if ((r = probe_store(p, &sc->cause)) != 0) {
		/* What was seen is shown all the same; the error says why
		   it was not kept (the disk full, the database locked). */
		render(sc);
		sc->status = -r;
		sc->over = 1;
		return;
	}
	reload_states(sc);
	localstop_run_due(p->rm->inv, p->cf, p->now);
	if (advise_notify_release(p->rm->inv, p->cf, p->now, &cause) != 0) {
		warn_msg("release deadlines: %s", cause);
		free(cause);
	}
	still_billing(sc);
	render(sc);
	sc->status = pass_status(sc);
	sc->refreshes++;
	if (sc->watch == 0 || (sc->count > 0 && sc->refreshes >= sc->count))
		sc->over = 1;
	if (sc->sync) {
		sc->sync_due = 1; /* status_loop, outside this callback */
		return;
	}
	if (sc->over)
		return;
	tv.tv_sec = sc->watch;
	tv.tv_usec = 0;
	evtimer_add(sc->timer, &tv);
}

/*
 * After a pass is stored: the books' word on the instances that gave no
 * report, as the pass left it (a stop it confirmed: stopped, not a
 * failure to reach).
 */
static void
reload_states(struct status_cmd *sc)
{
	struct remote *rm = sc->p->rm;
	struct instance in;
	char *cause = NULL;
	size_t i;

	for (i = 0; i < rm->n; i++) {
		if (!sc->asked[i] || sc->p->hosts[i].have_report)
			continue;
		if (inventory_get_id(rm->inv, rm->list[i].id, &in, &cause) !=
		    0) {
			free(cause);
			cause = NULL;
			continue;
		}
		memcpy(rm->list[i].state, in.state, sizeof in.state);
		rm->list[i].state_since = in.state_since;
		instance_clear(&in);
	}
}

/*
 * After a pass is stored: which instances the ledger (still: an
 * observation may have said running again) says are stopped though they
 * answered; for one not contacted, whether it answered the last pass
 * that did since it was stopped. What fails to read is logged and not
 * flagged.
 */
static void
still_billing(struct status_cmd *sc)
{
	struct remote *rm = sc->p->rm;
	struct ledger_event *ev;
	char *cause = NULL;
	size_t i, n;

	for (i = 0; i < rm->n; i++) {
		sc->billing[i] = 0;
		if (!sc->asked[i]) {
			/* As the last pass that asked left it. */
			sc->billing[i] = instance_still_billing(&rm->list[i]);
			continue;
		}
		if (!sc->p->hosts[i].have_report || !stopped(&rm->list[i]) ||
		    sc->p->now < rm->list[i].state_since)
			continue;
		if (ledger_events(rm->inv, rm->list[i].id, &ev, &n, &cause) !=
		    0) {
			warn_msg("%s: %s", rm->list[i].name, cause);
			free(cause);
			cause = NULL;
			continue;
		}
		sc->billing[i] =
		    n > 0 && strcmp(ev[n - 1].state, "stopped") == 0;
		free(ev);
	}
}

/*
 * The exit status of a pass: GF_EHOSTS when an instance asked about gave
 * no report, unless the ledger says it is stopped.
 */
static int
pass_status(const struct status_cmd *sc)
{
	const struct remote *rm = sc->p->rm;
	size_t i;

	for (i = 0; i < rm->n; i++) {
		if (sc->asked[i] && !sc->p->hosts[i].have_report &&
		    !stopped(&rm->list[i]))
			return GF_EHOSTS;
	}
	return GF_OK;
}

static void
on_timer(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	start_pass(arg);
}

/*
 * Ctrl-C: during a pass it is cancelled (exit 130, nothing stored);
 * between the refreshes of --watch it ends the watch.
 */
static void
on_sigint(evutil_socket_t fd, short what, void *arg)
{
	struct status_cmd *sc = arg;

	(void)fd;
	(void)what;
	if (sc->busy)
		probe_cancel(sc->p);
	else {
		evtimer_del(sc->timer);
		sc->over = 1;
	}
}

/*
 * After a pass is stored and shown: write the plans whose schedule
 * deadlines are not the wanted ones, over the pass's sessions (SCHEDULE.md,
 * "Top-up"); then wait for the next pass. What fails here is logged: the
 * output and the exit status are the pass's.
 */
static void
top_up(struct status_cmd *sc)
{
	struct timeval tv;

	sc->sync_due = 0;
	schedsync_topup(sc->p->rm, sc->p, !sc->over);
	if (sc->over)
		return;
	tv.tv_sec = sc->watch;
	tv.tv_usec = 0;
	evtimer_add(sc->timer, &tv);
}

/* Run the passes on the remote's loop until the last one is shown. */
static int
status_loop(struct status_cmd *sc, struct remote *rm)
{
	struct event_base *base;

	if (remote_engine(rm) == NULL)
		return cmd_fail(
		    GF_EHOSTS, xstrdup("cannot start the event loop"));
	base = rm->fleet->base;
	sc->timer = evtimer_new(base, on_timer, sc);
	sc->sigint = evsignal_new(base, SIGINT, on_sigint, sc);
	evsignal_add(sc->sigint, NULL);
	start_pass(sc);
	while (!sc->over || sc->sync_due) {
		if (sc->sync_due)
			top_up(sc);
		else
			event_base_loop(base, EVLOOP_ONCE);
	}
	event_free(sc->sigint);
	event_free(sc->timer);
	if (sc->cause != NULL)
		return cmd_fail(sc->status, sc->cause);
	return sc->status;
}

static int
cmd_status_exec(
    const struct cmd_entry *e, struct cmd_ctx *ctx, int argc, char **argv)
{
	struct status_cmd sc;
	struct remote *rm = NULL;
	char *cause = NULL, *end;
	size_t i;
	long n;
	int ch, status, r, all = 0;

	memset(&sc, 0, sizeof sc);
	while ((ch = cmd_getopt(
		    e, argc, argv, "w:n:h", status_options, &status)) != -1) {
		switch (ch) {
		case -2:
			return status;
		case OPT_JSON:
			sc.json = 1;
			break;
		case OPT_ALL:
			all = 1;
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
			*(ch == 'w' ? &sc.watch : &sc.count) = n;
			break;
		}
	}
	if (argc - optind > 1)
		return cmd_usage_error(e, "takes at most one SELECTOR");

	sc.color =
	    !sc.json && isatty(STDOUT_FILENO) && getenv("NO_COLOR") == NULL;
	if ((r = probe_new(ctx->fleet->config, &sc.p, &cause)) != 0)
		return cmd_fail(-r, cause);
	if ((r = remote_open(ctx->fleet,
		 argc - optind == 1 ? argv[optind] : "all", &rm, &cause)) !=
	    0) {
		probe_free(sc.p);
		return cmd_fail(-r, cause);
	}
	probe_attach(sc.p, rm);
	sc.asked = xmalloc(rm->n + 1);
	sc.billing = xcalloc(rm->n + 1, 1);
	for (i = 0; i < rm->n; i++)
		sc.asked[i] = all || !stopped(&rm->list[i]);
	knock_stopped(&sc, rm);
	probe_only(sc.p, sc.asked);
	sc.sync = schedsync_needed(rm->inv);
	status = status_loop(&sc, rm);
	probe_free(sc.p);
	remote_close(rm);
	free(sc.asked);
	free(sc.billing);
	return status;
}

/* Polling instances with the agent: two passes, classify, store. */

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <event2/event.h>

#include "keys.h"
#include "ledger.h"
#include "localstop.h"
#include "log.h"
#include "planwrite.h"
#include "probe.h"
#include "samples.h"
#include "status.h"
#include "watcher.h"
#include "xmalloc.h"

#define ERR_CAP 4096

static void buf_clear(struct misc_buf *);
static int64_t real_now_ms(void);
static int64_t host_skew(const struct probe *, size_t);
static void on_output(struct engine_host *, int, const char *, size_t, void *);
static void on_finished(struct engine_run *, void *);
static void reset(struct probe *);
static char *host_args(struct probe *, size_t);
static int included(const struct probe *, size_t);
static int interrupted(const struct probe *);
static size_t mark_missing(struct probe *);
static void classify(struct probe *, size_t);
static void pages_free(struct probe_host *);
static const struct report *last_page(const struct probe_host *);
static int page_next(struct probe *);
static void page_read(struct probe *, size_t);
static void finish(struct probe *, int);

static void
buf_clear(struct misc_buf *b)
{
	free(b->data);
	memset(b, 0, sizeof *b);
}

static void
on_output(struct engine_host *h, int is_stderr, const char *data, size_t len,
    void *arg)
{
	struct probe *p = arg;
	struct probe_host *s = &p->hosts[h - p->rm->hosts];

	if (is_stderr)
		misc_buf_add(&s->err, data, len, ERR_CAP);
	else if (p->paging)
		misc_buf_add(&s->page_out, data, len, REPORT_MAX_BYTES);
	else {
		if (s->out.len == 0 && len > 0) {
			s->out_real_ms = real_now_ms();
			s->out_mono_ms = engine_now_ms();
		}
		misc_buf_add(&s->out, data, len, REPORT_MAX_BYTES);
	}
}

/* The real clock in milliseconds (the skew compares it with the report). */
static int64_t
real_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/*
 * The clock skew (instance - controller, in seconds) of a report whose
 * time is rep_time: against the middle of the host's own round trip, from
 * sent_ms (the command's exec, monotonic) to out_ms (its first byte,
 * monotonic; out_real_ms the same instant on the real clock). The agent
 * takes its time at the start and prints at the end, so neither the other
 * hosts of the pass nor what the host does after printing count. The time
 * is truncated to the second: its middle, + 0.5 s, is compared, and the
 * skew rounded to the nearest second.
 */
int64_t
probe_skew(
    int64_t rep_time, int64_t sent_ms, int64_t out_ms, int64_t out_real_ms)
{
	int64_t mid = out_real_ms - (out_ms - sent_ms) / 2;
	int64_t d = rep_time * 1000 + 500 - mid;

	return d >= 0 ? (d + 500) / 1000 : -((-d + 500) / 1000);
}

/* Host i's clock skew (probe_skew), or against p->now when not timed. */
static int64_t
host_skew(const struct probe *p, size_t i)
{
	const struct engine_host *h = &p->rm->hosts[i];
	const struct probe_host *s = &p->hosts[i];
	int64_t sent = h->exec_ms > 0 ? h->exec_ms : h->start_ms;

	if (s->out_mono_ms <= 0 || sent <= 0 || sent > s->out_mono_ms)
		return s->rep.time - p->now;
	return probe_skew(s->rep.time, sent, s->out_mono_ms, s->out_real_ms);
}

/*
 * A poll for the instances of a remote attached later: loads the agent.
 * Free with probe_free.
 */
int
probe_new(const struct config *cf, struct probe **pp, char **cause)
{
	struct probe *p = xcalloc(1, sizeof *p);

	*pp = NULL;
	p->cf = cf;
	if (deploy_load(&p->ab, cause) != 0) {
		free(p);
		return -GF_ECONFIG;
	}
	xasprintf(&p->args, "%s%s%s%s", cf->progress_file ? "--progress " : "",
	    cf->progress_file ? cf->progress_file : "",
	    cf->nvidia_smi ? " --nvidia-smi " : "",
	    cf->nvidia_smi ? cf->nvidia_smi : "");
	*pp = p;
	return 0;
}

/*
 * Poll the instances of rm (which must outlive the poll), remembering
 * which failed before any run could start.
 */
void
probe_attach(struct probe *p, struct remote *rm)
{
	size_t i;

	p->rm = rm;
	p->hosts = xcalloc(rm->n + 1, sizeof *p->hosts);
	p->cmds = xcalloc(rm->n + 1, sizeof *p->cmds);
	p->runners = xcalloc(rm->n + 1, sizeof *p->runners);
	p->ops = rm->ops;
	p->ops.output = on_output;
	p->ops.finished = on_finished;
	p->ops.arg = p;
	for (i = 0; i < rm->n; i++) {
		if (rm->hosts[i].fail != EF_NONE) {
			p->hosts[i].prefail = xstrdup(rm->hosts[i].fail_msg);
			p->hosts[i].prefail_kind = rm->hosts[i].fail;
		}
	}
}

/*
 * The agent's arguments for host i: the poll's, plus the journal cursor
 * (the entries after the last one stored) and --ensure-watcher, so a
 * watcher a container restart killed comes back. Caller frees.
 */
static char *
host_args(struct probe *p, size_t i)
{
	const struct report *last = last_page(&p->hosts[i]);
	char *cursor = NULL, *cause = NULL, *s;

	if (p->paging) /* after the last page read */
		xasprintf(&cursor, "%s:%lld", last->watcher.epoch,
		    (long long)last->watcher.journal[last->watcher.njournal - 1]
			.seq);
	else if (watcher_cursor(
		     p->rm->inv, p->rm->list[i].id, &cursor, &cause) != 0) {
		warn_msg("%s", cause);
		free(cause);
		cursor = xstrdup("-");
	}
	xasprintf(
	    &s, "%s --journal-after %s --ensure-watcher", p->args, cursor);
	free(cursor);
	return s;
}

/*
 * Poll only the hosts whose flag in only (rm->n of them) is 1; the others
 * keep what their last run left (another command's results) and nothing
 * of them is classified or stored. NULL: every host again.
 */
void
probe_only(struct probe *p, const unsigned char *only)
{
	free(p->only);
	p->only = NULL;
	if (only != NULL) {
		p->only = xmalloc(p->rm->n + 1);
		memcpy(p->only, only, p->rm->n);
	}
}

/* Whether host i is in the pass. */
static int
included(const struct probe *p, size_t i)
{
	return p->only == NULL || p->only[i];
}

/* Forget the last pass's results and give every host the run command. */
static void
reset(struct probe *p)
{
	struct remote *rm = p->rm;
	size_t i;

	for (i = 0; i < rm->n; i++) {
		struct probe_host *s = &p->hosts[i];
		struct engine_host *h = &rm->hosts[i];
		buf_clear(&s->out);
		buf_clear(&s->err);
		free(s->error);
		s->error = NULL;
		if (s->have_report)
			report_free(&s->rep);
		s->have_report = 0;
		s->state = NULL;
		pages_free(s);
		if (!included(p, i)) {
			h->skip = 1;
			continue;
		}
		free(h->fail_msg);
		h->fail_msg = s->prefail != NULL ? xstrdup(s->prefail) : NULL;
		h->fail = s->prefail != NULL ? s->prefail_kind : EF_NONE;
		h->skip = 0;
		free(p->cmds[i]);
		free(s->args);
		s->args = host_args(p, i);
		p->cmds[i] = deploy_run_command(h->in, &p->ab, s->args);
		h->command = p->cmds[i];
		/*
		 * Held sessions (the daemon's) run the report through their
		 * command runner, started by the first pass: no session
		 * process per poll, and the runner marks the session as
		 * gpufleet's for the agent's count of logins.
		 */
		if (p->set.use_runner && p->runners[i] == NULL)
			p->runners[i] = deploy_serve_command(h->in, &p->ab);
		h->runner = p->runners[i];
	}
}

/*
 * Start one pass over every attached instance on the remote's loop: run
 * the agent; where it is missing, upload and run it in a second run over
 * those only. done(p, r, arg) comes from the loop when the pass is
 * over: r is 0 (results in p->hosts) or -PROBE_INTERRUPTED (probe_cancel:
 * nothing to store). With keep_open the sessions stay
 * open for the next pass. Returns 0, or -GF_EHOSTS with *cause.
 */
int
probe_start(
    struct probe *p, int keep_open, probe_done_cb done, void *arg, char **cause)
{
	struct engine *e;

	if (p->run != NULL)
		fatal_f("a pass is in flight");
	if ((e = remote_engine(p->rm)) == NULL) {
		*cause = xstrdup("cannot start the event loop");
		return -GF_EHOSTS;
	}
	memset(&p->set, 0, sizeof p->set);
	p->set.fanout = p->cf->fanout;
	p->set.handshake_window = p->cf->handshake_window;
	p->set.connect_timeout = p->cf->connect_timeout;
	p->set.setup_timeout = p->cf->setup_timeout;
	p->set.command_timeout = p->cf->status_timeout;
	p->set.keep_open = keep_open;
	p->set.use_runner = keep_open && p->use_runner;
	p->set.backoff = p->backoff;
	p->done = done;
	p->arg = arg;
	p->upload = 0;
	p->paging = 0;
	reset(p);
	p->run = engine_start(e, p->rm->hosts, p->rm->n, &p->set, &p->ops);
	return 0;
}

/* Cancel the pass in flight, if any; its done still comes. */
void
probe_cancel(struct probe *p)
{
	if (p->run != NULL)
		engine_cancel(p->run);
}

static int
interrupted(const struct probe *p)
{
	size_t i;

	for (i = 0; i < p->rm->n; i++) {
		if (p->rm->hosts[i].fail == EF_INTERRUPTED)
			return 1;
	}
	return 0;
}

/* Leave in the run only the hosts the agent is missing on. */
static size_t
mark_missing(struct probe *p)
{
	struct remote *rm = p->rm;
	size_t i, n = 0;

	for (i = 0; i < rm->n; i++) {
		struct engine_host *h = &rm->hosts[i];
		h->skip = !(included(p, i) && h->fail == EF_NONE &&
		    h->exit_status == DEPLOY_EXIT_MISSING);
		if (h->skip)
			continue;
		n++;
		free(p->cmds[i]);
		p->cmds[i] =
		    deploy_upload_command(h->in, &p->ab, p->hosts[i].args);
		h->command = p->cmds[i];
		buf_clear(&p->hosts[i].out);
		buf_clear(&p->hosts[i].err);
	}
	return n;
}

/* One run of the pass is over: upload where missing, or classify. */
static void
on_finished(struct engine_run *run, void *arg)
{
	struct probe *p = arg;
	size_t i, nmissing;

	(void)run;
	p->run = NULL;
	remote_run_done(p->rm);
	if (interrupted(p)) {
		/* Ctrl-C: no upload pass, nothing stored. */
		finish(p, -PROBE_INTERRUPTED);
		return;
	}
	if (p->paging) {
		for (i = 0; i < p->rm->n; i++)
			page_read(p, i);
		if (page_next(p))
			return;
		finish(p, 0);
		return;
	}
	if (!p->upload && (nmissing = mark_missing(p)) > 0) {
		debug_f("deploying the agent to %zu instance(s)", nmissing);
		p->upload = 1;
		p->set.stdin_data = p->ab.data;
		p->set.stdin_len = p->ab.len;
		p->run = engine_start(remote_engine(p->rm), p->rm->hosts,
		    p->rm->n, &p->set, &p->ops);
		return;
	}
	p->now = (int64_t)time(NULL);
	for (i = 0; i < p->rm->n; i++) {
		if (!included(p, i))
			continue;
		p->rm->hosts[i].skip = 0;
		classify(p, i);
	}
	if (page_next(p))
		return;
	finish(p, 0);
}

/* Free host s's journal pages. */
static void
pages_free(struct probe_host *s)
{
	size_t k;

	for (k = 0; k < s->npages; k++)
		report_free(&s->pages[k]);
	free(s->pages);
	s->pages = NULL;
	s->npages = 0;
	s->paging = 0;
	s->page_bytes = 0;
	buf_clear(&s->page_out);
}

/* The last report host s gave: its last page, or its report. */
static const struct report *
last_page(const struct probe_host *s)
{
	return s->npages > 0 ? &s->pages[s->npages - 1] : &s->rep;
}

/*
 * Ask again the hosts whose last report has a full journal page
 * (journal_more), for the next, to the bounds of PROBE_JOURNAL_*: 1 when
 * that round is started, 0 when none is left to ask.
 */
static int
page_next(struct probe *p)
{
	struct remote *rm = p->rm;
	const struct report *last;
	size_t i, n = 0;
	int late;

	if (!p->paging)
		p->paging_since = engine_now_ms();
	late = engine_now_ms() - p->paging_since > PROBE_JOURNAL_MS;
	for (i = 0; i < rm->n; i++) {
		struct probe_host *s = &p->hosts[i];

		last = last_page(s);
		s->paging = !late && included(p, i) && s->have_report &&
		    s->page_bytes < PROBE_JOURNAL_BYTES &&
		    last->watcher.journal_more && last->watcher.njournal > 0 &&
		    last->watcher.epoch[0] != '\0' &&
		    s->npages + 1 < PROBE_JOURNAL_PAGES;
		n += s->paging;
	}
	for (i = 0; i < rm->n; i++) {
		struct probe_host *s = &p->hosts[i];
		struct engine_host *h = &rm->hosts[i];

		/* As the pass leaves them when no page is asked for. */
		h->skip = n > 0 ? !s->paging : !included(p, i);
		if (n == 0 || !s->paging)
			continue;
		p->paging = 1;
		free(p->cmds[i]);
		free(s->args);
		s->args = host_args(p, i);
		p->cmds[i] = deploy_run_command(h->in, &p->ab, s->args);
		h->command = p->cmds[i];
		buf_clear(&s->page_out);
	}
	if (n == 0)
		return 0;
	p->paging = 1;
	p->set.stdin_data = NULL;
	p->set.stdin_len = 0;
	p->run =
	    engine_start(remote_engine(rm), rm->hosts, rm->n, &p->set, &p->ops);
	return 1;
}

/*
 * Keep the page host i's round of pages brought, if it brought one; a
 * host that failed it is asked no more, and keeps its report's outcome.
 */
static void
page_read(struct probe *p, size_t i)
{
	struct probe_host *s = &p->hosts[i];
	struct engine_host *h = &p->rm->hosts[i];
	struct report page;
	char *cause = NULL;

	if (!s->paging)
		return;
	if (h->fail == EF_NONE && h->exit_signal == NULL &&
	    h->exit_status == 0 && !s->page_out.truncated &&
	    report_parse(s->page_out.data != NULL ? s->page_out.data : "",
		s->page_out.len, p->now, &page, &cause) == 0) {
		s->pages =
		    xreallocarray(s->pages, s->npages + 1, sizeof *s->pages);
		s->pages[s->npages++] = page;
		s->page_bytes += s->page_out.len;
	} else {
		debug_f("%s: the journal's next page: %s", p->rm->list[i].name,
		    cause != NULL
			? cause
			: (h->fail_msg != NULL ? h->fail_msg : "no report"));
		s->paging = 0;
		/* The host answered its report: that is its outcome. */
		h->fail = EF_NONE;
		free(h->fail_msg);
		h->fail_msg = NULL;
		free(h->exit_signal);
		h->exit_signal = NULL;
		h->exit_status = 0;
	}
	free(cause);
	buf_clear(&s->page_out);
}

/* The pass is over: drop its commands and tell the caller. */
static void
finish(struct probe *p, int r)
{
	size_t i;

	for (i = 0; i < p->rm->n; i++) {
		p->rm->hosts[i].command = NULL;
		p->rm->hosts[i].runner = NULL;
		free(p->cmds[i]);
		p->cmds[i] = NULL;
	}
	p->done(p, r, p->arg);
}

/* Decide one host's state from its run. */
static void
classify(struct probe *p, size_t i)
{
	struct engine_host *h = &p->rm->hosts[i];
	struct probe_host *s = &p->hosts[i];
	char *cause = NULL;

	switch (h->fail) {
	case EF_NONE:
		break;
	case EF_RESOLVE:
	case EF_REFUSED:
	case EF_UNREACHABLE:
	case EF_CONNECT_TIMEOUT:
	case EF_BACKOFF: /* not tried: it failed to connect lately */
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
		    p->cf->status_timeout);
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
	if (s->out.truncated) {
		s->state = "agent error";
		xasprintf(&s->error, "agent report is larger than %d bytes",
		    REPORT_MAX_BYTES);
		return;
	}
	if (report_parse(s->out.data != NULL ? s->out.data : "", s->out.len,
		p->now, &s->rep, &cause) != 0) {
		s->state = "agent error";
		s->error = cause;
		return;
	}
	s->have_report = 1;
	s->skew = host_skew(p, i);
	s->state = "up";
	return;
failed:
	s->error = xstrdup(h->fail_msg != NULL ? h->fail_msg : "failed");
}

/*
 * Store the last pass, in one transaction: every report, the controller's
 * view, keys a platform put back, and the ledger's sightings and outages.
 */
int
probe_store(struct probe *p, char **cause)
{
	struct inventory *inv = p->rm->inv;
	const struct config *cf = p->cf;
	size_t i, j;
	int r;

	if ((r = inventory_begin(inv, cause)) != 0)
		return r;
	if ((r = ledger_clock(inv, p->now, cause)) != 0)
		goto fail;
	for (i = 0; i < p->rm->n; i++) {
		struct probe_host *s = &p->hosts[i];
		int64_t id = p->rm->list[i].id;
		if (!included(p, i))
			continue;
		if (s->have_report &&
		    (r = samples_store(inv, id, p->now, &s->rep, cause)) != 0)
			goto fail;
		/* The watcher: its plan, its journal and what it did. */
		if (s->have_report &&
		    (r = watcher_store(inv, &p->rm->list[i], p->now, s->skew,
			 &s->rep, cause)) != 0)
			goto fail;
		for (j = 0; s->have_report && j < s->npages; j++)
			if ((r = watcher_store(inv, &p->rm->list[i], p->now,
				 s->skew, &s->pages[j], cause)) != 0)
				goto fail;
		/* Progress stale while the instance answers. */
		if (s->have_report &&
		    (r = samples_notify_stalled(inv, &p->rm->list[i], p->now,
			 &s->rep, (int64_t)cf->status_stale_minutes * 60,
			 cause)) != 0)
			goto fail;
		/* A key rotated out that a platform put back. */
		if (s->have_report && s->rep.authorized_keys != NULL &&
		    (r = keys_warn_reinjected(inv, &p->rm->list[i],
			 s->rep.authorized_keys, cause)) < 0)
			goto fail;
		/* The ledger: first sighting, restarts, outages. */
		if ((s->have_report || strcmp(s->state, "unreachable") == 0) &&
		    (r = ledger_observe(inv, &p->rm->list[i], p->now,
			 s->have_report ? s->rep.container_start : 0, s->skew,
			 s->have_report, cause)) != 0)
			goto fail;
		if ((r = samples_last_status(inv, id, p->now, s->state,
			 s->error, s->have_report ? s->out.data : NULL,
			 cause)) != 0)
			goto fail;
	}
	if ((r = samples_rollup(inv, p->now, cf->status_raw_hours,
		 cf->status_agg_days, cause)) != 0)
		goto fail;
	if ((r = watcher_prune(inv,
		 p->now - (int64_t)cf->status_journal_days * 86400, cause)) !=
	    0)
		goto fail;
	return inventory_commit(inv, cause);
fail:
	inventory_rollback(inv);
	return r;
}

/* The agent binary the poll deploys (for other commands of the agent). */
const struct agent_bin *
probe_agent(const struct probe *p)
{
	return &p->ab;
}

/* How many instances gave no report in the last pass. */
size_t
probe_failed(const struct probe *p)
{
	size_t i, n = 0;

	for (i = 0; p->rm != NULL && i < p->rm->n; i++)
		n += included(p, i) && !p->hosts[i].have_report;
	return n;
}

/* Free a poll (not its remote); no pass may be in flight. */
void
probe_free(struct probe *p)
{
	size_t i;

	if (p == NULL)
		return;
	for (i = 0; p->rm != NULL && i < p->rm->n; i++) {
		struct probe_host *s = &p->hosts[i];
		buf_clear(&s->out);
		buf_clear(&s->err);
		free(s->error);
		free(s->args);
		free(s->prefail);
		if (s->have_report)
			report_free(&s->rep);
		pages_free(s);
		free(p->cmds[i]);
		free(p->runners[i]);
	}
	free(p->hosts);
	free(p->cmds);
	free(p->runners);
	free(p->only);
	deploy_free(&p->ab);
	free(p->args);
	free(p);
}

/* probe_journals' pass is over. */
static void
journals_done(struct probe *p, int r, void *arg)
{
	int *done = arg;

	(void)p;
	*done = r == 0 ? 1 : -1;
}

/*
 * After another command (exec) on rm's held sessions: poll the instances
 * that command reached and whose watcher gpufleet knows (a plan was
 * stored), so their journals are read on every contact; store it and run
 * local stops that came due. While shutdown schedules exist every reached
 * instance is polled and the schedules topped up (a selector is evaluated
 * again on every contact); plans armed with a stop method changed since
 * get the new one. Prints nothing; a failure is only logged.
 */
void
probe_journals(struct remote *rm, const struct config *cf)
{
	struct probe *p = NULL;
	unsigned char *only = xcalloc(rm->n + 1, 1);
	char *cause = NULL;
	size_t i, n = 0;
	int done = 0, topup = schedsync_needed(rm->inv);
	int all = topup && schedsync_scheduled(rm->inv);

	watcher_planned(rm->inv, rm->list, rm->n, only);
	for (i = 0; i < rm->n; i++) {
		only[i] = rm->hosts[i].fail == EF_NONE && (only[i] || all);
		n += only[i];
	}
	if (n == 0 || probe_new(cf, &p, &cause) != 0)
		goto out;
	probe_attach(p, rm);
	probe_only(p, only);
	if (probe_start(p, topup, journals_done, &done, &cause) != 0)
		goto out;
	while (done == 0)
		event_base_loop(rm->fleet->base, EVLOOP_ONCE);
	if (done == 1 && probe_store(p, &cause) == 0) {
		localstop_run_due(rm->inv, cf, p->now);
		if (topup)
			schedsync_topup(rm, p, 0);
	}
out:
	if (cause != NULL)
		error_f("reading the watchers' journals: %s", cause);
	free(cause);
	probe_free(p);
	free(only);
}

/* The stored watcher of instance i, as JSON (watcher_json). Caller frees. */
json_t *
probe_watcher_json(const struct probe *p, size_t i)
{
	struct watcher_view v;
	char *cause = NULL;
	json_t *o;

	if (watcher_get(p->rm->inv, p->rm->list[i].id, &v, &cause) != 0) {
		free(cause);
		return json_null();
	}
	o = watcher_json(p->rm->inv, p->rm->list[i].id, &v);
	watcher_view_free(&v);
	return o;
}

/*
 * What status judges of a report with the configuration's thresholds, so
 * that a reader of --json (the dashboard) marks the same: the GPUs under
 * [status] idle_util_percent and whether the progress line is older than
 * [status] stale_progress_minutes (null without one).
 */
static json_t *
probe_flags_json(const struct probe *p, const struct probe_host *s)
{
	const struct report *r = &s->rep;
	json_t *o = json_object(), *idle = json_array();
	size_t j;

	for (j = 0; s->have_report && j < r->ngpus; j++) {
		if (!isnan(r->gpus[j].util_gpu) &&
		    r->gpus[j].util_gpu < p->cf->status_idle_util)
			json_array_append_new(
			    idle, json_integer(r->gpus[j].index));
	}
	json_object_set_new(o, "idle_gpus", idle);
	json_object_set_new(o, "progress_stale",
	    s->have_report && r->has_progress
		? json_boolean(r->time - r->progress_mtime >
		      (int64_t)p->cf->status_stale_minutes * 60)
		: json_null());
	json_object_set_new(
	    o, "idle_util_percent", json_integer(p->cf->status_idle_util));
	json_object_set_new(o, "stale_progress_minutes",
	    json_integer(p->cf->status_stale_minutes));
	return o;
}

/*
 * The last pass's reports and the controller's view, as one JSON array:
 * the document of `status --json`. asked[i] 0: instance i was not
 * contacted (stopped: state "stopped", no checked_at, no report);
 * billing[i]: stopped, yet it answered. Caller frees.
 */
json_t *
probe_json(const struct probe *p, const unsigned char *asked,
    const unsigned char *billing)
{
	json_t *arr = json_array(), *o, *rep;
	char *seen;
	size_t i;

	for (i = 0; i < p->rm->n; i++) {
		const struct probe_host *s = &p->hosts[i];
		const struct instance *in = &p->rm->list[i];
		o = json_object();
		json_object_set_new(o, "name", json_string(in->name));
		json_object_set_new(
		    o, "state", json_string(asked[i] ? s->state : "stopped"));
		json_object_set_new(o, "error",
		    s->error != NULL ? json_string(s->error) : json_null());
		seen = instance_format_time(p->now);
		json_object_set_new(o, "checked_at",
		    asked[i] ? json_string(seen) : json_null());
		free(seen);
		json_object_set_new(
		    o, "ledger_state", json_string(instance_state(in)));
		seen = instance_format_time(in->state_since);
		json_object_set_new(o, "ledger_since",
		    in->state_since != 0 ? json_string(seen) : json_null());
		free(seen);
		json_object_set_new(
		    o, "still_billing", json_boolean(billing[i]));
		rep = s->have_report
		    ? json_loadb(s->out.data, s->out.len, 0, NULL)
		    : NULL;
		json_object_set_new(
		    o, "report", rep != NULL ? rep : json_null());
		json_object_set_new(o, "watcher", probe_watcher_json(p, i));
		json_object_set_new(o, "flags", probe_flags_json(p, s));
		json_array_append_new(arr, o);
	}
	return arr;
}

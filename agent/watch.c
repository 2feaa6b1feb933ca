/*
 * The watcher's loop (agent/WATCH.md): it holds dir/watcher.pid, obeys
 * dir/plan.json and journals what it does in dir/journal.jsonl. It sleeps
 * in poll(2) on an inotify descriptor of dir (or 5 s at a time, to stat
 * the plan) until the next thing due: a warning, a deadline, an autostop
 * check, the end of a stop's confirm window or of a failed stop's backoff.
 *
 * Every journal entry it writes is read back into its state with
 * judge_replay, the function that replays the journal at start, so a
 * restarted watcher knows exactly what the one before it knew.
 */

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "agent.h"
#include "gpufleet/report.h"
#include "../controller/xmalloc.h"

/* How often the plan is stat'ed where inotify is not to be had. */
#define WATCH_STAT_S 5
/* The test knob for the backoffs of a failed stop (WATCH.md "Test knobs"). */
#define WATCH_BACKOFF_ENV "GPUFLEET_AGENT_STOP_BACKOFF"

volatile sig_atomic_t watch_term;
static int watch_wake_pipe[2] = { -1, -1 };

static void watch_on_term(int);
static void watch_on_usr1(int);
static int watch_plan_changed(struct watch *);
static void watch_backoff(struct plan *);
static void watch_load_plan(struct watch *, int);
static void watch_arm(struct watch *);
static void watch_task(struct watch *, const char *, struct judge_task *);
static int watch_release(struct watch *, const char *, char *, size_t);
static long long watch_advance(struct watch *, const char *);
static void watch_skip_deadline(
    struct watch *, const struct plan_deadline *, const char *, long long);
static void watch_deadlines(struct watch *, int, long long *);
static void watch_sleep(struct watch *, long long);
static int watch_start(struct watch *, int, int);
static void watch_loop(struct watch *);

/* SIGTERM (and SIGINT): journal "exiting" and exit at the next turn. */
static void
watch_on_term(int sig)
{
	(void)sig;
	watch_term = 1;
	if (watch_wake_pipe[1] != -1 && write(watch_wake_pipe[1], "x", 1) < 0)
		(void)0;
}

/* SIGUSR1 (job start): wake up now, to scan D/jobs. */
static void
watch_on_usr1(int sig)
{
	(void)sig;
	if (watch_wake_pipe[1] != -1 && write(watch_wake_pipe[1], "u", 1) < 0)
		(void)0;
}

/*
 * Append the entry in jw and apply it to the state; a journal that cannot
 * be written is logged, and the state moves on all the same (a full disk
 * must not keep the machine from being stopped). Then the entry's
 * notifications, if any (watch-notify.c). Frees jw.
 */
void
watch_log(struct watch *w, struct jsonw *jw)
{
	struct jsonr e;
	char *cause = NULL;
	long long seq;

	if (journal_end(&w->j, jw, &cause) != 0) {
		fprintf(stderr, "gpufleet-agent watch: %s\n", cause);
		free(cause);
		w->j.seq++;
	}
	seq = w->j.seq;
	if (jsonr_parse(jw->out.data, jw->out.len, &e, NULL) == 0) {
		judge_replay(&w->js, &e);
		/* The state has the entry: the file may become a segment. */
		journal_rotate(&w->j, &w->js, time(NULL));
		/* News for D/notify.json's targets: sent before going on. */
		watch_notify(w, &e, seq);
	}
	jsonr_free(&e);
	jsonw_free(jw);
}

/* Journal event with an id (or NULL) and nothing else. */
void
watch_entry(
    struct watch *w, struct jsonw *jw, const char *event, const char *id)
{
	journal_begin(&w->j, jw, time(NULL), event);
	if (id != NULL)
		jsonw_string(jw, "id", id);
}

/* Whether dir/plan.json is not the file last seen. */
static int
watch_plan_changed(struct watch *w)
{
	struct stat sb;
	char *path;
	int r;

	xasprintf(&path, "%s/plan.json", w->dir);
	r = stat(path, &sb);
	free(path);
	if (r != 0)
		return w->plan_known;
	return !w->plan_known || sb.st_ino != w->plan_sb.st_ino ||
	    sb.st_size != w->plan_sb.st_size ||
	    sb.st_mtim.tv_sec != w->plan_sb.st_mtim.tv_sec ||
	    sb.st_mtim.tv_nsec != w->plan_sb.st_mtim.tv_nsec;
}

/*
 * Plan p's backoffs from the test knob GPUFLEET_AGENT_STOP_BACKOFF=FIRST,
 * SECOND (seconds, 0-86400 each) when it is set; one that is not two such
 * numbers is said in the log and changes nothing.
 */
static void
watch_backoff(struct plan *p)
{
	const char *s = getenv(WATCH_BACKOFF_ENV);
	long long v[2];
	char *end;
	int i;

	if (s == NULL || *s == '\0')
		return;
	for (i = 0; i < 2; i++) {
		errno = 0;
		v[i] = strtoll(s, &end, 10);
		if (errno != 0 || end == s || v[i] < 0 || v[i] > 86400 ||
		    *end != (i == 0 ? ',' : '\0')) {
			fprintf(stderr,
			    "gpufleet-agent watch: %s=%s ignored: not "
			    "FIRST,SECOND seconds\n",
			    WATCH_BACKOFF_ENV, getenv(WATCH_BACKOFF_ENV));
			return;
		}
		s = end + 1;
	}
	p->stop_backoff_s[0] = v[0];
	p->stop_backoff_s[1] = v[1];
}

/*
 * (Re)load the plan: a valid one replaces the one obeyed and restarts the
 * idle clock; an invalid one is journaled as "failed" once and ignored; a
 * missing one is an empty plan.
 */
static void
watch_load_plan(struct watch *w, int initial)
{
	struct plan p;
	struct jsonw jw;
	char *cause = NULL, *path;
	int r;

	xasprintf(&path, "%s/plan.json", w->dir);
	w->plan_known = stat(path, &w->plan_sb) == 0;
	free(path);
	if ((r = plan_load(w->dir, &p, NULL, &cause)) < 0) {
		watch_entry(w, &jw, "failed", NULL);
		jsonw_string(&jw, "reason", cause);
		watch_log(w, &jw);
		free(cause);
		plan_free(&p);
		return;
	}
	plan_free(&w->plan);
	w->plan = p;
	watch_backoff(&w->plan);
	judge_idle_reset(&w->idle);
	w->next_check = 0;
	if (!initial) {
		watch_entry(w, &jw, "plan", NULL);
		jsonw_int(&jw, "generation", p.generation);
		jsonw_int(&jw, "deadlines", (long long)p.ndeadlines);
		jsonw_bool(&jw, "autostop", p.has_autostop);
		watch_log(w, &jw);
	}
	watch_arm(w);
}

/*
 * Journal "armed" for new deadlines (and moved ones, with their new "at")
 * and "cancelled" for dropped ones.
 */
static void
watch_arm(struct watch *w)
{
	struct judge_fire *f;
	struct jsonw jw;
	char id[JUDGE_FIRE_ID_MAX + 1];
	size_t i, k;

	for (i = 0; i < w->plan.ndeadlines; i++) {
		const struct plan_deadline *d = &w->plan.deadlines[i];

		f = judge_find(&w->js, d->id, 0);
		if (f != NULL &&
		    (f->fired || f->done || (f->armed && f->armed_at == d->at)))
			continue; /* armed again only when it moved */
		watch_entry(w, &jw, "armed", d->id);
		jsonw_int(&jw, "at", d->at);
		jsonw_string(&jw, "action", d->local ? "local" : "stop");
		watch_log(w, &jw);
	}
	for (i = 0; i < w->js.n; i++) {
		f = &w->js.f[i];
		if (!f->armed || f->fired || f->done)
			continue;
		for (k = 0; k < w->plan.ndeadlines; k++)
			if (strcmp(w->plan.deadlines[k].id, f->id) == 0)
				break;
		if (k < w->plan.ndeadlines)
			continue;
		memcpy(id, f->id, sizeof id);
		watch_entry(w, &jw, "cancelled", id);
		watch_log(w, &jw); /* may move js.f: f is not used after */
	}
}

/* What runs for fired id: its deadline's, or a plain stop. */
static void
watch_task(struct watch *w, const char *id, struct judge_task *t)
{
	size_t i;

	memset(t, 0, sizeof *t);
	for (i = 0; i < w->plan.ndeadlines; i++) {
		const struct plan_deadline *d = &w->plan.deadlines[i];

		if (strcmp(d->id, id) == 0) {
			t->before_stop = d->before_stop;
			t->before_must_succeed = d->before_must_succeed;
			t->before_timeout_s = d->before_stop_timeout_s;
			t->local = d->local;
			t->hold = d->hold;
			t->hold_wait_s = d->hold_wait_s;
			t->hold_must = d->hold_must;
			return;
		}
	}
	for (i = 0; i < w->njdl; i++) {
		const struct plan_deadline *d = &w->jdl[i];

		if (strcmp(d->id, id) == 0) {
			t->before_stop = d->before_stop;
			t->before_must_succeed = d->before_must_succeed;
			t->before_timeout_s = d->before_stop_timeout_s;
			t->local = d->local;
			return;
		}
	}
	/* A job's stop whose job is gone from D/jobs: left to the laptop. */
	if (strncmp(id, "j-", 2) == 0)
		t->local = 1;
}

/*
 * Whether D/release-ID lets held id go on (by: who released it). One that
 * is not valid is journaled "release_ignored" and removed: the hold goes
 * on, and the controller may write a good one.
 */
static int
watch_release(struct watch *w, const char *id, char *by, size_t size)
{
	struct jsonw jw;
	char *cause = NULL;
	int r;

	if ((r = hold_release_read(w->dir, id, by, size, &cause)) >= 0)
		return r;
	watch_entry(w, &jw, "release_ignored", id);
	jsonw_string(&jw, "reason", cause);
	watch_log(w, &jw);
	free(cause);
	hold_release_remove(w->dir, id);
	return 0;
}

/*
 * Take the fired id through its stop sequence as far as it goes now;
 * returns when it is next due (0: never again).
 */
static long long
watch_advance(struct watch *w, const char *id)
{
	struct judge_task t;
	struct judge_step s;
	struct judge_fire *f;
	struct jsonw jw;
	long long now, cs;
	char by[16];
	int alive, n;

	watch_task(w, id, &t);
	for (n = 0; n < 16 && !watch_term; n++) {
		now = time(NULL);
		cs = host_container_start_now(w->proc);
		if ((f = judge_find(&w->js, id, 0)) == NULL)
			return 0;
		alive = f->attempts > 0 && f->stopping_pid > 0 &&
		    f->stopping_pid_start >= 0 &&
		    shell_pid_start(w->proc, f->stopping_pid) ==
			f->stopping_pid_start;
		t.release = f->held && !f->released &&
		    watch_release(w, id, by, sizeof by);
		judge_fired(f, &t, &w->plan, now, cs, alive, &s);
		switch (s.act) {
		case JUDGE_ACT_NONE:
			return 0;
		case JUDGE_ACT_WAIT:
			return s.wake;
		case JUDGE_ACT_WAIT_PID:
			return now + 1;
		case JUDGE_ACT_BEFORE:
			watch_run_before(w, id, &t, &watch_term);
			break;
		case JUDGE_ACT_STOP:
			watch_run_stop(w, id, &watch_term);
			break;
		case JUDGE_ACT_STOPPED:
			watch_entry(w, &jw, "stopped", id);
			jsonw_int(&jw, "container_start", cs);
			watch_log(w, &jw);
			break;
		case JUDGE_ACT_HOLD:
			watch_entry(w, &jw, "held", id);
			jsonw_string(&jw, "for", "pull");
			jsonw_int(&jw, "since", now);
			jsonw_int(&jw, "wait",
			    f->hold ? f->hold_wait_s : t.hold_wait_s);
			jsonw_bool(
			    &jw, "must", f->hold ? f->hold_must : t.hold_must);
			watch_log(w, &jw);
			break;
		case JUDGE_ACT_RELEASED:
			watch_entry(w, &jw, "released", id);
			jsonw_string(&jw, "by", by);
			watch_log(w, &jw);
			hold_release_remove(w->dir, id);
			break;
		case JUDGE_ACT_HOLD_EXPIRED:
			watch_entry(w, &jw, "hold_expired", id);
			watch_log(w, &jw);
			break;
		case JUDGE_ACT_HOLD_KEPT:
			watch_entry(w, &jw, "hold_kept", id);
			jsonw_string(&jw, "reason", s.reason);
			watch_log(w, &jw);
			break;
		case JUDGE_ACT_RESULT_LOST:
			watch_no_result(w, "stop_result", id,
			    "the watcher restarted: the result is not known");
			break;
		case JUDGE_ACT_SKIP:
		case JUDGE_ACT_FAILED:
			watch_entry(w, &jw,
			    s.act == JUDGE_ACT_SKIP ? "skipped" : "stop_failed",
			    id);
			jsonw_string(&jw, "reason", s.reason);
			watch_log(w, &jw);
			break;
		default: /* JUDGE_ACT_LOCAL_DUE, JUDGE_ACT_RETRY */
			watch_entry(w, &jw,
			    s.act == JUDGE_ACT_RETRY ? "stop_retry"
						     : "local_due",
			    id);
			watch_log(w, &jw);
			break;
		}
	}
	return time(NULL) + 1;
}

/*
 * Journal "skipped" for deadline d, whose time came before the container
 * started (final, like every skip).
 */
static void
watch_skip_deadline(struct watch *w, const struct plan_deadline *d,
    const char *reason, long long cs)
{
	struct jsonw jw;

	watch_entry(w, &jw, "skipped", d->id);
	jsonw_string(&jw, "reason", reason);
	jsonw_object_begin(&jw, "evidence");
	jsonw_int(&jw, "at", d->at);
	jsonw_int(&jw, "container_start", cs);
	jsonw_object_end(&jw);
	watch_log(w, &jw);
}

/*
 * Warn, fire or skip the deadlines that are due, the plan's or (jobs set)
 * the jobs' stops; *wake is lowered to the next.
 */
static void
watch_deadlines(struct watch *w, int jobs, long long *wake)
{
	struct judge_step s;
	char id[PLAN_ID_MAX + 1];
	long long next, cs = host_container_start_now(w->proc);
	size_t i, n = jobs ? w->njdl : w->plan.ndeadlines;

	for (i = 0; i < n && !watch_term; i++) {
		const struct plan_deadline *d =
		    jobs ? &w->jdl[i] : &w->plan.deadlines[i];

		judge_deadline(
		    d, judge_find(&w->js, d->id, 0), time(NULL), cs, &s);
		if (s.act == JUDGE_ACT_WAIT && s.wake < *wake)
			*wake = s.wake;
		if (s.act == JUDGE_ACT_WARN) {
			watch_warn(w, d);
			i--; /* again: it may be due to fire too */
			continue;
		}
		if (s.act == JUDGE_ACT_SKIP) {
			watch_skip_deadline(w, d, s.reason, cs);
			continue;
		}
		if (s.act != JUDGE_ACT_FIRE)
			continue;
		memcpy(id, d->id, sizeof id);
		if (jobs)
			watch_fire_job(w, id);
		else if (!watch_fire_deadline(w, d))
			continue; /* skipped: busy */
		if ((next = watch_advance(w, id)) != 0 && next < *wake)
			*wake = next;
	}
}

/* Sleep until wake, a change in dir, or a signal. */
static void
watch_sleep(struct watch *w, long long wake)
{
	struct pollfd pfd[2];
	long long left = wake - (long long)time(NULL);
	char drain[4096];
	nfds_t n = 0;

	if (left < 0)
		left = 0;
	if (w->ino == -1 && left > WATCH_STAT_S)
		left = WATCH_STAT_S;
	if (left > 3600)
		left = 3600;
	pfd[n].fd = watch_wake_pipe[0];
	pfd[n++].events = POLLIN;
	if (w->ino != -1) {
		pfd[n].fd = w->ino;
		pfd[n++].events = POLLIN;
	}
	if (poll(pfd, n, (int)(left * 1000)) <= 0)
		return;
	while (read(watch_wake_pipe[0], drain, sizeof drain) > 0)
		;
	while (w->ino != -1 && read(w->ino, drain, sizeof drain) > 0)
		;
}

/*
 * Lock, open the journal, replay it, load the plan, tell the starter and
 * journal "started". 0 when this process is the watcher now, 1 when
 * another one is (said to the starter), -1 on failure (said too).
 */
static int
watch_start(struct watch *w, int notify, int daemon)
{
	struct jsonw jw;
	struct sigaction sa;
	char *cause = NULL, epoch[JOURNAL_EPOCH_LEN + 1];
	pid_t holder;
	int lockfd, r;

	/*
	 * The handlers come before the lock: job start signals whoever holds
	 * it, and SIGUSR1's default would kill a watcher still starting. One
	 * that comes early is not lost, the first turn scans D/jobs anyway;
	 * SA_RESTART, so that a job start never fails a step of ours.
	 */
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = watch_on_term;
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	sa.sa_handler = watch_on_usr1;
	sa.sa_flags = SA_RESTART;
	sigaction(SIGUSR1, &sa, NULL);
	signal(SIGHUP, SIG_IGN);
	if (plan_mkdir(w->dir, &cause) != 0 ||
	    (r = watcher_lock(w->dir, &lockfd, &holder, &cause)) < 0 ||
	    (r == 0 && journal_open(&w->j, w->dir, time(NULL), &cause) != 0)) {
		dprintf(notify, "failed: %s\n", cause);
		fprintf(stderr, "gpufleet-agent watch: %s\n", cause);
		free(cause);
		return -1;
	}
	if (r == 1) {
		dprintf(notify, "running %ld\n", (long)holder);
		return 1;
	}
	if (pipe2(watch_wake_pipe, O_CLOEXEC | O_NONBLOCK) != 0)
		watch_wake_pipe[0] = watch_wake_pipe[1] = -1;
	w->ino = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
	if (w->ino != -1 &&
	    inotify_add_watch(w->ino, w->dir,
		IN_CLOSE_WRITE | IN_MOVED_TO | IN_DELETE | IN_CREATE) == -1) {
		close(w->ino);
		w->ino = -1;
	}
	journal_replay(w->dir, epoch, &w->js);
	w->env = shell_env(w->proc);
	watch_load_plan(w, 1);
	watch_entry(w, &jw, "started", NULL);
	jsonw_int(&jw, "pid", (long long)getpid());
	jsonw_int(&jw, "generation", w->plan.generation);
	watch_log(w, &jw);
	dprintf(notify, "started %ld\n", (long)getpid());
	if (daemon)
		close(notify);
	fprintf(
	    stderr, "gpufleet-agent watch: started, pid %ld\n", (long)getpid());
	return 0;
}

/* Until SIGTERM or nothing is armed. */
static void
watch_loop(struct watch *w)
{
	struct jsonw jw;
	char id[JUDGE_FIRE_ID_MAX + 1];
	long long now, wake, next, cs;
	size_t i;

	for (;;) {
		if (watch_plan_changed(w))
			watch_load_plan(w, 0);
		now = time(NULL);
		wake = now + 3600;
		watch_jobs(w, &wake);
		for (i = 0; i < w->js.n && !watch_term; i++) {
			if (!w->js.f[i].fired || w->js.f[i].done)
				continue;
			memcpy(id, w->js.f[i].id, sizeof id);
			if ((next = watch_advance(w, id)) != 0 && next < wake)
				wake = next;
		}
		watch_deadlines(w, 0, &wake);
		watch_deadlines(w, 1, &wake);
		cs = host_container_start_now(w->proc);
		if (w->plan.has_autostop && !watch_term) {
			judge_fire_id(&w->plan, cs, id, sizeof id);
			if ((next = watch_autostop(w, id, cs)) != 0 &&
			    next < wake)
				wake = next;
		}
		if (watch_term) {
			watch_entry(w, &jw, "exiting", NULL);
			jsonw_string(&jw, "reason", "SIGTERM");
			watch_log(w, &jw);
			return;
		}
		if (!judge_arms(&w->plan, &w->js, cs))
			watch_jobs(w, &wake); /* one started just now? */
		if (!judge_arms(&w->plan, &w->js, cs)) {
			watch_entry(w, &jw, "exiting", NULL);
			jsonw_string(&jw, "reason", "nothing armed");
			watch_log(w, &jw);
			return;
		}
		watch_sleep(w, wake);
	}
}

/*
 * The watcher for dir: notify gets "started PID", "running PID" or
 * "failed: REASON" (closed after when daemon is set). Returns the exit
 * status.
 */
int
watch_run(const char *dir, const char *proc, int notify, int daemon)
{
	struct watch w;
	int r;

	memset(&w, 0, sizeof w);
	w.dir = dir;
	w.proc = proc;
	w.ino = -1;
	plan_parse("{\"version\":1}", 13, &w.plan, NULL); /* the defaults */
	watch_backoff(&w.plan);
	if ((r = watch_start(&w, notify, daemon)) != 0)
		return r < 0 ? 1 : 0;
	watch_loop(&w);
	fprintf(stderr, "gpufleet-agent watch: exiting\n");
	journal_close(&w.j);
	plan_free(&w.plan);
	judge_state_free(&w.js);
	watch_jobs_free(&w);
	shell_env_free(w.env);
	if (w.ino != -1)
		close(w.ino);
	return 0;
}

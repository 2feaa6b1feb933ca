/*
 * The watcher's decisions as pure functions of the plan, the journal's
 * entries, the samples and the clock, so tests can drive them: the idle
 * judge (agent/WATCH.md "Idle, as the watcher judges it"), the replay of
 * journal entries into a state per id ("Exactly once"), and the next step
 * of a deadline or of a fired id.
 */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent.h"
#include "../controller/xmalloc.h"

static int judge_gpu_busy(
    const struct plan_autostop *, const struct judge_sample *, const char **);
static void judge_replay_job(struct judge_state *, const struct jsonr *, int);
static void judge_replay_hold(struct judge_fire *, const struct jsonr *);
static void judge_replay_result(
    struct judge_fire *, const struct jsonr *, long long);
static void judge_retry(const struct judge_fire *, const struct plan *,
    long long, struct judge_step *);
static int judge_hold(const struct judge_fire *, const struct judge_task *,
    const struct plan *, long long, struct judge_step *);

/* Forget the idle clock: a plan load, the watcher's start. */
void
judge_idle_reset(struct judge_idle *st)
{
	st->idle = 0;
	st->since = 0;
}

/* Whether the GPUs alone are busy in s; *reason says why. */
static int
judge_gpu_busy(const struct plan_autostop *a, const struct judge_sample *s,
    const char **reason)
{
	size_t i;

	if (s->gpu_state == JUDGE_GPU_ERROR) {
		*reason = "gpu_unreadable";
		return 1;
	}
	if (s->gpu_state == JUDGE_GPU_NONE)
		return 0;
	for (i = 0; i < s->ngpus; i++) {
		if (s->util[i] < 0 || s->util[i] >= a->gpu_below) {
			*reason = "gpu_util";
			return 1;
		}
		if (s->mem_mib[i] > a->gpu_mem_mib) {
			*reason = "gpu_memory";
			return 1;
		}
	}
	return 0;
}

/*
 * Why s is busy under policy a, or NULL when it is idle; *stalled is set
 * when only a stalled progress file made busy GPUs idle.
 */
const char *
judge_busy(
    const struct plan_autostop *a, const struct judge_sample *s, int *stalled)
{
	const char *reason = NULL;

	*stalled = 0;
	if (judge_gpu_busy(a, s, &reason)) {
		if (s->gpu_state == JUDGE_GPU_ERROR || a->stalled_s <= 0 ||
		    s->progress_age_s < 0 || s->progress_age_s < a->stalled_s)
			return reason;
		*stalled = 1;
	}
	if (a->wait_sessions && s->sessions != 0)
		return "sessions"; /* unknown (-1) counts as busy */
	if (a->wait_jobs && s->jobs != 0)
		return "jobs";
	return NULL;
}

/*
 * Judge one sample: update st and say in v what to journal (transitions
 * only) and whether to fire. container_start is -1 when unknown.
 */
void
judge_sample(struct judge_idle *st, const struct plan_autostop *a,
    const struct judge_sample *s, long long container_start,
    struct judge_verdict *v)
{
	const char *busy;
	int stalled;

	memset(v, 0, sizeof *v);
	if (st->nlast == JUDGE_SAMPLES) {
		memmove(&st->last[0], &st->last[1],
		    (JUDGE_SAMPLES - 1) * sizeof st->last[0]);
		st->nlast--;
	}
	st->last[st->nlast++] = *s;

	if (s->gpu_state == JUDGE_GPU_ERROR) {
		v->unreadable = !st->unreadable;
		st->unreadable = 1;
	} else
		st->unreadable = 0;

	busy = judge_busy(a, s, &stalled);
	if (busy != NULL) {
		if (st->idle)
			v->busy = busy;
		st->idle = 0;
	} else if (!st->idle) {
		st->idle = 1;
		st->since = s->time;
		v->idle = 1;
	}
	if (a->max_runtime_s > 0 && container_start >= 0 &&
	    s->time - container_start >= a->max_runtime_s)
		v->fire = JUDGE_FIRE_MAX_RUNTIME;
	else if (st->idle && s->time - st->since >= a->idle_s)
		v->fire = stalled ? JUDGE_FIRE_STALLED : JUDGE_FIRE_IDLE;
}

/*
 * The thresholds an unless_busy deadline is judged by: the autostop
 * policy's when p has one, else the defaults (5 %, 1024 MiB; progress
 * NULL: PLAN_PROGRESS_DEFAULT). *a borrows p's strings.
 */
void
judge_unless_policy(const struct plan *p, struct plan_autostop *a)
{
	if (p->has_autostop) {
		*a = p->autostop;
		return;
	}
	memset(a, 0, sizeof *a);
	a->gpu_below = 5;
	a->gpu_mem_mib = 1024;
}

/*
 * Whether sample s keeps an unless_busy deadline from firing under the
 * thresholds of a: 1 with why ("busy: gpu 0 at 87%") in why, else 0.
 * error is nvidia-smi's when it failed. Sessions and jobs do not count.
 */
int
judge_unless_busy(const struct plan_autostop *a, const struct judge_sample *s,
    const char *error, char *why, size_t size)
{
	long long age = s->progress_age_s;
	size_t i;

	if (s->gpu_state == JUDGE_GPU_ERROR) {
		snprintf(why, size, "busy: nvidia-smi failed: %s",
		    error != NULL ? error : "no reason given");
		return 1;
	}
	for (i = 0; s->gpu_state == JUDGE_GPU_OK && i < s->ngpus; i++) {
		if (s->util[i] < 0) {
			snprintf(
			    why, size, "busy: gpu %zu utilisation unknown", i);
			return 1;
		}
		if (s->util[i] >= a->gpu_below) {
			snprintf(why, size, "busy: gpu %zu at %lld%%", i,
			    s->util[i]);
			return 1;
		}
		if (s->mem_mib[i] > a->gpu_mem_mib) {
			snprintf(why, size, "busy: gpu %zu has %lld MiB in use",
			    i, s->mem_mib[i]);
			return 1;
		}
	}
	if (age >= 0 && age < JUDGE_PROGRESS_BUSY_S) {
		if (age < 60)
			snprintf(why, size,
			    "busy: progress file changed %lld s ago", age);
		else
			snprintf(why, size,
			    "busy: progress file changed %lld min ago",
			    age / 60);
		return 1;
	}
	return 0;
}

/* The name of a fire reason, as journaled. */
const char *
judge_fire_name(int reason)
{
	switch (reason) {
	case JUDGE_FIRE_DEADLINE:
		return "deadline";
	case JUDGE_FIRE_IDLE:
		return "idle";
	case JUDGE_FIRE_STALLED:
		return "stalled";
	case JUDGE_FIRE_MAX_RUNTIME:
		return "max_runtime";
	case JUDGE_FIRE_JOB:
		return "job";
	}
	return "none";
}

/* The state of id, or NULL; created (all zero) when create is set. */
struct judge_fire *
judge_find(struct judge_state *js, const char *id, int create)
{
	struct judge_fire *f;
	size_t i;

	for (i = 0; i < js->n; i++)
		if (strcmp(js->f[i].id, id) == 0)
			return &js->f[i];
	if (!create || strlen(id) > JUDGE_FIRE_ID_MAX)
		return NULL;
	js->f = xreallocarray(js->f, js->n + 1, sizeof *js->f);
	f = &js->f[js->n++];
	memset(f, 0, sizeof *f);
	memcpy(f->id, id, strlen(id) + 1);
	return f;
}

/* Free the states. */
void
judge_state_free(struct judge_state *js)
{
	free(js->f);
	js->f = NULL;
	js->n = 0;
}

/* Apply one journal entry to the state of the id it names. */
void
judge_replay(struct judge_state *js, const struct jsonr *e)
{
	const char *event = jsonr_str(e, "event"), *id = jsonr_str(e, "id");
	const struct jsonr *m;
	struct judge_fire *f;
	long long t = 0, v;

	if (event != NULL &&
	    (strcmp(event, "job_started") == 0 ||
		strcmp(event, "job_ended") == 0)) {
		judge_replay_job(js, e, strcmp(event, "job_ended") == 0);
		return;
	}
	if (event == NULL || id == NULL || (f = judge_find(js, id, 1)) == NULL)
		return;
	jsonr_int(e, "time", &t);
	if (strcmp(event, "armed") == 0) {
		f->armed = 1;
		f->armed_at = jsonr_int(e, "at", &v) == 0 ? v : 0;
	} else if (strcmp(event, "cancelled") == 0)
		f->armed = 0;
	else if (strcmp(event, "warned") == 0)
		f->warned = 1;
	else if (strcmp(event, "firing") == 0) {
		f->fired = 1;
		f->fired_at = t;
		judge_replay_hold(f, jsonr_get(e, "hold"));
	} else if (strcmp(event, "held") == 0) {
		f->held = 1;
		f->held_at = jsonr_int(e, "since", &v) == 0 ? v : t;
		judge_replay_hold(f, e);
	} else if (strcmp(event, "released") == 0) {
		f->released = 1;
		f->hold_cancelled = jsonr_str(e, "by") != NULL &&
		    strcmp(jsonr_str(e, "by"), "cancelled") == 0;
	} else if (strcmp(event, "hold_expired") == 0)
		f->hold_expired = 1;
	else if (strcmp(event, "hold_kept") == 0)
		f->hold_kept = 1;
	else if (strcmp(event, "before_stop") == 0) {
		f->before_done = 1;
		m = jsonr_get(e, "timed_out");
		f->before_ok = jsonr_int(e, "status", &v) == 0 && v == 0 &&
		    !(m != NULL && m->type == JSONR_BOOL && m->i);
	} else if (strcmp(event, "stopping") == 0) {
		f->attempts++;
		f->stopping_time = t;
		f->stopping_pid = jsonr_int(e, "pid", &v) == 0 ? v : -1;
		f->stopping_pid_start =
		    jsonr_int(e, "pid_start", &v) == 0 ? v : -1;
		f->result = 0;
		f->result_failed = 0;
	} else if (strcmp(event, "stop_result") == 0)
		judge_replay_result(f, e, t);
	else if (strcmp(event, "stop_retry") == 0)
		f->retries++;
	else if (strcmp(event, "stopped") == 0 ||
	    strcmp(event, "stop_failed") == 0 ||
	    strcmp(event, "skipped") == 0 || strcmp(event, "local_due") == 0)
		f->done = 1;
}

/*
 * A stop_result at time t: whether the command failed at once (an exit
 * status other than 0, killed by a signal other than the kill at
 * stop_confirm_s, or never started: status null after a "stopping"
 * without a pid) or may still be taking the machine down (exit 0, killed
 * at stop_confirm_s, or its end not seen by a restarted watcher). Only
 * the first result of an attempt counts.
 */
static void
judge_replay_result(struct judge_fire *f, const struct jsonr *e, long long t)
{
	const struct jsonr *m = jsonr_get(e, "timed_out");
	int timed_out = m != NULL && m->type == JSONR_BOOL && m->i;
	long long v;

	if (f->result)
		return;
	f->result = 1;
	f->result_time = t;
	f->result_status = jsonr_int(e, "status", &v) == 0 && v >= 0 ? v : -1;
	f->result_signal = 0;
	if (!timed_out && jsonr_int(e, "signal", &v) == 0 && v > 0 && v < 128)
		f->result_signal = (int)v;
	f->result_failed = !timed_out &&
	    (f->result_status > 0 || f->result_signal > 0 ||
		(f->result_status < 0 && f->stopping_pid < 0));
	if (f->result_failed)
		f->failures++;
}

/*
 * The hold a firing entry's "hold" object (or a held entry) carries:
 * "wait" and "must". The journal keeps it, so a plan rewritten without
 * the fired deadline still holds its stop.
 */
static void
judge_replay_hold(struct judge_fire *f, const struct jsonr *h)
{
	const struct jsonr *m;
	long long v;

	if (h == NULL || h->type != JSONR_OBJECT)
		return;
	f->hold = 1;
	if (jsonr_int(h, "wait", &v) == 0 && v > 0)
		f->hold_wait_s = v;
	else if (f->hold_wait_s <= 0)
		f->hold_wait_s = HOLD_WAIT_DEFAULT;
	if ((m = jsonr_get(h, "must")) != NULL && m->type == JSONR_BOOL)
		f->hold_must = (int)m->i;
}

/*
 * The hold's step, when f's stop is held and not yet let go (1), else
 * 0: journal "held", then wait for a release (t->release) until the
 * wait is over; then a stop-kind method goes on ("hold_expired"), one
 * that must not (a release method, or must) keeps waiting, said once.
 * A release by "cancelled" skips the stop.
 */
static int
judge_hold(const struct judge_fire *f, const struct judge_task *t,
    const struct plan *p, long long now, struct judge_step *s)
{
	long long wait = f->hold ? f->hold_wait_s : t->hold_wait_s;
	int must = f->hold ? f->hold_must : t->hold_must;

	if (f->released && f->hold_cancelled && f->attempts == 0) {
		s->act = JUDGE_ACT_SKIP; /* final: it never stops */
		s->reason = "cancelled while held";
		return 1;
	}
	if ((!f->hold && !t->hold) || f->released || f->hold_expired ||
	    f->attempts > 0)
		return 0;
	if (!f->held)
		s->act = JUDGE_ACT_HOLD;
	else if (t->release)
		s->act = JUDGE_ACT_RELEASED;
	else if (now < f->held_at + wait) {
		s->act = JUDGE_ACT_WAIT;
		s->wake = f->held_at + wait;
	} else if (!must && !p->stop_release)
		s->act = JUDGE_ACT_HOLD_EXPIRED;
	else if (!f->hold_kept) {
		s->act = JUDGE_ACT_HOLD_KEPT;
		s->reason = p->stop_release
		    ? "a release method waits for the results"
		    : "the pull must succeed";
	} else {
		s->act = JUDGE_ACT_WAIT;
		s->wake = now + 3600;
	}
	return 1;
}

/*
 * Apply a job_started or (ended set) job_ended entry to the state of its
 * fire_id; a job_ended whose "then" asks for a stop decides here whether
 * the job qualifies (agent/JOBS.md "The watcher and jobs"): "stop" any
 * end, "stop-if-ok" a success only, and never a job lost because the
 * container restarted (someone started the machine again since).
 */
static void
judge_replay_job(struct judge_state *js, const struct jsonr *e, int ended)
{
	const char *id = jsonr_str(e, "fire_id"), *then, *state, *sig, *why;
	struct judge_fire *f;
	long long v;

	if (id == NULL || (f = judge_find(js, id, 1)) == NULL)
		return;
	f->job_n = jsonr_int(e, "job", &v) == 0 ? v : 0;
	if (!ended) {
		f->job_started = 1;
		return;
	}
	f->job_ended = 1;
	f->job_ended_at = jsonr_int(e, "ended", &v) == 0 ? v : 0;
	state = jsonr_str(e, "state");
	snprintf(f->job_state, sizeof f->job_state, "%s",
	    state != NULL ? state : "lost");
	f->job_exit.set = jsonr_int(e, "exit", &v) == 0;
	f->job_exit.v = f->job_exit.set ? v : 0;
	sig = jsonr_str(e, "signal");
	snprintf(
	    f->job_signal, sizeof f->job_signal, "%s", sig != NULL ? sig : "");
	then = jsonr_str(e, "then");
	why = jsonr_str(e, "reason");
	f->job_then = then != NULL &&
	    (strcmp(then, "stop") == 0 || strcmp(then, "stop-if-ok") == 0);
	f->job_stop = 0;
	f->job_skip[0] = '\0';
	if (!f->job_then)
		return;
	if (strcmp(f->job_state, "lost") == 0 && why != NULL &&
	    strncmp(why, "the container restarted", 23) == 0)
		snprintf(f->job_skip, sizeof f->job_skip,
		    "the container restarted after the job started");
	else if (strcmp(then, "stop") == 0 ||
	    strcmp(f->job_state, "succeeded") == 0)
		f->job_stop = 1;
	else if (strcmp(f->job_state, "failed") == 0)
		snprintf(f->job_skip, sizeof f->job_skip,
		    "job failed: exit %lld", f->job_exit.v);
	else if (strcmp(f->job_state, "killed") == 0 && f->job_signal[0] != 0)
		snprintf(f->job_skip, sizeof f->job_skip, "killed by %s",
		    f->job_signal);
	else if (strcmp(f->job_state, "killed") == 0)
		snprintf(f->job_skip, sizeof f->job_skip, "killed: exit %lld",
		    f->job_exit.v);
	else
		snprintf(f->job_skip, sizeof f->job_skip, "%s", f->job_state);
}

/*
 * The deadline a job's stop is (f->job_stop set): its fire id, at the
 * job's end plus warn_minutes, with the spec's then (t NULL: the spec is
 * gone, the stop is left to the laptop). d borrows t's strings.
 */
void
judge_job_deadline(const struct judge_fire *f, const struct job_then *t,
    struct plan_deadline *d)
{
	size_t l = strlen(f->id);

	memset(d, 0, sizeof *d);
	if (l > PLAN_ID_MAX) /* never: a job's fire id is shorter */
		l = PLAN_ID_MAX;
	memcpy(d->id, f->id, l);
	d->before_stop_timeout_s = 600;
	d->local = 1;
	if (t != NULL) {
		d->local = t->local;
		d->warn_minutes = t->warn_minutes;
		d->before_stop = t->before_stop;
		d->before_stop_timeout_s = t->before_stop_timeout_s;
		d->before_must_succeed = t->before_must_succeed;
	}
	d->at = f->job_ended_at + d->warn_minutes * 60;
}

/*
 * The next step of a deadline d not yet fired (f: its state or NULL) at
 * now in the container started at container_start (-1: unknown): fire,
 * warn, or wait until s->wake; skip one whose time came before the
 * container started (someone started the machine since: never stop it
 * for a time it was already down at); nothing once it has fired or was
 * skipped.
 */
void
judge_deadline(const struct plan_deadline *d, const struct judge_fire *f,
    long long now, long long container_start, struct judge_step *s)
{
	long long warn_at = d->at - d->warn_minutes * 60;
	int need_warn = d->warn_minutes > 0 &&
	    (f == NULL || (!f->warned && !f->warn_withheld));

	memset(s, 0, sizeof *s);
	if (f != NULL && (f->fired || f->done))
		s->act = JUDGE_ACT_NONE;
	else if (now >= d->at && container_start > d->at) {
		s->act = JUDGE_ACT_SKIP;
		s->reason = "the container started after its time";
	} else if (now >= d->at)
		s->act = JUDGE_ACT_FIRE;
	else if (need_warn && now >= warn_at)
		s->act = JUDGE_ACT_WARN;
	else {
		s->act = JUDGE_ACT_WAIT;
		s->wake = need_warn ? warn_at : d->at;
	}
}

/*
 * The next step of a fired id f at now, for task t under plan p;
 * container_start is -1 when unknown, pid_alive whether the stop
 * command recorded in the last "stopping" still runs.
 */
void
judge_fired(const struct judge_fire *f, const struct judge_task *t,
    const struct plan *p, long long now, long long container_start,
    int pid_alive, struct judge_step *s)
{
	memset(s, 0, sizeof *s);
	if (!f->fired || f->done)
		s->act = JUDGE_ACT_NONE;
	else if (f->attempts > 0 && container_start > f->stopping_time)
		s->act = JUDGE_ACT_STOPPED;
	else if (f->attempts == 0 && container_start > f->fired_at) {
		s->act =
		    JUDGE_ACT_SKIP; /* never stop a machine started since */
		s->reason = "the container restarted after firing";
	} else if (f->attempts == 0 && t->before_stop != NULL &&
	    !f->before_done)
		s->act = JUDGE_ACT_BEFORE;
	else if (f->attempts == 0 && t->before_stop != NULL &&
	    t->before_must_succeed && !f->before_ok) {
		s->act = JUDGE_ACT_SKIP;
		s->reason = "before_stop failed";
	} else if (judge_hold(f, t, p, now, s))
		; /* held for the controller's pull */
	else if (t->local)
		s->act = JUDGE_ACT_LOCAL_DUE;
	else if (p->stop_command == NULL) {
		s->act = JUDGE_ACT_SKIP;
		s->reason = "no stop method";
	} else if (p->stop_release && !p->allow_release) {
		s->act = JUDGE_ACT_SKIP;
		s->reason = "release not allowed";
	} else if (f->attempts == 0 ||
	    (f->retries >= f->attempts && f->attempts < JUDGE_STOP_ATTEMPTS))
		s->act = JUDGE_ACT_STOP;
	else if (!f->result)
		s->act = pid_alive ? JUDGE_ACT_WAIT_PID : JUDGE_ACT_RESULT_LOST;
	else
		judge_retry(f, p, now, s);
}

/*
 * The step after the last attempt's stop_result (agent/WATCH.md "Exactly
 * once"): a command that failed at once is retried after a backoff from
 * that stop_result (the plan's first after the first failure, its second
 * after the next) and given up right after the last attempt; one that
 * exited 0 (or timed out, or whose end is not known) is given
 * stop_confirm_s from its stopping, and retried only if no earlier attempt
 * of that kind was. At most JUDGE_STOP_ATTEMPTS attempts.
 */
static void
judge_retry(const struct judge_fire *f, const struct plan *p, long long now,
    struct judge_step *s)
{
	char what[64], sb[16];
	long long at;

	if (f->result_status >= 0)
		snprintf(what, sizeof what, "exit %lld", f->result_status);
	else if (f->result_signal > 0)
		snprintf(what, sizeof what, "killed by %s",
		    job_signal_name(f->result_signal, sb, sizeof sb));
	else
		snprintf(what, sizeof what, "it could not be started");
	if (f->result_failed && f->attempts >= JUDGE_STOP_ATTEMPTS) {
		s->act = JUDGE_ACT_FAILED;
		if (f->failures == f->attempts)
			snprintf(s->why, sizeof s->why,
			    "the stop command failed %d times: %s", f->failures,
			    what);
		else
			snprintf(s->why, sizeof s->why,
			    "still running after %d attempts, the last "
			    "failed: %s",
			    f->attempts, what);
		s->reason = s->why;
		return;
	}
	if (f->result_failed)
		at = f->result_time + p->stop_backoff_s[f->failures > 1];
	else
		at = f->stopping_time + p->stop_confirm_s;
	if (now < at) {
		s->act = JUDGE_ACT_WAIT;
		s->wake = at;
	} else if (f->result_failed ||
	    (f->attempts < JUDGE_STOP_ATTEMPTS &&
		f->attempts - f->failures < 2))
		s->act = JUDGE_ACT_RETRY;
	else {
		s->act = JUDGE_ACT_FAILED;
		if (f->attempts == 2)
			s->reason = "still running after the retry";
		else {
			snprintf(s->why, sizeof s->why,
			    "still running after %d attempts", f->attempts);
			s->reason = s->why;
		}
	}
}

/* The id autostop fires under in the container started at cs. */
void
judge_fire_id(const struct plan *p, long long cs, char *id, size_t size)
{
	snprintf(id, size, "%s@%lld", p->autostop.id, cs < 0 ? 0 : cs);
}

/*
 * Whether plan p leaves the watcher anything to do, given the journal's
 * state js and the container's start cs (-1: unknown): a deadline that has
 * neither fired nor been skipped, an autostop policy that has not fired in this
 * container (fire id ID@CS), a fired stop whose sequence is not done, a
 * job pending (js->jobs_pending), or a job's stop not yet fired or skipped.
 */
int
judge_arms(const struct plan *p, struct judge_state *js, long long cs)
{
	struct judge_fire *f;
	char id[JUDGE_FIRE_ID_MAX + 1];
	size_t i;

	for (i = 0; i < p->ndeadlines; i++) {
		f = judge_find(js, p->deadlines[i].id, 0);
		if (f == NULL || (!f->fired && !f->done))
			return 1;
	}
	if (p->has_autostop) {
		judge_fire_id(p, cs, id, sizeof id);
		if ((f = judge_find(js, id, 0)) == NULL || !f->fired)
			return 1;
	}
	if (js->jobs_pending > 0)
		return 1;
	for (i = 0; i < js->n; i++) {
		f = &js->f[i];
		if ((f->fired && !f->done) ||
		    (f->job_ended && f->job_then && !f->fired && !f->done))
			return 1;
	}
	return 0;
}

/*
 * The watcher's decisions (agent/judge.c), one row per case: the idle
 * judge over a sequence of samples (what each sample journals, and when
 * it fires), the replay of journal entries into an id's state and the
 * step that follows, and the deadline's next step.
 */

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent.h"

#define MAXS 8
#define MAXE 12 /* journal entries of a replay case */

/* A sample: time, gpu state, util and memory of one GPU, the rest. */
struct s {
	long long time;
	int gpu; /* JUDGE_GPU_* */
	long long util, mem, sessions, jobs, progress_age;
};

struct idle_case {
	const char *name;
	long long idle_s, stalled_s, max_runtime_s, container_start;
	int wait_sessions, wait_jobs;
	struct s samples[MAXS];
	const char *want[MAXS]; /* what each sample journals, "" nothing */
};

#define OK   JUDGE_GPU_OK
#define NONE JUDGE_GPU_NONE
#define ERR  JUDGE_GPU_ERROR

static const struct idle_case idle_cases[] = {
	{ "idle after the window", 100, 0, 0, 0, 1, 1,
	    { { 0, OK, 0, 0, 0, 0, -1 }, { 60, OK, 1, 100, 0, 0, -1 },
		{ 100, OK, 4, 1024, 0, 0, -1 } },
	    { "idle", "", "fire=idle" } },
	{ "busy resets the clock", 100, 0, 0, 0, 1, 1,
	    { { 0, OK, 0, 0, 0, 0, -1 }, { 60, OK, 50, 0, 0, 0, -1 },
		{ 120, OK, 0, 0, 0, 0, -1 }, { 200, OK, 0, 0, 0, 0, -1 },
		{ 220, OK, 0, 0, 0, 0, -1 } },
	    { "idle", "busy=gpu_util", "idle", "", "fire=idle" } },
	{ "at gpu_below is busy", 100, 0, 0, 0, 1, 1,
	    { { 0, OK, 5, 0, 0, 0, -1 }, { 500, OK, 5, 0, 0, 0, -1 } },
	    { "", "" } },
	{ "unknown utilization is busy", 100, 0, 0, 0, 1, 1,
	    { { 0, OK, -1, 0, 0, 0, -1 }, { 500, OK, -1, 0, 0, 0, -1 } },
	    { "", "" } },
	{ "a process over gpu_mem_mib is busy", 100, 0, 0, 0, 1, 1,
	    { { 0, OK, 0, 0, 0, 0, -1 }, { 60, OK, 0, 1025, 0, 0, -1 },
		{ 500, OK, 0, 2048, 0, 0, -1 } },
	    { "idle", "busy=gpu_memory", "" } },
	{ "nvidia-smi failing is busy, journaled once", 100, 0, 0, 0, 1, 1,
	    { { 0, ERR, 0, 0, 0, 0, -1 }, { 60, ERR, 0, 0, 0, 0, -1 },
		{ 1000, ERR, 0, 0, 0, 0, -1 }, { 1060, OK, 0, 0, 0, 0, -1 },
		{ 1120, ERR, 0, 0, 0, 0, -1 } },
	    { "unreadable", "", "", "idle",
		"unreadable+busy=gpu_unreadable" } },
	{ "no GPUs: sessions and jobs alone", 100, 0, 0, 0, 1, 1,
	    { { 0, NONE, 0, 0, 1, 0, -1 }, { 60, NONE, 0, 0, 0, 0, -1 },
		{ 160, NONE, 0, 0, 0, 0, -1 } },
	    { "", "idle", "fire=idle" } },
	{ "a session keeps it busy", 100, 0, 0, 0, 1, 1,
	    { { 0, OK, 0, 0, 1, 0, -1 }, { 500, OK, 0, 0, 1, 0, -1 } },
	    { "", "" } },
	{ "sessions that cannot be counted are busy", 100, 0, 0, 0, 1, 1,
	    { { 0, OK, 0, 0, -1, 0, -1 }, { 500, OK, 0, 0, -1, 0, -1 } },
	    { "", "" } },
	{ "wait_for jobs ignores sessions", 100, 0, 0, 0, 0, 1,
	    { { 0, OK, 0, 0, 2, 0, -1 }, { 100, OK, 0, 0, 2, 0, -1 } },
	    { "idle", "fire=idle" } },
	{ "a job keeps it busy", 100, 0, 0, 0, 0, 1,
	    { { 0, OK, 0, 0, 0, 0, -1 }, { 60, OK, 0, 0, 0, 1, -1 },
		{ 500, OK, 0, 0, 0, 1, -1 } },
	    { "idle", "busy=jobs", "" } },
	{ "wait_for nothing: GPUs alone", 100, 0, 0, 0, 0, 0,
	    { { 0, OK, 0, 0, 3, 2, -1 }, { 100, OK, 0, 0, 3, 2, -1 } },
	    { "idle", "fire=idle" } },
	{ "stalled: busy GPUs, old progress", 100, 300, 0, 0, 1, 1,
	    { { 0, OK, 100, 8000, 0, 0, 100 }, { 60, OK, 100, 8000, 0, 0, 300 },
		{ 160, OK, 100, 8000, 0, 0, 400 } },
	    { "", "idle", "fire=stalled" } },
	{ "stalled needs a progress file", 100, 300, 0, 0, 1, 1,
	    { { 0, OK, 100, 0, 0, 0, -1 }, { 500, OK, 100, 0, 0, 0, -1 } },
	    { "", "" } },
	{ "stalled: sessions still count", 100, 300, 0, 0, 1, 1,
	    { { 0, OK, 100, 0, 1, 0, 900 }, { 500, OK, 100, 0, 1, 0, 1400 } },
	    { "", "" } },
	{ "stalled never overrides a failing nvidia-smi", 100, 300, 0, 0, 1, 1,
	    { { 0, ERR, 0, 0, 0, 0, 900 }, { 500, ERR, 0, 0, 0, 0, 1400 } },
	    { "unreadable", "" } },
	{ "max_runtime fires whatever the load", 0 + 100000, 0, 3600, 1000, 1,
	    1,
	    { { 4000, OK, 100, 0, 3, 0, -1 }, { 4600, OK, 100, 0, 3, 0, -1 } },
	    { "", "fire=max_runtime" } },
	{ "max_runtime needs the container's start", 100000, 0, 3600, -1, 1, 1,
	    { { 4000, OK, 100, 0, 3, 0, -1 } }, { "" } },
};

/* What a verdict journals, as the rows write it. */
static void
verdict_text(const struct judge_verdict *v, char *out, size_t size)
{
	size_t n = 0;

	out[0] = '\0';
	if (v->unreadable)
		n += (size_t)snprintf(out + n, size - n, "unreadable");
	if (v->busy != NULL)
		n += (size_t)snprintf(
		    out + n, size - n, "%sbusy=%s", n ? "+" : "", v->busy);
	if (v->idle)
		n +=
		    (size_t)snprintf(out + n, size - n, "%sidle", n ? "+" : "");
	if (v->fire != JUDGE_FIRE_NONE)
		snprintf(out + n, size - n, "%sfire=%s", n ? "+" : "",
		    judge_fire_name(v->fire));
}

START_TEST(test_idle)
{
	const struct idle_case *c = &idle_cases[_i];
	struct plan_autostop a;
	struct judge_idle st;
	struct judge_sample s;
	struct judge_verdict v;
	char got[128];
	size_t k;

	memset(&a, 0, sizeof a);
	a.idle_s = c->idle_s;
	a.gpu_below = 5;
	a.gpu_mem_mib = 1024;
	a.stalled_s = c->stalled_s;
	a.max_runtime_s = c->max_runtime_s;
	a.wait_sessions = c->wait_sessions;
	a.wait_jobs = c->wait_jobs;
	memset(&st, 0, sizeof st);
	judge_idle_reset(&st);
	for (k = 0; k < MAXS && c->want[k] != NULL; k++) {
		memset(&s, 0, sizeof s);
		s.time = c->samples[k].time;
		s.gpu_state = c->samples[k].gpu;
		s.ngpus = s.gpu_state == OK ? 1 : 0;
		s.util[0] = c->samples[k].util;
		s.mem_mib[0] = c->samples[k].mem;
		s.sessions = c->samples[k].sessions;
		s.jobs = c->samples[k].jobs;
		s.progress_age_s = c->samples[k].progress_age;
		judge_sample(&st, &a, &s, c->container_start, &v);
		verdict_text(&v, got, sizeof got);
		ck_assert_msg(strcmp(got, c->want[k]) == 0,
		    "%s: sample %zu: got [%s] want [%s]", c->name, k, got,
		    c->want[k]);
	}
	ck_assert_uint_le(st.nlast, JUDGE_SAMPLES);
}
END_TEST

/* The evidence keeps the last JUDGE_SAMPLES samples, oldest first. */
START_TEST(test_idle_evidence)
{
	struct plan_autostop a;
	struct judge_idle st;
	struct judge_sample s;
	struct judge_verdict v;
	long long t;

	memset(&a, 0, sizeof a);
	a.idle_s = 1000;
	a.gpu_below = 5;
	memset(&st, 0, sizeof st);
	memset(&s, 0, sizeof s);
	for (t = 0; t < 8; t++) {
		s.time = t * 60;
		judge_sample(&st, &a, &s, -1, &v);
	}
	ck_assert_uint_eq(st.nlast, JUDGE_SAMPLES);
	ck_assert_int_eq(st.last[0].time, 3 * 60);
	ck_assert_int_eq(st.last[JUDGE_SAMPLES - 1].time, 7 * 60);
	/* A reset (plan load, watcher start) restarts the idle clock. */
	judge_idle_reset(&st);
	s.time = 8 * 60;
	judge_sample(&st, &a, &s, -1, &v);
	ck_assert_int_eq(v.idle, 1);
	ck_assert_int_eq(st.since, 8 * 60);
}
END_TEST

struct replay_case {
	const char *name;
	const char *entries[MAXE]; /* "event[ extra JSON members]" */
	const char *before;	   /* task's before_stop */
	int must_succeed, local;
	const char *stop_command;
	int release, allow_release;
	long long now, container_start;
	int pid_alive;
	enum judge_act want;
	long long wake;
	const char *reason;
};

/*
 * A stop command's start, and the members of its ends (agent/WATCH.md,
 * the events): exit 0, and exit 127 as sh says a command is not there.
 */
#define STOPPING "stopping,\"pid\":77,\"pid_start\":5"
#define END0	 ",\"status\":0,\"signal\":null,\"timed_out\":false"
#define END127                                                                 \
	",\"status\":127,\"signal\":null,\"timed_out\":false,\"output\":"      \
	"\"sh: 1: /nonexistent/shutdown: not found\\n\""
#define EXIT0	"stop_result" END0
#define EXIT127 "stop_result" END127

/*
 * The entries of id "d-1", at times 100, 110, 120, ... in order;
 * stop_confirm_s is 600, the backoffs of a failed stop 30 and 120.
 */
static const struct replay_case replay_cases[] = {
	{ "firing without stopping resumes with the stop", { "firing" }, NULL,
	    0, 0, "stop", 0, 0, 200, 50, 0, JUDGE_ACT_STOP, 0, NULL },
	{ "firing, before_stop not run: runs it", { "firing" }, "save", 0, 0,
	    "stop", 0, 0, 200, 50, 0, JUDGE_ACT_BEFORE, 0, NULL },
	{ "before_stop has a result: not run again",
	    { "firing", "before_stop,\"status\":0,\"timed_out\":false" },
	    "save", 1, 0, "stop", 0, 0, 200, 50, 0, JUDGE_ACT_STOP, 0, NULL },
	{ "before_stop failed, must succeed: skipped",
	    { "firing", "before_stop,\"status\":1,\"timed_out\":false" },
	    "save", 1, 0, "stop", 0, 0, 200, 50, 0, JUDGE_ACT_SKIP, 0,
	    "before_stop failed" },
	{ "before_stop timed out, must succeed: skipped",
	    { "firing", "before_stop,\"status\":null,\"timed_out\":true" },
	    "save", 1, 0, "stop", 0, 0, 200, 50, 0, JUDGE_ACT_SKIP, 0,
	    "before_stop failed" },
	{ "before_stop failed, need not succeed: stop",
	    { "firing", "before_stop,\"status\":1,\"timed_out\":false" },
	    "save", 0, 0, "stop", 0, 0, 200, 50, 0, JUDGE_ACT_STOP, 0, NULL },
	{ "action local: local_due", { "firing" }, NULL, 0, 1, "stop", 0, 0,
	    200, 50, 0, JUDGE_ACT_LOCAL_DUE, 0, NULL },
	{ "no stop method: skipped", { "firing" }, NULL, 0, 0, NULL, 0, 0, 200,
	    50, 0, JUDGE_ACT_SKIP, 0, "no stop method" },
	{ "release not allowed: skipped", { "firing" }, NULL, 0, 0, "rel", 1, 0,
	    200, 50, 0, JUDGE_ACT_SKIP, 0, "release not allowed" },
	{ "release allowed: stop", { "firing" }, NULL, 0, 0, "rel", 1, 1, 200,
	    50, 0, JUDGE_ACT_STOP, 0, NULL },
	{ "firing, then a newer container: skipped, not stopped again",
	    { "firing", "before_stop,\"status\":0" }, "save", 0, 0, "stop", 0,
	    0, 5000, 4000, 0, JUDGE_ACT_SKIP, 0,
	    "the container restarted after firing" },
	{ "stopping, then a newer container: stopped",
	    { "firing", "stopping,\"pid\":77,\"pid_start\":5" }, NULL, 0, 0,
	    "stop", 0, 0, 5000, 4000, 0, JUDGE_ACT_STOPPED, 0, NULL },
	{ "stopping, same container, pid alive: wait for it",
	    { "firing", "stopping,\"pid\":77,\"pid_start\":5" }, NULL, 0, 0,
	    "stop", 0, 0, 200, 50, 1, JUDGE_ACT_WAIT_PID, 0, NULL },
	{ "stopping, same container, pid gone: result lost",
	    { "firing", "stopping,\"pid\":77,\"pid_start\":5" }, NULL, 0, 0,
	    "stop", 0, 0, 200, 50, 0, JUDGE_ACT_RESULT_LOST, 0, NULL },
	{ "stop_result: wait out the confirm window",
	    { "firing", "stopping", "stop_result,\"status\":0" }, NULL, 0, 0,
	    "stop", 0, 0, 300, 50, 0, JUDGE_ACT_WAIT, 710, NULL },
	{ "stop_result, window over: retry",
	    { "firing", "stopping", "stop_result,\"status\":0" }, NULL, 0, 0,
	    "stop", 0, 0, 710, 50, 0, JUDGE_ACT_RETRY, 0, NULL },
	{ "stop_retry: the one more run",
	    { "firing", STOPPING, EXIT0, "stop_retry" }, NULL, 0, 0, "stop", 0,
	    0, 800, 50, 0, JUDGE_ACT_STOP, 0, NULL },
	{ "after the retry: a new window from the second stopping",
	    { "firing", STOPPING, EXIT0, "stop_retry", STOPPING, EXIT0 }, NULL,
	    0, 0, "stop", 0, 0, 700, 50, 0, JUDGE_ACT_WAIT, 740, NULL },
	{ "still running after the retry: stop_failed",
	    { "firing", STOPPING, EXIT0, "stop_retry", STOPPING, EXIT0 }, NULL,
	    0, 0, "stop", 0, 0, 740, 50, 0, JUDGE_ACT_FAILED, 0,
	    "still running after the retry" },
	{ "stop_failed is the end",
	    { "firing", STOPPING, EXIT0, "stop_retry", STOPPING, EXIT0,
		"stop_failed" },
	    NULL, 0, 0, "stop", 0, 0, 9000, 8000, 0, JUDGE_ACT_NONE, 0, NULL },
	/* A stop command that fails at once: 30 s, 2 min, stop_failed. */
	{ "exit 127: the retry waits 30 s from the stop_result",
	    { "firing", STOPPING, EXIT127 }, NULL, 0, 0, "stop", 0, 0, 130, 50,
	    0, JUDGE_ACT_WAIT, 150, NULL },
	{ "exit 127, 30 s later: retry", { "firing", STOPPING, EXIT127 }, NULL,
	    0, 0, "stop", 0, 0, 150, 50, 0, JUDGE_ACT_RETRY, 0, NULL },
	{ "exit 127, retried: the second run",
	    { "firing", STOPPING, EXIT127, "stop_retry" }, NULL, 0, 0, "stop",
	    0, 0, 130, 50, 0, JUDGE_ACT_STOP, 0, NULL },
	{ "exit 127 twice: the retry waits 2 min",
	    { "firing", STOPPING, EXIT127, "stop_retry", STOPPING, EXIT127 },
	    NULL, 0, 0, "stop", 0, 0, 160, 50, 0, JUDGE_ACT_WAIT, 270, NULL },
	{ "exit 127 twice, 2 min later: retry",
	    { "firing", STOPPING, EXIT127, "stop_retry", STOPPING, EXIT127 },
	    NULL, 0, 0, "stop", 0, 0, 270, 50, 0, JUDGE_ACT_RETRY, 0, NULL },
	{ "exit 127 three times: stop_failed at once",
	    { "firing", STOPPING, EXIT127, "stop_retry", STOPPING, EXIT127,
		"stop_retry", STOPPING, EXIT127 },
	    NULL, 0, 0, "stop", 0, 0, 180, 50, 0, JUDGE_ACT_FAILED, 0,
	    "the stop command failed 3 times: exit 127" },
	{ "never a fourth run, whatever the journal says",
	    { "firing", STOPPING, EXIT127, "stop_retry", STOPPING, EXIT127,
		"stop_retry", STOPPING, EXIT127, "stop_retry" },
	    NULL, 0, 0, "stop", 0, 0, 9000, 50, 0, JUDGE_ACT_FAILED, 0,
	    "the stop command failed 3 times: exit 127" },
	{ "exit 1 is a failure too",
	    { "firing", STOPPING,
		"stop_result,\"status\":1,\"signal\":null,\"timed_out\":"
		"false" },
	    NULL, 0, 0, "stop", 0, 0, 130, 50, 0, JUDGE_ACT_WAIT, 150, NULL },
	{ "killed by a signal: a failure",
	    { "firing", STOPPING,
		"stop_result,\"status\":null,\"signal\":15,\"timed_out\":"
		"false" },
	    NULL, 0, 0, "stop", 0, 0, 130, 50, 0, JUDGE_ACT_WAIT, 150, NULL },
	{ "not started (no pid): a failure",
	    { "firing", "stopping,\"pid\":null,\"pid_start\":null",
		"stop_result,\"status\":null,\"signal\":null,\"timed_out\":"
		"false,\"output\":\"fork: no memory\"" },
	    NULL, 0, 0, "stop", 0, 0, 130, 50, 0, JUDGE_ACT_WAIT, 150, NULL },
	{ "killed at stop_confirm_s: the confirm window",
	    { "firing", STOPPING,
		"stop_result,\"status\":null,\"signal\":9,\"timed_out\":"
		"true" },
	    NULL, 0, 0, "stop", 0, 0, 130, 50, 0, JUDGE_ACT_WAIT, 710, NULL },
	{ "result lost by a restarted watcher: the confirm window",
	    { "firing", STOPPING,
		"stop_result,\"status\":null,\"signal\":null,\"timed_out\":"
		"false,\"output\":\"the watcher restarted: the result is not "
		"known\"" },
	    NULL, 0, 0, "stop", 0, 0, 130, 50, 0, JUDGE_ACT_WAIT, 710, NULL },
	{ "exit 0: the confirm window, not a backoff",
	    { "firing", STOPPING, EXIT0 }, NULL, 0, 0, "stop", 0, 0, 150, 50, 0,
	    JUDGE_ACT_WAIT, 710, NULL },
	{ "exit 0, then exit 127: the first failure's 30 s",
	    { "firing", STOPPING, EXIT0, "stop_retry", STOPPING, EXIT127 },
	    NULL, 0, 0, "stop", 0, 0, 160, 50, 0, JUDGE_ACT_WAIT, 180, NULL },
	{ "exit 0, exit 127, exit 127: stop_failed",
	    { "firing", STOPPING, EXIT0, "stop_retry", STOPPING, EXIT127,
		"stop_retry", STOPPING, EXIT127 },
	    NULL, 0, 0, "stop", 0, 0, 180, 50, 0, JUDGE_ACT_FAILED, 0,
	    "still running after 3 attempts, the last failed: exit 127" },
	{ "exit 127, then exit 0: its confirm window",
	    { "firing", STOPPING, EXIT127, "stop_retry", STOPPING, EXIT0 },
	    NULL, 0, 0, "stop", 0, 0, 200, 50, 0, JUDGE_ACT_WAIT, 740, NULL },
	{ "exit 127, then exit 0 still running: its one retry",
	    { "firing", STOPPING, EXIT127, "stop_retry", STOPPING, EXIT0 },
	    NULL, 0, 0, "stop", 0, 0, 740, 50, 0, JUDGE_ACT_RETRY, 0, NULL },
	{ "exit 127, exit 0, exit 0 still running: stop_failed",
	    { "firing", STOPPING, EXIT127, "stop_retry", STOPPING, EXIT0,
		"stop_retry", STOPPING, EXIT0 },
	    NULL, 0, 0, "stop", 0, 0, 770, 50, 0, JUDGE_ACT_FAILED, 0,
	    "still running after 3 attempts" },
	{ "stopped is the end", { "firing", "stopping", "stopped" }, NULL, 0, 0,
	    "stop", 0, 0, 9000, 8000, 0, JUDGE_ACT_NONE, 0, NULL },
	{ "skipped is the end", { "firing", "skipped" }, NULL, 0, 0, NULL, 0, 0,
	    9000, 50, 0, JUDGE_ACT_NONE, 0, NULL },
	{ "not fired: nothing to resume", { "armed", "warned" }, NULL, 0, 0,
	    "stop", 0, 0, 9000, 50, 0, JUDGE_ACT_NONE, 0, NULL },
	{ "skipped busy, never fired: nothing to resume",
	    { "armed", "skipped,\"reason\":\"busy: gpu 0 at 87%\"" }, NULL, 0,
	    0, "stop", 0, 0, 9000, 50, 0, JUDGE_ACT_NONE, 0, NULL },
};

/* Replay the entries (times 100, 110, ...) into js. */
static void
replay(struct judge_state *js, const char *const *entries)
{
	struct jsonr e;
	char line[512], event[64];
	const char *comma;
	size_t k, el;

	for (k = 0; k < MAXE && entries[k] != NULL; k++) {
		comma = strchr(entries[k], ',');
		el = comma != NULL ? (size_t)(comma - entries[k])
				   : strlen(entries[k]);
		memcpy(event, entries[k], el);
		event[el] = '\0';
		snprintf(line, sizeof line,
		    "{\"epoch\":\"0123456789abcdef\",\"seq\":%zu,\"time\":%zu,"
		    "\"event\":\"%s\",\"id\":\"d-1\"%s}",
		    k + 2, 100 + 10 * k, event, comma != NULL ? comma : "");
		ck_assert_msg(
		    jsonr_parse(line, strlen(line), &e, NULL) == 0, "%s", line);
		judge_replay(js, &e);
		jsonr_free(&e);
	}
}

/* The step s is the one wanted (wake for a wait, reason when given). */
static void
check_step(const char *name, const struct judge_step *s, enum judge_act want,
    long long wake, const char *reason)
{
	ck_assert_msg(s->act == want, "%s: act %d, want %d", name, (int)s->act,
	    (int)want);
	if (want == JUDGE_ACT_WAIT)
		ck_assert_int_eq(s->wake, wake);
	if (reason != NULL)
		ck_assert_str_eq(s->reason, reason);
}

START_TEST(test_replay)
{
	const struct replay_case *c = &replay_cases[_i];
	struct judge_state js = { NULL, 0, 0 };
	struct judge_task t = { c->before, c->must_succeed, 600, c->local, 0, 0,
		0, 0 };
	struct judge_step s;
	struct judge_fire *f;
	struct plan p;

	memset(&p, 0, sizeof p);
	p.stop_confirm_s = 600;
	p.stop_backoff_s[0] = 30;
	p.stop_backoff_s[1] = 120;
	p.stop_command = (char *)c->stop_command;
	p.stop_release = c->release;
	p.allow_release = c->allow_release;
	replay(&js, c->entries);
	ck_assert_ptr_nonnull(f = judge_find(&js, "d-1", 0));
	judge_fired(f, &t, &p, c->now, c->container_start, c->pid_alive, &s);
	check_step(c->name, &s, c->want, c->wake, c->reason);
	judge_state_free(&js);
}
END_TEST

/*
 * A stop taken to its end by the judge on a test clock, from "firing" at
 * 1000: each run of the stop command ends 1 s after it starts, as the
 * case's results say, one a run: 'f' exit 127 (not found), 'k' killed by
 * TERM, 'n' not started, '0' exit 0 with the machine still up.
 */
struct stop_case {
	const char *name;
	const char *results;
	long long backoff[2]; /* the plan's stop_backoff_s */
	const char *want;     /* the journal: "EVENT@TIME ..." */
	const char *reason;   /* stop_failed's */
};

static const struct stop_case stop_cases[] = {
	{ "exit 127 three times: 30 s, 2 min, stop_failed", "fff", { 30, 120 },
	    "firing@1000 stopping@1000 stop_result@1001 stop_retry@1031 "
	    "stopping@1031 stop_result@1032 stop_retry@1152 stopping@1152 "
	    "stop_result@1153 stop_failed@1153",
	    "the stop command failed 3 times: exit 127" },
	{ "killed by a signal three times", "kkk", { 30, 120 },
	    "firing@1000 stopping@1000 stop_result@1001 stop_retry@1031 "
	    "stopping@1031 stop_result@1032 stop_retry@1152 stopping@1152 "
	    "stop_result@1153 stop_failed@1153",
	    "the stop command failed 3 times: killed by TERM" },
	{ "not started three times", "nnn", { 30, 120 },
	    "firing@1000 stopping@1000 stop_result@1001 stop_retry@1031 "
	    "stopping@1031 stop_result@1032 stop_retry@1152 stopping@1152 "
	    "stop_result@1153 stop_failed@1153",
	    "the stop command failed 3 times: it could not be started" },
	{ "the backoffs are the plan's (the test knob)", "fff", { 2, 5 },
	    "firing@1000 stopping@1000 stop_result@1001 stop_retry@1003 "
	    "stopping@1003 stop_result@1004 stop_retry@1009 stopping@1009 "
	    "stop_result@1010 stop_failed@1010",
	    "the stop command failed 3 times: exit 127" },
	{ "exit 0, still up: the confirm window and one retry", "00",
	    { 30, 120 },
	    "firing@1000 stopping@1000 stop_result@1001 stop_retry@1600 "
	    "stopping@1600 stop_result@1601 stop_failed@2200",
	    "still running after the retry" },
	{ "exit 0, then exit 127 twice", "0ff", { 30, 120 },
	    "firing@1000 stopping@1000 stop_result@1001 stop_retry@1600 "
	    "stopping@1600 stop_result@1601 stop_retry@1631 stopping@1631 "
	    "stop_result@1632 stop_failed@1632",
	    "still running after 3 attempts, the last failed: exit 127" },
	{ "exit 127, then exit 0 twice", "f00", { 30, 120 },
	    "firing@1000 stopping@1000 stop_result@1001 stop_retry@1031 "
	    "stopping@1031 stop_result@1032 stop_retry@1631 stopping@1631 "
	    "stop_result@1632 stop_failed@2231",
	    "still running after 3 attempts" },
};

/* The journal of d-1 written so far, and its "EVENT@TIME" list. */
struct sim {
	char lines[16][320];
	size_t n;
	char got[512];
};

/* Journal event (with extra JSON members) of d-1 at t; js takes it in. */
static void
sim_log(struct sim *sm, struct judge_state *js, long long t, const char *event,
    const char *extra)
{
	struct jsonr e;
	char *line;
	size_t l = strlen(sm->got);

	ck_assert_uint_lt(sm->n, 16);
	line = sm->lines[sm->n++];
	snprintf(line, sizeof sm->lines[0],
	    "{\"epoch\":\"0123456789abcdef\",\"seq\":%zu,\"time\":%lld,"
	    "\"event\":\"%s\",\"id\":\"d-1\"%s}",
	    sm->n + 1, t, event, extra);
	ck_assert_int_eq(jsonr_parse(line, strlen(line), &e, NULL), 0);
	judge_replay(js, &e);
	jsonr_free(&e);
	snprintf(sm->got + l, sizeof sm->got - l, "%s%s@%lld", l > 0 ? " " : "",
	    event, t);
}

/* The members of a stop_result that ends a run as result r says. */
static const char *
sim_result(char r)
{
	switch (r) {
	case 'f':
		return END127;
	case 'k':
		return ",\"status\":null,\"signal\":15,\"timed_out\":false";
	case 'n':
		return ",\"status\":null,\"signal\":null,\"timed_out\":false,"
		       "\"output\":\"fork: no memory\"";
	}
	return END0;
}

/*
 * The step at now of the watcher that wrote sm (its state js), which a
 * watcher started now, replaying sm's journal from nothing, must take too.
 */
static void
sim_step(const struct sim *sm, struct judge_state *js,
    const struct judge_task *t, const struct plan *p, long long now,
    struct judge_step *s)
{
	struct judge_state fresh = { NULL, 0, 0 };
	struct judge_step s2;
	struct jsonr e;
	size_t k;

	judge_fired(judge_find(js, "d-1", 0), t, p, now, 50, 0, s);
	for (k = 0; k < sm->n; k++) {
		ck_assert_int_eq(
		    jsonr_parse(sm->lines[k], strlen(sm->lines[k]), &e, NULL),
		    0);
		judge_replay(&fresh, &e);
		jsonr_free(&e);
	}
	judge_fired(judge_find(&fresh, "d-1", 0), t, p, now, 50, 0, &s2);
	ck_assert_msg(s2.act == s->act && s2.wake == s->wake,
	    "at %lld the replayed watcher does %d (wake %lld), the running "
	    "one %d (wake %lld)",
	    now, (int)s2.act, s2.wake, (int)s->act, s->wake);
	if (s->reason != NULL)
		ck_assert_str_eq(s2.reason, s->reason);
	judge_state_free(&fresh);
}

START_TEST(test_stop_clock)
{
	const struct stop_case *c = &stop_cases[_i];
	struct judge_state js = { NULL, 0, 0 };
	struct judge_task t = { NULL, 0, 600, 0, 0, 0, 0, 0 };
	struct judge_step s;
	struct plan p;
	struct sim sm;
	char extra[160];
	long long now = 1000;
	size_t attempt = 0, n;
	char r;

	memset(&p, 0, sizeof p);
	memset(&sm, 0, sizeof sm);
	p.stop_confirm_s = 600;
	p.stop_backoff_s[0] = c->backoff[0];
	p.stop_backoff_s[1] = c->backoff[1];
	p.stop_command = "/nonexistent/shutdown";
	sim_log(&sm, &js, now, "firing", ",\"reason\":\"deadline\"");
	for (n = 0; n < 32; n++) {
		sim_step(&sm, &js, &t, &p, now, &s);
		if (s.act == JUDGE_ACT_WAIT) {
			ck_assert_int_gt(s.wake, now);
			now = s.wake;
		} else if (s.act == JUDGE_ACT_RETRY)
			sim_log(&sm, &js, now, "stop_retry", "");
		else if (s.act == JUDGE_ACT_FAILED) {
			ck_assert_str_eq(s.reason, c->reason);
			snprintf(extra, sizeof extra, ",\"reason\":\"%s\"",
			    s.reason);
			sim_log(&sm, &js, now, "stop_failed", extra);
			break;
		} else {
			ck_assert_msg(s.act == JUDGE_ACT_STOP, "%s: act %d",
			    c->name, (int)s.act);
			ck_assert_uint_lt(attempt, strlen(c->results));
			r = c->results[attempt++];
			sim_log(&sm, &js, now, "stopping",
			    r == 'n' ? ",\"pid\":null,\"pid_start\":null"
				     : ",\"pid\":77,\"pid_start\":5");
			now++;
			sim_log(&sm, &js, now, "stop_result", sim_result(r));
		}
	}
	ck_assert_str_eq(sm.got, c->want);
	sim_step(&sm, &js, &t, &p, now + 86400, &s);
	ck_assert_int_eq(s.act, JUDGE_ACT_NONE);
	judge_state_free(&js);
}
END_TEST

/* A plan's backoffs, where the file says nothing of them: 30 s, 2 min. */
START_TEST(test_backoff_default)
{
	static const char doc[] = "{\"version\":1}";
	struct plan p;

	ck_assert_int_eq(plan_parse(doc, sizeof doc - 1, &p, NULL), 0);
	ck_assert_int_eq(p.stop_backoff_s[0], 30);
	ck_assert_int_eq(p.stop_backoff_s[1], 120);
	plan_free(&p);
}
END_TEST

struct hold_case {
	const char *name;
	const char *entries[MAXE];
	int plan_hold, must, release_kind, local, released_file;
	const char *before;
	long long now;
	enum judge_act want;
	long long wake;
	const char *reason;
};

#define FIRING_HOLD "firing,\"hold\":{\"wait\":60,\"must\":false}"
#define HELD	    "held,\"since\":110,\"wait\":60,\"must\":false"
#define HELD_MUST   "held,\"since\":110,\"wait\":60,\"must\":true"

/* A held stop (agent/WATCH.md "Held stops"); entries at 100, 110, ... */
static const struct hold_case hold_cases[] = {
	{ "firing with a hold: held", { FIRING_HOLD }, 0, 0, 0, 0, 0, NULL, 100,
	    JUDGE_ACT_HOLD, 0, NULL },
	{ "the plan's hold, firing without: held", { "firing" }, 1, 0, 0, 0, 0,
	    NULL, 100, JUDGE_ACT_HOLD, 0, NULL },
	{ "no hold: stop", { "firing" }, 0, 0, 0, 0, 0, NULL, 100,
	    JUDGE_ACT_STOP, 0, NULL },
	{ "before_stop runs before the hold", { FIRING_HOLD }, 0, 0, 0, 0, 0,
	    "save", 100, JUDGE_ACT_BEFORE, 0, NULL },
	{ "before_stop done: held", { FIRING_HOLD, "before_stop,\"status\":0" },
	    0, 0, 0, 0, 0, "save", 120, JUDGE_ACT_HOLD, 0, NULL },
	{ "held: waits out the wait", { FIRING_HOLD, HELD }, 0, 0, 0, 0, 0,
	    NULL, 150, JUDGE_ACT_WAIT, 170, NULL },
	{ "held, a release file: released", { FIRING_HOLD, HELD }, 0, 0, 0, 0,
	    1, NULL, 150, JUDGE_ACT_RELEASED, 0, NULL },
	{ "released: stop", { FIRING_HOLD, HELD, "released" }, 0, 0, 0, 0, 0,
	    NULL, 150, JUDGE_ACT_STOP, 0, NULL },
	{ "released, a local method: local_due",
	    { FIRING_HOLD, HELD, "released" }, 0, 0, 0, 1, 0, NULL, 150,
	    JUDGE_ACT_LOCAL_DUE, 0, NULL },
	{ "wait over, a stop method: hold_expired", { FIRING_HOLD, HELD }, 0, 0,
	    0, 0, 0, NULL, 170, JUDGE_ACT_HOLD_EXPIRED, 0, NULL },
	{ "hold_expired: stop", { FIRING_HOLD, HELD, "hold_expired" }, 0, 0, 0,
	    0, 0, NULL, 170, JUDGE_ACT_STOP, 0, NULL },
	{ "wait over, must: keeps waiting, said once",
	    { FIRING_HOLD, HELD_MUST }, 0, 0, 0, 0, 0, NULL, 200,
	    JUDGE_ACT_HOLD_KEPT, 0, "the pull must succeed" },
	{ "wait over, a release method: keeps waiting", { FIRING_HOLD, HELD },
	    0, 0, 1, 0, 0, NULL, 200, JUDGE_ACT_HOLD_KEPT, 0,
	    "a release method waits for the results" },
	{ "kept: waits on (a release wakes it)",
	    { FIRING_HOLD, HELD_MUST, "hold_kept" }, 0, 0, 0, 0, 0, NULL, 200,
	    JUDGE_ACT_WAIT, 3800, NULL },
	{ "kept, then a release file: released",
	    { FIRING_HOLD, HELD_MUST, "hold_kept" }, 0, 0, 0, 0, 1, NULL, 9000,
	    JUDGE_ACT_RELEASED, 0, NULL },
	{ "released by a cancel: skipped, never stopped",
	    { FIRING_HOLD, HELD, "released,\"by\":\"cancelled\"" }, 0, 0, 0, 0,
	    0, NULL, 150, JUDGE_ACT_SKIP, 0, "cancelled while held" },
	{ "released by the user: stop",
	    { FIRING_HOLD, HELD, "released,\"by\":\"user\"" }, 0, 0, 0, 0, 0,
	    NULL, 150, JUDGE_ACT_STOP, 0, NULL },
	{ "a release file before held is not looked at", { FIRING_HOLD }, 0, 0,
	    0, 0, 1, NULL, 100, JUDGE_ACT_HOLD, 0, NULL },
	{ "stopping after the release: the stop sequence as ever",
	    { FIRING_HOLD, HELD, "released",
		"stopping,\"pid\":7,"
		"\"pid_start\":5" },
	    0, 0, 0, 0, 0, NULL, 150, JUDGE_ACT_RESULT_LOST, 0, NULL },
	{ "the held entry alone holds (a plan without the deadline)",
	    { "firing", HELD }, 0, 0, 0, 0, 0, NULL, 150, JUDGE_ACT_WAIT, 170,
	    NULL },
};

START_TEST(test_hold)
{
	const struct hold_case *c = &hold_cases[_i];
	struct judge_state js = { NULL, 0, 0 };
	struct judge_task t = { c->before, 0, 600, c->local, c->plan_hold, 60,
		c->must, c->released_file };
	struct judge_step s;
	struct judge_fire *f;
	struct plan p;

	memset(&p, 0, sizeof p);
	p.stop_confirm_s = 600;
	p.stop_command = "stop";
	p.stop_release = c->release_kind;
	p.allow_release = c->release_kind;
	replay(&js, c->entries);
	ck_assert_ptr_nonnull(f = judge_find(&js, "d-1", 0));
	judge_fired(f, &t, &p, c->now, 50, 0, &s);
	check_step(c->name, &s, c->want, c->wake, c->reason);
	ck_assert_int_eq(judge_arms(&p, &js, 50), 1); /* held: still armed */
	judge_state_free(&js);
}
END_TEST

struct deadline_case {
	const char *name;
	const char *entries[4];
	long long at, warn_minutes, now;
	enum judge_act want;
	long long wake;
	long long container_start; /* 0: long before every at */
};

static const struct deadline_case deadline_cases[] = {
	{ "far ahead: wait for the warning", { NULL }, 10000, 5, 1000,
	    JUDGE_ACT_WAIT, 9700, 0 },
	{ "in the warning window: warn", { "armed" }, 10000, 5, 9800,
	    JUDGE_ACT_WARN, 0, 0 },
	{ "warned: wait for the deadline", { "armed", "warned" }, 10000, 5,
	    9800, JUDGE_ACT_WAIT, 10000, 0 },
	{ "no warning: wait for the deadline", { "armed" }, 10000, 0, 9990,
	    JUDGE_ACT_WAIT, 10000, 0 },
	{ "due: fire", { "armed", "warned" }, 10000, 5, 10000, JUDGE_ACT_FIRE,
	    0, 0 },
	{ "due and never warned: fire", { "armed" }, 10000, 5, 20000,
	    JUDGE_ACT_FIRE, 0, 0 },
	{ "a fired id never fires again", { "armed", "firing" }, 10000, 5,
	    20000, JUDGE_ACT_NONE, 0, 0 },
	{ "nor once its stop is over", { "firing", "stopping", "stopped" },
	    10000, 0, 20000, JUDGE_ACT_NONE, 0, 0 },
	{ "cancelled then armed again: fires", { "armed", "cancelled" }, 10000,
	    0, 20000, JUDGE_ACT_FIRE, 0, 0 },
	{ "skipped as busy: never fires (replayed after a restart)",
	    { "armed", "warned", "skipped" }, 10000, 5, 20000, JUDGE_ACT_NONE,
	    0, 0 },
	{ "skipped as busy: nor warns again", { "armed", "skipped" }, 10000, 5,
	    9800, JUDGE_ACT_NONE, 0, 0 },
	{ "skipped, then armed again by a plan: still final",
	    { "armed", "skipped", "armed" }, 10000, 0, 20000, JUDGE_ACT_NONE, 0,
	    0 },
	{ "its time came before the container started: skipped", { "armed" },
	    10000, 0, 20000, JUDGE_ACT_SKIP, 0, 15000 },
	{ "warned, then the machine was stopped and started: skipped",
	    { "armed", "warned" }, 10000, 5, 20000, JUDGE_ACT_SKIP, 0, 10001 },
	{ "a watcher dead in the same container fires late", { "armed" }, 10000,
	    5, 20000, JUDGE_ACT_FIRE, 0, 9000 },
	{ "the container started at its very time: fires", { "armed" }, 10000,
	    0, 10000, JUDGE_ACT_FIRE, 0, 10000 },
	{ "the container's start unknown: fires", { "armed" }, 10000, 0, 20000,
	    JUDGE_ACT_FIRE, 0, -1 },
	{ "ahead of its time in a new container: waits", { "armed" }, 30000, 0,
	    20000, JUDGE_ACT_WAIT, 30000, 15000 },
	{ "skipped once: nothing more", { "armed", "skipped" }, 10000, 0, 20000,
	    JUDGE_ACT_NONE, 0, 15000 },
};

/* A warning withheld (unless_busy, busy then): wait for the deadline. */
START_TEST(test_deadline_withheld)
{
	static const char *const entries[] = { "armed", NULL };
	struct judge_state js = { NULL, 0, 0 };
	struct plan_deadline d;
	struct judge_step s;
	struct judge_fire *f;

	memset(&d, 0, sizeof d);
	memcpy(d.id, "d-1", 4);
	d.at = 10000;
	d.warn_minutes = 5;
	d.unless_busy = 1;
	replay(&js, entries);
	ck_assert_ptr_nonnull(f = judge_find(&js, "d-1", 0));
	judge_deadline(&d, f, 9800, 0, &s);
	ck_assert_int_eq(s.act, JUDGE_ACT_WARN);
	f->warn_withheld = 1;
	judge_deadline(&d, f, 9800, 0, &s);
	ck_assert_int_eq(s.act, JUDGE_ACT_WAIT);
	ck_assert_int_eq(s.wake, 10000);
	judge_deadline(&d, f, 10000, 0, &s);
	ck_assert_int_eq(s.act, JUDGE_ACT_FIRE);
	judge_state_free(&js);
}
END_TEST

struct busy_case {
	const char *name;
	int has_autostop; /* else the defaults: 5 %, 1024 MiB */
	long long gpu_below, gpu_mem_mib;
	int gpu; /* JUDGE_GPU_* */
	size_t ngpus;
	long long util[2], mem[2], progress_age;
	const char *error;
	const char *want; /* NULL: not busy */
};

static const struct busy_case busy_cases[] = {
	{ "idle GPUs, no progress file", 0, 0, 0, OK, 2, { 0, 4 },
	    { 100, 1024 }, -1, NULL, NULL },
	{ "at the default 5 % is busy", 0, 0, 0, OK, 2, { 0, 5 }, { 0, 0 }, -1,
	    NULL, "busy: gpu 1 at 5%" },
	{ "a busy GPU", 0, 0, 0, OK, 1, { 87 }, { 0 }, -1, NULL,
	    "busy: gpu 0 at 87%" },
	{ "the policy's gpu_below: 87 % under 90", 1, 90, 1024, OK, 1, { 87 },
	    { 0 }, -1, NULL, NULL },
	{ "the policy's gpu_below: 60 % over 50", 1, 50, 1024, OK, 1, { 60 },
	    { 0 }, -1, NULL, "busy: gpu 0 at 60%" },
	{ "a process over the default 1024 MiB", 0, 0, 0, OK, 1, { 0 },
	    { 1025 }, -1, NULL, "busy: gpu 0 has 1025 MiB in use" },
	{ "the policy's gpu_mem_mib", 1, 5, 4096, OK, 1, { 0 }, { 2048 }, -1,
	    NULL, NULL },
	{ "unknown utilisation is busy", 0, 0, 0, OK, 1, { -1 }, { 0 }, -1,
	    NULL, "busy: gpu 0 utilisation unknown" },
	{ "nvidia-smi failing is busy", 0, 0, 0, ERR, 0, { 0 }, { 0 }, -1,
	    "NVIDIA-SMI has failed",
	    "busy: nvidia-smi failed: NVIDIA-SMI has failed" },
	{ "no GPUs, no progress file: idle", 0, 0, 0, NONE, 0, { 0 }, { 0 }, -1,
	    NULL, NULL },
	{ "progress 2 min ago", 0, 0, 0, OK, 1, { 0 }, { 0 }, 120, NULL,
	    "busy: progress file changed 2 min ago" },
	{ "progress 30 s ago, no GPUs", 0, 0, 0, NONE, 0, { 0 }, { 0 }, 30,
	    NULL, "busy: progress file changed 30 s ago" },
	{ "progress 599 s ago", 0, 0, 0, OK, 1, { 0 }, { 0 }, 599, NULL,
	    "busy: progress file changed 9 min ago" },
	{ "progress 10 min ago: idle", 0, 0, 0, OK, 1, { 0 }, { 0 }, 600, NULL,
	    NULL },
	{ "a busy GPU is named before the progress file", 0, 0, 0, OK, 1,
	    { 99 }, { 0 }, 5, NULL, "busy: gpu 0 at 99%" },
};

START_TEST(test_unless_busy)
{
	const struct busy_case *c = &busy_cases[_i];
	struct plan_autostop a;
	struct judge_sample s;
	struct plan p;
	char why[256] = "";
	size_t k;
	int busy;

	memset(&p, 0, sizeof p);
	p.has_autostop = c->has_autostop;
	p.autostop.gpu_below = c->gpu_below;
	p.autostop.gpu_mem_mib = c->gpu_mem_mib;
	judge_unless_policy(&p, &a);
	memset(&s, 0, sizeof s);
	s.gpu_state = c->gpu;
	s.ngpus = c->ngpus;
	for (k = 0; k < c->ngpus; k++) {
		s.util[k] = c->util[k];
		s.mem_mib[k] = c->mem[k];
	}
	s.sessions = 3; /* sessions and jobs do not count */
	s.jobs = 1;
	s.progress_age_s = c->progress_age;
	busy = judge_unless_busy(&a, &s, c->error, why, sizeof why);
	ck_assert_msg(
	    busy == (c->want != NULL), "%s: busy %d [%s]", c->name, busy, why);
	if (c->want != NULL)
		ck_assert_msg(strcmp(why, c->want) == 0, "%s: [%s] want [%s]",
		    c->name, why, c->want);
}
END_TEST

START_TEST(test_deadline)
{
	const struct deadline_case *c = &deadline_cases[_i];
	struct judge_state js = { NULL, 0, 0 };
	struct plan_deadline d;
	struct judge_step s;

	memset(&d, 0, sizeof d);
	memcpy(d.id, "d-1", 4);
	d.at = c->at;
	d.warn_minutes = c->warn_minutes;
	replay(&js, c->entries);
	judge_deadline(
	    &d, judge_find(&js, "d-1", 0), c->now, c->container_start, &s);
	ck_assert_msg(s.act == c->want, "%s: act %d, want %d", c->name,
	    (int)s.act, (int)c->want);
	if (c->want == JUDGE_ACT_WAIT)
		ck_assert_int_eq(s.wake, c->wake);
	if (c->want == JUDGE_ACT_SKIP)
		ck_assert_str_eq(
		    s.reason, "the container started after its time");
	judge_state_free(&js);
}
END_TEST

struct arms_case {
	const char *name;
	const char *entries[4]; /* "EVENT ID" lines of the journal */
	int deadline;		/* the plan has deadline d-1 */
	int autostop;		/* the plan has autostop a-1 */
	long long container_start;
	int want;
};

/* Whether a plan leaves the watcher anything to do (judge_arms). */
static const struct arms_case arms_cases[] = {
	{ "nothing in the plan", { NULL }, 0, 0, 100, 0 },
	{ "a deadline not fired", { "armed d-1" }, 1, 0, 100, 1 },
	{ "a deadline fired and stopped",
	    { "firing d-1", "stopping d-1", "stopped d-1" }, 1, 0, 100, 0 },
	{ "a fired stop not done (killed mid-stop)",
	    { "firing d-1", "stopping d-1" }, 1, 0, 100, 1 },
	{ "an autostop policy", { NULL }, 0, 1, 100, 1 },
	{ "autostop fired in this container, its stop done",
	    { "firing a-1@100", "stopping a-1@100", "stopped a-1@100" }, 0, 1,
	    100, 0 },
	{ "autostop fired in an earlier container",
	    { "firing a-1@100", "stopping a-1@100", "stopped a-1@100" }, 0, 1,
	    200, 1 },
	{ "a deadline skipped as busy", { "armed d-1", "skipped d-1" }, 1, 0,
	    100, 0 },
};

START_TEST(test_arms)
{
	const struct arms_case *c = &arms_cases[_i];
	struct judge_state js = { NULL, 0, 0 };
	struct plan_deadline d;
	struct plan p;
	struct jsonr e;
	char line[256], event[32], id[32];
	size_t k;

	memset(&p, 0, sizeof p);
	memset(&d, 0, sizeof d);
	memcpy(d.id, "d-1", 4);
	if (c->deadline) {
		p.deadlines = &d;
		p.ndeadlines = 1;
	}
	p.has_autostop = c->autostop;
	memcpy(p.autostop.id, "a-1", 4);
	for (k = 0; k < 4 && c->entries[k] != NULL; k++) {
		ck_assert_int_eq(
		    sscanf(c->entries[k], "%31s %31s", event, id), 2);
		snprintf(line, sizeof line,
		    "{\"epoch\":\"0123456789abcdef\",\"seq\":%zu,"
		    "\"time\":%zu,\"event\":\"%s\",\"id\":\"%s\"}",
		    k + 2, 100 + 10 * k, event, id);
		ck_assert_int_eq(jsonr_parse(line, strlen(line), &e, NULL), 0);
		judge_replay(&js, &e);
		jsonr_free(&e);
	}
	ck_assert_msg(judge_arms(&p, &js, c->container_start) == c->want,
	    "%s: want %d", c->name, c->want);
	judge_state_free(&js);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("agent_watch");
	TCase *tc = tcase_create("core");
	SRunner *sr;
	int failed;

	tcase_add_loop_test(
	    tc, test_idle, 0, (int)(sizeof idle_cases / sizeof idle_cases[0]));
	tcase_add_test(tc, test_idle_evidence);
	tcase_add_loop_test(tc, test_replay, 0,
	    (int)(sizeof replay_cases / sizeof replay_cases[0]));
	tcase_add_loop_test(tc, test_stop_clock, 0,
	    (int)(sizeof stop_cases / sizeof stop_cases[0]));
	tcase_add_test(tc, test_backoff_default);
	tcase_add_loop_test(
	    tc, test_arms, 0, (int)(sizeof arms_cases / sizeof arms_cases[0]));
	tcase_add_loop_test(tc, test_deadline, 0,
	    (int)(sizeof deadline_cases / sizeof deadline_cases[0]));
	tcase_add_test(tc, test_deadline_withheld);
	tcase_add_loop_test(
	    tc, test_hold, 0, sizeof hold_cases / sizeof hold_cases[0]);
	tcase_add_loop_test(tc, test_unless_busy, 0,
	    (int)(sizeof busy_cases / sizeof busy_cases[0]));
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}

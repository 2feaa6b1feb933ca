/*
 * Jobs (agent/job.c, agent/JOBS.md), one row per case: the spec's
 * validation (each bad field named), the state a job's files and its
 * processes give (from files in a temporary D and a fake proc root), the
 * last line of a log, and the watcher's part in judge.c: the replay of
 * job_started and job_ended, whether a job's --then stop fires or is
 * skipped (and why), that it fires once, and what keeps the watcher.
 */

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent.h"

struct spec_case {
	const char *name;
	const char *json;
	const char *cause; /* NULL: valid */
};

#define V "{\"version\":1,\"command\":\"python train.py\""

static const struct spec_case spec_cases[] = {
	{ "minimal", V "}", NULL },
	{ "the contract's example",
	    "{\"version\":1,\"name\":\"train\",\"command\":\"python train.py "
	    "--lr 3e-4\",\"cwd\":\"~/work\",\"env\":[[\"WANDB_MODE\","
	    "\"offline\"]],\"log_max_bytes\":67108864,\"created\":1764640000,"
	    "\"then\":{\"when\":\"always\",\"action\":\"stop\","
	    "\"warn_minutes\":0,\"before_stop\":null,"
	    "\"before_stop_timeout_s\":600,\"before_must_succeed\":false}}",
	    NULL },
	{ "unknown key", V ",\"cmd\":\"x\"}", "cmd: unknown key" },
	{ "unknown key in then",
	    V ",\"then\":{\"when\":\"always\",\"action\":\"stop\","
	      "\"warn\":1}}",
	    "then.warn: unknown key" },
	{ "no version", "{\"command\":\"x\"}", "version: missing" },
	{ "version 2", "{\"version\":2,\"command\":\"x\"}",
	    "version: must be an integer 1-1" },
	{ "no command", "{\"version\":1}", "command: missing" },
	{ "empty command", "{\"version\":1,\"command\":\"\"}",
	    "command: must be a non-empty string" },
	{ "name with a space", V ",\"name\":\"my job\"}",
	    "name: must be 1-64 of A-Z a-z 0-9 . _ -" },
	{ "name of 65",
	    V ",\"name\":\"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	      "aaaaaaaaaaaaaaaaaaaaaaaaa\"}",
	    "name: must be 1-64 of A-Z a-z 0-9 . _ -" },
	{ "name of 64",
	    V ",\"name\":\"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	      "aaaaaaaaaaaaaaaaaaaaaaaa\"}",
	    NULL },
	{ "cwd not a string", V ",\"cwd\":3}",
	    "cwd: must be a non-empty string or null" },
	{ "env not pairs", V ",\"env\":[[\"A\"]]}",
	    "env[0]: must be a pair of strings [KEY, VALUE]" },
	{ "env bad key", V ",\"env\":[[\"A\",\"1\"],[\"1A\",\"x\"]]}",
	    "env[1].key: must be 1-128 of [A-Za-z_][A-Za-z0-9_]*" },
	{ "env empty key", V ",\"env\":[[\"\",\"x\"]]}",
	    "env[0].key: must be 1-128 of [A-Za-z_][A-Za-z0-9_]*" },
	{ "log_max_bytes too small", V ",\"log_max_bytes\":1048575}",
	    "log_max_bytes: must be an integer 1048576-17179869184" },
	{ "log_max_bytes too large", V ",\"log_max_bytes\":17179869185}",
	    "log_max_bytes: must be an integer 1048576-17179869184" },
	{ "log_max_bytes a real", V ",\"log_max_bytes\":1.5e6}", "" },
	{ "then not an object", V ",\"then\":\"stop\"}",
	    "then: must be an object or null" },
	{ "then without when", V ",\"then\":{\"action\":\"stop\"}}",
	    "then.when: must be \"always\" or \"success\"" },
	{ "then bad action",
	    V ",\"then\":{\"when\":\"success\",\"action\":\"halt\"}}",
	    "then.action: must be \"stop\" or \"local\"" },
	{ "then warn_minutes too large",
	    V ",\"then\":{\"when\":\"always\",\"action\":\"local\","
	      "\"warn_minutes\":1441}}",
	    "then.warn_minutes: must be an integer 0-1440" },
	{ "then before_stop_timeout_s 0",
	    V ",\"then\":{\"when\":\"always\",\"action\":\"stop\","
	      "\"before_stop_timeout_s\":0}}",
	    "then.before_stop_timeout_s: must be an integer 1-86400" },
	{ "then before_must_succeed not a bool",
	    V ",\"then\":{\"when\":\"always\",\"action\":\"stop\","
	      "\"before_must_succeed\":1}}",
	    "then.before_must_succeed: must be true or false" },
	{ "then null", V ",\"then\":null}", NULL },
	{ "not an object", "[1]", "(top): must be an object" },
};

START_TEST(test_spec)
{
	const struct spec_case *c = &spec_cases[_i];
	struct job_spec s;
	char *cause = NULL;
	int r;

	r = job_spec_parse(c->json, strlen(c->json), 1000, &s, &cause);
	if (c->cause == NULL)
		ck_assert_msg(r == 0, "%s: %s", c->name, cause);
	else {
		ck_assert_msg(r != 0, "%s: accepted", c->name);
		ck_assert_ptr_nonnull(cause);
		if (c->cause[0] != '\0')
			ck_assert_msg(strcmp(cause, c->cause) == 0,
			    "%s: [%s], want [%s]", c->name, cause, c->cause);
	}
	free(cause);
	job_spec_free(&s);
}
END_TEST

/* A long command, 16 KiB + 1, and 65 env pairs. */
START_TEST(test_spec_limits)
{
	struct buf b = { NULL, 0, 0 };
	struct job_spec s;
	char *cause = NULL;
	int i;

	buf_addstr(&b, "{\"version\":1,\"command\":\"");
	for (i = 0; i < JOB_COMMAND_MAX + 1; i++)
		buf_add(&b, "x", 1);
	buf_addstr(&b, "\"}");
	ck_assert_int_ne(job_spec_parse(b.data, b.len, 0, &s, &cause), 0);
	ck_assert_str_eq(cause, "command: longer than 16 KiB");
	free(cause);
	cause = NULL;
	job_spec_free(&s);
	buf_free(&b);

	buf_addstr(&b, V ",\"env\":[");
	for (i = 0; i < JOB_ENV_MAX + 1; i++)
		buf_addstr(&b, i == 0 ? "[\"A\",\"1\"]" : ",[\"A\",\"1\"]");
	buf_addstr(&b, "]}");
	ck_assert_int_ne(job_spec_parse(b.data, b.len, 0, &s, &cause), 0);
	ck_assert_str_eq(cause, "env: more than 64 pairs");
	free(cause);
	cause = NULL;
	job_spec_free(&s);
	buf_free(&b);

	buf_addstr(&b, V ",\"env\":[[\"K\",\"");
	for (i = 0; i < JOB_ENV_VALUE_MAX + 1; i++)
		buf_add(&b, "v", 1);
	buf_addstr(&b, "\"]]}");
	ck_assert_int_ne(job_spec_parse(b.data, b.len, 0, &s, &cause), 0);
	ck_assert_str_eq(cause, "env[0].value: longer than 4096 bytes");
	free(cause);
	job_spec_free(&s);
	buf_free(&b);
}
END_TEST

/* Defaults, and what spec.json holds: it reads back the same. */
START_TEST(test_spec_defaults)
{
	static const struct {
		const char *command, *name;
	} names[] = {
		{ "python train.py", "python" },
		{ "  /usr/bin/python3 -u x.py", "python3" },
		{ "./run+all.sh; echo", "run_all.sh" },
		{ "/", "job" },
	};
	struct job_spec s, t;
	struct jsonw w;
	char json[256], *cause = NULL;
	size_t i;

	for (i = 0; i < sizeof names / sizeof names[0]; i++) {
		snprintf(json, sizeof json,
		    "{\"version\":1,\"command\":\"%s\"}", names[i].command);
		ck_assert_int_eq(
		    job_spec_parse(json, strlen(json), 77, &s, &cause), 0);
		ck_assert_str_eq(s.name, names[i].name);
		ck_assert_str_eq(s.cwd, "~");
		ck_assert_int_eq(s.log_max_bytes, 64LL << 20);
		ck_assert_int_eq(s.created, 77);
		ck_assert_int_eq(s.then.set, 0);
		job_spec_free(&s);
	}
	snprintf(json, sizeof json,
	    V ",\"env\":[[\"K\",\"v\"]],\"then\":{\"when\":\"success\","
	      "\"action\":\"local\",\"before_stop\":\"save\"}}");
	ck_assert_int_eq(job_spec_parse(json, strlen(json), 5, &s, &cause), 0);
	jsonw_init(&w);
	job_spec_write(&w, &s);
	ck_assert_int_eq(
	    job_spec_parse(w.out.data, w.out.len, 9, &t, &cause), 0);
	ck_assert_str_eq(t.name, "python");
	ck_assert_int_eq(t.created, 5);
	ck_assert_int_eq((long long)t.nenv, 1);
	ck_assert_str_eq(t.env[1], "v");
	ck_assert(t.then.set && t.then.if_ok && t.then.local);
	ck_assert_str_eq(t.then.before_stop, "save");
	ck_assert_int_eq(t.then.before_stop_timeout_s, 600);
	ck_assert_str_eq(job_then_name(&t.then), "stop-if-ok");
	jsonw_free(&w);
	job_spec_free(&s);
	job_spec_free(&t);
}
END_TEST

struct state_case {
	const char *name;
	const char *pid;    /* the pid file, or NULL */
	const char *status; /* the status file, or NULL */
	int kill;	    /* a kill file */
	int sup_alive, job_alive;
	long long container_start;
	const char *want_state;
	const char *want_reason; /* "" none */
	long long want_exit;	 /* -1: null */
	const char *want_signal; /* NULL: none */
};

#define PID                                                                    \
	"{\"supervisor\":100,\"supervisor_start\":5000,\"pid\":101,"           \
	"\"pid_start\":5001,\"started\":1000}"

static const struct state_case state_cases[] = {
	{ "running", PID, NULL, 0, 1, 1, 500, "running", "", -1, NULL },
	{ "succeeded", PID, "{\"ended\":1010,\"exit\":0,\"signal\":null}", 0, 0,
	    0, 500, "succeeded", "", 0, NULL },
	{ "failed", PID, "{\"ended\":1010,\"exit\":3,\"signal\":null}", 0, 0, 0,
	    500, "failed", "", 3, NULL },
	{ "killed by a signal", PID,
	    "{\"ended\":1010,\"exit\":null,\"signal\":\"TERM\"}", 0, 0, 0, 500,
	    "killed", "", -1, "TERM" },
	{ "killed: a kill file, the exit kept", PID,
	    "{\"ended\":1010,\"exit\":143,\"signal\":null}", 1, 0, 0, 500,
	    "killed", "", 143, NULL },
	{ "a status wins over a restarted container", PID,
	    "{\"ended\":1010,\"exit\":0,\"signal\":null}", 0, 0, 0, 2000,
	    "succeeded", "", 0, NULL },
	{ "lost: the container restarted", PID, NULL, 0, 0, 0, 2000, "lost",
	    "the container restarted at 2000; the job started at 1000", -1,
	    NULL },
	{ "lost: the container restarted, processes seen all the same", PID,
	    NULL, 0, 1, 1, 2000, "lost",
	    "the container restarted at 2000; the job started at 1000", -1,
	    NULL },
	{ "lost: the supervisor vanished, the job too", PID, NULL, 0, 0, 0, 500,
	    "lost",
	    "its supervisor (pid 100) vanished without recording an exit "
	    "status; the job's process is gone too",
	    -1, NULL },
	{ "running unwatched", PID, NULL, 0, 0, 1, 500, "running",
	    "its supervisor (pid 100) vanished without recording an exit "
	    "status; the job's process 101 still runs, unwatched",
	    -1, NULL },
	{ "a recycled supervisor pid is not it", PID, NULL, 0, 2, 0, 500,
	    "lost",
	    "its supervisor (pid 100) vanished without recording an exit "
	    "status; the job's process is gone too",
	    -1, NULL },
	{ "never started", NULL, NULL, 0, 0, 0, 500, "lost",
	    "it was never started (no pid file)", -1, NULL },
};

/* Write text to path (or nothing when text is NULL). */
static void
put(const char *path, const char *text)
{
	FILE *f;

	if (text == NULL)
		return;
	ck_assert_ptr_nonnull(f = fopen(path, "w"));
	fputs(text, f);
	fclose(f);
}

/* A fake /proc/PID/stat with starttime start. */
static void
put_stat(const char *proc, long long pid, long long start)
{
	char path[512], text[256];

	snprintf(path, sizeof path, "%s/%lld", proc, pid);
	mkdir(path, 0700);
	snprintf(path, sizeof path, "%s/%lld/stat", proc, pid);
	snprintf(text, sizeof text,
	    "%lld (sh) S 1 %lld %lld 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 %lld "
	    "0 0\n",
	    pid, pid, pid, start);
	put(path, text);
}

START_TEST(test_state)
{
	const struct state_case *c = &state_cases[_i];
	char d[] = "/tmp/test_agent_job.XXXXXX", path[512], cs[64], sb[16];
	struct job j;

	ck_assert_ptr_nonnull(mkdtemp(d));
	snprintf(path, sizeof path, "%s/proc", d);
	mkdir(path, 0700);
	if (c->sup_alive)
		put_stat(path, 100, c->sup_alive == 2 ? 7777 : 5000);
	if (c->job_alive)
		put_stat(path, 101, 5001);
	snprintf(path, sizeof path, "%s/cs", d);
	snprintf(cs, sizeof cs, "%lld\n", c->container_start);
	put(path, cs);
	setenv("GPUFLEET_AGENT_CONTAINER_START", path, 1);
	snprintf(path, sizeof path, "%s/jobs", d);
	mkdir(path, 0700);
	snprintf(path, sizeof path, "%s/jobs/4", d);
	mkdir(path, 0700);
	snprintf(path, sizeof path, "%s/jobs/4/spec.json", d);
	put(path,
	    "{\"version\":1,\"command\":\"sleep 9\",\"created\":900,"
	    "\"then\":{\"when\":\"success\",\"action\":\"stop\"}}");
	snprintf(path, sizeof path, "%s/jobs/4/pid", d);
	put(path, c->pid);
	snprintf(path, sizeof path, "%s/jobs/4/status", d);
	put(path, c->status);
	snprintf(path, sizeof path, "%s/jobs/4/kill", d);
	put(path, c->kill ? "{}" : NULL);

	snprintf(path, sizeof path, "%s/proc", d);
	ck_assert_int_eq(job_load(d, path, 4, &j), 0);
	ck_assert_msg(strcmp(job_state_name(j.state), c->want_state) == 0,
	    "%s: state %s, want %s", c->name, job_state_name(j.state),
	    c->want_state);
	ck_assert_msg(strcmp(j.reason, c->want_reason) == 0,
	    "%s: reason [%s], want [%s]", c->name, j.reason, c->want_reason);
	if (c->want_exit < 0)
		ck_assert_msg(
		    !j.has_status || !j.exit.set, "%s: exit set", c->name);
	else
		ck_assert_int_eq(j.exit.v, c->want_exit);
	if (c->want_signal == NULL)
		ck_assert_int_eq(j.signal, 0);
	else
		ck_assert_str_eq(
		    job_signal_name(j.signal, sb, sizeof sb), c->want_signal);
	ck_assert_str_eq(j.spec.name, "sleep");
	if (c->pid != NULL)
		ck_assert_str_eq(j.fire_id, "j-4-1000");
	else { /* never started: its start is taken as its creation */
		ck_assert_int_eq(j.started, 900);
		ck_assert_str_eq(j.fire_id, "j-4-900");
	}
	job_free(&j);
	ck_assert_int_eq(job_load(d, path, 5, &j), -1);
	unsetenv("GPUFLEET_AGENT_CONTAINER_START");
	snprintf(path, sizeof path, "rm -rf '%s'", d);
	ck_assert_int_eq(system(path), 0);
}
END_TEST

/* A job still being started: a young directory without a pid file. */
START_TEST(test_state_starting)
{
	struct job j;

	memset(&j, 0, sizeof j);
	j.n = 1;
	j.created = 1000;
	job_judge(&j, 1000 + JOB_STARTING_S - 1);
	ck_assert_int_eq(j.state, JOB_STARTING);
	job_judge(&j, 1000 + JOB_STARTING_S);
	ck_assert_int_eq(j.state, JOB_LOST);
	ck_assert_int_eq(j.started, 1000); /* job ls says started = created */
}
END_TEST

struct line_case {
	const char *text;
	const char *want;
};

static const struct line_case line_cases[] = {
	{ "", "" },
	{ "\n\n\r\n", "" },
	{ "one\ntwo\n", "two" },
	{ "one\ntwo", "two" },
	{ "epoch 1  10%\repoch 1  20%\r", "epoch 1  20%" },
	{ "a\r\n\r\n", "a" },
	{ "x\n\n\n", "x" },
};

START_TEST(test_last_line)
{
	const struct line_case *c = &line_cases[_i];
	char out[JOB_LAST_LINE_MAX + 1];

	job_last_line(c->text, strlen(c->text), out, sizeof out);
	ck_assert_str_eq(out, c->want);
}
END_TEST

/* Only the last 4 KiB count; a long line is cut to 200 bytes. */
START_TEST(test_last_line_bounds)
{
	char text[10000], out[JOB_LAST_LINE_MAX + 1];

	memset(text, 'a', sizeof text);
	text[100] = '\n';
	job_last_line(text, sizeof text, out, sizeof out);
	ck_assert_int_eq((int)strlen(out), JOB_LAST_LINE_MAX);
	memset(text, '\n', sizeof text);
	memcpy(text, "early", 5); /* before the last 4 KiB: not seen */
	job_last_line(text, sizeof text, out, sizeof out);
	ck_assert_str_eq(out, "");
}
END_TEST

struct then_case {
	const char *name;
	const char *then; /* job_ended's "then" */
	const char *state, *exit, *signal, *reason;
	int want_stop;
	const char *want_skip; /* NULL: no then */
};

static const struct then_case then_cases[] = {
	{ "no then", "null", "succeeded", "0", "null", "null", 0, NULL },
	{ "stop after success", "\"stop\"", "succeeded", "0", "null", "null", 1,
	    "" },
	{ "stop after failure", "\"stop\"", "failed", "1", "null", "null", 1,
	    "" },
	{ "stop after a kill", "\"stop\"", "killed", "null", "\"TERM\"", "null",
	    1, "" },
	{ "stop after lost, supervisor vanished", "\"stop\"", "lost", "null",
	    "null", "\"its supervisor (pid 1) vanished\"", 1, "" },
	{ "stop, lost by a container restart", "\"stop\"", "lost", "null",
	    "null", "\"the container restarted at 9; the job started at 1\"", 0,
	    "the container restarted after the job started" },
	{ "stop-if-ok after success", "\"stop-if-ok\"", "succeeded", "0",
	    "null", "null", 1, "" },
	{ "stop-if-ok after failure", "\"stop-if-ok\"", "failed", "1", "null",
	    "null", 0, "job failed: exit 1" },
	{ "stop-if-ok after a signal", "\"stop-if-ok\"", "killed", "null",
	    "\"TERM\"", "null", 0, "killed by TERM" },
	{ "stop-if-ok after a kill that exited", "\"stop-if-ok\"", "killed",
	    "143", "null", "null", 0, "killed: exit 143" },
	{ "stop-if-ok, lost", "\"stop-if-ok\"", "lost", "null", "null",
	    "\"its supervisor (pid 1) vanished\"", 0, "lost" },
	{ "stop-if-ok, lost by a container restart", "\"stop-if-ok\"", "lost",
	    "null", "null",
	    "\"the container restarted at 9; the job started at 1\"", 0,
	    "the container restarted after the job started" },
};

/* Replay one entry (a JSON object's members after the event's). */
static void
replay1(
    struct judge_state *js, long long seq, const char *event, const char *rest)
{
	struct jsonr e;
	char line[1024];

	snprintf(line, sizeof line,
	    "{\"epoch\":\"0123456789abcdef\",\"seq\":%lld,\"time\":%lld,"
	    "\"event\":\"%s\"%s}",
	    seq, 1000 + seq, event, rest);
	ck_assert_msg(
	    jsonr_parse(line, strlen(line), &e, NULL) == 0, "%s", line);
	judge_replay(js, &e);
	jsonr_free(&e);
}

/* job_ended for job 3 with c's fields. */
static void
replay_ended(struct judge_state *js, const struct then_case *c)
{
	char rest[512];

	snprintf(rest, sizeof rest,
	    ",\"job\":3,\"name\":\"t\",\"state\":\"%s\",\"exit\":%s,"
	    "\"signal\":%s,\"reason\":%s,\"started\":900,\"ended\":1100,"
	    "\"duration_s\":200,\"then\":%s,\"fire_id\":\"j-3-900\","
	    "\"last_line\":null",
	    c->state, c->exit, c->signal, c->reason, c->then);
	replay1(js, 3, "job_ended", rest);
}

START_TEST(test_then)
{
	const struct then_case *c = &then_cases[_i];
	struct judge_state js = { NULL, 0, 0 };
	struct judge_fire *f;
	struct plan p;

	memset(&p, 0, sizeof p);
	replay1(&js, 2, "job_started",
	    ",\"job\":3,\"name\":\"t\",\"pid\":77,\"started\":900,"
	    "\"then\":null,\"fire_id\":\"j-3-900\"");
	ck_assert_ptr_nonnull(f = judge_find(&js, "j-3-900", 0));
	ck_assert(f->job_started && !f->job_ended);
	ck_assert_int_eq(f->job_n, 3);
	ck_assert_int_eq(judge_arms(&p, &js, 0), 0); /* files decide that */
	replay_ended(&js, c);
	ck_assert_ptr_nonnull(f = judge_find(&js, "j-3-900", 0));
	ck_assert(f->job_ended);
	ck_assert_int_eq(f->job_ended_at, 1100);
	ck_assert_msg(f->job_stop == c->want_stop, "%s: job_stop %d", c->name,
	    f->job_stop);
	ck_assert_int_eq(f->job_then, c->want_skip != NULL);
	if (c->want_skip != NULL)
		ck_assert_msg(strcmp(f->job_skip, c->want_skip) == 0,
		    "%s: skip [%s], want [%s]", c->name, f->job_skip,
		    c->want_skip);
	/* Pending until fired or skipped, then never again. */
	ck_assert_int_eq(judge_arms(&p, &js, 0), c->want_skip != NULL);
	replay1(&js, 4, c->want_stop ? "firing" : "skipped",
	    ",\"id\":\"j-3-900\",\"reason\":\"job\"");
	f = judge_find(&js, "j-3-900", 0);
	ck_assert_int_eq(judge_arms(&p, &js, 0), c->want_stop);
	judge_state_free(&js);
}
END_TEST

/*
 * A job's stop as a deadline: at its end plus warn_minutes, with the
 * spec's then; it fires at that time, once: a replayed "firing" (a
 * restarted watcher) makes it nothing, and its sequence goes on as any
 * deadline's; with no stop method in the plan it is skipped.
 */
START_TEST(test_then_deadline)
{
	static const struct then_case ok = { "", "\"stop\"", "succeeded", "0",
		"null", "null", 1, "" };
	struct judge_state js = { NULL, 0, 0 };
	struct job_then t;
	struct judge_task task = { NULL, 0, 0, 0, 0, 0, 0, 0 };
	struct plan_deadline d;
	struct judge_step s;
	struct judge_fire *f;
	struct plan p;

	memset(&p, 0, sizeof p);
	p.stop_confirm_s = 600;
	memset(&t, 0, sizeof t);
	t.set = 1;
	t.warn_minutes = 2;
	t.before_stop = "save";
	t.before_stop_timeout_s = 30;
	replay_ended(&js, &ok);
	f = judge_find(&js, "j-3-900", 0);
	judge_job_deadline(f, &t, &d);
	ck_assert_str_eq(d.id, "j-3-900");
	ck_assert_int_eq(d.at, 1100 + 120);
	ck_assert_int_eq(d.local, 0);
	ck_assert_str_eq(d.before_stop, "save");
	judge_deadline(&d, f, 1100, 500, &s);
	ck_assert_int_eq(s.act, JUDGE_ACT_WARN);
	replay1(&js, 4, "warned", ",\"id\":\"j-3-900\"");
	f = judge_find(&js, "j-3-900", 0);
	judge_deadline(&d, f, 1101, 500, &s);
	ck_assert_int_eq(s.act, JUDGE_ACT_WAIT);
	ck_assert_int_eq(s.wake, 1220);
	judge_deadline(&d, f, 1220, 500, &s);
	ck_assert_int_eq(s.act, JUDGE_ACT_FIRE);
	replay1(&js, 5, "firing", ",\"id\":\"j-3-900\",\"reason\":\"job\"");
	f = judge_find(&js, "j-3-900", 0);
	judge_deadline(&d, f, 1300, 500, &s);
	ck_assert_int_eq(s.act, JUDGE_ACT_NONE); /* once */
	task.before_stop = d.before_stop;
	task.before_must_succeed = 0;
	task.before_timeout_s = d.before_stop_timeout_s;
	task.local = d.local;
	judge_fired(f, &task, &p, 1300, 500, 0, &s);
	ck_assert_int_eq(s.act, JUDGE_ACT_BEFORE);
	replay1(&js, 6, "before_stop", ",\"id\":\"j-3-900\",\"status\":0");
	f = judge_find(&js, "j-3-900", 0);
	judge_fired(f, &task, &p, 1300, 500, 0, &s);
	ck_assert_int_eq(s.act, JUDGE_ACT_SKIP);
	ck_assert_str_eq(s.reason, "no stop method");
	p.stop_command = "/bin/true";
	judge_fired(f, &task, &p, 1300, 500, 0, &s);
	ck_assert_int_eq(s.act, JUDGE_ACT_STOP);
	task.local = 1;
	judge_fired(f, &task, &p, 1300, 500, 0, &s);
	ck_assert_int_eq(s.act, JUDGE_ACT_LOCAL_DUE);

	/* The spec gone: the laptop decides (local), at the end. */
	judge_job_deadline(f, NULL, &d);
	ck_assert_int_eq(d.local, 1);
	ck_assert_int_eq(d.at, 1100);
	/* A container started after its time: skipped, not fired. */
	judge_state_free(&js);
	replay_ended(&js, &ok);
	f = judge_find(&js, "j-3-900", 0);
	judge_job_deadline(f, &t, &d);
	judge_deadline(&d, f, 5000, 4000, &s);
	ck_assert_int_eq(s.act, JUDGE_ACT_SKIP);
	judge_state_free(&js);
}
END_TEST

/* Jobs pending (counted from the files by the caller) keep the watcher. */
START_TEST(test_arms_jobs)
{
	struct judge_state js = { NULL, 0, 0 };
	struct plan p;

	memset(&p, 0, sizeof p);
	ck_assert_int_eq(judge_arms(&p, &js, 0), 0);
	js.jobs_pending = 1;
	ck_assert_int_eq(judge_arms(&p, &js, 0), 1);
	judge_state_free(&js);
}
END_TEST

START_TEST(test_signals)
{
	char b[16];

	ck_assert_int_eq(job_signal_number("TERM"), SIGTERM);
	ck_assert_int_eq(job_signal_number("SIGKILL"), SIGKILL);
	ck_assert_int_eq(job_signal_number("9"), 9);
	ck_assert_int_eq(job_signal_number("0"), -1);
	ck_assert_int_eq(job_signal_number("65"), -1);
	ck_assert_int_eq(job_signal_number("NOPE"), -1);
	ck_assert_int_eq(job_signal_number("9x"), -1);
	ck_assert_str_eq(job_signal_name(SIGINT, b, sizeof b), "INT");
	ck_assert_str_eq(job_signal_name(40, b, sizeof b), "40");
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("agent_job");
	TCase *tc = tcase_create("core");
	SRunner *sr;
	int failed;

	tcase_add_loop_test(
	    tc, test_spec, 0, (int)(sizeof spec_cases / sizeof spec_cases[0]));
	tcase_add_test(tc, test_spec_limits);
	tcase_add_test(tc, test_spec_defaults);
	tcase_add_loop_test(tc, test_state, 0,
	    (int)(sizeof state_cases / sizeof state_cases[0]));
	tcase_add_test(tc, test_state_starting);
	tcase_add_loop_test(tc, test_last_line, 0,
	    (int)(sizeof line_cases / sizeof line_cases[0]));
	tcase_add_test(tc, test_last_line_bounds);
	tcase_add_loop_test(
	    tc, test_then, 0, (int)(sizeof then_cases / sizeof then_cases[0]));
	tcase_add_test(tc, test_then_deadline);
	tcase_add_test(tc, test_arms_jobs);
	tcase_add_test(tc, test_signals);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}

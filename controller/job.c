/* Jobs in the inventory, and the agent's job commands on held sessions. */

#include <stdlib.h>
#include <string.h>

#include "db.h"
#include "deploy.h"
#include "job.h"
#include "log.h"
#include "planwrite.h"
#include "status.h"
#include "xmalloc.h"

#define TIME_MIN   946684800LL /* 2000-01-01, as report.c */
#define TIME_AHEAD 86400
#define REASON_MAX 1024
#define ANSWER_MAX (8 * 1024 * 1024) /* job ls of many jobs */
#define STDERR_MAX 16384
#define JOB_MAX	   1000000000LL
#define PID_MAX	   4194304

struct pass {
	struct planwrite *pw;
	struct job_answer *ans;
	job_output_fn fn;
	void *arg;
};

static char *text_cut(json_t *, size_t);
static int parse_row(json_t *, int64_t, int64_t, struct job_row *);
static void row_clear(struct job_row *);
static int upsert(
    struct inventory *, int64_t, const struct job_row *, int64_t, int, char **);
static void on_output(struct engine_host *, int, const char *, size_t, void *);

/* A string member cut to max bytes (copied), or NULL. */
static char *
text_cut(json_t *v, size_t max)
{
	if (!json_is_string(v))
		return NULL;
	return xstrndup(json_string_value(v),
	    json_string_length(v) < max ? json_string_length(v) : max);
}

static void
row_clear(struct job_row *r)
{
	free(r->name);
	free(r->command);
	free(r->then);
	free(r->fire_id);
	free(r->reason);
	free(r->last_line);
	memset(r, 0, sizeof *r);
}

void
job_rows_free(struct job_row *rows, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		row_clear(&rows[i]);
	free(rows);
}

/*
 * A job as an instance describes it (a job ls entry, a job_started or
 * job_ended entry), checked, its times turned to the controller's clock
 * with skew. Fields it lacks stay empty. Returns 0 or -1.
 */
static int
parse_row(json_t *o, int64_t skew, int64_t now, struct job_row *r)
{
	json_t *v;
	const char *s;

	memset(r, 0, sizeof *r);
	v = json_object_get(o, "job");
	if (!json_is_integer(v) || json_integer_value(v) < 1 ||
	    json_integer_value(v) > JOB_MAX)
		return -1;
	r->job = json_integer_value(v);
	s = json_string_value(json_object_get(o, "fire_id"));
	if (s == NULL || !report_check_id(s))
		return -1;
	r->fire_id = xstrdup(s);
	s = json_string_value(json_object_get(o, "name"));
	r->name =
	    xstrdup(s != NULL && jobspec_check_name(s, NULL) == 0 ? s : "?");
	r->command =
	    text_cut(json_object_get(o, "command"), JOBSPEC_COMMAND_MAX);
	s = json_string_value(json_object_get(o, "then"));
	if (s != NULL &&
	    (strcmp(s, "stop") == 0 || strcmp(s, "stop-if-ok") == 0))
		r->then = xstrdup(s);
	v = json_object_get(o, "pid");
	if (json_is_integer(v) && json_integer_value(v) > 0 &&
	    json_integer_value(v) <= PID_MAX)
		r->pid = json_integer_value(v);
	v = json_object_get(o, "started");
	if (!json_is_integer(v) || json_integer_value(v) < TIME_MIN ||
	    json_integer_value(v) > now + skew + TIME_AHEAD)
		goto bad;
	r->started = json_integer_value(v) - skew;
	v = json_object_get(o, "ended");
	if (json_is_integer(v)) {
		if (json_integer_value(v) < TIME_MIN ||
		    json_integer_value(v) > now + skew + TIME_AHEAD)
			goto bad;
		r->ended = json_integer_value(v) - skew;
	}
	if (json_object_get(o, "state") != NULL &&
	    jobspec_read_end(o, &r->end) != 0)
		goto bad;
	r->reason = text_cut(json_object_get(o, "reason"), REASON_MAX);
	r->last_line =
	    text_cut(json_object_get(o, "last_line"), JOBSPEC_LAST_MAX);
	return 0;
bad:
	row_clear(r);
	return -1;
}

/*
 * Store job r of instance id. how: 0 everything (job ls; a stored end is
 * never made running again: the answer may predate it), 1 a start
 * (job_started: a row already there keeps what it has), 2 an end
 * (job_ended: the end fields), 3 run's record (what run knows of the job;
 * a row already there keeps its state and end: the daemon or a status may
 * have stored the end while run was still fanning out).
 */
static int
upsert(struct inventory *inv, int64_t id, const struct job_row *r, int64_t now,
    int how, char **cause)
{
#define UPSERT                                                                 \
	"INSERT INTO job (instance_id, job, name, command, then_stop, "        \
	"fire_id, pid, state, started, ended, exit, signal, reason, "          \
	"last_line, updated) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, "  \
	"?, ?) ON CONFLICT (instance_id, fire_id) DO UPDATE SET "
	static const char *const sql[] = { UPSERT
		"job = excluded.job, name = excluded.name, command = "
		"CASE WHEN length(excluded.command) > length(command) "
		"THEN excluded.command ELSE command END, then_stop = "
		"excluded.then_stop, pid = coalesce(excluded.pid, pid), "
		"state = excluded.state, started = excluded.started, "
		"ended = coalesce(excluded.ended, ended), exit = "
		"excluded.exit, signal = excluded.signal, reason = "
		"excluded.reason, last_line = excluded.last_line, "
		"updated = excluded.updated WHERE job.state = 'running' OR "
		"excluded.state <> 'running'",
		UPSERT "pid = coalesce(pid, excluded.pid)",
		UPSERT
		"state = excluded.state, ended = coalesce(excluded.ended, "
		"ended), exit = excluded.exit, signal = excluded.signal, "
		"reason = excluded.reason, last_line = "
		"excluded.last_line, updated = excluded.updated",
		UPSERT
		"name = excluded.name, command = CASE WHEN "
		"length(excluded.command) > length(command) THEN "
		"excluded.command ELSE command END, then_stop = "
		"coalesce(then_stop, excluded.then_stop), pid = coalesce(pid, "
		"excluded.pid)" };
#undef UPSERT
	const char *state = r->end.state[0] != '\0' ? r->end.state : "running";
	int rc;

	rc = db_exec(inv, sql[how], "storing a job", cause, "IIttttNtINntttI",
	    id, r->job, r->name != NULL ? r->name : "?",
	    r->command != NULL ? r->command : "", r->then, r->fire_id, r->pid,
	    state, r->started, r->ended,
	    (int64_t)(r->end.has_exit ? r->end.exit : -1),
	    r->end.signal[0] != '\0' ? r->end.signal : NULL, r->reason,
	    r->last_line, now);
	/* An end not timed (lost, as job ls tells it): when it was seen. */
	if (rc >= 0 && r->ended == 0 && strcmp(state, "running") != 0)
		rc = db_exec(inv,
		    "UPDATE job SET ended = ? WHERE instance_id = ? AND "
		    "fire_id = ? AND ended IS NULL",
		    "storing a job", cause, "IIt", now, id, r->fire_id);
	return rc < 0 ? rc : 0;
}

/*
 * Record a job run started (r's times already the controller's), at now:
 * its updated, which tells a job ls sent earlier that it may not list it.
 */
int
job_record(struct inventory *inv, int64_t id, const struct job_row *r,
    int64_t now, char **cause)
{
	return upsert(inv, id, r, now, 3, cause);
}

/*
 * Store job ls's answer (o: {"jobs":[...]}) for instance id, read at now
 * with clock skew. An entry that does not check out is left out (warned).
 * A running job stored before sent (when job ls was sent; 0: none) that
 * the answer does not list is lost (REMOTE_DIR/jobs emptied, a new disk);
 * one stored since may have started after the instance listed its jobs.
 */
int
job_store_ls(struct inventory *inv, int64_t id, int64_t now, int64_t skew,
    int64_t sent, json_t *o, char **cause)
{
	struct job_row r;
	json_t *v, *ids = json_array();
	char *list;
	size_t i, bad = 0;
	int rc;

	if ((rc = inventory_begin(inv, cause)) != 0) {
		json_decref(ids);
		return rc;
	}
	json_array_foreach(json_object_get(o, "jobs"), i, v)
	{
		if (json_is_string(json_object_get(v, "fire_id")))
			json_array_append(ids, json_object_get(v, "fire_id"));
		if (parse_row(v, skew, now, &r) != 0 ||
		    r.end.state[0] == '\0') {
			row_clear(&r);
			bad++;
			continue;
		}
		rc = upsert(inv, id, &r, now, 0, cause);
		row_clear(&r);
		if (rc != 0)
			goto fail;
	}
	list = json_dumps(ids, JSON_COMPACT);
	rc = db_exec(inv,
	    "UPDATE job SET state = 'lost', reason = 'its directory is gone "
	    "from the instance (REMOTE_DIR/jobs emptied, or a new disk)', "
	    "ended = coalesce(ended, ?), updated = ? WHERE instance_id = ? AND "
	    "state = 'running' AND updated < ? AND fire_id NOT IN (SELECT "
	    "value FROM json_each(?))",
	    "storing the jobs", cause, "IIIIt", now, now, id, sent, list);
	free(list);
	if (rc < 0)
		goto fail;
	json_decref(ids);
	if (bad > 0)
		warn_msg("%zu job%s in the agent's answer not valid, left out",
		    bad, bad == 1 ? "" : "s");
	return inventory_commit(inv, cause);
fail:
	json_decref(ids);
	inventory_rollback(inv);
	return rc;
}

/*
 * A journal entry of instance id that is about a job (job_started,
 * job_ended): store what it says. Others, and entries that do not check
 * out, change nothing. Runs in the caller's transaction.
 */
int
job_ingest(struct inventory *inv, int64_t id, int64_t skew, int64_t now,
    const struct report_entry *e, char **cause)
{
	struct job_row r;
	json_t *o;
	int how, rc = 0;

	if (strcmp(e->event, "job_started") == 0)
		how = 1;
	else if (strcmp(e->event, "job_ended") == 0)
		how = 2;
	else
		return 0;
	o = json_loads(e->entry, 0, NULL);
	if (parse_row(o, skew, now, &r) == 0 &&
	    (how == 1 || r.end.state[0] != '\0'))
		rc = upsert(inv, id, &r, now, how, cause);
	row_clear(&r);
	json_decref(o);
	return rc;
}

/* Every stored job of instance id, newest first. Free with job_rows_free. */
int
job_list(struct inventory *inv, int64_t id, struct job_row **out, size_t *n,
    char **cause)
{
	sqlite3_stmt *st;
	struct job_row *r;
	int rc, res;

	*out = NULL;
	*n = 0;
	if ((rc = db_prepare(inv, &st,
		 "SELECT job, name, command, then_stop, fire_id, pid, state, "
		 "started, ended, exit, signal, reason, last_line, updated "
		 "FROM "
		 "job WHERE instance_id = ? ORDER BY started DESC, job DESC",
		 "cannot read the jobs", cause, "I", id)) != 0)
		return rc;
	while ((res = sqlite3_step(st)) == SQLITE_ROW) {
		*out = xreallocarray(*out, *n + 1, sizeof **out);
		r = &(*out)[(*n)++];
		memset(r, 0, sizeof *r);
		r->instance_id = id;
		r->job = sqlite3_column_int64(st, 0);
		r->name = db_text(st, 1);
		r->command = db_text(st, 2);
		r->then = db_text(st, 3);
		r->fire_id = db_text(st, 4);
		r->pid = sqlite3_column_int64(st, 5);
		snprintf(r->end.state, sizeof r->end.state, "%s",
		    (const char *)sqlite3_column_text(st, 6));
		r->started = sqlite3_column_int64(st, 7);
		r->ended = sqlite3_column_int64(st, 8);
		r->end.has_exit = sqlite3_column_type(st, 9) != SQLITE_NULL;
		r->end.exit = sqlite3_column_int(st, 9);
		if (sqlite3_column_type(st, 10) == SQLITE_TEXT)
			snprintf(r->end.signal, sizeof r->end.signal, "%s",
			    (const char *)sqlite3_column_text(st, 10));
		r->reason = db_text(st, 11);
		r->last_line = db_text(st, 12);
		r->updated = sqlite3_column_int64(st, 13);
	}
	rc = db_finish(inv, st, res, "cannot read the jobs", cause);
	return rc < 0 ? rc : 0;
}

/* When instance id's jobs were last confirmed, or 0 (never). */
int64_t
job_as_of(struct inventory *inv, int64_t id)
{
	sqlite3_stmt *st;
	int64_t t = 0;

	if (db_prepare(inv, &st,
		"SELECT max(updated) FROM job WHERE instance_id = ?", NULL,
		NULL, "I", id) != 0)
		return 0;
	if (sqlite3_step(st) == SQLITE_ROW)
		t = sqlite3_column_int64(st, 0);
	sqlite3_finalize(st);
	return t;
}

static void
on_output(struct engine_host *eh, int is_stderr, const char *data, size_t len,
    void *arg)
{
	struct pass *p = arg;
	size_t i = (size_t)(eh - p->pw->rm->hosts);
	struct job_answer *a = &p->ans[i];

	if (p->fn != NULL && !is_stderr) {
		p->fn(i, is_stderr, data, len, p->arg);
		return;
	}
	misc_buf_add(is_stderr ? &a->err : &a->out, data, len,
	    is_stderr ? STDERR_MAX : ANSWER_MAX);
	if (p->fn != NULL)
		p->fn(i, is_stderr, data, len, p->arg);
}

/*
 * Run the agent with args[i] (quoted for sh, "$d" is REMOTE_DIR; NULL:
 * host i is left out, as is one that failed before) on the sessions pw's
 * probe holds, input[i] on its stdin (NULL: none). timeout: seconds, 0
 * for none; sigint: Ctrl-C ends the pass. fn (or NULL) gets the stdout
 * bytes as they come instead of ans[i].out; stderr is kept in ans[i].err
 * (and given to fn too). ans has pw->n entries, filled here; free with
 * job_answers_free. Returns 0, or -GF_EHOSTS when the loop cannot run.
 */
int
job_pass(struct planwrite *pw, char *const *args, const char *const *input,
    int timeout, int sigint, job_output_fn fn, void *arg,
    struct job_answer *ans)
{
	const struct agent_bin *ab = probe_agent(pw->p);
	const struct config *cf = pw->fleet->config;
	struct engine_settings set;
	struct pass p = { pw, ans, fn, arg };
	char **cmds = xcalloc(pw->n + 1, sizeof *cmds), *s;
	size_t i, n = 0;
	int r = 0;

	memset(ans, 0, pw->n * sizeof *ans);
	for (i = 0; i < pw->n; i++) {
		struct engine_host *eh = &pw->rm->hosts[i];
		eh->skip = args[i] == NULL || !pw->hosts[i].reached ||
		    pw->hosts[i].error != NULL;
		if (eh->skip)
			continue;
		free(eh->fail_msg);
		eh->fail_msg = NULL;
		eh->fail = EF_NONE;
		s = deploy_agent_command(pw->hosts[i].in, ab, args[i], 0);
		cmds[i] = deploy_sh_command(s);
		free(s);
		eh->command = cmds[i];
		eh->stdin_data = input != NULL ? input[i] : NULL;
		eh->stdin_len =
		    eh->stdin_data != NULL ? strlen(eh->stdin_data) : 0;
		n++;
	}
	if (n > 0) {
		memset(&set, 0, sizeof set);
		set.fanout = cf->fanout;
		set.handshake_window = cf->handshake_window;
		set.connect_timeout = cf->connect_timeout;
		set.setup_timeout = cf->setup_timeout;
		set.command_timeout = timeout;
		set.handle_sigint = sigint;
		pw->rm->ops.output = on_output;
		pw->rm->ops.done = NULL;
		pw->rm->ops.arg = &p;
		if (remote_run(pw->rm, &set) != 0)
			r = -GF_EHOSTS;
	}
	for (i = 0; i < pw->n; i++) {
		struct engine_host *eh = &pw->rm->hosts[i];
		if (!eh->skip && r == 0) {
			if (eh->fail != EF_NONE)
				ans[i].error = xstrdup(eh->fail_msg != NULL
					? eh->fail_msg
					: engine_fail_code(eh->fail));
			else if (eh->exit_signal != NULL)
				xasprintf(&ans[i].error,
				    "the agent was killed by signal %s",
				    eh->exit_signal);
			else {
				ans[i].ran = 1;
				ans[i].status = eh->exit_status;
			}
		}
		eh->skip = 0;
		eh->command = NULL;
		eh->stdin_data = NULL;
		eh->stdin_len = 0;
		free(cmds[i]);
	}
	free(cmds);
	return r;
}

void
job_answers_free(struct job_answer *ans, size_t n)
{
	size_t i;

	for (i = 0; ans != NULL && i < n; i++) {
		free(ans[i].error);
		free(ans[i].out.data);
		free(ans[i].err.data);
	}
	free(ans);
}

/*
 * Why a job command that ran failed: the agent's one line ("gpufleet-agent
 * job: REASON" less its prefix), or the deploy wrapper's reason. Caller
 * frees.
 */
char *
job_agent_error(const struct job_answer *a, const struct instance *in)
{
	static const char prefix[] = "gpufleet-agent job: ";
	const char *e = a->err.data != NULL ? a->err.data : "";
	size_t len;

	if (strncmp(e, prefix, sizeof prefix - 1) == 0) {
		e += sizeof prefix - 1;
		len = strcspn(e, "\n");
		return xstrndup(e, len);
	}
	if (a->status >= 2 && a->status <= 6 && *e != '\0')
		return xstrndup(e, strcspn(e, "\n"));
	return deploy_explain(a->status, a->err.data, in);
}

/*
 * How many jobs of instance id run with a --then stop (the plan's stop
 * method serves them); 0 when that cannot be read.
 */
size_t
job_then_running(struct inventory *inv, int64_t id)
{
	sqlite3_stmt *st;
	size_t n = 0;

	if (db_prepare(inv, &st,
		"SELECT count(*) FROM job WHERE instance_id = ? AND state = "
		"'running' AND then_stop IS NOT NULL",
		NULL, NULL, "I", id) != 0)
		return 0;
	if (sqlite3_step(st) == SQLITE_ROW)
		n = (size_t)sqlite3_column_int64(st, 0);
	sqlite3_finalize(st);
	return n;
}

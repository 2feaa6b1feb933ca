/* Schedule runs: the claim, the child gpufleet and its result (schedrun.h). */

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "actionlog.h"
#include "child.h"
#include "cmd.h"
#include "db.h"
#include "instance.h"
#include "log.h"
#include "misc.h"
#include "notify.h"
#include "schedrun.h"
#include "status.h"
#include "vis.h"
#include "xmalloc.h"

#define OUTPUT_MAX  (16 * 1024 * 1024) /* bytes of a child's output read */
#define STILL_GOING "the previous run is still going"

/* What one schedule_run row is to become, in the transaction of its claim. */
struct mark {
	const char *state;  /* running, missed or skipped */
	const char *reason; /* or NULL */
	const char *kind;   /* the action_log entry with it, or NULL */
	const char *why;
	const char
	    *missed; /* a schedule_missed entry for older ones, or NULL */
};

/* How a run ended, for the caller of finish. */
struct outcome {
	char *state;
	char *reason;
	json_t *result;
};

static char *runs_dir(char **);
static char **child_argv(const struct fleet *, const struct schedule *);
static void argv_free(char **);
static json_t *selected(struct inventory *, const char *);
static int running(struct inventory *, int64_t, int64_t *, char **);
static int settle(struct fleet *, int64_t, char **);
static void claim_test_gate(void);
static int claim(struct inventory *, const struct schedule *, int64_t, int,
    struct mark *, int64_t *, char **);
static int spawn(struct fleet *, const struct schedule *, int64_t, child_cb,
    void *, struct schedrun_child *, char **);
static json_t *host_result(enum schedule_action, json_t *, const char **);
static json_t *parse_output(enum schedule_action, const char *, int *);
static int finish(
    struct fleet *, int64_t, int, const char *, struct outcome *, char **);
static void outcome_clear(struct outcome *);
static int alive(const struct schedrun_child *);
static int notify_failed(
    struct inventory *, int64_t, const char *, const char *, char **);
static int pid_alive(pid_t, int64_t);
static int64_t proc_stat(pid_t, char *);

/* The folder of the runs' output files, made 0700. Caller frees. */
static char *
runs_dir(char **cause)
{
	char *dir =
	    misc_xdg_path("XDG_STATE_HOME", ".local/state", "gpufleet/runs");

	if (misc_mkdirs(dir, cause) != 0) {
		free(dir);
		return NULL;
	}
	return dir;
}

static void
argv_add(char ***v, size_t *n, const char *s)
{
	*v = xreallocarray(*v, *n + 2, sizeof **v);
	(*v)[(*n)++] = xstrdup(s);
	(*v)[*n] = NULL;
}

static void
argv_free(char **v)
{
	size_t i;

	for (i = 0; v != NULL && v[i] != NULL; i++)
		free(v[i]);
	free(v);
}

/*
 * The child's argv (SCHEDULE.md): this gpufleet with the fleet's database
 * and config, then the action's command with --json. Caller frees.
 */
static char **
child_argv(const struct fleet *f, const struct schedule *s)
{
	char **v = NULL, self[4096], warn[16];
	ssize_t len;
	size_t n = 0, i;
	json_t *cmd, *a;

	if ((len = readlink("/proc/self/exe", self, sizeof self - 1)) < 0)
		len = 0;
	self[len] = '\0';
	argv_add(&v, &n, self);
	argv_add(&v, &n, "--db");
	argv_add(&v, &n, f->db_path);
	if (f->config->path != NULL) {
		argv_add(&v, &n, "--config");
		argv_add(&v, &n, f->config->path);
	}
	switch (s->action) {
	case SCHED_EXEC:
		/*
		 * A string is the line for the remote shell; an array, the
		 * exact words (--argv, and every schedule stored before
		 * exec joined its words).
		 */
		cmd = s->command != NULL
		    ? json_loads(s->command, JSON_DECODE_ANY, NULL)
		    : NULL;
		argv_add(&v, &n, "exec");
		argv_add(&v, &n, s->selector);
		argv_add(&v, &n, "--json");
		if (json_is_array(cmd))
			argv_add(&v, &n, "--argv");
		argv_add(&v, &n, "--");
		if (json_is_string(cmd))
			argv_add(&v, &n, json_string_value(cmd));
		json_array_foreach(cmd, i, a)
		{
			if (json_is_string(a))
				argv_add(&v, &n, json_string_value(a));
		}
		json_decref(cmd);
		break;
	case SCHED_BACKUP:
		/* pull SELECTOR --json -- REMOTE_PATH... LOCAL_DIR */
		cmd = s->command != NULL
		    ? json_loads(s->command, JSON_DECODE_ANY, NULL)
		    : NULL;
		argv_add(&v, &n, "pull");
		argv_add(&v, &n, s->selector);
		argv_add(&v, &n, "--json");
		argv_add(&v, &n, "--");
		json_array_foreach(cmd, i, a)
		{
			if (json_is_string(a))
				argv_add(&v, &n, json_string_value(a));
		}
		json_decref(cmd);
		break;
	case SCHED_ROTATE:
		argv_add(&v, &n, "keys");
		argv_add(&v, &n, "rotate");
		argv_add(&v, &n, s->selector);
		argv_add(&v, &n, "--json");
		break;
	case SCHED_STATUS:
		argv_add(&v, &n, "status");
		argv_add(&v, &n, s->selector);
		argv_add(&v, &n, "--json");
		break;
	case SCHED_SHUTDOWN:
		argv_add(&v, &n, "shutdown");
		argv_add(&v, &n, s->selector);
		argv_add(&v, &n, "--now");
		argv_add(&v, &n, "--warn");
		snprintf(warn, sizeof warn, "%d", s->warn_minutes);
		argv_add(&v, &n, warn);
		if (s->before_stop != NULL) {
			argv_add(&v, &n, "--before");
			argv_add(&v, &n, s->before_stop);
		}
		if (s->unless_busy)
			argv_add(&v, &n, "--unless-busy");
		argv_add(&v, &n, "--json");
		break;
	}
	return v;
}

/* The names the selector picks now, as a JSON array (empty: none). */
static json_t *
selected(struct inventory *inv, const char *selector)
{
	struct instance *list = NULL;
	json_t *names = json_array();
	char *cause = NULL;
	size_t n = 0, i;

	if (inventory_select(inv, selector, &list, &n, &cause) != 0) {
		free(cause);
		return names;
	}
	for (i = 0; i < n; i++)
		json_array_append_new(names, json_string(list[i].name));
	instance_free_array(list, n);
	return names;
}

/*
 * Whether a run of schedule id is still going: 1 with its id in *run, 0
 * none, or -GF_EDB.
 */
static int
running(struct inventory *inv, int64_t id, int64_t *run, char **cause)
{
	sqlite3_stmt *st;
	int r;

	if ((r = db_prepare(inv, &st,
		 "SELECT id FROM schedule_run WHERE schedule_id = ? AND "
		 "state = 'running' LIMIT 1",
		 "reading the schedule runs", cause, "I", id)) != 0)
		return r;
	if ((r = sqlite3_step(st)) == SQLITE_ROW)
		*run = sqlite3_column_int64(st, 0);
	return db_finish(inv, st, r, "reading the schedule runs", cause);
}

/*
 * Finish the runs of schedule id left `running` whose child and runner
 * are both gone (a `schedule run` killed with its child, a daemon killed
 * before its child started): from the output file when it is whole, else
 * abandoned, so that they never block the next run. Returns 0 or -GF_EDB.
 */
static int
settle(struct fleet *f, int64_t id, char **cause)
{
	int64_t *dead = NULL;
	size_t n = 0, i;
	sqlite3_stmt *st;
	int r;

	if ((r = db_prepare(f->inv, &st,
		 "SELECT id, pid, pid_start, runner_pid, runner_start FROM "
		 "schedule_run WHERE schedule_id = ? AND state = 'running'",
		 "reading the schedule runs", cause, "I", id)) != 0)
		return r;
	while ((r = sqlite3_step(st)) == SQLITE_ROW) {
		if (pid_alive((pid_t)sqlite3_column_int64(st, 1),
			sqlite3_column_int64(st, 2)) ||
		    pid_alive((pid_t)sqlite3_column_int64(st, 3),
			sqlite3_column_int64(st, 4)))
			continue;
		dead = xreallocarray(dead, n + 1, sizeof *dead);
		dead[n++] = sqlite3_column_int64(st, 0);
	}
	r = db_finish(f->inv, st, r, "reading the schedule runs", cause);
	for (i = 0; i < n && r >= 0; i++) {
		info("run %lld: its child and its runner are gone",
		    (long long)dead[i]);
		r = finish(f, dead[i], -1, NULL, NULL, cause);
	}
	free(dead);
	return r < 0 ? r : 0;
}

/*
 * Test hook: with GPUFLEET_TEST_CLAIM_GATE=PATH, create PATH and wait
 * (up to 60 s) until it is removed, right before a claim's transaction.
 */
static void
claim_test_gate(void)
{
	struct timespec tick = { 0, 100 * 1000 * 1000 };
	const char *path = getenv("GPUFLEET_TEST_CLAIM_GATE");
	int fd, t;

	if (path == NULL || *path == '\0' ||
	    (fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0600)) == -1)
		return;
	close(fd);
	for (t = 0; t < 600 && access(path, F_OK) == 0; t++)
		nanosleep(&tick, NULL);
}

/*
 * The claim of occurrence occ of s (SCHEDULE.md): in one transaction,
 * considered_until moves to occ (a scheduled one; a manual run leaves it),
 * the row is inserted as m->state (with this process as its runner), and
 * the action_log entries of m are written. Nothing runs before this
 * commits, so an occurrence is never acted on twice. A run of s still
 * going, seen inside the transaction, makes a scheduled claim `skipped`
 * (m changed) and refuses a manual one (-GF_EUSAGE); a scheduled claim of
 * a schedule paused meanwhile is none. Returns 1 claimed (*run_id), 0
 * when it was handled already or is paused, or -GF_x.
 */
static int
claim(struct inventory *inv, const struct schedule *s, int64_t occ, int manual,
    struct mark *m, int64_t *run_id, char **cause)
{
	json_t *names = selected(inv, s->selector);
	int64_t now = (int64_t)time(NULL), going = 0, log_id = 0;
	int r, changed;

	claim_test_gate();
	if ((r = inventory_begin(inv, cause)) != 0)
		goto out;
	if ((r = running(inv, s->id, &going, cause)) < 0)
		goto fail;
	if (r == 1 && manual) {
		xasprintf(cause, "%s: %s (run %lld)", s->name, STILL_GOING,
		    (long long)going);
		r = -GF_EUSAGE;
		goto fail;
	}
	if (r == 1) {
		m->state = "skipped";
		m->kind = "schedule_skipped";
		m->reason = m->why = STILL_GOING;
	}
	/*
	 * s was read before this transaction: a pause committed since then
	 * holds (paused = 0 here), so nothing starts after `schedule pause`.
	 */
	if (!manual &&
	    (r = db_exec(inv,
		 "UPDATE schedule SET considered_until = ? WHERE id = ? AND "
		 "considered_until < ? AND paused = 0",
		 "claiming a schedule's occurrence", cause, "III", occ, s->id,
		 occ)) < 0)
		goto fail;
	changed = manual || sqlite3_changes(inv->db) > 0;
	r = db_exec(inv,
	    "SELECT 1 FROM schedule_run WHERE schedule_id = ? AND "
	    "occurrence = ? AND manual = ?",
	    "claiming a schedule's occurrence", cause, "IIi", s->id, occ,
	    manual);
	if (r < 0)
		goto fail;
	if (r == 1 || !changed) {
		inventory_rollback(inv);
		r = 0;
		goto out;
	}
	if ((r = db_exec(inv,
		 "INSERT INTO schedule_run (schedule_id, occurrence, manual, "
		 "state, reason, started_at, ended_at, runner_pid, "
		 "runner_start) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
		 "claiming a schedule's occurrence", cause, "IIittINII", s->id,
		 occ, manual, m->state, m->reason, now,
		 strcmp(m->state, "running") == 0 ? 0 : now, (int64_t)getpid(),
		 schedrun_pid_start(getpid()))) < 0)
		goto fail;
	*run_id = sqlite3_last_insert_rowid(inv->db);
	if (m->missed != NULL &&
	    ((r = actionlog_add(inv, now, "schedule_missed", s->name, names,
		  m->missed, NULL, &log_id, cause)) != 0 ||
		(r = notify_failed(inv, log_id, s->name, m->missed, cause)) !=
		    0))
		goto fail;
	if (m->kind != NULL &&
	    (r = actionlog_add(inv, now, m->kind, s->name, names, m->why, NULL,
		 NULL, cause)) != 0)
		goto fail;
	if ((r = inventory_commit(inv, cause)) == 0)
		r = 1;
	goto out;
fail:
	inventory_rollback(inv);
out:
	json_decref(names);
	return r;
}

/*
 * Queue a schedule_failed notification for action_log entry log_id
 * (a failed or abandoned run, missed occurrences), in the caller's
 * transaction.
 */
static int
notify_failed(struct inventory *inv, int64_t log_id, const char *name,
    const char *why, char **cause)
{
	char *what, *key;
	int r;

	xasprintf(&what, "schedule %s: %s", name, why);
	xasprintf(&key, "action:%lld", (long long)log_id);
	r = notifyqueue_add(inv, NOTIFY_SCHEDULE_FAILED, NULL,
	    (int64_t)time(NULL), what, "gpufleet events --since -1h", key,
	    cause);
	free(what);
	free(key);
	return r;
}

/*
 * Start the child of run run_id, stdout to runs/RUN_ID.out and stderr to
 * RUN_ID.err (0600), and record its pid. With cb it is a daemon's: a
 * tracked child (child.c: a process group of its own, so Ctrl-C at the
 * daemon's terminal does not reach it, reaped on the loop, cb told how
 * it ended); without, a manual run's, in the CLI's group (the caller
 * waits for it). The child waits on a pipe before it execs: it acts only
 * once its pid is committed, and exits 0 doing nothing when the pipe
 * closes without the go byte (the pid could not be recorded, or this
 * process died before). Returns 0 or -GF_x.
 */
static int
spawn(struct fleet *f, const struct schedule *s, int64_t run_id, child_cb cb,
    void *arg, struct schedrun_child *c, char **cause)
{
	char *dir, *out = NULL, *errpath = NULL, **argv;
	int fdo = -1, fde = -1, fdn = -1, gate[2] = { -1, -1 }, r = -GF_EHOSTS;
	struct child_spec spec = { 0 };
	pid_t pid;
	char go = 'g';

	if ((dir = runs_dir(cause)) == NULL)
		return -GF_EHOSTS;
	xasprintf(&out, "%s/%lld.out", dir, (long long)run_id);
	xasprintf(&errpath, "%s/%lld.err", dir, (long long)run_id);
	argv = child_argv(f, s);
	fdo = open(
	    out, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
	fde = open(errpath,
	    O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
	fdn = open("/dev/null", O_RDONLY | O_CLOEXEC);
	if (fdo == -1 || fde == -1 || fdn == -1) {
		xasprintf(cause, "cannot create %s: %s", out, strerror(errno));
		goto out;
	}
	if (pipe2(gate, O_CLOEXEC) == -1) {
		xasprintf(cause, "cannot start a child: %s", strerror(errno));
		goto out;
	}
	if (cb != NULL) {
		spec.argv = argv;
		spec.out_fd = fdo;
		spec.err_fd = fde;
		spec.gate_r = gate[0];
		spec.gate_w = gate[1];
		if (child_start(&spec, cb, arg, &pid, cause) != 0)
			goto out;
	} else if ((pid = fork()) == -1) {
		xasprintf(cause, "cannot start a child: %s", strerror(errno));
		goto out;
	} else if (pid == 0) {
		close(gate[1]);
		while ((r = (int)read(gate[0], &go, 1)) == -1 && errno == EINTR)
			;
		if (r != 1)
			_exit(0);
		dup2(fdn, STDIN_FILENO);
		dup2(fdo, STDOUT_FILENO);
		dup2(fde, STDERR_FILENO);
		execv(argv[0], argv);
		_exit(127);
	}
	close(gate[0]);
	gate[0] = -1;
	/* Test hook: die between the fork and the pid's record. */
	if (getenv("GPUFLEET_TEST_SPAWN_CRASH") != NULL)
		raise(SIGKILL);
	memset(c, 0, sizeof *c);
	c->run_id = run_id;
	c->pid = pid;
	c->pid_start = schedrun_pid_start(pid);
	c->own = 1;
	debug_f("run %lld of %s: pid %ld, output %s", (long long)run_id,
	    s->name, (long)pid, out);
	r = db_exec(f->inv,
	    "UPDATE schedule_run SET pid = ?, pid_start = ?, output = ? "
	    "WHERE id = ?",
	    "recording a schedule run's child", cause, "IItI", (int64_t)pid,
	    c->pid_start, out, run_id);
	if (r >= 0 && write(gate[1], &go, 1) == 1)
		r = 0;
	else {
		if (r >= 0) {
			xasprintf(
			    cause, "cannot start a child: %s", strerror(errno));
			r = -GF_EHOSTS;
		}
		/* Closed without the byte: it exits 0 doing nothing (a
		   daemon's is reaped on the loop). */
		close(gate[1]);
		gate[1] = -1;
		while (
		    cb == NULL && waitpid(pid, NULL, 0) == -1 && errno == EINTR)
			;
	}
out:
	if (gate[0] != -1)
		close(gate[0]);
	if (gate[1] != -1)
		close(gate[1]);
	if (fdo != -1)
		close(fdo);
	if (fde != -1)
		close(fde);
	if (fdn != -1)
		close(fdn);
	argv_free(argv);
	free(out);
	free(errpath);
	free(dir);
	return r;
}

/*
 * One host's result in the child's output as "ok" or a reason, its name
 * in *name; NULL when o is not one host's result.
 */
static json_t *
host_result(enum schedule_action a, json_t *o, const char **name)
{
	json_t *err = json_object_get(o, "error");
	const char *msg = json_string_value(json_object_get(err, "message"));
	json_int_t st;

	if ((*name = json_string_value(json_object_get(o, "name"))) == NULL)
		return NULL;
	if (json_is_string(err))
		msg = json_string_value(err);
	switch (a) {
	case SCHED_EXEC:
		if (msg != NULL)
			return json_string(msg);
		if (json_is_string(json_object_get(o, "signal")))
			return json_sprintf("killed by signal %s",
			    json_string_value(json_object_get(o, "signal")));
		st = json_integer_value(json_object_get(o, "exit_status"));
		return st == 0
		    ? json_string("ok")
		    : json_sprintf("exit status %lld", (long long)st);
	case SCHED_ROTATE:
		if (json_is_true(json_object_get(o, "ok")))
			return json_string("ok");
		return json_string(msg != NULL ? msg : "failed");
	case SCHED_STATUS: {
		const char *state =
		    json_string_value(json_object_get(o, "state"));
		if (state != NULL && strcmp(state, "up") == 0)
			return json_string("ok");
		return json_sprintf("%s%s%s", state != NULL ? state : "?",
		    msg != NULL ? ": " : "", msg != NULL ? msg : "");
	}
	case SCHED_SHUTDOWN:
		return json_string(msg != NULL ? msg : "ok");
	case SCHED_BACKUP: {
		const char *res =
		    json_string_value(json_object_get(o, "result"));
		if (res != NULL && strcmp(res, "ok") == 0)
			return json_string("ok");
		return json_string(msg != NULL ? msg : "failed");
	}
	}
	return NULL;
}

/*
 * The result per host in the child's output file: one object per line
 * (exec, keys rotate), one array (status, shutdown), or pull's object
 * with an array "instances" (backup). *whole is 0 when
 * the file ends inside a line or holds no complete array. New reference.
 */
static json_t *
parse_output(enum schedule_action a, const char *path, int *whole)
{
	json_t *res = json_object(), *all = NULL, *o, *v;
	struct misc_buf b = { 0 };
	char chunk[8192], *line, *nl;
	const char *name;
	size_t i, len;
	FILE *f;

	*whole = 0;
	if (path == NULL || (f = fopen(path, "r")) == NULL)
		return res;
	while ((len = fread(chunk, 1, sizeof chunk, f)) > 0)
		misc_buf_add(&b, chunk, len, OUTPUT_MAX);
	fclose(f);
	if (b.data == NULL || b.truncated) {
		free(b.data);
		return res;
	}
	if (a == SCHED_STATUS || a == SCHED_SHUTDOWN) {
		all = json_loadb(b.data, b.len, 0, NULL);
		*whole = json_is_array(all);
	} else if (a == SCHED_BACKUP) {
		/* pull --json: one object, the hosts in "instances" */
		o = json_loadb(b.data, b.len, 0, NULL);
		all = json_incref(json_object_get(o, "instances"));
		json_decref(o);
		*whole = json_is_array(all);
	} else {
		all = json_array();
		for (line = b.data; (nl = strchr(line, '\n')) != NULL;
		     line = nl + 1) {
			if ((o = json_loadb(line, nl - line, 0, NULL)) != NULL)
				json_array_append_new(all, o);
		}
		*whole = *line == '\0';
	}
	json_array_foreach(all, i, o)
	{
		if ((v = host_result(a, o, &name)) != NULL)
			json_object_set_new(res, name, v);
	}
	json_decref(all);
	free(b.data);
	return res;
}

/*
 * The state of a run from its result and how its child ended (wstatus
 * from waitpid, or -1 when not known: a child not ours); *reason says why
 * when not ok (caller frees).
 */
static const char *
judge(json_t *res, int whole, int wstatus, char **reason)
{
	const char *name;
	json_t *v;
	size_t nfail = 0;

	*reason = NULL;
	json_object_foreach(res, name, v) nfail +=
	    strcmp(json_string_value(v), "ok") != 0;
	if (wstatus == -1 && !whole) {
		*reason = xstrdup("the runner died before it gave a whole "
				  "result");
		return "abandoned";
	}
	if (wstatus != -1 && WIFSIGNALED(wstatus)) {
		xasprintf(reason, "the runner was killed by signal %d",
		    WTERMSIG(wstatus));
		return "failed";
	}
	if (!whole || nfail > 0 || (wstatus != -1 && WEXITSTATUS(wstatus))) {
		if (nfail > 0)
			xasprintf(reason, "%zu of %zu hosts failed", nfail,
			    json_object_size(res));
		else if (!whole)
			*reason = xstrdup("the runner gave no whole result");
		else
			xasprintf(reason, "the runner exited with status %d",
			    WEXITSTATUS(wstatus));
		return "failed";
	}
	return "ok";
}

/*
 * Finish run run_id: its result per host from the output file (a host the
 * selector names but the file does not gets "no result"), its state
 * (abandoned with why when why is set), the row and an action_log entry
 * schedule_run. wstatus: from waitpid, or -1 when not known. A run
 * finished already (or whose schedule was removed) is left alone. With
 * oc the outcome is kept for the caller (outcome_clear).
 */
static int
finish(struct fleet *f, int64_t run_id, int wstatus, const char *why,
    struct outcome *oc, char **cause)
{
	struct inventory *inv = f->inv;
	struct schedule s;
	sqlite3_stmt *st;
	char *output = NULL, *name = NULL, *reason = NULL, *text, *when,
	     *logwhy;
	int64_t occ = 0, log_id = 0;
	int manual = 0, whole, r;
	const char *state, *k;
	json_t *res, *names, *v;
	size_t i;

	if ((r = db_prepare(inv, &st,
		 "SELECT r.output, r.occurrence, r.manual, s.name FROM "
		 "schedule_run r JOIN schedule s ON s.id = r.schedule_id "
		 "WHERE r.id = ? AND r.state = 'running'",
		 "reading a schedule run", cause, "I", run_id)) != 0)
		return r;
	if ((r = sqlite3_step(st)) == SQLITE_ROW) {
		output = db_text(st, 0);
		occ = sqlite3_column_int64(st, 1);
		manual = sqlite3_column_int(st, 2);
		name = db_text(st, 3);
	}
	if ((r = db_finish(inv, st, r, "reading a schedule run", cause)) <= 0)
		return r;
	memset(&s, 0, sizeof s);
	if ((r = schedule_get(inv, name, &s, cause)) != 0)
		goto out;
	res = parse_output(s.action, output, &whole);
	names = selected(inv, s.selector);
	json_array_foreach(names, i, v)
	{
		k = json_string_value(v);
		if (json_object_get(res, k) == NULL)
			json_object_set_new(res, k, json_string("no result"));
	}
	state = judge(res, whole, wstatus, &reason);
	if (why != NULL) {
		state = "abandoned";
		free(reason);
		reason = xstrdup(why);
	}
	text = json_dumps(res, JSON_COMPACT | JSON_SORT_KEYS);
	when = instance_format_time(occ);
	xasprintf(&logwhy, "%s run of %s: %s%s%s", manual ? "manual" : "the",
	    when, state, reason != NULL ? ": " : "",
	    reason != NULL ? reason : "");
	if ((r = inventory_begin(inv, cause)) == 0) {
		if ((r = db_exec(inv,
			 "UPDATE schedule_run SET state = ?, reason = ?, "
			 "ended_at = ?, result = ? WHERE id = ? AND "
			 "state = 'running'",
			 "finishing a schedule run", cause, "ttItI", state,
			 reason, (int64_t)time(NULL), text, run_id)) < 0 ||
		    (sqlite3_changes(inv->db) > 0 &&
			((r = actionlog_add(inv, (int64_t)time(NULL),
			      "schedule_run", s.name, names, logwhy, res,
			      &log_id, cause)) != 0 ||
			    (strcmp(state, "ok") != 0 &&
				(r = notify_failed(inv, log_id, s.name, logwhy,
				     cause)) != 0))))
			inventory_rollback(inv);
		else
			r = inventory_commit(inv, cause);
	}
	if (r == 0)
		info("%s: %s", s.name, logwhy);
	if (oc != NULL && r == 0) {
		oc->state = xstrdup(state);
		oc->reason = reason;
		oc->result = json_incref(res);
		reason = NULL;
	}
	free(logwhy);
	free(when);
	free(text);
	json_decref(names);
	json_decref(res);
out:
	free(reason);
	schedule_clear(&s);
	free(output);
	free(name);
	return r;
}

static void
outcome_clear(struct outcome *oc)
{
	free(oc->state);
	free(oc->reason);
	json_decref(oc->result);
	memset(oc, 0, sizeof *oc);
}

/*
 * Field 22 of /proc/PID/stat (the start time in clock ticks), or 0; with
 * state, field 3 (R, S, Z...) in *state.
 */
static int64_t
proc_stat(pid_t pid, char *state)
{
	char path[64], buf[1024], *p;
	int fd, field;
	ssize_t n;

	snprintf(path, sizeof path, "/proc/%ld/stat", (long)pid);
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) == -1)
		return 0;
	n = read(fd, buf, sizeof buf - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = '\0';
	/* The name (field 2) may hold anything: count from its last ')'. */
	if ((p = strrchr(buf, ')')) == NULL)
		return 0;
	if (state != NULL)
		*state = p[1] == ' ' ? p[2] : '?';
	for (field = 2; field < 22 && p != NULL; field++)
		p = strchr(p + 1, ' ');
	return p != NULL ? strtoll(p + 1, NULL, 10) : 0;
}

/* Field 22 of /proc/PID/stat (the start time in clock ticks), or 0. */
int64_t
schedrun_pid_start(pid_t pid)
{
	return proc_stat(pid, NULL);
}

/*
 * Whether process pid runs with start time start (0 pid: none); a zombie
 * (dead, its parent has not waited for it) does not.
 */
static int
pid_alive(pid_t pid, int64_t start)
{
	char state = '?';

	return pid > 0 && (kill(pid, 0) == 0 || errno == EPERM) &&
	    proc_stat(pid, &state) == start && state != 'Z' && state != 'X';
}

/* Whether c's child still runs: its pid is there with the same start. */
static int
alive(const struct schedrun_child *c)
{
	return pid_alive(c->pid, c->pid_start);
}

/*
 * Act on schedule s at real time now as a daemon does (SCHEDULE.md,
 * "Running a daemon action"): nothing due, a skipped or missed row, or a
 * claimed run whose child is started into *c, a tracked child (child.c)
 * whose end goes to cb (on the loop; schedrun_ended then). Shutdown
 * schedules are the watchers' and paused ones wait. Returns 1 when a
 * child started, 0 when not, or -GF_x.
 */
int
schedrun_consider(struct fleet *f, const struct schedule *s, int64_t now,
    child_cb cb, void *arg, struct schedrun_child *c, char **cause)
{
	struct mark m = { "running", NULL, NULL, NULL, NULL };
	char *missed = NULL, *from;
	int64_t occ, first, id;
	long nmissed;
	int r, late;

	if (s->paused || s->action == SCHED_SHUTDOWN)
		return 0;
	if ((r = schedule_due(
		 s, f->config, now, &occ, &nmissed, &first, cause)) <= 0)
		return r;
	late = schedule_clock(now) - schedule_clock(occ) > s->catchup_s;
	if (nmissed > 0 || late) {
		from = instance_format_time(nmissed > 0 ? first : occ);
		xasprintf(&missed, "%ld occurrence%s missed from %s on",
		    nmissed + late, nmissed + late == 1 ? "" : "s", from);
		free(from);
		m.missed = missed;
	}
	if (late) {
		m.state = "missed";
		m.reason = "past the catch-up window";
	}
	if ((r = settle(f, s->id, cause)) == 0)
		r = claim(f->inv, s, occ, 0, &m, &id, cause);
	free(missed);
	if (r <= 0 || strcmp(m.state, "running") != 0)
		return r < 0 ? r : 0;
	if ((r = spawn(f, s, id, cb, arg, c, cause)) != 0) {
		finish(f, id, -1, *cause, NULL, NULL);
		return r;
	}
	return 1;
}

/* Our run c's child ended (child.c reaped it): how, kept for its finish. */
void
schedrun_ended(struct schedrun_child *c, const struct child_result *res)
{
	c->reaped = 1;
	c->wstatus = res->status;
}

/*
 * Whether run c is over, and if so finish it: ours once schedrun_ended
 * told how it ended (kept in c, so that a finish that failed is tried
 * again with it), others when their pid is gone or is another process.
 * Returns 1 over, 0 going, or -GF_x (c still going).
 */
int
schedrun_reap(struct fleet *f, struct schedrun_child *c, char **cause)
{
	int r;

	if (c->own ? !c->reaped : alive(c))
		return 0;
	r = finish(f, c->run_id, c->own ? c->wstatus : -1, NULL, NULL, cause);
	return r < 0 ? r : 1;
}

/*
 * Send SIGTERM to run c's child (ours not reaped yet, or another's that
 * is still the same process) and record the run abandoned, why saying by
 * whom.
 */
int
schedrun_stop(struct fleet *f, const struct schedrun_child *c, const char *why,
    char **cause)
{
	if (c->own ? !c->reaped : alive(c))
		kill(c->pid, SIGTERM);
	return finish(f, c->run_id, -1, why, NULL, cause);
}

/*
 * A daemon that starts: a run left `running` whose runner lives (a
 * `schedule run` in the foreground) is its runner's and left alone; of
 * the others, each whose child is alive (same pid and start time) goes
 * into *list (caller frees) to be polled, the rest are finished from
 * their output, or abandoned. None is started again.
 */
int
schedrun_recover(
    struct fleet *f, struct schedrun_child **list, size_t *n, char **cause)
{
	struct schedrun_child *dead = NULL, c;
	size_t ndead = 0, i;
	sqlite3_stmt *st;
	int r;

	*list = NULL;
	*n = 0;
	if ((r = db_prepare(f->inv, &st,
		 "SELECT id, pid, pid_start, runner_pid, runner_start FROM "
		 "schedule_run WHERE state = 'running' ORDER BY id",
		 "reading the schedule runs", cause, "")) != 0)
		return r;
	while ((r = sqlite3_step(st)) == SQLITE_ROW) {
		if (pid_alive((pid_t)sqlite3_column_int64(st, 3),
			sqlite3_column_int64(st, 4)))
			continue;
		memset(&c, 0, sizeof c);
		c.run_id = sqlite3_column_int64(st, 0);
		c.pid = (pid_t)sqlite3_column_int64(st, 1);
		c.pid_start = sqlite3_column_int64(st, 2);
		if (alive(&c)) {
			*list = xreallocarray(*list, *n + 1, sizeof **list);
			(*list)[(*n)++] = c;
		} else {
			dead = xreallocarray(dead, ndead + 1, sizeof *dead);
			dead[ndead++] = c;
		}
	}
	if ((r = db_finish(f->inv, st, r, "reading the schedule runs", cause)) <
	    0) {
		free(dead);
		return r;
	}
	for (i = 0; i < ndead && r >= 0; i++)
		r = finish(f, dead[i].run_id, -1, NULL, NULL, cause);
	for (i = 0; i < *n; i++)
		info("run %lld (pid %ld) from before this daemon still goes: "
		     "waiting for it",
		    (long long)(*list)[i].run_id, (long)(*list)[i].pid);
	free(dead);
	return r < 0 ? r : 0;
}

/*
 * The outcome of run id as the row holds it (another process finished
 * it: a daemon that stopped it). Returns 0 or -GF_EDB.
 */
static int
reread(struct inventory *inv, int64_t id, struct outcome *oc, char **cause)
{
	sqlite3_stmt *st;
	char *result = NULL;
	int r;

	if ((r = db_prepare(inv, &st,
		 "SELECT state, reason, result FROM schedule_run WHERE id = ?",
		 "reading a schedule run", cause, "I", id)) != 0)
		return r;
	if ((r = sqlite3_step(st)) == SQLITE_ROW) {
		oc->state = db_text(st, 0);
		oc->reason = db_text(st, 1);
		result = db_text(st, 2);
	}
	if ((r = db_finish(inv, st, r, "reading a schedule run", cause)) < 0)
		return r;
	oc->result = result != NULL ? json_loads(result, 0, NULL) : NULL;
	if (oc->state == NULL)
		oc->state = xstrdup("abandoned");
	if (!json_is_object(oc->result)) {
		json_decref(oc->result);
		oc->result = json_object();
	}
	free(result);
	return 0;
}

/* Print a finished run: a line per host, or the run as JSON. */
static void
print_outcome(const struct outcome *oc, int64_t run_id, int json)
{
	const char *name;
	json_t *v, *o;

	if (json) {
		o = json_pack("{s:I, s:s, s:o, s:O}", "run", (json_int_t)run_id,
		    "state", oc->state, "reason",
		    oc->reason != NULL ? json_string(oc->reason) : json_null(),
		    "result", oc->result);
		json_dumpf(o, stdout, JSON_COMPACT | JSON_SORT_KEYS);
		fputc('\n', stdout);
		json_decref(o);
		return;
	}
	json_object_foreach(oc->result, name, v)
	{
		if (strcmp(json_string_value(v), "ok") == 0)
			printf("%s: ok\n", name);
		else
			cmd_print_failed(name, json_string_value(v));
	}
}

/*
 * `schedule run NAME`: claim a manual run (occurrence now), run the child
 * in the foreground (its stdout to the runs/ file), store its result and
 * an action_log entry, and print a line per host (or the run as JSON).
 * *status: 0 when every host is ok, else 1.
 */
int
schedrun_now(struct fleet *f, const struct schedule *s, int json, int *status,
    char **cause)
{
	struct mark m = { "running", NULL, NULL, NULL, NULL };
	struct schedrun_child c;
	struct outcome oc;
	int64_t id = 0;
	int r, wstatus = -1;
	pid_t w;

	*status = GF_EHOSTS;
	memset(&oc, 0, sizeof oc);
	if (f->inv == NULL && (r = fleet_inventory(f, &f->inv, cause)) != 0)
		return r;
	if ((r = settle(f, s->id, cause)) != 0)
		return r;
	if ((r = claim(f->inv, s, (int64_t)time(NULL), 1, &m, &id, cause)) <=
	    0) {
		if (r == 0)
			xasprintf(cause,
			    "%s: a manual run started this second already",
			    s->name);
		return r < 0 ? r : -GF_EUSAGE;
	}
	fflush(stdout);
	if ((r = spawn(f, s, id, NULL, NULL, &c, cause)) != 0) {
		finish(f, id, -1, *cause, NULL, NULL);
		return r;
	}
	while ((w = waitpid(c.pid, &wstatus, 0)) == -1 && errno == EINTR)
		;
	if ((r = finish(f, id, w == c.pid ? wstatus : -1, NULL, &oc, cause)) !=
		0 ||
	    (oc.state == NULL && (r = reread(f->inv, id, &oc, cause)) != 0))
		return r;
	print_outcome(&oc, id, json);
	*status = strcmp(oc.state, "ok") == 0 ? GF_OK : GF_EHOSTS;
	outcome_clear(&oc);
	return 0;
}

/*
 * Delete the output and error files of the runs that ended more than
 * keep_days ago (their rows stay, output NULL). Returns 0 or -GF_EDB.
 */
int
schedrun_prune(struct fleet *f, int keep_days, char **cause)
{
	int64_t before = (int64_t)time(NULL) - (int64_t)keep_days * 86400;
	char *err = NULL;
	sqlite3_stmt *st;
	const char *out;
	size_t len;
	int r;

	if ((r = db_prepare(f->inv, &st,
		 "SELECT output FROM schedule_run WHERE state <> 'running' "
		 "AND output IS NOT NULL AND ended_at < ?",
		 "reading the schedule runs", cause, "I", before)) != 0)
		return r;
	while ((r = sqlite3_step(st)) == SQLITE_ROW) {
		out = (const char *)sqlite3_column_text(st, 0);
		len = strlen(out);
		unlink(out);
		if (len > 4 && strcmp(out + len - 4, ".out") == 0) {
			xasprintf(&err, "%.*s.err", (int)(len - 4), out);
			unlink(err);
			free(err);
		}
	}
	if ((r = db_finish(f->inv, st, r, "reading the schedule runs", cause)) <
	    0)
		return r;
	r = db_exec(f->inv,
	    "UPDATE schedule_run SET output = NULL WHERE state <> 'running' "
	    "AND output IS NOT NULL AND ended_at < ?",
	    "pruning the schedule runs", cause, "I", before);
	return r < 0 ? r : 0;
}

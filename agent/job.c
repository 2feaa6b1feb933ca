/*
 * Jobs (agent/JOBS.md): `gpufleet-agent job start|ls|log|kill`, the
 * validation of a job's spec, what the files of D/jobs/N say of its state,
 * and the supervisor, a forked agent that lives exactly as long as its job,
 * rotates its log and records its exit status.
 *
 * The job is held at a gate (a pipe) until its pid file is written, so a
 * job never runs without one: a supervisor killed before that leaves a
 * child that sees the gate close and exits without running anything.
 */

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "agent.h"
#include "gpufleet/report.h"
#include "../controller/xmalloc.h"

extern char **environ;

/* How long the starter waits for the supervisor's word. */
#define JOB_READY_MS 10000
/* How often the supervisor looks at the log's size. */
#define JOB_ROTATE_S 2
/* How often `job log --follow` looks for more. */
#define JOB_FOLLOW_MS 200
/* How long job start waits for the watcher's job_started. */
#define JOB_WATCHED_MS 3000
/* What last_line is taken from: the log's last bytes. */
#define JOB_LAST_CHUNK 4096

static const struct {
	int sig;
	const char *name;
} job_signals[] = {
	{ SIGHUP, "HUP" },
	{ SIGINT, "INT" },
	{ SIGQUIT, "QUIT" },
	{ SIGILL, "ILL" },
	{ SIGTRAP, "TRAP" },
	{ SIGABRT, "ABRT" },
	{ SIGBUS, "BUS" },
	{ SIGFPE, "FPE" },
	{ SIGKILL, "KILL" },
	{ SIGUSR1, "USR1" },
	{ SIGSEGV, "SEGV" },
	{ SIGUSR2, "USR2" },
	{ SIGPIPE, "PIPE" },
	{ SIGALRM, "ALRM" },
	{ SIGTERM, "TERM" },
	{ SIGCHLD, "CHLD" },
	{ SIGCONT, "CONT" },
	{ SIGSTOP, "STOP" },
	{ SIGTSTP, "TSTP" },
	{ SIGTTIN, "TTIN" },
	{ SIGTTOU, "TTOU" },
	{ SIGURG, "URG" },
	{ SIGXCPU, "XCPU" },
	{ SIGXFSZ, "XFSZ" },
	{ SIGVTALRM, "VTALRM" },
	{ SIGPROF, "PROF" },
	{ SIGWINCH, "WINCH" },
	{ SIGIO, "IO" },
	{ SIGSYS, "SYS" },
};

static int job_usage(const char *, const char *);
static int job_error(int, const char *, ...)
    __attribute__((format(printf, 2, 3)));
static int job_name_ok(const char *);
static void job_default_name(const char *, char *);
static int job_env_key(const char *);
static int job_parse_env(const struct jsonr *, struct job_spec *, char **);
static int job_parse_then(const struct jsonr *, struct job_spec *, char **);
static char *job_expand(const char *);
static void job_remove_dir(const char *);
static long long job_next_number(const char *);
static int job_make_dir(const char *, long long *, char **, char **);
static char **job_env(const struct job_spec *);
static void job_child(const int *, int, const char *, const char *, char **);
static void job_rotate(int, const char *, long long);
static void job_write_status(const char *, int);
static void job_supervise(const char *, const struct job_spec *, const char *,
    int) __attribute__((noreturn));
static int job_started_fn(const char *, size_t, const struct jsonr *, void *);
static void job_watched(const char *, long long, long long, int *, pid_t *);
static int job_start(const char *, const char *, size_t);
static void job_write_ls(struct jsonw *, const char *, struct job *);
static int job_cmp(const void *, const void *);
static int job_ls(const char *, long long);
static int job_copy(int, off_t, off_t);
static off_t job_tail_start(const int *, const off_t *, long long);
static int job_exit_status(const struct job *);
static int job_log(const char *, long long, long long, int);
static int job_group_alive(const char *, long long, long long);
static int job_group_ours(const struct job *);
static int job_kill(const char *, long long, int, long long);
static int job_number(const char *, long long *);

/* A usage error: what, and the usage line of cmd; exit 2. */
static int
job_usage(const char *cmd, const char *what)
{
	fprintf(stderr, "gpufleet-agent job: %s\n", what);
	fprintf(stderr,
	    "usage: gpufleet-agent job start [--dir DIR] < SPEC\n"
	    "       gpufleet-agent job ls [--dir DIR] [--job N]\n"
	    "       gpufleet-agent job log [--dir DIR] --job N|--last "
	    "[--tail LINES] [--follow]\n"
	    "       gpufleet-agent job kill [--dir DIR] --job N "
	    "[--signal SIG] [--grace SECONDS]\n");
	(void)cmd;
	return JOB_EXIT_USAGE;
}

/* One line "gpufleet-agent job: REASON" on stderr; returns code. */
static int
job_error(int code, const char *fmt, ...)
{
	va_list ap;

	fputs("gpufleet-agent job: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	return code;
}

/* Whether name holds only [A-Za-z0-9._-]. */
static int
job_name_ok(const char *name)
{
	const char *c;

	for (c = name; *c != '\0'; c++)
		if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') ||
			(*c >= '0' && *c <= '9') || *c == '.' || *c == '_' ||
			*c == '-'))
			return 0;
	return 1;
}

/*
 * The default name: the command's first word's basename, cut to
 * JOB_NAME_MAX, with anything but [A-Za-z0-9._-] made "_"; "job" if
 * nothing is left.
 */
static void
job_default_name(const char *command, char *name)
{
	const char *s = command, *e, *slash;
	size_t n, i;

	while (*s == ' ' || *s == '\t' || *s == '\n')
		s++;
	e = s + strcspn(s, " \t\n;&|()<>");
	for (slash = s; slash < e; slash++)
		if (*slash == '/')
			s = slash + 1;
	n = (size_t)(e - s);
	if (n > JOB_NAME_MAX)
		n = JOB_NAME_MAX;
	for (i = 0; i < n; i++) {
		char c = s[i];

		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
			(c >= '0' && c <= '9') || c == '.' || c == '_' ||
			c == '-'))
			c = '_';
		name[i] = c;
	}
	name[n] = '\0';
	if (n == 0)
		strcpy(name, "job");
}

/* Whether s is an environment variable's name: [A-Za-z_][A-Za-z0-9_]*. */
static int
job_env_key(const char *s)
{
	size_t i;

	for (i = 0; s[i] != '\0'; i++) {
		char c = s[i];

		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
			c == '_' || (i > 0 && c >= '0' && c <= '9')))
			return 0;
	}
	return i > 0 && i <= JOB_ENV_KEY_MAX;
}

/* The "env" member: up to JOB_ENV_MAX [key, value] pairs. */
static int
job_parse_env(const struct jsonr *root, struct job_spec *s, char **cause)
{
	const struct jsonr *a = jsonr_get(root, "env"), *p;
	char where[32];
	size_t i;

	if (a == NULL || a->type == JSONR_NULL)
		return 0;
	if (a->type != JSONR_ARRAY)
		return plan_bad(cause, "", "env", "must be an array of pairs");
	if (a->n > JOB_ENV_MAX)
		return plan_bad(cause, "", "env", "more than 64 pairs");
	s->env = xcalloc(2 * a->n + 1, sizeof *s->env);
	for (i = 0; i < a->n; i++) {
		p = &a->items[i];
		snprintf(where, sizeof where, "env[%zu]", i);
		if (p->type != JSONR_ARRAY || p->n != 2 ||
		    p->items[0].type != JSONR_STRING ||
		    p->items[1].type != JSONR_STRING)
			return plan_bad(cause, "", where,
			    "must be a pair of strings [KEY, VALUE]");
		if (!job_env_key(p->items[0].s))
			return plan_bad(cause, where, "key",
			    "must be 1-128 of [A-Za-z_][A-Za-z0-9_]*");
		if (p->items[1].slen > JOB_ENV_VALUE_MAX)
			return plan_bad(
			    cause, where, "value", "longer than 4096 bytes");
		s->env[2 * i] = xstrdup(p->items[0].s);
		s->env[2 * i + 1] = xstrdup(p->items[1].s);
		s->nenv = i + 1;
	}
	return 0;
}

/* The "then" member: null, or when the job's end stops the machine. */
static int
job_parse_then(const struct jsonr *root, struct job_spec *s, char **cause)
{
	static const char *const keys[] = { "when", "action", "warn_minutes",
		"before_stop", "before_stop_timeout_s", "before_must_succeed",
		NULL };
	const struct jsonr *o = jsonr_get(root, "then");
	struct job_then *t = &s->then;
	const char *v;

	if (o == NULL || o->type == JSONR_NULL)
		return 0;
	if (o->type != JSONR_OBJECT)
		return plan_bad(cause, "", "then", "must be an object or null");
	t->set = 1;
	if (plan_keys(o, keys, "then", cause) != 0)
		return -1;
	v = jsonr_str(o, "when");
	if (v == NULL || (strcmp(v, "always") != 0 && strcmp(v, "success")))
		return plan_bad(
		    cause, "then", "when", "must be \"always\" or \"success\"");
	t->if_ok = strcmp(v, "success") == 0;
	v = jsonr_str(o, "action");
	if (v == NULL || (strcmp(v, "stop") != 0 && strcmp(v, "local") != 0))
		return plan_bad(
		    cause, "then", "action", "must be \"stop\" or \"local\"");
	t->local = strcmp(v, "local") == 0;
	if (plan_int(o, "warn_minutes", "then", 0, 1440, 0, &t->warn_minutes,
		cause) != 0 ||
	    plan_string(o, "before_stop", "then", 1, &t->before_stop, cause) !=
		0 ||
	    plan_int(o, "before_stop_timeout_s", "then", 1, 86400, 600,
		&t->before_stop_timeout_s, cause) != 0 ||
	    plan_bool(o, "before_must_succeed", "then", &t->before_must_succeed,
		cause) != 0)
		return -1;
	return 0;
}

/*
 * Parse and validate a job's spec completely; created defaults to now.
 * 0, or -1 with a one-line *cause naming the field (caller frees). s is
 * to be freed with job_spec_free either way.
 */
int
job_spec_parse(const char *text, size_t len, long long now, struct job_spec *s,
    char **cause)
{
	static const char *const keys[] = { "version", "name", "command", "cwd",
		"env", "log_max_bytes", "created", "then", NULL };
	struct jsonr root;
	const struct jsonr *m;
	int r = -1;

	memset(s, 0, sizeof *s);
	if (plan_doc(text, len, keys, &root, cause) != 0 ||
	    plan_string(&root, "command", "", 0, &s->command, cause) != 0)
		goto out;
	if (strlen(s->command) > JOB_COMMAND_MAX) {
		plan_bad(cause, "", "command", "longer than 16 KiB");
		goto out;
	}
	if ((m = jsonr_get(&root, "name")) != NULL && m->type != JSONR_NULL) {
		if (m->type != JSONR_STRING || m->slen == 0 ||
		    m->slen > JOB_NAME_MAX || !job_name_ok(m->s)) {
			plan_bad(cause, "", "name",
			    "must be 1-64 of A-Z a-z 0-9 . _ -");
			goto out;
		}
		memcpy(s->name, m->s, m->slen + 1);
	} else
		job_default_name(s->command, s->name);
	if (plan_string(&root, "cwd", "", 1, &s->cwd, cause) != 0 ||
	    job_parse_env(&root, s, cause) != 0 ||
	    plan_int(&root, "log_max_bytes", "", JOB_LOG_MIN, JOB_LOG_MAX,
		JOB_LOG_DEFAULT, &s->log_max_bytes, cause) != 0 ||
	    plan_int(&root, "created", "", 0, 1LL << 40, now, &s->created,
		cause) != 0 ||
	    job_parse_then(&root, s, cause) != 0)
		goto out;
	if (s->cwd == NULL)
		s->cwd = xstrdup("~");
	r = 0;
out:
	jsonr_free(&root);
	return r;
}

/* Free what s holds. */
void
job_spec_free(struct job_spec *s)
{
	size_t i;

	for (i = 0; s->env != NULL && i < 2 * s->nenv; i++)
		free(s->env[i]);
	free(s->env);
	free(s->command);
	free(s->cwd);
	free(s->then.before_stop);
	memset(s, 0, sizeof *s);
}

/* The spec as spec.json holds it, defaults filled in. */
void
job_spec_write(struct jsonw *w, const struct job_spec *s)
{
	const struct job_then *t = &s->then;
	size_t i;

	jsonw_object_begin(w, NULL);
	jsonw_int(w, "version", 1);
	jsonw_string(w, "name", s->name);
	jsonw_string(w, "command", s->command);
	jsonw_string(w, "cwd", s->cwd);
	jsonw_array_begin(w, "env");
	for (i = 0; i < s->nenv; i++) {
		jsonw_array_begin(w, NULL);
		jsonw_string(w, NULL, s->env[2 * i]);
		jsonw_string(w, NULL, s->env[2 * i + 1]);
		jsonw_array_end(w);
	}
	jsonw_array_end(w);
	jsonw_int(w, "log_max_bytes", s->log_max_bytes);
	jsonw_int(w, "created", s->created);
	if (!t->set)
		jsonw_null(w, "then");
	else {
		jsonw_object_begin(w, "then");
		jsonw_string(w, "when", t->if_ok ? "success" : "always");
		jsonw_string(w, "action", t->local ? "local" : "stop");
		jsonw_int(w, "warn_minutes", t->warn_minutes);
		jsonw_string(w, "before_stop", t->before_stop);
		jsonw_int(w, "before_stop_timeout_s", t->before_stop_timeout_s);
		jsonw_bool(w, "before_must_succeed", t->before_must_succeed);
		jsonw_object_end(w);
	}
	jsonw_object_end(w);
}

/* A signal's name without "SIG" ("TERM"), or its number in buf. */
const char *
job_signal_name(int sig, char *buf, size_t size)
{
	size_t i;

	for (i = 0; i < sizeof job_signals / sizeof job_signals[0]; i++)
		if (job_signals[i].sig == sig)
			return job_signals[i].name;
	snprintf(buf, size, "%d", sig);
	return buf;
}

/* A signal by name (TERM, SIGTERM) or number (1-64); -1 if none. */
int
job_signal_number(const char *s)
{
	char *end;
	size_t i;
	long v;

	if (s[0] >= '0' && s[0] <= '9') {
		v = strtol(s, &end, 10);
		return *end == '\0' && v >= 1 && v <= 64 ? (int)v : -1;
	}
	if (strncmp(s, "SIG", 3) == 0)
		s += 3;
	for (i = 0; i < sizeof job_signals / sizeof job_signals[0]; i++)
		if (strcmp(job_signals[i].name, s) == 0)
			return job_signals[i].sig;
	return -1;
}

/* The state's name, as job ls and the journal say it. */
const char *
job_state_name(enum job_state st)
{
	switch (st) {
	case JOB_STARTING:
		return "starting";
	case JOB_RUNNING:
		return "running";
	case JOB_SUCCEEDED:
		return "succeeded";
	case JOB_FAILED:
		return "failed";
	case JOB_KILLED:
		return "killed";
	case JOB_LOST:
		return "lost";
	}
	return "lost";
}

/* "stop", "stop-if-ok", or NULL (no then). */
const char *
job_then_name(const struct job_then *t)
{
	if (!t->set)
		return NULL;
	return t->if_ok ? "stop-if-ok" : "stop";
}

/*
 * The state of job j at now from what its files say and what was seen of
 * its processes (agent/JOBS.md "States"): an exit status decides; else a
 * container that started after the job makes it lost; else a live
 * supervisor means running, and a vanished one leaves the job's process
 * running unwatched or gone too.
 */
void
job_judge(struct job *j, long long now)
{
	char *r = j->reason;
	size_t size = sizeof j->reason;

	r[0] = '\0';
	j->restarted = 0;
	if (!j->has_pid) /* never started: no start but its creation's */
		j->started = j->created;
	snprintf(
	    j->fire_id, sizeof j->fire_id, "j-%lld-%lld", j->n, j->started);
	if (!j->has_pid) {
		if (now - j->created < JOB_STARTING_S && now >= j->created)
			j->state = JOB_STARTING;
		else {
			j->state = JOB_LOST;
			snprintf(r, size, "it was never started (no pid file)");
		}
	} else if (j->has_status) {
		if (j->signal != 0 || j->has_kill)
			j->state = JOB_KILLED;
		else if (j->exit.set && j->exit.v == 0)
			j->state = JOB_SUCCEEDED;
		else
			j->state = JOB_FAILED;
	} else if (j->container_start >= 0 && j->container_start > j->started) {
		j->state = JOB_LOST;
		j->restarted = 1;
		snprintf(r, size,
		    "the container restarted at %lld; the job started at %lld",
		    j->container_start, j->started);
	} else if (j->supervisor_alive)
		j->state = JOB_RUNNING;
	else {
		j->state = j->pid_alive ? JOB_RUNNING : JOB_LOST;
		snprintf(r, size,
		    "its supervisor (pid %lld) vanished without recording an "
		    "exit status",
		    j->supervisor);
		if (j->pid_alive)
			snprintf(r + strlen(r), size - strlen(r),
			    "; the job's process %lld still runs, unwatched",
			    j->pid);
		else
			snprintf(r + strlen(r), size - strlen(r),
			    "; the job's process is gone too");
	}
}

/*
 * The last non-empty line of text (split at \n and \r), of its last
 * JOB_LAST_CHUNK bytes, cut to JOB_LAST_LINE_MAX bytes, in out (size
 * more than that); "" when there is none.
 */
void
job_last_line(const char *text, size_t len, char *out, size_t size)
{
	const char *end, *start, *base;
	size_t n;

	out[0] = '\0';
	base = len > JOB_LAST_CHUNK ? text + len - JOB_LAST_CHUNK : text;
	end = text + len;
	while (end > base && (end[-1] == '\n' || end[-1] == '\r'))
		end--;
	if (end == base)
		return;
	start = end;
	while (start > base && start[-1] != '\n' && start[-1] != '\r')
		start--;
	n = (size_t)(end - start);
	if (n > JOB_LAST_LINE_MAX)
		n = JOB_LAST_LINE_MAX;
	if (n >= size)
		n = size - 1;
	memcpy(out, start, n);
	out[n] = '\0';
}

/* "~" and "~/..." under $HOME; a relative path is under $HOME too. */
static char *
job_expand(const char *path)
{
	const char *home = getenv("HOME");
	char *r;

	if (home == NULL || *home == '\0')
		home = "/";
	if (strcmp(path, "~") == 0)
		return xstrdup(home);
	if (strncmp(path, "~/", 2) == 0)
		xasprintf(&r, "%s/%s", home, path + 2);
	else if (path[0] != '/')
		xasprintf(&r, "%s/%s", home, path);
	else
		r = xstrdup(path);
	return r;
}

/* Remove a job's directory and the files in it (never a half job). */
static void
job_remove_dir(const char *path)
{
	struct dirent *de;
	char *f;
	DIR *d;

	if ((d = opendir(path)) != NULL) {
		while ((de = readdir(d)) != NULL) {
			if (strcmp(de->d_name, ".") == 0 ||
			    strcmp(de->d_name, "..") == 0)
				continue;
			xasprintf(&f, "%s/%s", path, de->d_name);
			unlink(f);
			free(f);
		}
		closedir(d);
	}
	rmdir(path);
}

/* N of "N" (a positive integer without leading zeros), or -1. */
static int
job_number(const char *s, long long *n)
{
	char *end;

	if (s[0] < '1' || s[0] > '9')
		return -1;
	errno = 0;
	*n = strtoll(s, &end, 10);
	return errno == 0 && *end == '\0' ? 0 : -1;
}

/* One more than the highest job number in jobs (1 when there is none). */
static long long
job_next_number(const char *jobs)
{
	struct dirent *de;
	long long max = 0, n;
	DIR *d;

	if ((d = opendir(jobs)) == NULL)
		return 1;
	while ((de = readdir(d)) != NULL)
		if (job_number(de->d_name, &n) == 0 && n > max)
			max = n;
	closedir(d);
	return max + 1;
}

/*
 * Make dir/jobs/N for a new job (mkdir takes the number, so two starters
 * never share one): 0 with *n and *path (caller frees), or -1 with cause.
 */
static int
job_make_dir(const char *dir, long long *n, char **path, char **cause)
{
	char *jobs;
	int tries;

	if (plan_mkdir(dir, cause) != 0)
		return -1;
	xasprintf(&jobs, "%s/jobs", dir);
	if (mkdir(jobs, 0700) != 0 && errno != EEXIST) {
		xasprintf(cause, "cannot create %s: %s", jobs, strerror(errno));
		free(jobs);
		return -1;
	}
	*n = job_next_number(jobs);
	for (tries = 0; tries < 1000; tries++, (*n)++) {
		xasprintf(path, "%s/%lld", jobs, *n);
		if (mkdir(*path, 0700) == 0) {
			free(jobs);
			return 0;
		}
		if (errno != EEXIST) {
			xasprintf(cause, "cannot create %s: %s", *path,
			    strerror(errno));
			break;
		}
		free(*path);
		*path = NULL;
	}
	if (*cause == NULL)
		xasprintf(cause, "cannot find a free job number in %s", jobs);
	free(*path);
	*path = NULL;
	free(jobs);
	return -1;
}

/*
 * The job's environment: the starter's (the login session's), with the
 * spec's pairs set over it. Caller frees with shell_env_free.
 */
static char **
job_env(const struct job_spec *s)
{
	char **env;
	size_t n = 0, i, k, kl;

	for (i = 0; environ[i] != NULL; i++)
		n++;
	env = xcalloc(n + s->nenv + 1, sizeof *env);
	for (i = 0, n = 0; environ[i] != NULL; i++) {
		for (k = 0; k < s->nenv; k++) {
			kl = strlen(s->env[2 * k]);
			if (strncmp(environ[i], s->env[2 * k], kl) == 0 &&
			    environ[i][kl] == '=')
				break;
		}
		if (k == s->nenv)
			env[n++] = xstrdup(environ[i]);
	}
	for (k = 0; k < s->nenv; k++)
		xasprintf(&env[n++], "%s=%s", s->env[2 * k], s->env[2 * k + 1]);
	return env;
}

/*
 * In the job's process: its own session, default signals, /dev/null in,
 * the log out; wait at the gate, then chdir and exec /bin/sh -c COMMAND.
 * A failed chdir or exec ends it as a shell would (126, 127), said in
 * the log.
 */
static void
job_child(
    const int *gate, int log, const char *cwd, const char *command, char **env)
{
	char *argv[] = { "sh", "-c", (char *)command, NULL };
	char go = 0;
	int fd;

	close(gate[1]);
	setsid();
	run_child_defaults();
	if ((fd = open("/dev/null", O_RDONLY | O_CLOEXEC)) == -1 ||
	    dup2(fd, 0) == -1 || dup2(log, 1) == -1 || dup2(log, 2) == -1)
		_exit(127);
	while (read(gate[0], &go, 1) == -1 && errno == EINTR)
		;
	if (go != 'g')
		_exit(127); /* the supervisor died before writing pid */
	if (chdir(cwd) != 0) {
		dprintf(2, "gpufleet-agent job: cannot chdir to %s: %s\n", cwd,
		    strerror(errno));
		_exit(126);
	}
	execve("/bin/sh", argv, env);
	dprintf(
	    2, "gpufleet-agent job: cannot run /bin/sh: %s\n", strerror(errno));
	_exit(127);
}

/*
 * Above max bytes, copy the log to log.1 (replacing it) and truncate the
 * log to 0, as logrotate's copytruncate does: the job keeps its O_APPEND
 * descriptor and its next write lands at the new end.
 */
static void
job_rotate(int log, const char *jobdir, long long max)
{
	struct stat sb;
	char chunk[65536], *tmp, *path;
	off_t off = 0, limit;
	ssize_t n;
	int fd;

	if (fstat(log, &sb) != 0 || sb.st_size <= max)
		return;
	limit = sb.st_size + (off_t)max; /* a job writing as fast as we copy */
	xasprintf(&tmp, "%s/.log.1.tmp", jobdir);
	xasprintf(&path, "%s/log.1", jobdir);
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	while (fd != -1 && off < limit) {
		n = pread(log, chunk, sizeof chunk, off);
		if (n == -1 && errno == EINTR)
			continue;
		if (n <= 0 || write(fd, chunk, (size_t)n) != n)
			break;
		off += n;
	}
	if (fd != -1 && close(fd) == 0 && rename(tmp, path) == 0)
		(void)0;
	else
		unlink(tmp);
	if (ftruncate(log, 0) != 0)
		(void)0; /* nothing else to do: the log grows on */
	free(tmp);
	free(path);
}

/* Write jobdir/status for the waitpid status. */
static void
job_write_status(const char *jobdir, int status)
{
	struct jsonw w;
	char buf[16], *cause = NULL;

	jsonw_init(&w);
	jsonw_object_begin(&w, NULL);
	jsonw_int(&w, "ended", (long long)time(NULL));
	if (WIFEXITED(status))
		jsonw_int(&w, "exit", WEXITSTATUS(status));
	else
		jsonw_null(&w, "exit");
	if (WIFSIGNALED(status))
		jsonw_string(&w, "signal",
		    job_signal_name(WTERMSIG(status), buf, sizeof buf));
	else
		jsonw_null(&w, "signal");
	jsonw_bool(&w, "core", WIFSIGNALED(status) && WCOREDUMP(status));
	jsonw_object_end(&w);
	buf_add(&w.out, "\n", 1);
	if (plan_write_named(jobdir, "status", w.out.data, w.out.len, &cause) !=
	    0)
		free(cause); /* no one to tell: the job shows as lost */
	jsonw_free(&w);
}

/*
 * The supervisor (the grandchild of job start, init's child): starts the
 * job held at its gate, writes pid, releases it and tells the starter
 * "running PID STARTED" on ready (or "failed: REASON"); then waits for it,
 * rotating its log, and writes status. Only SIGKILL ends it early.
 */
static void
job_supervise(
    const char *jobdir, const struct job_spec *s, const char *cwd, int ready)
{
	struct jsonw w;
	struct timespec ts;
	sigset_t chld;
	char *path, *cause = NULL, **env;
	long long started, sup_start, pid_start;
	int gate[2], log, fd, status = 0;
	pid_t pid, r;

	signal(SIGHUP, SIG_IGN);
	signal(SIGINT, SIG_IGN);
	signal(SIGTERM, SIG_IGN);
	signal(SIGPIPE, SIG_IGN);
	if ((fd = open("/dev/null", O_RDWR)) != -1) {
		dup2(fd, 0);
		dup2(fd, 1);
		dup2(fd, 2);
		if (fd > 2)
			close(fd);
	}
	watcher_close_fds(ready);
	if (chdir("/") != 0)
		(void)0;
	xasprintf(&path, "%s/log", jobdir);
	log = open(path, O_RDWR | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
	if (log == -1) {
		dprintf(ready, "failed: cannot open %s: %s\n", path,
		    strerror(errno));
		_exit(1);
	}
	free(path);
	if (pipe2(gate, O_CLOEXEC) == -1) {
		dprintf(ready, "failed: pipe: %s\n", strerror(errno));
		_exit(1);
	}
	env = job_env(s);
	sigemptyset(&chld);
	sigaddset(&chld, SIGCHLD);
	sigprocmask(SIG_BLOCK, &chld, NULL);
	started = (long long)time(NULL);
	if ((pid = fork()) == -1) {
		dprintf(ready, "failed: fork: %s\n", strerror(errno));
		_exit(1);
	}
	if (pid == 0) {
		close(ready);
		job_child(gate, log, cwd, s->command, env);
	}
	close(gate[0]);
	shell_env_free(env);
	pid_start = shell_pid_start("/proc", pid);
	sup_start = shell_pid_start("/proc", getpid());

	jsonw_init(&w);
	jsonw_object_begin(&w, NULL);
	jsonw_int(&w, "supervisor", (long long)getpid());
	jsonw_int(&w, "supervisor_start", sup_start);
	jsonw_int(&w, "pid", (long long)pid);
	jsonw_int(&w, "pid_start", pid_start);
	jsonw_int(&w, "started", started);
	jsonw_object_end(&w);
	buf_add(&w.out, "\n", 1);
	if (pid_start < 0 || sup_start < 0 ||
	    plan_write_named(jobdir, "pid", w.out.data, w.out.len, &cause) !=
		0) {
		dprintf(ready, "failed: %s\n",
		    cause != NULL ? cause : "cannot read /proc/PID/stat");
		close(gate[1]); /* the job exits without running anything */
		while (waitpid(pid, &status, 0) == -1 && errno == EINTR)
			;
		_exit(1);
	}
	jsonw_free(&w);
	if (write(gate[1], "g", 1) != 1)
		(void)0;
	close(gate[1]);
	dprintf(ready, "running %ld %lld\n", (long)pid, started);
	close(ready);

	for (;;) {
		ts.tv_sec = JOB_ROTATE_S;
		ts.tv_nsec = 0;
		sigtimedwait(&chld, NULL, &ts);
		do
			r = waitpid(pid, &status, WNOHANG);
		while (r == -1 && errno == EINTR);
		if (r == pid || r == -1)
			break;
		job_rotate(log, jobdir, s->log_max_bytes);
	}
	job_write_status(jobdir, status);
	_exit(0);
}

struct job_seen {
	const char *fire_id;
	int found;
};

/* journal_scan callback: stop at job_started of the fire id. */
static int
job_started_fn(const char *line, size_t len, const struct jsonr *e, void *arg)
{
	const char *event = jsonr_str(e, "event"),
		   *id = jsonr_str(e, "fire_id");
	struct job_seen *seen = arg;

	(void)line;
	(void)len;
	seen->found = event != NULL && id != NULL &&
	    strcmp(event, "job_started") == 0 && strcmp(id, seen->fire_id) == 0;
	return seen->found;
}

/*
 * Make sure a watcher sees job n (started at started): signal it to scan
 * D/jobs now and wait (at most JOB_WATCHED_MS) for its job_started. A
 * watcher that was exiting when job start found it (nothing else armed)
 * is gone by then: another one is started. The job runs either way; the
 * next report --ensure-watcher also brings one.
 */
static void
job_watched(
    const char *dir, long long n, long long started, int *wstarted, pid_t *wpid)
{
	char fire_id[JOB_FIRE_ID_MAX], epoch[JOURNAL_EPOCH_LEN + 1];
	struct job_seen seen = { fire_id, 0 };
	char *cause = NULL;
	pid_t holder;
	int waited, s;

	snprintf(fire_id, sizeof fire_id, "j-%lld-%lld", n, started);
	for (waited = 0; waited < JOB_WATCHED_MS; waited += 100) {
		if ((holder = watcher_holder(dir)) <= 0) {
			if (watcher_start(dir, "/proc", &s, &holder, &cause) !=
			    0) {
				fprintf(
				    stderr, "gpufleet-agent job: %s\n", cause);
				free(cause);
				break;
			}
			*wstarted = s;
		}
		if (holder != *wpid || waited == 0)
			kill(holder, SIGUSR1);
		*wpid = holder;
		if (journal_scan_all(dir, epoch, job_started_fn, &seen) == 0 &&
		    seen.found)
			break;
		poll(NULL, 0, 100);
	}
}

/*
 * job start: validate the spec in text, make D/jobs/N, write the spec,
 * ensure the watcher, start the supervisor and print the job's line once
 * it runs. Any failure before the job runs removes D/jobs/N.
 */
static int
job_start(const char *dir, const char *text, size_t len)
{
	struct job_spec s;
	struct job j;
	struct jsonw w;
	struct plan p;
	struct stat sb;
	char *cause = NULL, *cwd = NULL, *jobdir = NULL, line[512], *end;
	long long n = 0, started;
	pid_t child, gc, wpid = 0, jpid;
	int r, ready[2], status, wstarted = 0;
	long v;

	if (job_spec_parse(text, len, (long long)time(NULL), &s, &cause) != 0) {
		r = job_error(JOB_EXIT_INVALID, "invalid spec: %s", cause);
		goto out;
	}
	/*
	 * The starting window (job_judge) is read on this clock: a created
	 * from the controller's, skewed, would make this job look never
	 * started.
	 */
	s.created = (long long)time(NULL);
	cwd = job_expand(s.cwd);
	if (stat(cwd, &sb) != 0 || !S_ISDIR(sb.st_mode)) {
		r = job_error(JOB_EXIT_START, "cwd %s: %s", cwd,
		    stat(cwd, &sb) != 0 ? strerror(errno) : "Not a directory");
		goto out;
	}
	if (s.then.set && !s.then.local) {
		r = plan_load(dir, &p, NULL, &cause);
		free(cause);
		cause = NULL;
		if (r < 0 || p.stop_command == NULL) {
			plan_free(&p);
			r = job_error(JOB_EXIT_START,
			    "then.action stop needs a stop method in the plan "
			    "(%s/plan.json has none)",
			    dir);
			goto out;
		}
		plan_free(&p);
	}
	if (job_make_dir(dir, &n, &jobdir, &cause) != 0) {
		r = job_error(JOB_EXIT_START, "%s", cause);
		goto out;
	}
	jsonw_init(&w);
	job_spec_write(&w, &s);
	buf_add(&w.out, "\n", 1);
	r = plan_write_named(
	    jobdir, "spec.json", w.out.data, w.out.len, &cause);
	jsonw_free(&w);
	if (r != 0 ||
	    watcher_start(dir, "/proc", &wstarted, &wpid, &cause) != 0) {
		job_remove_dir(jobdir);
		r = job_error(JOB_EXIT_START, "%s", cause);
		goto out;
	}

	if (pipe2(ready, O_CLOEXEC) == -1) {
		job_remove_dir(jobdir);
		r = job_error(JOB_EXIT_START, "pipe: %s", strerror(errno));
		goto out;
	}
	fflush(NULL);
	if ((child = fork()) == -1) {
		close(ready[0]);
		close(ready[1]);
		job_remove_dir(jobdir);
		r = job_error(JOB_EXIT_START, "fork: %s", strerror(errno));
		goto out;
	}
	if (child == 0) {
		close(ready[0]);
		if (setsid() == -1 || (gc = fork()) == -1) {
			dprintf(
			    ready[1], "failed: fork: %s\n", strerror(errno));
			_exit(1);
		}
		if (gc != 0)
			_exit(0);
		job_supervise(jobdir, &s, cwd, ready[1]);
	}
	close(ready[1]);
	while (waitpid(child, &status, 0) == -1 && errno == EINTR)
		;
	r = watcher_read_line(ready[0], line, sizeof line, JOB_READY_MS);
	close(ready[0]);
	if (r != 0 || strncmp(line, "running ", 8) != 0) {
		if (r != 0 && job_load(dir, "/proc", n, &j) == 0 && j.has_pid) {
			/* Slow to say so, but it runs. */
			snprintf(line, sizeof line, "running %lld %lld", j.pid,
			    j.started);
			job_free(&j);
		} else {
			if (r != 0)
				job_free(&j);
			job_remove_dir(jobdir);
			r = job_error(JOB_EXIT_START, "%s",
			    r != 0 ? "the supervisor did not say that the "
				     "job runs within 10 s"
				: strncmp(line, "failed: ", 8) == 0 ? line + 8
								    : line);
			goto out;
		}
	}
	v = strtol(line + 8, &end, 10);
	jpid = (pid_t)v;
	started = strtoll(end, NULL, 10);
	job_watched(dir, n, started, &wstarted, &wpid);
	printf("{\"job\":%lld,\"pid\":%ld,\"started\":%lld,"
	       "\"fire_id\":\"j-%lld-%lld\",\"watcher\":\"%s\",\"log\":",
	    n, (long)jpid, started, n, started,
	    wstarted ? "started" : "running");
	jsonw_init(&w);
	{
		char *logp;

		xasprintf(&logp, "%s/log", jobdir);
		jsonw_string(&w, NULL, logp);
		free(logp);
	}
	printf("%s}\n", w.out.data);
	jsonw_free(&w);
	r = 0;
out:
	job_spec_free(&s);
	free(cwd);
	free(jobdir);
	free(cause);
	fflush(stdout);
	return r;
}

/*
 * Load job n of dir: its files, whether its processes live (before its
 * status is read, so that a supervisor that wrote it and exited is not
 * taken for lost), and its state. 0, or -1 when there is no such job.
 */
int
job_load(const char *dir, const char *proc, long long n, struct job *j)
{
	struct buf b = { NULL, 0, 0 };
	struct stat sb;
	struct jsonr e;
	const char *sig;
	char *jobdir, *path, *cause = NULL;
	long long v;

	memset(j, 0, sizeof *j);
	j->n = n;
	j->container_start = host_container_start_now(proc);
	xasprintf(&jobdir, "%s/jobs/%lld", dir, n);
	if (stat(jobdir, &sb) != 0 || !S_ISDIR(sb.st_mode)) {
		free(jobdir);
		return -1;
	}
	j->created = (long long)sb.st_mtim.tv_sec;

	xasprintf(&path, "%s/spec.json", jobdir);
	if (buf_read_file(&b, path, JSONR_MAXSIZE + 1) == 0 &&
	    job_spec_parse(b.data, b.len, j->created, &j->spec, &cause) == 0) {
		j->spec_ok = 1;
		j->created = j->spec.created;
	} else {
		job_spec_free(&j->spec);
		j->spec.command = xstrdup("");
		j->spec.cwd = xstrdup("~");
		strcpy(j->spec.name, "?");
	}
	free(cause);
	free(path);
	buf_free(&b);

	xasprintf(&path, "%s/pid", jobdir);
	if (buf_read_file(&b, path, 4096) == 0 &&
	    jsonr_parse(b.data, b.len, &e, NULL) == 0) {
		j->has_pid = jsonr_int(&e, "supervisor", &j->supervisor) == 0 &&
		    jsonr_int(&e, "supervisor_start", &j->supervisor_start) ==
			0 &&
		    jsonr_int(&e, "pid", &j->pid) == 0 &&
		    jsonr_int(&e, "pid_start", &j->pid_start) == 0 &&
		    jsonr_int(&e, "started", &j->started) == 0 &&
		    j->supervisor > 0 && j->pid > 0;
		jsonr_free(&e);
	}
	free(path);
	buf_free(&b);
	if (j->has_pid) {
		j->supervisor_alive =
		    shell_pid_start(proc, j->supervisor) == j->supervisor_start;
		j->pid_alive = shell_pid_start(proc, j->pid) == j->pid_start;
	}

	xasprintf(&path, "%s/status", jobdir);
	if (buf_read_file(&b, path, 4096) == 0 &&
	    jsonr_parse(b.data, b.len, &e, NULL) == 0) {
		j->has_status = jsonr_int(&e, "ended", &j->ended) == 0;
		if (jsonr_int(&e, "exit", &v) == 0) {
			j->exit.set = 1;
			j->exit.v = v;
		}
		if ((sig = jsonr_str(&e, "signal")) != NULL &&
		    (j->signal = job_signal_number(sig)) < 0)
			j->signal = 0;
		j->core = jsonr_get(&e, "core") != NULL &&
		    jsonr_get(&e, "core")->type == JSONR_BOOL &&
		    jsonr_get(&e, "core")->i;
		jsonr_free(&e);
	}
	free(path);
	buf_free(&b);

	xasprintf(&path, "%s/kill", jobdir);
	j->has_kill = access(path, F_OK) == 0;
	free(path);
	free(jobdir);
	job_judge(j, (long long)time(NULL));
	return 0;
}

/* Free what j holds. */
void
job_free(struct job *j)
{
	job_spec_free(&j->spec);
}

/* qsort: newest (highest number) first. */
static int
job_cmp(const void *a, const void *b)
{
	const struct job *x = a, *y = b;

	return x->n < y->n ? 1 : x->n > y->n ? -1 : 0;
}

/*
 * The jobs of dir, newest first, in *jobs (caller frees with
 * job_list_free); 0, or -1 when dir/jobs cannot be read (ENOENT: no job
 * yet, *n is 0 then too).
 */
int
job_list(const char *dir, const char *proc, struct job **jobs, size_t *n)
{
	struct dirent *de;
	char *path;
	long long num;
	size_t cap = 0;
	DIR *d;

	*jobs = NULL;
	*n = 0;
	xasprintf(&path, "%s/jobs", dir);
	d = opendir(path);
	free(path);
	if (d == NULL)
		return -1;
	while ((de = readdir(d)) != NULL) {
		if (job_number(de->d_name, &num) != 0)
			continue;
		if (*n == cap) {
			cap = cap == 0 ? 16 : cap * 2;
			*jobs = xreallocarray(*jobs, cap, sizeof **jobs);
		}
		if (job_load(dir, proc, num, &(*jobs)[*n]) == 0)
			(*n)++;
	}
	closedir(d);
	if (*n > 0)
		qsort(*jobs, *n, sizeof **jobs, job_cmp);
	return 0;
}

/* Free a list from job_list. */
void
job_list_free(struct job *jobs, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		job_free(&jobs[i]);
	free(jobs);
}

/*
 * The last line (in last, size more than JOB_LAST_LINE_MAX) and the size
 * of job j's log and log.1 together; the last line of log.1 when log has
 * none (just rotated).
 */
void
job_log_facts(const char *dir, const struct job *j, char *last, size_t size,
    long long *bytes)
{
	const char *names[] = { "log", "log.1" };
	char chunk[JOB_LAST_CHUNK], *path;
	struct stat sb;
	size_t i;
	ssize_t got;
	off_t off;
	int fd;

	last[0] = '\0';
	*bytes = 0;
	for (i = 0; i < 2; i++) {
		xasprintf(&path, "%s/jobs/%lld/%s", dir, j->n, names[i]);
		fd = open(path, O_RDONLY | O_CLOEXEC);
		free(path);
		if (fd == -1)
			continue;
		if (fstat(fd, &sb) == 0) {
			*bytes += (long long)sb.st_size;
			off = sb.st_size > JOB_LAST_CHUNK
			    ? sb.st_size - JOB_LAST_CHUNK
			    : 0;
			if (last[0] == '\0' &&
			    (got = pread(fd, chunk, sizeof chunk, off)) > 0)
				job_last_line(chunk, (size_t)got, last, size);
		}
		close(fd);
	}
}

/* One job of job ls. */
static void
job_write_ls(struct jsonw *w, const char *dir, struct job *j)
{
	char last[JOB_LAST_LINE_MAX + 1], sb[16];
	const char *then = job_then_name(&j->spec.then);
	long long bytes, now = (long long)time(NULL);
	size_t cl = strlen(j->spec.command);
	int ended = j->state != JOB_RUNNING && j->state != JOB_LOST;

	job_log_facts(dir, j, last, sizeof last, &bytes);
	jsonw_object_begin(w, NULL);
	jsonw_int(w, "job", j->n);
	jsonw_string(w, "name", j->spec.name);
	jsonw_stringn(w, "command", j->spec.command,
	    cl > JOB_COMMAND_SHOWN ? JOB_COMMAND_SHOWN : cl);
	jsonw_string(w, "state", job_state_name(j->state));
	jsonw_int(w, "started", j->started);
	if (ended)
		jsonw_int(w, "ended", j->ended);
	else
		jsonw_null(w, "ended");
	if (ended)
		jsonw_int(w, "duration_s", j->ended - j->started);
	else if (j->state == JOB_RUNNING)
		jsonw_int(w, "duration_s", now - j->started);
	else
		jsonw_null(w, "duration_s");
	jsonw_opt_int(
	    w, "exit", j->has_status ? j->exit : (struct opt_int){ 0, 0 });
	if (j->signal != 0)
		jsonw_string(
		    w, "signal", job_signal_name(j->signal, sb, sizeof sb));
	else
		jsonw_null(w, "signal");
	jsonw_string(w, "reason", j->reason[0] != '\0' ? j->reason : NULL);
	jsonw_int(w, "pid", j->pid);
	jsonw_string(w, "then", then);
	jsonw_string(w, "fire_id", j->fire_id);
	jsonw_string(w, "last_line", last[0] != '\0' ? last : NULL);
	jsonw_int(w, "log_bytes", bytes);
	jsonw_object_end(w);
}

/* job ls [--job N]: the jobs, newest first (not those still starting). */
static int
job_ls(const char *dir, long long only)
{
	struct job *jobs;
	struct jsonw w;
	size_t n, i, shown = 0;

	job_list(dir, "/proc", &jobs, &n);
	jsonw_init(&w);
	jsonw_object_begin(&w, NULL);
	jsonw_array_begin(&w, "jobs");
	for (i = 0; i < n; i++) {
		if (jobs[i].state == JOB_STARTING ||
		    (only > 0 && jobs[i].n != only))
			continue;
		job_write_ls(&w, dir, &jobs[i]);
		shown++;
	}
	jsonw_array_end(&w);
	jsonw_object_end(&w);
	job_list_free(jobs, n);
	if (only > 0 && shown == 0) {
		jsonw_free(&w);
		return job_error(
		    JOB_EXIT_NOJOB, "no job %lld in %s/jobs", only, dir);
	}
	printf("%s\n", w.out.data);
	jsonw_free(&w);
	fflush(stdout);
	return 0;
}

/* Copy bytes [from, to) of fd to stdout; -1 when stdout is gone. */
static int
job_copy(int fd, off_t from, off_t to)
{
	char chunk[65536];
	ssize_t n;
	size_t want;

	while (from < to) {
		want = to - from > (off_t)sizeof chunk ? sizeof chunk
						       : (size_t)(to - from);
		if ((n = pread(fd, chunk, want, from)) == -1 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		if (buf_write_all(1, chunk, (size_t)n) != 0)
			return -1;
		from += n;
	}
	return 0;
}

/*
 * Where the last lines lines of fd[0] + fd[1] (sizes size[0], size[1]; a
 * missing file is -1 and 0) begin, as an offset in the two together.
 */
static off_t
job_tail_start(const int *fd, const off_t *size, long long lines)
{
	char chunk[65536], c;
	off_t pos = size[0] + size[1], base, at;
	size_t want, i;
	ssize_t n;
	int f;

	if (lines <= 0)
		return pos;
	if (pos > 0) { /* a last line's newline does not start another */
		f = pos > size[0] ? 1 : 0;
		at = f == 1 ? pos - 1 - size[0] : pos - 1;
		if (pread(fd[f], &c, 1, at) == 1 && c == '\n')
			pos--;
	}
	while (pos > 0) {
		f = pos > size[0] ? 1 : 0;
		base = f == 1 ? size[0] : 0;
		want = pos - base > (off_t)sizeof chunk ? sizeof chunk
							: (size_t)(pos - base);
		n = pread(fd[f], chunk, want, pos - (off_t)want - base);
		if (n != (ssize_t)want)
			return 0;
		for (i = want; i > 0; i--)
			if (chunk[i - 1] == '\n' && --lines == 0)
				return pos - (off_t)want + (off_t)i;
		pos -= (off_t)want;
	}
	return 0;
}

/* The exit status of job log --follow for ended job j. */
static int
job_exit_status(const struct job *j)
{
	if (j->state == JOB_LOST || !j->has_status)
		return 1;
	if (j->signal != 0)
		return 128 + j->signal;
	return j->exit.set ? (int)j->exit.v : 1;
}

/*
 * job log: print job n's log (tail >= 0: its last tail lines) and, with
 * follow, what it writes until it has ended and its log is drained; then
 * the trailer on stderr and the job's exit status.
 */
static int
job_log(const char *dir, long long n, long long tail, int follow)
{
	struct job j;
	struct stat sb;
	struct pollfd out = { 1, 0, 0 };
	off_t size[2] = { 0, 0 }, start, off, got;
	char *path[2], sigb[16];
	int fd[2], i, r = 0, ended;

	if (n == 0) { /* --last */
		char *jobs;

		xasprintf(&jobs, "%s/jobs", dir);
		n = job_next_number(jobs) - 1;
		free(jobs);
	}
	if (n <= 0 || job_load(dir, "/proc", n, &j) != 0)
		return job_error(
		    JOB_EXIT_NOJOB, "no job %lld in %s/jobs", n, dir);
	xasprintf(&path[0], "%s/jobs/%lld/log.1", dir, n);
	xasprintf(&path[1], "%s/jobs/%lld/log", dir, n);
	for (i = 0; i < 2; i++) {
		fd[i] = open(path[i], O_RDONLY | O_CLOEXEC);
		if (fd[i] != -1 && fstat(fd[i], &sb) == 0)
			size[i] = sb.st_size;
	}
	start = tail >= 0 ? job_tail_start(fd, size, tail) : 0;
	if (start < size[0])
		r = job_copy(fd[0], start, size[0]);
	if (r == 0)
		r = job_copy(
		    fd[1], start > size[0] ? start - size[0] : 0, size[1]);
	off = size[1];
	while (follow && r == 0) {
		ended = j.state != JOB_RUNNING && j.state != JOB_STARTING;
		if (fd[1] == -1)
			fd[1] = open(path[1], O_RDONLY | O_CLOEXEC);
		got = fd[1] != -1 && fstat(fd[1], &sb) == 0 ? sb.st_size : off;
		if (got < off) { /* rotated: the rest is in log.1 now */
			if (fd[0] != -1)
				close(fd[0]);
			if ((fd[0] = open(path[0], O_RDONLY | O_CLOEXEC)) !=
				-1 &&
			    fstat(fd[0], &sb) == 0 && sb.st_size > off)
				r = job_copy(fd[0], off, sb.st_size);
			off = 0;
		}
		if (r == 0 && got > off) {
			r = job_copy(fd[1], off, got);
			off = got;
			continue; /* until nothing more comes */
		}
		if (ended)
			break;
		/*
		 * A reader gone (an interrupted logs -f: sshd closes the
		 * pipe) is seen here too, not only at the next write, which a
		 * silent job may never make.
		 */
		if (poll(&out, 1, JOB_FOLLOW_MS) > 0 &&
		    (out.revents & (POLLERR | POLLHUP | POLLNVAL)) != 0) {
			r = -1;
			break;
		}
		job_free(&j);
		if (job_load(dir, "/proc", n, &j) != 0)
			break;
	}
	for (i = 0; i < 2; i++) {
		if (fd[i] != -1)
			close(fd[i]);
		free(path[i]);
	}
	if (follow) {
		fprintf(stderr, "{\"job\":%lld,\"state\":\"%s\",\"exit\":", n,
		    job_state_name(j.state));
		if (j.has_status && j.exit.set)
			fprintf(stderr, "%lld", j.exit.v);
		else
			fprintf(stderr, "null");
		if (j.signal != 0)
			fprintf(stderr, ",\"signal\":\"%s\"}\n",
			    job_signal_name(j.signal, sigb, sizeof sigb));
		else
			fprintf(stderr, ",\"signal\":null}\n");
		r = r == 0 ? job_exit_status(&j) : 1;
	} else if (r != 0)
		r = 1;
	job_free(&j);
	return r;
}

/*
 * Whether a process (not a zombie) of job pgid's group is left: one whose
 * process group and session are both pgid (the job leads its own session,
 * and no process can join a group of another session), started no earlier
 * than the job (start: its pid_start).
 */
static int
job_group_alive(const char *proc, long long pgid, long long start)
{
	struct buf b = { NULL, 0, 0 };
	struct host_pstat ps;
	struct dirent *de;
	char *path;
	int alive = 0;
	DIR *d;

	if ((d = opendir(proc)) == NULL)
		return kill(-(pid_t)pgid, 0) == 0;
	while (!alive && (de = readdir(d)) != NULL) {
		if (de->d_name[0] < '1' || de->d_name[0] > '9')
			continue;
		xasprintf(&path, "%s/%s/stat", proc, de->d_name);
		if (buf_read_file(&b, path, 4096) == 0 &&
		    host_parse_pstat(b.data, b.len, &ps) == 0 &&
		    ps.pgrp == pgid && ps.session == pgid &&
		    ps.starttime >= start && ps.state != 'Z' && ps.state != 'X')
			alive = 1;
		free(path);
		buf_free(&b);
	}
	closedir(d);
	return alive;
}

/*
 * Whether job j's process group is still the job's: its pid is the job's
 * process (pid_start) or no live process's. Linux hands out no pid that
 * is still some process's group or session, so while members of the
 * job's group live, its pid is not another process's.
 */
static int
job_group_ours(const struct job *j)
{
	long long start;

	if (!j->has_pid)
		return 0;
	start = shell_pid_start("/proc", j->pid);
	return start < 0 || start == j->pid_start;
}

/*
 * job kill: sig to job n's process group, then SIGKILL after grace seconds
 * if any of it is left; whether the job has ended or not, as a job's shell
 * that exited can leave members of its group running. Nothing is sent
 * when none is left ("sent": false). The kill file is written before the
 * first signal to a job that has not ended (an ended one's state stays
 * what it was journaled as).
 */
static int
job_kill(const char *dir, long long n, int sig, long long grace)
{
	struct job j;
	struct jsonw w;
	char *jobdir, *cause = NULL, sb[16];
	const char *name = job_signal_name(sig, sb, sizeof sb);
	int killed = 0, gone = 1, sent = 0, waited, r;

	if (job_load(dir, "/proc", n, &j) != 0)
		return job_error(
		    JOB_EXIT_NOJOB, "no job %lld in %s/jobs", n, dir);
	if (job_group_ours(&j) &&
	    job_group_alive("/proc", j.pid, j.pid_start)) {
		if (!j.has_status) {
			xasprintf(&jobdir, "%s/jobs/%lld", dir, n);
			jsonw_init(&w);
			jsonw_object_begin(&w, NULL);
			jsonw_int(&w, "time", (long long)time(NULL));
			jsonw_string(&w, "signal", name);
			jsonw_int(&w, "grace_s", grace);
			jsonw_object_end(&w);
			buf_add(&w.out, "\n", 1);
			r = plan_write_named(
			    jobdir, "kill", w.out.data, w.out.len, &cause);
			jsonw_free(&w);
			free(jobdir);
			if (r != 0) {
				job_free(&j);
				job_error(JOB_EXIT_START, "%s", cause);
				free(cause);
				return JOB_EXIT_START;
			}
		}
		if (job_group_ours(&j) && kill(-(pid_t)j.pid, sig) == 0)
			sent = 1;
		for (waited = 0; waited < grace * 1000; waited += 100) {
			if (!job_group_alive("/proc", j.pid, j.pid_start))
				break;
			poll(NULL, 0, 100);
		}
		if (job_group_ours(&j) &&
		    job_group_alive("/proc", j.pid, j.pid_start)) {
			kill(-(pid_t)j.pid, SIGKILL);
			killed = sent = 1;
			for (waited = 0; waited < 5000; waited += 100) {
				if (!job_group_alive(
					"/proc", j.pid, j.pid_start))
					break;
				poll(NULL, 0, 100);
			}
		}
		gone = !job_group_alive("/proc", j.pid, j.pid_start);
	}
	printf("{\"job\":%lld,\"signal\":\"%s\",\"sent\":%s,\"killed\":%s,"
	       "\"gone\":%s}\n",
	    n, name, sent ? "true" : "false", killed ? "true" : "false",
	    gone ? "true" : "false");
	fflush(stdout);
	job_free(&j);
	return 0;
}

/*
 * gpufleet-agent job start|ls|log|kill (agent/JOBS.md "Commands"); argv[0]
 * is "job".
 */
int
job_main(int argc, char **argv)
{
	struct buf in = { NULL, 0, 0 };
	const char *dir = "~/.cache/gpufleet", *cmd, *a;
	char *full, *end;
	long long n = -1, tail = -1, grace = 10;
	int i, last = 0, follow = 0, sig = SIGTERM, r;

	if (argc < 2)
		return job_usage("", "needs start, ls, log or kill");
	cmd = argv[1];
	if (strcmp(cmd, "start") != 0 && strcmp(cmd, "ls") != 0 &&
	    strcmp(cmd, "log") != 0 && strcmp(cmd, "kill") != 0)
		return job_usage(cmd, "needs start, ls, log or kill");
	for (i = 2; i < argc; i++) {
		a = argv[i];
		if (strcmp(a, "--last") == 0 && strcmp(cmd, "log") == 0) {
			last = 1;
			continue;
		}
		if (strcmp(a, "--follow") == 0 && strcmp(cmd, "log") == 0) {
			follow = 1;
			continue;
		}
		if (i + 1 >= argc)
			return job_usage(cmd, "bad argument");
		if (strcmp(a, "--dir") == 0)
			dir = argv[++i];
		else if (strcmp(a, "--job") == 0 && strcmp(cmd, "start") != 0) {
			if (job_number(argv[++i], &n) != 0)
				return job_usage(cmd, "--job needs a number");
		} else if (strcmp(a, "--tail") == 0 &&
		    strcmp(cmd, "log") == 0) {
			errno = 0;
			tail = strtoll(argv[++i], &end, 10);
			if (errno != 0 || *end != '\0' || end == argv[i] ||
			    tail < 0)
				return job_usage(
				    cmd, "--tail needs a number of lines");
		} else if (strcmp(a, "--signal") == 0 &&
		    strcmp(cmd, "kill") == 0) {
			if ((sig = job_signal_number(argv[++i])) < 0)
				return job_usage(cmd,
				    "--signal needs a signal name or number");
		} else if (strcmp(a, "--grace") == 0 &&
		    strcmp(cmd, "kill") == 0) {
			errno = 0;
			grace = strtoll(argv[++i], &end, 10);
			if (errno != 0 || *end != '\0' || end == argv[i] ||
			    grace < 0 || grace > 3600)
				return job_usage(
				    cmd, "--grace needs 0-3600 seconds");
		} else
			return job_usage(cmd, "bad argument");
	}
	if (*dir == '\0')
		return job_usage(cmd, "--dir needs a directory");
	if (strcmp(cmd, "log") == 0 && (n > 0) == last)
		return job_usage(cmd, "log needs --job N or --last");
	if (strcmp(cmd, "kill") == 0 && n <= 0)
		return job_usage(cmd, "kill needs --job N");
	full = report_expand_home(dir);
	if (strcmp(cmd, "start") == 0) {
		if (buf_read_file(&in, "/dev/stdin", JSONR_MAXSIZE + 1) != 0) {
			r = job_error(JOB_EXIT_USAGE, "cannot read stdin: %s",
			    strerror(errno));
		} else
			r = job_start(full, in.data, in.len);
		buf_free(&in);
	} else if (strcmp(cmd, "ls") == 0)
		r = job_ls(full, n);
	else if (strcmp(cmd, "log") == 0)
		r = job_log(full, last ? 0 : n, tail, follow);
	else
		r = job_kill(full, n, sig, grace);
	free(full);
	return r;
}

/* Jobs: the spec, the checks of what a user typed, the agent's answers. */

#include <ctype.h>
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "jobspec.h"
#include "misc.h"
#include "timeparse.h"
#include "xmalloc.h"

static int name_char(int);
static int word_safe(const char *);
static void text_add(char **, const char *, ...)
    __attribute__((format(printf, 2, 3)));

/* The signals by name (Linux numbers, as on the instances). */
static const struct {
	const char *name;
	int number;
} signals[] = { { "HUP", SIGHUP }, { "INT", SIGINT }, { "QUIT", SIGQUIT },
	{ "ILL", SIGILL }, { "TRAP", SIGTRAP }, { "ABRT", SIGABRT },
	{ "BUS", SIGBUS }, { "FPE", SIGFPE }, { "KILL", SIGKILL },
	{ "USR1", SIGUSR1 }, { "SEGV", SIGSEGV }, { "USR2", SIGUSR2 },
	{ "PIPE", SIGPIPE }, { "ALRM", SIGALRM }, { "TERM", SIGTERM },
	{ "CHLD", SIGCHLD }, { "CONT", SIGCONT }, { "STOP", SIGSTOP },
	{ "TSTP", SIGTSTP }, { "TTIN", SIGTTIN }, { "TTOU", SIGTTOU },
	{ "URG", SIGURG }, { "XCPU", SIGXCPU }, { "XFSZ", SIGXFSZ },
	{ "VTALRM", SIGVTALRM }, { "PROF", SIGPROF }, { "WINCH", SIGWINCH },
	{ "IO", SIGIO }, { "PWR", SIGPWR }, { "SYS", SIGSYS } };

#define NSIGNALS (sizeof signals / sizeof signals[0])

static int
name_char(int c)
{
	return isalnum(c) || c == '.' || c == '_' || c == '-';
}

/* Whether a word means itself to sh unquoted. */
static int
word_safe(const char *w)
{
	const char *p;

	if (*w == '\0')
		return 0;
	for (p = w; *p != '\0'; p++) {
		if (!isalnum((unsigned char)*p) &&
		    strchr("_./=:,+@%^-", *p) == NULL)
			return 0;
	}
	return 1;
}

/*
 * COMMAND's words as one sh command line, each word reaching the command
 * as given (as exec passes them): a word that needs no quoting is left
 * bare, so `jobs` shows "python train.py", the others are single-quoted.
 * Caller frees.
 */
char *
jobspec_join(int argc, char **argv)
{
	struct misc_buf b = { NULL, 0, 0, 0 };
	char *q;
	int k;

	for (k = 0; k < argc; k++) {
		if (k != 0)
			misc_buf_add(&b, " ", 1, 0);
		if (word_safe(argv[k])) {
			misc_buf_add(&b, argv[k], strlen(argv[k]), 0);
			continue;
		}
		q = misc_shell_quote(argv[k]);
		misc_buf_add(&b, q, strlen(q), 0);
		free(q);
	}
	return b.data != NULL ? b.data : xstrdup("");
}

/*
 * The name of a job when --name is not given: the basename of the
 * command's first word, each character a name may not have made '_', cut
 * to JOBSPEC_NAME_MAX (as the agent's default); "job" when it is empty.
 * buf holds
 * JOBSPEC_NAME_MAX + 1 bytes.
 */
void
jobspec_default_name(const char *word, char *buf)
{
	const char *base = strrchr(word, '/');
	size_t n = 0;

	base = base != NULL ? base + 1 : word;
	for (; *base != '\0' && n < JOBSPEC_NAME_MAX; base++)
		buf[n++] = name_char((unsigned char)*base) ? *base : '_';
	buf[n] = '\0';
	if (n == 0)
		snprintf(buf, JOBSPEC_NAME_MAX + 1, "job");
}

/* A --name: 1-64 of [A-Za-z0-9._-]. cause may be NULL. */
int
jobspec_check_name(const char *name, char **cause)
{
	size_t i, n = strlen(name);

	if (n == 0 || n > JOBSPEC_NAME_MAX) {
		if (cause == NULL)
			return -1;
		xasprintf(cause, "a job name is 1 to %d characters",
		    JOBSPEC_NAME_MAX);
		return -1;
	}
	for (i = 0; i < n; i++) {
		if (!name_char((unsigned char)name[i])) {
			if (cause == NULL)
				return -1;
			xasprintf(cause,
			    "job name '%s' may only have letters, digits, "
			    "'.', '_' and '-'",
			    name);
			return -1;
		}
	}
	return 0;
}

/* An --env K=V: K is [A-Za-z_][A-Za-z0-9_]*, the sizes as the agent's. */
int
jobspec_check_env(const char *kv, char **cause)
{
	const char *eq = strchr(kv, '=');
	size_t klen, i;

	if (eq == NULL) {
		xasprintf(cause, "--env '%s' is not KEY=VALUE", kv);
		return -1;
	}
	klen = (size_t)(eq - kv);
	if (klen == 0 || klen > JOBSPEC_ENV_KEY_MAX ||
	    !(isalpha((unsigned char)kv[0]) || kv[0] == '_')) {
		xasprintf(cause,
		    "--env: '%.*s' is not a variable name (a letter or '_', "
		    "then letters, digits, '_'; at most %d)",
		    (int)(klen > 64 ? 64 : klen), kv, JOBSPEC_ENV_KEY_MAX);
		return -1;
	}
	for (i = 1; i < klen; i++) {
		if (!isalnum((unsigned char)kv[i]) && kv[i] != '_') {
			xasprintf(cause, "--env: '%.*s' is not a variable name",
			    (int)klen, kv);
			return -1;
		}
	}
	if (strlen(eq + 1) > JOBSPEC_ENV_VALUE_MAX) {
		xasprintf(cause,
		    "--env: the value of %.*s is longer than %d "
		    "bytes",
		    (int)klen, kv, JOBSPEC_ENV_VALUE_MAX);
		return -1;
	}
	/* The spec is JSON: a value it cannot hold would be left out. */
	if (!jobspec_utf8(eq + 1)) {
		xasprintf(cause, "--env: the value of %.*s is not UTF-8",
		    (int)klen, kv);
		return -1;
	}
	return 0;
}

/* Whether text is valid UTF-8 (a JSON string can hold it). */
int
jobspec_utf8(const char *text)
{
	json_t *v = json_string(text);

	json_decref(v);
	return v != NULL;
}

/* A --log-max SIZE, from 1 MiB to 16 GiB (jobspec_parse_size_range). */
int
jobspec_parse_size(const char *text, int64_t *out, char **cause)
{
	return jobspec_parse_size_range(
	    text, JOBSPEC_LOG_MIN, JOBSPEC_LOG_MAX, out, cause);
}

/* A whole number of MiB as a size ("1M", "16G"). Caller frees. */
static char *
size_text(int64_t n)
{
	char *s;

	if (n % (1LL << 30) == 0)
		xasprintf(&s, "%lldG", (long long)(n >> 30));
	else
		xasprintf(&s, "%lldM", (long long)(n >> 20));
	return s;
}

/*
 * A SIZE: a number of bytes with an optional K, M or G (KiB, MiB, GiB;
 * "MiB" and "MB" read the same), from min to max (whole MiB).
 */
int
jobspec_parse_size_range(
    const char *text, int64_t min, int64_t max, int64_t *out, char **cause)
{
	const char *p = text;
	int64_t n = 0, mult = 1;
	char *lo, *hi;

	if (!isdigit((unsigned char)*p))
		goto bad;
	while (isdigit((unsigned char)*p)) {
		n = n * 10 + (*p++ - '0');
		if (n > max)
			goto range;
	}
	switch (toupper((unsigned char)*p)) {
	case '\0':
		break;
	case 'K':
		mult = 1LL << 10;
		break;
	case 'M':
		mult = 1LL << 20;
		break;
	case 'G':
		mult = 1LL << 30;
		break;
	default:
		goto bad;
	}
	if (*p != '\0') {
		p++;
		if (strcasecmp(p, "ib") == 0 || strcasecmp(p, "b") == 0)
			p += strlen(p);
		if (*p != '\0')
			goto bad;
	}
	if (n > max / mult)
		goto range;
	n *= mult;
	if (n < min || n > max)
		goto range;
	*out = n;
	return 0;
bad:
	xasprintf(cause, "'%s' is not a size (e.g. 64M, 1G)", text);
	return -1;
range:
	lo = size_text(min);
	hi = size_text(max);
	xasprintf(cause, "'%s' is out of range (%s to %s)", text, lo, hi);
	free(lo);
	free(hi);
	return -1;
}

/*
 * A --signal: a name (TERM, SIGTERM, term) or a number from 1 to 64. buf
 * gets the name the agent takes (TERM, or the number for one without a
 * name).
 */
int
jobspec_parse_signal(const char *text, char *buf, size_t len, char **cause)
{
	const char *s = text;
	char *end;
	long n;
	size_t i;

	if (isdigit((unsigned char)*s)) {
		errno = 0;
		n = strtol(s, &end, 10);
		if (*end != '\0' || errno != 0 || n < 1 || n > 64)
			goto bad;
		for (i = 0; i < NSIGNALS; i++) {
			if (signals[i].number == n) {
				snprintf(buf, len, "%s", signals[i].name);
				return 0;
			}
		}
		snprintf(buf, len, "%ld", n);
		return 0;
	}
	if (strncasecmp(s, "SIG", 3) == 0)
		s += 3;
	for (i = 0; i < NSIGNALS; i++) {
		if (strcasecmp(s, signals[i].name) == 0) {
			snprintf(buf, len, "%s", signals[i].name);
			return 0;
		}
	}
bad:
	xasprintf(
	    cause, "'%s' is not a signal (TERM, INT, KILL, 15, ...)", text);
	return -1;
}

/* A signal's number by name ("TERM", or a number), or -1. */
int
jobspec_signal_number(const char *name)
{
	char *end;
	long n;
	size_t i;

	for (i = 0; i < NSIGNALS; i++) {
		if (strcmp(name, signals[i].name) == 0)
			return signals[i].number;
	}
	n = strtol(name, &end, 10);
	if (*name != '\0' && *end == '\0' && n >= 1 && n <= 64)
		return (int)n;
	return -1;
}

/*
 * INSTANCE:JOB (or INSTANCE alone unless need_job: *job is 0, the newest).
 * *name is the part before the last ':'. Caller frees *name.
 */
int
jobspec_parse_target(
    const char *text, int need_job, char **name, int64_t *job, char **cause)
{
	const char *colon = strrchr(text, ':'), *p;
	int64_t n = 0;

	*name = NULL;
	*job = 0;
	if (colon == NULL) {
		if (need_job || *text == '\0') {
			xasprintf(cause,
			    "'%s' is not INSTANCE:JOB (e.g. "
			    "a100-1:7)",
			    text);
			return -1;
		}
		*name = xstrdup(text);
		return 0;
	}
	for (p = colon + 1; isdigit((unsigned char)*p) && n <= 1000000000; p++)
		n = n * 10 + (*p - '0');
	if (colon == text || colon[1] == '\0' || *p != '\0' || n < 1 ||
	    n > 1000000000) {
		xasprintf(cause,
		    "'%s' is not INSTANCE:JOB (JOB a number from 1, e.g. "
		    "a100-1:7)",
		    text);
		return -1;
	}
	*name = xstrndup(text, (size_t)(colon - text));
	*job = n;
	return 0;
}

/* The spec as JSON for job start's stdin. Caller frees. */
char *
jobspec_json(const struct jobspec *s)
{
	json_t *o, *env = json_array(), *then = json_null();
	const char *eq;
	char *text;
	size_t i;

	for (i = 0; i < s->nenv; i++) {
		eq = strchr(s->env[i], '=');
		json_array_append_new(env,
		    json_pack(
			"[s#, s]", s->env[i], (int)(eq - s->env[i]), eq + 1));
	}
	if (s->then.on)
		then = json_pack("{s:s, s:s, s:i, s:o, s:I, s:b}", "when",
		    s->then.if_ok ? "success" : "always", "action",
		    s->then.local ? "local" : "stop", "warn_minutes",
		    s->then.warn_minutes, "before_stop",
		    s->then.before != NULL ? json_string(s->then.before)
					   : json_null(),
		    "before_stop_timeout_s",
		    (json_int_t)s->then.before_timeout_s, "before_must_succeed",
		    0);
	o = json_pack("{s:i, s:s, s:s, s:s, s:o, s:I, s:I, s:o}", "version", 1,
	    "name", s->name, "command", s->command, "cwd",
	    s->cwd != NULL ? s->cwd : "~", "env", env, "log_max_bytes",
	    (json_int_t)s->log_max_bytes, "created", (json_int_t)s->created,
	    "then", then);
	text = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
	json_decref(o);
	return text;
}

/*
 * A job's state, exit and signal from o (a job ls entry, a job_ended
 * entry, the follow trailer), checked: an instance's text. Returns 0, or
 * -1 when they do not hold together.
 */
int
jobspec_read_end(json_t *o, struct jobspec_end *e)
{
	static const char *const states[] = { "running", "succeeded", "failed",
		"killed", "lost" };
	json_t *v;
	const char *s;
	size_t i;

	memset(e, 0, sizeof *e);
	v = json_object_get(o, "state");
	for (i = 0; json_is_string(v) && i < 5; i++) {
		if (strcmp(json_string_value(v), states[i]) == 0)
			snprintf(e->state, sizeof e->state, "%s", states[i]);
	}
	if (e->state[0] == '\0')
		return -1;
	v = json_object_get(o, "exit");
	if (json_is_integer(v)) {
		if (json_integer_value(v) < 0 || json_integer_value(v) > 255)
			return -1;
		e->has_exit = 1;
		e->exit = (int)json_integer_value(v);
	} else if (v != NULL && !json_is_null(v))
		return -1;
	v = json_object_get(o, "signal");
	if (json_is_string(v)) {
		s = json_string_value(v);
		if (*s == '\0' || strlen(s) >= sizeof e->signal)
			return -1;
		for (i = 0; s[i] != '\0'; i++) {
			if (!isupper((unsigned char)s[i]) &&
			    !isdigit((unsigned char)s[i]))
				return -1;
		}
		snprintf(e->signal, sizeof e->signal, "%s", s);
	} else if (v != NULL && !json_is_null(v))
		return -1;
	return 0;
}

/*
 * The trailer `job log --follow` writes on stderr as its last line:
 * {"job":N,"state":S,"exit":E,"signal":G}, looked for in the len bytes of
 * err (the last line that is one). Returns 0 with *job and *e, or -1.
 */
int
jobspec_trailer(
    const char *err, size_t len, int64_t *job, struct jobspec_end *e)
{
	size_t end = len, start;
	json_t *o, *v;
	int r = -1;

	while (end > 0 && r != 0) {
		while (end > 0 && err[end - 1] == '\n')
			end--;
		start = end;
		while (start > 0 && err[start - 1] != '\n')
			start--;
		if (start == end)
			break;
		o = json_loadb(err + start, end - start, 0, NULL);
		v = json_object_get(o, "job");
		if (json_is_integer(v) && json_integer_value(v) > 0 &&
		    jobspec_read_end(o, e) == 0) {
			*job = json_integer_value(v);
			r = 0;
		}
		json_decref(o);
		end = start;
	}
	return r;
}

/*
 * The exit status a job's end stands for, as `logs -f` exits: its exit
 * code, 128 + the signal's number, or 1 (lost, or nothing known).
 */
int
jobspec_exit_status(const struct jobspec_end *e)
{
	int n;

	if (e->has_exit)
		return e->exit;
	if (e->signal[0] != '\0' && (n = jobspec_signal_number(e->signal)) > 0)
		return 128 + n;
	return 1;
}

/* The EXIT column: the exit code, the signal's name, or "" (running). */
char *
jobspec_exit_text(const struct jobspec_end *e)
{
	char *s;

	if (e->signal[0] != '\0')
		return xstrdup(e->signal);
	if (e->has_exit) {
		xasprintf(&s, "%d", e->exit);
		return s;
	}
	return xstrdup("");
}

/* Append a formatted piece to *s. */
static void
text_add(char **s, const char *fmt, ...)
{
	va_list ap;
	char *piece, *tmp;

	va_start(ap, fmt);
	xvasprintf(&piece, fmt, ap);
	va_end(ap);
	xasprintf(&tmp, "%s%s", *s, piece);
	free(piece);
	free(*s);
	*s = tmp;
}

/* The job number of a fire id "j-N-STARTED" (or "...@CS"): 0, or -1. */
int
jobspec_fire_job(const char *id, int64_t *job)
{
	const char *p;
	int64_t n = 0;

	if (id == NULL || strncmp(id, "j-", 2) != 0)
		return -1;
	for (p = id + 2; isdigit((unsigned char)*p) && n <= 1000000000; p++)
		n = n * 10 + (*p - '0');
	if (p == id + 2 || *p != '-' || n < 1 || n > 1000000000)
		return -1;
	*job = n;
	return 0;
}

/*
 * DETAILS of a journal entry about a job, for `events`: job_started,
 * job_ended ("job 7 (train) succeeded, exit 0, 2h13m"), and the firing or
 * skipped entry of a --then stop; NULL for any other entry (the caller
 * shows its fields). Caller frees; the text is the instance's: escape it.
 */
char *
jobspec_event_text(const char *event, const char *id, const char *entry)
{
	json_t *o = json_loads(entry, 0, NULL), *ev;
	struct jobspec_end e;
	const char *name = json_string_value(json_object_get(o, "name")),
		   *then = json_string_value(json_object_get(o, "then")),
		   *reason = json_string_value(json_object_get(o, "reason"));
	json_t *jv = json_object_get(o, "job"), *d;
	char *s = NULL, *dur;
	int64_t job = 0;

	if (o == NULL)
		return NULL;
	if (json_is_integer(jv))
		job = json_integer_value(jv);
	if (strcmp(event, "job_started") == 0) {
		s = xstrdup("");
		text_add(&s, "job %lld (%s) started", (long long)job,
		    name != NULL ? name : "?");
		d = json_object_get(o, "pid");
		if (json_is_integer(d))
			text_add(
			    &s, ", pid %lld", (long long)json_integer_value(d));
		if (then != NULL)
			text_add(&s, ", then %s", then);
	} else if (strcmp(event, "job_ended") == 0) {
		s = xstrdup("");
		text_add(&s, "job %lld (%s) ", (long long)job,
		    name != NULL ? name : "?");
		if (jobspec_read_end(o, &e) != 0)
			text_add(&s, "ended");
		else if (strcmp(e.state, "lost") == 0)
			text_add(&s, "lost: %s", reason != NULL ? reason : "?");
		else if (strcmp(e.state, "killed") == 0 && e.signal[0] != '\0')
			text_add(&s, "killed by %s", e.signal);
		else if (e.signal[0] != '\0')
			text_add(&s, "%s, signal %s", e.state, e.signal);
		else if (e.has_exit)
			text_add(&s, "%s, exit %d", e.state, e.exit);
		else
			text_add(&s, "%s", e.state);
		d = json_object_get(o, "duration_s");
		if (json_is_integer(d) && strcmp(e.state, "lost") != 0) {
			dur = timeparse_duration(json_integer_value(d));
			text_add(&s, ", %s", dur);
			free(dur);
		}
		if (then != NULL)
			text_add(&s, "; then %s", then);
	} else if (jobspec_fire_job(id, &job) == 0 &&
	    strcmp(event, "firing") == 0) {
		ev = json_object_get(o, "evidence");
		s = xstrdup("");
		text_add(
		    &s, "stopping the instance: job %lld ", (long long)job);
		if (jobspec_read_end(ev, &e) != 0)
			text_add(&s, "ended");
		else if (e.signal[0] != '\0')
			text_add(&s, "%s by %s", e.state, e.signal);
		else if (e.has_exit)
			text_add(&s, "%s, exit %d", e.state, e.exit);
		else
			text_add(&s, "%s", e.state);
	} else if (jobspec_fire_job(id, &job) == 0 &&
	    strcmp(event, "skipped") == 0)
		xasprintf(&s, "no stop after job %lld: %s", (long long)job,
		    reason != NULL ? reason : "skipped");
	json_decref(o);
	return s;
}

/*
 * The watcher's plan (agent/WATCH.md "The plan"): its complete validation,
 * its load from D/plan.json, and `plan set`, the compare-and-swap write of
 * a new plan under D/plan.lock.
 */

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent.h"
#include "../controller/xmalloc.h"

static int plan_id(const struct jsonr *, const char *, size_t, char *, char **);
static int plan_stop(const struct jsonr *, struct plan *, char **);
static int plan_hold(
    const struct jsonr *, const char *, struct plan_deadline *, char **);
static int plan_deadline(const struct jsonr *, size_t, struct plan *, char **);
static int plan_deadlines(const struct jsonr *, struct plan *, char **);
static int plan_autostop(const struct jsonr *, struct plan *, char **);
static int plan_from(const struct jsonr *, struct plan *, char **);

/* "WHERE.KEY: WHAT" in *cause; returns -1. */
int
plan_bad(char **cause, const char *where, const char *key, const char *what)
{
	if (cause != NULL && *cause == NULL)
		xasprintf(cause, "%s%s%s: %s", where, *where != '\0' ? "." : "",
		    key, what);
	return -1;
}

/* Reject a key of object o that is not in allowed. */
int
plan_keys(const struct jsonr *o, const char *const *allowed, const char *where,
    char **cause)
{
	size_t i, k;

	for (i = 0; i < o->n; i++) {
		for (k = 0; allowed[k] != NULL; k++)
			if (strcmp(o->keys[i], allowed[k]) == 0)
				break;
		if (allowed[k] == NULL)
			return plan_bad(
			    cause, where, o->keys[i], "unknown key");
	}
	return 0;
}

/* An integer member in [min, max]; def when absent (required if def<min). */
int
plan_int(const struct jsonr *o, const char *key, const char *where,
    long long min, long long max, long long def, long long *out, char **cause)
{
	const struct jsonr *m = jsonr_get(o, key);
	char what[96];

	snprintf(what, sizeof what, "must be an integer %lld-%lld", min, max);
	if (m == NULL) {
		if (def < min)
			return plan_bad(cause, where, key, "missing");
		*out = def;
		return 0;
	}
	if (m->type != JSONR_INT || m->i < min || m->i > max)
		return plan_bad(cause, where, key, what);
	*out = m->i;
	return 0;
}

/* A boolean member, false when absent. */
int
plan_bool(const struct jsonr *o, const char *key, const char *where, int *out,
    char **cause)
{
	const struct jsonr *m = jsonr_get(o, key);

	*out = 0;
	if (m == NULL)
		return 0;
	if (m->type != JSONR_BOOL)
		return plan_bad(cause, where, key, "must be true or false");
	*out = (int)m->i;
	return 0;
}

/*
 * A non-empty string member in *out (caller frees), or NULL when it is null
 * or absent and nullable; required otherwise.
 */
int
plan_string(const struct jsonr *o, const char *key, const char *where,
    int nullable, char **out, char **cause)
{
	const struct jsonr *m = jsonr_get(o, key);

	*out = NULL;
	if ((m == NULL || m->type == JSONR_NULL) && nullable)
		return 0;
	if (m == NULL)
		return plan_bad(cause, where, key, "missing");
	if (m->type != JSONR_STRING || m->slen == 0)
		return plan_bad(cause, where, key,
		    nullable ? "must be a non-empty string or null"
			     : "must be a non-empty string");
	*out = xstrdup(m->s);
	return 0;
}

/*
 * Parse a version-1 document (a job's spec, a release): JSON, an object,
 * no key outside keys, "version" 1. 0, or -1 with *cause (caller frees);
 * root is to be freed with jsonr_free either way.
 */
int
plan_doc(const char *text, size_t len, const char *const *keys,
    struct jsonr *root, char **cause)
{
	long long version;
	char *why = NULL;

	if (jsonr_parse(text, len, root, &why) != 0) {
		*cause = why;
		return -1;
	}
	if (root->type != JSONR_OBJECT)
		return plan_bad(cause, "", "(top)", "must be an object");
	if (plan_keys(root, keys, "", cause) != 0 ||
	    plan_int(root, "version", "", 1, 1, -1, &version, cause) != 0)
		return -1;
	return 0;
}

/* An "id": 1-max of [A-Za-z0-9._-]. */
static int
plan_id(const struct jsonr *o, const char *where, size_t max, char *id,
    char **cause)
{
	const char *s = jsonr_str(o, "id");
	char what[64];
	size_t i, n;

	if (s == NULL)
		return plan_bad(cause, where, "id", "missing or not a string");
	n = strlen(s);
	snprintf(what, sizeof what, "must be 1-%zu characters", max);
	if (n == 0 || n > max)
		return plan_bad(cause, where, "id", what);
	for (i = 0; i < n; i++) {
		char c = s[i];

		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
			(c >= '0' && c <= '9') || c == '.' || c == '_' ||
			c == '-'))
			return plan_bad(cause, where, "id",
			    "may hold only A-Z a-z 0-9 . _ -");
	}
	memcpy(id, s, n + 1);
	return 0;
}

/* The "stop" member: null, or {command, kind, allow_release}. */
static int
plan_stop(const struct jsonr *root, struct plan *p, char **cause)
{
	static const char *const keys[] = { "command", "kind", "allow_release",
		NULL };
	const struct jsonr *o = jsonr_get(root, "stop");
	const char *kind;

	if (o == NULL || o->type == JSONR_NULL)
		return 0;
	if (o->type != JSONR_OBJECT)
		return plan_bad(cause, "", "stop", "must be an object or null");
	if (plan_keys(o, keys, "stop", cause) != 0 ||
	    plan_string(o, "command", "stop", 0, &p->stop_command, cause) != 0)
		return -1;
	kind = jsonr_str(o, "kind");
	if (kind == NULL ||
	    (strcmp(kind, "stop") != 0 && strcmp(kind, "release") != 0))
		return plan_bad(
		    cause, "stop", "kind", "must be \"stop\" or \"release\"");
	p->stop_release = strcmp(kind, "release") == 0;
	return plan_bool(o, "allow_release", "stop", &p->allow_release, cause);
}

/* A deadline's "hold": absent, or {"for":"pull", "wait", "must"}. */
static int
plan_hold(const struct jsonr *o, const char *where, struct plan_deadline *d,
    char **cause)
{
	static const char *const keys[] = { "for", "wait", "must", NULL };
	const struct jsonr *h = jsonr_get(o, "hold");
	const char *what;
	char w[48];

	if (h == NULL)
		return 0;
	snprintf(w, sizeof w, "%s.hold", where);
	if (h->type != JSONR_OBJECT)
		return plan_bad(cause, where, "hold", "must be an object");
	if (plan_keys(h, keys, w, cause) != 0 ||
	    plan_int(h, "wait", w, 1, HOLD_WAIT_MAX, HOLD_WAIT_DEFAULT,
		&d->hold_wait_s, cause) != 0 ||
	    plan_bool(h, "must", w, &d->hold_must, cause) != 0)
		return -1;
	what = jsonr_str(h, "for");
	if (what == NULL || strcmp(what, "pull") != 0)
		return plan_bad(cause, w, "for", "must be \"pull\"");
	d->hold = 1;
	return 0;
}

/* Deadline number i of the "deadlines" array. */
static int
plan_deadline(const struct jsonr *o, size_t i, struct plan *p, char **cause)
{
	static const char *const keys[] = { "id", "at", "action",
		"warn_minutes", "before_stop", "before_stop_timeout_s",
		"before_must_succeed", "unless_busy", "hold", NULL };
	struct plan_deadline *d = &p->deadlines[i];
	const char *action;
	char where[32];
	size_t k;

	snprintf(where, sizeof where, "deadlines[%zu]", i);
	if (o->type != JSONR_OBJECT)
		return plan_bad(cause, "", where, "must be an object");
	if (plan_keys(o, keys, where, cause) != 0 ||
	    plan_id(o, where, PLAN_ID_MAX, d->id, cause) != 0 ||
	    plan_int(o, "at", where, 0, 1LL << 40, -1, &d->at, cause) != 0 ||
	    plan_int(o, "warn_minutes", where, 0, 1440, 0, &d->warn_minutes,
		cause) != 0 ||
	    plan_string(o, "before_stop", where, 1, &d->before_stop, cause) !=
		0 ||
	    plan_int(o, "before_stop_timeout_s", where, 1, 86400, 600,
		&d->before_stop_timeout_s, cause) != 0 ||
	    plan_bool(o, "before_must_succeed", where, &d->before_must_succeed,
		cause) != 0 ||
	    plan_bool(o, "unless_busy", where, &d->unless_busy, cause) != 0 ||
	    plan_hold(o, where, d, cause) != 0)
		return -1;
	action = jsonr_str(o, "action");
	if (action == NULL ||
	    (strcmp(action, "stop") != 0 && strcmp(action, "local") != 0))
		return plan_bad(
		    cause, where, "action", "must be \"stop\" or \"local\"");
	d->local = strcmp(action, "local") == 0;
	for (k = 0; k < i; k++)
		if (strcmp(p->deadlines[k].id, d->id) == 0)
			return plan_bad(cause, where, "id", "is not unique");
	return 0;
}

/* The "deadlines" array (absent: none). */
static int
plan_deadlines(const struct jsonr *root, struct plan *p, char **cause)
{
	const struct jsonr *a = jsonr_get(root, "deadlines");
	size_t i;

	if (a == NULL)
		return 0;
	if (a->type != JSONR_ARRAY)
		return plan_bad(cause, "", "deadlines", "must be an array");
	if (a->n > PLAN_MAX_DEADLINES)
		return plan_bad(cause, "", "deadlines", "more than 64");
	p->deadlines = xcalloc(a->n == 0 ? 1 : a->n, sizeof *p->deadlines);
	for (i = 0; i < a->n; i++) {
		p->ndeadlines = i + 1;
		if (plan_deadline(&a->items[i], i, p, cause) != 0)
			return -1;
	}
	return 0;
}

/* The "autostop" member: null or the policy. */
static int
plan_autostop(const struct jsonr *root, struct plan *p, char **cause)
{
	static const char *const keys[] = { "id", "idle_s", "gpu_below",
		"gpu_mem_mib", "wait_for", "stalled_s", "max_runtime_s",
		"progress", "nvidia_smi", NULL };
	const struct jsonr *o = jsonr_get(root, "autostop"), *w;
	struct plan_autostop *a = &p->autostop;
	size_t i;

	if (o == NULL || o->type == JSONR_NULL)
		return 0;
	if (o->type != JSONR_OBJECT)
		return plan_bad(
		    cause, "", "autostop", "must be an object or null");
	p->has_autostop = 1;
	if (plan_keys(o, keys, "autostop", cause) != 0 ||
	    plan_id(o, "autostop", PLAN_AUTOSTOP_ID_MAX, a->id, cause) != 0 ||
	    plan_int(o, "idle_s", "autostop", 1, 1LL << 32, 0, &a->idle_s,
		cause) != 0 ||
	    plan_int(o, "gpu_below", "autostop", 0, 100, 5, &a->gpu_below,
		cause) != 0 ||
	    plan_int(o, "gpu_mem_mib", "autostop", 0, 1LL << 32, 1024,
		&a->gpu_mem_mib, cause) != 0 ||
	    plan_int(o, "stalled_s", "autostop", 0, 1LL << 32, 0, &a->stalled_s,
		cause) != 0 ||
	    plan_int(o, "max_runtime_s", "autostop", 0, 1LL << 32, 0,
		&a->max_runtime_s, cause) != 0 ||
	    plan_string(o, "progress", "autostop", 1, &a->progress, cause) !=
		0 ||
	    plan_string(
		o, "nvidia_smi", "autostop", 1, &a->nvidia_smi, cause) != 0)
		return -1;
	if (a->progress == NULL)
		a->progress = xstrdup(PLAN_PROGRESS_DEFAULT);
	if ((w = jsonr_get(o, "wait_for")) == NULL) {
		a->wait_sessions = a->wait_jobs = 1;
		return 0;
	}
	if (w->type != JSONR_ARRAY)
		return plan_bad(
		    cause, "autostop", "wait_for", "must be an array");
	for (i = 0; i < w->n; i++) {
		const char *s = w->items[i].s;
		int *flag;

		if (w->items[i].type != JSONR_STRING)
			s = "";
		flag = strcmp(s, "sessions") == 0 ? &a->wait_sessions
		    : strcmp(s, "jobs") == 0	  ? &a->wait_jobs
						  : NULL;
		if (flag == NULL || *flag)
			return plan_bad(cause, "autostop", "wait_for",
			    "may hold \"sessions\" and \"jobs\", once each");
		*flag = 1;
	}
	return 0;
}

/* Fill p from the parsed document root. */
static int
plan_from(const struct jsonr *root, struct plan *p, char **cause)
{
	static const char *const keys[] = { "version", "generation",
		"written_at", "written_by", "instance", "check_interval_s",
		"stop_confirm_s", "stop", "deadlines", "autostop", NULL };
	const struct jsonr *m;
	long long version, ignored;

	if (root->type != JSONR_OBJECT)
		return plan_bad(cause, "", "(top)", "must be an object");
	p->stop_backoff_s[0] = JUDGE_BACKOFF_FIRST_S;
	p->stop_backoff_s[1] = JUDGE_BACKOFF_SECOND_S;
	if (plan_keys(root, keys, "", cause) != 0 ||
	    plan_int(root, "version", "", 1, 1, -1, &version, cause) != 0 ||
	    plan_int(root, "generation", "", 0, 1LL << 53, 0, &p->generation,
		cause) != 0 ||
	    plan_int(root, "written_at", "", 0, 1LL << 40, 0, &ignored,
		cause) != 0 ||
	    plan_int(root, "check_interval_s", "", 1, 3600, 60,
		&p->check_interval_s, cause) != 0 ||
	    plan_int(root, "stop_confirm_s", "", 1, 86400, 600,
		&p->stop_confirm_s, cause) != 0)
		return -1;
	if ((m = jsonr_get(root, "written_by")) != NULL &&
	    m->type != JSONR_STRING)
		return plan_bad(cause, "", "written_by", "must be a string");
	if ((m = jsonr_get(root, "instance")) != NULL &&
	    m->type != JSONR_STRING)
		return plan_bad(cause, "", "instance", "must be a string");
	if (plan_stop(root, p, cause) != 0 ||
	    plan_deadlines(root, p, cause) != 0 ||
	    plan_autostop(root, p, cause) != 0)
		return -1;
	return 0;
}

/*
 * Parse and validate a plan; 0, or -1 with a one-line *cause naming the
 * field (caller frees). p is to be freed with plan_free either way.
 */
int
plan_parse(const char *text, size_t len, struct plan *p, char **cause)
{
	struct jsonr root;
	char *why = NULL;
	int r;

	memset(p, 0, sizeof *p);
	if (jsonr_parse(text, len, &root, &why) != 0) {
		*cause = why;
		jsonr_free(&root);
		return -1;
	}
	r = plan_from(&root, p, cause);
	jsonr_free(&root);
	return r;
}

/* Free what p holds. */
void
plan_free(struct plan *p)
{
	size_t i;

	for (i = 0; i < p->ndeadlines; i++)
		free(p->deadlines[i].before_stop);
	free(p->deadlines);
	free(p->stop_command);
	free(p->autostop.progress);
	free(p->autostop.nvidia_smi);
	memset(p, 0, sizeof *p);
}

/* Create dir and its missing parents with mode 0700; 0 or -1 with cause. */
int
plan_mkdir(const char *dir, char **cause)
{
	char *path = xstrdup(dir), *s;
	int r = 0;

	for (s = path + 1;; s++) {
		if (*s != '/' && *s != '\0')
			continue;
		char c = *s;

		*s = '\0';
		if (mkdir(path, 0700) != 0 && errno != EEXIST) {
			xasprintf(cause, "cannot create %s: %s", path,
			    strerror(errno));
			r = -1;
			break;
		}
		*s = c;
		if (c == '\0')
			break;
	}
	free(path);
	return r;
}

/*
 * Load dir/plan.json into p, its text into raw when raw is not NULL:
 * 1 when there is no plan (p is then the empty plan), 0 when it loaded,
 * -1 with cause when it is unreadable or invalid.
 */
int
plan_load(const char *dir, struct plan *p, struct buf *raw, char **cause)
{
	struct buf b = { NULL, 0, 0 };
	char *path, *why = NULL;
	int r;

	memset(p, 0, sizeof *p);
	xasprintf(&path, "%s/plan.json", dir);
	if (buf_read_file(&b, path, JSONR_MAXSIZE + 1) != 0) {
		r = errno == ENOENT ? 1 : -1;
		if (r == -1)
			xasprintf(
			    cause, "cannot read %s: %s", path, strerror(errno));
		else /* the empty plan, with its defaults */
			plan_parse("{\"version\":1}", 13, p, NULL);
	} else if ((r = plan_parse(b.data, b.len, p, &why)) != 0) {
		xasprintf(cause, "invalid %s: %s", path, why);
		free(why);
	}
	free(path);
	if (raw != NULL && r == 0)
		*raw = b;
	else
		buf_free(&b);
	return r;
}

/*
 * Write text to dir/name (mode 0600) by a temporary file, fsync and
 * rename.
 */
int
plan_write_named(const char *dir, const char *name, const char *text,
    size_t len, char **cause)
{
	char *tmp, *path;
	ssize_t n;
	size_t off = 0;
	int fd, dfd, r = -1;

	xasprintf(&tmp, "%s/.%s.%ld", dir, name, (long)getpid());
	xasprintf(&path, "%s/%s", dir, name);
	unlink(tmp);
	fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd == -1) {
		xasprintf(cause, "cannot create %s: %s", tmp, strerror(errno));
		goto out;
	}
	while (off < len) {
		if ((n = write(fd, text + off, len - off)) == -1 &&
		    errno == EINTR)
			continue;
		if (n <= 0)
			break;
		off += (size_t)n;
	}
	if (off != len || fsync(fd) != 0 || close(fd) != 0) {
		xasprintf(cause, "cannot write %s: %s", tmp, strerror(errno));
		unlink(tmp);
		goto out;
	}
	if (rename(tmp, path) != 0) {
		xasprintf(cause, "cannot rename %s: %s", tmp, strerror(errno));
		unlink(tmp);
		goto out;
	}
	if ((dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) != -1) {
		fsync(dfd);
		close(dfd);
	}
	r = 0;
out:
	free(tmp);
	free(path);
	return r;
}

/*
 * plan set: validate text, then under dir/plan.lock write it with
 * generation expect + 1 if the plan on disk has generation expect (0: no
 * plan). Returns 0 (*gen the new generation), PLAN_EXIT_GENERATION (*gen
 * the current one), PLAN_EXIT_INVALID or PLAN_EXIT_WRITE with cause.
 */
int
plan_set(const char *dir, long long expect, const char *text, size_t len,
    long long *gen, char **cause)
{
	struct jsonr root;
	struct plan p, cur;
	struct jsonw w;
	char *lock, *why = NULL;
	size_t i;
	int fd = -1, r;

	if (plan_parse(text, len, &p, cause) != 0) {
		plan_free(&p);
		return PLAN_EXIT_INVALID;
	}
	plan_free(&p);
	if (plan_mkdir(dir, cause) != 0)
		return PLAN_EXIT_WRITE;
	xasprintf(&lock, "%s/plan.lock", dir);
	fd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (fd == -1 || flock(fd, LOCK_EX) != 0) {
		xasprintf(cause, "cannot lock %s: %s", lock, strerror(errno));
		free(lock);
		if (fd != -1)
			close(fd);
		return PLAN_EXIT_WRITE;
	}
	free(lock);
	r = plan_load(dir, &cur, NULL, &why);
	*gen = r == 0 ? cur.generation : 0;
	plan_free(&cur);
	free(why); /* an invalid plan on disk counts as generation 0 */
	if (*gen != expect) {
		close(fd);
		return PLAN_EXIT_GENERATION;
	}

	/* The input again, with generation G + 1 after version. */
	jsonr_parse(text, len, &root, NULL);
	jsonw_init(&w);
	jsonw_object_begin(&w, NULL);
	for (i = 0; i < root.n; i++) {
		if (strcmp(root.keys[i], "generation") == 0)
			continue;
		jsonr_write(&w, root.keys[i], &root.items[i]);
		if (strcmp(root.keys[i], "version") == 0)
			jsonw_int(&w, "generation", expect + 1);
	}
	jsonw_object_end(&w);
	buf_add(&w.out, "\n", 1);
	jsonr_free(&root);
	r = plan_write_named(dir, "plan.json", w.out.data, w.out.len, cause);
	jsonw_free(&w);
	close(fd);
	if (r != 0)
		return PLAN_EXIT_WRITE;
	*gen = expect + 1;
	return 0;
}

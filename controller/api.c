/*
 * The JSON API. A route runs the CLI as a child (this binary, the
 * daemon's --db and --config, argv built here, no shell) and answers
 * with what it printed: 200 and its --json document when it exits 0;
 * 400 with {"error": its message} when it exits 2 (a usage error); 502
 * when it exits 1 (an instance failed: its --json document when it
 * printed one, else the error); 500 otherwise; 504 when it runs past
 * API_CHILD_TIMEOUT_S (it is killed, with what it started). Query values reach
 * the child as
 * --since=VALUE, never as words of their own, so none is taken for an
 * option; names are checked against the instance name rules and the
 * inventory (404). At most API_CHILDREN_MAX run at once (503 beyond).
 * The children are the daemon's tracked children (child.c): reaped on
 * its loop, and stopped with it (its grace, then killed).
 *
 * GET /api/v1/instances is the daemon's last poll as `status --json`
 * prints it, with no new SSH work per request; 503 until the first poll
 * is over.
 *
 * A route is one row of api_routes: a method, a path whose "*" is an
 * instance name, and its function. GET /metrics is one such row; every
 * other path outside /api/ is the dashboard's.
 */

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/queue.h>
#include <sys/wait.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/keyvalq_struct.h>

#include "api.h"
#include "child.h"
#include "db.h"
#include "httpd.h"
#include "instance.h"
#include "log.h"
#include "metrics.h"
#include "status.h"
#include "vis.h"
#include "xmalloc.h"

#define ARGV_MAX 24

/* A child running for a request, until it is reaped. */
struct api_job {
	struct api *api;
	struct evhttp_request *req; /* NULL once answered or gone */
	int text;		    /* its stdout is lines, not JSON */
	pid_t pid;
	int wstatus, exited;
	int fd[2]; /* stdout, stderr; -1 at EOF */
	struct evbuffer *buf[2];
	struct event *ev[2];
	struct event *timer;
	int timed_out;
	char *show;  /* show NAME's job: then status and cost join it */
	json_t *doc; /* cost NAME's job: the document it joins */
	struct api_job *next;
};

struct api {
	struct event_base *base;
	struct fleet *f;
	const char *self;
	const struct metrics_daemon *md; /* the daemon's counters */
	json_t *status;			 /* the last poll's, or NULL */
	struct api_job *jobs;
	int stopping; /* api_stop: no new child */
};

/* A request to a route: its instance name ("*") and query. */
struct api_call {
	struct api *api;
	struct evhttp_request *req;
	const char *name;
	struct evkeyvalq *query;
};

typedef void (*api_fn)(struct api_call *);

static void route_instances(struct api_call *);
static void route_show(struct api_call *);
static void route_shutdown(struct api_call *);
static void route_cancel(struct api_call *);
static void route_cost(struct api_call *);
static void route_schedules(struct api_call *);
static void route_events(struct api_call *);
static void route_history(struct api_call *);
static void route_metrics(struct api_call *);

static const struct api_route {
	enum evhttp_cmd_type method; /* GET answers HEAD too */
	const char *path;
	api_fn fn;
} api_routes[] = {
	{ EVHTTP_REQ_GET, "/api/v1/instances", route_instances },
	{ EVHTTP_REQ_GET, "/api/v1/instances/*", route_show },
	{ EVHTTP_REQ_POST, "/api/v1/instances/*/shutdown", route_shutdown },
	{ EVHTTP_REQ_POST, "/api/v1/instances/*/cancel", route_cancel },
	{ EVHTTP_REQ_GET, "/api/v1/cost", route_cost },
	{ EVHTTP_REQ_GET, "/api/v1/schedules", route_schedules },
	{ EVHTTP_REQ_GET, "/api/v1/events", route_events },
	{ EVHTTP_REQ_GET, "/api/v1/history/*", route_history },
	{ EVHTTP_REQ_GET, "/metrics", route_metrics },
};

static void job_check(struct api_job *);
static void on_exit_job(const struct child_result *, void *);
static void show_then_cost(struct api_job *, const char *, size_t);

/*
 * An API for the fleet f on base; self is this binary, md the daemon's
 * counters for /metrics. Caller frees.
 */
struct api *
api_new(struct event_base *base, struct fleet *f, const char *self,
    const struct metrics_daemon *md)
{
	struct api *a = xcalloc(1, sizeof *a);

	a->base = base;
	a->f = f;
	a->self = self;
	a->md = md;
	return a;
}

/* Close job j's pipes and drop its timer. */
static void
job_close(struct api_job *j)
{
	int k;

	for (k = 0; k < 2; k++) {
		if (j->ev[k] != NULL)
			event_free(j->ev[k]);
		j->ev[k] = NULL;
		if (j->fd[k] != -1)
			close(j->fd[k]);
		j->fd[k] = -1;
	}
	if (j->timer != NULL)
		event_free(j->timer);
	j->timer = NULL;
}

/* Unlink job j (from its API, if that is still there) and free it. */
static void
job_free(struct api_job *j)
{
	struct api_job **pp;
	int k;

	for (pp = j->api != NULL ? &j->api->jobs : NULL;
	     pp != NULL && *pp != NULL; pp = &(*pp)->next) {
		if (*pp == j) {
			*pp = j->next;
			break;
		}
	}
	job_close(j);
	for (k = 0; k < 2; k++)
		evbuffer_free(j->buf[k]);
	free(j->show);
	json_decref(j->doc);
	free(j);
}

/*
 * Free the API. Its children were reaped first (the daemon ends once
 * child_count is 0); one that was not is killed and its job kept for
 * its callback, which may yet run.
 */
void
api_free(struct api *a)
{
	struct api_job *j;

	if (a == NULL)
		return;
	while ((j = a->jobs) != NULL) {
		a->jobs = j->next;
		j->next = NULL;
		if (j->req != NULL) {
			evhttp_connection_set_closecb(
			    evhttp_request_get_connection(j->req), NULL, NULL);
			httpd_reply_error(
			    j->req, 503, "the daemon is stopping");
			j->req = NULL;
		}
		j->api = NULL;
		if (!j->exited) {
			kill(-j->pid, SIGKILL);
			job_close(j); /* on_exit_job frees it */
			continue;
		}
		job_free(j);
	}
	json_decref(a->status);
	free(a);
}

/*
 * A poll is over: keep what /api/v1/instances answers until the next.
 * p NULL: the fleet has no instance. The daemon polls every instance, so
 * each was asked; still_billing is as the ledger and that poll left it.
 */
void
api_poll_done(struct api *a, const struct probe *p)
{
	unsigned char *asked, *billing;
	size_t i;

	json_decref(a->status);
	if (p == NULL || p->rm == NULL) {
		a->status = json_array();
		return;
	}
	asked = xcalloc(p->rm->n + 1, 1);
	billing = xcalloc(p->rm->n + 1, 1);
	for (i = 0; i < p->rm->n; i++) {
		asked[i] = 1;
		billing[i] = instance_still_billing(&p->rm->list[i]) != 0;
	}
	a->status = probe_json(p, asked, billing);
	free(asked);
	free(billing);
}

/* The daemon is stopping: the children going finish, no new one starts. */
void
api_stop(struct api *a)
{
	if (a != NULL)
		a->stopping = 1;
}

/* How many children are still running (the daemon waits for them). */
int
api_busy(const struct api *a)
{
	const struct api_job *j;
	int n = 0;

	for (j = a != NULL ? a->jobs : NULL; j != NULL; j = j->next)
		n += !j->exited;
	return n;
}

/* A job's child is over (reaped on the loop by child.c). */
static void
on_exit_job(const struct child_result *res, void *arg)
{
	struct api_job *j = arg;

	j->wstatus = res->status;
	j->exited = 1;
	if (j->api != NULL)
		job_check(j);
	else
		job_free(j); /* api_free has gone */
}

/* The first line of the child's stderr, printable. Caller frees. */
static char *
job_message(struct api_job *j)
{
	size_t len = evbuffer_get_length(j->buf[1]), n;
	char *line, *s;

	line = xmalloc(len + 1);
	evbuffer_copyout(j->buf[1], line, len);
	line[len] = '\0';
	n = strcspn(line, "\n");
	line[n] = '\0';
	if (n == 0) {
		free(line);
		return xstrdup("the command failed with no message");
	}
	s = vis_str(line);
	free(line);
	return s;
}

/* The child's stdout lines as {"output": [LINE...]} (printable). */
static json_t *
job_lines(struct api_job *j)
{
	json_t *o = json_object(), *arr = json_array();
	char *line, *safe;

	while ((line = evbuffer_readln(j->buf[0], NULL, EVBUFFER_EOL_LF)) !=
	    NULL) {
		safe = vis_str(line);
		json_array_append_new(arr, json_string(safe));
		free(safe);
		free(line);
	}
	json_object_set_new(o, "output", arr);
	return o;
}

/* Answer the request of job j from how its child ended. */
static void
job_answer(struct api_job *j)
{
	struct evhttp_request *req = j->req;
	size_t len = evbuffer_get_length(j->buf[0]);
	const char *out;
	int code = WIFEXITED(j->wstatus) ? WEXITSTATUS(j->wstatus) : -1;
	int is_json = 0;
	char *msg;
	json_t *doc;

	j->req = NULL;
	evhttp_connection_set_closecb(
	    evhttp_request_get_connection(req), NULL, NULL);
	if (j->timed_out) {
		httpd_reply_error(
		    req, 504, "the command ran past %ds", API_CHILD_TIMEOUT_S);
		return;
	}
	out = (const char *)evbuffer_pullup(j->buf[0], -1);
	if (!j->text && len > 0 &&
	    (doc = json_loadb(out, len, JSON_DECODE_ANY, NULL)) != NULL) {
		json_decref(doc);
		is_json = 1;
	}
	if (j->doc != NULL) {
		doc = j->doc;
		j->doc = NULL;
		json_object_set_new(doc, "cost",
		    code == GF_OK && is_json
			? json_loadb(out, len, JSON_DECODE_ANY, NULL)
			: json_null());
		httpd_reply_json(req, 200, doc);
		return;
	}
	if (j->show != NULL && code == GF_OK && is_json) {
		j->req = req; /* show_then_cost passes it on */
		show_then_cost(j, out, len);
		j->req = NULL;
		return;
	}
	if ((code == GF_OK || code == GF_EHOSTS) && j->text) {
		doc = job_lines(j);
		if (code != GF_OK) {
			msg = job_message(j);
			json_object_set_new(doc, "error", json_string(msg));
			free(msg);
		}
		httpd_reply_json(req, code == GF_OK ? 200 : 502, doc);
		return;
	}
	if ((code == GF_OK || code == GF_EHOSTS) && is_json) {
		httpd_reply(req, code == GF_OK ? 200 : 502, "application/json",
		    out, len);
		return;
	}
	msg = job_message(j);
	if (code == GF_OK)
		httpd_reply_error(req, 500, "the command printed no JSON");
	else
		httpd_reply_error(req,
		    code == GF_EUSAGE	    ? 400
			: code == GF_EHOSTS ? 502
					    : 500,
		    "%s", msg);
	free(msg);
}

/* Answer once the child is over and its pipes are read; free when done. */
static void
job_check(struct api_job *j)
{
	if (!j->exited || j->fd[0] != -1 || j->fd[1] != -1)
		return;
	if (j->req != NULL)
		job_answer(j);
	job_free(j);
}

/* Output on one of the child's pipes: keep it (up to the cap). */
static void
on_output(evutil_socket_t fd, short what, void *arg)
{
	struct api_job *j = arg;
	int k = fd == j->fd[0] ? 0 : 1, n;
	size_t cap = k == 0 ? API_OUTPUT_MAX : HTTPD_MAX_BODY;

	(void)what;
	n = evbuffer_read(j->buf[k], fd, 65536);
	if (n == -1 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n > 0 && evbuffer_get_length(j->buf[k]) <= cap)
		return;
	if (n > 0) {
		warn_msg("api: pid %ld printed more than %zu bytes: killed",
		    (long)j->pid, cap);
		kill(-j->pid, SIGKILL);
	}
	event_free(j->ev[k]);
	j->ev[k] = NULL;
	close(j->fd[k]);
	j->fd[k] = -1;
	job_check(j);
}

/* The child ran too long: kill it (its process group) and answer 504. */
static void
on_timeout(evutil_socket_t fd, short what, void *arg)
{
	struct api_job *j = arg;

	(void)fd;
	(void)what;
	warn_msg("api: pid %ld ran past %ds: killed", (long)j->pid,
	    API_CHILD_TIMEOUT_S);
	j->timed_out = 1;
	kill(-j->pid, SIGKILL);
	if (j->req != NULL)
		job_answer(j); /* now: what it started may hold the pipes */
}

/* The client went away: the child runs on, its answer goes nowhere. */
static void
on_close(struct evhttp_connection *evcon, void *arg)
{
	struct api_job *j = arg;

	(void)evcon;
	j->req = NULL;
}

/*
 * Run this gpufleet with the daemon's database and config and the words
 * args (NULL-terminated), answering req when it is over. text: its
 * stdout is lines of text, answered as {"output": [...]}.
 */
static struct api_job *
spawn(struct api_call *c, const char *const *args, int text)
{
	struct api *a = c->api;
	struct timeval tv = { API_CHILD_TIMEOUT_S, 0 };
	const char *argv[ARGV_MAX + 6];
	struct child_spec spec = { 0 };
	struct api_job *j;
	char *cause = NULL;
	int out[2], err[2], k, r, n = 0;
	pid_t pid;

	if (a->stopping) {
		httpd_reply_error(c->req, 503, "the daemon is stopping");
		return NULL;
	}
	if (api_busy(a) >= API_CHILDREN_MAX) {
		httpd_reply_error(c->req, 503,
		    "busy: %d commands already run for requests; try again",
		    API_CHILDREN_MAX);
		return NULL;
	}
	argv[n++] = a->self;
	argv[n++] = "--db";
	argv[n++] = a->f->db_path;
	if (a->f->config->path != NULL) {
		argv[n++] = "--config";
		argv[n++] = a->f->config->path;
	}
	for (k = 0; args[k] != NULL && k < ARGV_MAX; k++)
		argv[n++] = args[k];
	argv[n] = NULL;
	if (pipe2(out, O_CLOEXEC) != 0) {
		httpd_reply_error(c->req, 500, "pipe: %s", strerror(errno));
		return NULL;
	}
	if (pipe2(err, O_CLOEXEC) != 0) {
		httpd_reply_error(c->req, 500, "pipe: %s", strerror(errno));
		close(out[0]);
		close(out[1]);
		return NULL;
	}
	/*
	 * Its own process group: a timeout kills what it started too. The
	 * daemon stopping waits for it (API_CHILD_TIMEOUT_S at most) so that
	 * its request is answered: child_kill_all spares it.
	 */
	spec.argv = (char *const *)argv;
	spec.spared = 1;
	spec.out_fd = out[1];
	spec.err_fd = err[1];
	j = xcalloc(1, sizeof *j);
	r = child_start(&spec, on_exit_job, j, &pid, &cause);
	close(out[1]);
	close(err[1]);
	if (r != 0) {
		httpd_reply_error(c->req, 500, "%s", cause);
		free(cause);
		close(out[0]);
		close(err[0]);
		free(j);
		return NULL;
	}
	j->api = a;
	j->req = c->req;
	j->text = text;
	j->pid = pid;
	j->fd[0] = out[0];
	j->fd[1] = err[0];
	for (k = 0; k < 2; k++) {
		evutil_make_socket_nonblocking(j->fd[k]);
		j->buf[k] = evbuffer_new();
		j->ev[k] = event_new(
		    a->base, j->fd[k], EV_READ | EV_PERSIST, on_output, j);
		event_add(j->ev[k], NULL);
	}
	j->timer = evtimer_new(a->base, on_timeout, j);
	evtimer_add(j->timer, &tv);
	evhttp_connection_set_closecb(
	    evhttp_request_get_connection(c->req), on_close, j);
	j->next = a->jobs;
	a->jobs = j;
	debug_f("pid %ld: %s", (long)pid, args[0]);
	return j;
}

/*
 * Check the query against the parameters the route knows (NULL-
 * terminated). Answers 400 and returns -1 for any other one.
 */
static int
query_check(struct api_call *c, const char *const *known)
{
	struct evkeyval *kv;
	size_t i;

	TAILQ_FOREACH(kv, c->query, next)
	{
		for (i = 0; known[i] != NULL; i++) {
			if (strcmp(kv->key, known[i]) == 0)
				break;
		}
		if (known[i] == NULL) {
			httpd_reply_error(
			    c->req, 400, "unknown parameter '%s'", kv->key);
			return -1;
		}
	}
	return 0;
}

/*
 * Add "--KEY=VALUE" to args[*n] when the query has key; the value must
 * be printable ASCII of at most 64 bytes (a time, a number, a word).
 * *opt is freed by the caller. Returns -1 (answered 400) on a bad value.
 */
static int
query_opt(struct api_call *c, const char *key, const char **args, size_t *n,
    char **opt)
{
	const char *v = evhttp_find_header(c->query, key);
	size_t i;

	*opt = NULL;
	if (v == NULL)
		return 0;
	for (i = 0; v[i] != '\0'; i++) {
		if (v[i] < 0x20 || v[i] > 0x7e)
			break;
	}
	if (v[i] != '\0' || i == 0 || i > 64) {
		httpd_reply_error(c->req, 400,
		    "%s must be 1 to 64 printable characters", key);
		return -1;
	}
	xasprintf(opt, "--%s=%s", key, v);
	args[(*n)++] = *opt;
	return 0;
}

/* A route with options from the query: cmd words, then the options. */
static struct api_job *
spawn_query(struct api_call *c, const char *const *words,
    const char *const *keys, const char *name)
{
	const char *args[ARGV_MAX + 1];
	struct api_job *j;
	char *opts[8];
	size_t n = 0, i, k;

	if (query_check(c, keys) != 0)
		return NULL;
	for (i = 0; words[i] != NULL; i++)
		args[n++] = words[i];
	for (k = 0; keys[k] != NULL && k < 8; k++) {
		if (query_opt(c, keys[k], args, &n, &opts[k]) != 0) {
			while (k-- > 0)
				free(opts[k]);
			return NULL;
		}
	}
	if (name != NULL) {
		args[n++] = "--";
		args[n++] = name;
	}
	args[n] = NULL;
	j = spawn(c, args, 0);
	for (i = 0; i < k; i++)
		free(opts[i]);
	return j;
}

static void
route_instances(struct api_call *c)
{
	static const char *const none[] = { NULL };

	if (query_check(c, none) != 0)
		return;
	if (c->api->status == NULL) {
		httpd_reply_error(c->req, 503,
		    "the daemon's first poll is not over yet: try again");
		return;
	}
	httpd_reply_json(c->req, 200, json_deep_copy(c->api->status));
}

/*
 * show NAME --json, then (job_answer) the instance's element of the last
 * poll's status as "status" (its report and its watcher: the plan) and
 * cost NAME --json as "cost".
 */
static void
route_show(struct api_call *c)
{
	static const char *const words[] = { "show", "--json", NULL };
	static const char *const none[] = { NULL };
	struct api_job *j;

	if ((j = spawn_query(c, words, none, c->name)) != NULL)
		j->show = xstrdup(c->name);
}

/* The last poll's status of instance name (a copy), or null. */
static json_t *
status_of(const struct api *a, const char *name)
{
	json_t *o;
	size_t i;

	json_array_foreach(a->status, i, o)
	{
		if (json_is_string(json_object_get(o, "name")) &&
		    strcmp(json_string_value(json_object_get(o, "name")),
			name) == 0)
			return json_deep_copy(o);
	}
	return json_null();
}

/*
 * show NAME's document is in: add its status and start cost NAME, which
 * answers with both (or answers the error itself).
 */
static void
show_then_cost(struct api_job *j, const char *out, size_t len)
{
	const char *args[] = { "cost", "--json", "--", j->show, NULL };
	struct api_call c = { j->api, j->req, j->show, NULL };
	struct api_job *k;
	json_t *doc;

	if ((doc = json_loadb(out, len, 0, NULL)) == NULL ||
	    !json_is_object(doc)) {
		json_decref(doc);
		httpd_reply_error(j->req, 500, "show printed no JSON object");
		return;
	}
	json_object_set_new(doc, "status", status_of(j->api, j->show));
	if ((k = spawn(&c, args, 0)) == NULL)
		json_decref(doc);
	else
		k->doc = doc;
}

static void
route_cost(struct api_call *c)
{
	static const char *const words[] = { "cost", "--json", NULL };
	static const char *const keys[] = { "since", "until", "by", NULL };

	spawn_query(c, words, keys, NULL);
}

static void
route_schedules(struct api_call *c)
{
	static const char *const words[] = { "schedule", "ls", "--json", NULL };
	static const char *const none[] = { NULL };

	spawn_query(c, words, none, NULL);
}

static void
route_events(struct api_call *c)
{
	static const char *const words[] = { "events", "--json", NULL };
	static const char *const keys[] = { "since", "limit", NULL };

	spawn_query(c, words, keys, NULL);
}

static void
route_history(struct api_call *c)
{
	static const char *const words[] = { "history", "--json", NULL };
	static const char *const keys[] = { "since", "until", NULL };

	spawn_query(c, words, keys, c->name);
}

/*
 * GET /metrics: the stored state and the daemon's counters as Prometheus
 * text (metrics_serve), read here: local SQLite, no child, no SSH.
 */
static void
route_metrics(struct api_call *c)
{
	static const char *const none[] = { NULL };
	struct inventory *inv;
	char *cause = NULL, *text;

	if (query_check(c, none) != 0)
		return;
	if (fleet_inventory(c->api->f, &inv, &cause) != 0 ||
	    (text = metrics_serve(inv, c->api->f->config, c->api->md,
		 (int64_t)time(NULL), &cause)) == NULL) {
		httpd_reply_error(c->req, 500, "%s", cause);
		free(cause);
		return;
	}
	httpd_reply(c->req, 200, METRICS_CONTENT_TYPE, text, strlen(text));
	free(text);
}

/* The request's body as a JSON object, or NULL (answered 400). */
static json_t *
body_object(struct api_call *c)
{
	struct evbuffer *b = evhttp_request_get_input_buffer(c->req);
	size_t len = evbuffer_get_length(b);
	json_error_t je;
	json_t *o;

	o = json_loadb((const char *)evbuffer_pullup(b, -1), len, 0, &je);
	if (o == NULL || !json_is_object(o)) {
		httpd_reply_error(c->req, 400,
		    "the body must be a JSON object%s%s", o == NULL ? ": " : "",
		    o == NULL ? je.text : "");
		json_decref(o);
		return NULL;
	}
	return o;
}

/*
 * POST .../shutdown {"in": "30m"} | {"at": "02:00"} | {"now": true},
 * with "warn": MINUTES and "yes": true (allow a release method) when
 * wanted: `shutdown NAME --in=30m --json`.
 */
static void
route_shutdown(struct api_call *c)
{
	const char *args[ARGV_MAX + 1], *key, *when = NULL;
	char *opt[3] = { NULL, NULL, NULL };
	json_t *o, *v;
	size_t n = 0, i;
	int nwhen = 0;

	if ((o = body_object(c)) == NULL)
		return;
	args[n++] = "shutdown";
	args[n++] = "--json";
	json_object_foreach(o, key, v)
	{
		if (strcmp(key, "now") == 0 && json_is_true(v)) {
			args[n++] = "--now";
			nwhen++;
		} else if ((strcmp(key, "in") == 0 || strcmp(key, "at") == 0) &&
		    json_is_string(v) && json_string_length(v) > 0 &&
		    json_string_length(v) <= 64 &&
		    strspn(json_string_value(v),
			"0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQR"
			"STUVWXYZ:-+. ") == json_string_length(v)) {
			xasprintf(&opt[nwhen > 0], "--%s=%s", key,
			    json_string_value(v));
			when = opt[nwhen > 0];
			args[n++] = when;
			nwhen++;
		} else if (strcmp(key, "warn") == 0 && json_is_integer(v) &&
		    json_integer_value(v) >= 0 &&
		    json_integer_value(v) <= 1440) {
			free(opt[2]);
			xasprintf(&opt[2], "--warn=%lld",
			    (long long)json_integer_value(v));
			args[n++] = opt[2];
		} else if (strcmp(key, "yes") == 0 && json_is_boolean(v)) {
			if (json_is_true(v))
				args[n++] = "--yes";
		} else {
			httpd_reply_error(c->req, 400,
			    "bad '%s' (the body is {\"in\": \"30m\"}, "
			    "{\"at\": \"02:00\"} or {\"now\": true}, with "
			    "\"warn\": MINUTES and \"yes\": true if wanted)",
			    key);
			goto out;
		}
		if (n > ARGV_MAX - 3)
			break;
	}
	if (nwhen != 1) {
		httpd_reply_error(c->req, 400,
		    "needs exactly one of \"now\", \"in\", \"at\"");
		goto out;
	}
	args[n++] = "--";
	args[n++] = c->name;
	args[n] = NULL;
	spawn(c, args, 0);
out:
	json_decref(o);
	for (i = 0; i < 3; i++)
		free(opt[i]);
}

/*
 * POST .../cancel: `shutdown cancel NAME`, its lines as the answer
 * ({"output": [...]}, with "error" when the instance failed).
 */
static void
route_cancel(struct api_call *c)
{
	const char *args[] = { "shutdown", "cancel", "--", c->name, NULL };

	spawn(c, args, 1);
}

/*
 * Whether path matches the route's pattern, a "*" one segment that
 * *name then points to (copied into buf, of size len).
 */
static int
route_match(const char *pat, const char *path, char *buf, size_t len)
{
	size_t n;

	*buf = '\0';
	while (*pat != '\0' && *path != '\0') {
		if (*pat == '*') {
			n = strcspn(path, "/");
			if (n == 0 || n >= len)
				return 0;
			memcpy(buf, path, n);
			buf[n] = '\0';
			path += n;
			pat++;
			continue;
		}
		if (*pat++ != *path++)
			return 0;
	}
	return *pat == '\0' && *path == '\0';
}

/* Whether instance name is in the inventory; else answers 400 or 404. */
static int
name_known(struct api_call *c)
{
	struct inventory *inv;
	char *cause = NULL;
	int r;

	if (instance_check_name(c->name, &cause) != 0) {
		httpd_reply_error(c->req, 400, "%s", cause);
		free(cause);
		return 0;
	}
	if (fleet_inventory(c->api->f, &inv, &cause) != 0) {
		httpd_reply_error(c->req, 500, "%s", cause);
		free(cause);
		return 0;
	}
	r = db_exec(inv, "SELECT 1 FROM instance WHERE name = ?",
	    "looking up the instance", &cause, "t", c->name);
	if (r < 0) {
		httpd_reply_error(c->req, 500, "%s", cause);
		free(cause);
		return 0;
	}
	if (r == 0) {
		httpd_reply_error(c->req, 404, "no instance '%s'", c->name);
		return 0;
	}
	return 1;
}

/*
 * A request to one of api_routes: answered, returns 1. Under /api/ with
 * no route: 404 or 405, returns 1. Else 0 (not the API's: the caller
 * serves it).
 */
int
api_handle(struct api *a, struct evhttp_request *req, const char *path,
    const char *query)
{
	enum evhttp_cmd_type cmd = evhttp_request_get_command(req);
	struct evkeyvalq q;
	struct api_call c;
	char name[128];
	size_t i;
	int wrong = 0;

	if (cmd == EVHTTP_REQ_HEAD)
		cmd = EVHTTP_REQ_GET;
	for (i = 0; i < sizeof api_routes / sizeof api_routes[0]; i++) {
		if (!route_match(api_routes[i].path, path, name, sizeof name))
			continue;
		if (api_routes[i].method != cmd) {
			wrong = 1;
			continue;
		}
		break;
	}
	if (i == sizeof api_routes / sizeof api_routes[0]) {
		if (!wrong && strncmp(path, "/api/", 5) != 0 &&
		    strcmp(path, "/api") != 0)
			return 0;
		if (wrong) {
			evhttp_add_header(
			    evhttp_request_get_output_headers(req), "Allow",
			    cmd == EVHTTP_REQ_GET ? "POST" : "GET, HEAD");
			httpd_reply_error(req, 405, "not with this method");
		} else
			httpd_reply_error(req, 404, "no such API path");
		return 1;
	}
	TAILQ_INIT(&q);
	if (query != NULL && evhttp_parse_query_str(query, &q) != 0) {
		httpd_reply_error(req, 400, "bad query string");
		return 1;
	}
	c.api = a;
	c.req = req;
	c.name = name;
	c.query = &q;
	if (*name == '\0' || name_known(&c))
		api_routes[i].fn(&c);
	evhttp_clear_headers(&q);
	return 1;
}

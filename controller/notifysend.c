/*
 * Sending the notification queue with libcurl's multi interface on a
 * libevent loop: curl tells which sockets to watch and when to call it
 * back (CURLMOPT_SOCKETFUNCTION, CURLMOPT_TIMERFUNCTION); the loop calls
 * curl_multi_socket_action. Nothing here blocks: DNS is curl's threaded
 * resolver, every request has connect and total timeouts.
 *
 * Each target has at most one request in flight, and starts the next only
 * min_interval after the last began (DingTalk: never more than 20 in any
 * 60 s). A row is claimed (pending -> sending, with this process's pid
 * and start time, committed) before its request leaves, and its attempt
 * is recorded in action_log when the answer (or the timeout) comes.
 */

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include <curl/curl.h>
#include <event2/event.h>
#include <jansson.h>

#include "gpufleet/version.h"

#include "actionlog.h"
#include "db.h"
#include "log.h"
#include "misc.h"
#include "notifysend.h"
#include "schedrun.h"
#include "status.h"
#include "vis.h"
#include "xmalloc.h"

#define ANSWER_MAX   65536 /* of an answer's body kept */
#define RING	     NOTIFY_DINGTALK_PER_MINUTE
#define BACKOFF_BASE 5	 /* s: the first retry's wait */
#define BACKOFF_MAX  900 /* s */

/* A target's pace: when its last requests began (ms), one in flight. */
struct ns_target {
	char *name;
	int busy;
	int64_t starts[RING]; /* ring, 0: none */
	size_t next;	      /* the oldest slot */
};

/* One request in flight. */
struct ns_xfer {
	struct notifysend *ns;
	CURL *easy;
	struct curl_slist *headers;
	struct notify_request req;
	char errbuf[CURL_ERROR_SIZE];
	struct misc_buf answer;
	char *target;
	int format, retries, attempt, test;
	int64_t msg_id;
	char *kind, *instance;		  /* for the action_log entry */
	struct notifysend_result *result; /* test: where the result goes */
};

/* A socket curl asked us to watch. */
struct ns_sock {
	struct notifysend *ns;
	struct event *ev;
	curl_socket_t fd;
};

struct notifysend {
	struct event_base *base;
	struct inventory *inv;
	const struct config *cf;
	CURLM *multi;
	struct event *timer;
	struct ns_target *targets;
	size_t ntargets;
	struct ns_xfer **xfers;
	size_t nxfers;
	int64_t once_since; /* flush: each row tried once, from then on */
	int stopping;
};

static int64_t now_ms(void);
static struct ns_target *target_get(struct notifysend *, const char *);
static int target_ready(struct notifysend *, const struct config_notify *,
    struct ns_target *, int64_t);
static void target_started(struct ns_target *, int64_t);
static int xfer_start(struct notifysend *, const struct config_notify *,
    const struct notify_msg *, int, struct ns_xfer **, char **);
static void xfer_free(struct ns_xfer *);
static void xfer_done(struct ns_xfer *, CURLcode);
static void finish(
    struct ns_xfer *, enum notify_verdict, long, const char *, int64_t);
static void check_done(struct notifysend *);
static int on_socket(CURL *, curl_socket_t, int, void *, void *);
static int on_timer_set(CURLM *, long, void *);
static void on_event(evutil_socket_t, short, void *);
static void on_timer(evutil_socket_t, short, void *);
static size_t on_write(char *, size_t, size_t, void *);
static void log_attempt(
    struct notifysend *, const struct ns_xfer *, const char *, const char *);

/* curl_global_init, once, before anything else uses curl. */
int
notifysend_global_init(char **cause)
{
	static int done;

	if (done)
		return 0;
	if (curl_global_init(CURL_GLOBAL_DEFAULT) != 0) {
		xasprintf(cause, "cannot initialise libcurl");
		return -1;
	}
	done = 1;
	return 0;
}

static int64_t
now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/*
 * A sender on base for the queue in inv, with the targets of cf (looked
 * up by name each time: a SIGHUP may replace them). once_since 0: the
 * daemon's (rows due by next_at, retried); else flush's: every pending row
 * once, whatever its next_at. The pace of each target starts from the
 * attempts of the last minute recorded in the queue.
 */
struct notifysend *
notifysend_new(struct event_base *base, struct inventory *inv,
    const struct config *cf, int64_t once_since)
{
	struct notifysend *ns = xcalloc(1, sizeof *ns);
	char *cause = NULL;

	if (notifysend_global_init(&cause) != 0)
		fatal("%s", cause);
	ns->base = base;
	ns->inv = inv;
	ns->cf = cf;
	ns->once_since = once_since;
	srandom((unsigned)getpid() ^ (unsigned)time(NULL)); /* the jitter */
	if ((ns->multi = curl_multi_init()) == NULL)
		fatal("cannot start libcurl");
	ns->timer = evtimer_new(base, on_timer, ns);
	curl_multi_setopt(ns->multi, CURLMOPT_SOCKETFUNCTION, on_socket);
	curl_multi_setopt(ns->multi, CURLMOPT_SOCKETDATA, ns);
	curl_multi_setopt(ns->multi, CURLMOPT_TIMERFUNCTION, on_timer_set);
	curl_multi_setopt(ns->multi, CURLMOPT_TIMERDATA, ns);
	return ns;
}

void
notifysend_free(struct notifysend *ns)
{
	size_t i;

	if (ns == NULL)
		return;
	for (i = 0; i < ns->nxfers; i++)
		xfer_free(ns->xfers[i]);
	free(ns->xfers);
	curl_multi_cleanup(ns->multi);
	event_free(ns->timer);
	for (i = 0; i < ns->ntargets; i++)
		free(ns->targets[i].name);
	free(ns->targets);
	free(ns);
}

/* The pace of target name, its recent starts read from the queue. */
static struct ns_target *
target_get(struct notifysend *ns, const char *name)
{
	struct ns_target *t;
	sqlite3_stmt *st;
	size_t i;

	for (i = 0; i < ns->ntargets; i++) {
		if (strcmp(ns->targets[i].name, name) == 0)
			return &ns->targets[i];
	}
	ns->targets =
	    xreallocarray(ns->targets, ns->ntargets + 1, sizeof *ns->targets);
	t = &ns->targets[ns->ntargets++];
	memset(t, 0, sizeof *t);
	t->name = xstrdup(name);
	if (db_prepare(ns->inv, &st,
		"SELECT last_at FROM notify_send WHERE target = ? AND "
		"last_at IS NOT NULL ORDER BY last_at DESC LIMIT ?",
		"reading the queue", NULL, "ti", name, RING) != 0)
		return t;
	/* Oldest last; whole seconds, so counted to the end of theirs. */
	i = 0;
	while (sqlite3_step(st) == SQLITE_ROW && i < RING) {
		t->starts[RING - 1 - i] =
		    (sqlite3_column_int64(st, 0) + 1) * 1000;
		i++;
	}
	sqlite3_finalize(st);
	return t;
}

/* Whether target n may start a request at ms now. */
static int
target_ready(struct notifysend *ns, const struct config_notify *n,
    struct ns_target *t, int64_t now)
{
	int64_t last = t->starts[(t->next + RING - 1) % RING];
	int64_t oldest = t->starts[t->next];

	(void)ns;
	if (t->busy)
		return 0;
	if (last != 0 && now - last < (int64_t)n->min_interval * 1000)
		return 0;
	if (n->format == NOTIFY_FORMAT_DINGTALK && oldest != 0 &&
	    now - oldest < 60000)
		return 0;
	return 1;
}

static void
target_started(struct ns_target *t, int64_t now)
{
	t->starts[t->next] = now;
	t->next = (t->next + 1) % RING;
}

/*
 * Start the request of m to n (attempt: its number, 1 the first). The
 * transfer is ns's until it is done. Returns 0, or -1 with *cause (the
 * URL or the secret could not be read: nothing left).
 */
static int
xfer_start(struct notifysend *ns, const struct config_notify *n,
    const struct notify_msg *m, int attempt, struct ns_xfer **out, char **cause)
{
	struct ns_xfer *x;
	char *url = NULL, *secret = NULL, *h;
	int r;

	*out = NULL;
	if (notify_target_url(n, &url, cause) != 0)
		return -1;
	if (notify_target_secret(n, &secret, cause) != 0) {
		free(url);
		return -1;
	}
	x = xcalloc(1, sizeof *x);
	r = notify_request_build(n, url, secret, m, now_ms(), &x->req, cause);
	if (secret != NULL)
		explicit_bzero(secret, strlen(secret));
	free(secret);
	free(url);
	if (r != 0) {
		free(x);
		return -1;
	}
	x->ns = ns;
	x->target = xstrdup(n->name);
	x->format = n->format;
	x->retries = n->retries;
	x->attempt = attempt;
	x->msg_id = m->id;
	x->kind = xstrdup(m->kind);
	x->instance = m->instance != NULL ? xstrdup(m->instance) : NULL;
	if ((x->easy = curl_easy_init()) == NULL)
		fatal("cannot start a libcurl request");
	xasprintf(&h, "Content-Type: %s", x->req.content_type);
	x->headers = curl_slist_append(x->headers, h);
	free(h);
	if (x->req.title != NULL) {
		xasprintf(&h, "Title: %s", x->req.title);
		x->headers = curl_slist_append(x->headers, h);
		free(h);
	}
	x->headers = curl_slist_append(x->headers, "Expect:");
	curl_easy_setopt(x->easy, CURLOPT_URL, x->req.url);
	curl_easy_setopt(x->easy, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(x->easy, CURLOPT_FOLLOWLOCATION, 0L);
	curl_easy_setopt(x->easy, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(x->easy, CURLOPT_POSTFIELDS, x->req.body);
	curl_easy_setopt(x->easy, CURLOPT_HTTPHEADER, x->headers);
	curl_easy_setopt(
	    x->easy, CURLOPT_USERAGENT, "gpufleet/" GPUFLEET_VERSION);
	curl_easy_setopt(x->easy, CURLOPT_TIMEOUT, (long)n->timeout);
	curl_easy_setopt(x->easy, CURLOPT_CONNECTTIMEOUT,
	    (long)(n->timeout < 10 ? n->timeout : 10));
	/* TLS is verified (libcurl's default), never turned off. */
	curl_easy_setopt(x->easy, CURLOPT_SSL_VERIFYPEER, 1L);
	curl_easy_setopt(x->easy, CURLOPT_SSL_VERIFYHOST, 2L);
	if (n->ca_file != NULL)
		curl_easy_setopt(x->easy, CURLOPT_CAINFO, n->ca_file);
	curl_easy_setopt(x->easy, CURLOPT_ERRORBUFFER, x->errbuf);
	curl_easy_setopt(x->easy, CURLOPT_WRITEFUNCTION, on_write);
	curl_easy_setopt(x->easy, CURLOPT_WRITEDATA, x);
	curl_easy_setopt(x->easy, CURLOPT_PRIVATE, x);
	ns->xfers = xreallocarray(ns->xfers, ns->nxfers + 1, sizeof *ns->xfers);
	ns->xfers[ns->nxfers++] = x;
	curl_multi_add_handle(ns->multi, x->easy);
	*out = x;
	return 0;
}

static void
xfer_free(struct ns_xfer *x)
{
	if (x == NULL)
		return;
	if (x->easy != NULL) {
		curl_multi_remove_handle(x->ns->multi, x->easy);
		curl_easy_cleanup(x->easy);
	}
	curl_slist_free_all(x->headers);
	notify_request_clear(&x->req);
	free(x->answer.data);
	free(x->target);
	free(x->kind);
	free(x->instance);
	free(x);
}

static size_t
on_write(char *data, size_t size, size_t n, void *arg)
{
	struct ns_xfer *x = arg;

	misc_buf_add(&x->answer, data, size * n, ANSWER_MAX);
	return size * n;
}

/* The action_log entry of an attempt: notify_sent or notify_failed. */
static void
log_attempt(struct notifysend *ns, const struct ns_xfer *x, const char *kind,
    const char *why)
{
	json_t *names = json_array();
	char *cause = NULL;

	if (x->instance != NULL)
		json_array_append_new(names, json_string(x->instance));
	if (actionlog_add(ns->inv, (int64_t)time(NULL), kind, x->target, names,
		why, NULL, NULL, &cause) != 0) {
		error("%s", cause);
		free(cause);
	}
	json_decref(names);
}

/*
 * Record how attempt x ended: sent, pending again at now + the backoff
 * (with jitter; Retry-After when the answer said longer), or failed.
 */
static void
finish(struct ns_xfer *x, enum notify_verdict v, long http, const char *why,
    int64_t retry_after)
{
	struct notifysend *ns = x->ns;
	int64_t now = (int64_t)time(NULL), wait = 0;
	char *line, *tail, *cause = NULL;
	int r, again;

	/* Stopping too: the next daemon (or flush) tries it again. */
	again = v == NOTIFY_RETRY && x->attempt <= x->retries;
	if (again) {
		wait = (int64_t)BACKOFF_BASE
		    << (x->attempt - 1 < 8 ? x->attempt - 1 : 8);
		if (wait > BACKOFF_MAX)
			wait = BACKOFF_MAX;
		wait += random() % (wait / 2 + 1);
		if (retry_after > wait && retry_after < 86400)
			wait = retry_after;
	}
	if (again && !x->test)
		xasprintf(&tail, ", again in %llds", (long long)wait);
	else
		tail = xstrdup(v == NOTIFY_OK || x->test ? "" : ", given up");
	if (v == NOTIFY_OK)
		xasprintf(&line, "%s%s%s to %s: sent (HTTP %ld, attempt %d)",
		    x->kind, x->instance != NULL ? " " : "",
		    x->instance != NULL ? x->instance : "", x->target, http,
		    x->attempt);
	else
		xasprintf(&line, "%s%s%s to %s: %s (attempt %d%s)", x->kind,
		    x->instance != NULL ? " " : "",
		    x->instance != NULL ? x->instance : "", x->target, why,
		    x->attempt, tail);
	free(tail);
	if (x->test) {
		log_attempt(ns, x,
		    v == NOTIFY_OK ? "notify_sent" : "notify_failed", line);
		free(line);
		return;
	}
	if ((r = inventory_begin(ns->inv, &cause)) == 0) {
		if (v == NOTIFY_OK)
			r = db_exec(ns->inv,
			    "UPDATE notify_send SET state = 'sent', last_error "
			    "= NULL WHERE msg_id = ? AND target = ? AND state "
			    "= 'sending'",
			    "recording a notification", &cause, "It", x->msg_id,
			    x->target);
		else
			r = db_exec(ns->inv,
			    "UPDATE notify_send SET state = ?, next_at = ?, "
			    "last_error = ? WHERE msg_id = ? AND target = ? "
			    "AND state = 'sending'",
			    "recording a notification", &cause, "tItIt",
			    again ? "pending" : "failed", now + wait, why,
			    x->msg_id, x->target);
		if (r >= 0)
			log_attempt(ns, x,
			    v == NOTIFY_OK ? "notify_sent" : "notify_failed",
			    line);
		if (r < 0)
			inventory_rollback(ns->inv);
		else
			r = inventory_commit(ns->inv, &cause);
	}
	if (r < 0) {
		error("%s", cause);
		free(cause);
	}
	if (v == NOTIFY_OK)
		info("notify: %s", line);
	else
		warn_msg("notify: %s", line);
	free(line);
}

/* A request is over: judge the answer and record it. */
static void
xfer_done(struct ns_xfer *x, CURLcode rc)
{
	struct notifysend *ns = x->ns;
	enum notify_verdict v;
	curl_off_t ra = 0;
	long http = 0;
	char *why = NULL;
	size_t i;

	curl_easy_getinfo(x->easy, CURLINFO_RESPONSE_CODE, &http);
	curl_easy_getinfo(x->easy, CURLINFO_RETRY_AFTER, &ra);
	if (rc != CURLE_OK) {
		xasprintf(&why, "%s",
		    x->errbuf[0] != '\0' ? x->errbuf : curl_easy_strerror(rc));
		/* What no retry mends: the URL, TLS trust. */
		v = rc == CURLE_UNSUPPORTED_PROTOCOL ||
			rc == CURLE_URL_MALFORMAT ||
			rc == CURLE_PEER_FAILED_VERIFICATION ||
			rc == CURLE_SSL_CACERT_BADFILE
		    ? NOTIFY_FAIL
		    : NOTIFY_RETRY;
		http = 0;
	} else
		v = notify_judge(x->format, http, x->answer.data, &why);
	if (x->result != NULL) {
		x->result->ok = v == NOTIFY_OK;
		x->result->http = http;
		x->result->why = why != NULL ? vis_str(why) : NULL;
		if (x->answer.data != NULL) {
			x->result->answer = vis_buf(x->answer.data,
			    x->answer.len < 300 ? x->answer.len : 300);
		}
	}
	finish(x, v, http, why, (int64_t)ra);
	free(why);
	if (!x->test) {
		struct ns_target *t = target_get(ns, x->target);
		t->busy = 0;
	}
	for (i = 0; i < ns->nxfers; i++) {
		if (ns->xfers[i] == x) {
			ns->xfers[i] = ns->xfers[--ns->nxfers];
			break;
		}
	}
	xfer_free(x);
}

/* Collect the requests curl says are over. */
static void
check_done(struct notifysend *ns)
{
	struct ns_xfer *x;
	CURLMsg *msg;
	int left;

	while ((msg = curl_multi_info_read(ns->multi, &left)) != NULL) {
		if (msg->msg != CURLMSG_DONE)
			continue;
		curl_easy_getinfo(
		    msg->easy_handle, CURLINFO_PRIVATE, (char **)&x);
		xfer_done(x, msg->data.result);
	}
}

static void
on_event(evutil_socket_t fd, short what, void *arg)
{
	struct notifysend *ns = arg;
	int flags = 0, running;

	if (what & EV_READ)
		flags |= CURL_CSELECT_IN;
	if (what & EV_WRITE)
		flags |= CURL_CSELECT_OUT;
	curl_multi_socket_action(ns->multi, fd, flags, &running);
	check_done(ns);
}

static void
on_timer(evutil_socket_t fd, short what, void *arg)
{
	struct notifysend *ns = arg;
	int running;

	(void)fd;
	(void)what;
	curl_multi_socket_action(ns->multi, CURL_SOCKET_TIMEOUT, 0, &running);
	check_done(ns);
}

/* curl: watch socket s for what (or stop, CURL_POLL_REMOVE). */
static int
on_socket(CURL *easy, curl_socket_t s, int what, void *arg, void *sockp)
{
	struct notifysend *ns = arg;
	struct ns_sock *k = sockp;
	short ev = EV_PERSIST;

	(void)easy;
	if (what == CURL_POLL_REMOVE) {
		if (k != NULL) {
			event_free(k->ev);
			free(k);
			curl_multi_assign(ns->multi, s, NULL);
		}
		return 0;
	}
	if (what & CURL_POLL_IN)
		ev |= EV_READ;
	if (what & CURL_POLL_OUT)
		ev |= EV_WRITE;
	if (k == NULL) {
		k = xcalloc(1, sizeof *k);
		k->ns = ns;
		k->fd = s;
		curl_multi_assign(ns->multi, s, k);
	} else
		event_free(k->ev);
	k->ev = event_new(ns->base, s, ev, on_event, ns);
	event_add(k->ev, NULL);
	return 0;
}

/* curl: call back in timeout_ms (-1: no timer). */
static int
on_timer_set(CURLM *multi, long timeout_ms, void *arg)
{
	struct notifysend *ns = arg;
	struct timeval tv;

	(void)multi;
	if (timeout_ms < 0) {
		evtimer_del(ns->timer);
		return 0;
	}
	tv.tv_sec = timeout_ms / 1000;
	tv.tv_usec = (timeout_ms % 1000) * 1000;
	evtimer_add(ns->timer, &tv);
	return 0;
}

/*
 * The next row of target name to try now, into m (*attempts: tried so
 * far). Returns 1, 0 for none, -GF_EDB.
 */
static int
next_row(struct notifysend *ns, const char *name, struct notify_msg *m,
    int *attempts)
{
	sqlite3_stmt *st;
	int r;

	memset(m, 0, sizeof *m);
	if ((r = db_prepare(ns->inv, &st,
		 "SELECT m.id, m.kind, m.instance, m.t, m.text, m.next, "
		 "s.attempts FROM notify_send s JOIN notify_msg m ON m.id = "
		 "s.msg_id WHERE s.target = ? AND s.state = 'pending' AND "
		 "(? = 0 AND s.next_at <= ? OR ? <> 0 AND (s.last_at IS NULL "
		 "OR s.last_at < ?)) ORDER BY s.next_at, m.id LIMIT 1",
		 "reading the queue", NULL, "tIIII", name, ns->once_since,
		 (int64_t)time(NULL), ns->once_since, ns->once_since)) != 0)
		return r;
	if ((r = sqlite3_step(st)) == SQLITE_ROW) {
		m->id = sqlite3_column_int64(st, 0);
		m->kind = db_text(st, 1);
		m->instance = db_text(st, 2);
		m->t = sqlite3_column_int64(st, 3);
		m->text = db_text(st, 4);
		m->next = db_text(st, 5);
		*attempts = sqlite3_column_int(st, 6);
	}
	sqlite3_finalize(st);
	return r == SQLITE_ROW ? 1 : r == SQLITE_DONE ? 0 : -GF_EDB;
}

/*
 * Claim row (m, target) for this process: 1 claimed, 0 taken, -GF_EDB.
 * last_at is read from the clock the pace is kept by (now_ms), before the
 * start is counted: claims of a target are at least its spacing apart in
 * the stored seconds too (time() may lag that clock by a tick).
 */
static int
claim(struct notifysend *ns, int64_t msg_id, const char *target)
{
	int r;

	r = db_exec(ns->inv,
	    "UPDATE notify_send SET state = 'sending', attempts = attempts + "
	    "1, last_at = ?, sender_pid = ?, sender_start = ? WHERE msg_id = "
	    "? AND target = ? AND state = 'pending'",
	    "claiming a notification", NULL, "IIIIt", now_ms() / 1000,
	    (int64_t)getpid(), schedrun_pid_start(getpid()), msg_id, target);
	if (r < 0)
		return r;
	return sqlite3_changes(ns->inv->db) == 1;
}

/*
 * Start what is due: for each target that is free and within its pace,
 * its next row. Called every daemon tick and after each answer.
 */
void
notifysend_kick(struct notifysend *ns)
{
	const struct config *cf = ns->cf;
	const struct config_notify *n;
	struct notify_msg m;
	struct ns_target *t;
	struct ns_xfer *x;
	char *cause = NULL;
	size_t i;
	int attempts, r;

	if (!ns->stopping && notifysend_expire(ns->inv, &cause) != 0) {
		error("%s", cause);
		free(cause);
		cause = NULL;
	}
	for (i = 0; !ns->stopping && i < cf->nnotifies; i++) {
		n = &cf->notifies[i];
		t = target_get(ns, n->name);
		if (!target_ready(ns, n, t, now_ms()))
			continue;
		if ((r = next_row(ns, n->name, &m, &attempts)) <= 0)
			continue;
		if (claim(ns, m.id, n->name) != 1) {
			notify_msg_clear(&m);
			continue;
		}
		target_started(t, now_ms());
		if (xfer_start(ns, n, &m, attempts + 1, &x, &cause) != 0) {
			/* Nothing left: an attempt that failed here. */
			struct ns_xfer tmp;
			memset(&tmp, 0, sizeof tmp);
			tmp.ns = ns;
			tmp.target = n->name;
			tmp.retries = n->retries;
			tmp.attempt = attempts + 1;
			tmp.msg_id = m.id;
			tmp.kind = m.kind;
			tmp.instance = m.instance;
			finish(&tmp, NOTIFY_RETRY, 0, cause, 0);
			free(cause);
			cause = NULL;
		} else
			t->busy = 1;
		notify_msg_clear(&m);
	}
}

int
notifysend_inflight(const struct notifysend *ns)
{
	return ns != NULL ? (int)ns->nxfers : 0;
}

/*
 * How many rows a flush would still try: pending, of a configured target,
 * not tried since it began.
 */
int
notifysend_eligible(struct notifysend *ns)
{
	struct notify_msg m;
	size_t i;
	int attempts, n = 0;

	for (i = 0; i < ns->cf->nnotifies; i++) {
		if (next_row(ns, ns->cf->notifies[i].name, &m, &attempts) == 1)
			n++;
		notify_msg_clear(&m);
	}
	return n;
}

/* Start nothing more (SIGTERM): what is in flight finishes. */
void
notifysend_stop(struct notifysend *ns)
{
	if (ns != NULL)
		ns->stopping = 1;
}

/*
 * The grace is over: drop the requests still in flight; their rows
 * become unknown (they may have arrived), never sent again.
 */
void
notifysend_abort(struct notifysend *ns, const char *why)
{
	struct ns_xfer *x;
	char *cause = NULL, *line;

	while (ns != NULL && ns->nxfers > 0) {
		x = ns->xfers[--ns->nxfers];
		xasprintf(&line, "%s: may not have arrived", why);
		if (!x->test &&
		    db_exec(ns->inv,
			"UPDATE notify_send SET state = 'unknown', last_error "
			"= ? WHERE msg_id = ? AND target = ? AND state = "
			"'sending'",
			"recording a notification", &cause, "tIt", line,
			x->msg_id, x->target) < 0) {
			error("%s", cause);
			free(cause);
			cause = NULL;
		}
		if (!x->test)
			log_attempt(ns, x, "notify_failed", line);
		warn_msg("notify: %s to %s: %s", x->kind, x->target, line);
		free(line);
		xfer_free(x);
	}
}

/*
 * Rows that waited in 'instance' past their next_at: the watcher never
 * said it sent them (it may have died first, or the journal was not read
 * since): the laptop sends them.
 */
int
notifysend_expire(struct inventory *inv, char **cause)
{
	int r = db_exec(inv,
	    "UPDATE notify_send SET state = 'pending', last_error = 'the "
	    "instance did not say it sent it' WHERE state = 'instance' AND "
	    "next_at <= ?",
	    "reading the queue", cause, "I", (int64_t)time(NULL));

	return r < 0 ? r : 0;
}

/*
 * Rows left sending by a process that is gone (or is another process
 * now): unknown, "may not have arrived"; and the rows notifysend_expire
 * frees. Run before sending.
 */
int
notifysend_recover(struct inventory *inv, char **cause)
{
	sqlite3_stmt *st;
	int64_t pid, start, id;
	char *target;
	int r, rc;

	if ((r = db_prepare(inv, &st,
		 "SELECT msg_id, target, sender_pid, sender_start FROM "
		 "notify_send WHERE state = 'sending'",
		 "reading the queue", cause, "")) != 0)
		return r;
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		id = sqlite3_column_int64(st, 0);
		target = db_text(st, 1);
		pid = sqlite3_column_int64(st, 2);
		start = sqlite3_column_int64(st, 3);
		if (pid > 0 && schedrun_pid_start((pid_t)pid) == start &&
		    start != 0) {
			free(target);
			continue;
		}
		r = db_exec(inv,
		    "UPDATE notify_send SET state = 'unknown', last_error = "
		    "'its sender (pid ' || ? || ') died mid-send: may not have "
		    "arrived' WHERE msg_id = ? AND target = ? AND state = "
		    "'sending'",
		    "recording a notification", cause, "IIt", pid, id, target);
		free(target);
		if (r < 0) {
			sqlite3_finalize(st);
			return r;
		}
	}
	if (db_finish(inv, st, rc, "reading the queue", cause) < 0)
		return -GF_EDB;
	return notifysend_expire(inv, cause);
}

/*
 * Send m to target n now, once, on base, and wait for the answer (the
 * attempt is recorded in action_log). Returns 0 when sent, -1 when not;
 * *res says how.
 */
int
notifysend_test(struct event_base *base, struct inventory *inv,
    const struct config_notify *n, const struct notify_msg *m,
    struct notifysend_result *res)
{
	struct config one;
	struct notifysend *ns;
	struct ns_xfer *x;
	char *cause = NULL;

	memset(res, 0, sizeof *res);
	res->target = xstrdup(n->name);
	memset(&one, 0, sizeof one);
	ns = notifysend_new(base, inv, &one, 0);
	if (xfer_start(ns, n, m, 1, &x, &cause) != 0) {
		res->why = cause;
		notifysend_free(ns);
		return -1;
	}
	x->test = 1;
	x->result = res;
	while (ns->nxfers > 0)
		event_base_loop(base, EVLOOP_ONCE);
	notifysend_free(ns);
	return res->ok ? 0 : -1;
}

void
notifysend_result_clear(struct notifysend_result *r)
{
	free(r->target);
	free(r->why);
	free(r->answer);
	memset(r, 0, sizeof *r);
}

/*
 * The watcher's own notifications (agent/WATCH.md "Notifications"): when
 * it journals a job's end, the first attempt of a stop (before the stop
 * command is let go: the machine goes away right after), a stop that
 * failed or an autostop firing, it sends the message to each target of
 * D/notify.json that takes it, through curl, all of them together within
 * NOTIF_DEADLINE_MS, and journals a "notify" entry for each: the
 * controller then knows not to send it again.
 *
 * curl gets everything on stdin as a config (-K -): the URL and the body
 * hold the target's token and signature, and a command line is readable
 * by every process of the machine. -q first: no ~/.curlrc (a -k there
 * would turn TLS verification off).
 */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "agent.h"
#include "../controller/xmalloc.h"

static int notif_message(
    struct watch *, const struct jsonr *, int *, char **, char **);
static void notif_conf_quote(struct buf *, const char *, size_t);
static const char *notif_clean(const char *, char *, size_t);
static char *notif_curl_config(const struct notif_req *);
static void notif_journal(struct watch *, const char *, const char *,
    const char *, long long, int, long, const char *);

/*
 * s (from a job's spec or the journal) cut to size - 1 bytes, with its
 * control characters as '?': a message holds none (the controller's are
 * escaped by vis.c). NULL stays NULL.
 */
static const char *
notif_clean(const char *s, char *out, size_t size)
{
	size_t i;

	if (s == NULL)
		return NULL;
	snprintf(out, size, "%s", s);
	for (i = 0; out[i] != '\0'; i++)
		if ((unsigned char)out[i] < 0x20 || out[i] == 0x7f)
			out[i] = '?';
	return out;
}

/* A string for curl's config file: "..." with \\ \" \n \r \t escaped. */
static void
notif_conf_quote(struct buf *b, const char *s, size_t len)
{
	size_t i;

	buf_add(b, "\"", 1);
	for (i = 0; i < len; i++) {
		switch (s[i]) {
		case '\\':
			buf_add(b, "\\\\", 2);
			break;
		case '"':
			buf_add(b, "\\\"", 2);
			break;
		case '\n':
			buf_add(b, "\\n", 2);
			break;
		case '\r':
			buf_add(b, "\\r", 2);
			break;
		case '\t':
			buf_add(b, "\\t", 2);
			break;
		default:
			buf_add(b, s + i, 1);
			break;
		}
	}
	buf_add(b, "\"\n", 2);
}

/* curl's config for request r. Caller frees. */
static char *
notif_curl_config(const struct notif_req *r)
{
	struct buf b = { NULL, 0, 0 };
	char *h;

	buf_addstr(&b, "url = ");
	notif_conf_quote(&b, r->url, strlen(r->url));
	xasprintf(&h, "Content-Type: %s", r->content_type);
	buf_addstr(&b, "header = ");
	notif_conf_quote(&b, h, strlen(h));
	free(h);
	if (r->title != NULL) {
		xasprintf(&h, "Title: %s", r->title);
		buf_addstr(&b, "header = ");
		notif_conf_quote(&b, h, strlen(h));
		free(h);
	}
	buf_addstr(&b, "header = \"Expect:\"\n");
	/* data-raw: a body starting with @ is no file name */
	buf_addstr(&b, "data-raw = ");
	notif_conf_quote(
	    &b, r->body.data != NULL ? r->body.data : "", r->body.len);
	return b.data;
}

/*
 * The message entry e makes, as the controller's notify_entry words it
 * (controller/watcher.c): its kind, what happened and the command to run
 * next (with %s for the instance's name). 0: none.
 */
static int
notif_message(
    struct watch *w, const struct jsonr *e, int *kind, char **what, char **next)
{
	const char *ev = jsonr_str(e, "event"), *id = jsonr_str(e, "id");
	const char *state, *s;
	struct judge_fire *f;
	char clean[201], name[sizeof clean + 3];
	long long job, v;

	*what = *next = NULL;
	if (ev == NULL)
		return 0;
	if (strcmp(ev, "job_ended") == 0) {
		state = jsonr_str(e, "state");
		if (state == NULL || jsonr_int(e, "job", &job) != 0 || job <= 0)
			return 0;
		if ((s = notif_clean(jsonr_str(e, "name"), clean, 65)) != NULL)
			snprintf(name, sizeof name, " (%s)", s);
		else
			name[0] = '\0';
		xasprintf(next, "gpufleet logs %%s:%lld", job);
		if (strcmp(state, "succeeded") == 0) {
			*kind = NOTIF_JOB_FINISHED;
			xasprintf(what, "job %lld%s finished", job, name);
		} else if (strcmp(state, "failed") == 0) {
			*kind = NOTIF_JOB_FAILED;
			xasprintf(what, "job %lld%s failed (exit %lld)", job,
			    name, jsonr_int(e, "exit", &v) == 0 ? v : -1LL);
		} else if (strcmp(state, "killed") == 0 ||
		    strcmp(state, "lost") == 0) {
			*kind = NOTIF_JOB_FAILED;
			s = jsonr_str(e, state[0] == 'k' ? "signal" : "reason");
			xasprintf(what, "job %lld%s was %s%s%.200s%s", job,
			    name, state, s != NULL ? " (" : "",
			    s != NULL ? s : "", s != NULL ? ")" : "");
		} else {
			free(*next);
			*next = NULL;
			return 0;
		}
		return 1;
	}
	if (id == NULL)
		return 0;
	if (strcmp(ev, "stopping") == 0) {
		/* The first attempt only: a retry is the same stop. */
		if ((f = judge_find(&w->js, id, 0)) == NULL || f->attempts != 1)
			return 0;
		*kind = NOTIF_STOPPED;
		xasprintf(what, "is being stopped (%s)", id);
		*next = xstrdup("gpufleet events %s");
		return 1;
	}
	if (strcmp(ev, "stop_failed") == 0) {
		*kind = NOTIF_STOP_FAILED;
		s = notif_clean(jsonr_str(e, "reason"), clean, sizeof clean);
		xasprintf(what, "did not stop (%s)%s%s", id,
		    s != NULL ? ": " : "", s != NULL ? s : "");
		*next = xstrdup("gpufleet status %s");
		return 1;
	}
	if (strcmp(ev, "firing") == 0) {
		s = jsonr_str(e, "reason");
		if (s == NULL ||
		    (strcmp(s, "idle") != 0 && strcmp(s, "stalled") != 0 &&
			strcmp(s, "max_runtime") != 0))
			return 0;
		*kind = NOTIF_AUTOSTOPPED;
		xasprintf(what, "is being stopped by autostop (%s)", s);
		*next = xstrdup("gpufleet events %s");
		return 1;
	}
	return 0;
}

/* Journal "notify": how sending kind about entry seq to target went. */
static void
notif_journal(struct watch *w, const char *target, const char *kind,
    const char *id, long long about, int ok, long http, const char *error)
{
	struct jsonw jw;

	watch_entry(w, &jw, "notify", id);
	jsonw_string(&jw, "target", target);
	jsonw_string(&jw, "kind", kind);
	jsonw_int(&jw, "about", about);
	jsonw_bool(&jw, "ok", ok);
	jsonw_opt_int(&jw, "status", (struct opt_int){ http > 0, http });
	jsonw_string(&jw, "error", error);
	watch_log(w, &jw);
}

/*
 * Entry e, just journaled as seq, may be news for the targets of
 * D/notify.json: send it to each that takes it and journal how it went.
 */
void
watch_notify(struct watch *w, const struct jsonr *e, long long seq)
{
	static const char *const kinds[] = { "job_finished", "job_failed",
		"stopped", "stop_failed", "autostopped" };
	struct notif_conf c;
	struct notif_req req[NOTIF_MAX_TARGETS];
	struct run runs[NOTIF_MAX_TARGETS];
	char *argv[NOTIF_MAX_TARGETS][12], *conf[NOTIF_MAX_TARGETS];
	char *what = NULL, *next = NULL, *text, *nx, *curl, *why, *cause = NULL;
	size_t i, n = 0, idx[NOTIF_MAX_TARGETS], done, batch;
	const char *id = jsonr_str(e, "id"), *env;
	struct timeval tv;
	long long t, now_ms;
	long http;
	int kind, ok;

	if (!notif_message(w, e, &kind, &what, &next))
		return;
	if (notif_load(w->dir, &c, NULL, &cause) != 0) {
		if (cause != NULL) /* none is no error */
			fprintf(stderr, "gpufleet-agent watch: %s\n", cause);
		free(cause);
		goto out;
	}
	if (jsonr_int(e, "time", &t) != 0)
		t = (long long)time(NULL);
	gettimeofday(&tv, NULL);
	now_ms = (long long)tv.tv_sec * 1000 + tv.tv_usec / 1000;
	/* GPUFLEET_CURL: which curl (the tests hide it); else PATH's. */
	if ((env = getenv("GPUFLEET_CURL")) != NULL)
		curl = *env != '\0' && access(env, X_OK) == 0 ? xstrdup(env)
							      : NULL;
	else
		curl = watch_find_prog("curl");
	for (i = 0; i < c.n; i++) {
		if ((c.t[i].events & (1u << kind)) == 0)
			continue;
		if (curl == NULL) {
			notif_journal(w, c.t[i].name, kinds[kind], id, seq, 0,
			    0, "curl not found");
			continue;
		}
		xasprintf(&nx, next, c.t[i].instance);
		text = notif_text(c.t[i].instance, what, t, t, nx);
		notif_request(&c.t[i], kinds[kind], c.t[i].instance, t, text,
		    nx, now_ms, &req[n]);
		free(text);
		free(nx);
		conf[n] = notif_curl_config(&req[n]);
		memset(&runs[n], 0, sizeof runs[n]);
		argv[n][0] = curl;
		argv[n][1] = "-q";
		argv[n][2] = "-sS";
		argv[n][3] = "--max-time";
		argv[n][4] = NOTIF_CURL_MAX_TIME;
		argv[n][5] = "--proto";
		argv[n][6] = "=http,https";
		argv[n][7] = "-K";
		argv[n][8] = "-";
		argv[n][9] = "-w";
		argv[n][10] = "\n%{http_code}";
		argv[n][11] = NULL;
		runs[n].argv = argv[n];
		runs[n].in = conf[n];
		runs[n].inlen = strlen(conf[n]);
		idx[n++] = i;
	}
	/* run_all takes 8 at a time; all within the one deadline. */
	for (done = 0; done < n; done += batch) {
		batch = n - done < 8 ? n - done : 8;
		run_all(runs + done, batch,
		    NOTIF_DEADLINE_MS / (long)((n + 7) / 8));
	}
	for (i = 0; i < n; i++) {
		struct buf *o = &runs[i].out[0];
		char *nl = NULL, *err = NULL;

		http = 0;
		why = NULL;
		if (o->data != NULL && (nl = strrchr(o->data, '\n')) != NULL)
			http = strtol(nl + 1, NULL, 10);
		if (runs[i].state == RUN_SPAWN_FAILED)
			xasprintf(&why, "cannot run curl: %s",
			    strerror(runs[i].error));
		else if (runs[i].state == RUN_TIMED_OUT)
			xasprintf(&why, "no answer within %d s",
			    NOTIF_DEADLINE_MS / 1000);
		else if (!WIFEXITED(runs[i].status) ||
		    WEXITSTATUS(runs[i].status) != 0) {
			err = buf_first_line(
			    runs[i].out[1].data, runs[i].out[1].len);
			xasprintf(&why, "curl failed (exit %d)%s%.200s",
			    WIFEXITED(runs[i].status)
				? WEXITSTATUS(runs[i].status)
				: -1,
			    err != NULL && *err != '\0' ? ": " : "",
			    err != NULL ? err : "");
			free(err);
		}
		if (why == NULL) {
			ok = notif_judge(c.t[idx[i]].format, http, o->data,
			    nl != NULL ? (size_t)(nl - o->data) : 0, &why);
		} else
			ok = 0;
		notif_journal(
		    w, c.t[idx[i]].name, kinds[kind], id, seq, ok, http, why);
		free(why);
		explicit_bzero(conf[i], strlen(conf[i]));
		free(conf[i]);
		notif_req_free(&req[i]);
		run_free(&runs[i]);
	}
	free(curl);
	notif_free(&c);
out:
	free(what);
	free(next);
}

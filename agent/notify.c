/*
 * Notifications sent by the instance itself (agent/WATCH.md
 * "Notifications"): D/notify.json names the targets marked from_instances
 * in the controller's config, with their URLs and signing secrets; the
 * watcher sends a job's end and a stop's start or failure to them through
 * the instance's curl, so the message leaves even with the laptop closed.
 *
 * The bodies are the controller's, byte for byte (controller/notify.c,
 * notify_request_build; tests/unit/test_agent_notify.c checks both): the
 * agent cannot link jansson, so they are written here with jsonw.
 */

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "agent.h"
#include "gpufleet/hmac.h"
#include "../controller/xmalloc.h"

static const char *const notif_formats[] = { "json", "slack", "discord",
	"feishu", "dingtalk", "ntfy", NULL };
static const char *const notif_kinds[] = { "job_finished", "job_failed",
	"stopped", "stop_failed", "autostopped", "schedule_failed", "guard",
	"low_balance", "stalled", "host_down", "hostkey_changed",
	"key_reinjected", "release_deadline", "stop_held", NULL };

static int notif_name_ok(const char *, size_t);
static int notif_url_ok(const char *);
static void notif_urlencode_b64(const char *, struct buf *);

/* The format named s, or -1. */
int
notif_format_parse(const char *s)
{
	int i;

	for (i = 0; notif_formats[i] != NULL; i++)
		if (strcmp(notif_formats[i], s) == 0)
			return i;
	return -1;
}

/* The event kind named s (the controller's notify_kind order), or -1. */
int
notif_kind_parse(const char *s)
{
	int i;

	for (i = 0; notif_kinds[i] != NULL; i++)
		if (strcmp(notif_kinds[i], s) == 0)
			return i;
	return -1;
}

/* A target's or instance's name: 1 to max bytes, printable, no blanks. */
static int
notif_name_ok(const char *s, size_t max)
{
	size_t i, n = strlen(s);

	if (n == 0 || n > max)
		return 0;
	for (i = 0; i < n; i++)
		if ((unsigned char)s[i] <= ' ' || s[i] == 0x7f)
			return 0;
	return 1;
}

/* http:// or https://, a host, no blanks or control characters. */
static int
notif_url_ok(const char *u)
{
	const char *host;
	size_t i;

	if (strncmp(u, "https://", 8) == 0)
		host = u + 8;
	else if (strncmp(u, "http://", 7) == 0)
		host = u + 7;
	else
		return 0;
	if (*host == '\0' || *host == '/' || *host == '?' ||
	    strlen(u) > NOTIF_URL_MAX)
		return 0;
	for (i = 0; u[i] != '\0'; i++)
		if ((unsigned char)u[i] <= ' ' || (unsigned char)u[i] >= 0x7f)
			return 0;
	return 1;
}

/*
 * Parse and check a notify.json: {"version":1,"targets":[{"name",
 * "format","url","secret" (string or null),"events":[...],"instance"}]}.
 * Returns 0, or -1 with *cause.
 */
int
notif_parse(const char *text, size_t len, struct notif_conf *c, char **cause)
{
	static const char *const top[] = { "version", "targets", NULL };
	static const char *const keys[] = { "name", "format", "url", "secret",
		"events", "instance", NULL };
	const struct jsonr *ts, *t, *ev, *sec;
	struct notif_target *nt;
	struct jsonr root;
	const char *s;
	char *why = NULL;
	long long v;
	size_t i, k;
	int e;

	memset(c, 0, sizeof *c);
	if (jsonr_parse(text, len, &root, &why) != 0) {
		xasprintf(cause, "not JSON: %s", why);
		free(why);
		return -1;
	}
	if (root.type != JSONR_OBJECT) {
		xasprintf(cause, "not an object");
		goto bad;
	}
	if (plan_keys(&root, top, "notify", cause) != 0)
		goto bad;
	if (jsonr_int(&root, "version", &v) != 0 || v != 1) {
		xasprintf(cause, "version: must be 1");
		goto bad;
	}
	ts = jsonr_get(&root, "targets");
	if (ts == NULL || ts->type != JSONR_ARRAY ||
	    ts->n > NOTIF_MAX_TARGETS) {
		xasprintf(cause, "targets: must be an array of at most %d",
		    NOTIF_MAX_TARGETS);
		goto bad;
	}
	c->t = xcalloc(ts->n + 1, sizeof *c->t);
	for (i = 0; i < ts->n; i++) {
		t = &ts->items[i];
		nt = &c->t[c->n];
		if (t->type != JSONR_OBJECT) {
			xasprintf(cause, "targets[%zu]: not an object", i);
			goto bad;
		}
		if (plan_keys(t, keys, "target", cause) != 0)
			goto bad;
		if ((s = jsonr_str(t, "name")) == NULL ||
		    !notif_name_ok(s, NOTIF_NAME_MAX)) {
			xasprintf(cause,
			    "targets[%zu].name: 1 to %d printable "
			    "bytes",
			    i, NOTIF_NAME_MAX);
			goto bad;
		}
		for (k = 0; k < c->n; k++)
			if (strcmp(c->t[k].name, s) == 0) {
				xasprintf(cause, "target %s: named twice", s);
				goto bad;
			}
		snprintf(nt->name, sizeof nt->name, "%s", s);
		if ((s = jsonr_str(t, "format")) == NULL ||
		    (nt->format = notif_format_parse(s)) < 0) {
			xasprintf(cause,
			    "target %s: format: one of json, "
			    "slack, discord, feishu, dingtalk, ntfy",
			    nt->name);
			goto bad;
		}
		if ((s = jsonr_str(t, "url")) == NULL || !notif_url_ok(s)) {
			xasprintf(cause,
			    "target %s: url: an http:// or "
			    "https:// URL without blanks",
			    nt->name);
			goto bad;
		}
		nt->url = xstrdup(s);
		sec = jsonr_get(t, "secret");
		if (sec != NULL && sec->type == JSONR_STRING && sec->slen > 0 &&
		    sec->slen <= NOTIF_SECRET_MAX &&
		    strlen(sec->s) == sec->slen)
			nt->secret = xstrdup(sec->s);
		else if (sec != NULL && sec->type != JSONR_NULL) {
			xasprintf(cause,
			    "target %s: secret: a string of 1 "
			    "to %d bytes, or null",
			    nt->name, NOTIF_SECRET_MAX);
			goto bad;
		}
		ev = jsonr_get(t, "events");
		if (ev == NULL || ev->type != JSONR_ARRAY || ev->n == 0) {
			xasprintf(cause,
			    "target %s: events: a list of "
			    "event names",
			    nt->name);
			goto bad;
		}
		for (k = 0; k < ev->n; k++) {
			if (ev->items[k].type != JSONR_STRING ||
			    (e = notif_kind_parse(ev->items[k].s)) < 0) {
				xasprintf(cause,
				    "target %s: events[%zu]: "
				    "unknown",
				    nt->name, k);
				goto bad;
			}
			nt->events |= 1u << e;
		}
		if ((s = jsonr_str(t, "instance")) == NULL ||
		    !notif_name_ok(s, NOTIF_NAME_MAX)) {
			xasprintf(cause,
			    "target %s: instance: the instance's "
			    "name",
			    nt->name);
			goto bad;
		}
		snprintf(nt->instance, sizeof nt->instance, "%s", s);
		c->n++;
	}
	jsonr_free(&root);
	return 0;
bad:
	jsonr_free(&root);
	notif_free(c);
	return -1;
}

void
notif_free(struct notif_conf *c)
{
	size_t i;

	for (i = 0; c->t != NULL && i <= c->n; i++) {
		free(c->t[i].url);
		if (c->t[i].secret != NULL) {
			explicit_bzero(c->t[i].secret, strlen(c->t[i].secret));
			free(c->t[i].secret);
		}
	}
	free(c->t);
	memset(c, 0, sizeof *c);
}

/*
 * notify set: check text, then write it to dir/notify.json (mode 0600,
 * by a temporary file, fsync and rename), or remove that file when it
 * names no target. Returns 0, PLAN_EXIT_INVALID or PLAN_EXIT_WRITE with
 * *cause.
 */
int
notif_set(const char *dir, const char *text, size_t len, char **cause)
{
	struct notif_conf c;
	char *path;
	size_t n;

	if (notif_parse(text, len, &c, cause) != 0)
		return PLAN_EXIT_INVALID;
	n = c.n;
	notif_free(&c);
	if (plan_mkdir(dir, cause) != 0)
		return PLAN_EXIT_WRITE;
	if (n > 0)
		return plan_write_named(dir, "notify.json", text, len, cause) ==
			0
		    ? 0
		    : PLAN_EXIT_WRITE;
	xasprintf(&path, "%s/notify.json", dir);
	if (unlink(path) != 0 && errno != ENOENT) {
		xasprintf(cause, "cannot remove %s: %s", path, strerror(errno));
		free(path);
		return PLAN_EXIT_WRITE;
	}
	free(path);
	return 0;
}

/*
 * Load dir/notify.json: 1 when there is none, 0 when it loaded, -1 with
 * *cause. *sha (when not NULL) is the hex SHA-256 of its bytes, as the
 * report gives it to the controller.
 */
int
notif_load(const char *dir, struct notif_conf *c, char *sha, char **cause)
{
	unsigned char d[HMAC_SHA256_LEN];
	struct buf b = { NULL, 0, 0 };
	char *path, *why = NULL;
	size_t i;
	int r;

	memset(c, 0, sizeof *c);
	xasprintf(&path, "%s/notify.json", dir);
	if (buf_read_file(&b, path, JSONR_MAXSIZE + 1) != 0) {
		r = errno == ENOENT ? 1 : -1;
		if (r < 0)
			xasprintf(
			    cause, "cannot read %s: %s", path, strerror(errno));
		free(path);
		return r;
	}
	if (sha != NULL) {
		hmac_sha256_digest(b.data, b.len, d);
		for (i = 0; i < sizeof d; i++)
			snprintf(sha + 2 * i, 3, "%02x", d[i]);
	}
	r = notif_parse(b.data, b.len, c, &why);
	if (r != 0) {
		xasprintf(cause, "invalid %s: %s", path, why);
		free(why);
	}
	explicit_bzero(b.data, b.len);
	buf_free(&b);
	free(path);
	return r;
}

/*
 * The message's text, as the controller's notifyqueue_add writes it:
 * "gpufleet: INSTANCE WHAT at WHEN. Next: NEXT", cut at NOTIF_TEXT_MAX
 * bytes at a character's start. when is notify_when's: local time, "%H:%M
 * %Z" within a day of now, else with the date. Caller frees.
 */
char *
notif_text(const char *instance, const char *what, long long t, long long now,
    const char *next)
{
	char when[64], *text;
	time_t tt = (time_t)t;
	struct tm tm;
	size_t i;

	if (localtime_r(&tt, &tm) == NULL ||
	    strftime(when, sizeof when,
		now - t < 86400 && t - now < 3600 ? "%H:%M %Z"
						  : "%Y-%m-%d %H:%M %Z",
		&tm) == 0)
		snprintf(when, sizeof when, "?");
	xasprintf(&text, "gpufleet: %s%s%s at %s.%s%s",
	    instance != NULL ? instance : "", instance != NULL ? " " : "", what,
	    when, next != NULL ? " Next: " : "", next != NULL ? next : "");
	if ((i = strlen(text)) > NOTIF_TEXT_MAX) {
		i = NOTIF_TEXT_MAX;
		while (i > 0 && ((unsigned char)text[i] & 0xc0) == 0x80)
			i--;
		text[i] = '\0';
	}
	return text;
}

/* base64 text URL-encoded (+ / = are its only reserved characters). */
static void
notif_urlencode_b64(const char *in, struct buf *out)
{
	static const char hex[] = "0123456789ABCDEF";
	char esc[3];

	for (; *in != '\0'; in++) {
		if (*in == '+' || *in == '/' || *in == '=') {
			esc[0] = '%';
			esc[1] = hex[(unsigned char)*in >> 4];
			esc[2] = hex[(unsigned char)*in & 0xf];
			buf_add(out, esc, 3);
		} else
			buf_add(out, in, 1);
	}
}

/*
 * The request that sends a message to target t (the controller's
 * notify_request_build): kind, instance, its time t_msg, text and next,
 * signed at now_ms (milliseconds since the epoch). Caller frees r.
 */
void
notif_request(const struct notif_target *t, const char *kind,
    const char *instance, long long t_msg, const char *text, const char *next,
    long long now_ms, struct notif_req *r)
{
	unsigned char mac[HMAC_SHA256_LEN];
	char sig[64], ts[32], when[32], *key;
	struct jsonw w;
	time_t tt = (time_t)t_msg;
	struct tm tm;

	memset(r, 0, sizeof *r);
	r->content_type = "application/json";
	jsonw_init(&w);
	switch (t->format) {
	case NOTIF_FORMAT_JSON:
		if (gmtime_r(&tt, &tm) == NULL ||
		    strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", &tm) == 0)
			snprintf(when, sizeof when, "?");
		jsonw_object_begin(&w, NULL);
		/* jsonw_string writes NULL as null, as json_pack's s? */
		jsonw_string(&w, "kind", kind);
		jsonw_string(&w, "instance", instance);
		jsonw_string(&w, "time", when);
		jsonw_string(&w, "text", text);
		jsonw_string(&w, "next", next);
		jsonw_object_end(&w);
		break;
	case NOTIF_FORMAT_SLACK:
	case NOTIF_FORMAT_DISCORD:
		jsonw_object_begin(&w, NULL);
		jsonw_string(&w,
		    t->format == NOTIF_FORMAT_SLACK ? "text" : "content", text);
		jsonw_object_end(&w);
		break;
	case NOTIF_FORMAT_FEISHU:
		jsonw_object_begin(&w, NULL);
		jsonw_string(&w, "msg_type", "text");
		jsonw_object_begin(&w, "content");
		jsonw_string(&w, "text", text);
		jsonw_object_end(&w);
		if (t->secret != NULL) {
			/* key = ts "\n" secret, message empty; seconds */
			xasprintf(&key, "%lld\n%s", now_ms / 1000, t->secret);
			hmac_sha256(key, strlen(key), "", 0, mac);
			explicit_bzero(key, strlen(key));
			free(key);
			hmac_base64(mac, sizeof mac, sig, sizeof sig);
			snprintf(ts, sizeof ts, "%lld", now_ms / 1000);
			jsonw_string(&w, "timestamp", ts);
			jsonw_string(&w, "sign", sig);
		}
		jsonw_object_end(&w);
		break;
	case NOTIF_FORMAT_DINGTALK:
		jsonw_object_begin(&w, NULL);
		jsonw_string(&w, "msgtype", "text");
		jsonw_object_begin(&w, "text");
		jsonw_string(&w, "content", text);
		jsonw_object_end(&w);
		jsonw_object_end(&w);
		break;
	default: /* NOTIF_FORMAT_NTFY */
		r->content_type = "text/plain; charset=utf-8";
		buf_addstr(&w.out, text);
		xasprintf(&r->title, "gpufleet: %s%s%s",
		    instance != NULL ? instance : "",
		    instance != NULL ? " " : "", kind);
		r->title[strcspn(r->title, "\r\n")] = '\0';
		break;
	}
	r->body = w.out; /* the buffer is r's now */
	if (t->format == NOTIF_FORMAT_DINGTALK && t->secret != NULL) {
		/* key = secret, message = ts "\n" secret; milliseconds */
		struct buf u = { NULL, 0, 0 };

		xasprintf(&key, "%lld\n%s", now_ms, t->secret);
		hmac_sha256(
		    t->secret, strlen(t->secret), key, strlen(key), mac);
		explicit_bzero(key, strlen(key));
		free(key);
		hmac_base64(mac, sizeof mac, sig, sizeof sig);
		buf_addstr(&u, t->url);
		snprintf(ts, sizeof ts, "%ctimestamp=%lld&sign=",
		    strchr(t->url, '?') != NULL ? '&' : '?', now_ms);
		buf_addstr(&u, ts);
		notif_urlencode_b64(sig, &u);
		r->url = u.data;
	} else
		r->url = xstrdup(t->url);
}

void
notif_req_free(struct notif_req *r)
{
	free(r->url);
	buf_free(&r->body);
	free(r->title);
	memset(r, 0, sizeof *r);
}

/*
 * The verdict on curl's answer (the controller's notify_judge, in short):
 * a 2xx is delivered, except where Feishu's code or DingTalk's errcode in
 * the body is not 0. *why says what failed, or stays NULL.
 */
int
notif_judge(int format, long http, const char *body, size_t len, char **why)
{
	const char *key = format == NOTIF_FORMAT_FEISHU ? "code" : "errcode";
	struct jsonr o;
	long long code;
	int ok = 1;

	*why = NULL;
	if (http < 200 || http > 299) {
		xasprintf(why, "HTTP %ld", http);
		return 0;
	}
	if (format != NOTIF_FORMAT_FEISHU && format != NOTIF_FORMAT_DINGTALK)
		return 1;
	if (jsonr_parse(body, len, &o, NULL) != 0) {
		xasprintf(why, "HTTP %ld but the body is not JSON", http);
		return 0;
	}
	if (jsonr_int(&o, key, &code) != 0 &&
	    (format != NOTIF_FORMAT_FEISHU ||
		jsonr_int(&o, "StatusCode", &code) != 0)) {
		xasprintf(why, "HTTP %ld without a %s", http, key);
		ok = 0;
	} else if (code != 0) {
		xasprintf(why, "%s %lld", key, code);
		ok = 0;
	}
	jsonr_free(&o);
	return ok;
}

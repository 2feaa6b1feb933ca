/*
 * Notifications: the event names, the targets' URLs and secrets, the
 * bodies and signatures of each format and the verdict on an answer
 * (notify.h has the contract; notifyqueue.c writes the queue).
 */

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "gpufleet/hmac.h"

#include "instance.h"
#include "misc.h"
#include "notify.h"
#include "status.h"
#include "vis.h"
#include "xmalloc.h"

static int read_first_line(const char *, const char *, char **, char **);
static void urlencode_b64(const char *, char *, size_t);

static const char *const kinds[NOTIFY_NKINDS] = { "job_finished", "job_failed",
	"stopped", "stop_failed", "autostopped", "schedule_failed", "guard",
	"low_balance", "stalled", "host_down", "hostkey_changed",
	"key_reinjected", "release_deadline", "stop_held" };

static const char *const formats[] = { "json", "slack", "discord", "feishu",
	"dingtalk", "ntfy" };

const char *
notify_kind_name(int k)
{
	return k >= 0 && k < NOTIFY_NKINDS ? kinds[k] : "test";
}

/* The kind of an event name, or -1. */
int
notify_kind_parse(const char *s)
{
	int i;

	for (i = 0; i < NOTIFY_NKINDS; i++) {
		if (strcmp(kinds[i], s) == 0)
			return i;
	}
	return -1;
}

const char *
notify_format_name(int f)
{
	return f >= 0 && f < (int)(sizeof formats / sizeof formats[0])
	    ? formats[f]
	    : "?";
}

int
notify_format_parse(const char *s)
{
	size_t i;

	for (i = 0; i < sizeof formats / sizeof formats[0]; i++) {
		if (strcmp(formats[i], s) == 0)
			return (int)i;
	}
	return -1;
}

/*
 * An events list: names separated by spaces or commas, or "all". An
 * unknown name is an error naming it.
 */
int
notify_events_parse(const char *s, unsigned *out, char **cause)
{
	char *copy = xstrdup(s), *p = copy, *w;
	unsigned mask = 0;
	int k;

	while ((w = strsep(&p, " \t,")) != NULL) {
		if (*w == '\0')
			continue;
		if (strcmp(w, "all") == 0) {
			mask = NOTIFY_EVENTS_ALL;
			continue;
		}
		if ((k = notify_kind_parse(w)) < 0) {
			xasprintf(cause,
			    "unknown event '%s' (known: all, job_finished, "
			    "job_failed, stopped, stop_failed, autostopped, "
			    "schedule_failed, guard, low_balance, stalled, "
			    "host_down, hostkey_changed, key_reinjected, "
			    "release_deadline, stop_held)",
			    w);
			free(copy);
			return -1;
		}
		mask |= 1u << k;
	}
	free(copy);
	if (mask == 0) {
		xasprintf(cause, "no event named");
		return -1;
	}
	*out = mask;
	return 0;
}

/* The names in mask, space-separated ("all" for every one). Caller frees. */
char *
notify_events_string(unsigned mask)
{
	char *s = xstrdup(""), *t;
	int k;

	if ((mask & NOTIFY_EVENTS_ALL) == NOTIFY_EVENTS_ALL) {
		free(s);
		return xstrdup("all");
	}
	for (k = 0; k < NOTIFY_NKINDS; k++) {
		if ((mask & (1u << k)) == 0)
			continue;
		xasprintf(&t, "%s%s%s", s, *s != '\0' ? " " : "", kinds[k]);
		free(s);
		s = t;
	}
	return s;
}

/* A URL gpufleet sends to: http:// or https://, a host, no blanks. */
int
notify_url_check(const char *url, char **cause)
{
	const char *host;

	if (strncmp(url, "https://", 8) == 0)
		host = url + 8;
	else if (strncmp(url, "http://", 7) == 0)
		host = url + 7;
	else {
		xasprintf(cause, "only http:// and https:// URLs are sent to");
		return -1;
	}
	if (*host == '\0' || *host == '/' || *host == '?') {
		xasprintf(cause, "the URL has no host");
		return -1;
	}
	if (strpbrk(url, " \t\r\n") != NULL || vis_needed(url, strlen(url))) {
		xasprintf(cause, "the URL holds blanks or control characters");
		return -1;
	}
	return 0;
}

/*
 * The URL as it may be shown: scheme://host/... (the path and query hold
 * the webhook's token). Caller frees.
 */
char *
notify_redact(const char *url)
{
	const char *host = strstr(url, "://"), *end;
	char *s;

	if (host == NULL)
		return xstrdup("...");
	host += 3;
	end = host + strcspn(host, "/?#");
	/* userinfo is a secret too */
	if (memchr(host, '@', (size_t)(end - host)) != NULL)
		host =
		    (const char *)memchr(host, '@', (size_t)(end - host)) + 1;
	xasprintf(&s, "%.*s%.*s%s", (int)(strstr(url, "://") + 3 - url), url,
	    (int)(end - host), host, *end != '\0' ? "/..." : "");
	return s;
}

/*
 * The first line of file (what: for errors), CR and LF cut, read as a
 * passphrase file is (no stdio copy, the buffer wiped). Caller frees.
 */
static int
read_first_line(const char *file, const char *what, char **out, char **cause)
{
	char *why = NULL;

	if ((*out = misc_read_secret(file, NULL, &why)) == NULL) {
		xasprintf(cause, "%s: %s", what, why);
		free(why);
		return -1;
	}
	if (**out == '\0') {
		free(*out);
		*out = NULL;
		xasprintf(cause, "%s %s is empty", what, file);
		return -1;
	}
	return 0;
}

/* The target's URL (url, or url_file's first line), checked. Caller frees. */
int
notify_target_url(const struct config_notify *n, char **url, char **cause)
{
	char *why = NULL;

	*url = NULL;
	if (n->url != NULL)
		*url = xstrdup(n->url);
	else if (read_first_line(n->url_file, "url_file", url, cause) != 0)
		return -1;
	if (notify_url_check(*url, &why) != 0) {
		xasprintf(cause, "url_file %s: %s", n->url_file, why);
		free(why);
		free(*url);
		*url = NULL;
		return -1;
	}
	return 0;
}

/* The target's signing secret, or NULL without secret_file. Caller frees. */
int
notify_target_secret(const struct config_notify *n, char **secret, char **cause)
{
	*secret = NULL;
	if (n->secret_file == NULL)
		return 0;
	return read_first_line(n->secret_file, "secret_file", secret, cause);
}

/*
 * Feishu's signature at ts (seconds): base64(HMAC-SHA256(key = ts "\n"
 * secret, message empty)), into out. Returns 0, or -1 when out is small.
 */
int
notify_sign_feishu(const char *secret, int64_t ts, char *out, size_t size)
{
	unsigned char mac[HMAC_SHA256_LEN];
	char *key;

	xasprintf(&key, "%lld\n%s", (long long)ts, secret);
	hmac_sha256(key, strlen(key), "", 0, mac);
	explicit_bzero(key, strlen(key));
	free(key);
	return hmac_base64(mac, sizeof mac, out, size) != 0 ? 0 : -1;
}

/*
 * DingTalk's signature at ts (milliseconds): base64(HMAC-SHA256(key =
 * secret, message = ts "\n" secret)), before its URL encoding.
 */
int
notify_sign_dingtalk(const char *secret, int64_t ts, char *out, size_t size)
{
	unsigned char mac[HMAC_SHA256_LEN];
	char *msg;

	xasprintf(&msg, "%lld\n%s", (long long)ts, secret);
	hmac_sha256(secret, strlen(secret), msg, strlen(msg), mac);
	explicit_bzero(msg, strlen(msg));
	free(msg);
	return hmac_base64(mac, sizeof mac, out, size) != 0 ? 0 : -1;
}

/* base64 text URL-encoded (+ / = are its only reserved characters). */
static void
urlencode_b64(const char *in, char *out, size_t size)
{
	size_t o = 0;

	for (; *in != '\0' && o + 4 < size; in++) {
		if (*in == '+' || *in == '/' || *in == '=') {
			snprintf(out + o, size - o, "%%%02X", (unsigned)*in);
			o += 3;
		} else
			out[o++] = *in;
	}
	out[o] = '\0';
}

/*
 * The request that sends m to target n at url, signed with secret (may
 * be NULL) at now_ms (milliseconds since the epoch). Caller clears r.
 */
int
notify_request_build(const struct config_notify *n, const char *url,
    const char *secret, const struct notify_msg *m, int64_t now_ms,
    struct notify_request *r, char **cause)
{
	char sig[64], enc[128], *when;
	json_t *o = NULL;

	memset(r, 0, sizeof *r);
	r->content_type = "application/json";
	switch (n->format) {
	case NOTIFY_FORMAT_JSON:
		when = instance_format_time(m->t);
		o = json_pack("{s:s, s:s?, s:s, s:s, s:s?}", "kind", m->kind,
		    "instance", m->instance, "time", when, "text", m->text,
		    "next", m->next);
		free(when);
		break;
	case NOTIFY_FORMAT_SLACK:
		o = json_pack("{s:s}", "text", m->text);
		break;
	case NOTIFY_FORMAT_DISCORD:
		o = json_pack("{s:s}", "content", m->text);
		break;
	case NOTIFY_FORMAT_FEISHU:
		o = json_pack("{s:s, s:{s:s}}", "msg_type", "text", "content",
		    "text", m->text);
		if (o != NULL && secret != NULL) {
			if (notify_sign_feishu(
				secret, now_ms / 1000, sig, sizeof sig) != 0)
				goto bad;
			snprintf(enc, sizeof enc, "%lld",
			    (long long)(now_ms / 1000));
			json_object_set_new(o, "timestamp", json_string(enc));
			json_object_set_new(o, "sign", json_string(sig));
		}
		break;
	case NOTIFY_FORMAT_DINGTALK:
		o = json_pack("{s:s, s:{s:s}}", "msgtype", "text", "text",
		    "content", m->text);
		break;
	case NOTIFY_FORMAT_NTFY:
		r->content_type = "text/plain; charset=utf-8";
		r->body = xstrdup(m->text);
		xasprintf(&r->title, "gpufleet: %s%s%s",
		    m->instance != NULL ? m->instance : "",
		    m->instance != NULL ? " " : "", m->kind);
		r->title[strcspn(r->title, "\r\n")] = '\0';
		r->url = xstrdup(url);
		return 0;
	default:
		goto bad;
	}
	if (o == NULL)
		goto bad;
	r->body = json_dumps(o, JSON_COMPACT);
	json_decref(o);
	o = NULL;
	if (r->body == NULL)
		goto bad;
	if (n->format == NOTIFY_FORMAT_DINGTALK && secret != NULL) {
		if (notify_sign_dingtalk(secret, now_ms, sig, sizeof sig) != 0)
			goto bad;
		urlencode_b64(sig, enc, sizeof enc);
		xasprintf(&r->url, "%s%ctimestamp=%lld&sign=%s", url,
		    strchr(url, '?') != NULL ? '&' : '?', (long long)now_ms,
		    enc);
	} else
		r->url = xstrdup(url);
	return 0;
bad:
	json_decref(o);
	notify_request_clear(r);
	xasprintf(
	    cause, "cannot build the %s body", notify_format_name(n->format));
	return -1;
}

void
notify_request_clear(struct notify_request *r)
{
	free(r->url);
	free(r->body);
	free(r->title);
	memset(r, 0, sizeof *r);
}

/*
 * The verdict on an answer: HTTP status http (0: no answer: the
 * transport failed) and its body (may be NULL). A 2xx is delivered,
 * except where the platform says otherwise in the body (Feishu's code,
 * DingTalk's errcode). 408, 429 and 5xx are tried again; any other 4xx
 * and 3xx fail at once. *why says what failed (caller frees).
 */
enum notify_verdict
notify_judge(int format, long http, const char *body, char **why)
{
	json_t *o, *v;
	long long code = 0;
	const char *msg = NULL;
	enum notify_verdict vd = NOTIFY_OK;

	*why = NULL;
	if (http == 0) {
		xasprintf(why, "no answer");
		return NOTIFY_RETRY;
	}
	if (http < 200 || http > 299) {
		xasprintf(why, "HTTP %ld", http);
		return http == 408 || http == 429 || http >= 500 ? NOTIFY_RETRY
								 : NOTIFY_FAIL;
	}
	if (format != NOTIFY_FORMAT_FEISHU && format != NOTIFY_FORMAT_DINGTALK)
		return NOTIFY_OK;
	if (body == NULL || (o = json_loads(body, 0, NULL)) == NULL) {
		xasprintf(why, "HTTP %ld but the body is not JSON", http);
		return NOTIFY_FAIL;
	}
	if (format == NOTIFY_FORMAT_FEISHU) {
		if ((v = json_object_get(o, "code")) == NULL)
			v = json_object_get(o, "StatusCode");
		msg = json_string_value(json_object_get(o, "msg"));
		if (msg == NULL)
			msg = json_string_value(
			    json_object_get(o, "StatusMessage"));
	} else {
		v = json_object_get(o, "errcode");
		msg = json_string_value(json_object_get(o, "errmsg"));
	}
	if (!json_is_integer(v)) {
		xasprintf(why, "HTTP %ld without a %s", http,
		    format == NOTIFY_FORMAT_FEISHU ? "code" : "errcode");
		vd = NOTIFY_FAIL;
	} else if ((code = json_integer_value(v)) != 0) {
		char *m = vis_str(msg != NULL ? msg : "");
		xasprintf(why, "%s %lld%s%.200s",
		    format == NOTIFY_FORMAT_FEISHU ? "code" : "errcode", code,
		    *m != '\0' ? ": " : "", m);
		free(m);
		/* DingTalk's "send too fast" (130101), Feishu's 11232. */
		vd = code == 130101 || code == 11232 ? NOTIFY_RETRY
						     : NOTIFY_FAIL;
	}
	json_decref(o);
	return vd;
}

/*
 * When t was, local time, for a message read at now: "03:14 CST", with
 * the date in front when it is not within the last day. Caller frees.
 */
char *
notify_when(int64_t t, int64_t now)
{
	char buf[64];
	time_t tt = (time_t)t;
	struct tm tm;

	if (localtime_r(&tt, &tm) == NULL ||
	    strftime(buf, sizeof buf,
		now - t < 86400 && t - now < 3600 ? "%H:%M %Z"
						  : "%Y-%m-%d %H:%M %Z",
		&tm) == 0)
		return xstrdup("?");
	return xstrdup(buf);
}

void
notify_msg_clear(struct notify_msg *m)
{
	free(m->kind);
	free(m->instance);
	free(m->text);
	free(m->next);
	memset(m, 0, sizeof *m);
}

/*
 * D/notify.json for instance (agent/WATCH.md "Notifications"): the
 * targets marked from_instances, each with its URL, secret and the
 * events an instance sends (job_finished job_failed stopped stop_failed
 * autostopped) that it takes. A target whose URL or secret cannot be read
 * is left out, *why says so (the laptop sends its messages). *sha is the
 * hex SHA-256 of the text, as the agent reports it. Caller frees both.
 */
char *
notify_instance_doc(
    const struct config *cf, const char *instance, char *sha, char **why)
{
	static const int sent[] = { NOTIFY_JOB_FINISHED, NOTIFY_JOB_FAILED,
		NOTIFY_STOPPED, NOTIFY_STOP_FAILED, NOTIFY_AUTOSTOPPED };
	const struct config_notify *n;
	unsigned char d[HMAC_SHA256_LEN];
	json_t *doc, *ts, *ev;
	char *url, *secret, *cause = NULL, *text;
	size_t i, k;

	*why = NULL;
	doc = json_pack("{s:i, s:[]}", "version", 1, "targets");
	ts = json_object_get(doc, "targets");
	for (i = 0; cf != NULL && i < cf->nnotifies; i++) {
		n = &cf->notifies[i];
		if (!n->from_instances)
			continue;
		ev = json_array();
		for (k = 0; k < sizeof sent / sizeof sent[0]; k++)
			if (n->events & (1u << sent[k]))
				json_array_append_new(
				    ev, json_string(kinds[sent[k]]));
		if (json_array_size(ev) == 0) {
			json_decref(ev);
			continue;
		}
		if (notify_target_url(n, &url, &cause) != 0 ||
		    notify_target_secret(n, &secret, &cause) != 0) {
			if (*why == NULL)
				xasprintf(why,
				    "notify.%s: not given to the instances: %s",
				    n->name, cause);
			free(cause);
			cause = NULL;
			json_decref(ev);
			continue;
		}
		json_array_append_new(ts,
		    json_pack("{s:s, s:s, s:s, s:s?, s:o, s:s}", "name",
			n->name, "format", notify_format_name(n->format), "url",
			url, "secret", secret, "events", ev, "instance",
			instance));
		free(url);
		if (secret != NULL) {
			explicit_bzero(secret, strlen(secret));
			free(secret);
		}
	}
	text = json_dumps(doc, JSON_COMPACT);
	json_decref(doc);
	hmac_sha256_digest(text, strlen(text), d);
	for (i = 0; i < sizeof d; i++)
		snprintf(sha + 2 * i, 3, "%02x", d[i]);
	return text;
}

/* Whether any target is marked from_instances. */
int
notify_any_from_instances(const struct config *cf)
{
	size_t i;

	for (i = 0; cf != NULL && i < cf->nnotifies; i++)
		if (cf->notifies[i].from_instances)
			return 1;
	return 0;
}

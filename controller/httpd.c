/*
 * The daemon's HTTP server. Every request goes through the same gate
 * before a route sees it:
 *
 * - GET, HEAD and POST only (405 otherwise); headers up to 8 KiB, a
 *   body up to 64 KiB, 10 s of silence at most (evhttp's limits).
 * - With [daemon] token_file set, every request carries
 *   "Authorization: Bearer TOKEN", or the token as the password of HTTP
 *   Basic authentication, which a browser asks for (401 otherwise). Off
 *   loopback the token is required: the daemon refuses to start without it.
 * - Without a token the Host header must name a loopback address or
 *   localhost, so a page whose name was rebound to 127.0.0.1 (DNS
 *   rebinding) gets nothing.
 * - A request another site's page made (the browser's Sec-Fetch-Site:
 *   cross-site) is refused, but for the user opening a page: a page
 *   elsewhere cannot make the daemon run commands for it (403).
 * - A POST (an action) needs the token, on loopback too: without
 *   token_file any local process (another user's included) could stop
 *   the fleet (403).
 * - A POST is also same-origin: an Origin header, when present,
 *   is http:// or https:// and the request's Host, and the body is
 *   application/json, which a cross-site form cannot send without the
 *   browser asking first (403, 415 otherwise).
 *
 * Every answer carries the dashboard's Content-Security-Policy and
 * "X-Content-Type-Options: nosniff".
 */

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <sys/types.h>

#include <event2/buffer.h>
#include <event2/keyvalq_struct.h>

#include "api.h"
#include "httpd.h"
#include "log.h"
#include "misc.h"
#include "vis.h"
#include "webui.h"
#include "xmalloc.h"

#define TOKEN_MAX 1024

struct httpd {
	struct evhttp *http;
	struct api *api;
	char *token; /* or NULL: none configured */
};

static void on_request(struct evhttp_request *, void *);

/*
 * Read the token: the first line of path, which only its owner may read.
 * Returns 0 with *token (caller frees) or -1 with *cause.
 */
static int
token_read(const char *path, char **token, char **cause)
{
	char buf[TOKEN_MAX + 2];
	struct stat sb;
	size_t n;
	FILE *f;

	if ((f = fopen(path, "r")) == NULL) {
		xasprintf(cause, "cannot read [daemon] token_file %s: %s", path,
		    strerror(errno));
		return -1;
	}
	if (fstat(fileno(f), &sb) != 0 || (sb.st_mode & 077) != 0) {
		xasprintf(cause,
		    "[daemon] token_file %s may be read by group or others "
		    "(chmod 600 it)",
		    path);
		fclose(f);
		return -1;
	}
	if (fgets(buf, sizeof buf, f) == NULL)
		buf[0] = '\0';
	fclose(f);
	n = strcspn(buf, "\r\n");
	if (n > TOKEN_MAX) {
		xasprintf(cause,
		    "[daemon] token_file %s: the token is longer than %d bytes",
		    path, TOKEN_MAX);
		return -1;
	}
	buf[n] = '\0';
	if (n < 16 ||
	    strspn(buf,
		"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
		"0123456789-._~+/=") != n) {
		xasprintf(cause,
		    "[daemon] token_file %s: the first line must be a token of "
		    "16 or more letters, digits and -._~+/= (openssl rand "
		    "-hex 32)",
		    path);
		return -1;
	}
	*token = xstrdup(buf);
	return 0;
}

/*
 * Whether the daemon may listen on l with token_file (NULL: none): off
 * loopback it needs one, and the one named must be good. 0 or -1 with
 * *cause.
 */
int
httpd_check(const struct config_listen *l, const char *token_file, char **cause)
{
	char *token, *where;

	if (l->none)
		return 0;
	if (token_file == NULL && !config_listen_loopback(l)) {
		where = config_listen_string(l);
		xasprintf(cause,
		    "listen %s is not a loopback address: set [daemon] "
		    "token_file (a bearer token every request must carry)",
		    where);
		free(where);
		return -1;
	}
	if (token_file == NULL)
		return 0;
	if (token_read(token_file, &token, cause) != 0)
		return -1;
	free(token);
	return 0;
}

/*
 * Listen on l on base, routing /api/ to api. Returns 0 with *hp or -1
 * with *cause (the address cannot be bound: in use, not this host's).
 */
int
httpd_open(struct event_base *base, const struct config_listen *l,
    const char *token_file, struct api *api, struct httpd **hp, char **cause)
{
	struct httpd *h = xcalloc(1, sizeof *h);
	char *where;

	if (token_file != NULL && token_read(token_file, &h->token, cause) != 0)
		goto fail;
	if ((h->http = evhttp_new(base)) == NULL) {
		xasprintf(cause, "cannot start the HTTP server");
		goto fail;
	}
	evhttp_set_max_headers_size(h->http, HTTPD_MAX_HEADERS);
	evhttp_set_max_body_size(h->http, HTTPD_MAX_BODY);
	evhttp_set_timeout(h->http, HTTPD_TIMEOUT_S);
	/* Every method reaches on_request, which answers 405 itself. */
	evhttp_set_allowed_methods(h->http,
	    EVHTTP_REQ_GET | EVHTTP_REQ_POST | EVHTTP_REQ_HEAD |
		EVHTTP_REQ_PUT | EVHTTP_REQ_DELETE | EVHTTP_REQ_OPTIONS |
		EVHTTP_REQ_TRACE | EVHTTP_REQ_CONNECT | EVHTTP_REQ_PATCH);
	evhttp_set_gencb(h->http, on_request, h);
	errno = 0;
	if (evhttp_bind_socket(h->http, l->addr, (ev_uint16_t)l->port) != 0) {
		where = config_listen_string(l);
		xasprintf(cause, "cannot listen on %s: %s", where,
		    errno != 0 ? strerror(errno) : "bind failed");
		free(where);
		goto fail;
	}
	h->api = api;
	*hp = h;
	where = config_listen_string(l);
	info("listening on http://%s/%s", where,
	    h->token != NULL ? " (bearer token required)" : "");
	free(where);
	return 0;
fail:
	httpd_free(h);
	return -1;
}

void
httpd_free(struct httpd *h)
{
	if (h == NULL)
		return;
	if (h->http != NULL)
		evhttp_free(h->http);
	if (h->token != NULL)
		explicit_bzero(h->token, strlen(h->token));
	free(h->token);
	free(h);
}

/* Whether the strings a and b are equal, in time that does not tell where
 * they differ. */
static int
token_equal(const char *a, const char *b)
{
	size_t na = strlen(a), nb = strlen(b), i;
	unsigned char d = na != nb;

	for (i = 0; i < na; i++)
		d |= (unsigned char)a[i] ^ (unsigned char)b[i % (nb + 1)];
	return d == 0;
}

/*
 * Decode the base64 of s (RFC 4648, padding optional) into out of size
 * outsz, NUL-terminated. Returns the length decoded, or -1 for anything
 * but base64 or a result that does not fit.
 */
static ssize_t
base64_decode(const char *s, char *out, size_t outsz)
{
	static const char abc[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
				  "abcdefghijklmnopqrstuvwxyz0123456789+/";
	const char *p;
	unsigned int acc = 0;
	size_t n = 0;
	int bits = 0;

	for (; *s != '\0' && *s != '='; s++) {
		if ((p = strchr(abc, *s)) == NULL)
			return -1;
		acc = ((acc << 6) | (unsigned int)(p - abc)) & 0xffffff;
		if ((bits += 6) >= 8) {
			bits -= 8;
			if (n + 1 >= outsz)
				return -1;
			out[n++] = (char)((acc >> bits) & 0xff);
		}
	}
	if (strspn(s, "=") != strlen(s) || strlen(s) > 2)
		return -1;
	out[n] = '\0';
	return (ssize_t)n;
}

/*
 * Whether the request carries the token (when one is set): as a bearer
 * token, or as the password of HTTP Basic authentication (any user name),
 * which is what a browser sends for the dashboard once the user typed it
 * in (or opened http://gpufleet:TOKEN@HOST:PORT/).
 */
static int
authorized(const struct httpd *h, struct evkeyvalq *in)
{
	const char *v = evhttp_find_header(in, "Authorization");
	char buf[2 * TOKEN_MAX], *pass;
	ssize_t n;
	int ok;

	if (h->token == NULL)
		return 1;
	if (v == NULL)
		return 0;
	if (strncasecmp(v, "Bearer ", 7) == 0) {
		v += 7;
		v += strspn(v, " ");
		return token_equal(v, h->token);
	}
	if (strncasecmp(v, "Basic ", 6) != 0)
		return 0;
	v += 6;
	v += strspn(v, " ");
	if ((n = base64_decode(v, buf, sizeof buf)) < 0 ||
	    strlen(buf) != (size_t)n || (pass = strchr(buf, ':')) == NULL)
		ok = 0;
	else
		ok = token_equal(pass + 1, h->token);
	explicit_bzero(buf, sizeof buf);
	return ok;
}

/* Whether Host header host (HOST, HOST:PORT) names a loopback address. */
static int
host_loopback(const char *host)
{
	struct config_listen l;
	const char *end;
	size_t n;

	if (host == NULL)
		return 0;
	if (*host == '[') {
		if ((end = strchr(++host, ']')) == NULL)
			return 0;
	} else
		end = host + strcspn(host, ":");
	n = end - host;
	if (n == 9 && strncasecmp(host, "localhost", 9) == 0)
		return 1;
	if (n >= sizeof l.addr)
		return 0;
	memset(&l, 0, sizeof l);
	memcpy(l.addr, host, n);
	l.addr[n] = '\0';
	return config_listen_loopback(&l);
}

/*
 * Whether the browser says another site's page sent the request
 * (Sec-Fetch-Site: cross-site) and it is not the user opening the page
 * (a GET or HEAD navigation): such a request could still make the daemon
 * run commands, though the page never reads the answer.
 */
static int
cross_site(struct evhttp_request *req, struct evkeyvalq *in)
{
	const char *site = evhttp_find_header(in, "Sec-Fetch-Site");
	const char *mode = evhttp_find_header(in, "Sec-Fetch-Mode");
	enum evhttp_cmd_type cmd = evhttp_request_get_command(req);

	if (site == NULL || strcasecmp(site, "cross-site") != 0)
		return 0;
	return !((cmd == EVHTTP_REQ_GET || cmd == EVHTTP_REQ_HEAD) &&
	    mode != NULL && strcasecmp(mode, "navigate") == 0);
}

/*
 * Whether a POST may act: same origin (an Origin header, when sent,
 * names the Host it was sent to) and a JSON body. Else answers it.
 */
static int
post_allowed(struct evhttp_request *req, struct evkeyvalq *in)
{
	const char *origin = evhttp_find_header(in, "Origin");
	const char *host = evhttp_find_header(in, "Host");
	const char *type = evhttp_find_header(in, "Content-Type");
	size_t n;

	/* https:// too: a TLS proxy in front passes the Host on. */
	if (origin != NULL && strncmp(origin, "https://", 8) == 0)
		origin += 8;
	else if (origin != NULL && strncmp(origin, "http://", 7) == 0)
		origin += 7;
	if (origin != NULL && (host == NULL || strcmp(origin, host) != 0)) {
		httpd_reply_error(req, 403,
		    "cross-origin request refused: Origin is not http://%s",
		    host != NULL ? host : "(no Host)");
		return 0;
	}
	n = type != NULL ? strcspn(type, "; ") : 0;
	if (type == NULL || n != 16 ||
	    strncasecmp(type, "application/json", 16) != 0) {
		httpd_reply_error(
		    req, 415, "a POST needs Content-Type: application/json");
		return 0;
	}
	return 1;
}

/* GET or HEAD of a path that is not the API's: the dashboard. */
static void
serve_webui(struct evhttp_request *req, const char *path)
{
	struct evkeyvalq *out = evhttp_request_get_output_headers(req);
	struct webui_reply rp;

	webui_lookup(path,
	    evhttp_find_header(
		evhttp_request_get_input_headers(req), "If-None-Match"),
	    &rp);
	if (rp.etag != NULL) {
		evhttp_add_header(out, "ETag", rp.etag);
		evhttp_add_header(out, "Cache-Control", webui_cache_control);
	}
	if (rp.status == 304) {
		evhttp_add_header(out, "Content-Type", rp.type);
		evhttp_send_reply(req, 304, "Not Modified", NULL);
		return;
	}
	httpd_reply(req, rp.status, rp.type, rp.body, rp.len);
}

/* Every request: the gate (see the top of this file), then its route. */
static void
on_request(struct evhttp_request *req, void *arg)
{
	struct httpd *h = arg;
	struct evkeyvalq *in = evhttp_request_get_input_headers(req);
	struct evkeyvalq *out = evhttp_request_get_output_headers(req);
	const struct evhttp_uri *uri = evhttp_request_get_evhttp_uri(req);
	enum evhttp_cmd_type cmd = evhttp_request_get_command(req);
	const char *path = uri != NULL ? evhttp_uri_get_path(uri) : NULL;

	evhttp_add_header(out, "Content-Security-Policy", webui_csp);
	evhttp_add_header(out, "X-Content-Type-Options", "nosniff");
	if (cmd != EVHTTP_REQ_GET && cmd != EVHTTP_REQ_HEAD &&
	    cmd != EVHTTP_REQ_POST) {
		evhttp_add_header(out, "Allow", "GET, HEAD, POST");
		httpd_reply_error(req, 405, "only GET, HEAD and POST");
		return;
	}
	if (!authorized(h, in)) {
		evhttp_add_header(
		    out, "WWW-Authenticate", "Bearer realm=\"gpufleet\"");
		evhttp_add_header(out, "WWW-Authenticate",
		    "Basic realm=\"gpufleet\", charset=\"UTF-8\"");
		httpd_reply_error(req, 401,
		    "this server needs Authorization: Bearer TOKEN "
		    "([daemon] token_file)");
		return;
	}
	if (h->token == NULL &&
	    !host_loopback(evhttp_find_header(in, "Host"))) {
		httpd_reply_error(req, 403,
		    "Host is not a loopback address: without a token this "
		    "server answers only to 127.0.0.1, [::1] and localhost");
		return;
	}
	if (cross_site(req, in)) {
		httpd_reply_error(req, 403,
		    "a request from another site's page (Sec-Fetch-Site: "
		    "cross-site) gets only the page itself");
		return;
	}
	if (path == NULL || *path != '/') {
		httpd_reply_error(req, 400, "bad request path");
		return;
	}
	if (cmd == EVHTTP_REQ_POST && h->token == NULL) {
		httpd_reply_error(req, 403,
		    "actions (POST) need a bearer token: set [daemon] "
		    "token_file");
		return;
	}
	if (cmd == EVHTTP_REQ_POST && !post_allowed(req, in))
		return;
	if (api_handle(h->api, req, path, evhttp_uri_get_query(uri)))
		return;
	if (cmd == EVHTTP_REQ_POST) {
		evhttp_add_header(out, "Allow", "GET, HEAD");
		httpd_reply_error(req, 405, "only GET and HEAD here");
		return;
	}
	serve_webui(req, path);
}

/* Answer req with status, a Content-Type and len bytes of body. */
void
httpd_reply(struct evhttp_request *req, int status, const char *type,
    const void *body, size_t len)
{
	struct evbuffer *b = evbuffer_new();
	const char *reason;

	switch (status) {
	case 200:
		reason = "OK";
		break;
	case 400:
		reason = "Bad Request";
		break;
	case 401:
		reason = "Unauthorized";
		break;
	case 403:
		reason = "Forbidden";
		break;
	case 404:
		reason = "Not Found";
		break;
	case 405:
		reason = "Method Not Allowed";
		break;
	case 415:
		reason = "Unsupported Media Type";
		break;
	case 502:
		reason = "Bad Gateway";
		break;
	case 503:
		reason = "Service Unavailable";
		break;
	case 504:
		reason = "Gateway Timeout";
		break;
	default:
		reason = status < 500 ? "Error" : "Internal Server Error";
		break;
	}
	evhttp_add_header(
	    evhttp_request_get_output_headers(req), "Content-Type", type);
	if (len > 0)
		evbuffer_add(b, body, len);
	evhttp_send_reply(req, status, reason, b);
	evbuffer_free(b);
}

/* Answer req with status and the JSON document j (which it frees). */
void
httpd_reply_json(struct evhttp_request *req, int status, json_t *j)
{
	char *s = json_dumps(j, JSON_INDENT(2) | JSON_PRESERVE_ORDER);

	json_decref(j);
	if (s == NULL) {
		httpd_reply_error(req, 500, "cannot write the JSON answer");
		return;
	}
	httpd_reply(req, status, "application/json", s, strlen(s));
	free(s);
}

/* Answer req with status and {"error": MESSAGE}. */
void
httpd_reply_error(struct evhttp_request *req, int status, const char *fmt, ...)
{
	va_list ap;
	char *msg, *safe;
	json_t *o;

	va_start(ap, fmt);
	xvasprintf(&msg, fmt, ap);
	va_end(ap);
	safe = vis_str(msg); /* names from a request may hold any byte */
	o = json_object();
	json_object_set_new(o, "error", json_string(safe));
	free(safe);
	free(msg);
	httpd_reply_json(req, status, o);
}

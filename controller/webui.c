/*
 * The dashboard served from the binary: "/" is controller/web/index.html,
 * "/assets/NAME" its script and style sheet. The page fetches everything
 * else from /api/v1/; the policy below lets it load nothing from anywhere
 * but this server, and run no inline script.
 */

#include <string.h>

#include "webui.h"

#include "web_app_css.h"
#include "web_app_js.h"
#include "web_index_html.h"

/* One built-in file: its URL path, type, bytes and entity tag. */
struct webui_file {
	const char *path;
	const char *type;
	const char *body;
	const size_t *len;
	const char *etag;
};

static int webui_fresh(const char *, const char *);

static const struct webui_file webui_files[] = {
	{ "/", "text/html; charset=utf-8", web_index_html, &web_index_html_len,
	    web_index_html_etag },
	{ "/assets/app.js", "text/javascript; charset=utf-8", web_app_js,
	    &web_app_js_len, web_app_js_etag },
	{ "/assets/app.css", "text/css; charset=utf-8", web_app_css,
	    &web_app_css_len, web_app_css_etag },
};

const char webui_csp[] = "default-src 'self'; script-src 'self'; "
			 "style-src 'self'; img-src 'self'; "
			 "connect-src 'self'; object-src 'none'; "
			 "base-uri 'none'; form-action 'none'; "
			 "frame-ancestors 'none'";
const char webui_cache_control[] = "no-cache";

static const char webui_not_found[] = "not found\n";

/* Whether If-None-Match header inm (NULL when absent) names etag. */
static int
webui_fresh(const char *inm, const char *etag)
{
	if (inm == NULL)
		return 0;
	inm += strspn(inm, " \t");
	return strcmp(inm, "*") == 0 || strstr(inm, etag) != NULL;
}

/*
 * Fill *rp with the answer to GET path (its query, if any, ignored) with
 * If-None-Match header inm, NULL when the request has none.
 */
void
webui_lookup(const char *path, const char *inm, struct webui_reply *rp)
{
	size_t i, n = strcspn(path, "?#");

	for (i = 0; i < sizeof webui_files / sizeof webui_files[0]; i++) {
		const struct webui_file *f = &webui_files[i];
		if (strlen(f->path) != n || strncmp(path, f->path, n) != 0)
			continue;
		rp->type = f->type;
		rp->etag = f->etag;
		if (webui_fresh(inm, f->etag)) {
			rp->status = 304;
			rp->body = NULL;
			rp->len = 0;
		} else {
			rp->status = 200;
			rp->body = f->body;
			rp->len = *f->len;
		}
		return;
	}
	rp->status = 404;
	rp->type = "text/plain; charset=utf-8";
	rp->body = webui_not_found;
	rp->len = sizeof webui_not_found - 1;
	rp->etag = NULL;
}

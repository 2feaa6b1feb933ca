/*
 * The dashboard's page and assets, built into the binary from
 * controller/web/ and served by the daemon's HTTP server for GET paths
 * that are not the API's.
 */
#ifndef GPUFLEET_WEBUI_H
#define GPUFLEET_WEBUI_H

#include <stddef.h>

/*
 * What to answer: status 200 with the body, 304 (the client's copy is
 * current: no body), or 404 (no such asset: a short text body). The HTTP
 * server sends with every answer a Content-Security-Policy of webui_csp
 * and "X-Content-Type-Options: nosniff", and with a 200 or 304 the etag
 * and a Cache-Control of webui_cache_control (revalidate each time).
 * Everything points into static storage.
 */
struct webui_reply {
	int status;
	const char *type;
	const char *body;
	size_t len;
	const char *etag;
};

extern const char webui_csp[];
extern const char webui_cache_control[];

void webui_lookup(const char *, const char *, struct webui_reply *);

#endif

/*
 * The daemon's HTTP server (libevent's evhttp on the daemon's loop): the
 * dashboard (webui.c) and the JSON API (api.c), with their limits, the
 * bearer token and the same-origin rule of POSTs.
 */
#ifndef GPUFLEET_HTTPD_H
#define GPUFLEET_HTTPD_H

#include <jansson.h>

#include <event2/event.h>
#include <event2/http.h>

#include "config.h"

#define HTTPD_MAX_HEADERS (8 * 1024)
#define HTTPD_MAX_BODY	  (64 * 1024)
#define HTTPD_TIMEOUT_S	  10

struct api;
struct httpd;

int httpd_check(const struct config_listen *, const char *, char **);
int httpd_open(struct event_base *, const struct config_listen *, const char *,
    struct api *, struct httpd **, char **);
void httpd_free(struct httpd *);
void httpd_reply(
    struct evhttp_request *, int, const char *, const void *, size_t);
void httpd_reply_json(struct evhttp_request *, int, json_t *);
void httpd_reply_error(struct evhttp_request *, int, const char *, ...)
    __attribute__((format(printf, 3, 4)));

#endif

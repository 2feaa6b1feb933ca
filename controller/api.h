/*
 * The daemon's JSON API under /api/v1/: the documents the CLI prints with
 * --json, each made by the CLI itself (one serializer, not two), but
 * /api/v1/instances, the daemon's last poll in the shape of
 * `status --json`; and GET /metrics (metrics.c).
 */
#ifndef GPUFLEET_API_H
#define GPUFLEET_API_H

#include <event2/http.h>

#include "fleet.h"
#include "metrics.h"
#include "probe.h"

#define API_CHILD_TIMEOUT_S 30
#define API_CHILDREN_MAX    8
#define API_OUTPUT_MAX	    (16 * 1024 * 1024)

struct api;

struct api *api_new(struct event_base *, struct fleet *, const char *,
    const struct metrics_daemon *);
void api_free(struct api *);
void api_poll_done(struct api *, const struct probe *);
void api_stop(struct api *);
int api_busy(const struct api *);
int api_handle(
    struct api *, struct evhttp_request *, const char *, const char *);

#endif

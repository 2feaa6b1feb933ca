/*
 * The notification sender: libcurl's multi interface on the caller's
 * libevent loop (curl_multi_socket_action), one request in flight per
 * target, so a target that fails or hangs holds up only itself. The queue
 * and its states are notify.h's.
 */
#ifndef GPUFLEET_NOTIFYSEND_H
#define GPUFLEET_NOTIFYSEND_H

#include <stdint.h>

#include "config.h"
#include "inventory.h"
#include "notify.h"

struct event_base;
struct notifysend;

/* What notifysend_test returns per target. */
struct notifysend_result {
	char *target;
	int ok;
	long http;
	char *why;    /* or NULL */
	char *answer; /* the answer's body, escaped and cut, or NULL */
};

struct notifysend *notifysend_new(
    struct event_base *, struct inventory *, const struct config *, int64_t);
void notifysend_free(struct notifysend *);
void notifysend_kick(struct notifysend *);
int notifysend_inflight(const struct notifysend *);
int notifysend_eligible(struct notifysend *);
void notifysend_stop(struct notifysend *);
void notifysend_abort(struct notifysend *, const char *);
int notifysend_expire(struct inventory *, char **);
int notifysend_recover(struct inventory *, char **);
int notifysend_test(struct event_base *, struct inventory *,
    const struct config_notify *, const struct notify_msg *,
    struct notifysend_result *);
void notifysend_result_clear(struct notifysend_result *);
int notifysend_global_init(char **);

#endif

/*
 * Held connections: the daemon runs `exec` for the CLI on the SSH sessions
 * it holds, through a Unix socket of its database (held.c).
 */
#ifndef GPUFLEET_HELD_H
#define GPUFLEET_HELD_H

#include <stddef.h>

#include "engine.h"
#include "probe.h"
#include "remote.h"

struct event_base;
struct held;

/*
 * The daemon's side. ready(arg, &rm, &p) says whether a request may run
 * now: 1 to wait (a poll is going; held_kick starts it later), 0 with
 * *rm (NULL: none, the request is refused) and *p (NULL or the probe of
 * rm, for the hosts that failed before any run).
 */
typedef int (*held_ready_cb)(void *, struct remote **, struct probe **);

int held_listen(struct event_base *, const char *, held_ready_cb, void *,
    struct held **, char **);
void held_kick(struct held *);
int held_busy(const struct held *);
void held_cancel(struct held *);
void held_free(struct held *);

char *held_socket_path(const char *);
int held_exec(const char *, struct remote *, const struct engine_settings *,
    const struct engine_ops *);

#endif

/*
 * What the laptop side did (schedule runs, missed and skipped ones, guard
 * firings, the daemon starting and stopping), one row each in action_log,
 * for `gpufleet events` (controller/SCHEDULE.md). Instances are named,
 * results are per host.
 */
#ifndef GPUFLEET_ACTIONLOG_H
#define GPUFLEET_ACTIONLOG_H

#include <stdint.h>

#include <jansson.h>

#include "inventory.h"

int actionlog_add(struct inventory *, int64_t, const char *, const char *,
    json_t *, const char *, json_t *, int64_t *, char **);
void actionlog_observe(void (*)(const char *, void *), void *);
int actionlog_result(struct inventory *, int64_t, json_t *, char **);

#endif

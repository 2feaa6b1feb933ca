/*
 * Stop methods that run on this machine (`local:COMMAND`): at once for
 * `shutdown --now`, or, for an `action: local` deadline, once its watcher
 * journals `local_due` (stored in local_stop by watcher.c) and a command
 * that contacts the instance (status, shutdown ls, ...) reads it. A
 * claimed row is never run twice, by this or another gpufleet.
 */
#ifndef GPUFLEET_LOCALSTOP_H
#define GPUFLEET_LOCALSTOP_H

#include <stdint.h>

#include "config.h"
#include "instance.h"
#include "inventory.h"

#define LOCALSTOP_TIMEOUT 600 /* seconds a local stop command may take */

int localstop_exec(const char *, int, char **);
int localstop_run(struct inventory *, const struct config *,
    const struct instance *, const char *, int64_t, char **);
void localstop_run_due(struct inventory *, const struct config *, int64_t);

#endif

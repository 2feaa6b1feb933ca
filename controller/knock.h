/*
 * Knocking on instances the books say are stopped, cheaply: a TCP
 * connect and the SSH server's identification line ("SSH-"), for all of
 * them at once within one deadline, no login. One that answers was
 * started outside gpufleet (the platform's console): status contacts it.
 */
#ifndef GPUFLEET_KNOCK_H
#define GPUFLEET_KNOCK_H

#include <stddef.h>

#include "instance.h"

#define KNOCK_MAX_MS 3000 /* the most one knock round waits */

size_t knock_banners(const struct instance *, size_t, const unsigned char *,
    int, unsigned char *);

#endif

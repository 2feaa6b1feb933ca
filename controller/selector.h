/*
 * Selectors: which instances a command acts on.
 *
 *   SELECTOR := TERM [',' TERM]...
 *   TERM     := ['!'] ( 'all' | NAME | GLOB | '@' TAG | 'provider:' NAME |
 *                      'state:' ( 'running' | 'stopped' | 'unknown' ) )
 *
 * The result is the union of the positive terms minus the union of the
 * excluded ('!') ones; with only exclusions the base is every instance.
 * A state is what the instance's ledger last said (instance_state). An
 * exact NAME that does not exist is an error, and so is a selector that
 * matches nothing.
 */
#ifndef GPUFLEET_SELECTOR_H
#define GPUFLEET_SELECTOR_H

#include <stddef.h>

#include "instance.h"

struct selector;

int selector_parse(const char *, struct selector **, char **);
void selector_free(struct selector *);
int selector_match(const struct selector *, const struct instance *);
int selector_select(
    const struct selector *, const struct instance *, size_t, int *, char **);

#endif

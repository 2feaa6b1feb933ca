/*
 * Advice as data: what to change to pay less, each piece with the numbers
 * behind it, for a caller to print, serve or act on.
 */
#ifndef GPUFLEET_ADVISE_H
#define GPUFLEET_ADVISE_H

#include <stdint.h>

#include "billing.h"
#include "config.h"
#include "instance.h"
#include "inventory.h"
#include "ledger.h"

struct advice {
	const char *kind; /* monthly idle stopped release availability runway
			   speed */
	char *name;	  /* the instance or the provider */
	char *message;
	/* kind monthly: the comparison, over evidence_s of observed use. */
	int has_monthly;
	struct billing_advice monthly;
	int64_t evidence_s;
	char currency[8];
};

int advise_run(struct inventory *, const struct config *,
    const struct instance *, size_t, int64_t, struct advice **, size_t *,
    char **);
int advise_counts(const struct advice *);
int64_t advise_stopped_since(const struct ledger_event *, size_t);
int advise_notify_release(
    struct inventory *, const struct config *, int64_t, char **);
void advise_free(struct advice *, size_t);

#endif

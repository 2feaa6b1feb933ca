/*
 * The store of rental platforms: each provider's currency, its prepaid
 * balance as of a time, the balance below which it is flagged, and after
 * how many stopped days the platform releases an instance.
 */
#ifndef GPUFLEET_PROVIDER_H
#define GPUFLEET_PROVIDER_H

#include <stdint.h>

#include "billing.h"
#include "inventory.h"

struct provider_info {
	char *name;
	char currency[8];
	int has_balance;
	money_t balance;
	int64_t balance_at;
	int has_low;
	money_t low;
	int release_after_days; /* 0: none */
	/* Filled by cost_provider_runway, not stored. */
	money_t left;
	money_t burn;	      /* per hour, burn_per_day / 24 rounded up */
	money_t burn_per_day; /* running compute + stopped storage */
	int running, stopped; /* instances in the burn */
	int64_t runway;	      /* seconds, -1: never */
};

/* What provider add/set changes; a field not set keeps its value. */
struct provider_change {
	const char *currency; /* or NULL */
	int set_balance;
	money_t balance;
	int64_t balance_at;
	int set_low;
	money_t low;
	int set_release;
	int release_after_days;
};

int provider_list(
    struct inventory *, struct provider_info **, size_t *, char **);
const struct provider_info *provider_find(
    const struct provider_info *, size_t, const char *);
void provider_free(struct provider_info *, size_t);
int provider_write(struct inventory *, const char *, int,
    const struct provider_change *, char **);

#endif

/*
 * What instances cost over a window, as data: per instance (ledger_cost),
 * per provider and currency, per day, totals per currency, the burn of
 * what runs and what is stored now and the projection to the end of the month;
 * and what a provider's balance has left. Nothing here prints.
 */
#ifndef GPUFLEET_COST_H
#define GPUFLEET_COST_H

#include <stdint.h>

#include "billing.h"
#include "config.h"
#include "instance.h"
#include "inventory.h"
#include "ledger.h"
#include "provider.h"

/* One currency's total over the window. */
struct cost_total {
	char currency[8];
	money_t amount;
	money_t burn_per_day;  /* running compute + stopped storage, now */
	money_t burn_per_hour; /* burn_per_day / 24, rounded up */
	money_t projected;     /* at month end, if cost_report.projecting */
	int unpriced;	       /* instances with no price: amount unknown */
};

struct cost_report {
	int64_t from, to, now;
	int64_t month_end; /* local midnight after the window's month */
	int projecting;	   /* the window reaches now: project to month end */
	struct ledger_cost *rows; /* n, parallel to the instances */
	size_t n;
	struct cost_total *totals;
	size_t ntotals;
	struct ledger_books *books; /* every instance's, read once */
};

/* One provider and currency. */
struct cost_group {
	const char *provider; /* borrowed from the instances */
	const char *currency; /* borrowed from the rows */
	int instances;
	int64_t running_secs;
	int64_t unknown_secs;
	money_t amount;
	int unpriced;
	int restarts;
	int outages;
};

/* One day (local) and currency. */
struct cost_day {
	char day[16]; /* YYYY-MM-DD */
	char currency[8];
	money_t amount;
	int unpriced;
};

/*
 * A stretch of an instance's ledger that gpufleet cannot account for,
 * billed as running (see billing.h): what cost shows about it.
 */
struct cost_unknown {
	int64_t start, end; /* the stretch, end cut at the window end or now */
	int64_t secs;	    /* its time in the window */
	int ongoing;	    /* unknown until now */
	char why[64];	    /* "unreachable" (the entry's note) */
};

int64_t cost_month_start(int64_t, int);
int cost_projection(money_t, money_t, int64_t, money_t *, char **);
money_t cost_burn_per_day(const struct ledger_cost *);
money_t cost_hourly(money_t);
int cost_load_all(
    struct inventory *, int64_t, struct instance **, size_t *, char **);
int cost_by_instance(struct inventory *, const struct config *,
    const struct instance *, size_t, int64_t, int64_t, int64_t,
    struct cost_report *, char **);
void cost_report_free(struct cost_report *);
int cost_by_provider(
    const struct cost_report *, struct cost_group **, size_t *, char **);
int cost_by_day(struct inventory *, const struct config *,
    const struct cost_report *, struct cost_day **, size_t *, char **);
int cost_unknown_stretches(struct inventory *, const struct instance *, int64_t,
    int64_t, int64_t, struct cost_unknown **, size_t *, char **);
int cost_unknown_stretches_from(struct inventory *, const struct ledger_books *,
    const struct instance *, int64_t, int64_t, int64_t, struct cost_unknown **,
    size_t *, char **);
int cost_provider_runway(struct inventory *, const struct config *,
    const struct instance *, size_t, struct provider_info *, int64_t, int,
    char **);

#endif

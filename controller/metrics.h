/*
 * The fleet as Prometheus metrics (text format 0.0.4): what the database
 * holds of each instance in service (its last report, price, cost this
 * month, next armed stop), each provider's balance and runway, and, in a
 * daemon, its own poll durations and logged actions. Gathering reads the
 * database; rendering is a pure function of what was gathered.
 */
#ifndef GPUFLEET_METRICS_H
#define GPUFLEET_METRICS_H

#include <stddef.h>
#include <stdint.h>

#include "billing.h"
#include "config.h"
#include "instance.h"
#include "inventory.h"

#define METRICS_CONTENT_TYPE "text/plain; version=0.0.4"

/* Label values longer than this (bytes) are cut, at a character. */
#define METRICS_LABEL_MAX 128

/* One GPU of a stored report; a number not known is NAN. */
struct metrics_gpu {
	int index;
	char *uuid;
	char *model;
	double util_ratio; /* 0..1 */
	double mem_used_bytes;
	double mem_total_bytes;
	double temp_celsius;
	double power_watts;
};

struct metrics_instance {
	char *name;
	char *provider; /* "" when unknown */
	int up;		/* the last status pass found it up */
	int have_report;
	int sessions; /* from the report; -1 unknown */
	struct metrics_gpu *gpus;
	size_t ngpus;
	int priced;
	char currency[8];
	money_t price_per_hour; /* minor units */
	money_t cost_mtd;	/* minor units, as `gpufleet cost` */
	int64_t next_stop;	/* Unix seconds, 0: none armed */
};

struct metrics_provider {
	char *name;
	char currency[8];
	int has_balance;
	money_t balance; /* minor units left now */
	int64_t runway;	 /* seconds, -1: never runs out */
};

struct metrics_input {
	struct metrics_instance *inst;
	size_t ninst;
	struct metrics_provider *prov;
	size_t nprov;
};

/* The daemon's own: poll durations and its action log by kind. */
#define METRICS_POLL_BUCKETS 10
#define METRICS_EVENT_KINDS  64
#define METRICS_KIND_MAX     32

extern const double metrics_poll_bounds[METRICS_POLL_BUCKETS];

struct metrics_event {
	char kind[METRICS_KIND_MAX];
	uint64_t n;
};

struct metrics_daemon {
	uint64_t poll_le[METRICS_POLL_BUCKETS]; /* per bucket, not cumulative */
	uint64_t poll_count;
	double poll_sum;
	struct metrics_event events[METRICS_EVENT_KINDS];
	size_t nevents;
};

int metrics_gather(struct inventory *, const struct config *, int64_t,
    struct metrics_input *, char **);
int metrics_gather_list(struct inventory *, const struct config *,
    const struct instance *, size_t, int64_t, struct metrics_input *, char **);
void metrics_input_free(struct metrics_input *);
void metrics_poll_observe(struct metrics_daemon *, double);
void metrics_event(struct metrics_daemon *, const char *);
char *metrics_render(
    const struct metrics_input *, const struct metrics_daemon *);
char *metrics_serve(struct inventory *, const struct config *,
    const struct metrics_daemon *, int64_t, char **);

#endif

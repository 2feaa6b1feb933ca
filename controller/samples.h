/*
 * What status saw, kept for cost, idle detection and history: per instance
 * and GPU, timestamped. Raw samples are kept raw_hours (48 by default),
 * then folded into 5-minute aggregates (mean and max) kept agg_days (90).
 */
#ifndef GPUFLEET_SAMPLES_H
#define GPUFLEET_SAMPLES_H

#include <stdint.h>

#include "inventory.h"
#include "report.h"

struct history_point {
	int64_t t; /* bucket or sample time */
	int gpu;
	int n; /* samples behind it */
	double util_mean;
	double util_max;
	double mem_mean;
	double mem_max;
	double mem_total;
};

int samples_store(
    struct inventory *, int64_t, int64_t, const struct report *, char **);
int samples_notify_stalled(struct inventory *, const struct instance *, int64_t,
    const struct report *, int64_t, char **);
int samples_last_status(struct inventory *, int64_t, int64_t, const char *,
    const char *, const char *, char **);
int samples_rollup(struct inventory *, int64_t, int, int, char **);
int samples_history(struct inventory *, int64_t, int64_t, int64_t,
    struct history_point **, size_t *, char **);

#endif

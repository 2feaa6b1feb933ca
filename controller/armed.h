/*
 * What gpufleet armed on each instance (controller/LEDGER.md): every id it
 * wrote into the instance's plan (a deadline, an autostop policy) or gave
 * a job it started with --then (its fire id), since when, and for a
 * deadline its time on the controller's clock. Only these ids may change
 * the books; everything else an instance journals is a claim.
 */
#ifndef GPUFLEET_ARMED_H
#define GPUFLEET_ARMED_H

#include <stddef.h>
#include <stdint.h>

#include "inventory.h"

struct armed {
	char kind[12];	    /* deadline autostop job */
	int64_t written_at; /* the controller's clock */
	int64_t at;	    /* a deadline's time (controller), else 0 */
	int local;	    /* its stop runs on the laptop */
	int release;	    /* the method it was armed with releases */
	int64_t removed_at; /* a plan was written without it, else 0 */
};

int armed_plan(
    struct inventory *, int64_t, const char *, int64_t, int64_t, int, char **);
int armed_job(
    struct inventory *, int64_t, const char *, int64_t, int, int, char **);
int armed_find(
    struct inventory *, int64_t, const char *, struct armed *, char **);
int armed_due(
    struct inventory *, int64_t, int64_t, int64_t, char ***, size_t *, char **);
const char *armed_cause(const char *, const struct armed *);

#endif

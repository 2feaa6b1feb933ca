/*
 * The life of a stop gpufleet caused (controller/LEDGER.md, table
 * stop_request): requested when the watcher journaled `stopping` for an
 * id gpufleet armed (or the laptop's local command exited 0, or a due
 * deadline's instance went unreachable before its `stopping` was read),
 * then confirmed by evidence (unreachable after it, a later container
 * start) and only then booked in the ledger at the requested time; or
 * failed (an alert, never a stop in the books).
 */
#ifndef GPUFLEET_STOPREQUEST_H
#define GPUFLEET_STOPREQUEST_H

#include <stddef.h>
#include <stdint.h>

#include "instance.h"
#include "inventory.h"

struct stoprequest {
	char *fire_id;
	char cause[12]; /* shutdown schedule autostop job local */
	char kind[8];	/* stop release */
	int64_t requested_at;
	char state[12];	 /* requested confirmed failed */
	int64_t ok_at;	 /* its command exited 0 (read then), else 0 */
	int64_t seen_at; /* the same container answered after it, else 0 */
	int64_t decided_at;
	char by[12];  /* confirmed by: unreachable restart, else "" */
	char *detail; /* or NULL */
};

int stoprequest_open(struct inventory *, const struct instance *, const char *,
    const char *, const char *, int64_t, int, char **);
int stoprequest_result(struct inventory *, int64_t, const char *, int,
    const char *, int64_t, char **);
int stoprequest_fail(struct inventory *, const struct instance *, const char *,
    const char *, int64_t, char **);
int stoprequest_settle(struct inventory *, const struct instance *, int64_t,
    int64_t, int, int64_t, char **);
int stoprequest_list(
    struct inventory *, int64_t, int, struct stoprequest **, size_t *, char **);
void stoprequest_list_free(struct stoprequest *, size_t);
int stoprequest_notify_failed(struct inventory *, const struct instance *,
    const char *, const char *, int64_t, char **);
int stoprequest_alert(struct inventory *, int64_t, int64_t, const char *,
    const char *, const char *, char **);

#endif

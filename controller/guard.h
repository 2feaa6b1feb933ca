/*
 * Budget guards (controller/SCHEDULE.md): a rule over the selected
 * instances, judged from the ledger, never from a stored running total.
 *
 * --max-cost: what one instance cost, in its own billing currency, over
 * the current local day, the current local month, or since it was added
 * (as `gpufleet cost` computes it), passed the amount. --min-runway: the
 * instance's provider's balance runway is below the duration. A hit fires
 * once per instance per period (guard_fire: the day, the month, "all", or
 * "runway@BALANCE_AT") and is written to the action log. Released
 * instances are never guarded.
 */
#ifndef GPUFLEET_GUARD_H
#define GPUFLEET_GUARD_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "billing.h"
#include "config.h"
#include "fleet.h"
#include "inventory.h"

#define GUARD_STOP_TIMEOUT 600 /* seconds a guard's shutdown child may take */

struct guard {
	int64_t id;
	char *name;
	char *selector;
	int has_cost;	      /* 1: max_cost, 0: min_runway_s */
	money_t max_cost;     /* minor units of each instance's currency */
	char *per;	      /* "day", "month", or NULL: since added */
	int64_t min_runway_s; /* seconds */
	int shutdown;	      /* 1: --do shutdown, 0: --do warn */
	int64_t created_at;
	int64_t last_fired; /* 0: never; filled by guard_list */
};

/* One selected instance against one guard at a time. */
struct guard_value {
	int64_t instance_id;
	char *instance;
	int hit;      /* over the limit now */
	int fired;    /* already fired in this period */
	char *value;  /* "12.40 CNY today", "runway 3h12m" */
	char *period; /* guard_fire's period */
	char *why;    /* "cost 12.40 CNY today passed 10.00" */
};

struct guard_action {
	int64_t log_id;
	char *guard;
	int shutdown;
	char **names;
	size_t nnames;
	char *why;
	int resumed; /* 1: a claimed stop whose runner died, run again */
};

int guard_add(struct inventory *, struct guard *, char **);
int guard_list(struct inventory *, struct guard **, size_t *, char **);
int guard_remove(struct inventory *, const char *, char **);
void guard_clear(struct guard *);
void guard_list_free(struct guard *, size_t);
char *guard_rule(const struct guard *);

int guard_values(struct inventory *, const struct config *,
    const struct guard *, int64_t, struct guard_value **, size_t *, char **);
void guard_values_free(struct guard_value *, size_t);

/*
 * Evaluate every guard from the ledger at now; a hit not fired in its
 * period is claimed (guard_fire) and logged (action_log guard_warn or
 * guard_shutdown, result NULL for a shutdown: the caller fills it after
 * running the stop, with guard_stop, before it evaluates again, or has
 * it run with guard_stop_start, which it does not resume meanwhile). This
 * process is recorded as the runner of each stop; first, the stops
 * still pending (result NULL) of a runner that is gone, or of this
 * process (none of its stops runs while it evaluates), come back as
 * actions again (resumed) while their guard exists. Caller frees *out
 * with guard_actions_free.
 */
int guard_evaluate(struct inventory *, const struct config *, int64_t,
    struct guard_action **, size_t *, char **);
/* The same with nothing claimed or logged (log_id 0): what would fire. */
int guard_preview(struct inventory *, const struct config *, int64_t,
    struct guard_action **, size_t *, char **);
void guard_actions_free(struct guard_action *, size_t);

/*
 * Run one shutdown action now and record its result: the child
 * `SELF --db DB [--config C] shutdown NAME,NAME --now --warn 0 --json`
 * (SELF NULL: /proc/self/exe), waited for (killed after
 * GUARD_STOP_TIMEOUT seconds); the result per host
 * ({NAME: "ok" | reason}) is stored with actionlog_result. 0 or -GF_x.
 */
int guard_stop(
    struct fleet *, const char *, const struct guard_action *, char **);
/* guard_stop, with the result per host in *result (caller decrefs). */
int guard_stop_result(struct fleet *, const char *, const struct guard_action *,
    json_t **, char **);
/*
 * The daemon's guard_stop: the child runs beside its loop (child.c), at
 * most GUARD_STOP_TIMEOUT seconds; its result is stored when it ends.
 * Until then this process does not resume the entry; a child stopped
 * with the daemon stores none (the next evaluator runs the stop again).
 */
int guard_stop_start(
    struct fleet *, const char *, const struct guard_action *, char **);

#endif

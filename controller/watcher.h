/*
 * What the controller keeps of each instance's watcher (agent/WATCH.md):
 * the plan and state last read back, the clock skew, every journal entry
 * once, and what the entries mean here: the ledger's stops at the
 * journaled time, fired deadlines (never armed again), stop_failed alerts,
 * local stops that are due.
 */
#ifndef GPUFLEET_WATCHER_H
#define GPUFLEET_WATCHER_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "instance.h"
#include "inventory.h"
#include "report.h"

#define WATCHER_SKEW_SHOWN  60 /* seconds of skew worth telling */
#define WATCHER_LOCAL_EARLY 60 /* a local stop due this early is believed */
/*
 * What one instance's journal may add to the inventory per day (UTC, the
 * controller's clock): entries past either cap are dropped (the cursor
 * still moves past them) with one journal_flood alert that day. An entry
 * about a stop of an id gpufleet armed there may go on to twice the caps.
 */
#define WATCHER_JOURNAL_DAY_ROWS  5000
#define WATCHER_JOURNAL_DAY_BYTES (2 * 1024 * 1024)
/* Rejected claims (controller/LEDGER.md) alerted per instance and day. */
#define WATCHER_CLAIM_ALERTS_DAY 10

/* The stored view of one instance's watcher. */
struct watcher_view {
	int have;  /* a report with (or without) a section was stored */
	int64_t t; /* when (the controller's clock) */
	char state[16];
	int64_t pid;
	int current;
	char *error;
	int64_t generation;
	char *plan; /* compact JSON, or NULL */
	int64_t skew;
};

struct watcher_alert {
	int64_t t;
	char kind[16];
	char *deadline; /* or NULL */
	char *detail;	/* or NULL */
};

/* The environment's test knobs (README, "Test knobs"). */
struct watcher_knobs {
	int check_interval_s;
	int stop_confirm_s;
	int64_t min_idle_s;
};

int watcher_knobs(struct watcher_knobs *, char **);
int watcher_cursor(struct inventory *, int64_t, char **, char **);
int watcher_store(struct inventory *, const struct instance *, int64_t, int64_t,
    const struct report *, char **);
int watcher_prune(struct inventory *, int64_t, char **);
int watcher_get(struct inventory *, int64_t, struct watcher_view *, char **);
size_t watcher_planned(
    struct inventory *, const struct instance *, size_t, unsigned char *);
void watcher_view_free(struct watcher_view *);
int watcher_fired_ids(struct inventory *, int64_t, char ***, size_t *, char **);
void watcher_ids_free(char **, size_t);
int watcher_alerts(
    struct inventory *, int64_t, struct watcher_alert **, size_t *, char **);
void watcher_alerts_free(struct watcher_alert *, size_t);
int watcher_alerts_clear(struct inventory *, int64_t, int64_t, char **);
int watcher_find_id(struct inventory *, const char *, char **, char **);
int64_t watcher_fired_at(struct inventory *, int64_t, const char *);
char *watcher_skipped(struct inventory *, int64_t, const char *);
void watcher_new_id(char *, size_t, char);
char *watcher_local_time(int64_t);
char *watcher_clock(int64_t);
char *watcher_autostop_line(json_t *);
json_t *watcher_json(struct inventory *, int64_t, const struct watcher_view *);

#endif

/*
 * Schedules (controller/SCHEDULE.md): the `schedule` table, and when a
 * schedule's occurrences fall.
 *
 * Times at this interface are real Unix seconds. Under the test clock
 * (GPUFLEET_TEST_CRON_MINUTE=S@ANCHOR) cron sees schedule_clock(real) and
 * its occurrences are mapped back with schedule_real, so a cron minute
 * lasts S real seconds; considered_until is stored in real seconds too.
 *
 * Functions return 0 (1 where said), -GF_EUSAGE for a user error or
 * -GF_EDB for a database failure, with *cause set (caller frees).
 */
#ifndef GPUFLEET_SCHEDULE_H
#define GPUFLEET_SCHEDULE_H

#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "inventory.h"

enum schedule_action {
	SCHED_SHUTDOWN,
	SCHED_EXEC,
	SCHED_ROTATE,
	SCHED_STATUS,
	SCHED_BACKUP
};

struct schedule {
	int64_t id;
	char *name, *tag, *selector, *cron, *tz /* NULL: default */;
	enum schedule_action action;
	char *command; /* exec: its line or words; backup: [PATH..., DIR] */
	int unless_busy;
	int64_t catchup_s;
	int warn_minutes;
	char *before_stop;
	int paused;
	int64_t created_at, considered_until;
};

/* At most this many missed occurrences are counted. */
#define SCHEDULE_MISSED_CAP 10000

const char *schedule_action_name(enum schedule_action);
int schedule_action_parse(const char *, enum schedule_action *);
int schedule_list(struct inventory *, struct schedule **, size_t *, char **);
int schedule_get(struct inventory *, const char *, struct schedule *, char **);
int schedule_add(struct inventory *, struct schedule *, char **);
int schedule_remove(struct inventory *, const char *, char **);
int schedule_set_paused(
    struct inventory *, const char *, int, int64_t, char **);
void schedule_clear(struct schedule *);
void schedule_list_free(struct schedule *, size_t);
const char *schedule_zone(const struct schedule *, const struct config *);
int64_t schedule_clock(int64_t);
int64_t schedule_real(int64_t);
int schedule_next(const struct schedule *, const struct config *, int64_t,
    int64_t *, char **);
int schedule_due(const struct schedule *, const struct config *, int64_t,
    int64_t *, long *, int64_t *, char **);

#endif

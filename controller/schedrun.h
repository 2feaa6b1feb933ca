/*
 * Running a schedule's action as a child gpufleet (controller/SCHEDULE.md,
 * "Running a daemon action"): the claim of an occurrence in schedule_run
 * before anything starts, the child (/proc/self/exe with --db, --config
 * and the action's argv, its stdout in $XDG_STATE_HOME/gpufleet/runs/
 * RUN_ID.out), and its result per host parsed from that file into the row
 * and an action_log entry. One implementation for the daemon's runs and
 * for `schedule run NAME`.
 *
 * Functions return 0 (or what is said), or -GF_x with *cause (caller
 * frees).
 */
#ifndef GPUFLEET_SCHEDRUN_H
#define GPUFLEET_SCHEDRUN_H

#include <stdint.h>
#include <sys/types.h>

#include "child.h"
#include "fleet.h"
#include "schedule.h"

/* A run whose child is going: ours (a tracked child, child.c) or one a
   daemon before us started (polled until its pid is gone). */
struct schedrun_child {
	int64_t run_id;
	pid_t pid;
	int64_t pid_start; /* field 22 of /proc/PID/stat */
	int own;
	int reaped; /* ours, reaped: wstatus holds how it ended */
	int wstatus;
};

int schedrun_now(struct fleet *, const struct schedule *, int, int *, char **);
int schedrun_consider(struct fleet *, const struct schedule *, int64_t,
    child_cb, void *, struct schedrun_child *, char **);
void schedrun_ended(struct schedrun_child *, const struct child_result *);
int schedrun_reap(struct fleet *, struct schedrun_child *, char **);
int schedrun_stop(
    struct fleet *, const struct schedrun_child *, const char *, char **);
int schedrun_prune(struct fleet *, int, char **);
int schedrun_recover(
    struct fleet *, struct schedrun_child **, size_t *, char **);
int64_t schedrun_pid_start(pid_t);

#endif

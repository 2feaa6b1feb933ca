/*
 * Building the watcher's plan (agent/WATCH.md, "The plan") from the plan
 * read back from the instance and one change. The controller never writes
 * a plan it has not read: what was there is kept (deadlines already fired
 * dropped), the change applied, and the instance's settings (stop method,
 * check interval, stop confirm) refreshed. Pure: no database, no clock.
 */
#ifndef GPUFLEET_PLAN_H
#define GPUFLEET_PLAN_H

#include <stddef.h>
#include <stdint.h>

#define PLAN_MAX_DEADLINES 64

enum plan_change_kind {
	PLAN_ADD,	   /* arm deadline */
	PLAN_CANCEL_ALL,   /* drop every deadline */
	PLAN_CANCEL_ID,	   /* drop the deadline cancel_id */
	PLAN_AUTOSTOP,	   /* set the policy */
	PLAN_AUTOSTOP_OFF, /* drop the policy */
	PLAN_SYNC	   /* nothing but the sync (the schedules' top-up) */
};

/* A deadline id: 1-64 of [A-Za-z0-9._-] (s-TAG-UNIXTIME for schedules). */
#define PLAN_DEADLINE_ID_MAX 64

struct plan_deadline {
	char id[PLAN_DEADLINE_ID_MAX + 1];
	int64_t at; /* the instance's clock */
	int local;  /* action local: the controller stops it */
	int warn_minutes;
	const char *before_stop; /* or NULL */
	int64_t before_stop_timeout_s;
	int before_must_succeed;
	int unless_busy; /* the watcher skips it when the machine is busy */
	int hold;	 /* held for the controller's pull (agent "hold") */
	int64_t hold_wait_s;
	int hold_must;
};

struct plan_autostop {
	char id[16];
	int64_t idle_s;
	int gpu_below;
	int64_t gpu_mem_mib;
	int wait_sessions, wait_jobs;
	int64_t stalled_s, max_runtime_s;
	const char *progress;	/* or NULL */
	const char *nvidia_smi; /* or NULL */
};

/*
 * A wanted schedule deadline keeps the read-back one's at when the two are
 * at most this far apart (seconds): the instance's clock skew, measured
 * anew on every contact, wobbles, and a plan rewritten for that alone
 * would journal "armed" again for every deadline it moved.
 */
#define PLAN_SYNC_AT_TOLERANCE_S 30

/*
 * The shutdown schedules' deadlines (controller/SCHEDULE.md): with on set,
 * the read-back deadlines whose id starts "s-" are replaced by want
 * (soonest first; fired ids left out), except that a read-back one whose
 * occurrence (the UNIXTIME of s-TAG-UNIXTIME) is at or before now and
 * whose TAG is in tags stays as it is: the watcher may be firing it. A
 * wanted one whose read-back at is within PLAN_SYNC_AT_TOLERANCE_S of its
 * own keeps the read-back at. The other deadlines come first and win:
 * want fills what is left of the plan's PLAN_MAX_DEADLINES, in order.
 * With on 0, s- deadlines are kept like any other.
 */
struct plan_sync {
	int on;
	const struct plan_deadline *want;
	size_t nwant;
	const char *const *tags; /* the schedules that apply here */
	size_t ntags;
};

/* The change, and what every plan written now carries. */
struct plan_change {
	enum plan_change_kind kind;
	struct plan_deadline deadline; /* PLAN_ADD */
	const char *cancel_id;	       /* PLAN_CANCEL_ID */
	struct plan_autostop autostop; /* PLAN_AUTOSTOP */

	const char *instance;
	const char *stop_command; /* substituted; NULL: no remote method */
	const char *stop_kind;	  /* "stop" or "release" */
	int allow_release;
	int check_interval_s;
	int stop_confirm_s;
	const char *written_by;
	int64_t now;
	struct plan_sync sync;
};

/* What building did besides the plan. */
struct plan_result {
	size_t kept;	  /* deadlines carried over */
	size_t dropped;	  /* fired (or invalid) ones left out */
	size_t removed;	  /* cancelled by the change */
	size_t synced;	  /* s- deadlines in the plan after the sync */
	size_t sync_cut;  /* wanted s- deadlines left out: the plan was full */
	int had_autostop; /* the read-back plan had a policy */
};

int plan_is_sync_id(const char *);
int plan_sync_equal(const char *, const char *);
int plan_stop_equal(const char *, const char *);
int plan_release_allowed(const char *, const char *);
void plan_armed(const char *, const char *const *, size_t, size_t *, int *);
int plan_build(const char *, int64_t, const char *const *, size_t,
    const struct plan_change *, char **, struct plan_result *, char **);

#endif

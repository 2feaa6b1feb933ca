/*
 * Changing the watcher's plan on instances, in two passes over the same
 * SSH sessions: a probe (the plan and generation read back fresh, the
 * journal ingested, the agent uploaded where missing, a dead watcher
 * restarted), then `gpufleet-agent plan set --expect G` with each host's
 * new plan on its stdin. A generation that moved in between (another
 * gpufleet wrote the plan) fails that host and changes nothing there.
 */
#ifndef GPUFLEET_PLANWRITE_H
#define GPUFLEET_PLANWRITE_H

#include <stdint.h>

#include "fleet.h"
#include "misc.h"
#include "plan.h"
#include "probe.h"
#include "remote.h"
#include "stopmethod.h"
#include "watcher.h"

/* One instance of the write, parallel to rm->list. */
struct planwrite_host {
	struct instance *in;
	struct probe_host *probe;
	int reached;	/* a report with a watcher section came */
	int64_t skew;	/* instance clock - controller clock */
	char *error;	/* this host failed: why, or NULL */
	char *plan;	/* the plan to write, or NULL: nothing to write */
	int64_t expect; /* the generation it was read at */
	struct stopmethod method;
	char *stop_command; /* method.command substituted, or NULL */
	char *method_error; /* why it could not be substituted, or NULL */
	char *notify;	    /* D/notify.json to write, or NULL: as it is */
	int notify_only;    /* only notify set runs (no new plan) */
	char *input;	    /* what the command reads: notify, then plan */

	/* After the write. */
	int written;
	int moved; /* refused: the generation moved since the read */
	int64_t generation;
	char watcher[16];
	int64_t pid;
	struct misc_buf out, err;

	/* The sync (schedsync.c), filled at the first change of the host. */
	int want_done;
	struct plan_deadline
	    *want; /* the schedules' deadlines, soonest first */
	size_t nwant;
	const char **tags; /* of the schedules that apply (pw->scheds') */
	size_t ntags;
	char *sync_note; /* why the schedules arm nothing here, or NULL */
	size_t sync_cut; /* wanted s- deadlines left out: the plan was full */
};

struct schedule;
struct selector;

struct planwrite {
	struct fleet *fleet;
	struct remote *rm;
	struct probe *p;
	struct planwrite_host *hosts; /* rm->n */
	size_t n;
	int64_t now;
	struct watcher_knobs knobs;
	int probe_r, probe_done;
	char **cmds;
	int keep_open; /* the write keeps the sessions held */
	int adopted;   /* rm and p are someone else's (planwrite_adopt) */
	struct engine_ops saved_ops;

	/* The shutdown schedules (schedsync.c), loaded at the first change. */
	int scheds_loaded, scheds_failed;
	struct schedule *scheds;
	struct selector **sels; /* parallel; NULL: not a shutdown one */
	size_t nscheds;
};

struct cmd_entry;
struct cmd_ctx;
typedef json_t *(*planwrite_show_fn)(struct planwrite *,
    struct planwrite_host *, const struct watcher_view *, int);

int planwrite_ls(const struct cmd_entry *, struct cmd_ctx *, int, char **,
    planwrite_show_fn);
int planwrite_open(struct fleet *, const char *, struct planwrite **, char **);
int planwrite_probe(struct planwrite *, char **);
int planwrite_adopt(struct fleet *, struct remote *, struct probe *,
    struct planwrite **, char **);
int planwrite_contact(
    struct fleet *, const char *, struct planwrite **, char **);
size_t planwrite_print_errors(const struct planwrite *);
void planwrite_change(
    struct planwrite *, struct planwrite_host *, struct plan_change *);
int planwrite_build(struct planwrite *, struct planwrite_host *,
    const struct plan_change *, struct plan_result *);
int planwrite_write(struct planwrite *, char **);
int planwrite_answer(
    struct planwrite_host *, int, const char *, size_t, const char *);
void planwrite_fail(struct planwrite_host *, const char *, ...)
    __attribute__((format(printf, 2, 3)));
void planwrite_free(struct planwrite *);

/* schedsync.c */
#define SCHEDSYNC_PER_SCHEDULE 48	    /* occurrences armed per schedule */
#define SCHEDSYNC_HORIZON      (30 * 86400) /* how far ahead they are armed */
void schedsync_fill(
    struct planwrite *, struct planwrite_host *, struct plan_change *);
int schedsync_run(struct planwrite *, char **);
void schedsync_topup(struct remote *, struct probe *, int);
int schedsync_scheduled(struct inventory *);
int schedsync_needed(struct inventory *);
void schedsync_free(struct planwrite *);

#endif

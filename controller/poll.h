/*
 * What `status` does, for any caller on the engine's loop: run the agent
 * on the selected instances (uploading it first where it is missing),
 * classify each instance's result (up, unreachable, auth failed, host key
 * changed or unknown, agent error, error), and store the reports, the
 * controller's view and the ledger's observations. Nothing here prints.
 */
#ifndef GPUFLEET_POLL_H
#define GPUFLEET_POLL_H

#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "deploy.h"
#include "engine.h"
#include "remote.h"
#include "report.h"

#define POLL_INTERRUPTED 130 /* a pass was cancelled: nothing to store */

struct poll_buf {
	char *data; /* NUL-terminated, or NULL when empty */
	size_t len;
	size_t cap;
	int over; /* more arrived than the cap */
};

/* One instance's result of the last pass, parallel to remote.list. */
struct poll_host {
	const char *state; /* "up", "unreachable", ... */
	char *error;	   /* why not up, or NULL */
	int have_report;
	struct report rep;
	struct poll_buf out; /* the report as received (with have_report) */
	struct poll_buf err;
	char *prefail; /* failed before any run (ProxyJump) */
	enum engine_fail prefail_kind;
};

struct poll;
typedef void (*poll_done_cb)(struct poll *, int, void *);

struct poll {
	struct remote *rm;
	const struct config *cf;
	struct poll_host *hosts; /* rm->n */
	int64_t now;		 /* when the last pass was classified */

	/* Private. */
	struct agent_bin ab;
	char *args;
	char **cmds;
	struct engine_settings set;
	struct engine_ops ops;
	struct engine_run *run; /* in flight, or NULL */
	int upload;		/* the run is the upload pass */
	poll_done_cb done;
	void *arg;
};

int poll_new(const struct config *, struct poll **, char **);
void poll_attach(struct poll *, struct remote *);
int poll_start(struct poll *, int, poll_done_cb, void *, char **);
void poll_cancel(struct poll *);
int poll_store(struct poll *, char **);
size_t poll_failed(const struct poll *);
void poll_free(struct poll *);

#endif

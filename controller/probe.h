/*
 * What `status` does, for any caller on the engine's loop: run the agent
 * on the selected instances (uploading it first where it is missing),
 * classify each instance's result (up, unreachable, auth failed, host key
 * changed or unknown, agent error, error), and store the reports, the
 * controller's view and the ledger's observations. Nothing here prints.
 */
#ifndef GPUFLEET_PROBE_H
#define GPUFLEET_PROBE_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "config.h"
#include "deploy.h"
#include "engine.h"
#include "misc.h"
#include "remote.h"
#include "report.h"

#define PROBE_INTERRUPTED 130 /* a pass was cancelled: nothing to store */
/*
 * A report whose journal page is full (journal_more) is asked again for
 * the next page in the same pass, up to this many pages in all per
 * instance (each page at most 256 entries or 256 KiB), this many bytes of
 * reports, and no new round after this long: a backlog drains in one
 * contact, and a hostile instance costs a bounded wait and memory.
 */
#define PROBE_JOURNAL_PAGES 20
#define PROBE_JOURNAL_BYTES (8 * 1024 * 1024)
#define PROBE_JOURNAL_MS    (60 * 1000)

/* One instance's result of the last pass, parallel to remote.list. */
struct probe_host {
	const char *state; /* "up", "unreachable", ... */
	char *error;	   /* why not up, or NULL */
	int have_report;
	struct report rep;
	int64_t skew; /* instance clock - controller clock, with have_report */
	int64_t out_real_ms, out_mono_ms; /* the report's first byte came */
	struct misc_buf out; /* the report as received (with have_report) */
	struct misc_buf err;
	char *args;    /* the agent's arguments for this host */
	char *prefail; /* failed before any run (ProxyJump) */
	enum engine_fail prefail_kind;
	/* The journal's next pages (reports asked again for them), stored
	 * after rep; page_out receives the page being read. */
	struct report *pages;
	size_t npages;
	int paging; /* in the round of pages in flight */
	struct misc_buf page_out;
	size_t page_bytes; /* of the pages kept */
};

struct probe;
typedef void (*probe_done_cb)(struct probe *, int, void *);

struct probe {
	struct remote *rm;
	const struct config *cf;
	struct probe_host *hosts; /* rm->n */
	int64_t now;		  /* when the last pass was classified */
	int backoff;	/* hosts that failed to connect wait (engine backoff) */
	int use_runner; /* with keep_open: reports through command runners */

	/* Private. */
	struct agent_bin ab;
	char *args;
	char **cmds;
	char **runners; /* with use_runner: each host's runner command */
	struct engine_settings set;
	struct engine_ops ops;
	struct engine_run *run; /* in flight, or NULL */
	int upload;		/* the run is the upload pass */
	int paging;		/* the run asks for the journal's next pages */
	int64_t paging_since;	/* the first round of pages began (ms) */
	unsigned char *only;	/* NULL: every host; else the hosts with 1 */
	probe_done_cb done;
	void *arg;
};

int probe_new(const struct config *, struct probe **, char **);
void probe_attach(struct probe *, struct remote *);
void probe_only(struct probe *, const unsigned char *);
int probe_start(struct probe *, int, probe_done_cb, void *, char **);
void probe_cancel(struct probe *);
int probe_store(struct probe *, char **);
size_t probe_failed(const struct probe *);
const struct agent_bin *probe_agent(const struct probe *);
void probe_free(struct probe *);
void probe_journals(struct remote *, const struct config *);
int64_t probe_skew(int64_t, int64_t, int64_t, int64_t);
json_t *probe_watcher_json(const struct probe *, size_t);
json_t *probe_json(
    const struct probe *, const unsigned char *, const unsigned char *);

#endif

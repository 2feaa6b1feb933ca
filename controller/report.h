/*
 * The agent's report as the controller reads it: `gpufleet-agent report`
 * prints one JSON document (schema in agent/REPORT.md). Anything that is
 * not a well-formed report of the schema this build knows is refused with
 * a one-line reason, and nothing of it is used.
 */
#ifndef GPUFLEET_CONTROLLER_REPORT_H
#define GPUFLEET_CONTROLLER_REPORT_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "gpufleet/report.h" /* REPORT_SCHEMA, shared with the agent */

#define REPORT_MAX_BYTES (1024 * 1024)

struct report_proc {
	long pid;
	char *name;
	double mem_mib; /* NAN if unknown */
};

/* Numbers nvidia-smi could not give are NAN. */
struct report_gpu {
	int index;
	char *uuid;
	char *name;
	double util_gpu;
	double util_mem;
	double mem_used_mib;
	double mem_total_mib;
	double temp_c;
	double power_w;
	double power_limit_w;
	struct report_proc *procs;
	size_t nprocs;
};

/*
 * One journal entry of the watcher (agent/WATCH.md), checked: its event is
 * one of the known names or "unknown", its id matches [A-Za-z0-9._@-]{1,64}
 * or it has none, its time is sane. entry is the object as compact JSON.
 */
struct report_entry {
	char epoch[17];
	int64_t seq;
	int64_t time; /* the instance's clock */
	char event[16];
	char *id;    /* or NULL */
	char *entry; /* at most REPORT_ENTRY_MAX bytes */
};

#define REPORT_ENTRY_MAX   16384
#define REPORT_ENTRIES_MAX 256
#define REPORT_URGENT_MAX  64 /* journal_urgent entries read */

/* The report's watcher section; present is 0 for an older agent. */
#define REPORT_NOTIFY_MAX 16

struct report_watcher {
	int present;
	char state[16]; /* running started down none, or "unknown" */
	int64_t pid;	/* 0: none */
	int current;
	char *error; /* or NULL */
	int64_t generation;
	char *plan;	/* the plan as compact JSON, or NULL */
	char epoch[17]; /* "" before the first entry */
	struct report_entry *journal;
	size_t njournal;
	/* Stops journaled after the page (journal_more), read ahead: stored
	 * but the cursor does not move past them. */
	struct report_entry *urgent;
	size_t nurgent;
	size_t nskipped; /* entries refused by the checks */
	int journal_more;
	/* D/notify.json (instance-side notifications): whether it is there,
	 * its SHA-256 (hex, "" unknown) and its targets' names. */
	int notify_present;
	char notify_sha[65];
	char *notify_targets[REPORT_NOTIFY_MAX];
	size_t notify_ntargets;
};

struct report {
	int64_t time;
	char *agent_version;
	char *hostname;
	char *kernel;
	int64_t boot_time;
	int64_t container_start; /* 0 if unknown */
	double load[3];
	int cpus;
	int64_t mem_total_kib;
	int64_t mem_available_kib;
	int64_t net_rx_bytes;
	int64_t net_tx_bytes;
	int sessions;
	struct report_gpu *gpus;
	size_t ngpus;
	char *gpu_error; /* or NULL */
	char *driver_version;
	char *cuda_version;
	int has_progress;
	char *progress_text;
	int progress_truncated;
	int64_t progress_mtime;
	char *authorized_keys; /* "TYPE BLOB" lines, or NULL */
	struct report_watcher watcher;
};

int report_parse(const char *, size_t, int64_t, struct report *, char **);
void report_free(struct report *);
int report_entry_check(json_t *, int64_t, struct report_entry *, char **);
void report_entry_free(struct report_entry *);
int report_check_id(const char *);
int report_parse_watcher(json_t *, int64_t, struct report_watcher *);
void report_watcher_free(struct report_watcher *);
int report_notify_has(const struct report_watcher *, const char *);

#endif

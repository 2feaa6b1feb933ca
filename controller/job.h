/*
 * Jobs in the inventory (the job table, schema step 10) and the agent's
 * job commands over the sessions a planwrite probe holds: `run` records
 * a job once job start said it runs, `jobs` stores what job ls says, and
 * watcher.c hands it the job_started and job_ended journal entries, so
 * every contact (status, events' sources, the daemon) keeps it current.
 */
#ifndef GPUFLEET_JOB_H
#define GPUFLEET_JOB_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "instance.h"
#include "inventory.h"
#include "jobspec.h"
#include "misc.h"
#include "report.h"

struct planwrite;

/* A stored job. */
struct job_row {
	int64_t instance_id;
	int64_t job;
	char *name, *command, *then, *fire_id; /* then: NULL, stop, ... */
	int64_t pid;
	struct jobspec_end end;
	int64_t started, ended; /* the controller's clock; ended 0: not */
	char *reason, *last_line;
	int64_t updated;
};

/* One host's answer to a job command. */
struct job_answer {
	int ran; /* the command ran: status is its exit status */
	int status;
	char *error; /* could not run it: why (one line), or NULL */
	struct misc_buf out, err;
};

/* Output of a pass as it arrives: host index, stderr, bytes. */
typedef void (*job_output_fn)(size_t, int, const char *, size_t, void *);

int job_record(
    struct inventory *, int64_t, const struct job_row *, int64_t, char **);
int job_store_ls(
    struct inventory *, int64_t, int64_t, int64_t, int64_t, json_t *, char **);
int job_ingest(struct inventory *, int64_t, int64_t, int64_t,
    const struct report_entry *, char **);
int job_list(struct inventory *, int64_t, struct job_row **, size_t *, char **);
int64_t job_as_of(struct inventory *, int64_t);
void job_rows_free(struct job_row *, size_t);
size_t job_then_running(struct inventory *, int64_t);
int job_pass(struct planwrite *, char *const *, const char *const *, int, int,
    job_output_fn, void *, struct job_answer *);
void job_answers_free(struct job_answer *, size_t);
char *job_agent_error(const struct job_answer *, const struct instance *);

#endif

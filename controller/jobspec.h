/*
 * Jobs (agent/JOBS.md), the pure part: the spec `gpufleet run` sends to
 * `gpufleet-agent job start`, the checks of what a user typed (names,
 * environment, sizes, signals, INSTANCE:JOB), the agent's answers read
 * back, and how jobs read in tables and in `events`. No database, no
 * clock.
 */
#ifndef GPUFLEET_JOBSPEC_H
#define GPUFLEET_JOBSPEC_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#define JOBSPEC_NAME_MAX      64
#define JOBSPEC_COMMAND_MAX   16384
#define JOBSPEC_ENV_MAX	      64
#define JOBSPEC_ENV_KEY_MAX   128
#define JOBSPEC_ENV_VALUE_MAX 4096
#define JOBSPEC_LOG_MIN	      (1LL << 20)
#define JOBSPEC_LOG_MAX	      (16LL << 30)
#define JOBSPEC_LOG_DEFAULT   (64LL << 20)
#define JOBSPEC_GRACE_MAX     3600
#define JOBSPEC_LAST_MAX      1024 /* the most of a last_line kept */

/* What --then asks for. */
struct jobspec_then {
	int on;
	int if_ok;	    /* stop-if-ok: only after success */
	int local;	    /* the stop method runs on this machine */
	int warn_minutes;   /* 0-1440 */
	const char *before; /* or NULL */
	int64_t before_timeout_s;
};

/* The job as `job start` takes it (spec.json). */
struct jobspec {
	const char *name;
	const char *command;
	const char *cwd;	/* NULL: "~" */
	const char *const *env; /* "KEY=VALUE" each, checked */
	size_t nenv;
	int64_t log_max_bytes;
	int64_t created;
	struct jobspec_then then;
};

/* A job's end as the agent tells it (job ls, job_ended, the trailer). */
struct jobspec_end {
	char state[16];	 /* running succeeded failed killed lost */
	int has_exit;	 /* exit is set */
	int exit;	 /* 0-255 */
	char signal[16]; /* "TERM", or "" */
};

char *jobspec_join(int, char **);
void jobspec_default_name(const char *, char *);
int jobspec_check_name(const char *, char **);
int jobspec_check_env(const char *, char **);
int jobspec_utf8(const char *);
int jobspec_parse_size(const char *, int64_t *, char **);
int jobspec_parse_size_range(
    const char *, int64_t, int64_t, int64_t *, char **);
int jobspec_parse_signal(const char *, char *, size_t, char **);
int jobspec_signal_number(const char *);
int jobspec_parse_target(const char *, int, char **, int64_t *, char **);
char *jobspec_json(const struct jobspec *);
int jobspec_read_end(json_t *, struct jobspec_end *);
int jobspec_trailer(const char *, size_t, int64_t *, struct jobspec_end *);
int jobspec_exit_status(const struct jobspec_end *);
char *jobspec_exit_text(const struct jobspec_end *);
char *jobspec_event_text(const char *, const char *, const char *);
int jobspec_fire_job(const char *, int64_t *);

#endif

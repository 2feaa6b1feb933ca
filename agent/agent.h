/*
 * Internal interfaces of gpufleet-agent, one section per file. Everything
 * but agent.c (main) is also built into a library for the unit tests.
 */
#ifndef GPUFLEET_AGENT_H
#define GPUFLEET_AGENT_H

#include <signal.h>
#include <stddef.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>

/* A number that may be unknown: printed as null when set is 0. */
struct opt_int {
	int set;
	long long v;
};

struct opt_num {
	int set;
	double v;
};

/* A growable byte buffer; data is NUL-terminated after len bytes. */
struct buf {
	char *data;
	size_t len;
	size_t size;
};

/* buf.c */
void buf_add(struct buf *, const void *, size_t);
void buf_addstr(struct buf *, const char *);
void buf_free(struct buf *);
int buf_read_file(struct buf *, const char *, size_t);
char *buf_first_line(const char *, size_t);
int buf_write_all(int, const void *, size_t);

/* jsonw.c */
#define JSONW_MAXDEPTH 16

struct jsonw {
	struct buf out;
	int depth;
	int first[JSONW_MAXDEPTH];
};

void jsonw_init(struct jsonw *);
void jsonw_free(struct jsonw *);
void jsonw_object_begin(struct jsonw *, const char *);
void jsonw_object_end(struct jsonw *);
void jsonw_array_begin(struct jsonw *, const char *);
void jsonw_array_end(struct jsonw *);
void jsonw_null(struct jsonw *, const char *);
void jsonw_bool(struct jsonw *, const char *, int);
void jsonw_int(struct jsonw *, const char *, long long);
void jsonw_double(struct jsonw *, const char *, double, int);
void jsonw_string(struct jsonw *, const char *, const char *);
void jsonw_stringn(struct jsonw *, const char *, const char *, size_t);
void jsonw_opt_int(struct jsonw *, const char *, struct opt_int);
void jsonw_opt_num(struct jsonw *, const char *, struct opt_num, int);
void jsonw_escape(struct buf *, const char *, size_t);
void jsonw_raw(struct jsonw *, const char *, const char *, size_t);

/* jsonr.c */
#define JSONR_MAXDEPTH 16
#define JSONR_MAXSIZE  (64 * 1024)

enum jsonr_type {
	JSONR_NULL,
	JSONR_BOOL,
	JSONR_INT,
	JSONR_STRING,
	JSONR_ARRAY,
	JSONR_OBJECT,
};

/* A parsed value; an object's member i is keys[i] = items[i]. */
struct jsonr {
	enum jsonr_type type;
	long long i; /* JSONR_BOOL (0/1), JSONR_INT */
	char *s;     /* JSONR_STRING, NUL-terminated, no NUL inside */
	size_t slen;
	struct jsonr *items; /* JSONR_ARRAY, JSONR_OBJECT */
	char **keys;	     /* JSONR_OBJECT */
	size_t n;
};

int jsonr_parse(const char *, size_t, struct jsonr *, char **);
void jsonr_free(struct jsonr *);
const struct jsonr *jsonr_get(const struct jsonr *, const char *);
const char *jsonr_str(const struct jsonr *, const char *);
int jsonr_int(const struct jsonr *, const char *, long long *);
void jsonr_write(struct jsonw *, const char *, const struct jsonr *);

/* plan.c */
#define PLAN_ID_MAX 64
/* So that "ID@CONTAINER_START" fits in PLAN_ID_MAX too. */
#define PLAN_AUTOSTOP_ID_MAX  40
#define PLAN_MAX_DEADLINES    64
#define PLAN_PROGRESS_DEFAULT "~/.gpufleet/progress"
/* Exit statuses of plan set besides 0 and 2 (WATCH.md). */
#define PLAN_EXIT_GENERATION 3
#define PLAN_EXIT_INVALID    4
#define PLAN_EXIT_WRITE	     5
#define PLAN_EXIT_WATCHER    6

struct plan_deadline {
	char id[PLAN_ID_MAX + 1];
	long long at;
	int local; /* action "local" */
	long long warn_minutes;
	char *before_stop; /* NULL: none */
	long long before_stop_timeout_s;
	int before_must_succeed;
	int unless_busy; /* skipped when the machine is busy at "at" */
	int hold;	 /* "hold": held for the controller's pull */
	long long hold_wait_s;
	int hold_must; /* never stops without a release */
};

struct plan_autostop {
	char id[PLAN_ID_MAX + 1];
	long long idle_s;
	long long gpu_below;
	long long gpu_mem_mib;
	int wait_sessions;
	int wait_jobs;
	long long stalled_s;
	long long max_runtime_s;
	char *progress;	  /* as written: "~/" not expanded */
	char *nvidia_smi; /* NULL: found as report finds it */
};

struct plan {
	long long generation;
	long long check_interval_s;
	long long stop_confirm_s;
	/*
	 * Not in the file: the waits before the retries of a stop command
	 * that failed at once (JUDGE_BACKOFF_*_S, or the watcher's test knob
	 * GPUFLEET_AGENT_STOP_BACKOFF).
	 */
	long long stop_backoff_s[2];
	char *stop_command; /* NULL: no stop method */
	int stop_release;   /* kind "release" */
	int allow_release;
	struct plan_deadline *deadlines;
	size_t ndeadlines;
	int has_autostop;
	struct plan_autostop autostop;
};

int plan_parse(const char *, size_t, struct plan *, char **);
/* Validation helpers, shared with job.c's spec. */
int plan_bad(char **, const char *, const char *, const char *);
int plan_keys(const struct jsonr *, const char *const *, const char *, char **);
int plan_doc(
    const char *, size_t, const char *const *, struct jsonr *, char **);
int plan_int(const struct jsonr *, const char *, const char *, long long,
    long long, long long, long long *, char **);
int plan_bool(const struct jsonr *, const char *, const char *, int *, char **);
int plan_string(
    const struct jsonr *, const char *, const char *, int, char **, char **);
void plan_free(struct plan *);
int plan_mkdir(const char *, char **);
int plan_load(const char *, struct plan *, struct buf *, char **);
int plan_set(
    const char *, long long, const char *, size_t, long long *, char **);
int plan_write_named(const char *, const char *, const char *, size_t, char **);

/* serve.c */
const char *serve_signame(int);
int serve_main(int, char **);

/* hold.c */
#define HOLD_WAIT_DEFAULT 7200	       /* seconds a hold waits, by default */
#define HOLD_WAIT_MAX	  (30 * 86400) /* at most */
#define HOLD_RELEASE_MAX  4096	       /* bytes of a release file */

int hold_release_parse(
    const char *, size_t, const char *, char *, size_t, char **);
int hold_release_read(const char *, const char *, char *, size_t, char **);
void hold_release_remove(const char *, const char *);
int hold_main(int, char **);

/* journal.c */
#define JOURNAL_EPOCH_LEN 16
/* What one report carries of the journal at most. */
#define JOURNAL_REPORT_ENTRIES 256
#define JOURNAL_REPORT_BYTES   (256 * 1024)
/* And of the stops journaled past that (journal_urgent). */
#define JOURNAL_URGENT_ENTRIES 64
#define JOURNAL_URGENT_BYTES   (64 * 1024)

/* The active file is rotated into a segment past this size (agent/WATCH.md
 * "The journal's segments"); acknowledged segments are kept this long. */
#define JOURNAL_SEGMENT_BYTES (4 * 1024 * 1024)
#define JOURNAL_KEEP_S	      (7 * 86400)
/* Test knobs for both (bytes, seconds). */
#define JOURNAL_SEGMENT_ENV "GPUFLEET_AGENT_JOURNAL_SEGMENT_BYTES"
#define JOURNAL_KEEP_ENV    "GPUFLEET_AGENT_JOURNAL_KEEP_S"

struct journal {
	int fd;
	char *dir;
	char *path;
	char epoch[JOURNAL_EPOCH_LEN + 1];
	long long seq; /* of the last entry */
};

struct judge_state;

/* Called with each valid line, its length and its parse; 1 stops. */
typedef int (*journal_fn)(const char *, size_t, const struct jsonr *, void *);

int journal_scan(const char *, char *, journal_fn, void *);
int journal_scan_at(const char *, off_t, char *, journal_fn, void *);
int journal_scan_all(const char *, char *, journal_fn, void *);
void journal_rotate(struct journal *, const struct judge_state *, time_t);
int journal_replay(const char *, char *, struct judge_state *);
int journal_open(struct journal *, const char *, time_t, char **);
void journal_begin(struct journal *, struct jsonw *, time_t, const char *);
int journal_end(struct journal *, struct jsonw *, char **);
void journal_close(struct journal *);
void journal_report(struct jsonw *, const char *, const char *, long long);

/* judge.c */
struct job_then;

#define JUDGE_MAX_GPUS	  16
#define JUDGE_SAMPLES	  5		     /* kept for a firing's evidence */
#define JUDGE_FIRE_ID_MAX (PLAN_ID_MAX + 24) /* "ID@CONTAINER_START" */
/* A progress file changed this recently keeps unless_busy from firing. */
#define JUDGE_PROGRESS_BUSY_S 600
/* A stop command runs at most this often for one fired id. */
#define JUDGE_STOP_ATTEMPTS 3
/* The retries after a stop command that failed at once, by default. */
#define JUDGE_BACKOFF_FIRST_S  30
#define JUDGE_BACKOFF_SECOND_S 120

enum { JUDGE_GPU_OK, JUDGE_GPU_NONE, JUDGE_GPU_ERROR };

/* One autostop check. */
struct judge_sample {
	long long time;
	int gpu_state; /* JUDGE_GPU_NONE: no nvidia-smi, judged without */
	size_t ngpus;
	long long util[JUDGE_MAX_GPUS];	   /* -1: unknown */
	long long mem_mib[JUDGE_MAX_GPUS]; /* the largest process's */
	long long sessions;		   /* -1: unknown */
	long long jobs;
	long long progress_age_s; /* -1: no progress file */
};

struct judge_idle {
	int idle;
	long long since; /* when the idle clock started */
	int unreadable;	 /* in a streak of nvidia-smi failures */
	struct judge_sample last[JUDGE_SAMPLES];
	size_t nlast;
};

enum {
	JUDGE_FIRE_NONE,
	JUDGE_FIRE_DEADLINE,
	JUDGE_FIRE_IDLE,
	JUDGE_FIRE_STALLED,
	JUDGE_FIRE_MAX_RUNTIME,
	JUDGE_FIRE_JOB,
};

/* What a sample changed: each set member is one journal entry. */
struct judge_verdict {
	int idle;	  /* "idle", since the idle clock */
	const char *busy; /* "busy" with this reason */
	int unreadable;	  /* "gpu_unreadable" */
	int fire;	  /* JUDGE_FIRE_* */
};

/* What the journal says of one id (a deadline, or AUTOSTOP@START). */
struct judge_fire {
	char id[JUDGE_FIRE_ID_MAX + 1];
	int armed;
	long long armed_at; /* the "at" of the last "armed" */
	int warned;
	int fired;
	long long fired_at;
	int before_done;
	int before_ok;
	int attempts; /* "stopping" entries */
	long long stopping_time;
	long long stopping_pid;
	long long stopping_pid_start;
	int result; /* a "stop_result" after the last "stopping" */
	/* The last stop_result's (agent/WATCH.md "Exactly once"). */
	long long result_time;
	int result_failed;	 /* the command failed at once: see below */
	long long result_status; /* its exit status, or -1 */
	int result_signal;	 /* the signal that killed it, or 0 */
	int failures;		 /* attempts whose command failed at once */
	int retries;		 /* "stop_retry" entries */
	int done; /* stopped, stop_failed, skipped or local_due */
	/* A held stop (agent/WATCH.md "Held stops"). */
	int hold;	       /* the firing or held entry says it is held */
	long long hold_wait_s; /* as journaled */
	int hold_must;
	int held;
	long long held_at;
	int released;
	int hold_expired;
	int hold_kept;	    /* "keeps waiting" journaled */
	int hold_cancelled; /* released by "cancelled": no stop */
	int warn_withheld;  /* not journaled: unless_busy, busy at warn time */
	/* A job's fire id (j-N-STARTED): its job_started and job_ended. */
	int job_started;
	int job_ended;
	long long job_n;
	long long job_ended_at;
	char job_state[16];
	struct opt_int job_exit;
	char job_signal[16]; /* "" none */
	int job_then;	     /* job_ended asks for a stop... */
	int job_stop;	     /* ...and the job qualifies: a deadline */
	char job_skip[96];   /* why it does not, when job_then && !job_stop */
};

struct judge_state {
	struct judge_fire *f;
	size_t n;
	/* Jobs running, being started or ended and not yet journaled. */
	long long jobs_pending;
};

/* What runs for a fired id. */
struct judge_task {
	const char *before_stop;
	int before_must_succeed;
	long long before_timeout_s;
	int local;
	int hold; /* the deadline's hold, before it is journaled */
	long long hold_wait_s;
	int hold_must;
	int release; /* a valid D/release-ID is there */
};

enum judge_act {
	JUDGE_ACT_NONE,
	JUDGE_ACT_WAIT, /* until wake */
	JUDGE_ACT_WARN,
	JUDGE_ACT_FIRE,
	JUDGE_ACT_BEFORE,
	JUDGE_ACT_SKIP, /* reason */
	JUDGE_ACT_LOCAL_DUE,
	JUDGE_ACT_STOP,
	JUDGE_ACT_STOPPED,
	JUDGE_ACT_WAIT_PID,
	JUDGE_ACT_RESULT_LOST,
	JUDGE_ACT_RETRY,
	JUDGE_ACT_FAILED, /* reason */
	JUDGE_ACT_HOLD,	  /* journal "held" */
	JUDGE_ACT_RELEASED,
	JUDGE_ACT_HOLD_EXPIRED,
	JUDGE_ACT_HOLD_KEPT, /* reason */
};

struct judge_step {
	enum judge_act act;
	long long wake;
	const char *reason; /* static, or why */
	char why[128];
};

void judge_idle_reset(struct judge_idle *);
const char *judge_busy(
    const struct plan_autostop *, const struct judge_sample *, int *);
void judge_sample(struct judge_idle *, const struct plan_autostop *,
    const struct judge_sample *, long long, struct judge_verdict *);
void judge_unless_policy(const struct plan *, struct plan_autostop *);
int judge_unless_busy(const struct plan_autostop *, const struct judge_sample *,
    const char *, char *, size_t);
const char *judge_fire_name(int);
struct judge_fire *judge_find(struct judge_state *, const char *, int);
void judge_state_free(struct judge_state *);
void judge_fire_id(const struct plan *, long long, char *, size_t);
int judge_arms(const struct plan *, struct judge_state *, long long);
void judge_replay(struct judge_state *, const struct jsonr *);
void judge_job_deadline(
    const struct judge_fire *, const struct job_then *, struct plan_deadline *);
void judge_deadline(const struct plan_deadline *, const struct judge_fire *,
    long long, long long, struct judge_step *);
void judge_fired(const struct judge_fire *, const struct judge_task *,
    const struct plan *, long long, long long, int, struct judge_step *);

/* run.c */
enum run_state {
	RUN_EXITED,	  /* exited or killed by a signal on its own */
	RUN_TIMED_OUT,	  /* killed at the deadline */
	RUN_SPAWN_FAILED, /* never started; error holds the errno */
};

struct run {
	char *const *argv; /* argv[0] is the program's path */
	const char *in;	   /* its stdin, or NULL: /dev/null */
	size_t inlen;
	pid_t pid;
	int fd[2]; /* stdout, stderr; -1 once closed */
	struct buf out[2];
	int status; /* waitpid status when RUN_EXITED */
	enum run_state state;
	int error;
	int reaped;
};

void run_all(struct run *, size_t, long);
void run_free(struct run *);
void run_child_defaults(void);

/* gpu.c */
struct gpu_proc {
	struct opt_int pid;
	char *name;
	struct opt_int mem_mib;
};

struct gpu {
	struct opt_int index;
	char *uuid;
	char *name;
	struct opt_int util_gpu;
	struct opt_int util_mem;
	struct opt_int mem_used_mib;
	struct opt_int mem_total_mib;
	struct opt_int temp_c;
	struct opt_num power_w;
	struct opt_num power_limit_w;
	char *driver_version;
	int procs_known; /* 0: the process query failed, print null */
	struct gpu_proc *procs;
	size_t nprocs;
};

struct gpu_info {
	struct gpu *gpus;
	size_t ngpus;
	char *error; /* NULL, or a one-line reason */
	char *driver_version;
	char *cuda_version;
};

void gpu_parse_query(struct gpu_info *, const char *, size_t);
void gpu_parse_apps(struct gpu_info *, const char *, size_t);
void gpu_parse_banner(struct gpu_info *, const char *, size_t);
void gpu_collect(struct gpu_info *, const char *, long, int);
char *gpu_find_nvidia_smi(const char *);
void gpu_write(struct jsonw *, const struct gpu_info *);
void gpu_free(struct gpu_info *);

/* host.c */
struct host_disk {
	char *path;
	struct opt_int total_kib;
	struct opt_int free_kib;
};

struct host {
	char *hostname;
	char *kernel;
	struct opt_int boot_time;
	struct opt_int container_start;
	struct opt_num load[3];
	struct opt_int cpus;
	struct opt_int mem_total_kib;
	struct opt_int mem_available_kib;
	struct host_disk disks[2];
	struct opt_int net_rx_bytes;
	struct opt_int net_tx_bytes;
	struct opt_int sessions;
};

void host_collect(struct host *, const char *, const char *);
/* The fields of /proc/PID/stat the agent uses. */
struct host_pstat {
	long long pid;
	char comm[64];
	char state; /* R, S, Z, ... */
	long long ppid;
	long long pgrp;
	long long session;
	long long tty_nr;
	long long starttime;
};

int host_parse_pstat(const char *, size_t, struct host_pstat *);
int host_is_ssh_session(const char *);
long long host_container_start_now(const char *);
long long host_session_count(const char *);
void host_write(struct jsonw *, const struct host *);
void host_free(struct host *);

/* progress.c */
struct progress {
	int present;
	char *path;
	struct buf text;
	int truncated;
	long long mtime;
};

void progress_read(struct progress *, const char *);
void progress_write(struct jsonw *, const struct progress *);
void progress_free(struct progress *);

/* shell.c */
#define SHELL_TAIL 1024 /* bytes of output kept: the last ones */

struct shell {
	pid_t pid;
	int gate; /* write end; -1 once released */
	int out;
	char tail[SHELL_TAIL];
	size_t tail_len;
	int status; /* waitpid status once reaped */
	int reaped;
	int timed_out;
};

char **shell_env(const char *);
void shell_env_free(char **);
int shell_start(
    struct shell *, char *const *, char *const *, const char *, char **);
void shell_release(struct shell *);
void shell_wait(struct shell *, long, volatile sig_atomic_t *);
void shell_close(struct shell *);
long long shell_pid_start(const char *, long long);

/* job.c: detached jobs (agent/JOBS.md). */
#define JOB_EXIT_USAGE	  2
#define JOB_EXIT_INVALID  4
#define JOB_EXIT_START	  5
#define JOB_EXIT_NOJOB	  6
#define JOB_NAME_MAX	  64
#define JOB_COMMAND_MAX	  (16 * 1024)
#define JOB_ENV_MAX	  64
#define JOB_ENV_KEY_MAX	  128
#define JOB_ENV_VALUE_MAX 4096
#define JOB_LOG_MIN	  (1LL << 20)
#define JOB_LOG_MAX	  (16LL << 30)
#define JOB_LOG_DEFAULT	  (64LL << 20)
#define JOB_LAST_LINE_MAX 200
#define JOB_COMMAND_SHOWN 200
#define JOB_FIRE_ID_MAX	  48
/* A job directory without a pid file this young is still being started. */
#define JOB_STARTING_S 60

struct job_then {
	int set;
	int if_ok; /* when "success" */
	int local; /* action "local" */
	long long warn_minutes;
	char *before_stop; /* NULL: none */
	long long before_stop_timeout_s;
	int before_must_succeed;
};

struct job_spec {
	char name[JOB_NAME_MAX + 1];
	char *command;
	char *cwd;  /* as written: "~/" not expanded */
	char **env; /* key, value, key, value...: 2 * nenv */
	size_t nenv;
	long long log_max_bytes;
	long long created;
	struct job_then then;
};

enum job_state {
	JOB_STARTING, /* no pid file yet: not a job to anyone */
	JOB_RUNNING,
	JOB_SUCCEEDED,
	JOB_FAILED,
	JOB_KILLED,
	JOB_LOST,
};

/* What D/jobs/N holds and what was seen of its processes. */
struct job {
	long long n;
	int spec_ok;
	struct job_spec spec;
	int has_pid;
	long long supervisor, supervisor_start, pid, pid_start, started;
	int has_status;
	long long ended;
	struct opt_int exit;
	int signal; /* 0: none */
	int core;
	int has_kill;
	long long created; /* the spec's, or the directory's mtime */
	int supervisor_alive;
	int pid_alive;
	long long container_start; /* -1: unknown */
	/* job_judge: */
	enum job_state state;
	int restarted; /* lost: the container restarted after it started */
	char reason[256];
	char fire_id[JOB_FIRE_ID_MAX];
};

int job_spec_parse(const char *, size_t, long long, struct job_spec *, char **);
void job_spec_free(struct job_spec *);
void job_spec_write(struct jsonw *, const struct job_spec *);
const char *job_signal_name(int, char *, size_t);
int job_signal_number(const char *);
const char *job_state_name(enum job_state);
const char *job_then_name(const struct job_then *);
void job_judge(struct job *, long long);
void job_last_line(const char *, size_t, char *, size_t);
void job_log_facts(
    const char *, const struct job *, char *, size_t, long long *);
int job_load(const char *, const char *, long long, struct job *);
void job_free(struct job *);
int job_list(const char *, const char *, struct job **, size_t *);
void job_list_free(struct job *, size_t);
int job_main(int, char **);

/* watcher.c */
pid_t watcher_holder(const char *);
int watcher_current(pid_t);
int watcher_lock(const char *, int *, pid_t *, char **);
int watcher_replace(const char *, char **);
void watcher_close_fds(int);
int watcher_read_line(int, char *, size_t, int);
int watcher_start(const char *, const char *, int *, pid_t *, char **);
int watcher_plan_arms(const char *, const char *, const struct plan *);
void watcher_report(
    struct jsonw *, const char *, const char *, int, const char *, long long);

/* watch.c, watch-act.c: the watcher's loop and what it does. */
struct watch {
	const char *dir;
	const char *proc;
	struct journal j;
	struct plan plan;
	struct stat plan_sb; /* of the file last loaded or reported */
	int plan_known;	     /* plan_sb is set */
	struct judge_state js;
	struct judge_idle idle;
	long long next_check;
	char **env;
	int ino; /* inotify, or -1 */
	/* The jobs' stops as deadlines (judge_job_deadline); owns before_stop.
	 */
	struct plan_deadline *jdl;
	size_t njdl;
	long long jobs_running;
};

extern volatile sig_atomic_t watch_term;

void watch_log(struct watch *, struct jsonw *);
void watch_entry(struct watch *, struct jsonw *, const char *, const char *);
int watch_run(const char *, const char *, int, int);
void watch_no_result(struct watch *, const char *, const char *, const char *);
void watch_run_before(struct watch *, const char *, const struct judge_task *,
    volatile sig_atomic_t *);
void watch_run_stop(struct watch *, const char *, volatile sig_atomic_t *);
void watch_warn(struct watch *, const struct plan_deadline *);
int watch_fire_deadline(struct watch *, const struct plan_deadline *);
void watch_jobs(struct watch *, long long *);
void watch_jobs_free(struct watch *);
void watch_fire_job(struct watch *, const char *);
long long watcher_jobs_pending(
    const char *, const char *, struct judge_state *);
long long watch_autostop(struct watch *, const char *, long long);
char *watch_find_prog(const char *);

/* notify.c: D/notify.json and the bodies of the messages. */
#define NOTIF_MAX_TARGETS 16
#define NOTIF_NAME_MAX	  64
#define NOTIF_URL_MAX	  2048
#define NOTIF_SECRET_MAX  512
#define NOTIF_TEXT_MAX	  1800 /* the controller's NOTIFY_TEXT_MAX */
/* All the targets of one entry together; curl's own limit is under it. */
#define NOTIF_DEADLINE_MS   10000
#define NOTIF_CURL_MAX_TIME "9"

/* The controller's enum notify_kind and notify_format, in their order. */
enum {
	NOTIF_JOB_FINISHED,
	NOTIF_JOB_FAILED,
	NOTIF_STOPPED,
	NOTIF_STOP_FAILED,
	NOTIF_AUTOSTOPPED,
};
enum {
	NOTIF_FORMAT_JSON,
	NOTIF_FORMAT_SLACK,
	NOTIF_FORMAT_DISCORD,
	NOTIF_FORMAT_FEISHU,
	NOTIF_FORMAT_DINGTALK,
	NOTIF_FORMAT_NTFY,
};

struct notif_target {
	char name[NOTIF_NAME_MAX + 1];
	int format;
	char *url;
	char *secret; /* NULL: none */
	unsigned events;
	char instance[NOTIF_NAME_MAX + 1];
};

struct notif_conf {
	struct notif_target *t;
	size_t n;
};

struct notif_req {
	char *url;
	struct buf body;
	const char *content_type;
	char *title; /* ntfy's, or NULL */
};

int notif_format_parse(const char *);
int notif_kind_parse(const char *);
int notif_parse(const char *, size_t, struct notif_conf *, char **);
void notif_free(struct notif_conf *);
int notif_set(const char *, const char *, size_t, char **);
int notif_load(const char *, struct notif_conf *, char *, char **);
char *notif_text(
    const char *, const char *, long long, long long, const char *);
void notif_request(const struct notif_target *, const char *, const char *,
    long long, const char *, const char *, long long, struct notif_req *);
void notif_req_free(struct notif_req *);
int notif_judge(int, long, const char *, size_t, char **);

/* watch-notify.c */
void watch_notify(struct watch *, const struct jsonr *, long long);

/* report.c */
struct report_opts {
	const char *nvidia_smi;	     /* NULL: search PATH */
	const char *progress;	     /* NULL: ~/.gpufleet/progress */
	const char *dir;	     /* NULL: ~/.cache/gpufleet */
	const char *proc;	     /* NULL: /proc */
	const char *authorized_keys; /* NULL: not reported */
	long gpu_timeout_ms;
	const char *journal_epoch; /* --journal-after; NULL: from the start */
	long long journal_seq;
	int ensure_watcher;
};

void report_opts_init(struct report_opts *);
char *report_expand_home(const char *);
char *report_build(const struct report_opts *, time_t);

/* akedit.c */
#define AKEDIT_EXIT_USAGE 2
#define AKEDIT_EXIT_MKDIR 3 /* cannot create the file's directory */
#define AKEDIT_EXIT_FILE  4 /* a symlink or not a regular file */
#define AKEDIT_EXIT_READ  5 /* unreadable, too large or read-only */
#define AKEDIT_EXIT_WRITE 6 /* cannot write, check or rename the new file */

struct akedit {
	const char *add;  /* "TYPE BLOB COMMENT" to have, or NULL */
	const char *like; /* blob whose line's options the added key takes */
	const char *del;  /* blob of the key to remove, or NULL */
};

int akedit_apply(const char *, size_t, const struct akedit *, struct buf *);
int akedit_done(const char *, size_t, const struct akedit *);
int akedit_file(const char *, const struct akedit *);

#endif

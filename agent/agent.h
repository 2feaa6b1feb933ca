/*
 * Internal interfaces of gpufleet-agent, one section per file. Everything
 * but agent.c (main) is also built into a library for the unit tests.
 */
#ifndef GPUFLEET_AGENT_H
#define GPUFLEET_AGENT_H

#include <stddef.h>
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

/* run.c */
enum run_state {
	RUN_EXITED,	  /* exited or killed by a signal on its own */
	RUN_TIMED_OUT,	  /* killed at the deadline */
	RUN_SPAWN_FAILED, /* never started; error holds the errno */
};

struct run {
	char *const *argv; /* argv[0] is the program's path */
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
void gpu_collect(struct gpu_info *, const char *, long);
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
	long long ppid;
	long long session;
	long long tty_nr;
	long long starttime;
};

int host_parse_pstat(const char *, size_t, struct host_pstat *);
int host_is_ssh_session(const char *);
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

/* report.c */
struct report_opts {
	const char *nvidia_smi;	     /* NULL: search PATH */
	const char *progress;	     /* NULL: ~/.gpufleet/progress */
	const char *dir;	     /* NULL: ~/.cache/gpufleet */
	const char *proc;	     /* NULL: /proc */
	const char *authorized_keys; /* NULL: not reported */
	long gpu_timeout_ms;
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

/*
 * The one runner of tracked children: each is started in its own process
 * group with stdin and stdout/stderr on files, given a deadline, reaped
 * and handed to its finish callback. With child_loop_start the reaping
 * is done on the daemon's loop (SIGCHLD through libevent, waitpid of
 * each tracked pid only, so other modules' children are left alone) and
 * nothing waits; child_run runs the same code on a private event_base
 * until its child is over (for commands, not the daemon).
 *
 * A gate lets the caller record the child's pid before it does
 * anything (child_spec's gate_r).
 *
 * At its deadline the whole group gets SIGTERM, then SIGKILL after
 * CHILD_GRACE_S. Once its leader is reaped, what is left of its group
 * gets SIGTERM (SIGKILL after a kill): nothing it started outlives it.
 */
#ifndef GPUFLEET_CHILD_H
#define GPUFLEET_CHILD_H

#include <sys/types.h>

#include <event2/event.h>

#define CHILD_GRACE_S 5 /* from a group's SIGTERM to its SIGKILL */

/* What to start. */
struct child_spec {
	char *const *argv; /* argv[0] is a path */
	char *const *env;  /* "NAME=value" to add, NULL-terminated, or NULL */
	const char *in;	   /* stdin from this file; NULL: /dev/null */
	const char *out;   /* stdout and stderr appended here; NULL: ours */
	const char *err;   /* stderr here instead (truncated); NULL: out */
	int out_fd;	   /* > 0: stdout and stderr to this fd, not out */
	int err_fd;	   /* > 0: stderr to this fd instead */
	int timeout;	   /* seconds until killed; 0: none */
	int spared;	   /* child_kill_all leaves it: its owner ends it by
			      a deadline of its own */
	int gate_r;	   /* > 0: a pipe's read end the child waits on before
			      it execs: a byte lets it go, EOF (the caller
			      closed gate_w, or died) makes it exit 0 */
	int gate_w;	   /* that pipe's write end, closed in the child */
};

/* How a child ended. */
struct child_result {
	pid_t pid;
	int status; /* from waitpid */
	int killed; /* 1: at its deadline, 2: by child_kill_all, 3: child_run
		       was interrupted (SIGINT, SIGTERM, SIGHUP) */
};

typedef void (*child_cb)(const struct child_result *, void *);

int child_loop_start(struct event_base *);
void child_loop_end(void);
int child_looping(void);
int child_start(const struct child_spec *, child_cb, void *, pid_t *, char **);
int child_run(const struct child_spec *, struct child_result *, char **);
void child_kill_all(void);
size_t child_count(void);
char *child_why(const struct child_result *, int);

#endif

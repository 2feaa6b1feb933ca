/*
 * Run programs in parallel with their output captured, all bounded by one
 * deadline: each runs in its own process group, which is killed at the
 * deadline. A child stuck in the kernel (a GPU fallen off the bus leaves
 * nvidia-smi unkillable) is not waited for beyond a short grace period.
 */

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "agent.h"

/* Bytes kept of each output stream; the rest is read and dropped. */
#define RUN_OUTPUT_MAX (1024 * 1024)
/* How long killed children are waited for before giving up on them. */
#define RUN_KILL_GRACE_MS 200
/*
 * What a run's stdin may hold. It is written whole before any output is
 * read: only for programs that read all their input first (curl's -K -).
 */
#define RUN_INPUT_MAX 65536

extern char **environ;

static long run_now_ms(void);
static void run_spawn(struct run *);
static void run_close(struct run *, int);
static void run_read(struct run *, int);
static void run_reap(struct run *, int);
static int run_busy(const struct run *);

/* Milliseconds on the monotonic clock. */
static long
run_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/*
 * Start one program with pipes for its output, stdin from /dev/null or
 * r->in (RUN_INPUT_MAX).
 */
static void
run_spawn(struct run *r)
{
	posix_spawn_file_actions_t fa;
	posix_spawnattr_t attr;
	sigset_t none, dfl;
	int out[2] = { -1, -1 }, err[2] = { -1, -1 }, in[2] = { -1, -1 }, e;
	size_t off = 0;
	ssize_t n;

	r->pid = -1;
	r->fd[0] = r->fd[1] = -1;
	if (pipe2(out, O_CLOEXEC) == -1 || pipe2(err, O_CLOEXEC) == -1 ||
	    (r->in != NULL &&
		(r->inlen > RUN_INPUT_MAX || pipe2(in, O_CLOEXEC) == -1))) {
		r->state = RUN_SPAWN_FAILED;
		r->error =
		    r->in != NULL && r->inlen > RUN_INPUT_MAX ? E2BIG : errno;
		goto fail;
	}
	posix_spawn_file_actions_init(&fa);
	if (r->in != NULL)
		posix_spawn_file_actions_adddup2(&fa, in[0], 0);
	else
		posix_spawn_file_actions_addopen(
		    &fa, 0, "/dev/null", O_RDONLY, 0);
	posix_spawn_file_actions_adddup2(&fa, out[1], 1);
	posix_spawn_file_actions_adddup2(&fa, err[1], 2);
	posix_spawnattr_init(&attr);
	sigemptyset(&none);
	sigemptyset(&dfl);
	sigaddset(&dfl, SIGPIPE);
	sigaddset(&dfl, SIGHUP);
	sigaddset(&dfl, SIGINT);
	sigaddset(&dfl, SIGQUIT);
	sigaddset(&dfl, SIGTERM);
	posix_spawnattr_setsigmask(&attr, &none);
	posix_spawnattr_setsigdefault(&attr, &dfl);
	posix_spawnattr_setpgroup(&attr, 0);
	posix_spawnattr_setflags(&attr,
	    POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK |
		POSIX_SPAWN_SETSIGDEF);
	e = posix_spawn(&r->pid, r->argv[0], &fa, &attr, r->argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	posix_spawnattr_destroy(&attr);
	if (e != 0) {
		r->pid = -1;
		r->state = RUN_SPAWN_FAILED;
		r->error = e;
		goto fail;
	}
	close(out[1]);
	close(err[1]);
	if (r->in != NULL) {
		close(in[0]);
		while (off < r->inlen) {
			n = write(in[1], r->in + off, r->inlen - off);
			if (n == -1 && errno == EINTR)
				continue;
			if (n <= 0)
				break; /* it exited early: its output says why
					*/
			off += (size_t)n;
		}
		close(in[1]);
	}
	r->fd[0] = out[0];
	r->fd[1] = err[0];
	fcntl(out[0], F_SETFL, O_NONBLOCK);
	fcntl(err[0], F_SETFL, O_NONBLOCK);
	return;

fail:
	if (in[0] != -1)
		close(in[0]);
	if (in[1] != -1)
		close(in[1]);
	if (out[0] != -1)
		close(out[0]);
	if (out[1] != -1)
		close(out[1]);
	if (err[0] != -1)
		close(err[0]);
	if (err[1] != -1)
		close(err[1]);
	r->reaped = 1;
}

/* Close one of a run's output pipes. */
static void
run_close(struct run *r, int i)
{
	if (r->fd[i] != -1) {
		close(r->fd[i]);
		r->fd[i] = -1;
	}
}

/* Read what is waiting on one output pipe; close it at EOF. */
static void
run_read(struct run *r, int i)
{
	char chunk[4096];
	ssize_t n;

	for (;;) {
		n = read(r->fd[i], chunk, sizeof chunk);
		if (n == -1 && errno == EINTR)
			continue;
		if (n == -1 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return;
		if (n <= 0) {
			run_close(r, i);
			return;
		}
		if (r->out[i].len < RUN_OUTPUT_MAX) {
			size_t keep = (size_t)n;

			if (keep > RUN_OUTPUT_MAX - r->out[i].len)
				keep = RUN_OUTPUT_MAX - r->out[i].len;
			buf_add(&r->out[i], chunk, keep);
		}
	}
}

/* Collect the exit status if the child is gone; block when asked. */
static void
run_reap(struct run *r, int block)
{
	pid_t p;
	int status;

	if (r->reaped)
		return;
	do
		p = waitpid(r->pid, &status, block ? 0 : WNOHANG);
	while (p == -1 && errno == EINTR);
	if (p == r->pid) {
		r->status = status;
		r->reaped = 1;
	} else if (p == -1) {
		r->reaped = 1; /* not our child any more */
	}
}

/* Whether a run still has an open pipe or an unreaped child. */
static int
run_busy(const struct run *r)
{
	return r->fd[0] != -1 || r->fd[1] != -1 || !r->reaped;
}

/*
 * Run the n (at most 8) programs at once and wait until all have exited and
 * closed their output, or timeout_ms have passed; those still running then are
 * killed with their process groups and marked RUN_TIMED_OUT. The output
 * gathered so far is kept either way.
 */
void
run_all(struct run *runs, size_t n, long timeout_ms)
{
	struct pollfd pfd[16];
	struct run *owner[16];
	long deadline, left, wait;
	size_t i, npfd;
	int j, busy, some_exit;

	if (n > 8)
		n = 8;
	deadline = run_now_ms() + timeout_ms;
	for (i = 0; i < n; i++) {
		memset(&runs[i].out, 0, sizeof runs[i].out);
		runs[i].state = RUN_EXITED;
		runs[i].reaped = 0;
		runs[i].status = 0;
		runs[i].error = 0;
		run_spawn(&runs[i]);
	}
	for (;;) {
		busy = some_exit = 0;
		npfd = 0;
		for (i = 0; i < n; i++) {
			if (runs[i].fd[0] == -1 && runs[i].fd[1] == -1)
				run_reap(&runs[i], 0);
			if (!run_busy(&runs[i]))
				continue;
			busy = 1;
			if (runs[i].fd[0] == -1 && runs[i].fd[1] == -1)
				some_exit = 1; /* waiting for the exit only */
			for (j = 0; j < 2; j++) {
				if (runs[i].fd[j] == -1)
					continue;
				pfd[npfd].fd = runs[i].fd[j];
				pfd[npfd].events = POLLIN;
				owner[npfd] = &runs[i];
				npfd++;
			}
		}
		if (!busy)
			return;
		if ((left = deadline - run_now_ms()) <= 0)
			break;
		wait = some_exit && left > 10 ? 10 : left;
		if (poll(pfd, npfd, (int)wait) == -1 && errno != EINTR)
			break;
		for (i = 0; i < npfd; i++) {
			if (pfd[i].revents == 0)
				continue;
			j = owner[i]->fd[0] == pfd[i].fd ? 0 : 1;
			run_read(owner[i], j);
		}
	}

	/* Deadline: kill what is left, wait a little, then give up. */
	for (i = 0; i < n; i++) {
		if (!run_busy(&runs[i]))
			continue;
		run_close(&runs[i], 0);
		run_close(&runs[i], 1);
		if (runs[i].reaped)
			continue; /* exited; a descendant held the pipes */
		kill(-runs[i].pid, SIGKILL);
		kill(runs[i].pid, SIGKILL);
		runs[i].state = RUN_TIMED_OUT;
	}
	deadline = run_now_ms() + RUN_KILL_GRACE_MS;
	for (;;) {
		busy = 0;
		for (i = 0; i < n; i++) {
			run_reap(&runs[i], 0);
			busy |= !runs[i].reaped;
		}
		if (!busy || run_now_ms() >= deadline)
			break;
		poll(NULL, 0, 5);
	}
}

/* Free a run's captured output. */
void
run_free(struct run *r)
{
	run_close(r, 0);
	run_close(r, 1);
	buf_free(&r->out[0]);
	buf_free(&r->out[1]);
}

/*
 * In a forked child about to exec: every catchable signal back to its
 * default and none blocked, as a program started fresh expects (the
 * agent catches some and blocks SIGCHLD). Async-signal-safe.
 */
void
run_child_defaults(void)
{
	sigset_t none;
	int sig;

	for (sig = 1; sig < 32; sig++)
		if (sig != SIGKILL && sig != SIGSTOP)
			signal(sig, SIG_DFL);
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
}

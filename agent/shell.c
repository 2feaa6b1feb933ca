/*
 * The watcher's commands (agent/WATCH.md "Environment of the commands"):
 * a program in its own process group, in $HOME, stdin /dev/null (or a short
 * text), stdout and stderr into one pipe of which the last SHELL_TAIL bytes
 * are kept, with the environment shell_env builds. A command is started
 * held at a gate, so its pid can be journaled before it runs: a watcher
 * killed in between leaves a child that sees the gate close and exits
 * without running anything.
 *
 * run.c runs the report's nvidia-smi; it cannot hold a child at a gate
 * (posix_spawn), which the stop command needs, hence this file.
 */

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "agent.h"
#include "../controller/xmalloc.h"

extern char **environ;

static long shell_now_ms(void);
static void shell_child(
    const int *, int, int, const char *, char *const *, char *const *);
static void shell_keep(struct shell *, const char *, size_t);

/* Milliseconds on the monotonic clock. */
static long
shell_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/*
 * The watcher's environment plus CONTAINER_ID, CONTAINER_API_KEY,
 * RUNPOD_POD_ID, RUNPOD_API_KEY and UUID from proc/1/environ where they are
 * missing from it. Caller frees with shell_env_free.
 */
char **
shell_env(const char *proc)
{
	static const char *names[] = { "CONTAINER_ID", "CONTAINER_API_KEY",
		"RUNPOD_POD_ID", "RUNPOD_API_KEY", "UUID", NULL };
	struct buf b = { NULL, 0, 0 };
	char **env, *path;
	size_t n = 0, i, k, off, nl;

	for (i = 0; environ[i] != NULL; i++)
		n++;
	env = xcalloc(n + 6, sizeof *env);
	for (i = 0; i < n; i++)
		env[i] = xstrdup(environ[i]);
	xasprintf(&path, "%s/1/environ", proc);
	if (buf_read_file(&b, path, 256 * 1024) == 0) {
		for (k = 0; names[k] != NULL; k++) {
			nl = strlen(names[k]);
			if (getenv(names[k]) != NULL)
				continue;
			for (off = 0; off < b.len;
			     off += strlen(b.data + off) + 1) {
				if (strncmp(b.data + off, names[k], nl) == 0 &&
				    b.data[off + nl] == '=') {
					env[n++] = xstrdup(b.data + off);
					break;
				}
			}
		}
	}
	free(path);
	buf_free(&b);
	return env;
}

/* Free an environment from shell_env. */
void
shell_env_free(char **env)
{
	size_t i;

	for (i = 0; env != NULL && env[i] != NULL; i++)
		free(env[i]);
	free(env);
}

/*
 * In the child: own process group, default signals, stdin, output, $HOME;
 * wait at the gate (its write end closed here, so that the watcher's end
 * is the only one), then exec. Only async-signal-safe calls.
 */
static void
shell_child(const int *gate, int in, int out, const char *home,
    char *const *argv, char *const *env)
{
	char go = 0;

	close(gate[1]);
	setpgid(0, 0);
	run_child_defaults();
	if (dup2(in, 0) == -1 || dup2(out, 1) == -1 || dup2(out, 2) == -1)
		_exit(127);
	if (home != NULL && chdir(home) != 0 && chdir("/") != 0)
		_exit(127);
	while (read(gate[0], &go, 1) == -1 && errno == EINTR)
		;
	if (go != 'g')
		_exit(127); /* the watcher died before journaling the start */
	execve(argv[0], argv, env);
	_exit(127);
}

/*
 * Start argv (argv[0] a path) held at the gate, with input (or NULL:
 * /dev/null) on its stdin. 0, or -1 with cause.
 */
int
shell_start(struct shell *sh, char *const *argv, char *const *env,
    const char *input, char **cause)
{
	int gate[2] = { -1, -1 }, in[2] = { -1, -1 }, out[2] = { -1, -1 };
	const char *home = getenv("HOME");

	memset(sh, 0, sizeof *sh);
	sh->gate = sh->out = -1;
	sh->pid = -1;
	if (pipe2(gate, O_CLOEXEC) == -1 || pipe2(out, O_CLOEXEC) == -1 ||
	    pipe2(in, O_CLOEXEC) == -1) {
		xasprintf(cause, "pipe: %s", strerror(errno));
		goto fail;
	}
	if (input == NULL) {
		close(in[1]);
		in[1] = -1;
		close(in[0]);
		if ((in[0] = open("/dev/null", O_RDONLY | O_CLOEXEC)) == -1) {
			xasprintf(cause, "/dev/null: %s", strerror(errno));
			goto fail;
		}
	}
	if ((sh->pid = fork()) == -1) {
		xasprintf(cause, "fork: %s", strerror(errno));
		goto fail;
	}
	if (sh->pid == 0) {
		if (in[1] != -1)
			close(in[1]);
		close(out[0]);
		shell_child(gate, in[0], out[1], home, argv, env);
	}
	setpgid(sh->pid, sh->pid); /* also here, against the race */
	close(gate[0]);
	close(in[0]);
	close(out[1]);
	if (input != NULL) {
		/* Short texts only: they fit in the pipe without blocking. */
		if (write(in[1], input, strlen(input)) == -1)
			(void)0;
		close(in[1]);
	}
	sh->gate = gate[1];
	sh->out = out[0];
	fcntl(sh->out, F_SETFL, O_NONBLOCK);
	return 0;
fail:
	for (int i = 0; i < 2; i++) {
		if (gate[i] != -1)
			close(gate[i]);
		if (in[i] != -1)
			close(in[i]);
		if (out[i] != -1)
			close(out[i]);
	}
	sh->pid = -1;
	return -1;
}

/* Open the gate: the command runs. */
void
shell_release(struct shell *sh)
{
	if (sh->gate != -1) {
		if (write(sh->gate, "g", 1) == -1)
			(void)0;
		close(sh->gate);
		sh->gate = -1;
	}
}

/* Keep the last SHELL_TAIL bytes of the output. */
static void
shell_keep(struct shell *sh, const char *p, size_t n)
{
	if (n >= SHELL_TAIL) {
		memcpy(sh->tail, p + n - SHELL_TAIL, SHELL_TAIL);
		sh->tail_len = SHELL_TAIL;
		return;
	}
	if (sh->tail_len + n > SHELL_TAIL) {
		size_t drop = sh->tail_len + n - SHELL_TAIL;

		memmove(sh->tail, sh->tail + drop, sh->tail_len - drop);
		sh->tail_len -= drop;
	}
	memcpy(sh->tail + sh->tail_len, p, n);
	sh->tail_len += n;
}

/*
 * Wait for the released command to exit, at most timeout_ms: then its
 * group is killed and timed_out set. Returns early, leaving it running,
 * when *stop becomes non-zero (stop may be NULL); sh->reaped says whether
 * it ended.
 */
void
shell_wait(struct shell *sh, long timeout_ms, volatile sig_atomic_t *stop)
{
	struct pollfd pfd;
	char chunk[4096];
	long deadline = shell_now_ms() + timeout_ms, left;
	ssize_t n;
	pid_t p;

	while (!sh->reaped) {
		if (stop != NULL && *stop)
			return;
		if ((left = deadline - shell_now_ms()) <= 0 && !sh->timed_out) {
			kill(-sh->pid, SIGKILL);
			kill(sh->pid, SIGKILL);
			sh->timed_out = 1;
		}
		pfd.fd = sh->out;
		pfd.events = POLLIN;
		if (poll(sh->out != -1 ? &pfd : NULL, sh->out != -1 ? 1 : 0,
			left > 100 ? 100 : (left > 0 ? (int)left : 10)) > 0 &&
		    sh->out != -1) {
			while ((n = read(sh->out, chunk, sizeof chunk)) > 0)
				shell_keep(sh, chunk, (size_t)n);
			if (n == 0) {
				close(sh->out);
				sh->out = -1;
			}
		}
		do
			p = waitpid(sh->pid, &sh->status, WNOHANG);
		while (p == -1 && errno == EINTR);
		if (p == sh->pid || p == -1)
			sh->reaped = 1;
	}
	if (sh->out != -1) {
		while ((n = read(sh->out, chunk, sizeof chunk)) > 0)
			shell_keep(sh, chunk, (size_t)n);
		close(sh->out);
		sh->out = -1;
	}
}

/*
 * Close what is left of a command. One never released sees its gate close
 * and exits without running anything: it is reaped here.
 */
void
shell_close(struct shell *sh)
{
	int held = sh->gate != -1;

	if (sh->gate != -1)
		close(sh->gate);
	if (sh->out != -1)
		close(sh->out);
	sh->gate = sh->out = -1;
	if (held && sh->pid > 0 && !sh->reaped) {
		while (waitpid(sh->pid, &sh->status, 0) == -1 && errno == EINTR)
			;
		sh->reaped = 1;
	}
}

/*
 * The start time (clock ticks after boot, field 22) of proc/PID/stat, or
 * -1 when there is no such process or it is a zombie (a container whose
 * PID 1 reaps nothing keeps those for ever).
 */
long long
shell_pid_start(const char *proc, long long pid)
{
	struct buf b = { NULL, 0, 0 };
	struct host_pstat ps;
	long long r = -1;
	const char *paren;
	char *path;

	xasprintf(&path, "%s/%lld/stat", proc, pid);
	if (buf_read_file(&b, path, 4096) == 0 &&
	    host_parse_pstat(b.data, b.len, &ps) == 0 &&
	    (paren = strrchr(b.data, ')')) != NULL && paren[1] == ' ' &&
	    paren[2] != 'Z' && paren[2] != 'X')
		r = ps.starttime;
	free(path);
	buf_free(&b);
	return r;
}

/*
 * gpufleet-agent serve: the command runner of a held session. The
 * daemon starts it once on each SSH session it holds and sends it the
 * commands of `gpufleet exec`; each runs as sshd would run it (the login
 * shell with -c, stdin /dev/null, in a session of its own), without sshd
 * forking a session process and a shell for every command.
 *
 * The protocol, on the runner's stdin and stdout: frames of a type byte,
 * a 4-byte big-endian length and that many bytes.
 *   runner -> controller  'R' SERVE_HELLO (once, first)
 *                         'O' stdout bytes, 'E' stderr bytes (at most
 *                         SERVE_CHUNK each)
 *                         'X' the exit status, 4 bytes big-endian, or
 *                         'S' the signal that ended it ("TERM"): the
 *                         command's end, once its output is all sent
 *   controller -> runner  'C' a command line (no NUL, at most
 *                         SERVE_COMMAND_MAX), one at a time: the next
 *                         only after the last one's 'X' or 'S'
 * Anything else from the controller, or its end closing (a timeout, a
 * cancel, the session lost), ends the runner, and the command running is
 * hung up on: SIGHUP to its process group, and SIGKILL to the group if
 * the command's shell has not exited SERVE_KILL_GRACE_MS later (what it
 * started with nohup and left running is left alone). A channel's
 * command would be left running by sshd until it wrote to its closed
 * output; a deadline of gpufleet's stops the command.
 */

#include <sys/types.h>
#include <sys/wait.h>

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "agent.h"
#include "../controller/xmalloc.h"
#include "gpufleet/serve.h"

#define SERVE_KILL_GRACE_MS 2000

static int serve_frame(int, const void *, size_t);
static int serve_read(void *, size_t);
static int serve_next(char **);
static const char *serve_shell(void);
static pid_t serve_spawn(const char *, int *, int *);
static void serve_hangup(pid_t);
static int serve_reap(pid_t);
static int serve_run(const char *);

/* Send one frame to the controller; 0, or -1 when it is gone. */
static int
serve_frame(int type, const void *data, size_t len)
{
	unsigned char head[5];

	head[0] = (unsigned char)type;
	head[1] = (unsigned char)(len >> 24);
	head[2] = (unsigned char)(len >> 16);
	head[3] = (unsigned char)(len >> 8);
	head[4] = (unsigned char)len;
	if (buf_write_all(1, head, sizeof head) != 0)
		return -1;
	return len > 0 ? buf_write_all(1, data, len) : 0;
}

/* Read exactly len bytes from stdin; 0, or -1 at its end or an error. */
static int
serve_read(void *p, size_t len)
{
	char *q = p;
	ssize_t n;

	while (len > 0) {
		if ((n = read(0, q, len)) == -1 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		q += n;
		len -= (size_t)n;
	}
	return 0;
}

/*
 * The next command from the controller into *cmd (caller frees); 0, or -1
 * when the controller is gone or sent something else.
 */
static int
serve_next(char **cmd)
{
	unsigned char head[5];
	uint32_t len;
	char *s;

	if (serve_read(head, sizeof head) != 0)
		return -1;
	len = (uint32_t)head[1] << 24 | (uint32_t)head[2] << 16 |
	    (uint32_t)head[3] << 8 | head[4];
	if (head[0] != 'C' || len == 0 || len > SERVE_COMMAND_MAX)
		return -1;
	s = xmalloc(len + 1);
	if (serve_read(s, len) != 0 || memchr(s, '\0', len) != NULL) {
		free(s);
		return -1;
	}
	s[len] = '\0';
	*cmd = s;
	return 0;
}

/* The user's login shell, as sshd runs commands with it. */
static const char *
serve_shell(void)
{
	struct passwd *pw = getpwuid(getuid());

	if (pw == NULL || pw->pw_shell == NULL || pw->pw_shell[0] != '/')
		return "/bin/sh";
	return pw->pw_shell;
}

/*
 * Start "SHELL -c cmd" in a session of its own, stdin /dev/null, its
 * stdout and stderr on the pipes returned in *out and *err. Returns its
 * pid, or -1 (errno set).
 */
static pid_t
serve_spawn(const char *cmd, int *out, int *err)
{
	const char *shell = serve_shell(), *base = strrchr(shell, '/') + 1;
	int o[2] = { -1, -1 }, e[2] = { -1, -1 }, null, saved, i;
	pid_t pid;

	if (pipe2(o, O_CLOEXEC) == -1 || pipe2(e, O_CLOEXEC) == -1)
		goto fail;
	if ((pid = fork()) == -1)
		goto fail;
	if (pid == 0) {
		setsid();
		run_child_defaults();
		if ((null = open("/dev/null", O_RDONLY | O_CLOEXEC)) == -1 ||
		    dup2(null, 0) == -1 || dup2(o[1], 1) == -1 ||
		    dup2(e[1], 2) == -1)
			_exit(127);
		/*
		 * The environment sshd gave the runner's session, less what
		 * the shells that started the runner added: a bash that
		 * finds SHLVL set would not read ~/.bashrc as it does for a
		 * command from sshd.
		 */
		unsetenv("SHLVL");
		unsetenv("_");
		execl(shell, base, "-c", cmd, (char *)NULL);
		dprintf(2, "%s: %s\n", shell, strerror(errno));
		_exit(127);
	}
	close(o[1]);
	close(e[1]);
	*out = o[0];
	*err = e[0];
	return pid;
fail:
	saved = errno;
	for (i = 0; i < 2; i++) {
		if (o[i] != -1)
			close(o[i]);
		if (e[i] != -1)
			close(e[i]);
	}
	errno = saved;
	return -1;
}

/*
 * The controller is gone: hang up on the command's process group; kill
 * the group if the command's shell outlives the grace period.
 */
static void
serve_hangup(pid_t pid)
{
	struct timespec step = { 0, 20 * 1000 * 1000 };
	int waited;

	kill(-pid, SIGHUP);
	kill(-pid, SIGCONT);
	for (waited = 0; waited < SERVE_KILL_GRACE_MS; waited += 20) {
		if (waitpid(pid, NULL, WNOHANG) == pid)
			return;
		nanosleep(&step, NULL);
	}
	kill(-pid, SIGKILL);
	waitpid(pid, NULL, WNOHANG); /* stuck in the kernel: not waited for */
}

/*
 * Wait for the command to exit once its output is closed, still watching
 * the controller's end (a command may close its output and go on).
 * Returns its wait status, or -1 when the controller is gone (the
 * command hung up on).
 */
static int
serve_reap(pid_t pid)
{
	struct pollfd in = { 0, POLLIN, 0 };
	int status, wait_ms = 1;
	pid_t r;

	for (;;) {
		if ((r = waitpid(pid, &status, WNOHANG)) == pid)
			return status;
		if (r == -1 && errno != EINTR)
			return 255 << 8;
		if (poll(&in, 1, wait_ms) == 1) {
			serve_hangup(pid);
			return -1;
		}
		if (wait_ms < 100)
			wait_ms *= 2;
	}
}

/*
 * Run one command, relaying its output; its end as 'X' or 'S' once both
 * of its output pipes are closed and it has exited (as sshd ends a
 * session's channel). Returns 0, or -1 when the controller is gone (the
 * command hung up on).
 */
static int
serve_run(const char *cmd)
{
	struct pollfd pfd[3];
	char buf[SERVE_CHUNK];
	unsigned char st[4];
	const char *name;
	int out, err, status, i;
	ssize_t n;
	pid_t pid;

	if ((pid = serve_spawn(cmd, &out, &err)) == -1) {
		n = snprintf(buf, sizeof buf,
		    "gpufleet-agent: cannot run: %s\n", strerror(errno));
		st[0] = st[1] = st[2] = 0;
		st[3] = 255;
		if (serve_frame('E', buf, (size_t)n) != 0 ||
		    serve_frame('X', st, sizeof st) != 0)
			return -1;
		return 0;
	}
	pfd[0].fd = out;
	pfd[1].fd = err;
	pfd[2].fd = 0;
	for (i = 0; i < 3; i++)
		pfd[i].events = POLLIN;
	while (pfd[0].fd != -1 || pfd[1].fd != -1) {
		if (poll(pfd, 3, -1) == -1) {
			if (errno == EINTR)
				continue;
			break;
		}
		if (pfd[2].revents != 0) {
			/* Nothing may come while a command runs: gone. */
			serve_hangup(pid);
			return -1;
		}
		for (i = 0; i < 2; i++) {
			if (pfd[i].fd == -1 || pfd[i].revents == 0)
				continue;
			if ((n = read(pfd[i].fd, buf, sizeof buf)) == -1 &&
			    (errno == EINTR || errno == EAGAIN))
				continue;
			if (n <= 0) {
				close(pfd[i].fd);
				pfd[i].fd = -1;
				continue;
			}
			if (serve_frame(i == 0 ? 'O' : 'E', buf, (size_t)n) !=
			    0) {
				serve_hangup(pid);
				return -1;
			}
		}
	}
	for (i = 0; i < 2; i++)
		if (pfd[i].fd != -1)
			close(pfd[i].fd);
	if ((status = serve_reap(pid)) == -1)
		return -1;
	if (WIFSIGNALED(status)) {
		name = serve_signame(WTERMSIG(status));
		return serve_frame('S', name, strlen(name));
	}
	status = WIFEXITED(status) ? WEXITSTATUS(status) : 255;
	st[0] = st[1] = st[2] = 0;
	st[3] = (unsigned char)status;
	return serve_frame('X', st, sizeof st);
}

/*
 * The name of signal sig as SSH's exit-signal names it (RFC 4254 6.10),
 * or OpenSSH's name for one it has no name for.
 */
const char *
serve_signame(int sig)
{
	static const struct {
		int sig;
		const char *name;
	} names[] = { { SIGABRT, "ABRT" }, { SIGALRM, "ALRM" },
		{ SIGFPE, "FPE" }, { SIGHUP, "HUP" }, { SIGILL, "ILL" },
		{ SIGINT, "INT" }, { SIGKILL, "KILL" }, { SIGPIPE, "PIPE" },
		{ SIGQUIT, "QUIT" }, { SIGSEGV, "SEGV" }, { SIGTERM, "TERM" },
		{ SIGUSR1, "USR1" }, { SIGUSR2, "USR2" } };
	size_t i;

	for (i = 0; i < sizeof names / sizeof names[0]; i++)
		if (names[i].sig == sig)
			return names[i].name;
	return "SIG@openssh.com";
}

/* gpufleet-agent serve: run the controller's commands until it goes. */
int
serve_main(int argc, char **argv)
{
	char *cmd;

	(void)argv;
	if (argc != 1) {
		fprintf(stderr, "usage: gpufleet-agent serve\n");
		return 2;
	}
	if (serve_frame('R', SERVE_HELLO, strlen(SERVE_HELLO)) != 0)
		return 1;
	while (serve_next(&cmd) == 0) {
		if (serve_run(cmd) != 0) {
			free(cmd);
			return 1;
		}
		free(cmd);
	}
	return 0;
}

/*
 * The command runner (gpufleet-agent serve, agent/serve.c), driven as
 * the controller drives it, over pipes, with the built agent: its hello
 * first; one row per command with the output and the end it must give
 * (exit status, signal name as SSH names it, output held open by a
 * background process); commands one after another on one runner; what
 * ends it (a bad frame, an empty command, its input closing), and that a
 * command running when its input closes is hung up on (one that closed
 * its output too), but not what it left running under nohup.
 */

#include <check.h>
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "gpufleet/serve.h"

#define WAIT_MS 60000 /* generous: a loaded machine is not a broken runner */

struct runner {
	pid_t pid;
	int in;	 /* its stdin */
	int out; /* its stdout */
};

struct serve_case {
	const char *name;
	const char *cmd;
	const char *out; /* its stdout, whole */
	const char *err; /* its stderr, whole */
	int end;	 /* 'X' or 'S' */
	int status;	 /* with 'X' */
	const char *sig; /* with 'S' */
};

static const struct serve_case cases[] = {
	{ "output and a status", "echo out; echo err >&2; exit 7", "out\n",
	    "err\n", 'X', 7, NULL },
	{ "success", "true", "", "", 'X', 0, NULL },
	{ "status 255", "exit 255", "", "", 'X', 255, NULL },
	{ "killed by TERM", "echo before; kill -TERM $$", "before\n", "", 'S',
	    0, "TERM" },
	{ "killed by KILL", "kill -KILL $$", "", "", 'S', 0, "KILL" },
	{ "a signal SSH has no name for", "kill -VTALRM $$", "", "", 'S', 0,
	    "SIG@openssh.com" },
	{ "stdin is empty", "cat; echo done", "done\n", "", 'X', 0, NULL },
	{ "output held open by a background process",
	    "(sleep 1; echo late) & echo now", "now\nlate\n", "", 'X', 0,
	    NULL },
	{ "no SHLVL from the shells that started the runner",
	    "echo ${SHLVL:-unset}", "1\n", "", 'X', 0, NULL },
	{ "a command that is not there", "exec /nonexistent/x 2>/dev/null", "",
	    "", 'X', 127, NULL },
};

/* Start the built agent's runner on pipes, with SHLVL=5 (as a shell
 * that started it would leave it). */
static void
runner_start(struct runner *r)
{
	int in[2], out[2];

	ck_assert_int_eq(pipe(in), 0);
	ck_assert_int_eq(pipe(out), 0);
	r->pid = fork();
	ck_assert_int_ne(r->pid, -1);
	if (r->pid == 0) {
		dup2(in[0], 0);
		dup2(out[1], 1);
		close(in[0]);
		close(in[1]);
		close(out[0]);
		close(out[1]);
		setenv("SHLVL", "5", 1);
		execl(GPUFLEET_AGENT_BIN, "gpufleet-agent", "serve", (char *)0);
		_exit(127);
	}
	close(in[0]);
	close(out[1]);
	r->in = in[1];
	r->out = out[0];
}

/* Read exactly len bytes of the runner's output; 0, or -1 at its end. */
static int
runner_read(struct runner *r, void *p, size_t len)
{
	struct pollfd pfd = { r->out, POLLIN, 0 };
	char *q = p;
	ssize_t n;

	while (len > 0) {
		ck_assert_msg(poll(&pfd, 1, WAIT_MS) == 1,
		    "the runner said nothing for %d ms", WAIT_MS);
		if ((n = read(r->out, q, len)) <= 0)
			return -1;
		q += n;
		len -= (size_t)n;
	}
	return 0;
}

/* The next frame: its type, or -1 at the runner's end. *data: caller
 * frees (NUL-terminated). */
static int
runner_frame(struct runner *r, char **data, size_t *len)
{
	unsigned char head[5];

	if (runner_read(r, head, sizeof head) != 0)
		return -1;
	*len = (size_t)head[1] << 24 | (size_t)head[2] << 16 |
	    (size_t)head[3] << 8 | head[4];
	ck_assert_uint_le(*len, SERVE_FRAME_MAX);
	*data = calloc(1, *len + 1);
	ck_assert_int_eq(runner_read(r, *data, *len), 0);
	return head[0];
}

/*
 * Send one frame of type t, in one write (atomic on a pipe up to
 * PIPE_BUF): a runner that quits at a bad header cannot cut it short.
 */
static void
runner_send(struct runner *r, int t, const char *data, size_t len)
{
	char frame[5 + 4096];

	ck_assert_uint_le(len, sizeof frame - 5);
	frame[0] = (char)t;
	frame[1] = (char)(len >> 24);
	frame[2] = (char)(len >> 16);
	frame[3] = (char)(len >> 8);
	frame[4] = (char)len;
	memcpy(frame + 5, data, len);
	ck_assert_int_eq(write(r->in, frame, 5 + len), (ssize_t)(5 + len));
}

/* Wait for the runner to exit; its wait status. */
static int
runner_wait(struct runner *r)
{
	int status;

	ck_assert_int_eq(waitpid(r->pid, &status, 0), r->pid);
	close(r->in);
	close(r->out);
	return status;
}

/* Start a runner and take its hello. */
static void
runner_hello(struct runner *r)
{
	char *data;
	size_t len;

	runner_start(r);
	ck_assert_int_eq(runner_frame(r, &data, &len), 'R');
	ck_assert_str_eq(data, SERVE_HELLO);
	free(data);
}

START_TEST(test_commands)
{
	const struct serve_case *c = &cases[_i];
	struct runner r;
	char out[4096] = "", err[4096] = "", *data;
	size_t len;
	int t;

	runner_hello(&r);
	/* Twice on one runner: the second as the first. */
	for (int k = 0; k < 2; k++) {
		out[0] = err[0] = '\0';
		runner_send(&r, 'C', c->cmd, strlen(c->cmd));
		while ((t = runner_frame(&r, &data, &len)) == 'O' || t == 'E') {
			strncat(t == 'O' ? out : err, data,
			    sizeof out - strlen(t == 'O' ? out : err) - 1);
			free(data);
		}
		ck_assert_msg(
		    t == c->end, "%s: end %c, wanted %c", c->name, t, c->end);
		ck_assert_str_eq(out, c->out);
		ck_assert_str_eq(err, c->err);
		if (t == 'X') {
			ck_assert_uint_eq(len, 4);
			ck_assert_int_eq((unsigned char)data[3], c->status);
		} else
			ck_assert_str_eq(data, c->sig);
		free(data);
	}
	close(r.in);
	ck_assert_int_eq(runner_frame(&r, &data, &len), -1);
	ck_assert_int_eq(runner_wait(&r), 0);
}
END_TEST

/* Output larger than a frame comes in frames of at most SERVE_CHUNK. */
START_TEST(test_large_output)
{
	const char *cmd = "head -c 300000 /dev/zero";
	struct runner r;
	size_t len, total = 0;
	char *data;
	int t;

	runner_hello(&r);
	runner_send(&r, 'C', cmd, strlen(cmd));
	while ((t = runner_frame(&r, &data, &len)) == 'O') {
		ck_assert_uint_le(len, SERVE_CHUNK);
		ck_assert_uint_gt(len, 0);
		total += len;
		free(data);
	}
	ck_assert_int_eq(t, 'X');
	ck_assert_int_eq(data[3], 0);
	free(data);
	ck_assert_uint_eq(total, 300000);
	close(r.in);
	ck_assert_int_eq(runner_wait(&r), 0);
}
END_TEST

/* What ends the runner: a frame that is not a command, an empty one. */
START_TEST(test_bad_frames)
{
	static const struct {
		int t;
		const char *data;
		size_t len;
	} bad[] = { { 'Z', "echo x", 6 }, { 'C', "", 0 },
		{ 'C', "echo a\0b", 8 } };
	struct runner r;
	char *data;
	size_t len;

	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		runner_hello(&r);
		runner_send(&r, bad[i].t, bad[i].data, bad[i].len);
		ck_assert_int_eq(runner_frame(&r, &data, &len), -1);
		runner_wait(&r);
	}
}
END_TEST

/* Its input closing while a command runs: the command is hung up on. */
START_TEST(test_hangup)
{
	const char *cmd = "echo $$; exec sleep 300";
	struct timespec step = { 0, 50 * 1000 * 1000 };
	struct runner r;
	char *data;
	size_t len;
	long pid;
	int waited;

	runner_hello(&r);
	runner_send(&r, 'C', cmd, strlen(cmd));
	ck_assert_int_eq(runner_frame(&r, &data, &len), 'O');
	pid = strtol(data, NULL, 10);
	free(data);
	ck_assert_int_gt(pid, 1);
	ck_assert_int_eq(kill((pid_t)pid, 0), 0);
	close(r.in);
	r.in = -1;
	ck_assert_int_eq(runner_frame(&r, &data, &len), -1);
	ck_assert_int_ne(runner_wait(&r), 0);
	for (waited = 0; waited < WAIT_MS && kill((pid_t)pid, 0) == 0;
	     waited += 50)
		nanosleep(&step, NULL);
	ck_assert_msg(kill((pid_t)pid, 0) == -1 && errno == ESRCH,
	    "the command (pid %ld) outlived its runner", pid);
}
END_TEST

/*
 * A command that closed its output and goes on is still hung up on when
 * the runner's input closes; what it left running under nohup is not.
 */
START_TEST(test_hangup_quiet)
{
	/* Once nohup has become sleep, SIGHUP is ignored there. */
	const char *cmd =
	    "nohup sleep 301 >/dev/null 2>&1 & p=$!; "
	    "until [ \"$(cat /proc/$p/comm 2>/dev/null)\" = sleep ]; do :; "
	    "done; echo $p $$; exec sleep 300 >/dev/null 2>&1";
	struct timespec step = { 0, 50 * 1000 * 1000 };
	struct runner r;
	char *data, *end;
	size_t len;
	long bg, pid;
	int waited;

	runner_hello(&r);
	runner_send(&r, 'C', cmd, strlen(cmd));
	ck_assert_int_eq(runner_frame(&r, &data, &len), 'O');
	bg = strtol(data, &end, 10);
	pid = strtol(end, NULL, 10);
	free(data);
	ck_assert_int_gt(bg, 1);
	ck_assert_int_gt(pid, 1);
	close(r.in);
	r.in = -1;
	ck_assert_int_eq(runner_frame(&r, &data, &len), -1);
	runner_wait(&r);
	for (waited = 0; waited < WAIT_MS && kill((pid_t)pid, 0) == 0;
	     waited += 50)
		nanosleep(&step, NULL);
	ck_assert_msg(kill((pid_t)pid, 0) == -1,
	    "the quiet command (pid %ld) outlived its runner", pid);
	ck_assert_msg(kill((pid_t)bg, 0) == 0,
	    "what the command started with nohup (pid %ld) was killed", bg);
	kill((pid_t)bg, SIGKILL);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("agent_serve");

	signal(SIGPIPE, SIG_IGN); /* a runner that quit: EPIPE, not death */
	TCase *tc = tcase_create("core");
	SRunner *sr;
	int failed;

	tcase_set_timeout(tc, 120);
	tcase_add_loop_test(
	    tc, test_commands, 0, (int)(sizeof cases / sizeof cases[0]));
	tcase_add_test(tc, test_large_output);
	tcase_add_test(tc, test_bad_frames);
	tcase_add_test(tc, test_hangup);
	tcase_add_test(tc, test_hangup_quiet);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}

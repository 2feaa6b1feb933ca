/*
 * The runner of tracked children (controller/child.c) with real
 * processes: a deadline kills the whole group (a grandchild too), the
 * environment and output files, the exit status and the finish callback
 * on a loop (SIGCHLD), child_kill_all and a child it spares, output to
 * the caller's fds, a gate the child waits on before it runs. Nothing here
 * times anything: a process is waited for with a generous bound.
 */
#include <check.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <event2/event.h>

#include "child.h"

static char dir[64];

static void
setup(void)
{
	snprintf(dir, sizeof dir, "/tmp/gpufleet-child.XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(dir));
}

static void
teardown(void)
{
	char cmd[128];

	snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
	ck_assert_int_eq(system(cmd), 0);
}

/* The first line of path, or "" (it is not there yet). */
static void
slurp(const char *path, char *buf, size_t len)
{
	FILE *fp = fopen(path, "r");

	buf[0] = '\0';
	if (fp == NULL)
		return;
	if (fgets(buf, (int)len, fp) == NULL)
		buf[0] = '\0';
	buf[strcspn(buf, "\n")] = '\0';
	fclose(fp);
}

/* Whether pid is gone (or a zombie: it no longer runs). */
static int
gone(long pid)
{
	char path[64], buf[512], *p;

	snprintf(path, sizeof path, "/proc/%ld/stat", pid);
	slurp(path, buf, sizeof buf);
	if (buf[0] == '\0')
		return 1;
	p = strrchr(buf, ')');
	return p != NULL && p[1] == ' ' && p[2] == 'Z';
}

/* Wait (at most a minute) until pid is gone. */
static int
wait_gone(long pid)
{
	int i;

	for (i = 0; i < 600 && !gone(pid); i++)
		usleep(100 * 1000);
	return gone(pid);
}

/* At its deadline the group goes: the child and the one it started. */
START_TEST(test_deadline_group)
{
	char path[96], cmd[256], buf[64], *cause = NULL;
	char *argv[] = { (char *)"/bin/sh", (char *)"-c", cmd, NULL };
	struct child_spec spec = { .argv = argv, .timeout = 1 };
	struct child_result res;
	long leader, grandchild;

	snprintf(path, sizeof path, "%s/pids", dir);
	/* The grandchild ignores nothing but outlives its parent's exit. */
	snprintf(cmd, sizeof cmd, "sleep 1000 & echo $$ $! > %s; wait", path);
	ck_assert_int_eq(child_run(&spec, &res, &cause), 0);
	ck_assert_int_eq(res.killed, 1);
	slurp(path, buf, sizeof buf);
	ck_assert_int_eq(sscanf(buf, "%ld %ld", &leader, &grandchild), 2);
	ck_assert_int_eq(leader, res.pid);
	ck_assert(wait_gone(grandchild));
	ck_assert(wait_gone(leader));
	cause = child_why(&res, 1);
	ck_assert_str_eq(cause, "it ran past 1s and was killed");
	free(cause);
}
END_TEST

/* A child that ignores SIGTERM is killed after the grace. */
START_TEST(test_deadline_kill)
{
	char cmd[] = "trap '' TERM; while :; do sleep 1; done", *cause = NULL;
	char *argv[] = { (char *)"/bin/sh", (char *)"-c", cmd, NULL };
	struct child_spec spec = { .argv = argv, .timeout = 1 };
	struct child_result res;

	ck_assert_int_eq(child_run(&spec, &res, &cause), 0);
	ck_assert_int_eq(res.killed, 1);
	ck_assert(WIFSIGNALED(res.status));
	ck_assert_int_eq(WTERMSIG(res.status), SIGKILL);
}
END_TEST

/* Its environment additions, stdin, and stdout and stderr in a file. */
START_TEST(test_files)
{
	char in[96], out[96], buf[128], *cause = NULL;
	char cmd[] = "read x; echo \"$FOO $x\"; echo err >&2; exit 3";
	char *argv[] = { (char *)"/bin/sh", (char *)"-c", cmd, NULL };
	char *env[] = { (char *)"FOO=bar=baz", NULL };
	struct child_spec spec = {
		.argv = argv, .env = env, .in = in, .out = out
	};
	struct child_result res;
	FILE *fp;

	snprintf(in, sizeof in, "%s/in", dir);
	snprintf(out, sizeof out, "%s/out", dir);
	ck_assert_ptr_nonnull(fp = fopen(in, "w"));
	fputs("line\n", fp);
	fclose(fp);
	ck_assert_int_eq(child_run(&spec, &res, &cause), 0);
	ck_assert_int_eq(res.killed, 0);
	ck_assert(WIFEXITED(res.status));
	ck_assert_int_eq(WEXITSTATUS(res.status), 3);
	slurp(out, buf, sizeof buf);
	ck_assert_str_eq(buf, "bar=baz line");
	cause = child_why(&res, 0);
	ck_assert_str_eq(cause, "it exited 3");
	free(cause);
	/* A program that is not there: exit 127, why on stderr. */
	argv[0] = (char *)"/nonexistent/program";
	ck_assert_int_eq(child_run(&spec, &res, &cause), 0);
	ck_assert_int_eq(WEXITSTATUS(res.status), 127);
}
END_TEST

static volatile sig_atomic_t termed;

static void
on_term(int sig)
{
	termed = sig;
}

/*
 * SIGTERM to a command in child_run: its child's group goes first (killed
 * 3, a grandchild too), then the command's own handler gets the signal.
 */
START_TEST(test_interrupted)
{
	char path[96], cmd[256], buf[64], *cause = NULL;
	char *argv[] = { (char *)"/bin/sh", (char *)"-c", cmd, NULL };
	struct child_spec spec = { .argv = argv };
	struct child_result res;
	struct sigaction sa;
	long grandchild;

	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_term;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGTERM, &sa, NULL);
	snprintf(path, sizeof path, "%s/pid", dir);
	snprintf(cmd, sizeof cmd,
	    "sleep 1000 & echo $! > %s; kill -TERM $PPID; wait", path);
	ck_assert_int_eq(child_run(&spec, &res, &cause), 0);
	ck_assert_int_eq(res.killed, 3);
	ck_assert_int_eq(termed, SIGTERM);
	slurp(path, buf, sizeof buf);
	ck_assert_int_eq(sscanf(buf, "%ld", &grandchild), 1);
	ck_assert(wait_gone(grandchild));
	cause = child_why(&res, 0);
	ck_assert_str_eq(cause, "it was stopped: gpufleet was interrupted");
	free(cause);
}
END_TEST

/* A signal the command ignores (nohup's SIGHUP) leaves its child alone. */
START_TEST(test_ignored)
{
	char cmd[] = "kill -HUP $PPID; sleep 1; exit 4", *cause = NULL;
	char *argv[] = { (char *)"/bin/sh", (char *)"-c", cmd, NULL };
	struct child_spec spec = { .argv = argv };
	struct child_result res;

	signal(SIGHUP, SIG_IGN);
	ck_assert_int_eq(child_run(&spec, &res, &cause), 0);
	ck_assert_int_eq(res.killed, 0);
	ck_assert(WIFEXITED(res.status));
	ck_assert_int_eq(WEXITSTATUS(res.status), 4);
}
END_TEST

struct seen {
	int done;
	struct child_result res;
};

static void
on_end(const struct child_result *res, void *arg)
{
	struct seen *s = arg;

	s->done++;
	s->res = *res;
}

/* On a loop: reaped on SIGCHLD, the callback once; child_kill_all. */
START_TEST(test_loop)
{
	char quick[] = "exit 5", slow[] = "sleep 1000", *cause = NULL;
	char *a1[] = { (char *)"/bin/sh", (char *)"-c", quick, NULL };
	char *a2[] = { (char *)"/bin/sh", (char *)"-c", slow, NULL };
	struct child_spec s1 = { .argv = a1 }, s2 = { .argv = a2 };
	struct event_base *base = event_base_new();
	struct seen e1 = { 0 }, e2 = { 0 };
	pid_t p1, p2;

	ck_assert_int_eq(child_looping(), 0);
	ck_assert_int_ne(child_start(&s1, on_end, &e1, &p1, &cause), 0);
	free(cause);
	cause = NULL;
	ck_assert_int_eq(child_loop_start(base), 0);
	ck_assert_int_eq(child_start(&s1, on_end, &e1, &p1, &cause), 0);
	ck_assert_int_eq(child_start(&s2, on_end, &e2, &p2, &cause), 0);
	while (e1.done == 0)
		event_base_loop(base, EVLOOP_ONCE);
	ck_assert_int_eq(e1.res.pid, p1);
	ck_assert_int_eq(WEXITSTATUS(e1.res.status), 5);
	ck_assert_uint_eq(child_count(), 1);
	child_kill_all();
	while (e2.done == 0)
		event_base_loop(base, EVLOOP_ONCE);
	ck_assert_int_eq(e2.res.killed, 2);
	ck_assert_int_eq(e1.done, 1);
	ck_assert_uint_eq(child_count(), 0);
	ck_assert(wait_gone(p2));
	child_loop_end();
	event_base_free(base);
}
END_TEST

/* Output to the caller's pipes; a spared child outlives child_kill_all. */
START_TEST(test_fds_spared)
{
	char cmd[] = "echo out; echo err >&2; exec sleep 1000", buf[64];
	char *cause = NULL;
	char *argv[] = { (char *)"/bin/sh", (char *)"-c", cmd, NULL };
	struct child_spec spec = { .argv = argv, .spared = 1 };
	struct event_base *base = event_base_new();
	struct seen e = { 0 };
	int out[2], err[2];
	ssize_t n;
	pid_t pid;

	ck_assert_int_eq(pipe(out), 0);
	ck_assert_int_eq(pipe(err), 0);
	spec.out_fd = out[1];
	spec.err_fd = err[1];
	ck_assert_int_eq(child_loop_start(base), 0);
	ck_assert_int_eq(child_start(&spec, on_end, &e, &pid, &cause), 0);
	close(out[1]);
	close(err[1]);
	ck_assert_int_gt(n = read(out[0], buf, sizeof buf - 1), 0);
	buf[n] = '\0';
	ck_assert_str_eq(buf, "out\n");
	ck_assert_int_gt(n = read(err[0], buf, sizeof buf - 1), 0);
	buf[n] = '\0';
	ck_assert_str_eq(buf, "err\n");
	child_kill_all();
	ck_assert_int_eq(kill(pid, 0), 0); /* spared: still there */
	ck_assert_uint_eq(child_count(), 1);
	kill(-pid, SIGKILL);
	while (e.done == 0)
		event_base_loop(base, EVLOOP_ONCE);
	ck_assert_int_eq(e.res.killed, 0);
	ck_assert(WIFSIGNALED(e.res.status));
	ck_assert_uint_eq(child_count(), 0);
	close(out[0]);
	close(err[0]);
	child_loop_end();
	event_base_free(base);
}
END_TEST

/*
 * A gated child does nothing before its byte: the caller's record comes
 * first; a gate closed without one ends it (exit 0) before it runs.
 */
START_TEST(test_gate)
{
	char out[96], rec[96], buf[64], want[64], cmd[256], *cause = NULL;
	char *argv[] = { (char *)"/bin/sh", (char *)"-c", cmd, NULL };
	struct child_spec spec = { .argv = argv, .out = out };
	struct event_base *base = event_base_new();
	struct seen e = { 0 };
	int gate[2];
	pid_t pid;
	FILE *fp;

	snprintf(out, sizeof out, "%s/out", dir);
	snprintf(rec, sizeof rec, "%s/rec", dir);
	/* It prints what the caller recorded after its start. */
	snprintf(cmd, sizeof cmd, "cat %s 2>/dev/null || echo early", rec);
	ck_assert_int_eq(child_loop_start(base), 0);
	ck_assert_int_eq(pipe(gate), 0);
	spec.gate_r = gate[0];
	spec.gate_w = gate[1];
	ck_assert_int_eq(child_start(&spec, on_end, &e, &pid, &cause), 0);
	close(gate[0]);
	ck_assert_ptr_nonnull(fp = fopen(rec, "w"));
	fprintf(fp, "pid %ld\n", (long)pid);
	fclose(fp);
	ck_assert_int_eq(write(gate[1], "g", 1), 1);
	close(gate[1]);
	while (e.done == 0)
		event_base_loop(base, EVLOOP_ONCE);
	ck_assert_int_eq(WEXITSTATUS(e.res.status), 0);
	slurp(out, buf, sizeof buf);
	snprintf(want, sizeof want, "pid %ld", (long)pid);
	ck_assert_str_eq(buf, want);
	/* Closed without the byte: it exits 0 and runs nothing. */
	unlink(out);
	e.done = 0;
	ck_assert_int_eq(pipe(gate), 0);
	spec.gate_r = gate[0];
	spec.gate_w = gate[1];
	ck_assert_int_eq(child_start(&spec, on_end, &e, &pid, &cause), 0);
	close(gate[0]);
	close(gate[1]);
	while (e.done == 0)
		event_base_loop(base, EVLOOP_ONCE);
	ck_assert(WIFEXITED(e.res.status));
	ck_assert_int_eq(WEXITSTATUS(e.res.status), 0);
	ck_assert_int_ne(access(out, F_OK), 0);
	child_loop_end();
	event_base_free(base);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("child");
	TCase *tc = tcase_create("core");
	SRunner *sr;
	int failed;

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_deadline_group);
	tcase_add_test(tc, test_deadline_kill);
	tcase_add_test(tc, test_files);
	tcase_add_test(tc, test_interrupted);
	tcase_add_test(tc, test_ignored);
	tcase_add_test(tc, test_loop);
	tcase_add_test(tc, test_fds_spared);
	tcase_add_test(tc, test_gate);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? 0 : 1;
}

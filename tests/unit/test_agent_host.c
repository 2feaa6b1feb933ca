/*
 * The agent's host collection (agent/host.c) against captured /proc trees
 * in tests/data/agent/proc, one row per fixture with every value; process
 * titles and /proc/PID/stat lines one row per case; and a smoke check of
 * this machine's /proc.
 */

#include <check.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent.h"

#define NA LLONG_MIN

struct proc_case {
	const char *fixture;
	const char *hostname;
	const char *kernel;
	long long boot_time;
	long long container_start;
	double load[3];
	long long cpus;
	long long mem_total;
	long long mem_available;
	long long rx, tx;
	long long sessions;
};

struct title_case {
	const char *title;
	int session;
};

struct pstat_case {
	const char *line;
	int ok;
	long long pid;
	const char *comm;
	long long ppid, session, tty_nr, starttime;
};

static void check_int(const char *, struct opt_int, long long);

static const struct proc_case proc_cases[] = {
	/*
	 * A docker container on a 64-CPU host: sessions are root@pts/0, a VS
	 * Code remote (root@notty) and its terminal, a Jupyter terminal; not
	 * the tmux pane, the shell under sshd, nor the agent's own notty.
	 */
	{ "container", "autodl-container-7f3a9c1e2b-5d8e4a6f",
	    "5.15.0-86-generic", 1732000000, 1732954321, { 7.92, 8.14, 8.03 },
	    64, 1056515968, 812345678, 98765432109LL, 1234567890, 4 },
	/*
	 * Kernel 3.13: no MemAvailable (MemFree + Buffers + Cached); eth0's
	 * counter runs into the colon. Sessions: the tty2 login only (getty
	 * and screen are not; the agent runs in the ssh pts/0 session).
	 */
	{ "oldkernel", "gpu-vm-0417", "3.13.0-170-generic", 1698765432,
	    1698765432, { 0.0, 0.01, 0.05 }, 8, 61835924, 58770356,
	    4294967296123LL, 987654579, 1 },
	/* --network none (lo only); OpenSSH 9.8 titles; docker exec -it. */
	{ "nonet", "3f9a1c2b7d4e", "6.8.0-45-generic", 1727000000, 1727123456,
	    { 1.25, 0.98, 0.71 }, 16, 131862528, 120123456, 0, 0, 2 },
};

static const struct title_case title_cases[] = {
	{ "sshd: root@pts/0", 1 },
	{ "sshd: ubuntu@notty", 1 },
	{ "sshd: alice@pts/3,pts/4", 1 },
	{ "sshd-session: dev@pts/0", 1 },
	{ "sshd-session: dev@notty", 1 },
	{ "sshd: root [priv]", 0 },
	{ "sshd: root [net]", 0 },
	{ "sshd: root", 0 },
	{ "sshd: [accepted]", 0 },
	{ "sshd: unknown [preauth]", 0 },
	{ "sshd: /usr/sbin/sshd -D [listener] 0 of 10-100 startups", 0 },
	{ "/usr/sbin/sshd -D", 0 },
	{ "sshd: @pts/0", 0 },
	{ "bash", 0 },
	{ "", 0 },
	{ "xsshd: root@pts/0", 0 },
};

static const struct pstat_case pstat_cases[] = {
	{ "28046 (cat) R 28037 28037 791 0 -1 4194304 99 0 0 0 0 0 0 0 20 0 1 "
	  "0 229717 3133440 382 18446744073709551615 1 1 0",
	    1, 28046, "cat", 28037, 791, 0, 229717 },
	{ "1 (my (weird) init) S 0 1 1 34816 1 4194560 5 0 0 0 1 2 0 0 20 0 "
	  "1 0 95432100 12812288 1024\n",
	    1, 1, "my (weird) init", 0, 1, 34816, 95432100 },
	{ "7 (a b) S 1 7 7 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 42", 1, 7, "a b", 1,
	    7, 0, 42 },
	{ "7 () S 1 7 7 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 42", 1, 7, "", 1, 7, 0,
	    42 },
	{ "7 (cut) S 1 7 7 0 -1 0 0 0", 0, 0, NULL, 0, 0, 0, 0 },
	{ "7 (x) S 1 7 7 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 4x2", 0, 0, NULL, 0, 0,
	    0, 0 },
	{ "7 x) S 1 7 7 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 42", 0, 0, NULL, 0, 0,
	    0, 0 },
	{ "7 (x S 1 7 7 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 42", 0, 0, NULL, 0, 0,
	    0, 0 },
	{ "abc (x) S 1 7 7 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 42", 0, 0, NULL, 0,
	    0, 0, 0 },
	{ "", 0, 0, NULL, 0, 0, 0, 0 },
};

/* Check an integer against its expectation (NA: null). */
static void
check_int(const char *what, struct opt_int got, long long want)
{
	if (want == NA) {
		ck_assert_msg(!got.set, "%s: %lld, want null", what, got.v);
		return;
	}
	ck_assert_msg(got.set, "%s: null, want %lld", what, want);
	ck_assert_msg(got.v == want, "%s: %lld, want %lld", what, got.v, want);
}

START_TEST(test_fixture)
{
	const struct proc_case *c = &proc_cases[_i];
	const char *data = getenv("GPUFLEET_TEST_DATA");
	struct host h;
	char *root;
	int i;

	ck_assert_ptr_nonnull(data);
	ck_assert_int_ge(
	    asprintf(&root, "%s/agent/proc/%s", data, c->fixture), 0);
	host_collect(&h, root, "/tmp");
	ck_assert_str_eq(h.hostname, c->hostname);
	ck_assert_str_eq(h.kernel, c->kernel);
	check_int("boot_time", h.boot_time, c->boot_time);
	check_int("container_start", h.container_start, c->container_start);
	for (i = 0; i < 3; i++) {
		ck_assert(h.load[i].set);
		ck_assert_msg(fabs(h.load[i].v - c->load[i]) < 1e-9,
		    "load[%d] %g, want %g", i, h.load[i].v, c->load[i]);
	}
	check_int("cpus", h.cpus, c->cpus);
	check_int("mem_total_kib", h.mem_total_kib, c->mem_total);
	check_int("mem_available_kib", h.mem_available_kib, c->mem_available);
	check_int("net_rx_bytes", h.net_rx_bytes, c->rx);
	check_int("net_tx_bytes", h.net_tx_bytes, c->tx);
	check_int("sessions", h.sessions, c->sessions);
	/* Disks are the live filesystems: their presence only. */
	ck_assert_str_eq(h.disks[0].path, "/");
	ck_assert_str_eq(h.disks[1].path, "/tmp");
	for (i = 0; i < 2; i++) {
		ck_assert(h.disks[i].total_kib.set && h.disks[i].free_kib.set);
		ck_assert(h.disks[i].total_kib.v > 0);
		ck_assert(h.disks[i].free_kib.v <= h.disks[i].total_kib.v);
	}
	host_free(&h);
	free(root);
}
END_TEST

/* A proc root with nothing in it: everything unknown, nothing invented. */
START_TEST(test_empty_root)
{
	struct host h;
	char root[] = "/tmp/agent-empty-XXXXXX";

	ck_assert_ptr_nonnull(mkdtemp(root));
	host_collect(&h, root, "/nonexistent/dir");
	ck_assert_ptr_nonnull(h.hostname); /* from uname(2) */
	ck_assert_ptr_nonnull(h.kernel);
	check_int("boot_time", h.boot_time, NA);
	check_int("container_start", h.container_start, NA);
	ck_assert(!h.load[0].set && !h.load[1].set && !h.load[2].set);
	check_int("cpus", h.cpus, NA);
	check_int("mem_total_kib", h.mem_total_kib, NA);
	check_int("mem_available_kib", h.mem_available_kib, NA);
	check_int("net_rx_bytes", h.net_rx_bytes, NA);
	check_int("sessions", h.sessions, 0);
	ck_assert_str_eq(h.disks[1].path, "/nonexistent/dir");
	check_int("disk total", h.disks[1].total_kib, NA);
	check_int("disk free", h.disks[1].free_kib, NA);
	host_free(&h);
	rmdir(root);
}
END_TEST

/* Write proc/PID/{stat,cmdline,environ} of a process for a built tree;
 * title's arguments and env's entries are separated by '|'. */
static void
put_proc(const char *root, int pid, int ppid, const char *comm,
    const char *title, const char *env)
{
	char path[256];
	FILE *f;

	snprintf(path, sizeof path, "%s/%d", root, pid);
	ck_assert_int_eq(mkdir(path, 0700), 0);
	snprintf(path, sizeof path, "%s/%d/stat", root, pid);
	ck_assert_ptr_nonnull(f = fopen(path, "w"));
	fprintf(f,
	    "%d (%s) S %d %d %d 0 -1 4194560 1 0 0 0 1 1 0 0 20 0 1 0 "
	    "100 1 1 1 1 1 0 0 0 0 0 0 0 0 17 0 0 0 0 0 0\n",
	    pid, comm, ppid, pid, pid);
	fclose(f);
	snprintf(path, sizeof path, "%s/%d/cmdline", root, pid);
	ck_assert_ptr_nonnull(f = fopen(path, "w"));
	for (; *title != '\0'; title++) /* '|' separates arguments */
		fputc(*title == '|' ? '\0' : *title, f);
	fputc('\0', f);
	fclose(f);
	snprintf(path, sizeof path, "%s/%d/environ", root, pid);
	ck_assert_ptr_nonnull(f = fopen(path, "w"));
	for (; *env != '\0'; env++) /* '|' separates entries */
		fputc(*env == '|' ? '\0' : *env, f);
	fputc('\0', f);
	fclose(f);
}

/*
 * The session-mark test knob: two instances' sessions on one /proc, each
 * counted only by the instance whose mark its processes carry; the
 * session process itself (sshd's environment) has no mark.
 */
START_TEST(test_session_mark)
{
	char root[] = "/tmp/agent-mark-XXXXXX", cmd[300];
	struct host h;

	ck_assert_ptr_nonnull(mkdtemp(root));
	put_proc(root, 10, 1, "sshd", "sshd: u@notty", "PATH=/bin");
	put_proc(root, 11, 10, "sh", "sh",
	    "HOME=/h|GPUFLEET_AGENT_SESSION_MARK=t/a");
	put_proc(
	    root, 12, 11, "sleep", "sleep", "GPUFLEET_AGENT_SESSION_MARK=t/a");
	put_proc(root, 20, 1, "sshd", "sshd: u@notty", "PATH=/bin");
	put_proc(root, 21, 20, "sh", "sh", "GPUFLEET_AGENT_SESSION_MARK=t/b");
	put_proc(root, 30, 1, "sshd", "sshd: u@notty", "PATH=/bin");
	put_proc(root, 31, 30, "sh", "sh", "GPUFLEET_AGENT_SESSION_MARK=t/ab");

	unsetenv("GPUFLEET_AGENT_SESSION_MARK");
	host_collect(&h, root, "/tmp");
	check_int("sessions without the knob", h.sessions, 3);
	host_free(&h);
	setenv("GPUFLEET_AGENT_SESSION_MARK", "t/a", 1);
	host_collect(&h, root, "/tmp");
	check_int("sessions of t/a", h.sessions, 1);
	host_free(&h);
	setenv("GPUFLEET_AGENT_SESSION_MARK", "t/c", 1);
	host_collect(&h, root, "/tmp");
	check_int("sessions of t/c", h.sessions, 0);
	host_free(&h);
	setenv("GPUFLEET_AGENT_SESSION_MARK", "", 1);
	host_collect(&h, root, "/tmp");
	check_int("sessions with an empty mark", h.sessions, 3);
	host_free(&h);
	unsetenv("GPUFLEET_AGENT_SESSION_MARK");
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
	ck_assert_int_eq(system(cmd), 0);
}
END_TEST

/* This machine's /proc: the values exist and agree with libc. */
START_TEST(test_live)
{
	struct host h;

	host_collect(&h, "/proc", "/");
	ck_assert(h.boot_time.set && h.boot_time.v > 1000000000);
	ck_assert(
	    h.container_start.set && h.container_start.v >= h.boot_time.v);
	check_int("cpus", h.cpus, sysconf(_SC_NPROCESSORS_ONLN));
	ck_assert(h.mem_total_kib.set && h.mem_available_kib.set);
	ck_assert(h.mem_available_kib.v <= h.mem_total_kib.v);
	ck_assert(h.net_rx_bytes.set && h.sessions.set);
	ck_assert(h.load[0].set);
	host_free(&h);
}
END_TEST

START_TEST(test_title)
{
	const struct title_case *c = &title_cases[_i];

	ck_assert_msg(
	    host_is_ssh_session(c->title) == c->session, "'%s'", c->title);
}
END_TEST

START_TEST(test_pstat)
{
	const struct pstat_case *c = &pstat_cases[_i];
	struct host_pstat ps;
	int r;

	r = host_parse_pstat(c->line, strlen(c->line), &ps);
	if (!c->ok) {
		ck_assert_msg(r == -1, "'%s' parsed", c->line);
		return;
	}
	ck_assert_msg(r == 0, "'%s' not parsed", c->line);
	ck_assert_int_eq(ps.pid, c->pid);
	ck_assert_str_eq(ps.comm, c->comm);
	ck_assert_int_eq(ps.ppid, c->ppid);
	ck_assert_int_eq(ps.session, c->session);
	ck_assert_int_eq(ps.tty_nr, c->tty_nr);
	ck_assert_int_eq(ps.starttime, c->starttime);
}
END_TEST

/*
 * The session gpufleet's daemon holds (a command runner, gpufleet-agent
 * serve, below it, with a command of its own) is nobody's login; other
 * sessions count, one with another gpufleet-agent below it too.
 */
START_TEST(test_daemon_session)
{
	char root[] = "/tmp/agent-held-XXXXXX", cmd[300];
	struct host h;

	ck_assert_ptr_nonnull(mkdtemp(root));
	put_proc(root, 10, 1, "sshd", "sshd: u@notty", "PATH=/bin");
	put_proc(root, 11, 10, "sh", "sh|-c|x", "PATH=/bin");
	put_proc(root, 12, 11, "gpufleet-agent-",
	    "/h/.cache/gpufleet/gpufleet-agent-0123456789abcdef|serve",
	    "PATH=/bin");
	put_proc(root, 13, 12, "python", "python|train.py", "PATH=/bin");
	put_proc(root, 20, 1, "sshd", "sshd: u@notty", "PATH=/bin");
	put_proc(root, 21, 20, "gpufleet-agent-",
	    "/h/.cache/gpufleet/gpufleet-agent-0123456789abcdef|servex",
	    "PATH=/bin");
	put_proc(root, 30, 1, "sshd", "sshd: u@pts/0", "PATH=/bin");
	put_proc(root, 31, 30, "serve", "serve|serve", "PATH=/bin");
	put_proc(root, 40, 1, "sshd", "sshd: u@notty", "PATH=/bin");
	put_proc(
	    root, 41, 40, "gpufleet-agent-", "gpufleet-agent-x", "PATH=/bin");

	unsetenv("GPUFLEET_AGENT_SESSION_MARK");
	host_collect(&h, root, "/tmp");
	check_int("sessions but the daemon's", h.sessions, 3);
	host_free(&h);
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
	ck_assert_int_eq(system(cmd), 0);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("agent_host");
	TCase *tc = tcase_create("core");
	SRunner *sr;
	int failed;

	tcase_set_timeout(tc, 30);
	tcase_add_loop_test(
	    tc, test_fixture, 0, sizeof proc_cases / sizeof proc_cases[0]);
	tcase_add_test(tc, test_empty_root);
	tcase_add_test(tc, test_session_mark);
	tcase_add_test(tc, test_daemon_session);
	tcase_add_test(tc, test_live);
	tcase_add_loop_test(
	    tc, test_title, 0, sizeof title_cases / sizeof title_cases[0]);
	tcase_add_loop_test(
	    tc, test_pstat, 0, sizeof pstat_cases / sizeof pstat_cases[0]);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? 0 : 1;
}

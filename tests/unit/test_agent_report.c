/*
 * The whole report (agent/report.c, agent/progress.c) parsed back with
 * jansson: its schema, the progress file's cap and UTF-8 repair, and the
 * built static gpufleet-agent run on every GPU fixture set, which must
 * print the same document as the library, exit 0, and keep its 5 s bound
 * when nvidia-smi hangs.
 */

#include <check.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "agent.h"
#include "gpufleet/report.h"
#include "gpufleet/version.h"

/* A fixture set the static agent runs on, with the proc tree to read. */
struct bin_case {
	const char *gpus;
	const char *proc;
};

static char *data_path(const char *);
static char *temp_file(const void *, size_t);
static json_t *build(const char *, const char *, const char *);
static json_t *run_agent(const char *, const char *, int *, long *);
static void strip_live(json_t *);
static void check_schema(json_t *);

static const struct bin_case bin_cases[] = {
	{ "a100", "container" },
	{ "h100x8", "nonet" },
	{ "rtx4090", "oldkernel" },
	{ "na", "container" },
	{ "mig", "container" },
	{ "fail", "nonet" },
};

/* GPUFLEET_TEST_DATA/agent/rel. Caller frees. */
static char *
data_path(const char *rel)
{
	const char *d = getenv("GPUFLEET_TEST_DATA");
	char *p;

	ck_assert_ptr_nonnull(d);
	ck_assert_int_ge(asprintf(&p, "%s/agent/%s", d, rel), 0);
	return p;
}

/* A temporary file holding len bytes of data. Caller unlinks and frees. */
static char *
temp_file(const void *data, size_t len)
{
	char *path = strdup("/tmp/agent-progress-XXXXXX");
	int fd;

	ck_assert_int_ge(fd = mkstemp(path), 0);
	ck_assert_int_eq(write(fd, data, len), (ssize_t)len);
	close(fd);
	return path;
}

/*
 * report_build with the fake nvidia-smi on fixture set gpus, proc tree
 * proc and the given progress file; returns the parsed document.
 */
static json_t *
build(const char *gpus, const char *proc, const char *progress)
{
	struct report_opts o;
	json_error_t err;
	char *fake, *dir, *root, *rel, *text;
	json_t *j;

	fake = data_path("fake-nvidia-smi");
	ck_assert_int_ge(asprintf(&rel, "gpus/%s", gpus), 0);
	dir = data_path(rel);
	free(rel);
	ck_assert_int_ge(asprintf(&rel, "proc/%s", proc), 0);
	root = data_path(rel);
	free(rel);
	ck_assert_int_eq(setenv("GPUFLEET_GPU_FIXTURES", dir, 1), 0);
	report_opts_init(&o);
	o.nvidia_smi = fake;
	o.proc = root;
	o.progress = progress;
	o.dir = "/tmp";
	text = report_build(&o, 1732960000);
	ck_assert_msg(text[strlen(text) - 1] == '\n', "no final newline");
	ck_assert_ptr_null(memchr(text, '\n', strlen(text) - 1));
	j = json_loads(text, 0, &err);
	ck_assert_msg(j != NULL, "invalid JSON (%s): %s", err.text, text);
	free(text);
	free(fake);
	free(dir);
	free(root);
	return j;
}

/*
 * Run the built agent's report on fixture set gpus and proc tree proc;
 * returns its parsed output (NULL if none), its exit status and run time.
 */
static json_t *
run_agent(const char *gpus, const char *proc, int *status, long *ms)
{
	char *fake, *dir, *root, *rel, *cmd, out[65536];
	struct timespec t0, t1;
	json_error_t err;
	size_t len = 0, n;
	json_t *j;
	FILE *f;

	fake = data_path("fake-nvidia-smi");
	ck_assert_int_ge(asprintf(&rel, "gpus/%s", gpus), 0);
	dir = data_path(rel);
	free(rel);
	ck_assert_int_ge(asprintf(&rel, "proc/%s", proc), 0);
	root = data_path(rel);
	free(rel);
	ck_assert_int_eq(setenv("GPUFLEET_GPU_FIXTURES", dir, 1), 0);
	ck_assert_int_ge(asprintf(&cmd,
			     "'%s' report --nvidia-smi '%s' --proc '%s' "
			     "--progress /nonexistent/progress --dir=/tmp",
			     GPUFLEET_AGENT_BIN, fake, root),
	    0);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	ck_assert_ptr_nonnull(f = popen(cmd, "r"));
	while ((n = fread(out + len, 1, sizeof out - 1 - len, f)) > 0)
		len += n;
	out[len] = '\0';
	*status = pclose(f);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	*ms = (t1.tv_sec - t0.tv_sec) * 1000 +
	    (t1.tv_nsec - t0.tv_nsec) / 1000000;
	j = json_loads(out, 0, &err);
	ck_assert_msg(j != NULL, "invalid JSON (%s): %s", err.text, out);
	free(fake);
	free(dir);
	free(root);
	free(cmd);
	return j;
}

/* Drop what differs between two runs: the clock and free disk space. */
static void
strip_live(json_t *j)
{
	json_object_del(j, REPORT_KEY_TIME);
	json_object_del(json_object_get(j, REPORT_KEY_HOST), REPORT_KEY_DISKS);
}

/* Every key of the schema, in order, with its JSON type. */
static void
check_schema(json_t *j)
{
	static const char *top[] = { REPORT_KEY_SCHEMA,
		REPORT_KEY_AGENT_VERSION, REPORT_KEY_TIME, REPORT_KEY_HOST,
		REPORT_KEY_GPUS, REPORT_KEY_GPU_ERROR,
		REPORT_KEY_DRIVER_VERSION, REPORT_KEY_CUDA_VERSION,
		REPORT_KEY_PROGRESS, REPORT_KEY_WATCHER, NULL };
	static const char *watcher[] = { REPORT_KEY_WATCHER_STATE,
		REPORT_KEY_WATCHER_PID, REPORT_KEY_WATCHER_CURRENT,
		REPORT_KEY_WATCHER_ERROR, REPORT_KEY_WATCHER_GENERATION,
		REPORT_KEY_WATCHER_PLAN, REPORT_KEY_WATCHER_NOTIFY,
		REPORT_KEY_JOURNAL_EPOCH, REPORT_KEY_JOURNAL,
		REPORT_KEY_JOURNAL_MORE, REPORT_KEY_JOURNAL_URGENT, NULL };
	static const char *host[] = { REPORT_KEY_HOSTNAME, REPORT_KEY_KERNEL,
		REPORT_KEY_BOOT_TIME, REPORT_KEY_CONTAINER_START,
		REPORT_KEY_LOAD, REPORT_KEY_CPUS, REPORT_KEY_MEM_TOTAL_KIB,
		REPORT_KEY_MEM_AVAILABLE_KIB, REPORT_KEY_DISKS,
		REPORT_KEY_NET_RX_BYTES, REPORT_KEY_NET_TX_BYTES,
		REPORT_KEY_SESSIONS, NULL };
	static const char *gpu[] = { REPORT_KEY_GPU_INDEX, REPORT_KEY_GPU_UUID,
		REPORT_KEY_GPU_NAME, REPORT_KEY_GPU_UTIL_GPU,
		REPORT_KEY_GPU_UTIL_MEM, REPORT_KEY_GPU_MEM_USED_MIB,
		REPORT_KEY_GPU_MEM_TOTAL_MIB, REPORT_KEY_GPU_TEMP_C,
		REPORT_KEY_GPU_POWER_W, REPORT_KEY_GPU_POWER_LIMIT_W,
		REPORT_KEY_GPU_PROCESSES, NULL };
	json_t *h, *g, *v, *d;
	const char *key;
	size_t i, k;

	ck_assert(json_is_object(j));
	ck_assert_uint_eq(json_object_size(j), 10);
	for (i = 0; top[i] != NULL; i++)
		ck_assert_msg(
		    json_object_get(j, top[i]) != NULL, "no %s", top[i]);
	ck_assert_int_eq(
	    json_integer_value(json_object_get(j, "schema")), REPORT_SCHEMA);
	ck_assert_str_eq(
	    json_string_value(json_object_get(j, REPORT_KEY_AGENT_VERSION)),
	    GPUFLEET_VERSION);
	ck_assert(json_is_integer(json_object_get(j, REPORT_KEY_TIME)));
	h = json_object_get(j, REPORT_KEY_HOST);
	ck_assert_uint_eq(json_object_size(h), 12);
	for (i = 0; host[i] != NULL; i++)
		ck_assert_msg(
		    json_object_get(h, host[i]) != NULL, "no %s", host[i]);
	ck_assert(json_is_string(json_object_get(h, REPORT_KEY_HOSTNAME)));
	ck_assert(json_is_string(json_object_get(h, REPORT_KEY_KERNEL)));
	ck_assert_uint_eq(
	    json_array_size(json_object_get(h, REPORT_KEY_LOAD)), 3);
	d = json_object_get(h, REPORT_KEY_DISKS);
	ck_assert_uint_eq(json_array_size(d), 2);
	json_array_foreach(d, i, v)
	{
		ck_assert(json_is_string(json_object_get(v, "path")));
		ck_assert(json_is_integer(json_object_get(v, "total_kib")));
		ck_assert(json_is_integer(json_object_get(v, "free_kib")));
	}
	ck_assert(json_is_array(json_object_get(j, REPORT_KEY_GPUS)));
	json_array_foreach(json_object_get(j, REPORT_KEY_GPUS), i, g)
	{
		ck_assert_uint_eq(json_object_size(g), 11);
		k = 0;
		json_object_foreach(g, key, v) ck_assert_str_eq(key, gpu[k++]);
	}
	v = json_object_get(j, REPORT_KEY_GPU_ERROR);
	ck_assert(json_is_null(v) || json_is_string(v));

	/* The watcher section comes last, its keys in order. */
	json_object_foreach(j, key, v) d = v;
	ck_assert_ptr_eq(d, json_object_get(j, REPORT_KEY_WATCHER));
	ck_assert_uint_eq(json_object_size(d), 11);
	k = 0;
	json_object_foreach(d, key, v) ck_assert_str_eq(key, watcher[k++]);
	ck_assert(json_is_string(json_object_get(d, REPORT_KEY_WATCHER_STATE)));
	ck_assert(
	    json_is_boolean(json_object_get(d, REPORT_KEY_WATCHER_CURRENT)));
	ck_assert(
	    json_is_integer(json_object_get(d, REPORT_KEY_WATCHER_GENERATION)));
	ck_assert(json_is_array(json_object_get(d, REPORT_KEY_JOURNAL)));
	ck_assert(json_is_boolean(json_object_get(d, REPORT_KEY_JOURNAL_MORE)));
	ck_assert(json_is_array(json_object_get(d, REPORT_KEY_JOURNAL_URGENT)));
	/* No D/notify.json here: null, never a URL. */
	ck_assert(json_is_null(json_object_get(d, REPORT_KEY_WATCHER_NOTIFY)));
}

START_TEST(test_a100_report)
{
	json_t *j, *g, *p, *h;

	j = build("a100", "container", "/nonexistent/progress");
	check_schema(j);
	ck_assert(json_is_null(json_object_get(j, REPORT_KEY_PROGRESS)));
	ck_assert(json_is_null(json_object_get(j, REPORT_KEY_GPU_ERROR)));
	ck_assert_int_eq(
	    json_integer_value(json_object_get(j, "time")), 1732960000);
	ck_assert_str_eq(
	    json_string_value(json_object_get(j, REPORT_KEY_DRIVER_VERSION)),
	    "535.104.05");
	ck_assert_str_eq(
	    json_string_value(json_object_get(j, REPORT_KEY_CUDA_VERSION)),
	    "12.2");
	g = json_array_get(json_object_get(j, REPORT_KEY_GPUS), 0);
	ck_assert_int_eq(
	    json_integer_value(json_object_get(g, "util_gpu")), 97);
	ck_assert_int_eq(
	    json_integer_value(json_object_get(g, "mem_total_mib")), 81920);
	ck_assert(json_real_value(json_object_get(g, "power_w")) == 312.5);
	ck_assert(
	    json_real_value(json_object_get(g, "power_limit_w")) == 400.0);
	p = json_array_get(json_object_get(g, "processes"), 0);
	ck_assert_int_eq(json_integer_value(json_object_get(p, "pid")), 2841);
	ck_assert_str_eq(
	    json_string_value(json_object_get(p, "name")), "python");
	h = json_object_get(j, REPORT_KEY_HOST);
	ck_assert_int_eq(json_integer_value(json_object_get(h, "sessions")), 4);
	ck_assert_int_eq(
	    json_integer_value(json_object_get(h, "container_start")),
	    1732954321);
	ck_assert(json_real_value(
		      json_array_get(json_object_get(h, "load"), 0)) == 7.92);
	json_decref(j);
}
END_TEST

/* N/A values are JSON null, never numbers. */
START_TEST(test_na_nulls)
{
	static const char *nulls[] = { "util_gpu", "util_mem", "power_w",
		"power_limit_w", NULL };
	json_t *j, *g, *p;
	size_t i;

	j = build("na", "oldkernel", "/nonexistent/progress");
	check_schema(j);
	g = json_array_get(json_object_get(j, REPORT_KEY_GPUS), 0);
	for (i = 0; nulls[i] != NULL; i++)
		ck_assert_msg(json_is_null(json_object_get(g, nulls[i])),
		    "%s is not null", nulls[i]);
	ck_assert(json_is_null(json_object_get(j, REPORT_KEY_CUDA_VERSION)));
	p = json_array_get(json_object_get(g, "processes"), 0);
	ck_assert(json_is_null(json_object_get(p, "mem_mib")));
	json_decref(j);
}
END_TEST

START_TEST(test_progress)
{
	char big[5000], exact[REPORT_PROGRESS_MAX],
	    cut[REPORT_PROGRESS_MAX + 1];
	const char *text;
	json_t *j, *pr;
	char *path;

	/* Short, with invalid UTF-8 and control characters. */
	path = temp_file("epoch 3/10 \xff loss\t0.41\n", 23);
	j = build("a100", "container", path);
	pr = json_object_get(j, REPORT_KEY_PROGRESS);
	ck_assert(json_is_object(pr));
	ck_assert_str_eq(json_string_value(json_object_get(pr, "path")), path);
	ck_assert_str_eq(json_string_value(json_object_get(pr, "text")),
	    "epoch 3/10 \xef\xbf\xbd loss\t0.41\n");
	ck_assert(json_is_false(json_object_get(pr, "truncated")));
	ck_assert(
	    json_integer_value(json_object_get(pr, "mtime")) > 1600000000);
	json_decref(j);
	unlink(path);
	free(path);

	/* Over the cap: the first 4096 bytes, truncated. */
	memset(big, 'x', sizeof big);
	path = temp_file(big, sizeof big);
	j = build("a100", "container", path);
	pr = json_object_get(j, REPORT_KEY_PROGRESS);
	text = json_string_value(json_object_get(pr, "text"));
	ck_assert_uint_eq(strlen(text), REPORT_PROGRESS_MAX);
	ck_assert(json_is_true(json_object_get(pr, "truncated")));
	json_decref(j);
	unlink(path);
	free(path);

	/* Exactly at the cap: whole, not truncated. */
	memset(exact, 'y', sizeof exact);
	path = temp_file(exact, sizeof exact);
	j = build("a100", "container", path);
	pr = json_object_get(j, REPORT_KEY_PROGRESS);
	text = json_string_value(json_object_get(pr, "text"));
	ck_assert_uint_eq(strlen(text), REPORT_PROGRESS_MAX);
	ck_assert(json_is_false(json_object_get(pr, "truncated")));
	json_decref(j);
	unlink(path);
	free(path);

	/* The cap inside a character: the partial character is dropped. */
	memset(cut, 'z', sizeof cut);
	cut[REPORT_PROGRESS_MAX - 1] = '\xc3';
	cut[REPORT_PROGRESS_MAX] = '\xa9';
	path = temp_file(cut, sizeof cut);
	j = build("a100", "container", path);
	pr = json_object_get(j, REPORT_KEY_PROGRESS);
	text = json_string_value(json_object_get(pr, "text"));
	ck_assert_uint_eq(strlen(text), REPORT_PROGRESS_MAX - 1);
	ck_assert_ptr_null(strstr(text, "\xef\xbf\xbd"));
	ck_assert(json_is_true(json_object_get(pr, "truncated")));
	json_decref(j);
	unlink(path);
	free(path);
}
END_TEST

START_TEST(test_expand_home)
{
	char *p;

	ck_assert_int_eq(setenv("HOME", "/home/u", 1), 0);
	ck_assert_str_eq(p = report_expand_home("~/.gpufleet/progress"),
	    "/home/u/.gpufleet/progress");
	free(p);
	ck_assert_str_eq(p = report_expand_home("~"), "/home/u");
	free(p);
	ck_assert_str_eq(p = report_expand_home("/abs/~/x"), "/abs/~/x");
	free(p);
	ck_assert_int_eq(setenv("HOME", "/", 1), 0);
	ck_assert_str_eq(p = report_expand_home("~/x"), "/x");
	free(p);
}
END_TEST

/* The static binary prints what the library builds, and exits 0. */
START_TEST(test_binary)
{
	const struct bin_case *c = &bin_cases[_i];
	json_t *got, *want;
	int status;
	long ms;

	got = run_agent(c->gpus, c->proc, &status, &ms);
	ck_assert_msg(
	    WIFEXITED(status) && WEXITSTATUS(status) == 0, "status %d", status);
	check_schema(got);
	want = build(c->gpus, c->proc, "/nonexistent/progress");
	strip_live(got);
	strip_live(want);
	ck_assert_msg(
	    json_equal(got, want), "%s: binary and library differ", c->gpus);
	json_decref(got);
	json_decref(want);
}
END_TEST

/*
 * A hanging nvidia-smi (it sleeps 60 s): the agent still reports, with the
 * time-out it applied; never sooner than that, however fast the machine.
 */
START_TEST(test_binary_hang)
{
	json_t *j;
	int status;
	long ms;

	ck_assert_int_eq(unsetenv(REPORT_GPU_TIMEOUT_ENV), 0);
	j = run_agent("hang", "container", &status, &ms);
	ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	ck_assert_str_eq(
	    json_string_value(json_object_get(j, REPORT_KEY_GPU_ERROR)),
	    "nvidia-smi timed out after 4.5s");
	ck_assert_uint_eq(
	    json_array_size(json_object_get(j, REPORT_KEY_GPUS)), 0);
	ck_assert_msg(ms >= 4400, "took %ld ms", ms);
	json_decref(j);

	/* The bound can be shortened for tests. */
	ck_assert_int_eq(setenv(REPORT_GPU_TIMEOUT_ENV, "300", 1), 0);
	j = run_agent("hang", "nonet", &status, &ms);
	ck_assert_str_eq(
	    json_string_value(json_object_get(j, REPORT_KEY_GPU_ERROR)),
	    "nvidia-smi timed out after 0.3s");
	ck_assert_msg(ms >= 250, "took %ld ms", ms);
	json_decref(j);
}
END_TEST

START_TEST(test_binary_usage)
{
	static const struct {
		const char *args;
		int status;
		const char *out;
	} cases[] = {
		{ "--version", 0, "gpufleet-agent " GPUFLEET_VERSION "\n" },
		{ "", 2, "" },
		{ "report --bogus", 2, "" },
		{ "report --dir", 2, "" },
		{ "report --proc=", 2, "" },
		{ "status", 2, "" },
	};
	char *cmd, out[256];
	size_t i, n;
	FILE *f;
	int st;

	for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		ck_assert_int_ge(asprintf(&cmd, "'%s' %s 2>/dev/null",
				     GPUFLEET_AGENT_BIN, cases[i].args),
		    0);
		ck_assert_ptr_nonnull(f = popen(cmd, "r"));
		n = fread(out, 1, sizeof out - 1, f);
		out[n] = '\0';
		st = pclose(f);
		ck_assert_msg(
		    WIFEXITED(st) && WEXITSTATUS(st) == cases[i].status,
		    "%s: status %d", cases[i].args, st);
		ck_assert_str_eq(out, cases[i].out);
		free(cmd);
	}
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("agent_report");
	TCase *tc = tcase_create("core");
	SRunner *sr;
	int failed;

	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_a100_report);
	tcase_add_test(tc, test_na_nulls);
	tcase_add_test(tc, test_progress);
	tcase_add_test(tc, test_expand_home);
	tcase_add_loop_test(
	    tc, test_binary, 0, sizeof bin_cases / sizeof bin_cases[0]);
	tcase_add_test(tc, test_binary_hang);
	tcase_add_test(tc, test_binary_usage);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? 0 : 1;
}

/*
 * The agent's GPU collection (agent/gpu.c, agent/run.c): every fixture set
 * of tests/data/agent/gpus is read through tests/data/agent/fake-nvidia-smi
 * exactly as the agent runs the real one, and each parsed value is checked;
 * the edge-case inputs of tests/data/agent/nvidia-smi go to the parsers
 * directly. Then the failure modes: no nvidia-smi, an error exit, a hang.
 */

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent.h"
#include "gpufleet/report.h"

#define NA  LLONG_MIN /* an integer expected to be null */
#define NAW -1.0      /* a power expected to be null */

/* A fixture set as a whole. */
struct set_case {
	const char *set;
	size_t ngpus;
	const char *driver; /* NULL: null */
	const char *cuda;
	size_t nprocs; /* over all GPUs */
};

/* One GPU of a fixture set (or of an edge-case file when set is a path). */
struct gpu_case {
	const char *set;
	size_t i;
	long long index;
	const char *uuid;
	const char *name;
	long long util_gpu, util_mem, mem_used, mem_total, temp;
	double power, limit;
	long long nprocs; /* -1: processes null */
};

/* One process of one GPU. */
struct proc_case {
	const char *set;
	size_t gpu, i;
	long long pid;
	const char *name;
	long long mem;
};

static const char *data_dir(void);
static char *data_path(const char *);
static void collect_set(struct gpu_info *, const char *, long);
static void parse_files(struct gpu_info *, const char *, const char *);
static void load(struct gpu_info *, const char *);
static void check_int(const char *, struct opt_int, long long);
static void check_num(const char *, struct opt_num, double);
static void check_str(const char *, const char *, const char *);
static long elapsed_ms(const struct timespec *);
static int group_alive(pid_t);

static const struct set_case set_cases[] = {
	{ "a100", 2, "535.104.05", "12.2", 2 },
	{ "h100x8", 8, "550.90.07", "12.4", 8 },
	{ "rtx4090", 1, "545.29.06", "12.3", 1 },
	{ "na", 1, "390.157", NULL, 1 },
	{ "mig", 2, "535.183.01", "12.2", 2 },
};

static const struct gpu_case gpu_cases[] = {
	{ "a100", 0, 0, "GPU-4f1e9a2c-7b3d-5e8f-9c2a-3cecef5a0d11",
	    "NVIDIA A100-SXM4-80GB", 97, 45, 74213, 81920, 65, 312.5, 400.0,
	    1 },
	{ "a100", 1, 1, "GPU-8a9c0d1e-2f3b-4c5d-a6e7-8091a2b3c4d5",
	    "NVIDIA A100-SXM4-80GB", 93, 41, 73985, 81920, 63, 298.71, 400.0,
	    1 },
	{ "h100x8", 0, 0, "GPU-3a096533-5ed3-f658-6018-3170205738d1",
	    "NVIDIA H100 80GB HBM3", 100, 61, 72790, 81559, 54, 684.27, 700.0,
	    1 },
	{ "h100x8", 5, 5, "GPU-3bf36a14-c24f-051e-b37f-852a444adf42",
	    "NVIDIA H100 80GB HBM3", 98, 57, 72786, 81559, 50, 630.44, 700.0,
	    1 },
	{ "h100x8", 7, 7, "GPU-1d1d784f-a9b7-4223-18df-d071fdd9a78d",
	    "NVIDIA H100 80GB HBM3", 100, 60, 71410, 81559, 61, 688.53, 700.0,
	    1 },
	{ "rtx4090", 0, 0, "GPU-d1b3f0a4-6c2e-9b71-35e0-8a4f2c6d9e13",
	    "NVIDIA GeForce RTX 4090", 100, 78, 22114, 24564, 71, 441.37, 450.0,
	    1 },
	{ "na", 0, 0, "GPU-6b0e5f7d-1c2a-4e9b-8f3d-2a7c9e1b4d60",
	    "GeForce GTX 750 Ti", NA, NA, 1042, 2000, 37, NAW, NAW, 1 },
	/* MIG: one row per physical GPU, utilization N/A while enabled. */
	{ "mig", 0, 0, "GPU-513536b6-7d19-9063-b049-1e69664bb298",
	    "NVIDIA A100-SXM4-80GB", NA, NA, 36537, 81920, 33, 87.21, 400.0,
	    2 },
	{ "mig", 1, 1, "GPU-d8594bd4-0fc3-8595-e355-7c98138f3b95",
	    "NVIDIA A100-SXM4-80GB", 0, 0, 4, 81920, 31, 61.02, 400.0, 0 },
	/* Edge cases, parsed from the files directly. */
	{ "crlf-spaces.csv", 0, 0, "GPU-0a1b2c3d-4e5f-6789-abcd-ef0123456789",
	    "Tesla V100-SXM2-16GB", 12, 3, 2210, 16160, 41, 57.31, 300.0, -1 },
	{ "crlf-spaces.csv", 1, 1, "GPU-9f8e7d6c-5b4a-3210-fedc-ba9876543210",
	    "Tesla V100-SXM2-16GB", 0, 0, 0, 16160, 36, 42.07, 300.0, -1 },
	{ "header-units-short.csv", 0, 0,
	    "GPU-11111111-2222-3333-4444-555555555555", "NVIDIA A10", 35, 12,
	    9120, 23028, 52, 88.13, 150.0, 3 },
	{ "header-units-short.csv", 1, 1,
	    "GPU-66666666-7777-8888-9999-000000000000", "NVIDIA A10", 7, 2, 512,
	    23028, NA, NAW, NAW, 1 },
	{ "header-units-short.csv", 2, 2,
	    "GPU-aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee", NULL, NA, NA, NA, NA,
	    NA, NAW, NAW, 0 },
	{ "garbage.csv", 0, 0, "GPU-12345678-90ab-cdef-1234-567890abcdef",
	    "NVIDIA GeForce RTX 3090", NA, NA, NA, NA, -3, NAW, NAW, -1 },
};

static const struct proc_case proc_cases[] = {
	{ "a100", 0, 0, 2841, "python", 74200 },
	{ "a100", 1, 0, 2842, "/usr/bin/python3", 73972 },
	{ "h100x8", 3, 0, 118233, "/opt/conda/bin/python3.10", 72776 },
	{ "rtx4090", 0, 0, 31877, "python", 22098 },
	{ "na", 0, 0, 1733, "python3", NA },
	/* MIG processes are listed under their parent GPU. */
	{ "mig", 0, 0, 40112, "python3", 20816 },
	{ "mig", 0, 1, 40398, "python3", 15656 },
	/* Names with spaces and commas, a missing used_memory. */
	{ "header-units-short.csv", 0, 0, 4242, "/home/me/my env/bin/python",
	    8000 },
	{ "header-units-short.csv", 0, 1, 4243,
	    "/data/run,v2/bin/train, worker", 1024 },
	{ "header-units-short.csv", 0, 2, 4244, "/opt/app/serve", NA },
	{ "header-units-short.csv", 1, 0, 5000, NULL, NA },
};

/* The test data directory (GPUFLEET_TEST_DATA, set by ctest). */
static const char *
data_dir(void)
{
	const char *d = getenv("GPUFLEET_TEST_DATA");

	ck_assert_msg(d != NULL, "GPUFLEET_TEST_DATA is not set");
	return d;
}

/* data_dir()/agent/rel. Caller frees. */
static char *
data_path(const char *rel)
{
	char *p;

	ck_assert_int_ge(asprintf(&p, "%s/agent/%s", data_dir(), rel), 0);
	return p;
}

/* Collect through the fake nvidia-smi from the fixture set gpus/set. */
static void
collect_set(struct gpu_info *info, const char *set, long timeout_ms)
{
	char *fake = data_path("fake-nvidia-smi"), *dir, *rel;

	ck_assert_int_ge(asprintf(&rel, "gpus/%s", set), 0);
	dir = data_path(rel);
	ck_assert_int_eq(setenv("GPUFLEET_GPU_FIXTURES", dir, 1), 0);
	gpu_collect(info, fake, timeout_ms, 1);
	free(fake);
	free(dir);
	free(rel);
}

/* Parse an edge-case query file (and an apps file) from nvidia-smi/. */
static void
parse_files(struct gpu_info *info, const char *query, const char *apps)
{
	struct buf b = { NULL, 0, 0 };
	char *path, *rel;

	memset(info, 0, sizeof *info);
	ck_assert_int_ge(asprintf(&rel, "nvidia-smi/%s", query), 0);
	path = data_path(rel);
	ck_assert_int_eq(buf_read_file(&b, path, 0), 0);
	gpu_parse_query(info, b.data, b.len);
	buf_free(&b);
	free(path);
	free(rel);
	if (apps == NULL)
		return;
	ck_assert_int_ge(asprintf(&rel, "nvidia-smi/%s", apps), 0);
	path = data_path(rel);
	ck_assert_int_eq(buf_read_file(&b, path, 0), 0);
	gpu_parse_apps(info, b.data, b.len);
	buf_free(&b);
	free(path);
	free(rel);
}

/* A fixture set by name, or an edge-case file when the name ends .csv. */
static void
load(struct gpu_info *info, const char *set)
{
	if (strstr(set, ".csv") == NULL)
		collect_set(info, set, 20000);
	else if (strcmp(set, "header-units-short.csv") == 0)
		parse_files(info, set, "apps-names.csv");
	else
		parse_files(info, set, NULL);
}

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

/* Check a power against its expectation (NAW: null). */
static void
check_num(const char *what, struct opt_num got, double want)
{
	if (want == NAW) {
		ck_assert_msg(!got.set, "%s: %g, want null", what, got.v);
		return;
	}
	ck_assert_msg(got.set, "%s: null, want %g", what, want);
	ck_assert_msg(
	    fabs(got.v - want) < 1e-9, "%s: %g, want %g", what, got.v, want);
}

/* Check a string (NULL: null). */
static void
check_str(const char *what, const char *got, const char *want)
{
	if (want == NULL)
		ck_assert_msg(got == NULL, "%s: '%s', want null", what, got);
	else {
		ck_assert_msg(got != NULL, "%s: null, want '%s'", what, want);
		ck_assert_str_eq(got, want);
	}
}

/* Milliseconds since start. */
static long
elapsed_ms(const struct timespec *start)
{
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC, &now);
	return (now.tv_sec - start->tv_sec) * 1000 +
	    (now.tv_nsec - start->tv_nsec) / 1000000;
}

/* Whether a process of group pgid is alive (zombies are dead). */
static int
group_alive(pid_t pgid)
{
	char path[64], line[512], state;
	struct dirent *de;
	const char *close;
	int ppid, pgrp, alive = 0;
	FILE *f;
	DIR *d;

	ck_assert_ptr_nonnull(d = opendir("/proc"));
	while ((de = readdir(d)) != NULL && !alive) {
		if (de->d_name[0] < '0' || de->d_name[0] > '9')
			continue;
		snprintf(path, sizeof path, "/proc/%.20s/stat", de->d_name);
		if ((f = fopen(path, "r")) == NULL)
			continue;
		if (fgets(line, sizeof line, f) != NULL &&
		    (close = strrchr(line, ')')) != NULL &&
		    sscanf(close + 1, " %c %d %d", &state, &ppid, &pgrp) == 3 &&
		    pgrp == pgid && state != 'Z' && state != 'X')
			alive = 1;
		fclose(f);
	}
	closedir(d);
	return alive;
}

START_TEST(test_set)
{
	const struct set_case *c = &set_cases[_i];
	struct gpu_info info;
	size_t i, nprocs = 0;

	collect_set(&info, c->set, 20000);
	ck_assert_msg(info.error == NULL, "%s: error %s", c->set, info.error);
	ck_assert_uint_eq(info.ngpus, c->ngpus);
	check_str("driver_version", info.driver_version, c->driver);
	check_str("cuda_version", info.cuda_version, c->cuda);
	for (i = 0; i < info.ngpus; i++) {
		ck_assert_int_eq(info.gpus[i].procs_known, 1);
		nprocs += info.gpus[i].nprocs;
	}
	ck_assert_uint_eq(nprocs, c->nprocs);
	gpu_free(&info);
}
END_TEST

START_TEST(test_gpu)
{
	const struct gpu_case *c = &gpu_cases[_i];
	struct gpu_info info;
	const struct gpu *g;

	load(&info, c->set);
	ck_assert_msg(c->i < info.ngpus, "%s: %zu GPUs", c->set, info.ngpus);
	g = &info.gpus[c->i];
	check_int("index", g->index, c->index);
	check_str("uuid", g->uuid, c->uuid);
	check_str("name", g->name, c->name);
	check_int("util_gpu", g->util_gpu, c->util_gpu);
	check_int("util_mem", g->util_mem, c->util_mem);
	check_int("mem_used_mib", g->mem_used_mib, c->mem_used);
	check_int("mem_total_mib", g->mem_total_mib, c->mem_total);
	check_int("temp_c", g->temp_c, c->temp);
	check_num("power_w", g->power_w, c->power);
	check_num("power_limit_w", g->power_limit_w, c->limit);
	if (c->nprocs < 0)
		ck_assert_int_eq(g->procs_known, 0);
	else {
		ck_assert_int_eq(g->procs_known, 1);
		ck_assert_uint_eq(g->nprocs, (size_t)c->nprocs);
	}
	gpu_free(&info);
}
END_TEST

START_TEST(test_proc)
{
	const struct proc_case *c = &proc_cases[_i];
	struct gpu_info info;
	const struct gpu_proc *p;

	load(&info, c->set);
	ck_assert(c->gpu < info.ngpus);
	ck_assert(c->i < info.gpus[c->gpu].nprocs);
	p = &info.gpus[c->gpu].procs[c->i];
	check_int("pid", p->pid, c->pid);
	check_str("name", p->name, c->name);
	check_int("mem_mib", p->mem_mib, c->mem);
	gpu_free(&info);
}
END_TEST

/* Lines that are not GPUs or processes (no integer index or PID). */
START_TEST(test_skipped_lines)
{
	struct gpu_info info;

	parse_files(&info, "garbage.csv", NULL);
	ck_assert_uint_eq(info.ngpus, 1);
	gpu_free(&info);
	parse_files(&info, "header-units-short.csv", "apps-names.csv");
	ck_assert_uint_eq(info.ngpus, 3);
	ck_assert_uint_eq(info.gpus[0].nprocs, 3);
	ck_assert_uint_eq(info.gpus[1].nprocs, 1);
	gpu_free(&info);
}
END_TEST

/* The banner of plain nvidia-smi: "CUDA Version: N/A" is null. */
START_TEST(test_banner)
{
	static const char old[] = "| NVIDIA-SMI 430.14       Driver Version: "
				  "430.14       CUDA Version: N/A      |\n";
	static const char new[] = "| NVIDIA-SMI 590.48.01              Driver "
				  "Version: 590.48.01      CUDA Version: 13.1"
				  "     |\r\n";
	struct gpu_info info;

	memset(&info, 0, sizeof info);
	gpu_parse_banner(&info, old, sizeof old - 1);
	ck_assert_ptr_null(info.cuda_version);
	ck_assert_str_eq(info.driver_version, "430.14");
	gpu_free(&info);
	gpu_parse_banner(&info, new, sizeof new - 1);
	ck_assert_str_eq(info.cuda_version, "13.1");
	ck_assert_str_eq(info.driver_version, "590.48.01");
	gpu_free(&info);
}
END_TEST

START_TEST(test_not_found)
{
	struct gpu_info info;
	char *path;

	gpu_collect(&info, "/nonexistent/nvidia-smi", 2000, 1);
	ck_assert_str_eq(info.error, REPORT_GPU_ERR_NOT_FOUND);
	ck_assert_uint_eq(info.ngpus, 0);
	gpu_free(&info);

	/* Searched in PATH when not given. */
	ck_assert_int_eq(setenv("PATH", "/nonexistent", 1), 0);
	ck_assert_ptr_null(gpu_find_nvidia_smi("fake-nvidia-smi"));
	path = data_path("fake-nvidia-smi");
	*strrchr(path, '/') = '\0';
	ck_assert_int_eq(setenv("PATH", path, 1), 0);
	free(path);
	path = gpu_find_nvidia_smi("fake-nvidia-smi");
	ck_assert_ptr_nonnull(path);
	ck_assert_ptr_nonnull(strstr(path, "/agent/fake-nvidia-smi"));
	free(path);
}
END_TEST

/*
 * The watcher's sample runs nvidia-smi once (the GPU query), the report
 * three times; counted by a wrapper that logs each call.
 */
START_TEST(test_query_only)
{
	char dir[] = "/tmp/agent-nvsmi-XXXXXX", *wrap, *log, *fake, *gpus;
	struct gpu_info info;
	struct buf b = { NULL, 0, 0 };
	FILE *f;
	size_t i, calls;

	ck_assert_ptr_nonnull(mkdtemp(dir));
	ck_assert_int_ge(asprintf(&wrap, "%s/nvidia-smi", dir), 0);
	ck_assert_int_ge(asprintf(&log, "%s/calls", dir), 0);
	fake = data_path("fake-nvidia-smi");
	gpus = data_path("gpus/a100");
	ck_assert_int_eq(setenv("GPUFLEET_GPU_FIXTURES", gpus, 1), 0);
	ck_assert_ptr_nonnull(f = fopen(wrap, "w"));
	fprintf(f, "#!/bin/sh\necho \"${1-}\" >>'%s'\nexec '%s' \"$@\"\n", log,
	    fake);
	fclose(f);
	ck_assert_int_eq(chmod(wrap, 0700), 0);

	ck_assert_int_ne(fcntl(0, F_GETFD), -1);
	gpu_collect(&info, wrap, 20000, 0);
	gpu_free(&info);
	/* The runs not started had no descriptors to close: stdin is open. */
	ck_assert_int_ne(fcntl(0, F_GETFD), -1);
	gpu_collect(&info, wrap, 20000, 0);
	ck_assert_ptr_null(info.error);
	ck_assert_uint_eq(info.ngpus, 2);
	for (i = 0; i < info.ngpus; i++) {
		ck_assert_int_eq(info.gpus[i].procs_known, 0);
		ck_assert(info.gpus[i].mem_used_mib.set);
	}
	gpu_free(&info);
	ck_assert_int_eq(buf_read_file(&b, log, 4096), 0);
	for (calls = 0, i = 0; i < b.len; i++)
		calls += b.data[i] == '\n';
	ck_assert_uint_eq(calls, 2);
	ck_assert(strncmp(b.data, "--query-gpu=", 12) == 0);
	buf_free(&b);

	gpu_collect(&info, wrap, 20000, 1);
	ck_assert_int_eq(info.gpus[0].procs_known, 1);
	gpu_free(&info);
	ck_assert_int_eq(buf_read_file(&b, log, 4096), 0);
	for (calls = 0, i = 0; i < b.len; i++)
		calls += b.data[i] == '\n';
	ck_assert_uint_eq(calls, 5);
	buf_free(&b);

	unlink(log);
	unlink(wrap);
	rmdir(dir);
	free(wrap);
	free(log);
	free(fake);
	free(gpus);
}
END_TEST

/* A non-zero exit: the first line of its stderr, no GPUs. */
START_TEST(test_fail)
{
	struct gpu_info info;

	collect_set(&info, "fail", 20000);
	ck_assert_str_eq(info.error,
	    "NVIDIA-SMI has failed because it couldn't communicate with the "
	    "NVIDIA driver. Make sure that the latest NVIDIA driver is "
	    "installed and running.");
	ck_assert_uint_eq(info.ngpus, 0);
	ck_assert_ptr_null(info.cuda_version);
	gpu_free(&info);
}
END_TEST

/*
 * A hang (the fake sleeps 60 s): given up at the deadline, never before it
 * (an upper bound would only measure the machine's speed).
 */
START_TEST(test_hang)
{
	struct timespec start;
	struct gpu_info info;
	long ms;

	clock_gettime(CLOCK_MONOTONIC, &start);
	collect_set(&info, "hang", 700);
	ms = elapsed_ms(&start);
	ck_assert_str_eq(info.error, REPORT_GPU_ERR_TIMEOUT_PREFIX "0.7s");
	ck_assert_uint_eq(info.ngpus, 0);
	ck_assert_ptr_null(info.driver_version);
	ck_assert_msg(ms >= 650, "took %ld ms", ms);
	gpu_free(&info);
}
END_TEST

/* run_all kills the whole group (the fake's sleep too) at the deadline. */
START_TEST(test_run_kills_group)
{
	char *fake = data_path("fake-nvidia-smi"),
	     *dir = data_path("gpus/hang");
	char *argv[] = { fake, NULL };
	struct timespec start;
	struct run r;
	int i;

	ck_assert_int_eq(setenv("GPUFLEET_GPU_FIXTURES", dir, 1), 0);
	memset(&r, 0, sizeof r);
	r.argv = argv;
	run_all(&r, 1, 300);
	ck_assert_int_eq(r.state, RUN_TIMED_OUT);
	ck_assert_int_gt(r.pid, 0);
	clock_gettime(CLOCK_MONOTONIC, &start);
	for (i = 0; i < 300 && group_alive(r.pid); i++)
		usleep(10000);
	ck_assert_msg(
	    !group_alive(r.pid), "process group %d still alive", (int)r.pid);
	run_free(&r);

	/* A program that cannot be run is reported, not waited for. */
	argv[0] = "/nonexistent/nvidia-smi";
	memset(&r, 0, sizeof r);
	r.argv = argv;
	run_all(&r, 1, 300);
	ck_assert_int_eq(r.state, RUN_SPAWN_FAILED);
	ck_assert_int_eq(r.error, ENOENT);
	run_free(&r);
	free(fake);
	free(dir);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("agent_gpu");
	TCase *tc = tcase_create("core");
	SRunner *sr;
	int failed;

	tcase_set_timeout(tc, 60);
	tcase_add_loop_test(
	    tc, test_set, 0, sizeof set_cases / sizeof set_cases[0]);
	tcase_add_loop_test(
	    tc, test_gpu, 0, sizeof gpu_cases / sizeof gpu_cases[0]);
	tcase_add_loop_test(
	    tc, test_proc, 0, sizeof proc_cases / sizeof proc_cases[0]);
	tcase_add_test(tc, test_skipped_lines);
	tcase_add_test(tc, test_banner);
	tcase_add_test(tc, test_not_found);
	tcase_add_test(tc, test_query_only);
	tcase_add_test(tc, test_fail);
	tcase_add_test(tc, test_hang);
	tcase_add_test(tc, test_run_kills_group);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? 0 : 1;
}

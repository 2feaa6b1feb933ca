/* gpufleet speed: medians, the units shown, storage and its pruning. */

#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "jobspec.h"
#include "speed.h"

struct median_case {
	double v[8];
	size_t n;
	double want; /* NAN: none */
};

static const struct median_case median_cases[] = {
	{ { 0 }, 0, NAN },
	{ { 7 }, 1, 7 },
	{ { 3, 1, 2 }, 3, 2 },
	/* Even: the mean of the middle two, (2 + 10) / 2. */
	{ { 10, 1, 2, 40 }, 4, 6 },
	{ { 5, 5, 5, 1, 9 }, 5, 5 },
	/* An outlier moves a mean, not the median. */
	{ { 38e6, 37e6, 39e6, 1e3, 40e6, 36e6 }, 6, 37.5e6 },
};

START_TEST(test_median)
{
	const struct median_case *c = &median_cases[_i];
	double v[8];

	memcpy(v, c->v, sizeof v);
	if (isnan(c->want))
		ck_assert(isnan(speed_median(v, c->n)));
	else
		ck_assert_double_eq(speed_median(v, c->n), c->want);
}
END_TEST

static const struct {
	double Bps;
	const char *want;
} rate_cases[] = {
	{ 38e6, "38 MB/s" },
	{ 11.4e6, "11 MB/s" },
	{ 2.54e6, "2.5 MB/s" },
	{ 640e3, "640 kB/s" },
	{ 1.2e9, "1.2 GB/s" },
	{ 999, "999 B/s" },
	{ 0, "0 B/s" },
	/* 9.96 rounds to 10: shown whole, not "10.0". */
	{ 9.96e6, "10 MB/s" },
	{ INFINITY, "-" },
	{ -1, "-" },
};

START_TEST(test_format_rate)
{
	char *s = speed_format_rate(rate_cases[_i].Bps);

	ck_assert_str_eq(s, rate_cases[_i].want);
	free(s);
}
END_TEST

static const struct {
	double ms;
	const char *want;
} rtt_cases[] = {
	{ 120, "120 ms" },
	{ 0.4, "0.4 ms" },
	{ 0, "0.0 ms" },
	{ 9.2, "9.2 ms" },
	{ NAN, "-" },
};

START_TEST(test_format_rtt)
{
	char *s = speed_format_rtt(rtt_cases[_i].ms);

	ck_assert_str_eq(s, rtt_cases[_i].want);
	free(s);
}
END_TEST

START_TEST(test_format_summary)
{
	struct speed_summary s = { "vast", { 11e6, 38e6, 120, 0 }, 6 };
	char *line = speed_format_summary(&s);

	ck_assert_str_eq(
	    line, "download 38 MB/s, upload 11 MB/s, rtt 120 ms over 6 runs");
	free(line);
	s.runs = 1;
	line = speed_format_summary(&s);
	ck_assert_str_eq(
	    line, "download 38 MB/s, upload 11 MB/s, rtt 120 ms over 1 run");
	free(line);
}
END_TEST

START_TEST(test_size_range)
{
	static const struct {
		const char *text;
		long long want; /* -1: refused */
		const char *cause;
	} cases[] = {
		{ "64M", 64LL << 20, NULL },
		{ "1M", 1LL << 20, NULL },
		{ "1G", 1LL << 30, NULL },
		{ "2G", -1, "'2G' is out of range (1M to 1G)" },
		{ "0", -1, "'0' is out of range (1M to 1G)" },
		{ "512K", -1, "'512K' is out of range (1M to 1G)" },
		{ "lots", -1, "'lots' is not a size (e.g. 64M, 1G)" },
	};
	int64_t v;
	char *cause;
	size_t i;

	for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		cause = NULL;
		v = 0;
		if (cases[i].want < 0) {
			ck_assert_int_eq(
			    jobspec_parse_size_range(cases[i].text,
				SPEED_SIZE_MIN, SPEED_SIZE_MAX, &v, &cause),
			    -1);
			ck_assert_str_eq(cause, cases[i].cause);
			free(cause);
		} else {
			ck_assert_int_eq(
			    jobspec_parse_size_range(cases[i].text,
				SPEED_SIZE_MIN, SPEED_SIZE_MAX, &v, &cause),
			    0);
			ck_assert_int_eq(v, cases[i].want);
		}
	}
}
END_TEST

static int
count(struct inventory *inv, const char *sql)
{
	sqlite3_stmt *st;
	int v = -1;

	ck_assert_int_eq(
	    sqlite3_prepare_v2(inv->db, sql, -1, &st, NULL), SQLITE_OK);
	if (sqlite3_step(st) == SQLITE_ROW)
		v = sqlite3_column_int(st, 0);
	sqlite3_finalize(st);
	return v;
}

static void
add_instance(struct inventory *inv, struct instance *in, const char *name,
    const char *provider)
{
	char *cause = NULL;

	instance_init(in);
	in->name = strdup(name);
	in->host = strdup("10.0.0.1");
	free(in->provider);
	in->provider = strdup(provider);
	in->created_at = 1;
	ck_assert_int_eq(inventory_add(inv, in, &cause), 0);
}

/*
 * Storage keeps the newest SPEED_KEEP runs per instance, and the medians
 * per provider cover every run of the provider's instances.
 */
START_TEST(test_store)
{
	char dir[] = "/tmp/gpufleet-speed.XXXXXX", path[64], *cause = NULL;
	struct inventory *inv;
	struct instance in[3];
	struct speed_summary *v;
	struct speed_result res;
	size_t n;
	int i;

	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(path, sizeof path, "%s/fleet.db", dir);
	ck_assert_int_eq(inventory_open(path, &inv, &cause), 0);
	add_instance(inv, &in[0], "v1", "vast");
	add_instance(inv, &in[1], "v2", "vast");
	add_instance(inv, &in[2], "a1", "");

	/* v1: 60 runs at t = 1..60, up = t MB/s: runs 1..10 go. */
	for (i = 1; i <= 60; i++) {
		res.up_Bps = i * 1e6;
		res.down_Bps = 2 * i * 1e6;
		res.rtt_ms = i;
		res.size = 1 << 20;
		ck_assert_int_eq(
		    speed_store(inv, in[0].id, i, &res, &cause), 0);
	}
	ck_assert_int_eq(count(inv, "SELECT count(*) FROM speed"), SPEED_KEEP);
	ck_assert_int_eq(count(inv, "SELECT min(at) FROM speed"), 11);
	ck_assert_int_eq(count(inv, "SELECT max(at) FROM speed"), 60);
	/* v2: one run, not pruned by v1's. */
	res.up_Bps = 1e6;
	res.down_Bps = 1e6;
	res.rtt_ms = 300;
	ck_assert_int_eq(speed_store(inv, in[1].id, 100, &res, &cause), 0);
	ck_assert_int_eq(count(inv,
			     "SELECT count(*) FROM speed WHERE instance_id = "
			     "2"),
	    1);
	/* a1 (no provider): two runs. */
	res.up_Bps = 4e6;
	res.down_Bps = 8e6;
	res.rtt_ms = 2;
	ck_assert_int_eq(speed_store(inv, in[2].id, 100, &res, &cause), 0);
	res.up_Bps = 6e6;
	ck_assert_int_eq(speed_store(inv, in[2].id, 101, &res, &cause), 0);
	/* A rate of 0 is refused by the table's check. */
	res.up_Bps = 0;
	ck_assert_int_lt(speed_store(inv, in[2].id, 102, &res, &cause), 0);
	ck_assert_ptr_nonnull(strstr(cause, "CHECK constraint failed"));
	free(cause);
	cause = NULL;
	ck_assert_int_eq(count(inv,
			     "SELECT count(*) FROM speed WHERE instance_id = "
			     "3"),
	    2);

	ck_assert_int_eq(speed_by_provider(inv, in, 3, &v, &n, &cause), 0);
	ck_assert_uint_eq(n, 2);
	/*
	 * vast: v1's ups 11..60 MB/s and v2's 1 MB/s, 51 values: the 26th
	 * smallest is 35 MB/s (1, then 11..35). Downs: 1 and 22..120 step 2,
	 * the 26th is 70. Round trips: 11..60, then 300: the 26th is 36.
	 */
	ck_assert_str_eq(v[0].provider, "vast");
	ck_assert_uint_eq(v[0].runs, 51);
	ck_assert_double_eq(v[0].median.up_Bps, 35e6);
	ck_assert_double_eq(v[0].median.down_Bps, 70e6);
	ck_assert_double_eq(v[0].median.rtt_ms, 36);
	/* a1: ups 4 and 6 MB/s, median 5. */
	ck_assert_str_eq(v[1].provider, SPEED_NO_PROVIDER);
	ck_assert_uint_eq(v[1].runs, 2);
	ck_assert_double_eq(v[1].median.up_Bps, 5e6);
	ck_assert_double_eq(v[1].median.down_Bps, 8e6);
	ck_assert_double_eq(v[1].median.rtt_ms, 2);
	speed_summary_free(v, n);

	/* Only the instances asked about: v2 alone. */
	ck_assert_int_eq(speed_by_provider(inv, &in[1], 1, &v, &n, &cause), 0);
	ck_assert_uint_eq(n, 1);
	ck_assert_uint_eq(v[0].runs, 1);
	ck_assert_double_eq(v[0].median.rtt_ms, 300);
	speed_summary_free(v, n);

	/* Removing an instance removes its runs. */
	ck_assert_int_eq(inventory_purge(inv, in[0].id, &cause), 0);
	ck_assert_int_eq(count(inv, "SELECT count(*) FROM speed"), 3);
	for (i = 0; i < 3; i++)
		instance_clear(&in[i]);
	inventory_close(inv);
	snprintf(path, sizeof path, "rm -rf %s", dir);
	ck_assert_int_eq(system(path), 0);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("speed");
	TCase *tc = tcase_create("core");
	SRunner *sr;
	int failed;

	tcase_add_loop_test(
	    tc, test_median, 0, sizeof median_cases / sizeof median_cases[0]);
	tcase_add_loop_test(
	    tc, test_format_rate, 0, sizeof rate_cases / sizeof rate_cases[0]);
	tcase_add_loop_test(
	    tc, test_format_rtt, 0, sizeof rtt_cases / sizeof rtt_cases[0]);
	tcase_add_test(tc, test_format_summary);
	tcase_add_test(tc, test_size_range);
	tcase_add_test(tc, test_store);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? 0 : 1;
}

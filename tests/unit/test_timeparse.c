/* TIME arguments, one row per case, against a fixed clock in UTC+8. */

#include <check.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "timeparse.h"

/* 2026-11-30T12:34:56Z */
#define NOW 1796042096LL

struct time_case {
	const char *text;
	int ok;
	long long want;
};

static const struct time_case cases[] = {
	{ "now", 1, NOW },
	{ "2026-11-01T02:00:00Z", 1, 1793498400LL },
	{ "2026-11-01T10:00:00+08:00", 1, 1793498400LL },
	{ "2026-11-01T10:00:00+0800", 1, 1793498400LL },
	{ "2026-11-01T00:30:00-01:30", 1, 1793498400LL },
	/* Local time is Asia/Shanghai (UTC+8, no DST) in this test. */
	{ "2026-11-01 10:00", 1, 1793498400LL },
	{ "2026-11-01T10:00:00", 1, 1793498400LL },
	{ "2026-11-01", 1, 1793462400LL },
	{ "today", 1, 1796054400LL - 86400 },
	{ "yesterday", 1, 1796054400LL - 2 * 86400 },
	{ "-2h", 1, NOW - 7200 },
	{ "-30m", 1, NOW - 1800 },
	{ "-90s", 1, NOW - 90 },
	{ "-7d", 1, NOW - 7 * 86400 },
	{ "-1w", 1, NOW - 7 * 86400 },
	{ "2024-02-29", 1, 1709136000LL },
	{ "2026-02-29", 0, 0 },
	{ "2026-02-31 10:00", 0, 0 },
	{ "2026-13-01", 0, 0 },
	{ "2026-11-01T25:00Z", 0, 0 },
	{ "2026-11-01Z", 0, 0 },
	{ "2026-11-1", 0, 0 },
	{ "-2", 0, 0 },
	{ "-2y", 0, 0 },
	{ "-2hh", 0, 0 },
	{ "2h", 0, 0 },
	{ "", 0, 0 },
	{ "tomorrow", 0, 0 },
	{ "2026-11-01T10:00:00+8", 0, 0 },
	{ "2026-11-01T10:00:00 ", 0, 0 },
};

/* One case of timeparse (or, with next, timeparse_next). */
static void
check_case(const struct time_case *c, int next)
{
	char *cause = NULL;
	int64_t got = 0;
	int r;

	setenv("TZ", "Asia/Shanghai", 1);
	tzset();
	r = (next ? timeparse_next : timeparse)(c->text, NOW, &got, &cause);
	if (!c->ok) {
		ck_assert_msg(
		    r == -1, "'%s' accepted as %lld", c->text, (long long)got);
		ck_assert_ptr_nonnull(strstr(cause, c->text));
		free(cause);
		return;
	}
	ck_assert_msg(r == 0, "'%s' refused: %s", c->text, cause);
	ck_assert_msg(got == c->want, "'%s' gave %lld, want %lld", c->text,
	    (long long)got, c->want);
}

START_TEST(test_time)
{
	check_case(&cases[_i], 0);
}
END_TEST

/* HH:MM is the next such local time; NOW is 20:34:56 in Shanghai. */
static const struct time_case next_cases[] = {
	{ "21:00", 1, 1796054400LL - 86400 + 21 * 3600 },
	{ "02:00", 1, 1796054400LL + 2 * 3600 },
	{ "20:34:56", 1, 1796054400LL + 20 * 3600 + 34 * 60 + 56 },
	{ "20:34:57", 1, 1796054400LL - 86400 + 20 * 3600 + 34 * 60 + 57 },
	{ "00:00", 1, 1796054400LL },
	{ "2026-12-02 02:00", 1, 1796054400LL + 86400 + 2 * 3600 },
	{ "2026-12-01T02:00:00+08:00", 1, 1796054400LL + 2 * 3600 },
	{ "24:00", 0, 0 },
	{ "12:60", 0, 0 },
	{ "2:00", 0, 0 },
	{ "02:00pm", 0, 0 },
};

START_TEST(test_next)
{
	check_case(&next_cases[_i], 1);
}
END_TEST

struct dur_case {
	long long secs;
	const char *want;
};

static const struct dur_case durs[] = {
	{ 0, "0s" },
	{ 59, "59s" },
	{ 60, "1m" },
	{ 3599, "59m" },
	{ 3600, "1h00m" },
	{ 11100, "3h05m" },
	{ 86400, "1d00h" },
	{ 190800, "2d05h" },
	{ -5, "0s" },
};

START_TEST(test_duration)
{
	char *s = timeparse_duration(durs[_i].secs);

	ck_assert_str_eq(s, durs[_i].want);
	free(s);
}
END_TEST

static const struct dur_case exact_durs[] = {
	{ 0, "0s" },
	{ 59, "59s" },
	{ 200, "3m20s" },
	{ 3600, "1h00m00s" },
	{ 7230, "2h00m30s" },
	{ 90061, "1d01h01m01s" },
	{ -5, "0s" },
};

START_TEST(test_duration_exact)
{
	char *s = timeparse_duration_exact(exact_durs[_i].secs);

	ck_assert_str_eq(s, exact_durs[_i].want);
	free(s);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("timeparse");
	TCase *tc = tcase_create("core");
	SRunner *sr;
	int failed;

	tcase_add_loop_test(tc, test_time, 0, sizeof cases / sizeof cases[0]);
	tcase_add_loop_test(
	    tc, test_next, 0, sizeof next_cases / sizeof next_cases[0]);
	tcase_add_loop_test(tc, test_duration, 0, sizeof durs / sizeof durs[0]);
	tcase_add_loop_test(tc, test_duration_exact, 0,
	    sizeof exact_durs / sizeof exact_durs[0]);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? 0 : 1;
}

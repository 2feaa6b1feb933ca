/*
 * The clock skew the probe measures (probe_skew): a report's time against
 * the middle of the host's own round trip, whatever came after the report.
 */

#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "probe.h"

#define N(a) (sizeof(a) / sizeof((a)[0]))

/* Real times in ms around 1796000000 s; monotonic ones from 5000 ms. */
struct skew_case {
	const char *name;
	int64_t rep_time;	 /* the agent's time(NULL) */
	int64_t sent_ms, out_ms; /* monotonic: exec, first byte */
	int64_t out_real_ms;	 /* the first byte, real clock */
	int64_t want;
};

static const struct skew_case skew_cases[] = {
	{ "the same clock, a quick answer", 1796000000, 5000, 5100,
	    1796000000300LL, 0 },
	{ "the same clock, answered just before a second ends", 1796000000,
	    5000, 5100, 1796000000990LL, 0 },
	{ "the same clock, a slow round trip (2 s each way)", 1796000002, 5000,
	    9000, 1796000004400LL, 0 },
	{ "the instance 1 h ahead", 1796003600, 5000, 5200, 1796000000200LL,
	    3600 },
	{ "the instance 90 s behind", 1795999910, 5000, 5200, 1796000000100LL,
	    -90 },
	{ "its second 1 came at our 0.000: 1.5 s, rounds to 2", 1796000001,
	    5000, 5000, 1796000000000LL, 2 },
	{ "its second 0 came at our 0.400: 0.1 s, rounds to 0", 1796000000,
	    5000, 5000, 1796000000400LL, 0 },
	{ "its second -2 came at our 0.000: -1.5 s, rounds to -2", 1795999998,
	    5000, 5000, 1796000000000LL, -2 },
};

START_TEST(test_skew)
{
	const struct skew_case *c = &skew_cases[_i];
	int64_t got =
	    probe_skew(c->rep_time, c->sent_ms, c->out_ms, c->out_real_ms);

	ck_assert_msg(got == c->want, "%s: skew %lld, want %lld", c->name,
	    (long long)got, (long long)c->want);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("probe");
	TCase *tc = tcase_create("core");
	SRunner *sr;
	int failed;

	tcase_add_loop_test(tc, test_skew, 0, N(skew_cases));
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? 0 : 1;
}

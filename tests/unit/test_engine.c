/* The engine's pure parts: the retry backoff. */
#include <check.h>
#include <stdint.h>
#include <stdlib.h>

#include "engine.h"

static const struct {
	int fails;
	unsigned int rnd;
	int64_t want;
} backoff_cases[] = {
	{ 0, 0, 0 },	   /* never failed: no wait */
	{ -1, 999, 0 },	   /* nonsense counts as never */
	{ 1, 0, 500 },	   /* 1 s, jitter 0.5 */
	{ 1, 500, 1000 },  /* 1 s, jitter 1.0 */
	{ 1, 999, 1499 },  /* 1 s, jitter 1.499 */
	{ 1, 1500, 1000 }, /* rnd is taken mod 1000 */
	{ 2, 500, 2000 },  /* doubling */
	{ 3, 500, 4000 },
	{ 9, 500, 256000 },	  /* 2^8 s */
	{ 10, 500, 300000 },	  /* capped at 5 min */
	{ 10, 0, 150000 },	  /* cap, jitter 0.5 */
	{ 1000000, 999, 449700 }, /* huge counts stay capped */
	{ 2147483647, 500, 300000 },
};

START_TEST(test_backoff)
{
	ck_assert_int_eq(
	    engine_backoff_ms(backoff_cases[_i].fails, backoff_cases[_i].rnd),
	    backoff_cases[_i].want);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("engine");
	TCase *tc = tcase_create("core");
	SRunner *sr;
	int failed;

	tcase_add_loop_test(tc, test_backoff, 0,
	    sizeof backoff_cases / sizeof backoff_cases[0]);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? 0 : 1;
}

/*
 * The rotation's table of steps: from each recorded step a host takes the
 * step of the protocol (README "Keys and rotation"), in its order, so the
 * inventory never switches to a key not proven and the old key is never
 * removed before the switch is recorded.
 */

#include <check.h>
#include <stdlib.h>

#include "keys.h"
#include "rotate.h"

static const struct {
	int from;
	int to; /* -1: no step follows */
	enum rotate_script script;
} chain[] = {
	{ KEYS_STEP_NONE, KEYS_STEP_INTENT, ROTATE_NEW_KEY },
	{ KEYS_STEP_INTENT, KEYS_STEP_ADDED, ROTATE_ADD },
	{ KEYS_STEP_ADDED, KEYS_STEP_VERIFIED, ROTATE_LOGIN },
	{ KEYS_STEP_VERIFIED, KEYS_STEP_SWITCHED, ROTATE_SWITCH },
	{ KEYS_STEP_SWITCHED, KEYS_STEP_REMOVED, ROTATE_REMOVE },
	{ KEYS_STEP_REMOVED, KEYS_STEP_REFUSED, ROTATE_REFUSED },
	{ KEYS_STEP_REFUSED, KEYS_STEP_RETIRED, ROTATE_RETIRE },
	{ KEYS_STEP_RETIRED, -1, 0 },
	{ -1, -1, 0 },
	{ 8, -1, 0 },
};

START_TEST(test_step_from)
{
	const struct rotate_step *s = rotate_step_from(chain[_i].from);

	if (chain[_i].to == -1) {
		ck_assert_ptr_null(s);
		return;
	}
	ck_assert_ptr_nonnull(s);
	ck_assert_int_eq(s->from, chain[_i].from);
	ck_assert_int_eq(s->to, chain[_i].to);
	ck_assert_int_eq(s->script, chain[_i].script);
}
END_TEST

/* The loop's walk from a new rotation visits steps 1..7 once, in order. */
START_TEST(test_walk)
{
	const struct rotate_step *s;
	int n = 0;

	for (s = rotate_step_from(KEYS_STEP_NONE); s != NULL;
	     s = rotate_step_from(s->to)) {
		ck_assert_int_lt(n, KEYS_STEP_RETIRED);
		ck_assert_int_eq(s->to, ++n);
	}
	ck_assert_int_eq(n, KEYS_STEP_RETIRED);
}
END_TEST

static Suite *
rotate_suite(void)
{
	Suite *s = suite_create("rotate");
	TCase *tc = tcase_create("core");

	tcase_add_loop_test(
	    tc, test_step_from, 0, (int)(sizeof chain / sizeof chain[0]));
	tcase_add_test(tc, test_walk);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	SRunner *sr = srunner_create(rotate_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}

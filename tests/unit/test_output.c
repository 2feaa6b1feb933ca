/*
 * Tables (controller/output.c): cells are escaped for the terminal and
 * aligned on their escaped width; a raw table prints cells as given.
 */

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd.h"

/* Print t into a string. Caller frees. */
static char *
printed(struct table *t)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	ck_assert_ptr_nonnull(f);
	table_print(t, f);
	fclose(f);
	return buf;
}

START_TEST(test_escaped)
{
	struct table *t = table_new(2, "NAME", "HOST");
	char *s;

	table_add(t, "a\033]0;title\a\033[2J", "h\r\n\xc2\x9b");
	table_add(t, "b", NULL);
	s = printed(t);
	ck_assert_str_eq(s,
	    "NAME                HOST\n"
	    "a\\e]0;title\\a\\e[2J  h\\r\\n\\xc2\\x9b\n"
	    "b                   -\n");
	free(s);
	table_free(t);
}
END_TEST

START_TEST(test_raw)
{
	struct table *t = table_new(2, "A", "B");
	char *s;

	table_raw(t);
	table_add(t, "\033[33m5\033[0m", "x");
	s = printed(t);
	ck_assert_str_eq(s, "A           B\n\033[33m5\033[0m  x\n");
	free(s);
	table_free(t);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("output");
	TCase *tc = tcase_create("core");
	SRunner *sr;
	int failed;

	tcase_add_test(tc, test_escaped);
	tcase_add_test(tc, test_raw);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}

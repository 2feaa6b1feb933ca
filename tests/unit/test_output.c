/*
 * Tables (controller/output.c): cells are escaped for the terminal and
 * aligned on their escaped width; a raw table prints cells as given. CSV
 * records are RFC 4180, escaped the same way and safe from formulas.
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

/* One CSV field as csv_row prints it (a record of one, CRLF ended). */
static const struct {
	const char *cell, *want;
} csv_cells[] = {
	{ "a100-1", "a100-1\r\n" },
	{ NULL, "\r\n" },
	{ "", "\r\n" },
	{ "9.20", "9.20\r\n" },
	{ "-1.5", "-1.5\r\n" },
	{ "-12", "-12\r\n" },
	/* Formulas stay text. */
	{ "=cmd|' /C calc'!A0", "'=cmd|' /C calc'!A0\r\n" },
	{ "+1+2", "'+1+2\r\n" },
	{ "-1+2", "'-1+2\r\n" },
	{ "-", "'-\r\n" },
	{ "@SUM(A1:A2)", "'@SUM(A1:A2)\r\n" },
	{ "1.", "1.\r\n" },
	/* Quoted where RFC 4180 needs it, quotes doubled. */
	{ "a,b", "\"a,b\"\r\n" },
	{ "say \"hi\"", "\"say \"\"hi\"\"\"\r\n" },
	{ "=HYPERLINK(\"x\",\"y\")",
	    "\"'=HYPERLINK(\"\"x\"\",\"\"y\"\")\"\r\n" },
	/* Escaped for the terminal: no CR, LF or ESC reach it. */
	{ "a\r\nb\033[2J", "a\\r\\nb\\e[2J\r\n" },
	{ "\tx", "\\tx\r\n" },
};

START_TEST(test_csv_cell)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	ck_assert_ptr_nonnull(f);
	csv_row(f, 1, csv_cells[_i].cell);
	fclose(f);
	ck_assert_str_eq(buf, csv_cells[_i].want);
	free(buf);
}
END_TEST

START_TEST(test_csv_row)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	ck_assert_ptr_nonnull(f);
	csv_row(f, 3, "day", "currency", "total");
	csv_row(f, 3, "2026-11-02", "CNY", "8.4098");
	csv_row(f, 3, "x", NULL, "");
	fclose(f);
	ck_assert_str_eq(
	    buf, "day,currency,total\r\n2026-11-02,CNY,8.4098\r\nx,,\r\n");
	free(buf);
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
	tcase_add_loop_test(tc, test_csv_cell, 0,
	    (int)(sizeof csv_cells / sizeof csv_cells[0]));
	tcase_add_test(tc, test_csv_row);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}

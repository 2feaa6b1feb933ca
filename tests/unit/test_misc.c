/*
 * misc.c: XDG paths, mkdir -p, shell quoting and the ~/ rule, capped
 * buffers and sets of names, one row per case.
 */

#include <sys/stat.h>

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "misc.h"

START_TEST(test_xdg_path)
{
	static const struct {
		const char *xdg, *home, *want;
	} rows[] = {
		{ "/x/data", "/home/u", "/x/data/gpufleet/fleet.db" },
		{ NULL, "/home/u", "/home/u/.local/share/gpufleet/fleet.db" },
		/* A relative XDG variable is ignored, as the spec says. */
		{ "rel", "/home/u", "/home/u/.local/share/gpufleet/fleet.db" },
		{ NULL, "", "./.local/share/gpufleet/fleet.db" },
	};
	size_t i;
	char *p;

	for (i = 0; i < sizeof rows / sizeof rows[0]; i++) {
		if (rows[i].xdg != NULL)
			setenv("XDG_DATA_HOME", rows[i].xdg, 1);
		else
			unsetenv("XDG_DATA_HOME");
		setenv("HOME", rows[i].home, 1);
		p = misc_xdg_path(
		    "XDG_DATA_HOME", ".local/share", "gpufleet/fleet.db");
		ck_assert_str_eq(p, rows[i].want);
		free(p);
	}
}
END_TEST

START_TEST(test_quote)
{
	static const struct {
		const char *in, *sh, *any, *path;
	} rows[] = {
		{ "", "''", "''", "''" },
		{ "a b", "'a b'", "'a b'", "'a b'" },
		{ "it's", "'it'\\''s'", "'it'\\''s'", "'it'\\''s'" },
		{ "a\\b", "'a\\b'", "'a'\\\\'b'", "'a\\b'" },
		{ "~/.ssh/authorized_keys", "'~/.ssh/authorized_keys'",
		    "'~/.ssh/authorized_keys'",
		    "\"$HOME\"/'.ssh/authorized_keys'" },
		{ "~user/x", "'~user/x'", "'~user/x'", "'~user/x'" },
	};
	size_t i;
	char *q;

	for (i = 0; i < sizeof rows / sizeof rows[0]; i++) {
		q = misc_shell_quote(rows[i].in);
		ck_assert_str_eq(q, rows[i].sh);
		free(q);
		q = misc_quote_any_shell(rows[i].in);
		ck_assert_str_eq(q, rows[i].any);
		free(q);
		q = misc_quote_path(rows[i].in);
		ck_assert_str_eq(q, rows[i].path);
		free(q);
	}
}
END_TEST

START_TEST(test_quote_argv)
{
	char *argv[] = { "echo", "it's", "a b", "" };
	char *q;

	q = misc_quote_argv(0, argv);
	ck_assert_str_eq(q, "");
	free(q);
	q = misc_quote_argv(4, argv);
	ck_assert_str_eq(q, "'echo' 'it'\\''s' 'a b' ''");
	free(q);
}
END_TEST

START_TEST(test_expand_home)
{
	char *p;

	setenv("HOME", "/home/u", 1);
	p = misc_expand_home("~/.ssh/id_ed25519");
	ck_assert_str_eq(p, "/home/u/.ssh/id_ed25519");
	free(p);
	p = misc_expand_home("/etc/key");
	ck_assert_str_eq(p, "/etc/key");
	free(p);
	p = misc_expand_home("~other/key");
	ck_assert_str_eq(p, "~other/key");
	free(p);
}
END_TEST

/* Parents are made 0700 whatever the umask; a file in the way is named. */
START_TEST(test_mkdirs)
{
	char tmpl[] = "/tmp/gpufleet-misc-XXXXXX", *d, *f, *cause = NULL;
	struct stat sb;
	mode_t old;

	ck_assert_ptr_nonnull(mkdtemp(tmpl));
	ck_assert_int_gt(asprintf(&d, "%s/a/b/c", tmpl), 0);
	old = umask(0);
	ck_assert_int_eq(misc_mkdirs(d, &cause), 0);
	umask(old);
	ck_assert_int_eq(stat(d, &sb), 0);
	ck_assert_int_eq(sb.st_mode & 0777, 0700);
	ck_assert_int_eq(misc_mkdirs(d, &cause), 0);

	ck_assert_int_gt(asprintf(&f, "%s/file", tmpl), 0);
	fclose(fopen(f, "w"));
	free(d);
	ck_assert_int_gt(asprintf(&d, "%s/sub", f), 0);
	ck_assert_int_eq(misc_mkdirs(d, &cause), -1);
	ck_assert_ptr_nonnull(strstr(cause, "cannot create directory"));
	ck_assert_ptr_nonnull(strstr(cause, f));
	free(cause);
	free(d);
	free(f);
}
END_TEST

START_TEST(test_buf)
{
	static const struct {
		size_t max;
		const char *want;
		int truncated;
	} rows[] = {
		{ 0, "abcdefgh", 0 },
		{ 8, "abcdefgh", 0 },
		{ 5, "abcde", 1 },
		{ 2, "ab", 1 },
	};
	struct misc_buf b;
	size_t i;

	for (i = 0; i < sizeof rows / sizeof rows[0]; i++) {
		memset(&b, 0, sizeof b);
		misc_buf_add(&b, "abc", 3, rows[i].max);
		misc_buf_add(&b, "", 0, rows[i].max);
		misc_buf_add(&b, "defgh", 5, rows[i].max);
		ck_assert_str_eq(b.data, rows[i].want);
		ck_assert_uint_eq(b.len, strlen(rows[i].want));
		ck_assert_int_eq(b.truncated, rows[i].truncated);
		free(b.data);
	}
}
END_TEST

START_TEST(test_names_add)
{
	static const char *const in[] = { "tag_a", "provider_x", "tag_a",
		"tag_b", "provider_x" };
	static const char *const want[] = { "tag_a", "provider_x", "tag_b" };
	static const size_t index[] = { 0, 1, 0, 2, 1 };
	char **names = NULL;
	size_t n = 0, i;

	for (i = 0; i < sizeof in / sizeof in[0]; i++)
		ck_assert_uint_eq(
		    misc_names_add(&names, &n, strdup(in[i])), index[i]);
	ck_assert_uint_eq(n, 3);
	for (i = 0; i < n; i++) {
		ck_assert_str_eq(names[i], want[i]);
		free(names[i]);
	}
	free(names);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("misc");
	TCase *tc = tcase_create("core");
	SRunner *sr;
	int failed;

	tcase_add_test(tc, test_xdg_path);
	tcase_add_test(tc, test_quote);
	tcase_add_test(tc, test_quote_argv);
	tcase_add_test(tc, test_expand_home);
	tcase_add_test(tc, test_mkdirs);
	tcase_add_test(tc, test_buf);
	tcase_add_test(tc, test_names_add);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? 0 : 1;
}

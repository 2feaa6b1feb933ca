/*
 * The log: a file for a process without a terminal (created 0600, never
 * through a symbolic link, each line dated and escaped), and libevent's
 * messages routed into it.
 */
#include <sys/stat.h>

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>
#include <event2/event_struct.h>

#include "log.h"

static char dir[] = "/tmp/test_log.XXXXXX";

/* The whole file at path, NUL-terminated. Caller frees. */
static char *
slurp(const char *path)
{
	static char buf[8192];
	FILE *f = fopen(path, "r");
	size_t n;

	ck_assert_ptr_nonnull(f);
	n = fread(buf, 1, sizeof buf - 1, f);
	fclose(f);
	buf[n] = '\0';
	return strdup(buf);
}

START_TEST(test_log_file)
{
	char path[64], *cause = NULL, *got;
	struct event_base *base;
	struct event ev;
	struct stat st;

	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(path, sizeof path, "%s/gpufleet.log", dir);
	umask(022);
	ck_assert_int_eq(log_open_file(path, &cause), 0);
	ck_assert_int_eq(stat(path, &st), 0);
	ck_assert_int_eq(st.st_mode & 0777, 0600);

	log_set_level(LOG_DEBUG);
	log_hook_libraries();
	error("host %s said \x1b]0;owned\a", "a100-1");
	debug_f("a debug line");
	/* libevent's own complaint, through its log callback. */
	base = event_base_new();
	ck_assert_int_eq(
	    event_assign(&ev, base, -1, EV_SIGNAL | EV_READ, NULL, NULL), -1);
	event_base_free(base);
	log_close_file();

	got = slurp(path);
	ck_assert_msg(
	    strstr(got, "Z gpufleet: host a100-1 said \\e]0;owned\\a\n") !=
		NULL,
	    "[%s]", got);
	ck_assert_msg(strstr(got, "Z gpufleet: debug: ") != NULL &&
		strstr(got, ": a debug line\n") != NULL,
	    "[%s]", got);
	ck_assert_msg(
	    strstr(got, "Z gpufleet: warning: libevent: event_assign: ") !=
		NULL,
	    "[%s]", got);
	/* Every line starts with its UTC time. */
	ck_assert_msg(
	    got[4] == '-' && got[10] == 'T' && got[19] == 'Z', "[%s]", got);
	free(got);
	unlink(path);
	rmdir(dir);
}
END_TEST

START_TEST(test_log_file_symlink)
{
	char path[64], *cause = NULL;

	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(path, sizeof path, "%s/link.log", dir);
	ck_assert_int_eq(symlink("/etc/passwd", path), 0);
	ck_assert_int_eq(log_open_file(path, &cause), -1);
	ck_assert_ptr_nonnull(strstr(cause, "cannot open log"));
	free(cause);
	unlink(path);
	rmdir(dir);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("log");
	TCase *tc = tcase_create("core");
	SRunner *sr;
	int failed;

	tcase_add_test(tc, test_log_file);
	tcase_add_test(tc, test_log_file_symlink);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? 0 : 1;
}

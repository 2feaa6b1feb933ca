/*
 * xfer.c's pure parts: the rsync command line, remote paths, the lines of
 * rsync's --info=progress2 and --stats, sizes and path checks, one row per
 * case.
 */

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "misc.h"
#include "xfer.h"
#include "xmalloc.h"

/* argv joined with " | " so a row can state it in one string. */
static char *
joined(char **argv)
{
	struct misc_buf b = { NULL, 0, 0, 0 };
	size_t i;

	for (i = 0; argv[i] != NULL; i++) {
		if (i != 0)
			misc_buf_add(&b, " | ", 3, 0);
		misc_buf_add(&b, argv[i], strlen(argv[i]), 0);
	}
	return b.data;
}

#define COMMON                                                                 \
	"rsync | -rlpt | --partial-dir=.gpufleet-partial | --protect-args | "
#define OUTPUT "--no-human-readable | --info=progress2 | --stats | "

START_TEST(test_rsync_argv)
{
	static const char *const push_paths[] = { "data/", "a b.txt" };
	static const char *const pull_paths[] = { "~/ckpt/", "/var/log/x",
		"~" };
	static const struct {
		enum xfer_dir dir;
		int dry_run, delete, timeout;
		const char *dest, *want;
	} rows[] = {
		{ XFER_PUSH, 0, 0, 120, "~/job",
		    COMMON "--timeout=120 | " OUTPUT
			   "-e | ssh -F 'c' | -- | data/ | a b.txt | "
			   "inst-1:job/" },
		{ XFER_PUSH, 1, 1, 0, "/srv/d",
		    COMMON "--timeout=0 | " OUTPUT
			   "--dry-run | --delete | -e | ssh -F 'c' | -- | "
			   "data/ | a b.txt | inst-1:/srv/d/" },
		{ XFER_PUSH, 0, 0, 5, "~",
		    COMMON "--timeout=5 | " OUTPUT
			   "-e | ssh -F 'c' | -- | data/ | a b.txt | "
			   "inst-1:./" },
		/* pull: each path on the instance, into LOCAL_DIR/NAME/ */
		{ XFER_PULL, 0, 1, 120, "back",
		    COMMON "--timeout=120 | " OUTPUT
			   "--delete | -e | ssh -F 'c' | -- | inst-1:ckpt/ | "
			   "inst-1:/var/log/x | inst-1:. | back/inst-1/" },
	};
	struct xfer_req req;
	char **argv, *s;
	size_t i;

	for (i = 0; i < sizeof rows / sizeof rows[0]; i++) {
		memset(&req, 0, sizeof req);
		req.dir = rows[i].dir;
		req.paths = rows[i].dir == XFER_PUSH ? push_paths : pull_paths;
		req.npaths = rows[i].dir == XFER_PUSH ? 2 : 3;
		req.dest = rows[i].dest;
		req.dry_run = rows[i].dry_run;
		req.delete = rows[i].delete;
		req.timeout = rows[i].timeout;
		argv = xfer_rsync_argv(
		    &req, "ssh -F 'c'", "inst-1", "back/inst-1");
		s = joined(argv);
		ck_assert_msg(
		    strcmp(s, rows[i].want) == 0, "row %zu: %s", i, s);
		free(s);
		xfer_argv_free(argv);
	}
}
END_TEST

START_TEST(test_remote_path)
{
	static const struct {
		const char *in, *want;
	} rows[] = {
		{ "~", "." }, { "~/", "." }, { "~//x", "x" },
		{ "~/ckpt/", "ckpt/" }, { "/abs/p", "/abs/p" },
		{ "rel", "rel" },
		{ "~user/x", "~user/x" }, /* not the login directory */
	};
	size_t i;
	char *s;

	for (i = 0; i < sizeof rows / sizeof rows[0]; i++) {
		s = xfer_remote_path(rows[i].in);
		ck_assert_str_eq(s, rows[i].want);
		free(s);
	}
}
END_TEST

/* The tar fallback reads a remote path as rsync does: "~" is home. */
START_TEST(test_tar_scripts)
{
	static const struct {
		const char *in, *push, *pull;
	} rows[] = {
		{ "~", "set -e; d='.'; ", "set -e; tar -cf - -C '.' ." },
		{ "~/", "set -e; d='.'; ", "set -e; tar -cf - -C '.' ." },
		{ "~/ckpt/", "set -e; d='ckpt/'; ",
		    "set -e; tar -cf - -C 'ckpt/' ." },
		{ "~/a b", "set -e; d='a b'; ",
		    "set -e; tar -cf - -C \"$(dirname -- 'a b')\" "
		    "\"$(basename -- 'a b')\"" },
		{ "/abs", "set -e; d='/abs'; ",
		    "set -e; tar -cf - -C \"$(dirname -- '/abs')\" "
		    "\"$(basename -- '/abs')\"" },
	};
	struct xfer_req req;
	size_t i;
	char *s;

	memset(&req, 0, sizeof req);
	req.dir = XFER_PULL;
	req.npaths = 1;
	for (i = 0; i < sizeof rows / sizeof rows[0]; i++) {
		s = xfer_tar_push_script(rows[i].in);
		ck_assert_msg(
		    strncmp(s, rows[i].push, strlen(rows[i].push)) == 0,
		    "row %zu: %s", i, s);
		free(s);
		req.paths = &rows[i].in;
		s = xfer_tar_pull_script(&req);
		ck_assert_str_eq(s, rows[i].pull);
		free(s);
	}
}
END_TEST

START_TEST(test_parse_progress)
{
	static const struct {
		const char *line;
		int ok;
		unsigned long long bytes;
		int percent;
	} rows[] = {
		{ "      4194304  50%    3.99MB/s    0:00:01 (xfr#1, "
		  "to-chk=0/1)",
		    0, 4194304, 50 },
		{ "  4,194,304  50%  3.99MB/s  0:00:01", 0, 4194304, 50 },
		{ "              0   0%    0.00kB/s    0:00:00", 0, 0, 0 },
		{ "  8388613 100%   11.02MB/s    0:00:00 (xfr#3, to-chk=0/6)",
		    0, 8388613, 100 },
		{ "  10 101%  1kB/s", -1, 0, 0 },
		{ "sending incremental file list", -1, 0, 0 },
		{ "Number of files: 6 (reg: 3, dir: 2, link: 1)", -1, 0, 0 },
		{ ",123 5%", -1, 0, 0 },
		{ "  123 5", -1, 0, 0 },
		{ "  99999999999999999999999 5%", -1, 0, 0 }, /* overflow */
		{ "", -1, 0, 0 },
	};
	struct xfer_progress p;
	size_t i;

	for (i = 0; i < sizeof rows / sizeof rows[0]; i++) {
		memset(&p, 0, sizeof p);
		ck_assert_msg(
		    xfer_parse_progress(rows[i].line, &p) == rows[i].ok,
		    "row %zu", i);
		if (rows[i].ok != 0)
			continue;
		ck_assert_uint_eq(p.bytes, rows[i].bytes);
		ck_assert_int_eq(p.percent, rows[i].percent);
	}
}
END_TEST

START_TEST(test_parse_stats)
{
	static const struct {
		const char *line;
		int ok;
		unsigned long long files, bytes;
	} rows[] = {
		{ "Number of regular files transferred: 3", 1, 3, 0 },
		{ "Number of files transferred: 12", 1, 12, 0 },
		{ "Total transferred file size: 8388613 bytes", 1, 0, 8388613 },
		{ "Total transferred file size: 8,388,613 bytes", 1, 0,
		    8388613 },
		{ "Total file size: 8388613 bytes", 0, 0, 0 },
		{ "Number of files: 6 (reg: 3, dir: 2, link: 1)", 0, 0, 0 },
		{ "Number of regular files transferred: 3x", 0, 0, 0 },
		{ "Total transferred file size: 12", 0, 0, 0 },
	};
	struct xfer_stats s;
	size_t i;

	for (i = 0; i < sizeof rows / sizeof rows[0]; i++) {
		memset(&s, 0, sizeof s);
		ck_assert_msg(xfer_parse_stats(rows[i].line, &s) == rows[i].ok,
		    "row %zu", i);
		ck_assert_uint_eq(s.files, rows[i].files);
		ck_assert_uint_eq(s.bytes, rows[i].bytes);
	}
}
END_TEST

START_TEST(test_size)
{
	static const struct {
		unsigned long long n;
		const char *want;
	} rows[] = {
		{ 0, "0 B" }, { 1023, "1023 B" }, { 1024, "1.0 KiB" },
		{ 1536, "1.5 KiB" },	      /* 1536 / 1024 */
		{ 8388613, "8.0 MiB" },	      /* 8388613 / 1048576 = 8.000005 */
		{ 1000000, "976.6 KiB" },     /* 1000000 / 1024 = 976.5625 */
		{ 3221225472ULL, "3.0 GiB" }, /* 3 x 1024^3 */
	};
	size_t i;
	char *s;

	for (i = 0; i < sizeof rows / sizeof rows[0]; i++) {
		s = xfer_size(rows[i].n);
		ck_assert_str_eq(s, rows[i].want);
		free(s);
	}
}
END_TEST

/*
 * The reason of a failed transfer: the last line of stderr, not rsync's
 * own trailers after the cause (the lines of rsync 3.5.0 for a missing
 * remote path and of ssh for a changed host key).
 */
START_TEST(test_reason)
{
	static const struct {
		const char *err, *want;
	} rows[] = {
		{ "rsync: [sender] link_stat \"/h/gone\" failed: No such file "
		  "or "
		  "directory (2)\n"
		  "rsync error: some files/attrs were not transferred (see "
		  "previous errors) (code 23) at main.c(1956) "
		  "[Receiver=3.5.0]\n"
		  "rsync: [Receiver] write error: Broken pipe (32)\n",
		    "rsync: [sender] link_stat \"/h/gone\" failed: No such "
		    "file "
		    "or directory (2)" },
		{ "Host key verification failed.\r\n"
		  "rsync error: unexplained error (code 255) at io.c(232) "
		  "[Receiver=3.5.0]\n",
		    "Host key verification failed." },
		{ "tar: out: Cannot open: No such file or directory\n",
		    "tar: out: Cannot open: No such file or directory" },
		{ "rsync error: timeout (code 30)\n",
		    "rsync error: timeout (code 30)" },
		{ "\n\n", NULL },
	};
	size_t i;
	char *s;

	for (i = 0; i < sizeof rows / sizeof rows[0]; i++) {
		s = xfer_reason(rows[i].err);
		if (rows[i].want == NULL)
			ck_assert_msg(s == NULL, "row %zu: %s", i, s);
		else
			ck_assert_str_eq(s, rows[i].want);
		free(s);
	}
}
END_TEST

START_TEST(test_check_path)
{
	static const struct {
		const char *path, *cause;
	} rows[] = {
		{ "~/ckpt/", NULL },
		{ "name with space é", NULL },
		{ "", "an empty path" },
		{ "a\nb", "a path with a control character" },
		{ "a\x7f", "a path with a control character" },
	};
	char *cause;
	size_t i;

	for (i = 0; i < sizeof rows / sizeof rows[0]; i++) {
		cause = NULL;
		ck_assert_int_eq(xfer_check_path(rows[i].path, &cause),
		    rows[i].cause == NULL ? 0 : -1);
		if (rows[i].cause != NULL)
			ck_assert_str_eq(cause, rows[i].cause);
		else
			ck_assert_ptr_null(cause);
		free(cause);
	}
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("xfer");
	TCase *tc = tcase_create("core");
	SRunner *sr;
	int failed;

	tcase_add_test(tc, test_rsync_argv);
	tcase_add_test(tc, test_remote_path);
	tcase_add_test(tc, test_tar_scripts);
	tcase_add_test(tc, test_parse_progress);
	tcase_add_test(tc, test_parse_stats);
	tcase_add_test(tc, test_size);
	tcase_add_test(tc, test_check_path);
	tcase_add_test(tc, test_reason);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? 0 : 1;
}

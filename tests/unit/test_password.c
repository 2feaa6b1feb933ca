/*
 * password.c: the first line of a --password-file (LF, CR LF, none), "-"
 * for standard input, and the errors for an empty or missing file, one row
 * per case; and typed on a terminal (a pty), where echo comes back even
 * when a signal ends or stops the process mid-prompt.
 */

#include <sys/ioctl.h>
#include <sys/wait.h>

#include <check.h>
#include <fcntl.h>
#include <pty.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "password.h"

static char dir[] = "/tmp/test_password.XXXXXX";

static char *
write_file(const char *name, const char *data, size_t len)
{
	char *path;
	FILE *f;

	if (mkdtemp(dir) == NULL && access(dir, F_OK) != 0)
		ck_abort_msg("mkdtemp");
	ck_assert_int_gt(asprintf(&path, "%s/%s", dir, name), 0);
	ck_assert_ptr_nonnull(f = fopen(path, "w"));
	ck_assert_uint_eq(fwrite(data, 1, len, f), len);
	fclose(f);
	return path;
}

START_TEST(test_file_first_line)
{
	static const struct {
		const char *data, *want;
	} rows[] = {
		{ "hunter2\n", "hunter2" },
		{ "hunter2\r\n", "hunter2" },
		{ "hunter2", "hunter2" },
		{ "first\nsecond\n", "first" },
		{ "with space  \n", "with space  " },
		{ " lead\ttab\r\nrest", " lead\ttab" },
	};
	size_t i;
	char *path, *pw, *cause;

	for (i = 0; i < sizeof rows / sizeof rows[0]; i++) {
		path = write_file("pw", rows[i].data, strlen(rows[i].data));
		pw = password_read(path, "root@h", &cause);
		ck_assert_msg(pw != NULL, "row %zu: %s", i, cause);
		ck_assert_ptr_null(cause);
		ck_assert_str_eq(pw, rows[i].want);
		password_free(pw);
		unlink(path);
		free(path);
	}
	rmdir(dir);
}
END_TEST

START_TEST(test_file_errors)
{
	static const struct {
		const char *data; /* NULL: no file */
		const char *want;
	} rows[] = {
		{ "", "the first line is empty" },
		{ "\n", "the first line is empty" },
		{ "\r\npassword-on-line-2\n", "the first line is empty" },
		{ NULL, "No such file or directory" },
	};
	size_t i;
	char *path, *pw, *cause;

	for (i = 0; i < sizeof rows / sizeof rows[0]; i++) {
		if (rows[i].data != NULL)
			path = write_file(
			    "pw", rows[i].data, strlen(rows[i].data));
		else
			path = write_file("gone", "x", 1);
		if (rows[i].data == NULL)
			unlink(path);
		pw = password_read(path, "root@h", &cause);
		ck_assert_ptr_null(pw);
		ck_assert_ptr_nonnull(cause);
		ck_assert_msg(strstr(cause, rows[i].want) != NULL,
		    "row %zu: %s", i, cause);
		ck_assert_msg(strstr(cause, "--password-file") != NULL,
		    "row %zu: %s", i, cause);
		ck_assert_msg(strstr(cause, "password-on-line-2") == NULL,
		    "row %zu names the password: %s", i, cause);
		free(cause);
		unlink(path);
		free(path);
	}
	rmdir(dir);
}
END_TEST

START_TEST(test_stdin)
{
	static const struct {
		const char *data, *want; /* want NULL: an error */
	} rows[] = {
		{ "from-stdin\r\nmore\n", "from-stdin" },
		{ "\n", NULL },
		{ "", NULL },
	};
	size_t i;
	char *path, *pw, *cause;
	int fd, saved = dup(0);

	for (i = 0; i < sizeof rows / sizeof rows[0]; i++) {
		path = write_file("stdin", rows[i].data, strlen(rows[i].data));
		ck_assert_int_ge(fd = open(path, O_RDONLY), 0);
		ck_assert_int_eq(dup2(fd, 0), 0);
		close(fd);
		pw = password_read("-", "root@h", &cause);
		if (rows[i].want != NULL) {
			ck_assert_msg(pw != NULL, "row %zu: %s", i, cause);
			ck_assert_str_eq(pw, rows[i].want);
		} else {
			ck_assert_ptr_null(pw);
			ck_assert_msg(strstr(cause, "standard input") != NULL,
			    "row %zu: %s", i, cause);
			free(cause);
		}
		password_free(pw);
		unlink(path);
		free(path);
	}
	dup2(saved, 0);
	close(saved);
	rmdir(dir);
}
END_TEST

/*
 * A child on its own pty (its controlling terminal) asks for a password;
 * returns its pid and the master's fd once the prompt is there.
 */
static pid_t
tty_child(int *master, const char *file)
{
	char buf[256], *cause;
	size_t len = 0;
	ssize_t n;
	pid_t pid;
	int slave;

	ck_assert_int_eq(openpty(master, &slave, NULL, NULL, NULL), 0);
	if ((pid = fork()) == 0) {
		char *pw;
		close(*master);
		signal(SIGINT, SIG_DFL); /* not Check's */
		signal(SIGTSTP, SIG_DFL);
		setsid();
		if (ioctl(slave, TIOCSCTTY, 0) != 0 || dup2(slave, 0) != 0)
			_exit(90);
		pw = password_read(file, "root@h", &cause);
		_exit(pw != NULL && strcmp(pw, "typed-pw") == 0 ? 0 : 91);
	}
	close(slave);
	/* Wait for the prompt (the child has turned echo off by then). */
	while (len < sizeof buf - 1 &&
	    (n = read(*master, buf + len, sizeof buf - 1 - len)) > 0) {
		len += (size_t)n;
		buf[len] = '\0';
		if (strstr(buf, "Password for root@h: ") != NULL)
			break;
	}
	ck_assert_msg(
	    strstr(buf, "Password for root@h: ") != NULL, "no prompt: %s", buf);
	return pid;
}

/* Whether the pty echoes (the child turns echo off while it asks). */
static int
echo_on(int master)
{
	struct termios t;

	ck_assert_int_eq(tcgetattr(master, &t), 0);
	return (t.c_lflag & ECHO) != 0;
}

START_TEST(test_tty_sigint_restores_echo)
{
	int master, st, i;
	pid_t pid = tty_child(&master, NULL);

	for (i = 0; i < 1000 && echo_on(master); i++)
		usleep(10000);
	ck_assert_msg(!echo_on(master), "echo never went off");
	ck_assert_int_eq(kill(pid, SIGINT), 0);
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	ck_assert_msg(WIFSIGNALED(st) && WTERMSIG(st) == SIGINT,
	    "not ended by SIGINT: status %d", st);
	ck_assert_msg(echo_on(master), "SIGINT left the terminal without echo");
	close(master);
}
END_TEST

START_TEST(test_tty_sigtstp_asks_again)
{
	char buf[512];
	size_t len = 0;
	ssize_t n;
	int master, st, i;
	pid_t pid = tty_child(&master, NULL);

	for (i = 0; i < 1000 && echo_on(master); i++)
		usleep(10000);
	ck_assert_int_eq(kill(pid, SIGTSTP), 0);
	/* Its group is orphaned, so the stop is discarded: it asks again. */
	while (len < sizeof buf - 1 &&
	    (n = read(master, buf + len, sizeof buf - 1 - len)) > 0) {
		len += (size_t)n;
		buf[len] = '\0';
		if (strstr(buf, "Password for root@h: ") != NULL)
			break;
	}
	ck_assert_msg(strstr(buf, "Password for root@h: ") != NULL,
	    "not asked again: %s", buf);
	for (i = 0; i < 1000 && echo_on(master); i++)
		usleep(10000);
	ck_assert_int_eq(write(master, "typed-pw\n", 9), 9);
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0,
	    "the password typed after the stop was not read: status %d", st);
	ck_assert_msg(echo_on(master), "echo not back after the read");
	close(master);
}
END_TEST

/* "-" with a terminal on standard input: asked without echo, not echoed. */
START_TEST(test_tty_dash_stdin)
{
	int master, st, i;
	pid_t pid = tty_child(&master, "-");

	for (i = 0; i < 1000 && echo_on(master); i++)
		usleep(10000);
	ck_assert_msg(!echo_on(master), "- on a terminal reads with echo");
	ck_assert_int_eq(write(master, "typed-pw\n", 9), 9);
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0,
	    "the password typed was not read: status %d", st);
	close(master);
}
END_TEST

START_TEST(test_free_null)
{
	password_free(NULL);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("password");
	TCase *tc = tcase_create("core");
	SRunner *sr;
	int failed;

	tcase_add_test(tc, test_file_first_line);
	tcase_add_test(tc, test_file_errors);
	tcase_add_test(tc, test_stdin);
	tcase_add_test(tc, test_tty_sigint_restores_echo);
	tcase_add_test(tc, test_tty_sigtstp_asks_again);
	tcase_add_test(tc, test_tty_dash_stdin);
	tcase_add_test(tc, test_free_null);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

/*
 * The commands gpufleet writes itself run under sh whatever the login
 * shell: deploy_sh_command's word reaches sh byte for byte when a POSIX
 * shell or fish reads it.
 */

#include <sys/wait.h>

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "deploy.h"

/*
 * Run shell -c cmd with "sh -c" at its start replaced by "printf %s", so
 * the output is the word sh would have been given. Caller frees.
 */
static char *
word_seen_by(const char *shell, const char *cmd)
{
	char *alt, *out = calloc(1, 65536);
	size_t len = 0;
	ssize_t n;
	int fd[2], status;
	pid_t pid;

	ck_assert_int_eq(strncmp(cmd, "sh -c ", 6), 0);
	ck_assert_int_gt(asprintf(&alt, "printf %%s %s", cmd + 6), 0);
	ck_assert_int_eq(pipe(fd), 0);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		dup2(fd[1], 1);
		close(fd[0]);
		execl(shell, shell, "-c", alt, (char *)NULL);
		_exit(127);
	}
	close(fd[1]);
	while ((n = read(fd[0], out + len, 65535 - len)) > 0)
		len += (size_t)n;
	close(fd[0]);
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
	    "%s -c %s failed", shell, alt);
	free(alt);
	return out;
}

static const char *scripts[] = {
	"true",
	"d=~/.cache/gpufleet; a=\"$d/x\"; if [ -x \"$a\" ]; then exit 1; fi",
	"echo 'single' \"double\" it's",
	"printf '%s\\n' a\\\\b 'c\\'",
	"trailing backslash\\",
	"\\\\ two \\' three \\\\\\",
	"''''",
	"new\nline $HOME `id` $(id) ; | & < > * ? [ ] { } ( ) # ! ~",
	"",
};

START_TEST(test_word_reaches_sh)
{
	const char *shells[] = { "/bin/sh", "/usr/bin/fish" };
	size_t i;
	char *cmd, *got;
	int k;

	for (k = 0; k < 2; k++) {
		ck_assert_msg(access(shells[k], X_OK) == 0,
		    "%s is missing (scripts/deps.sh installs it)", shells[k]);
		for (i = 0; i < sizeof scripts / sizeof scripts[0]; i++) {
			cmd = deploy_sh_command(scripts[i]);
			got = word_seen_by(shells[k], cmd);
			ck_assert_msg(strcmp(got, scripts[i]) == 0,
			    "%s read [%s] as [%s]", shells[k], cmd, got);
			free(got);
			free(cmd);
		}
	}
}
END_TEST

/* The deploy commands are sh -c words. */
START_TEST(test_deploy_commands_are_sh_c)
{
	struct instance in;
	struct agent_bin ab;
	char *cmd;

	instance_init(&in);
	memset(&ab, 0, sizeof ab);
	memcpy(ab.hash, "0123456789abcdef", 17);
	ab.len = 10;
	cmd = deploy_run_command(&in, &ab, "--gpu");
	ck_assert_int_eq(strncmp(cmd, "sh -c '", 7), 0);
	free(cmd);
	cmd = deploy_upload_command(&in, &ab, "--gpu");
	ck_assert_int_eq(strncmp(cmd, "sh -c '", 7), 0);
	free(cmd);
	instance_clear(&in);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("deploy");
	TCase *tc = tcase_create("core");
	SRunner *sr;
	int failed;

	tcase_add_test(tc, test_word_reaches_sh);
	tcase_add_test(tc, test_deploy_commands_are_sh_c);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? 0 : 1;
}

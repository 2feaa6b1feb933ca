/*
 * The pure part of jobs (controller/jobspec.c): COMMAND's words joined
 * for sh, default names, --env, --log-max, --signal and INSTANCE:JOB as
 * typed, the spec sent to job start, the agent's answers read back (a
 * job's end, the follow trailer, fire ids) and the words events shows.
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "jobspec.h"

START_TEST(test_join)
{
	static const struct {
		const char *words[4];
		const char *want;
	} cases[] = {
		{ { "python", "train.py", "--lr=3e-4", NULL },
		    "python train.py --lr=3e-4" },
		{ { "sh", "-c", "a && b; echo 'x'", NULL },
		    "sh -c 'a && b; echo '\\''x'\\'''" },
		{ { "echo", "", "$HOME", NULL }, "echo '' '$HOME'" },
		{ { "ls", "~/x", "a b", NULL }, "ls '~/x' 'a b'" },
	};
	size_t i;
	int n;
	char *got;

	for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		for (n = 0; cases[i].words[n] != NULL; n++)
			;
		got = jobspec_join(n, (char **)cases[i].words);
		ck_assert_str_eq(got, cases[i].want);
		free(got);
	}
}
END_TEST

START_TEST(test_names)
{
	static const struct {
		const char *word, *want;
	} cases[] = {
		{ "python", "python" },
		{ "/usr/bin/python3.11", "python3.11" },
		{ "./run me", "run_me" },
		{ "dir/", "job" },
		{ "", "job" },
		{ "ab\xc3\xa9", "ab__" },
	};
	char buf[JOBSPEC_NAME_MAX + 1], *cause = NULL, longw[100];
	size_t i;

	for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		jobspec_default_name(cases[i].word, buf);
		ck_assert_str_eq(buf, cases[i].want);
		ck_assert_int_eq(jobspec_check_name(buf, NULL), 0);
	}
	memset(longw, 'x', 99);
	longw[99] = '\0';
	jobspec_default_name(longw, buf);
	ck_assert_uint_eq(strlen(buf), JOBSPEC_NAME_MAX);
	ck_assert_int_eq(jobspec_check_name("train-1.a_b", &cause), 0);
	ck_assert_int_eq(jobspec_check_name("a b", &cause), -1);
	ck_assert_ptr_nonnull(strstr(cause, "'a b'"));
	free(cause);
	ck_assert_int_eq(jobspec_check_name(longw, NULL), -1);
	ck_assert_int_eq(jobspec_check_name("", NULL), -1);
}
END_TEST

START_TEST(test_env)
{
	static const struct {
		const char *kv;
		int ok;
	} cases[] = {
		{ "WANDB_MODE=offline", 1 },
		{ "_X=", 1 },
		{ "A=b=c", 1 },
		{ "1A=b", 0 },
		{ "A-B=c", 0 },
		{ "=x", 0 },
		{ "NOEQUALS", 0 },
	};
	char *cause, big[5000];
	size_t i;

	for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		cause = NULL;
		ck_assert_int_eq(
		    jobspec_check_env(cases[i].kv, &cause) == 0, cases[i].ok);
		if (!cases[i].ok)
			ck_assert_ptr_nonnull(cause);
		free(cause);
	}
	/* Not UTF-8: the spec (JSON) cannot hold it; named, not dropped. */
	cause = NULL;
	ck_assert_int_eq(jobspec_check_env("LANG_X=caf\xe9", &cause), -1);
	ck_assert_str_eq(cause, "--env: the value of LANG_X is not UTF-8");
	free(cause);
	cause = NULL;
	ck_assert_int_eq(jobspec_check_env("K=caf\xc3\xa9", &cause), 0);
	ck_assert_int_eq(jobspec_utf8("\xff"), 0);
	memcpy(big, "K=", 2);
	memset(big + 2, 'v', sizeof big - 3);
	big[sizeof big - 1] = '\0';
	cause = NULL;
	ck_assert_int_eq(jobspec_check_env(big, &cause), -1);
	free(cause);
}
END_TEST

START_TEST(test_size)
{
	static const struct {
		const char *text;
		long long want; /* -1: refused */
	} cases[] = {
		{ "64M", 64LL << 20 },
		{ "1G", 1LL << 30 },
		{ "16G", 16LL << 30 },
		{ "2048k", 2LL << 20 },
		{ "100MiB", 100LL << 20 },
		{ "3mb", 3LL << 20 },
		{ "1048576", 1LL << 20 },
		{ "1K", -1 },
		{ "17G", -1 },
		{ "1048575", -1 },
		{ "", -1 },
		{ "M", -1 },
		{ "5T", -1 },
		{ "5Mx", -1 },
		{ "99999999999999999999G", -1 },
	};
	int64_t v;
	char *cause;
	size_t i;

	for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		cause = NULL;
		if (cases[i].want < 0) {
			ck_assert_int_eq(
			    jobspec_parse_size(cases[i].text, &v, &cause), -1);
			ck_assert_ptr_nonnull(cause);
			free(cause);
			continue;
		}
		ck_assert_int_eq(
		    jobspec_parse_size(cases[i].text, &v, &cause), 0);
		ck_assert_int_eq(v, cases[i].want);
	}
}
END_TEST

START_TEST(test_signal)
{
	static const struct {
		const char *text, *want; /* NULL: refused */
		int number;
	} cases[] = {
		{ "TERM", "TERM", 15 },
		{ "sigint", "INT", 2 },
		{ "SIGKILL", "KILL", 9 },
		{ "9", "KILL", 9 },
		{ "10", "USR1", 10 },
		{ "40", "40", 40 },
		{ "0", NULL, 0 },
		{ "65", NULL, 0 },
		{ "NOPE", NULL, 0 },
		{ "", NULL, 0 },
		{ "15x", NULL, 0 },
	};
	char buf[16], *cause;
	size_t i;

	for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		cause = NULL;
		if (cases[i].want == NULL) {
			ck_assert_int_eq(jobspec_parse_signal(cases[i].text,
					     buf, sizeof buf, &cause),
			    -1);
			free(cause);
			continue;
		}
		ck_assert_int_eq(jobspec_parse_signal(
				     cases[i].text, buf, sizeof buf, &cause),
		    0);
		ck_assert_str_eq(buf, cases[i].want);
		ck_assert_int_eq(jobspec_signal_number(buf), cases[i].number);
	}
	ck_assert_int_eq(jobspec_signal_number("BOGUS"), -1);
}
END_TEST

START_TEST(test_target)
{
	char *name, *cause = NULL;
	int64_t job;

	ck_assert_int_eq(
	    jobspec_parse_target("a100-1:7", 1, &name, &job, &cause), 0);
	ck_assert_str_eq(name, "a100-1");
	ck_assert_int_eq(job, 7);
	free(name);
	ck_assert_int_eq(
	    jobspec_parse_target("a100-1", 0, &name, &job, &cause), 0);
	ck_assert_str_eq(name, "a100-1");
	ck_assert_int_eq(job, 0);
	free(name);
	ck_assert_int_eq(
	    jobspec_parse_target("a100-1", 1, &name, &job, &cause), -1);
	free(cause);
	cause = NULL;
	ck_assert_int_eq(
	    jobspec_parse_target("a:0", 0, &name, &job, &cause), -1);
	free(cause);
	cause = NULL;
	ck_assert_int_eq(
	    jobspec_parse_target(":3", 0, &name, &job, &cause), -1);
	free(cause);
	cause = NULL;
	ck_assert_int_eq(
	    jobspec_parse_target("a:3x", 0, &name, &job, &cause), -1);
	free(cause);
	cause = NULL;
	ck_assert_int_eq(
	    jobspec_parse_target("a:", 0, &name, &job, &cause), -1);
	free(cause);
	cause = NULL;
	ck_assert_int_eq(
	    jobspec_parse_target("a:99999999999999", 0, &name, &job, &cause),
	    -1);
	free(cause);
}
END_TEST

START_TEST(test_spec)
{
	const char *env[] = { "WANDB_MODE=offline", "K=a=b" };
	struct jobspec s;
	char *got;

	memset(&s, 0, sizeof s);
	s.name = "train";
	s.command = "python train.py";
	s.log_max_bytes = 64LL << 20;
	s.created = 1764640000;
	got = jobspec_json(&s);
	ck_assert_str_eq(got,
	    "{\"version\":1,\"name\":\"train\",\"command\":\"python "
	    "train.py\",\"cwd\":\"~\",\"env\":[],\"log_max_bytes\":67108864,"
	    "\"created\":1764640000,\"then\":null}");
	free(got);
	s.cwd = "~/work";
	s.env = env;
	s.nenv = 2;
	s.then.on = 1;
	s.then.if_ok = 1;
	s.then.local = 1;
	s.then.warn_minutes = 2;
	s.then.before = "python save.py";
	s.then.before_timeout_s = 600;
	got = jobspec_json(&s);
	ck_assert_str_eq(got,
	    "{\"version\":1,\"name\":\"train\",\"command\":\"python "
	    "train.py\",\"cwd\":\"~/work\",\"env\":[[\"WANDB_MODE\","
	    "\"offline\"],[\"K\",\"a=b\"]],\"log_max_bytes\":67108864,"
	    "\"created\":1764640000,\"then\":{\"when\":\"success\",\"action\":"
	    "\"local\",\"warn_minutes\":2,\"before_stop\":\"python save.py\","
	    "\"before_stop_timeout_s\":600,\"before_must_succeed\":false}}");
	free(got);
}
END_TEST

/* A job's end from JSON text; -1 when it does not check out. */
static int
end_of(const char *text, struct jobspec_end *e)
{
	json_t *o = json_loads(text, 0, NULL);
	int r = jobspec_read_end(o, e);

	json_decref(o);
	return r;
}

START_TEST(test_end)
{
	static const struct {
		const char *json;
		int ok, status;
		const char *exit_text;
	} cases[] = {
		{ "{\"state\":\"succeeded\",\"exit\":0,\"signal\":null}", 1, 0,
		    "0" },
		{ "{\"state\":\"failed\",\"exit\":3}", 1, 3, "3" },
		{ "{\"state\":\"killed\",\"exit\":null,\"signal\":\"TERM\"}", 1,
		    143, "TERM" },
		{ "{\"state\":\"killed\",\"exit\":1,\"signal\":null}", 1, 1,
		    "1" },
		{ "{\"state\":\"lost\",\"exit\":null,\"signal\":null}", 1, 1,
		    "" },
		{ "{\"state\":\"running\"}", 1, 1, "" },
		{ "{\"state\":\"done\"}", 0, 0, NULL },
		{ "{\"state\":\"failed\",\"exit\":256}", 0, 0, NULL },
		{ "{\"state\":\"failed\",\"exit\":\"1\"}", 0, 0, NULL },
		{ "{\"state\":\"killed\",\"signal\":\"\\u001b[2J\"}", 0, 0,
		    NULL },
		{ "{\"exit\":0}", 0, 0, NULL },
	};
	struct jobspec_end e;
	char *t;
	size_t i;

	for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		ck_assert_int_eq(end_of(cases[i].json, &e) == 0, cases[i].ok);
		if (!cases[i].ok)
			continue;
		ck_assert_int_eq(jobspec_exit_status(&e), cases[i].status);
		t = jobspec_exit_text(&e);
		ck_assert_str_eq(t, cases[i].exit_text);
		free(t);
	}
}
END_TEST

START_TEST(test_trailer)
{
	static const char err[] = "gpufleet-agent job: a warning\n"
				  "{\"job\":7,\"state\":\"killed\",\"exit\":"
				  "null,\"signal\":\"INT\"}\n";
	static const char none[] = "just text\n{\"state\":\"failed\"}\n";
	struct jobspec_end e;
	int64_t job = 0;

	ck_assert_int_eq(jobspec_trailer(err, strlen(err), &job, &e), 0);
	ck_assert_int_eq(job, 7);
	ck_assert_str_eq(e.state, "killed");
	ck_assert_int_eq(jobspec_exit_status(&e), 130);
	ck_assert_int_eq(jobspec_trailer(none, strlen(none), &job, &e), -1);
	ck_assert_int_eq(jobspec_trailer("", 0, &job, &e), -1);
	/* Cut short: the last line is not whole. */
	ck_assert_int_eq(jobspec_trailer(err, strlen(err) - 5, &job, &e), -1);
}
END_TEST

START_TEST(test_fire_job)
{
	int64_t job = 0;

	ck_assert_int_eq(jobspec_fire_job("j-7-1764640000", &job), 0);
	ck_assert_int_eq(job, 7);
	ck_assert_int_eq(
	    jobspec_fire_job("j-12-1764640000@1764000000", &job), 0);
	ck_assert_int_eq(job, 12);
	ck_assert_int_eq(jobspec_fire_job("d-3f2a9c01", &job), -1);
	ck_assert_int_eq(jobspec_fire_job("j--1", &job), -1);
	ck_assert_int_eq(jobspec_fire_job("j-0-5", &job), -1);
	ck_assert_int_eq(jobspec_fire_job(NULL, &job), -1);
}
END_TEST

START_TEST(test_event_text)
{
	static const struct {
		const char *event, *id, *entry, *want; /* want NULL: none */
	} cases[] = {
		{ "job_started", "j-7-1",
		    "{\"job\":7,\"name\":\"train\",\"pid\":42,\"then\":"
		    "\"stop\"}",
		    "job 7 (train) started, pid 42, then stop" },
		{ "job_ended", NULL,
		    "{\"job\":7,\"name\":\"train\",\"state\":\"succeeded\","
		    "\"exit\":0,\"signal\":null,\"duration_s\":7980,\"then\":"
		    "null}",
		    "job 7 (train) succeeded, exit 0, 2h13m" },
		{ "job_ended", NULL,
		    "{\"job\":3,\"name\":\"x\",\"state\":\"killed\",\"exit\":"
		    "null,\"signal\":\"TERM\",\"duration_s\":5,\"then\":"
		    "\"stop-if-ok\"}",
		    "job 3 (x) killed by TERM, 5s; then stop-if-ok" },
		{ "job_ended", NULL,
		    "{\"job\":4,\"name\":\"x\",\"state\":\"lost\",\"reason\":"
		    "\"the container restarted at 5\",\"duration_s\":5}",
		    "job 4 (x) lost: the container restarted at 5" },
		{ "firing", "j-4-100@200",
		    "{\"reason\":\"job\",\"evidence\":{\"job\":4,\"state\":"
		    "\"failed\",\"exit\":2,\"signal\":null}}",
		    "stopping the instance: job 4 failed, exit 2" },
		{ "skipped", "j-4-100", "{\"reason\":\"job failed: exit 1\"}",
		    "no stop after job 4: job failed: exit 1" },
		{ "firing", "d-3f2a9c01", "{\"reason\":\"deadline\"}", NULL },
		{ "warned", "j-4-100", "{\"users\":1}", NULL },
		{ "job_ended", NULL, "not json", NULL },
	};
	char *got;
	size_t i;

	for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		got = jobspec_event_text(
		    cases[i].event, cases[i].id, cases[i].entry);
		if (cases[i].want == NULL)
			ck_assert_ptr_null(got);
		else
			ck_assert_str_eq(got, cases[i].want);
		free(got);
	}
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("jobspec");
	TCase *tc = tcase_create("core");
	SRunner *sr;
	int failed;

	tcase_add_test(tc, test_join);
	tcase_add_test(tc, test_names);
	tcase_add_test(tc, test_env);
	tcase_add_test(tc, test_size);
	tcase_add_test(tc, test_signal);
	tcase_add_test(tc, test_target);
	tcase_add_test(tc, test_spec);
	tcase_add_test(tc, test_end);
	tcase_add_test(tc, test_trailer);
	tcase_add_test(tc, test_fire_job);
	tcase_add_test(tc, test_event_text);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? 0 : 1;
}

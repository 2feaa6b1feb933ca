/* Stop methods: resolution (instance over provider), parsing, placeholders. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "stopmethod.h"

static const struct {
	const char *provider;
	const char *command; /* stored stop_command, or NULL */
	const char *kind;    /* stored stop_kind, or NULL */
	const char *want;    /* stopmethod_format */
	const char *from;
} resolve_cases[] = {
	{ "autodl", NULL, NULL, "remote:/usr/bin/shutdown (stop)",
	    "provider autodl" },
	{ "runpod", NULL, NULL,
	    "remote:runpodctl stop pod $RUNPOD_POD_ID (stop)",
	    "provider runpod" },
	{ "vast", NULL, NULL,
	    "remote:vastai stop instance $CONTAINER_ID --api-key "
	    "$CONTAINER_API_KEY (stop)",
	    "provider vast" },
	{ "featurize", NULL, NULL,
	    "remote:featurize instance release $UUID (release)",
	    "provider featurize" },
	/* The instance's kind overrides the provider's. */
	{ "featurize", NULL, "stop",
	    "remote:featurize instance release $UUID (stop)",
	    "provider featurize" },
	{ "lambda", NULL, NULL, "none",
	    "none: provider lambda has no default" },
	{ "", NULL, NULL, "none", "none: provider (none) has no default" },
	/* The instance's method overrides the provider's, kind stop. */
	{ "featurize", "local:fz stop {name}", NULL,
	    "local:fz stop {name} (stop)", "instance" },
	{ "autodl", "none", NULL, "none", "instance" },
	{ "x", "remote:poweroff", "release", "remote:poweroff (release)",
	    "instance" },
	/* A stored value that does not parse (a hand edit) is none. */
	{ "autodl", "ssh:bad", NULL, "none", "instance" },
};

START_TEST(test_resolve)
{
	struct instance in;
	struct stopmethod_fields f;
	struct stopmethod m;
	char *s;

	memset(&in, 0, sizeof in);
	memset(&f, 0, sizeof f);
	in.provider = (char *)resolve_cases[_i].provider;
	f.command = (char *)resolve_cases[_i].command;
	f.kind = (char *)resolve_cases[_i].kind;
	stopmethod_resolve(&in, &f, NULL, &m);
	s = stopmethod_format(&m);
	ck_assert_str_eq(s, resolve_cases[_i].want);
	ck_assert_str_eq(m.from, resolve_cases[_i].from);
	free(s);
	stopmethod_clear(&m);
}
END_TEST

/* [provider.NAME] in the config: over the built-in, under the instance. */
START_TEST(test_config)
{
	struct config_stop stops[] = {
		{ "lambda", "local:lambda stop {name}", NULL },
		{ "autodl", NULL, "release" },
		{ "runpod", "none", NULL },
	};
	struct config cf;
	struct instance in;
	struct stopmethod_fields f;
	struct stopmethod m;
	static const struct {
		const char *provider, *command, *want, *from;
	} rows[] = {
		{ "lambda", NULL, "local:lambda stop {name} (stop)",
		    "config [provider.lambda]" },
		{ "autodl", NULL, "remote:/usr/bin/shutdown (release)",
		    "provider autodl" },
		{ "runpod", NULL, "none", "config [provider.runpod]" },
		{ "lambda", "remote:x", "remote:x (stop)", "instance" },
		{ "vast", NULL,
		    "remote:vastai stop instance $CONTAINER_ID --api-key "
		    "$CONTAINER_API_KEY (stop)",
		    "provider vast" },
	};
	size_t i;
	char *s;

	memset(&cf, 0, sizeof cf);
	cf.stops = stops;
	cf.nstops = 3;
	for (i = 0; i < sizeof rows / sizeof rows[0]; i++) {
		memset(&in, 0, sizeof in);
		memset(&f, 0, sizeof f);
		in.provider = (char *)rows[i].provider;
		f.command = (char *)rows[i].command;
		stopmethod_resolve(&in, &f, &cf, &m);
		s = stopmethod_format(&m);
		ck_assert_str_eq(s, rows[i].want);
		ck_assert_str_eq(m.from, rows[i].from);
		free(s);
		stopmethod_clear(&m);
	}
}
END_TEST

static const struct {
	const char *value;
	int ok;
	const char *error; /* a part of the message */
} parse_cases[] = {
	{ "remote:/usr/bin/shutdown", 1, NULL },
	{ "local:vastai stop instance 42", 1, NULL },
	{ "none", 1, NULL },
	{ "remote:", 0, "is empty" },
	{ "local:", 0, "is empty" },
	{ "/usr/bin/shutdown", 0, "must be 'remote:COMMAND'" },
	{ "Remote:x", 0, "must be" },
	{ "remote:a\nb", 0, "control character" },
	{ "remote:a\tb", 0, "control character" },
	{ "", 0, "must be" },
};

START_TEST(test_parse)
{
	enum stopmethod_where w;
	const char *cmd;
	char *cause = NULL;
	int r = stopmethod_parse(parse_cases[_i].value, &w, &cmd, &cause);

	ck_assert_int_eq(r == 0, parse_cases[_i].ok);
	if (!parse_cases[_i].ok) {
		ck_assert_ptr_nonnull(cause);
		ck_assert_ptr_nonnull(strstr(cause, parse_cases[_i].error));
	}
	free(cause);
}
END_TEST

START_TEST(test_parse_long)
{
	char buf[STOPMETHOD_MAX_LEN + 16];
	enum stopmethod_where w;
	const char *cmd;
	char *cause = NULL;

	memcpy(buf, "remote:", 7);
	memset(buf + 7, 'x', STOPMETHOD_MAX_LEN);
	buf[7 + STOPMETHOD_MAX_LEN] = '\0';
	ck_assert_int_eq(stopmethod_parse(buf, &w, &cmd, &cause), 0);
	buf[7 + STOPMETHOD_MAX_LEN] = 'x';
	buf[8 + STOPMETHOD_MAX_LEN] = '\0';
	ck_assert_int_eq(stopmethod_parse(buf, &w, &cmd, &cause), -1);
	ck_assert_ptr_nonnull(strstr(cause, "longer than"));
	free(cause);
}
END_TEST

static const struct {
	const char *command;
	const char *want;
} expand_cases[] = {
	{ "vastai stop instance {instance_id}", "vastai stop instance '7'" },
	{ "echo {name} {host} {port} {provider}",
	    "echo 'a100-1' 'h.example' '2222' 'it'\\''s'" },
	/* $VARS stay for the shell on the instance. */
	{ "runpodctl stop pod $RUNPOD_POD_ID",
	    "runpodctl stop pod "
	    "$RUNPOD_POD_ID" },
	/* Unknown braces and a lone brace are left alone. */
	{ "x {nope} {name", "x {nope} {name" },
	{ "{name}{name}", "'a100-1''a100-1'" },
	{ "", "" },
};

START_TEST(test_expand)
{
	struct instance in;
	char *s;

	memset(&in, 0, sizeof in);
	in.id = 7;
	in.name = "a100-1";
	in.host = "h.example";
	in.port = 2222;
	in.provider = "it's";
	s = stopmethod_expand(expand_cases[_i].command, &in);
	ck_assert_str_eq(s, expand_cases[_i].want);
	free(s);
}
END_TEST

static const struct {
	const char *field, *value;
	int known, ok;
	const char *command, *kind;
	int allow;
} field_cases[] = {
	{ "stop_command", "remote:/sbin/poweroff", 1, 1,
	    "remote:/sbin/poweroff", NULL, 0 },
	{ "stop_command", "default", 1, 1, NULL, NULL, 0 },
	{ "stop_command", "", 1, 1, NULL, NULL, 0 },
	{ "stop_command", "none", 1, 1, "none", NULL, 0 },
	{ "stop_command", "shutdown", 1, 0, NULL, NULL, 0 },
	{ "stop_kind", "release", 1, 1, NULL, "release", 0 },
	{ "stop_kind", "delete", 1, 0, NULL, NULL, 0 },
	{ "allow_release", "yes", 1, 1, NULL, NULL, 1 },
	{ "allow_release", "no", 1, 1, NULL, NULL, 0 },
	{ "allow_release", "1", 1, 0, NULL, NULL, 0 },
	{ "price", "2/h", 0, 1, NULL, NULL, 0 },
};

START_TEST(test_field)
{
	struct stopmethod_fields f;
	char *cause = NULL;
	int known, r;

	memset(&f, 0, sizeof f);
	r = stopmethod_field(
	    &f, field_cases[_i].field, field_cases[_i].value, &known, &cause);
	ck_assert_int_eq(known, field_cases[_i].known);
	ck_assert_int_eq(r == 0, field_cases[_i].ok);
	if (r == 0) {
		if (field_cases[_i].command == NULL)
			ck_assert_ptr_null(f.command);
		else
			ck_assert_str_eq(f.command, field_cases[_i].command);
		if (field_cases[_i].kind == NULL)
			ck_assert_ptr_null(f.kind);
		else
			ck_assert_str_eq(f.kind, field_cases[_i].kind);
		ck_assert_int_eq(f.allow_release, field_cases[_i].allow);
	} else
		ck_assert_ptr_nonnull(cause);
	free(cause);
	stopmethod_fields_clear(&f);
}
END_TEST

#define N(a) ((int)(sizeof a / sizeof a[0]))

int
main(void)
{
	Suite *s = suite_create("stopmethod");
	TCase *tc = tcase_create("core");
	SRunner *sr;
	int failed;

	tcase_add_loop_test(tc, test_resolve, 0, N(resolve_cases));
	tcase_add_loop_test(tc, test_parse, 0, N(parse_cases));
	tcase_add_test(tc, test_parse_long);
	tcase_add_test(tc, test_config);
	tcase_add_loop_test(tc, test_expand, 0, N(expand_cases));
	tcase_add_loop_test(tc, test_field, 0, N(field_cases));
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? 0 : 1;
}

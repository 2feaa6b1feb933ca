/*
 * The agent's JSON writer (agent/jsonw.c): string escaping and UTF-8
 * repair, number formatting and the placement of commas and keys, one row
 * per case. Every output is also checked to parse with jansson.
 */

#include <check.h>
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "agent.h"

struct str_case {
	const char *in;
	size_t len; /* bytes of in (NUL bytes may be part of it) */
	const char *out;
};

struct num_case {
	double v;
	int decimals;
	const char *out;
};

static void assert_parses(const char *);

#define S(lit) lit, sizeof(lit) - 1
#define FFFD   "\xef\xbf\xbd"

static const struct str_case str_cases[] = {
	{ S(""), "\"\"" },
	{ S("plain text"), "\"plain text\"" },
	{ S("say \"hi\""), "\"say \\\"hi\\\"\"" },
	{ S("C:\\path\\"), "\"C:\\\\path\\\\\"" },
	{ S("a/b"), "\"a/b\"" },
	{ S("line\nnext\ttab\rcr"), "\"line\\nnext\\ttab\\rcr\"" },
	{ S("\b\f"), "\"\\b\\f\"" },
	{ S("\x01\x1f\x1b[0m"), "\"\\u0001\\u001f\\u001b[0m\"" },
	{ S("nul\0byte"), "\"nul\\u0000byte\"" },
	{ S("del\x7f"), "\"del\x7f\"" },
	/* Well-formed UTF-8 is kept as it is. */
	{ S("caf\xc3\xa9"), "\"caf\xc3\xa9\"" },
	{ S("\xe2\x82\xac 5"), "\"\xe2\x82\xac 5\"" },
	{ S("\xf0\x9f\x98\x80"), "\"\xf0\x9f\x98\x80\"" },
	{ S("\xf4\x8f\xbf\xbf"), "\"\xf4\x8f\xbf\xbf\"" },
	/* Ill-formed: one U+FFFD per maximal subpart, as Python decodes. */
	{ S("\xff"), "\"" FFFD "\"" },
	{ S("a\xfe"
	    "b"),
	    "\"a" FFFD "b\"" },
	{ S("\x80\x80"), "\"" FFFD FFFD "\"" },
	{ S("\xc3"), "\"" FFFD "\"" },
	{ S("\xc3x"), "\"" FFFD "x\"" },
	{ S("\xe2\x82x"), "\"" FFFD "x\"" },
	{ S("\xe2\x82"), "\"" FFFD "\"" },
	{ S("\xc0\xaf"), "\"" FFFD FFFD "\"" },
	{ S("\xe0\x80\x80"), "\"" FFFD FFFD FFFD "\"" },
	{ S("\xed\xa0\x80"), "\"" FFFD FFFD FFFD "\"" },
	{ S("\xf4\x90\x80\x80"), "\"" FFFD FFFD FFFD FFFD "\"" },
	{ S("\xf0\x9f\x98"), "\"" FFFD "\"" },
	{ S("\xf0\x9f\x98\"q"), "\"" FFFD "\\\"q\"" },
	{ S("ok\xe9t\xe9"), "\"ok" FFFD "t" FFFD "\"" },
};

static const struct num_case num_cases[] = {
	{ 312.5, 2, "312.5" },
	{ 312.45, 2, "312.45" },
	{ 400.0, 2, "400.0" },
	{ 0.0, 2, "0.0" },
	{ -0.0, 2, "0.0" },
	{ 0.01, 2, "0.01" },
	{ 7.92, 2, "7.92" },
	{ 1.5, 1, "1.5" },
	{ 684.27, 2, "684.27" },
	{ 12345678.0, 2, "12345678.0" },
	{ -3.25, 2, "-3.25" },
	{ 1e20, 2, "null" },
	{ NAN, 2, "null" },
	{ INFINITY, 2, "null" },
};

/* Fail unless text is one valid JSON value. */
static void
assert_parses(const char *text)
{
	json_error_t err;
	json_t *j;

	j = json_loads(text, JSON_DECODE_ANY | JSON_ALLOW_NUL, &err);
	ck_assert_msg(j != NULL, "invalid JSON %s: %s", text, err.text);
	json_decref(j);
}

START_TEST(test_string)
{
	const struct str_case *c = &str_cases[_i];
	struct jsonw w;

	jsonw_init(&w);
	jsonw_stringn(&w, NULL, c->in, c->len);
	ck_assert_str_eq(w.out.data, c->out);
	assert_parses(w.out.data);
	jsonw_free(&w);
}
END_TEST

START_TEST(test_number)
{
	const struct num_case *c = &num_cases[_i];
	struct jsonw w;

	jsonw_init(&w);
	jsonw_double(&w, NULL, c->v, c->decimals);
	ck_assert_str_eq(w.out.data, c->out);
	assert_parses(w.out.data);
	jsonw_free(&w);
}
END_TEST

/* Commas and keys in nested objects and arrays, nulls for unknowns. */
START_TEST(test_structure)
{
	struct opt_int unknown = { 0, 0 }, seven = { 1, 7 };
	struct opt_num half = { 1, 0.5 };
	struct jsonw w;

	jsonw_init(&w);
	jsonw_object_begin(&w, NULL);
	jsonw_int(&w, "a", -12);
	jsonw_array_begin(&w, "list");
	jsonw_opt_int(&w, NULL, seven);
	jsonw_opt_int(&w, NULL, unknown);
	jsonw_object_begin(&w, NULL);
	jsonw_object_end(&w);
	jsonw_array_begin(&w, NULL);
	jsonw_array_end(&w);
	jsonw_array_end(&w);
	jsonw_object_begin(&w, "o\"k");
	jsonw_bool(&w, "t", 1);
	jsonw_bool(&w, "f", 0);
	jsonw_string(&w, "s", NULL);
	jsonw_opt_num(&w, "h", half, 2);
	jsonw_object_end(&w);
	jsonw_int(&w, "big", 9007199254740993LL);
	jsonw_object_end(&w);
	ck_assert_str_eq(w.out.data,
	    "{\"a\":-12,\"list\":[7,null,{},[]],\"o\\\"k\":{\"t\":true,"
	    "\"f\":false,\"s\":null,\"h\":0.5},\"big\":9007199254740993}");
	assert_parses(w.out.data);
	jsonw_free(&w);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("agent_json");
	TCase *tc = tcase_create("core");
	SRunner *sr;
	int failed;

	tcase_add_loop_test(
	    tc, test_string, 0, sizeof str_cases / sizeof str_cases[0]);
	tcase_add_loop_test(
	    tc, test_number, 0, sizeof num_cases / sizeof num_cases[0]);
	tcase_add_test(tc, test_structure);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? 0 : 1;
}

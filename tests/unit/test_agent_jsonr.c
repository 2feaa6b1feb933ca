/*
 * The agent's strict JSON reader (agent/jsonr.c), one row per input: what
 * it accepts is written back with the agent's writer and compared byte for
 * byte; what it refuses names the reason. Then the size and depth limits.
 */

#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "agent.h"

struct jsonr_case {
	const char *in;
	size_t len;
	const char *out;   /* as written back, or NULL: refused */
	const char *cause; /* a part of the reason when refused */
};

#define S(lit) lit, sizeof(lit) - 1

static const struct jsonr_case cases[] = {
	{ S("0"), "0", NULL },
	{ S(" \t\r\n-17 \n"), "-17", NULL },
	{ S("9223372036854775807"), "9223372036854775807", NULL },
	{ S("-9223372036854775808"), "-9223372036854775808", NULL },
	{ S("9223372036854775808"), NULL, "out of range" },
	{ S("-9223372036854775809"), NULL, "out of range" },
	{ S("99999999999999999999999"), NULL, "out of range" },
	{ S("01"), NULL, "only integers" },
	{ S("-"), NULL, "bad number" },
	{ S("1.5"), NULL, "only integers" },
	{ S("1e3"), NULL, "only integers" },
	{ S("+1"), NULL, "unexpected character" },
	{ S("true"), "true", NULL },
	{ S("false"), "false", NULL },
	{ S("null"), "null", NULL },
	{ S("nul"), NULL, "unexpected character" },
	{ S("truex"), NULL, "trailing" },
	{ S("[1,2] x"), NULL, "trailing" },
	{ S("{} {}"), NULL, "trailing" },
	{ S(""), NULL, "unexpected end" },
	{ S("   "), NULL, "unexpected end" },
	{ S("[ ]"), "[]", NULL },
	{ S("{ }"), "{}", NULL },
	{ S("[1, \"a\" ,true,null,[],{}]"), "[1,\"a\",true,null,[],{}]", NULL },
	{ S("{\"a\":1,\"b\":{\"c\":[false]}}"),
	    "{\"a\":1,\"b\":{\"c\":[false]}}", NULL },
	{ S("{\"a\":1,\"a\":2}"), NULL, "duplicate key" },
	{ S("{\"a\":{\"x\":1},\"b\":{\"x\":2}}"),
	    "{\"a\":{\"x\":1},\"b\":{\"x\":2}}", NULL },
	{ S("[1,]"), NULL, "unexpected character" },
	{ S("[1 2]"), NULL, "expected ',' or ']'" },
	{ S("{\"a\" 1}"), NULL, "expected ':'" },
	{ S("{\"a\":1,}"), NULL, "expected a key" },
	{ S("{1:2}"), NULL, "expected a key" },
	{ S("[1"), NULL, "expected ',' or ']'" },
	{ S("\"abc"), NULL, "unterminated" },
	{ S("\"a\\\"b\\\\c\\/d\\b\\f\\n\\r\\t\""),
	    "\"a\\\"b\\\\c/d\\b\\f\\n\\r\\t\"", NULL },
	{ S("\"\\x\""), NULL, "bad escape" },
	{ S("\"\\u00e9\\u20AC\""), "\"\xc3\xa9\xe2\x82\xac\"", NULL },
	{ S("\"\\ud83d\\ude00\""), "\"\xf0\x9f\x98\x80\"", NULL },
	{ S("\"\\ud83d\""), NULL, "lone high surrogate" },
	{ S("\"\\ud83dx\""), NULL, "lone high surrogate" },
	{ S("\"\\ud83d\\u0041\""), NULL, "bad surrogate pair" },
	{ S("\"\\ude00\""), NULL, "lone low surrogate" },
	{ S("\"\\u12g4\""), NULL, "bad \\u escape" },
	{ S("\"\\u12"), NULL, "short \\u escape" },
	{ S("\"\\u0000\""), NULL, "\\u0000" },
	{ S("\"tab\there\""), NULL, "control character" },
	{ S("\"\xc3\xa9\""), "\"\xc3\xa9\"", NULL },
	{ S("\"\xc3\""), NULL, "invalid UTF-8" },
	{ S("\"\xc0\xaf\""), NULL, "invalid UTF-8" },
	{ S("\"\xed\xa0\x80\""), NULL, "invalid UTF-8" },
	{ S("\"\xf4\x90\x80\x80\""), NULL, "invalid UTF-8" },
	{ S("\"\xff\""), NULL, "invalid UTF-8" },
	{ S("\"a\0b\""), NULL, "control character" },
	{ S("[\"\xf0\x9f\x98\x80\"]"), "[\"\xf0\x9f\x98\x80\"]", NULL },
};

/* Each row: accepted and written back as out, or refused with cause. */
START_TEST(test_cases)
{
	const struct jsonr_case *c = &cases[_i];
	struct jsonr v;
	struct jsonw w;
	char *cause = NULL;
	int r;

	r = jsonr_parse(c->in, c->len, &v, &cause);
	if (c->out == NULL) {
		ck_assert_msg(r == -1, "row %d accepted", _i);
		ck_assert_ptr_nonnull(cause);
		ck_assert_msg(strstr(cause, c->cause) != NULL,
		    "row %d: cause [%s] lacks [%s]", _i, cause, c->cause);
		ck_assert_ptr_null(strchr(cause, '\n'));
	} else {
		ck_assert_msg(r == 0, "row %d refused: %s", _i, cause);
		jsonw_init(&w);
		jsonr_write(&w, NULL, &v);
		ck_assert_str_eq(w.out.data, c->out);
		jsonw_free(&w);
	}
	jsonr_free(&v);
	free(cause);
}
END_TEST

/* Nesting: 16 levels are accepted, 17 are not. */
START_TEST(test_depth)
{
	struct jsonr v;
	char text[64];
	char *cause = NULL;
	int n;

	for (n = 16; n <= 17; n++) {
		memset(text, '[', (size_t)n);
		memset(text + n, ']', (size_t)n);
		ck_assert_int_eq(jsonr_parse(text, 2 * (size_t)n, &v, &cause),
		    n == 16 ? 0 : -1);
		jsonr_free(&v);
	}
	ck_assert_ptr_nonnull(strstr(cause, "nested too deep"));
	free(cause);
}
END_TEST

/* Size: 64 KiB are accepted, one byte more is not. */
START_TEST(test_size)
{
	struct jsonr v;
	char *text = malloc(JSONR_MAXSIZE + 1), *cause = NULL;

	memset(text, ' ', JSONR_MAXSIZE + 1);
	text[0] = '7';
	ck_assert_int_eq(jsonr_parse(text, JSONR_MAXSIZE, &v, &cause), 0);
	ck_assert_int_eq(v.i, 7);
	jsonr_free(&v);
	ck_assert_int_eq(jsonr_parse(text, JSONR_MAXSIZE + 1, &v, &cause), -1);
	ck_assert_ptr_nonnull(strstr(cause, "longer than"));
	jsonr_free(&v);
	free(cause);
	free(text);
}
END_TEST

/* Members by name, with their types checked. */
START_TEST(test_get)
{
	static const char doc[] = "{\"s\":\"x\",\"i\":42,\"n\":null}";
	struct jsonr v;
	long long i = 0;

	ck_assert_int_eq(jsonr_parse(doc, sizeof doc - 1, &v, NULL), 0);
	ck_assert_str_eq(jsonr_str(&v, "s"), "x");
	ck_assert_ptr_null(jsonr_str(&v, "i"));
	ck_assert_int_eq(jsonr_int(&v, "i", &i), 0);
	ck_assert_int_eq(i, 42);
	ck_assert_int_eq(jsonr_int(&v, "s", &i), -1);
	ck_assert_int_eq(jsonr_get(&v, "n")->type, JSONR_NULL);
	ck_assert_ptr_null(jsonr_get(&v, "absent"));
	ck_assert_ptr_null(jsonr_get(&v.items[1], "x"));
	jsonr_free(&v);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("agent_jsonr");
	TCase *tc = tcase_create("core");
	SRunner *sr;
	int failed;

	tcase_add_loop_test(
	    tc, test_cases, 0, (int)(sizeof cases / sizeof cases[0]));
	tcase_add_test(tc, test_depth);
	tcase_add_test(tc, test_size);
	tcase_add_test(tc, test_get);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}

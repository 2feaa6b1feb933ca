/* Escaping of untrusted text for terminals, one row per case. */

#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "vis.h"

struct vis_case {
	const char *in;
	size_t len;
	const char *want;
};

#define S(x) x, sizeof(x) - 1

static const struct vis_case cases[] = {
	{ S("plain text 123"), "plain text 123" },
	{ S(""), "" },
	{ S("\x1b]0;title\a\x1b[2J"), "\\e]0;title\\a\\e[2J" },
	{ S("a\tb\nc\rd"), "a\\tb\\nc\\rd" },
	{ S("back\\slash"), "back\\\\slash" },
	{ S("nul\0byte"), "nul\\x00byte" },
	{ S("del\x7f"), "del\\x7f" },
	{ S("caf\xc3\xa9 \xe4\xb8\xad\xe6\x96\x87"),
	    "caf\xc3\xa9 \xe4\xb8\xad\xe6\x96\x87" },
	{ S("emoji \xf0\x9f\x98\x80"), "emoji \xf0\x9f\x98\x80" },
	/* C1 CSI (U+009B) encoded in UTF-8 */
	{ S("c1 \xc2\x9b"
	    "2J"),
	    "c1 \\xc2\\x9b2J" },
	/* raw 8-bit CSI, overlong, surrogate, truncated */
	{ S("\x9b"
	    "2J"),
	    "\\x9b2J" },
	{ S("\xc0\xaf"), "\\xc0\\xaf" },
	{ S("\xed\xa0\x80"), "\\xed\\xa0\\x80" },
	{ S("\xe4\xb8"), "\\xe4\\xb8" },
	{ S("\xf4\x90\x80\x80"), "\\xf4\\x90\\x80\\x80" },
	/* bidi overrides and isolates reorder what a terminal shows (RLO,
	 * LRI, PDI, ALM), invisible ones hide text (ZWSP, ZWJ, BOM, WJ) */
	{ S("ok\xe2\x80\xaetxt.exe"), "ok\\xe2\\x80\\xaetxt.exe" },
	{ S("\xe2\x81\xa6x\xe2\x81\xa9"), "\\xe2\\x81\\xa6x\\xe2\\x81\\xa9" },
	{ S("\xd8\x9c"), "\\xd8\\x9c" },
	{ S("a\xe2\x80\x8b"
	    "b\xe2\x80\x8d"
	    "c"),
	    "a\\xe2\\x80\\x8bb\\xe2\\x80\\x8dc" },
	{ S("\xef\xbb\xbfx\xe2\x81\xa0"), "\\xef\\xbb\\xbfx\\xe2\\x81\\xa0" },
	/* their neighbours stay: EN DASH, ELLIPSIS, superscript zero */
	{ S("\xe2\x80\x93\xe2\x80\xa6\xe2\x81\xb0"),
	    "\xe2\x80\x93\xe2\x80\xa6\xe2\x81\xb0" },
};

START_TEST(test_vis)
{
	const struct vis_case *c = &cases[_i];
	char *got = vis_buf(c->in, c->len);

	ck_assert_str_eq(got, c->want);
	ck_assert_int_eq(vis_needed(c->in, c->len),
	    strcmp(got, c->in) != 0 || strlen(c->want) != c->len);
	free(got);
}
END_TEST

START_TEST(test_vis_str)
{
	char *got = vis_str("x\x1b[31my");

	ck_assert_str_eq(got, "x\\e[31my");
	free(got);
	ck_assert_ptr_null(vis_str(NULL));
}
END_TEST

/*
 * A job's log in pieces: newline, tab, carriage return and backslash
 * pass, ESC does not, and a UTF-8 character cut between two pieces comes
 * out whole with the second; at the end a cut one is escaped.
 */
static const struct {
	const char *pieces[3];
	const char *want;
} stream_cases[] = {
	{ { "a\tb\r\n", "c\\d\n", NULL }, "a\tb\r\nc\\d\n" },
	{ { "x\x1b[2J", "\a", NULL }, "x\\e[2J\\a" },
	{ { "\xe2", "\x82\xac!", NULL }, "\xe2\x82\xac!" },
	{ { "\xf0\x9f", "\x98", "\x80" }, "\xf0\x9f\x98\x80" },
	{ { "ok\xe2\x82", NULL, NULL }, "ok\\xe2\\x82" },
	{ { "\xc3", "(", NULL }, "\\xc3(" },
};

START_TEST(test_vis_stream)
{
	struct vis_stream vs = { { 0 }, 0 };
	char *got = strdup(""), *part, *tmp;
	size_t k, n;

	for (k = 0; k < 4; k++) {
		const char *p = k < 3 ? stream_cases[_i].pieces[k] : NULL;
		if (k < 3 && p == NULL)
			continue;
		part =
		    vis_stream(&vs, p, p != NULL ? strlen(p) : 0, k == 3, &n);
		ck_assert_uint_eq(n, strlen(part));
		tmp = malloc(strlen(got) + n + 1);
		strcpy(tmp, got);
		strcat(tmp, part);
		free(got);
		free(part);
		got = tmp;
	}
	ck_assert_str_eq(got, stream_cases[_i].want);
	ck_assert_uint_eq(vs.nheld, 0);
	free(got);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("vis");
	TCase *tc = tcase_create("core");
	SRunner *sr;
	int failed;

	tcase_add_loop_test(tc, test_vis, 0, sizeof cases / sizeof cases[0]);
	tcase_add_test(tc, test_vis_str);
	tcase_add_loop_test(tc, test_vis_stream, 0,
	    sizeof stream_cases / sizeof stream_cases[0]);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? 0 : 1;
}

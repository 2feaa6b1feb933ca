/* The dashboard's built-in files: paths, types, bodies, ETags, 404s. */

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "webui.h"

struct webui_case {
	const char *path;
	int status;
	const char *type;
	const char *file; /* controller/web/FILE, the bytes served */
};

static const struct webui_case cases[] = {
	{ "/", 200, "text/html; charset=utf-8", "index.html" },
	{ "/?x=1", 200, "text/html; charset=utf-8", "index.html" },
	{ "/assets/app.js", 200, "text/javascript; charset=utf-8", "app.js" },
	{ "/assets/app.css", 200, "text/css; charset=utf-8", "app.css" },
	{ "/assets/app.css?v=2", 200, "text/css; charset=utf-8", "app.css" },
	{ "/index.html", 404, "text/plain; charset=utf-8", NULL },
	{ "/assets/", 404, "text/plain; charset=utf-8", NULL },
	{ "/assets/app.jsx", 404, "text/plain; charset=utf-8", NULL },
	{ "/assets/app.j", 404, "text/plain; charset=utf-8", NULL },
	{ "/assets/../assets/app.js", 404, "text/plain; charset=utf-8", NULL },
	{ "//", 404, "text/plain; charset=utf-8", NULL },
	{ "", 404, "text/plain; charset=utf-8", NULL },
	{ "/api/v1/nothing", 404, "text/plain; charset=utf-8", NULL },
};

/* controller/web/name's bytes; caller frees. */
static char *
slurp(const char *name, size_t *len)
{
	const char *data = getenv("GPUFLEET_TEST_DATA");
	char path[4096], *buf;
	FILE *f;
	long n;

	ck_assert_ptr_nonnull(data);
	snprintf(path, sizeof path, "%s/../../controller/web/%s", data, name);
	f = fopen(path, "rb");
	ck_assert_msg(f != NULL, "%s", path);
	ck_assert_int_eq(fseek(f, 0, SEEK_END), 0);
	n = ftell(f);
	ck_assert_int_ge(n, 1);
	rewind(f);
	buf = malloc((size_t)n);
	ck_assert_ptr_nonnull(buf);
	ck_assert_uint_eq(fread(buf, 1, (size_t)n, f), (size_t)n);
	fclose(f);
	*len = (size_t)n;
	return buf;
}

START_TEST(test_lookup)
{
	const struct webui_case *c = &cases[_i];
	struct webui_reply r;
	char *want;
	size_t n;

	webui_lookup(c->path, NULL, &r);
	ck_assert_int_eq(r.status, c->status);
	ck_assert_str_eq(r.type, c->type);
	if (c->file == NULL) {
		ck_assert_ptr_null(r.etag);
		ck_assert_uint_eq(r.len, 10);
		ck_assert_mem_eq(r.body, "not found\n", 10);
		return;
	}
	want = slurp(c->file, &n);
	ck_assert_uint_eq(r.len, n);
	ck_assert_mem_eq(r.body, want, n);
	free(want);
	/* a quoted tag of 16 hex digits (SHA-256's first 8 bytes) */
	ck_assert_uint_eq(strlen(r.etag), 18);
	ck_assert_int_eq(r.etag[0], '"');
	ck_assert_int_eq(r.etag[17], '"');
	ck_assert_uint_eq(strspn(r.etag + 1, "0123456789abcdef"), 16);
}
END_TEST

/* A client holding the current copy gets 304 and no body. */
START_TEST(test_not_modified)
{
	struct webui_reply r, r2;
	char inm[128];

	webui_lookup("/assets/app.js", NULL, &r);
	webui_lookup("/assets/app.js", r.etag, &r2);
	ck_assert_int_eq(r2.status, 304);
	ck_assert_ptr_null(r2.body);
	ck_assert_uint_eq(r2.len, 0);
	ck_assert_str_eq(r2.etag, r.etag);

	snprintf(inm, sizeof inm, "\"0000000000000000\", W/%s", r.etag);
	webui_lookup("/assets/app.js", inm, &r2);
	ck_assert_int_eq(r2.status, 304);
	webui_lookup("/assets/app.js", " *", &r2);
	ck_assert_int_eq(r2.status, 304);

	/* another file's tag, or a stale one, gets the body */
	webui_lookup("/", r.etag, &r2);
	ck_assert_int_eq(r2.status, 200);
	webui_lookup("/assets/app.js", "\"0000000000000000\"", &r2);
	ck_assert_int_eq(r2.status, 200);
	ck_assert_uint_eq(r2.len, r.len);
	webui_lookup("/nothing", r.etag, &r2);
	ck_assert_int_eq(r2.status, 404);
}
END_TEST

/* No inline script anywhere, and a policy that would refuse one. */
START_TEST(test_policy)
{
	struct webui_reply r;
	const char *p;
	size_t left;

	ck_assert_ptr_eq(strstr(webui_csp, "default-src 'self';"), webui_csp);
	ck_assert_ptr_nonnull(strstr(webui_csp, "script-src 'self';"));
	ck_assert_ptr_null(strstr(webui_csp, "unsafe"));
	ck_assert_str_eq(webui_cache_control, "no-cache");

	webui_lookup("/", NULL, &r);
	/* each <script has a src and an empty body */
	for (p = r.body; (p = strstr(p, "<script")) != NULL; p++) {
		left = r.len - (size_t)(p - r.body);
		ck_assert_uint_ge(left, 40);
		ck_assert_ptr_nonnull(strstr(p, "</script>"));
		ck_assert_int_eq(strncmp(p, "<script src=\"/assets/", 21), 0);
		ck_assert_int_eq(*(strchr(p, '>') + 1), '<');
	}
	ck_assert_ptr_null(strstr(r.body, " on"));
	ck_assert_ptr_null(strstr(r.body, "http://"));
	ck_assert_ptr_null(strstr(r.body, "https://"));
}
END_TEST

static Suite *
webui_suite(void)
{
	Suite *s = suite_create("webui");
	TCase *tc = tcase_create("core");

	tcase_add_loop_test(
	    tc, test_lookup, 0, (int)(sizeof cases / sizeof cases[0]));
	tcase_add_test(tc, test_not_modified);
	tcase_add_test(tc, test_policy);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	SRunner *sr = srunner_create(webui_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}

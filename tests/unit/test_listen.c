/* [daemon] listen: ADDR:PORT parsing, loopback or not, written back. */

#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"

struct listen_case {
	const char *in;
	int ok;
	const char *addr; /* with ok */
	int port;
	int loopback;
	const char *back; /* config_listen_string */
};

static const struct listen_case cases[] = {
	{ "127.0.0.1:9464", 1, "127.0.0.1", 9464, 1, "127.0.0.1:9464" },
	{ "127.1.2.3:1", 1, "127.1.2.3", 1, 1, "127.1.2.3:1" },
	{ "0.0.0.0:80", 1, "0.0.0.0", 80, 0, "0.0.0.0:80" },
	{ "192.168.1.5:65535", 1, "192.168.1.5", 65535, 0,
	    "192.168.1.5:65535" },
	{ "128.0.0.1:9464", 1, "128.0.0.1", 9464, 0, "128.0.0.1:9464" },
	{ "[::1]:9464", 1, "::1", 9464, 1, "[::1]:9464" },
	{ "[::]:9464", 1, "::", 9464, 0, "[::]:9464" },
	{ "[fe80::1]:8080", 1, "fe80::1", 8080, 0, "[fe80::1]:8080" },
	{ "none", 1, "", 0, 0, "none" },
	{ "localhost:9464", 0, NULL, 0, 0, NULL },
	{ "127.evil.example:9464", 0, NULL, 0, 0, NULL },
	{ "127.0.0.1", 0, NULL, 0, 0, NULL },
	{ "127.0.0.1:", 0, NULL, 0, 0, NULL },
	{ "127.0.0.1:0", 0, NULL, 0, 0, NULL },
	{ "127.0.0.1:65536", 0, NULL, 0, 0, NULL },
	{ "127.0.0.1:-1", 0, NULL, 0, 0, NULL },
	{ "127.0.0.1:94x", 0, NULL, 0, 0, NULL },
	{ "127.0.0.1:+80", 0, NULL, 0, 0, NULL },
	{ "::1:9464", 0, NULL, 0, 0, NULL },
	{ "[::1:9464", 0, NULL, 0, 0, NULL },
	{ "[127.0.0.1]:9464", 0, NULL, 0, 0, NULL },
	{ "[]:9464", 0, NULL, 0, 0, NULL },
	{ ":9464", 0, NULL, 0, 0, NULL },
	{ "", 0, NULL, 0, 0, NULL },
	{ "None", 0, NULL, 0, 0, NULL },
	{ " 127.0.0.1:9464", 0, NULL, 0, 0, NULL },
};

START_TEST(test_parse)
{
	const struct listen_case *c = &cases[_i];
	struct config_listen l;
	char *cause = NULL, *back;

	if (!c->ok) {
		ck_assert_int_eq(config_parse_listen(c->in, &l, &cause), -1);
		ck_assert_ptr_nonnull(strstr(cause, "must be ADDR:PORT"));
		ck_assert_ptr_null(strchr(cause, '\n'));
		free(cause);
		return;
	}
	ck_assert_int_eq(config_parse_listen(c->in, &l, &cause), 0);
	ck_assert_int_eq(l.none, strcmp(c->in, "none") == 0);
	ck_assert_str_eq(l.addr, c->addr);
	ck_assert_int_eq(l.port, c->port);
	ck_assert_int_eq(config_listen_loopback(&l), c->loopback);
	back = config_listen_string(&l);
	ck_assert_str_eq(back, c->back);
	free(back);
}
END_TEST

/* The default is loopback, on the port of the issue. */
START_TEST(test_default)
{
	struct config c;

	memset(&c, 0, sizeof c);
	config_defaults(&c);
	ck_assert_int_eq(c.daemon_listen.none, 0);
	ck_assert_str_eq(c.daemon_listen.addr, "127.0.0.1");
	ck_assert_int_eq(c.daemon_listen.port, 9464);
	ck_assert_ptr_null(c.daemon_token_file);
	config_clear(&c);
}
END_TEST

static Suite *
listen_suite(void)
{
	Suite *s = suite_create("listen");
	TCase *tc = tcase_create("core");

	tcase_add_loop_test(
	    tc, test_parse, 0, (int)(sizeof cases / sizeof cases[0]));
	tcase_add_test(tc, test_default);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	SRunner *sr = srunner_create(listen_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}

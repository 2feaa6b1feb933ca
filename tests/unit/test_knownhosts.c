/*
 * Reading known_hosts lines for one host: plain and hashed names,
 * [host]:port, wildcards and negation, @revoked and @cert-authority, and
 * garbage skipped; a file with an over-long line.
 */

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "knownhosts.h"

#define KEY1                                                                   \
	"AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl"
/* HMAC-SHA1 with salt 00 01 .. 13 of "[127.0.0.1]:2222" and "example.org" */
#define HASHED_2222                                                            \
	"|1|AAECAwQFBgcICQoLDA0ODxAREhM=|zKYaAqmSav3Qxr2sffNqWFIcbe4="
#define HASHED_EXAMPLE                                                         \
	"|1|AAECAwQFBgcICQoLDA0ODxAREhM=|bFDVYqbsfLlUB0fPAZemUYx8Gnc="

static const struct {
	const char *line;
	const char *name;
	int want; /* 1: lists a key for name */
	enum knownhosts_marker marker;
} lines[] = {
	{ "[127.0.0.1]:2222 ssh-ed25519 " KEY1, "[127.0.0.1]:2222", 1,
	    KNOWNHOSTS_PLAIN },
	{ "[127.0.0.1]:2222 ssh-ed25519 " KEY1 " a comment", "[127.0.0.1]:2222",
	    1, KNOWNHOSTS_PLAIN },
	{ "  [127.0.0.1]:2222\tssh-ed25519\t" KEY1, "[127.0.0.1]:2222", 1,
	    KNOWNHOSTS_PLAIN },
	{ "127.0.0.1 ssh-ed25519 " KEY1, "[127.0.0.1]:2222", 0,
	    KNOWNHOSTS_PLAIN },
	{ "[127.0.0.1]:2223 ssh-ed25519 " KEY1, "[127.0.0.1]:2222", 0,
	    KNOWNHOSTS_PLAIN },
	{ "127.0.0.1 ssh-ed25519 " KEY1, "127.0.0.1", 1, KNOWNHOSTS_PLAIN },
	{ "a.example,[127.0.0.1]:2222 ssh-ed25519 " KEY1, "[127.0.0.1]:2222", 1,
	    KNOWNHOSTS_PLAIN },
	{ "[127.0.0.1]:* ssh-ed25519 " KEY1, "[127.0.0.1]:2222", 1,
	    KNOWNHOSTS_PLAIN },
	{ "[127.0.0.?]:2222 ssh-ed25519 " KEY1, "[127.0.0.1]:2222", 1,
	    KNOWNHOSTS_PLAIN },
	{ "*.example ssh-ed25519 " KEY1, "host.example", 1, KNOWNHOSTS_PLAIN },
	{ "HOST.Example ssh-ed25519 " KEY1, "host.example", 1,
	    KNOWNHOSTS_PLAIN },
	/* A negated pattern that matches takes the line away. */
	{ "[127.0.0.1]:*,![127.0.0.1]:2222 ssh-ed25519 " KEY1,
	    "[127.0.0.1]:2222", 0, KNOWNHOSTS_PLAIN },
	{ "[127.0.0.1]:*,![127.0.0.1]:2223 ssh-ed25519 " KEY1,
	    "[127.0.0.1]:2222", 1, KNOWNHOSTS_PLAIN },
	{ "!a.example ssh-ed25519 " KEY1, "b.example", 0, KNOWNHOSTS_PLAIN },
	{ HASHED_2222 " ssh-ed25519 " KEY1, "[127.0.0.1]:2222", 1,
	    KNOWNHOSTS_PLAIN },
	{ HASHED_2222 " ssh-ed25519 " KEY1, "[127.0.0.1]:2223", 0,
	    KNOWNHOSTS_PLAIN },
	{ HASHED_EXAMPLE " ssh-ed25519 " KEY1, "example.org", 1,
	    KNOWNHOSTS_PLAIN },
	{ "|1|garbage|garbage ssh-ed25519 " KEY1, "example.org", 0,
	    KNOWNHOSTS_PLAIN },
	{ "@revoked [127.0.0.1]:2222 ssh-ed25519 " KEY1, "[127.0.0.1]:2222", 1,
	    KNOWNHOSTS_REVOKED },
	{ "@revoked * ssh-ed25519 " KEY1, "[127.0.0.1]:2222", 1,
	    KNOWNHOSTS_REVOKED },
	{ "@cert-authority *.example ssh-ed25519 " KEY1, "a.example", 1,
	    KNOWNHOSTS_CA },
	{ "@unknown-marker a.example ssh-ed25519 " KEY1, "a.example", 0,
	    KNOWNHOSTS_PLAIN },
	{ "# a.example ssh-ed25519 " KEY1, "a.example", 0, KNOWNHOSTS_PLAIN },
	{ "", "a.example", 0, KNOWNHOSTS_PLAIN },
	{ "a.example", "a.example", 0, KNOWNHOSTS_PLAIN },
	{ "a.example ssh-ed25519", "a.example", 0, KNOWNHOSTS_PLAIN },
	{ "a.example 2048 35 12345", "a.example", 0, KNOWNHOSTS_PLAIN },
	{ "a.example ssh-ed25519 not*base64", "a.example", 0,
	    KNOWNHOSTS_PLAIN },
	{ "@revoked", "a.example", 0, KNOWNHOSTS_PLAIN },
};

START_TEST(test_parse_line)
{
	struct knownhosts_key k;
	int r;

	r = knownhosts_parse_line(lines[_i].line, lines[_i].name, &k);
	ck_assert_msg(r == lines[_i].want, "%s for %s: got %d", lines[_i].line,
	    lines[_i].name, r);
	if (r == 1) {
		ck_assert_int_eq(k.marker, lines[_i].marker);
		ck_assert_str_eq(k.type, "ssh-ed25519");
		ck_assert_str_eq(k.base64, KEY1);
	}
	free(k.type);
	free(k.base64);
}
END_TEST

static const struct {
	const char *host;
	int port;
	const char *want;
} names[] = {
	{ "127.0.0.1", 22, "127.0.0.1" },
	{ "127.0.0.1", 2222, "[127.0.0.1]:2222" },
	{ "Host.Example", 22, "host.example" },
};

START_TEST(test_name)
{
	char *name = knownhosts_name(names[_i].host, names[_i].port);

	ck_assert_str_eq(name, names[_i].want);
	free(name);
}
END_TEST

/* A line over the bound is skipped whole; the lines after it are read. */
START_TEST(test_read_long_line)
{
	char path[] = "/tmp/gpufleet-kh.XXXXXX";
	struct knownhosts kh = { NULL, 0 };
	FILE *f;
	int fd, i;

	ck_assert_int_ne(fd = mkstemp(path), -1);
	ck_assert_ptr_nonnull(f = fdopen(fd, "w"));
	fputs("a.example ssh-ed25519 " KEY1 " ", f);
	for (i = 0; i < 3 * KNOWNHOSTS_LINE_MAX; i++)
		fputc('x', f);
	fputs("\na.example ssh-rsa " KEY1 "\n", f);
	fputs("b.example ssh-ed25519 " KEY1 "\n", f);
	fclose(f);
	ck_assert_int_eq(knownhosts_read(path, "a.example", &kh), 0);
	ck_assert_uint_eq(kh.nkeys, 1);
	ck_assert_str_eq(kh.keys[0].type, "ssh-rsa");
	ck_assert_int_eq(kh.keys[0].line, 2);
	ck_assert_str_eq(kh.keys[0].file, path);
	knownhosts_free(&kh);
	unlink(path);
	ck_assert_int_eq(knownhosts_read(path, "a.example", &kh), -1);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("knownhosts");
	TCase *tc = tcase_create("core");
	SRunner *sr;
	int failed;

	tcase_add_loop_test(
	    tc, test_parse_line, 0, (int)(sizeof lines / sizeof lines[0]));
	tcase_add_loop_test(
	    tc, test_name, 0, (int)(sizeof names / sizeof names[0]));
	tcase_add_test(tc, test_read_long_line);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}

/* Login lines as platforms print them, read into host, port, user, key. */

#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "loginline.h"

struct line_case {
	const char *line;
	const char *user; /* NULL: none given */
	const char *host; /* NULL: refused, err is in the message */
	int port;	  /* 0: none given */
	const char *identity;
	const char *ignored;
	const char *err;
};

static const struct line_case line_cases[] = {
	/* What AutoDL, featurize and vast.ai print. */
	{ "ssh -p 38076 root@region-41.seetacloud.com", "root",
	    "region-41.seetacloud.com", 38076, NULL, NULL, NULL },
	{ "ssh -p 40123 root@ssh5.vast.ai -L 8080:localhost:8080", "root",
	    "ssh5.vast.ai", 40123, NULL, "-L", NULL },
	{ "  ssh  -p 22  root@h\n", "root", "h", 22, NULL, NULL, NULL },
	{ "ssh h", NULL, "h", 0, NULL, NULL, NULL },
	{ "/usr/bin/ssh u@h", "u", "h", 0, NULL, NULL, NULL },
	/* -p, -l, -i in every spelling getopt takes. */
	{ "ssh -p2222 -lubuntu h", "ubuntu", "h", 2222, NULL, NULL, NULL },
	{ "ssh -l ubuntu -i ~/.ssh/k h -p 2", "ubuntu", "h", 2, "~/.ssh/k",
	    NULL, NULL },
	{ "ssh -i/k/id h", NULL, "h", 0, "/k/id", NULL, NULL },
	{ "ssh -vp 2222 h", NULL, "h", 2222, NULL, "-v", NULL },
	{ "ssh -vvv -A -X -C -t -tt h", NULL, "h", 0, NULL,
	    "-v, -A, -X, -C, -t", NULL },
	{ "ssh -- h", NULL, "h", 0, NULL, NULL, NULL },
	/* -o as ssh reads it. */
	{ "ssh -o Port=2200 -o User=u -o IdentityFile=/k h", "u", "h", 2200,
	    "/k", NULL, NULL },
	{ "ssh -oPort=2200 -oUser=u h", "u", "h", 2200, NULL, NULL, NULL },
	{ "ssh -o 'Port 2200' -o \"user  =  u\" h", "u", "h", 2200, NULL, NULL,
	    NULL },
	{ "ssh -o Port\\ 7 h", NULL, "h", 7, NULL, NULL, NULL },
	{ "ssh -o 'IdentityFile \"/a b/k\"' h", NULL, "h", 0, "/a b/k", NULL,
	    NULL },
	{ "ssh -o HostName=10.0.0.5 alias", NULL, "10.0.0.5", 0, NULL, NULL,
	    NULL },
	{ "ssh -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null "
	  "-o serveraliveinterval=30 h",
	    NULL, "h", 0, NULL,
	    "-o StrictHostKeyChecking, -o UserKnownHostsFile, "
	    "-o ServerAliveInterval",
	    NULL },
	/* The same value twice is fine. */
	{ "ssh -p 22 -o Port=22 -l u u@h", "u", "h", 22, NULL, NULL, NULL },
	/* Quoting. */
	{ "ssh -p '38076' \"root\"@'h'", "root", "h", 38076, NULL, NULL, NULL },
	{ "ssh -i '/my keys/a' h", NULL, "h", 0, "/my keys/a", NULL, NULL },
	{ "ssh -i \"/my \\\"keys\\\"/a\" h", NULL, "h", 0, "/my \"keys\"/a",
	    NULL, NULL },
	{ "ssh -i /my\\ keys/a h", NULL, "h", 0, "/my keys/a", NULL, NULL },
	/* IPv6. */
	{ "ssh -p 2222 root@2001:db8::5", "root", "2001:db8::5", 2222, NULL,
	    NULL, NULL },
	{ "ssh root@[2001:db8::5]", "root", "2001:db8::5", 0, NULL, NULL,
	    NULL },
	{ "ssh -p 22 root@[fe80::1%eth0]:22", "root", "fe80::1%eth0", 22, NULL,
	    NULL, NULL },
	/* ssh:// (RFC 4248). */
	{ "ssh://root@h:2222", "root", "h", 2222, NULL, NULL, NULL },
	{ "ssh://h", NULL, "h", 0, NULL, NULL, NULL },
	{ "ssh://h/", NULL, "h", 0, NULL, NULL, NULL },
	{ "ssh://u@[::1]:2", "u", "::1", 2, NULL, NULL, NULL },
	{ "ssh ssh://u@h:2", "u", "h", 2, NULL, NULL, NULL },
	/* Refused, with the reason. */
	{ "ssh -J jump@j root@h", NULL, NULL, 0, NULL, NULL,
	    "-J (ProxyJump) is not read from the login line: add the jump "
	    "host as its own instance and use --jump NAME" },
	{ "ssh -o ProxyJump=j h", NULL, NULL, 0, NULL, NULL,
	    "-o ProxyJump (ProxyJump) is not read from the login line" },
	{ "ssh -Jj h", NULL, NULL, 0, NULL, NULL, "-J (ProxyJump)" },
	{ "ssh -o 'ProxyCommand nc %h %p' h", NULL, NULL, 0, NULL, NULL,
	    "-o ProxyCommand (a command to connect through)" },
	{ "ssh -F cfg h", NULL, NULL, 0, NULL, NULL, "-F (an ssh_config" },
	{ "ssh -b 10.0.0.1 h", NULL, NULL, 0, NULL, NULL,
	    "-b (bind address) changes how ssh connects" },
	{ "ssh -W h:22 j", NULL, NULL, 0, NULL, NULL, "-W (stdio" },
	{ "ssh -G h", NULL, NULL, 0, NULL, NULL, "not a login line" },
	{ "ssh -o FooBar=1 h", NULL, NULL, 0, NULL, NULL,
	    "-o FooBar is not an ssh option gpufleet knows" },
	{ "ssh -Z h", NULL, NULL, 0, NULL, NULL, "'-Z' in the login line" },
	{ "ssh --port 22 h", NULL, NULL, 0, NULL, NULL,
	    "'--port' in the login line" },
	{ "ssh -p", NULL, NULL, 0, NULL, NULL, "-p in the login line needs" },
	{ "ssh -p 0 h", NULL, NULL, 0, NULL, NULL, "out of range" },
	{ "ssh -p 65536 h", NULL, NULL, 0, NULL, NULL, "out of range" },
	{ "ssh -p 22x h", NULL, NULL, 0, NULL, NULL, "not a number" },
	{ "ssh -p -1 h", NULL, NULL, 0, NULL, NULL, "not a number" },
	{ "ssh -o Port= h", NULL, NULL, 0, NULL, NULL, "-o Port has no value" },
	{ "ssh h:0", NULL, NULL, 0, NULL, NULL, "out of range" },
	{ "ssh -p 22 -o Port=23 h", NULL, NULL, 0, NULL, NULL,
	    "two ports: 22 and 23" },
	{ "ssh -p 22 h:23", NULL, NULL, 0, NULL, NULL, "two ports" },
	{ "ssh -l a b@h", NULL, NULL, 0, NULL, NULL, "two users: 'a' and 'b'" },
	{ "ssh -p 22", NULL, NULL, 0, NULL, NULL, "names no host" },
	{ "ssh", NULL, NULL, 0, NULL, NULL, "names no host" },
	{ "", NULL, NULL, 0, NULL, NULL, "empty" },
	{ "scp -P 22 h", NULL, NULL, 0, NULL, NULL,
	    "starts with ssh, not 'scp'" },
	{ "ssh h nvidia-smi", NULL, NULL, 0, NULL, NULL,
	    "'nvidia-smi' after the host would be a remote command" },
	{ "ssh h; rm -rf ~", NULL, NULL, 0, NULL, NULL, "';' outside quotes" },
	{ "ssh $(id)@h", NULL, NULL, 0, NULL, NULL, "'$' outside quotes" },
	{ "ssh \"$HOST\"", NULL, NULL, 0, NULL, NULL, "'$' inside" },
	{ "ssh h | cat", NULL, NULL, 0, NULL, NULL, "'|'" },
	{ "ssh 'h", NULL, NULL, 0, NULL, NULL, "' without its closing '" },
	{ "ssh \"h", NULL, NULL, 0, NULL, NULL, "without its closing \"" },
	{ "ssh h\\", NULL, NULL, 0, NULL, NULL, "ends in \\" },
	{ "ssh h\x1b[2J", NULL, NULL, 0, NULL, NULL, "control character" },
	{ "ssh 'bad host'", NULL, NULL, 0, NULL, NULL, "host 'bad host'" },
	{ "ssh -l -x h", NULL, NULL, 0, NULL, NULL, "not a valid login" },
	{ "ssh -o HostName=-oProxyCommand=x h", NULL, NULL, 0, NULL, NULL,
	    "must not start with '-'" },
	{ "ssh ssh://h/path", NULL, NULL, 0, NULL, NULL, "path or parameters" },
	{ "ssh://u;fingerprint=x@h", NULL, NULL, 0, NULL, NULL,
	    "';' outside quotes" },
	{ "'ssh://u;fingerprint=x@h'", NULL, NULL, 0, NULL, NULL,
	    "path or parameters" },
	{ "ssh://", NULL, NULL, 0, NULL, NULL, "no host" },
	{ "ssh [::1", NULL, NULL, 0, NULL, NULL, "'[' without ']'" },
};

START_TEST(test_line)
{
	const struct line_case *c = &line_cases[_i];
	struct loginline ll;
	char *cause = NULL;
	int r;

	r = loginline_parse(c->line, &ll, &cause);
	if (c->host == NULL) {
		ck_assert_msg(r == -1, "'%s' accepted", c->line);
		ck_assert_ptr_nonnull(cause);
		ck_assert_msg(strstr(cause, c->err) != NULL,
		    "'%s': '%s' does not say '%s'", c->line, cause, c->err);
		ck_assert_ptr_null(ll.host);
		free(cause);
		return;
	}
	ck_assert_msg(r == 0, "'%s' refused: %s", c->line, cause);
	ck_assert_str_eq(ll.host, c->host);
	ck_assert_int_eq(ll.port, c->port);
	if (c->user == NULL)
		ck_assert_ptr_null(ll.user);
	else
		ck_assert_str_eq(ll.user, c->user);
	if (c->identity == NULL)
		ck_assert_ptr_null(ll.identity);
	else
		ck_assert_str_eq(ll.identity, c->identity);
	if (c->ignored == NULL)
		ck_assert_ptr_null(ll.ignored);
	else
		ck_assert_str_eq(ll.ignored, c->ignored);
	loginline_clear(&ll);
}
END_TEST

/* The words of `gpufleet add NAME ssh -p 1 h` as the shell split them. */
START_TEST(test_words)
{
	char *ok[] = { "ssh", "-o", "Port 2200", "-i", "/a b", "u@h" };
	char *bad[] = { "ssh", "-J", "j", "h" };
	char *ctl[] = { "ssh", "h\n" };
	struct loginline ll;
	char *cause = NULL;

	ck_assert_int_eq(loginline_parse_words(ok, 6, &ll, &cause), 0);
	ck_assert_str_eq(ll.host, "h");
	ck_assert_str_eq(ll.user, "u");
	ck_assert_int_eq(ll.port, 2200);
	ck_assert_str_eq(ll.identity, "/a b");
	loginline_clear(&ll);
	ck_assert_int_eq(loginline_parse_words(bad, 4, &ll, &cause), -1);
	ck_assert_str_eq(cause,
	    "-J (ProxyJump) is not read from the login line: add the jump "
	    "host as its own instance and use --jump NAME");
	free(cause);
	ck_assert_int_eq(loginline_parse_words(ctl, 2, &ll, &cause), -1);
	ck_assert_ptr_nonnull(strstr(cause, "control character (0x0a)"));
	free(cause);
}
END_TEST

struct split_case {
	const char *line;
	int n; /* -1: refused */
	const char *words[4];
};

static const struct split_case split_cases[] = {
	{ "a  b\tc", 3, { "a", "b", "c" } },
	{ "'a b'c \"d e\"", 2, { "a bc", "d e" } },
	{ "''", 1, { "" } },
	{ "a\\ b \\'", 2, { "a b", "'" } },
	{ "\"\\\\ \\$ \\x\"", 1, { "\\ $ \\x" } },
	{ "a#b", 1, { "a#b" } },
	{ "# comment", -1, { NULL } },
	{ "a > f", -1, { NULL } },
	{ "a && b", -1, { NULL } },
	{ "a `id`", -1, { NULL } },
	{ "", 0, { NULL } },
	{ "ssh -p 22 \\\n  root@h", 4, { "ssh", "-p", "22", "root@h" } },
	{ "ssh \\\r\nh", 2, { "ssh", "h" } },
	{ "a\\\nb", 1, { "ab" } },
};

START_TEST(test_split)
{
	const struct split_case *c = &split_cases[_i];
	char **w, *cause = NULL;
	size_t n, i;
	int r;

	r = loginline_split(c->line, &w, &n, &cause);
	if (c->n < 0) {
		ck_assert_msg(r == -1, "'%s' split", c->line);
		ck_assert_ptr_nonnull(cause);
		free(cause);
		return;
	}
	ck_assert_msg(r == 0, "'%s': %s", c->line, cause);
	ck_assert_int_eq(n, c->n);
	for (i = 0; i < n; i++)
		ck_assert_str_eq(w[i], c->words[i]);
	loginline_free_words(w, n);
}
END_TEST

START_TEST(test_is_line)
{
	ck_assert(loginline_is_line("ssh -p 1 h"));
	ck_assert(loginline_is_line("  ssh h"));
	ck_assert(loginline_is_line("ssh://h"));
	ck_assert(loginline_is_line("ssh"));
	ck_assert(!loginline_is_line("sshhost:22"));
	ck_assert(!loginline_is_line("root@ssh"));
	ck_assert(!loginline_is_line("ssh.example.com"));
	/* A path to ssh, as the words form takes it. */
	ck_assert(loginline_is_line("/usr/bin/ssh -p 22 root@h"));
	ck_assert(loginline_is_line(" /usr/bin/ssh"));
	ck_assert(!loginline_is_line("openssh -p 1 h"));
	ck_assert(!loginline_is_line("root@h/ssh:22 x"));
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("loginline");
	TCase *tc = tcase_create("core");
	SRunner *sr;
	int failed;

	tcase_add_loop_test(
	    tc, test_line, 0, sizeof line_cases / sizeof line_cases[0]);
	tcase_add_loop_test(
	    tc, test_split, 0, sizeof split_cases / sizeof split_cases[0]);
	tcase_add_test(tc, test_words);
	tcase_add_test(tc, test_is_line);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}

/* Host specs, ports and per-field validation of instances. */

#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "instance.h"

struct spec_case {
	const char *spec;
	int ok;
	const char *user; /* NULL: none given */
	const char *host;
	int port; /* 0: none given */
};

static const struct spec_case spec_cases[] = {
	{ "example.com", 1, NULL, "example.com", 0 },
	{ "root@1.2.3.4", 1, "root", "1.2.3.4", 0 },
	{ "ubuntu@host-1.example.com:2222", 1, "ubuntu", "host-1.example.com",
	    2222 },
	{ "h:22", 1, NULL, "h", 22 },
	{ "[::1]:2222", 1, NULL, "::1", 2222 },
	{ "u@[fe80::1%eth0]:22", 1, "u", "fe80::1%eth0", 22 },
	{ "[2001:db8::5]", 1, NULL, "2001:db8::5", 0 },
	{ "2001:db8::5", 1, NULL, "2001:db8::5", 0 },
	{ "h:65535", 1, NULL, "h", 65535 },
	{ "h:0", 0, NULL, NULL, 0 },
	{ "h:65536", 0, NULL, NULL, 0 },
	{ "h:22x", 0, NULL, NULL, 0 },
	{ "h:", 0, NULL, NULL, 0 },
	{ "h:-1", 0, NULL, NULL, 0 },
	{ "h: 22", 0, NULL, NULL, 0 },
	{ "bad host", 0, NULL, NULL, 0 },
	{ "h;rm -rf /", 0, NULL, NULL, 0 },
	{ "$(reboot)", 0, NULL, NULL, 0 },
	{ "h`id`", 0, NULL, NULL, 0 },
	{ "-oProxyCommand=x", 0, NULL, NULL, 0 },
	{ "", 0, NULL, NULL, 0 },
	{ "@host", 0, NULL, NULL, 0 },
	{ "-u@host", 0, NULL, NULL, 0 },
	{ "[::1", 0, NULL, NULL, 0 },
	{ "[host]:22", 0, NULL, NULL, 0 },
	{ "[::1]x", 0, NULL, NULL, 0 },
	{ "h\n", 0, NULL, NULL, 0 },
	{ "ho\xc3\xa9st", 0, NULL, NULL, 0 },
};

START_TEST(test_hostspec)
{
	const struct spec_case *c = &spec_cases[_i];
	char *user = NULL, *host = NULL, *cause = NULL;
	int port = 0, r;

	r = instance_parse_hostspec(c->spec, &user, &host, &port, &cause);
	if (!c->ok) {
		ck_assert_msg(r == -1, "'%s' accepted", c->spec);
		ck_assert_ptr_nonnull(cause);
		ck_assert_ptr_null(host);
		free(cause);
		return;
	}
	ck_assert_msg(r == 0, "'%s' refused: %s", c->spec, cause);
	if (c->user == NULL)
		ck_assert_ptr_null(user);
	else
		ck_assert_str_eq(user, c->user);
	ck_assert_str_eq(host, c->host);
	ck_assert_int_eq(port, c->port);
	free(user);
	free(host);
}
END_TEST

struct field_case {
	const char *field;
	const char *value;
	int ok;
};

static const struct field_case field_cases[] = {
	{ "name", "a100-1", 1 },
	{ "name", "A.b_c-9", 1 },
	{ "name",
	    "x123456789012345678901234567890123456789012345678901234567890123",
	    0 }, /* 64 characters */
	{ "name",
	    "x12345678901234567890123456789012345678901234567890123456789012",
	    1 }, /* 63 characters */
	{ "name", "-a", 0 },
	{ "name", ".a", 0 },
	{ "name", "a b", 0 },
	{ "name", "a/b", 0 },
	{ "name", "a*", 0 },
	{ "name", "all", 0 },
	{ "name", "", 0 },
	{ "port", "22", 1 },
	{ "port", "0", 0 },
	{ "port", "65536", 0 },
	{ "port", "22x", 0 },
	{ "port", "+22", 0 },
	{ "port", "99999999999999999999", 0 },
	{ "user", "ubuntu", 1 },
	{ "user", "svc$", 1 },
	{ "user", "a b", 0 },
	{ "user", "-oX", 0 },
	{ "user", "", 0 },
	{ "host", "10.0.0.1", 1 },
	{ "host", "a|b", 0 },
	{ "host", "a:b", 0 },
	{ "provider", "autodl", 1 },
	{ "provider", "", 1 },
	{ "provider", "auto dl", 0 },
	{ "region", "cn-beijing", 1 },
	{ "identity", "/home/u/.ssh/id_ed25519", 1 },
	{ "identity", "/tmp/a\nb", 0 },
	{ "remote_dir", "~/.cache/gpufleet", 1 },
	{ "remote_dir", "/opt/gpufleet", 1 },
	{ "remote_dir", "relative/dir", 0 },
	{ "remote_dir", "~/a b", 0 },
	{ "remote_dir", "~/$(id)", 0 },
	{ "authorized_keys_file", "~/.ssh/authorized_keys", 1 },
	{ "authorized_keys_file", "~/.ssh/k;rm", 0 },
	{ "notes", "rented for the ICML deadline", 1 },
	{ "notes", "bell\a", 0 },
	{ "jump", "gpu-gw", 1 },
	{ "jump", "", 1 }, /* clears it: direct */
	{ "jump", "a b", 0 },
	{ "jump", "-oProxyCommand=x", 0 },
	{ "jump", "all", 0 },
	{ "nosuchfield", "x", 0 },
};

START_TEST(test_set_field)
{
	const struct field_case *c = &field_cases[_i];
	struct instance in;
	char *cause = NULL;
	int r;

	instance_init(&in);
	r = instance_set_field(&in, c->field, c->value, &cause);
	if (c->ok)
		ck_assert_msg(
		    r == 0, "%s=%s refused: %s", c->field, c->value, cause);
	else {
		ck_assert_msg(r == -1, "%s=%s accepted", c->field, c->value);
		ck_assert_ptr_nonnull(cause);
		ck_assert_ptr_null(strchr(cause, '\n'));
	}
	free(cause);
	instance_clear(&in);
}
END_TEST

/* A jump names another instance: never itself; empty clears it. */
START_TEST(test_jump_field)
{
	struct instance in;
	char *cause = NULL;

	instance_init(&in);
	in.name = strdup("lab-1");
	ck_assert_int_eq(instance_set_field(&in, "jump", "gw", &cause), 0);
	ck_assert_str_eq(in.jump, "gw");
	ck_assert_int_eq(instance_set_field(&in, "jump", "lab-1", &cause), -1);
	ck_assert_str_eq(cause, "lab-1 cannot be its own jump host");
	ck_assert_str_eq(in.jump, "gw");
	free(cause);
	ck_assert_int_eq(instance_set_field(&in, "jump", "", &cause), 0);
	ck_assert_ptr_null(in.jump);
	instance_clear(&in);
}
END_TEST

START_TEST(test_unknown_field_lists_valid)
{
	struct instance in;
	char *cause = NULL;

	instance_init(&in);
	ck_assert_int_eq(instance_set_field(&in, "prot", "22", &cause), -1);
	ck_assert_ptr_nonnull(strstr(cause, "'prot'"));
	ck_assert_ptr_nonnull(strstr(cause, "port"));
	ck_assert_ptr_nonnull(strstr(cause, "authorized_keys_file"));
	free(cause);
	instance_clear(&in);
}
END_TEST

START_TEST(test_tags_sorted_unique)
{
	struct instance in;

	instance_init(&in);
	ck_assert_int_eq(instance_add_tag(&in, "train"), 1);
	ck_assert_int_eq(instance_add_tag(&in, "a100"), 1);
	ck_assert_int_eq(instance_add_tag(&in, "train"), 0);
	ck_assert_int_eq(in.ntags, 2);
	ck_assert_str_eq(in.tags[0], "a100");
	ck_assert_str_eq(in.tags[1], "train");
	ck_assert_int_eq(instance_remove_tag(&in, "a100"), 1);
	ck_assert_int_eq(instance_remove_tag(&in, "a100"), 0);
	ck_assert_int_eq(in.ntags, 1);
	instance_clear(&in);
}
END_TEST

START_TEST(test_target)
{
	struct instance in;
	char *s;

	instance_init(&in);
	in.host = strdup("::1");
	in.port = 2222;
	s = instance_target(&in);
	ck_assert_str_eq(s, "root@[::1]:2222");
	free(s);
	instance_clear(&in);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("instance");
	TCase *tc = tcase_create("core");
	SRunner *sr;
	int failed;

	tcase_add_loop_test(
	    tc, test_hostspec, 0, sizeof spec_cases / sizeof spec_cases[0]);
	tcase_add_loop_test(
	    tc, test_set_field, 0, sizeof field_cases / sizeof field_cases[0]);
	tcase_add_test(tc, test_unknown_field_lists_valid);
	tcase_add_test(tc, test_jump_field);
	tcase_add_test(tc, test_tags_sorted_unique);
	tcase_add_test(tc, test_target);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? 0 : 1;
}

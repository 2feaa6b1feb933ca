/*
 * Managed keys: file modes whatever the umask, O_EXCL refusal, the public
 * key comment, names, the rotation lock, re-injected keys and the line
 * parser as harden uses it (the edit itself: test_agent_authkeys.c).
 */

#include <sys/stat.h>
#include <sys/wait.h>

#include <check.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "keys.h"
#include "status.h"
#include "xmalloc.h"

static char *tmpdir(void);
static char *slurp(const char *, size_t *);

#define ED                                                                     \
	"AAAAC3NzaC1lZDI1NTE5AAAAIDEvK1fpksulwHA6JHVHY3aoM90PEdEB4zeL2VO0T9P6"
#define EC256                                                                  \
	"AAAAE2VjZHNhLXNoYTItbmlzdHAyNTYAAAAIbmlzdHAyNTYAAABBBM4vELU/"         \
	"v7nJQKzS/"                                                            \
	"+kboN7T4GRufbSVjkSd++aNS1uTZWI0l9pUd0JhH+n+SHXJJccVmMxY+"             \
	"ULDxIKgbrExVU8="

/* 2026-11-30T12:34:56Z */
#define NOW ((time_t)1796042096)

static char *
tmpdir(void)
{
	char *d = xstrdup("/tmp/test_keys.XXXXXX");

	ck_assert_ptr_nonnull(mkdtemp(d));
	return d;
}

static char *
slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	char *buf = xmalloc(65536);
	size_t n;

	ck_assert_ptr_nonnull(f);
	n = fread(buf, 1, 65535, f);
	buf[n] = '\0';
	fclose(f);
	if (len != NULL)
		*len = n;
	return buf;
}

static const mode_t umasks[] = { 0, 022, 077, 0277, 0377 };

START_TEST(test_modes)
{
	struct keys_key k;
	struct stat sb;
	char *d = tmpdir(), *dir, *cause = NULL, *pub;
	mode_t old = umask(umasks[_i]);
	int r;

	xasprintf(&dir, "%s/a/b/keys", d);
	r = keys_generate(dir, "ed25519", "k1", NULL, NOW, &k, NULL, &cause);
	umask(old);
	ck_assert_msg(r == 0, "%s", cause);
	ck_assert_int_eq(stat(dir, &sb), 0);
	ck_assert_int_eq(sb.st_mode & 07777, 0700);
	ck_assert_int_eq(stat(k.path, &sb), 0);
	ck_assert_int_eq(sb.st_mode & 07777, 0600);
	xasprintf(&pub, "%s.pub", k.path);
	ck_assert_int_eq(stat(pub, &sb), 0);
	ck_assert_int_eq(sb.st_mode & 07777, 0600);
	keys_key_clear(&k);
	free(pub);
	free(dir);
	free(d);
}
END_TEST

START_TEST(test_open_dir_refused)
{
	char *d = tmpdir(), *cause = NULL;

	ck_assert_int_eq(chmod(d, 0755), 0);
	ck_assert_int_eq(keys_make_dir(d, &cause), -GF_EUSAGE);
	ck_assert_ptr_nonnull(strstr(cause, "chmod 700"));
	free(cause);
	free(d);
}
END_TEST

START_TEST(test_excl)
{
	struct keys_key k, k2;
	char *d = tmpdir(), *cause = NULL, *path, *before, *after, *link;
	int r;

	ck_assert_int_eq(
	    keys_generate(d, "ed25519", "k", NULL, NOW, &k, NULL, &cause), 0);
	before = slurp(k.path, NULL);
	r = keys_generate(d, "ed25519", "k", NULL, NOW, &k2, NULL, &cause);
	ck_assert_int_ne(r, 0);
	ck_assert_ptr_nonnull(strstr(cause, "File exists"));
	free(cause);
	cause = NULL;
	after = slurp(k.path, NULL);
	ck_assert_str_eq(before, after);

	/* A symlink in the way is not followed. */
	xasprintf(&path, "%s/target", d);
	xasprintf(&link, "%s/l", d);
	ck_assert_int_eq(symlink(path, link), 0);
	ck_assert_int_ne(keys_write_private(link, "x", 1, &cause), 0);
	ck_assert_int_ne(access(path, F_OK), 0);
	free(cause);
	keys_key_clear(&k);
	free(before);
	free(after);
	free(path);
	free(link);
	free(d);
}
END_TEST

struct type_case {
	const char *type;
	const char *prefix;
};

static const struct type_case types[] = {
	{ "ed25519", "ssh-ed25519 " },
	{ "ecdsa", "ecdsa-sha2-nistp256 " },
	{ "rsa", "ssh-rsa " },
};

START_TEST(test_pubkey_format)
{
	struct keys_key k;
	ssh_key key = NULL;
	char *d = tmpdir(), *cause = NULL, *pub, *text, *want;
	size_t len;

	ck_assert_int_eq(keys_generate(d, types[_i].type, "web-1.a_b", NULL,
			     NOW, &k, &key, &cause),
	    0);
	ck_assert_ptr_nonnull(key);
	xasprintf(&want, "%s%s gpufleet:web-1.a_b:2026-11-30", types[_i].prefix,
	    k.blob);
	ck_assert_str_eq(k.pubkey, want);
	xasprintf(&pub, "%s.pub", k.path);
	text = slurp(pub, &len);
	ck_assert_uint_eq(len, strlen(want) + 1);
	ck_assert_int_eq(strncmp(text, want, strlen(want)), 0);
	ck_assert_int_eq(text[len - 1], '\n');
	ck_assert_int_eq(strncmp(k.fingerprint, "SHA256:", 7), 0);
	ck_assert(keys_valid_blob(k.blob));
	ssh_key_free(key);
	keys_key_clear(&k);
	free(want);
	free(pub);
	free(text);
	free(d);
}
END_TEST

START_TEST(test_passphrase)
{
	struct keys_key k;
	ssh_key key = NULL;
	char *d = tmpdir(), *cause = NULL, *text;

	ck_assert_int_eq(
	    keys_generate(d, "ed25519", "p", "s3cret", NOW, &k, NULL, &cause),
	    0);
	text = slurp(k.path, NULL);
	ck_assert_ptr_nonnull(strstr(text, "OPENSSH PRIVATE KEY"));
	ck_assert_int_ne(keys_load(k.path, NULL, &key, &cause), 0);
	free(cause);
	cause = NULL;
	ck_assert_int_eq(keys_load(k.path, "s3cret", &key, &cause), 0);
	ssh_key_free(key);
	keys_key_clear(&k);
	free(text);
	free(d);
}
END_TEST

struct name_case {
	const char *name;
	int ok;
};

static const struct name_case names[] = {
	{ "a", 1 },
	{ "inst-1-20261130-120000", 1 },
	{ "A.b_c-9", 1 },
	{ "", 0 },
	{ ".hidden", 0 },
	{ "-opt", 0 },
	{ "a/b", 0 },
	{ "a b", 0 },
	{ "a'b", 0 },
	{ "0123456789012345678901234567890123456789012345678901234567890123",
	    1 },
	{ "01234567890123456789012345678901234567890123456789012345678901234",
	    0 },
};

START_TEST(test_names)
{
	char *cause = NULL;
	int r = keys_check_name(names[_i].name, &cause);

	ck_assert_msg((r == 0) == names[_i].ok, "%s", names[_i].name);
	free(cause);
}
END_TEST

START_TEST(test_comment)
{
	char *c = keys_comment("n", NOW);

	ck_assert_str_eq(c, "gpufleet:n:2026-11-30");
	free(c);
}
END_TEST

START_TEST(test_lock)
{
	struct inventory *inv = NULL, *inv2 = NULL;
	char *d = tmpdir(), *db, *cause = NULL;
	pid_t child;
	char sql[128];

	xasprintf(&db, "%s/fleet.db", d);
	ck_assert_int_eq(inventory_open(db, &inv, &cause), 0);
	ck_assert_int_eq(inventory_open(db, &inv2, &cause), 0);
	ck_assert_int_eq(keys_lock(inv, &cause), 0);
	/* Held by a live process: refused. */
	child = fork();
	if (child == 0) {
		pause();
		_exit(0);
	}
	snprintf(sql, sizeof sql, "UPDATE key_lock SET pid = %d", (int)child);
	ck_assert_int_eq(sqlite3_exec(inv->db, sql, NULL, NULL, NULL), 0);
	ck_assert_int_eq(keys_lock(inv2, &cause), -GF_EUSAGE);
	ck_assert_ptr_nonnull(strstr(cause, "another key rotation"));
	free(cause);
	cause = NULL;
	/* Its process is gone: taken over. */
	kill(child, SIGKILL);
	waitpid(child, NULL, 0);
	ck_assert_int_eq(keys_lock(inv2, &cause), 0);
	keys_unlock(inv2);
	ck_assert_int_eq(keys_lock(inv, &cause), 0);
	keys_unlock(inv);
	inventory_close(inv);
	inventory_close(inv2);
	free(db);
	free(d);
}
END_TEST

/* A managed key follows the instance; a retired key that is back is found. */
START_TEST(test_current_and_reinjected)
{
	struct inventory *inv = NULL;
	struct instance in;
	struct keys_key k, dup;
	char *d = tmpdir(), *db, *kdir, *cause = NULL, *found = NULL, *text;

	xasprintf(&db, "%s/fleet.db", d);
	xasprintf(&kdir, "%s/keys", d);
	ck_assert_int_eq(inventory_open(db, &inv, &cause), 0);
	instance_init(&in);
	in.name = xstrdup("a100-1");
	in.host = xstrdup("127.0.0.1");
	in.identity = xstrdup("/home/u/.ssh/id_ed25519");
	in.created_at = NOW;
	ck_assert_int_eq(inventory_begin(inv, &cause), 0);
	ck_assert_int_eq(inventory_add(inv, &in, &cause), 0);
	ck_assert_int_eq(inventory_commit(inv, &cause), 0);
	ck_assert_int_eq(keys_apply_current(inv, &in, &cause), 0);
	ck_assert_str_eq(in.identity, "/home/u/.ssh/id_ed25519");

	ck_assert_int_eq(
	    keys_generate(kdir, "ed25519", "k", NULL, NOW, &k, NULL, &cause),
	    0);
	ck_assert_int_eq(keys_add(inv, &k, &cause), 0);
	/* A second key of the same name is the user's error, said as such. */
	dup = k;
	ck_assert_int_eq(keys_add(inv, &dup, &cause), -GF_EUSAGE);
	ck_assert_str_eq(cause, "a key named 'k' exists already");
	free(cause);
	cause = NULL;
	ck_assert_int_eq(keys_set_instance_key(inv, in.id, &k, &cause), 0);
	ck_assert_int_eq(keys_apply_current(inv, &in, &cause), 1);
	ck_assert_str_eq(in.identity, k.path);
	ck_assert_int_eq(keys_is_managed_blob(inv, k.blob, &cause), 1);
	ck_assert_int_eq(keys_is_managed_blob(inv, "AAAA", &cause), 0);
	/* The same key with a \f inside its base64, as sshd reads it. */
	xasprintf(&text, "%.20s\f%s", k.blob, k.blob + 20);
	ck_assert_int_eq(keys_is_managed_blob(inv, text, &cause), 1);
	free(text);

	ck_assert_int_eq(keys_retire_blob(inv, in.id, "ssh-ed25519", k.blob,
			     "rotated", &cause),
	    0);
	xasprintf(&text, "# x\nssh-ed25519 %sX a\n", k.blob);
	ck_assert_int_eq(keys_reinjected(inv, in.id, text, &found, &cause), 0);
	free(text);
	/* Quoted in an option is not back: the line's key is another. */
	xasprintf(
	    &text, "command=\"ssh-ed25519 %s\" ssh-ed25519 " ED " x\n", k.blob);
	ck_assert_int_eq(keys_reinjected(inv, in.id, text, &found, &cause), 0);
	free(text);
	xasprintf(&text, "# x\nno-pty ssh-ed25519 %s back\r\n", k.blob);
	ck_assert_int_eq(keys_reinjected(inv, in.id, text, &found, &cause), 1);
	ck_assert_ptr_nonnull(strstr(found, k.fingerprint));
	ck_assert_ptr_nonnull(strstr(found, "(rotated)"));
	free(found);
	free(text);
	/* Back with a \v ending its blob: sshd reads the key. */
	xasprintf(&text, "ssh-ed25519 %s\v back\n", k.blob);
	ck_assert_int_eq(keys_reinjected(inv, in.id, text, &found, &cause), 1);
	free(found);
	free(text);
	keys_key_clear(&k);
	instance_clear(&in);
	inventory_close(inv);
	free(db);
	free(kdir);
	free(d);
}
END_TEST

/* keys_parse_line, as harden uses it: the parts as C strings. */
struct line_case {
	const char *line;
	const char *options; /* NULL: no key */
	const char *type;
	const char *blob;
	const char *comment;
};

static const struct line_case lines[] = {
	{ "ssh-ed25519 " ED " c@d", "", "ssh-ed25519", ED, "c@d" },
	{ "command=\"echo a b\",no-pty ecdsa-sha2-nistp256 " EC256 " x y\r",
	    "command=\"echo a b\",no-pty", "ecdsa-sha2-nistp256", EC256,
	    "x y" },
	{ "command=\"ssh-ed25519 " EC256 "\" ssh-ed25519 " ED,
	    "command=\"ssh-ed25519 " EC256 "\"", "ssh-ed25519", ED, "" },
	{ "# ssh-ed25519 " ED " commented", NULL, NULL, NULL, NULL },
	{ "", NULL, NULL, NULL, NULL },
	{ "garbage", NULL, NULL, NULL, NULL },
	{ "ssh-rsa AAAAB3NzaUNMANAGED x", NULL, NULL, NULL, NULL },
};

START_TEST(test_parse_line)
{
	const struct line_case *c = &lines[_i];
	const char *opts = NULL, *type = NULL, *blob = NULL, *comment = NULL;
	char *buf = NULL;
	int r = keys_parse_line(c->line, &buf, &opts, &type, &blob, &comment);

	if (c->options == NULL)
		ck_assert_int_eq(r, -1);
	else {
		ck_assert_int_eq(r, 0);
		ck_assert_str_eq(opts, c->options);
		ck_assert_str_eq(type, c->type);
		ck_assert_str_eq(blob, c->blob);
		ck_assert_str_eq(comment, c->comment);
	}
	free(buf);
}
END_TEST

static Suite *
keys_suite(void)
{
	Suite *s = suite_create("keys");
	TCase *tc = tcase_create("core");

	tcase_set_timeout(tc, 60);
	tcase_add_loop_test(
	    tc, test_modes, 0, (int)(sizeof umasks / sizeof umasks[0]));
	tcase_add_test(tc, test_open_dir_refused);
	tcase_add_test(tc, test_excl);
	tcase_add_loop_test(
	    tc, test_pubkey_format, 0, (int)(sizeof types / sizeof types[0]));
	tcase_add_test(tc, test_passphrase);
	tcase_add_loop_test(
	    tc, test_names, 0, (int)(sizeof names / sizeof names[0]));
	tcase_add_test(tc, test_comment);
	tcase_add_test(tc, test_lock);
	tcase_add_test(tc, test_current_and_reinjected);
	tcase_add_loop_test(
	    tc, test_parse_line, 0, (int)(sizeof lines / sizeof lines[0]));
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	SRunner *sr = srunner_create(keys_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}

/*
 * Pinned host keys against a real SQLite file: two processes (two
 * connections) making first contact with one instance at once pin one key,
 * and the second sees the first's pin.
 */

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hostkey.h"
#include "inventory.h"
#include "status.h"

static char tmpdir[64];

static void
setup(void)
{
	snprintf(tmpdir, sizeof tmpdir, "/tmp/gpufleet-unit.XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(tmpdir));
	/* No ~/.ssh/known_hosts to take keys from. */
	ck_assert_int_eq(setenv("HOME", tmpdir, 1), 0);
}

static void
teardown(void)
{
	char cmd[128];

	snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
	ck_assert_int_eq(system(cmd), 0);
}

#define KEY1                                                                   \
	"AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl"
#define KEY2                                                                   \
	"AAAAC3NzaC1lZDI1NTE5AAAAIBbb2PVdPg2SV0kBR0lQ1JoSnf2+Ww7CrLYxdN4FIUaN"

struct race {
	struct inventory *first;
	int calls;
};

/*
 * The second connection's busy handler: it is waiting for the write lock
 * the first holds, so let the first commit its pin now, then retry.
 */
static int
commit_first(void *arg, int n)
{
	struct race *rc = arg;
	char *cause = NULL;

	(void)n;
	if (rc->calls++ == 0)
		ck_assert_int_eq(inventory_commit(rc->first, &cause), 0);
	return rc->calls < 1000;
}

/*
 * Open two connections to one database holding one instance; the first is
 * left inside BEGIN IMMEDIATE with KEY1 inserted but not committed.
 */
static void
open_race(struct inventory **a, struct inventory **b, struct instance *in)
{
	char path[128], *cause = NULL, *sql;

	snprintf(path, sizeof path, "%s/fleet.db", tmpdir);
	ck_assert_int_eq(inventory_open(path, a, &cause), 0);
	ck_assert_int_eq(inventory_open(path, b, &cause), 0);
	instance_init(in);
	in->name = strdup("h100-1");
	in->host = strdup("10.0.0.1");
	in->port = 22;
	in->created_at = 1764460800;
	ck_assert_int_eq(inventory_begin(*a, &cause), 0);
	ck_assert_int_eq(inventory_add(*a, in, &cause), 0);
	ck_assert_int_eq(inventory_commit(*a, &cause), 0);

	ck_assert_int_eq(inventory_begin(*a, &cause), 0);
	sql = sqlite3_mprintf(
	    "INSERT INTO host_key (instance_id, key_type, key_base64, "
	    "fingerprint, source, first_seen) VALUES (%lld, 'ssh-ed25519', "
	    "'%q', 'SHA256:first', 'first-use', 1764460800)",
	    (long long)in->id, KEY1);
	ck_assert_int_eq(
	    sqlite3_exec((*a)->db, sql, NULL, NULL, NULL), SQLITE_OK);
	sqlite3_free(sql);
}

START_TEST(test_second_sees_first_pin)
{
	struct inventory *a, *b;
	struct instance in;
	struct race rc = { NULL, 0 };
	struct hostkey k;
	enum engine_fail fail = EF_NONE;
	char *msg = NULL, *cause = NULL;

	open_race(&a, &b, &in);
	rc.first = a;
	sqlite3_busy_handler(b->db, commit_first, &rc);
	ck_assert_int_eq(hostkey_verify(b, HOSTKEY_ACCEPT_NEW, &in,
			     "ssh-ed25519", KEY2, "SHA256:second", &fail, &msg),
	    -1);
	ck_assert_int_ge(rc.calls, 1); /* it really waited for the first */
	ck_assert_int_eq(fail, EF_HOSTKEY_CHANGED);
	ck_assert_ptr_nonnull(strstr(msg, "HOST KEY CHANGED for h100-1"));
	ck_assert_ptr_nonnull(strstr(msg, "pinned ssh-ed25519 SHA256:first"));
	free(msg);

	/* The first pin stands, read from either connection. */
	ck_assert_int_eq(hostkey_get(b, in.id, &k, &cause), 0);
	ck_assert_str_eq(k.base64, KEY1);
	hostkey_clear(&k);
	ck_assert_int_eq(hostkey_get(a, in.id, &k, &cause), 0);
	ck_assert_str_eq(k.base64, KEY1);
	hostkey_clear(&k);
	instance_clear(&in);
	inventory_close(a);
	inventory_close(b);
}
END_TEST

START_TEST(test_second_same_key_ok)
{
	struct inventory *a, *b;
	struct instance in;
	struct race rc = { NULL, 0 };
	struct hostkey k;
	enum engine_fail fail = EF_NONE;
	char *msg = NULL, *cause = NULL;

	open_race(&a, &b, &in);
	rc.first = a;
	sqlite3_busy_handler(b->db, commit_first, &rc);
	ck_assert_int_eq(hostkey_verify(b, HOSTKEY_ACCEPT_NEW, &in,
			     "ssh-ed25519", KEY1, "SHA256:first", &fail, &msg),
	    0);
	ck_assert_int_ge(rc.calls, 1);
	ck_assert_int_eq(fail, EF_NONE);
	ck_assert_int_eq(hostkey_get(b, in.id, &k, &cause), 0);
	ck_assert_str_eq(k.source, "first-use");
	ck_assert_str_eq(k.fingerprint, "SHA256:first");
	hostkey_clear(&k);
	instance_clear(&in);
	inventory_close(a);
	inventory_close(b);
}
END_TEST

START_TEST(test_first_contact_pins)
{
	struct inventory *a, *b;
	struct instance in;
	struct hostkey k;
	enum engine_fail fail = EF_NONE;
	char *msg = NULL, *cause = NULL;

	open_race(&a, &b, &in);
	inventory_rollback(a);
	ck_assert_int_eq(hostkey_verify(b, HOSTKEY_ACCEPT_NEW, &in,
			     "ssh-ed25519", KEY2, "SHA256:second", &fail, &msg),
	    0);
	ck_assert_int_eq(hostkey_get(a, in.id, &k, &cause), 0);
	ck_assert_str_eq(k.base64, KEY2);
	hostkey_clear(&k);
	/* Strict: an unknown key is refused and nothing is pinned. */
	ck_assert_int_eq(hostkey_forget(a, in.id, &cause), 0);
	ck_assert_int_eq(hostkey_verify(b, HOSTKEY_STRICT, &in, "ssh-ed25519",
			     KEY2, "SHA256:second", &fail, &msg),
	    -1);
	ck_assert_int_eq(fail, EF_HOSTKEY_UNKNOWN);
	free(msg);
	ck_assert_int_eq(hostkey_get(a, in.id, &k, &cause), 1);
	instance_clear(&in);
	inventory_close(a);
	inventory_close(b);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("hostkey");
	TCase *tc = tcase_create("core");
	SRunner *sr;
	int failed;

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_second_sees_first_pin);
	tcase_add_test(tc, test_second_same_key_ok);
	tcase_add_test(tc, test_first_contact_pins);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? 0 : 1;
}

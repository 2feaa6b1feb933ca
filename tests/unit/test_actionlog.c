/*
 * The action log (controller/actionlog.c) in a real SQLite inventory: an
 * entry with its instances and a result set later; NULL instances stored
 * as an empty array; a result that is not known yet stays NULL.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "actionlog.h"
#include "db.h"

static struct inventory *inv;
static char dir[64];

static void
setup(void)
{
	char path[96], *cause = NULL;

	snprintf(dir, sizeof dir, "/tmp/gpufleet-actionlog.XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(path, sizeof path, "%s/fleet.db", dir);
	ck_assert_int_eq(inventory_open(path, &inv, &cause), 0);
}

static void
teardown(void)
{
	char cmd[96];

	inventory_close(inv);
	snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
	ck_assert_int_eq(system(cmd), 0);
}

/* Column col of the row id, as text ("(null)" for NULL). */
static char *
col(int64_t id, const char *column)
{
	sqlite3_stmt *st;
	char sql[128], *v;

	snprintf(sql, sizeof sql, "SELECT %s FROM action_log WHERE id = %lld",
	    column, (long long)id);
	ck_assert_int_eq(sqlite3_prepare_v2(inv->db, sql, -1, &st, NULL), 0);
	ck_assert_int_eq(sqlite3_step(st), SQLITE_ROW);
	v = strdup(sqlite3_column_type(st, 0) == SQLITE_NULL
		? "(null)"
		: (const char *)sqlite3_column_text(st, 0));
	sqlite3_finalize(st);
	return v;
}

START_TEST(add_then_result)
{
	json_t *names = json_pack("[s,s]", "a1", "a2");
	json_t *res = json_pack("{s:s,s:s}", "a1", "ok", "a2", "refused");
	int64_t id = 0, id2 = 0;
	char *cause = NULL, *v;

	ck_assert_int_eq(actionlog_add(inv, 1000, "schedule_run", "nightly",
			     names, "cron 0 2 * * *", NULL, &id, &cause),
	    0);
	ck_assert_int_gt(id, 0);
	v = col(id, "result");
	ck_assert_str_eq(v, "(null)");
	free(v);
	v = col(id, "instances");
	ck_assert_str_eq(v, "[\"a1\",\"a2\"]");
	free(v);
	ck_assert_int_eq(actionlog_result(inv, id, res, &cause), 0);
	v = col(id, "result");
	ck_assert_str_eq(v, "{\"a1\":\"ok\",\"a2\":\"refused\"}");
	free(v);
	ck_assert_int_eq(actionlog_add(inv, 1001, "daemon_start", NULL, NULL,
			     NULL, NULL, &id2, &cause),
	    0);
	ck_assert_int_gt(id2, id);
	v = col(id2, "instances");
	ck_assert_str_eq(v, "[]");
	free(v);
	v = col(id2, "kind");
	ck_assert_str_eq(v, "daemon_start");
	free(v);
	json_decref(names);
	json_decref(res);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("actionlog");
	TCase *tc = tcase_create("core");
	SRunner *sr;
	int failed;

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, add_then_result);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? 0 : 1;
}

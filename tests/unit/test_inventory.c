/* The SQLite inventory: creation modes, migrations, refusals, round trips. */

#include <sys/stat.h>

#include <check.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "inventory.h"
#include "schema.h"
#include "status.h"

static char tmpdir[64];

static void
setup(void)
{
	snprintf(tmpdir, sizeof tmpdir, "/tmp/gpufleet-unit.XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(tmpdir));
}

static void
teardown(void)
{
	char cmd[128];

	snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
	ck_assert_int_eq(system(cmd), 0);
}

static char *
path_in(const char *rel)
{
	static char buf[256];

	snprintf(buf, sizeof buf, "%s/%s", tmpdir, rel);
	return buf;
}

/* Read a whole file into a malloc'd buffer. */
static char *
slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	char *buf;
	long n;

	ck_assert_ptr_nonnull(f);
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	rewind(f);
	buf = malloc(n + 1);
	ck_assert_int_eq(fread(buf, 1, n, f), (size_t)n);
	fclose(f);
	*len = n;
	return buf;
}

static int
query_int(sqlite3 *db, const char *sql)
{
	sqlite3_stmt *st;
	int v;

	ck_assert_int_eq(sqlite3_prepare_v2(db, sql, -1, &st, NULL), SQLITE_OK);
	ck_assert_int_eq(sqlite3_step(st), SQLITE_ROW);
	v = sqlite3_column_int(st, 0);
	sqlite3_finalize(st);
	return v;
}

START_TEST(test_create_modes)
{
	struct inventory *inv;
	struct stat st;
	char *cause = NULL, *path;
	mode_t old = umask(022);

	path = strdup(path_in("a/b/fleet.db"));
	ck_assert_int_eq(inventory_open(path, &inv, &cause), 0);
	ck_assert_int_eq(stat(path, &st), 0);
	ck_assert_int_eq(st.st_mode & 0777, 0600);
	ck_assert_int_eq(stat(path_in("a/b"), &st), 0);
	ck_assert_int_eq(st.st_mode & 0777, 0700);
	ck_assert_int_eq(stat(path_in("a"), &st), 0);
	ck_assert_int_eq(st.st_mode & 0777, 0700);
	ck_assert_int_eq(query_int(inv->db, "PRAGMA user_version"),
	    inventory_schema_version());
	ck_assert_int_eq(query_int(inv->db, "PRAGMA application_id"),
	    INVENTORY_APPLICATION_ID);
	ck_assert_int_eq(query_int(inv->db, "PRAGMA foreign_keys"), 1);
	ck_assert_int_eq(
	    query_int(inv->db,
		"SELECT journal_mode = 'wal' FROM pragma_journal_mode"),
	    1);
	inventory_close(inv);
	/* Reopening an up-to-date database works and changes nothing. */
	ck_assert_int_eq(inventory_open(path, &inv, &cause), 0);
	inventory_close(inv);
	umask(old);
	free(path);
}
END_TEST

START_TEST(test_newer_refused_untouched)
{
	struct inventory *inv = NULL;
	sqlite3 *db;
	char *cause = NULL, *before, *after, *path = strdup(path_in("new.db"));
	size_t nb, na;

	ck_assert_int_eq(sqlite3_open(path, &db), SQLITE_OK);
	ck_assert_int_eq(sqlite3_exec(db,
			     "PRAGMA application_id = "
			     "1195789396; CREATE TABLE future (x); "
			     "INSERT INTO future VALUES "
			     "(42); PRAGMA user_version = 99",
			     NULL, NULL, NULL),
	    SQLITE_OK);
	sqlite3_close(db);
	before = slurp(path, &nb);

	ck_assert_int_eq(inventory_open(path, &inv, &cause), -GF_EDB);
	ck_assert_ptr_null(inv);
	ck_assert_ptr_nonnull(strstr(cause, "newer"));
	ck_assert_ptr_nonnull(strstr(cause, "99"));
	after = slurp(path, &na);
	ck_assert_uint_eq(na, nb);
	ck_assert_int_eq(memcmp(before, after, nb), 0);
	ck_assert_int_eq(access(path_in("new.db-wal"), F_OK), -1);
	free(before);
	free(after);
	free(cause);
	free(path);
}
END_TEST

START_TEST(test_foreign_refused)
{
	struct inventory *inv = NULL;
	sqlite3 *db;
	char *cause = NULL, *path = strdup(path_in("other.db"));
	char *before, *after;
	size_t nb, na;
	FILE *f;

	ck_assert_int_eq(sqlite3_open(path, &db), SQLITE_OK);
	ck_assert_int_eq(
	    sqlite3_exec(db, "CREATE TABLE t (x)", NULL, NULL, NULL),
	    SQLITE_OK);
	sqlite3_close(db);
	ck_assert_int_eq(inventory_open(path, &inv, &cause), -GF_EDB);
	ck_assert_ptr_nonnull(strstr(cause, "not a gpufleet database"));
	free(cause);
	free(path);

	/* A text file is not a database, and stays as it was. */
	path = strdup(path_in("notes.txt"));
	f = fopen(path, "w");
	fputs("my notes, not a database\n", f);
	fclose(f);
	before = slurp(path, &nb);
	cause = NULL;
	ck_assert_int_eq(inventory_open(path, &inv, &cause), -GF_EDB);
	ck_assert_ptr_nonnull(cause);
	after = slurp(path, &na);
	ck_assert_uint_eq(na, nb);
	ck_assert_int_eq(memcmp(before, after, nb), 0);
	free(before);
	free(after);
	free(cause);
	free(path);
}
END_TEST

START_TEST(test_migrate_steps)
{
	static const char *const steps[] = {
		"CREATE TABLE a (x)",
		"CREATE TABLE b (y); INSERT INTO b VALUES (1)",
		"CREATE TABLE c (z); INSERT INTO nosuchtable VALUES (1)",
	};
	sqlite3 *db;
	char *cause = NULL;

	ck_assert_int_eq(sqlite3_open(path_in("m.db"), &db), SQLITE_OK);
	/* Two steps apply in order and bump the version each time. */
	ck_assert_int_eq(inventory_migrate(db, steps, 2, &cause), 0);
	ck_assert_int_eq(query_int(db, "PRAGMA user_version"), 2);
	ck_assert_int_eq(query_int(db, "SELECT count(*) FROM b"), 1);
	/* Running again applies nothing twice. */
	ck_assert_int_eq(inventory_migrate(db, steps, 2, &cause), 0);
	ck_assert_int_eq(query_int(db, "SELECT count(*) FROM b"), 1);
	/* A failing step leaves the database at the last whole version. */
	ck_assert_int_eq(inventory_migrate(db, steps, 3, &cause), -1);
	ck_assert_ptr_nonnull(strstr(cause, "nosuchtable"));
	ck_assert_int_eq(query_int(db, "PRAGMA user_version"), 2);
	ck_assert_int_eq(query_int(db,
			     "SELECT count(*) FROM sqlite_schema "
			     "WHERE name = 'c'"),
	    0);
	free(cause);
	sqlite3_close(db);
}
END_TEST

/*
 * The step that lets a schedule be a backup makes the schedule table
 * again: the schedules, their runs (not cascaded away) and the
 * AUTOINCREMENT count survive, 'backup' is then allowed and foreign keys
 * are enforced again.
 */
START_TEST(test_migrate_schedule_backup)
{
	const char *const *steps;
	struct inventory *inv;
	char *cause = NULL, *path = strdup(path_in("sched.db"));
	sqlite3 *db;
	int nsteps, k;

	steps = schema_steps(&nsteps);
	for (k = 0; k < nsteps && strstr(steps[k], "schedule_new") == NULL; k++)
		;
	ck_assert_int_lt(k, nsteps);
	ck_assert_int_eq(sqlite3_open(path, &db), SQLITE_OK);
	ck_assert_int_eq(inventory_migrate(db, steps, k, &cause), 0);
	ck_assert_int_eq(sqlite3_exec(db,
			     "PRAGMA foreign_keys = ON;"
			     "INSERT INTO schedule (id, name, tag, selector, "
			     "cron, action, created_at, considered_until) "
			     "VALUES (5, 'a', 'aaaaaaaa', 'all', '@daily', "
			     "'exec', 1, 1), (7, 'b', 'bbbbbbbb', 'all', "
			     "'@daily', 'status', 1, 1);"
			     "INSERT INTO schedule_run (schedule_id, "
			     "occurrence, state) VALUES (5, 100, 'ok');"
			     "DELETE FROM schedule WHERE id = 7",
			     NULL, NULL, NULL),
	    SQLITE_OK);
	ck_assert_int_ne(sqlite3_exec(db,
			     "INSERT INTO schedule (name, tag, selector, "
			     "cron, action, created_at, considered_until) "
			     "VALUES ('c', 'cccccccc', 'all', '@daily', "
			     "'backup', 1, 1)",
			     NULL, NULL, NULL),
	    SQLITE_OK);
	sqlite3_close(db);

	ck_assert_int_eq(inventory_open(path, &inv, &cause), 0);
	ck_assert_int_eq(query_int(inv->db,
			     "SELECT count(*) FROM schedule_run "
			     "WHERE schedule_id = 5"),
	    1);
	ck_assert_int_eq(query_int(inv->db,
			     "SELECT seq FROM sqlite_sequence WHERE name = "
			     "'schedule'"),
	    7);
	ck_assert_int_eq(query_int(inv->db, "PRAGMA foreign_keys"), 1);
	ck_assert_int_eq(
	    sqlite3_exec(inv->db,
		"INSERT INTO schedule (name, tag, selector, "
		"cron, action, command, created_at, "
		"considered_until) VALUES ('c', 'cccccccc', "
		"'all', '@daily', 'backup', '[\"x\",\"/b\"]', 1, 1)",
		NULL, NULL, NULL),
	    SQLITE_OK);
	/* 7 was used once: the new schedule is 8 */
	ck_assert_int_eq(
	    query_int(inv->db, "SELECT id FROM schedule WHERE name = 'c'"), 8);
	ck_assert_int_eq(
	    sqlite3_exec(
		inv->db, "DELETE FROM schedule WHERE id = 5", NULL, NULL, NULL),
	    SQLITE_OK);
	ck_assert_int_eq(
	    query_int(inv->db, "SELECT count(*) FROM schedule_run"), 0);
	inventory_close(inv);
	free(path);
}
END_TEST

/*
 * The step that keeps the journal's cursor in watcher_state starts it at
 * the highest entry stored of the instance's epoch.
 */
START_TEST(test_migrate_journal_cursor)
{
	const char *const *steps;
	struct inventory *inv;
	char *cause = NULL, *path = strdup(path_in("cursor.db"));
	sqlite3 *db;
	int nsteps, k;

	steps = schema_steps(&nsteps);
	for (k = 0; k < nsteps && strstr(steps[k], "journal_seq") == NULL; k++)
		;
	ck_assert_int_lt(k, nsteps);
	ck_assert_int_eq(sqlite3_open(path, &db), SQLITE_OK);
	ck_assert_int_eq(inventory_migrate(db, steps, k, &cause), 0);
	ck_assert_int_eq(sqlite3_exec(db,
			     "INSERT INTO instance (id, name, host, "
			     "created_at) VALUES (1, 'a', 'h', 1), (2, 'b', "
			     "'h', 1);"
			     "INSERT INTO watcher_state (instance_id, t, "
			     "state, generation, skew, journal_epoch) VALUES "
			     "(1, 1, 'running', 1, 0, 'e1'), (2, 1, "
			     "'running', 1, 0, NULL);"
			     "INSERT INTO journal (instance_id, epoch, seq, "
			     "time, t, event, entry, received_at) VALUES "
			     "(1, 'e0', 9, 1, 1, 'busy', '{}', 1), (1, 'e1', "
			     "4, 1, 1, 'busy', '{}', 1), (1, 'e1', 7, 1, 1, "
			     "'busy', '{}', 1)",
			     NULL, NULL, NULL),
	    SQLITE_OK);
	sqlite3_close(db);
	ck_assert_int_eq(inventory_open(path, &inv, &cause), 0);
	ck_assert_int_eq(query_int(inv->db,
			     "SELECT journal_seq FROM watcher_state WHERE "
			     "instance_id = 1"),
	    7);
	ck_assert_int_eq(query_int(inv->db,
			     "SELECT journal_seq IS NULL FROM watcher_state "
			     "WHERE instance_id = 2"),
	    1);
	inventory_close(inv);
	free(path);
}
END_TEST

/* A version-1 database written by hand migrates forward with its data. */
START_TEST(test_migrate_keeps_data)
{
	struct inventory *inv;
	struct instance *list;
	size_t n;
	char *cause = NULL, *path = strdup(path_in("v1.db"));
	sqlite3 *db;

	ck_assert_int_eq(inventory_open(path, &inv, &cause), 0);
	ck_assert_int_eq(
	    sqlite3_exec(inv->db,
		"INSERT INTO instance (name, "
		"host, created_at) VALUES ('old-1', '10.0.0.1', 1700000000); "
		"INSERT INTO instance_tag VALUES (1, 'keep')",
		NULL, NULL, NULL),
	    SQLITE_OK);
	inventory_close(inv);
	ck_assert_int_eq(sqlite3_open(path, &db), SQLITE_OK);
	ck_assert_int_eq(
	    query_int(db, "PRAGMA user_version"), inventory_schema_version());
	sqlite3_close(db);
	ck_assert_int_eq(inventory_open(path, &inv, &cause), 0);
	ck_assert_int_eq(inventory_list(inv, 0, &list, &n, &cause), 0);
	ck_assert_uint_eq(n, 1);
	ck_assert_str_eq(list[0].name, "old-1");
	ck_assert_int_eq(list[0].port, 22);
	ck_assert_str_eq(list[0].user, "root");
	ck_assert_uint_eq(list[0].ntags, 1);
	instance_free_array(list, n);
	inventory_close(inv);
	free(path);
}
END_TEST

START_TEST(test_round_trip)
{
	struct inventory *inv;
	struct instance in, got, back, *list;
	size_t n;
	char *cause = NULL;

	ck_assert_int_eq(inventory_open(path_in("rt.db"), &inv, &cause), 0);
	instance_init(&in);
	in.name = strdup("a100-1");
	in.host = strdup("10.1.2.3");
	in.port = 2222;
	in.created_at = 1764460800;
	instance_add_tag(&in, "train");
	instance_add_tag(&in, "a100");
	ck_assert_int_eq(inventory_begin(inv, &cause), 0);
	ck_assert_int_eq(inventory_add(inv, &in, &cause), 0);
	ck_assert_int_eq(inventory_commit(inv, &cause), 0);

	/* The same name again is refused while the first is in service. */
	ck_assert_int_eq(inventory_begin(inv, &cause), 0);
	ck_assert_int_eq(inventory_add(inv, &in, &cause), -GF_EUSAGE);
	ck_assert_ptr_nonnull(strstr(cause, "already exists"));
	free(cause);
	cause = NULL;
	inventory_rollback(inv);

	ck_assert_int_eq(inventory_get(inv, "a100-1", &got, &cause), 0);
	ck_assert_int_eq(got.port, 2222);
	ck_assert_uint_eq(got.ntags, 2);
	ck_assert_str_eq(got.tags[0], "a100");
	ck_assert_ptr_null(got.identity);
	instance_remove_tag(&got, "a100");
	free(got.notes);
	got.notes = strdup("spot");
	ck_assert_int_eq(inventory_begin(inv, &cause), 0);
	ck_assert_int_eq(inventory_update(inv, &got, &cause), 0);
	ck_assert_int_eq(inventory_commit(inv, &cause), 0);
	instance_clear(&got);
	ck_assert_int_eq(inventory_get(inv, "a100-1", &got, &cause), 0);
	ck_assert_uint_eq(got.ntags, 1);
	ck_assert_str_eq(got.notes, "spot");

	/* Released: gone from service, kept in history; the name is free. */
	ck_assert_int_eq(inventory_begin(inv, &cause), 0);
	ck_assert_int_eq(inventory_release(inv, got.id, 1764470000, &cause), 0);
	ck_assert_int_eq(inventory_commit(inv, &cause), 0);
	ck_assert_int_eq(inventory_get(inv, "a100-1", &got, &cause) == 0, 0);
	free(cause);
	cause = NULL;
	ck_assert_int_eq(inventory_list(inv, 1, &list, &n, &cause), 0);
	ck_assert_uint_eq(n, 1);
	ck_assert_int_eq(list[0].released_at, 1764470000);
	instance_free_array(list, n);

	/* Restored: the same row in service again, its tags with it. */
	ck_assert_int_eq(inventory_begin(inv, &cause), 0);
	ck_assert_int_eq(inventory_restore(inv, &got, &cause), 0);
	ck_assert_int_eq(inventory_commit(inv, &cause), 0);
	ck_assert_int_eq(inventory_get(inv, "a100-1", &back, &cause), 0);
	ck_assert_int_eq(back.id, got.id);
	ck_assert_int_eq(back.released_at, 0);
	ck_assert_uint_eq(back.ntags, 1);
	ck_assert_str_eq(back.tags[0], "train");
	instance_clear(&back);
	ck_assert_int_eq(inventory_begin(inv, &cause), 0);
	ck_assert_int_eq(inventory_release(inv, got.id, 1764470000, &cause), 0);
	ck_assert_int_eq(inventory_commit(inv, &cause), 0);

	ck_assert_int_eq(inventory_begin(inv, &cause), 0);
	ck_assert_int_eq(inventory_add(inv, &in, &cause), 0);
	ck_assert_int_eq(inventory_commit(inv, &cause), 0);
	/* Not while another of that name is in service. */
	ck_assert_int_eq(inventory_begin(inv, &cause), 0);
	ck_assert_int_eq(inventory_restore(inv, &got, &cause), -GF_EUSAGE);
	ck_assert_ptr_nonnull(strstr(cause, "already exists"));
	free(cause);
	cause = NULL;
	inventory_rollback(inv);

	/* Purge deletes the row and, by cascade, its tags. */
	ck_assert_int_eq(inventory_begin(inv, &cause), 0);
	ck_assert_int_eq(inventory_purge(inv, got.id, &cause), 0);
	ck_assert_int_eq(inventory_commit(inv, &cause), 0);
	ck_assert_int_eq(query_int(inv->db,
			     "SELECT count(*) FROM "
			     "instance_tag WHERE instance_id = 1"),
	    0);
	ck_assert_int_eq(inventory_list(inv, 1, &list, &n, &cause), 0);
	ck_assert_uint_eq(n, 1);
	instance_free_array(list, n);
	instance_clear(&got);
	instance_clear(&in);
	inventory_close(inv);
}
END_TEST

/* Add an instance named name at 127.0.0.1 with jump (or NULL). */
static void
add_one(struct inventory *inv, const char *name, const char *jump)
{
	struct instance in;
	char *cause = NULL;

	instance_init(&in);
	in.name = strdup(name);
	in.host = strdup("127.0.0.1");
	in.jump = jump != NULL ? strdup(jump) : NULL;
	ck_assert_int_eq(inventory_begin(inv, &cause), 0);
	ck_assert_int_eq(inventory_add(inv, &in, &cause), 0);
	ck_assert_int_eq(inventory_commit(inv, &cause), 0);
	instance_clear(&in);
}

/* The jump of an instance: in the inventory, one hop, follows renames. */
START_TEST(test_jump)
{
	static const struct {
		const char *name, *jump, *cause; /* cause NULL: accepted */
	} rows[] = {
		{ "lab-2", "gw", NULL },
		{ "lab-2", NULL, NULL },
		{ "lab-2", "nosuch",
		    "jump host 'nosuch' is not in the inventory" },
		{ "lab-2", "lab-2", "lab-2 cannot be its own jump host" },
		{ "lab-2", "lab-1",
		    "jump host lab-1 is itself behind jump host gw; only one "
		    "hop is supported" },
		{ "gw", "other",
		    "gw is the jump host of lab-1; only one hop is supported" },
	};
	struct inventory *inv;
	struct instance in;
	char *cause = NULL, *users = NULL;
	size_t i;

	ck_assert_int_eq(inventory_open(path_in("jump.db"), &inv, &cause), 0);
	add_one(inv, "gw", NULL);
	add_one(inv, "other", NULL);
	add_one(inv, "lab-1", "gw");
	add_one(inv, "lab-2", NULL);
	ck_assert_int_eq(inventory_get(inv, "lab-1", &in, &cause), 0);
	ck_assert_str_eq(in.jump, "gw");
	instance_clear(&in);
	for (i = 0; i < sizeof rows / sizeof rows[0]; i++) {
		ck_assert_int_eq(
		    inventory_get(inv, rows[i].name, &in, &cause), 0);
		free(in.jump);
		in.jump = rows[i].jump != NULL ? strdup(rows[i].jump) : NULL;
		if (rows[i].cause == NULL)
			ck_assert_msg(
			    inventory_check_jump(inv, &in, &cause) == 0,
			    "row %zu refused: %s", i, cause);
		else {
			ck_assert_int_eq(
			    inventory_check_jump(inv, &in, &cause), -GF_EUSAGE);
			ck_assert_str_eq(cause, rows[i].cause);
			free(cause);
			cause = NULL;
		}
		instance_clear(&in);
	}

	ck_assert_int_eq(inventory_jump_users(inv, "gw", &users, &cause), 0);
	ck_assert_str_eq(users, "lab-1");
	free(users);
	ck_assert_int_eq(inventory_jump_users(inv, "other", &users, &cause), 0);
	ck_assert_ptr_null(users);

	/* Renaming the jump host: the instances behind it follow. */
	ck_assert_int_eq(inventory_get(inv, "gw", &in, &cause), 0);
	free(in.name);
	in.name = strdup("gw-2");
	ck_assert_int_eq(inventory_begin(inv, &cause), 0);
	ck_assert_int_eq(inventory_update(inv, &in, &cause), 0);
	ck_assert_int_eq(inventory_commit(inv, &cause), 0);
	instance_clear(&in);
	ck_assert_int_eq(inventory_get(inv, "lab-1", &in, &cause), 0);
	ck_assert_str_eq(in.jump, "gw-2");
	instance_clear(&in);
	inventory_close(inv);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("inventory");
	TCase *tc = tcase_create("core");
	SRunner *sr;
	int failed;

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_create_modes);
	tcase_add_test(tc, test_newer_refused_untouched);
	tcase_add_test(tc, test_foreign_refused);
	tcase_add_test(tc, test_migrate_steps);
	tcase_add_test(tc, test_migrate_journal_cursor);
	tcase_add_test(tc, test_migrate_keeps_data);
	tcase_add_test(tc, test_migrate_schedule_backup);
	tcase_add_test(tc, test_round_trip);
	tcase_add_test(tc, test_jump);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? 0 : 1;
}

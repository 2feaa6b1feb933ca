/* The SQLite inventory: open, migrate, read and write instances. */

#include <sys/stat.h>

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "db.h"
#include "dbfile.h"
#include "inventory.h"
#include "stopmethod.h"
#include "selector.h"
#include "log.h"
#include "misc.h"
#include "schema.h"
#include "status.h"
#include "xmalloc.h"

#define BUSY_TIMEOUT_MS 10000

static int make_dirs(const char *, char **);
static int create_file(const char *, char **);
static int exec_sql(sqlite3 *, const char *, char **);
static int pragma_int(sqlite3 *, const char *, int *, char **);
static int user_version(sqlite3 *, int *, char **);
static int damaged(sqlite3 *);
static int check_identity(sqlite3 *, const char *, int, char **);
static int pragma_text_ok(sqlite3 *, const char *, char **);
static int read_row(
    struct inventory *, sqlite3_stmt *, struct instance *, char **);
static int load_tags(struct inventory *, struct instance *, char **);
static int store_tags(struct inventory *, const struct instance *, char **);
static int name_taken(struct inventory *, const char *, int64_t, char **);
static int exec_id(struct inventory *, const char *, int64_t, int64_t, char **);

#define INSTANCE_COLUMNS                                                       \
	"id, name, host, port, user, provider, region, identity, remote_dir,"  \
	" authorized_keys_file, notes, source, created_at, released_at,"       \
	" platform_id, jump, " LAST_ENTRY("state") ", " LAST_ENTRY(            \
	    "t") ","                                                           \
		 " (SELECT s.t FROM last_status s WHERE s.instance_id = "      \
		 "instance.id"                                                 \
		 " AND s.state = 'up'), since"
/* A column of the instance's last ledger entry. */
#define LAST_ENTRY(col)                                                        \
	"(SELECT l." col " FROM ledger l WHERE l.instance_id = instance.id"    \
	" AND l.t <= CAST(strftime('%s', 'now') AS INTEGER)"                   \
	" ORDER BY l.t DESC, l.id DESC LIMIT 1)"

/* The user-settable fields, their db_exec format and arguments. */
#define INSTANCE_FIELDS                                                        \
	"name, host, port, user, provider, region, identity, remote_dir,"      \
	" authorized_keys_file, notes, source, created_at, platform_id, jump," \
	" since"
#define INSTANCE_FORMAT "ttittttttttIttN"
#define INSTANCE_ARGS(in)                                                      \
	(in)->name, (in)->host, (in)->port, (in)->user, (in)->provider,        \
	    (in)->region, (in)->identity, (in)->remote_dir,                    \
	    (in)->authorized_keys_file, (in)->notes, (in)->source,             \
	    (int64_t)(in)->created_at, (in)->platform_id, (in)->jump,          \
	    (int64_t)(in)->since

/* The schema version this build writes. */
int
inventory_schema_version(void)
{
	int n;

	schema_steps(&n);
	return n;
}

/* The default database path. Caller frees. */
char *
inventory_default_path(void)
{
	return misc_xdg_path(
	    "XDG_DATA_HOME", ".local/share", "gpufleet/fleet.db");
}

/*
 * Why db's last call failed, in words a user can act on: the disk full
 * and another process's lock are named as such (busy_ms: how long we
 * waited for the lock). Caller frees.
 */
static char *
why_failed(sqlite3 *db, int busy_ms)
{
	int code = sqlite3_extended_errcode(db), e = sqlite3_system_errno(db);
	char *s;

	if ((code & 0xff) == SQLITE_FULL || e == ENOSPC || e == EDQUOT)
		xasprintf(&s,
		    "the disk is full (%s); nothing more was written: free "
		    "some space and run it again",
		    strerror(e == EDQUOT ? EDQUOT : ENOSPC));
	else if ((code & 0xff) == SQLITE_BUSY)
		xasprintf(&s,
		    "database is locked: another process held its write lock "
		    "longer than gpufleet waits (%d s); run it again once that "
		    "process is done",
		    busy_ms / 1000);
	else
		s = xstrdup(sqlite3_errmsg(db));
	return s;
}

/* Whether sqlite's last error on db says the file is damaged. */
static int
damaged(sqlite3 *db)
{
	int rc = sqlite3_extended_errcode(db) & 0xff;

	return rc == SQLITE_CORRUPT || rc == SQLITE_NOTADB;
}

/*
 * Set *cause to "database PATH: WHAT: why", or where sqlite says the file
 * is damaged, to dbfile_damaged_error's line; -GF_EDB.
 */
int
inventory_error(struct inventory *inv, const char *what, char **cause)
{
	char *why;

	if (damaged(inv->db)) {
		*cause =
		    dbfile_damaged_error(inv->path, sqlite3_errmsg(inv->db));
		return -GF_EDB;
	}
	why = why_failed(inv->db, inv->busy_ms);
	xasprintf(cause, "database %s: %s: %s", inv->path, what, why);
	free(why);
	return -GF_EDB;
}

/* Create the missing directories above a file, each 0700. */
static int
make_dirs(const char *file, char **cause)
{
	char *dir = xstrdup(file), *p;
	int r = 0;

	if ((p = strrchr(dir, '/')) != NULL && p != dir) {
		*p = '\0';
		if (misc_mkdirs(dir, cause) != 0)
			r = -GF_EDB;
	}
	free(dir);
	return r;
}

/* Create the database file 0600 if it does not exist yet. */
static int
create_file(const char *path, char **cause)
{
	int fd;

	fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd == -1) {
		if (errno == EEXIST)
			return 0;
		xasprintf(cause, "cannot create database %s: %s", path,
		    strerror(errno));
		return -GF_EDB;
	}
	close(fd);
	return 0;
}

static int
exec_sql(sqlite3 *db, const char *sql, char **cause)
{
	char *msg = NULL;

	if (sqlite3_exec(db, sql, NULL, NULL, &msg) != SQLITE_OK) {
		xasprintf(cause, "%s", msg != NULL ? msg : sqlite3_errmsg(db));
		sqlite3_free(msg);
		return -1;
	}
	return 0;
}

static int
pragma_int(sqlite3 *db, const char *sql, int *value, char **cause)
{
	sqlite3_stmt *st;
	int rc;

	if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK) {
		xasprintf(cause, "%s", sqlite3_errmsg(db));
		return -1;
	}
	rc = sqlite3_step(st);
	if (rc != SQLITE_ROW) {
		xasprintf(cause, "%s", sqlite3_errmsg(db));
		sqlite3_finalize(st);
		return -1;
	}
	*value = sqlite3_column_int(st, 0);
	sqlite3_finalize(st);
	return 0;
}

static int
user_version(sqlite3 *db, int *version, char **cause)
{
	return pragma_int(db, "PRAGMA user_version", version, cause);
}

/*
 * Refuse a file that is not a gpufleet database, or one written by a newer
 * gpufleet, before anything is written to it.
 */
static int
check_identity(sqlite3 *db, const char *path, int latest, char **cause)
{
	int version, appid, ntables;
	char *why = NULL;

	if (user_version(db, &version, &why) != 0 ||
	    pragma_int(db, "PRAGMA application_id", &appid, &why) != 0 ||
	    pragma_int(db, "SELECT count(*) FROM sqlite_schema", &ntables,
		&why) != 0) {
		if (damaged(db))
			*cause = dbfile_damaged_error(path, why);
		else if (sqlite3_system_errno(db) == ENOSPC ||
		    (sqlite3_extended_errcode(db) & 0xff) == SQLITE_FULL) {
			free(why);
			why = why_failed(db, BUSY_TIMEOUT_MS);
			xasprintf(cause, "database %s: cannot read it: %s",
			    path, why);
		} else
			xasprintf(cause, "%s is not a usable database: %s",
			    path, why);
		free(why);
		return -GF_EDB;
	}
	if (appid != INVENTORY_APPLICATION_ID && (appid != 0 || ntables != 0)) {
		xasprintf(cause,
		    "%s is not a gpufleet database (left "
		    "untouched)",
		    path);
		return -GF_EDB;
	}
	if (version > latest) {
		xasprintf(cause,
		    "%s has schema version %d, newer than this "
		    "gpufleet understands (%d); upgrade gpufleet (the "
		    "database was left untouched)",
		    path, version, latest);
		return -GF_EDB;
	}
	/*
	 * A migration writes all over the file: only into one that passes
	 * quick_check (rare, so its cost is paid once per upgrade).
	 */
	if (version < latest && ntables > 0 &&
	    pragma_text_ok(db, "PRAGMA quick_check(1)", &why) != 0) {
		*cause = dbfile_damaged_error(path, why);
		free(why);
		return -GF_EDB;
	}
	return 0;
}

/*
 * Whether a check PRAGMA's first row is "ok": 0, or -1 with *why (what it
 * or sqlite said).
 */
static int
pragma_text_ok(sqlite3 *db, const char *sql, char **why)
{
	sqlite3_stmt *st;
	const char *text;
	int r = -1;

	if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK) {
		*why = xstrdup(sqlite3_errmsg(db));
		return -1;
	}
	if (sqlite3_step(st) == SQLITE_ROW) {
		text = (const char *)sqlite3_column_text(st, 0);
		if (text != NULL && strcmp(text, "ok") == 0)
			r = 0;
		else
			*why = xstrdup(text != NULL ? text : "unreadable");
	} else
		*why = xstrdup(sqlite3_errmsg(db));
	sqlite3_finalize(st);
	return r;
}

/*
 * Run the migration steps above the database's user_version, each in its
 * own BEGIN IMMEDIATE transaction together with the version bump, so a
 * crash leaves the database at a whole version and a concurrent opener
 * never applies a step twice.
 */
int
inventory_migrate(
    sqlite3 *db, const char *const *steps, int nsteps, char **cause)
{
	int version;
	char *why = NULL, sql[64];

	/*
	 * Up to date, the common case: a read, which another process's
	 * write transaction does not block (WAL). Only a step to run takes
	 * the write lock, and looks again under it.
	 */
	if (user_version(db, &version, &why) != 0)
		goto fail;
	if (version >= nsteps)
		return 0;
	for (;;) {
		if (exec_sql(db, "BEGIN IMMEDIATE", &why) != 0)
			goto fail;
		if (user_version(db, &version, &why) != 0)
			goto fail_rollback;
		if (version >= nsteps) {
			exec_sql(db, "COMMIT", NULL);
			return 0;
		}
		if (exec_sql(db, steps[version], &why) != 0)
			goto fail_rollback;
		snprintf(
		    sql, sizeof sql, "PRAGMA user_version = %d", version + 1);
		if (exec_sql(db, sql, &why) != 0 ||
		    exec_sql(db, "COMMIT", &why) != 0)
			goto fail_rollback;
		debug_f("migrated schema to version %d", version + 1);
	}
fail_rollback:
	exec_sql(db, "ROLLBACK", NULL);
fail:
	xasprintf(cause, "schema migration failed: %s", why);
	free(why);
	return -1;
}

/* Open (creating if needed) and migrate the inventory at path. */
int
inventory_open(const char *path, struct inventory **invp, char **cause)
{
	struct inventory *inv;
	const char *const *steps;
	char *why = NULL;
	int r, nsteps, flags = SQLITE_OPEN_READWRITE;

	*invp = NULL;
	steps = schema_steps(&nsteps);
	if ((r = make_dirs(path, cause)) != 0 ||
	    (r = create_file(path, cause)) != 0)
		return r;

	inv = xcalloc(1, sizeof *inv);
	inv->path = xstrdup(path);
	if (sqlite3_open_v2(path, &inv->db, flags, NULL) != SQLITE_OK) {
		r = inventory_error(inv, "cannot open", cause);
		goto fail;
	}
	sqlite3_extended_result_codes(inv->db, 1);
	sqlite3_busy_timeout(inv->db, BUSY_TIMEOUT_MS);
	inv->busy_ms = BUSY_TIMEOUT_MS;
	if ((r = dbfile_header(inv->db, path, cause)) != 0 ||
	    (r = check_identity(inv->db, path, nsteps, cause)) != 0)
		goto fail;
	/*
	 * Foreign keys are enforced once the steps ran: a step that makes a
	 * table again (a CHECK changed) drops the old one, which must not
	 * cascade to the rows that refer to it.
	 */
	if (exec_sql(inv->db, "PRAGMA journal_mode = WAL", &why) != 0 ||
	    exec_sql(inv->db, "PRAGMA synchronous = NORMAL", &why) != 0 ||
	    inventory_migrate(inv->db, steps, nsteps, &why) != 0 ||
	    exec_sql(inv->db, "PRAGMA foreign_keys = ON", &why) != 0)
		goto fail_why;
	*invp = inv;
	return 0;

fail_why:
	if (damaged(inv->db))
		*cause = dbfile_damaged_error(path, sqlite3_errmsg(inv->db));
	else
		xasprintf(cause, "database %s: %s", path, why);
	free(why);
	r = -GF_EDB;
fail:
	inventory_close(inv);
	return r;
}

void
inventory_close(struct inventory *inv)
{
	if (inv == NULL)
		return;
	if (inv->in_txn)
		inventory_rollback(inv);
	sqlite3_close(inv->db);
	free(inv->path);
	free(inv);
}

/*
 * How long a statement waits for another process's lock before it fails
 * with "database is locked"; ms <= 0 restores the default.
 */
void
inventory_set_busy(struct inventory *inv, int ms)
{
	inv->busy_ms = ms > 0 ? ms : BUSY_TIMEOUT_MS;
	sqlite3_busy_timeout(inv->db, inv->busy_ms);
}

/* Start a write transaction; the busy timeout applies to taking the lock. */
int
inventory_begin(struct inventory *inv, char **cause)
{
	if (sqlite3_exec(inv->db, "BEGIN IMMEDIATE", NULL, NULL, NULL) !=
	    SQLITE_OK)
		return inventory_error(inv, "cannot start a write", cause);
	inv->in_txn = 1;
	return 0;
}

int
inventory_commit(struct inventory *inv, char **cause)
{
	if (sqlite3_exec(inv->db, "COMMIT", NULL, NULL, NULL) != SQLITE_OK) {
		int r = inventory_error(inv, "commit failed", cause);
		inventory_rollback(inv);
		return r;
	}
	inv->in_txn = 0;
	return 0;
}

void
inventory_rollback(struct inventory *inv)
{
	sqlite3_exec(inv->db, "ROLLBACK", NULL, NULL, NULL);
	inv->in_txn = 0;
}

/* Read one instance row (INSTANCE_COLUMNS order) and its tags. */
static int
read_row(
    struct inventory *inv, sqlite3_stmt *st, struct instance *in, char **cause)
{
	memset(in, 0, sizeof *in);
	in->id = sqlite3_column_int64(st, 0);
	in->name = db_text(st, 1);
	in->host = db_text(st, 2);
	in->port = sqlite3_column_int(st, 3);
	in->user = db_text(st, 4);
	in->provider = db_text(st, 5);
	in->region = db_text(st, 6);
	in->identity = db_text(st, 7);
	in->remote_dir = db_text(st, 8);
	in->authorized_keys_file = db_text(st, 9);
	in->notes = db_text(st, 10);
	in->source = db_text(st, 11);
	in->created_at = sqlite3_column_int64(st, 12);
	in->released_at = sqlite3_column_int64(st, 13);
	in->platform_id = db_text(st, 14);
	in->jump = db_text(st, 15);
	if (sqlite3_column_type(st, 16) != SQLITE_NULL) {
		snprintf(in->state, sizeof in->state, "%s",
		    sqlite3_column_text(st, 16));
		in->state_since = sqlite3_column_int64(st, 17);
	}
	in->up_at = sqlite3_column_int64(st, 18);
	in->since = sqlite3_column_int64(st, 19);
	return load_tags(inv, in, cause);
}

static int
load_tags(struct inventory *inv, struct instance *in, char **cause)
{
	sqlite3_stmt *st;
	int rc, r;

	if ((r = db_prepare(inv, &st,
		 "SELECT tag FROM instance_tag WHERE instance_id = ? ORDER BY "
		 "tag",
		 "cannot read tags", cause, "I", in->id)) != 0)
		return r;
	while ((rc = sqlite3_step(st)) == SQLITE_ROW)
		instance_add_tag(in, (const char *)sqlite3_column_text(st, 0));
	return db_finish(inv, st, rc, "cannot read tags", cause);
}

/*
 * List instances ordered by name; with all set, released ones too. On
 * success *list (caller frees with instance_free_array) holds *n entries.
 */
int
inventory_list(struct inventory *inv, int all, struct instance **list,
    size_t *n, char **cause)
{
	sqlite3_stmt *st;
	struct instance *out = NULL;
	size_t len = 0;
	int rc, r = 0;

	if ((r = db_prepare(inv, &st,
		 "SELECT " INSTANCE_COLUMNS " FROM instance WHERE ? OR "
		 "released_at IS NULL ORDER BY name, released_at IS NOT NULL, "
		 "id",
		 "cannot list instances", cause, "i", all)) != 0)
		return r;
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		out = xreallocarray(out, len + 1, sizeof *out);
		if ((r = read_row(inv, st, &out[len++], cause)) != 0)
			break;
	}
	if (r == 0)
		r = db_finish(inv, st, rc, "cannot list instances", cause);
	else
		sqlite3_finalize(st);
	if (r != 0) {
		instance_free_array(out, len);
		return r;
	}
	*list = out;
	*n = len;
	return 0;
}

/* Look up an instance in service by name. */
int
inventory_get(
    struct inventory *inv, const char *name, struct instance *in, char **cause)
{
	sqlite3_stmt *st;
	int rc, r;

	if ((r = db_prepare(inv, &st,
		 "SELECT " INSTANCE_COLUMNS " FROM instance WHERE name = ? AND "
		 "released_at IS NULL",
		 "cannot read instance", cause, "t", name)) != 0)
		return r;
	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW)
		r = read_row(inv, st, in, cause);
	else if (rc == SQLITE_DONE) {
		xasprintf(cause, "no instance named '%s'", name);
		r = -GF_EUSAGE;
	} else
		r = inventory_error(inv, "cannot read instance", cause);
	sqlite3_finalize(st);
	return r;
}

/* Look up an instance by id, released or not. */
int
inventory_get_id(
    struct inventory *inv, int64_t id, struct instance *in, char **cause)
{
	sqlite3_stmt *st;
	int rc, r;

	if ((r = db_prepare(inv, &st,
		 "SELECT " INSTANCE_COLUMNS " FROM instance WHERE id = ?",
		 "cannot read instance", cause, "I", id)) != 0)
		return r;
	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW)
		r = read_row(inv, st, in, cause);
	else if (rc == SQLITE_DONE) {
		xasprintf(cause, "no instance with id %lld", (long long)id);
		r = -GF_EUSAGE;
	} else
		r = inventory_error(inv, "cannot read instance", cause);
	sqlite3_finalize(st);
	return r;
}

/* Replace the stored tags of an instance with in->tags. */
static int
store_tags(struct inventory *inv, const struct instance *in, char **cause)
{
	const char *what = "cannot store tags";
	sqlite3_stmt *st;
	size_t i;
	int rc = SQLITE_DONE, r;

	if ((r = db_exec(inv, "DELETE FROM instance_tag WHERE instance_id = ?",
		 what, cause, "I", in->id)) != 0)
		return r;
	if ((r = db_prepare(inv, &st,
		 "INSERT INTO instance_tag (instance_id, tag) VALUES (?, ?)",
		 what, cause, "")) != 0)
		return r;
	for (i = 0; i < in->ntags && rc == SQLITE_DONE; i++) {
		db_rebind(st, "It", in->id, in->tags[i]);
		rc = sqlite3_step(st);
	}
	return db_finish(inv, st, rc, what, cause);
}

/* Is the name taken by another instance in service? */
static int
name_taken(
    struct inventory *inv, const char *name, int64_t except, char **cause)
{
	int r;

	r = db_exec(inv,
	    "SELECT 1 FROM instance WHERE name = ? AND released_at IS NULL "
	    "AND id != ?",
	    "cannot read instance", cause, "tI", name, except);
	if (r == 1) {
		xasprintf(cause, "an instance named '%s' already exists", name);
		return -GF_EUSAGE;
	}
	return r;
}

/* Insert a new instance (inside a transaction); sets in->id. */
int
inventory_add(struct inventory *inv, struct instance *in, char **cause)
{
	int r;

	if ((r = name_taken(inv, in->name, 0, cause)) != 0)
		return r;
	if ((r = db_exec(inv,
		 "INSERT INTO instance (" INSTANCE_FIELDS ") VALUES "
		 "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
		 "cannot add instance", cause, INSTANCE_FORMAT,
		 INSTANCE_ARGS(in))) != 0)
		return r;
	in->id = sqlite3_last_insert_rowid(inv->db);
	return store_tags(inv, in, cause);
}

/* Store every field and the tags of an existing instance. */
int
inventory_update(struct inventory *inv, const struct instance *in, char **cause)
{
	int r;

	if ((r = name_taken(inv, in->name, in->id, cause)) != 0)
		return r;
	/* A renamed jump host: the instances behind it follow. */
	if ((r = db_exec(inv,
		 "UPDATE instance SET jump = ? WHERE jump = (SELECT name FROM "
		 "instance WHERE id = ?) AND jump != ? AND released_at IS NULL",
		 "cannot update instance", cause, "tIt", in->name, in->id,
		 in->name)) < 0)
		return r;
	if ((r = db_exec(inv,
		 "UPDATE instance SET (" INSTANCE_FIELDS ") = "
		 "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) WHERE id = ?",
		 "cannot update instance", cause, INSTANCE_FORMAT "I",
		 INSTANCE_ARGS(in), in->id)) != 0)
		return r;
	return store_tags(inv, in, cause);
}

/*
 * The live instances whose jump host is name, as "a, b, c" in *users
 * (NULL when none). 0, or a -GF_ code.
 */
int
inventory_jump_users(
    struct inventory *inv, const char *name, char **users, char **cause)
{
	sqlite3_stmt *st;
	char *s = NULL, *t;
	int rc, r;

	*users = NULL;
	if ((r = db_prepare(inv, &st,
		 "SELECT name FROM instance WHERE jump = ? AND released_at IS "
		 "NULL ORDER BY name",
		 "cannot read instance", cause, "t", name)) != 0)
		return r;
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		const char *n = (const char *)sqlite3_column_text(st, 0);
		if (s == NULL)
			s = xstrdup(n);
		else {
			xasprintf(&t, "%s, %s", s, n);
			free(s);
			s = t;
		}
	}
	if (rc != SQLITE_DONE) {
		free(s);
		sqlite3_finalize(st);
		return inventory_error(inv, "cannot read instance", cause);
	}
	sqlite3_finalize(st);
	*users = s;
	return 0;
}

/*
 * Whether in's jump host (if any) may be used: it is in the inventory, is
 * not in itself, and neither it nor in is behind a jump already (one hop
 * is supported). 0, or -GF_EUSAGE with a one-line *cause.
 */
int
inventory_check_jump(
    struct inventory *inv, const struct instance *in, char **cause)
{
	struct instance j;
	char *users = NULL, *why = NULL;
	int r;

	if (in->jump == NULL)
		return 0;
	if (instance_check_jump(in, in->jump, cause) != 0)
		return -GF_EUSAGE;
	memset(&j, 0, sizeof j);
	if ((r = inventory_get(inv, in->jump, &j, &why)) != 0) {
		if (r != -GF_EUSAGE) {
			*cause = why;
			return r;
		}
		free(why);
		xasprintf(
		    cause, "jump host '%s' is not in the inventory", in->jump);
		return -GF_EUSAGE;
	}
	if (j.jump != NULL) {
		xasprintf(cause,
		    "jump host %s is itself behind jump host %s; only one hop "
		    "is supported",
		    j.name, j.jump);
		instance_clear(&j);
		return -GF_EUSAGE;
	}
	instance_clear(&j);
	if (in->name != NULL &&
	    (r = inventory_jump_users(inv, in->name, &users, cause)) != 0)
		return r;
	if (users != NULL) {
		xasprintf(cause,
		    "%s is the jump host of %s; only one hop is supported",
		    in->name, users);
		free(users);
		return -GF_EUSAGE;
	}
	return 0;
}

static int
exec_id(
    struct inventory *inv, const char *sql, int64_t a, int64_t id, char **cause)
{
	return db_exec(inv, sql, "cannot change instance", cause, "II", a, id);
}

/* Mark an instance released at time now; its history stays. */
int
inventory_release(struct inventory *inv, int64_t id, int64_t now, char **cause)
{
	return exec_id(inv,
	    "UPDATE instance SET released_at = ? WHERE "
	    "id = ? AND released_at IS NULL",
	    now, id, cause);
}

/*
 * Put a released instance back in service: all it had (tags, prices, stop
 * method, ledger, jobs, watcher plan) was kept with its row, so clearing
 * released_at is the whole undo of inventory_release. -GF_EUSAGE when
 * another instance of that name is in service.
 */
int
inventory_restore(
    struct inventory *inv, const struct instance *in, char **cause)
{
	int r;

	if ((r = name_taken(inv, in->name, in->id, cause)) != 0)
		return r;
	return exec_id(inv,
	    "UPDATE instance SET released_at = NULL WHERE id = ?2 AND "
	    "released_at IS NOT NULL",
	    0, in->id, cause);
}

/* Delete an instance and everything recorded about it. */
int
inventory_purge(struct inventory *inv, int64_t id, char **cause)
{
	return exec_id(inv, "DELETE FROM instance WHERE id = ?2", 0, id, cause);
}

/*
 * Load the instances in service that selector text picks. *list (caller
 * frees with instance_free_array) gets the *n picked, in name order.
 */
int
inventory_select(struct inventory *inv, const char *text,
    struct instance **list, size_t *n, char **cause)
{
	struct selector *sel;
	struct instance *all;
	size_t nall, i, k = 0;
	int *picked, r;

	if (selector_parse(text, &sel, cause) != 0)
		return -GF_EUSAGE;
	if ((r = inventory_list(inv, 0, &all, &nall, cause)) != 0) {
		selector_free(sel);
		return r;
	}
	picked = xcalloc(nall + 1, sizeof *picked);
	if (selector_select(sel, all, nall, picked, cause) < 0) {
		r = -GF_EUSAGE;
		goto out;
	}
	for (i = 0; i < nall; i++) {
		if (picked[i])
			all[k++] = all[i];
		else
			instance_clear(&all[i]);
	}
	*list = all;
	*n = k;
	all = NULL;
	nall = 0;
out:
	instance_free_array(all, nall);
	free(picked);
	selector_free(sel);
	return r;
}

/* Read an instance's stored stop settings. */
int
inventory_stop_get(struct inventory *inv, int64_t id,
    struct stopmethod_fields *f, char **cause)
{
	sqlite3_stmt *st;
	int r;

	memset(f, 0, sizeof *f);
	if ((r = db_prepare(inv, &st,
		 "SELECT stop_command, stop_kind, allow_release FROM instance "
		 "WHERE id = ?",
		 "cannot read the stop method", cause, "I", id)) != 0)
		return r;
	if ((r = sqlite3_step(st)) == SQLITE_ROW) {
		f->command = db_text(st, 0);
		f->kind = db_text(st, 1);
		f->allow_release = sqlite3_column_int(st, 2);
	}
	r = db_finish(inv, st, r, "cannot read the stop method", cause);
	return r < 0 ? r : 0;
}

/* Store an instance's stop settings. */
int
inventory_stop_put(struct inventory *inv, int64_t id,
    const struct stopmethod_fields *f, char **cause)
{
	int r = db_exec(inv,
	    "UPDATE instance SET stop_command = ?, stop_kind = ?, "
	    "allow_release = ? WHERE id = ?",
	    "cannot store the stop method", cause, "ttiI", f->command, f->kind,
	    f->allow_release, id);

	return r < 0 ? r : 0;
}

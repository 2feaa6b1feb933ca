/*
 * The books survive the laptop: back the database up (a checked copy, the
 * old ones rotated), list the backups, check the database, and restore a
 * backup in place of a damaged one, which is moved aside, never deleted.
 */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cmd.h"
#include "dbfile.h"
#include "misc.h"
#include "status.h"
#include "xmalloc.h"

static int cmd_db_exec(
    const struct cmd_entry *, struct cmd_ctx *, int, char **);

const struct cmd_entry cmd_db_entry = {
	.name = "db",
	.usage = "backup [FILE] [--json] | ls [--json] | check [--json] |\n"
		 "       restore FILE [--force]",
	.summary = "back up, check and restore the inventory database",
	.help =
	    "  backup [FILE]  copy the database (a consistent copy while "
	    "others write,\n"
	    "                 checked with integrity_check before it counts) "
	    "to FILE,\n"
	    "                 which must not exist, or into the backups "
	    "folder beside\n"
	    "                 the database (0700; files 0600, named "
	    "fleet-TIMEZ.db in\n"
	    "                 UTC), keeping the newest [db] backup_keep "
	    "(default 7).\n"
	    "                 A damaged database is not backed up. The "
	    "daemon makes\n"
	    "                 one a day.\n"
	    "  ls             the backups in the backups folder, newest "
	    "first\n"
	    "  check          PRAGMA integrity_check and the schema version; "
	    "when the\n"
	    "                 database is damaged, the newest backup that "
	    "passes the\n"
	    "                 check and the command that restores it (exit "
	    "3)\n"
	    "  restore FILE   check the backup, move the database (and its "
	    "-wal, -shm)\n"
	    "                 aside to DB.damaged-TIME, copy the backup in. "
	    "Refused\n"
	    "                 while a daemon has the database open, and "
	    "without --force\n"
	    "                 when the database passes the check.\n"
	    "      --json     backup, ls and check as JSON\n\n"
	    "Every other command refuses a damaged database with one line "
	    "(\"... is\ndamaged (why); see `gpufleet db check`\") and "
	    "leaves it untouched.\n\n"
	    "Examples:\n"
	    "  gpufleet db backup\n"
	    "  gpufleet db check\n"
	    "  gpufleet db restore ~/.local/share/gpufleet/backups/"
	    "fleet-20261207T030000Z.db\n",
	.exec = cmd_db_exec,
};

enum { OPT_JSON = 256, OPT_FORCE };

static const struct option db_options[] = { { "json", no_argument, NULL,
						OPT_JSON },
	{ "force", no_argument, NULL, OPT_FORCE },
	{ "help", no_argument, NULL, 'h' }, { NULL, 0, NULL, 0 } };

/* A path as a shell word: itself when it needs no quotes. Caller frees. */
static char *
word(const char *s)
{
	if (*s != '\0' &&
	    strspn(s,
		"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrs"
		"tuvwxyz0123456789/._+-:=@") == strlen(s))
		return xstrdup(s);
	return misc_shell_quote(s);
}

/* The command that restores backup into the database at db. Caller frees. */
static char *
restore_command(const char *db, const char *backup)
{
	char *def = inventory_default_path(), *qdb = word(db);
	char *qb = word(backup), *s;

	if (strcmp(def, db) == 0)
		xasprintf(&s, "gpufleet db restore %s", qb);
	else
		xasprintf(&s, "gpufleet --db %s db restore %s", qdb, qb);
	free(def);
	free(qdb);
	free(qb);
	return s;
}

/* db backup: one checked copy, then the old ones rotated. */
static int
db_backup(struct cmd_ctx *ctx, const char *file, int json)
{
	const char *db = ctx->fleet->db_path;
	char *made = NULL, *cause = NULL;
	size_t removed = 0;
	int r, keep = ctx->fleet->config->db_backup_keep;
	json_t *o;

	if ((r = dbfile_backup(db, file, (int64_t)time(NULL), &made, &cause)) !=
	    0)
		return cmd_fail(-r, cause);
	if (file == NULL &&
	    (r = dbfile_rotate(db, NULL, keep, made, &removed, &cause)) != 0) {
		free(made);
		return cmd_fail(-r, cause);
	}
	if (json) {
		o = json_object();
		json_object_set_new(o, "database", json_string(db));
		json_object_set_new(o, "file", json_string(made));
		json_object_set_new(
		    o, "removed", json_integer((json_int_t)removed));
		json_print(o, stdout);
	} else {
		printf("backed up %s to %s\n", db, made);
		if (removed > 0)
			printf("removed %zu old backup%s (keeping %d)\n",
			    removed, removed == 1 ? "" : "s", keep);
	}
	free(made);
	return GF_OK;
}

/* db ls: the backups, newest first. */
static int
db_ls(struct cmd_ctx *ctx, int json)
{
	struct dbfile_backup *v;
	struct table *t;
	char *cause = NULL, *when, *dir, size[32];
	size_t n, i;
	json_t *arr, *o;
	int r;

	if ((r = dbfile_list(ctx->fleet->db_path, NULL, &v, &n, &cause)) != 0)
		return cmd_fail(-r, cause);
	if (json) {
		arr = json_array();
		for (i = 0; i < n; i++) {
			o = json_object();
			when = instance_format_time(v[i].t);
			json_object_set_new(o, "file", json_string(v[i].path));
			json_object_set_new(o, "time", json_string(when));
			json_object_set_new(
			    o, "bytes", json_integer((json_int_t)v[i].size));
			json_array_append_new(arr, o);
			free(when);
		}
		json_print(arr, stdout);
	} else if (n == 0) {
		dir = dbfile_backup_dir(ctx->fleet->db_path);
		printf(
		    "no backups in %s (gpufleet db backup makes one)\n", dir);
		free(dir);
	} else {
		t = table_new(3, "TIME", "BYTES", "FILE");
		for (i = 0; i < n; i++) {
			when = instance_format_time(v[i].t);
			snprintf(
			    size, sizeof size, "%lld", (long long)v[i].size);
			table_add(t, when, size, v[i].path);
			free(when);
		}
		table_print(t, stdout);
		table_free(t);
	}
	dbfile_list_free(v, n);
	return GF_OK;
}

/* The newest backup of db that passes integrity_check, or NULL. */
static struct dbfile_backup *
newest_good(struct dbfile_backup *v, size_t n)
{
	struct dbfile_check c;
	char *cause = NULL;
	size_t i;
	int ok;

	for (i = 0; i < n; i++) {
		ok = dbfile_check(v[i].path, 1, &c, &cause) == 0 && c.ok;
		free(cause);
		cause = NULL;
		dbfile_check_clear(&c);
		if (ok)
			return &v[i];
	}
	return NULL;
}

/* db check: the database's integrity, and on damage the way back. */
static int
db_check(struct cmd_ctx *ctx, int json)
{
	const char *db = ctx->fleet->db_path;
	struct dbfile_check c;
	struct dbfile_backup *v = NULL, *good = NULL;
	char *cause = NULL, *when = NULL, *cmd = NULL;
	size_t n = 0, i;
	json_t *o, *arr;

	if (dbfile_check(db, 1, &c, &cause) != 0) {
		c.problems[c.nproblems++] = cause;
		cause = NULL;
	}
	if (!c.ok) {
		if (dbfile_list(db, NULL, &v, &n, &cause) != 0) {
			free(cause);
			cause = NULL;
		}
		if ((good = newest_good(v, n)) != NULL) {
			when = instance_format_time(good->t);
			cmd = restore_command(db, good->path);
		}
	}
	if (json) {
		o = json_object();
		arr = json_array();
		for (i = 0; i < c.nproblems; i++)
			json_array_append_new(arr, json_string(c.problems[i]));
		json_object_set_new(o, "database", json_string(db));
		json_object_set_new(o, "ok", json_boolean(c.ok));
		json_object_set_new(o, "schema_version",
		    c.version >= 0 ? json_integer(c.version) : json_null());
		json_object_set_new(o, "problems", arr);
		json_object_set_new(o, "backup",
		    good != NULL ? json_string(good->path) : json_null());
		json_object_set_new(o, "backup_time",
		    when != NULL ? json_string(when) : json_null());
		json_object_set_new(
		    o, "restore", cmd != NULL ? json_string(cmd) : json_null());
		json_print(o, stdout);
	} else if (c.ok)
		printf("%s: ok (schema version %d)\n", db, c.version);
	else {
		printf("%s: damaged\n", db);
		for (i = 0; i < c.nproblems; i++)
			printf("  %s\n", c.problems[i]);
		if (good != NULL)
			printf("newest good backup: %s (%s)\n"
			       "restore it with: %s\n",
			    good->path, when, cmd);
		else
			printf("no backup that passes the check (gpufleet db "
			       "ls lists them)\n");
	}
	i = c.ok;
	free(when);
	free(cmd);
	dbfile_list_free(v, n);
	dbfile_check_clear(&c);
	return i ? GF_OK : GF_EDB;
}

/* db restore FILE: the backup in place of the database. */
static int
db_restore(struct cmd_ctx *ctx, const char *file, int force)
{
	const char *db = ctx->fleet->db_path;
	struct dbfile_check c;
	char *cause = NULL, *aside = NULL;
	int r, ok = 0;

	if (dbfile_check(db, 1, &c, &cause) == 0)
		ok = c.ok;
	free(cause);
	cause = NULL;
	dbfile_check_clear(&c);
	if (ok && !force) {
		xasprintf(&cause,
		    "%s passes the check: restoring would put the backup's "
		    "older books in its place (--force does it, moving it "
		    "aside)",
		    db);
		return cmd_fail(GF_EUSAGE, cause);
	}
	if ((r = dbfile_restore(
		 file, db, (int64_t)time(NULL), &aside, &cause)) != 0)
		return cmd_fail(-r, cause);
	printf("restored %s from %s\n", db, file);
	if (aside != NULL)
		printf("the one it replaced is at %s\n", aside);
	free(aside);
	return GF_OK;
}

static int
cmd_db_exec(
    const struct cmd_entry *e, struct cmd_ctx *ctx, int argc, char **argv)
{
	const char *verb;
	int ch, status, json = 0, force = 0, nargs;

	while (
	    (ch = cmd_getopt(e, argc, argv, "h", db_options, &status)) != -1) {
		switch (ch) {
		case -2:
			return status;
		case OPT_JSON:
			json = 1;
			break;
		case OPT_FORCE:
			force = 1;
			break;
		}
	}
	if (argc - optind < 1)
		return cmd_usage_error(e, "needs backup, ls, check or restore");
	verb = argv[optind];
	nargs = argc - optind - 1;
	if (strcmp(verb, "backup") == 0) {
		if (nargs > 1 || force)
			return cmd_usage_error(
			    e, "backup takes at most one FILE, no --force");
		return db_backup(
		    ctx, nargs == 1 ? argv[optind + 1] : NULL, json);
	}
	if (strcmp(verb, "ls") == 0 || strcmp(verb, "check") == 0) {
		if (nargs != 0 || force)
			return cmd_usage_error(
			    e, "%s takes no argument but --json", verb);
		return *verb == 'l' ? db_ls(ctx, json) : db_check(ctx, json);
	}
	if (strcmp(verb, "restore") == 0) {
		if (nargs != 1 || json)
			return cmd_usage_error(
			    e, "restore takes one FILE (and --force)");
		return db_restore(ctx, argv[optind + 1], force);
	}
	return cmd_usage_error(
	    e, "unknown action '%s' (backup, ls, check, restore)", verb);
}

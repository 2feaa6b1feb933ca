/*
 * The database file as a whole: is it damaged, back it up, restore it.
 *
 * A backup is a whole SQLite database (VACUUM INTO, so a consistent copy
 * taken while others write), checked with PRAGMA integrity_check before it
 * counts: a damaged database is never backed up, so rotation never trades
 * a good backup for a bad one. Default backups lie in DIR/backups beside
 * the database (0700), each STEM-YYYYMMDDTHHMMSSZ.db (0600, created so,
 * never chmod'ed), STEM the database's name less ".db"; a second backup in
 * the same second is STEM-...Z-N.db (N 1 to 9). Names sort by time.
 *
 * Restoring never deletes: the database in place (and its -wal and -shm)
 * is moved aside to DB.damaged-YYYYMMDDTHHMMSSZ, then the checked backup is
 * copied in.
 *
 * Functions return 0, -GF_EUSAGE for a user error or -GF_EDB for a
 * database or file failure, with *cause set (caller frees).
 */
#ifndef GPUFLEET_DBFILE_H
#define GPUFLEET_DBFILE_H

#include <stddef.h>
#include <stdint.h>

#include <sqlite3.h>

#define DBFILE_KEEP_DEFAULT 7 /* [db] backup_keep */
#define DBFILE_PROBLEMS_MAX 10

/* What dbfile_check found. */
struct dbfile_check {
	int ok;
	int version;			     /* user_version, -1 unread */
	char *problems[DBFILE_PROBLEMS_MAX]; /* the first ones */
	size_t nproblems;
};

/* One backup file in a backups folder. */
struct dbfile_backup {
	char *path;
	int64_t t; /* from its name, UTC */
	int64_t size;
};

int dbfile_header(sqlite3 *, const char *, char **);
char *dbfile_damaged_error(const char *, const char *);
int dbfile_check(const char *, int, struct dbfile_check *, char **);
void dbfile_check_clear(struct dbfile_check *);
char *dbfile_backup_dir(const char *);
int dbfile_backup(const char *, const char *, int64_t, char **, char **);
int dbfile_list(
    const char *, const char *, struct dbfile_backup **, size_t *, char **);
void dbfile_list_free(struct dbfile_backup *, size_t);
int dbfile_rotate(
    const char *, const char *, int, const char *, size_t *, char **);
int dbfile_restore(const char *, const char *, int64_t, char **, char **);
long dbfile_daemon_pid(const char *);

#endif

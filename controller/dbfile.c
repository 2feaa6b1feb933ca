/* The database file as a whole: damage checks, backups and restore. */

#include <sys/stat.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <sqlite3.h>

#include "dbfile.h"
#include "inventory.h"
#include "misc.h"
#include "status.h"
#include "xmalloc.h"

#define BUSY_TIMEOUT_MS 10000

static int header_why(sqlite3 *, char **);
static void add_problem(struct dbfile_check *, const char *);
static void add_lines(struct dbfile_check *, const char *);
static int pragma_int(sqlite3 *, const char *, int *);
static char *stem_of(const char *);
static char *dir_of(const char *);
static int parse_name(const char *, const char *, int64_t *);
static int new_file(const char *, char **);
static int copy_file(const char *, const char *, char **);
static int move_aside(const char *, const char *, char **);
static int by_name_desc(const void *, const void *);
static int next_index(const char *, const char *, int64_t);

static uint32_t
be32(const unsigned char *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 |
	    (uint32_t)p[2] << 8 | (uint32_t)p[3];
}

/*
 * Whether the database file of the connection db is visibly damaged
 * before SQLite reads a page of it: not a database, a bad page size, or
 * shorter than its header says (truncated). Returns 1 with *why set
 * (caller frees), 0 when it looks whole or is empty (not made yet).
 *
 * It reads through SQLite's own descriptor: a descriptor of our own,
 * closed again, would drop every POSIX lock this process holds on the
 * file (another connection's, the daemon's), after which another process
 * takes the WAL for its own and deletes it.
 */
static int
header_why(sqlite3 *db, char **why)
{
	unsigned char h[100];
	sqlite3_file *fp = NULL;
	sqlite3_int64 size = 0;
	uint32_t pagesize, npages;

	if (sqlite3_file_control(db, "main", SQLITE_FCNTL_FILE_POINTER, &fp) !=
		SQLITE_OK ||
	    fp == NULL || fp->pMethods == NULL ||
	    fp->pMethods->xFileSize(fp, &size) != SQLITE_OK || size == 0)
		return 0;
	memset(h, 0, sizeof h);
	if (size < (sqlite3_int64)sizeof h ||
	    fp->pMethods->xRead(fp, h, (int)sizeof h, 0) != SQLITE_OK ||
	    memcmp(h, "SQLite format 3", 16) != 0) {
		*why = xstrdup("file is not a database");
		return 1;
	}
	pagesize = (uint32_t)h[16] << 8 | h[17];
	if (pagesize == 1)
		pagesize = 65536;
	if (pagesize < 512 || pagesize > 65536 ||
	    (pagesize & (pagesize - 1)) != 0) {
		xasprintf(why, "bad page size %u in the header", pagesize);
		return 1;
	}
	npages = be32(h + 28);
	if (size % pagesize != 0 ||
	    (be32(h + 92) == be32(h + 24) &&
		(int64_t)npages * pagesize > (int64_t)size)) {
		xasprintf(why, "truncated: %lld bytes, the header says %lld",
		    (long long)size, (long long)npages * pagesize);
		return 1;
	}
	return 0;
}

/* "PATH is damaged (WHY); see `gpufleet db check`". Caller frees. */
char *
dbfile_damaged_error(const char *path, const char *why)
{
	char *s;

	xasprintf(&s, "%s is damaged (%s); see `gpufleet db check`", path, why);
	return s;
}

/*
 * Refuse a database file that is visibly damaged (header_why), opened as
 * db but not read yet: 0, or -GF_EDB with *cause.
 */
int
dbfile_header(sqlite3 *db, const char *path, char **cause)
{
	char *why = NULL;

	if (!header_why(db, &why))
		return 0;
	*cause = dbfile_damaged_error(path, why);
	free(why);
	return -GF_EDB;
}

static void
add_problem(struct dbfile_check *c, const char *text)
{
	if (c->nproblems < DBFILE_PROBLEMS_MAX)
		c->problems[c->nproblems++] = xstrdup(text);
}

/*
 * Each line of an integrity_check row as a problem, less its "*** in
 * database main ***" heading.
 */
static void
add_lines(struct dbfile_check *c, const char *text)
{
	const char *nl;
	char *line;

	for (; *text != '\0'; text = *nl != '\0' ? nl + 1 : nl) {
		if ((nl = strchr(text, '\n')) == NULL)
			nl = text + strlen(text);
		line = xstrndup(text, (size_t)(nl - text));
		if (*line != '\0' && strncmp(line, "*** ", 4) != 0)
			add_problem(c, line);
		free(line);
	}
}

/* One integer from a PRAGMA; -1 on an error (sqlite3_errmsg says). */
static int
pragma_int(sqlite3 *db, const char *sql, int *out)
{
	sqlite3_stmt *st;
	int rc;

	if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK)
		return -1;
	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW)
		*out = sqlite3_column_int(st, 0);
	sqlite3_finalize(st);
	return rc == SQLITE_ROW ? 0 : -1;
}

/*
 * Check the database at path without writing to it: its header, that it is
 * a gpufleet database of a schema this build reads, and PRAGMA
 * integrity_check (full) or quick_check. Fills *c (free with
 * dbfile_check_clear); returns -GF_EDB only when nothing is at path.
 */
int
dbfile_check(const char *path, int full, struct dbfile_check *c, char **cause)
{
	sqlite3 *db = NULL;
	sqlite3_stmt *st = NULL;
	char *why = NULL;
	const char *text;
	int appid = 0, ntables = 0, rc;

	memset(c, 0, sizeof *c);
	c->version = -1;
	if (access(path, F_OK) != 0) {
		xasprintf(cause, "no database at %s", path);
		return -GF_EDB;
	}
	if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL) !=
	    SQLITE_OK) {
		add_problem(c, sqlite3_errmsg(db));
		goto out;
	}
	if (header_why(db, &why)) {
		add_problem(c, why);
		free(why);
		goto out;
	}
	sqlite3_busy_timeout(db, BUSY_TIMEOUT_MS);
	if (pragma_int(db, "PRAGMA application_id", &appid) != 0 ||
	    pragma_int(db, "PRAGMA user_version", &c->version) != 0 ||
	    pragma_int(db, "SELECT count(*) FROM sqlite_schema", &ntables) !=
		0) {
		add_problem(c, sqlite3_errmsg(db));
		goto out;
	}
	if (appid != INVENTORY_APPLICATION_ID && (appid != 0 || ntables != 0))
		add_problem(c, "not a gpufleet database");
	else if (c->version > inventory_schema_version()) {
		xasprintf(&why,
		    "schema version %d, newer than this gpufleet's %d",
		    c->version, inventory_schema_version());
		add_problem(c, why);
		free(why);
	}
	if (sqlite3_prepare_v2(db,
		full ? "PRAGMA integrity_check(10)" : "PRAGMA quick_check(10)",
		-1, &st, NULL) != SQLITE_OK) {
		add_problem(c, sqlite3_errmsg(db));
		goto out;
	}
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		text = (const char *)sqlite3_column_text(st, 0);
		if (text != NULL && strcmp(text, "ok") != 0)
			add_lines(c, text);
	}
	if (rc != SQLITE_DONE)
		add_problem(c, sqlite3_errmsg(db));
out:
	sqlite3_finalize(st);
	sqlite3_close(db);
	c->ok = c->nproblems == 0;
	return 0;
}

void
dbfile_check_clear(struct dbfile_check *c)
{
	size_t i;

	for (i = 0; i < c->nproblems; i++)
		free(c->problems[i]);
	memset(c, 0, sizeof *c);
}

/* The folder a path's file lies in ("." for a bare name). Caller frees. */
static char *
dir_of(const char *path)
{
	const char *p = strrchr(path, '/');

	if (p == NULL)
		return xstrdup(".");
	if (p == path)
		return xstrdup("/");
	return xstrndup(path, (size_t)(p - path));
}

/* The database's name less its directory and ".db". Caller frees. */
static char *
stem_of(const char *db)
{
	const char *base = strrchr(db, '/');
	size_t len;

	base = base != NULL ? base + 1 : db;
	len = strlen(base);
	if (len > 3 && strcmp(base + len - 3, ".db") == 0)
		len -= 3;
	return xstrndup(base, len);
}

/* The default backups folder of the database at db. Caller frees. */
char *
dbfile_backup_dir(const char *db)
{
	char *dir = dir_of(db), *s;

	xasprintf(&s, "%s/backups", dir);
	free(dir);
	return s;
}

/*
 * Whether name is a backup of stem (STEM-YYYYMMDDTHHMMSSZ[-N].db); sets
 * *t to its time.
 */
static int
parse_name(const char *name, const char *stem, int64_t *t)
{
	size_t ls = strlen(stem), len = strlen(name);
	const char *p, *end;
	struct tm tm;

	if (strncmp(name, stem, ls) != 0 || name[ls] != '-' || len < 3 ||
	    strcmp(name + len - 3, ".db") != 0)
		return 0;
	p = name + ls + 1;
	end = name + len - 3;
	memset(&tm, 0, sizeof tm);
	if (end - p < 16 || strptime(p, "%Y%m%dT%H%M%SZ", &tm) != p + 16)
		return 0;
	if (end - p != 16 &&
	    (end - p != 18 || p[16] != '-' || p[17] < '1' || p[17] > '9'))
		return 0;
	*t = (int64_t)timegm(&tm);
	return 1;
}

/* Create path, which must not exist, empty and 0600. */
static int
new_file(const char *path, char **cause)
{
	int fd;

	fd = open(
	    path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd == -1) {
		xasprintf(cause, "cannot create %s: %s", path, strerror(errno));
		return -GF_EDB;
	}
	close(fd);
	return 0;
}

/*
 * Remove the partial copies (.STEM-backup.PID.partial) that backups
 * killed before they finished left in dir: only those whose process is
 * gone.
 */
static void
sweep_partials(const char *dir, const char *stem)
{
	DIR *d;
	struct dirent *e;
	char *prefix, *path, *end;
	size_t n;
	long pid;

	if ((d = opendir(dir)) == NULL)
		return;
	xasprintf(&prefix, ".%s-backup.", stem);
	n = strlen(prefix);
	while ((e = readdir(d)) != NULL) {
		if (strncmp(e->d_name, prefix, n) != 0)
			continue;
		errno = 0;
		pid = strtol(e->d_name + n, &end, 10);
		if (errno != 0 || strcmp(end, ".partial") != 0 ||
		    !misc_pid_gone(pid))
			continue;
		xasprintf(&path, "%s/%s", dir, e->d_name);
		unlink(path);
		free(path);
	}
	free(prefix);
	closedir(d);
}

/*
 * Back the database at db up to file, or with file NULL into its backups
 * folder (made 0700) under a new name for time now. The copy is checked
 * before it takes its name; *made gets its path (caller frees).
 */
int
dbfile_backup(
    const char *db, const char *file, int64_t now, char **made, char **cause)
{
	struct dbfile_check c;
	sqlite3 *src = NULL;
	sqlite3_stmt *st = NULL;
	char *dir, *stem, *tmp = NULL, *name = NULL, ts[32];
	time_t tt = (time_t)now;
	struct tm tm;
	int r, i, fd;

	*made = NULL;
	if (access(db, F_OK) != 0) {
		xasprintf(cause, "no database at %s", db);
		return -GF_EDB;
	}
	if (file != NULL && access(file, F_OK) == 0) {
		xasprintf(cause,
		    "%s exists (a backup is only written to a new "
		    "file)",
		    file);
		return -GF_EUSAGE;
	}
	dir = file != NULL ? dir_of(file) : dbfile_backup_dir(db);
	if (file == NULL && mkdir(dir, 0700) != 0 && errno != EEXIST) {
		xasprintf(cause, "cannot create %s: %s", dir, strerror(errno));
		free(dir);
		return -GF_EDB;
	}
	stem = stem_of(db);
	sweep_partials(dir, stem);
	xasprintf(&tmp, "%s/.%s-backup.%ld.partial", dir, stem, (long)getpid());
	unlink(tmp);
	if ((r = new_file(tmp, cause)) != 0)
		goto out;
	if (sqlite3_open_v2(db, &src, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK)
		goto sqlfail;
	if ((r = dbfile_header(src, db, cause)) != 0)
		goto out;
	sqlite3_busy_timeout(src, BUSY_TIMEOUT_MS);
	if (sqlite3_prepare_v2(src, "VACUUM INTO ?", -1, &st, NULL) !=
	    SQLITE_OK)
		goto sqlfail;
	sqlite3_bind_text(st, 1, tmp, -1, SQLITE_STATIC);
	if (sqlite3_step(st) != SQLITE_DONE)
		goto sqlfail;
	sqlite3_finalize(st);
	st = NULL;
	sqlite3_close(src);
	src = NULL;

	dbfile_check(tmp, 1, &c, cause);
	if (!c.ok) {
		*cause = dbfile_damaged_error(
		    db, c.nproblems > 0 ? c.problems[0] : "unreadable");
		dbfile_check_clear(&c);
		r = -GF_EDB;
		goto out;
	}
	dbfile_check_clear(&c);
	if ((fd = open(tmp, O_RDONLY | O_CLOEXEC)) != -1) {
		if (fsync(fd) != 0)
			r = -GF_EDB;
		close(fd);
	}
	if (fd == -1 || r != 0) {
		xasprintf(cause, "cannot write %s: %s", tmp, strerror(errno));
		r = -GF_EDB;
		goto out;
	}

	gmtime_r(&tt, &tm);
	strftime(ts, sizeof ts, "%Y%m%dT%H%M%SZ", &tm);
	for (i = file == NULL ? next_index(db, dir, now) : 0; i < 10; i++) {
		free(name);
		if (file != NULL)
			name = xstrdup(file);
		else if (i == 0)
			xasprintf(&name, "%s/%s-%s.db", dir, stem, ts);
		else
			xasprintf(&name, "%s/%s-%s-%d.db", dir, stem, ts, i);
		if (link(tmp, name) == 0)
			break;
		if (errno != EEXIST || file != NULL)
			i = 10;
	}
	if (i >= 10 && name == NULL) {
		xasprintf(cause, "ten backups in %s this second already", dir);
		r = -GF_EDB;
		goto out;
	}
	if (i >= 10) {
		xasprintf(cause, "cannot write %s: %s", name, strerror(errno));
		r = -GF_EDB;
		goto out;
	}
	*made = name;
	name = NULL;
	r = 0;
	goto out;

sqlfail:
	xasprintf(cause, "cannot back up %s: %s", db, sqlite3_errmsg(src));
	if ((sqlite3_extended_errcode(src) & 0xff) == SQLITE_CORRUPT ||
	    (sqlite3_extended_errcode(src) & 0xff) == SQLITE_NOTADB) {
		free(*cause);
		*cause = dbfile_damaged_error(db, sqlite3_errmsg(src));
	}
	r = -GF_EDB;
out:
	sqlite3_finalize(st);
	sqlite3_close(src);
	if (tmp != NULL)
		unlink(tmp);
	free(tmp);
	free(name);
	free(stem);
	free(dir);
	return r;
}

/*
 * The first free -N for a backup of db in dir at time now: after the
 * newest there when that one is of the same second, so names keep their
 * order whatever was rotated away.
 */
static int
next_index(const char *db, const char *dir, int64_t now)
{
	struct dbfile_backup *v;
	char *cause = NULL;
	size_t n, len;
	int i = 0;

	if (dbfile_list(db, dir, &v, &n, &cause) != 0) {
		free(cause);
		return 0;
	}
	if (n > 0 && v[0].t == now) {
		len = strlen(v[0].path);
		if (len > 5 && v[0].path[len - 5] == '-')
			i = v[0].path[len - 4] - '0' + 1;
		else
			i = 1;
	}
	dbfile_list_free(v, n);
	return i;
}

static int
by_name_desc(const void *a, const void *b)
{
	const struct dbfile_backup *x = a, *y = b;
	size_t lx = strlen(x->path) - 3, ly = strlen(y->path) - 3;
	int c = strncmp(y->path, x->path, lx < ly ? lx : ly);

	if (c != 0)
		return c;
	return lx < ly ? 1 : lx > ly ? -1 : 0;
}

/*
 * The backups of the database at db in dir (NULL: its backups folder),
 * newest first; none when the folder does not exist. Free *out with
 * dbfile_list_free.
 */
int
dbfile_list(const char *db, const char *dir, struct dbfile_backup **out,
    size_t *n, char **cause)
{
	struct dbfile_backup *v = NULL;
	struct dirent *de;
	struct stat sb;
	char *d = dir != NULL ? xstrdup(dir) : dbfile_backup_dir(db);
	char *stem = stem_of(db), *path;
	size_t len = 0;
	int64_t t;
	DIR *dp;

	*out = NULL;
	*n = 0;
	if ((dp = opendir(d)) == NULL) {
		if (errno == ENOENT) {
			free(d);
			free(stem);
			return 0;
		}
		xasprintf(cause, "cannot read %s: %s", d, strerror(errno));
		free(d);
		free(stem);
		return -GF_EDB;
	}
	while ((de = readdir(dp)) != NULL) {
		if (!parse_name(de->d_name, stem, &t))
			continue;
		xasprintf(&path, "%s/%s", d, de->d_name);
		if (lstat(path, &sb) != 0 || !S_ISREG(sb.st_mode)) {
			free(path);
			continue;
		}
		v = xreallocarray(v, len + 1, sizeof *v);
		v[len].path = path;
		v[len].t = t;
		v[len].size = (int64_t)sb.st_size;
		len++;
	}
	closedir(dp);
	if (len > 1)
		qsort(v, len, sizeof *v, by_name_desc);
	free(d);
	free(stem);
	*out = v;
	*n = len;
	return 0;
}

void
dbfile_list_free(struct dbfile_backup *v, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		free(v[i].path);
	free(v);
}

/*
 * Keep the newest keep backups of db in dir (NULL: its backups folder) and
 * remove the older ones, never spare (the one just made, NULL: none);
 * *removed says how many went.
 */
int
dbfile_rotate(const char *db, const char *dir, int keep, const char *spare,
    size_t *removed, char **cause)
{
	struct dbfile_backup *v;
	size_t n, i;
	int r;

	*removed = 0;
	if ((r = dbfile_list(db, dir, &v, &n, cause)) != 0)
		return r;
	for (i = keep > 0 ? (size_t)keep : 1; i < n; i++) {
		if (spare != NULL && strcmp(v[i].path, spare) == 0)
			continue;
		if (unlink(v[i].path) == 0)
			(*removed)++;
		else if (errno != ENOENT && r == 0) {
			xasprintf(cause, "cannot remove %s: %s", v[i].path,
			    strerror(errno));
			r = -GF_EDB;
		}
	}
	dbfile_list_free(v, n);
	return r;
}

/* Copy from to a new file to (0600), synced. */
static int
copy_file(const char *from, const char *to, char **cause)
{
	char buf[65536];
	ssize_t n, w, off;
	int in, out, err = 0;

	if ((in = open(from, O_RDONLY | O_CLOEXEC)) == -1) {
		xasprintf(cause, "cannot read %s: %s", from, strerror(errno));
		return -GF_EDB;
	}
	out = open(
	    to, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (out == -1) {
		xasprintf(cause, "cannot create %s: %s", to, strerror(errno));
		close(in);
		return -GF_EDB;
	}
	while (err == 0 && (n = read(in, buf, sizeof buf)) != 0) {
		if (n == -1) {
			if (errno != EINTR)
				err = errno;
			continue;
		}
		for (off = 0; err == 0 && off<n; off += w> 0 ? w : 0) {
			if ((w = write(out, buf + off, (size_t)(n - off))) ==
				-1 &&
			    errno != EINTR)
				err = errno;
		}
	}
	if (err == 0 && fsync(out) != 0)
		err = errno;
	if (close(out) != 0 && err == 0)
		err = errno;
	close(in);
	if (err != 0) {
		xasprintf(cause, "cannot write %s: %s", to, strerror(err));
		unlink(to);
		return -GF_EDB;
	}
	return 0;
}

/*
 * Move path to aside without replacing anything there (link, then
 * unlink); nothing at path is fine.
 */
static int
move_aside(const char *path, const char *aside, char **cause)
{
	if (link(path, aside) != 0) {
		if (errno == ENOENT)
			return 0;
		xasprintf(cause, "cannot move %s to %s: %s", path, aside,
		    strerror(errno));
		return -GF_EDB;
	}
	if (unlink(path) != 0) {
		xasprintf(
		    cause, "cannot move %s aside: %s", path, strerror(errno));
		return -GF_EDB;
	}
	return 0;
}

/*
 * Put the backup in place of the database at db: the backup must pass
 * integrity_check; the database there (with its -wal and -shm) is moved
 * to DB.damaged-TIME, *aside (caller frees; NULL when there was none).
 */
int
dbfile_restore(
    const char *backup, const char *db, int64_t now, char **aside, char **cause)
{
	struct dbfile_check c;
	static const char *const sides[] = { "", "-wal", "-shm" };
	char *tmp, *dir, *from, *to, ts[32];
	time_t tt = (time_t)now;
	struct tm tm;
	long pid;
	size_t i;
	int r;

	*aside = NULL;
	if ((pid = dbfile_daemon_pid(db)) > 0) {
		xasprintf(cause,
		    "a daemon (pid %ld) has %s open; stop it first "
		    "(gpufleet daemon stop)",
		    pid, db);
		return -GF_EUSAGE;
	}
	if ((r = dbfile_check(backup, 1, &c, cause)) != 0)
		return r == -GF_EDB ? -GF_EUSAGE : r;
	if (!c.ok) {
		xasprintf(cause,
		    "backup %s is damaged too (%s); pick another "
		    "(gpufleet db ls)",
		    backup, c.nproblems > 0 ? c.problems[0] : "unreadable");
		dbfile_check_clear(&c);
		return -GF_EUSAGE;
	}
	dbfile_check_clear(&c);
	dir = dir_of(db);
	if (misc_mkdirs(dir, cause) != 0) {
		free(dir);
		return -GF_EDB;
	}
	free(dir);
	xasprintf(&tmp, "%s.restore.%ld", db, (long)getpid());
	unlink(tmp);
	if ((r = copy_file(backup, tmp, cause)) != 0) {
		free(tmp);
		return r;
	}
	if (access(db, F_OK) == 0) {
		gmtime_r(&tt, &tm);
		strftime(ts, sizeof ts, "%Y%m%dT%H%M%SZ", &tm);
		xasprintf(aside, "%s.damaged-%s", db, ts);
		for (i = 0; r == 0 && i < sizeof sides / sizeof *sides; i++) {
			xasprintf(&from, "%s%s", db, sides[i]);
			xasprintf(&to, "%s%s", *aside, sides[i]);
			r = move_aside(from, to, cause);
			free(from);
			free(to);
		}
	}
	if (r == 0 && rename(tmp, db) != 0) {
		xasprintf(
		    cause, "cannot put %s in place: %s", db, strerror(errno));
		r = -GF_EDB;
	}
	if (r != 0)
		unlink(tmp);
	free(tmp);
	return r;
}

/* The pid of the daemon holding db's lock, 0 when none does. */
long
dbfile_daemon_pid(const char *db)
{
	struct flock fl;
	char *path;
	int fd;

	xasprintf(&path, "%s.daemon.lock", db);
	fd = open(path, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
	free(path);
	if (fd == -1)
		return 0;
	memset(&fl, 0, sizeof fl);
	fl.l_type = F_WRLCK;
	fl.l_whence = SEEK_SET;
	if (fcntl(fd, F_GETLK, &fl) != 0 || fl.l_type == F_UNLCK) {
		close(fd);
		return 0;
	}
	close(fd);
	return fl.l_pid > 0 ? (long)fl.l_pid : 1;
}

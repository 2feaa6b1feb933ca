/* Preparing, binding, stepping and finalizing one inventory statement. */

#include <math.h>
#include <stdarg.h>
#include <stdint.h>

#include "db.h"
#include "log.h"
#include "status.h"
#include "xmalloc.h"

static int db_fail(struct inventory *, const char *, char **);
static void db_bindv(sqlite3_stmt *, const char *, va_list);

/* Describe the last error in *cause (unless NULL); -GF_EDB. */
static int
db_fail(struct inventory *inv, const char *what, char **cause)
{
	if (cause != NULL)
		return inventory_error(inv, what, cause);
	return -GF_EDB;
}

/* Bind the arguments in ap to parameters 1, 2, ... as fmt says. */
static void
db_bindv(sqlite3_stmt *st, const char *fmt, va_list ap)
{
	int i, n;
	int64_t v;
	double d;

	for (i = 1; fmt[i - 1] != '\0'; i++) {
		switch (fmt[i - 1]) {
		case 'i':
			n = va_arg(ap, int);
			sqlite3_bind_int(st, i, n);
			break;
		case 'I':
		case 'N':
			v = va_arg(ap, int64_t);
			if (v == 0 && fmt[i - 1] == 'N')
				sqlite3_bind_null(st, i);
			else
				sqlite3_bind_int64(st, i, v);
			break;
		case 'n':
			v = va_arg(ap, int64_t);
			if (v < 0)
				sqlite3_bind_null(st, i);
			else
				sqlite3_bind_int64(st, i, v);
			break;
		case 'd':
			d = va_arg(ap, double);
			if (isnan(d))
				sqlite3_bind_null(st, i);
			else
				sqlite3_bind_double(st, i, d);
			break;
		case 't':
			sqlite3_bind_text(
			    st, i, va_arg(ap, const char *), -1, SQLITE_STATIC);
			break;
		default:
			fatal_f("bad format letter '%c'", fmt[i - 1]);
		}
	}
}

/* Prepare sql into *st and bind its parameters; the caller finishes it. */
int
db_prepare(struct inventory *inv, sqlite3_stmt **st, const char *sql,
    const char *what, char **cause, const char *fmt, ...)
{
	va_list ap;

	if (sqlite3_prepare_v2(inv->db, sql, -1, st, NULL) != SQLITE_OK) {
		*st = NULL;
		return db_fail(inv, what, cause);
	}
	va_start(ap, fmt);
	db_bindv(*st, fmt, ap);
	va_end(ap);
	return 0;
}

/* Reset a prepared statement and bind new parameters, to run it again. */
void
db_rebind(sqlite3_stmt *st, const char *fmt, ...)
{
	va_list ap;

	sqlite3_reset(st);
	sqlite3_clear_bindings(st);
	va_start(ap, fmt);
	db_bindv(st, fmt, ap);
	va_end(ap);
}

/* Finalize st, whose last sqlite3_step returned rc. */
int
db_finish(struct inventory *inv, sqlite3_stmt *st, int rc, const char *what,
    char **cause)
{
	int r = rc == SQLITE_ROW ? 1 : 0;

	if (rc != SQLITE_ROW && rc != SQLITE_DONE)
		r = db_fail(inv, what, cause);
	sqlite3_finalize(st);
	return r;
}

/* Prepare sql, bind its parameters, step it once and finalize it. */
int
db_exec(struct inventory *inv, const char *sql, const char *what, char **cause,
    const char *fmt, ...)
{
	sqlite3_stmt *st;
	va_list ap;

	if (sqlite3_prepare_v2(inv->db, sql, -1, &st, NULL) != SQLITE_OK)
		return db_fail(inv, what, cause);
	va_start(ap, fmt);
	db_bindv(st, fmt, ap);
	va_end(ap);
	return db_finish(inv, st, sqlite3_step(st), what, cause);
}

/* A column's text, or NULL for NULL. Caller frees. */
char *
db_text(sqlite3_stmt *st, int col)
{
	const unsigned char *s = sqlite3_column_text(st, col);

	return s != NULL ? xstrdup((const char *)s) : NULL;
}

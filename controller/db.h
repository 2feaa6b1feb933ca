/*
 * One SQLite statement of the inventory: prepare and bind, step, finalize,
 * with errors as inventory_error writes them ("database PATH: WHAT: why").
 *
 * fmt has one letter per parameter, in order: 'i' int, 'I' int64_t, 'N'
 * int64_t bound as NULL when 0, 'n' int64_t bound as NULL when negative,
 * 'd' double bound as NULL when NAN, 't' a
 * string (NULL binds NULL), which is not copied and must outlive the
 * statement. cause may be NULL where the caller does not report the error.
 * The functions return 1 when the last step gave a row, 0 when it was done
 * (or on a successful prepare), -GF_EDB on an error.
 */
#ifndef GPUFLEET_DB_H
#define GPUFLEET_DB_H

#include <sqlite3.h>

#include "inventory.h"

int db_prepare(struct inventory *, sqlite3_stmt **, const char *, const char *,
    char **, const char *, ...);
void db_rebind(sqlite3_stmt *, const char *, ...);
int db_finish(struct inventory *, sqlite3_stmt *, int, const char *, char **);
int db_exec(
    struct inventory *, const char *, const char *, char **, const char *, ...);
char *db_text(sqlite3_stmt *, int);

#endif

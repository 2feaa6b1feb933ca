/*
 * The inventory: rented instances kept in SQLite.
 *
 * One file (default $XDG_DATA_HOME/gpufleet/fleet.db), created 0600 in a 0700
 * directory, WAL mode, foreign keys on, a busy timeout on every connection,
 * every write inside BEGIN IMMEDIATE. The schema is versioned with
 * PRAGMA user_version and migrated forward at open; a database from a newer
 * gpufleet is refused untouched.
 *
 * Functions return 0, -GF_EUSAGE for a user error (no such instance, a name
 * taken) or -GF_EDB for a database failure, with *cause set (caller frees).
 */
#ifndef GPUFLEET_INVENTORY_H
#define GPUFLEET_INVENTORY_H

#include <sqlite3.h>
#include <stddef.h>
#include <stdint.h>

#include "instance.h"

#define INVENTORY_APPLICATION_ID 0x47464c54 /* "GFLT" */

struct config;

struct inventory {
	sqlite3 *db;
	char *path;
	int in_txn;
	int busy_ms; /* how long a statement waits for another's lock */
	/* The process's configuration (borrowed, may be NULL): the targets
	   that what is stored here queues notifications for (notify.c). */
	const struct config *config;
};

char *inventory_default_path(void);
int inventory_open(const char *, struct inventory **, char **);
void inventory_close(struct inventory *);
int inventory_migrate(sqlite3 *, const char *const *, int, char **);
int inventory_schema_version(void);
int inventory_error(struct inventory *, const char *, char **);
void inventory_set_busy(struct inventory *, int);
int inventory_begin(struct inventory *, char **);
int inventory_commit(struct inventory *, char **);
void inventory_rollback(struct inventory *);
int inventory_list(
    struct inventory *, int, struct instance **, size_t *, char **);
int inventory_get(struct inventory *, const char *, struct instance *, char **);
int inventory_get_id(struct inventory *, int64_t, struct instance *, char **);
int inventory_add(struct inventory *, struct instance *, char **);
int inventory_update(struct inventory *, const struct instance *, char **);
int inventory_check_jump(struct inventory *, const struct instance *, char **);
int inventory_jump_users(struct inventory *, const char *, char **, char **);
int inventory_release(struct inventory *, int64_t, int64_t, char **);
int inventory_restore(struct inventory *, const struct instance *, char **);
int inventory_purge(struct inventory *, int64_t, char **);
struct stopmethod_fields;
int inventory_stop_get(
    struct inventory *, int64_t, struct stopmethod_fields *, char **);
int inventory_stop_put(
    struct inventory *, int64_t, const struct stopmethod_fields *, char **);
int inventory_select(
    struct inventory *, const char *, struct instance **, size_t *, char **);

#endif

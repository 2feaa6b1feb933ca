/* The action log: one row per thing the laptop side did. */

#include <stdlib.h>

#include "actionlog.h"
#include "db.h"
#include "xmalloc.h"

/* Told of each entry appended in this process (a daemon counts them). */
static void (*observer)(const char *, void *);
static void *observer_arg;

/* Call fn(kind, arg) after each entry appended; NULL stops it. */
void
actionlog_observe(void (*fn)(const char *, void *), void *arg)
{
	observer = fn;
	observer_arg = arg;
}

/*
 * Append an entry at time t: kind (schedule_run, guard_shutdown, ...),
 * name (the schedule's or guard's, or NULL), instances (a JSON array of
 * names, or NULL: none), why and result (a JSON object per host, or
 * NULL: not known yet). Neither JSON value is stolen. *id (may be NULL)
 * is the new row's. Returns 0 or -GF_EDB with *cause.
 */
int
actionlog_add(struct inventory *inv, int64_t t, const char *kind,
    const char *name, json_t *instances, const char *why, json_t *result,
    int64_t *id, char **cause)
{
	char *names = instances != NULL ? json_dumps(instances, JSON_COMPACT)
					: xstrdup("[]");
	char *res = result != NULL ? json_dumps(result, JSON_COMPACT) : NULL;
	int r;

	r = db_exec(inv,
	    "INSERT INTO action_log (t, kind, name, instances, why, result) "
	    "VALUES (?, ?, ?, ?, ?, ?)",
	    "recording an action", cause, "Ittttt", t, kind, name, names, why,
	    res);
	free(names);
	free(res);
	if (r < 0)
		return r;
	if (id != NULL)
		*id = sqlite3_last_insert_rowid(inv->db);
	if (observer != NULL)
		observer(kind, observer_arg);
	return 0;
}

/* Set the result of entry id (a JSON object per host; not stolen). */
int
actionlog_result(
    struct inventory *inv, int64_t id, json_t *result, char **cause)
{
	char *res = json_dumps(result, JSON_COMPACT);
	int r;

	r = db_exec(inv, "UPDATE action_log SET result = ? WHERE id = ?",
	    "recording an action's result", cause, "tI", res, id);
	free(res);
	return r < 0 ? r : 0;
}

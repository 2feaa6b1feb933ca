/* Queueing a notification, in the producer's transaction (notify.h). */

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "db.h"
#include "log.h"
#include "notify.h"
#include "xmalloc.h"

/*
 * A message's text: "gpufleet: INSTANCE WHAT at WHEN. Next: NEXT", WHEN
 * as notify_when says t at now, cut at NOTIFY_TEXT_MAX bytes. The agent's
 * notif_text is the same (tests/unit/test_agent_notify.c). Caller frees.
 */
char *
notify_text(const char *instance, const char *what, int64_t t, int64_t now,
    const char *next)
{
	char *text, *when = notify_when(t, now);
	size_t i;

	xasprintf(&text, "gpufleet: %s%s%s at %s.%s%s",
	    instance != NULL ? instance : "", instance != NULL ? " " : "", what,
	    when, next != NULL ? " Next: " : "", next != NULL ? next : "");
	free(when);
	if ((i = strlen(text)) > NOTIFY_TEXT_MAX) {
		/* Cut at a character's start: the bodies must be UTF-8. */
		i = NOTIFY_TEXT_MAX;
		while (i > 0 && ((unsigned char)text[i] & 0xc0) == 0x80)
			i--;
		text[i] = '\0';
	}
	return text;
}

/*
 * Queue the event kind at instance (NULL: none) at time t for every
 * target whose events take it: "gpufleet: INSTANCE WHAT at WHEN. Next:
 * NEXT". dedupe names the event: queued once however often it is seen.
 * what and next are shown as given (escape what came from an instance).
 * Runs in the caller's transaction, else in its own.
 */
int
notifyqueue_add(struct inventory *inv, int kind, const char *instance,
    int64_t t, const char *what, const char *next, const char *dedupe,
    char **cause)
{
	const struct config *cf = inv->config;
	const struct config_notify *n;
	char *text;
	int64_t id, now = (int64_t)time(NULL);
	size_t i, want = 0;
	int r, own;

	for (i = 0; cf != NULL && i < cf->nnotifies; i++)
		want += (cf->notifies[i].events & (1u << kind)) != 0;
	if (want == 0)
		return 0;
	text = notify_text(instance, what, t, now, next);
	own = sqlite3_get_autocommit(inv->db);
	if (own && (r = inventory_begin(inv, cause)) != 0) {
		free(text);
		return r;
	}
	r = db_exec(inv,
	    "INSERT OR IGNORE INTO notify_msg (kind, instance, t, text, next, "
	    "dedupe, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
	    "queueing a notification", cause, "ttItttI", notify_kind_name(kind),
	    instance, t, text, next, dedupe, now);
	free(text);
	if (r < 0 || sqlite3_changes(inv->db) == 0)
		goto out;
	id = sqlite3_last_insert_rowid(inv->db);
	for (i = 0; i < cf->nnotifies && r >= 0; i++) {
		n = &cf->notifies[i];
		if ((n->events & (1u << kind)) == 0)
			continue;
		r = db_exec(inv,
		    "INSERT INTO notify_send (msg_id, target, state, next_at) "
		    "VALUES (?, ?, 'pending', ?)",
		    "queueing a notification", cause, "ItI", id, n->name, now);
	}
	if (r >= 0)
		debug_f("queued %s (%s) for %zu target(s)",
		    notify_kind_name(kind), dedupe, want);
out:
	if (own) {
		if (r < 0)
			inventory_rollback(inv);
		else
			r = inventory_commit(inv, cause);
	}
	return r < 0 ? r : 0;
}

/* Running local stop methods, once each. */

#include <sys/wait.h>

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "child.h"
#include "db.h"
#include "ledger.h"
#include "localstop.h"
#include "log.h"
#include "notify.h"
#include "status.h"
#include "stopmethod.h"
#include "stoprequest.h"
#include "xmalloc.h"

struct due {
	int64_t instance;
	char *deadline;
};

/* A local stop whose command runs (beside the daemon's loop, or now). */
struct pending {
	struct inventory *inv;
	const struct instance *in;
	struct instance own; /* in, when it is ours */
	char *deadline;	     /* NULL: --now */
	int64_t now;	     /* when it came due */
	int64_t started;
	int release;
	int due; /* a local_stop row: its status and a notification */
	int r;
	char *cause;
};

static int claim(struct inventory *, int64_t, const char *, int64_t);
static void notify(struct inventory *, const struct instance *, const char *,
    int64_t, const char *);
static void run_one(
    struct inventory *, const struct config *, const struct due *, int64_t);

/*
 * Run command with /bin/sh -c in its own process group, stdin /dev/null,
 * its output on our stderr, at most timeout seconds (then the group is
 * killed). Returns its exit status, or -1 with *cause.
 */
int
localstop_exec(const char *command, int timeout, char **cause)
{
	char *argv[] = { (char *)"/bin/sh", (char *)"-c", (char *)command,
		NULL };
	struct child_spec spec = { .argv = argv, .timeout = timeout };
	struct child_result res;

	if (child_run(&spec, &res, cause) != 0)
		return -1;
	if (res.killed == 0 && res.status != -1 && WIFEXITED(res.status))
		return WEXITSTATUS(res.status);
	*cause = child_why(&res, timeout);
	return -1;
}

/*
 * Book how p's command ended: the stop gpufleet requested (it exited 0)
 * goes to the books once evidence confirms it (stoprequest.c); for a due
 * row, its status and a notification. res NULL: it did not start.
 * Sets p->r and p->cause.
 */
static void
finish(struct pending *p, const struct child_result *res)
{
	char id[96], *why;

	if (res == NULL)
		p->r = -1; /* not started: p->cause says why */
	else if ((why = child_why(res, LOCALSTOP_TIMEOUT)) != NULL) {
		if (res->killed == 0 && res->status != -1 &&
		    WIFEXITED(res->status))
			xasprintf(&p->cause, "the local stop command exited %d",
			    WEXITSTATUS(res->status));
		else
			p->cause = why;
		if (p->cause != why)
			free(why);
		p->r = -1;
	} else {
		if (p->deadline != NULL)
			snprintf(id, sizeof id, "%s", p->deadline);
		else
			snprintf(
			    id, sizeof id, "local-%lld", (long long)p->now);
		if ((p->r = stoprequest_open(p->inv, p->in, id, "local",
			 p->release ? "release" : "stop", p->started, 1,
			 &p->cause)) == 0)
			p->r = stoprequest_result(p->inv, p->in->id, id, 1,
			    NULL, (int64_t)time(NULL), &p->cause);
	}
	if (!p->due)
		return;
	if (p->r == 0)
		warn_msg("%s: ran the local stop of deadline %s", p->in->name,
		    p->deadline);
	else
		error("%s: the local stop of deadline %s failed: %s",
		    p->in->name, p->deadline, p->cause);
	notify(p->inv, p->in, p->deadline, p->now, p->r == 0 ? NULL : p->cause);
	db_exec(p->inv,
	    "UPDATE local_stop SET status = ? WHERE instance_id = ? AND "
	    "deadline = ?",
	    "recording a local stop", NULL, "iIt", p->r == 0 ? 0 : 1, p->in->id,
	    p->deadline);
}

static void
pending_free(struct pending *p)
{
	if (p->in == &p->own)
		instance_clear(&p->own);
	free(p->deadline);
	free(p->cause);
	free(p);
}

/* A local stop beside the loop is over: book it. */
static void
on_done(const struct child_result *res, void *arg)
{
	struct pending *p = arg;

	finish(p, res);
	pending_free(p);
}

/*
 * Start p's command (cmd): beside the daemon's loop when there is one and
 * p is a due row (then 1: on_done books it), else run it to its end and
 * book it (0, p->r and p->cause say how). -1 with p->cause: not started.
 */
static int
launch(struct pending *p, const char *cmd)
{
	char *argv[] = { (char *)"/bin/sh", (char *)"-c", (char *)cmd, NULL };
	struct child_spec spec = { .argv = argv, .timeout = LOCALSTOP_TIMEOUT };
	struct child_result res;

	/* Requested when the command starts, not when it came due. */
	p->started = (int64_t)time(NULL);
	if (p->started < p->now)
		p->started = p->now;
	if (p->due && child_looping()) {
		if (child_start(&spec, on_done, p, NULL, &p->cause) != 0)
			return -1;
		return 1;
	}
	if (child_run(&spec, &res, &p->cause) != 0)
		return -1;
	finish(p, &res);
	return 0;
}

/*
 * Resolve in's local stop method into p and start it (launch). Returns
 * launch's, or -1 with p->cause (the method is not local).
 */
static int
prepare(struct pending *p, const struct config *cf)
{
	struct stopmethod_fields f;
	struct stopmethod m;
	char *cmd;
	int r;

	if (inventory_stop_get(p->inv, p->in->id, &f, &p->cause) != 0)
		return -1;
	stopmethod_resolve(p->in, &f, cf, &m);
	stopmethod_fields_clear(&f);
	if (m.where != STOP_LOCAL) {
		p->cause = xstrdup("its stop method is no longer local");
		stopmethod_clear(&m);
		return -1;
	}
	p->release = m.kind != NULL && strcmp(m.kind, "release") == 0;
	cmd = stopmethod_expand(m.command, p->in, &p->cause);
	stopmethod_clear(&m);
	if (cmd == NULL)
		return -1;
	r = launch(p, cmd);
	free(cmd);
	return r;
}

/*
 * Run an instance's local stop method now for deadline (NULL: --now) and
 * record the stop gpufleet requested (its command exited 0): the ledger
 * has it once evidence confirms it (stoprequest.c). Returns 0, or -1
 * with *cause (the method is not local, the command failed).
 */
int
localstop_run(struct inventory *inv, const struct config *cf,
    const struct instance *in, const char *deadline, int64_t now, char **cause)
{
	struct pending p;
	int r;

	memset(&p, 0, sizeof p);
	p.inv = inv;
	p.now = now;
	p.in = in;
	p.deadline = deadline != NULL ? xstrdup(deadline) : NULL;
	if ((r = prepare(&p, cf)) == 0)
		r = p.r;
	if (r != 0) {
		*cause = p.cause;
		p.cause = NULL;
		r = -1;
	}
	free(p.deadline);
	free(p.cause);
	return r;
}

/*
 * Claim a due local stop for this process; 1 if it is ours to run. One
 * runs at a time per instance, in any gpufleet: not while another of it
 * is claimed and not booked, unless that one's claim is older than its
 * command may run (its runner died: it never will be booked).
 */
static int
claim(
    struct inventory *inv, int64_t instance, const char *deadline, int64_t now)
{
	if (db_exec(inv,
		"UPDATE local_stop SET started_at = ? WHERE instance_id = ? "
		"AND deadline = ? AND started_at IS NULL AND NOT EXISTS ("
		"SELECT 1 FROM local_stop o WHERE o.instance_id = ? AND "
		"o.started_at IS NOT NULL AND o.status IS NULL AND "
		"o.started_at > ?)",
		"claiming a local stop", NULL, "IItII", now, instance, deadline,
		instance, now - LOCALSTOP_TIMEOUT - 2 * CHILD_GRACE_S) < 0)
		return 0;
	return sqlite3_changes(inv->db) == 1;
}

/*
 * Queue the notification of a local stop of deadline: stopped (keyed as
 * the watcher's stop of it is), or stop_failed with why.
 */
static void
notify(struct inventory *inv, const struct instance *in, const char *deadline,
    int64_t now, const char *why)
{
	char *what, *key, *next, *cause = NULL;

	if (why == NULL)
		xasprintf(&what,
		    "is being stopped (%s, local stop: the command exited 0)",
		    deadline);
	else
		xasprintf(
		    &what, "did not stop (%s, local stop): %s", deadline, why);
	xasprintf(&key, "%s:%lld:%s", why == NULL ? "stop" : "localstop",
	    (long long)in->id, deadline);
	xasprintf(&next, "gpufleet %s %s", why == NULL ? "events" : "status",
	    in->name);
	if (notifyqueue_add(inv,
		why == NULL ? NOTIFY_STOPPED : NOTIFY_STOP_FAILED, in->name,
		now, what, next, key, &cause) != 0) {
		error("%s", cause);
		free(cause);
	}
	free(what);
	free(key);
	free(next);
}

/*
 * Start one claimed local stop; it is booked when its command is over
 * (finish), or here when it cannot start.
 */
static void
run_one(struct inventory *inv, const struct config *cf, const struct due *d,
    int64_t now)
{
	struct pending *p;
	sqlite3_stmt *st;
	char *name = NULL;
	int r = -1;

	p = xcalloc(1, sizeof *p);
	p->inv = inv;
	p->now = now;
	p->due = 1;
	p->deadline = xstrdup(d->deadline);
	if (db_prepare(inv, &st, "SELECT name FROM instance WHERE id = ?", NULL,
		NULL, "I", d->instance) == 0) {
		if (sqlite3_step(st) == SQLITE_ROW)
			name = db_text(st, 0);
		sqlite3_finalize(st);
	}
	if (name != NULL && inventory_get(inv, name, &p->own, &p->cause) == 0) {
		p->in = &p->own;
		if ((r = prepare(p, cf)) == 1)
			p = NULL; /* on_done's */
		else if (r == -1)
			finish(p, NULL); /* books p->cause */
	} else
		db_exec(inv,
		    "UPDATE local_stop SET status = 1 WHERE instance_id = ? "
		    "AND "
		    "deadline = ?",
		    "recording a local stop", NULL, "It", d->instance,
		    d->deadline);
	free(name);
	if (p != NULL)
		pending_free(p);
}

/* Run every due local stop not yet claimed (after a probe stored). */
void
localstop_run_due(struct inventory *inv, const struct config *cf, int64_t now)
{
	struct due *due = NULL;
	sqlite3_stmt *st;
	size_t n = 0, i;

	if (db_prepare(inv, &st,
		"SELECT instance_id, deadline FROM local_stop WHERE "
		"started_at IS NULL ORDER BY t",
		NULL, NULL, "") != 0)
		return;
	while (sqlite3_step(st) == SQLITE_ROW) {
		due = xreallocarray(due, n + 1, sizeof *due);
		due[n].instance = sqlite3_column_int64(st, 0);
		due[n++].deadline = db_text(st, 1);
	}
	sqlite3_finalize(st);
	for (i = 0; i < n; i++) {
		if (claim(inv, due[i].instance, due[i].deadline, now))
			run_one(inv, cf, &due[i], now);
		free(due[i].deadline);
	}
	free(due);
}

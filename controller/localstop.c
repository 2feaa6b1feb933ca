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
	struct timespec ts = { 0, 100 * 1000 * 1000 };
	pid_t pid, w;
	int status, fd, waited = 0;

	if ((pid = fork()) == -1) {
		xasprintf(cause, "cannot fork: %s", strerror(errno));
		return -1;
	}
	if (pid == 0) {
		setpgid(0, 0);
		if ((fd = open("/dev/null", O_RDONLY)) != -1)
			dup2(fd, STDIN_FILENO);
		dup2(STDERR_FILENO, STDOUT_FILENO);
		execl("/bin/sh", "sh", "-c", command, (char *)NULL);
		_exit(127);
	}
	for (;;) {
		if ((w = waitpid(pid, &status, WNOHANG)) == pid)
			break;
		if (w == -1 && errno != EINTR) {
			xasprintf(cause, "waitpid: %s", strerror(errno));
			return -1;
		}
		if (waited++ >= timeout * 10) {
			kill(-pid, SIGKILL);
			waitpid(pid, &status, 0);
			xasprintf(
			    cause, "it ran past %ds and was killed", timeout);
			return -1;
		}
		nanosleep(&ts, NULL);
	}
	if (WIFSIGNALED(status)) {
		xasprintf(
		    cause, "it was killed by signal %d", WTERMSIG(status));
		return -1;
	}
	return WEXITSTATUS(status);
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
	struct stopmethod_fields f;
	struct stopmethod m;
	char *cmd, id[96];
	int64_t started;
	int r, st, release;

	if ((r = inventory_stop_get(inv, in->id, &f, cause)) != 0)
		return r;
	stopmethod_resolve(in, &f, cf, &m);
	stopmethod_fields_clear(&f);
	if (m.where != STOP_LOCAL) {
		xasprintf(cause, "its stop method is no longer local");
		stopmethod_clear(&m);
		return -1;
	}
	release = m.kind != NULL && strcmp(m.kind, "release") == 0;
	cmd = stopmethod_expand(m.command, in, cause);
	stopmethod_clear(&m);
	if (cmd == NULL)
		return -1;
	/* Requested when the command starts, not when it came due. */
	started = (int64_t)time(NULL);
	if (started < now)
		started = now;
	st = localstop_exec(cmd, LOCALSTOP_TIMEOUT, cause);
	free(cmd);
	if (st != 0) {
		if (st > 0)
			xasprintf(
			    cause, "the local stop command exited %d", st);
		return -1;
	}
	/* Requested: the books take it once evidence confirms it. */
	if (deadline != NULL)
		snprintf(id, sizeof id, "%s", deadline);
	else
		snprintf(id, sizeof id, "local-%lld", (long long)now);
	if ((r = stoprequest_open(inv, in, id, "local",
		 release ? "release" : "stop", started, 1, cause)) != 0 ||
	    (r = stoprequest_result(
		 inv, in->id, id, 1, NULL, (int64_t)time(NULL), cause)) != 0)
		return r;
	return 0;
}

/* Claim a due local stop for this process; 1 if it is ours to run. */
static int
claim(
    struct inventory *inv, int64_t instance, const char *deadline, int64_t now)
{
	if (db_exec(inv,
		"UPDATE local_stop SET started_at = ? WHERE instance_id = ? "
		"AND deadline = ? AND started_at IS NULL",
		"claiming a local stop", NULL, "IIt", now, instance,
		deadline) < 0)
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

/* Run one claimed local stop and record how it went. */
static void
run_one(struct inventory *inv, const struct config *cf, const struct due *d,
    int64_t now)
{
	struct instance in;
	sqlite3_stmt *st;
	char *cause = NULL, *name = NULL;
	int r = -1;

	if (db_prepare(inv, &st, "SELECT name FROM instance WHERE id = ?", NULL,
		NULL, "I", d->instance) == 0) {
		if (sqlite3_step(st) == SQLITE_ROW)
			name = db_text(st, 0);
		sqlite3_finalize(st);
	}
	if (name != NULL && inventory_get(inv, name, &in, &cause) == 0) {
		r = localstop_run(inv, cf, &in, d->deadline, now, &cause);
		if (r == 0)
			warn_msg("%s: ran the local stop of deadline %s",
			    in.name, d->deadline);
		else
			error("%s: the local stop of deadline %s failed: %s",
			    in.name, d->deadline, cause);
		notify(inv, &in, d->deadline, now, r == 0 ? NULL : cause);
		instance_clear(&in);
	}
	free(cause);
	free(name);
	db_exec(inv,
	    "UPDATE local_stop SET status = ? WHERE instance_id = ? AND "
	    "deadline = ?",
	    "recording a local stop", NULL, "iIt", r == 0 ? 0 : 1, d->instance,
	    d->deadline);
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

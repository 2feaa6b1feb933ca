/* Held stops: the pulls kept here, their pull and their release. */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "db.h"
#include "deploy.h"
#include "job.h"
#include "planwrite.h"
#include "stophold.h"
#include "watcher.h"
#include "xfer.h"
#include "xmalloc.h"

#define STOPHOLD_FANOUT	 4   /* as pull's default */
#define STOPHOLD_TIMEOUT 120 /* seconds without data, as pull's default */
#define STOPHOLD_RELEASE 60  /* seconds the release command may take */

static const char stophold_cols[] =
    "SELECT h.instance_id, i.name, h.deadline, h.pulls, h.must, h.held_at, "
    "h.state, h.detail FROM stop_hold h JOIN instance i ON i.id = "
    "h.instance_id ";

/*
 * Keep the pulls (a JSON array of {"remote","local"}, local absolute) of
 * deadline on instance; must: no release unless they came home.
 */
int
stophold_save(struct inventory *inv, int64_t instance, const char *deadline,
    json_t *pulls, int must, int64_t now, char **cause)
{
	char *text = json_dumps(pulls, JSON_COMPACT);
	int r;

	r = db_exec(inv,
	    "INSERT OR REPLACE INTO stop_hold (instance_id, deadline, pulls, "
	    "must, created_at) VALUES (?, ?, ?, ?, ?)",
	    "storing the pull of a held stop", cause, "IttiI", instance,
	    deadline, text, must, now);
	free(text);
	return r < 0 ? r : 0;
}

/* The watcher journaled "held" for deadline at t (the controller's clock). */
int
stophold_held(struct inventory *inv, int64_t instance, const char *deadline,
    int64_t t, char **cause)
{
	int r = db_exec(inv,
	    "UPDATE stop_hold SET held_at = ? WHERE instance_id = ? AND "
	    "deadline = ? AND held_at IS NULL",
	    "recording a held stop", cause, "IIt", t, instance, deadline);

	return r < 0 ? r : 0;
}

/*
 * The held stops of instance (0: every one) that are held and not
 * released, oldest first. Free with stophold_free.
 */
int
stophold_list(struct inventory *inv, int64_t instance, struct stophold **out,
    size_t *n, char **cause)
{
	struct stophold *h;
	sqlite3_stmt *st;
	char *sql, *pulls;
	int rc, r;

	*out = NULL;
	*n = 0;
	xasprintf(&sql,
	    "%sWHERE h.held_at IS NOT NULL AND h.state <> 'released' AND "
	    "(? = 0 OR h.instance_id = ?) ORDER BY h.held_at, i.name",
	    stophold_cols);
	r = db_prepare(inv, &st, sql, "reading the held stops", cause, "II",
	    instance, instance);
	free(sql);
	if (r != 0)
		return r;
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		*out = xreallocarray(*out, *n + 1, sizeof **out);
		h = &(*out)[(*n)++];
		memset(h, 0, sizeof *h);
		h->instance_id = sqlite3_column_int64(st, 0);
		h->name = db_text(st, 1);
		h->deadline = db_text(st, 2);
		pulls = db_text(st, 3);
		h->pulls = json_loads(pulls != NULL ? pulls : "[]", 0, NULL);
		if (!json_is_array(h->pulls)) {
			json_decref(h->pulls);
			h->pulls = json_array();
		}
		free(pulls);
		h->must = sqlite3_column_int(st, 4);
		h->held_at = sqlite3_column_int64(st, 5);
		snprintf(h->state, sizeof h->state, "%s",
		    (const char *)sqlite3_column_text(st, 6));
		h->detail = db_text(st, 7);
	}
	r = db_finish(inv, st, rc, "reading the held stops", cause);
	return r < 0 ? r : 0;
}

void
stophold_free(struct stophold *h, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++) {
		free(h[i].name);
		free(h[i].deadline);
		json_decref(h[i].pulls);
		free(h[i].detail);
	}
	free(h);
}

/*
 * Claim h's pull for this process: 1 when claimed (state pulling), 0 when
 * another has it or it is over. retry: a failed one may be claimed again
 * (the user's --pull-held), not only an armed one.
 */
int
stophold_claim(
    struct inventory *inv, const struct stophold *h, int retry, char **cause)
{
	int r = db_exec(inv,
	    "UPDATE stop_hold SET state = 'pulling' WHERE instance_id = ? "
	    "AND deadline = ? AND (state = 'armed' OR (? AND state = "
	    "'failed'))",
	    "claiming a held stop", cause, "Iti", h->instance_id, h->deadline,
	    retry);

	if (r < 0)
		return r;
	return sqlite3_changes(inv->db) == 1;
}

/*
 * The pull of instance's held stops was stopped before it finished (the
 * daemon stopping, a signal): what it had claimed is armed again, for
 * the next pull.
 */
int
stophold_unclaim(struct inventory *inv, int64_t instance, char **cause)
{
	int r = db_exec(inv,
	    "UPDATE stop_hold SET state = 'armed' WHERE instance_id = ? AND "
	    "state = 'pulling'",
	    "arming a held stop again", cause, "I", instance);

	return r < 0 ? r : 0;
}

/* h is over: state released or failed, and why. */
int
stophold_finish(struct inventory *inv, const struct stophold *h,
    const char *state, const char *detail, char **cause)
{
	int r = db_exec(inv,
	    "UPDATE stop_hold SET state = ?, detail = ? WHERE instance_id = ? "
	    "AND deadline = ?",
	    "recording a held stop", cause, "ttIt", state, detail,
	    h->instance_id, h->deadline);

	return r < 0 ? r : 0;
}

/*
 * Run h's pulls into LOCAL/NAME/ as `gpufleet pull` does: 0 when every one
 * came home (*bytes their size), else -1 with *error: the first failure
 * (caller frees).
 */
int
stophold_pull(struct fleet *fleet, const struct stophold *h, uint64_t *bytes,
    char **error)
{
	struct inventory *inv;
	struct instance *list = NULL;
	struct xfer_req req;
	struct xfer_result res;
	const char *remote;
	char *cause = NULL;
	size_t n = 0, k;
	json_t *p;
	int r;

	*bytes = 0;
	if (json_array_size(h->pulls) == 0) {
		*error = xstrdup("the stored pull is not valid");
		return -1;
	}
	if (!xfer_have_rsync()) {
		*error = xstrdup("rsync is not installed on this machine");
		return -1;
	}
	if (fleet_inventory(fleet, &inv, &cause) != 0 ||
	    inventory_select(inv, h->name, &list, &n, &cause) != 0 || n != 1) {
		xasprintf(error, "cannot select %s: %s", h->name,
		    cause != NULL ? cause : "not one instance");
		free(cause);
		instance_free_array(list, n);
		return -1;
	}
	r = 0;
	json_array_foreach(h->pulls, k, p)
	{
		remote = json_string_value(json_object_get(p, "remote"));
		memset(&req, 0, sizeof req);
		req.dir = XFER_PULL;
		req.paths = &remote;
		req.npaths = 1;
		req.dest = json_string_value(json_object_get(p, "local"));
		req.fanout = STOPHOLD_FANOUT;
		req.timeout = STOPHOLD_TIMEOUT;
		if (remote == NULL || req.dest == NULL) {
			*error = xstrdup("the stored pull is not valid");
			r = -1;
			break;
		}
		if (xfer_run(fleet, list, n, &req, &res, &cause) != 0) {
			xasprintf(error, "%s: %s", remote, cause);
			free(cause);
			r = -1;
			break;
		}
		if (res.n != 1 || !res.hosts[0].ok || res.interrupted) {
			xasprintf(error, "%s: %s", remote,
			    res.n == 1 && res.hosts[0].error != NULL
				? res.hosts[0].error
				: "interrupted");
			r = -1;
		} else
			*bytes += res.hosts[0].bytes;
		xfer_result_free(&res);
		if (r != 0)
			break;
	}
	instance_free_array(list, n);
	return r;
}

/*
 * Write D/release-DEADLINE on instance name (`gpufleet-agent release`,
 * by: pulled, pull_failed or user): its held stop goes on. 0, or -1 with
 * *cause (caller frees).
 */
int
stophold_release(struct fleet *fleet, const char *name, const char *deadline,
    const char *by, char **cause)
{
	struct planwrite *pw = NULL;
	struct job_answer *ans;
	char *args[2] = { NULL, NULL };
	int r;

	if ((r = planwrite_contact(fleet, name, &pw, cause)) != 0)
		return -1;
	if (pw->n != 1) {
		planwrite_free(pw);
		xasprintf(cause, "%s is not one instance", name);
		return -1;
	}
	ans = xcalloc(2, sizeof *ans);
	xasprintf(
	    &args[0], "release --dir \"$d\" --id '%s' --by %s", deadline, by);
	if (pw->hosts[0].error != NULL)
		*cause = xstrdup(pw->hosts[0].error);
	else if (job_pass(
		     pw, args, NULL, STOPHOLD_RELEASE, 0, NULL, NULL, ans) != 0)
		*cause = xstrdup("cannot start the event loop");
	else if (ans[0].error != NULL)
		*cause = xstrdup(ans[0].error);
	else if (!ans[0].ran || ans[0].status != 0)
		*cause = job_agent_error(&ans[0], pw->hosts[0].in);
	r = *cause != NULL ? -1 : 0;
	free(args[0]);
	job_answers_free(ans, 1);
	planwrite_free(pw);
	return r;
}

/* The held stops of instance as status and shutdown ls --json show them. */
json_t *
stophold_json(struct inventory *inv, int64_t instance)
{
	struct stophold *h = NULL;
	json_t *arr = json_array();
	char *cause = NULL;
	size_t n = 0, i;

	if (stophold_list(inv, instance, &h, &n, &cause) != 0)
		free(cause);
	for (i = 0; i < n; i++)
		json_array_append_new(arr,
		    json_pack("{s:s, s:I, s:s, s:b, s:o}", "id", h[i].deadline,
			"held_at", (json_int_t)h[i].held_at, "state",
			h[i].state, "must", h[i].must, "detail",
			h[i].detail != NULL ? json_string(h[i].detail)
					    : json_null()));
	stophold_free(h, n);
	return arr;
}

/*
 * One held stop of instance name (stophold_json's) as a line: "stop held for
 * pull since T (ID): what it waits for". Caller frees.
 */
char *
stophold_line(const char *name, json_t *h)
{
	const char *state = json_string_value(json_object_get(h, "state")),
		   *detail = json_string_value(json_object_get(h, "detail")),
		   *id = json_string_value(json_object_get(h, "id"));
	char *when = watcher_local_time(
		 json_integer_value(json_object_get(h, "held_at"))),
	     *line;

	if (state != NULL && strcmp(state, "failed") == 0)
		xasprintf(&line,
		    "stop held for pull since %s (%s): the pull failed: %s; "
		    "retry: gpufleet shutdown --pull-held %s; stop without "
		    "it: gpufleet shutdown --release %s",
		    when, id, detail != NULL ? detail : "?", name, name);
	else
		xasprintf(&line, "stop held for pull since %s (%s): %s%s%s",
		    when, id,
		    state != NULL && strcmp(state, "pulling") == 0
			? "pulling"
			: "waiting for the pull (gpufleet daemon, or "
			  "gpufleet shutdown --pull-held ",
		    state != NULL && strcmp(state, "pulling") == 0 ? "" : name,
		    state != NULL && strcmp(state, "pulling") == 0 ? "" : ")");
	free(when);
	return line;
}

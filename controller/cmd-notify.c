/*
 * gpufleet notify: the notification targets ([notify.NAME] in the config)
 * and their queue. `ls` shows the targets, `test` sends one message now,
 * `queue` shows what waits or failed, `flush` sends the queue once from
 * the CLI when no daemon runs (a running daemon sends it).
 */

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>

#include "cmd.h"
#include "dbfile.h"
#include "db.h"
#include "instance.h"
#include "log.h"
#include "notify.h"
#include "notifysend.h"
#include "status.h"
#include "vis.h"
#include "xmalloc.h"

static int cmd_notify_exec(
    const struct cmd_entry *, struct cmd_ctx *, int, char **);

const struct cmd_entry cmd_notify_entry = {
	.name = "notify",
	.usage = "ls [--json] | test [NAME] | queue [--json] [--all] | flush",
	.summary = "notification targets: list, test, and their queue",
	.help =
	    "Targets are [notify.NAME] sections of the config (see "
	    "config/gpufleet.ini.example\nand README, \"Notifications\"). "
	    "What happens (a job ends, a stop is done or\nfails, an autostop "
	    "fires, a schedule run fails, a guard fires, a host key\n"
	    "changes, a held session is down) is queued for every target "
	    "whose events\ntake it, by whichever gpufleet process learns it; "
	    "`gpufleet daemon` sends the\nqueue. Every attempt is recorded in "
	    "`gpufleet events` (notify_sent,\nnotify_failed). A message is "
	    "never sent twice: one whose sender died\nmid-send is shown "
	    "'unknown' (it may not have arrived).\nA target with "
	    "from_instances = yes is also sent by the instances'\nwatchers "
	    "(job and stop events): its messages wait as 'instance' until "
	    "the\nwatcher's word is read, then are sent (by the instance) or, "
	    "if it could not,\nsent from here; after 10 min without word, "
	    "from here.\n\n"
	    "  ls      the targets: NAME, FORMAT, EVENTS, URL (only "
	    "scheme://host: the\n          rest is a secret), PENDING, "
	    "FAILED\n"
	    "  test    send a test message now to NAME (default: every "
	    "target), once,\n          and print the answer; exit 1 when one "
	    "failed\n"
	    "  queue   the messages not sent yet, or that failed (--all: "
	    "sent ones too)\n"
	    "  flush   send the queue once now (when no daemon runs on this "
	    "database:\n          refused, exit 2, while one does); exit 1 "
	    "when a send failed\n\n"
	    "      --json   ls: [{name, format, events, url, min_interval, "
	    "timeout,\n               retries, from_instances, pending, "
	    "failed}]; queue:\n               [{id, target, kind, instance, "
	    "time, text, next, state,\n               attempts, next_at, "
	    "last_error}]\n      --all    queue: sent messages too\n\n"
	    "Examples:\n"
	    "  gpufleet notify ls\n"
	    "  gpufleet notify test phone\n"
	    "  gpufleet notify queue --json\n"
	    "  gpufleet notify flush\n",
	.exec = cmd_notify_exec,
};

enum { OPT_JSON = 256, OPT_ALL };

static const struct option notify_options[] = { { "json", no_argument, NULL,
						    OPT_JSON },
	{ "all", no_argument, NULL, OPT_ALL },
	{ "help", no_argument, NULL, 'h' }, { NULL, 0, NULL, 0 } };

/* Count target's rows in state. */
static int
count(struct inventory *inv, const char *target, const char *state)
{
	sqlite3_stmt *st;
	int n = 0;

	if (db_prepare(inv, &st,
		"SELECT count(*) FROM notify_send WHERE target = ? AND state = "
		"?",
		"reading the queue", NULL, "tt", target, state) != 0)
		return 0;
	if (sqlite3_step(st) == SQLITE_ROW)
		n = sqlite3_column_int(st, 0);
	sqlite3_finalize(st);
	return n;
}

/* The URL of n as shown. Caller frees. */
static char *
shown_url(const struct config_notify *n)
{
	char *url = NULL, *cause = NULL, *s;

	if (notify_target_url(n, &url, &cause) != 0) {
		xasprintf(&s, "(%s)", cause);
		free(cause);
		return s;
	}
	s = notify_redact(url);
	explicit_bzero(url, strlen(url));
	free(url);
	return s;
}

static int
notify_ls(struct cmd_ctx *ctx, int json)
{
	const struct config *cf = ctx->fleet->config;
	const struct config_notify *n;
	struct inventory *inv;
	struct table *t;
	json_t *a = json_array(), *o, *ev;
	char *url, *events, pend[16], fail[16];
	size_t i;
	int status, k;

	if ((status = cmd_open(ctx, &inv)) != 0) {
		json_decref(a);
		return status;
	}
	t = table_new(
	    6, "NAME", "FORMAT", "EVENTS", "URL", "PENDING", "FAILED");
	for (i = 0; i < cf->nnotifies; i++) {
		n = &cf->notifies[i];
		url = shown_url(n);
		events = notify_events_string(n->events);
		snprintf(
		    pend, sizeof pend, "%d", count(inv, n->name, "pending"));
		snprintf(fail, sizeof fail, "%d",
		    count(inv, n->name, "failed") +
			count(inv, n->name, "unknown"));
		ev = json_array();
		for (k = 0; k < NOTIFY_NKINDS; k++) {
			if (n->events & (1u << k))
				json_array_append_new(
				    ev, json_string(notify_kind_name(k)));
		}
		o = json_pack("{s:s, s:s, s:o, s:s, s:i, s:i, s:i, s:b, s:i, "
			      "s:i}",
		    "name", n->name, "format", notify_format_name(n->format),
		    "events", ev, "url", url, "min_interval", n->min_interval,
		    "timeout", n->timeout, "retries", n->retries,
		    "from_instances", n->from_instances, "pending",
		    count(inv, n->name, "pending"), "failed",
		    count(inv, n->name, "failed") +
			count(inv, n->name, "unknown"));
		json_array_append_new(a, o);
		table_add(t, n->name, notify_format_name(n->format), events,
		    url, pend, fail);
		free(url);
		free(events);
	}
	inventory_close(inv);
	if (json) {
		json_print(a, stdout); /* steals a */
		a = NULL;
	} else if (cf->nnotifies == 0)
		printf("no notification targets: add a [notify.NAME] section "
		       "to %s\n",
		    cf->path != NULL ? cf->path : "the config");
	else
		table_print(t, stdout);
	table_free(t);
	json_decref(a);
	return GF_OK;
}

static int
notify_queue_cmd(struct cmd_ctx *ctx, int json, int all)
{
	struct inventory *inv;
	struct table *t;
	sqlite3_stmt *st;
	json_t *a = json_array();
	char id[24], tries[16], *when, *text, *err;
	int status, rc, r;
	char *cause = NULL;

	if ((status = cmd_open(ctx, &inv)) != 0) {
		json_decref(a);
		return status;
	}
	if ((r = db_prepare(inv, &st,
		 "SELECT m.id, s.target, m.kind, m.instance, m.t, m.text, "
		 "m.next, s.state, s.attempts, s.next_at, s.last_error FROM "
		 "notify_send s JOIN notify_msg m ON m.id = s.msg_id WHERE ? "
		 "OR s.state <> 'sent' ORDER BY m.id, s.target",
		 "reading the queue", &cause, "i", all)) != 0) {
		inventory_close(inv);
		json_decref(a);
		return cmd_fail(-r, cause);
	}
	t = table_new(
	    7, "ID", "TARGET", "EVENT", "INSTANCE", "STATE", "TRIES", "ERROR");
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		const char *inst = (const char *)sqlite3_column_text(st, 3);
		const char *le = (const char *)sqlite3_column_text(st, 10);
		when = instance_format_time(sqlite3_column_int64(st, 4));
		text = vis_str((const char *)sqlite3_column_text(st, 5));
		err = le != NULL ? vis_str(le) : NULL;
		json_array_append_new(a,
		    json_pack("{s:I, s:s, s:s, s:s?, s:s, s:s, s:s?, s:s, s:i, "
			      "s:I, s:s?}",
			"id", (json_int_t)sqlite3_column_int64(st, 0), "target",
			(const char *)sqlite3_column_text(st, 1), "kind",
			(const char *)sqlite3_column_text(st, 2), "instance",
			inst, "time", when, "text",
			(const char *)sqlite3_column_text(st, 5), "next",
			(const char *)sqlite3_column_text(st, 6), "state",
			(const char *)sqlite3_column_text(st, 7), "attempts",
			sqlite3_column_int(st, 8), "next_at",
			(json_int_t)sqlite3_column_int64(st, 9), "last_error",
			le));
		snprintf(id, sizeof id, "%lld",
		    (long long)sqlite3_column_int64(st, 0));
		snprintf(tries, sizeof tries, "%d", sqlite3_column_int(st, 8));
		table_add(t, id, (const char *)sqlite3_column_text(st, 1),
		    (const char *)sqlite3_column_text(st, 2),
		    inst != NULL ? inst : "-",
		    (const char *)sqlite3_column_text(st, 7), tries,
		    err != NULL ? err : "-");
		free(when);
		free(text);
		free(err);
	}
	r = db_finish(inv, st, rc, "reading the queue", &cause);
	inventory_close(inv);
	if (r < 0) {
		table_free(t);
		json_decref(a);
		return cmd_fail(-r, cause);
	}
	if (json) {
		json_print(a, stdout); /* steals a */
		a = NULL;
	} else if (json_array_size(a) == 0)
		printf("the notification queue is empty%s\n",
		    all ? "" : " (--all: sent ones too)");
	else
		table_print(t, stdout);
	table_free(t);
	json_decref(a);
	return GF_OK;
}

static int
notify_test(struct cmd_ctx *ctx, const char *name)
{
	const struct config *cf = ctx->fleet->config;
	struct notifysend_result res;
	struct notify_msg m;
	struct event_base *base;
	struct inventory *inv;
	char host[256], *when, *cause = NULL;
	size_t i;
	int status, failed = 0;

	if (name != NULL && config_notify(cf, name) == NULL) {
		xasprintf(&cause, "no target '%s' (gpufleet notify ls)", name);
		return cmd_fail(GF_EUSAGE, cause);
	}
	if (cf->nnotifies == 0) {
		xasprintf(&cause, "no notification targets in %s",
		    cf->path != NULL ? cf->path : "the config");
		return cmd_fail(GF_EUSAGE, cause);
	}
	if ((status = cmd_open(ctx, &inv)) != 0)
		return status;
	if ((base = event_base_new()) == NULL) {
		inventory_close(inv);
		return cmd_fail(
		    GF_EHOSTS, xstrdup("cannot start an event loop"));
	}
	if (gethostname(host, sizeof host) != 0)
		snprintf(host, sizeof host, "?");
	host[sizeof host - 1] = '\0';
	memset(&m, 0, sizeof m);
	m.kind = xstrdup("test");
	m.t = (int64_t)time(NULL);
	when = notify_when(m.t, m.t);
	xasprintf(&m.text,
	    "gpufleet: test message from %s at %s. Next: gpufleet notify ls",
	    host, when);
	free(when);
	m.next = xstrdup("gpufleet notify ls");
	for (i = 0; i < cf->nnotifies; i++) {
		if (name != NULL && strcmp(cf->notifies[i].name, name) != 0)
			continue;
		if (notifysend_test(base, inv, &cf->notifies[i], &m, &res) == 0)
			printf("%s: sent (HTTP %ld)%s%s\n", res.target,
			    res.http, res.answer != NULL ? ": " : "",
			    res.answer != NULL ? res.answer : "");
		else {
			failed++;
			printf("%s: failed: %s%s%s\n", res.target,
			    res.why != NULL ? res.why : "?",
			    res.answer != NULL ? ": " : "",
			    res.answer != NULL ? res.answer : "");
		}
		notifysend_result_clear(&res);
	}
	notify_msg_clear(&m);
	event_base_free(base);
	inventory_close(inv);
	return failed ? GF_EHOSTS : GF_OK;
}

static void
on_flush_tick(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	notifysend_kick(arg);
}

static int
notify_flush(struct cmd_ctx *ctx)
{
	const struct config *cf = ctx->fleet->config;
	struct notifysend *ns;
	struct event_base *base;
	struct event *tick;
	struct inventory *inv;
	struct timeval tv = { 0, 200000 };
	char *cause = NULL;
	int64_t since = (int64_t)time(NULL);
	sqlite3_stmt *st;
	long pid;
	int status, r, after;

	if ((pid = dbfile_daemon_pid(ctx->fleet->db_path)) != 0) {
		xasprintf(&cause,
		    "a daemon (pid %ld) runs on %s and sends the queue; see "
		    "gpufleet notify queue",
		    pid, ctx->fleet->db_path);
		return cmd_fail(GF_EUSAGE, cause);
	}
	if ((status = cmd_open(ctx, &inv)) != 0)
		return status;
	if ((r = notifysend_recover(inv, &cause)) != 0) {
		inventory_close(inv);
		return cmd_fail(-r, cause);
	}
	if ((base = event_base_new()) == NULL) {
		inventory_close(inv);
		return cmd_fail(
		    GF_EHOSTS, xstrdup("cannot start an event loop"));
	}
	/* Rows tried from now on are this flush's: last_at >= since. */
	since = (int64_t)time(NULL);
	ns = notifysend_new(base, inv, cf, since);
	tick = event_new(base, -1, EV_PERSIST, on_flush_tick, ns);
	evtimer_add(tick, &tv);
	notifysend_kick(ns);
	while (notifysend_inflight(ns) > 0 || notifysend_eligible(ns) > 0)
		event_base_loop(base, EVLOOP_ONCE);
	event_free(tick);
	notifysend_free(ns);
	event_base_free(base);
	after = 0;
	if (db_prepare(inv, &st,
		"SELECT count(*) FROM notify_send WHERE last_at >= ? AND "
		"state <> 'sent'",
		"reading the queue", NULL, "I", since) == 0) {
		if (sqlite3_step(st) == SQLITE_ROW)
			after = sqlite3_column_int(st, 0);
		sqlite3_finalize(st);
	}
	inventory_close(inv);
	if (after > 0)
		printf("%d notification(s) not sent (gpufleet notify queue)\n",
		    after);
	return after > 0 ? GF_EHOSTS : GF_OK;
}

static int
cmd_notify_exec(
    const struct cmd_entry *e, struct cmd_ctx *ctx, int argc, char **argv)
{
	const char *verb;
	int ch, status, json = 0, all = 0, nargs;

	while ((ch = cmd_getopt(e, argc, argv, "h", notify_options, &status)) !=
	    -1) {
		if (ch == -2)
			return status;
		if (ch == OPT_JSON)
			json = 1;
		else if (ch == OPT_ALL)
			all = 1;
	}
	if (argc - optind < 1)
		return cmd_usage_error(e, "needs ls, test, queue or flush");
	verb = argv[optind];
	nargs = argc - optind - 1;
	if (json && strcmp(verb, "ls") != 0 && strcmp(verb, "queue") != 0)
		return cmd_usage_error(e, "--json goes with ls and queue");
	if (all && strcmp(verb, "queue") != 0)
		return cmd_usage_error(e, "--all goes with queue");
	if (strcmp(verb, "ls") == 0 && nargs == 0)
		return notify_ls(ctx, json);
	if (strcmp(verb, "queue") == 0 && nargs == 0)
		return notify_queue_cmd(ctx, json, all);
	if (strcmp(verb, "flush") == 0 && nargs == 0)
		return notify_flush(ctx);
	if (strcmp(verb, "test") == 0 && nargs <= 1)
		return notify_test(ctx, nargs == 1 ? argv[optind + 1] : NULL);
	if (strcmp(verb, "test") == 0)
		return cmd_usage_error(e, "test takes at most one NAME");
	if (strcmp(verb, "ls") == 0 || strcmp(verb, "queue") == 0 ||
	    strcmp(verb, "flush") == 0)
		return cmd_usage_error(e, "%s takes no argument", verb);
	return cmd_usage_error(
	    e, "unknown verb '%s' (ls, test, queue or flush)", verb);
}

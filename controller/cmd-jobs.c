/*
 * List the jobs `gpufleet run` started: `gpufleet jobs` contacts the
 * instances (in parallel, journals read as status does), asks each agent
 * for its jobs (job ls), stores them, and prints them; an instance that
 * cannot be reached shows its jobs as last seen, marked.
 */

#include <sys/ioctl.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cmd.h"
#include "job.h"
#include "log.h"
#include "planwrite.h"
#include "status.h"
#include "timeparse.h"
#include "vis.h"
#include "xmalloc.h"

#define RECENT_S   86400 /* ended jobs shown without --all */
#define LAST_PIPED 200	 /* LAST's width when stdout is no terminal */

static int cmd_jobs_exec(
    const struct cmd_entry *, struct cmd_ctx *, int, char **);
static int store_host(
    struct planwrite *, size_t, const struct job_answer *, int64_t, char **);
static int shown(const struct job_row *, int, int64_t);
static char *started_text(int64_t);
static char *cut_columns(const char *, size_t);
static json_t *row_json(
    const struct job_row *, const char *, int, int64_t, int64_t);
static void print_table(char ***, size_t);
static json_t *text_or_null(const char *);

const struct cmd_entry cmd_jobs_entry = {
	.name = "jobs",
	.usage = "[SELECTOR] [--all] [--json]",
	.summary = "list the jobs gpufleet run started, as they are now",
	.help =
	    "Contacts the selected instances (default all) at once, reads "
	    "their jobs\nand prints ID (the job's number: gpufleet logs "
	    "NAME:ID), NAME, INSTANCE,\nSTATE (running, succeeded, failed, "
	    "killed, lost), STARTED (local time),\nDURATION, EXIT (the exit "
	    "code, or the signal that ended it) and LAST (the\nlast line of "
	    "its output, escaped, cut to the terminal). A lost job (its\n"
	    "container restarted, or its supervisor vanished) is listed "
	    "after the table\nwith what was observed.\n\n"
	    "An instance that cannot be reached shows its jobs as last seen, "
	    "their STATE\nmarked with *, with one line on stderr: NAME: "
	    "unreachable (REASON); its\njobs as of TIME. The exit status is "
	    "1 then.\n\n"
	    "      --all    every job (default: running ones and those ended "
	    "in the\n               last 24 hours)\n"
	    "      --json   a JSON array: instance, job, name, command, state, "
	    "started,\n               ended, duration_s, exit, signal, reason, "
	    "last_line, then,\n               fire_id, pid, stale, as_of\n\n"
	    "Examples:\n"
	    "  gpufleet jobs\n"
	    "  gpufleet jobs @train --all\n",
	.exec = cmd_jobs_exec,
};

static const struct option jobs_options[] = { { "all", no_argument, NULL, 'a' },
	{ "json", no_argument, NULL, 'j' }, { "help", no_argument, NULL, 'h' },
	{ NULL, 0, NULL, 0 } };

/*
 * Store host i's job ls answer, sent at sent; jobs stored for it before
 * then that the instance no longer has (REMOTE_DIR/jobs emptied, the disk
 * replaced) become lost. Returns 0, or -1 with *why for the host.
 */
static int
store_host(struct planwrite *pw, size_t i, const struct job_answer *a,
    int64_t sent, char **why)
{
	struct planwrite_host *h = &pw->hosts[i];
	json_t *o = NULL;
	char *cause = NULL;

	if (a->error != NULL) {
		*why = xstrdup(a->error);
		return -1;
	}
	if (a->status != 0) {
		*why = job_agent_error(a, h->in);
		return -1;
	}
	if (a->out.data != NULL)
		o = json_loadb(
		    a->out.data, a->out.len, JSON_DISABLE_EOF_CHECK, NULL);
	if (!json_is_array(json_object_get(o, "jobs"))) {
		*why = xstrdup("job ls answered no list of jobs");
		json_decref(o);
		return -1;
	}
	if (job_store_ls(pw->rm->inv, h->in->id, pw->now, h->skew, sent, o,
		&cause) != 0) {
		*why = cause;
		json_decref(o);
		return -1;
	}
	json_decref(o);
	return 0;
}

/* Whether a row is listed: running, ended lately, or --all. */
static int
shown(const struct job_row *r, int all, int64_t now)
{
	return all || strcmp(r->end.state, "running") == 0 || r->ended == 0 ||
	    r->ended >= now - RECENT_S;
}

/* STARTED: "12-02 14:03" local. Caller frees. */
static char *
started_text(int64_t t)
{
	char buf[32];
	time_t tt = (time_t)t;
	struct tm tm;

	if (localtime_r(&tt, &tm) == NULL ||
	    strftime(buf, sizeof buf, "%m-%d %H:%M", &tm) == 0)
		return xstrdup("?");
	return xstrdup(buf);
}

/* Escaped text cut to at most cols characters (UTF-8 aware). Caller frees. */
static char *
cut_columns(const char *text, size_t cols)
{
	char *safe = vis_str(text != NULL ? text : "");
	size_t i = 0, n = 0;

	while (safe[i] != '\0') {
		if (((unsigned char)safe[i] & 0xc0) != 0x80) {
			if (n == cols)
				break;
			n++;
		}
		i++;
	}
	safe[i] = '\0';
	return safe;
}

/* A JSON string of stored text, or null (none, or not UTF-8). */
static json_t *
text_or_null(const char *s)
{
	json_t *v = s != NULL ? json_string(s) : NULL;

	return v != NULL ? v : json_null();
}

static json_t *
row_json(const struct job_row *r, const char *instance, int stale,
    int64_t as_of, int64_t now)
{
	char *st = instance_format_time(r->started),
	     *en = r->ended != 0 ? instance_format_time(r->ended) : NULL,
	     *asof = instance_format_time(as_of);
	json_t *o;

	o = json_pack("{s:s, s:I, s:s, s:s, s:s, s:s, s:o, s:I, s:o, s:o, "
		      "s:o, s:o, s:o, s:s, s:o, s:b, s:o}",
	    "instance", instance, "job", (json_int_t)r->job, "name", r->name,
	    "command", r->command != NULL ? r->command : "", "state",
	    r->end.state, "started", st, "ended",
	    en != NULL ? json_string(en) : json_null(), "duration_s",
	    (json_int_t)((r->ended != 0 ? r->ended : now) - r->started), "exit",
	    r->end.has_exit ? json_integer(r->end.exit) : json_null(), "signal",
	    r->end.signal[0] != '\0' ? json_string(r->end.signal) : json_null(),
	    "reason", r->reason != NULL ? json_string(r->reason) : json_null(),
	    "last_line", text_or_null(r->last_line), "then",
	    r->then != NULL ? json_string(r->then) : json_null(), "fire_id",
	    r->fire_id, "pid", r->pid > 0 ? json_integer(r->pid) : json_null(),
	    "stale", stale, "as_of",
	    as_of != 0 ? json_string(asof) : json_null());
	free(st);
	free(en);
	free(asof);
	return o;
}

/*
 * Print the rows (8 escaped cells each, LAST not yet cut) aligned, LAST
 * cut to what the terminal has left.
 */
static void
print_table(char ***rows, size_t n)
{
	static const char *const head[] = { "ID", "NAME", "INSTANCE", "STATE",
		"STARTED", "DURATION", "EXIT", "LAST" };
	struct winsize ws;
	size_t w[8], i, c, used = 0, avail;
	char *last;

	for (c = 0; c < 8; c++)
		w[c] = strlen(head[c]);
	for (i = 0; i < n; i++) {
		for (c = 0; c < 7; c++) {
			if (strlen(rows[i][c]) > w[c])
				w[c] = strlen(rows[i][c]);
		}
	}
	for (c = 0; c < 7; c++)
		used += w[c] + 2;
	avail = LAST_PIPED;
	if (isatty(STDOUT_FILENO) &&
	    ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0)
		avail = ws.ws_col > used + 10 ? ws.ws_col - used : 10;
	for (c = 0; c < 7; c++)
		printf("%-*s  ", (int)w[c], head[c]);
	printf("%s\n", head[7]);
	for (i = 0; i < n; i++) {
		for (c = 0; c < 7; c++)
			printf("%-*s  ", (int)w[c], rows[i][c]);
		last = cut_columns(rows[i][7], avail);
		printf("%s\n", last);
		free(last);
	}
}

static int
cmd_jobs_exec(
    const struct cmd_entry *e, struct cmd_ctx *ctx, int argc, char **argv)
{
	struct planwrite *pw = NULL;
	struct job_answer *ans = NULL;
	struct job_row *rows = NULL;
	char **args, *cause = NULL, *why, *when, *safe, ***cells = NULL;
	char **lost = NULL;
	size_t i, k, n, ncells = 0, nlost = 0, failed = 0;
	int ch, status, all = 0, json = 0, r, stale;
	int64_t as_of, sent;
	json_t *arr;

	while ((ch = cmd_getopt(e, argc, argv, "h", jobs_options, &status)) !=
	    -1) {
		if (ch == -2)
			return status;
		if (ch == 'a')
			all = 1;
		else
			json = 1;
	}
	if (argc - optind > 1)
		return cmd_usage_error(e, "takes at most one SELECTOR");
	if ((r = planwrite_contact(ctx->fleet,
		 argc - optind == 1 ? argv[optind] : "all", &pw, &cause)) != 0)
		return cmd_fail(-r, cause);
	args = xcalloc(pw->n + 1, sizeof *args);
	for (i = 0; i < pw->n; i++)
		args[i] = "job ls --dir \"$d\"";
	ans = xcalloc(pw->n + 1, sizeof *ans);
	sent = (int64_t)time(NULL);
	if ((r = job_pass(pw, args, NULL, pw->fleet->config->status_timeout, 1,
		 NULL, NULL, ans)) != 0) {
		free(args);
		job_answers_free(ans, pw->n);
		planwrite_free(pw);
		return cmd_fail(-r, xstrdup("cannot start the event loop"));
	}
	free(args);
	arr = json_array();
	for (i = 0; i < pw->n; i++) {
		struct planwrite_host *h = &pw->hosts[i];
		stale = 0;
		why = NULL;
		if (h->error != NULL || !h->reached)
			stale = 1;
		else if (store_host(pw, i, &ans[i], sent, &why) != 0)
			stale = 1;
		as_of = job_as_of(pw->rm->inv, h->in->id);
		if (stale) {
			const char *state = "error", *reason = h->error;
			failed++;
			if (!h->probe->have_report) {
				state = h->probe->state != NULL
				    ? h->probe->state
				    : "unreachable";
				reason = h->probe->error;
			} else if (why != NULL) {
				state = "jobs not read";
				reason = why;
			}
			when = watcher_local_time(as_of);
			safe = vis_str(reason != NULL ? reason : "no answer");
			if (as_of != 0)
				error("%s: %s (%s); its jobs as of %s",
				    h->in->name, state, safe, when);
			else
				error("%s: %s (%s); no jobs of it recorded",
				    h->in->name, state, safe);
			free(safe);
			free(when);
		}
		free(why);
		if (job_list(pw->rm->inv, h->in->id, &rows, &n, &cause) != 0) {
			error("%s", cause);
			free(cause);
			cause = NULL;
			failed++;
			continue;
		}
		for (k = 0; k < n; k++) {
			struct job_row *jr = &rows[k];
			char *c[8], *d;
			if (!shown(jr, all, pw->now))
				continue;
			if (json) {
				json_array_append_new(arr,
				    row_json(jr, h->in->name, stale, as_of,
					pw->now));
				continue;
			}
			xasprintf(&c[0], "%lld", (long long)jr->job);
			c[1] = vis_str(jr->name);
			c[2] = xstrdup(h->in->name);
			xasprintf(
			    &c[3], "%s%s", jr->end.state, stale ? "*" : "");
			c[4] = started_text(jr->started);
			d = timeparse_duration(
			    (jr->ended != 0 ? jr->ended : pw->now) -
			    jr->started);
			c[5] = d;
			c[6] = jobspec_exit_text(&jr->end);
			if (*c[6] == '\0') {
				free(c[6]);
				c[6] = xstrdup("-");
			}
			c[7] =
			    xstrdup(jr->last_line != NULL ? jr->last_line : "");
			cells = xreallocarray(cells, ncells + 1, sizeof *cells);
			cells[ncells] = xcalloc(8, sizeof **cells);
			memcpy(cells[ncells++], c, sizeof c);
			if (strcmp(jr->end.state, "lost") == 0) {
				lost = xreallocarray(
				    lost, nlost + 1, sizeof *lost);
				safe = vis_str(
				    jr->reason != NULL ? jr->reason : "?");
				xasprintf(&lost[nlost++], "%s:%lld lost: %s",
				    h->in->name, (long long)jr->job, safe);
				free(safe);
			}
		}
		job_rows_free(rows, n);
		rows = NULL;
	}
	if (json)
		json_print(arr, stdout);
	else {
		json_decref(arr);
		if (ncells > 0)
			print_table(cells, ncells);
		else
			printf("no jobs%s\n",
			    all ? "" : " running or ended in the last 24 h");
		for (i = 0; i < nlost; i++)
			printf("%s\n", lost[i]);
	}
	for (i = 0; i < ncells; i++) {
		for (k = 0; k < 8; k++)
			free(cells[i][k]);
		free(cells[i]);
	}
	free(cells);
	for (i = 0; i < nlost; i++)
		free(lost[i]);
	free(lost);
	job_answers_free(ans, pw->n);
	planwrite_free(pw);
	return failed > 0 ? GF_EHOSTS : GF_OK;
}

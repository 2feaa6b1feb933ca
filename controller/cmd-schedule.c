/*
 * Schedules: `gpufleet schedule add|ls|rm|pause|resume|run`. A shutdown
 * schedule is armed on the watcher of each instance its selector matches
 * (its next occurrences are deadlines in the plan, controller/SCHEDULE.md),
 * so it fires with the laptop closed; add, rm, pause and resume write those
 * plans at once. The other actions run in `gpufleet daemon`.
 */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <jansson.h>

#include "cmd.h"
#include "cron.h"
#include "db.h"
#include "log.h"
#include "misc.h"
#include "planwrite.h"
#include "schedrun.h"
#include "schedule.h"
#include "selector.h"
#include "status.h"
#include "vis.h"
#include "watcher.h"
#include "xfer.h"
#include "xmalloc.h"

#define NAME_MAX_LEN 64
#define NAME_CHARS                                                             \
	"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-"

static int cmd_schedule_exec(
    const struct cmd_entry *, struct cmd_ctx *, int, char **);
static int open_inv(struct cmd_ctx *, struct inventory **);
static int parse_add(const struct cmd_entry *, int, char **, struct schedule *,
    int *, int *, int *);
static int check_add(
    const struct cmd_entry *, struct schedule *, int, char **, int, int, int);
static int check_backup(const struct cmd_entry *, int, char **);
static char *words_json(int, char **);
static char *derive_name(struct inventory *, const struct schedule *);
static int schedule_add_cmd(struct cmd_ctx *, int, char **);
static void names_add(char **, const char *);
static char *contact_list(struct inventory *, const char *, const char *);
static int arm(struct cmd_ctx *, const char *, const char *, const char *);
static void arm_report(const struct planwrite_host *, const char *);
static char *zone_time(int64_t, const char *, int);
static json_t *last_run(struct inventory *, int64_t, char **);
static int schedule_ls(struct cmd_ctx *, int, char **);
static int schedule_change(struct cmd_ctx *, const char *, int, char **);
static int schedule_run(struct cmd_ctx *, int, char **);

const struct cmd_entry cmd_schedule_entry = {
	.name = "schedule",
	.usage =
	    "add SELECTOR --cron EXPR [--tz ZONE]\n"
	    "       --do shutdown|exec|rotate-keys|status|backup "
	    "[--name NAME]\n"
	    "       [--unless-busy] [--catchup DURATION] [--warn MINUTES] "
	    "[--before CMD]\n"
	    "       [--argv] [-- COMMAND... | -- REMOTE_PATH... LOCAL_DIR]\n"
	    "       gpufleet schedule ls [--json]\n"
	    "       gpufleet schedule rm|pause|resume NAME\n"
	    "       gpufleet schedule run NAME [--json]",
	.summary = "run shutdowns, key rotations, commands and backups on a "
		   "timetable",
	.help =
	    "A schedule runs an action at the times of a cron expression "
	    "(MINUTE HOUR DAY\n"
	    "MONTH WEEKDAY, or @hourly @daily @midnight @weekly @monthly "
	    "@yearly @annually)\n"
	    "in a time zone.\n"
	    "\n"
	    "--do shutdown is armed on the watcher of every instance the "
	    "selector\n"
	    "matches: its occurrences of the next 30 days (at most 48) are "
	    "deadlines in\n"
	    "the plan there, so they fire with the laptop closed. add, rm, "
	    "pause and\n"
	    "resume write those plans at once (one line per instance); "
	    "`gpufleet status`,\n"
	    "exec and the daemon top them up and evaluate the selector again "
	    "(an instance\n"
	    "tagged later is armed at its next contact; one whose tag is "
	    "removed is\n"
	    "disarmed). Deadlines set with `gpufleet shutdown` come first: a "
	    "plan holds\n"
	    "64 in all. An instance with no stop method or a release method is "
	    "not armed.\n"
	    "--do exec, rotate-keys, status and backup run in `gpufleet "
	    "daemon`; an "
	    "occurrence\n"
	    "missed while no daemon ran is run once when it comes back if it "
	    "is within\n"
	    "--catchup, else recorded as missed. Its COMMAND is read as exec "
	    "reads it: the\nwords joined into one line for the remote shell, "
	    "or "
	    "with --argv each word\nexactly. --do backup -- REMOTE_PATH... "
	    "LOCAL_DIR runs `gpufleet pull` with\nthose paths (LOCAL_DIR "
	    "absolute): files come home to LOCAL_DIR/NAME/, only\nwhat "
	    "changed since the last run.\n"
	    "\n"
	    "      --cron EXPR        when (quote it: '0 2 * * *')\n"
	    "      --tz ZONE          an IANA zone (Asia/Shanghai); default: "
	    "[schedule] tz\n"
	    "                         in the config, else the system's\n"
	    "      --do ACTION        shutdown, exec (needs -- COMMAND), "
	    "rotate-keys, status,\n"
	    "                         backup (needs -- REMOTE_PATH... "
	    "LOCAL_DIR)\n"
	    "      --argv             exec: each word of COMMAND exactly, as "
	    "exec --argv\n"
	    "      --name NAME        default: ACTION-SELECTOR made a name "
	    "(shutdown-train),\n"
	    "                         with -2, -3 ... when that is taken\n"
	    "      --catchup DURATION run a missed occurrence this late at "
	    "most (default 1h;\n"
	    "                         not for shutdown)\n"
	    "      --warn MINUTES     shutdown: warn logged-in users (default "
	    "5; 0: no)\n"
	    "      --before CMD       shutdown: run CMD on the instance first\n"
	    "      --unless-busy      shutdown: skip an instance whose GPUs "
	    "are busy or whose\n"
	    "                         progress file changed in the last 10 "
	    "minutes\n"
	    "\n"
	    "schedule ls shows each schedule's next run (in its zone and UTC) "
	    "and its last\n"
	    "run with the result per host. rm removes a schedule; pause and "
	    "resume hold it\n"
	    "(a resumed schedule does not catch up what fell while it was "
	    "paused). run\n"
	    "runs it now in the foreground, recorded like a scheduled run (a "
	    "shutdown\n"
	    "schedule: shutdown --now on the selected instances).\n"
	    "\n"
	    "Examples:\n"
	    "  gpufleet schedule add @train --cron '0 2 * * *' --tz "
	    "Asia/Shanghai \\\n"
	    "      --do shutdown --unless-busy --warn 10 --name nightly\n"
	    "  gpufleet schedule add all --cron '@monthly' --do rotate-keys\n"
	    "  gpufleet schedule add @train --cron '0 * * * *' --do exec -- "
	    "'df -h / | tail -1'\n"
	    "  gpufleet schedule add @train --cron '0 3 * * *' --do backup -- "
	    "'~/ckpt/' \\\n"
	    "      /srv/backups\n"
	    "  gpufleet schedule ls\n"
	    "  gpufleet schedule pause nightly\n",
	.exec = cmd_schedule_exec,
};

enum {
	OPT_CRON = 256,
	OPT_TZ,
	OPT_DO,
	OPT_NAME,
	OPT_BUSY,
	OPT_CATCHUP,
	OPT_WARN,
	OPT_BEFORE,
	OPT_JSON,
	OPT_ARGV
};

static const struct option add_options[] = { { "cron", required_argument, NULL,
						 OPT_CRON },
	{ "tz", required_argument, NULL, OPT_TZ },
	{ "do", required_argument, NULL, OPT_DO },
	{ "name", required_argument, NULL, OPT_NAME },
	{ "unless-busy", no_argument, NULL, OPT_BUSY },
	{ "catchup", required_argument, NULL, OPT_CATCHUP },
	{ "warn", required_argument, NULL, OPT_WARN },
	{ "before", required_argument, NULL, OPT_BEFORE },
	{ "argv", no_argument, NULL, OPT_ARGV },
	{ "help", no_argument, NULL, 'h' }, { NULL, 0, NULL, 0 } };

static const struct option ls_options[] = { { "json", no_argument, NULL,
						OPT_JSON },
	{ "help", no_argument, NULL, 'h' }, { NULL, 0, NULL, 0 } };

static const struct option plain_options[] = {
	{ "help", no_argument, NULL, 'h' }, { NULL, 0, NULL, 0 }
};

static int
cmd_schedule_exec(
    const struct cmd_entry *e, struct cmd_ctx *ctx, int argc, char **argv)
{
	static const char *const verbs[] = { "rm", "pause", "resume" };
	size_t i;

	if (argc >= 2 && strcmp(argv[1], "add") == 0)
		return schedule_add_cmd(ctx, argc - 1, argv + 1);
	if (argc >= 2 && strcmp(argv[1], "ls") == 0)
		return schedule_ls(ctx, argc - 1, argv + 1);
	if (argc >= 2 && strcmp(argv[1], "run") == 0)
		return schedule_run(ctx, argc - 1, argv + 1);
	for (i = 0; argc >= 2 && i < sizeof verbs / sizeof verbs[0]; i++) {
		if (strcmp(argv[1], verbs[i]) == 0)
			return schedule_change(
			    ctx, verbs[i], argc - 1, argv + 1);
	}
	if (argc >= 2 &&
	    (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0)) {
		cmd_help(stdout, e->name);
		return GF_OK;
	}
	return cmd_usage_error(e,
	    argc < 2 ? "needs add, ls, rm, pause, "
		       "resume or run"
		     : "unknown subcommand '%s'",
	    argc < 2 ? "" : argv[1]);
}

/* The fleet's inventory (opened once); returns 0 or the exit status. */
static int
open_inv(struct cmd_ctx *ctx, struct inventory **inv)
{
	char *cause = NULL;
	int r;

	if ((r = fleet_inventory(ctx->fleet, inv, &cause)) != 0)
		return cmd_fail(-r, cause);
	return 0;
}

/*
 * The options of `schedule add` (argv up to "--") into s; *catchup is set
 * when --catchup was given, *exact with --argv, *status is the exit on
 * error. Returns -1 on error, else 0.
 */
static int
parse_add(const struct cmd_entry *e, int argc, char **argv, struct schedule *s,
    int *catchup, int *exact, int *status)
{
	char *cause = NULL;
	const char *act = NULL;
	int ch, warn_set = 0;

	while (
	    (ch = cmd_getopt(e, argc, argv, "h", add_options, status)) != -1) {
		switch (ch) {
		case -2:
			return -1;
		case OPT_CRON:
			free(s->cron);
			s->cron = xstrdup(optarg);
			break;
		case OPT_TZ:
			if (cron_check_tz(optarg, &cause) != 0 ||
			    *optarg == '\0') {
				*status = cmd_usage_error(e, "--tz: %s",
				    cause != NULL ? cause : "empty zone");
				free(cause);
				return -1;
			}
			free(s->tz);
			s->tz = xstrdup(optarg);
			break;
		case OPT_DO:
			act = optarg;
			break;
		case OPT_NAME:
			free(s->name);
			s->name = xstrdup(optarg);
			break;
		case OPT_BUSY:
			s->unless_busy = 1;
			break;
		case OPT_CATCHUP:
			if ((*status = cmd_duration(e, "catchup", optarg, 1,
				 30LL * 86400, &s->catchup_s)) != 0)
				return -1;
			*catchup = 1;
			break;
		case OPT_WARN:
			if ((*status = cmd_warn_minutes(
				 e, optarg, &s->warn_minutes)) != 0)
				return -1;
			warn_set = 1;
			break;
		case OPT_BEFORE:
			if ((*status = cmd_before(e, optarg)) != 0)
				return -1;
			free(s->before_stop);
			s->before_stop = xstrdup(optarg);
			break;
		case OPT_ARGV:
			*exact = 1;
			break;
		}
	}
	if (act == NULL) {
		*status = cmd_usage_error(e,
		    "add needs --do shutdown, exec, rotate-keys, status or "
		    "backup");
		return -1;
	}
	if (schedule_action_parse(act, &s->action) != 0) {
		*status = cmd_usage_error(e,
		    "--do '%s' is not shutdown, exec, rotate-keys, status or "
		    "backup",
		    act);
		return -1;
	}
	if (s->action != SCHED_SHUTDOWN &&
	    (warn_set || s->before_stop != NULL || s->unless_busy)) {
		*status = cmd_usage_error(e,
		    "--warn, --before and --unless-busy are for --do shutdown "
		    "only");
		return -1;
	}
	return 0;
}

/*
 * The paths of --do backup: REMOTE_PATH... LOCAL_DIR as pull takes them,
 * LOCAL_DIR absolute (the daemon's working directory is not the user's).
 * Returns 0 or the exit status.
 */
/*
 * The words as a compact JSON array of strings (caller frees); NULL when
 * one is not UTF-8 (json_string refuses it: appending its NULL would drop
 * the word without a word).
 */
static char *
words_json(int n, char **words)
{
	json_t *a, *w;
	char *s = NULL;
	int i;

	a = json_array();
	for (i = 0; i < n; i++) {
		if ((w = json_string(words[i])) == NULL)
			break;
		json_array_append_new(a, w);
	}
	if (i == n)
		s = json_dumps(a, JSON_COMPACT);
	json_decref(a);
	return s;
}

static int
check_backup(const struct cmd_entry *e, int nargs, char **args)
{
	char *cause = NULL;
	int i, status;

	for (i = 0; i < nargs; i++) {
		if (xfer_check_path(args[i], &cause) != 0) {
			status = cmd_usage_error(e, "--do backup: %s", cause);
			free(cause);
			return status;
		}
	}
	if (*args[nargs - 1] != '/')
		return cmd_usage_error(e,
		    "--do backup: LOCAL_DIR '%s' must be an absolute path",
		    args[nargs - 1]);
	return 0;
}

/*
 * The checks of add after its options: one SELECTOR, the cron expression,
 * the command (for exec and backup only), the name. The command is stored
 * as exec will read it (SCHEDULE.md): a JSON string, the line for the
 * remote shell; with --argv (exact) a JSON array of the words. A backup's
 * is the JSON array of pull's paths. Returns 0 or the exit status.
 */
static int
check_add(const struct cmd_entry *e, struct schedule *s, int nargs, char **args,
    int dashdash, int catchup, int exact)
{
	struct selector *sel;
	struct cron cr;
	json_t *argv;
	char *cause = NULL, *line;
	int i;

	if (s->action == SCHED_SHUTDOWN && catchup)
		return cmd_usage_error(e,
		    "--catchup is not for --do shutdown (the watcher fires it "
		    "on time)");
	if (s->selector == NULL)
		return cmd_usage_error(e, "add needs one SELECTOR");
	if (selector_parse(s->selector, &sel, &cause) != 0) {
		i = cmd_usage_error(e, "%s", cause);
		free(cause);
		return i;
	}
	selector_free(sel);
	if (s->cron == NULL)
		return cmd_usage_error(e, "add needs --cron EXPR");
	if (cron_parse(s->cron, &cr, &cause) != 0) {
		i = cmd_usage_error(e, "--cron '%s': %s", s->cron, cause);
		free(cause);
		return i;
	}
	if (s->action == SCHED_EXEC && (!dashdash || nargs == 0))
		return cmd_usage_error(e, "--do exec needs -- COMMAND...");
	if (s->action == SCHED_BACKUP && (!dashdash || nargs < 2))
		return cmd_usage_error(
		    e, "--do backup needs -- REMOTE_PATH... LOCAL_DIR");
	if (s->action != SCHED_EXEC && s->action != SCHED_BACKUP && dashdash)
		return cmd_usage_error(e,
		    "-- and its words are for --do exec and backup only (--do "
		    "%s "
		    "takes none)",
		    schedule_action_name(s->action));
	if (s->action != SCHED_EXEC && exact)
		return cmd_usage_error(e, "--argv is for --do exec only");
	if (s->action == SCHED_BACKUP) {
		if ((i = check_backup(e, nargs, args)) != 0)
			return i;
		if ((s->command = words_json(nargs, args)) == NULL)
			return cmd_usage_error(e, "a path is not UTF-8");
	} else if (s->action == SCHED_EXEC && exact) {
		if ((s->command = words_json(nargs, args)) == NULL)
			return cmd_usage_error(e, "COMMAND is not UTF-8");
	} else if (s->action == SCHED_EXEC) {
		line = misc_join_argv(nargs, args);
		argv = json_string(line);
		free(line);
		s->command = argv != NULL
		    ? json_dumps(argv, JSON_COMPACT | JSON_ENCODE_ANY)
		    : NULL;
		json_decref(argv);
		if (s->command == NULL)
			return cmd_usage_error(e, "COMMAND is not UTF-8");
	}
	if (s->name != NULL &&
	    (*s->name == '\0' || strlen(s->name) > NAME_MAX_LEN ||
		strspn(s->name, NAME_CHARS) != strlen(s->name)))
		return cmd_usage_error(e,
		    "--name '%s' must be 1 to %d of [A-Za-z0-9._-]", s->name,
		    NAME_MAX_LEN);
	return 0;
}

/*
 * The default name: ACTION-SELECTOR with what is not a name character
 * dropped ('@train' -> shutdown-train), -2, -3 ... added while taken.
 * Caller frees.
 */
static char *
derive_name(struct inventory *inv, const struct schedule *s)
{
	struct schedule got;
	char base[48], *name, *cause = NULL;
	const char *p;
	size_t n;
	int k, r;

	n = (size_t)snprintf(
	    base, sizeof base, "%s-", schedule_action_name(s->action));
	for (p = s->selector; *p != '\0' && n < 40; p++) {
		if (strchr(NAME_CHARS, *p) != NULL)
			base[n++] = *p;
		else if (base[n - 1] != '-')
			base[n++] = '-';
	}
	while (base[n - 1] == '-')
		n--;
	base[n] = '\0';
	name = xstrdup(base);
	for (k = 2;; k++) {
		r = schedule_get(inv, name, &got, &cause);
		schedule_clear(&got);
		free(cause);
		cause = NULL;
		if (r != 0)
			return name;
		free(name);
		xasprintf(&name, "%s-%d", base, k);
	}
}

/* `schedule add`: validate everything, store, arm a shutdown schedule. */
static int
schedule_add_cmd(struct cmd_ctx *ctx, int argc, char **argv)
{
	const struct cmd_entry *e = &cmd_schedule_entry;
	struct inventory *inv;
	struct schedule s;
	char *cause = NULL, *next;
	int k, dashdash = 0, catchup = 0, exact = 0, status, r;
	int64_t t;

	for (k = 1; k < argc && dashdash == 0; k++) {
		if (strcmp(argv[k], "--") == 0)
			dashdash = k;
	}
	memset(&s, 0, sizeof s);
	s.catchup_s = 3600;
	s.warn_minutes = 5;
	if (parse_add(e, dashdash ? dashdash : argc, argv, &s, &catchup, &exact,
		&status) != 0)
		goto out;
	if (optind < (dashdash ? dashdash : argc))
		s.selector = xstrdup(argv[optind++]);
	if (optind < (dashdash ? dashdash : argc)) {
		status = cmd_usage_error(
		    e, "add takes one SELECTOR ('%s'?)", argv[optind]);
		goto out;
	}
	if ((status = check_add(e, &s, dashdash ? argc - dashdash - 1 : 0,
		 argv + dashdash + 1, dashdash, catchup, exact)) != 0)
		goto out;
	if ((status = open_inv(ctx, &inv)) != 0)
		goto out;
	if (s.name == NULL)
		s.name = derive_name(inv, &s);
	s.created_at = (int64_t)time(NULL);
	if (schedule_next(&s, ctx->fleet->config, s.created_at, &t, &cause) !=
	    0) {
		status = cmd_usage_error(e, "--cron '%s': %s", s.cron, cause);
		free(cause);
		goto out;
	}
	if ((r = schedule_add(inv, &s, &cause)) != 0) {
		status = cmd_fail(-r, cause);
		goto out;
	}
	next = zone_time(t, schedule_zone(&s, ctx->fleet->config), 0);
	printf("schedule %s added: next %s\n", s.name, next);
	free(next);
	status = s.action == SCHED_SHUTDOWN
	    ? arm(ctx, s.selector, s.tag, s.name)
	    : GF_OK;
out:
	schedule_clear(&s);
	return status;
}

/* Append name to the selector of names *list ("a,b"; NULL: empty). */
static void
names_add(char **list, const char *name)
{
	char *t;

	xasprintf(&t, "%s%s%s", *list != NULL ? *list : "",
	    *list != NULL ? "," : "", name);
	free(*list);
	*list = t;
}

/*
 * The instances to contact for the schedule with tag: those selector
 * matches now and those whose stored plan holds its deadlines, as a
 * selector of names (NULL: none). Caller frees.
 */
static char *
contact_list(struct inventory *inv, const char *selector, const char *tag)
{
	struct instance *list = NULL;
	sqlite3_stmt *st;
	char *out = NULL, *cause = NULL, like[32];
	size_t i, n = 0;
	int rc;

	if (selector != NULL &&
	    inventory_select(inv, selector, &list, &n, &cause) != 0) {
		free(cause);
		cause = NULL;
	}
	for (i = 0; i < n; i++)
		names_add(&out, list[i].name);
	instance_free_array(list, n);
	snprintf(like, sizeof like, "%%\"id\":\"s-%s-%%", tag);
	if (db_prepare(inv, &st,
		"SELECT i.name FROM watcher_state w JOIN instance i ON i.id = "
		"w.instance_id WHERE i.released_at IS NULL AND w.plan LIKE ?",
		"reading the plans", NULL, "t", like) != 0)
		return out;
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		const char *name = (const char *)sqlite3_column_text(st, 0);
		names_add(&out, name);
	}
	sqlite3_finalize(st);
	return out;
}

/* One instance's line after add, rm, pause or resume. */
static void
arm_report(const struct planwrite_host *h, const char *tag)
{
	const char *plan =
	    h->plan != NULL ? h->plan : h->probe->rep.watcher.plan;
	json_t *o = plan != NULL ? json_loads(plan, 0, NULL) : NULL, *d;
	char prefix[32], *when, *safe;
	int64_t first = 0;
	size_t i, count = 0;

	snprintf(prefix, sizeof prefix, "s-%s-", tag);
	json_array_foreach(json_object_get(o, "deadlines"), i, d)
	{
		const char *id = json_string_value(json_object_get(d, "id"));
		if (id == NULL || strncmp(id, prefix, strlen(prefix)) != 0)
			continue;
		if (count++ == 0)
			first = strtoll(id + strlen(prefix), NULL, 10);
	}
	json_decref(o);
	if (h->error != NULL) {
		safe = vis_str(h->error);
		error("%s: %s", h->in->name, safe);
		free(safe);
	} else if (count > 0) {
		when = watcher_local_time(first);
		printf("%s  armed: %zu occurrences, the first at %s%s\n",
		    h->in->name, count, when,
		    h->plan == NULL ? " (already)" : "");
		if (h->sync_cut > 0)
			printf(
			    "%s  %zu occurrences left out: the plan holds 64 "
			    "deadlines, those of gpufleet shutdown first\n",
			    h->in->name, h->sync_cut);
		free(when);
	} else if (h->sync_note != NULL && h->ntags > 0) {
		safe = vis_str(h->sync_note);
		printf("%s  not armed: %s\n", h->in->name, safe);
		free(safe);
	} else
		printf("%s  not armed%s\n", h->in->name,
		    h->plan != NULL ? " (disarmed)" : "");
}

#define ARM_TRIES 3 /* a plan another gpufleet wrote meanwhile: again */

/*
 * Write the plans of the instances a change of schedule tag touches (see
 * contact_list), one line each. A host whose plan moved between the read
 * and the write (the daemon's top-up wrote it) is contacted again: the
 * sync is the same whoever writes it. Returns the exit status.
 */
static int
arm(struct cmd_ctx *ctx, const char *selector, const char *tag,
    const char *name)
{
	struct planwrite *pw = NULL;
	struct inventory *inv;
	char *names, *again, *cause = NULL;
	size_t i, failed = 0;
	int r, try;

	if ((r = open_inv(ctx, &inv)) != 0)
		return r;
	if ((names = contact_list(inv, selector, tag)) == NULL) {
		printf("schedule %s: no instance to arm now (one the selector "
		       "matches later is armed at its next contact)\n",
		    name);
		return GF_OK;
	}
	for (try = 1; names != NULL; try++) {
		if ((r = planwrite_contact(ctx->fleet, names, &pw, &cause)) !=
			0 ||
		    (r = schedsync_run(pw, &cause)) != 0) {
			free(names);
			planwrite_free(pw);
			return cmd_fail(-r, cause);
		}
		again = NULL;
		for (i = 0; i < pw->n; i++) {
			struct planwrite_host *h = &pw->hosts[i];
			if (h->moved && try < ARM_TRIES) {
				names_add(&again, h->in->name);
				continue;
			}
			arm_report(h, tag);
			failed += h->error != NULL;
		}
		planwrite_free(pw);
		free(names);
		names = again;
	}
	return failed > 0 ? GF_EHOSTS : GF_OK;
}

/*
 * Time t in zone tz (NULL: the system's): ISO 8601 with the offset
 * (2026-12-02T02:00:00+08:00) when iso, else "2026-12-02 02:00 CST
 * (2026-12-01 18:00 UTC)", the UTC part left out at offset 0. Caller
 * frees.
 */
static char *
zone_time(int64_t t, const char *tz, int iso)
{
	struct cron_zone z;
	char buf[64], utc[32], *out, *cause = NULL;
	time_t tt = (time_t)t;
	struct tm tm, gm;
	long off;

	if (cron_zone_enter(tz, &z, &cause) != 0)
		free(cause); /* checked when added: the system's zone then */
	localtime_r(&tt, &tm);
	off = tm.tm_gmtoff;
	strftime(buf, sizeof buf,
	    iso ? "%Y-%m-%dT%H:%M:%S" : "%Y-%m-%d %H:%M %Z", &tm);
	cron_zone_leave(&z);
	gmtime_r(&tt, &gm);
	strftime(utc, sizeof utc, "%Y-%m-%d %H:%M UTC", &gm);
	if (iso)
		xasprintf(&out, "%s%c%02ld:%02ld", buf, off < 0 ? '-' : '+',
		    labs(off) / 3600, labs(off) % 3600 / 60);
	else if (off == 0)
		out = xstrdup(buf); /* UTC (or the same) already */
	else
		xasprintf(&out, "%s (%s)", buf, utc);
	return out;
}

/*
 * The last run of schedule id (schedule_run, newest first): {"when",
 * "occurrence", "manual", "state", "reason", "result"} or JSON null; *line
 * the same for the table (caller frees).
 */
static json_t *
last_run(struct inventory *inv, int64_t id, char **line)
{
	sqlite3_stmt *st;
	json_t *o = json_null(), *res = NULL, *v;
	const char *k;
	char *when, *t;

	*line = xstrdup("-");
	if (db_prepare(inv, &st,
		"SELECT coalesce(started_at, occurrence), occurrence, manual, "
		"state, reason, result FROM schedule_run WHERE schedule_id = ? "
		"ORDER BY coalesce(started_at, occurrence) DESC, id DESC LIMIT "
		"1",
		"reading the runs", NULL, "I", id) != 0)
		return o;
	if (sqlite3_step(st) == SQLITE_ROW) {
		when = instance_format_time(sqlite3_column_int64(st, 0));
		if (sqlite3_column_type(st, 5) == SQLITE_TEXT)
			res = json_loads(
			    (const char *)sqlite3_column_text(st, 5), 0, NULL);
		free(*line);
		xasprintf(line, "%s %s%s%s", when, sqlite3_column_text(st, 3),
		    sqlite3_column_type(st, 4) == SQLITE_TEXT ? ": " : "",
		    sqlite3_column_type(st, 4) == SQLITE_TEXT
			? (const char *)sqlite3_column_text(st, 4)
			: "");
		json_object_foreach(res, k, v)
		{
			xasprintf(&t, "%s %s=%s", *line, k,
			    json_is_string(v) ? json_string_value(v) : "?");
			free(*line);
			*line = t;
		}
		o = json_pack("{s:s, s:o, s:b, s:s, s:o, s:o}", "when", when,
		    "occurrence", json_integer(sqlite3_column_int64(st, 1)),
		    "manual", sqlite3_column_int(st, 2), "state",
		    (const char *)sqlite3_column_text(st, 3), "reason",
		    sqlite3_column_type(st, 4) == SQLITE_TEXT
			? json_string((const char *)sqlite3_column_text(st, 4))
			: json_null(),
		    "result", res != NULL ? res : json_null());
		free(when);
	}
	sqlite3_finalize(st);
	return o;
}

/* `schedule ls [--json]`. */
static int
schedule_ls(struct cmd_ctx *ctx, int argc, char **argv)
{
	const struct cmd_entry *e = &cmd_schedule_entry;
	const struct config *cf = ctx->fleet->config;
	struct inventory *inv;
	struct schedule *list;
	struct table *tbl;
	json_t *arr, *last, *cmd;
	char *cause = NULL, *next, *iso, *utc, *line, *safe;
	const char *tz;
	int ch, status, json = 0;
	int64_t now = (int64_t)time(NULL), t;
	size_t i, n;

	while (
	    (ch = cmd_getopt(e, argc, argv, "h", ls_options, &status)) != -1) {
		if (ch == -2)
			return status;
		json = 1;
	}
	if (optind != argc)
		return cmd_usage_error(e, "ls takes no SELECTOR");
	if ((status = open_inv(ctx, &inv)) != 0)
		return status;
	if ((status = schedule_list(inv, &list, &n, &cause)) != 0)
		return cmd_fail(-status, cause);
	arr = json_array();
	tbl = table_new(
	    7, "NAME", "SELECTOR", "CRON", "TZ", "ACTION", "NEXT", "LAST");
	for (i = 0; i < n; i++) {
		const struct schedule *s = &list[i];
		tz = schedule_zone(s, cf);
		next = iso = utc = NULL;
		if (!s->paused && schedule_next(s, cf, now, &t, &cause) == 0) {
			next = zone_time(t, tz, 0);
			iso = zone_time(t, tz, 1);
			utc = instance_format_time(t);
		}
		free(cause);
		cause = NULL;
		last = last_run(inv, s->id, &line);
		cmd = s->command != NULL
		    ? json_loads(s->command, JSON_DECODE_ANY, NULL)
		    : NULL;
		json_array_append_new(arr,
		    json_pack("{s:s, s:s, s:s, s:o, s:s, s:o, s:b, s:o, s:o, "
			      "s:o}",
			"name", s->name, "selector", s->selector, "cron",
			s->cron, "tz",
			tz != NULL ? json_string(tz) : json_null(), "action",
			schedule_action_name(s->action), "command",
			cmd != NULL ? cmd : json_null(), "paused", s->paused,
			"next_run",
			iso != NULL ? json_string(iso) : json_null(),
			"next_run_utc",
			utc != NULL ? json_string(utc) : json_null(), "last",
			last));
		safe = vis_str(line);
		table_add(tbl, s->name, s->selector, s->cron,
		    tz != NULL ? tz : "system", schedule_action_name(s->action),
		    s->paused	       ? "paused"
			: next != NULL ? next
				       : "-",
		    safe);
		free(safe);
		free(line);
		free(next);
		free(iso);
		free(utc);
	}
	if (json)
		json_print(arr, stdout); /* it takes arr */
	else {
		if (n == 0)
			printf("no schedules (gpufleet schedule add --help)\n");
		else
			table_print(tbl, stdout);
		json_decref(arr);
	}
	table_free(tbl);
	schedule_list_free(list, n);
	return GF_OK;
}

/* `schedule rm|pause|resume NAME`. */
static int
schedule_change(struct cmd_ctx *ctx, const char *verb, int argc, char **argv)
{
	const struct cmd_entry *e = &cmd_schedule_entry;
	struct inventory *inv;
	struct schedule s;
	char *cause = NULL;
	int ch, status, r;

	while ((ch = cmd_getopt(e, argc, argv, "h", plain_options, &status)) !=
	    -1) {
		if (ch == -2)
			return status;
	}
	if (argc - optind != 1)
		return cmd_usage_error(e, "%s needs one NAME", verb);
	if ((status = open_inv(ctx, &inv)) != 0)
		return status;
	if ((r = schedule_get(inv, argv[optind], &s, &cause)) != 0)
		return cmd_fail(-r, cause);
	if (strcmp(verb, "run") == 0) {
		schedule_clear(&s);
		return cmd_fail(
		    GF_EUSAGE, xstrdup("schedule run: not built yet"));
	}
	if (strcmp(verb, "rm") == 0)
		r = schedule_remove(inv, s.name, &cause);
	else
		r = schedule_set_paused(inv, s.name, strcmp(verb, "pause") == 0,
		    (int64_t)time(NULL), &cause);
	if (r != 0) {
		schedule_clear(&s);
		return cmd_fail(-r, cause);
	}
	printf("schedule %s %s\n", s.name,
	    strcmp(verb, "rm") == 0	     ? "removed"
		: strcmp(verb, "pause") == 0 ? "paused"
					     : "resumed");
	status = s.action == SCHED_SHUTDOWN
	    ? arm(ctx, s.selector, s.tag, s.name)
	    : GF_OK;
	schedule_clear(&s);
	return status;
}

/*
 * `schedule run NAME [--json]`: run it now, in the foreground, recorded
 * like a scheduled run (schedrun.c).
 */
static int
schedule_run(struct cmd_ctx *ctx, int argc, char **argv)
{
	const struct cmd_entry *e = &cmd_schedule_entry;
	struct inventory *inv;
	struct schedule s;
	char *cause = NULL;
	int ch, status, json = 0, r;

	while (
	    (ch = cmd_getopt(e, argc, argv, "h", ls_options, &status)) != -1) {
		if (ch == -2)
			return status;
		json = 1;
	}
	if (argc - optind != 1)
		return cmd_usage_error(e, "run needs one NAME");
	if ((status = open_inv(ctx, &inv)) != 0)
		return status;
	if ((r = schedule_get(inv, argv[optind], &s, &cause)) != 0)
		return cmd_fail(-r, cause);
	if ((r = schedrun_now(ctx->fleet, &s, json, &status, &cause)) != 0)
		status = cmd_fail(-r, cause);
	schedule_clear(&s);
	return status;
}

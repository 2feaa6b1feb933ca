/*
 * Start a command on instances as a job that outlives the SSH session,
 * the controller and the laptop (agent/JOBS.md): `gpufleet run` deploys
 * the agent as status does, writes the plan where --then needs the
 * instance's stop method in it, and hands the spec to `gpufleet-agent job
 * start`, which returns once the job runs. A job is recorded only after
 * the agent said it started; the agent removes a job that did not.
 */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "armed.h"
#include "cmd.h"
#include "job.h"
#include "jobspec.h"
#include "log.h"
#include "misc.h"
#include "planwrite.h"
#include "status.h"
#include "vis.h"
#include "xmalloc.h"

/* What run was asked. */
struct run {
	struct jobspec spec;
	const char **env;
	int json;
	int64_t warn_s;
};

/* One host's outcome. */
struct run_host {
	int local; /* --then with a local stop method */
	char *error;
	int64_t job, pid, started;
	char fire_id[80];
	char watcher[16];
	char *log;
};

static int cmd_run_exec(
    const struct cmd_entry *, struct cmd_ctx *, int, char **);
static int parse_run(
    const struct cmd_entry *, int, char **, struct run *, int *);
static int check_then(struct planwrite_host *, const struct run *, int *);
static int plan_has_stop(const struct planwrite_host *);
static void read_started(struct planwrite *, size_t, const struct job_answer *,
    const struct run *, struct run_host *);
static size_t report(struct planwrite *, const struct run *, struct run_host *);

const struct cmd_entry cmd_run_entry = {
	.name = "run",
	.usage =
	    "SELECTOR [--name NAME] [--cwd DIR] [--env K=V]...\n"
	    "       [--then stop|stop-if-ok] [--warn DURATION] "
	    "[--before CMD]\n"
	    "       [--log-max SIZE] [--argv] [--json] -- COMMAND [ARG...]",
	.summary = "start a job that outlives the SSH session",
	.help =
	    "Starts COMMAND on each selected instance as a job: in its own "
	    "session and\nprocess group, stdin /dev/null, stdout and stderr "
	    "to REMOTE_DIR/jobs/N/log,\nwith the login environment an exec "
	    "would see. run returns once the job\nruns; it goes on without "
	    "the SSH session, gpufleet or this machine. As with exec,\nthe "
	    "words after -- are joined with single spaces into one line, which "
	    "/bin/sh\non the instance reads ('a && b' works); with --argv each "
	    "ARG reaches the\ncommand exactly as given. Prints NAME: job N "
	    "started (pid P); logs:\ngpufleet logs NAME:N.\n\n"
	    "      --name NAME     the job's name (letters, digits, . _ -; "
	    "default: the\n"
	    "                      command's first word)\n"
	    "      --cwd DIR       where it runs (default ~; ~/ is $HOME; must "
	    "exist)\n"
	    "      --env K=V       set a variable for it (repeatable); values "
	    "stay in\n"
	    "                      REMOTE_DIR/jobs/N/spec.json (mode 0600), "
	    "never printed\n"
	    "      --then stop     when the job ends, however it ends, the "
	    "watcher stops the\n"
	    "                      instance with its stop method (as shutdown "
	    "does)\n"
	    "      --then stop-if-ok  only when it exits 0; otherwise the "
	    "instance stays up\n"
	    "                      and events says why\n"
	    "      --warn DURATION with --then: warn logged-in users and stop "
	    "this long\n"
	    "                      after the end (whole minutes; default 0)\n"
	    "      --before CMD    with --then: run CMD on the instance before "
	    "the stop\n"
	    "      --log-max SIZE  rotate the log above SIZE (default 64M; 1M "
	    "to 16G): it\n"
	    "                      is moved to log.1, so at most twice SIZE is "
	    "kept\n"
	    "      --argv          each ARG one word, exactly (no shell "
	    "syntax)\n"
	    "      --json          print a JSON array: name, job, pid, "
	    "started, "
	    "fire_id,\n"
	    "                      log, watcher, local_stop, error\n\n"
	    "With --then the instance needs a stop method (gpufleet show "
	    "NAME); "
	    "run writes\nit into the watcher's plan where it is not there yet. "
	    "A local: method runs\non this machine once a gpufleet command "
	    "(status, the daemon) reads the\njob's end. A release method is "
	    "refused. Exit 1 if any instance failed\n(one line each on "
	    "stderr): nothing is started there.\n\n"
	    "Examples:\n"
	    "  gpufleet run a100-1 --then stop -- python train.py --epochs 10\n"
	    "  gpufleet run @train --name sweep --cwd ~/work --env "
	    "WANDB_MODE=offline \\\n"
	    "      -- 'python prep.py && python train.py'\n"
	    "  gpufleet jobs; gpufleet logs a100-1 -f\n",
	.exec = cmd_run_exec,
};

enum {
	OPT_NAME = 256,
	OPT_CWD,
	OPT_ENV,
	OPT_THEN,
	OPT_WARN,
	OPT_BEFORE,
	OPT_LOG_MAX,
	OPT_JSON,
	OPT_ARGV
};

static const struct option run_options[] = { { "name", required_argument, NULL,
						 OPT_NAME },
	{ "cwd", required_argument, NULL, OPT_CWD },
	{ "env", required_argument, NULL, OPT_ENV },
	{ "then", required_argument, NULL, OPT_THEN },
	{ "warn", required_argument, NULL, OPT_WARN },
	{ "before", required_argument, NULL, OPT_BEFORE },
	{ "log-max", required_argument, NULL, OPT_LOG_MAX },
	{ "json", no_argument, NULL, OPT_JSON },
	{ "argv", no_argument, NULL, OPT_ARGV },
	{ "help", no_argument, NULL, 'h' }, { NULL, 0, NULL, 0 } };

/* Parse run's options; *status is the exit on error. */
static int
parse_run(const struct cmd_entry *e, int argc, char **argv, struct run *r,
    int *status)
{
	char *cause = NULL, *word;
	const char *line;
	int ch, dd = 0, k, warn = 0, exact = 0;
	static char name[JOBSPEC_NAME_MAX + 1];

	for (k = 1; k < argc && dd == 0; k++) {
		if (strcmp(argv[k], "--") == 0)
			dd = k;
	}
	while ((ch = cmd_getopt(e, dd != 0 ? dd : argc, argv, "h", run_options,
		    status)) != -1) {
		switch (ch) {
		case -2:
			return -1;
		case OPT_NAME:
			if (jobspec_check_name(optarg, &cause) != 0)
				goto usage;
			r->spec.name = optarg;
			break;
		case OPT_CWD:
			if (*optarg == '\0' || strlen(optarg) > 4096 ||
			    !jobspec_utf8(optarg)) {
				*status = cmd_usage_error(e,
				    "--cwd must be a path of 1 to 4096 bytes "
				    "of UTF-8");
				return -1;
			}
			r->spec.cwd = optarg;
			break;
		case OPT_ENV:
			if (jobspec_check_env(optarg, &cause) != 0)
				goto usage;
			if (r->spec.nenv == JOBSPEC_ENV_MAX) {
				*status = cmd_usage_error(e,
				    "at most %d --env variables",
				    JOBSPEC_ENV_MAX);
				return -1;
			}
			r->env = xreallocarray(
			    r->env, r->spec.nenv + 1, sizeof *r->env);
			r->env[r->spec.nenv++] = optarg;
			break;
		case OPT_THEN:
			if (strcmp(optarg, "stop") != 0 &&
			    strcmp(optarg, "stop-if-ok") != 0) {
				*status = cmd_usage_error(e,
				    "--then '%s': stop or stop-if-ok", optarg);
				return -1;
			}
			r->spec.then.on = 1;
			r->spec.then.if_ok = strcmp(optarg, "stop-if-ok") == 0;
			break;
		case OPT_WARN:
			if ((*status = cmd_duration(e, "warn", optarg, 0,
				 1440 * 60, &r->warn_s)) != 0)
				return -1;
			warn = 1;
			break;
		case OPT_BEFORE:
			if ((*status = cmd_before(e, optarg)) != 0)
				return -1;
			if (!jobspec_utf8(optarg)) {
				*status =
				    cmd_usage_error(e, "--before is not UTF-8");
				return -1;
			}
			r->spec.then.before = optarg;
			break;
		case OPT_LOG_MAX:
			if (jobspec_parse_size(
				optarg, &r->spec.log_max_bytes, &cause) != 0) {
				*status =
				    cmd_usage_error(e, "--log-max: %s", cause);
				free(cause);
				return -1;
			}
			break;
		case OPT_JSON:
			r->json = 1;
			break;
		case OPT_ARGV:
			exact = 1;
			break;
		}
	}
	if (dd == 0 || dd + 1 >= argc) {
		*status =
		    cmd_usage_error(e, "needs -- COMMAND after the SELECTOR");
		return -1;
	}
	if (dd - optind != 1) {
		*status = cmd_usage_error(e, "needs exactly one SELECTOR");
		return -1;
	}
	if (!r->spec.then.on && (warn || r->spec.then.before != NULL)) {
		*status = cmd_usage_error(e, "--warn and --before need --then");
		return -1;
	}
	r->spec.then.warn_minutes = (int)((r->warn_s + 59) / 60);
	/* As exec: one line for the shell, or --argv's exact words. */
	if (exact)
		r->spec.command = jobspec_join(argc - dd - 1, argv + dd + 1);
	else
		r->spec.command = misc_join_argv(argc - dd - 1, argv + dd + 1);
	if (strlen(r->spec.command) > JOBSPEC_COMMAND_MAX) {
		*status = cmd_usage_error(e,
		    "the command is longer than %d bytes", JOBSPEC_COMMAND_MAX);
		return -1;
	}
	/* The spec is JSON, which holds UTF-8 only. */
	if (!jobspec_utf8(r->spec.command)) {
		*status = cmd_usage_error(e, "the command is not UTF-8");
		return -1;
	}
	if (r->spec.name == NULL) {
		/* The first word of the line: 'python train.py' is python. */
		line = r->spec.command + strspn(r->spec.command, " \t\n");
		word = exact ? xstrdup(argv[dd + 1])
			     : xstrndup(line, strcspn(line, " \t\n;&|<>()"));
		jobspec_default_name(word, name);
		free(word);
		r->spec.name = name;
	}
	return 0;
usage:
	*status = cmd_usage_error(e, "%s", cause);
	free(cause);
	return -1;
}

/*
 * Whether host h can stop itself after the job (--then): it has a stop
 * method, not a release one, that could be substituted. *local: it runs
 * on this machine. Fails h otherwise.
 */
static int
check_then(struct planwrite_host *h, const struct run *r, int *local)
{
	*local = 0;
	if (!r->spec.then.on)
		return 0;
	if (h->method_error != NULL) {
		planwrite_fail(h, "%s", h->method_error);
		return -1;
	}
	if (h->method.where == STOP_NONE) {
		planwrite_fail(h,
		    "--then: no stop method (%s); set one: gpufleet set %s "
		    "stop_command='remote:/usr/bin/shutdown'",
		    strcmp(h->method.from, "instance") == 0
			? "stop_command is none"
			: h->method.from + strlen("none: "),
		    h->in->name);
		return -1;
	}
	if (strcmp(h->method.kind, "release") == 0) {
		planwrite_fail(h,
		    "--then: its stop method %s:%s releases the instance and "
		    "deletes its data; a job never does that (use shutdown "
		    "--yes, or a stop method that keeps the disk)",
		    h->method.where == STOP_REMOTE ? "remote" : "local",
		    h->method.command);
		return -1;
	}
	*local = h->method.where == STOP_LOCAL;
	return 0;
}

/* Whether the plan read back from h carries its current stop method. */
static int
plan_has_stop(const struct planwrite_host *h)
{
	const char *text = h->probe->rep.watcher.plan;
	json_t *plan = text != NULL ? json_loads(text, 0, NULL) : NULL,
	       *stop = json_object_get(plan, "stop");
	const char *cmd = json_string_value(json_object_get(stop, "command")),
		   *kind = json_string_value(json_object_get(stop, "kind"));
	int same;

	same = h->stop_command != NULL && cmd != NULL && kind != NULL &&
	    strcmp(cmd, h->stop_command) == 0 &&
	    strcmp(kind, h->method.kind) == 0 &&
	    json_is_true(json_object_get(stop, "allow_release")) ==
		(h->method.allow_release != 0);
	json_decref(plan);
	return same;
}

/* Read job start's answer for host i into rh, and record the job. */
static void
read_started(struct planwrite *pw, size_t i, const struct job_answer *a,
    const struct run *r, struct run_host *rh)
{
	struct planwrite_host *h = &pw->hosts[i];
	json_t *o = NULL, *v;
	struct job_row row;
	const char *s;
	char *cause = NULL;
	int rc;

	if (a->error != NULL) {
		xasprintf(&rh->error, "%s", a->error);
		return;
	}
	if (a->status != 0) {
		rh->error = job_agent_error(a, h->in);
		return;
	}
	if (a->out.data != NULL)
		o = json_loadb(
		    a->out.data, a->out.len, JSON_DISABLE_EOF_CHECK, NULL);
	v = json_object_get(o, "job");
	s = json_string_value(json_object_get(o, "fire_id"));
	if (!json_is_integer(v) || json_integer_value(v) < 1 || s == NULL ||
	    strlen(s) >= sizeof rh->fire_id ||
	    !json_is_integer(json_object_get(o, "started"))) {
		/* It may run: job ls (gpufleet jobs) will find it. */
		rh->error = xstrdup("job start answered no job number; "
				    "gpufleet jobs shows what runs there");
		json_decref(o);
		return;
	}
	rh->job = json_integer_value(v);
	snprintf(rh->fire_id, sizeof rh->fire_id, "%s", s);
	rh->started = json_integer_value(json_object_get(o, "started"));
	v = json_object_get(o, "pid");
	rh->pid = json_is_integer(v) ? json_integer_value(v) : 0;
	s = json_string_value(json_object_get(o, "watcher"));
	snprintf(rh->watcher, sizeof rh->watcher, "%s",
	    s != NULL && strlen(s) < sizeof rh->watcher ? s : "unknown");
	s = json_string_value(json_object_get(o, "log"));
	rh->log = s != NULL ? xstrdup(s) : NULL;
	json_decref(o);

	misc_test_point("run:1");
	memset(&row, 0, sizeof row);
	row.job = rh->job;
	row.name = (char *)r->spec.name;
	row.command = (char *)r->spec.command;
	row.then = !r->spec.then.on ? NULL
	    : r->spec.then.if_ok    ? (char *)"stop-if-ok"
				    : (char *)"stop";
	row.fire_id = rh->fire_id;
	row.pid = rh->pid > 0 && rh->pid <= 4194304 ? rh->pid : 0;
	snprintf(row.end.state, sizeof row.end.state, "running");
	row.started = rh->started - h->skew;
	/* Its fire id may stop the instance (LEDGER.md). */
	if ((rc = job_record(pw->rm->inv, h->in->id, &row, (int64_t)time(NULL),
		 &cause)) != 0 ||
	    (row.then != NULL &&
		(rc = armed_job(pw->rm->inv, h->in->id, rh->fire_id,
		     row.started, rh->local,
		     h->method.kind != NULL &&
			 strcmp(h->method.kind, "release") == 0,
		     &cause)) != 0)) {
		warn_msg("%s: job %lld started but not recorded: %s",
		    h->in->name, (long long)rh->job, cause);
		free(cause);
	}
	misc_test_point("run:2");
}

/* Print each host's outcome; returns how many failed. */
static size_t
report(struct planwrite *pw, const struct run *r, struct run_host *rhs)
{
	json_t *arr = json_array();
	size_t i, failed = 0;
	char *safe, *when;

	for (i = 0; i < pw->n; i++) {
		struct planwrite_host *h = &pw->hosts[i];
		struct run_host *rh = &rhs[i];
		const char *err = h->error != NULL ? h->error : rh->error;
		failed += err != NULL;
		if (r->json) {
			when = rh->job > 0
			    ? instance_format_time(rh->started - h->skew)
			    : NULL;
			json_array_append_new(arr,
			    json_pack("{s:s, s:o, s:o, s:o, s:o, s:o, s:o, "
				      "s:b, s:o}",
				"name", h->in->name, "job",
				rh->job > 0 ? json_integer(rh->job)
					    : json_null(),
				"pid",
				rh->pid > 0 ? json_integer(rh->pid)
					    : json_null(),
				"started",
				when != NULL ? json_string(when) : json_null(),
				"fire_id",
				rh->job > 0 ? json_string(rh->fire_id)
					    : json_null(),
				"log",
				rh->log != NULL ? json_string(rh->log)
						: json_null(),
				"watcher",
				rh->job > 0 ? json_string(rh->watcher)
					    : json_null(),
				"local_stop", rh->local, "error",
				err != NULL ? json_string(err) : json_null()));
			free(when);
			continue;
		}
		if (err != NULL) {
			safe = vis_str(err);
			error("%s: %s", h->in->name, safe);
			free(safe);
			continue;
		}
		printf("%s: job %lld started (pid %lld); logs: gpufleet logs "
		       "%s:%lld\n",
		    h->in->name, (long long)rh->job, (long long)rh->pid,
		    h->in->name, (long long)rh->job);
		if (rh->local)
			printf("%s: its stop runs on this machine after the "
			       "job: a gpufleet command must contact %s then "
			       "(the daemon, or status)\n",
			    h->in->name, h->in->name);
	}
	if (r->json)
		json_print(arr, stdout);
	else
		json_decref(arr);
	return failed;
}

static int
cmd_run_exec(
    const struct cmd_entry *e, struct cmd_ctx *ctx, int argc, char **argv)
{
	struct planwrite *pw = NULL;
	struct run r;
	struct run_host *rhs = NULL;
	struct job_answer *ans = NULL;
	struct plan_change c;
	struct plan_result res;
	char *cause = NULL, **args = NULL, **specs = NULL;
	const char *selector;
	size_t i;
	int status, rc;

	memset(&r, 0, sizeof r);
	r.spec.log_max_bytes = JOBSPEC_LOG_DEFAULT;
	r.spec.then.before_timeout_s = 600;
	if (parse_run(e, argc, argv, &r, &status) != 0)
		goto out;
	r.spec.env = r.env;
	selector = argv[optind];
	if ((rc = planwrite_open(ctx->fleet, selector, &pw, &cause)) != 0) {
		status = cmd_fail(-rc, cause);
		goto out;
	}
	pw->keep_open = 1; /* the job start follows on the same sessions */
	rhs = xcalloc(pw->n + 1, sizeof *rhs);
	for (i = 0; i < pw->n; i++)
		check_then(&pw->hosts[i], &r, &rhs[i].local);
	if ((rc = planwrite_probe(pw, &cause)) != 0) {
		status = cmd_fail(-rc, cause);
		goto out;
	}
	/* --then stop: the plan must name the stop the watcher will run. */
	for (i = 0; i < pw->n; i++) {
		struct planwrite_host *h = &pw->hosts[i];
		if (!r.spec.then.on || rhs[i].local || !h->reached ||
		    h->error != NULL || plan_has_stop(h))
			continue;
		planwrite_change(pw, h, &c);
		c.kind = PLAN_SYNC;
		planwrite_build(pw, h, &c, &res);
	}
	if ((rc = planwrite_write(pw, &cause)) != 0) {
		status = cmd_fail(-rc, cause);
		goto out;
	}
	args = xcalloc(pw->n + 1, sizeof *args);
	specs = xcalloc(pw->n + 1, sizeof *specs);
	r.spec.created = (int64_t)time(NULL);
	for (i = 0; i < pw->n; i++) {
		r.spec.then.local = rhs[i].local;
		specs[i] = jobspec_json(&r.spec);
		args[i] = xstrdup("job start --dir \"$d\"");
	}
	ans = xcalloc(pw->n + 1, sizeof *ans);
	if ((rc = job_pass(pw, args, (const char *const *)specs,
		 pw->fleet->config->status_timeout + 15, 0, NULL, NULL, ans)) !=
	    0) {
		status = cmd_fail(-rc, xstrdup("cannot start the event loop"));
		goto out;
	}
	for (i = 0; i < pw->n; i++) {
		if (pw->hosts[i].reached && pw->hosts[i].error == NULL)
			read_started(pw, i, &ans[i], &r, &rhs[i]);
	}
	status = report(pw, &r, rhs) > 0 ? GF_EHOSTS : GF_OK;
out:
	for (i = 0; pw != NULL && i < pw->n; i++) {
		if (args != NULL)
			free(args[i]);
		if (specs != NULL)
			free(specs[i]);
		if (rhs != NULL) {
			free(rhs[i].error);
			free(rhs[i].log);
		}
	}
	if (pw != NULL)
		job_answers_free(ans, pw->n);
	free(args);
	free(specs);
	free(rhs);
	free(r.env);
	free((char *)r.spec.command);
	planwrite_free(pw);
	return status;
}

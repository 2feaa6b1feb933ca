/*
 * Print a job's output: `gpufleet logs INSTANCE[:JOB]` runs the agent's
 * job log over one SSH session and copies what it sends, escaped on a
 * terminal (the job's bytes are the instance's), as they are when piped;
 * -f follows it until the job ends and exits with the job's status.
 */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cmd.h"
#include "job.h"
#include "jobspec.h"
#include "log.h"
#include "planwrite.h"
#include "status.h"
#include "vis.h"
#include "xmalloc.h"

struct logs_out {
	int tty;
	struct vis_stream vs;
};

static int cmd_logs_exec(
    const struct cmd_entry *, struct cmd_ctx *, int, char **);
static void on_log(size_t, int, const char *, size_t, void *);
static void print_stderr(const char *, const char *, size_t, int);

const struct cmd_entry cmd_logs_entry = {
	.name = "logs",
	.usage = "INSTANCE[:JOB] [-f] [--tail N]",
	.summary = "print a job's output; -f follows it until the job ends",
	.help =
	    "Prints the output of job JOB on INSTANCE (without :JOB, its "
	    "newest job),\nstdout and stderr interleaved as the job wrote "
	    "them: the log and, with\n--tail, the rotated log.1 before it. "
	    "To a terminal, control characters\nother than newline, tab and "
	    "carriage return are shown escaped (\\e, \\x07);\npiped, the "
	    "bytes are copied as they are.\n\n"
	    "  -f, --follow    go on printing what the job writes, over the "
	    "same session,\n"
	    "                  until it ends; then exit with its status: its "
	    "exit code,\n"
	    "                  128 + the signal's number, 1 when lost (what "
	    "ended it is\n"
	    "                  said on stderr). Ctrl-C stops following "
	    "(exit 130); the\n"
	    "                  job goes on.\n"
	    "  -n, --tail N    only the last N lines first\n\n"
	    "Exit status without -f: 0, or 1 when the log cannot be read (no "
	    "such job,\nthe instance unreachable).\n\n"
	    "Examples:\n"
	    "  gpufleet logs a100-1:7\n"
	    "  gpufleet logs a100-1 -f --tail 20\n"
	    "  gpufleet logs a100-1:7 | grep loss\n",
	.exec = cmd_logs_exec,
};

static const struct option logs_options[] = { { "follow", no_argument, NULL,
						  'f' },
	{ "tail", required_argument, NULL, 'n' },
	{ "help", no_argument, NULL, 'h' }, { NULL, 0, NULL, 0 } };

/* The log's bytes as they come: escaped to a terminal, else raw. */
static void
on_log(size_t i, int is_stderr, const char *data, size_t len, void *arg)
{
	struct logs_out *lo = arg;
	size_t n;
	char *s;

	(void)i;
	if (is_stderr)
		return;
	if (!lo->tty) {
		fwrite(data, 1, len, stdout);
		fflush(stdout);
		return;
	}
	s = vis_stream(&lo->vs, data, len, 0, &n);
	fwrite(s, 1, n, stdout);
	fflush(stdout);
	free(s);
}

/* The agent's stderr lines, but the trailer (follow), escaped. */
static void
print_stderr(const char *name, const char *err, size_t len, int follow)
{
	size_t start = 0, end;
	char *safe;
	json_t *o;

	while (start < len) {
		end = start;
		while (end < len && err[end] != '\n')
			end++;
		o = follow ? json_loadb(err + start, end - start, 0, NULL)
			   : NULL;
		if (end > start &&
		    !(json_is_object(o) &&
			json_object_get(o, "state") != NULL)) {
			if (strncmp(err + start, "gpufleet-agent job: ", 20) ==
			    0)
				start += 20;
			safe = vis_buf(err + start, end - start);
			error("%s: %s", name, safe);
			free(safe);
		}
		json_decref(o);
		start = end + 1;
	}
}

static int
cmd_logs_exec(
    const struct cmd_entry *e, struct cmd_ctx *ctx, int argc, char **argv)
{
	struct planwrite *pw = NULL;
	struct job_answer ans[1];
	struct logs_out lo;
	struct jobspec_end end;
	char *name = NULL, *cause = NULL, *args[1], *endp, *tail = NULL, *s,
	     *exit_text;
	const struct engine_host *eh;
	int64_t job, tjob = 0;
	long lines = -1;
	size_t n;
	int ch, status, follow = 0, r;

	memset(&lo, 0, sizeof lo);
	while ((ch = cmd_getopt(
		    e, argc, argv, "fn:h", logs_options, &status)) != -1) {
		switch (ch) {
		case -2:
			return status;
		case 'f':
			follow = 1;
			break;
		case 'n':
			lines = strtol(optarg, &endp, 10);
			if (*optarg == '\0' || *endp != '\0' || lines < 0 ||
			    lines > 10000000)
				return cmd_usage_error(e,
				    "--tail '%s' is not a number of lines",
				    optarg);
			break;
		}
	}
	if (argc - optind != 1)
		return cmd_usage_error(e, "needs INSTANCE or INSTANCE:JOB");
	if (jobspec_parse_target(argv[optind], 0, &name, &job, &cause) != 0) {
		status = cmd_usage_error(e, "%s", cause);
		free(cause);
		return status;
	}
	if ((r = planwrite_contact(ctx->fleet, name, &pw, &cause)) != 0) {
		free(name);
		return cmd_fail(-r, cause);
	}
	if (pw->n != 1) {
		planwrite_free(pw);
		status = cmd_usage_error(
		    e, "'%s' selects %zu instances; name one", name, pw->n);
		free(name);
		return status;
	}
	free(name);
	name = pw->hosts[0].in->name;
	if (pw->hosts[0].error != NULL) {
		s = vis_str(pw->hosts[0].error);
		error("%s: %s", name, s);
		free(s);
		planwrite_free(pw);
		return GF_EHOSTS;
	}
	if (lines >= 0)
		xasprintf(&tail, " --tail %ld", lines);
	if (job > 0)
		xasprintf(&args[0], "job log --dir \"$d\" --job %lld%s%s",
		    (long long)job, tail != NULL ? tail : "",
		    follow ? " --follow" : "");
	else
		xasprintf(&args[0], "job log --dir \"$d\" --last%s%s",
		    tail != NULL ? tail : "", follow ? " --follow" : "");
	free(tail);
	lo.tty = isatty(STDOUT_FILENO);
	r = job_pass(pw, args, NULL,
	    follow ? 0 : pw->fleet->config->command_timeout, 1, on_log, &lo,
	    ans);
	free(args[0]);
	if (lo.tty) {
		s = vis_stream(&lo.vs, NULL, 0, 1, &n);
		fwrite(s, 1, n, stdout);
		free(s);
	}
	fflush(stdout);
	eh = &pw->rm->hosts[0];
	if (r != 0)
		status = cmd_fail(-r, xstrdup("cannot start the event loop"));
	else if (eh->fail == EF_INTERRUPTED)
		status = 130;
	else if (ans[0].error != NULL) {
		s = vis_str(ans[0].error);
		error("%s: %s", name, s);
		free(s);
		status = GF_EHOSTS;
	} else if (follow &&
	    jobspec_trailer(ans[0].err.data != NULL ? ans[0].err.data : "",
		ans[0].err.len, &tjob, &end) == 0) {
		print_stderr(name, ans[0].err.data, ans[0].err.len, 1);
		exit_text = jobspec_exit_text(&end);
		fprintf(stderr, "gpufleet: %s:%lld %s%s%s\n", name,
		    (long long)tjob, end.state,
		    *exit_text != '\0'
			? (end.signal[0] != '\0' ? " by " : ", exit ")
			: "",
		    exit_text);
		free(exit_text);
		status = jobspec_exit_status(&end);
	} else if (ans[0].status != 0) {
		if (ans[0].status >= 2 && ans[0].status <= 6 &&
		    ans[0].err.len > 0)
			print_stderr(name, ans[0].err.data, ans[0].err.len, 0);
		else {
			s = job_agent_error(&ans[0], pw->hosts[0].in);
			cause = vis_str(s);
			error("%s: %s", name, cause);
			free(cause);
			free(s);
		}
		status = GF_EHOSTS;
	} else {
		print_stderr(name, ans[0].err.data, ans[0].err.len, follow);
		status = GF_OK;
	}
	free(ans[0].error);
	free(ans[0].out.data);
	free(ans[0].err.data);
	planwrite_free(pw);
	return status;
}

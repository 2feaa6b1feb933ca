/*
 * Stop a job: `gpufleet kill INSTANCE:JOB` has the agent signal the job's
 * whole process group (TERM by default), wait the grace period for it to
 * be gone and send KILL if it is not; what happened goes to events
 * (action_log kind job_kill).
 */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "actionlog.h"
#include "cmd.h"
#include "job.h"
#include "jobspec.h"
#include "log.h"
#include "planwrite.h"
#include "status.h"
#include "timeparse.h"
#include "vis.h"
#include "xmalloc.h"

static int cmd_kill_exec(
    const struct cmd_entry *, struct cmd_ctx *, int, char **);
static char *outcome(const struct job_answer *, const struct instance *,
    const char *, int64_t, int *);

const struct cmd_entry cmd_kill_entry = {
	.name = "kill",
	.usage = "INSTANCE:JOB [--signal SIG] [--grace DURATION]",
	.summary = "signal a job's whole process group, KILL after a grace",
	.help =
	    "Sends SIG (default TERM) to the process group of job JOB on "
	    "INSTANCE: the\njob's shell and everything it started that kept "
	    "its group (children,\ngrandchildren). Then waits up to the grace "
	    "period for the group to be gone\nand sends KILL to what is left. "
	    "A job that already ended gets the signal\nonly where members of "
	    "its group still run (its shell exited and left\nthem); with none "
	    "left, nothing is sent (\"already ended; nothing sent\").\nA "
	    "running job then reads killed in gpufleet jobs; with --then its "
	    "stop\nfollows as for any end (stop-if-ok: none). Recorded in "
	    "gpufleet events\n(job_kill).\n\n"
	    "      --signal SIG       TERM, INT, HUP, KILL, USR1, ... or a "
	    "number\n"
	    "      --grace DURATION   how long to wait before KILL (default "
	    "10s; 0 to 1h)\n\n"
	    "Exit status: 0 when the job is gone, 1 when it is not (or the "
	    "instance\ncannot be reached).\n\n"
	    "Examples:\n"
	    "  gpufleet kill a100-1:7\n"
	    "  gpufleet kill a100-1:7 --signal INT --grace 2m\n",
	.exec = cmd_kill_exec,
};

enum { OPT_SIGNAL = 256, OPT_GRACE };

static const struct option kill_options[] = { { "signal", required_argument,
						  NULL, OPT_SIGNAL },
	{ "grace", required_argument, NULL, OPT_GRACE },
	{ "help", no_argument, NULL, 'h' }, { NULL, 0, NULL, 0 } };

/*
 * What job kill's answer says, as a line (caller frees); *gone is 1 when
 * the job's processes are gone.
 */
static char *
outcome(const struct job_answer *a, const struct instance *in, const char *sig,
    int64_t grace, int *gone)
{
	json_t *o = NULL;
	char *s, *g;

	*gone = 0;
	if (a->error != NULL)
		return xstrdup(a->error);
	if (a->status != 0)
		return job_agent_error(a, in);
	if (a->out.data != NULL)
		o = json_loadb(
		    a->out.data, a->out.len, JSON_DISABLE_EOF_CHECK, NULL);
	if (!json_is_object(o))
		return xstrdup("job kill gave no answer");
	*gone = json_is_true(json_object_get(o, "gone"));
	g = timeparse_duration(grace);
	/* An agent from before "sent" did not say it: taken as sent. */
	if (json_is_false(json_object_get(o, "sent")) && *gone)
		s = xstrdup("already ended; nothing sent");
	else if (json_is_true(json_object_get(o, "killed")))
		xasprintf(&s,
		    "%s to its process group; still there after %s: KILL "
		    "sent; %s",
		    sig, g, *gone ? "gone" : "NOT gone");
	else
		xasprintf(&s, "%s to its process group; %s", sig,
		    *gone ? "gone" : "NOT gone after the grace period");
	free(g);
	json_decref(o);
	return s;
}

static int
cmd_kill_exec(
    const struct cmd_entry *e, struct cmd_ctx *ctx, int argc, char **argv)
{
	struct planwrite *pw = NULL;
	struct job_answer ans[1];
	char sig[16] = "TERM", *name = NULL, *cause = NULL, *args[1], *what,
	     *safe, *why, label[96];
	json_t *names, *result;
	int64_t job, grace = 10;
	int ch, status, r, gone = 0;

	while ((ch = cmd_getopt(e, argc, argv, "h", kill_options, &status)) !=
	    -1) {
		switch (ch) {
		case -2:
			return status;
		case OPT_SIGNAL:
			if (jobspec_parse_signal(
				optarg, sig, sizeof sig, &cause) != 0) {
				status = cmd_usage_error(e, "%s", cause);
				free(cause);
				return status;
			}
			break;
		case OPT_GRACE:
			if ((status = cmd_duration(e, "grace", optarg, 0,
				 JOBSPEC_GRACE_MAX, &grace)) != 0)
				return status;
			break;
		}
	}
	if (argc - optind != 1)
		return cmd_usage_error(e, "needs INSTANCE:JOB");
	if (jobspec_parse_target(argv[optind], 1, &name, &job, &cause) != 0) {
		status = cmd_usage_error(e, "%s", cause);
		free(cause);
		return status;
	}
	r = planwrite_contact(ctx->fleet, name, &pw, &cause);
	if (r == 0 && pw->n != 1) {
		status = cmd_usage_error(
		    e, "'%s' selects %zu instances; name one", name, pw->n);
		free(name);
		planwrite_free(pw);
		return status;
	}
	free(name);
	if (r != 0)
		return cmd_fail(-r, cause);
	name = pw->hosts[0].in->name;
	memset(ans, 0, sizeof ans);
	if (pw->hosts[0].error != NULL)
		what = xstrdup(pw->hosts[0].error);
	else {
		xasprintf(&args[0],
		    "job kill --dir \"$d\" --job %lld --signal %s --grace %lld",
		    (long long)job, sig, (long long)grace);
		r = job_pass(pw, args, NULL,
		    pw->fleet->config->status_timeout + (int)grace + 10, 0,
		    NULL, NULL, ans);
		free(args[0]);
		what = r != 0
		    ? xstrdup("cannot start the event loop")
		    : outcome(&ans[0], pw->hosts[0].in, sig, grace, &gone);
	}
	snprintf(label, sizeof label, "%s:%lld", name, (long long)job);
	safe = vis_str(what);
	if (gone)
		printf("%s: %s\n", label, safe);
	else
		error("%s: %s", label, safe);
	free(safe);
	/* For events: what was sent and what came of it. */
	names = json_pack("[s]", name);
	result = json_pack("{s:s}", name, what);
	xasprintf(&why, "signal %s, grace %llds", sig, (long long)grace);
	if (actionlog_add(pw->rm->inv, (int64_t)time(NULL), "job_kill", label,
		names, why, result, NULL, &cause) != 0) {
		error("%s", cause);
		free(cause);
	}
	json_decref(names);
	json_decref(result);
	free(why);
	free(what);
	free(ans[0].error);
	free(ans[0].out.data);
	free(ans[0].err.data);
	planwrite_free(pw);
	return gone ? GF_OK : GF_EHOSTS;
}

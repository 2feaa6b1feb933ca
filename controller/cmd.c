/* The command table, dispatch, help and the helpers every command uses. */

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "billing.h"
#include "cmd.h"
#include "log.h"
#include "selector.h"
#include "status.h"
#include "timeparse.h"
#include "xmalloc.h"

extern const struct cmd_entry cmd_add_entry;
extern const struct cmd_entry cmd_advise_entry;
extern const struct cmd_entry cmd_autostop_entry;
extern const struct cmd_entry cmd_cost_entry;
extern const struct cmd_entry cmd_daemon_entry;
extern const struct cmd_entry cmd_db_entry;
extern const struct cmd_entry cmd_events_entry;
extern const struct cmd_entry cmd_exec_entry;
extern const struct cmd_entry cmd_guard_entry;
extern const struct cmd_entry cmd_notify_entry;
extern const struct cmd_entry cmd_passwd_entry;
extern const struct cmd_entry cmd_harden_entry;
extern const struct cmd_entry cmd_help_entry;
extern const struct cmd_entry cmd_history_entry;
extern const struct cmd_entry cmd_hostkey_entry;
extern const struct cmd_entry cmd_import_entry;
extern const struct cmd_entry cmd_jobs_entry;
extern const struct cmd_entry cmd_keys_entry;
extern const struct cmd_entry cmd_kill_entry;
extern const struct cmd_entry cmd_ledger_entry;
extern const struct cmd_entry cmd_logs_entry;
extern const struct cmd_entry cmd_ls_entry;
extern const struct cmd_entry cmd_mark_entry;
extern const struct cmd_entry cmd_metrics_entry;
extern const struct cmd_entry cmd_preset_entry;
extern const struct cmd_entry cmd_provider_entry;
extern const struct cmd_entry cmd_pull_entry;
extern const struct cmd_entry cmd_push_entry;
extern const struct cmd_entry cmd_restore_entry;
extern const struct cmd_entry cmd_rm_entry;
extern const struct cmd_entry cmd_run_entry;
extern const struct cmd_entry cmd_schedule_entry;
extern const struct cmd_entry cmd_set_entry;
extern const struct cmd_entry cmd_show_entry;
extern const struct cmd_entry cmd_shutdown_entry;
extern const struct cmd_entry cmd_speed_entry;
extern const struct cmd_entry cmd_ssh_entry;
extern const struct cmd_entry cmd_ssh_config_entry;
extern const struct cmd_entry cmd_status_entry;
extern const struct cmd_entry cmd_tag_entry;
extern const struct cmd_entry cmd_version_entry;

/* clang-format off */
const struct cmd_entry *const cmd_table[] = {
	&cmd_add_entry,
	&cmd_import_entry,
	&cmd_ls_entry,
	&cmd_show_entry,
	&cmd_set_entry,
	&cmd_tag_entry,
	&cmd_rm_entry,
	&cmd_restore_entry,
	&cmd_status_entry,
	&cmd_history_entry,
	&cmd_cost_entry,
	&cmd_metrics_entry,
	&cmd_mark_entry,
	&cmd_ledger_entry,
	&cmd_provider_entry,
	&cmd_preset_entry,
	&cmd_advise_entry,
	&cmd_exec_entry,
	&cmd_run_entry,
	&cmd_jobs_entry,
	&cmd_logs_entry,
	&cmd_kill_entry,
	&cmd_shutdown_entry,
	&cmd_autostop_entry,
	&cmd_schedule_entry,
	&cmd_guard_entry,
	&cmd_notify_entry,
	&cmd_events_entry,
	&cmd_daemon_entry,
	&cmd_db_entry,
	&cmd_ssh_entry,
	&cmd_ssh_config_entry,
	&cmd_push_entry,
	&cmd_pull_entry,
	&cmd_speed_entry,
	&cmd_hostkey_entry,
	&cmd_keys_entry,
	&cmd_harden_entry,
	&cmd_passwd_entry,
	&cmd_help_entry,
	&cmd_version_entry,
	NULL
};
/* clang-format on */

static const char general_help[] =
    "Global options (before COMMAND):\n"
    "  --db PATH        inventory database (env GPUFLEET_DB; default\n"
    "                   $XDG_DATA_HOME/gpufleet/fleet.db)\n"
    "  --config PATH    configuration file (env GPUFLEET_CONFIG; default\n"
    "                   $XDG_CONFIG_HOME/gpufleet/config.ini)\n"
    "  -v, --verbose    debug output on stderr\n"
    "  -h, --help       this help; `gpufleet help COMMAND` for one command\n"
    "  -V, --version    print the version\n"
    "\n"
    "Selectors (commands that take SELECTOR): comma-separated terms;\n"
    "  all | NAME | GLOB (a100-*) | @TAG | provider:NAME | state:STATE\n"
    "  (running, stopped or unknown, as the ledger says) | !TERM (exclude).\n"
    "  The union of the positive terms minus the excluded ones; only\n"
    "  exclusions start from all. An unknown exact NAME, or a selector\n"
    "  that matches nothing, is an error.\n"
    "\n"
    "Exit status: 0 success; 1 one or more hosts failed; 2 usage or\n"
    "  validation error; 3 database error; 4 configuration error.\n";

/*
 * Find a command by name or unambiguous prefix. On failure *cause says
 * whether it is unknown or ambiguous (caller frees).
 */
const struct cmd_entry *
cmd_find(const char *name, char **cause)
{
	const struct cmd_entry *const *e, *found = NULL;
	char *list = NULL, *tmp;
	int nfound = 0;

	for (e = cmd_table; *e != NULL; e++) {
		if (strcmp((*e)->name, name) == 0)
			return *e;
		if (strncmp((*e)->name, name, strlen(name)) != 0)
			continue;
		found = *e;
		nfound++;
		xasprintf(&tmp, "%s%s%s", list != NULL ? list : "",
		    list != NULL ? ", " : "", (*e)->name);
		free(list);
		list = tmp;
	}
	if (nfound == 1 && *name != '\0') {
		free(list);
		return found;
	}
	if (nfound > 1 && *name != '\0')
		xasprintf(
		    cause, "ambiguous command '%s', could be: %s", name, list);
	else
		xasprintf(
		    cause, "unknown command '%s' (try 'gpufleet help')", name);
	free(list);
	return NULL;
}

void
cmd_usage(const struct cmd_entry *e, FILE *f)
{
	fprintf(f, "usage: gpufleet %s %s\n", e->name, e->usage);
}

/* Print general help, or one command's help; returns the exit status. */
int
cmd_help(FILE *f, const char *name)
{
	const struct cmd_entry *const *ep, *e;
	char *cause = NULL;

	if (name == NULL) {
		fprintf(f,
		    "usage: gpufleet [--db PATH] [--config PATH] "
		    "COMMAND [ARGS]\n\ngpufleet manages rented GPU instances: "
		    "inventory, SSH, cost.\n\nCommands:\n");
		for (ep = cmd_table; *ep != NULL; ep++)
			fprintf(f, "  %-10s %s\n", (*ep)->name, (*ep)->summary);
		fprintf(f, "\n%s", general_help);
		return GF_OK;
	}
	if ((e = cmd_find(name, &cause)) == NULL)
		return cmd_fail(GF_EUSAGE, cause);
	cmd_usage(e, f);
	fprintf(f, "\n%s\n", e->summary);
	if (e->help != NULL && *e->help != '\0')
		fprintf(f, "\n%s", e->help);
	fprintf(f,
	    "\nExit status: 0 success; 1 one or more hosts failed; 2 "
	    "usage or validation error;\n3 database error; 4 configuration "
	    "error.\n");
	return GF_OK;
}

/* Print "gpufleet: CMD: message" and the usage line; returns GF_EUSAGE. */
int
cmd_usage_error(const struct cmd_entry *e, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "gpufleet: %s: ", e->name);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, " (try 'gpufleet %s --help')\n", e->name);
	return GF_EUSAGE;
}

/* Print cause as one error line, free it, return code. */
int
cmd_fail(int code, char *cause)
{
	error("%s", cause != NULL ? cause : "unknown error");
	free(cause);
	return code;
}

/*
 * getopt_long for a command. Handles -h/--help (every command's option
 * lists carry them) and unknown options itself: then it returns -2 with
 * *status set to the exit status.
 */
int
cmd_getopt(const struct cmd_entry *e, int argc, char **argv,
    const char *shortopts, const struct option *longopts, int *status)
{
	int ch;

	opterr = 0;
	ch = getopt_long(argc, argv, shortopts, longopts, NULL);
	if (ch == 'h') {
		cmd_help(stdout, e->name);
		*status = GF_OK;
		return -2;
	}
	if (ch == '?' || ch == ':') {
		if (optopt != 0 && ch == ':')
			*status = cmd_usage_error(
			    e, "option -%c needs a value", optopt);
		else if (optopt != 0)
			*status =
			    cmd_usage_error(e, "unknown option -%c", optopt);
		else
			*status = cmd_usage_error(
			    e, "bad option '%s'", argv[optind - 1]);
		return -2;
	}
	return ch;
}

/*
 * A DURATION option (90s, 10m, 1h30m) from min to max seconds; on error
 * the usage error is printed and its exit status returned.
 */
int
cmd_duration(const struct cmd_entry *e, const char *opt, const char *text,
    int64_t min, int64_t max, int64_t *out)
{
	char *cause = NULL, *lo, *hi;
	int status;

	if (billing_parse_duration(text, out, &cause) != 0) {
		status = cmd_usage_error(e, "--%s: %s", opt, cause);
		free(cause);
		return status;
	}
	if (*out < min || *out > max) {
		lo = timeparse_duration(min);
		hi = timeparse_duration(max);
		status = cmd_usage_error(e,
		    "--%s '%s' is out of range (%s to %s)", opt, text, lo, hi);
		free(lo);
		free(hi);
		return status;
	}
	return 0;
}

/*
 * A whole number from min to max for option opt, counting unit ("hosts");
 * on error the usage error is printed and its exit status returned.
 */
int
cmd_number(const struct cmd_entry *e, const char *opt, const char *s,
    const char *unit, int min, int max, int *out)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (*s == '\0' || *end != '\0' || errno != 0 || v < min || v > max)
		return cmd_usage_error(e,
		    "%s '%s' is not a number of %s (%d-%d)", opt, s, unit, min,
		    max);
	*out = (int)v;
	return 0;
}

/*
 * A --warn MINUTES option (0 to 1440, as a watcher deadline takes); on
 * error the usage error is printed and its exit status returned.
 */
int
cmd_warn_minutes(const struct cmd_entry *e, const char *text, int *out)
{
	char *end;
	long n;

	n = strtol(text, &end, 10);
	if (*text == '\0' || *end != '\0' || n < 0 || n > 1440)
		return cmd_usage_error(e,
		    "--warn '%s' is not a number of minutes from 0 to 1440",
		    text);
	*out = (int)n;
	return 0;
}

/* A --before CMD option: 1 to CMD_BEFORE_MAX bytes; as cmd_warn_minutes. */
int
cmd_before(const struct cmd_entry *e, const char *text)
{
	if (*text == '\0' || strlen(text) > CMD_BEFORE_MAX)
		return cmd_usage_error(e,
		    "--before must be a command of 1 to %d bytes",
		    CMD_BEFORE_MAX);
	return 0;
}

/*
 * Whether the command (argv[0] its name) may create the inventory where a
 * --db names nothing yet: those that put instances, keys, balances or
 * schedules in. Every other command there says "no inventory".
 */
int
cmd_creates_inventory(const struct cmd_entry *e, int argc, char **argv)
{
	static const char *const creators[] = { "add", "import", NULL };
	static const char *const subs[][2] = { { "keys", "gen" },
		{ "provider", "add" }, { "provider", "set" },
		{ "schedule", "add" }, { "guard", "add" }, { NULL, NULL } };
	size_t i;

	for (i = 0; creators[i] != NULL; i++) {
		if (strcmp(e->name, creators[i]) == 0)
			return 1;
	}
	for (i = 0; subs[i][0] != NULL; i++) {
		if (strcmp(e->name, subs[i][0]) == 0 && argc > 1 &&
		    strcmp(argv[1], subs[i][1]) == 0)
			return 1;
	}
	return 0;
}

/* Open the inventory, printing the error; returns 0 or an exit status. */
int
cmd_open(struct cmd_ctx *ctx, struct inventory **inv)
{
	char *cause = NULL;
	int r;

	if ((r = fleet_check_db(ctx->fleet, &cause)) != 0 ||
	    (r = inventory_open(ctx->fleet->db_path, inv, &cause)) != 0)
		return cmd_fail(-r, cause);
	(*inv)->config = ctx->fleet->config;
	return 0;
}

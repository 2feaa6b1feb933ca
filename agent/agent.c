/*
 * gpufleet-agent: runs on each instance and prints one JSON report of its
 * GPUs, host and job progress (agent/REPORT.md), for the controller to
 * read over SSH. Static, with nothing needed on the instance but a kernel.
 */

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "agent.h"
#include "gpufleet/authkeys.h"
#include "gpufleet/report.h"
#include "gpufleet/version.h"

static void usage(FILE *);
static void open_std_fds(void);
static int cmd_report(int, char **);
static void usage_error(const char *);
static int cmd_authkeys(int, char **);
static int parse_cursor(const char *, struct report_opts *);
static int cmd_watch(int, char **);
static int plan_usage(const char *);
static int cmd_plan(int, char **);
static int cmd_notify(int, char **);

/* Print the usage text. */
static void
usage(FILE *f)
{
	fprintf(f,
	    "usage: gpufleet-agent [--version | --help]\n"
	    "       gpufleet-agent report [--nvidia-smi PATH] "
	    "[--progress PATH] [--dir DIR] [--proc ROOT]\n"
	    "                      [--authorized-keys PATH] "
	    "[--journal-after EPOCH:SEQ] [--ensure-watcher]\n"
	    "       gpufleet-agent watch [--dir DIR] [--foreground] "
	    "[--proc ROOT]\n"
	    "       gpufleet-agent plan set [--dir DIR] --expect GENERATION "
	    "[--notify-bytes N]\n"
	    "                      < [NOTIFY] PLAN\n"
	    "       gpufleet-agent notify set [--dir DIR] < NOTIFY\n"
	    "       gpufleet-agent job start [--dir DIR] < SPEC\n"
	    "       gpufleet-agent job ls [--dir DIR] [--job N]\n"
	    "       gpufleet-agent job log [--dir DIR] --job N|--last "
	    "[--tail LINES] [--follow]\n"
	    "       gpufleet-agent job kill [--dir DIR] --job N "
	    "[--signal SIG] [--grace SECONDS]\n"
	    "       gpufleet-agent authkeys PATH [--add 'TYPE BLOB COMMENT'] "
	    "[--like BLOB]\n"
	    "                      [--remove BLOB]\n"
	    "       gpufleet-agent release [--dir DIR] --id ID "
	    "--by pulled|pull_failed|user|cancelled\n"
	    "       gpufleet-agent serve    (a held session's command runner: "
	    "frames on stdin/stdout)\n");
}

/* Make sure fds 0-2 are open, so pipes never take their numbers. */
static void
open_std_fds(void)
{
	int fd;

	while ((fd = open("/dev/null", O_RDWR)) != -1 && fd <= 2)
		;
	if (fd > 2)
		close(fd);
}

/* gpufleet-agent report: print the report; 2 for a usage error. */
static int
cmd_report(int argc, char **argv)
{
	static const char *names[] = { "--nvidia-smi", "--progress", "--dir",
		"--proc", "--authorized-keys", "--journal-after", NULL };
	struct report_opts o;
	const char **slot[6], *cursor = NULL;
	const char *value = NULL;
	size_t nl;
	char *out;
	int i, k;

	report_opts_init(&o);
	slot[0] = &o.nvidia_smi;
	slot[1] = &o.progress;
	slot[2] = &o.dir;
	slot[3] = &o.proc;
	slot[4] = &o.authorized_keys;
	slot[5] = &cursor;
	for (i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--ensure-watcher") == 0) {
			o.ensure_watcher = 1;
			continue;
		}
		for (k = 0; names[k] != NULL; k++) {
			nl = strlen(names[k]);
			if (strncmp(argv[i], names[k], nl) != 0)
				continue;
			if (argv[i][nl] == '=')
				value = argv[i] + nl + 1;
			else if (argv[i][nl] == '\0' && i + 1 < argc)
				value = argv[++i];
			else
				continue;
			break;
		}
		if (names[k] == NULL || *value == '\0') {
			fprintf(stderr,
			    "gpufleet-agent: report: bad argument: %s\n",
			    argv[i]);
			usage(stderr);
			return REPORT_EXIT_USAGE;
		}
		*slot[k] = value;
	}
	if (cursor != NULL && parse_cursor(cursor, &o) != 0) {
		fprintf(stderr,
		    "gpufleet-agent: report: --journal-after wants EPOCH:SEQ "
		    "or -: %s\n",
		    cursor);
		return REPORT_EXIT_USAGE;
	}
	out = report_build(&o, time(NULL));
	fputs(out, stdout);
	fflush(stdout);
	free(out);
	return REPORT_EXIT_OK;
}

/* --journal-after EPOCH:SEQ (16 hex digits, seq >= 0) or "-". */
static int
parse_cursor(const char *s, struct report_opts *o)
{
	static char epoch[JOURNAL_EPOCH_LEN + 1];
	const char *colon = strchr(s, ':');
	char *end;
	size_t i;

	if (strcmp(s, "-") == 0)
		return 0;
	if (colon == NULL || colon - s != JOURNAL_EPOCH_LEN)
		return -1;
	for (i = 0; i < JOURNAL_EPOCH_LEN; i++)
		if (strchr("0123456789abcdef", s[i]) == NULL || s[i] == '\0')
			return -1;
	if (colon[1] < '0' || colon[1] > '9')
		return -1;
	errno = 0;
	o->journal_seq = strtoll(colon + 1, &end, 10);
	if (errno != 0 || *end != '\0')
		return -1;
	memcpy(epoch, s, JOURNAL_EPOCH_LEN);
	epoch[JOURNAL_EPOCH_LEN] = '\0';
	o->journal_epoch = epoch;
	return 0;
}

/*
 * gpufleet-agent watch [--dir D] [--foreground]: start the watcher (or
 * run it here) and print "started PID" or "running PID".
 */
static int
cmd_watch(int argc, char **argv)
{
	const char *dir = "~/.cache/gpufleet", *proc = "/proc";
	char *full, *cause = NULL;
	int i, fg = 0, r, started;
	pid_t pid;

	for (i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--foreground") == 0)
			fg = 1;
		else if (strcmp(argv[i], "--dir") == 0 && i + 1 < argc)
			dir = argv[++i];
		else if (strcmp(argv[i], "--proc") == 0 && i + 1 < argc)
			proc = argv[++i];
		else {
			fprintf(stderr,
			    "gpufleet-agent: watch: bad argument: "
			    "%s\n",
			    argv[i]);
			return REPORT_EXIT_USAGE;
		}
	}
	full = report_expand_home(dir);
	if (fg) {
		fflush(stdout);
		if (watcher_replace(full, &cause) == 0)
			r = watch_run(full, proc, STDOUT_FILENO, 0);
		else
			r = 1;
	} else if ((r = watcher_start(full, proc, &started, &pid, &cause)) == 0)
		printf("%s %ld\n", started ? "started" : "running", (long)pid);
	if (cause != NULL) {
		fprintf(stderr, "gpufleet-agent: watch: %s\n", cause);
		r = 1;
	}
	free(cause);
	free(full);
	fflush(stdout);
	return r == 0 ? 0 : 1;
}

/* A usage error of plan set. */
static int
plan_usage(const char *what)
{
	fprintf(stderr, "gpufleet-agent: plan set: %s\n", what);
	fprintf(stderr,
	    "usage: gpufleet-agent plan set [--dir DIR] "
	    "--expect GENERATION [--notify-bytes N] < [NOTIFY] PLAN\n");
	return REPORT_EXIT_USAGE;
}

/*
 * gpufleet-agent plan set [--dir D] --expect G [--notify-bytes N]: write
 * the plan on stdin if the plan on disk has generation G, then start the
 * watcher if the plan arms anything (agent/WATCH.md "Commands"). With
 * --notify-bytes, stdin's first N bytes are D/notify.json's (notify set),
 * written first when both are valid.
 */
static int
cmd_plan(int argc, char **argv)
{
	const char *dir = "~/.cache/gpufleet", *expect = NULL, *nb = NULL;
	struct buf in = { NULL, 0, 0 };
	struct notif_conf nc;
	struct plan p;
	char *full, *cause = NULL, *end, why[64];
	long long g, gen = 0, nbytes = 0;
	const char *state = "none";
	int i, r, started;
	pid_t pid = 0;

	for (i = 2; i < argc; i++) {
		if (strcmp(argv[i], "--dir") == 0 && i + 1 < argc)
			dir = argv[++i];
		else if (strcmp(argv[i], "--expect") == 0 && i + 1 < argc)
			expect = argv[++i];
		else if (strcmp(argv[i], "--notify-bytes") == 0 && i + 1 < argc)
			nb = argv[++i];
		else
			return plan_usage("bad argument");
	}
	if (argc < 2 || strcmp(argv[1], "set") != 0)
		return plan_usage("the only subcommand is set");
	if (expect == NULL)
		return plan_usage("needs --expect GENERATION");
	errno = 0;
	g = strtoll(expect, &end, 10);
	if (errno != 0 || *end != '\0' || end == expect || g < 0)
		return plan_usage("--expect needs a generation (0 or more)");
	if (buf_read_file(&in, "/dev/stdin", JSONR_MAXSIZE + 1) != 0) {
		snprintf(
		    why, sizeof why, "cannot read stdin: %s", strerror(errno));
		return plan_usage(why);
	}
	if (nb != NULL) {
		errno = 0;
		nbytes = strtoll(nb, &end, 10);
		if (errno != 0 || *end != '\0' || end == nb || nbytes < 0 ||
		    (size_t)nbytes > in.len) {
			buf_free(&in);
			return plan_usage("--notify-bytes needs the length of "
					  "the notify document on stdin");
		}
	}
	full = report_expand_home(dir);
	if (nb != NULL) {
		/* Both checked before either is written. */
		memset(&p, 0, sizeof p);
		if (notif_parse(in.data, (size_t)nbytes, &nc, &cause) != 0) {
			r = PLAN_EXIT_INVALID;
			fprintf(stderr,
			    "gpufleet-agent: plan set: invalid notify "
			    "document: %s\n",
			    cause);
			explicit_bzero(in.data, in.len);
			buf_free(&in);
			goto out;
		}
		notif_free(&nc);
		if (plan_parse(in.data + nbytes, in.len - (size_t)nbytes, &p,
			&cause) == 0)
			r = notif_set(full, in.data, (size_t)nbytes, &cause);
		else
			r = 0; /* plan_set says why */
		plan_free(&p);
		if (r != 0) {
			fprintf(
			    stderr, "gpufleet-agent: plan set: %s\n", cause);
			explicit_bzero(in.data, in.len);
			buf_free(&in);
			goto out;
		}
		free(cause);
		cause = NULL;
	}
	r = plan_set(
	    full, g, in.data + nbytes, in.len - (size_t)nbytes, &gen, &cause);
	explicit_bzero(in.data, in.len); /* notify.json's secrets */
	buf_free(&in);
	if (r == PLAN_EXIT_GENERATION)
		printf("{\"error\":\"generation\",\"generation\":%lld}\n", gen);
	else if (r == PLAN_EXIT_INVALID)
		fprintf(stderr, "gpufleet-agent: plan set: invalid plan: %s\n",
		    cause);
	else if (r != 0)
		fprintf(stderr, "gpufleet-agent: plan set: %s\n", cause);
	if (r != 0)
		goto out;
	if (plan_load(full, &p, NULL, &cause) == 0 &&
	    watcher_plan_arms(full, "/proc", &p)) {
		if (watcher_start(full, "/proc", &started, &pid, &cause) == 0)
			state = started ? "started" : "running";
		else {
			fprintf(
			    stderr, "gpufleet-agent: plan set: %s\n", cause);
			r = PLAN_EXIT_WATCHER;
		}
	} else if ((pid = watcher_holder(full)) > 0)
		state = "running";
	plan_free(&p);
	printf("{\"generation\":%lld,\"watcher\":\"%s\",\"pid\":", gen, state);
	if (pid > 0)
		printf("%ld}\n", (long)pid);
	else
		printf("null}\n");
out:
	free(cause);
	free(full);
	fflush(stdout);
	return r;
}

/*
 * gpufleet-agent notify set [--dir D]: write D/notify.json from stdin
 * (removed when it names no target); agent/WATCH.md "Notifications".
 */
static int
cmd_notify(int argc, char **argv)
{
	const char *dir = "~/.cache/gpufleet";
	struct buf in = { NULL, 0, 0 };
	char *full, *cause = NULL;
	int i, r;

	for (i = 2; i < argc; i++) {
		if (strcmp(argv[i], "--dir") == 0 && i + 1 < argc)
			dir = argv[++i];
		else
			break;
	}
	if (argc < 2 || strcmp(argv[1], "set") != 0 || i < argc) {
		fprintf(stderr,
		    "usage: gpufleet-agent notify set [--dir DIR] < NOTIFY\n");
		return REPORT_EXIT_USAGE;
	}
	if (buf_read_file(&in, "/dev/stdin", JSONR_MAXSIZE + 1) != 0) {
		fprintf(stderr,
		    "gpufleet-agent: notify set: cannot read "
		    "stdin: %s\n",
		    strerror(errno));
		return REPORT_EXIT_USAGE;
	}
	full = report_expand_home(dir);
	r = notif_set(full, in.data, in.len, &cause);
	explicit_bzero(in.data, in.len);
	buf_free(&in);
	if (r != 0)
		fprintf(stderr, "gpufleet-agent: notify set: %s%s\n",
		    r == PLAN_EXIT_INVALID ? "invalid: " : "", cause);
	else
		printf("{\"ok\":true}\n");
	free(cause);
	free(full);
	fflush(stdout);
	return r;
}

/* A usage error of authkeys, with the usage line. */
static void
usage_error(const char *what)
{
	fprintf(stderr, "gpufleet-agent: authkeys: %s\n", what);
	fprintf(stderr,
	    "usage: gpufleet-agent authkeys PATH [--add "
	    "'TYPE BLOB COMMENT'] [--like BLOB] [--remove BLOB]\n");
}

/*
 * gpufleet-agent authkeys PATH [--add LINE] [--like BLOB] [--remove BLOB]:
 * the controller's edit of authorized_keys (akedit.c).
 */
static int
cmd_authkeys(int argc, char **argv)
{
	struct authkeys_line l;
	struct akedit e;
	const char *path = NULL, **slot, *v;
	char *full;
	int i, status;

	memset(&e, 0, sizeof e);
	for (i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--add") == 0)
			slot = &e.add;
		else if (strcmp(argv[i], "--like") == 0)
			slot = &e.like;
		else if (strcmp(argv[i], "--remove") == 0)
			slot = &e.del;
		else if (path == NULL && argv[i][0] != '-' &&
		    argv[i][0] != '\0') {
			path = argv[i];
			continue;
		} else {
			usage_error("bad argument");
			return AKEDIT_EXIT_USAGE;
		}
		if (i + 1 >= argc || *slot != NULL) {
			usage_error("an option needs one value");
			return AKEDIT_EXIT_USAGE;
		}
		*slot = argv[++i];
	}
	if (path == NULL) {
		usage_error("needs PATH");
		return AKEDIT_EXIT_USAGE;
	}
	v = e.add;
	if (v != NULL &&
	    (authkeys_parse(v, strlen(v), &l) != AUTHKEYS_KEY ||
		l.options.len != 0 || strchr(v, '\n') != NULL)) {
		usage_error("--add needs one key line without options");
		return AKEDIT_EXIT_USAGE;
	}
	if ((e.like != NULL &&
		!authkeys_valid_base64(e.like, strlen(e.like))) ||
	    (e.del != NULL && !authkeys_valid_base64(e.del, strlen(e.del)))) {
		usage_error("--like and --remove need a base64 key blob");
		return AKEDIT_EXIT_USAGE;
	}
	full = report_expand_home(path);
	status = akedit_file(full, &e);
	free(full);
	fflush(stdout);
	return status;
}

int
main(int argc, char **argv)
{
	open_std_fds();
	signal(SIGPIPE, SIG_IGN);
	if (argc == 2 &&
	    (strcmp(argv[1], "--version") == 0 ||
		strcmp(argv[1], "version") == 0)) {
		printf("gpufleet-agent %s\n", GPUFLEET_VERSION);
		return REPORT_EXIT_OK;
	}
	if (argc == 2 && strcmp(argv[1], "--help") == 0) {
		usage(stdout);
		return REPORT_EXIT_OK;
	}
	if (argc >= 2 && strcmp(argv[1], "report") == 0)
		return cmd_report(argc - 1, argv + 1);
	if (argc >= 2 && strcmp(argv[1], "watch") == 0)
		return cmd_watch(argc - 1, argv + 1);
	if (argc >= 2 && strcmp(argv[1], "plan") == 0)
		return cmd_plan(argc - 1, argv + 1);
	if (argc >= 2 && strcmp(argv[1], "notify") == 0)
		return cmd_notify(argc - 1, argv + 1);
	if (argc >= 2 && strcmp(argv[1], "job") == 0)
		return job_main(argc - 1, argv + 1);
	if (argc >= 2 && strcmp(argv[1], "authkeys") == 0)
		return cmd_authkeys(argc - 1, argv + 1);
	if (argc >= 2 && strcmp(argv[1], "release") == 0)
		return hold_main(argc - 1, argv + 1);
	if (argc >= 2 && strcmp(argv[1], "serve") == 0)
		return serve_main(argc - 1, argv + 1);
	usage(stderr);
	return REPORT_EXIT_USAGE;
}

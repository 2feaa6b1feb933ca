/*
 * gpufleet-agent: runs on each instance and prints one JSON report of its
 * GPUs, host and job progress (agent/REPORT.md), for the controller to
 * read over SSH. Static, with nothing needed on the instance but a kernel.
 */

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

/* Print the usage text. */
static void
usage(FILE *f)
{
	fprintf(f,
	    "usage: gpufleet-agent [--version | --help]\n"
	    "       gpufleet-agent report [--nvidia-smi PATH] "
	    "[--progress PATH] [--dir DIR] [--proc ROOT]\n"
	    "                      [--authorized-keys PATH]\n"
	    "       gpufleet-agent authkeys PATH [--add 'TYPE BLOB COMMENT'] "
	    "[--like BLOB]\n"
	    "                      [--remove BLOB]\n");
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
		"--proc", "--authorized-keys", NULL };
	struct report_opts o;
	const char **slot[5];
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
	for (i = 1; i < argc; i++) {
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
	out = report_build(&o, time(NULL));
	fputs(out, stdout);
	fflush(stdout);
	free(out);
	return REPORT_EXIT_OK;
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
	if (argc >= 2 && strcmp(argv[1], "authkeys") == 0)
		return cmd_authkeys(argc - 1, argv + 1);
	usage(stderr);
	return REPORT_EXIT_USAGE;
}

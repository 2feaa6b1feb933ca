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
#include "gpufleet/report.h"
#include "gpufleet/version.h"

static void usage(FILE *);
static void open_std_fds(void);
static int cmd_report(int, char **);

/* Print the usage text. */
static void
usage(FILE *f)
{
	fprintf(f,
	    "usage: gpufleet-agent [--version | --help]\n"
	    "       gpufleet-agent report [--nvidia-smi PATH] "
	    "[--progress PATH] [--dir DIR] [--proc ROOT]\n"
	    "                      [--authorized-keys PATH]\n");
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
	usage(stderr);
	return REPORT_EXIT_USAGE;
}

/*
 * gpufleet-agent: runs on each instance and reports its GPU and host state.
 * For now it only knows its version; the report arrives with the agent work.
 */

#include <stdio.h>
#include <string.h>

#include "gpufleet/version.h"

static void
usage(FILE *f)
{
	fprintf(f, "usage: gpufleet-agent [--version | --help]\n");
}

int
main(int argc, char **argv)
{
	if (argc == 2 &&
	    (strcmp(argv[1], "--version") == 0 ||
		strcmp(argv[1], "version") == 0)) {
		printf("gpufleet-agent %s\n", GPUFLEET_VERSION);
		return 0;
	}
	if (argc == 2 && strcmp(argv[1], "--help") == 0) {
		usage(stdout);
		return 0;
	}
	usage(stderr);
	return 2;
}

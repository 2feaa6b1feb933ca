/*
 * For fuzzers of parsers that read a file: each input is written to one
 * file of this process's own, in memory where /dev/shm exists, removed
 * with its directory at exit.
 */
#ifndef GPUFLEET_FUZZ_FILE_H
#define GPUFLEET_FUZZ_FILE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static char fuzz_shm_dir[] = "/dev/shm/gpufleet-fuzz.XXXXXX";
static char fuzz_tmp_dir[] = "/tmp/gpufleet-fuzz.XXXXXX";
static char *fuzz_dir;
static char fuzz_path[64];

static void
fuzz_file_cleanup(void)
{
	unlink(fuzz_path);
	rmdir(fuzz_dir);
}

/* Write data to FUZZDIR/name; returns its path (the directory in *dir). */
static const char *
fuzz_file_write(
    const uint8_t *data, size_t size, const char *name, const char **dir)
{
	FILE *f;

	if (fuzz_path[0] == '\0') {
		if ((fuzz_dir = mkdtemp(fuzz_shm_dir)) == NULL &&
		    (fuzz_dir = mkdtemp(fuzz_tmp_dir)) == NULL)
			abort();
		atexit(fuzz_file_cleanup);
		snprintf(fuzz_path, sizeof fuzz_path, "%s/%s", fuzz_dir, name);
	}
	if ((f = fopen(fuzz_path, "w")) == NULL)
		abort();
	if (fwrite(data, 1, size, f) != size || fclose(f) != 0)
		abort();
	if (dir != NULL)
		*dir = fuzz_dir;
	return fuzz_path;
}

#endif

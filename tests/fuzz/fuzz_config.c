/* libFuzzer entry: config.ini files and their values (config_load). */

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "config.h"

int LLVMFuzzerTestOneInput(const uint8_t *, size_t);

/* In memory where /dev/shm exists: a file per input is fast there. */
static char shm_dir[] = "/dev/shm/gpufleet-fuzz.XXXXXX";
static char tmp_dir[] = "/tmp/gpufleet-fuzz.XXXXXX";
static char *dir;
static char path[64];

/* Remove the input file and its directory at exit. */
static void
cleanup(void)
{
	unlink(path);
	rmdir(dir);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct config c;
	char *cause = NULL;
	FILE *f;

	if (path[0] == '\0') {
		if ((dir = mkdtemp(shm_dir)) == NULL &&
		    (dir = mkdtemp(tmp_dir)) == NULL)
			abort();
		atexit(cleanup);
		snprintf(path, sizeof path, "%s/config.ini", dir);
	}
	if ((f = fopen(path, "w")) == NULL)
		abort();
	if (fwrite(data, 1, size, f) != size || fclose(f) != 0)
		abort();
	config_defaults(&c);
	if (config_load(&c, path, 1, &cause) != 0)
		free(cause);
	config_clear(&c);
	return 0;
}

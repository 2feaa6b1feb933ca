/* libFuzzer entry: ssh_config files (sshconfig_read). */

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "sshconfig.h"

int LLVMFuzzerTestOneInput(const uint8_t *, size_t);

/*
 * The input goes to a file of this process's own, in memory where /dev/shm
 * exists; ~ is that otherwise empty directory.
 */
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
	struct sshconfig sc;
	char *cause = NULL;
	FILE *f;

	if (path[0] == '\0') {
		if ((dir = mkdtemp(shm_dir)) == NULL &&
		    (dir = mkdtemp(tmp_dir)) == NULL)
			abort();
		atexit(cleanup);
		snprintf(path, sizeof path, "%s/config", dir);
	}
	if ((f = fopen(path, "w")) == NULL)
		abort();
	if (fwrite(data, 1, size, f) != size || fclose(f) != 0)
		abort();
	if (sshconfig_read(path, dir, &sc, &cause) == 0)
		sshconfig_free(&sc);
	else
		free(cause);
	return 0;
}

/* libFuzzer entry: ssh_config files (sshconfig_read). */

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "fuzz_file.h"
#include "sshconfig.h"

int LLVMFuzzerTestOneInput(const uint8_t *, size_t);

/* ~ is the otherwise empty directory that holds the input. */
int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *dir, *path = fuzz_file_write(data, size, "config", &dir);
	struct sshconfig sc;
	char *cause = NULL;

	if (sshconfig_read(path, dir, &sc, &cause) == 0)
		sshconfig_free(&sc);
	else
		free(cause);
	return 0;
}

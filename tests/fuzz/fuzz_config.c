/* libFuzzer entry: config.ini files and their values (config_load). */

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "config.h"
#include "fuzz_file.h"

int LLVMFuzzerTestOneInput(const uint8_t *, size_t);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *path = fuzz_file_write(data, size, "config.ini", NULL);
	struct config c;
	char *cause = NULL;

	config_defaults(&c);
	if (config_load(&c, path, 1, &cause) != 0)
		free(cause);
	config_clear(&c);
	return 0;
}

/* libFuzzer entry: known_hosts files (knownhosts_read) for a few names. */

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "fuzz_file.h"
#include "knownhosts.h"

int LLVMFuzzerTestOneInput(const uint8_t *, size_t);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char *const names[] = { "[127.0.0.1]:2222", "127.0.0.1",
		"host.example" };
	const char *dir,
	    *path = fuzz_file_write(data, size, "known_hosts", &dir);
	struct knownhosts kh = { NULL, 0 };
	size_t i;

	for (i = 0; i < sizeof names / sizeof names[0]; i++) {
		knownhosts_read(path, names[i], &kh);
		knownhosts_free(&kh);
	}
	return 0;
}

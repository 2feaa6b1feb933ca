/* libFuzzer entry: TIME arguments (timeparse) and duration printing. */

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "timeparse.h"

int LLVMFuzzerTestOneInput(const uint8_t *, size_t);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *text, *cause = NULL;
	int64_t t;

	text = malloc(size + 1);
	memcpy(text, data, size);
	text[size] = '\0';
	if (timeparse(text, 1764460800, &t, &cause) == 0)
		free(timeparse_duration(1764460800 - t));
	else
		free(cause);
	if (size >= sizeof t) {
		memcpy(&t, data, sizeof t);
		free(timeparse_duration(t));
	}
	free(text);
	return 0;
}

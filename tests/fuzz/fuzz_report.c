/* libFuzzer entry: the controller's parser of agent reports. */

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

#include "report.h"

int LLVMFuzzerTestOneInput(const uint8_t *, size_t);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct report r;
	char *cause = NULL;

	if (report_parse(
		(const char *)data, size, (int64_t)time(NULL), &r, &cause) == 0)
		report_free(&r);
	free(cause);
	return 0;
}

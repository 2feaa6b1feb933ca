/* libFuzzer entry: cron expressions (cron_parse), their next firing and
 * time zone names (cron_check_tz). */

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cron.h"

int LLVMFuzzerTestOneInput(const uint8_t *, size_t);

static const char *const zones[] = { NULL, "UTC", "Europe/Berlin",
	"America/New_York", "Australia/Sydney", "Asia/Kolkata" };

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	/* 2026-03-29T00:30:00Z, just before Berlin springs forward. */
	const int64_t after = 1774744200;
	const char *zone;
	char *text, *cause = NULL;
	struct cron c;
	int64_t next, again;

	if (size == 0)
		return 0;
	zone = zones[data[0] % (sizeof zones / sizeof zones[0])];
	text = malloc(size);
	memcpy(text, data + 1, size - 1);
	text[size - 1] = '\0';
	if (cron_check_tz(text, &cause) != 0)
		free(cause);
	cause = NULL;
	if (cron_parse(text, &c, &cause) != 0) {
		if (cause == NULL || strchr(cause, '\n') != NULL)
			abort();
		free(cause);
		free(text);
		return 0;
	}
	if ((c.minutes >> 60) != 0 || (c.hours >> 24) != 0 ||
	    (c.days & 1) != 0 || (c.months & 0xe001) != 0 ||
	    (c.weekdays >> 7) != 0)
		abort();
	if (cron_next(&c, zone, after, &next, &cause) != 0) {
		free(cause);
	} else {
		if (next <= after || next % 60 != 0)
			abort();
		if (cron_next(&c, zone, next - 1, &again, &cause) != 0 ||
		    again != next)
			abort();
	}
	free(text);
	return 0;
}

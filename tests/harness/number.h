/* The harness programs' command-line numbers (slowpeer, delayrelay). */
#ifndef HARNESS_NUMBER_H
#define HARNESS_NUMBER_H

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

/* A decimal number in [lo, hi], or a message naming prog and exit 2. */
static inline long
harness_number(const char *prog, const char *s, long lo, long hi)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (*s == '\0' || *end != '\0' || errno != 0 || v < lo || v > hi) {
		fprintf(stderr, "%s: bad number '%s'\n", prog, s);
		exit(2);
	}
	return v;
}

#endif

/*
 * TIME as every command takes it (--at, --since, --until):
 *   2026-11-01T02:00:00Z, 2026-11-01T10:00:00+08:00   ISO 8601 with offset
 *   2026-11-01 02:00[:SS], 2026-11-01T02:00[:SS]       local date-time
 *   2026-11-01                                         local midnight
 *   now, today, yesterday                              (local midnight)
 *   -2h, -30m, -90s, -7d, -1w                          relative to now
 * timeparse_next (shutdown --at) also takes HH:MM[:SS]: the next such
 * local time. The clock is a parameter so tests can drive it.
 */
#ifndef GPUFLEET_TIMEPARSE_H
#define GPUFLEET_TIMEPARSE_H

#include <stdint.h>

int timeparse(const char *, int64_t, int64_t *, char **);
char *timeparse_duration(int64_t);
char *timeparse_duration_exact(int64_t);
int timeparse_next(const char *, int64_t, int64_t *, char **);

#endif

/* One log for gpufleet and the libraries it embeds. */

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "log.h"

static enum log_level log_level = LOG_WARN;

static void log_vmsg(enum log_level, const char *, const char *, va_list)
    __attribute__((format(printf, 3, 0)));

void
log_set_level(enum log_level level)
{
	log_level = level;
}

enum log_level
log_get_level(void)
{
	return log_level;
}

static void
log_vmsg(enum log_level level, const char *func, const char *fmt, va_list ap)
{
	if (level > log_level)
		return;
	fputs("gpufleet: ", stderr);
	if (level == LOG_WARN)
		fputs("warning: ", stderr);
	if (func != NULL && log_level >= LOG_DEBUG)
		fprintf(stderr, "%s: ", func);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
}

void
log_msg(enum log_level level, const char *func, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	log_vmsg(level, func, fmt, ap);
	va_end(ap);
}

void
fatal_impl(const char *func, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	log_vmsg(LOG_ERROR, func, fmt, ap);
	va_end(ap);
	exit(70); /* EX_SOFTWARE: an internal error */
}

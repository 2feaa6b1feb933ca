/* One log for gpufleet and the libraries it embeds. */

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "log.h"
#include "vis.h"
#include "xmalloc.h"

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

/*
 * Write one message line. Messages carry text from remote hosts (banners,
 * libssh errors, agent stderr), so the whole line is escaped for the
 * terminal (vis.c): it stays one line and nothing in it is obeyed.
 */
static void
log_vmsg(enum log_level level, const char *func, const char *fmt, va_list ap)
{
	char *msg, *safe;

	if (level > log_level)
		return;
	xvasprintf(&msg, fmt, ap);
	safe = vis_str(msg);
	fputs("gpufleet: ", stderr);
	if (level == LOG_WARN)
		fputs("warning: ", stderr);
	if (func != NULL && log_level >= LOG_DEBUG)
		fprintf(stderr, "%s: ", func);
	fputs(safe, stderr);
	fputc('\n', stderr);
	free(safe);
	free(msg);
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

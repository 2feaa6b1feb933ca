/* One log for gpufleet and the libraries it embeds. */

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>
#include <libssh/callbacks.h>
#include <libssh/libssh.h>

#include "log.h"
#include "vis.h"
#include "xmalloc.h"

static enum log_level log_level = LOG_WARN;
static FILE *log_file; /* NULL: stderr */
static int log_tee;    /* log_file and stderr */

static void log_vmsg(enum log_level, const char *, const char *, va_list)
    __attribute__((format(printf, 3, 0)));
static void log_libevent(int, const char *);
static void log_libssh(int, const char *, const char *, void *);

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

/* One line on f, which says when when it is the log file. */
static void
log_line(FILE *f, enum log_level level, const char *func, const char *safe)
{
	flockfile(f);
	if (f == log_file) {
		/* A file is read later: each line says when. */
		char when[32];
		struct tm tm;
		time_t now = time(NULL);
		gmtime_r(&now, &tm);
		strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ ", &tm);
		fputs(when, f);
	}
	fputs("gpufleet: ", f);
	if (level == LOG_WARN)
		fputs("warning: ", f);
	if (level == LOG_DEBUG && f == log_file)
		fputs("debug: ", f);
	if (func != NULL && log_level >= LOG_DEBUG)
		fprintf(f, "%s: ", func);
	fputs(safe, f);
	fputc('\n', f);
	if (f == log_file)
		fflush(f);
	funlockfile(f);
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
	log_line(log_file != NULL ? log_file : stderr, level, func, safe);
	if (log_file != NULL && log_tee)
		log_line(stderr, level, func, safe);
	free(safe);
	free(msg);
}

/* With a log file, also write every line to stderr (a daemon in front). */
void
log_tee_stderr(int on)
{
	log_tee = on;
}

/*
 * Send the log to path from now on (appended, created 0600), for a process
 * with no terminal. Returns 0, or -1 with *cause set.
 */
int
log_open_file(const char *path, char **cause)
{
	FILE *f;
	int fd;

	fd = open(
	    path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd == -1 || (f = fdopen(fd, "a")) == NULL) {
		xasprintf(
		    cause, "cannot open log %s: %s", path, strerror(errno));
		if (fd != -1)
			close(fd);
		return -1;
	}
	if (log_file != NULL)
		fclose(log_file);
	log_file = f;
	return 0;
}

/* Back to stderr. */
void
log_close_file(void)
{
	if (log_file != NULL)
		fclose(log_file);
	log_file = NULL;
}

static void
log_libevent(int severity, const char *msg)
{
	enum log_level level = LOG_DEBUG;

	if (severity == EVENT_LOG_ERR)
		level = LOG_ERROR;
	else if (severity == EVENT_LOG_WARN)
		level = LOG_WARN;
	log_msg(level, NULL, "libevent: %s", msg);
}

static void
log_libssh(int priority, const char *func, const char *msg, void *arg)
{
	(void)priority;
	(void)func; /* msg starts with it already */
	(void)arg;
	/* libssh only logs at the verbosity the engine asks for: debugging. */
	log_msg(LOG_DEBUG, NULL, "libssh: %s", msg);
}

/* Route libevent's and libssh's own messages into this log. */
void
log_hook_libraries(void)
{
	event_set_log_callback(log_libevent);
	ssh_set_log_callback(log_libssh);
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

/*
 * Logging. User-facing errors are one line on stderr starting "gpufleet: ";
 * debug lines carry the function name (OpenSSH's debug_f style) and appear
 * with -v or GPUFLEET_DEBUG=1. libevent's and libssh's messages come here
 * too (log_hook_libraries); a process without a terminal (a daemon) sends
 * the log to a file with log_open_file.
 */
#ifndef GPUFLEET_LOG_H
#define GPUFLEET_LOG_H

enum log_level { LOG_QUIET, LOG_ERROR, LOG_WARN, LOG_INFO, LOG_DEBUG };

void log_set_level(enum log_level);
enum log_level log_get_level(void);
int log_open_file(const char *, char **);
void log_close_file(void);
void log_tee_stderr(int);
void log_hook_libraries(void);
void log_msg(enum log_level, const char *, const char *, ...)
    __attribute__((format(printf, 3, 4)));
void fatal_impl(const char *, const char *, ...)
    __attribute__((format(printf, 2, 3), noreturn));

#define error(...)    log_msg(LOG_ERROR, NULL, __VA_ARGS__)
#define warn_msg(...) log_msg(LOG_WARN, NULL, __VA_ARGS__)
#define info(...)     log_msg(LOG_INFO, NULL, __VA_ARGS__)
#define debug_f(...)  log_msg(LOG_DEBUG, __func__, __VA_ARGS__)
#define error_f(...)  log_msg(LOG_ERROR, __func__, __VA_ARGS__)
#define fatal(...)    fatal_impl(NULL, __VA_ARGS__)
#define fatal_f(...)  fatal_impl(__func__, __VA_ARGS__)

#endif

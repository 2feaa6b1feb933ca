/*
 * Small things several files need: XDG paths, mkdir -p, shell quoting and
 * the ~/ rule, reading a secret, capped output buffers, sets of names.
 */
#ifndef GPUFLEET_MISC_H
#define GPUFLEET_MISC_H

#include <sys/types.h>

#include <stddef.h>

/* Output kept up to a cap; data is NUL-terminated once anything came. */
struct misc_buf {
	char *data;
	size_t len;
	size_t size;
	int truncated; /* something beyond the cap was dropped */
};

char *misc_xdg_path(const char *, const char *, const char *);
int misc_mkdirs(const char *, char **);
int misc_write_atomic(const char *, const char *, size_t, char **);
int misc_write_atomic_mode(const char *, const char *, size_t, mode_t, char **);
char *misc_expand_home(const char *);
char *misc_shell_quote(const char *);
char *misc_quote_any_shell(const char *);
char *misc_quote_argv(int, char **);
char *misc_join_argv(int, char **);
char *misc_quote_path(const char *);
void misc_secret_hold(void);
void misc_secret_release(void);
char *misc_read_secret(const char *, const char *, char **);
void misc_signals_defer(void);
void misc_signals_resume(void);
void misc_test_point(const char *);
int misc_pid_gone(long);
void misc_buf_add(struct misc_buf *, const char *, size_t, size_t);
size_t misc_names_add(char ***, size_t *, char *);

#endif

/*
 * Allocation wrappers that abort on out-of-memory, so callers never test for
 * NULL (as in tmux and OpenSSH).
 */
#ifndef GPUFLEET_XMALLOC_H
#define GPUFLEET_XMALLOC_H

#include <stdarg.h>
#include <stddef.h>

void *xmalloc(size_t);
void *xcalloc(size_t, size_t);
void *xreallocarray(void *, size_t, size_t);
char *xstrdup(const char *);
char *xstrndup(const char *, size_t);
int xasprintf(char **, const char *, ...) __attribute__((format(printf, 2, 3)));
int xvasprintf(char **, const char *, va_list)
    __attribute__((format(printf, 2, 0)));
size_t xstrlcpy(char *, const char *, size_t);

#endif

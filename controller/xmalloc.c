/* Allocation wrappers: every failure is fatal, so callers never check. */

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "xmalloc.h"

static void oom(const char *) __attribute__((noreturn));

static void
oom(const char *what)
{
	fprintf(stderr, "gpufleet: out of memory (%s)\n", what);
	abort();
}

void *
xmalloc(size_t size)
{
	void *p;

	if (size == 0)
		size = 1;
	if ((p = malloc(size)) == NULL)
		oom("xmalloc");
	return p;
}

void *
xcalloc(size_t nmemb, size_t size)
{
	void *p;

	if (nmemb == 0 || size == 0)
		nmemb = size = 1;
	if ((p = calloc(nmemb, size)) == NULL)
		oom("xcalloc");
	return p;
}

void *
xreallocarray(void *ptr, size_t nmemb, size_t size)
{
	void *p;

	if (nmemb == 0 || size == 0)
		nmemb = size = 1;
	if (size != 0 && nmemb > SIZE_MAX / size)
		oom("xreallocarray overflow");
	if ((p = realloc(ptr, nmemb * size)) == NULL)
		oom("xreallocarray");
	return p;
}

char *
xstrdup(const char *s)
{
	char *p;

	if ((p = strdup(s)) == NULL)
		oom("xstrdup");
	return p;
}

char *
xstrndup(const char *s, size_t n)
{
	char *p;

	if ((p = strndup(s, n)) == NULL)
		oom("xstrndup");
	return p;
}

int
xvasprintf(char **ret, const char *fmt, va_list ap)
{
	int n;

	if ((n = vasprintf(ret, fmt, ap)) < 0 || *ret == NULL)
		oom("xvasprintf");
	return n;
}

int
xasprintf(char **ret, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = xvasprintf(ret, fmt, ap);
	va_end(ap);
	return n;
}

/* Copy at most size-1 bytes and NUL-terminate; returns strlen(src). */
size_t
xstrlcpy(char *dst, const char *src, size_t size)
{
	size_t len = strlen(src);

	if (size != 0) {
		size_t n = len >= size ? size - 1 : len;
		memcpy(dst, src, n);
		dst[n] = '\0';
	}
	return len;
}

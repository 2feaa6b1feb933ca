/* Growable byte buffers and whole-file reads. */

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent.h"
#include "../controller/xmalloc.h"

/* Append len bytes, keeping the data NUL-terminated. */
void
buf_add(struct buf *b, const void *p, size_t len)
{
	size_t need = b->len + len + 1;

	if (need > b->size) {
		size_t size = b->size == 0 ? 256 : b->size;

		while (size < need)
			size *= 2;
		b->data = xreallocarray(b->data, size, 1);
		b->size = size;
	}
	if (len != 0)
		memcpy(b->data + b->len, p, len);
	b->len += len;
	b->data[b->len] = '\0';
}

/* Append a C string. */
void
buf_addstr(struct buf *b, const char *s)
{
	buf_add(b, s, strlen(s));
}

/* Free the data and empty the buffer. */
void
buf_free(struct buf *b)
{
	free(b->data);
	b->data = NULL;
	b->len = b->size = 0;
}

/*
 * Append at most max bytes of the file at path (all of it when max is 0);
 * returns 0, or -1 with errno set. Reads to EOF, since /proc files report
 * no size.
 */
int
buf_read_file(struct buf *b, const char *path, size_t max)
{
	char chunk[4096];
	size_t got = 0, want;
	ssize_t n;
	int fd, saved;

	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) == -1)
		return -1;
	for (;;) {
		want = sizeof chunk;
		if (max != 0 && max - got < want)
			want = max - got;
		if (want == 0)
			break;
		n = read(fd, chunk, want);
		if (n == -1 && errno == EINTR)
			continue;
		if (n == -1) {
			saved = errno;
			close(fd);
			errno = saved;
			return -1;
		}
		if (n == 0)
			break;
		buf_add(b, chunk, (size_t)n);
		got += (size_t)n;
	}
	close(fd);
	if (b->data == NULL)
		buf_add(b, "", 0);
	return 0;
}

/*
 * The first line of text that is not blank, without surrounding white space
 * or a CR, or NULL. Caller frees.
 */
char *
buf_first_line(const char *text, size_t len)
{
	const char *p = text, *end = text + len, *eol, *s, *e;

	while (p < end) {
		if ((eol = memchr(p, '\n', (size_t)(end - p))) == NULL)
			eol = end;
		s = p;
		e = eol;
		while (s < e && (*s == ' ' || *s == '\t' || *s == '\r'))
			s++;
		while (
		    e > s && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\r'))
			e--;
		if (e > s)
			return xstrndup(s, (size_t)(e - s));
		p = eol + 1;
	}
	return NULL;
}

/* Write all of p to fd; 0, or -1 when it cannot (a reader gone). */
int
buf_write_all(int fd, const void *p, size_t n)
{
	const char *q = p;
	ssize_t k;

	while (n > 0) {
		if ((k = write(fd, q, n)) == -1 && errno == EINTR)
			continue;
		if (k <= 0)
			return -1;
		q += k;
		n -= (size_t)k;
	}
	return 0;
}

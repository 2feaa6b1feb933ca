/*
 * Text from remote hosts made safe to show on a terminal: control
 * characters, escape sequences and invalid UTF-8 are written as visible
 * escapes (as ssh and ls do), valid printable UTF-8 passes unchanged.
 */
#ifndef GPUFLEET_VIS_H
#define GPUFLEET_VIS_H

#include <stddef.h>

/* A stream being escaped: the bytes of a UTF-8 sequence held back. */
struct vis_stream {
	unsigned char held[4];
	size_t nheld;
};

char *vis_buf(const void *, size_t);
char *vis_stream(struct vis_stream *, const void *, size_t, int, size_t *);
char *vis_str(const char *);
int vis_needed(const void *, size_t);

#endif

/*
 * Text from remote hosts made safe to show on a terminal: control
 * characters, escape sequences and invalid UTF-8 are written as visible
 * escapes (as ssh and ls do), valid printable UTF-8 passes unchanged.
 */
#ifndef GPUFLEET_VIS_H
#define GPUFLEET_VIS_H

#include <stddef.h>

char *vis_buf(const void *, size_t);
char *vis_str(const char *);
int vis_needed(const void *, size_t);

#endif

/*
 * A login password for first contact (`add --password`, `keys install`):
 * typed on the terminal without echo, or the first line of a file ("-":
 * standard input); never from argv or the environment. One heap copy,
 * wiped when freed; no core dumps while one is held.
 */
#ifndef GPUFLEET_PASSWORD_H
#define GPUFLEET_PASSWORD_H

char *password_read(const char *, const char *, char **);
void password_free(char *);

#endif

/*
 * The login line a rental platform prints ("ssh -p 38076 root@region-41.
 * seetacloud.com"), read into what `add` stores: host, port, user and key.
 * Pure functions: no files, no network.
 *
 * Read:   -p PORT, -l USER, -i FILE, -o Port/User/HostName/IdentityFile
 *         (as -o K=V, -oK=V, -o "K V"), ssh://[USER@]HOST[:PORT].
 * Noted:  options that do not change where or how gpufleet connects
 *         (-v, -A, -X, -C, -t, -o StrictHostKeyChecking=..., ...) are
 *         skipped and listed in `ignored`.
 * Errors: -J / ProxyJump, ProxyCommand and every other option that changes
 *         where or how one connects, a remote command, shell syntax.
 */
#ifndef GPUFLEET_LOGINLINE_H
#define GPUFLEET_LOGINLINE_H

#include <stddef.h>

struct loginline {
	char *user; /* or NULL */
	char *host;
	int port;	/* 0 when the line gives none */
	char *identity; /* as written, or NULL */
	char *ignored;	/* "-v, -A" skipped options, or NULL */
};

int loginline_split(const char *, char ***, size_t *, char **);
void loginline_free_words(char **, size_t);
int loginline_parse_words(char *const *, size_t, struct loginline *, char **);
int loginline_parse(const char *, struct loginline *, char **);
int loginline_is_line(const char *);
void loginline_clear(struct loginline *);

#endif

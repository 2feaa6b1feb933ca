/*
 * Reading the user's OpenSSH known_hosts files (sshd(8), "SSH_KNOWN_HOSTS
 * FILE FORMAT") for one host: which keys they list for it, plain, @revoked
 * or @cert-authority. Read only, never written. The files are untrusted
 * text: an over-long line, or one that does not parse, is skipped, and at
 * most KNOWNHOSTS_KEYS_MAX keys are kept.
 */
#ifndef GPUFLEET_KNOWNHOSTS_H
#define GPUFLEET_KNOWNHOSTS_H

#include <stddef.h>

#define KNOWNHOSTS_LINE_MAX 8192
#define KNOWNHOSTS_KEYS_MAX 64

enum knownhosts_marker {
	KNOWNHOSTS_PLAIN,
	KNOWNHOSTS_REVOKED, /* @revoked: never accept this key */
	KNOWNHOSTS_CA,	    /* @cert-authority: a host CA, not a host key */
};

struct knownhosts_key {
	enum knownhosts_marker marker;
	char *type;   /* "ssh-ed25519" */
	char *base64; /* the key blob as written */
	char *file;
	int line;
};

struct knownhosts {
	struct knownhosts_key *keys;
	size_t nkeys;
};

char *knownhosts_name(const char *, int);
int knownhosts_parse_line(const char *, const char *, struct knownhosts_key *);
int knownhosts_read(const char *, const char *, struct knownhosts *);
void knownhosts_free(struct knownhosts *);

#endif

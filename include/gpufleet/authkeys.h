/*
 * One authorized_keys line, read the way sshd reads it (OpenSSH
 * auth2-pubkeyfile.c): leading spaces and tabs skipped; a blank line or one
 * starting with '#' holds no key; else a key (TYPE BLOB [COMMENT]) at the
 * start, or else an options field and then the key. The options field ends
 * at the first space or tab outside double quotes, and \" never opens or
 * closes a quote, so quoted options may hold spaces, key types and blobs.
 * TYPE is a name sshd knows (plain, certificate, sk-, or a short name such
 * as "ED25519"). BLOB runs to the next space or tab and is decoded as sshd
 * decodes it (b64_pton: any other space, CR, \v or \f inside is skipped)
 * into a key of the same kind as TYPE, read field by field as sshd reads
 * it (nothing left over). A CR before the line's end is ignored, as is
 * everything from a NUL byte on.
 *
 * Keys are compared by a canonical form of the decoded blob (see
 * authkeys_canon), never by their base64 text: sshd reads many spellings
 * (spaces, leading zeros in mpints, short type names) as one key.
 *
 * Shared by the agent and the controller: no libraries.
 */
#ifndef GPUFLEET_AUTHKEYS_H
#define GPUFLEET_AUTHKEYS_H

#include <stddef.h>

/* A part of a line: offset and length into it (len 0: absent). */
struct authkeys_span {
	size_t off;
	size_t len;
};

struct authkeys_line {
	struct authkeys_span options;
	struct authkeys_span type;
	struct authkeys_span blob;
	struct authkeys_span comment; /* trailing CR excluded */
};

/* What authkeys_parse found on a line. */
#define AUTHKEYS_KEY   1  /* a key, with spans filled */
#define AUTHKEYS_EMPTY 0  /* blank or comment */
#define AUTHKEYS_BAD   -1 /* neither: sshd skips it */

int authkeys_parse(const char *, size_t, struct authkeys_line *);
int authkeys_parse_canon(
    const char *, size_t, struct authkeys_line *, unsigned char **, size_t *);
int authkeys_canon(const char *, size_t, unsigned char **, size_t *);
int authkeys_same_key(const char *, size_t, const char *, size_t);
int authkeys_line_has_key(const char *, size_t, const unsigned char *, size_t);
int authkeys_line_has_blob(const char *, size_t, const char *, size_t);
int authkeys_valid_base64(const char *, size_t);
size_t authkeys_next_line(const char *, size_t, size_t, size_t *);

#endif

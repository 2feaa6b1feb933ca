/*
 * authorized_keys lines as sshd reads them (see gpufleet/authkeys.h). Built
 * into both the agent and the controller, so both sides agree on which key
 * a line holds.
 */

#include <stdint.h>
#include <string.h>
#include <strings.h>

#include "gpufleet/authkeys.h"

/* Kinds of key: a TYPE and the type inside its blob must be of one kind. */
enum kind {
	K_RSA = 1,
	K_DSA,
	K_EC256,
	K_EC384,
	K_EC521,
	K_ED25519,
	K_SK_EC256,
	K_SK_ED25519,
	K_XMSS,
	K_CERT = 16, /* added to a kind for its certificate */
};

struct keytype {
	const char *name;
	int kind;
	int shortname; /* matched without case, plain keys only */
};

static const struct keytype keytypes[] = {
	{ "ssh-rsa", K_RSA, 0 },
	{ "rsa-sha2-256", K_RSA, 0 },
	{ "rsa-sha2-512", K_RSA, 0 },
	{ "ssh-dss", K_DSA, 0 },
	{ "ecdsa-sha2-nistp256", K_EC256, 0 },
	{ "ecdsa-sha2-nistp384", K_EC384, 0 },
	{ "ecdsa-sha2-nistp521", K_EC521, 0 },
	{ "ssh-ed25519", K_ED25519, 0 },
	{ "sk-ecdsa-sha2-nistp256@openssh.com", K_SK_EC256, 0 },
	{ "sk-ssh-ed25519@openssh.com", K_SK_ED25519, 0 },
	{ "ssh-xmss@openssh.com", K_XMSS, 0 },
	{ "ssh-rsa-cert-v01@openssh.com", K_CERT + K_RSA, 0 },
	{ "rsa-sha2-256-cert-v01@openssh.com", K_CERT + K_RSA, 0 },
	{ "rsa-sha2-512-cert-v01@openssh.com", K_CERT + K_RSA, 0 },
	{ "ssh-dss-cert-v01@openssh.com", K_CERT + K_DSA, 0 },
	{ "ecdsa-sha2-nistp256-cert-v01@openssh.com", K_CERT + K_EC256, 0 },
	{ "ecdsa-sha2-nistp384-cert-v01@openssh.com", K_CERT + K_EC384, 0 },
	{ "ecdsa-sha2-nistp521-cert-v01@openssh.com", K_CERT + K_EC521, 0 },
	{ "ssh-ed25519-cert-v01@openssh.com", K_CERT + K_ED25519, 0 },
	{ "sk-ecdsa-sha2-nistp256-cert-v01@openssh.com", K_CERT + K_SK_EC256,
	    0 },
	{ "sk-ssh-ed25519-cert-v01@openssh.com", K_CERT + K_SK_ED25519, 0 },
	{ "ssh-xmss-cert-v01@openssh.com", K_CERT + K_XMSS, 0 },
	/* Short names; "ECDSA" names no curve, so sshd never matches it. */
	{ "RSA", K_RSA, 1 },
	{ "DSA", K_DSA, 1 },
	{ "ED25519", K_ED25519, 1 },
	{ "ECDSA-SK", K_SK_EC256, 1 },
	{ "ED25519-SK", K_SK_ED25519, 1 },
	{ "XMSS", K_XMSS, 1 },
};

/* Longest key type name inside a blob that any kind has. */
#define NAME_MAX_LEN 64

static int type_kind(const char *, size_t, int);
static int b64_value(int);
static int blob_kind(const char *, size_t);
static size_t skip_space(const char *, size_t, size_t);
static int read_key(const char *, size_t, size_t, struct authkeys_line *);

/* The kind of a type name (short names only if allowed), or 0. */
static int
type_kind(const char *s, size_t n, int short_ok)
{
	size_t i, len;

	for (i = 0; i < sizeof keytypes / sizeof keytypes[0]; i++) {
		len = strlen(keytypes[i].name);
		if (len != n)
			continue;
		if (keytypes[i].shortname) {
			if (short_ok &&
			    strncasecmp(s, keytypes[i].name, n) == 0)
				return keytypes[i].kind;
		} else if (memcmp(s, keytypes[i].name, n) == 0)
			return keytypes[i].kind;
	}
	return 0;
}

/* The value of a base64 character, or -1. */
static int
b64_value(int c)
{
	if (c >= 'A' && c <= 'Z')
		return c - 'A';
	if (c >= 'a' && c <= 'z')
		return c - 'a' + 26;
	if (c >= '0' && c <= '9')
		return c - '0' + 52;
	if (c == '+')
		return 62;
	if (c == '/')
		return 63;
	return -1;
}

/*
 * Is s strict base64: whole quartets, '=' only as padding at the end and
 * the bits it leaves over zero (so one key has one spelling)? 1 or 0.
 */
int
authkeys_valid_base64(const char *s, size_t n)
{
	size_t i, pad = 0;
	int v;

	if (n == 0 || n % 4 != 0)
		return 0;
	if (s[n - 1] == '=')
		pad = s[n - 2] == '=' ? 2 : 1;
	for (i = 0; i < n - pad; i++) {
		if (b64_value((unsigned char)s[i]) < 0)
			return 0;
	}
	if (pad == 0)
		return 1;
	v = b64_value((unsigned char)s[n - pad - 1]);
	return pad == 2 ? (v & 0x0f) == 0 : (v & 0x03) == 0;
}

/*
 * The kind of the key type named at the start of a base64 blob (a
 * uint32 length and the name), or 0 if it is not valid base64 or names no
 * known type.
 */
static int
blob_kind(const char *s, size_t n)
{
	unsigned char out[4 + NAME_MAX_LEN];
	size_t i, o = 0, want = 4;
	uint32_t acc = 0, len;
	int bits = 0, v;

	if (!authkeys_valid_base64(s, n))
		return 0;
	for (i = 0; i < n && s[i] != '=' && o < want; i++) {
		v = b64_value((unsigned char)s[i]);
		acc = (acc << 6) | (uint32_t)v;
		bits += 6;
		if (bits >= 8) {
			bits -= 8;
			out[o++] = (unsigned char)(acc >> bits);
			acc &= (1U << bits) - 1;
			if (o == 4) {
				len = (uint32_t)out[0] << 24 |
				    (uint32_t)out[1] << 16 |
				    (uint32_t)out[2] << 8 | out[3];
				if (len == 0 || len > NAME_MAX_LEN)
					return 0;
				want = 4 + len;
			}
		}
	}
	if (o < want)
		return 0;
	return type_kind((const char *)out + 4, want - 4, 0);
}

/* The first offset from i that is not a space or tab. */
static size_t
skip_space(const char *s, size_t n, size_t i)
{
	while (i < n && (s[i] == ' ' || s[i] == '\t'))
		i++;
	return i;
}

/*
 * Read "TYPE BLOB [COMMENT]" at offset i, as sshkey_read does: a known
 * TYPE followed by a space or tab, then a blob of the same kind. 0 with
 * the spans set, or -1.
 */
static int
read_key(const char *s, size_t n, size_t i, struct authkeys_line *l)
{
	size_t t = i, te, b;
	int kind;

	while (i < n && s[i] != ' ' && s[i] != '\t')
		i++;
	te = i;
	if (i == n || (kind = type_kind(s + t, te - t, 1)) == 0)
		return -1;
	if ((i = skip_space(s, n, i)) == n)
		return -1;
	b = i;
	while (i < n && s[i] != ' ' && s[i] != '\t')
		i++;
	if (blob_kind(s + b, i - b) != kind)
		return -1;
	l->type.off = t;
	l->type.len = te - t;
	l->blob.off = b;
	l->blob.len = i - b;
	i = skip_space(s, n, i);
	l->comment.off = i;
	l->comment.len = n - i;
	return 0;
}

/*
 * Parse one line of len bytes (without its '\n'): AUTHKEYS_KEY with *l
 * set, AUTHKEYS_EMPTY for a blank or comment line, AUTHKEYS_BAD for a line
 * that holds no key sshd would accept.
 */
int
authkeys_parse(const char *s, size_t len, struct authkeys_line *l)
{
	size_t n, i, o;
	int quoted = 0;

	memset(l, 0, sizeof *l);
	n = strnlen(s, len);
	while (n > 0 && (s[n - 1] == '\r' || s[n - 1] == '\n'))
		n--;
	i = skip_space(s, n, 0);
	if (i == n || s[i] == '#')
		return AUTHKEYS_EMPTY;
	if (read_key(s, n, i, l) == 0)
		return AUTHKEYS_KEY;
	/* No key first: an options field, then the key. */
	for (o = i; o < n && (quoted || (s[o] != ' ' && s[o] != '\t')); o++) {
		if (s[o] == '\\' && o + 1 < n && s[o + 1] == '"')
			o++;
		else if (s[o] == '"')
			quoted = !quoted;
	}
	if (quoted)
		return AUTHKEYS_BAD;
	if (read_key(s, n, skip_space(s, n, o), l) != 0) {
		memset(l, 0, sizeof *l);
		return AUTHKEYS_BAD;
	}
	l->options.off = i;
	l->options.len = o - i;
	return AUTHKEYS_KEY;
}

/* Does the line hold the key with this base64 blob (as its key, not in an
 * option)? 1 or 0. */
int
authkeys_line_has_blob(
    const char *s, size_t len, const char *blob, size_t bloblen)
{
	struct authkeys_line l;

	return authkeys_parse(s, len, &l) == AUTHKEYS_KEY &&
	    l.blob.len == bloblen && memcmp(s + l.blob.off, blob, bloblen) == 0;
}

/*
 * The line of buf starting at off: sets *linelen to its length without
 * the '\n' and returns where the next line starts (len after the last).
 */
size_t
authkeys_next_line(const char *buf, size_t len, size_t off, size_t *linelen)
{
	const char *nl = memchr(buf + off, '\n', len - off);

	if (nl == NULL) {
		*linelen = len - off;
		return len;
	}
	*linelen = (size_t)(nl - (buf + off));
	return off + *linelen + 1;
}

/*
 * authorized_keys lines as sshd reads them (see gpufleet/authkeys.h). Built
 * into both the agent and the controller, so both sides agree on which key
 * a line holds.
 */

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "gpufleet/authkeys.h"
#include "../controller/xmalloc.h"

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
	{ "webauthn-sk-ecdsa-sha2-nistp256@openssh.com", K_SK_EC256, 0 },
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

/* Largest bignum sshd reads, in bytes (SSHBUF_MAX_BIGNUM). */
#define MPINT_MAX 2048
/* Smallest RSA modulus sshd reads, in bits. */
#define RSA_MIN_BITS 1024
/* Most a canonical form grows over the decoded blob (a short type name). */
#define CANON_SLACK 64

/* A decoded blob being read. */
struct wire {
	const unsigned char *p;
	size_t len;
	size_t off;
};

/* A canonical form being written; bad once it would overflow. */
struct canon {
	unsigned char *p;
	size_t len;
	size_t size;
	int bad;
};

static int type_kind(const char *, size_t, int);
static int b64_value(int);
static int is_space(int);
static int b64_decode(const char *, size_t, unsigned char *, size_t *);
static int get_string(struct wire *, const unsigned char **, size_t *);
static int get_cstring(struct wire *, const unsigned char **, size_t *);
static int get_mpint(struct wire *, const unsigned char **, size_t *);
static int skip_bytes(struct wire *, size_t);
static void put_bytes(struct canon *, const void *, size_t);
static void put_string(struct canon *, const void *, size_t);
static void put_mpint(struct canon *, const unsigned char *, size_t);
static const char *kind_name(int);
static int blob_type(const unsigned char *, size_t);
static int put_ec(struct wire *, int, struct canon *);
static int key_fields(struct wire *, int, struct canon *);
static int cert_fields(struct wire *, int, struct canon *);
static int canon_kind(const char *, size_t, unsigned char **, size_t *);
static size_t skip_space(const char *, size_t, size_t);
static int read_key(const char *, size_t, size_t, struct authkeys_line *,
    unsigned char **, size_t *);

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

/* Is c a space to sshd's base64 decoder (isspace in the C locale)? */
static int
is_space(int c)
{
	return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' ||
	    c == '\r';
}

/*
 * Decode base64 as sshd does (b64_pton): spaces anywhere are skipped,
 * quartets must be whole, '=' pads only at the end (spaces may come
 * between and after the pads) and the bits it leaves over must be zero.
 * out holds at least n bytes. 0 with *outlen set, or -1.
 */
static int
b64_decode(const char *s, size_t n, unsigned char *out, size_t *outlen)
{
	size_t i, o = 0;
	unsigned int acc = 0;
	int bits = 0, state = 0, v;

	for (i = 0; i < n && s[i] != '='; i++) {
		if (is_space((unsigned char)s[i]))
			continue;
		if ((v = b64_value((unsigned char)s[i])) < 0)
			return -1;
		acc = (acc << 6 | (unsigned int)v) & 0xfff;
		bits += 6;
		if (bits >= 8) {
			bits -= 8;
			out[o++] = (unsigned char)(acc >> bits);
		}
		state = (state + 1) % 4;
	}
	if (i < n) {
		if (state < 2)
			return -1;
		if (state == 2) {
			for (i++; i < n && is_space((unsigned char)s[i]); i++)
				;
			if (i == n || s[i] != '=')
				return -1;
		}
		for (i++; i < n; i++) {
			if (!is_space((unsigned char)s[i]))
				return -1;
		}
		if ((acc & ((1U << bits) - 1)) != 0)
			return -1;
	} else if (state != 0)
		return -1;
	*outlen = o;
	return 0;
}

/* Read an SSH string (uint32 length, bytes): 0, or -1 if cut short. */
static int
get_string(struct wire *w, const unsigned char **v, size_t *vlen)
{
	const unsigned char *p = w->p + w->off;
	uint32_t len;

	if (w->len - w->off < 4)
		return -1;
	len = (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 |
	    (uint32_t)p[2] << 8 | p[3];
	if (len > w->len - w->off - 4)
		return -1;
	*v = p + 4;
	*vlen = len;
	w->off += 4 + (size_t)len;
	return 0;
}

/*
 * Read a string as sshd reads a C string: a NUL only as its last byte,
 * which is dropped. 0 or -1.
 */
static int
get_cstring(struct wire *w, const unsigned char **v, size_t *vlen)
{
	const unsigned char *z;

	if (get_string(w, v, vlen) != 0)
		return -1;
	if (*vlen > 0 && (z = memchr(*v, '\0', *vlen)) != NULL) {
		if (z != *v + *vlen - 1)
			return -1;
		(*vlen)--;
	}
	return 0;
}

/*
 * Read an mpint as sshd does (sshbuf_get_bignum2_bytes_direct): never
 * negative, at most MPINT_MAX bytes after one leading zero; the value
 * without its leading zero bytes in *v. 0 or -1.
 */
static int
get_mpint(struct wire *w, const unsigned char **v, size_t *vlen)
{
	if (get_string(w, v, vlen) != 0)
		return -1;
	if (*vlen > 0 && ((*v)[0] & 0x80) != 0)
		return -1;
	if (*vlen > MPINT_MAX + 1 || (*vlen == MPINT_MAX + 1 && (*v)[0] != 0))
		return -1;
	while (*vlen > 0 && (*v)[0] == 0) {
		(*v)++;
		(*vlen)--;
	}
	return 0;
}

/* Skip n bytes (a fixed-size field): 0, or -1 if cut short. */
static int
skip_bytes(struct wire *w, size_t n)
{
	if (w->len - w->off < n)
		return -1;
	w->off += n;
	return 0;
}

/* Append n bytes of v to c (or mark it bad if they do not fit). */
static void
put_bytes(struct canon *c, const void *v, size_t n)
{
	if (c->bad || c->size - c->len < n) {
		c->bad = 1;
		return;
	}
	if (n > 0)
		memcpy(c->p + c->len, v, n);
	c->len += n;
}

/* Write an SSH string: a uint32 length n, then n bytes of v. */
static void
put_string(struct canon *c, const void *v, size_t n)
{
	unsigned char len[4];

	len[0] = (unsigned char)(n >> 24);
	len[1] = (unsigned char)(n >> 16);
	len[2] = (unsigned char)(n >> 8);
	len[3] = (unsigned char)n;
	put_bytes(c, len, 4);
	put_bytes(c, v, n);
}

/*
 * Write an mpint of value v (no leading zeros) in its one minimal form:
 * a zero byte first only where the top bit is set.
 */
static void
put_mpint(struct canon *c, const unsigned char *v, size_t n)
{
	unsigned char *w;

	if (n == 0 || (v[0] & 0x80) == 0) {
		put_string(c, v, n);
		return;
	}
	w = xmalloc(n + 1);
	w[0] = 0;
	memcpy(w + 1, v, n);
	put_string(c, w, n + 1);
	free(w);
}

/* The full name sshd writes for a kind (its first in keytypes). */
static const char *
kind_name(int kind)
{
	size_t i;

	for (i = 0; i < sizeof keytypes / sizeof keytypes[0]; i++) {
		if (keytypes[i].kind == kind && !keytypes[i].shortname)
			return keytypes[i].name;
	}
	return "";
}

/*
 * The kind named by the type string inside a blob, as sshd's
 * sshkey_type_from_name and the key readers take it: a full name, or a
 * short one (any case) for a plain key whose reader ignores the name;
 * the ECDSA readers look the curve up by the full name. 0 if none.
 */
static int
blob_type(const unsigned char *name, size_t n)
{
	int kind;

	if ((kind = type_kind((const char *)name, n, 0)) != 0)
		return kind;
	kind = type_kind((const char *)name, n, 1);
	if (kind == K_EC256 || kind == K_EC384 || kind == K_EC521 ||
	    kind == K_SK_EC256)
		return 0;
	return kind;
}

/*
 * An ECDSA key's curve name (which must be the kind's) and point (only
 * uncompressed, of the curve's size), copied to c. 0 or -1. sshd also
 * checks that the point lies on the curve; this does not.
 */
static int
put_ec(struct wire *w, int kind, struct canon *c)
{
	const unsigned char *v;
	const char *curve = "nistp256";
	size_t vl, plen = 65;

	if (kind == K_EC384) {
		curve = "nistp384";
		plen = 97;
	} else if (kind == K_EC521) {
		curve = "nistp521";
		plen = 133;
	}
	if (get_cstring(w, &v, &vl) != 0 || vl != strlen(curve) ||
	    memcmp(v, curve, vl) != 0)
		return -1;
	put_string(c, curve, vl);
	if (get_string(w, &v, &vl) != 0 || vl != plen || v[0] != 0x04)
		return -1;
	put_string(c, v, vl);
	return 0;
}

/*
 * Read the public fields of a plain key of this kind, as sshd's
 * deserialize_public functions do, and write them to c in their one
 * canonical form (mpints without extra leading zeros). 0 or -1.
 */
static int
key_fields(struct wire *w, int kind, struct canon *c)
{
	const unsigned char *v;
	size_t vl, i, bits;

	switch (kind) {
	case K_RSA:
	case K_DSA:
		for (i = 0; i < (kind == K_RSA ? 2U : 4U); i++) {
			if (get_mpint(w, &v, &vl) != 0)
				return -1;
			put_mpint(c, v, vl);
		}
		if (kind == K_DSA)
			return 0;
		/* RSA: the modulus, last read, has at least RSA_MIN_BITS. */
		bits = vl * 8;
		for (i = 0x80; vl > 0 && i > 0 && (v[0] & i) == 0; i >>= 1)
			bits--;
		return bits < RSA_MIN_BITS ? -1 : 0;
	case K_EC256:
	case K_EC384:
	case K_EC521:
		return put_ec(w, kind, c);
	case K_SK_EC256:
		if (put_ec(w, kind, c) != 0)
			return -1;
		break;
	case K_ED25519:
	case K_SK_ED25519:
		if (get_string(w, &v, &vl) != 0 || vl != 32)
			return -1;
		put_string(c, v, vl);
		if (kind == K_ED25519)
			return 0;
		break;
	case K_XMSS:
		if (get_cstring(w, &v, &vl) != 0)
			return -1;
		put_string(c, v, vl);
		if (get_string(w, &v, &vl) != 0)
			return -1;
		put_string(c, v, vl);
		return 0;
	default:
		return -1;
	}
	/* sk- keys: the application string. */
	if (get_cstring(w, &v, &vl) != 0)
		return -1;
	put_string(c, v, vl);
	return 0;
}

/*
 * Read the rest of a certificate (after its type name) as sshd's
 * sshkey_from_blob_internal and cert_parse lay it out: nonce, the key's
 * fields, serial, type, key id, principals, validity, critical options,
 * extensions, reserved, signature key, signature. 0 or -1. The fields go
 * to c only to be checked; a certificate's canonical form is its bytes.
 */
static int
cert_fields(struct wire *w, int kind, struct canon *c)
{
	const unsigned char *v;
	size_t vl;
	int i;

	if (get_string(w, &v, &vl) != 0 ||
	    key_fields(w, kind - K_CERT, c) != 0 || skip_bytes(w, 8 + 4) != 0 ||
	    get_cstring(w, &v, &vl) != 0 || get_string(w, &v, &vl) != 0 ||
	    skip_bytes(w, 8 + 8) != 0)
		return -1;
	for (i = 0; i < 5; i++) {
		if (get_string(w, &v, &vl) != 0)
			return -1;
	}
	return 0;
}

/*
 * The canonical form of the key in a base64 blob, decoded as sshd decodes
 * it: for a plain key its wire form rewritten with the kind's full type
 * name and minimal mpints, so that every spelling sshd reads as one key
 * has one form; for a certificate its decoded bytes. Returns the key's
 * kind with *out (caller frees) and *outlen set, or 0 (nothing set) if
 * sshd would read no key from it, trailing bytes included.
 */
static int
canon_kind(const char *b64, size_t n, unsigned char **out, size_t *outlen)
{
	struct wire w;
	struct canon c;
	unsigned char *dec;
	const unsigned char *name;
	size_t dlen, nlen;
	int kind = 0;

	dec = xmalloc(n + 1);
	memset(&c, 0, sizeof c);
	if (b64_decode(b64, n, dec, &dlen) != 0)
		goto out;
	w.p = dec;
	w.len = dlen;
	w.off = 0;
	c.size = dlen + CANON_SLACK;
	c.p = xmalloc(c.size);
	if (get_cstring(&w, &name, &nlen) != 0 ||
	    (kind = blob_type(name, nlen)) == 0)
		goto out;
	put_string(&c, kind_name(kind), strlen(kind_name(kind)));
	if (kind >= K_CERT) {
		if (cert_fields(&w, kind, &c) != 0)
			kind = 0;
		c.len = 0;
		put_bytes(&c, dec, dlen);
	} else if (key_fields(&w, kind, &c) != 0)
		kind = 0;
	if (w.off != w.len || c.bad)
		kind = 0;
out:
	free(dec);
	if (kind == 0) {
		free(c.p);
		return 0;
	}
	*out = c.p;
	*outlen = c.len;
	return kind;
}

/*
 * The canonical form of the key in a base64 blob (see canon_kind): 0 with
 * *out (caller frees) and *outlen set, or -1 if it holds no key sshd reads.
 */
int
authkeys_canon(const char *b64, size_t n, unsigned char **out, size_t *outlen)
{
	return canon_kind(b64, n, out, outlen) != 0 ? 0 : -1;
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
 * TYPE followed by a space or tab, then a blob (up to the next space or
 * tab, whatever else it holds) of the same kind. 0 with the spans set
 * and, if canon is not NULL, the blob's canonical form in *canon (caller
 * frees) and *canonlen; or -1.
 */
static int
read_key(const char *s, size_t n, size_t i, struct authkeys_line *l,
    unsigned char **canon, size_t *canonlen)
{
	unsigned char *c;
	size_t t = i, te, b, cl;
	int kind, bkind;

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
	if ((bkind = canon_kind(s + b, i - b, &c, &cl)) == 0)
		return -1;
	if (bkind != kind) {
		free(c);
		return -1;
	}
	if (canon != NULL) {
		*canon = c;
		*canonlen = cl;
	} else
		free(c);
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
 * set and, if canon is not NULL, the canonical form of its key in *canon
 * (caller frees) and *canonlen (see authkeys_canon); AUTHKEYS_EMPTY for a
 * blank or comment line, AUTHKEYS_BAD for a line that holds no key sshd
 * would accept.
 */
int
authkeys_parse_canon(const char *s, size_t len, struct authkeys_line *l,
    unsigned char **canon, size_t *canonlen)
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
	if (read_key(s, n, i, l, canon, canonlen) == 0)
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
	if (read_key(s, n, skip_space(s, n, o), l, canon, canonlen) != 0) {
		memset(l, 0, sizeof *l);
		return AUTHKEYS_BAD;
	}
	l->options.off = i;
	l->options.len = o - i;
	return AUTHKEYS_KEY;
}

/* authkeys_parse_canon without the canonical form. */
int
authkeys_parse(const char *s, size_t len, struct authkeys_line *l)
{
	return authkeys_parse_canon(s, len, l, NULL, NULL);
}

/*
 * Does the line hold, as its key (not in an option), the key whose
 * canonical form is canon? 1 or 0.
 */
int
authkeys_line_has_key(
    const char *s, size_t len, const unsigned char *canon, size_t canonlen)
{
	struct authkeys_line l;
	unsigned char *c;
	size_t cl;
	int same;

	if (authkeys_parse_canon(s, len, &l, &c, &cl) != AUTHKEYS_KEY)
		return 0;
	same = cl == canonlen && memcmp(c, canon, cl) == 0;
	free(c);
	return same;
}

/*
 * Does the line hold the key of this base64 blob (any spelling sshd reads
 * as that key) as its key, not in an option? 1 or 0.
 */
int
authkeys_line_has_blob(
    const char *s, size_t len, const char *blob, size_t bloblen)
{
	unsigned char *c;
	size_t cl;
	int r;

	if (authkeys_canon(blob, bloblen, &c, &cl) != 0)
		return 0;
	r = authkeys_line_has_key(s, len, c, cl);
	free(c);
	return r;
}

/*
 * Are two base64 blobs the same key (equal canonical forms)? 1, or 0 if
 * not or if either holds no key.
 */
int
authkeys_same_key(const char *a, size_t alen, const char *b, size_t blen)
{
	unsigned char *ca, *cb;
	size_t la, lb;
	int same = 0;

	if (authkeys_canon(a, alen, &ca, &la) != 0)
		return 0;
	if (authkeys_canon(b, blen, &cb, &lb) == 0) {
		same = la == lb && memcmp(ca, cb, la) == 0;
		free(cb);
	}
	free(ca);
	return same;
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

/* SHA-256, HMAC-SHA256 and base64, written from FIPS 180-4 and RFC 2104. */

#include <string.h>

#include "gpufleet/hmac.h"

static void compress(struct hmac_sha256_ctx *, const unsigned char *);

static const uint32_t k[64] = { 0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5,
	0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5, 0xd807aa98, 0x12835b01,
	0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
	0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa,
	0x5cb0a9dc, 0x76f988da, 0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7,
	0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138,
	0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
	0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624,
	0xf40e3585, 0x106aa070, 0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5,
	0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3, 0x748f82ee, 0x78a5636f,
	0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7,
	0xc67178f2 };

#define ROR(x, n) (((x) >> (n)) | ((x) << (32 - (n))))

/* One 64-byte block into the state. */
static void
compress(struct hmac_sha256_ctx *c, const unsigned char *p)
{
	uint32_t w[64], a, b, cc, d, e, f, g, h, t1, t2;
	int i;

	for (i = 0; i < 16; i++)
		w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 |
		    (uint32_t)p[4 * i + 2] << 8 | (uint32_t)p[4 * i + 3];
	for (i = 16; i < 64; i++)
		w[i] =
		    (ROR(w[i - 2], 17) ^ ROR(w[i - 2], 19) ^ (w[i - 2] >> 10)) +
		    w[i - 7] +
		    (ROR(w[i - 15], 7) ^ ROR(w[i - 15], 18) ^
			(w[i - 15] >> 3)) +
		    w[i - 16];
	a = c->h[0];
	b = c->h[1];
	cc = c->h[2];
	d = c->h[3];
	e = c->h[4];
	f = c->h[5];
	g = c->h[6];
	h = c->h[7];
	for (i = 0; i < 64; i++) {
		t1 = h + (ROR(e, 6) ^ ROR(e, 11) ^ ROR(e, 25)) +
		    ((e & f) ^ (~e & g)) + k[i] + w[i];
		t2 = (ROR(a, 2) ^ ROR(a, 13) ^ ROR(a, 22)) +
		    ((a & b) ^ (a & cc) ^ (b & cc));
		h = g;
		g = f;
		f = e;
		e = d + t1;
		d = cc;
		cc = b;
		b = a;
		a = t1 + t2;
	}
	c->h[0] += a;
	c->h[1] += b;
	c->h[2] += cc;
	c->h[3] += d;
	c->h[4] += e;
	c->h[5] += f;
	c->h[6] += g;
	c->h[7] += h;
}

void
hmac_sha256_init(struct hmac_sha256_ctx *c)
{
	static const uint32_t iv[8] = { 0x6a09e667, 0xbb67ae85, 0x3c6ef372,
		0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19 };

	memset(c, 0, sizeof *c);
	memcpy(c->h, iv, sizeof iv);
}

void
hmac_sha256_update(struct hmac_sha256_ctx *c, const void *data, size_t len)
{
	const unsigned char *p = data;
	size_t n;

	c->len += len;
	while (len > 0) {
		n = 64 - c->used < len ? 64 - c->used : len;
		memcpy(c->block + c->used, p, n);
		c->used += n;
		p += n;
		len -= n;
		if (c->used == 64) {
			compress(c, c->block);
			c->used = 0;
		}
	}
}

/* The digest (32 bytes) into out; the context is wiped. */
void
hmac_sha256_final(struct hmac_sha256_ctx *c, unsigned char *out)
{
	uint64_t bits = c->len * 8;
	unsigned char pad[72];
	size_t padlen;
	int i;

	memset(pad, 0, sizeof pad);
	pad[0] = 0x80;
	padlen = c->used < 56 ? 56 - c->used : 120 - c->used;
	for (i = 0; i < 8; i++)
		pad[padlen + i] = (unsigned char)(bits >> (56 - 8 * i));
	hmac_sha256_update(c, pad, padlen + 8);
	for (i = 0; i < 8; i++) {
		out[4 * i] = (unsigned char)(c->h[i] >> 24);
		out[4 * i + 1] = (unsigned char)(c->h[i] >> 16);
		out[4 * i + 2] = (unsigned char)(c->h[i] >> 8);
		out[4 * i + 3] = (unsigned char)c->h[i];
	}
	memset(c, 0, sizeof *c);
}

/* SHA-256 of data in one call. */
void
hmac_sha256_digest(const void *data, size_t len, unsigned char *out)
{
	struct hmac_sha256_ctx c;

	hmac_sha256_init(&c);
	hmac_sha256_update(&c, data, len);
	hmac_sha256_final(&c, out);
}

/* HMAC-SHA256 of msg under key (RFC 2104: a key longer than the block is
   hashed first) into out (32 bytes). */
void
hmac_sha256(const void *key, size_t keylen, const void *msg, size_t msglen,
    unsigned char *out)
{
	struct hmac_sha256_ctx c;
	unsigned char kb[64], pad[64], inner[HMAC_SHA256_LEN];
	size_t i;

	memset(kb, 0, sizeof kb);
	if (keylen > sizeof kb)
		hmac_sha256_digest(key, keylen, kb);
	else if (keylen > 0)
		memcpy(kb, key, keylen);
	for (i = 0; i < sizeof pad; i++)
		pad[i] = kb[i] ^ 0x36;
	hmac_sha256_init(&c);
	hmac_sha256_update(&c, pad, sizeof pad);
	hmac_sha256_update(&c, msg, msglen);
	hmac_sha256_final(&c, inner);
	for (i = 0; i < sizeof pad; i++)
		pad[i] = kb[i] ^ 0x5c;
	hmac_sha256_init(&c);
	hmac_sha256_update(&c, pad, sizeof pad);
	hmac_sha256_update(&c, inner, sizeof inner);
	hmac_sha256_final(&c, out);
	memset(kb, 0, sizeof kb);
	memset(pad, 0, sizeof pad);
	memset(inner, 0, sizeof inner);
}

/*
 * base64 of len bytes into out (size bytes, NUL-terminated). Returns the
 * length written, or 0 when out is too small (4 * ceil(len / 3) + 1).
 */
size_t
hmac_base64(const unsigned char *in, size_t len, char *out, size_t size)
{
	static const char a[] =
	    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	size_t i, o = 0, need = (len + 2) / 3 * 4 + 1;
	uint32_t v;

	if (size < need)
		return 0;
	for (i = 0; i + 2 < len; i += 3) {
		v = (uint32_t)in[i] << 16 | (uint32_t)in[i + 1] << 8 |
		    in[i + 2];
		out[o++] = a[v >> 18];
		out[o++] = a[(v >> 12) & 63];
		out[o++] = a[(v >> 6) & 63];
		out[o++] = a[v & 63];
	}
	if (i < len) {
		v = (uint32_t)in[i] << 16;
		if (i + 1 < len)
			v |= (uint32_t)in[i + 1] << 8;
		out[o++] = a[v >> 18];
		out[o++] = a[(v >> 12) & 63];
		out[o++] = i + 1 < len ? a[(v >> 6) & 63] : '=';
		out[o++] = '=';
	}
	out[o] = '\0';
	return o;
}

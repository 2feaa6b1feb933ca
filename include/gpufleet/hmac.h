/*
 * SHA-256 (FIPS 180-4), HMAC-SHA256 (RFC 2104) and base64 (RFC 4648, with
 * padding): what webhook signing needs (Feishu, DingTalk), with no library,
 * so that the static agent can sign too. Shared by the agent and the
 * controller.
 */
#ifndef GPUFLEET_HMAC_H
#define GPUFLEET_HMAC_H

#include <stddef.h>
#include <stdint.h>

#define HMAC_SHA256_LEN 32

struct hmac_sha256_ctx {
	uint32_t h[8];
	uint64_t len; /* bytes hashed so far */
	unsigned char block[64];
	size_t used; /* bytes in block */
};

void hmac_sha256_init(struct hmac_sha256_ctx *);
void hmac_sha256_update(struct hmac_sha256_ctx *, const void *, size_t);
void hmac_sha256_final(struct hmac_sha256_ctx *, unsigned char *);
void hmac_sha256_digest(const void *, size_t, unsigned char *);
void hmac_sha256(const void *, size_t, const void *, size_t, unsigned char *);
size_t hmac_base64(const unsigned char *, size_t, char *, size_t);

#endif

/*
 * libFuzzer entry: the authorized_keys line parser both sides share, and
 * the agent's edit made with it. Aborts where a property breaks: every
 * span lies inside its line, a key's blob has a canonical form that is the
 * one authkeys_parse_canon gives, is found again by authkeys_line_has_blob
 * and is the same key as itself, and an edit leaves no line with the removed
 * key, has the added one, and changes nothing when run again.
 */

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "agent.h"
#include "gpufleet/authkeys.h"

#define NEW                                                                    \
	"ssh-ed25519 "                                                         \
	"AAAAC3NzaC1lZDI1NTE5AAAAIF1hn2DMMbB0x9e4vnDBXyb1Rf9K0HbnG0cQA3gnQXbh" \
	" n"
#define OLD                                                                    \
	"AAAAC3NzaC1lZDI1NTE5AAAAIDEvK1fpksulwHA6JHVHY3aoM90PEdEB4zeL2VO0T9P6"

int LLVMFuzzerTestOneInput(const uint8_t *, size_t);

/* Check one line's parse; abort on a broken property. */
static void
check_line(const char *s, size_t len)
{
	struct authkeys_line l;
	const struct authkeys_span *sp[4];
	unsigned char *c, *c2;
	size_t cl, cl2;
	int r = authkeys_parse(s, len, &l), i;

	if (r != AUTHKEYS_KEY)
		return;
	sp[0] = &l.options;
	sp[1] = &l.type;
	sp[2] = &l.blob;
	sp[3] = &l.comment;
	for (i = 0; i < 4; i++) {
		if (sp[i]->off > len || sp[i]->len > len - sp[i]->off)
			abort();
	}
	if (l.type.len == 0 ||
	    authkeys_parse_canon(s, len, &l, &c, &cl) != AUTHKEYS_KEY)
		abort();
	if (authkeys_canon(s + l.blob.off, l.blob.len, &c2, &cl2) != 0 ||
	    cl2 != cl || memcmp(c, c2, cl) != 0 ||
	    !authkeys_line_has_blob(s, len, s + l.blob.off, l.blob.len) ||
	    !authkeys_line_has_key(s, len, c, cl) ||
	    !authkeys_same_key(
		s + l.blob.off, l.blob.len, s + l.blob.off, l.blob.len))
		abort();
	free(c);
	free(c2);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *text = (const char *)data;
	struct akedit e = { NEW, OLD, OLD };
	struct buf out, again;
	size_t off, next, ll;

	for (off = 0; off < size; off = next) {
		next = authkeys_next_line(text, size, off, &ll);
		check_line(text + off, ll);
	}
	memset(&out, 0, sizeof out);
	memset(&again, 0, sizeof again);
	if (akedit_apply(text, size, &e, &out) < 0)
		abort();
	if (!akedit_done(out.data, out.len, &e) ||
	    akedit_apply(out.data, out.len, &e, &again) != 0 ||
	    again.len != out.len || memcmp(again.data, out.data, out.len) != 0)
		abort();
	buf_free(&out);
	buf_free(&again);
	return 0;
}

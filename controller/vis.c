/*
 * Escaping of untrusted text for terminals.  Everything an instance sends
 * (banners, progress lines, GPU and process names, error text) goes through
 * here before it reaches a table or a message.
 *
 * Kept as is: printable ASCII and well-formed UTF-8 of printable code points.
 * Escaped: backslash as \\, the C escapes \a \b \t \n \v \f \r, ESC as \e,
 * every other C0 control, DEL, C1 controls (U+0080-U+009F, which some
 * terminals obey as CSI/OSC), the invisible format characters of
 * vis_hidden (bidi controls, zero-width characters) and each byte of
 * invalid UTF-8, each byte as \xHH.
 */

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "vis.h"
#include "xmalloc.h"

static int vis_hidden(uint32_t);
static size_t vis_utf8_len(const unsigned char *, size_t);
static char *vis_escape(const void *, size_t, int);

/*
 * Format characters that change what a terminal shows without being seen:
 * bidi marks, embeddings, overrides and isolates (which reorder a line, as
 * in "Trojan Source"), zero-width spaces and joiners, the word joiner and
 * invisible operators, and the BOM.
 */
static int
vis_hidden(uint32_t cp)
{
	return cp == 0x061c || (cp >= 0x200b && cp <= 0x200f) ||
	    (cp >= 0x202a && cp <= 0x202e) || (cp >= 0x2060 && cp <= 0x2064) ||
	    (cp >= 0x2066 && cp <= 0x2069) || cp == 0xfeff;
}

/* Length of the well-formed, printable UTF-8 sequence at p, or 0. */
static size_t
vis_utf8_len(const unsigned char *p, size_t left)
{
	uint32_t cp;
	size_t n, i;

	if (p[0] < 0xc2)
		return 0;
	if (p[0] < 0xe0) {
		n = 2;
		cp = p[0] & 0x1f;
	} else if (p[0] < 0xf0) {
		n = 3;
		cp = p[0] & 0x0f;
	} else if (p[0] < 0xf5) {
		n = 4;
		cp = p[0] & 0x07;
	} else
		return 0;
	if (left < n)
		return 0;
	for (i = 1; i < n; i++) {
		if ((p[i] & 0xc0) != 0x80)
			return 0;
		cp = (cp << 6) | (p[i] & 0x3f);
	}
	if ((n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000) ||
	    cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
		return 0;
	if (cp >= 0x80 && cp <= 0x9f)
		return 0; /* C1 controls */
	if (vis_hidden(cp))
		return 0;
	return n;
}

/* Whether len bytes at p hold anything vis_buf would escape. */
int
vis_needed(const void *p, size_t len)
{
	const unsigned char *s = p;
	size_t i = 0, n;

	while (i < len) {
		if (s[i] >= 0x20 && s[i] < 0x7f && s[i] != '\\') {
			i++;
			continue;
		}
		if ((n = vis_utf8_len(s + i, len - i)) == 0)
			return 1;
		i += n;
	}
	return 0;
}

/* The len bytes at p, escaped for a terminal. Caller frees. */
char *
vis_buf(const void *p, size_t len)
{
	return vis_escape(p, len, 0);
}

/*
 * The len bytes at p escaped; with text, \n, \t, \r and backslash pass
 * as they are (a log's lines, a progress bar's carriage returns, paths).
 * Caller frees.
 */
static char *
vis_escape(const void *p, size_t len, int text)
{
	static const char hex[] = "0123456789abcdef";
	const unsigned char *s = p;
	char *out, *o;
	size_t i = 0, n;
	const char *esc;

	if (len > (SIZE_MAX - 1) / 4)
		len = (SIZE_MAX - 1) / 4;
	o = out = xmalloc(len * 4 + 1);
	while (i < len) {
		if (s[i] >= 0x20 && s[i] < 0x7f && s[i] != '\\') {
			*o++ = (char)s[i++];
			continue;
		}
		if ((n = vis_utf8_len(s + i, len - i)) != 0) {
			memcpy(o, s + i, n);
			o += n;
			i += n;
			continue;
		}
		if (text &&
		    (s[i] == '\n' || s[i] == '\t' || s[i] == '\r' ||
			s[i] == '\\')) {
			*o++ = (char)s[i++];
			continue;
		}
		esc = NULL;
		switch (s[i]) {
		case '\\':
			esc = "\\\\";
			break;
		case '\a':
			esc = "\\a";
			break;
		case '\b':
			esc = "\\b";
			break;
		case '\t':
			esc = "\\t";
			break;
		case '\n':
			esc = "\\n";
			break;
		case '\v':
			esc = "\\v";
			break;
		case '\f':
			esc = "\\f";
			break;
		case '\r':
			esc = "\\r";
			break;
		case 0x1b:
			esc = "\\e";
			break;
		}
		if (esc != NULL) {
			memcpy(o, esc, 2);
			o += 2;
		} else {
			*o++ = '\\';
			*o++ = 'x';
			*o++ = hex[s[i] >> 4];
			*o++ = hex[s[i] & 0xf];
		}
		i++;
	}
	*o = '\0';
	return out;
}

/* A NUL-terminated string, escaped for a terminal; NULL stays NULL. Caller
 * frees. */
char *
vis_str(const char *s)
{
	if (s == NULL)
		return NULL;
	return vis_buf(s, strlen(s));
}

/*
 * The next len bytes of a stream (a job's log) escaped for a terminal as
 * vis_escape's text: a UTF-8 sequence cut at the end of one piece is held
 * for the next, and with final (the stream ended) written as it is,
 * escaped. *outlen gets the length. Caller frees.
 */
char *
vis_stream(
    struct vis_stream *vs, const void *p, size_t len, int final, size_t *outlen)
{
	unsigned char *b = xmalloc(vs->nheld + len + 1);
	size_t n = vs->nheld + len, cut = n, k, need;
	char *out;

	memcpy(b, vs->held, vs->nheld);
	if (len > 0)
		memcpy(b + vs->nheld, p, len);
	/* A lead byte in the last three with its sequence not complete. */
	for (k = 1; !final && k <= 3 && k <= n; k++) {
		unsigned char c = b[n - k];
		if ((c & 0xc0) == 0x80)
			continue;
		need = c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : c >= 0xc2 ? 2 : 1;
		if (need > k)
			cut = n - k;
		break;
	}
	vs->nheld = n - cut;
	memcpy(vs->held, b + cut, vs->nheld);
	out = vis_escape(b, cut, 1);
	*outlen = strlen(out);
	free(b);
	return out;
}

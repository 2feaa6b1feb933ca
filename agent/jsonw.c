/*
 * A small JSON writer: values are appended to a buffer with commas and keys
 * placed by the writer. Strings are escaped and made valid UTF-8.
 */

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "agent.h"

static void jsonw_prefix(struct jsonw *, const char *);
static int utf8_seq(const unsigned char *, size_t, size_t *);

/* Start an empty document. */
void
jsonw_init(struct jsonw *w)
{
	memset(w, 0, sizeof *w);
	w->first[0] = 1;
}

/* Free the document. */
void
jsonw_free(struct jsonw *w)
{
	buf_free(&w->out);
}

/* Write the comma and the key (when inside an object) before a value. */
static void
jsonw_prefix(struct jsonw *w, const char *key)
{
	if (!w->first[w->depth])
		buf_add(&w->out, ",", 1);
	w->first[w->depth] = 0;
	if (key != NULL) {
		jsonw_escape(&w->out, key, strlen(key));
		buf_add(&w->out, ":", 1);
	}
}

/* Open an object; key is NULL at the top level and in arrays. */
void
jsonw_object_begin(struct jsonw *w, const char *key)
{
	jsonw_prefix(w, key);
	buf_add(&w->out, "{", 1);
	if (w->depth + 1 < JSONW_MAXDEPTH)
		w->depth++;
	w->first[w->depth] = 1;
}

/* Close the innermost object. */
void
jsonw_object_end(struct jsonw *w)
{
	buf_add(&w->out, "}", 1);
	if (w->depth > 0)
		w->depth--;
}

/* Open an array. */
void
jsonw_array_begin(struct jsonw *w, const char *key)
{
	jsonw_prefix(w, key);
	buf_add(&w->out, "[", 1);
	if (w->depth + 1 < JSONW_MAXDEPTH)
		w->depth++;
	w->first[w->depth] = 1;
}

/* Close the innermost array. */
void
jsonw_array_end(struct jsonw *w)
{
	buf_add(&w->out, "]", 1);
	if (w->depth > 0)
		w->depth--;
}

/* Write null. */
void
jsonw_null(struct jsonw *w, const char *key)
{
	jsonw_prefix(w, key);
	buf_addstr(&w->out, "null");
}

/* Write true or false. */
void
jsonw_bool(struct jsonw *w, const char *key, int v)
{
	jsonw_prefix(w, key);
	buf_addstr(&w->out, v ? "true" : "false");
}

/* Write an integer. */
void
jsonw_int(struct jsonw *w, const char *key, long long v)
{
	char s[32];

	jsonw_prefix(w, key);
	snprintf(s, sizeof s, "%lld", v);
	buf_addstr(&w->out, s);
}

/*
 * Write a number with at most decimals digits after the point, trailing
 * zeros dropped but one kept (400.0, 312.5); null if not finite.
 */
void
jsonw_double(struct jsonw *w, const char *key, double v, int decimals)
{
	char s[64];
	size_t len;

	if (!isfinite(v) || fabs(v) >= 1e15) {
		jsonw_null(w, key);
		return;
	}
	if (decimals < 1)
		decimals = 1;
	if (decimals > 6)
		decimals = 6;
	jsonw_prefix(w, key);
	snprintf(s, sizeof s, "%.*f", decimals, v);
	len = strlen(s);
	while (len > 2 && s[len - 1] == '0' && s[len - 2] != '.')
		len--;
	s[len] = '\0';
	if (strcmp(s, "-0.0") == 0)
		memmove(s, s + 1, len);
	buf_addstr(&w->out, s);
}

/* Write a C string, or null for NULL. */
void
jsonw_string(struct jsonw *w, const char *key, const char *s)
{
	if (s == NULL) {
		jsonw_null(w, key);
		return;
	}
	jsonw_stringn(w, key, s, strlen(s));
}

/* Write len bytes as a string (NUL bytes included). */
void
jsonw_stringn(struct jsonw *w, const char *key, const char *s, size_t len)
{
	jsonw_prefix(w, key);
	jsonw_escape(&w->out, s, len);
}

/* Write len bytes of JSON text, already valid, as the value. */
void
jsonw_raw(struct jsonw *w, const char *key, const char *text, size_t len)
{
	jsonw_prefix(w, key);
	buf_add(&w->out, text, len);
}

/* Write an integer, or null when unknown. */
void
jsonw_opt_int(struct jsonw *w, const char *key, struct opt_int v)
{
	if (v.set)
		jsonw_int(w, key, v.v);
	else
		jsonw_null(w, key);
}

/* Write a number, or null when unknown. */
void
jsonw_opt_num(struct jsonw *w, const char *key, struct opt_num v, int decimals)
{
	if (v.set)
		jsonw_double(w, key, v.v, decimals);
	else
		jsonw_null(w, key);
}

/*
 * Whether the bytes at p start a well-formed UTF-8 sequence; *used is its
 * length, or for an ill-formed one the length of its maximal subpart (at
 * least 1), which is replaced by one U+FFFD as Unicode recommends.
 */
static int
utf8_seq(const unsigned char *p, size_t len, size_t *used)
{
	unsigned char c = p[0], lo = 0x80, hi = 0xbf;
	size_t n, i;

	*used = 1;
	if (c < 0x80)
		return 1;
	if (c >= 0xc2 && c <= 0xdf)
		n = 2;
	else if (c >= 0xe0 && c <= 0xef) {
		n = 3;
		if (c == 0xe0)
			lo = 0xa0; /* no overlong forms */
		if (c == 0xed)
			hi = 0x9f; /* no surrogates */
	} else if (c >= 0xf0 && c <= 0xf4) {
		n = 4;
		if (c == 0xf0)
			lo = 0x90;
		if (c == 0xf4)
			hi = 0x8f; /* nothing above U+10FFFF */
	} else
		return 0;
	for (i = 1; i < n; i++) {
		if (i >= len || p[i] < lo || p[i] > hi) {
			*used = i;
			return 0;
		}
		lo = 0x80;
		hi = 0xbf;
	}
	*used = n;
	return 1;
}

/*
 * Append s as a quoted JSON string: quote, backslash and control characters
 * escaped, each maximal ill-formed UTF-8 subpart replaced by U+FFFD.
 */
void
jsonw_escape(struct buf *b, const char *s, size_t len)
{
	static const char hex[] = "0123456789abcdef";
	const unsigned char *p = (const unsigned char *)s;
	size_t i = 0, n;
	char esc[7];
	unsigned char c;

	buf_add(b, "\"", 1);
	while (i < len) {
		c = p[i];
		if (c == '"' || c == '\\') {
			esc[0] = '\\';
			esc[1] = (char)c;
			buf_add(b, esc, 2);
			i++;
		} else if (c < 0x20) {
			switch (c) {
			case '\b':
				buf_add(b, "\\b", 2);
				break;
			case '\f':
				buf_add(b, "\\f", 2);
				break;
			case '\n':
				buf_add(b, "\\n", 2);
				break;
			case '\r':
				buf_add(b, "\\r", 2);
				break;
			case '\t':
				buf_add(b, "\\t", 2);
				break;
			default:
				memcpy(esc, "\\u00", 4);
				esc[4] = hex[c >> 4];
				esc[5] = hex[c & 0xf];
				buf_add(b, esc, 6);
				break;
			}
			i++;
		} else if (utf8_seq(p + i, len - i, &n)) {
			buf_add(b, p + i, n);
			i += n;
		} else {
			buf_add(b, "\xef\xbf\xbd", 3);
			i += n;
		}
	}
	buf_add(b, "\"", 1);
}

/*
 * A small strict JSON reader for the agent's own files (the plan, the
 * journal). It is hand-written because the agent is one static musl binary
 * and cannot link the system's jansson (Debian's libjansson.a is built
 * against glibc and references __snprintf_chk and friends); the agent
 * needs only this much of JSON.
 *
 * Accepted: objects, arrays, strings (escapes, \u with surrogate pairs,
 * decoded to UTF-8; invalid UTF-8, lone surrogates and \u0000 rejected),
 * integers that fit in int64, true, false, null. Rejected: reals and
 * exponents, nesting deeper than JSONR_MAXDEPTH, more than JSONR_MAXSIZE
 * bytes, duplicate keys in one object, anything after the value but white
 * space.
 */

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "agent.h"
#include "../controller/xmalloc.h"

struct jsonr_parser {
	const unsigned char *p;
	const unsigned char *end;
	const unsigned char *start;
	char **cause;
};

static int jsonr_fail(struct jsonr_parser *, const char *);
static void jsonr_space(struct jsonr_parser *);
static int jsonr_value(struct jsonr_parser *, struct jsonr *, int);
static int jsonr_literal(struct jsonr_parser *, const char *);
static int jsonr_number(struct jsonr_parser *, struct jsonr *);
static int jsonr_hex4(struct jsonr_parser *, unsigned *);
static void jsonr_put_utf8(struct buf *, unsigned);
static int jsonr_utf8(const unsigned char *, const unsigned char *);
static int jsonr_string(struct jsonr_parser *, char **, size_t *);
static int jsonr_next(struct jsonr_parser *, char);
static int jsonr_array(struct jsonr_parser *, struct jsonr *, int);
static int jsonr_object(struct jsonr_parser *, struct jsonr *, int);

/* Fill the cause with what is wrong and where; returns -1. */
static int
jsonr_fail(struct jsonr_parser *j, const char *what)
{
	if (j->cause != NULL && *j->cause == NULL)
		xasprintf(j->cause, "invalid JSON at byte %zu: %s",
		    (size_t)(j->p - j->start), what);
	return -1;
}

/* Skip JSON white space. */
static void
jsonr_space(struct jsonr_parser *j)
{
	while (j->p < j->end &&
	    (*j->p == ' ' || *j->p == '\t' || *j->p == '\n' || *j->p == '\r'))
		j->p++;
}

/* Match a literal word. */
static int
jsonr_literal(struct jsonr_parser *j, const char *word)
{
	size_t n = strlen(word);

	if ((size_t)(j->end - j->p) < n || memcmp(j->p, word, n) != 0)
		return jsonr_fail(j, "unexpected character");
	j->p += n;
	return 0;
}

/* An integer: -?(0|[1-9][0-9]*), within int64; reals are refused. */
static int
jsonr_number(struct jsonr_parser *j, struct jsonr *v)
{
	uint64_t acc = 0, limit;
	int neg = 0, digits = 0;

	if (j->p < j->end && *j->p == '-') {
		neg = 1;
		j->p++;
	}
	limit = neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX;
	if (j->p < j->end && *j->p == '0') {
		j->p++;
		digits = 1;
	} else {
		while (j->p < j->end && *j->p >= '0' && *j->p <= '9') {
			unsigned d = (unsigned)(*j->p - '0');

			if (acc > (limit - d) / 10)
				return jsonr_fail(j, "integer out of range");
			acc = acc * 10 + d;
			j->p++;
			digits++;
		}
	}
	if (digits == 0)
		return jsonr_fail(j, "bad number");
	if (j->p < j->end &&
	    (*j->p == '.' || *j->p == 'e' || *j->p == 'E' ||
		(*j->p >= '0' && *j->p <= '9')))
		return jsonr_fail(j, "only integers are accepted");
	v->type = JSONR_INT;
	if (neg)
		v->i =
		    acc == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)acc;
	else
		v->i = (int64_t)acc;
	return 0;
}

/* Four hex digits of a \u escape. */
static int
jsonr_hex4(struct jsonr_parser *j, unsigned *out)
{
	unsigned v = 0;
	int i, c;

	if (j->end - j->p < 4)
		return jsonr_fail(j, "short \\u escape");
	for (i = 0; i < 4; i++) {
		c = j->p[i];
		v <<= 4;
		if (c >= '0' && c <= '9')
			v |= (unsigned)(c - '0');
		else if (c >= 'a' && c <= 'f')
			v |= (unsigned)(c - 'a' + 10);
		else if (c >= 'A' && c <= 'F')
			v |= (unsigned)(c - 'A' + 10);
		else
			return jsonr_fail(j, "bad \\u escape");
	}
	j->p += 4;
	*out = v;
	return 0;
}

/* Append code point cp (valid, not a surrogate) as UTF-8. */
static void
jsonr_put_utf8(struct buf *b, unsigned cp)
{
	unsigned char s[4];
	size_t n;

	if (cp < 0x80) {
		s[0] = (unsigned char)cp;
		n = 1;
	} else if (cp < 0x800) {
		s[0] = (unsigned char)(0xc0 | (cp >> 6));
		s[1] = (unsigned char)(0x80 | (cp & 0x3f));
		n = 2;
	} else if (cp < 0x10000) {
		s[0] = (unsigned char)(0xe0 | (cp >> 12));
		s[1] = (unsigned char)(0x80 | ((cp >> 6) & 0x3f));
		s[2] = (unsigned char)(0x80 | (cp & 0x3f));
		n = 3;
	} else {
		s[0] = (unsigned char)(0xf0 | (cp >> 18));
		s[1] = (unsigned char)(0x80 | ((cp >> 12) & 0x3f));
		s[2] = (unsigned char)(0x80 | ((cp >> 6) & 0x3f));
		s[3] = (unsigned char)(0x80 | (cp & 0x3f));
		n = 4;
	}
	buf_add(b, s, n);
}

/*
 * Length of the well-formed UTF-8 sequence (2-4 bytes) at p, or 0 (overlong
 * forms, surrogates and code points above U+10FFFF are not well formed).
 */
static int
jsonr_utf8(const unsigned char *p, const unsigned char *end)
{
	unsigned char c = *p, lo = 0x80, hi = 0xbf;
	int n, i;

	if (c >= 0xc2 && c <= 0xdf)
		n = 2;
	else if (c >= 0xe0 && c <= 0xef) {
		n = 3;
		if (c == 0xe0)
			lo = 0xa0;
		if (c == 0xed)
			hi = 0x9f;
	} else if (c >= 0xf0 && c <= 0xf4) {
		n = 4;
		if (c == 0xf0)
			lo = 0x90;
		if (c == 0xf4)
			hi = 0x8f;
	} else
		return 0;
	for (i = 1; i < n; i++) {
		if (p + i >= end || p[i] < lo || p[i] > hi)
			return 0;
		lo = 0x80;
		hi = 0xbf;
	}
	return n;
}

/* A string, decoded; *out is NUL-terminated. Caller frees *out. */
static int
jsonr_string(struct jsonr_parser *j, char **out, size_t *outlen)
{
	static const char from[] = "\"\\/bfnrt", to[] = "\"\\/\b\f\n\r\t";
	struct buf b = { NULL, 0, 0 };
	const char *e;
	unsigned cp, lo;
	int n;

	j->p++; /* the opening quote */
	for (;;) {
		if (j->p >= j->end) {
			buf_free(&b);
			return jsonr_fail(j, "unterminated string");
		}
		if (*j->p == '"')
			break;
		if (*j->p < 0x20) {
			buf_free(&b);
			return jsonr_fail(j, "control character in string");
		}
		if (*j->p >= 0x80) {
			if ((n = jsonr_utf8(j->p, j->end)) == 0) {
				buf_free(&b);
				return jsonr_fail(j, "invalid UTF-8");
			}
			buf_add(&b, j->p, (size_t)n);
			j->p += n;
			continue;
		}
		if (*j->p != '\\') {
			buf_add(&b, j->p++, 1);
			continue;
		}
		j->p++;
		if (j->p < j->end && *j->p != 'u' && *j->p != '\0' &&
		    (e = strchr(from, *j->p)) != NULL) {
			buf_add(&b, &to[e - from], 1);
			j->p++;
			continue;
		}
		if (j->p >= j->end || *j->p != 'u') {
			buf_free(&b);
			return jsonr_fail(j, "bad escape");
		}
		j->p++;
		if (jsonr_hex4(j, &cp) != 0)
			goto bad;
		if (cp >= 0xdc00 && cp <= 0xdfff) {
			jsonr_fail(j, "lone low surrogate");
			goto bad;
		}
		if (cp >= 0xd800 && cp <= 0xdbff) {
			if (j->end - j->p < 2 || j->p[0] != '\\' ||
			    j->p[1] != 'u') {
				jsonr_fail(j, "lone high surrogate");
				goto bad;
			}
			j->p += 2;
			if (jsonr_hex4(j, &lo) != 0)
				goto bad;
			if (lo < 0xdc00 || lo > 0xdfff) {
				jsonr_fail(j, "bad surrogate pair");
				goto bad;
			}
			cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
		}
		if (cp == 0) {
			jsonr_fail(j, "\\u0000 in string");
			goto bad;
		}
		jsonr_put_utf8(&b, cp);
	}
	j->p++;
	buf_add(&b, "", 0);
	*out = b.data;
	*outlen = b.len;
	return 0;
bad:
	buf_free(&b);
	return -1;
}

/* After a member: 1 for a comma, 0 for the closing character, or -1. */
static int
jsonr_next(struct jsonr_parser *j, char close)
{
	jsonr_space(j);
	if (j->p < j->end && *j->p == ',') {
		j->p++;
		return 1;
	}
	if (j->p < j->end && *j->p == close) {
		j->p++;
		return 0;
	}
	return jsonr_fail(
	    j, close == ']' ? "expected ',' or ']'" : "expected ',' or '}'");
}

/* An array; depth is its own nesting level. */
static int
jsonr_array(struct jsonr_parser *j, struct jsonr *v, int depth)
{
	int r;

	v->type = JSONR_ARRAY;
	j->p++;
	jsonr_space(j);
	if (j->p < j->end && *j->p == ']') {
		j->p++;
		return 0;
	}
	for (;;) {
		v->items = xreallocarray(v->items, v->n + 1, sizeof *v->items);
		memset(&v->items[v->n], 0, sizeof *v->items);
		v->n++;
		if (jsonr_value(j, &v->items[v->n - 1], depth + 1) != 0)
			return -1;
		if ((r = jsonr_next(j, ']')) <= 0)
			return r;
	}
}

/* An object; keys must be unique. */
static int
jsonr_object(struct jsonr_parser *j, struct jsonr *v, int depth)
{
	char *key;
	size_t kl, i;
	int r;

	v->type = JSONR_OBJECT;
	j->p++;
	jsonr_space(j);
	if (j->p < j->end && *j->p == '}') {
		j->p++;
		return 0;
	}
	for (;;) {
		jsonr_space(j);
		if (j->p >= j->end || *j->p != '"')
			return jsonr_fail(j, "expected a key");
		if (jsonr_string(j, &key, &kl) != 0)
			return -1;
		for (i = 0; i < v->n; i++) {
			if (strcmp(v->keys[i], key) == 0) {
				free(key);
				return jsonr_fail(j, "duplicate key");
			}
		}
		v->items = xreallocarray(v->items, v->n + 1, sizeof *v->items);
		v->keys = xreallocarray(v->keys, v->n + 1, sizeof *v->keys);
		memset(&v->items[v->n], 0, sizeof *v->items);
		v->keys[v->n] = key;
		v->n++;
		jsonr_space(j);
		if (j->p >= j->end || *j->p != ':')
			return jsonr_fail(j, "expected ':'");
		j->p++;
		if (jsonr_value(j, &v->items[v->n - 1], depth + 1) != 0)
			return -1;
		if ((r = jsonr_next(j, '}')) <= 0)
			return r;
	}
}

/* Any value at nesting level depth. */
static int
jsonr_value(struct jsonr_parser *j, struct jsonr *v, int depth)
{
	jsonr_space(j);
	if (j->p >= j->end)
		return jsonr_fail(j, "unexpected end");
	switch (*j->p) {
	case '{':
	case '[':
		if (depth >= JSONR_MAXDEPTH)
			return jsonr_fail(j, "nested too deep");
		if (*j->p == '{')
			return jsonr_object(j, v, depth);
		return jsonr_array(j, v, depth);
	case '"':
		v->type = JSONR_STRING;
		return jsonr_string(j, &v->s, &v->slen);
	case 't':
		v->type = JSONR_BOOL;
		v->i = 1;
		return jsonr_literal(j, "true");
	case 'f':
		v->type = JSONR_BOOL;
		return jsonr_literal(j, "false");
	case 'n':
		v->type = JSONR_NULL;
		return jsonr_literal(j, "null");
	default:
		if (*j->p == '-' || (*j->p >= '0' && *j->p <= '9'))
			return jsonr_number(j, v);
		return jsonr_fail(j, "unexpected character");
	}
}

/*
 * Parse len bytes of text as one JSON value into v; 0, or -1 with *cause
 * set (caller frees it). v must be freed with jsonr_free either way.
 */
int
jsonr_parse(const char *text, size_t len, struct jsonr *v, char **cause)
{
	struct jsonr_parser j;

	memset(v, 0, sizeof *v);
	j.start = j.p = (const unsigned char *)text;
	j.end = j.p + len;
	j.cause = cause;
	if (len > JSONR_MAXSIZE) {
		if (cause != NULL)
			xasprintf(
			    cause, "JSON longer than %d bytes", JSONR_MAXSIZE);
		return -1;
	}
	if (jsonr_value(&j, v, 0) != 0)
		return -1;
	jsonr_space(&j);
	if (j.p != j.end)
		return jsonr_fail(&j, "trailing characters");
	return 0;
}

/* Free what v holds (not v itself). */
void
jsonr_free(struct jsonr *v)
{
	size_t i;

	for (i = 0; i < v->n; i++) {
		jsonr_free(&v->items[i]);
		if (v->keys != NULL)
			free(v->keys[i]);
	}
	free(v->items);
	free(v->keys);
	free(v->s);
	memset(v, 0, sizeof *v);
}

/* The member key of object v, or NULL (also when v is not an object). */
const struct jsonr *
jsonr_get(const struct jsonr *v, const char *key)
{
	size_t i;

	if (v == NULL || v->type != JSONR_OBJECT)
		return NULL;
	for (i = 0; i < v->n; i++)
		if (strcmp(v->keys[i], key) == 0)
			return &v->items[i];
	return NULL;
}

/* The string member key of v, or NULL. */
const char *
jsonr_str(const struct jsonr *v, const char *key)
{
	const struct jsonr *m = jsonr_get(v, key);

	return m != NULL && m->type == JSONR_STRING ? m->s : NULL;
}

/* The integer member key of v in *out; 0, or -1 if absent or not one. */
int
jsonr_int(const struct jsonr *v, const char *key, long long *out)
{
	const struct jsonr *m = jsonr_get(v, key);

	if (m == NULL || m->type != JSONR_INT)
		return -1;
	*out = m->i;
	return 0;
}

/* Write v with w under key (NULL at the top level and in arrays). */
void
jsonr_write(struct jsonw *w, const char *key, const struct jsonr *v)
{
	size_t i;

	switch (v->type) {
	case JSONR_NULL:
		jsonw_null(w, key);
		break;
	case JSONR_BOOL:
		jsonw_bool(w, key, (int)v->i);
		break;
	case JSONR_INT:
		jsonw_int(w, key, v->i);
		break;
	case JSONR_STRING:
		jsonw_stringn(w, key, v->s, v->slen);
		break;
	case JSONR_ARRAY:
		jsonw_array_begin(w, key);
		for (i = 0; i < v->n; i++)
			jsonr_write(w, NULL, &v->items[i]);
		jsonw_array_end(w);
		break;
	case JSONR_OBJECT:
		jsonw_object_begin(w, key);
		for (i = 0; i < v->n; i++)
			jsonr_write(w, v->keys[i], &v->items[i]);
		jsonw_object_end(w);
		break;
	}
}

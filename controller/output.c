/* Output for humans (aligned tables) and scripts (JSON). */

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "cmd.h"
#include "vis.h"
#include "xmalloc.h"

struct table {
	int raw; /* cells are printed as given (table_raw) */
	size_t ncols;
	size_t nrows; /* including the header */
	char **cells; /* nrows * ncols */
	size_t *width;
};

static void table_addv(struct table *, va_list);
static int csv_number(const char *);
static void csv_cell(FILE *, const char *);

static void
table_addv(struct table *t, va_list ap)
{
	size_t i, len;
	const char *s;

	t->cells = xreallocarray(
	    t->cells, (t->nrows + 1) * t->ncols, sizeof *t->cells);
	for (i = 0; i < t->ncols; i++) {
		s = va_arg(ap, const char *);
		if (s == NULL || *s == '\0')
			s = "-";
		t->cells[t->nrows * t->ncols + i] =
		    t->raw ? xstrdup(s) : vis_str(s);
		if ((len = strlen(t->cells[t->nrows * t->ncols + i])) >
		    t->width[i])
			t->width[i] = len;
	}
	t->nrows++;
}

/* A table with ncols columns; the header names follow. */
struct table *
table_new(size_t ncols, ...)
{
	struct table *t = xcalloc(1, sizeof *t);
	va_list ap;

	t->ncols = ncols;
	t->width = xcalloc(ncols, sizeof *t->width);
	va_start(ap, ncols);
	table_addv(t, ap);
	va_end(ap);
	return t;
}

/*
 * From now on, add cells as given instead of escaped: for a caller that
 * escapes the remote text itself (vis_str) and adds its own colours.
 */
void
table_raw(struct table *t)
{
	t->raw = 1;
}

/* Add a row of ncols strings, escaped for a terminal (vis.c) unless the
 * table is raw; NULL or "" print as "-". */
void
table_add(struct table *t, ...)
{
	va_list ap;

	va_start(ap, t);
	table_addv(t, ap);
	va_end(ap);
}

/* Print with columns aligned, two spaces apart, no trailing blanks. */
void
table_print(struct table *t, FILE *f)
{
	size_t r, c;
	const char *s;

	for (r = 0; r < t->nrows; r++) {
		for (c = 0; c < t->ncols; c++) {
			s = t->cells[r * t->ncols + c];
			if (c + 1 == t->ncols)
				fprintf(f, "%s\n", s);
			else
				fprintf(f, "%-*s  ", (int)t->width[c], s);
		}
	}
}

void
table_free(struct table *t)
{
	size_t i;

	for (i = 0; i < t->nrows * t->ncols; i++)
		free(t->cells[i]);
	free(t->cells);
	free(t->width);
	free(t);
}

/* Whether s is a plain decimal number: -?[0-9]+(.[0-9]+)? */
static int
csv_number(const char *s)
{
	size_t i = *s == '-', n;

	n = strspn(s + i, "0123456789");
	if (n == 0)
		return 0;
	i += n;
	if (s[i] == '.') {
		if ((n = strspn(s + i + 1, "0123456789")) == 0)
			return 0;
		i += 1 + n;
	}
	return s[i] == '\0';
}

/*
 * One CSV field: escaped for a terminal (vis.c) like a table cell; a text
 * a spreadsheet would run as a formula (starting with = + - or @, but not
 * a number such as -1.5) gets a leading ' so it stays text; quoted (RFC
 * 4180) if it holds a comma or a double quote, which is doubled.
 */
static void
csv_cell(FILE *f, const char *cell)
{
	char *s = vis_str(cell != NULL ? cell : ""), *p;
	int formula =
	    *s != '\0' && strchr("=+-@", *s) != NULL && !csv_number(s);

	if (strpbrk(s, ",\"") == NULL) {
		fprintf(f, "%s%s", formula ? "'" : "", s);
		free(s);
		return;
	}
	fprintf(f, "\"%s", formula ? "'" : "");
	for (p = s; *p != '\0'; p++) {
		if (*p == '"')
			fputc('"', f);
		fputc(*p, f);
	}
	fputc('"', f);
	free(s);
}

/*
 * Print a CSV record of n fields (NULL prints an empty field), RFC 4180:
 * comma-separated, ended by CRLF.
 */
void
csv_row(FILE *f, size_t n, ...)
{
	va_list ap;
	size_t i;

	va_start(ap, n);
	for (i = 0; i < n; i++) {
		if (i > 0)
			fputc(',', f);
		csv_cell(f, va_arg(ap, const char *));
	}
	va_end(ap);
	fputs("\r\n", f);
}

/* Print a JSON value, indented, followed by a newline; consumes it. */
void
json_print(json_t *j, FILE *f)
{
	json_dumpf(j, f, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
	fputc('\n', f);
	json_decref(j);
}

/* The tags of an instance joined by sep. Caller frees. */
char *
tags_join(const struct instance *in, const char *sep)
{
	size_t i, len = 1;
	char *s;

	for (i = 0; i < in->ntags; i++)
		len += strlen(in->tags[i]) + strlen(sep);
	s = xcalloc(1, len);
	for (i = 0; i < in->ntags; i++) {
		if (i != 0)
			strncat(s, sep, len - strlen(s) - 1);
		strncat(s, in->tags[i], len - strlen(s) - 1);
	}
	return s;
}

/* Print "NAME: failed: WHY" on stdout, WHY (remote text) escaped. */
void
cmd_print_failed(const char *name, const char *why)
{
	char *safe = vis_str(why != NULL ? why : "failed");

	printf("%s: failed: %s\n", name, safe);
	free(safe);
}

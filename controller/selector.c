/* Parsing and evaluating selectors (grammar in selector.h). */

#include <ctype.h>
#include <fnmatch.h>
#include <stdlib.h>
#include <string.h>

#include "selector.h"
#include "xmalloc.h"

enum term_kind {
	TERM_ALL,
	TERM_NAME,
	TERM_GLOB,
	TERM_TAG,
	TERM_PROVIDER,
	TERM_STATE
};

struct term {
	enum term_kind kind;
	int negated;
	char *arg;
};

struct selector {
	char *text;
	struct term *terms;
	size_t nterms;
	int npositive;
};

static int parse_term(const char *, const char *, struct term *, char **);
static int check_glob(const char *, const char *, char **);
static int term_match(const struct term *, const struct instance *);

/* Check a glob on names: name characters plus * ? [ ] ! ^. */
static int
check_glob(const char *sel, const char *glob, char **cause)
{
	const unsigned char *p;

	for (p = (const unsigned char *)glob; *p != '\0'; p++) {
		if (isascii(*p) && (isalnum(*p) || strchr("._-*?[]!^", *p)))
			continue;
		xasprintf(cause,
		    "selector '%s': '%s' is not a name, glob, "
		    "@TAG, provider:NAME or state:STATE",
		    sel, glob);
		return -1;
	}
	return 0;
}

/* Parse one comma-separated term of selector sel. */
static int
parse_term(const char *sel, const char *s, struct term *t, char **cause)
{
	char *why = NULL;

	memset(t, 0, sizeof *t);
	if (*s == '!') {
		t->negated = 1;
		s++;
	}
	if (*s == '\0') {
		xasprintf(cause, "selector '%s' has an empty term", sel);
		return -1;
	}
	if (strcmp(s, "all") == 0)
		t->kind = TERM_ALL;
	else if (*s == '@') {
		t->kind = TERM_TAG;
		if (instance_check_tag(s + 1, &why) != 0)
			goto bad;
		s++;
	} else if (strncmp(s, "provider:", 9) == 0) {
		t->kind = TERM_PROVIDER;
		s += 9;
		if (*s == '\0' || strchr(s, ':') != NULL) {
			xasprintf(&why, "provider name '%s' is not valid", s);
			goto bad;
		}
		if (instance_check_tag(s, &why) != 0)
			goto bad;
	} else if (strncmp(s, "state:", 6) == 0) {
		t->kind = TERM_STATE;
		s += 6;
		if (strcmp(s, "running") != 0 && strcmp(s, "stopped") != 0 &&
		    strcmp(s, "unknown") != 0) {
			xasprintf(&why,
			    "state '%s' is not running, stopped or unknown", s);
			goto bad;
		}
	} else if (strpbrk(s, "*?[") != NULL) {
		t->kind = TERM_GLOB;
		if (check_glob(sel, s, cause) != 0)
			return -1;
	} else {
		t->kind = TERM_NAME;
		if (instance_check_name(s, &why) != 0)
			goto bad;
	}
	t->arg = xstrdup(s);
	return 0;
bad:
	xasprintf(cause, "selector '%s': %s", sel, why);
	free(why);
	return -1;
}

/* Parse a selector. On success *selp is owned by the caller. */
int
selector_parse(const char *text, struct selector **selp, char **cause)
{
	struct selector *sel;
	char *copy, *p, *term;

	*selp = NULL;
	if (*text == '\0') {
		xasprintf(cause, "empty selector");
		return -1;
	}
	sel = xcalloc(1, sizeof *sel);
	sel->text = xstrdup(text);
	copy = p = xstrdup(text);
	for (;;) {
		term = p;
		if ((p = strchr(p, ',')) != NULL)
			*p++ = '\0';
		sel->terms = xreallocarray(
		    sel->terms, sel->nterms + 1, sizeof *sel->terms);
		if (parse_term(text, term, &sel->terms[sel->nterms], cause) !=
		    0) {
			free(copy);
			selector_free(sel);
			return -1;
		}
		if (!sel->terms[sel->nterms].negated)
			sel->npositive++;
		sel->nterms++;
		if (p == NULL)
			break;
	}
	free(copy);
	*selp = sel;
	return 0;
}

void
selector_free(struct selector *sel)
{
	size_t i;

	if (sel == NULL)
		return;
	for (i = 0; i < sel->nterms; i++)
		free(sel->terms[i].arg);
	free(sel->terms);
	free(sel->text);
	free(sel);
}

static int
term_match(const struct term *t, const struct instance *in)
{
	switch (t->kind) {
	case TERM_ALL:
		return 1;
	case TERM_NAME:
		return strcmp(t->arg, in->name) == 0;
	case TERM_GLOB:
		return fnmatch(t->arg, in->name, 0) == 0;
	case TERM_TAG:
		return instance_has_tag(in, t->arg);
	case TERM_PROVIDER:
		return strcmp(t->arg, in->provider) == 0;
	case TERM_STATE:
		return strcmp(t->arg, instance_state(in)) == 0;
	}
	return 0;
}

/* Does the selector pick this instance (ignoring existence checks)? */
int
selector_match(const struct selector *sel, const struct instance *in)
{
	size_t i;
	int picked = sel->npositive == 0;

	for (i = 0; i < sel->nterms; i++) {
		const struct term *t = &sel->terms[i];
		if (!term_match(t, in))
			continue;
		if (t->negated)
			return 0;
		picked = 1;
	}
	return picked;
}

/*
 * Evaluate a selector over list[0..n): picked[i] is set to 1 or 0. Fails if
 * an exact name is not in the list or nothing is picked; returns the number
 * picked otherwise.
 */
int
selector_select(const struct selector *sel, const struct instance *list,
    size_t n, int *picked, char **cause)
{
	size_t i, j;
	int count = 0, found;

	for (i = 0; i < sel->nterms; i++) {
		if (sel->terms[i].kind != TERM_NAME)
			continue;
		for (found = 0, j = 0; j < n && !found; j++)
			found = strcmp(list[j].name, sel->terms[i].arg) == 0;
		if (!found) {
			xasprintf(
			    cause, "no instance named '%s'", sel->terms[i].arg);
			return -1;
		}
	}
	for (i = 0; i < n; i++) {
		picked[i] = selector_match(sel, &list[i]);
		count += picked[i];
	}
	if (count == 0) {
		xasprintf(
		    cause, "selector '%s' matches no instance", sel->text);
		return -1;
	}
	return count;
}

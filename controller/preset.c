/*
 * Billing presets. config/providers.ini is built into the binary; the
 * user's providers.ini adds presets or replaces built-in ones of the same
 * name. Every value is checked when the files are read, with the parsers
 * `gpufleet set` uses, so a preset that loads applies.
 */

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <ini.h>

#include "config.h"
#include "db.h"
#include "instance.h"
#include "ledger.h"
#include "log.h"
#include "misc.h"
#include "preset.h"
#include "stopmethod.h"
#include "xmalloc.h"

#include "providers_ini.h"

/*
 * The fields a preset sets, in the order `set` applies them, and what an
 * optional pricing field left out becomes (NULL: left as it is).
 */
const char *const preset_fields[PRESET_NFIELDS] = { "provider", "currency",
	"price", "billing", "min_billed", "stopped_price", "monthly_price",
	"egress_price", "stop_command", "stop_kind" };
static const char *const field_unset[PRESET_NFIELDS] = { NULL, NULL, NULL, NULL,
	"0", "0/day", "0", "0/GB", NULL, NULL };

struct preset_parse {
	struct config_input in;
	struct preset *v; /* this file's presets */
	size_t n;
	const char *file;
};

static int parse_file(
    FILE *, const char *, struct preset **, size_t *, char **);
static int handler(void *, const char *, const char *, const char *);
static int check_value(const char *, const char *, char **);
static int check_date(const char *);
static int field_index(const char *);
static void free_one(struct preset *);

/* The user's providers.ini. Caller frees. */
char *
preset_user_path(void)
{
	return misc_xdg_path(
	    "XDG_CONFIG_HOME", ".config", "gpufleet/providers.ini");
}

static int
field_index(const char *key)
{
	int i;

	for (i = 0; i < PRESET_NFIELDS; i++) {
		if (strcmp(key, preset_fields[i]) == 0)
			return i;
	}
	return -1;
}

/* Is s a real day written YYYY-MM-DD? */
static int
check_date(const char *s)
{
	struct tm tm;
	time_t t;
	int i;

	if (strlen(s) != 10 || s[4] != '-' || s[7] != '-')
		return -1;
	for (i = 0; i < 10; i++) {
		if (i != 4 && i != 7 && !isdigit((unsigned char)s[i]))
			return -1;
	}
	memset(&tm, 0, sizeof tm);
	tm.tm_year = (s[0] - '0') * 1000 + (s[1] - '0') * 100 +
	    (s[2] - '0') * 10 + (s[3] - '0') - 1900;
	tm.tm_mon = (s[5] - '0') * 10 + (s[6] - '0') - 1;
	tm.tm_mday = (s[8] - '0') * 10 + (s[9] - '0');
	tm.tm_hour = 12;
	if (tm.tm_mon < 0 || tm.tm_mon > 11 || tm.tm_mday < 1)
		return -1;
	i = tm.tm_mday;
	t = timegm(&tm);
	if (t == (time_t)-1 || tm.tm_mday != i)
		return -1; /* normalized: Feb 30 became Mar 2 */
	return 0;
}

/* Check a field's value with the parser `set` uses for it. */
static int
check_value(const char *key, const char *value, char **cause)
{
	struct billing_rule rule;
	struct stopmethod_fields sf;
	struct instance in;
	int known, r;

	memset(&sf, 0, sizeof sf);
	r = stopmethod_field(&sf, key, value, &known, cause);
	stopmethod_fields_clear(&sf);
	if (known)
		return r;
	billing_rule_init(&rule, "CNY");
	r = ledger_price_field(&rule, key, value, &known, cause);
	if (known)
		return r != 0 ? r : billing_rule_validate(&rule, cause);
	instance_init(&in);
	r = instance_set_field(&in, key, value, cause);
	instance_clear(&in);
	return r;
}

/* One key of a [preset NAME] section. */
static int
handler(void *arg, const char *section, const char *key, const char *value)
{
	struct preset_parse *ps = arg;
	struct preset *p = NULL;
	const char *name;
	char *why = NULL, **slot;
	size_t i;
	int k, *line;

	if (ps->in.error != NULL)
		return 1;
	ps->in.error_line = ps->in.line;
	if (strncmp(section, "preset ", 7) != 0) {
		xasprintf(&ps->in.error,
		    "section [%s] is not a preset (write [preset NAME]; stop "
		    "methods go in config.ini as [provider.NAME])",
		    section);
		return 0;
	}
	name = section + 7;
	if (*name == '\0' || strlen(name) > 64 ||
	    strspn(name,
		"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
		"0123456789._-") != strlen(name)) {
		xasprintf(&ps->in.error,
		    "bad preset name in [%s] (letters, digits, . _ -)",
		    section);
		return 0;
	}
	for (i = 0; i < ps->n; i++) {
		if (strcmp(ps->v[i].name, name) == 0)
			p = &ps->v[i];
	}
	if (p != NULL && p != &ps->v[ps->n - 1]) {
		xasprintf(&ps->in.error,
		    "[preset %s] is given twice (also line %d)", name, p->line);
		return 0;
	}
	if (p == NULL) {
		ps->v = xreallocarray(ps->v, ps->n + 1, sizeof *ps->v);
		p = &ps->v[ps->n++];
		memset(p, 0, sizeof *p);
		p->name = xstrdup(name);
		p->file = xstrdup(ps->file);
		p->line = ps->in.line;
	}
	if (strcmp(key, "source") == 0) {
		slot = &p->source;
		line = NULL;
	} else if (strcmp(key, "date") == 0) {
		slot = &p->date;
		line = NULL;
	} else if ((k = field_index(key)) >= 0) {
		slot = &p->values[k];
		line = &p->lines[k];
	} else {
		xasprintf(&ps->in.error,
		    "unknown key '%s' in [preset %s] (keys: source, date, "
		    "provider, currency, price, billing, min_billed, "
		    "stopped_price, monthly_price, egress_price, stop_command, "
		    "stop_kind)",
		    key, name);
		return 0;
	}
	if (*slot != NULL) {
		xasprintf(&ps->in.error,
		    "key '%s' is given twice in [preset %s]", key, name);
		return 0;
	}
	if (slot == &p->date && check_date(value) != 0) {
		xasprintf(&ps->in.error,
		    "date '%s' in [preset %s] is not a day written YYYY-MM-DD",
		    value, name);
		return 0;
	}
	if (slot == &p->source && *value == '\0') {
		xasprintf(
		    &ps->in.error, "source in [preset %s] is empty", name);
		return 0;
	}
	if (line != NULL && check_value(key, value, &why) != 0) {
		xasprintf(&ps->in.error, "[preset %s]: %s", name, why);
		free(why);
		return 0;
	}
	*slot = xstrdup(value);
	if (line != NULL)
		*line = ps->in.line;
	return 1;
}

/*
 * Read the presets of one file (named file in messages) into *v, *n.
 * Returns 0, or -1 with *cause as "file:line: why".
 */
static int
parse_file(
    FILE *f, const char *file, struct preset **v, size_t *n, char **cause)
{
	static const char *const required[] = { "source", "date", "price",
		"currency", "billing" };
	struct preset_parse ps;
	const struct preset *p;
	size_t i, k;
	int line;

	memset(&ps, 0, sizeof ps);
	ps.in.f = f;
	ps.file = file;
	line = ini_parse_stream(config_ini_read, &ps.in, handler, &ps);
	for (i = 0; line == 0 && ps.in.error == NULL && i < ps.n; i++) {
		p = &ps.v[i];
		for (k = 0; k < sizeof required / sizeof required[0]; k++) {
			if (preset_value(p, required[k]) == NULL)
				break;
		}
		if (k < sizeof required / sizeof required[0]) {
			xasprintf(&ps.in.error,
			    "[preset %s] has no %s (required: source, date, "
			    "price, currency, billing)",
			    p->name, required[k]);
			ps.in.error_line = p->line;
		}
	}
	if (line != 0 || ps.in.error != NULL) {
		config_ini_error(&ps.in, line, file, cause);
		free(ps.in.error);
		preset_free(ps.v, ps.n);
		return -1;
	}
	*v = ps.v;
	*n = ps.n;
	return 0;
}

/*
 * Load the built-in presets, then those of the user's file at path (or
 * preset_user_path() when NULL; a missing file is fine) over them. *v
 * (caller frees with preset_free) gets *n presets, built-in ones first.
 */
int
preset_load(const char *path, struct preset **v, size_t *n, char **cause)
{
	struct preset *b = NULL, *u = NULL;
	size_t nb = 0, nu = 0, i, k;
	char *buf, *own = NULL;
	FILE *f;
	int r;

	buf = xmalloc(providers_ini_len + 1);
	memcpy(buf, providers_ini, providers_ini_len + 1);
	if ((f = fmemopen(buf, providers_ini_len, "r")) == NULL)
		fatal("fmemopen: %s", strerror(errno));
	r = parse_file(f, PRESET_BUILTIN, &b, &nb, cause);
	fclose(f);
	free(buf);
	if (r != 0)
		return r;
	if (path == NULL)
		path = own = preset_user_path();
	if (access(path, F_OK) == 0) {
		if ((f = fopen(path, "r")) == NULL) {
			xasprintf(
			    cause, "cannot read %s: %s", path, strerror(errno));
			r = -1;
		} else {
			r = parse_file(f, path, &u, &nu, cause);
			fclose(f);
		}
	}
	free(own);
	if (r != 0) {
		preset_free(b, nb);
		return r;
	}
	/* A user's preset replaces the built-in one of its name, in place. */
	for (k = 0; k < nu; k++) {
		for (i = 0; i < nb; i++) {
			if (strcmp(b[i].name, u[k].name) == 0)
				break;
		}
		if (i < nb)
			free_one(&b[i]);
		else
			b = xreallocarray(b, ++nb, sizeof *b);
		b[i] = u[k];
	}
	free(u);
	*v = b;
	*n = nb;
	return 0;
}

static void
free_one(struct preset *p)
{
	int k;

	free(p->name);
	free(p->file);
	free(p->source);
	free(p->date);
	for (k = 0; k < PRESET_NFIELDS; k++)
		free(p->values[k]);
}

void
preset_free(struct preset *v, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		free_one(&v[i]);
	free(v);
}

/*
 * The preset called name, or NULL with *cause naming the presets there
 * are (caller frees).
 */
const struct preset *
preset_find(const struct preset *v, size_t n, const char *name, char **cause)
{
	char *names = NULL, *old;
	size_t i;

	for (i = 0; i < n; i++) {
		if (strcmp(v[i].name, name) == 0)
			return &v[i];
	}
	for (i = 0; i < n; i++) {
		old = names;
		if (old == NULL)
			names = xstrdup(v[i].name);
		else
			xasprintf(&names, "%s, %s", old, v[i].name);
		free(old);
	}
	xasprintf(cause,
	    "unknown preset '%s' (presets: %s; see gpufleet preset "
	    "ls)",
	    name, names != NULL ? names : "none");
	free(names);
	return NULL;
}

/* The value of key (a field, "source" or "date") as written, or NULL. */
const char *
preset_value(const struct preset *p, const char *key)
{
	int k;

	if (strcmp(key, "source") == 0)
		return p->source;
	if (strcmp(key, "date") == 0)
		return p->date;
	if ((k = field_index(key)) < 0)
		return NULL;
	return p->values[k];
}

/*
 * The preset as the FIELD=VALUE assignments of `gpufleet set`: the whole
 * price rule (optional pricing fields it leaves out cleared), then the
 * provider and stop method where it gives them. *n gets their count; the
 * array and its strings are the caller's to free.
 */
char **
preset_assignments(const struct preset *p, size_t *n)
{
	char **a = xcalloc(PRESET_NFIELDS, sizeof *a);
	const char *value;
	int k;

	*n = 0;
	for (k = 0; k < PRESET_NFIELDS; k++) {
		value = p->values[k] != NULL ? p->values[k] : field_unset[k];
		if (value != NULL)
			xasprintf(&a[(*n)++], "%s=%s", preset_fields[k], value);
	}
	return a;
}

/* Which preset instance id's price came from; *has is 0 when none. */
int
preset_origin_get(struct inventory *inv, int64_t id, struct preset_origin *o,
    int *has, char **cause)
{
	sqlite3_stmt *st;
	int rc, r;

	memset(o, 0, sizeof *o);
	*has = 0;
	if ((r = db_prepare(inv, &st,
		 "SELECT name, date, source, file, applied_at FROM "
		 "instance_preset WHERE instance_id = ?",
		 "reading a preset origin", cause, "I", id)) != 0)
		return r;
	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW) {
		o->name = db_text(st, 0);
		o->date = db_text(st, 1);
		o->source = db_text(st, 2);
		o->file = db_text(st, 3);
		o->applied_at = sqlite3_column_int64(st, 4);
		*has = 1;
	}
	r = db_finish(inv, st, rc, "reading a preset origin", cause);
	return r < 0 ? r : 0;
}

/* Record that instance id's price is preset p's since t (in a transaction). */
int
preset_origin_put(struct inventory *inv, int64_t id, const struct preset *p,
    int64_t t, char **cause)
{
	return db_exec(inv,
	    "INSERT OR REPLACE INTO instance_preset (instance_id, name, date, "
	    "source, file, applied_at) VALUES (?, ?, ?, ?, ?, ?)",
	    "recording a preset", cause, "IttttI", id, p->name, p->date,
	    p->source, p->file, t);
}

/* Forget where instance id's price came from: it was set by hand. */
int
preset_origin_forget(struct inventory *inv, int64_t id, char **cause)
{
	return db_exec(inv, "DELETE FROM instance_preset WHERE instance_id = ?",
	    "forgetting a preset", cause, "I", id);
}

void
preset_origin_clear(struct preset_origin *o)
{
	free(o->name);
	free(o->date);
	free(o->source);
	free(o->file);
	memset(o, 0, sizeof *o);
}

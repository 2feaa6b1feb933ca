/*
 * Cron expressions (grammar in cron.h) and their next firing.
 *
 * Days: when both the day and the weekday field are restricted, a day that
 * matches either counts; a field is unrestricted only when it is exactly
 * "*" (so "*\/2" restricts, unlike cronie, which treats any field starting
 * with '*' as unrestricted).
 *
 * Daylight saving, in the zone of the schedule:
 * - a local time that does not exist that day (clocks jump forward) fires
 *   once, at the first instant after the jump (02:30 Europe/Berlin on
 *   2026-03-29 fires at 03:00 CEST = 01:00 UTC); several such times fire
 *   once together;
 * - a local time that happens twice (clocks go back) fires once, the first
 *   time.
 *
 * The search walks local calendar days and the times of day the fields
 * allow, never adding seconds to an instant, and turns each local time into
 * an instant with the UTC offsets localtime_r reports (tm_gmtoff) 18 hours
 * either side of it: mktime and tm_isdst are not used at all. This assumes
 * a zone changes its offset at most once within 36 hours, true of every
 * zone in the tz database. A zone other than the process's is selected by
 * setting TZ for the duration of cron_next and restoring it, so cron_next
 * is not thread-safe.
 */

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cron.h"
#include "xmalloc.h"

/* How far ahead cron_next looks: 8 years holds every 29 February. */
#define CRON_YEARS 8
/* Offsets are looked up this far either side of a local time. */
#define CRON_SPAN (18 * 3600)
/* The instants cron_next takes: 1970 to 3000. */
#define CRON_TIME_MAX 32503680000LL

#define TZ_NAME_MAX 255

struct cron_field {
	const char *name;
	int lo;
	int hi;
	const char *const *names;
	int name_base;
	const char *kind; /* "month" or "day", for causes */
};

static const char *const month_names[] = { "jan", "feb", "mar", "apr", "may",
	"jun", "jul", "aug", "sep", "oct", "nov", "dec", NULL };
static const char *const day_names[] = { "sun", "mon", "tue", "wed", "thu",
	"fri", "sat", NULL };

static const struct cron_field fields[5] = {
	{ "minute", 0, 59, NULL, 0, NULL },
	{ "hour", 0, 23, NULL, 0, NULL },
	{ "day", 1, 31, NULL, 0, NULL },
	{ "month", 1, 12, month_names, 1, "month" },
	{ "weekday", 0, 7, day_names, 0, "day" },
};

struct cron_macro {
	const char *name;
	const char *expr;
};

static const struct cron_macro macros[] = {
	{ "@hourly", "0 * * * *" },
	{ "@daily", "0 0 * * *" },
	{ "@midnight", "0 0 * * *" },
	{ "@weekly", "0 0 * * 0" },
	{ "@monthly", "0 0 1 * *" },
	{ "@yearly", "0 0 1 1 *" },
	{ "@annually", "0 0 1 1 *" },
};

static int parse_macro(const char *, struct cron *, char **);
static int parse_fields(const char *, struct cron *, char **);
static int parse_field(
    const struct cron_field *, const char *, size_t, uint64_t *, char **);
static int parse_item(
    const struct cron_field *, const char *, size_t, uint64_t *, char **);
static int parse_value(
    const struct cron_field *, const char *, size_t, int, int *, char **);
static int parse_step(const struct cron_field *, const char *, size_t,
    const char *, size_t, int *, char **);
static int is_blank(int);
static int64_t floor_div(int64_t, int64_t);
static long zone_offset(int64_t);
static int64_t wall_to_instant(int64_t);
static int days_in_month(int, int);
static int day_matches(const struct cron *, int, int);
static int search(const struct cron *, int64_t, int64_t *);

/* Blanks separate fields. */
static int
is_blank(int ch)
{
	return ch == ' ' || ch == '\t';
}

/* Parse a cron expression into *c; fills *cause (caller frees) on error. */
int
cron_parse(const char *expr, struct cron *c, char **cause)
{
	const char *s;
	size_t len = strlen(expr);

	if (len > CRON_MAX_LEN) {
		xasprintf(cause,
		    "cron: expression is longer than %d characters",
		    CRON_MAX_LEN);
		return -1;
	}
	for (s = expr; *s != '\0'; s++) {
		if (*s != '\t' && (*s < 0x20 || *s > 0x7e)) {
			xasprintf(cause,
			    "cron: expression has a non-printable character "
			    "(0x%02x)",
			    (unsigned char)*s);
			return -1;
		}
	}
	s = expr;
	while (is_blank(*s))
		s++;
	if (*s == '@')
		return parse_macro(s, c, cause);
	return parse_fields(s, c, cause);
}

/* Parse an @macro (s starts at the '@'). */
static int
parse_macro(const char *s, struct cron *c, char **cause)
{
	const char *end = s, *rest;
	size_t n, i;

	while (*end != '\0' && !is_blank(*end))
		end++;
	n = end - s;
	for (rest = end; is_blank(*rest); rest++)
		;
	for (i = 0; i < sizeof macros / sizeof macros[0]; i++) {
		if (strlen(macros[i].name) != n ||
		    strncasecmp(macros[i].name, s, n) != 0)
			continue;
		if (*rest != '\0') {
			xasprintf(cause, "cron: '%.*s' takes no other fields",
			    (int)n, s);
			return -1;
		}
		return parse_fields(macros[i].expr, c, cause);
	}
	xasprintf(cause,
	    "cron: unknown '%.*s' (use @hourly, @daily, @midnight, @weekly, "
	    "@monthly, @yearly or @annually)",
	    (int)n, s);
	return -1;
}

/* Parse the five blank-separated fields of s. */
static int
parse_fields(const char *s, struct cron *c, char **cause)
{
	const char *start[5], *p;
	size_t len[5];
	uint64_t bits[5];
	int n = 0, i;

	for (p = s;;) {
		while (is_blank(*p))
			p++;
		if (*p == '\0')
			break;
		if (n < 5)
			start[n] = p;
		while (*p != '\0' && !is_blank(*p))
			p++;
		if (n < 5)
			len[n] = p - start[n];
		n++;
	}
	if (n != 5) {
		xasprintf(cause,
		    "cron: needs 5 fields (minute hour day month weekday), "
		    "got %d",
		    n);
		return -1;
	}
	for (i = 0; i < 5; i++) {
		if (parse_field(
			&fields[i], start[i], len[i], &bits[i], cause) != 0)
			return -1;
	}
	memset(c, 0, sizeof *c);
	c->minutes = bits[0];
	c->hours = (uint32_t)bits[1];
	c->days = (uint32_t)bits[2];
	c->months = (uint16_t)bits[3];
	if (bits[4] & (1U << 7))
		bits[4] |= 1U;
	c->weekdays = (uint8_t)(bits[4] & 0x7f);
	if (len[2] == 1 && start[2][0] == '*')
		c->flags |= CRON_DAY_STAR;
	if (len[4] == 1 && start[4][0] == '*')
		c->flags |= CRON_WEEKDAY_STAR;
	return 0;
}

/* Parse one field (text, len) into a mask of its values. */
static int
parse_field(const struct cron_field *f, const char *text, size_t len,
    uint64_t *bits, char **cause)
{
	size_t i = 0, j;

	*bits = 0;
	for (;;) {
		for (j = i; j < len && text[j] != ','; j++)
			;
		if (j == i) {
			xasprintf(cause,
			    "cron: %s '%.*s' has an empty list item", f->name,
			    (int)len, text);
			return -1;
		}
		if (parse_item(f, text + i, j - i, bits, cause) != 0)
			return -1;
		if (j == len)
			return 0;
		i = j + 1;
	}
}

/* Parse one list item (item, n) of field f, adding its values to *bits. */
static int
parse_item(const struct cron_field *f, const char *item, size_t n,
    uint64_t *bits, char **cause)
{
	size_t i = 0, j;
	int lo, hi, step = 1, v, single = 0;

	if (item[0] == '*') {
		lo = f->lo;
		hi = f->hi == 7 ? 6 : f->hi;
		i = 1;
	} else {
		for (j = i; j < n && item[j] != '-' && item[j] != '/'; j++)
			;
		if (j == i) {
			xasprintf(cause, "cron: %s '%.*s' is missing a number",
			    f->name, (int)n, item);
			return -1;
		}
		if (parse_value(f, item + i, j - i, 0, &lo, cause) != 0)
			return -1;
		hi = lo;
		single = 1;
		i = j;
		if (i < n && item[i] == '-') {
			i++;
			for (j = i; j < n && item[j] != '-' && item[j] != '/';
			     j++)
				;
			if (j == i) {
				xasprintf(cause,
				    "cron: %s '%.*s' is missing a number",
				    f->name, (int)n, item);
				return -1;
			}
			if (parse_value(f, item + i, j - i, 1, &hi, cause) != 0)
				return -1;
			if (hi < lo) {
				xasprintf(cause,
				    "cron: %s '%.*s' is a reversed range",
				    f->name, (int)n, item);
				return -1;
			}
			single = 0;
			i = j;
		}
	}
	if (i < n && item[i] == '/') {
		if (single) {
			xasprintf(cause,
			    "cron: %s '%.*s' has a step without a range "
			    "(write %d-%d%.*s)",
			    f->name, (int)n, item, lo, f->hi == 7 ? 6 : f->hi,
			    (int)(n - i), item + i);
			return -1;
		}
		i++;
		for (j = i; j < n && item[j] != '-' && item[j] != '/'; j++)
			;
		if (parse_step(f, item, n, item + i, j - i, &step, cause) != 0)
			return -1;
		i = j;
	}
	if (i < n) {
		xasprintf(cause, "cron: %s '%.*s' has trailing '%.*s'", f->name,
		    (int)n, item, (int)(n - i), item + i);
		return -1;
	}
	for (v = lo; v <= hi; v += step)
		*bits |= (uint64_t)1 << v;
	return 0;
}

/* Parse a number or name of field f; upper is set for a range's end. */
static int
parse_value(const struct cron_field *f, const char *s, size_t n, int upper,
    int *out, char **cause)
{
	size_t i;
	int v = 0, k;

	for (i = 0; i < n && isdigit((unsigned char)s[i]); i++) {
		if (v <= 1000)
			v = v * 10 + (s[i] - '0');
	}
	if (i == n) {
		if (v < f->lo || v > f->hi) {
			xasprintf(cause,
			    "cron: %s '%.*s' is out of range %d-%d", f->name,
			    (int)n, s, f->lo, f->hi);
			return -1;
		}
		*out = v;
		return 0;
	}
	if (f->names != NULL && n == 3) {
		for (k = 0; f->names[k] != NULL; k++) {
			if (strncasecmp(f->names[k], s, 3) != 0)
				continue;
			*out = k + f->name_base;
			if (upper && f->hi == 7 && *out == 0)
				*out = 7;
			return 0;
		}
	}
	if (f->names != NULL)
		xasprintf(cause, "cron: %s '%.*s' is not a number or a %s name",
		    f->name, (int)n, s, f->kind);
	else
		xasprintf(cause, "cron: %s '%.*s' is not a number", f->name,
		    (int)n, s);
	return -1;
}

/* Parse the step (s, n) of item; it is 1 up to the field's span. */
static int
parse_step(const struct cron_field *f, const char *item, size_t itemlen,
    const char *s, size_t n, int *out, char **cause)
{
	size_t i;
	int v = 0, span = (f->hi == 7 ? 6 : f->hi) - f->lo + 1;

	if (n == 0) {
		xasprintf(cause, "cron: %s '%.*s' is missing a step", f->name,
		    (int)itemlen, item);
		return -1;
	}
	for (i = 0; i < n; i++) {
		if (!isdigit((unsigned char)s[i])) {
			xasprintf(cause, "cron: %s step '%.*s' is not a number",
			    f->name, (int)n, s);
			return -1;
		}
		if (v <= 1000)
			v = v * 10 + (s[i] - '0');
	}
	if (v == 0) {
		xasprintf(cause, "cron: %s '%.*s' has a step of 0", f->name,
		    (int)itemlen, item);
		return -1;
	}
	if (v > span) {
		xasprintf(cause, "cron: %s step '%.*s' is out of range 1-%d",
		    f->name, (int)n, s, span);
		return -1;
	}
	*out = v;
	return 0;
}

/*
 * Check that tz names a zone of the tz database: NULL or "" (the system's)
 * or a relative name of a TZif file under TZDIR (default
 * /usr/share/zoneinfo).
 */
int
cron_check_tz(const char *tz, char **cause)
{
	const char *dir, *s;
	char *path, magic[4];
	struct stat sb;
	int fd, ok = 0;

	if (tz == NULL || *tz == '\0')
		return 0;
	if (strlen(tz) > TZ_NAME_MAX) {
		xasprintf(cause,
		    "cron: time zone name is longer than %d "
		    "characters",
		    TZ_NAME_MAX);
		return -1;
	}
	for (s = tz; *s != '\0'; s++) {
		if (*s < 0x20 || *s > 0x7e) {
			xasprintf(cause,
			    "cron: time zone name has a "
			    "non-printable character (0x%02x)",
			    (unsigned char)*s);
			return -1;
		}
		if (!isalnum((unsigned char)*s) && strchr("/_+-.", *s) == NULL)
			break;
	}
	if (*s != '\0' || tz[0] == '/' || strstr(tz, "..") != NULL) {
		xasprintf(cause, "cron: '%s' is not a time zone name", tz);
		return -1;
	}
	if ((dir = getenv("TZDIR")) == NULL || *dir == '\0')
		dir = "/usr/share/zoneinfo";
	xasprintf(&path, "%s/%s", dir, tz);
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) != -1) {
		if (fstat(fd, &sb) == 0 && S_ISREG(sb.st_mode) &&
		    read(fd, magic, sizeof magic) == (ssize_t)sizeof magic &&
		    memcmp(magic, "TZif", 4) == 0)
			ok = 1;
		close(fd);
	}
	if (!ok)
		xasprintf(
		    cause, "cron: unknown time zone '%s' (not in %s)", tz, dir);
	free(path);
	return ok ? 0 : -1;
}

/* Floor of a / b for b > 0. */
static int64_t
floor_div(int64_t a, int64_t b)
{
	return a >= 0 ? a / b : -((-a + b - 1) / b);
}

/* The UTC offset in seconds of the current zone at instant t. */
static long
zone_offset(int64_t t)
{
	time_t tt = (time_t)t;
	struct tm tm;

	if (localtime_r(&tt, &tm) == NULL)
		return 0;
	return tm.tm_gmtoff;
}

/*
 * The instant a local time (seconds since 1970-01-01 00:00 local) fires:
 * its only occurrence, the first of two, or if it does not exist the first
 * instant after the jump over it, rounded up to a whole minute.
 */
static int64_t
wall_to_instant(int64_t w)
{
	long before = zone_offset(w - CRON_SPAN);
	long after = zone_offset(w + CRON_SPAN);
	int64_t t1 = w - before, t2 = w - after, lo, hi, mid;
	int ok1 = zone_offset(t1) == before, ok2 = zone_offset(t2) == after;

	if (ok1 && ok2)
		return t1 < t2 ? t1 : t2;
	if (ok1)
		return t1;
	if (ok2)
		return t2;
	/* In the gap: t2 is before the jump, t1 after it. */
	lo = t1 < t2 ? t1 : t2;
	hi = t1 < t2 ? t2 : t1;
	while (hi - lo > 1) {
		mid = lo + (hi - lo) / 2;
		if (mid + zone_offset(mid) >= w)
			hi = mid;
		else
			lo = mid;
	}
	return floor_div(hi + 59, 60) * 60;
}

/* Days in month m (1-12) of year y. */
static int
days_in_month(int y, int m)
{
	static const int mdays[12] = { 31, 28, 31, 30, 31, 30, 31, 31, 30, 31,
		30, 31 };

	if (m == 2 && ((y % 4 == 0 && y % 100 != 0) || y % 400 == 0))
		return 29;
	return mdays[m - 1];
}

/* Whether a day (day of month, weekday) matches c's day fields. */
static int
day_matches(const struct cron *c, int mday, int wday)
{
	int dom = (c->days >> mday) & 1, dow = (c->weekdays >> wday) & 1;

	if (c->flags & (CRON_DAY_STAR | CRON_WEEKDAY_STAR))
		return dom && dow;
	return dom || dow;
}

/* The first firing of c strictly after `after` in the current zone. */
static int
search(const struct cron *c, int64_t after, int64_t *next)
{
	int64_t start, day, last, w, t;
	time_t tt;
	struct tm tm;
	int y, m, d, wday, h, mi;

	start = floor_div(after + zone_offset(after), 60) * 60;
	day = floor_div(start, 86400);
	tt = (time_t)(day * 86400);
	if (gmtime_r(&tt, &tm) == NULL)
		return -1;
	y = tm.tm_year + 1900;
	m = tm.tm_mon + 1;
	d = tm.tm_mday;
	wday = tm.tm_wday;
	for (last = day + CRON_YEARS * 366; day <= last;) {
		if (!((c->months >> m) & 1)) {
			/* Skip to the 1st of the next month. */
			int left = days_in_month(y, m) - d + 1;

			day += left;
			wday = (wday + left) % 7;
			d = 1;
			if (++m > 12) {
				m = 1;
				y++;
			}
			continue;
		}
		if (day_matches(c, d, wday)) {
			for (h = 0; h < 24; h++) {
				if (!((c->hours >> h) & 1) ||
				    day * 86400 + h * 3600 + 3599 < start)
					continue;
				for (mi = 0; mi < 60; mi++) {
					if (!((c->minutes >> mi) & 1))
						continue;
					w = day * 86400 + h * 3600 + mi * 60;
					if (w < start)
						continue;
					t = wall_to_instant(w);
					if (t > after) {
						*next = t;
						return 0;
					}
				}
			}
		}
		day++;
		wday = (wday + 1) % 7;
		if (++d > days_in_month(y, m)) {
			d = 1;
			if (++m > 12) {
				m = 1;
				y++;
			}
		}
	}
	return -1;
}

/*
 * Make tz (NULL or "": keep the process's) the zone of localtime_r until
 * cron_zone_leave(*z). Returns 0, or -1 with *cause for a bad zone. Not
 * thread-safe: it switches TZ.
 */
int
cron_zone_enter(const char *tz, struct cron_zone *z, char **cause)
{
	const char *old;

	memset(z, 0, sizeof *z);
	if (tz == NULL || *tz == '\0')
		return 0;
	if (cron_check_tz(tz, cause) != 0)
		return -1;
	if ((old = getenv("TZ")) != NULL)
		z->saved = xstrdup(old);
	if (setenv("TZ", tz, 1) != 0) {
		xasprintf(cause, "cron: can't set TZ: %s", strerror(errno));
		free(z->saved);
		z->saved = NULL;
		return -1;
	}
	tzset();
	z->switched = 1;
	return 0;
}

/* Give the process its zone back (after cron_zone_enter). */
void
cron_zone_leave(struct cron_zone *z)
{
	if (!z->switched)
		return;
	if (z->saved != NULL)
		setenv("TZ", z->saved, 1);
	else
		unsetenv("TZ");
	tzset();
	free(z->saved);
	memset(z, 0, sizeof *z);
}

/*
 * The first firing of c strictly after `after` (Unix seconds, 1970 to 3000)
 * in zone tz (NULL or "": the process's), in *next; fills *cause (caller
 * frees) for a bad zone or an expression that never fires. Not
 * thread-safe: it switches TZ.
 */
int
cron_next(const struct cron *c, const char *tz, int64_t after, int64_t *next,
    char **cause)
{
	struct cron_zone z;
	int r;

	if (after < 0 || after > CRON_TIME_MAX) {
		xasprintf(
		    cause, "cron: time %lld is out of range", (long long)after);
		return -1;
	}
	if (cron_zone_enter(tz, &z, cause) != 0)
		return -1;
	r = search(c, after, next);
	cron_zone_leave(&z);
	if (r != 0)
		xasprintf(cause,
		    "cron: the expression never fires (no matching day in %d "
		    "years)",
		    CRON_YEARS);
	return r;
}

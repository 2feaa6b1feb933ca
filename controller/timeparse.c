/* Parsing TIME arguments (grammar in timeparse.h). */

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "timeparse.h"
#include "xmalloc.h"

static int digits(const char **, int, int *);
static int64_t local_midnight(int64_t, int);

/* Read exactly n digits. */
static int
digits(const char **sp, int n, int *out)
{
	const char *s = *sp;
	int v = 0, i;

	for (i = 0; i < n; i++) {
		if (!isdigit((unsigned char)s[i]))
			return -1;
		v = v * 10 + (s[i] - '0');
	}
	*sp = s + n;
	*out = v;
	return 0;
}

/* Local midnight of the day `now` falls on, days_back days earlier. */
static int64_t
local_midnight(int64_t now, int days_back)
{
	time_t t = (time_t)now;
	struct tm tm;

	localtime_r(&t, &tm);
	tm.tm_hour = tm.tm_min = tm.tm_sec = 0;
	tm.tm_mday -= days_back;
	tm.tm_isdst = -1;
	return (int64_t)mktime(&tm);
}

/* Parse TIME against the clock now; *out is Unix seconds. */
int
timeparse(const char *text, int64_t now, int64_t *out, char **cause)
{
	const char *s = text;
	struct tm tm;
	int y, mo, d, h = 0, mi = 0, sec = 0, oh, om, sign, has_time = 0;
	char *end;
	long long n;
	time_t t;

	if (strcmp(text, "now") == 0) {
		*out = now;
		return 0;
	}
	if (strcmp(text, "today") == 0 || strcmp(text, "yesterday") == 0) {
		*out = local_midnight(now, text[0] == 'y');
		return 0;
	}
	if (text[0] == '-' && isdigit((unsigned char)text[1])) {
		errno = 0;
		n = strtoll(text + 1, &end, 10);
		if (errno != 0 || n > 100L * 365 * 86400 || end[0] == '\0' ||
		    end[1] != '\0' || strchr("smhdw", end[0]) == NULL)
			goto bad;
		switch (end[0]) {
		case 'm':
			n *= 60;
			break;
		case 'h':
			n *= 3600;
			break;
		case 'd':
			n *= 86400;
			break;
		case 'w':
			n *= 7 * 86400;
			break;
		}
		*out = now - n;
		return 0;
	}

	if (digits(&s, 4, &y) != 0 || *s++ != '-' || digits(&s, 2, &mo) != 0 ||
	    *s++ != '-' || digits(&s, 2, &d) != 0)
		goto bad;
	if (*s == 'T' || *s == ' ') {
		s++;
		has_time = 1;
		if (digits(&s, 2, &h) != 0 || *s++ != ':' ||
		    digits(&s, 2, &mi) != 0)
			goto bad;
		if (*s == ':' && (s++, digits(&s, 2, &sec) != 0))
			goto bad;
	}
	if (mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 ||
	    sec > 60)
		goto bad;
	memset(&tm, 0, sizeof tm);
	tm.tm_year = y - 1900;
	tm.tm_mon = mo - 1;
	tm.tm_mday = d;
	tm.tm_hour = h;
	tm.tm_min = mi;
	tm.tm_sec = sec;
	if (*s == '\0') {
		tm.tm_isdst = -1;
		if ((t = mktime(&tm)) == (time_t)-1)
			goto bad;
		*out = (int64_t)t;
		goto check_day;
	}
	if (!has_time)
		goto bad;
	if (*s == 'Z' && s[1] == '\0')
		oh = om = 0, sign = 1;
	else if ((*s == '+' || *s == '-')) {
		sign = *s++ == '-' ? -1 : 1;
		if (digits(&s, 2, &oh) != 0)
			goto bad;
		if (*s == ':')
			s++;
		if (digits(&s, 2, &om) != 0 || *s != '\0' || oh > 23 || om > 59)
			goto bad;
	} else
		goto bad;
	*out = (int64_t)timegm(&tm) - sign * (oh * 3600 + om * 60);
check_day:
	/* mktime/timegm normalise 2026-02-31 to March: refuse it. */
	{
		struct tm back;
		time_t bt = (time_t)*out + (*s == '\0' ? 0 : 0);
		if (*s == '\0')
			localtime_r(&bt, &back);
		else {
			bt = timegm(&tm);
			gmtime_r(&bt, &back);
		}
		if (back.tm_mday != d || back.tm_mon != mo - 1)
			goto bad;
	}
	return 0;
bad:
	xasprintf(cause,
	    "bad time '%s' (use 2026-11-01T02:00:00Z, "
	    "'2026-11-01 02:00', 2026-11-01, -2h, yesterday or now)",
	    text);
	return -1;
}

/* A duration for people: 45s, 12m, 3h05m, 2d04h. Caller frees. */
char *
timeparse_duration(int64_t secs)
{
	char *s;

	if (secs < 0)
		secs = 0;
	if (secs < 60)
		xasprintf(&s, "%llds", (long long)secs);
	else if (secs < 3600)
		xasprintf(&s, "%lldm", (long long)(secs / 60));
	else if (secs < 86400)
		xasprintf(&s, "%lldh%02lldm", (long long)(secs / 3600),
		    (long long)(secs % 3600 / 60));
	else
		xasprintf(&s, "%lldd%02lldh", (long long)(secs / 86400),
		    (long long)(secs % 86400 / 3600));
	return s;
}

/*
 * A duration to the second, as billing_parse_duration reads it: 45s,
 * 3m20s, 4h00m00s, 2d01h00m30s. Caller frees.
 */
char *
timeparse_duration_exact(int64_t secs)
{
	long long d, h, m, sec;
	char *s;

	if (secs < 0)
		secs = 0;
	d = secs / 86400;
	h = secs % 86400 / 3600;
	m = secs % 3600 / 60;
	sec = secs % 60;
	if (secs < 60)
		xasprintf(&s, "%llds", sec);
	else if (secs < 3600)
		xasprintf(&s, "%lldm%02llds", m, sec);
	else if (secs < 86400)
		xasprintf(&s, "%lldh%02lldm%02llds", h, m, sec);
	else
		xasprintf(&s, "%lldd%02lldh%02lldm%02llds", d, h, m, sec);
	return s;
}

/*
 * A future TIME (shutdown --at): HH:MM[:SS] is the next such local time
 * after now (today's if it is still ahead, else tomorrow's); anything
 * else is read as timeparse reads it.
 */
int
timeparse_next(const char *text, int64_t now, int64_t *out, char **cause)
{
	const char *s = text;
	int h, mi, sec = 0;
	struct tm tm;
	time_t t = (time_t)now;

	if (digits(&s, 2, &h) != 0 || *s++ != ':' || digits(&s, 2, &mi) != 0 ||
	    (*s == ':' && (s++, digits(&s, 2, &sec) != 0)) || *s != '\0')
		return timeparse(text, now, out, cause);
	if (h > 23 || mi > 59 || sec > 59) {
		xasprintf(
		    cause, "bad time '%s' (HH:MM is 00:00 to 23:59)", text);
		return -1;
	}
	localtime_r(&t, &tm);
	tm.tm_hour = h;
	tm.tm_min = mi;
	tm.tm_sec = sec;
	tm.tm_isdst = -1;
	if ((t = mktime(&tm)) != (time_t)-1 && (int64_t)t <= now) {
		localtime_r(&t, &tm);
		tm.tm_mday++;
		tm.tm_hour = h;
		tm.tm_min = mi;
		tm.tm_sec = sec;
		tm.tm_isdst = -1;
		t = mktime(&tm);
	}
	if (t == (time_t)-1) {
		xasprintf(cause, "bad time '%s'", text);
		return -1;
	}
	*out = (int64_t)t;
	return 0;
}

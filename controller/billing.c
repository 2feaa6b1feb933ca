/* The billing model: prices, rules and the cost of a ledger (see billing.h). */

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "billing.h"
#include "xmalloc.h"

__extension__ typedef __int128 i128;

#define BYTES_PER_GB 1000000000

static money_t saturate(i128);
static i128 ceil_div(i128, i128);
static const char *parse_decimal(const char *, size_t, money_t *);
static int parse_price_as(
    const char *, const char *, money_t *, enum billing_per *, char **);
static int currency_ok(const char *);
static int64_t clip(int64_t, int64_t, int64_t);
static size_t price_index(const struct billing_price *, size_t, int64_t);
static int64_t first_unit(int64_t, int64_t, int64_t);
static i128 run_pieces(const struct billing_price *, size_t, int64_t, int64_t,
    int64_t, int64_t *, struct billing_piece *, size_t *);
static money_t round_day(i128);
static money_t run_charge_at(const struct billing_price *, size_t,
    const struct billing_interval *, int64_t, int, int64_t,
    struct billing_piece *, size_t *);
static int64_t run_billed_at(const struct billing_price *, size_t,
    const struct billing_interval *, int64_t, int, int64_t);
static money_t stopped_charge_at(const struct billing_price *, size_t,
    const struct billing_interval *, int64_t, struct billing_piece *, size_t *);
static int check_prices(const struct billing_price *, size_t, char **);
static void run_line(const struct billing_price *, size_t,
    const struct billing_interval *, int64_t, int, int64_t, int64_t,
    struct billing_line *, struct billing_piece *, size_t *);
static void line_for(const struct billing_price *, size_t,
    const struct billing_interval *, int64_t, int, int64_t, int64_t,
    struct billing_line *, struct billing_piece *, size_t *);
static int window_walk(const struct billing_price *, size_t,
    const struct billing_interval *, size_t, const int64_t *, size_t,
    struct billing_total *, struct billing_line *, size_t *,
    struct billing_piece **, size_t *, char **);
static int check_amount(const char *, money_t, char **);
static int over_ceiling(money_t, int64_t);
static int check_time(const char *, int64_t, char **);
static int runway_over(money_t, money_t, int64_t, int64_t *);

/* Clamp a 128-bit value into the money_t range. */
static money_t
saturate(i128 v)
{
	if (v > (i128)INT64_MAX)
		return INT64_MAX;
	if (v < (i128)INT64_MIN)
		return INT64_MIN;
	return (money_t)v;
}

/* Divide a non-negative numerator by a positive denominator, rounding up. */
static i128
ceil_div(i128 num, i128 den)
{
	if (num <= 0)
		return 0;
	return (num + den - 1) / den;
}

/* Add two amounts, saturating at the money_t range instead of wrapping. */
money_t
billing_sat_add(money_t a, money_t b)
{
	return saturate((i128)a + b);
}

/*
 * Read an unsigned decimal of at most 4 decimals from s[0..len) into minor
 * units; returns NULL, or why it is not an amount (to follow "amount 'x'").
 */
static const char *
parse_decimal(const char *s, size_t len, money_t *out)
{
	money_t units = 0, frac = 0;
	size_t i = 0, nd = 0;

	if (len == 0)
		return "is empty";
	if (s[0] == '-')
		return "is negative";
	if (memchr(s, ',', len) != NULL)
		return "must use '.' for decimals and no thousands separators "
		       "(e.g. 1137.50)";
	while (i < len && isdigit((unsigned char)s[i])) {
		units = units * 10 + (s[i] - '0');
		if (units > BILLING_AMOUNT_MAX / BILLING_MINOR_PER_UNIT)
			return "is too large (at most 1000000000)";
		i++;
	}
	if (i == 0)
		return "is not a number (e.g. 2.69)";
	if (i < len && s[i] == '.') {
		i++;
		while (i < len && isdigit((unsigned char)s[i])) {
			if (++nd > 4)
				return "has more than 4 decimals";
			frac = frac * 10 + (s[i] - '0');
			i++;
		}
		if (nd == 0)
			return "is not a number (e.g. 2.69)";
		while (nd++ < 4)
			frac *= 10;
	}
	if (i != len)
		return "is not a number (e.g. 2.69)";
	*out = units * BILLING_MINOR_PER_UNIT + frac;
	if (*out > BILLING_AMOUNT_MAX)
		return "is too large (at most 1000000000)";
	return NULL;
}

/* Whether price per secs of time comes to more than the hourly ceiling. */
static int
over_ceiling(money_t price, int64_t secs)
{
	return (i128)price * 3600 > (i128)BILLING_PRICE_MAX_HOUR * secs;
}

/* Parse an amount: digits with at most 4 decimals, no sign, no separators. */
int
billing_parse_amount(const char *text, money_t *out, char **cause)
{
	const char *why;
	money_t v;

	if ((why = parse_decimal(text, strlen(text), &v)) != NULL) {
		xasprintf(cause, "amount '%s' %s", text, why);
		return -1;
	}
	*out = v;
	return 0;
}

/* Parse AMOUNT/PERIOD, naming the value as what in errors. */
static int
parse_price_as(const char *what, const char *text, money_t *out,
    enum billing_per *per, char **cause)
{
	static const struct {
		const char *name;
		enum billing_per per;
	} periods[] = {
		{ "s", BILL_PER_SECOND },
		{ "sec", BILL_PER_SECOND },
		{ "second", BILL_PER_SECOND },
		{ "min", BILL_PER_MINUTE },
		{ "minute", BILL_PER_MINUTE },
		{ "h", BILL_PER_HOUR },
		{ "hr", BILL_PER_HOUR },
		{ "hour", BILL_PER_HOUR },
		{ "d", BILL_PER_DAY },
		{ "day", BILL_PER_DAY },
	};
	const char *slash = strrchr(text, '/'), *why, *name;
	money_t v;
	size_t i;

	if (slash == NULL) {
		xasprintf(cause,
		    "%s '%s' has no period (e.g. 2.69/h, 0.05/min, "
		    "0.001/s, 60/day)",
		    what, text);
		return -1;
	}
	if ((why = parse_decimal(text, (size_t)(slash - text), &v)) != NULL) {
		xasprintf(cause, "%s '%s': amount %s", what, text, why);
		return -1;
	}
	name = slash + 1;
	for (i = 0; i < sizeof periods / sizeof periods[0]; i++) {
		if (strcasecmp(name, periods[i].name) == 0) {
			if (over_ceiling(
				v, billing_per_seconds(periods[i].per))) {
				xasprintf(cause,
				    "%s '%s' is too high (at most 1000000 an "
				    "hour)",
				    what, text);
				return -1;
			}
			*out = v;
			*per = periods[i].per;
			return 0;
		}
	}
	if (strcasecmp(name, "m") == 0)
		xasprintf(cause,
		    "%s '%s': '/m' is ambiguous (write /min for a minute)",
		    what, text);
	else if (strncasecmp(name, "mo", 2) == 0)
		xasprintf(cause,
		    "%s '%s': a monthly plan goes in monthly_price, not price",
		    what, text);
	else
		xasprintf(cause,
		    "%s '%s': unknown period '%s' (use /s, /min, /h or /day)",
		    what, text, name);
	return -1;
}

/* Parse a price such as 2.69/h; the amount and its period are kept as given. */
int
billing_parse_price(
    const char *text, money_t *out, enum billing_per *per, char **cause)
{
	return parse_price_as("price", text, out, per, cause);
}

/* Parse a storage price (any period) into an exact price per day. */
int
billing_parse_stopped_price(const char *text, money_t *per_day, char **cause)
{
	enum billing_per per;
	money_t v;

	if (parse_price_as("stopped price", text, &v, &per, cause) != 0)
		return -1;
	/* At most 10^6 an hour (checked above): 2.4 * 10^11 a day. */
	*per_day = v * (86400 / billing_per_seconds(per));
	return 0;
}

/* Parse AMOUNT/GB. */
int
billing_parse_egress_price(const char *text, money_t *per_gb, char **cause)
{
	const char *slash = strrchr(text, '/'), *why;
	money_t v;

	if (slash == NULL || strcasecmp(slash + 1, "GB") != 0) {
		xasprintf(cause,
		    "egress price '%s' must be AMOUNT/GB (e.g. 0.80/GB)", text);
		return -1;
	}
	if ((why = parse_decimal(text, (size_t)(slash - text), &v)) != NULL) {
		xasprintf(cause, "egress price '%s': amount %s", text, why);
		return -1;
	}
	if (v > BILLING_PRICE_MAX_HOUR) {
		xasprintf(cause,
		    "egress price '%s' is too high (at most 1000000/GB)", text);
		return -1;
	}
	*per_gb = v;
	return 0;
}

/* Parse a duration: "0", or parts 2w, 3d, 1h, 30m, 90s in that order. */
int
billing_parse_duration(const char *text, int64_t *out, char **cause)
{
	static const char order[] = "wdhms";
	static const int64_t mult[] = { 7 * 86400, 86400, 3600, 60, 1 };
	const char *s = text, *u;
	int64_t total = 0, n;
	int last = -1, digits;

	if (*text == '\0') {
		xasprintf(cause, "duration is empty (e.g. 90s, 10m, 1h30m)");
		return -1;
	}
	if (strcmp(text, "0") == 0) {
		*out = 0;
		return 0;
	}
	while (*s != '\0') {
		n = 0;
		digits = 0;
		while (isdigit((unsigned char)*s)) {
			n = n * 10 + (*s++ - '0');
			digits++;
			if (n > BILLING_DURATION_MAX)
				goto too_long;
		}
		if (digits == 0)
			goto bad;
		if (*s == '\0') {
			xasprintf(cause,
			    "duration '%s' needs a unit (s, m, h, d or w), "
			    "e.g. 90s",
			    text);
			return -1;
		}
		if ((u = strchr(order, *s)) == NULL || u - order <= last)
			goto bad;
		last = (int)(u - order);
		s++;
		if (n > BILLING_DURATION_MAX / mult[last])
			goto too_long;
		total += n * mult[last];
		if (total > BILLING_DURATION_MAX)
			goto too_long;
	}
	*out = total;
	return 0;
too_long:
	xasprintf(cause, "duration '%s' is longer than %lld days", text,
	    (long long)(BILLING_DURATION_MAX / 86400));
	return -1;
bad:
	xasprintf(cause,
	    "duration '%s' is not like 90s, 10m, 1h30m, 2d or 0 "
	    "(units w d h m s, largest first)",
	    text);
	return -1;
}

/* Parse a billing unit: second, minute or hour. */
int
billing_parse_unit(const char *text, enum billing_unit *out, char **cause)
{
	if (strcmp(text, "second") == 0)
		*out = BILL_SECOND;
	else if (strcmp(text, "minute") == 0)
		*out = BILL_MINUTE;
	else if (strcmp(text, "hour") == 0)
		*out = BILL_HOUR;
	else {
		xasprintf(
		    cause, "billing '%s' must be second, minute or hour", text);
		return -1;
	}
	return 0;
}

/* Whether s is three uppercase ASCII letters. */
static int
currency_ok(const char *s)
{
	int i;

	for (i = 0; i < 3; i++) {
		if (s[i] < 'A' || s[i] > 'Z')
			return 0;
	}
	return s[3] == '\0';
}

/*
 * The active ISO 4217 codes, sorted, each followed by a space (so code k is
 * at 4 * k): currencies, funds codes and the precious metals; XTS (testing)
 * and XXX (no currency) are left out.
 */
static const char iso4217[] =
    "AED AFN ALL AMD ANG AOA ARS AUD AWG AZN BAM BBD BDT BGN BHD "
    "BIF BMD BND BOB BOV BRL BSD BTN BWP BYN BZD CAD CDF CHE CHF "
    "CHW CLF CLP CNY COP COU CRC CUP CVE CZK DJF DKK DOP DZD EGP "
    "ERN ETB EUR FJD FKP GBP GEL GHS GIP GMD GNF GTQ GYD HKD HNL "
    "HTG HUF IDR ILS INR IQD IRR ISK JMD JOD JPY KES KGS KHR KMF "
    "KPW KRW KWD KYD KZT LAK LBP LKR LRD LSL LYD MAD MDL MGA MKD "
    "MMK MNT MOP MRU MUR MVR MWK MXN MXV MYR MZN NAD NGN NIO NOK "
    "NPR NZD OMR PAB PEN PGK PHP PKR PLN PYG QAR RON RSD RUB RWF "
    "SAR SBD SCR SDG SEK SGD SHP SLE SLL SOS SRD SSP STN SVC SYP "
    "SZL THB TJS TMT TND TOP TRY TTD TWD TZS UAH UGX USD USN UYI "
    "UYU UYW UZS VED VES VND VUV WST XAF XAG XAU XBA XBB XBC XBD "
    "XCD XCG XDR XOF XPD XPF XPT XSU XUA YER ZAR ZMW ZWG ZWL ";

/* Names people write that are not ISO 4217 codes, with the code meant. */
static const struct {
	const char *name, *code;
} currency_hints[] = {
	{ "RMB", "CNY" },
	{ "CNH", "CNY" },
	{ "NTD", "TWD" },
	{ "YEN", "JPY" },
	{ "RUR", "RUB" },
	{ "UKP", "GBP" },
	{ "STG", "GBP" },
	{ "HRK", "EUR" },
	{ "BYR", "BYN" },
	{ "VEF", "VES" },
	{ "MRO", "MRU" },
	{ "STD", "STN" },
	{ "ZMK", "ZMW" },
	{ "DEM", "EUR" },
	{ "FRF", "EUR" },
	{ "ITL", "EUR" },
	{ "ESP", "EUR" },
	{ "LTL", "EUR" },
};

/* Whether code (three uppercase letters) is an active ISO 4217 code. */
int
billing_currency_known(const char *code)
{
	size_t lo = 0, hi = (sizeof iso4217 - 1) / 4, mid;
	int c;

	if (strlen(code) != 3)
		return 0;
	while (lo < hi) {
		mid = (lo + hi) / 2;
		if ((c = strncmp(code, iso4217 + 4 * mid, 3)) == 0)
			return 1;
		if (c < 0)
			hi = mid;
		else
			lo = mid + 1;
	}
	return 0;
}

/*
 * The decimals of a currency's minor unit in ISO 4217: 0 for those listed
 * here with 0 (JPY, KRW) and for the funds and metals without one (XAU),
 * 3 (KWD) and 4 (CLF) for those, 2 for every other code.
 */
int
billing_currency_digits(const char *code)
{
	static const struct {
		const char *codes;
		int digits;
	} exponents[] = {
		{ "BIF CLP DJF GNF ISK JPY KMF KRW PYG RWF UGX UYI VND VUV XAF "
		  "XAG XAU XBA XBB XBC XBD XDR XOF XPD XPF XPT XSU XUA ",
		    0 },
		{ "BHD IQD JOD KWD LYD OMR TND ", 3 },
		{ "CLF UYW ", 4 },
	};
	const char *p;
	size_t i;

	if (strlen(code) != 3)
		return 2;
	for (i = 0; i < sizeof exponents / sizeof exponents[0]; i++) {
		for (p = exponents[i].codes; *p != '\0'; p += 4) {
			if (strncmp(p, code, 3) == 0)
				return exponents[i].digits;
		}
	}
	return 2;
}

/*
 * Parse an ISO 4217 currency code into buf (size >= 4), uppercasing it; a
 * common non-ISO name (RMB) is refused naming the code meant (CNY).
 */
int
billing_parse_currency(const char *text, char *buf, size_t size, char **cause)
{
	char up[4];
	size_t i;

	if (strlen(text) != 3 || size < sizeof up)
		goto bad;
	for (i = 0; i < 3; i++)
		up[i] = (char)toupper((unsigned char)text[i]);
	up[3] = '\0';
	if (!currency_ok(up))
		goto bad;
	if (!billing_currency_known(up)) {
		for (i = 0;
		     i < sizeof currency_hints / sizeof currency_hints[0];
		     i++) {
			if (strcmp(currency_hints[i].name, up) == 0) {
				xasprintf(cause,
				    "currency '%s' is not an ISO 4217 code: "
				    "use %s",
				    text, currency_hints[i].code);
				return -1;
			}
		}
		xasprintf(cause,
		    "currency '%s' is not an ISO 4217 code (e.g. CNY, USD, "
		    "EUR)",
		    text);
		return -1;
	}
	xstrlcpy(buf, up, size);
	return 0;
bad:
	xasprintf(cause,
	    "currency '%s' must be a three-letter code (e.g. CNY, USD, EUR)",
	    text);
	return -1;
}

/* The name billing_parse_unit reads. */
const char *
billing_unit_name(enum billing_unit unit)
{
	switch (unit) {
	case BILL_SECOND:
		return "second";
	case BILL_MINUTE:
		return "minute";
	case BILL_HOUR:
		return "hour";
	}
	return "?";
}

/* The short period name that billing_parse_price reads back. */
const char *
billing_per_name(enum billing_per per)
{
	switch (per) {
	case BILL_PER_SECOND:
		return "s";
	case BILL_PER_MINUTE:
		return "min";
	case BILL_PER_HOUR:
		return "h";
	case BILL_PER_DAY:
		return "day";
	}
	return "?";
}

/* Seconds in one billing unit. */
int64_t
billing_unit_seconds(enum billing_unit unit)
{
	switch (unit) {
	case BILL_SECOND:
		return 1;
	case BILL_MINUTE:
		return 60;
	case BILL_HOUR:
		return 3600;
	}
	return 1;
}

/* Seconds in one price period. */
int64_t
billing_per_seconds(enum billing_per per)
{
	switch (per) {
	case BILL_PER_SECOND:
		return 1;
	case BILL_PER_MINUTE:
		return 60;
	case BILL_PER_HOUR:
		return 3600;
	case BILL_PER_DAY:
		return 86400;
	}
	return 3600;
}

/* A free rule billed per second in currency (NULL: none yet). */
void
billing_rule_init(struct billing_rule *rule, const char *currency)
{
	memset(rule, 0, sizeof *rule);
	rule->price_per = BILL_PER_HOUR;
	rule->unit = BILL_SECOND;
	if (currency != NULL)
		xstrlcpy(rule->currency, currency, sizeof rule->currency);
}

/* Refuse an amount outside [0, BILLING_AMOUNT_MAX]. */
static int
check_amount(const char *what, money_t v, char **cause)
{
	if (v >= 0 && v <= BILLING_AMOUNT_MAX)
		return 0;
	xasprintf(
	    cause, "%s %lld (minor units) is out of range", what, (long long)v);
	return -1;
}

/* Check every field of a rule. */
int
billing_rule_validate(const struct billing_rule *rule, char **cause)
{
	if (check_amount("price", rule->price, cause) != 0 ||
	    check_amount("stopped price", rule->stopped_per_day, cause) != 0 ||
	    check_amount("monthly price", rule->monthly_price, cause) != 0 ||
	    check_amount("egress price", rule->egress_per_gb, cause) != 0)
		return -1;
	if ((unsigned)rule->price_per > BILL_PER_DAY) {
		xasprintf(cause, "price period %d is not known",
		    (int)rule->price_per);
		return -1;
	}
	if (over_ceiling(rule->price, billing_per_seconds(rule->price_per)) ||
	    over_ceiling(rule->stopped_per_day, 86400) ||
	    rule->egress_per_gb > BILLING_PRICE_MAX_HOUR) {
		xasprintf(cause,
		    "a price of this instance is above 1000000 an hour "
		    "(or /GB); correct it with gpufleet set");
		return -1;
	}
	if ((unsigned)rule->unit > BILL_HOUR) {
		xasprintf(
		    cause, "billing unit %d is not known", (int)rule->unit);
		return -1;
	}
	if (rule->min_billed < 0 || rule->min_billed > BILLING_MIN_BILLED_MAX) {
		xasprintf(cause, "min_billed %llds is out of range (0 to 30d)",
		    (long long)rule->min_billed);
		return -1;
	}
	if (memchr(rule->currency, '\0', sizeof rule->currency) == NULL ||
	    !currency_ok(rule->currency)) {
		xasprintf(cause,
		    "currency '%.*s' must be three uppercase letters "
		    "(e.g. CNY, USD)",
		    (int)sizeof rule->currency, rule->currency);
		return -1;
	}
	return 0;
}

/* price per period applied to secs, rounded up to the minor unit. */
money_t
billing_price_for(money_t price, enum billing_per per, int64_t secs)
{
	if (price <= 0 || secs <= 0)
		return 0;
	return saturate(ceil_div((i128)price * secs, billing_per_seconds(per)));
}

/* The rule's price for one hour, rounded up to the minor unit. */
money_t
billing_hourly_price(const struct billing_rule *rule)
{
	return billing_price_for(rule->price, rule->price_per, 3600);
}

/* Billed seconds for one run of secs: minimum, then whole units. */
int64_t
billing_billed_seconds(const struct billing_rule *rule, int64_t secs)
{
	int64_t unit = billing_unit_seconds(rule->unit);

	if (secs < rule->min_billed)
		secs = rule->min_billed;
	if (secs <= 0)
		return 0;
	return saturate(ceil_div(secs, unit) * unit);
}

/* The cost of one run of secs (negative counts as 0); billed may be NULL. */
money_t
billing_run_cost(const struct billing_rule *rule, int64_t secs, int64_t *billed)
{
	int64_t b = billing_billed_seconds(rule, secs);

	if (billed != NULL)
		*billed = b;
	return billing_price_for(rule->price, rule->price_per, b);
}

/* Storage for secs of stopped time, prorated per second. */
money_t
billing_stopped_cost(const struct billing_rule *rule, int64_t secs)
{
	return billing_price_for(rule->stopped_per_day, BILL_PER_DAY, secs);
}

/* Egress for bytes, a GB being 10^9 bytes. */
money_t
billing_egress_cost(const struct billing_rule *rule, int64_t bytes)
{
	if (rule->egress_per_gb <= 0 || bytes <= 0)
		return 0;
	return saturate(
	    ceil_div((i128)rule->egress_per_gb * bytes, BYTES_PER_GB));
}

/* Clamp v into [lo, hi]. */
static int64_t
clip(int64_t v, int64_t lo, int64_t hi)
{
	return v < lo ? lo : v > hi ? hi : v;
}

/* The index of the entry in force at t: the last from <= t, else 0. */
static size_t
price_index(const struct billing_price *p, size_t np, int64_t t)
{
	size_t i = 0;

	while (i + 1 < np && p[i + 1].from <= t)
		i++;
	return i;
}

/* The rule in force at t (the first one before any entry's from). */
const struct billing_rule *
billing_price_at(const struct billing_price *p, size_t np, int64_t t)
{
	return &p[price_index(p, np, t)].rule;
}

/* The first k >= 0 with s + k * u >= t: the first unit starting at t. */
static int64_t
first_unit(int64_t s, int64_t u, int64_t t)
{
	if (t <= s)
		return 0;
	return (int64_t)ceil_div((i128)t - s, u);
}

/*
 * The pieces of one run starting at start and lasting secs under the price
 * history p (see billing.h): billed time and unit from the rule at start,
 * each billed unit at the price in force when it starts. Returns the exact
 * sum times 86400 (a common denominator: every price period divides a
 * day) of the billed units from unit kfrom on (0: all of them), not yet
 * rounded. billed may be NULL; with pc (room for np), the pieces with
 * those units are stored there, *npc of them, one per price (units under
 * the same price in a row are one piece).
 */
static i128
run_pieces(const struct billing_price *p, size_t np, int64_t start,
    int64_t secs, int64_t kfrom, int64_t *billed, struct billing_piece *pc,
    size_t *npc)
{
	const struct billing_rule *r0 = billing_price_at(p, np, start);
	int64_t b = billing_billed_seconds(r0, secs);
	int64_t u = billing_unit_seconds(r0->unit), units = b / u, k0, k1;
	const struct billing_rule *ri;
	i128 num = 0;
	size_t i;

	if (billed != NULL)
		*billed = b;
	if (npc != NULL)
		*npc = 0;
	for (i = price_index(p, np, start); i < np && units > 0; i++) {
		ri = &p[i].rule;
		k0 = i == 0 ? 0 : first_unit(start, u, p[i].from);
		k1 = i + 1 < np ? first_unit(start, u, p[i + 1].from) : units;
		if (k0 < kfrom)
			k0 = kfrom;
		if (k1 > units)
			k1 = units;
		if (k1 <= k0)
			continue;
		if (pc != NULL && *npc > 0 &&
		    pc[*npc - 1].rule.price == ri->price &&
		    pc[*npc - 1].rule.price_per == ri->price_per) {
			/* The same price again (another field changed). */
			pc[*npc - 1].secs += (k1 - k0) * u;
			pc[*npc - 1].units += k1 - k0;
		} else if (pc != NULL) {
			pc[*npc].start = start + k0 * u;
			pc[*npc].secs = (k1 - k0) * u;
			pc[*npc].units = k1 - k0;
			pc[*npc].rule = *ri;
			(*npc)++;
		}
		if (ri->price > 0)
			num += (i128)(k1 - k0) * u * ri->price *
			    (86400 / billing_per_seconds(ri->price_per));
	}
	return num;
}

/* An exact sum times 86400 rounded up once into minor units. */
static money_t
round_day(i128 num)
{
	return num > 0 ? saturate(ceil_div(num, 86400)) : 0;
}

/*
 * The cost of one run starting at start and lasting secs under the price
 * history p (see billing.h): billed time and unit from the rule at start,
 * each billed unit at the price in force when it starts, the exact sum
 * rounded up once. billed may be NULL.
 */
money_t
billing_run_cost_prices(const struct billing_price *p, size_t np, int64_t start,
    int64_t secs, int64_t *billed)
{
	return round_day(run_pieces(p, np, start, secs, 0, billed, NULL, NULL));
}

/*
 * What interval iv, billed as running in the run that starts at s0, has
 * been charged by time t: the run's charge had it stopped at t, less, if
 * iv continues the run (cont), what the run was charged through iv's
 * start; with pc, the pieces of its own units, as run_pieces.
 */
static money_t
run_charge_at(const struct billing_price *p, size_t np,
    const struct billing_interval *iv, int64_t s0, int cont, int64_t t,
    struct billing_piece *pc, size_t *npc)
{
	int64_t x = clip(t, iv->start, iv->end) - s0, u, b;
	money_t prior;

	if (npc != NULL)
		*npc = 0;
	if (t <= iv->start)
		return 0;
	if (!cont)
		return round_day(run_pieces(p, np, s0, x, 0, NULL, pc, npc));
	prior =
	    round_day(run_pieces(p, np, s0, iv->start - s0, 0, &b, NULL, NULL));
	u = billing_unit_seconds(billing_price_at(p, np, s0)->unit);
	if (pc != NULL)
		(void)run_pieces(p, np, s0, x, b / u, NULL, pc, npc);
	return round_day(run_pieces(p, np, s0, x, 0, NULL, NULL, NULL)) - prior;
}

/* The billed seconds of iv by time t, as run_charge_at. */
static int64_t
run_billed_at(const struct billing_price *p, size_t np,
    const struct billing_interval *iv, int64_t s0, int cont, int64_t t)
{
	const struct billing_rule *r0 = billing_price_at(p, np, s0);

	if (t <= iv->start)
		return 0;
	return billing_billed_seconds(r0, clip(t, iv->start, iv->end) - s0) -
	    (cont ? billing_billed_seconds(r0, iv->start - s0) : 0);
}

/*
 * What a stopped interval has been charged for storage by time t: each
 * second at the storage price in force then, the sum rounded up once.
 * With pc (room for np), its pieces: the seconds under each storage price.
 */
static money_t
stopped_charge_at(const struct billing_price *p, size_t np,
    const struct billing_interval *iv, int64_t t, struct billing_piece *pc,
    size_t *npc)
{
	int64_t end = clip(t, iv->start, iv->end), lo, hi;
	i128 num = 0;
	size_t i;

	if (npc != NULL)
		*npc = 0;
	for (i = price_index(p, np, iv->start); i < np; i++) {
		lo = i == 0 || p[i].from < iv->start ? iv->start : p[i].from;
		hi = i + 1 < np && p[i + 1].from < end ? p[i + 1].from : end;
		if (lo >= end)
			break;
		if (hi > lo && pc != NULL && *npc > 0 &&
		    pc[*npc - 1].rule.stopped_per_day ==
			p[i].rule.stopped_per_day)
			pc[*npc - 1].secs += hi - lo;
		else if (hi > lo && pc != NULL) {
			pc[*npc].start = lo;
			pc[*npc].secs = hi - lo;
			pc[*npc].units = 0;
			pc[*npc].rule = p[i].rule;
			(*npc)++;
		}
		if (hi > lo && p[i].rule.stopped_per_day > 0)
			num += (i128)p[i].rule.stopped_per_day * (hi - lo);
	}
	return round_day(num);
}

/* Refuse a time outside [0, BILLING_TIME_MAX]. */
static int
check_time(const char *what, int64_t t, char **cause)
{
	if (t >= 0 && t <= BILLING_TIME_MAX)
		return 0;
	xasprintf(cause, "%s %lld is out of range", what, (long long)t);
	return -1;
}

/*
 * Refuse a price history that is empty, out of order, in more than one
 * currency or holds an invalid rule.
 */
static int
check_prices(const struct billing_price *p, size_t np, char **cause)
{
	size_t i;

	if (np == 0) {
		xasprintf(cause, "no price");
		return -1;
	}
	for (i = 0; i < np; i++) {
		if (billing_rule_validate(&p[i].rule, cause) != 0)
			return -1;
		if (i > 0 && p[i].from <= p[i - 1].from) {
			xasprintf(cause,
			    "price from %lld is not after the one before it "
			    "(from %lld)",
			    (long long)p[i].from, (long long)p[i - 1].from);
			return -1;
		}
		if (strcmp(p[i].rule.currency, p[0].rule.currency) != 0) {
			xasprintf(cause,
			    "price from %lld is in %s, the one before in %s",
			    (long long)p[i].from, p[i].rule.currency,
			    p[0].rule.currency);
			return -1;
		}
	}
	return 0;
}

/*
 * How iv, billed as running (a running or unknown interval) in the run
 * that starts at s0, is charged in the window [from, to): as that run's
 * first line, or as a line that continues it (cont), which starts nothing
 * and gets the run's billed units that start in it. With pc, as line_for.
 */
static void
run_line(const struct billing_price *p, size_t np,
    const struct billing_interval *iv, int64_t s0, int cont, int64_t from,
    int64_t to, struct billing_line *l, struct billing_piece *pc, size_t *npc)
{
	const struct billing_rule *r0 = billing_price_at(p, np, s0);
	int64_t unit = billing_unit_seconds(r0->unit);

	l->continues = cont;
	l->starts = !cont && iv->start >= from && iv->start < to;
	l->billed_secs = run_billed_at(p, np, iv, s0, cont, to);
	l->units = l->billed_secs / unit;
	l->min_applied = !cont && l->billed_secs > 0 &&
	    l->billed_secs > (l->secs + unit - 1) / unit * unit;
	l->window_billed =
	    l->billed_secs - run_billed_at(p, np, iv, s0, cont, from);
	l->charge = run_charge_at(p, np, iv, s0, cont, to, pc, npc);
	l->before = run_charge_at(p, np, iv, s0, cont, from, NULL, NULL);
	if (pc != NULL && *npc > 0) {
		/* Billed under the unit and minimum of the run's start. */
		pc[0].rule.unit = r0->unit;
		pc[0].rule.min_billed = r0->min_billed;
	}
}

/*
 * How interval iv is charged in the window [from, to) under the price
 * history p; a running or unknown one as part of the run that starts at
 * s0, continuing it if cont (see billing.h). With pc (room for np), the
 * pieces of its charge, *npc of them: at least one (if none has time, one
 * of 0 s), the first with the unit and minimum it is billed under.
 */
static void
line_for(const struct billing_price *p, size_t np,
    const struct billing_interval *iv, int64_t s0, int cont, int64_t from,
    int64_t to, struct billing_line *l, struct billing_piece *pc, size_t *npc)
{
	const struct billing_rule *r0 =
	    billing_price_at(p, np, iv->state == BILL_STOPPED ? iv->start : s0);
	int64_t lo = iv->start > from ? iv->start : from;
	int64_t hi = iv->end < to ? iv->end : to;

	memset(l, 0, sizeof *l);
	if (npc != NULL)
		*npc = 0;
	l->state = iv->state;
	l->start = iv->start;
	l->end = iv->end;
	l->secs = clip(to, iv->start, iv->end) - iv->start;
	l->window_secs = hi > lo ? hi - lo : 0;
	if (iv->state == BILL_STOPPED) {
		l->charge = stopped_charge_at(p, np, iv, to, pc, npc);
		l->before = stopped_charge_at(p, np, iv, from, NULL, NULL);
	} else
		run_line(p, np, iv, s0, cont, from, to, l, pc, npc);
	l->amount = l->charge - l->before;
	if (pc != NULL && *npc == 0) {
		memset(pc, 0, sizeof *pc);
		pc->start = iv->start;
		pc->rule = *r0;
		*npc = 1;
	}
}

/*
 * The one loop that costs a ledger under a price history in the nwin
 * consecutive windows [bounds[w], bounds[w + 1]), total[w] each: checks
 * every interval, adds each one's line to the totals of the windows that
 * see it and, with lines (one window only), keeps the lines of those the
 * window sees (time in it, a start or a charge) and, with pieces, their
 * pieces (each naming its line), in order.
 *
 * An interval's line is all zero in a window that ends at or before its
 * start, and in one that starts after it ends (its charge no longer
 * grows), so with many windows each interval is costed only in those from
 * the one holding its start to the last one starting before its end: one
 * pass over the ledger and the windows, however many windows.
 */
static int
window_walk(const struct billing_price *p, size_t np,
    const struct billing_interval *iv, size_t n, const int64_t *bounds,
    size_t nwin, struct billing_total *total, struct billing_line *lines,
    size_t *nlines, struct billing_piece **pieces, size_t *npieces,
    char **cause)
{
	const struct billing_interval *v;
	struct billing_total *tw;
	struct billing_piece *pc = NULL;
	struct billing_line l;
	int64_t prev_end = 0, s0 = 0, from, to;
	size_t i, k, npc, w, w0 = 0;
	int cont;

	memset(total, 0, nwin * sizeof *total);
	if (nlines != NULL)
		*nlines = 0;
	if (npieces != NULL)
		*npieces = 0;
	if (check_prices(p, np, cause) != 0)
		return -1;
	for (w = 0; w < nwin; w++) {
		xstrlcpy(total[w].currency, p[0].rule.currency,
		    sizeof total[w].currency);
		from = bounds[w];
		to = bounds[w + 1];
		if (check_time("window start", from, cause) != 0 ||
		    check_time("window end", to, cause) != 0)
			return -1;
		if (from > to) {
			xasprintf(cause,
			    "window ends (%lld) before it starts (%lld)",
			    (long long)to, (long long)from);
			return -1;
		}
	}
	for (i = 0; i < n; i++) {
		v = &iv[i];
		if (check_time("interval start", v->start, cause) != 0 ||
		    check_time("interval end", v->end, cause) != 0)
			return -1;
		if (v->end < v->start) {
			xasprintf(cause,
			    "interval %lld..%lld ends before it starts",
			    (long long)v->start, (long long)v->end);
			return -1;
		}
		if (i > 0 && v->start < prev_end) {
			xasprintf(cause,
			    "interval %lld..%lld overlaps the one before it "
			    "(ending %lld)",
			    (long long)v->start, (long long)v->end,
			    (long long)prev_end);
			return -1;
		}
		if ((unsigned)v->state > BILL_UNKNOWN) {
			xasprintf(cause, "interval %lld..%lld has state %d",
			    (long long)v->start, (long long)v->end,
			    (int)v->state);
			return -1;
		}
		/* The run it is part of (see billing.h). */
		cont = i > 0 && v->start == prev_end &&
		    iv[i - 1].state != BILL_STOPPED &&
		    (v->state == BILL_UNKNOWN ||
			(v->state == BILL_RUNNING && v->resumes));
		if (v->state != BILL_STOPPED && !cont)
			s0 = v->start;
		prev_end = v->end;

		/*
		 * Intervals are in order: the windows they see only move on.
		 * One window takes every interval's line, as it always did
		 * (the reference the pass over many is tested against).
		 */
		while (nwin > 1 && w0 < nwin && bounds[w0 + 1] <= v->start)
			w0++;
		for (w = w0; w < nwin &&
		     (nwin == 1 || bounds[w] < v->end || bounds[w] <= v->start);
		     w++) {
			from = bounds[w];
			to = bounds[w + 1];
			tw = &total[w];
			if (pieces != NULL) {
				*pieces = xreallocarray(
				    *pieces, *npieces + np, sizeof **pieces);
				pc = *pieces + *npieces;
			}
			line_for(p, np, v, s0, cont, from, to, &l, pc, &npc);
			switch (v->state) {
			case BILL_RUNNING:
				tw->running_secs += l.window_secs;
				tw->starts += l.starts;
				tw->billed_secs += l.window_billed;
				tw->compute =
				    billing_sat_add(tw->compute, l.amount);
				break;
			case BILL_STOPPED:
				tw->stopped_secs += l.window_secs;
				tw->storage =
				    billing_sat_add(tw->storage, l.amount);
				break;
			case BILL_UNKNOWN:
				tw->unknown_secs += l.window_secs;
				tw->starts += l.starts;
				tw->billed_secs += l.window_billed;
				tw->compute =
				    billing_sat_add(tw->compute, l.amount);
				tw->unknown =
				    billing_sat_add(tw->unknown, l.amount);
				break;
			}
			if (lines == NULL ||
			    (l.window_secs == 0 && !l.starts && l.amount == 0))
				continue;
			if (pieces != NULL) {
				for (k = 0; k < npc; k++)
					pc[k].line = *nlines;
				*npieces += npc;
			}
			lines[(*nlines)++] = l;
		}
	}
	return 0;
}

/*
 * Cost of one instance's ledger (sorted, non-overlapping intervals) in the
 * window [from, to) under one rule, attributed as incurred (see billing.h).
 */
int
billing_window(const struct billing_rule *rule,
    const struct billing_interval *iv, size_t n, int64_t from, int64_t to,
    struct billing_total *total, char **cause)
{
	struct billing_price p = { 0, *rule };
	int64_t bounds[2] = { from, to };

	return window_walk(
	    &p, 1, iv, n, bounds, 1, total, NULL, NULL, NULL, NULL, cause);
}

/*
 * The same under a price history (np entries sorted by from, one currency;
 * the first is in force before its from too).
 */
int
billing_window_prices(const struct billing_price *p, size_t np,
    const struct billing_interval *iv, size_t n, int64_t from, int64_t to,
    struct billing_total *total, char **cause)
{
	int64_t bounds[2] = { from, to };

	return window_walk(
	    p, np, iv, n, bounds, 1, total, NULL, NULL, NULL, NULL, cause);
}

/*
 * billing_window_prices in each of the nwin consecutive windows [bounds[w],
 * bounds[w + 1]) (bounds in order), total[w] each, the same figures as
 * costing each window on its own, in one pass.
 */
int
billing_windows_prices(const struct billing_price *p, size_t np,
    const struct billing_interval *iv, size_t n, const int64_t *bounds,
    size_t nwin, struct billing_total *total, char **cause)
{
	return window_walk(
	    p, np, iv, n, bounds, nwin, total, NULL, NULL, NULL, NULL, cause);
}

/*
 * billing_window with the line of each interval the window sees, in
 * order: their amounts add up to total's compute and storage. Caller frees
 * *lines (also on failure).
 */
int
billing_explain(const struct billing_rule *rule,
    const struct billing_interval *iv, size_t n, int64_t from, int64_t to,
    struct billing_total *total, struct billing_line **lines, size_t *nlines,
    char **cause)
{
	struct billing_price p = { 0, *rule };
	int64_t bounds[2] = { from, to };
	int r;

	*lines = xcalloc(n + 1, sizeof **lines);
	r = window_walk(
	    &p, 1, iv, n, bounds, 1, total, *lines, nlines, NULL, NULL, cause);
	if (r != 0)
		*nlines = 0;
	return r;
}

/*
 * billing_explain under a price history, with the pieces of each line's
 * charge (struct billing_piece): a run over a price change has one per
 * price its billed units start under. Caller frees *lines and *pieces
 * (also on failure).
 */
int
billing_explain_prices(const struct billing_price *p, size_t np,
    const struct billing_interval *iv, size_t n, int64_t from, int64_t to,
    struct billing_total *total, struct billing_line **lines, size_t *nlines,
    struct billing_piece **pieces, size_t *npieces, char **cause)
{
	int64_t bounds[2] = { from, to };
	int r;

	*lines = xcalloc(n + 1, sizeof **lines);
	*pieces = NULL;
	r = window_walk(p, np, iv, n, bounds, 1, total, *lines, nlines, pieces,
	    npieces, cause);
	if (r != 0) {
		*nlines = 0;
		*npieces = 0;
	}
	return r;
}

/* Add src into dst; refuses different currencies (an empty dst adopts). */
int
billing_total_add(
    struct billing_total *dst, const struct billing_total *src, char **cause)
{
	if (dst->currency[0] == '\0')
		xstrlcpy(dst->currency, src->currency, sizeof dst->currency);
	else if (strcmp(dst->currency, src->currency) != 0) {
		xasprintf(cause, "cannot add %s to %s: different currencies",
		    src->currency, dst->currency);
		return -1;
	}
	dst->running_secs += src->running_secs;
	dst->billed_secs += src->billed_secs;
	dst->starts += src->starts;
	dst->stopped_secs += src->stopped_secs;
	dst->unknown_secs += src->unknown_secs;
	dst->compute = billing_sat_add(dst->compute, src->compute);
	dst->storage = billing_sat_add(dst->storage, src->storage);
	dst->unknown = billing_sat_add(dst->unknown, src->unknown);
	return 0;
}

/* Add amount to the sum for currency, starting one if needed. */
int
billing_sums_add(struct billing_sums *sums, const char *currency,
    money_t amount, char **cause)
{
	struct billing_sum *s;
	money_t v;
	size_t i;

	if (strlen(currency) != 3 || !currency_ok(currency)) {
		xasprintf(cause,
		    "currency '%s' must be three uppercase letters", currency);
		return -1;
	}
	for (i = 0; i < sums->n; i++) {
		if (strcmp(sums->v[i].currency, currency) == 0)
			break;
	}
	if (i == sums->n) {
		sums->v = xreallocarray(sums->v, sums->n + 1, sizeof *sums->v);
		s = &sums->v[sums->n++];
		xstrlcpy(s->currency, currency, sizeof s->currency);
		s->amount = 0;
	}
	s = &sums->v[i];
	if (__builtin_add_overflow(s->amount, amount, &v)) {
		xasprintf(cause, "sum in %s overflows", currency);
		return -1;
	}
	s->amount = v;
	return 0;
}

/*
 * Add amount to *sum; one that would leave the money_t range fails with
 * *cause set and *sum unchanged.
 */
int
billing_add(money_t *sum, money_t amount, char **cause)
{
	money_t v;

	if (__builtin_add_overflow(*sum, amount, &v)) {
		xasprintf(cause,
		    "a sum of amounts overflows (a price or a stored "
		    "report is wrong)");
		return -1;
	}
	*sum = v;
	return 0;
}

/* The sum for currency, 0 if there is none. */
money_t
billing_sums_get(const struct billing_sums *sums, const char *currency)
{
	size_t i;

	for (i = 0; i < sums->n; i++) {
		if (strcmp(sums->v[i].currency, currency) == 0)
			return sums->v[i].amount;
	}
	return 0;
}

/* Free the sums and empty them. */
void
billing_sums_free(struct billing_sums *sums)
{
	free(sums->v);
	sums->v = NULL;
	sums->n = 0;
}

/*
 * Hours of use per day above which the monthly plan is cheaper: monthly
 * price / hourly price / 30 days. -1 without a monthly plan or a price.
 */
int
billing_monthly_breakeven(const struct billing_rule *rule, double *hours)
{
	if (rule->monthly_price <= 0 || rule->price <= 0)
		return -1;
	*hours = (double)rule->monthly_price *
	    (double)billing_per_seconds(rule->price_per) /
	    ((double)rule->price * 3600.0) / BILLING_MONTH_DAYS;
	return 0;
}

/*
 * What the monthly plan saves over a 30-day month of hours_per_day (clamped
 * to 0..24) paid by the second at the rule's price; negative if it costs
 * more, 0 without a monthly plan. Unit rounding and minimum charges are left
 * out, so hourly spend and the savings are lower bounds.
 */
money_t
billing_monthly_savings(const struct billing_rule *rule, double hours_per_day)
{
	int64_t secs;

	if (rule->monthly_price <= 0)
		return 0;
	if (!(hours_per_day > 0))
		hours_per_day = 0;
	if (hours_per_day > 24)
		hours_per_day = 24;
	/* Non-negative and at most 2592000: + 0.5 rounds to nearest. */
	secs = (int64_t)(hours_per_day * 3600.0 * BILLING_MONTH_DAYS + 0.5);
	return billing_price_for(rule->price, rule->price_per, secs) -
	    rule->monthly_price;
}

/* The monthly-plan comparison at hours_per_day; -1 without a plan or price. */
int
billing_advise_monthly(const struct billing_rule *rule, double hours_per_day,
    struct billing_advice *adv)
{
	memset(adv, 0, sizeof *adv);
	if (billing_monthly_breakeven(rule, &adv->breakeven_hours_per_day) != 0)
		return -1;
	adv->used_hours_per_day = hours_per_day;
	adv->monthly_price = rule->monthly_price;
	adv->savings = billing_monthly_savings(rule, hours_per_day);
	adv->hourly_month = adv->savings + rule->monthly_price;
	return 0;
}

/* Seconds until balance is spent at burn per period seconds. */
static int
runway_over(money_t balance, money_t burn, int64_t period, int64_t *secs)
{
	if (burn < 0)
		return -1;
	if (balance <= 0) {
		*secs = 0;
		return 0;
	}
	if (burn == 0) {
		*secs = INT64_MAX;
		return 1;
	}
	*secs = saturate((i128)balance * period / burn);
	return 0;
}

/*
 * Seconds until balance is spent at burn_per_hour, rounded down: 0 with
 * *secs set; 1 when it never runs out (burn 0, *secs = INT64_MAX); -1 for a
 * negative burn. A balance at or below 0 has 0 seconds left.
 */
int
billing_runway(money_t balance, money_t burn_per_hour, int64_t *secs)
{
	return runway_over(balance, burn_per_hour, 3600, secs);
}

/* billing_runway at a burn stated per day (exact for storage rates). */
int
billing_runway_daily(money_t balance, money_t burn_per_day, int64_t *secs)
{
	return runway_over(balance, burn_per_day, 86400, secs);
}

/*
 * What an instance in state spends per day, exactly (every price period
 * divides a day): its price while running or unknown (billed as running),
 * its storage while stopped. Observed egress is not included.
 */
money_t
billing_daily_burn(const struct billing_rule *rule, enum billing_state state)
{
	if (state == BILL_RUNNING || state == BILL_UNKNOWN)
		return billing_price_for(rule->price, rule->price_per, 86400);
	if (state == BILL_STOPPED)
		return rule->stopped_per_day > 0 ? rule->stopped_per_day : 0;
	return 0;
}

/* m rounded to whole cents as billing_format shows it, in minor units. */
money_t
billing_cents(money_t m)
{
	i128 a = m < 0 ? -(i128)m : (i128)m, c = a / 100 + (a % 100 >= 50);

	return saturate(m < 0 ? -c * 100 : c * 100);
}

/*
 * Round n parts to whole cents (in shown[], minor units) so that they add
 * up to target (a whole number of cents, usually billing_cents of their
 * sum) by largest remainder: every part is first rounded down, then the
 * cents missing go one each to the parts with the largest remainders
 * (earlier parts first on ties); cents too many (a target below the sum)
 * come off the parts with the smallest remainders, later parts first.
 */
void
billing_round_parts(
    const money_t *parts, size_t n, money_t target, money_t *shown)
{
	i128 sum = 0, rem, best_rem;
	int64_t cents;
	size_t i, k, best;
	unsigned char *done;

	if (n == 0)
		return;
	for (i = 0; i < n; i++) {
		i128 p = parts[i], f = p >= 0 ? p / 100 : -((-p + 99) / 100);
		shown[i] = saturate(f * 100);
		sum += f * 100;
	}
	cents = (int64_t)(((i128)target - sum) / 100);
	done = xcalloc(n, 1);
	while (cents != 0) {
		/* One pass hands at most one cent to each part. */
		memset(done, 0, n);
		for (k = 0; k < n && cents != 0; k++) {
			best = n;
			best_rem = 0;
			for (i = 0; i < n; i++) {
				if (done[i])
					continue;
				rem = (i128)parts[i] - shown[i];
				if (best == n ||
				    (cents > 0 && rem > best_rem) ||
				    (cents < 0 && rem <= best_rem)) {
					best = i;
					best_rem = rem;
				}
			}
			done[best] = 1;
			shown[best] = billing_sat_add(
			    shown[best], cents > 0 ? 100 : -100);
			cents += cents > 0 ? -1 : 1;
		}
	}
	free(done);
}

/*
 * For display: 2 decimals rounded half away from zero, thousands grouped
 * with ',', then the currency if any: "1,137.50 CNY". Caller frees.
 */
char *
billing_format(money_t m, const char *currency)
{
	unsigned long long a, cents, whole;
	char digits[32], grouped[48], *out;
	size_t len, i, j = 0;
	int neg = m < 0;

	a = neg ? 0ULL - (unsigned long long)m : (unsigned long long)m;
	cents = a / 100 + (a % 100 >= 50);
	if (cents == 0)
		neg = 0;
	whole = cents / 100;
	snprintf(digits, sizeof digits, "%llu", whole);
	len = strlen(digits);
	for (i = 0; i < len; i++) {
		if (i > 0 && (len - i) % 3 == 0)
			grouped[j++] = ',';
		grouped[j++] = digits[i];
	}
	grouped[j] = '\0';
	xasprintf(&out, "%s%s.%02llu%s%s", neg ? "-" : "", grouped, cents % 100,
	    currency != NULL && *currency != '\0' ? " " : "",
	    currency != NULL ? currency : "");
	return out;
}

/*
 * Exact, for round trips and JSON strings: 2 to 4 decimals, no grouping,
 * no currency ("2.69", "0.0001", "60.00"). Caller frees.
 */
char *
billing_format_exact(money_t m)
{
	unsigned long long a, frac;
	const char *sign = m < 0 ? "-" : "";
	char *out;

	a = m < 0 ? 0ULL - (unsigned long long)m : (unsigned long long)m;
	frac = a % BILLING_MINOR_PER_UNIT;
	if (frac % 100 == 0)
		xasprintf(&out, "%s%llu.%02llu", sign,
		    a / BILLING_MINOR_PER_UNIT, frac / 100);
	else if (frac % 10 == 0)
		xasprintf(&out, "%s%llu.%03llu", sign,
		    a / BILLING_MINOR_PER_UNIT, frac / 10);
	else
		xasprintf(&out, "%s%llu.%04llu", sign,
		    a / BILLING_MINOR_PER_UNIT, frac);
	return out;
}

/*
 * Exact, in major units for spreadsheets: the currency's ISO 4217 decimals,
 * more (up to 4) only where the amount has them; no grouping, no currency
 * ("9.20", "4.9765", JPY "120", KWD "1.500"). Caller frees.
 */
char *
billing_format_major(money_t m, const char *currency)
{
	unsigned long long a, frac;
	int digits = billing_currency_digits(currency), k;
	const char *sign = m < 0 ? "-" : "";
	char *out;

	a = m < 0 ? 0ULL - (unsigned long long)m : (unsigned long long)m;
	frac = a % BILLING_MINOR_PER_UNIT;
	/* Drop the trailing zeros of frac beyond the currency's digits. */
	for (k = 4; k > digits && frac % 10 == 0; k--)
		frac /= 10;
	if (k == 0)
		xasprintf(&out, "%s%llu", sign, a / BILLING_MINOR_PER_UNIT);
	else
		xasprintf(&out, "%s%llu.%0*llu", sign,
		    a / BILLING_MINOR_PER_UNIT, k, frac);
	return out;
}

/* A price as billing_parse_price reads it: "2.69/h". Caller frees. */
char *
billing_format_price(money_t price, enum billing_per per)
{
	char *amount = billing_format_exact(price), *out;

	xasprintf(&out, "%s/%s", amount, billing_per_name(per));
	free(amount);
	return out;
}

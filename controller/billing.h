/*
 * The billing model: prices, billing rules and what a ledger of intervals
 * costs. Pure and clock-free: every time is a parameter (Unix seconds), so
 * tests drive it with tables.
 *
 * Money. money_t is an integer count of minor units of 1/10000 of the
 * currency unit (2.69 CNY is 26900). Amounts in different currencies are
 * never added: struct billing_total and struct billing_sums carry their
 * currency and refuse (or keep apart) anything else.
 *
 * Rounding. Every computed charge is rounded UP to the next minor unit, once,
 * on the exact rational value (price * seconds / period, in 128-bit
 * integers), as platforms never bill fractions in the renter's favour. Sums
 * are of already-rounded charges. Nothing wraps: prices above
 * BILLING_PRICE_MAX_HOUR are refused, results beyond the money_t range
 * saturate at BILLING_MONEY_MAX (far beyond any real bill), and sums of
 * amounts (billing_add, billing_sums_add) fail with a message instead.
 *
 * One run (one start..stop of an instance) under a rule:
 *   billed  = max(ran, min_billed), rounded up to whole units (second,
 *             minute or hour); the same as taking the larger of the two
 *             after rounding each, so the order does not matter.
 *             A run of 0 s is still a start: it is billed min_billed
 *             (rounded up to units), which is 0 when there is no minimum.
 *   cost    = ceil(price * billed / period of the price).
 * Each run is rounded on its own, so under hourly billing three 5-minute
 * runs in one hour cost three hours.
 *
 * While stopped: storage costs stopped_per_day prorated per second of
 * stopped time, ceil(stopped_per_day * seconds / 86400). Platforms vary
 * (some charge per started hour or day of storage); this is the model.
 *
 * Egress: ceil(egress_per_gb * bytes / 10^9); a GB is 10^9 bytes.
 *
 * Report windows. A run's cost is attributed as it is incurred: its charge
 * up to time t is what it would have cost had it stopped at t (0 before it
 * starts, the minimum charge and the first started unit as soon as it
 * starts, its whole cost once it ends). A window [from, to) gets the growth
 * of that charge over the window. So a run is billed exactly once in total,
 * consecutive windows (days of a month) add up to the whole window to the
 * minor unit, a window that has ended never changes as a run goes on, and
 * a started unit is charged when it starts, as prepaid platforms deduct it.
 * Storage is attributed the same way. The ledger given to billing_window is
 * sorted and non-overlapping (touching and zero-length intervals are fine);
 * a run still going is passed with end = now. Time covered by no interval
 * counts nowhere: the ledger passes BILL_UNKNOWN intervals for stretches it
 * cannot account for, and no interval for time the instance did not exist
 * (before it was added, after it was released).
 *
 * Unknown is billed as running. A BILL_UNKNOWN interval is a stretch
 * gpufleet cannot account for (the instance unreachable): it does not know
 * the instance stopped, and a platform bills until it stops, so the stretch
 * is charged exactly as running would be under the prices in force, and
 * kept apart in what is shown (unknown_secs, the unknown part of compute,
 * the line's state). It is charged as part of a run, never as a second
 * start of the same billing session:
 *   - an unknown interval that begins where a run ends (a running
 *     interval, or an unknown one billed as part of a run) continues that
 *     run: the run is billed from its start through the unknown stretch,
 *     the minimum and the rounding to whole units applied once, as for one
 *     run; so a run billed per hour that is unreachable for 5 minutes pays
 *     neither a second minimum nor a second started hour;
 *   - a running interval with resumes set (the ledger saw the instance
 *     come back, not start again) that begins where such an unknown
 *     stretch ends continues the run too; any other running interval is a
 *     new start with its own minimum (a start stated after an outage, or a
 *     container start that moved during it, may be a restart);
 *   - an unknown interval after a stop, after a gap or first in the ledger
 *     is billed as a run of its own, minimum included: gpufleet does not
 *     know the instance did not start.
 * So an instance that ran through the stretch is billed what the platform
 * bills, never less, and one that stopped during it is billed as running
 * until evidence of the stop is booked (a corrected ledger corrects every
 * report). A line that continues a run gets the growth of the run's charge
 * over it (the run's billed units that start in it, at the prices in force
 * when each starts, under the unit and minimum of the run's start), so the
 * lines of a run add up to its one charge rounded once, and windows cut
 * anywhere still see each unit once.
 *
 * Price history. A price change does not rewrite the past: an instance
 * has a history of rules, each in force from its time until the next one
 * (struct billing_price; the first is in force before its time too, so a
 * price set late still prices the runs before it). A run that spans a
 * change is charged piecewise:
 *   - the billing unit and the minimum are those of the rule in force at
 *     the run's start, so billed is as above under that rule;
 *   - the billed time is cut into its units from the run's start (unit k
 *     covers start + k*unit .. start + (k+1)*unit), and each unit is
 *     charged at the price in force when it starts (also the minimum's
 *     units past the run's end);
 *   - the exact sum is rounded up once per run, as above.
 * Storage is charged per second at the storage price in force that second,
 * rounded up once per stopped interval. All rules of a history share one
 * currency (billing_window_prices refuses a mix). billing_explain_prices
 * gives the lines of a bill from the same loop, with the pieces of each
 * line's charge (its units or seconds at each price), so a bill over a
 * change shows the piecewise charge its total is made of.
 *
 * Monthly plans are compared over a 30-day month, hourly use priced per
 * second with no unit rounding or minimum (so the savings shown are a lower
 * bound). Runway is balance / burn, rounded down to the second.
 *
 * Burn is what is spent per day now: the price of each instance running or
 * unknown plus the storage of each stopped one (billing_daily_burn), exact
 * in minor units per day; the projection and runway use it. Egress is not
 * in it.
 *
 * Display. billing_format() shows 2 decimals, rounded half away from zero
 * from the minor units. A table whose parts stand next to their total
 * shows the total so rounded and the parts by largest remainder
 * (billing_round_parts), so the shown parts add up to the shown total.
 * JSON should carry money as the exact integer minor units (with
 * "minor_per_unit": 10000), optionally with billing_format_exact()'s string;
 * CSV the exact amount in major units with at least the currency's ISO 4217
 * decimals (billing_format_major: "9.20", "4.9765", JPY "120").
 */
#ifndef GPUFLEET_BILLING_H
#define GPUFLEET_BILLING_H

#include <stddef.h>
#include <stdint.h>

typedef int64_t money_t;

#define BILLING_MINOR_PER_UNIT 10000
#define BILLING_MONEY_MAX      INT64_MAX
/* Largest amount a price, balance or plan may state: 10^9 units. */
#define BILLING_AMOUNT_MAX ((money_t)1000000000 * BILLING_MINOR_PER_UNIT)
/*
 * Highest price accepted, as what it comes to in an hour: 10^6 units (for
 * storage, the same per hour of stopped time; for egress, per GB). A
 * ceiling far above any real rate, so that no sum over any fleet and any
 * window can leave the money_t range.
 */
#define BILLING_PRICE_MAX_HOUR ((money_t)1000000 * BILLING_MINOR_PER_UNIT)
/* Longest duration billing_parse_duration accepts; longest min_billed. */
#define BILLING_DURATION_MAX   ((int64_t)3650 * 86400)
#define BILLING_MIN_BILLED_MAX ((int64_t)30 * 86400)
/* Interval and window times must lie in [0, BILLING_TIME_MAX] (year 9999). */
#define BILLING_TIME_MAX ((int64_t)253402300799)
/* Days in the month that monthly plans are compared over. */
#define BILLING_MONTH_DAYS 30

/* The period a price is stated for. */
enum billing_per {
	BILL_PER_SECOND,
	BILL_PER_MINUTE,
	BILL_PER_HOUR,
	BILL_PER_DAY,
};

/* The unit each running interval is rounded up to. */
enum billing_unit {
	BILL_SECOND,
	BILL_MINUTE,
	BILL_HOUR,
};

enum billing_state {
	BILL_RUNNING,
	BILL_STOPPED,
	BILL_UNKNOWN,
};

struct billing_rule {
	money_t price;		    /* per price_per */
	enum billing_per price_per; /* as the user gave it */
	enum billing_unit unit;
	int64_t min_billed;	 /* seconds, minimum charge per start */
	money_t stopped_per_day; /* storage while stopped, 0 if none */
	money_t monthly_price;	 /* the monthly plan, 0 if none */
	money_t egress_per_gb;	 /* 0 if none */
	char currency[8];	 /* ISO 4217: three uppercase letters */
};

/*
 * One ledger interval [start, end) in Unix seconds. resumes: a running
 * interval that continues the run of the unknown stretch it follows (the
 * instance was seen again, not started again); see "Unknown is billed as
 * running" above.
 */
struct billing_interval {
	int64_t start;
	int64_t end;
	enum billing_state state;
	int resumes;
};

/* What one instance's ledger costs in a window, in one currency. */
struct billing_total {
	char currency[8];
	int64_t running_secs; /* running time inside the window */
	int64_t billed_secs;  /* billed time attributed to the window */
	int64_t starts;	      /* runs that started inside the window */
	int64_t stopped_secs;
	int64_t unknown_secs;
	money_t compute; /* running and unknown stretches */
	money_t storage;
	money_t unknown; /* of compute, what the unknown stretches cost */
};

/*
 * One interval of a ledger as a line of a bill: how billing_window charges
 * it in a window. A run's figures are as of the window end (a run going on
 * past it is counted as if it stopped there), so amount is exactly what the
 * window's total gets from it.
 */
struct billing_line {
	enum billing_state state;
	int64_t start, end;    /* the interval */
	int64_t secs;	       /* its time up to the window end */
	int64_t window_secs;   /* its time inside the window */
	int64_t billed_secs;   /* running, unknown: secs billed (minimum, */
	int64_t units;	       /* whole units); billed_secs in units */
	int min_applied;       /* the minimum charge raised billed_secs */
	int starts;	       /* a run that starts inside the window */
	int64_t window_billed; /* billed seconds attributed to the window */
	money_t charge;	       /* what it is charged by the window end */
	money_t before;	       /* of which before the window starts */
	money_t amount;	       /* charge - before: the window's part */
	int continues;	       /* billed as part of the run before it */
};

/* Per-currency sums, in order of first appearance. */
struct billing_sum {
	char currency[8];
	money_t amount;
};
struct billing_sums {
	struct billing_sum *v;
	size_t n;
};

/* One entry of a price history: rule is in force from from (Unix s). */
struct billing_price {
	int64_t from;
	struct billing_rule rule;
};

/*
 * What a line's charge is made of under a price history
 * (billing_explain_prices): a run's billed units from start, each
 * starting under rule (its price, per its price_per), or a stopped
 * interval's seconds from start under rule (its stopped_per_day). A run
 * over a price change has one piece per price; every line has one at
 * least, and its first's rule has the unit and minimum the line is billed
 * under: those in force at the start of its run (of the line itself for
 * a stopped one). A line billed as running (running or unknown) has units.
 */
struct billing_piece {
	size_t line; /* the index of its line */
	int64_t start;
	int64_t secs;  /* billed as running: its billed units' time */
	int64_t units; /* billed as running: billed units; stopped: 0 */
	struct billing_rule rule;
};

/* Monthly plan against paying by the hour at some usage. */
struct billing_advice {
	double used_hours_per_day;
	double breakeven_hours_per_day; /* above this the plan pays off */
	money_t hourly_month;		/* 30 days at that usage, hourly */
	money_t monthly_price;
	money_t savings; /* hourly_month - monthly_price; < 0: plan costs */
};

/* a + b, saturating at BILLING_MONEY_MAX (and at INT64_MIN). */
money_t billing_sat_add(money_t, money_t);

/* Parsing: 0 or -1 with *cause set (naming the value; caller frees). */
int billing_parse_amount(const char *, money_t *, char **);
int billing_parse_price(const char *, money_t *, enum billing_per *, char **);
int billing_parse_stopped_price(const char *, money_t *, char **);
int billing_parse_egress_price(const char *, money_t *, char **);
int billing_parse_duration(const char *, int64_t *, char **);
int billing_parse_unit(const char *, enum billing_unit *, char **);
int billing_parse_currency(const char *, char *, size_t, char **);
int billing_currency_known(const char *);
int billing_currency_digits(const char *);

const char *billing_unit_name(enum billing_unit);
const char *billing_per_name(enum billing_per);
int64_t billing_unit_seconds(enum billing_unit);
int64_t billing_per_seconds(enum billing_per);

void billing_rule_init(struct billing_rule *, const char *);
int billing_rule_validate(const struct billing_rule *, char **);

/* Charges: each rounded up to the minor unit. */
money_t billing_price_for(money_t, enum billing_per, int64_t);
money_t billing_hourly_price(const struct billing_rule *);
int64_t billing_billed_seconds(const struct billing_rule *, int64_t);
money_t billing_run_cost(const struct billing_rule *, int64_t, int64_t *);
money_t billing_stopped_cost(const struct billing_rule *, int64_t);
money_t billing_egress_cost(const struct billing_rule *, int64_t);

int billing_window(const struct billing_rule *, const struct billing_interval *,
    size_t, int64_t, int64_t, struct billing_total *, char **);
int billing_window_prices(const struct billing_price *, size_t,
    const struct billing_interval *, size_t, int64_t, int64_t,
    struct billing_total *, char **);
int billing_windows_prices(const struct billing_price *, size_t,
    const struct billing_interval *, size_t, const int64_t *, size_t,
    struct billing_total *, char **);
int billing_explain(const struct billing_rule *,
    const struct billing_interval *, size_t, int64_t, int64_t,
    struct billing_total *, struct billing_line **, size_t *, char **);
int billing_explain_prices(const struct billing_price *, size_t,
    const struct billing_interval *, size_t, int64_t, int64_t,
    struct billing_total *, struct billing_line **, size_t *,
    struct billing_piece **, size_t *, char **);
const struct billing_rule *billing_price_at(
    const struct billing_price *, size_t, int64_t);
money_t billing_run_cost_prices(
    const struct billing_price *, size_t, int64_t, int64_t, int64_t *);
int billing_total_add(
    struct billing_total *, const struct billing_total *, char **);
int billing_sums_add(struct billing_sums *, const char *, money_t, char **);
int billing_add(money_t *, money_t, char **);
money_t billing_sums_get(const struct billing_sums *, const char *);
void billing_sums_free(struct billing_sums *);

int billing_monthly_breakeven(const struct billing_rule *, double *);
money_t billing_monthly_savings(const struct billing_rule *, double);
int billing_advise_monthly(
    const struct billing_rule *, double, struct billing_advice *);
int billing_runway(money_t, money_t, int64_t *);
int billing_runway_daily(money_t, money_t, int64_t *);
money_t billing_daily_burn(const struct billing_rule *, enum billing_state);

/* Formatting; caller frees. */
char *billing_format(money_t, const char *);
money_t billing_cents(money_t);
void billing_round_parts(const money_t *, size_t, money_t, money_t *);
char *billing_format_exact(money_t);
char *billing_format_major(money_t, const char *);
char *billing_format_price(money_t, enum billing_per);

#endif

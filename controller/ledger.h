/*
 * What an instance costs is derived, never stored as a running total: from
 * its price history (instance_price) and its ledger of state changes (running,
 * stopped, released, unknown), each with its source: observed (status saw
 * it), performed (gpufleet did it) or stated (`gpufleet mark`). A
 * corrected entry corrects every report.
 */
#ifndef GPUFLEET_LEDGER_H
#define GPUFLEET_LEDGER_H

#include <stdint.h>

#include <jansson.h>

#include "billing.h"
#include "config.h"
#include "instance.h"
#include "inventory.h"

/*
 * How far before an instance was added a ledger entry may be placed (a
 * rental begun before it was added to gpufleet): 7 days.
 */
#define LEDGER_BACKDATE_MAX (7 * 86400)

/* How far the laptop's clock may step back unsaid (NTP's slews). */
#define LEDGER_CLOCK_SLACK 60

#define LEDGER_NPRICE_FIELDS 7
extern const char *const ledger_price_fields[LEDGER_NPRICE_FIELDS];

struct ledger_cost {
	const struct instance *in;
	struct billing_rule rule;
	int priced;
	int running_now;
	int stopped_now; /* the ledger's last word is stopped */
	int unknown_now; /* or unknown: billed as running */
	struct billing_total total;
	int64_t egress_bytes;
	money_t egress;
	money_t amount;	  /* compute + storage + egress */
	double idle_frac; /* NAN: no samples */
	money_t idle;
	int restarts;
	int outages;
};

struct ledger_event {
	int64_t t;
	char state[12];	 /* running stopped released unknown */
	char source[12]; /* observed performed stated */
};

/* One ledger row as `gpufleet ledger` lists it. */
struct ledger_entry {
	int64_t id;
	int64_t t;
	char state[12];
	char source[12];
	char *note; /* or NULL */
};

int ledger_price_get(
    struct inventory *, int64_t, struct billing_rule *, int *, char **);
int ledger_price_put(
    struct inventory *, int64_t, const struct billing_rule *, char **);
int ledger_prices(
    struct inventory *, int64_t, struct billing_price **, size_t *, char **);
int ledger_price_set(
    struct inventory *, int64_t, int64_t, const struct billing_rule *, char **);
char *ledger_price_value(const struct billing_rule *, const char *);
json_t *ledger_price_json(const struct billing_rule *);
int ledger_price_earliest(
    struct inventory *, const struct instance *, int64_t *, char **);
int ledger_price_currency(struct inventory *, int64_t, const char *, char **);
int ledger_price_field(
    struct billing_rule *, const char *, const char *, int *, char **);
int ledger_add(struct inventory *, int64_t, int64_t, const char *, const char *,
    const char *, char **);
int ledger_events(
    struct inventory *, int64_t, struct ledger_event **, size_t *, char **);
struct ledger_books;
int ledger_events_from(struct inventory *, const struct ledger_books *, int64_t,
    struct ledger_event **, size_t *, char **);
int ledger_unknown_why(
    struct inventory *, int64_t, int64_t, char *, size_t, char **);
size_t ledger_intervals(
    const struct ledger_event *, size_t, int64_t, struct billing_interval *);
int ledger_incident(
    struct inventory *, int64_t, int64_t, const char *, const char *, char **);
int ledger_cost(struct inventory *, const struct config *, struct ledger_cost *,
    int64_t, int64_t, int64_t, char **);
struct ledger_books;
int ledger_books_load(struct inventory *, struct ledger_books **, char **);
int ledger_books_idle(
    struct inventory *, struct ledger_books *, int64_t, int64_t, int, char **);
void ledger_books_no_idle(struct ledger_books *);
void ledger_books_free(struct ledger_books *);
int ledger_cost_from(struct inventory *, const struct ledger_books *,
    const struct config *, struct ledger_cost *, int64_t, int64_t, int64_t,
    char **);
int ledger_cost_windows(struct inventory *, const struct ledger_books *,
    const struct instance *, const int64_t *, size_t, int64_t,
    struct billing_rule *, money_t *, int *, char **);
int ledger_explain(struct inventory *, const struct config *,
    struct ledger_cost *, int64_t, int64_t, int64_t, struct billing_line **,
    size_t *, struct billing_piece **, size_t *, char **);
int ledger_observe(struct inventory *, const struct instance *, int64_t,
    int64_t, int64_t, int, char **);
int64_t ledger_begin(const struct instance *);
int ledger_clock(struct inventory *, int64_t, char **);
int ledger_entries(
    struct inventory *, int64_t, struct ledger_entry **, size_t *, char **);
void ledger_entries_free(struct ledger_entry *, size_t);
int ledger_remove(struct inventory *, int64_t, int64_t, int64_t *,
    struct ledger_entry *, char **);
int ledger_amend(struct inventory *, int64_t, int64_t, int64_t, int64_t *,
    struct ledger_entry *, char **);
int ledger_check_time(int64_t, int64_t, int64_t, char **);

#endif

/* Cost over a window per instance, provider, day and currency. */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cost.h"
#include "status.h"
#include "xmalloc.h"

static int project(struct cost_report *, const struct billing_sums *,
    const struct billing_sums *, char **);

/* Local midnight of the first day of t's month, or of the next (next 1). */
int64_t
cost_month_start(int64_t t, int next)
{
	time_t tt = (time_t)t;
	struct tm tm;

	localtime_r(&tt, &tm);
	tm.tm_mday = 1;
	tm.tm_hour = tm.tm_min = tm.tm_sec = 0;
	tm.tm_mon += next;
	tm.tm_isdst = -1;
	return (int64_t)mktime(&tm);
}

/*
 * The month-end projection: total plus burn_per_day for secs more, or -1
 * with *cause where that leaves the money range.
 */
int
cost_projection(money_t total, money_t burn_per_day, int64_t secs, money_t *out,
    char **cause)
{
	*out = total;
	return billing_add(
	    out, billing_price_for(burn_per_day, BILL_PER_DAY, secs), cause);
}

/*
 * What a costed instance spends per day now: its price if the ledger says
 * it runs or does not know (billed as running), its storage if stopped; 0
 * unpriced or released.
 */
money_t
cost_burn_per_day(const struct ledger_cost *c)
{
	if (!c->priced || c->in->released_at != 0)
		return 0;
	if (c->running_now || c->unknown_now)
		return billing_daily_burn(&c->rule, BILL_RUNNING);
	if (c->stopped_now)
		return billing_daily_burn(&c->rule, BILL_STOPPED);
	return 0;
}

/* A burn per day as shown per hour, rounded up to the minor unit. */
money_t
cost_hourly(money_t burn_per_day)
{
	return billing_price_for(burn_per_day, BILL_PER_DAY, 3600);
}

/*
 * Every instance, released ones included while they were released at or
 * after from. Caller frees *list with instance_free_array.
 */
int
cost_load_all(struct inventory *inv, int64_t from, struct instance **list,
    size_t *n, char **cause)
{
	size_t i, j;
	int r;

	if ((r = inventory_list(inv, 1, list, n, cause)) != 0)
		return r;
	for (i = j = 0; i < *n; i++) {
		if ((*list)[i].released_at == 0 ||
		    (*list)[i].released_at >= from)
			(*list)[j++] = (*list)[i];
		else
			instance_clear(&(*list)[i]);
	}
	*n = j;
	return 0;
}

/*
 * Every currency's total and burn, projected to the end of the month once.
 */
static int
project(struct cost_report *rep, const struct billing_sums *totals,
    const struct billing_sums *burn, char **cause)
{
	size_t i, j;

	rep->totals = xcalloc(totals->n + 1, sizeof *rep->totals);
	rep->ntotals = totals->n;
	for (i = 0; i < totals->n; i++) {
		struct cost_total *t = &rep->totals[i];
		snprintf(t->currency, sizeof t->currency, "%s",
		    totals->v[i].currency);
		t->amount = totals->v[i].amount;
		t->burn_per_day = billing_sums_get(burn, t->currency);
		t->burn_per_hour = cost_hourly(t->burn_per_day);
		for (j = 0; j < rep->n; j++) {
			if (!rep->rows[j].priced &&
			    strcmp(rep->rows[j].rule.currency, t->currency) ==
				0)
				t->unpriced++;
		}
	}
	rep->month_end =
	    cost_month_start(rep->to > 0 ? rep->to - 1 : rep->to, 1);
	rep->projecting = rep->to >= rep->now - 60 && rep->month_end > rep->now;
	for (i = 0; rep->projecting && i < rep->ntotals; i++) {
		struct cost_total *t = &rep->totals[i];
		if (cost_projection(t->amount, t->burn_per_day,
			rep->month_end - rep->now, &t->projected, cause) != 0)
			return -GF_EUSAGE;
	}
	return 0;
}

/*
 * Cost each of the n instances over [from, to) at time now, with totals
 * per currency and the month-end projection. Free rep with
 * cost_report_free; rep->rows borrow list.
 */
int
cost_by_instance(struct inventory *inv, const struct config *cf,
    const struct instance *list, size_t n, int64_t from, int64_t to,
    int64_t now, struct cost_report *rep, char **cause)
{
	struct billing_sums totals = { NULL, 0 }, burn = { NULL, 0 };
	size_t i;
	int r = 0;

	memset(rep, 0, sizeof *rep);
	rep->from = from;
	rep->to = to;
	rep->now = now;
	rep->rows = xcalloc(n + 1, sizeof *rep->rows);
	rep->n = n;
	if (n > 1 &&
	    ((r = ledger_books_load(inv, &rep->books, cause)) != 0 ||
		(r = ledger_books_idle(inv, rep->books, from, to,
		     cf->status_idle_util, cause)) != 0))
		goto out;
	for (i = 0; i < n; i++) {
		rep->rows[i].in = &list[i];
		const struct ledger_cost *c = &rep->rows[i];
		if ((r = ledger_cost_from(inv, rep->books, cf, &rep->rows[i],
			 from, to, now, cause)) != 0)
			goto out;
		if (billing_sums_add(
			&totals, c->rule.currency, c->amount, cause) != 0 ||
		    billing_sums_add(&burn, c->rule.currency,
			cost_burn_per_day(c), cause) != 0) {
			r = -GF_EUSAGE;
			goto out;
		}
	}
	r = project(rep, &totals, &burn, cause);
out:
	billing_sums_free(&totals);
	billing_sums_free(&burn);
	return r;
}

void
cost_report_free(struct cost_report *rep)
{
	free(rep->rows);
	free(rep->totals);
	ledger_books_free(rep->books);
	memset(rep, 0, sizeof *rep);
}

/*
 * Group the rows by provider and currency, in the order each group first
 * appears. Caller frees *out (its strings are borrowed).
 */
int
cost_by_provider(const struct cost_report *rep, struct cost_group **out,
    size_t *nout, char **cause)
{
	struct cost_group *v = NULL, *g;
	size_t i, j, n = 0;

	for (i = 0; i < rep->n; i++) {
		const struct ledger_cost *c = &rep->rows[i];
		for (g = NULL, j = 0; j < n && g == NULL; j++) {
			if (strcmp(v[j].provider, c->in->provider) == 0 &&
			    strcmp(v[j].currency, c->rule.currency) == 0)
				g = &v[j];
		}
		if (g == NULL) {
			v = xreallocarray(v, n + 1, sizeof *v);
			g = &v[n++];
			memset(g, 0, sizeof *g);
			g->provider = c->in->provider;
			g->currency = c->rule.currency;
		}
		g->instances++;
		g->unpriced += !c->priced;
		g->running_secs += c->total.running_secs;
		g->unknown_secs += c->total.unknown_secs;
		g->restarts += c->restarts;
		g->outages += c->outages;
		if (billing_add(&g->amount, c->amount, cause) != 0) {
			free(v);
			return -GF_EUSAGE;
		}
	}
	*out = v;
	*nout = n;
	return 0;
}

/*
 * The window's cost per local day and currency, days in order and each
 * day's currencies in the order they first appear; an instance whose day
 * cannot be costed is left out of that day. Caller frees *out.
 */
int
cost_by_day(struct inventory *inv, const struct config *cf,
    const struct cost_report *rep, struct cost_day **out, size_t *nout,
    char **cause)
{
	struct cost_day *v = NULL;
	struct billing_rule *rules;
	char(*labels)[16] = NULL;
	int64_t *bounds = NULL, day;
	money_t *amounts;
	size_t i, k, d, ndays = 0, n = 0;
	int *ok, r = 0;

	(void)cf;
	/* The local days of the window: bounds[d] to bounds[d + 1]. */
	bounds = xreallocarray(bounds, 1, sizeof *bounds);
	bounds[0] = rep->from;
	for (day = rep->from; day < rep->to; day = bounds[ndays]) {
		time_t tt = (time_t)day;
		struct tm tm;

		localtime_r(&tt, &tm);
		labels = xreallocarray(labels, ndays + 1, sizeof *labels);
		strftime(labels[ndays], sizeof labels[ndays], "%Y-%m-%d", &tm);
		tm.tm_mday++;
		tm.tm_hour = tm.tm_min = tm.tm_sec = 0;
		tm.tm_isdst = -1;
		bounds = xreallocarray(bounds, ndays + 2, sizeof *bounds);
		bounds[++ndays] = (int64_t)mktime(&tm);
		if (bounds[ndays] > rep->to)
			bounds[ndays] = rep->to;
	}
	/* Each instance's books read once, its days costed in memory. */
	rules = xcalloc(rep->n + 1, sizeof *rules);
	amounts = xcalloc(rep->n * ndays + 1, sizeof *amounts);
	ok = xcalloc(rep->n * ndays + 1, sizeof *ok);
	for (i = 0; i < rep->n && ndays > 0; i++) {
		if (ledger_cost_windows(inv, rep->books, rep->rows[i].in,
			bounds, ndays, rep->now, &rules[i], amounts + i * ndays,
			ok + i * ndays, cause) != 0) {
			free(*cause);
			*cause = NULL;
		}
	}
	for (d = 0; d < ndays && r == 0; d++) {
		struct billing_sums ds = { NULL, 0 };

		for (i = 0; i < rep->n && r == 0; i++) {
			if (ok[i * ndays + d] &&
			    billing_sums_add(&ds, rules[i].currency,
				amounts[i * ndays + d], cause) != 0)
				r = -GF_EUSAGE;
		}
		v = xreallocarray(v, n + ds.n + 1, sizeof *v);
		for (k = 0; k < ds.n && r == 0; k++, n++) {
			snprintf(v[n].day, sizeof v[n].day, "%s", labels[d]);
			snprintf(v[n].currency, sizeof v[n].currency, "%s",
			    ds.v[k].currency);
			v[n].amount = ds.v[k].amount;
			v[n].unpriced = 0;
			for (i = 0; i < rep->n; i++) {
				if (!rep->rows[i].priced &&
				    strcmp(rep->rows[i].rule.currency,
					v[n].currency) == 0)
					v[n].unpriced++;
			}
		}
		billing_sums_free(&ds);
	}
	free(rules);
	free(amounts);
	free(ok);
	free(bounds);
	free(labels);
	if (r != 0) {
		free(v);
		return r;
	}
	*out = v;
	*nout = n;
	return 0;
}

/*
 * Fill p's left, burn and runway at time now: its balance less what its
 * instances among list cost since the balance was stated, and the burn of
 * those running (their price) and stopped (their storage). With lenient, an
 * instance that cannot be costed is left out instead of failing.
 */
int
cost_provider_runway(struct inventory *inv, const struct config *cf,
    const struct instance *list, size_t n, struct provider_info *p, int64_t now,
    int lenient, char **cause)
{
	struct ledger_books *books = NULL;
	struct ledger_cost c;
	money_t spent = 0;
	size_t i, mine = 0;
	int r = 0;

	p->burn = p->burn_per_day = 0;
	p->running = p->stopped = 0;
	p->runway = -1;
	for (i = 0; i < n; i++)
		mine += strcmp(list[i].provider, p->name) == 0;
	/* Many instances: every one's books read at once, not one by one. */
	if (mine > 1) {
		if ((r = ledger_books_load(inv, &books, cause)) != 0)
			return r;
		ledger_books_no_idle(books);
	}
	for (i = 0; i < n; i++) {
		if (strcmp(list[i].provider, p->name) != 0)
			continue;
		memset(&c, 0, sizeof c);
		c.in = &list[i];
		if ((r = ledger_cost_from(inv, books, cf, &c,
			 p->has_balance ? p->balance_at : now, now, now,
			 cause)) != 0) {
			if (!lenient)
				goto out;
			free(*cause);
			*cause = NULL;
			r = 0;
			continue;
		}
		if (!c.priced || strcmp(c.rule.currency, p->currency) != 0)
			continue;
		if (billing_add(&spent, c.amount, cause) != 0 ||
		    billing_add(
			&p->burn_per_day, cost_burn_per_day(&c), cause) != 0) {
			r = -GF_EUSAGE;
			goto out;
		}
		if (cost_burn_per_day(&c) > 0) {
			p->running += c.running_now || c.unknown_now;
			p->stopped += c.stopped_now;
		}
	}
	p->burn = cost_hourly(p->burn_per_day);
	p->left = p->balance;
	if (billing_add(&p->left, -spent, cause) != 0) {
		r = -GF_EUSAGE;
		goto out;
	}
	if (p->has_balance &&
	    billing_runway_daily(p->left, p->burn_per_day, &p->runway) == 1)
		p->runway = -1;
out:
	ledger_books_free(books);
	return r;
}

/*
 * The unknown stretches of in's ledger that [from, to) sees (cut at now),
 * each with why gpufleet does not know: the note of the entry that began
 * it ("unreachable"), else its source ("unreachable" if observed). Caller
 * frees *out.
 */
int
cost_unknown_stretches(struct inventory *inv, const struct instance *in,
    int64_t from, int64_t to, int64_t now, struct cost_unknown **out,
    size_t *nout, char **cause)
{
	return cost_unknown_stretches_from(
	    inv, NULL, in, from, to, now, out, nout, cause);
}

/*
 * cost_unknown_stretches with the ledgers of every instance read before
 * (books, may be NULL): only the entries that began the stretches are
 * read for their notes.
 */
int
cost_unknown_stretches_from(struct inventory *inv,
    const struct ledger_books *books, const struct instance *in, int64_t from,
    int64_t to, int64_t now, struct cost_unknown **out, size_t *nout,
    char **cause)
{
	struct ledger_event *ev = NULL;
	struct billing_interval *iv;
	struct cost_unknown *u;
	int64_t cut = to < now ? to : now, lo, hi;
	size_t n = 0, k, i, m = 0;
	int r = 0;

	*out = NULL;
	*nout = 0;
	if ((r = ledger_events_from(inv, books, in->id, &ev, &n, cause)) != 0)
		return r;
	iv = xcalloc(n + 1, sizeof *iv);
	k = ledger_intervals(ev, n, cut, iv);
	u = xcalloc(k + 1, sizeof *u);
	for (i = 0; i < k && r == 0; i++) {
		lo = iv[i].start > from ? iv[i].start : from;
		hi = iv[i].end < cut ? iv[i].end : cut;
		if (iv[i].state != BILL_UNKNOWN || hi <= lo)
			continue;
		u[m].start = iv[i].start;
		u[m].end = iv[i].end;
		u[m].secs = hi - lo;
		u[m].ongoing = i + 1 == k && iv[i].end == now &&
		    strcmp(ev[n - 1].state, "unknown") == 0;
		r = ledger_unknown_why(
		    inv, in->id, iv[i].start, u[m].why, sizeof u[m].why, cause);
		m++;
	}
	free(iv);
	free(ev);
	if (r != 0) {
		free(u);
		return r;
	}
	*out = u;
	*nout = m;
	return 0;
}

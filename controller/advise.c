/*
 * Recommendations from the ledger, the samples and the providers: monthly
 * plan or hourly, idle spend, storage paid while stopped, platform release
 * deadlines, observed availability and balances about to run out.
 */

#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "advise.h"
#include "cost.h"
#include "ledger.h"
#include "notify.h"
#include "provider.h"
#include "speed.h"
#include "timeparse.h"
#include "xmalloc.h"

struct advise_run {
	struct inventory *inv;
	const struct config *cf;
	int64_t now;
	struct provider_info *prov;
	size_t nprov;
	struct advice *v;
	size_t n;
};

static void add(struct advise_run *, const char *, const char *, const char *,
    ...) __attribute__((format(printf, 4, 5)));
static int advise_instance(
    struct advise_run *, const struct instance *, char **);
static void advise_stopped(struct advise_run *, const struct instance *,
    const struct billing_rule *, int64_t);
static int advise_availability(
    struct advise_run *, const struct instance *, size_t, char **);
static int advise_runway(struct advise_run *, char **);
static int advise_speed(
    struct advise_run *, const struct instance *, size_t, char **);
static int notify_release(struct inventory *, const struct config *,
    const struct instance *, const struct provider_info *, int64_t, int64_t,
    char **);

/* Append one piece of advice. */
static void
add(struct advise_run *ar, const char *kind, const char *name, const char *fmt,
    ...)
{
	struct advice *a;
	va_list ap;

	ar->v = xreallocarray(ar->v, ar->n + 1, sizeof *ar->v);
	a = &ar->v[ar->n++];
	memset(a, 0, sizeof *a);
	a->kind = kind;
	a->name = xstrdup(name);
	va_start(ap, fmt);
	xvasprintf(&a->message, fmt, ap);
	va_end(ap);
}

/*
 * When the evidence on in's use starts: its first ledger entry or when it
 * was added, whichever is earlier, but at most 30 days before now.
 */
static int64_t
evidence_start(const struct instance *in, const struct ledger_event *ev,
    size_t nev, int64_t now)
{
	int64_t t = in->created_at;

	if (nev > 0 && (t <= 0 || ev[0].t < t))
		t = ev[0].t;
	if (t <= 0 || t < now - 30 * 86400)
		t = now - 30 * 86400;
	return t;
}

/*
 * Monthly plan against hourly at the use observed since the evidence
 * starts (30 days at most), saying over how many days.
 */
static int
advise_monthly(struct advise_run *ar, const struct instance *in,
    const struct ledger_event *ev, size_t nev, char **cause)
{
	struct ledger_cost w;
	struct billing_advice adv;
	int64_t from = evidence_start(in, ev, nev, ar->now);
	double days = (double)(ar->now - from) / 86400, h;
	char *a, *b, *verdict;
	int r;

	if (ar->now <= from)
		return 0;
	memset(&w, 0, sizeof w);
	w.in = in;
	if ((r = ledger_cost(
		 ar->inv, ar->cf, &w, from, ar->now, ar->now, cause)) != 0)
		return r;
	/* Unknown stretches are billed as running (billing.h): use. */
	h = (double)(w.total.running_secs + w.total.unknown_secs) / 3600.0 /
	    days;
	if (!w.priced || billing_advise_monthly(&w.rule, h, &adv) != 0)
		return 0;
	a = billing_format(
	    adv.savings >= 0 ? adv.savings : -adv.savings, w.rule.currency);
	b = billing_format(adv.hourly_month, w.rule.currency);
	if (adv.savings > 0)
		xasprintf(&verdict, "saves %s/month over hourly", a);
	else if (adv.savings < 0)
		xasprintf(&verdict, "costs %s/month more than hourly", a);
	else
		verdict = xstrdup("costs the same as hourly");
	add(ar, "monthly", in->name,
	    "used %.1f h/day over %.1f day%s of evidence%s, break-even %.1f "
	    "h/day: the monthly plan %s (%s for 30 days at that use)",
	    h, days, days == 1 ? "" : "s",
	    ar->now - from < 86400 ? " (thin: under a day)" : "",
	    adv.breakeven_hours_per_day, verdict, b);
	free(verdict);
	ar->v[ar->n - 1].has_monthly = 1;
	ar->v[ar->n - 1].monthly = adv;
	ar->v[ar->n - 1].evidence_s = ar->now - from;
	snprintf(ar->v[ar->n - 1].currency, sizeof ar->v[ar->n - 1].currency,
	    "%s", w.rule.currency);
	free(a);
	free(b);
	return 0;
}

/* Monthly plan or hourly, idle share and the stopped checks of one. */
static int
advise_instance(struct advise_run *ar, const struct instance *in, char **cause)
{
	struct ledger_cost w7;
	struct ledger_event *ev = NULL;
	size_t nev;
	int64_t since;
	char *a;
	int r;

	if (instance_still_billing(in)) {
		a = instance_format_time(in->state_since);
		add(ar, "still_billing", in->name,
		    INSTANCE_STILL_BILLING " (stopped since %s, it answered "
					   "status since): stop it, or "
					   "gpufleet mark %s running",
		    a, in->name);
		free(a);
	}
	memset(&w7, 0, sizeof w7);
	w7.in = in;
	if ((r = ledger_cost(ar->inv, ar->cf, &w7, ar->now - 7 * 86400, ar->now,
		 ar->now, cause)) != 0)
		return r;
	if (!w7.priced)
		return 0;
	if ((r = ledger_events(ar->inv, in->id, &ev, &nev, cause)) != 0)
		return r;
	if (w7.rule.monthly_price > 0 &&
	    (r = advise_monthly(ar, in, ev, nev, cause)) != 0)
		goto out;
	/* Idle share of this week's billed time. */
	if (!isnan(w7.idle_frac) && w7.idle_frac >= 0.05 &&
	    w7.total.compute > 0) {
		a = billing_format(w7.idle, w7.rule.currency);
		add(ar, "idle", in->name,
		    "idle %.0f%% of its billed time this week (%s)",
		    w7.idle_frac * 100, a);
		free(a);
	}
	if ((since = advise_stopped_since(ev, nev)) != 0)
		advise_stopped(ar, in, &w7.rule, since);
out:
	free(ev);
	return r;
}

/* Stopped since since: storage still paid, the release deadline near. */
static void
advise_stopped(struct advise_run *ar, const struct instance *in,
    const struct billing_rule *rule, int64_t since)
{
	const struct provider_info *p;
	int days = (int)((ar->now - since) / 86400);
	char *a, *b;

	if (rule->stopped_per_day > 0) {
		a = billing_format(billing_stopped_cost(rule, ar->now - since),
		    rule->currency);
		b = timeparse_duration(ar->now - since);
		add(ar, "stopped", in->name,
		    "stopped for %s and paying storage (%s so far); release "
		    "it if it is not coming back",
		    b, a);
		free(a);
		free(b);
	}
	p = provider_find(ar->prov, ar->nprov, in->provider);
	if (p != NULL && p->release_after_days > 0 &&
	    days >= p->release_after_days - 2)
		add(ar, "release", in->name,
		    "stopped %d days; %s releases instances stopped %d days "
		    "(data lost)",
		    days, in->provider, p->release_after_days);
}

/* Observed availability and restarts per provider, last 30 days. */
static int
advise_availability(
    struct advise_run *ar, const struct instance *list, size_t n, char **cause)
{
	size_t i, j;
	int r;

	for (i = 0; i < n; i++) {
		int64_t run = 0, unk = 0;
		int restarts = 0, outages = 0, seen = 0;
		for (j = 0; j < i && !seen; j++)
			seen = strcmp(list[j].provider, list[i].provider) == 0;
		if (seen || *list[i].provider == '\0')
			continue;
		for (j = i; j < n; j++) {
			struct ledger_cost c;
			if (strcmp(list[j].provider, list[i].provider) != 0)
				continue;
			memset(&c, 0, sizeof c);
			c.in = &list[j];
			if ((r = ledger_cost(ar->inv, ar->cf, &c,
				 ar->now - 30 * 86400, ar->now, ar->now,
				 cause)) != 0)
				return r;
			run += c.total.running_secs;
			unk += c.total.unknown_secs;
			restarts += c.restarts;
			outages += c.outages;
		}
		if (run + unk == 0)
			continue;
		add(ar, "availability", list[i].provider,
		    "observed availability %.2f%% over 30 days, %d outage%s, "
		    "%d unexpected restart%s",
		    100.0 * run / (run + unk), outages, outages == 1 ? "" : "s",
		    restarts, restarts == 1 ? "" : "s");
	}
	return 0;
}

/*
 * Provider balances that run out within a day, at the burn of the
 * instances not released (an instance that cannot be costed is left out).
 */
static int
advise_runway(struct advise_run *ar, char **cause)
{
	struct instance *all = NULL;
	size_t na = 0, i;
	char *a, *b;
	int r;

	if ((r = inventory_list(ar->inv, 0, &all, &na, cause)) != 0)
		return r;
	for (i = 0; i < ar->nprov; i++) {
		struct provider_info *p = &ar->prov[i];
		if (!p->has_balance)
			continue;
		if ((r = cost_provider_runway(
			 ar->inv, ar->cf, all, na, p, ar->now, 1, cause)) != 0)
			break;
		if (p->runway < 0 || p->runway >= 86400)
			continue;
		a = billing_format(p->left, p->currency);
		b = timeparse_duration(p->runway);
		add(ar, "runway", p->name,
		    "%s left runs out in %s: top up or stop instances", a, b);
		free(a);
		free(b);
	}
	instance_free_array(all, na);
	return r;
}

/*
 * The median speed per platform of the instances of list over their
 * stored gpufleet speed runs, so that throttled platforms show up.
 */
static int
advise_speed(
    struct advise_run *ar, const struct instance *list, size_t n, char **cause)
{
	struct speed_summary *v;
	size_t nv, i;
	char *line;
	int r;

	if ((r = speed_by_provider(ar->inv, list, n, &v, &nv, cause)) != 0)
		return r;
	for (i = 0; i < nv; i++) {
		line = speed_format_summary(&v[i]);
		add(ar, "speed", v[i].provider, "%s", line);
		free(line);
	}
	speed_summary_free(v, nv);
	return 0;
}

/*
 * Every piece of advice for the n instances of list at time now, and for
 * every provider with a balance. Free *out with advise_free.
 */
int
advise_run(struct inventory *inv, const struct config *cf,
    const struct instance *list, size_t n, int64_t now, struct advice **out,
    size_t *nout, char **cause)
{
	struct advise_run ar;
	size_t i;
	int r;

	memset(&ar, 0, sizeof ar);
	ar.inv = inv;
	ar.cf = cf;
	ar.now = now;
	*out = NULL;
	*nout = 0;
	if ((r = provider_list(inv, &ar.prov, &ar.nprov, cause)) != 0)
		return r;
	for (i = 0; i < n && r == 0; i++)
		r = advise_instance(&ar, &list[i], cause);
	if (r == 0)
		r = advise_availability(&ar, list, n, cause);
	if (r == 0)
		r = advise_runway(&ar, cause);
	if (r == 0)
		r = advise_speed(&ar, list, n, cause);
	provider_free(ar.prov, ar.nprov);
	if (r != 0) {
		advise_free(ar.v, ar.n);
		return r;
	}
	*out = ar.v;
	*nout = ar.n;
	return 0;
}

/*
 * When the stopped period a ledger ends with began (a stop recorded twice,
 * performed then stated, is one period), or 0 when it does not end
 * stopped.
 */
int64_t
advise_stopped_since(const struct ledger_event *ev, size_t n)
{
	size_t i = n;

	while (i > 0 && strcmp(ev[i - 1].state, "stopped") == 0)
		i--;
	return i < n ? ev[i].t : 0;
}

/* Queue release_deadline for in, stopped since since under p's rule. */
static int
notify_release(struct inventory *inv, const struct config *cf,
    const struct instance *in, const struct provider_info *p, int64_t since,
    int64_t now, char **cause)
{
	int64_t at = since + (int64_t)p->release_after_days * 86400;
	char *when, *stopped, *what, *next, *key;
	int r;

	if (now < at - cf->notify_release_warn)
		return 0;
	when = notify_when(at, 0); /* with the date, always */
	stopped = timeparse_duration(now - since);
	if (at > now) {
		xasprintf(&what,
		    "will be released by %s with its data on %s (stopped "
		    "%s; %s releases instances stopped %d days)",
		    in->provider, when, stopped, in->provider,
		    p->release_after_days);
		xasprintf(
		    &next, "start it, or copy your data off before %s", when);
	} else {
		xasprintf(&what,
		    "was due for release by %s on %s (stopped %s; %s "
		    "releases instances stopped %d days): it and its data "
		    "may be gone",
		    in->provider, when, stopped, in->provider,
		    p->release_after_days);
		xasprintf(&next,
		    "look on the console; gpufleet mark %s released if it is "
		    "gone",
		    in->name);
	}
	/* Once per stopped period, however often it is looked at. */
	xasprintf(&key, "release_deadline:%lld:%lld", (long long)in->id,
	    (long long)since);
	r = notifyqueue_add(inv, NOTIFY_RELEASE_DEADLINE, in->name, now, what,
	    next, key, cause);
	free(when);
	free(stopped);
	free(what);
	free(next);
	free(key);
	return r;
}

/*
 * Queue release_deadline for every instance the ledger says is stopped
 * whose platform releases stopped instances (provider set --release-after)
 * within [notify] release_warn from now, or already past it. Run by the
 * daemon's polls, status and advise; nothing is read when no target takes
 * the event.
 */
int
advise_notify_release(
    struct inventory *inv, const struct config *cf, int64_t now, char **cause)
{
	struct provider_info *prov = NULL;
	struct instance *all = NULL;
	struct ledger_event *ev;
	const struct provider_info *p;
	size_t nprov = 0, na = 0, nev, i;
	unsigned want = 0;
	int64_t since;
	int r;

	for (i = 0; i < cf->nnotifies; i++)
		want |= cf->notifies[i].events;
	if ((want & (1u << NOTIFY_RELEASE_DEADLINE)) == 0)
		return 0;
	if ((r = provider_list(inv, &prov, &nprov, cause)) != 0)
		return r;
	for (i = 0; i < nprov && prov[i].release_after_days <= 0; i++)
		;
	if (i == nprov)
		goto out;
	if ((r = inventory_list(inv, 0, &all, &na, cause)) != 0)
		goto out;
	for (i = 0; i < na && r == 0; i++) {
		p = provider_find(prov, nprov, all[i].provider);
		if (p == NULL || p->release_after_days <= 0)
			continue;
		if ((r = ledger_events(inv, all[i].id, &ev, &nev, cause)) != 0)
			break;
		if ((since = advise_stopped_since(ev, nev)) != 0)
			r = notify_release(
			    inv, cf, &all[i], p, since, now, cause);
		free(ev);
	}
	instance_free_array(all, na);
out:
	provider_free(prov, nprov);
	return r;
}

/*
 * Whether a piece of advice asks for a change (availability and speed only
 * inform).
 */
int
advise_counts(const struct advice *a)
{
	return strcmp(a->kind, "availability") != 0 &&
	    strcmp(a->kind, "speed") != 0;
}

void
advise_free(struct advice *v, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++) {
		free(v[i].name);
		free(v[i].message);
	}
	free(v);
}

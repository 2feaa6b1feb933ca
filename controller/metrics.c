/*
 * Prometheus metrics of the stored fleet state and of a daemon (metrics.h).
 * Gathering uses what the commands use (cost.c for the month to date,
 * the watcher's stored plan for the armed stops, cost_provider_runway for
 * balances), so the numbers are theirs.
 */

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "cost.h"
#include "db.h"
#include "log.h"
#include "metrics.h"
#include "provider.h"
#include "report.h"
#include "status.h"
#include "watcher.h"
#include "xmalloc.h"

/* Poll durations, seconds: a pass over held sessions to a slow fleet. */
const double metrics_poll_bounds[METRICS_POLL_BUCKETS] = { 0.1, 0.25, 0.5, 1,
	2.5, 5, 10, 30, 60, 120 };

static char *label_dup(const char *);
static void gather_gpus(struct metrics_instance *, const struct report *);
static int gather_last(
    struct inventory *, int64_t, struct metrics_instance *, char **);
static int gather_next_stop(
    struct inventory *, int64_t, struct metrics_instance *, char **);
static int gather_providers(struct inventory *, const struct config *, int64_t,
    struct metrics_input *, char **);

/*
 * A label value from untrusted text: at most METRICS_LABEL_MAX bytes,
 * cut before a character that would not fit; bytes that are not UTF-8 or
 * are control characters but newline become '?'. Caller frees.
 */
static char *
label_dup(const char *s)
{
	const unsigned char *p = (const unsigned char *)(s != NULL ? s : "");
	char *out = xmalloc(METRICS_LABEL_MAX + 1);
	size_t o = 0, len, i;

	while (*p != '\0') {
		if (*p < 0x80)
			len = 1;
		else if (*p >= 0xc2 && *p <= 0xdf)
			len = 2;
		else if (*p >= 0xe0 && *p <= 0xef)
			len = 3;
		else if (*p >= 0xf0 && *p <= 0xf4)
			len = 4;
		else
			len = 0;
		for (i = 1; i < len; i++) {
			if ((p[i] & 0xc0) != 0x80)
				len = 0;
		}
		if (len == 0 ||
		    (len == 1 && ((*p < 0x20 && *p != '\n') || *p == 0x7f))) {
			if (o + 1 > METRICS_LABEL_MAX)
				break;
			out[o++] = '?';
			p++;
			continue;
		}
		if (o + len > METRICS_LABEL_MAX)
			break;
		memcpy(out + o, p, len);
		o += len;
		p += len;
	}
	out[o] = '\0';
	return out;
}

/* A number in range, else NAN. */
static double
in_range(double v, double lo, double hi)
{
	return isfinite(v) && v >= lo && v <= hi ? v : NAN;
}

/* The GPUs of a report, range-checked. */
static void
gather_gpus(struct metrics_instance *mi, const struct report *rep)
{
	struct metrics_gpu *g;
	size_t i;

	mi->gpus = xcalloc(rep->ngpus + 1, sizeof *mi->gpus);
	for (i = 0; i < rep->ngpus; i++) {
		const struct report_gpu *rg = &rep->gpus[i];
		g = &mi->gpus[mi->ngpus++];
		g->index = rg->index;
		g->uuid = label_dup(rg->uuid);
		g->model = label_dup(rg->name);
		g->util_ratio = in_range(rg->util_gpu, 0, 100) / 100;
		g->mem_used_bytes =
		    in_range(rg->mem_used_mib, 0, 1e9) * 1024 * 1024;
		g->mem_total_bytes =
		    in_range(rg->mem_total_mib, 0, 1e9) * 1024 * 1024;
		g->temp_celsius = in_range(rg->temp_c, -100, 300);
		g->power_watts = in_range(rg->power_w, 0, 1e5);
	}
}

/* The last status pass of instance id: up or not, its report. */
static int
gather_last(struct inventory *inv, int64_t id, struct metrics_instance *mi,
    char **cause)
{
	sqlite3_stmt *st;
	struct report rep;
	const char *state, *data;
	char *why = NULL;
	int r;

	mi->sessions = -1;
	if ((r = db_prepare(inv, &st,
		 "SELECT t, state, report FROM last_status WHERE "
		 "instance_id = ?",
		 "cannot read the last status", cause, "I", id)) != 0)
		return r;
	if ((r = sqlite3_step(st)) == SQLITE_ROW) {
		state = (const char *)sqlite3_column_text(st, 1);
		data = (const char *)sqlite3_column_text(st, 2);
		mi->up = state != NULL && strcmp(state, "up") == 0;
		if (data != NULL &&
		    report_parse(data, (size_t)sqlite3_column_bytes(st, 2),
			sqlite3_column_int64(st, 0), &rep, &why) == 0) {
			mi->have_report = 1;
			mi->sessions = rep.sessions;
			gather_gpus(mi, &rep);
			report_free(&rep);
		} else if (data != NULL) {
			debug_f("%s: stored report: %s", mi->name, why);
			free(why);
		}
	}
	r = db_finish(inv, st, r, "cannot read the last status", cause);
	return r < 0 ? r : 0;
}

/*
 * The soonest deadline of the watcher's stored plan that has neither
 * fired nor been skipped, on this clock (shutdown ls shows the same).
 */
static int
gather_next_stop(struct inventory *inv, int64_t id, struct metrics_instance *mi,
    char **cause)
{
	struct watcher_view v;
	json_t *plan, *d;
	const char *did;
	char *skipped;
	int64_t at;
	size_t i;
	int r;

	if ((r = watcher_get(inv, id, &v, cause)) != 0)
		return r;
	plan = v.plan != NULL ? json_loads(v.plan, 0, NULL) : NULL;
	json_array_foreach(json_object_get(plan, "deadlines"), i, d)
	{
		if (!json_is_integer(json_object_get(d, "at")))
			continue;
		at = json_integer_value(json_object_get(d, "at")) - v.skew;
		did = json_string_value(json_object_get(d, "id"));
		if (did != NULL && watcher_fired_at(inv, id, did) != 0)
			continue;
		skipped = did != NULL ? watcher_skipped(inv, id, did) : NULL;
		if (skipped != NULL) {
			free(skipped);
			continue;
		}
		if (at > 0 && (mi->next_stop == 0 || at < mi->next_stop))
			mi->next_stop = at;
	}
	json_decref(plan);
	watcher_view_free(&v);
	return 0;
}

/* Every provider's balance left and runway, as `gpufleet provider`. */
static int
gather_providers(struct inventory *inv, const struct config *cf, int64_t now,
    struct metrics_input *in, char **cause)
{
	struct provider_info *v = NULL;
	struct instance *all = NULL;
	size_t n = 0, nall = 0, i;
	int r;

	if ((r = provider_list(inv, &v, &n, cause)) != 0)
		return r;
	if ((r = inventory_list(inv, 1, &all, &nall, cause)) != 0)
		goto out;
	in->prov = xcalloc(n + 1, sizeof *in->prov);
	for (i = 0; i < n; i++) {
		struct metrics_provider *mp = &in->prov[in->nprov++];
		mp->name = label_dup(v[i].name);
		xstrlcpy(mp->currency, v[i].currency, sizeof mp->currency);
		mp->runway = -1;
		if (!v[i].has_balance)
			continue;
		if ((r = cost_provider_runway(
			 inv, cf, all, nall, &v[i], now, 1, cause)) != 0)
			goto out;
		mp->has_balance = 1;
		mp->balance = v[i].left;
		mp->runway = v[i].runway;
	}
out:
	instance_free_array(all, nall);
	provider_free(v, n);
	return r;
}

/*
 * Gather the metrics of the instances of list at time now, with every
 * provider's. On success the caller frees *in with metrics_input_free.
 */
int
metrics_gather_list(struct inventory *inv, const struct config *cf,
    const struct instance *list, size_t n, int64_t now,
    struct metrics_input *in, char **cause)
{
	struct cost_report rep;
	int64_t from = cost_month_start(now > 0 ? now - 1 : now, 0);
	size_t i;
	int r;

	memset(in, 0, sizeof *in);
	memset(&rep, 0, sizeof rep);
	if ((r = cost_by_instance(
		 inv, cf, list, n, from, now, now, &rep, cause)) != 0)
		return r;
	in->inst = xcalloc(n + 1, sizeof *in->inst);
	for (i = 0; i < n && r == 0; i++) {
		struct metrics_instance *mi = &in->inst[in->ninst++];
		const struct ledger_cost *cr = &rep.rows[i];
		mi->name = label_dup(list[i].name);
		mi->provider = label_dup(list[i].provider);
		mi->priced = cr->priced;
		xstrlcpy(mi->currency, cr->rule.currency, sizeof mi->currency);
		if (cr->priced) {
			mi->price_per_hour = billing_hourly_price(&cr->rule);
			mi->cost_mtd = cr->amount;
		}
		if ((r = gather_last(inv, list[i].id, mi, cause)) == 0)
			r = gather_next_stop(inv, list[i].id, mi, cause);
	}
	cost_report_free(&rep);
	if (r == 0)
		r = gather_providers(inv, cf, now, in, cause);
	if (r != 0)
		metrics_input_free(in);
	return r;
}

/* Gather the metrics of every instance in service (see above). */
int
metrics_gather(struct inventory *inv, const struct config *cf, int64_t now,
    struct metrics_input *in, char **cause)
{
	struct instance *list = NULL;
	size_t n = 0;
	int r;

	memset(in, 0, sizeof *in);
	if ((r = inventory_list(inv, 0, &list, &n, cause)) != 0)
		return r;
	r = metrics_gather_list(inv, cf, list, n, now, in, cause);
	instance_free_array(list, n);
	return r;
}

void
metrics_input_free(struct metrics_input *in)
{
	size_t i, j;

	for (i = 0; i < in->ninst; i++) {
		for (j = 0; j < in->inst[i].ngpus; j++) {
			free(in->inst[i].gpus[j].uuid);
			free(in->inst[i].gpus[j].model);
		}
		free(in->inst[i].gpus);
		free(in->inst[i].name);
		free(in->inst[i].provider);
	}
	for (i = 0; i < in->nprov; i++)
		free(in->prov[i].name);
	free(in->inst);
	free(in->prov);
	memset(in, 0, sizeof *in);
}

/* Count one poll that took secs seconds. */
void
metrics_poll_observe(struct metrics_daemon *md, double secs)
{
	size_t i;

	if (!isfinite(secs) || secs < 0)
		secs = 0;
	md->poll_count++;
	md->poll_sum += secs;
	for (i = 0; i < METRICS_POLL_BUCKETS; i++) {
		if (secs <= metrics_poll_bounds[i]) {
			md->poll_le[i]++;
			break;
		}
	}
}

/*
 * Count one logged action of kind: kinds are the action log's own names
 * ([a-z_], short); anything else, or a kind past the table, counts as
 * "other", so the label stays a bounded set.
 */
void
metrics_event(struct metrics_daemon *md, const char *kind)
{
	size_t i;

	if (kind == NULL || *kind == '\0' || strlen(kind) >= METRICS_KIND_MAX ||
	    strspn(kind, "abcdefghijklmnopqrstuvwxyz_") != strlen(kind))
		kind = "other";
	for (i = 0; i < md->nevents; i++) {
		if (strcmp(md->events[i].kind, kind) == 0)
			break;
	}
	if (i == md->nevents) {
		if (md->nevents >= METRICS_EVENT_KINDS - 1 &&
		    strcmp(kind, "other") != 0) {
			metrics_event(md, "other");
			return;
		}
		xstrlcpy(md->events[i].kind, kind, sizeof md->events[i].kind);
		md->nevents++;
	}
	md->events[i].n++;
}

/* One metric family: its header is printed before its first sample. */
struct family {
	const char *name;
	const char *type;
	const char *help;
	int shown;
};

/* Start a sample of fam: the header once, then the name. */
static void
sample(FILE *f, struct family *fam, const char *suffix)
{
	if (!fam->shown) {
		fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", fam->name, fam->help,
		    fam->name, fam->type);
		fam->shown = 1;
	}
	fprintf(f, "%s%s", fam->name, suffix != NULL ? suffix : "");
}

/* One label, k="v", v bounded and escaped as the text format wants. */
static void
label(FILE *f, int *first, const char *k, const char *v)
{
	char *s = label_dup(v), *p;

	fprintf(f, "%s%s=\"", *first ? "{" : ",", k);
	for (p = s; *p != '\0'; p++) {
		if (*p == '\\')
			fputs("\\\\", f);
		else if (*p == '"')
			fputs("\\\"", f);
		else if (*p == '\n')
			fputs("\\n", f);
		else
			fputc(*p, f);
	}
	fputc('"', f);
	*first = 0;
	free(s);
}

/* A float sample's value: exact for integers below 2^53. */
static void
value(FILE *f, double v)
{
	fprintf(f, " %.15g\n", v);
}

/* An amount in minor units as its exact decimal in major units. */
static void
money(FILE *f, money_t m)
{
	char frac[8];
	size_t n;
	uint64_t a = m < 0 ? (uint64_t) - (m + 1) + 1 : (uint64_t)m;

	snprintf(frac, sizeof frac, "%04llu",
	    (unsigned long long)(a % BILLING_MINOR_PER_UNIT));
	for (n = strlen(frac); n > 0 && frac[n - 1] == '0'; n--)
		frac[n - 1] = '\0';
	fprintf(f, " %s%llu%s%s\n", m < 0 ? "-" : "",
	    (unsigned long long)(a / BILLING_MINOR_PER_UNIT),
	    frac[0] != '\0' ? "." : "", frac);
}

static int
by_name(const void *a, const void *b)
{
	const struct metrics_instance *const *x = a, *const *y = b;

	return strcmp((*x)->name, (*y)->name);
}

static int
by_provider(const void *a, const void *b)
{
	const struct metrics_provider *const *x = a, *const *y = b;

	return strcmp((*x)->name, (*y)->name);
}

static const char *
or_empty(const char *s)
{
	return s != NULL ? s : "";
}

static int
by_index(const void *a, const void *b)
{
	const struct metrics_gpu *const *x = a, *const *y = b;

	int c = ((*x)->index > (*y)->index) - ((*x)->index < (*y)->index);

	if (c == 0)
		c = strcmp(or_empty((*x)->uuid), or_empty((*y)->uuid));
	return c != 0 ? c
		      : strcmp(or_empty((*x)->model), or_empty((*y)->model));
}

static int
by_kind(const void *a, const void *b)
{
	const struct metrics_event *const *x = a, *const *y = b;

	return strcmp((*x)->kind, (*y)->kind);
}

/* The labels of an instance's sample, open for more. */
static void
instance_labels(FILE *f, int *first, const struct metrics_instance *mi)
{
	label(f, first, "instance", mi->name);
	label(f, first, "provider", mi->provider);
}

/* A GPU's value for the k-th family of render_gpus. */
static double
gpu_value(const struct metrics_gpu *g, size_t k)
{
	switch (k) {
	case 0:
		return g->util_ratio;
	case 1:
		return g->mem_used_bytes;
	case 2:
		return g->mem_total_bytes;
	case 3:
		return g->temp_celsius;
	default:
		return g->power_watts;
	}
}

/* The per-GPU families, from each instance's last report. */
static void
render_gpus(FILE *f, const struct metrics_instance *const *v, size_t n)
{
	struct family fams[] = {
		{ "gpufleet_gpu_utilization_ratio", "gauge",
		    "GPU utilization (0 to 1) in the instance's last report.",
		    0 },
		{ "gpufleet_gpu_memory_used_bytes", "gauge",
		    "GPU memory used, in the last report.", 0 },
		{ "gpufleet_gpu_memory_total_bytes", "gauge",
		    "GPU memory in all, in the last report.", 0 },
		{ "gpufleet_gpu_temperature_celsius", "gauge",
		    "GPU temperature, in the last report.", 0 },
		{ "gpufleet_gpu_power_watts", "gauge",
		    "GPU power draw, in the last report.", 0 },
	};
	const struct metrics_gpu ***gv = xcalloc(n + 1, sizeof *gv);
	size_t k, i, j;
	char gpu[16];
	int first;

	for (i = 0; i < n; i++) {
		gv[i] = xcalloc(v[i]->ngpus + 1, sizeof *gv[i]);
		for (j = 0; j < v[i]->ngpus; j++)
			gv[i][j] = &v[i]->gpus[j];
		qsort(gv[i], v[i]->ngpus, sizeof *gv[i], by_index);
	}
	for (k = 0; k < sizeof fams / sizeof fams[0]; k++) {
		for (i = 0; i < n; i++) {
			for (j = 0; j < v[i]->ngpus; j++) {
				const struct metrics_gpu *g = gv[i][j];
				double x = gpu_value(g, k);
				if (isnan(x) || !isfinite(x))
					continue;
				/* A report may repeat an index: one series. */
				if (j > 0 && gv[i][j - 1]->index == g->index)
					continue;
				sample(f, &fams[k], NULL);
				first = 1;
				instance_labels(f, &first, v[i]);
				snprintf(gpu, sizeof gpu, "%d", g->index);
				label(f, &first, "gpu", gpu);
				label(f, &first, "uuid", g->uuid);
				label(f, &first, "model", g->model);
				fputc('}', f);
				value(f, x);
			}
		}
	}
	for (i = 0; i < n; i++)
		free(gv[i]);
	free(gv);
}

/* A family of amounts (the money_t at off) of the priced instances. */
static void
render_money(FILE *f, struct family *fam,
    const struct metrics_instance *const *v, size_t n, size_t off)
{
	money_t m;
	size_t i;
	int first;

	for (i = 0; i < n; i++) {
		if (!v[i]->priced)
			continue;
		memcpy(&m, (const char *)v[i] + off, sizeof m);
		sample(f, fam, NULL);
		first = 1;
		instance_labels(f, &first, v[i]);
		label(f, &first, "currency", v[i]->currency);
		fputc('}', f);
		money(f, m);
	}
}

/* The per-instance families. */
static void
render_instances(FILE *f, const struct metrics_instance *const *v, size_t n)
{
	struct family
	    up = { "gpufleet_instance_up", "gauge",
		    "1 if the last status pass found the instance up, else 0.",
		    0 },
	    ses = { "gpufleet_instance_sessions", "gauge",
		    "Login sessions on the instance, in its last report.", 0 },
	    mtd = { "gpufleet_instance_cost_month_to_date", "gauge",
		    "What the instance cost this month so far, in major "
		    "units of currency (as gpufleet cost).",
		    0 },
	    pph = { "gpufleet_instance_price_per_hour", "gauge",
		    "The instance's price for one hour, in major units "
		    "of currency.",
		    0 },
	    nxt = { "gpufleet_instance_next_stop_timestamp_seconds", "gauge",
		    "When the soonest armed deadline stops the instance "
		    "(Unix time).",
		    0 };
	size_t i;
	int first;

	for (i = 0; i < n; i++) {
		sample(f, &up, NULL);
		first = 1;
		instance_labels(f, &first, v[i]);
		fprintf(f, "} %d\n", v[i]->up);
	}
	for (i = 0; i < n; i++) {
		if (!v[i]->have_report || v[i]->sessions < 0)
			continue;
		sample(f, &ses, NULL);
		first = 1;
		instance_labels(f, &first, v[i]);
		fprintf(f, "} %d\n", v[i]->sessions);
	}
	render_money(
	    f, &mtd, v, n, offsetof(struct metrics_instance, cost_mtd));
	render_money(
	    f, &pph, v, n, offsetof(struct metrics_instance, price_per_hour));
	for (i = 0; i < n; i++) {
		if (v[i]->next_stop <= 0)
			continue;
		sample(f, &nxt, NULL);
		first = 1;
		instance_labels(f, &first, v[i]);
		fprintf(f, "} %lld\n", (long long)v[i]->next_stop);
	}
}

/* The per-provider families. */
static void
render_providers(FILE *f, const struct metrics_provider *const *v, size_t n)
{
	struct family bal = { "gpufleet_provider_balance", "gauge",
		"The provider's prepaid balance left now, in major units of "
		"currency (as gpufleet provider).",
		0 },
		      run = { "gpufleet_provider_runway_seconds", "gauge",
			      "How long the balance left lasts at the burn of "
			      "now.",
			      0 };
	size_t i;
	int first;

	for (i = 0; i < n; i++) {
		if (!v[i]->has_balance)
			continue;
		sample(f, &bal, NULL);
		first = 1;
		label(f, &first, "provider", v[i]->name);
		label(f, &first, "currency", v[i]->currency);
		fputc('}', f);
		money(f, v[i]->balance);
	}
	for (i = 0; i < n; i++) {
		if (!v[i]->has_balance || v[i]->runway < 0)
			continue;
		sample(f, &run, NULL);
		first = 1;
		label(f, &first, "provider", v[i]->name);
		fprintf(f, "} %lld\n", (long long)v[i]->runway);
	}
}

/* The daemon's own: the poll histogram and the actions by kind. */
static void
render_daemon(FILE *f, const struct metrics_daemon *md)
{
	struct family poll = { "gpufleet_poll_duration_seconds", "histogram",
		"How long the daemon's polls of the fleet took.", 0 },
		      ev = { "gpufleet_events_total", "counter",
			      "Actions the daemon logged (gpufleet events), by "
			      "kind.",
			      0 };
	const struct metrics_event *v[METRICS_EVENT_KINDS];
	uint64_t cum = 0;
	size_t i, n = md->nevents;

	for (i = 0; i < METRICS_POLL_BUCKETS; i++) {
		cum += md->poll_le[i];
		sample(f, &poll, "_bucket");
		fprintf(f, "{le=\"%.15g\"} %llu\n", metrics_poll_bounds[i],
		    (unsigned long long)cum);
	}
	sample(f, &poll, "_bucket");
	fprintf(f, "{le=\"+Inf\"} %llu\n", (unsigned long long)md->poll_count);
	sample(f, &poll, "_sum");
	value(f, md->poll_sum);
	sample(f, &poll, "_count");
	fprintf(f, " %llu\n", (unsigned long long)md->poll_count);

	if (n > METRICS_EVENT_KINDS)
		n = METRICS_EVENT_KINDS;
	for (i = 0; i < n; i++)
		v[i] = &md->events[i];
	qsort(v, n, sizeof *v, by_kind);
	for (i = 0; i < n; i++) {
		int first = 1;
		sample(f, &ev, NULL);
		label(f, &first, "kind", v[i]->kind);
		fprintf(f, "} %llu\n", (unsigned long long)v[i]->n);
	}
}

/*
 * The metrics as Prometheus text format 0.0.4: each family with samples
 * has its HELP and TYPE; samples sorted by instance, GPU index, provider
 * or kind; what is not known is left out, never NaN. md is NULL outside
 * a daemon. Caller frees.
 */
char *
metrics_render(const struct metrics_input *in, const struct metrics_daemon *md)
{
	const struct metrics_instance **iv;
	const struct metrics_provider **pv;
	char *buf = NULL;
	size_t len = 0, i;
	FILE *f;

	if ((f = open_memstream(&buf, &len)) == NULL)
		fatal("open_memstream failed");
	iv = xcalloc(in->ninst + 1, sizeof *iv);
	pv = xcalloc(in->nprov + 1, sizeof *pv);
	for (i = 0; i < in->ninst; i++)
		iv[i] = &in->inst[i];
	for (i = 0; i < in->nprov; i++)
		pv[i] = &in->prov[i];
	qsort(iv, in->ninst, sizeof *iv, by_name);
	qsort(pv, in->nprov, sizeof *pv, by_provider);
	render_gpus(f, iv, in->ninst);
	render_instances(f, iv, in->ninst);
	render_providers(f, pv, in->nprov);
	if (md != NULL)
		render_daemon(f, md);
	if (fclose(f) != 0)
		fatal("writing the metrics failed");
	free(iv);
	free(pv);
	return buf;
}

/*
 * What GET /metrics serves: the stored state of every instance in service
 * at now, and md's counters (the daemon's). Returns the text (caller
 * frees; serve it as METRICS_CONTENT_TYPE), or NULL with *cause.
 */
char *
metrics_serve(struct inventory *inv, const struct config *cf,
    const struct metrics_daemon *md, int64_t now, char **cause)
{
	struct metrics_input in;
	char *text;

	if (metrics_gather(inv, cf, now, &in, cause) != 0)
		return NULL;
	text = metrics_render(&in, md);
	metrics_input_free(&in);
	return text;
}

/*
 * The Prometheus renderer (controller/metrics.c) on hand-built inputs:
 * the exact text of a small fleet, hostile label values escaped and cut,
 * unknowns left out, a repeated GPU index as one series, the poll histogram's
 * cumulative buckets, bounded event kinds, and the action log telling its
 * observer in a real SQLite inventory.
 */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "actionlog.h"
#include "metrics.h"

/* A fleet of two instances, given out of order, and two providers. */
static void
fleet(struct metrics_input *in, struct metrics_instance *inst,
    struct metrics_gpu *gpus, struct metrics_provider *prov)
{
	memset(in, 0, sizeof *in);
	memset(inst, 0, 2 * sizeof *inst);
	memset(gpus, 0, 2 * sizeof *gpus);
	memset(prov, 0, 2 * sizeof *prov);
	inst[0].name = "b-2";
	inst[0].provider = "vast";
	inst[0].sessions = -1;
	inst[0].priced = 1;
	snprintf(inst[0].currency, sizeof inst[0].currency, "USD");
	inst[0].price_per_hour = 3000;
	inst[0].cost_mtd = 12345;
	inst[1].name = "a-1";
	inst[1].provider = "autodl";
	inst[1].up = 1;
	inst[1].have_report = 1;
	inst[1].sessions = 2;
	inst[1].gpus = gpus;
	inst[1].ngpus = 2;
	inst[1].priced = 1;
	snprintf(inst[1].currency, sizeof inst[1].currency, "CNY");
	inst[1].price_per_hour = 26900;
	inst[1].cost_mtd = 62991;
	inst[1].next_stop = 1764900000;
	gpus[0] = (struct metrics_gpu){ 1, "GPU-b", "NVIDIA A100", 0.93,
		77578895360.0, 85899345920.0, 63, 298.71 };
	gpus[1] = (struct metrics_gpu){ 0, "GPU-a", "NVIDIA A100", 0.97,
		77817970688.0, 85899345920.0, 65, NAN };
	in->inst = inst;
	in->ninst = 2;
	prov[0].name = "vast";
	snprintf(prov[0].currency, sizeof prov[0].currency, "USD");
	prov[0].runway = -1;
	prov[1].name = "autodl";
	snprintf(prov[1].currency, sizeof prov[1].currency, "CNY");
	prov[1].has_balance = 1;
	prov[1].balance = 1824000;
	prov[1].runway = 88800;
	in->prov = prov;
	in->nprov = 2;
}

static const char fleet_text[] =
    "# HELP gpufleet_gpu_utilization_ratio GPU utilization (0 to 1) in the "
    "instance's last report.\n"
    "# TYPE gpufleet_gpu_utilization_ratio gauge\n"
    "gpufleet_gpu_utilization_ratio{instance=\"a-1\",provider=\"autodl\","
    "gpu=\"0\",uuid=\"GPU-a\",model=\"NVIDIA A100\"} 0.97\n"
    "gpufleet_gpu_utilization_ratio{instance=\"a-1\",provider=\"autodl\","
    "gpu=\"1\",uuid=\"GPU-b\",model=\"NVIDIA A100\"} 0.93\n"
    "# HELP gpufleet_gpu_memory_used_bytes GPU memory used, in the last "
    "report.\n"
    "# TYPE gpufleet_gpu_memory_used_bytes gauge\n"
    "gpufleet_gpu_memory_used_bytes{instance=\"a-1\",provider=\"autodl\","
    "gpu=\"0\",uuid=\"GPU-a\",model=\"NVIDIA A100\"} 77817970688\n"
    "gpufleet_gpu_memory_used_bytes{instance=\"a-1\",provider=\"autodl\","
    "gpu=\"1\",uuid=\"GPU-b\",model=\"NVIDIA A100\"} 77578895360\n"
    "# HELP gpufleet_gpu_memory_total_bytes GPU memory in all, in the last "
    "report.\n"
    "# TYPE gpufleet_gpu_memory_total_bytes gauge\n"
    "gpufleet_gpu_memory_total_bytes{instance=\"a-1\",provider=\"autodl\","
    "gpu=\"0\",uuid=\"GPU-a\",model=\"NVIDIA A100\"} 85899345920\n"
    "gpufleet_gpu_memory_total_bytes{instance=\"a-1\",provider=\"autodl\","
    "gpu=\"1\",uuid=\"GPU-b\",model=\"NVIDIA A100\"} 85899345920\n"
    "# HELP gpufleet_gpu_temperature_celsius GPU temperature, in the last "
    "report.\n"
    "# TYPE gpufleet_gpu_temperature_celsius gauge\n"
    "gpufleet_gpu_temperature_celsius{instance=\"a-1\",provider=\"autodl\","
    "gpu=\"0\",uuid=\"GPU-a\",model=\"NVIDIA A100\"} 65\n"
    "gpufleet_gpu_temperature_celsius{instance=\"a-1\",provider=\"autodl\","
    "gpu=\"1\",uuid=\"GPU-b\",model=\"NVIDIA A100\"} 63\n"
    "# HELP gpufleet_gpu_power_watts GPU power draw, in the last report.\n"
    "# TYPE gpufleet_gpu_power_watts gauge\n"
    "gpufleet_gpu_power_watts{instance=\"a-1\",provider=\"autodl\","
    "gpu=\"1\",uuid=\"GPU-b\",model=\"NVIDIA A100\"} 298.71\n"
    "# HELP gpufleet_instance_up 1 if the last status pass found the "
    "instance up, else 0.\n"
    "# TYPE gpufleet_instance_up gauge\n"
    "gpufleet_instance_up{instance=\"a-1\",provider=\"autodl\"} 1\n"
    "gpufleet_instance_up{instance=\"b-2\",provider=\"vast\"} 0\n"
    "# HELP gpufleet_instance_sessions Login sessions on the instance, in "
    "its last report.\n"
    "# TYPE gpufleet_instance_sessions gauge\n"
    "gpufleet_instance_sessions{instance=\"a-1\",provider=\"autodl\"} 2\n"
    "# HELP gpufleet_instance_cost_month_to_date What the instance cost "
    "this month so far, in major units of currency (as gpufleet cost).\n"
    "# TYPE gpufleet_instance_cost_month_to_date gauge\n"
    "gpufleet_instance_cost_month_to_date{instance=\"a-1\",provider="
    "\"autodl\",currency=\"CNY\"} 6.2991\n"
    "gpufleet_instance_cost_month_to_date{instance=\"b-2\",provider="
    "\"vast\",currency=\"USD\"} 1.2345\n"
    "# HELP gpufleet_instance_price_per_hour The instance's price for one "
    "hour, in major units of currency.\n"
    "# TYPE gpufleet_instance_price_per_hour gauge\n"
    "gpufleet_instance_price_per_hour{instance=\"a-1\",provider=\"autodl\","
    "currency=\"CNY\"} 2.69\n"
    "gpufleet_instance_price_per_hour{instance=\"b-2\",provider=\"vast\","
    "currency=\"USD\"} 0.3\n"
    "# HELP gpufleet_instance_next_stop_timestamp_seconds When the soonest "
    "armed deadline stops the instance (Unix time).\n"
    "# TYPE gpufleet_instance_next_stop_timestamp_seconds gauge\n"
    "gpufleet_instance_next_stop_timestamp_seconds{instance=\"a-1\","
    "provider=\"autodl\"} 1764900000\n"
    "# HELP gpufleet_provider_balance The provider's prepaid balance left "
    "now, in major units of currency (as gpufleet provider).\n"
    "# TYPE gpufleet_provider_balance gauge\n"
    "gpufleet_provider_balance{provider=\"autodl\",currency=\"CNY\"} 182.4\n"
    "# HELP gpufleet_provider_runway_seconds How long the balance left "
    "lasts at the burn of now.\n"
    "# TYPE gpufleet_provider_runway_seconds gauge\n"
    "gpufleet_provider_runway_seconds{provider=\"autodl\"} 88800\n";

START_TEST(render_fleet)
{
	struct metrics_input in;
	struct metrics_instance inst[2];
	struct metrics_gpu gpus[2];
	struct metrics_provider prov[2];
	char *s;

	fleet(&in, inst, gpus, prov);
	s = metrics_render(&in, NULL);
	ck_assert_str_eq(s, fleet_text);
	free(s);
}
END_TEST

/* Nothing known: no family at all, not one with a NaN. */
START_TEST(render_empty)
{
	struct metrics_input in;
	char *s;

	memset(&in, 0, sizeof in);
	s = metrics_render(&in, NULL);
	ck_assert_str_eq(s, "");
	free(s);
}
END_TEST

/* Unknown numbers, no price, no report, no balance: samples left out. */
START_TEST(render_unknowns)
{
	struct metrics_input in;
	struct metrics_instance mi;
	struct metrics_gpu g = { 0, "GPU-x", "T4", NAN, NAN, INFINITY, NAN,
		NAN };
	struct metrics_provider p;
	char *s;

	memset(&in, 0, sizeof in);
	memset(&mi, 0, sizeof mi);
	memset(&p, 0, sizeof p);
	mi.name = "c-3";
	mi.provider = "";
	mi.sessions = 5; /* without a report: not shown */
	mi.gpus = &g;
	mi.ngpus = 1;
	p.name = "lambda";
	p.runway = 3600; /* without a balance: not shown */
	in.inst = &mi;
	in.ninst = 1;
	in.prov = &p;
	in.nprov = 1;
	s = metrics_render(&in, NULL);
	ck_assert_str_eq(s,
	    "# HELP gpufleet_instance_up 1 if the last status pass found the "
	    "instance up, else 0.\n"
	    "# TYPE gpufleet_instance_up gauge\n"
	    "gpufleet_instance_up{instance=\"c-3\",provider=\"\"} 0\n");
	ck_assert_ptr_null(strstr(s, "NaN"));
	ck_assert_ptr_null(strstr(s, "Inf"));
	free(s);
}
END_TEST

/* A report that repeats a GPU index gives one series, not two. */
START_TEST(render_repeated_index)
{
	struct metrics_input in;
	struct metrics_instance mi;
	struct metrics_gpu g[3] = {
		{ 0, "GPU-b", "T4", 0.5, NAN, NAN, NAN, NAN },
		{ 0, "GPU-a", "T4", 0.25, NAN, NAN, NAN, NAN },
		{ 1, NULL, NULL, 1, NAN, NAN, NAN, NAN },
	};
	char *s;

	memset(&in, 0, sizeof in);
	memset(&mi, 0, sizeof mi);
	mi.name = "d-4";
	mi.provider = "p";
	mi.gpus = g;
	mi.ngpus = 3;
	in.inst = &mi;
	in.ninst = 1;
	s = metrics_render(&in, NULL);
	ck_assert_str_eq(s,
	    "# HELP gpufleet_gpu_utilization_ratio GPU utilization (0 to 1) "
	    "in the instance's last report.\n"
	    "# TYPE gpufleet_gpu_utilization_ratio gauge\n"
	    "gpufleet_gpu_utilization_ratio{instance=\"d-4\",provider=\"p\","
	    "gpu=\"0\",uuid=\"GPU-a\",model=\"T4\"} 0.25\n"
	    "gpufleet_gpu_utilization_ratio{instance=\"d-4\",provider=\"p\","
	    "gpu=\"1\",uuid=\"\",model=\"\"} 1\n"
	    "# HELP gpufleet_instance_up 1 if the last status pass found the "
	    "instance up, else 0.\n"
	    "# TYPE gpufleet_instance_up gauge\n"
	    "gpufleet_instance_up{instance=\"d-4\",provider=\"p\"} 0\n");
	free(s);
}
END_TEST

/* One row per hostile label value: what the label reads as. */
static const struct {
	const char *in;
	const char *out;
} hostile[] = {
	{ "a\"b", "a\\\"b" },
	{ "back\\slash", "back\\\\slash" },
	{ "two\nlines", "two\\nlines" },
	{ "tab\there", "tab?here" },
	{ "bad\xff utf8", "bad? utf8" },
	{ "cut\xc3", "cut?" },
	{ "caf\xc3\xa9", "caf\xc3\xa9" },
	{ "\x7f", "?" },
};

START_TEST(escape_labels)
{
	struct metrics_input in;
	struct metrics_instance mi;
	char *s, want[256];

	memset(&in, 0, sizeof in);
	memset(&mi, 0, sizeof mi);
	mi.name = (char *)hostile[_i].in;
	mi.provider = "p";
	in.inst = &mi;
	in.ninst = 1;
	s = metrics_render(&in, NULL);
	snprintf(want, sizeof want,
	    "gpufleet_instance_up{instance=\"%s\",provider=\"p\"} 0\n",
	    hostile[_i].out);
	ck_assert_ptr_nonnull(strstr(s, want));
	free(s);
}
END_TEST

/* Long values are cut to METRICS_LABEL_MAX bytes, never mid-character. */
START_TEST(cut_labels)
{
	struct metrics_input in;
	struct metrics_instance mi;
	char name[300], *s, *q, *end;

	memset(&in, 0, sizeof in);
	memset(&mi, 0, sizeof mi);
	memset(name, 'x', METRICS_LABEL_MAX - 1);
	memcpy(name + METRICS_LABEL_MAX - 1, "\xc3\xa9yyyy", 7);
	mi.name = name;
	mi.provider = "p";
	in.inst = &mi;
	in.ninst = 1;
	s = metrics_render(&in, NULL);
	q = strstr(s, "instance=\"");
	ck_assert_ptr_nonnull(q);
	q += strlen("instance=\"");
	end = strchr(q, '"');
	ck_assert_int_eq(end - q, METRICS_LABEL_MAX - 1);
	free(s);
}
END_TEST

/* Polls of 0.05 0.3 3 200 s; buckets cumulative, +Inf the count. */
START_TEST(histogram)
{
	struct metrics_input in;
	struct metrics_daemon md;
	char *s;

	memset(&in, 0, sizeof in);
	memset(&md, 0, sizeof md);
	metrics_poll_observe(&md, 0.05);
	metrics_poll_observe(&md, 0.3);
	metrics_poll_observe(&md, 3);
	metrics_poll_observe(&md, 200);
	metrics_event(&md, "schedule_run");
	metrics_event(&md, "daemon_start");
	metrics_event(&md, "schedule_run");
	metrics_event(&md, "Bad-Kind\n");
	s = metrics_render(&in, &md);
	ck_assert_str_eq(s,
	    "# HELP gpufleet_poll_duration_seconds How long the daemon's "
	    "polls of the fleet took.\n"
	    "# TYPE gpufleet_poll_duration_seconds histogram\n"
	    "gpufleet_poll_duration_seconds_bucket{le=\"0.1\"} 1\n"
	    "gpufleet_poll_duration_seconds_bucket{le=\"0.25\"} 1\n"
	    "gpufleet_poll_duration_seconds_bucket{le=\"0.5\"} 2\n"
	    "gpufleet_poll_duration_seconds_bucket{le=\"1\"} 2\n"
	    "gpufleet_poll_duration_seconds_bucket{le=\"2.5\"} 2\n"
	    "gpufleet_poll_duration_seconds_bucket{le=\"5\"} 3\n"
	    "gpufleet_poll_duration_seconds_bucket{le=\"10\"} 3\n"
	    "gpufleet_poll_duration_seconds_bucket{le=\"30\"} 3\n"
	    "gpufleet_poll_duration_seconds_bucket{le=\"60\"} 3\n"
	    "gpufleet_poll_duration_seconds_bucket{le=\"120\"} 3\n"
	    "gpufleet_poll_duration_seconds_bucket{le=\"+Inf\"} 4\n"
	    "gpufleet_poll_duration_seconds_sum 203.35\n"
	    "gpufleet_poll_duration_seconds_count 4\n"
	    "# HELP gpufleet_events_total Actions the daemon logged (gpufleet "
	    "events), by kind.\n"
	    "# TYPE gpufleet_events_total counter\n"
	    "gpufleet_events_total{kind=\"daemon_start\"} 1\n"
	    "gpufleet_events_total{kind=\"other\"} 1\n"
	    "gpufleet_events_total{kind=\"schedule_run\"} 2\n");
	free(s);
}
END_TEST

/* More kinds than the table holds: the rest count as "other". */
START_TEST(kinds_bounded)
{
	struct metrics_daemon md;
	char kind[32];
	size_t i, other = 0, total = 0;

	memset(&md, 0, sizeof md);
	for (i = 0; i < 3 * METRICS_EVENT_KINDS; i++) {
		snprintf(kind, sizeof kind, "kind_%c%c", 'a' + (int)(i / 26),
		    'a' + (int)(i % 26));
		metrics_event(&md, kind);
	}
	ck_assert_uint_le(md.nevents, METRICS_EVENT_KINDS);
	for (i = 0; i < md.nevents; i++) {
		total += md.events[i].n;
		if (strcmp(md.events[i].kind, "other") == 0)
			other = md.events[i].n;
	}
	ck_assert_uint_eq(total, 3 * METRICS_EVENT_KINDS);
	ck_assert_uint_eq(other, 3 * METRICS_EVENT_KINDS - (md.nevents - 1));
}
END_TEST

static void
count(const char *kind, void *arg)
{
	metrics_event(arg, kind);
}

/* actionlog_add tells its observer each entry it stored. */
START_TEST(actionlog_observed)
{
	struct inventory *inv;
	struct metrics_daemon md;
	char dir[64], path[96], cmd[96], *cause = NULL;

	snprintf(dir, sizeof dir, "/tmp/gpufleet-metrics.XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(path, sizeof path, "%s/fleet.db", dir);
	ck_assert_int_eq(inventory_open(path, &inv, &cause), 0);
	memset(&md, 0, sizeof md);
	actionlog_observe(count, &md);
	ck_assert_int_eq(actionlog_add(inv, 1000, "guard_shutdown", "g", NULL,
			     NULL, NULL, NULL, &cause),
	    0);
	ck_assert_int_eq(actionlog_add(inv, 1001, "guard_shutdown", "g", NULL,
			     NULL, NULL, NULL, &cause),
	    0);
	actionlog_observe(NULL, NULL);
	ck_assert_int_eq(actionlog_add(inv, 1002, "daemon_stop", NULL, NULL,
			     NULL, NULL, NULL, &cause),
	    0);
	ck_assert_uint_eq(md.nevents, 1);
	ck_assert_str_eq(md.events[0].kind, "guard_shutdown");
	ck_assert_uint_eq(md.events[0].n, 2);
	inventory_close(inv);
	snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
	ck_assert_int_eq(system(cmd), 0);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("metrics");
	TCase *tc = tcase_create("core");
	SRunner *sr;
	int failed;

	tcase_add_test(tc, render_fleet);
	tcase_add_test(tc, render_empty);
	tcase_add_test(tc, render_unknowns);
	tcase_add_test(tc, render_repeated_index);
	tcase_add_loop_test(
	    tc, escape_labels, 0, sizeof hostile / sizeof hostile[0]);
	tcase_add_test(tc, cut_labels);
	tcase_add_test(tc, histogram);
	tcase_add_test(tc, kinds_bounded);
	tcase_add_test(tc, actionlog_observed);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? 0 : 1;
}

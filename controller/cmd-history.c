/*
 * What an instance's GPUs did over time, from the samples status stored:
 * per GPU a sparkline of utilization with mean and max, or the points as
 * JSON.
 */

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cmd.h"
#include "samples.h"
#include "status.h"
#include "timeparse.h"
#include "xmalloc.h"

#define SPARK_WIDTH 60

static void print_json(const char *, const struct history_point *, size_t);
static void print_lines(const char *, const struct history_point *, size_t);
static int cmd_history_exec(
    const struct cmd_entry *, struct cmd_ctx *, int, char **);

const struct cmd_entry cmd_history_entry = {
	.name = "history",
	.usage = "NAME [--since TIME] [--until TIME] [--json]",
	.summary = "GPU utilization and memory of an instance over time",
	.help =
	    "From the samples `status` stored (raw for 48 hours, then 5-minute"
	    "\naggregates for 90 days; see [status] in the config). Default "
	    "window:\nthe last 24 hours. TIME: 2026-11-01T02:00:00Z, "
	    "'2026-11-01 02:00',\n2026-11-01, -2h, yesterday, now.\n\n"
	    "      --since TIME   start (default -24h)\n"
	    "      --until TIME   end (default now)\n"
	    "      --json         the points: t, gpu, n (samples behind "
	    "it),\n                     util_mean, util_max, mem_mean, "
	    "mem_max, mem_total (MiB)\n\n"
	    "Example: gpufleet history a100-1 --since -6h\n",
	.exec = cmd_history_exec,
};

enum { OPT_SINCE = 256, OPT_UNTIL, OPT_JSON };

static const struct option history_options[] = { { "since", required_argument,
						     NULL, OPT_SINCE },
	{ "until", required_argument, NULL, OPT_UNTIL },
	{ "json", no_argument, NULL, OPT_JSON },
	{ "help", no_argument, NULL, 'h' }, { NULL, 0, NULL, 0 } };

static json_t *
num(double v)
{
	return isnan(v) ? json_null() : json_real(v);
}

/* history --json: the points of one instance. */
static void
print_json(const char *name, const struct history_point *p, size_t n)
{
	json_t *arr = json_array(), *o;
	size_t i;
	char *t;

	for (i = 0; i < n; i++) {
		o = json_object();
		t = instance_format_time(p[i].t);
		json_object_set_new(o, "t", json_string(t));
		free(t);
		json_object_set_new(o, "gpu", json_integer(p[i].gpu));
		json_object_set_new(o, "n", json_integer(p[i].n));
		json_object_set_new(o, "util_mean", num(p[i].util_mean));
		json_object_set_new(o, "util_max", num(p[i].util_max));
		json_object_set_new(o, "mem_mean", num(p[i].mem_mean));
		json_object_set_new(o, "mem_max", num(p[i].mem_max));
		json_object_set_new(o, "mem_total", num(p[i].mem_total));
		json_array_append_new(arr, o);
	}
	o = json_object();
	json_object_set_new(o, "name", json_string(name));
	json_object_set_new(o, "points", arr);
	json_print(o, stdout);
}

/* One line per GPU: a sparkline of utilisation and the means. */
static void
print_lines(const char *name, const struct history_point *p, size_t n)
{
	static const char *const bars[] = { "\u2581", "\u2582", "\u2583",
		"\u2584", "\u2585", "\u2586", "\u2587", "\u2588" };
	size_t i, j, k, np;
	int gpu;

	/* Points are ordered by GPU, then time. */
	for (i = 0; i < n; i = j) {
		double sum = 0, max = 0, mem = 0, cnt = 0, total = NAN;
		gpu = p[i].gpu;
		for (j = i; j < n && p[j].gpu == gpu; j++) {
			if (!isnan(p[j].util_mean)) {
				sum += p[j].util_mean * p[j].n;
				cnt += p[j].n;
			}
			if (!isnan(p[j].util_max) && p[j].util_max > max)
				max = p[j].util_max;
			if (!isnan(p[j].mem_mean))
				mem += p[j].mem_mean * p[j].n;
			if (!isnan(p[j].mem_total))
				total = p[j].mem_total;
		}
		np = j - i;
		printf("%s GPU %d  ", name, gpu);
		for (k = 0; k < SPARK_WIDTH && k < np; k++) {
			size_t from =
			    i + k * np / (np < SPARK_WIDTH ? np : SPARK_WIDTH);
			double u = p[from].util_mean;
			int b = isnan(u) ? 0 : (int)(u / 100.0 * 7.999);
			fputs(bars[b < 0 ? 0 : b > 7 ? 7 : b], stdout);
		}
		printf("  util mean %.0f%% max %.0f%%", cnt > 0 ? sum / cnt : 0,
		    max);
		if (cnt > 0 && !isnan(total))
			printf("  mem mean %.1f/%.0f GiB", mem / cnt / 1024.0,
			    total / 1024.0);
		printf("  (%zu point%s)\n", np, np == 1 ? "" : "s");
	}
}

static int
cmd_history_exec(
    const struct cmd_entry *e, struct cmd_ctx *ctx, int argc, char **argv)
{
	struct inventory *inv = NULL;
	struct instance in;
	struct history_point *p = NULL;
	const char *since_s = "-24h", *until_s = "now";
	int64_t now = (int64_t)time(NULL), since, until;
	char *cause = NULL;
	size_t n = 0;
	int ch, status, json = 0, r;

	memset(&in, 0, sizeof in);
	while ((ch = cmd_getopt(
		    e, argc, argv, "h", history_options, &status)) != -1) {
		switch (ch) {
		case -2:
			return status;
		case OPT_SINCE:
			since_s = optarg;
			break;
		case OPT_UNTIL:
			until_s = optarg;
			break;
		case OPT_JSON:
			json = 1;
			break;
		}
	}
	if (argc - optind != 1)
		return cmd_usage_error(e, "needs exactly one NAME");
	if (instance_check_name(argv[optind], &cause) != 0 ||
	    timeparse(since_s, now, &since, &cause) != 0 ||
	    timeparse(until_s, now, &until, &cause) != 0)
		return cmd_fail(GF_EUSAGE, cause);
	if (since > until)
		return cmd_usage_error(e, "--since is after --until");
	if ((status = cmd_open(ctx, &inv)) != 0)
		return status;
	if ((r = inventory_get(inv, argv[optind], &in, &cause)) != 0 ||
	    (r = samples_history(inv, in.id, since, until, &p, &n, &cause)) !=
		0) {
		inventory_close(inv);
		instance_clear(&in);
		return cmd_fail(-r, cause);
	}
	inventory_close(inv);

	if (json)
		print_json(in.name, p, n);
	else if (n == 0)
		printf("%s: no samples in this window (run gpufleet status to "
		       "take some)\n",
		    in.name);
	else
		print_lines(in.name, p, n);
	free(p);
	instance_clear(&in);
	return GF_OK;
}

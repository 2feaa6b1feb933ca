/*
 * How fast each instance's link is, before paying for a platform: upload
 * and download throughput and the round trip over the instance's own SSH
 * connection, stored per instance so that advise and cost --by provider
 * show the median per platform and throttled platforms show up in numbers.
 */

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cmd.h"
#include "engine.h"
#include "jobspec.h"
#include "log.h"
#include "misc.h"
#include "remote.h"
#include "speed.h"
#include "status.h"
#include "xmalloc.h"

#define RTT_ROUNDS	5   /* channel round trips timed per instance */
#define WC_OUT_MAX	256 /* what wc -c may print */
#define DEFAULT_SIZE	(64LL << 20)
#define DEFAULT_TIMEOUT 120

enum speed_phase { PH_LOGIN, PH_RTT, PH_UPLOAD, PH_DOWNLOAD };

/* One instance's measurement; a failure ends it (error set). */
struct speed_host {
	const char *error_code; /* engine_fail_code or "bad_answer" */
	char *error;
	int64_t rtt_ms_sum; /* over RTT_ROUNDS channel opens and execs */
	int64_t up_ms;
	int64_t down_ms;
	int64_t got; /* download bytes */
	struct misc_buf out;
	struct speed_result res;
};

struct speed_cmd {
	struct remote *rm;
	struct speed_host *sh; /* rm->n */
	enum speed_phase phase;
	int64_t size;
	int timeout;
	int interrupted;
};

static int cmd_speed_exec(
    const struct cmd_entry *, struct cmd_ctx *, int, char **);
static void on_output(struct engine_host *, int, const char *, size_t, void *);
static void host_fail(struct speed_host *, const char *, const char *, ...)
    __attribute__((format(printf, 3, 4)));
static int run_phase(struct speed_cmd *, enum speed_phase,
    struct engine_settings *, const char *);
static void check_phase(struct speed_cmd *, enum speed_phase);
static int parse_count(const char *, int64_t *);
static void print_table(const struct speed_cmd *);
static void print_json(const struct speed_cmd *);
static void print_platforms(const struct speed_cmd *);

static const char *const phase_name[] = { "login", "round trip", "upload",
	"download" };

const struct cmd_entry cmd_speed_entry = {
	.name = "speed",
	.usage = "SELECTOR [--size SIZE] [-f N] [--timeout DURATION] [--json]",
	.summary = "measure upload, download and round trip per instance",
	.help =
	    "Over each instance's SSH connection (one login, then channels on "
	    "it): the\nround trip (the mean of 5 channel opens with their exec "
	    "request, two\nround trips each), then SIZE bytes up into \"wc "
	    "-c\" "
	    "and SIZE bytes down\nfrom \"head -c SIZE /dev/zero\", each timed "
	    "from the command's start to\nits end and checked byte for byte. "
	    "Rates are in decimal units (1 MB/s\nis 1000000 bytes a second). "
	    "Each run is stored (the newest 50 per\ninstance); gpufleet advise "
	    "and cost --by provider show the median per\nplatform.\n\n"
	    "      --size SIZE      bytes each way (default 64M; 1M to 1G, "
	    "K, M, G are\n"
	    "                       KiB, MiB, GiB)\n"
	    "  -f, --fanout N       instances measured at once (1-256, "
	    "default 1: those\n"
	    "                       measured together share this machine's "
	    "link)\n"
	    "  -t, --timeout DURATION  limit for each command on the "
	    "instance (each\n"
	    "                       transfer, each round trip; default 2m, 1s "
	    "to 1h):\n"
	    "                       past it the instance fails (timeout), "
	    "however the\n"
	    "                       peer behaves; the login has the "
	    "configured connect\n"
	    "                       and set-up limits\n"
	    "      --json           one JSON array: name, download_Bps and "
	    "upload_Bps\n"
	    "                       (whole bytes a second), rtt_ms, size, "
	    "error\n\n"
	    "Exit status: 0 when every instance was measured, 1 otherwise "
	    "(the reason\nper instance on stderr), 130 after Ctrl-C (nothing "
	    "stored).\n\n"
	    "Examples:\n"
	    "  gpufleet speed all\n"
	    "  gpufleet speed @vast --size 256M --timeout 5m\n",
	.exec = cmd_speed_exec,
};

enum { OPT_SIZE = 256, OPT_JSON };

static const struct option speed_options[] = { { "size", required_argument,
						   NULL, OPT_SIZE },
	{ "fanout", required_argument, NULL, 'f' },
	{ "timeout", required_argument, NULL, 't' },
	{ "json", no_argument, NULL, OPT_JSON },
	{ "help", no_argument, NULL, 'h' }, { NULL, 0, NULL, 0 } };

/* Output: the download counted, wc's answer kept (both untrusted). */
static void
on_output(struct engine_host *h, int is_stderr, const char *data, size_t len,
    void *arg)
{
	struct speed_cmd *sc = arg;
	struct speed_host *sh = &sc->sh[h - sc->rm->hosts];

	if (is_stderr)
		return;
	if (sc->phase == PH_DOWNLOAD)
		sh->got += (int64_t)len;
	else if (sc->phase == PH_UPLOAD)
		misc_buf_add(&sh->out, data, len, WC_OUT_MAX);
}

/* End sh's measurement with code and a message. */
static void
host_fail(struct speed_host *sh, const char *code, const char *fmt, ...)
{
	va_list ap;

	sh->error_code = code;
	va_start(ap, fmt);
	xvasprintf(&sh->error, fmt, ap);
	va_end(ap);
}

/*
 * The byte count wc -c printed: digits with blanks around them (BSD pads
 * it); -1 for anything else.
 */
static int
parse_count(const char *s, int64_t *out)
{
	int64_t n = 0;
	int digits = 0;

	while (*s == ' ' || *s == '\t')
		s++;
	while (*s >= '0' && *s <= '9') {
		if (n > (INT64_MAX - 9) / 10)
			return -1;
		n = n * 10 + (*s++ - '0');
		digits++;
	}
	while (*s == ' ' || *s == '\t' || *s == '\n' || *s == '\r')
		s++;
	if (digits == 0 || *s != '\0')
		return -1;
	*out = n;
	return 0;
}

/*
 * One engine run of command on every instance still being measured; the
 * others are left out.
 */
static int
run_phase(struct speed_cmd *sc, enum speed_phase ph,
    struct engine_settings *set, const char *command)
{
	struct remote *rm = sc->rm;
	size_t i, left = 0;
	int r;

	for (i = 0; i < rm->n; i++) {
		rm->hosts[i].skip = sc->sh[i].error != NULL;
		if (!rm->hosts[i].skip)
			left++;
	}
	if (left == 0)
		return 0;
	sc->phase = ph;
	set->command = command;
	if ((r = remote_run(rm, set)) != 0)
		return r;
	check_phase(sc, ph);
	return 0;
}

/* What one phase measured, or why an instance failed in it. */
static void
check_phase(struct speed_cmd *sc, enum speed_phase ph)
{
	struct remote *rm = sc->rm;
	const char *what = phase_name[ph];
	int64_t n, ms;
	size_t i;

	for (i = 0; i < rm->n; i++) {
		struct engine_host *h = &rm->hosts[i];
		struct speed_host *sh = &sc->sh[i];
		if (h->skip)
			continue;
		ms = h->end_ms - h->exec_ms;
		if (ms < 1)
			ms = 1; /* under the clock's millisecond */
		if (h->fail == EF_INTERRUPTED)
			sc->interrupted = 1;
		if (h->fail == EF_TIMEOUT)
			host_fail(sh, engine_fail_code(h->fail),
			    "%s did not finish within %ds%s", what, sc->timeout,
			    ph == PH_UPLOAD || ph == PH_DOWNLOAD
				? " (a slow link? try a smaller --size or a "
				  "longer --timeout)"
				: "");
		else if (h->fail != EF_NONE)
			host_fail(sh, engine_fail_code(h->fail), "%s: %s", what,
			    h->fail_msg != NULL ? h->fail_msg : "failed");
		else if (h->exit_signal != NULL)
			host_fail(sh, "bad_answer", "%s: killed by SIG%s", what,
			    h->exit_signal);
		else if (h->exit_status != 0)
			host_fail(sh, "bad_answer", "%s: exit status %d", what,
			    h->exit_status);
		else if (ph == PH_RTT)
			sh->rtt_ms_sum += h->exec_ms - h->start_ms;
		else if (ph == PH_UPLOAD) {
			if (sh->out.data == NULL ||
			    parse_count(sh->out.data, &n) != 0)
				host_fail(sh, "bad_answer",
				    "upload: wc -c gave no byte count");
			else if (n != sc->size)
				host_fail(sh, "bad_answer",
				    "upload: the instance got %lld of %lld "
				    "bytes",
				    (long long)n, (long long)sc->size);
			else
				sh->up_ms = ms;
		} else if (ph == PH_DOWNLOAD) {
			if (sh->got != sc->size)
				host_fail(sh, "bad_answer",
				    "download: got %lld of %lld bytes",
				    (long long)sh->got, (long long)sc->size);
			else
				sh->down_ms = ms;
		}
		engine_host_clear(h);
		h->fail = EF_NONE;
	}
}

/* The results, one row per instance; failures go to stderr. */
static void
print_table(const struct speed_cmd *sc)
{
	struct table *t = table_new(4, "NAME", "DOWNLOAD", "UPLOAD", "RTT");
	size_t i, rows = 0;

	for (i = 0; i < sc->rm->n; i++) {
		const struct speed_host *sh = &sc->sh[i];
		char *d, *u, *r;
		if (sh->error != NULL)
			continue;
		d = speed_format_rate(sh->res.down_Bps);
		u = speed_format_rate(sh->res.up_Bps);
		r = speed_format_rtt(sh->res.rtt_ms);
		table_add(t, sc->rm->list[i].name, d, u, r);
		rows++;
		free(d);
		free(u);
		free(r);
	}
	if (rows > 0)
		table_print(t, stdout);
	table_free(t);
	for (i = 0; i < sc->rm->n; i++) {
		if (sc->sh[i].error == NULL)
			continue;
		fflush(stdout);
		error("%s: %s", sc->rm->list[i].name, sc->sh[i].error);
	}
}

/* The results as one JSON array. */
static void
print_json(const struct speed_cmd *sc)
{
	json_t *arr = json_array(), *o;
	size_t i;

	for (i = 0; i < sc->rm->n; i++) {
		const struct speed_host *sh = &sc->sh[i];
		o = json_object();
		json_object_set_new(
		    o, "name", json_string(sc->rm->list[i].name));
		if (sh->error != NULL) {
			json_object_set_new(o, "download_Bps", json_null());
			json_object_set_new(o, "upload_Bps", json_null());
			json_object_set_new(o, "rtt_ms", json_null());
		} else {
			json_object_set_new(o, "download_Bps",
			    json_integer(llround(sh->res.down_Bps)));
			json_object_set_new(o, "upload_Bps",
			    json_integer(llround(sh->res.up_Bps)));
			json_object_set_new(
			    o, "rtt_ms", json_real(sh->res.rtt_ms));
		}
		json_object_set_new(o, "size", json_integer(sc->size));
		if (sh->error != NULL)
			json_object_set_new(o, "error",
			    json_pack("{s:s, s:s}", "code", sh->error_code,
				"message", sh->error));
		else
			json_object_set_new(o, "error", json_null());
		json_array_append_new(arr, o);
	}
	json_print(arr, stdout);
}

/* The medians per platform of the selected instances, this run included. */
static void
print_platforms(const struct speed_cmd *sc)
{
	struct speed_summary *v;
	char *cause = NULL, *line;
	size_t n, i;

	if (speed_by_provider(
		sc->rm->inv, sc->rm->list, sc->rm->n, &v, &n, &cause) != 0) {
		warn_msg("%s", cause);
		free(cause);
		return;
	}
	if (n > 0)
		printf("\nmedian per platform:\n");
	for (i = 0; i < n; i++) {
		line = speed_format_summary(&v[i]);
		printf("  %s: %s\n", v[i].provider, line);
		free(line);
	}
	speed_summary_free(v, n);
}

static int
cmd_speed_exec(
    const struct cmd_entry *e, struct cmd_ctx *ctx, int argc, char **argv)
{
	struct speed_cmd sc;
	struct engine_settings set;
	char *cause = NULL, *zeros = NULL, *cmd = NULL;
	int64_t timeout = DEFAULT_TIMEOUT, at;
	size_t i, nok = 0;
	int ch, status, json = 0, r, k;

	memset(&sc, 0, sizeof sc);
	memset(&set, 0, sizeof set);
	sc.size = DEFAULT_SIZE;
	set.fanout = 1;
	set.connect_timeout = ctx->fleet->config->connect_timeout;
	set.setup_timeout = ctx->fleet->config->setup_timeout;
	while ((ch = cmd_getopt(
		    e, argc, argv, "f:t:h", speed_options, &status)) != -1) {
		switch (ch) {
		case -2:
			return status;
		case OPT_SIZE:
			if (jobspec_parse_size_range(optarg, SPEED_SIZE_MIN,
				SPEED_SIZE_MAX, &sc.size, &cause) != 0) {
				status =
				    cmd_usage_error(e, "--size: %s", cause);
				free(cause);
				return status;
			}
			break;
		case 'f':
			if ((status = cmd_number(e, "--fanout", optarg,
				 "instances", 1, 256, &set.fanout)) != 0)
				return status;
			break;
		case 't':
			if ((status = cmd_duration(
				 e, "timeout", optarg, 1, 3600, &timeout)) != 0)
				return status;
			break;
		case OPT_JSON:
			json = 1;
			break;
		}
	}
	if (argc - optind != 1)
		return cmd_usage_error(e, "needs one SELECTOR");
	sc.timeout = (int)timeout;
	set.command_timeout = sc.timeout;
	set.keep_open = 1; /* one login; each phase is a channel on it */
	set.handle_sigint = 1;
	if ((r = remote_open(ctx->fleet, argv[optind], &sc.rm, &cause)) != 0)
		return cmd_fail(-r, cause);
	sc.sh = xcalloc(sc.rm->n, sizeof *sc.sh);
	sc.rm->ops.output = on_output;
	sc.rm->ops.done = NULL;
	sc.rm->ops.arg = &sc;

	r = run_phase(&sc, PH_LOGIN, &set, "true");
	for (k = 0; k < RTT_ROUNDS && r == 0 && !sc.interrupted; k++)
		r = run_phase(&sc, PH_RTT, &set, "true");
	if (r == 0 && !sc.interrupted) {
		zeros = xcalloc(1, (size_t)sc.size);
		set.stdin_data = zeros;
		set.stdin_len = (size_t)sc.size;
		r = run_phase(&sc, PH_UPLOAD, &set, "wc -c");
		free(zeros);
		set.stdin_data = NULL;
		set.stdin_len = 0;
	}
	if (r == 0 && !sc.interrupted) {
		xasprintf(&cmd, "head -c %lld /dev/zero", (long long)sc.size);
		r = run_phase(&sc, PH_DOWNLOAD, &set, cmd);
		free(cmd);
	}
	if (r != 0) {
		status =
		    cmd_fail(GF_EHOSTS, xstrdup("cannot start the event loop"));
		goto out;
	}

	at = (int64_t)time(NULL);
	for (i = 0; i < sc.rm->n; i++) {
		struct speed_host *sh = &sc.sh[i];
		if (sh->error == NULL && sc.interrupted)
			host_fail(sh, engine_fail_code(EF_INTERRUPTED),
			    "interrupted");
		if (sh->error != NULL)
			continue;
		sh->res.size = sc.size;
		sh->res.up_Bps = (double)sc.size * 1000 / (double)sh->up_ms;
		sh->res.down_Bps = (double)sc.size * 1000 / (double)sh->down_ms;
		sh->res.rtt_ms = (double)sh->rtt_ms_sum / (2.0 * RTT_ROUNDS);
		if (speed_store(sc.rm->inv, sc.rm->list[i].id, at, &sh->res,
			&cause) != 0) {
			status = cmd_fail(GF_EDB, cause);
			goto out;
		}
		nok++;
	}
	if (json)
		print_json(&sc);
	else {
		print_table(&sc);
		if (nok > 0)
			print_platforms(&sc);
	}
	if (sc.interrupted)
		status = 130;
	else
		status = nok == sc.rm->n ? GF_OK : GF_EHOSTS;
out:
	for (i = 0; sc.sh != NULL && i < sc.rm->n; i++) {
		free(sc.sh[i].error);
		free(sc.sh[i].out.data);
	}
	free(sc.sh);
	remote_close(sc.rm);
	return status;
}

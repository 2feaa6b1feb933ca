/*
 * Copy local files to every selected instance (push), or files from each
 * into LOCAL_DIR/NAME/ here (pull, cmd-pull.c): rsync over OpenSSH with
 * the fleet's pinned host keys and current keys (xfer.c), a tar stream
 * where an instance has no rsync. Both commands share this file's
 * options, checks and output.
 */

#include <sys/stat.h>

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cmd.h"
#include "status.h"
#include "xfer.h"
#include "xmalloc.h"

#define FANOUT_DEFAULT	4
#define FANOUT_MAX	256
#define TIMEOUT_DEFAULT 120

static int cmd_push_exec(
    const struct cmd_entry *, struct cmd_ctx *, int, char **);
static json_t *result_json(const struct xfer_result *);

const struct cmd_entry cmd_push_entry = {
	.name = "push",
	.usage = "SELECTOR [options] LOCAL... REMOTE_DIR",
	.summary = "copy local files and directories to the selected instances",
	.help =
	    "Copies each LOCAL into REMOTE_DIR on every selected instance with "
	    "rsync over\nOpenSSH (gpufleet's pinned host keys and current "
	    "keys): only what changed\nis sent, checksummed; files, "
	    "directories (recursively), symbolic links,\npermissions and "
	    "modification times are kept (rsync -rlpt). As with rsync,\n"
	    "LOCAL/ (a trailing slash) copies the directory's content, LOCAL "
	    "the\ndirectory itself. A leading ~/ in REMOTE_DIR is the login "
	    "directory.\nAn interrupted transfer keeps what arrived "
	    "in " XFER_PARTIAL_DIR "/ beside\nthe file and the next run "
	    "resumes from it; no file is half-written under\nits final name. "
	    "An instance without rsync gets a tar stream over ssh\n(said in "
	    "the output), unpacked under a temporary name and renamed.\n\n"
	    "Options:\n"
	    "  -f, --fanout N    instances at once (1-256, default 4: "
	    "bandwidth, not\n"
	    "                    CPU, is the limit)\n"
	    "  -n, --dry-run     show what would be sent, send nothing\n"
	    "      --delete      delete files in REMOTE_DIR that LOCAL does "
	    "not have\n"
	    "                    (never without this option; needs rsync on "
	    "the instance)\n"
	    "  -t, --timeout SECS  fail an instance after SECS without data "
	    "(default\n"
	    "                    120, 0: none)\n"
	    "      --json        one JSON object: bytes, files, duration_ms, "
	    "rate (bytes/s)\n"
	    "                    and result per instance\n\n"
	    "On a terminal a line per instance under way (bytes, rate, ETA) "
	    "and a total\nare drawn on stderr; each instance's result is one "
	    "line on stdout. Needs\nrsync on this machine. Exit status 1 if "
	    "any instance failed (with why).\n\n"
	    "Examples:\n"
	    "  gpufleet push @train ./data/ '~/data'\n"
	    "  gpufleet push 'a100-*' -f 8 train.py configs '~/job'\n"
	    "  gpufleet push inst-1 --delete --dry-run ./src/ '~/src'\n",
	.exec = cmd_push_exec,
};

enum { OPT_DELETE = 256, OPT_JSON };

static const struct option xfer_options[] = { { "fanout", required_argument,
						  NULL, 'f' },
	{ "dry-run", no_argument, NULL, 'n' },
	{ "delete", no_argument, NULL, OPT_DELETE },
	{ "timeout", required_argument, NULL, 't' },
	{ "json", no_argument, NULL, OPT_JSON },
	{ "help", no_argument, NULL, 'h' }, { NULL, 0, NULL, 0 } };

/* One instance's result as a line on stdout (push, pull, shutdown --pull). */
void
cmd_xfer_print(const struct xfer_req *req, const struct xfer_host *h)
{
	char *sz, *rate;
	uint64_t bps;

	if (!h->ok) {
		cmd_print_failed(h->name, h->error);
		return;
	}
	if (req->dry_run && h->tar) {
		printf("%s: dry run: no rsync on the instance; a tar stream "
		       "would send everything\n",
		    h->name);
		return;
	}
	sz = xfer_size(h->bytes);
	if (req->dry_run) {
		printf("%s: dry run: would %s %llu file%s, %s\n", h->name,
		    req->dir == XFER_PUSH ? "send" : "fetch",
		    (unsigned long long)h->files, h->files == 1 ? "" : "s", sz);
		free(sz);
		return;
	}
	bps = h->duration_ms > 0 ? h->bytes * 1000 / (uint64_t)h->duration_ms
				 : h->bytes;
	rate = xfer_size(bps);
	printf("%s: %s %llu file%s, %s in %.1f s (%s/s)%s\n", h->name,
	    req->dir == XFER_PUSH ? "pushed" : "pulled",
	    (unsigned long long)h->files, h->files == 1 ? "" : "s", sz,
	    (double)h->duration_ms / 1000, rate,
	    h->tar ? " by tar stream (no rsync on the instance)" : "");
	free(rate);
	free(sz);
}

static json_t *
result_json(const struct xfer_result *res)
{
	const struct xfer_host *h;
	json_t *o, *a;
	size_t i;
	uint64_t bps;

	a = json_array();
	for (i = 0; i < res->n; i++) {
		h = &res->hosts[i];
		bps = h->duration_ms > 0
		    ? h->bytes * 1000 / (uint64_t)h->duration_ms
		    : 0;
		json_array_append_new(a,
		    json_pack("{s:s, s:s, s:s, s:I, s:I, s:I, s:I, s:s?}",
			"name", h->name, "result", h->ok ? "ok" : "failed",
			"method", h->tar ? "tar" : "rsync", "bytes",
			(json_int_t)h->bytes, "files", (json_int_t)h->files,
			"duration_ms", (json_int_t)h->duration_ms, "rate",
			(json_int_t)bps, "error", h->error));
	}
	bps = res->duration_ms > 0
	    ? res->bytes * 1000 / (uint64_t)res->duration_ms
	    : 0;
	o = json_pack("{s:I, s:I, s:I, s:I, s:I, s:o}", "bytes",
	    (json_int_t)res->bytes, "files", (json_int_t)res->files,
	    "duration_ms", (json_int_t)res->duration_ms, "rate",
	    (json_int_t)bps, "failed", (json_int_t)res->nfailed, "instances",
	    a);
	return o;
}

/* push and pull: SELECTOR PATH... DEST. */
int
cmd_xfer_exec(const struct cmd_entry *e, struct cmd_ctx *ctx, int argc,
    char **argv, int pull)
{
	struct xfer_req req;
	struct xfer_result res;
	struct inventory *inv;
	struct instance *list = NULL;
	struct stat st;
	char *cause = NULL;
	size_t n = 0, i;
	int ch, status, json = 0, r;

	memset(&req, 0, sizeof req);
	req.dir = pull ? XFER_PULL : XFER_PUSH;
	req.fanout = FANOUT_DEFAULT;
	req.timeout = TIMEOUT_DEFAULT;
	while ((ch = cmd_getopt(
		    e, argc, argv, "f:nt:h", xfer_options, &status)) != -1) {
		switch (ch) {
		case -2:
			return status;
		case 'f':
			if (cmd_number(e, "--fanout", optarg, "instances", 1,
				FANOUT_MAX, &req.fanout) != 0)
				return GF_EUSAGE;
			break;
		case 'n':
			req.dry_run = 1;
			break;
		case OPT_DELETE:
			req.delete = 1;
			break;
		case 't':
			if (cmd_number(e, "--timeout", optarg, "seconds", 0,
				86400, &req.timeout) != 0)
				return GF_EUSAGE;
			break;
		case OPT_JSON:
			json = 1;
			break;
		}
	}
	if (argc - optind < 3)
		return cmd_usage_error(e, "wants SELECTOR, %s and %s",
		    pull ? "REMOTE_PATH..." : "LOCAL...",
		    pull ? "LOCAL_DIR" : "REMOTE_DIR");
	req.paths = (const char *const *)argv + optind + 1;
	req.npaths = (size_t)(argc - optind - 2);
	req.dest = argv[argc - 1];
	for (i = 0; i <= req.npaths; i++) {
		const char *p = i < req.npaths ? req.paths[i] : req.dest;
		if (xfer_check_path(p, &cause) != 0) {
			status = cmd_usage_error(e, "%s", cause);
			free(cause);
			return status;
		}
		if (pull ? i == req.npaths : i < req.npaths) {
			if (lstat(p, &st) == 0)
				continue;
			if (pull && errno == ENOENT)
				continue; /* LOCAL_DIR is made */
			return cmd_usage_error(e, "%s: %s", p, strerror(errno));
		}
	}
	if (pull && stat(req.dest, &st) == 0 && !S_ISDIR(st.st_mode))
		return cmd_usage_error(e, "%s is not a directory", req.dest);
	if (!xfer_have_rsync())
		return cmd_fail(GF_ECONFIG,
		    xstrdup("rsync is not installed on this machine (gpufleet "
			    "push and pull run it): install rsync"));
	if ((r = fleet_inventory(ctx->fleet, &inv, &cause)) != 0 ||
	    (r = inventory_select(inv, argv[optind], &list, &n, &cause)) != 0)
		return cmd_fail(-r, cause);
	req.progress = !json && isatty(STDERR_FILENO) &&
	    getenv("GPUFLEET_NO_PROGRESS") == NULL;
	r = xfer_run(ctx->fleet, list, n, &req, &res, &cause);
	instance_free_array(list, n);
	if (r != 0)
		return cmd_fail(-r, cause);
	if (json)
		json_print(result_json(&res), stdout);
	else {
		for (i = 0; i < res.n; i++)
			cmd_xfer_print(&req, &res.hosts[i]);
	}
	status = res.interrupted ? 130 : res.nfailed > 0 ? GF_EHOSTS : GF_OK;
	if (!json && res.n > 1) {
		char *sz = xfer_size(res.bytes);
		fprintf(stderr, "%zu ok, %zu failed; %s in %.1f s\n",
		    res.n - res.nfailed, res.nfailed, sz,
		    (double)res.duration_ms / 1000);
		free(sz);
	}
	xfer_result_free(&res);
	return status;
}

static int
cmd_push_exec(
    const struct cmd_entry *e, struct cmd_ctx *ctx, int argc, char **argv)
{
	return cmd_xfer_exec(e, ctx, argc, argv, 0);
}

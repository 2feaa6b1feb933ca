/*
 * The report: one JSON document with the host, its GPUs and the progress
 * file, in the order and with the names of gpufleet/report.h.
 */

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "agent.h"
#include "gpufleet/authkeys.h"
#include "gpufleet/report.h"
#include "gpufleet/version.h"
#include "../controller/xmalloc.h"

/* Longest GPU timeout the environment may ask for, in milliseconds. */
#define REPORT_GPU_TIMEOUT_MAX 600000

/* Defaults; the GPU timeout from REPORT_GPU_TIMEOUT_ENV if it is valid. */
void
report_opts_init(struct report_opts *o)
{
	const char *env;
	char *end;
	long v;

	memset(o, 0, sizeof *o);
	o->gpu_timeout_ms = REPORT_GPU_TIMEOUT_MS;
	if ((env = getenv(REPORT_GPU_TIMEOUT_ENV)) == NULL || *env == '\0')
		return;
	errno = 0;
	v = strtol(env, &end, 10);
	if (errno == 0 && *end == '\0' && v > 0 && v <= REPORT_GPU_TIMEOUT_MAX)
		o->gpu_timeout_ms = v;
}

/*
 * path with a leading "~/" (or a lone "~") replaced by $HOME ("/" when it
 * is unset). Caller frees.
 */
char *
report_expand_home(const char *path)
{
	const char *home = getenv("HOME");
	char *out;

	if (home == NULL || *home == '\0')
		home = "/";
	if (strcmp(path, "~") == 0)
		return xstrdup(home);
	if (strncmp(path, "~/", 2) != 0)
		return xstrdup(path);
	xasprintf(&out, "%s%s%s", home,
	    home[strlen(home) - 1] == '/' ? "" : "/", path + 2);
	return out;
}

/*
 * Collect everything and return the report as one line of JSON with a
 * newline; now is the agent's clock. Caller frees.
 */
static void authorized_keys_write(struct jsonw *, const char *);

/*
 * The keys in an authorized_keys file, as "TYPE BLOB" strings: the key of
 * each line as sshd reads it (gpufleet/authkeys.h), options left out.
 */
static void
authorized_keys_write(struct jsonw *w, const char *path)
{
	struct authkeys_line l;
	struct buf b;
	size_t off, next, ll;
	const char *line;
	char *s;

	memset(&b, 0, sizeof b);
	jsonw_object_begin(w, "authorized_keys");
	jsonw_string(w, "path", path);
	if (buf_read_file(&b, path, 256 * 1024) != 0) {
		jsonw_string(w, "error", strerror(errno));
		jsonw_object_end(w);
		return;
	}
	jsonw_array_begin(w, "keys");
	for (off = 0; off < b.len; off = next) {
		line = b.data + off;
		next = authkeys_next_line(b.data, b.len, off, &ll);
		if (authkeys_parse(line, ll, &l) != AUTHKEYS_KEY)
			continue;
		xasprintf(&s, "%.*s %.*s", (int)l.type.len, line + l.type.off,
		    (int)l.blob.len, line + l.blob.off);
		jsonw_string(w, NULL, s);
		free(s);
	}
	jsonw_array_end(w);
	jsonw_object_end(w);
	buf_free(&b);
}

char *
report_build(const struct report_opts *o, time_t now)
{
	struct gpu_info gpu;
	struct host host;
	struct progress pr;
	struct jsonw w;
	char *dir, *progress;

	dir = report_expand_home(o->dir != NULL ? o->dir : "~/.cache/gpufleet");
	progress = report_expand_home(
	    o->progress != NULL ? o->progress : "~/.gpufleet/progress");

	gpu_collect(&gpu, o->nvidia_smi, o->gpu_timeout_ms);
	host_collect(&host, o->proc != NULL ? o->proc : "/proc", dir);
	progress_read(&pr, progress);

	jsonw_init(&w);
	jsonw_object_begin(&w, NULL);
	jsonw_int(&w, REPORT_KEY_SCHEMA, REPORT_SCHEMA);
	jsonw_string(&w, REPORT_KEY_AGENT_VERSION, GPUFLEET_VERSION);
	jsonw_int(&w, REPORT_KEY_TIME, (long long)now);
	host_write(&w, &host);
	gpu_write(&w, &gpu);
	progress_write(&w, &pr);
	if (o->authorized_keys != NULL) {
		char *ak = report_expand_home(o->authorized_keys);
		authorized_keys_write(&w, ak);
		free(ak);
	}
	watcher_report(&w, dir, o->proc != NULL ? o->proc : "/proc",
	    o->ensure_watcher, o->journal_epoch, o->journal_seq);
	jsonw_object_end(&w);
	buf_add(&w.out, "\n", 1);

	gpu_free(&gpu);
	host_free(&host);
	progress_free(&pr);
	free(dir);
	free(progress);
	return w.out.data;
}

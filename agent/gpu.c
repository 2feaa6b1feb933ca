/*
 * GPU state from nvidia-smi: two CSV queries and the banner of plain
 * nvidia-smi for the CUDA version, run in parallel under one deadline.
 * Every value nvidia-smi cannot give ("[N/A]", "[Not Supported]", empty,
 * unparsable) stays unknown and is printed as null.
 */

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "agent.h"
#include "gpufleet/report.h"
#include "../controller/xmalloc.h"

#define GPU_QUERY                                                              \
	"--query-gpu=index,uuid,name,utilization.gpu,utilization.memory,"      \
	"memory.used,memory.total,temperature.gpu,power.draw,power.limit,"     \
	"driver_version"
#define GPU_QUERY_APPS                                                         \
	"--query-compute-apps=gpu_uuid,pid,process_name,used_memory"
#define GPU_FORMAT "--format=csv,noheader,nounits"

/* Columns of GPU_QUERY, in order. */
enum {
	Q_INDEX,
	Q_UUID,
	Q_NAME,
	Q_UTIL_GPU,
	Q_UTIL_MEM,
	Q_MEM_USED,
	Q_MEM_TOTAL,
	Q_TEMP,
	Q_POWER,
	Q_POWER_LIMIT,
	Q_DRIVER,
	Q_COLUMNS
};

/* More fields than this on one line are joined into the last one. */
#define GPU_MAX_FIELDS 64

/* A field of a CSV line: [s, e) of the line, white space trimmed. */
struct field {
	const char *s;
	const char *e;
};

static size_t gpu_split(const char *, const char *, struct field *);
static int gpu_na(struct field);
static char *gpu_str(struct field);
static struct field gpu_join(const struct field *, size_t, size_t);
static struct opt_int gpu_int(struct field, int);
static struct opt_num gpu_num(struct field);
static int gpu_strip_unit(struct field *);
static const char *gpu_next_line(const char *, const char *, const char **);
static void gpu_add_proc(struct gpu_info *, const struct field *, size_t);
static char *gpu_banner_value(const char *, size_t, const char *);
static char *gpu_run_error(const struct run *, long);
static char *gpu_search(const char *, const char *);

/*
 * The next line of [p, end) (ending at LF or CR, so CRLF leaves no CR),
 * or NULL at the end; *next is where the one after starts.
 */
static const char *
gpu_next_line(const char *p, const char *end, const char **next)
{
	const char *e = p;

	if (p >= end)
		return NULL;
	while (e < end && *e != '\n' && *e != '\r')
		e++;
	*next = e < end ? e + 1 : e;
	return e;
}

/* Split [s, e) at commas into trimmed fields; returns how many. */
static size_t
gpu_split(const char *s, const char *e, struct field *f)
{
	size_t n = 0;
	const char *p = s, *c;

	for (;;) {
		c = p;
		while (c < e && *c != ',')
			c++;
		if (n == GPU_MAX_FIELDS - 1)
			c = e;
		f[n].s = p;
		f[n].e = c;
		while (f[n].s < f[n].e && (*f[n].s == ' ' || *f[n].s == '\t'))
			f[n].s++;
		while (f[n].e > f[n].s &&
		    (f[n].e[-1] == ' ' || f[n].e[-1] == '\t'))
			f[n].e--;
		n++;
		if (c >= e)
			return n;
		p = c + 1;
	}
}

/* Whether a field is one of nvidia-smi's "no value" forms. */
static int
gpu_na(struct field f)
{
	size_t len = (size_t)(f.e - f.s);

	if (len == 0)
		return 1;
	if (len == 3 && memcmp(f.s, "N/A", 3) == 0)
		return 1;
	return f.s[0] == '[' && f.e[-1] == ']';
}

/* A string field, or NULL for "no value". Caller frees. */
static char *
gpu_str(struct field f)
{
	if (gpu_na(f))
		return NULL;
	return xstrndup(f.s, (size_t)(f.e - f.s));
}

/* Fields first..last (inclusive) as one field, commas kept. */
static struct field
gpu_join(const struct field *f, size_t first, size_t last)
{
	struct field j;

	j.s = f[first].s;
	j.e = f[last].e;
	if (j.e < j.s)
		j.e = j.s;
	return j;
}

/* Drop a unit nvidia-smi prints without "nounits"; 0 if none is left. */
static int
gpu_strip_unit(struct field *f)
{
	static const char *units[] = { "%", "MiB", "W", NULL };
	size_t len = (size_t)(f->e - f->s), ul, i;

	for (i = 0; units[i] != NULL; i++) {
		ul = strlen(units[i]);
		if (len > ul + 1 && memcmp(f->e - ul, units[i], ul) == 0 &&
		    f->e[-(long)ul - 1] == ' ') {
			f->e -= ul + 1;
			while (f->e > f->s && f->e[-1] == ' ')
				f->e--;
			break;
		}
	}
	return f->e > f->s;
}

/* An integer field, unknown unless it is all digits (and sign if allowed). */
static struct opt_int
gpu_int(struct field f, int allow_negative)
{
	struct opt_int v = { 0, 0 };
	char tmp[32], *end;
	const char *p;
	long long n;

	if (gpu_na(f) || !gpu_strip_unit(&f))
		return v;
	if ((size_t)(f.e - f.s) >= sizeof tmp)
		return v;
	p = f.s;
	if (*p == '-' && allow_negative)
		p++;
	if (p == f.e)
		return v;
	for (; p < f.e; p++)
		if (*p < '0' || *p > '9')
			return v;
	memcpy(tmp, f.s, (size_t)(f.e - f.s));
	tmp[f.e - f.s] = '\0';
	errno = 0;
	n = strtoll(tmp, &end, 10);
	if (errno != 0 || *end != '\0' || end == tmp)
		return v;
	v.set = 1;
	v.v = n;
	return v;
}

/* A decimal number field (digits, one point); unknown otherwise. */
static struct opt_num
gpu_num(struct field f)
{
	struct opt_num v = { 0, 0 };
	char tmp[64], *end;
	const char *p;
	int digits = 0, points = 0;
	double d;

	if (gpu_na(f) || !gpu_strip_unit(&f))
		return v;
	if ((size_t)(f.e - f.s) >= sizeof tmp)
		return v;
	for (p = f.s; p < f.e; p++) {
		if (*p >= '0' && *p <= '9')
			digits++;
		else if (*p == '.' && points++ == 0)
			continue;
		else
			return v;
	}
	if (digits == 0)
		return v;
	memcpy(tmp, f.s, (size_t)(f.e - f.s));
	tmp[f.e - f.s] = '\0';
	errno = 0;
	d = strtod(tmp, &end);
	if (errno != 0 || *end != '\0' || end == tmp)
		return v;
	v.set = 1;
	v.v = d;
	return v;
}

/*
 * Parse the output of GPU_QUERY: one GPU per line, in nvidia-smi's order.
 * Missing trailing columns are unknown; a name containing commas takes the
 * columns nvidia-smi added. Lines that do not start with an integer index
 * (messages, a header) are skipped.
 */
void
gpu_parse_query(struct gpu_info *info, const char *text, size_t len)
{
	struct field f[GPU_MAX_FIELDS], col[Q_COLUMNS];
	const char *p = text, *end = text + len, *eol, *next;
	struct gpu *g;
	size_t n, i, extra;

	while ((eol = gpu_next_line(p, end, &next)) != NULL) {
		n = gpu_split(p, eol, f);
		p = next;
		if (n < 2 || !gpu_int(f[0], 0).set)
			continue; /* a message or a header line */
		extra = n > Q_COLUMNS ? n - Q_COLUMNS : 0;
		for (i = 0; i < Q_COLUMNS; i++) {
			if (i < Q_NAME)
				col[i] = f[i]; /* n >= 2 */
			else if (i == Q_NAME && i < n)
				col[i] = gpu_join(f, Q_NAME, Q_NAME + extra);
			else if (i != Q_NAME && i + extra < n)
				col[i] = f[i + extra];
			else
				col[i].s = col[i].e = eol;
		}
		info->gpus = xreallocarray(
		    info->gpus, info->ngpus + 1, sizeof *info->gpus);
		g = &info->gpus[info->ngpus++];
		memset(g, 0, sizeof *g);
		g->index = gpu_int(col[Q_INDEX], 0);
		g->uuid = gpu_str(col[Q_UUID]);
		g->name = gpu_str(col[Q_NAME]);
		g->util_gpu = gpu_int(col[Q_UTIL_GPU], 0);
		g->util_mem = gpu_int(col[Q_UTIL_MEM], 0);
		g->mem_used_mib = gpu_int(col[Q_MEM_USED], 0);
		g->mem_total_mib = gpu_int(col[Q_MEM_TOTAL], 0);
		g->temp_c = gpu_int(col[Q_TEMP], 1);
		g->power_w = gpu_num(col[Q_POWER]);
		g->power_limit_w = gpu_num(col[Q_POWER_LIMIT]);
		g->driver_version = gpu_str(col[Q_DRIVER]);
		if (info->driver_version == NULL && g->driver_version != NULL)
			info->driver_version = xstrdup(g->driver_version);
	}
}

/* Attach one process line (already split) to the GPU with its UUID. */
static void
gpu_add_proc(struct gpu_info *info, const struct field *f, size_t n)
{
	struct gpu_proc *pr;
	struct gpu *g = NULL;
	struct field name, mem;
	size_t i;

	for (i = 0; i < info->ngpus; i++) {
		if (info->gpus[i].uuid != NULL &&
		    strlen(info->gpus[i].uuid) == (size_t)(f[0].e - f[0].s) &&
		    memcmp(info->gpus[i].uuid, f[0].s,
			(size_t)(f[0].e - f[0].s)) == 0) {
			g = &info->gpus[i];
			break;
		}
	}
	if (g == NULL)
		return;
	name.s = name.e = f[n - 1].e;
	mem = name;
	if (n >= 4 && (gpu_na(f[n - 1]) || gpu_int(f[n - 1], 0).set)) {
		name = gpu_join(f, 2, n - 2); /* the name may hold commas */
		mem = f[n - 1];
	} else if (n >= 3)
		name = gpu_join(f, 2, n - 1); /* used_memory missing */
	g->procs = xreallocarray(g->procs, g->nprocs + 1, sizeof *g->procs);
	pr = &g->procs[g->nprocs++];
	pr->pid = gpu_int(f[1], 0);
	pr->name = gpu_str(name);
	pr->mem_mib = gpu_int(mem, 0);
}

/*
 * Parse the output of GPU_QUERY_APPS and attach each process to its GPU by
 * UUID (on a MIG GPU nvidia-smi gives the parent GPU's UUID); processes of
 * a UUID that no GPU has, and lines without an integer PID, are dropped.
 * Marks every GPU's list as known.
 */
void
gpu_parse_apps(struct gpu_info *info, const char *text, size_t len)
{
	struct field f[GPU_MAX_FIELDS];
	const char *p = text, *end = text + len, *eol, *next;
	size_t n, i;

	for (i = 0; i < info->ngpus; i++)
		info->gpus[i].procs_known = 1;
	while ((eol = gpu_next_line(p, end, &next)) != NULL) {
		n = gpu_split(p, eol, f);
		p = next;
		if (n < 2 || !gpu_int(f[1], 0).set)
			continue; /* a message or a header line */
		gpu_add_proc(info, f, n);
	}
}

/*
 * The value after label in plain nvidia-smi's banner ("CUDA Version:
 * 12.2"), or NULL if absent or N/A. Caller frees.
 */
static char *
gpu_banner_value(const char *text, size_t len, const char *label)
{
	size_t ll = strlen(label), i;
	const char *p, *e, *end = text + len;

	for (i = 0; i + ll <= len; i++) {
		if (memcmp(text + i, label, ll) != 0)
			continue;
		p = text + i + ll;
		while (p < end && *p == ' ')
			p++;
		e = p;
		while (e < end && ((*e >= '0' && *e <= '9') || *e == '.'))
			e++;
		if (e == p ||
		    (e < end && *e != ' ' && *e != '|' && *e != '\n' &&
			*e != '\r'))
			return NULL;
		return xstrndup(p, (size_t)(e - p));
	}
	return NULL;
}

/*
 * Take the CUDA version (and the driver version, if the query gave none)
 * from the banner of plain nvidia-smi.
 */
void
gpu_parse_banner(struct gpu_info *info, const char *text, size_t len)
{
	if (info->cuda_version == NULL)
		info->cuda_version =
		    gpu_banner_value(text, len, "CUDA Version:");
	if (info->driver_version == NULL)
		info->driver_version =
		    gpu_banner_value(text, len, "Driver Version:");
}

/* The one-line reason a run gave no usable output, or NULL. Caller frees. */
static char *
gpu_run_error(const struct run *r, long timeout_ms)
{
	char *msg;

	switch (r->state) {
	case RUN_SPAWN_FAILED:
		xasprintf(
		    &msg, "cannot run nvidia-smi: %s", strerror(r->error));
		return msg;
	case RUN_TIMED_OUT:
		if (timeout_ms % 1000 == 0)
			xasprintf(&msg, REPORT_GPU_ERR_TIMEOUT_PREFIX "%lds",
			    timeout_ms / 1000);
		else {
			char frac[8];
			size_t n;

			snprintf(frac, sizeof frac, "%03ld", timeout_ms % 1000);
			n = strlen(frac);
			while (n > 1 && frac[n - 1] == '0')
				frac[--n] = '\0';
			xasprintf(&msg, REPORT_GPU_ERR_TIMEOUT_PREFIX "%ld.%ss",
			    timeout_ms / 1000, frac);
		}
		return msg;
	case RUN_EXITED:
		break;
	}
	if (WIFEXITED(r->status) && WEXITSTATUS(r->status) == 0)
		return NULL;
	if ((msg = buf_first_line(r->out[1].data, r->out[1].len)) != NULL)
		return msg;
	if ((msg = buf_first_line(r->out[0].data, r->out[0].len)) != NULL)
		return msg;
	if (WIFEXITED(r->status))
		xasprintf(&msg, "nvidia-smi exited with status %d",
		    WEXITSTATUS(r->status));
	else
		xasprintf(&msg, "nvidia-smi killed by signal %d",
		    WTERMSIG(r->status));
	return msg;
}

/* dir/name if it is an executable regular file, or NULL. Caller frees. */
static char *
gpu_search(const char *dir, const char *name)
{
	struct stat sb;
	char *path;

	xasprintf(&path, "%s/%s", *dir == '\0' ? "." : dir, name);
	if (stat(path, &sb) == 0 && S_ISREG(sb.st_mode) &&
	    access(path, X_OK) == 0)
		return path;
	free(path);
	return NULL;
}

/*
 * The nvidia-smi to run: the given path (searched in PATH if it has no
 * slash), else nvidia-smi in PATH, then /usr/local/nvidia/bin and /usr/bin
 * (where containers and distributions put it when PATH is minimal). NULL
 * if there is none. Caller frees.
 */
char *
gpu_find_nvidia_smi(const char *given)
{
	static const char *fallback[] = { "/usr/local/nvidia/bin", "/usr/bin",
		NULL };
	const char *name = given != NULL ? given : "nvidia-smi", *path;
	char *copy, *dir, *save, *found = NULL;
	size_t i;

	if (strchr(name, '/') != NULL) {
		struct stat sb;

		if (stat(name, &sb) == 0 && S_ISREG(sb.st_mode))
			return xstrdup(name);
		return NULL;
	}
	if ((path = getenv("PATH")) != NULL) {
		copy = xstrdup(path);
		for (dir = strtok_r(copy, ":", &save); dir != NULL;
		     dir = strtok_r(NULL, ":", &save)) {
			if ((found = gpu_search(dir, name)) != NULL)
				break;
		}
		free(copy);
		if (found != NULL)
			return found;
	}
	if (given != NULL)
		return NULL;
	for (i = 0; fallback[i] != NULL; i++)
		if ((found = gpu_search(fallback[i], name)) != NULL)
			return found;
	return NULL;
}

/*
 * Fill info from nvidia-smi (nvsmi as gpu_find_nvidia_smi takes it): with
 * full, the GPU query, the process query and the banner, all three runs
 * together bounded by timeout_ms; without, the GPU query alone (one run:
 * the watcher's sample, processes unknown). Never fails: what could not be
 * had is in info->error or left unknown.
 */
void
gpu_collect(struct gpu_info *info, const char *nvsmi, long timeout_ms, int full)
{
	char *path, *query[4], *apps[4], *plain[2];
	struct run runs[3];
	size_t i, nruns;

	memset(info, 0, sizeof *info);
	if ((path = gpu_find_nvidia_smi(nvsmi)) == NULL) {
		info->error = xstrdup(REPORT_GPU_ERR_NOT_FOUND);
		return;
	}
	query[0] = apps[0] = plain[0] = path;
	query[1] = GPU_QUERY;
	apps[1] = GPU_QUERY_APPS;
	query[2] = apps[2] = GPU_FORMAT;
	query[3] = apps[3] = plain[1] = NULL;
	memset(runs, 0, sizeof runs);
	runs[0].argv = query;
	runs[1].argv = apps;
	runs[2].argv = plain;
	nruns = full ? 3 : 1;
	run_all(runs, nruns, timeout_ms);

	if ((info->error = gpu_run_error(&runs[0], timeout_ms)) == NULL) {
		gpu_parse_query(info, runs[0].out[0].data, runs[0].out[0].len);
		if (full && runs[1].state == RUN_EXITED &&
		    WIFEXITED(runs[1].status) &&
		    WEXITSTATUS(runs[1].status) == 0)
			gpu_parse_apps(
			    info, runs[1].out[0].data, runs[1].out[0].len);
	}
	if (full && runs[2].state == RUN_EXITED && runs[2].out[0].len != 0)
		gpu_parse_banner(info, runs[2].out[0].data, runs[2].out[0].len);
	for (i = 0; i < nruns; i++)
		run_free(
		    &runs[i]); /* a run never started has no fds to close */
	free(path);
}

/* Write "gpus", "gpu_error", "driver_version" and "cuda_version". */
void
gpu_write(struct jsonw *w, const struct gpu_info *info)
{
	const struct gpu *g;
	const struct gpu_proc *pr;
	size_t i, j;

	jsonw_array_begin(w, REPORT_KEY_GPUS);
	for (i = 0; i < info->ngpus; i++) {
		g = &info->gpus[i];
		jsonw_object_begin(w, NULL);
		jsonw_opt_int(w, REPORT_KEY_GPU_INDEX, g->index);
		jsonw_string(w, REPORT_KEY_GPU_UUID, g->uuid);
		jsonw_string(w, REPORT_KEY_GPU_NAME, g->name);
		jsonw_opt_int(w, REPORT_KEY_GPU_UTIL_GPU, g->util_gpu);
		jsonw_opt_int(w, REPORT_KEY_GPU_UTIL_MEM, g->util_mem);
		jsonw_opt_int(w, REPORT_KEY_GPU_MEM_USED_MIB, g->mem_used_mib);
		jsonw_opt_int(
		    w, REPORT_KEY_GPU_MEM_TOTAL_MIB, g->mem_total_mib);
		jsonw_opt_int(w, REPORT_KEY_GPU_TEMP_C, g->temp_c);
		jsonw_opt_num(w, REPORT_KEY_GPU_POWER_W, g->power_w, 2);
		jsonw_opt_num(
		    w, REPORT_KEY_GPU_POWER_LIMIT_W, g->power_limit_w, 2);
		if (!g->procs_known)
			jsonw_null(w, REPORT_KEY_GPU_PROCESSES);
		else {
			jsonw_array_begin(w, REPORT_KEY_GPU_PROCESSES);
			for (j = 0; j < g->nprocs; j++) {
				pr = &g->procs[j];
				jsonw_object_begin(w, NULL);
				jsonw_opt_int(w, REPORT_KEY_PROC_PID, pr->pid);
				jsonw_string(w, REPORT_KEY_PROC_NAME, pr->name);
				jsonw_opt_int(
				    w, REPORT_KEY_PROC_MEM_MIB, pr->mem_mib);
				jsonw_object_end(w);
			}
			jsonw_array_end(w);
		}
		jsonw_object_end(w);
	}
	jsonw_array_end(w);
	jsonw_string(w, REPORT_KEY_GPU_ERROR, info->error);
	jsonw_string(w, REPORT_KEY_DRIVER_VERSION, info->driver_version);
	jsonw_string(w, REPORT_KEY_CUDA_VERSION, info->cuda_version);
}

/* Free everything info holds. */
void
gpu_free(struct gpu_info *info)
{
	size_t i, j;

	for (i = 0; i < info->ngpus; i++) {
		for (j = 0; j < info->gpus[i].nprocs; j++)
			free(info->gpus[i].procs[j].name);
		free(info->gpus[i].procs);
		free(info->gpus[i].uuid);
		free(info->gpus[i].name);
		free(info->gpus[i].driver_version);
	}
	free(info->gpus);
	free(info->error);
	free(info->driver_version);
	free(info->cuda_version);
	memset(info, 0, sizeof *info);
}

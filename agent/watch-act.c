/*
 * What the watcher does besides deciding: run a deadline's before-stop
 * command and the stop command, warn the people logged in, and take an
 * autostop sample (agent/WATCH.md "Warnings", "Environment of the
 * commands", "Idle, as the watcher judges it").
 */

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "agent.h"
#include "gpufleet/report.h"
#include "../controller/xmalloc.h"

/* Terminals written to at most, where there is no wall. */
#define WATCH_MAX_TTYS 64
/* How long wall may take. */
#define WATCH_WALL_MS 10000

static void watch_result(struct jsonw *, const struct shell *);
static int watch_ttys(const char *, const char *);
static void watch_sample_take(struct watch *, const struct plan_autostop *,
    long long, struct judge_sample *, char **);
static int watch_unless_busy(
    struct watch *, struct judge_sample *, char *, size_t);
static void watch_sample_write(struct jsonw *, const struct judge_sample *);
static void watch_job_evidence(struct jsonw *, const struct judge_fire *);
static void watch_job_started(struct watch *, const struct job *);
static void watch_job_ended(struct watch *, const struct job *);

/* status, signal, timed_out and output of an ended command. */
static void
watch_result(struct jsonw *jw, const struct shell *sh)
{
	if (sh->reaped && WIFEXITED(sh->status) && !sh->timed_out)
		jsonw_int(jw, "status", WEXITSTATUS(sh->status));
	else
		jsonw_null(jw, "status");
	if (sh->reaped && WIFSIGNALED(sh->status))
		jsonw_int(jw, "signal", WTERMSIG(sh->status));
	else
		jsonw_null(jw, "signal");
	jsonw_bool(jw, "timed_out", sh->timed_out);
	jsonw_stringn(jw, "output", sh->tail, sh->tail_len);
}

/*
 * Journal event (before_stop, stop_result) for a command whose end was not
 * seen: status and signal null, why in output.
 */
void
watch_no_result(
    struct watch *w, const char *event, const char *id, const char *why)
{
	struct jsonw jw;

	watch_entry(w, &jw, event, id);
	jsonw_null(&jw, "status");
	jsonw_null(&jw, "signal");
	jsonw_bool(&jw, "timed_out", 0);
	jsonw_string(&jw, "output", why);
	watch_log(w, &jw);
}

/*
 * Run fired id's before-stop command to its timeout and journal
 * "before_stop". A SIGTERM (*stop) kills it unjournaled: the next watcher
 * runs it again.
 */
void
watch_run_before(struct watch *w, const char *id, const struct judge_task *t,
    volatile sig_atomic_t *stop)
{
	char *argv[] = { "/bin/sh", "-c", (char *)t->before_stop, NULL };
	struct shell sh;
	struct jsonw jw;
	char *cause = NULL;

	if (shell_start(&sh, argv, w->env, NULL, &cause) != 0) {
		watch_no_result(w, "before_stop", id, cause);
		free(cause);
		return;
	}
	shell_release(&sh);
	shell_wait(&sh, (long)t->before_timeout_s * 1000, stop);
	if (!sh.reaped) {
		kill(-sh.pid, SIGKILL);
		shell_close(&sh);
		return;
	}
	watch_entry(w, &jw, "before_stop", id);
	watch_result(&jw, &sh);
	watch_log(w, &jw);
	shell_close(&sh);
}

/*
 * Run the stop command for fired id: journal "stopping" with its pid while
 * it waits at its gate, let it run, journal "stop_result" when it ends
 * (bounded by stop_confirm_s). On SIGTERM it is left running unjournaled:
 * the next watcher waits for that pid.
 */
void
watch_run_stop(struct watch *w, const char *id, volatile sig_atomic_t *stop)
{
	char *argv[] = { "/bin/sh", "-c", w->plan.stop_command, NULL };
	struct shell sh;
	struct jsonw jw;
	char *cause = NULL;
	int started;

	started = shell_start(&sh, argv, w->env, NULL, &cause) == 0;
	watch_entry(w, &jw, "stopping", id);
	jsonw_string(&jw, "command", w->plan.stop_command);
	if (started) {
		jsonw_int(&jw, "pid", (long long)sh.pid);
		jsonw_int(&jw, "pid_start", shell_pid_start(w->proc, sh.pid));
	} else {
		jsonw_null(&jw, "pid");
		jsonw_null(&jw, "pid_start");
	}
	watch_log(w, &jw);
	if (!started) {
		watch_no_result(w, "stop_result", id, cause);
		free(cause);
		return;
	}
	shell_release(&sh);
	shell_wait(&sh, (long)w->plan.stop_confirm_s * 1000, stop);
	if (sh.reaped) {
		watch_entry(w, &jw, "stop_result", id);
		watch_result(&jw, &sh);
		watch_log(w, &jw);
	}
	shell_close(&sh);
}

/* The path of program name in PATH, /usr/bin or /bin, or NULL. Caller frees. */
char *
watch_find_prog(const char *name)
{
	const char *path = getenv("PATH");
	char *copy, *dir, *save, *found = NULL;

	copy = xstrdup(path != NULL ? path : "");
	for (dir = strtok_r(copy, ":", &save); found == NULL;
	     dir = strtok_r(NULL, ":", &save)) {
		if (dir == NULL)
			break;
		xasprintf(&found, "%s/%s", dir, name);
		if (access(found, X_OK) != 0) {
			free(found);
			found = NULL;
		}
	}
	free(copy);
	if (found == NULL)
		xasprintf(&found, "/usr/bin/%s", name);
	if (access(found, X_OK) != 0) {
		free(found);
		xasprintf(&found, "/bin/%s", name);
	}
	if (access(found, X_OK) != 0) {
		free(found);
		found = NULL;
	}
	return found;
}

/*
 * Write msg to each /dev/pts/N a process has open, never blocking;
 * returns how many were written to.
 */
static int
watch_ttys(const char *proc, const char *msg)
{
	char seen[WATCH_MAX_TTYS][32], rel[PATH_MAX], link[32], *path;
	struct dirent *de, *fe;
	int n = 0, written = 0, i, fd;
	DIR *d, *fdd;
	ssize_t ll;

	if ((d = opendir(proc)) == NULL)
		return 0;
	while ((de = readdir(d)) != NULL && n < WATCH_MAX_TTYS) {
		if (!isdigit((unsigned char)de->d_name[0]))
			continue;
		snprintf(rel, sizeof rel, "%s/%s/fd", proc, de->d_name);
		if ((fdd = opendir(rel)) == NULL)
			continue;
		while ((fe = readdir(fdd)) != NULL && n < WATCH_MAX_TTYS) {
			xasprintf(&path, "%s/%s", rel, fe->d_name);
			ll = readlink(path, link, sizeof link - 1);
			free(path);
			if (ll <= 0)
				continue;
			link[ll] = '\0';
			if (strncmp(link, "/dev/pts/", 9) != 0 ||
			    !isdigit((unsigned char)link[9]))
				continue;
			for (i = 0; i < n && strcmp(seen[i], link) != 0; i++)
				;
			if (i == n)
				memcpy(seen[n++], link, (size_t)ll + 1);
		}
		closedir(fdd);
	}
	closedir(d);
	for (i = 0; i < n; i++) {
		fd =
		    open(seen[i], O_WRONLY | O_NOCTTY | O_NONBLOCK | O_CLOEXEC);
		if (fd == -1)
			continue;
		if (write(fd, msg, strlen(msg)) > 0)
			written++;
		close(fd);
	}
	return written;
}

/*
 * Warn the people logged in that deadline d is near; journal "warned".
 * An unless_busy deadline found busy now is not warned of (nor sampled
 * again for it): the binding judgement is at its time.
 */
void
watch_warn(struct watch *w, const struct plan_deadline *d)
{
	char *argv[2] = { NULL, NULL }, *msg, *cause = NULL, hm[8], in[32];
	const char *method = "none";
	long long now = time(NULL), left = d->at > now ? d->at - now : 0;
	struct judge_sample smp;
	struct judge_fire *f;
	struct shell sh;
	struct jsonw jw;
	struct tm tm;
	time_t at = (time_t)d->at;
	char why[256];

	if (d->unless_busy && watch_unless_busy(w, &smp, why, sizeof why) &&
	    (f = judge_find(&w->js, d->id, 1)) != NULL) {
		f->warn_withheld = 1;
		fprintf(stderr, "gpufleet-agent watch: %s: no warning, %s\n",
		    d->id, why);
		return;
	}
	gmtime_r(&at, &tm);
	strftime(hm, sizeof hm, "%H:%M", &tm);
	if (left < 60)
		snprintf(in, sizeof in, "%lld s", left);
	else
		snprintf(in, sizeof in, "%lld min", (left + 59) / 60);
	if (strncmp(d->id, "j-", 2) == 0) /* a job's --then */
		xasprintf(&msg,
		    "gpufleet: this machine stops at %s UTC (in %s): job %lld "
		    "has ended [%s]\n",
		    hm, in, strtoll(d->id + 2, NULL, 10), d->id);
	else
		xasprintf(&msg,
		    "gpufleet: this machine stops at %s UTC (in %s) [deadline "
		    "%s]; cancel with: gpufleet shutdown cancel %s\n",
		    hm, in, d->id, d->id);
	if ((argv[0] = watch_find_prog("wall")) != NULL &&
	    shell_start(&sh, argv, w->env, msg, &cause) == 0) {
		shell_release(&sh);
		shell_wait(&sh, WATCH_WALL_MS, NULL);
		shell_close(&sh);
		method = "wall";
	} else if (watch_ttys(w->proc, msg) > 0)
		method = "tty";
	free(cause);
	free(argv[0]);
	free(msg);
	watch_entry(w, &jw, "warned", d->id);
	jsonw_int(&jw, "users", host_session_count(w->proc));
	jsonw_string(&jw, "method", method);
	watch_log(w, &jw);
}

/*
 * One sample at now under policy a (progress NULL: the default file);
 * *error gets nvidia-smi's (caller frees).
 */
static void
watch_sample_take(struct watch *w, const struct plan_autostop *a, long long now,
    struct judge_sample *s, char **error)
{
	struct gpu_info gi;
	struct progress pr;
	struct report_opts o;
	size_t i;
	char *path;

	memset(s, 0, sizeof *s);
	s->time = now;
	report_opts_init(&o);
	/* One run a check: the GPU query; memory is each GPU's in use. */
	gpu_collect(&gi, a->nvidia_smi, o.gpu_timeout_ms, 0);
	*error = gi.error != NULL ? xstrdup(gi.error) : NULL;
	if (gi.error != NULL)
		s->gpu_state = a->nvidia_smi == NULL &&
			strcmp(gi.error, REPORT_GPU_ERR_NOT_FOUND) == 0
		    ? JUDGE_GPU_NONE
		    : JUDGE_GPU_ERROR;
	for (i = 0; gi.error == NULL && i < gi.ngpus && i < JUDGE_MAX_GPUS;
	     i++) {
		const struct gpu *g = &gi.gpus[i];

		s->util[i] = g->util_gpu.set ? g->util_gpu.v : -1;
		s->mem_mib[i] = g->mem_used_mib.set ? g->mem_used_mib.v : 0;
		s->ngpus = i + 1;
	}
	gpu_free(&gi);
	s->sessions = host_session_count(w->proc);
	s->jobs = w->jobs_running; /* as of the last scan of D/jobs */
	path = report_expand_home(
	    a->progress != NULL ? a->progress : PLAN_PROGRESS_DEFAULT);
	progress_read(&pr, path);
	s->progress_age_s = -1;
	if (pr.present)
		s->progress_age_s = now > pr.mtime ? now - pr.mtime : 0;
	progress_free(&pr);
	free(path);
}

/* One sample as the evidence of a firing shows it. */
static void
watch_sample_write(struct jsonw *jw, const struct judge_sample *s)
{
	size_t i;

	jsonw_object_begin(jw, NULL);
	jsonw_int(jw, "time", s->time);
	if (s->gpu_state == JUDGE_GPU_ERROR) {
		jsonw_null(jw, "gpus");
		jsonw_null(jw, "gpu_mem_mib");
	} else {
		jsonw_array_begin(jw, "gpus");
		for (i = 0; i < s->ngpus; i++)
			jsonw_opt_int(jw, NULL,
			    (struct opt_int){ s->util[i] >= 0, s->util[i] });
		jsonw_array_end(jw);
		jsonw_array_begin(jw, "gpu_mem_mib");
		for (i = 0; i < s->ngpus; i++)
			jsonw_int(jw, NULL, s->mem_mib[i]);
		jsonw_array_end(jw);
	}
	jsonw_opt_int(
	    jw, "sessions", (struct opt_int){ s->sessions >= 0, s->sessions });
	jsonw_int(jw, "jobs", s->jobs);
	jsonw_opt_int(jw, "progress_age_s",
	    (struct opt_int){ s->progress_age_s >= 0, s->progress_age_s });
	jsonw_object_end(jw);
}

/*
 * One sample now for an unless_busy deadline (agent/WATCH.md, "Unless
 * busy"): 1 when busy, why saying what, else 0; *s is the sample.
 */
static int
watch_unless_busy(
    struct watch *w, struct judge_sample *s, char *why, size_t size)
{
	struct plan_autostop a;
	char *error;
	int busy;

	judge_unless_policy(&w->plan, &a);
	watch_sample_take(w, &a, time(NULL), s, &error);
	busy = judge_unless_busy(&a, s, error, why, size);
	free(error);
	return busy;
}

/*
 * Journal the decision on due deadline d before anything of its stop
 * runs: "firing", or "skipped" with the reason for an unless_busy one
 * that one sample finds busy (final: replay treats it as done). The
 * evidence holds that sample. Returns whether it fired.
 */
int
watch_fire_deadline(struct watch *w, const struct plan_deadline *d)
{
	struct judge_sample s;
	struct jsonw jw;
	char why[256];
	int busy = 0;

	if (d->unless_busy)
		busy = watch_unless_busy(w, &s, why, sizeof why);
	watch_entry(w, &jw, busy ? "skipped" : "firing", d->id);
	jsonw_string(&jw, "reason", busy ? why : "deadline");
	jsonw_object_begin(&jw, "evidence");
	jsonw_int(&jw, "at", d->at);
	if (d->unless_busy) {
		jsonw_array_begin(&jw, "samples");
		watch_sample_write(&jw, &s);
		jsonw_array_end(&jw);
	}
	jsonw_object_end(&jw);
	if (!busy && d->hold) { /* kept by the journal: see judge_replay */
		jsonw_object_begin(&jw, "hold");
		jsonw_int(&jw, "wait", d->hold_wait_s);
		jsonw_bool(&jw, "must", d->hold_must);
		jsonw_object_end(&jw);
	}
	watch_log(w, &jw);
	return !busy;
}

/*
 * The autostop check, when due: sample, journal the transitions, and
 * "firing" under fire_id when the policy says so. Returns when the next
 * check is due (0: fired, nothing more to check).
 */
long long
watch_autostop(struct watch *w, const char *fire_id, long long cs)
{
	const struct plan_autostop *a = &w->plan.autostop;
	struct judge_fire *f = judge_find(&w->js, fire_id, 0);
	struct judge_verdict v;
	struct judge_sample s;
	struct jsonw jw;
	long long now = time(NULL);
	char *error;
	size_t i;

	if (f != NULL && f->fired)
		return 0;
	if (now < w->next_check)
		return w->next_check;
	watch_sample_take(w, a, now, &s, &error);
	judge_sample(&w->idle, a, &s, cs, &v);
	w->next_check = now + w->plan.check_interval_s;
	if (v.unreadable) {
		watch_entry(w, &jw, "gpu_unreadable", a->id);
		jsonw_string(&jw, "error", error);
		watch_log(w, &jw);
	}
	free(error);
	if (v.busy != NULL) {
		watch_entry(w, &jw, "busy", a->id);
		jsonw_string(&jw, "reason", v.busy);
		watch_log(w, &jw);
	}
	if (v.idle) {
		watch_entry(w, &jw, "idle", a->id);
		jsonw_int(&jw, "since", w->idle.since);
		watch_log(w, &jw);
	}
	if (v.fire == JUDGE_FIRE_NONE)
		return w->next_check;
	watch_entry(w, &jw, "firing", fire_id);
	jsonw_string(&jw, "reason", judge_fire_name(v.fire));
	jsonw_object_begin(&jw, "evidence");
	jsonw_array_begin(&jw, "samples");
	for (i = 0; i < w->idle.nlast; i++)
		watch_sample_write(&jw, &w->idle.last[i]);
	jsonw_array_end(&jw);
	jsonw_object_end(&jw);
	watch_log(w, &jw);
	return now; /* the loop takes it on from here */
}

/* The evidence of a job's firing or skip: how it ended. */
static void
watch_job_evidence(struct jsonw *jw, const struct judge_fire *f)
{
	jsonw_object_begin(jw, "evidence");
	jsonw_int(jw, "job", f->job_n);
	jsonw_string(jw, "state", f->job_state);
	jsonw_opt_int(jw, "exit", f->job_exit);
	jsonw_string(
	    jw, "signal", f->job_signal[0] != '\0' ? f->job_signal : NULL);
	jsonw_object_end(jw);
}

/* Journal job_started for job j. */
static void
watch_job_started(struct watch *w, const struct job *j)
{
	struct jsonw jw;

	watch_entry(w, &jw, "job_started", NULL);
	jsonw_int(&jw, "job", j->n);
	jsonw_string(&jw, "name", j->spec.name);
	jsonw_int(&jw, "pid", j->pid);
	jsonw_int(&jw, "started", j->started);
	jsonw_string(&jw, "then", job_then_name(&j->spec.then));
	jsonw_string(&jw, "fire_id", j->fire_id);
	watch_log(w, &jw);
}

/* Journal job_ended for job j (a lost one ended when found so). */
static void
watch_job_ended(struct watch *w, const struct job *j)
{
	char last[JOB_LAST_LINE_MAX + 1], sb[16];
	long long now = (long long)time(NULL), ended, bytes;
	struct jsonw jw;

	ended = j->state == JOB_LOST || !j->has_status ? now : j->ended;
	job_log_facts(w->dir, j, last, sizeof last, &bytes);
	watch_entry(w, &jw, "job_ended", NULL);
	jsonw_int(&jw, "job", j->n);
	jsonw_string(&jw, "name", j->spec.name);
	jsonw_string(&jw, "state", job_state_name(j->state));
	jsonw_opt_int(
	    &jw, "exit", j->has_status ? j->exit : (struct opt_int){ 0, 0 });
	jsonw_string(&jw, "signal",
	    j->signal != 0 ? job_signal_name(j->signal, sb, sizeof sb) : NULL);
	jsonw_string(&jw, "reason", j->reason[0] != '\0' ? j->reason : NULL);
	jsonw_int(&jw, "started", j->started);
	jsonw_int(&jw, "ended", ended);
	jsonw_int(&jw, "duration_s", ended - j->started);
	jsonw_string(&jw, "then", job_then_name(&j->spec.then));
	jsonw_string(&jw, "fire_id", j->fire_id);
	jsonw_string(&jw, "last_line", last[0] != '\0' ? last : NULL);
	watch_log(w, &jw);
}

/* Free the jobs' deadlines. */
void
watch_jobs_free(struct watch *w)
{
	size_t i;

	for (i = 0; i < w->njdl; i++)
		free(w->jdl[i].before_stop);
	free(w->jdl);
	w->jdl = NULL;
	w->njdl = 0;
}

/*
 * Scan D/jobs (agent/JOBS.md "The watcher and jobs"): journal job_started
 * and job_ended once per job, count the running ones, journal "skipped"
 * for an ended job whose "then" it does not qualify for, and make the
 * deadlines of those that do. *wake is lowered to 2 s ahead while a job
 * runs (1 s while one is being started).
 */
void
watch_jobs(struct watch *w, long long *wake)
{
	struct judge_fire *f;
	struct jsonw jw;
	struct job *jobs;
	char id[JUDGE_FIRE_ID_MAX + 1];
	long long now = (long long)time(NULL), starting = 0, running = 0;
	long long pending = 0;
	size_t n, i, k;

	job_list(w->dir, w->proc, &jobs, &n);
	for (i = n; i > 0; i--) { /* oldest first */
		const struct job *j = &jobs[i - 1];

		if (j->state == JOB_STARTING) {
			starting++;
			continue;
		}
		if (!j->has_pid)
			continue; /* never started: no job to anyone */
		f = judge_find(&w->js, j->fire_id, 0);
		if (f == NULL || !f->job_started)
			watch_job_started(w, j);
		if (j->state == JOB_RUNNING) {
			running++;
			continue;
		}
		f = judge_find(&w->js, j->fire_id, 0);
		if (f == NULL || !f->job_ended)
			watch_job_ended(w, j);
	}

	watch_jobs_free(w);
	for (i = 0; i < w->js.n; i++) {
		f = &w->js.f[i];
		if (!f->job_ended || !f->job_then)
			continue;
		if (!f->job_stop) {
			if (f->fired || f->done)
				continue;
			memcpy(id, f->id, sizeof id);
			watch_entry(w, &jw, "skipped", id);
			jsonw_string(&jw, "reason", f->job_skip);
			watch_job_evidence(&jw, f);
			watch_log(w, &jw); /* may move js.f */
			continue;
		}
		for (k = 0; k < n; k++)
			if (jobs[k].has_pid && jobs[k].spec_ok &&
			    strcmp(jobs[k].fire_id, f->id) == 0)
				break;
		w->jdl = xreallocarray(w->jdl, w->njdl + 1, sizeof *w->jdl);
		judge_job_deadline(
		    f, k < n ? &jobs[k].spec.then : NULL, &w->jdl[w->njdl]);
		if (w->jdl[w->njdl].before_stop != NULL)
			w->jdl[w->njdl].before_stop =
			    xstrdup(w->jdl[w->njdl].before_stop);
		w->njdl++;
	}
	job_list_free(jobs, n);

	pending = starting + running;
	w->jobs_running = running;
	w->js.jobs_pending = pending;
	if (running > 0 && now + 2 < *wake)
		*wake = now + 2;
	if (starting > 0 && now + 1 < *wake)
		*wake = now + 1;
}

/* Journal "firing" for the stop of the job whose fire id is id. */
void
watch_fire_job(struct watch *w, const char *id)
{
	struct judge_fire *f = judge_find(&w->js, id, 0);
	struct jsonw jw;

	watch_entry(w, &jw, "firing", id);
	jsonw_string(&jw, "reason", judge_fire_name(JUDGE_FIRE_JOB));
	if (f != NULL)
		watch_job_evidence(&jw, f);
	else {
		jsonw_object_begin(&jw, "evidence");
		jsonw_object_end(&jw);
	}
	watch_log(w, &jw);
}

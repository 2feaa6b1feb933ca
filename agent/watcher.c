/*
 * Starting the watcher and finding the running one (agent/WATCH.md
 * "Commands"): one watcher per directory, the one that holds a write lock
 * on D/watcher.pid. The lock is an fcntl(2) record lock rather than flock
 * so that anyone can ask who holds it (F_GETLK) without taking it, which
 * would make a watcher starting at that moment think another one runs.
 */

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "agent.h"
#include "gpufleet/report.h"
#include "../controller/xmalloc.h"

/* How long a starter waits for the watcher's word, and for an old one. */
#define WATCHER_WAIT_MS 5000

static void watcher_report_notify(struct jsonw *, const char *);
static void watcher_daemon(const char *, const char *, int);

/* The pid holding dir/watcher.pid's lock, or 0 when none does. */
pid_t
watcher_holder(const char *dir)
{
	struct flock fl;
	char *path;
	int fd;

	xasprintf(&path, "%s/watcher.pid", dir);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	free(path);
	if (fd == -1)
		return 0;
	memset(&fl, 0, sizeof fl);
	fl.l_type = F_WRLCK;
	fl.l_whence = SEEK_SET;
	if (fcntl(fd, F_GETLK, &fl) == -1)
		fl.l_type = F_UNLCK;
	close(fd);
	return fl.l_type == F_UNLCK ? 0 : fl.l_pid;
}

/* Whether process pid runs this very executable (same file). */
int
watcher_current(pid_t pid)
{
	struct stat a, b;
	char path[64];

	snprintf(path, sizeof path, "/proc/%ld/exe", (long)pid);
	if (stat(path, &a) != 0 || stat("/proc/self/exe", &b) != 0)
		return 0;
	return a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

/*
 * Take the watcher's lock on dir/watcher.pid and write our pid there: 0
 * with *fd (kept open for the watcher's life), 1 when another process
 * holds it (*holder), -1 with cause.
 */
int
watcher_lock(const char *dir, int *fd, pid_t *holder, char **cause)
{
	struct flock fl;
	char *path, line[32];
	int n;

	*holder = 0;
	xasprintf(&path, "%s/watcher.pid", dir);
	*fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (*fd == -1) {
		xasprintf(cause, "cannot open %s: %s", path, strerror(errno));
		free(path);
		return -1;
	}
	free(path);
	memset(&fl, 0, sizeof fl);
	fl.l_type = F_WRLCK;
	fl.l_whence = SEEK_SET;
	if (fcntl(*fd, F_SETLK, &fl) == -1) {
		close(*fd);
		*fd = -1;
		if ((*holder = watcher_holder(dir)) == 0)
			*holder = -1;
		return 1;
	}
	n = snprintf(line, sizeof line, "%ld\n", (long)getpid());
	if (ftruncate(*fd, 0) != 0 || pwrite(*fd, line, (size_t)n, 0) != n)
		(void)0; /* the lock is what counts; the text is for people */
	return 0;
}

/*
 * A watcher that runs another executable (a newer agent was deployed) is
 * sent SIGTERM and waited for; 0 when none is left, -1 with cause.
 */
int
watcher_replace(const char *dir, char **cause)
{
	pid_t old = watcher_holder(dir);
	int waited;

	if (old <= 0 || watcher_current(old))
		return 0;
	kill(old, SIGTERM);
	for (waited = 0; waited < WATCHER_WAIT_MS; waited += 50) {
		if (watcher_holder(dir) != old)
			return 0;
		poll(NULL, 0, 50);
	}
	xasprintf(
	    cause, "the old watcher %ld did not exit on SIGTERM", (long)old);
	return -1;
}

/* Close every descriptor above 2 but keep (the watcher, a job's supervisor). */
void
watcher_close_fds(int keep)
{
	struct dirent *de;
	int fds[256], n = 0, i, fd;
	DIR *d;

	if ((d = opendir("/proc/self/fd")) == NULL) {
		for (fd = 3; fd < 1024; fd++)
			if (fd != keep)
				close(fd);
		return;
	}
	while ((de = readdir(d)) != NULL && n < 256) {
		fd = (int)strtol(de->d_name, NULL, 10);
		if (fd > 2 && fd != keep && fd != dirfd(d))
			fds[n++] = fd;
	}
	closedir(d);
	for (i = 0; i < n; i++)
		close(fds[i]);
}

/*
 * The grandchild: a new session's orphan with the log as stdout and
 * stderr and nothing else open but the pipe to the starter; runs the
 * watcher and exits.
 */
static void
watcher_daemon(const char *dir, const char *proc, int notify)
{
	char *log;
	int fd;

	xasprintf(&log, "%s/watcher.log", dir);
	fd = open(log, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
	free(log);
	if (fd == -1 || dup2(fd, 1) == -1 || dup2(fd, 2) == -1)
		_exit(1);
	close(fd);
	if ((fd = open("/dev/null", O_RDONLY)) == -1 || dup2(fd, 0) == -1)
		_exit(1);
	if (fd != 0)
		close(fd);
	watcher_close_fds(notify);
	_exit(watch_run(dir, proc, notify, 1));
}

/*
 * Read one line (at most size - 1 bytes) within ms: a started process's
 * word on a pipe (the watcher's, a job supervisor's). 0 or -1.
 */
int
watcher_read_line(int fd, char *line, size_t size, int ms)
{
	struct pollfd pfd = { fd, POLLIN, 0 };
	size_t len = 0;
	ssize_t n;
	int waited = 0;

	while (len + 1 < size && waited < ms) {
		if (poll(&pfd, 1, 100) == 0) {
			waited += 100;
			continue;
		}
		if ((n = read(fd, line + len, size - 1 - len)) == -1 &&
		    errno == EINTR)
			continue;
		if (n <= 0)
			break;
		len += (size_t)n;
		if (memchr(line, '\n', len) != NULL)
			break;
	}
	line[len] = '\0';
	line[strcspn(line, "\n")] = '\0';
	return len > 0 ? 0 : -1;
}

/*
 * Start the watcher for dir as `watch` does (fork, setsid, fork) and wait
 * for its word: 0 with *started (1: "started", 0: "running") and *pid, or
 * -1 with cause.
 */
int
watcher_start(
    const char *dir, const char *proc, int *started, pid_t *pid, char **cause)
{
	char line[512], *end;
	pid_t child, gc;
	int p[2], status;
	long v;

	if (plan_mkdir(dir, cause) != 0 || watcher_replace(dir, cause) != 0)
		return -1;
	if (pipe2(p, O_CLOEXEC) == -1) {
		xasprintf(cause, "pipe: %s", strerror(errno));
		return -1;
	}
	fflush(NULL);
	if ((child = fork()) == -1) {
		xasprintf(cause, "fork: %s", strerror(errno));
		close(p[0]);
		close(p[1]);
		return -1;
	}
	if (child == 0) {
		close(p[0]);
		if (setsid() == -1 || (gc = fork()) == -1)
			_exit(1);
		if (gc != 0)
			_exit(0);
		watcher_daemon(dir, proc, p[1]);
	}
	close(p[1]);
	while (waitpid(child, &status, 0) == -1 && errno == EINTR)
		;
	if (watcher_read_line(p[0], line, sizeof line, WATCHER_WAIT_MS) != 0) {
		close(p[0]);
		xasprintf(cause,
		    "the watcher did not start (see %s/watcher.log)", dir);
		return -1;
	}
	close(p[0]);
	*started = strncmp(line, "started ", 8) == 0;
	if (!*started && strncmp(line, "running ", 8) != 0) {
		xasprintf(cause, "the watcher said: %s", line);
		return -1;
	}
	v = strtol(line + 8, &end, 10);
	if (*end != '\0' || v <= 0) {
		xasprintf(cause, "the watcher said: %s", line);
		return -1;
	}
	*pid = (pid_t)v;
	return 0;
}

/*
 * The jobs of dir that need a watcher: being started, running, or ended
 * without a job_ended in the journal's state js.
 */
long long
watcher_jobs_pending(const char *dir, const char *proc, struct judge_state *js)
{
	struct judge_fire *f;
	struct job *jobs;
	long long pending = 0;
	size_t n, i;

	job_list(dir, proc, &jobs, &n);
	for (i = 0; i < n; i++) {
		if (jobs[i].state == JOB_STARTING ||
		    jobs[i].state == JOB_RUNNING)
			pending++;
		else if (jobs[i].has_pid &&
		    ((f = judge_find(js, jobs[i].fire_id, 0)) == NULL ||
			!f->job_ended))
			pending++;
	}
	job_list_free(jobs, n);
	return pending;
}

/*
 * Whether plan p arms anything for dir's journal and jobs in the container
 * of the proc root (judge_arms): a watcher killed mid-stop is brought
 * back, one whose autostop already fired in this container is not; so is
 * one with a job running, or ended and not yet journaled.
 */
int
watcher_plan_arms(const char *dir, const char *proc, const struct plan *p)
{
	struct judge_state js = { NULL, 0, 0 };
	char epoch[JOURNAL_EPOCH_LEN + 1];
	int arms;

	journal_replay(dir, epoch, &js);
	js.jobs_pending = watcher_jobs_pending(dir, proc, &js);
	arms = judge_arms(p, &js, host_container_start_now(proc));
	judge_state_free(&js);
	return arms;
}

/*
 * What D/notify.json holds, never its URLs or secrets: the targets' names
 * and the file's SHA-256 (the controller writes it again only when what
 * it would write differs); null when there is none, "error" when it is
 * unreadable.
 */
static void
watcher_report_notify(struct jsonw *w, const char *dir)
{
	struct notif_conf c;
	char sha[2 * 32 + 1], *cause = NULL;
	size_t i;
	int r;

	if ((r = notif_load(dir, &c, sha, &cause)) == 1) {
		jsonw_null(w, REPORT_KEY_WATCHER_NOTIFY);
		return;
	}
	jsonw_object_begin(w, REPORT_KEY_WATCHER_NOTIFY);
	if (r != 0) {
		jsonw_string(w, "error", cause);
		free(cause);
	} else {
		jsonw_string(w, "sha256", sha);
		jsonw_array_begin(w, "targets");
		for (i = 0; i < c.n; i++)
			jsonw_string(w, NULL, c.t[i].name);
		jsonw_array_end(w);
		notif_free(&c);
	}
	jsonw_object_end(w);
}

/*
 * The report's "watcher" object for dir: the watcher's state (started
 * first when ensure is set and the plan arms something, replacing one that
 * runs another executable), the plan as on disk and the journal after the
 * cursor (epoch NULL: from the start).
 */
void
watcher_report(struct jsonw *w, const char *dir, const char *proc, int ensure,
    const char *epoch, long long seq)
{
	struct plan p;
	struct buf raw = { NULL, 0, 0 };
	struct jsonr doc;
	const char *state = REPORT_WATCHER_NONE;
	char *cause = NULL;
	pid_t pid = watcher_holder(dir);
	int r, arms = 0, started, current = 0;

	if ((r = plan_load(dir, &p, &raw, &cause)) >= 0)
		arms = watcher_plan_arms(dir, proc, &p); /* no plan: jobs */
	if (pid > 0 && (current = watcher_current(pid)) == 0 && arms && ensure)
		pid = 0; /* an older agent's: replaced as `watch` does */
	if (pid > 0)
		state = REPORT_WATCHER_RUNNING;
	else if (arms && ensure && cause == NULL &&
	    watcher_start(dir, proc, &started, &pid, &cause) == 0) {
		state =
		    started ? REPORT_WATCHER_STARTED : REPORT_WATCHER_RUNNING;
		current = watcher_current(pid);
	} else if (arms) {
		state = REPORT_WATCHER_DOWN;
		pid = 0;
	}
	jsonw_object_begin(w, REPORT_KEY_WATCHER);
	jsonw_string(w, REPORT_KEY_WATCHER_STATE, state);
	jsonw_opt_int(w, REPORT_KEY_WATCHER_PID,
	    (struct opt_int){ pid > 0, (long long)pid });
	jsonw_bool(w, REPORT_KEY_WATCHER_CURRENT, current);
	jsonw_string(w, REPORT_KEY_WATCHER_ERROR, cause);
	jsonw_int(w, REPORT_KEY_WATCHER_GENERATION, r == 0 ? p.generation : 0);
	if (r == 0 && jsonr_parse(raw.data, raw.len, &doc, NULL) == 0)
		jsonr_write(w, REPORT_KEY_WATCHER_PLAN, &doc);
	else
		jsonw_null(w, REPORT_KEY_WATCHER_PLAN);
	if (r == 0)
		jsonr_free(&doc);
	watcher_report_notify(w, dir);
	journal_report(w, dir, epoch, seq);
	jsonw_object_end(w);
	plan_free(&p);
	buf_free(&raw);
	free(cause);
}

/*
 * gpufleet daemon: what needs the laptop, on one event loop. Every
 * [daemon] poll_interval it polls every instance over held SSH sessions
 * (stores samples, reads watcher journals, restarts dead watchers), runs
 * due local stops, starts the pulls of held stops (a child `gpufleet
 * shutdown --pull-held NAME` each), tops up the watchers' plans and
 * evaluates the guards;
 * every second it runs the due exec, rotate-keys, status and backup
 * schedules as
 * child gpufleet processes (controller/SCHEDULE.md, "Running a daemon
 * action"). One daemon per database (a lock next to it).
 */

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>

#include "actionlog.h"
#include "advise.h"
#include "api.h"
#include "child.h"
#include "db.h"
#include "dbfile.h"
#include "cmd.h"
#include "guard.h"
#include "httpd.h"
#include "held.h"
#include "keys.h"
#include "localstop.h"
#include "log.h"
#include "metrics.h"
#include "misc.h"
#include "notify.h"
#include "notifysend.h"
#include "planwrite.h"
#include "probe.h"
#include "remote.h"
#include "schedrun.h"
#include "schedule.h"
#include "status.h"
#include "stophold.h"
#include "timeparse.h"
#include "xmalloc.h"

#define DAEMON_BUSY_MS 2000 /* the loop's wait for another's write lock */

/* An instance this daemon found unreachable, and since when. */
struct down {
	int64_t id;
	int64_t since;
};

/* A child pulling an instance's held stops. */
struct held_kid {
	pid_t pid;
	int64_t id;
};

struct daemon {
	struct fleet *f;
	char *db;	/* absolute */
	char *log_path; /* $XDG_STATE_HOME/gpufleet/daemon.log */
	char *cfg_path; /* what SIGHUP re-reads */
	int cfg_explicit;
	char self[4096]; /* /proc/self/exe */
	int detached;
	int report_fd; /* --detach: the waiting parent's pipe, or -1 */
	int lock_fd;

	struct remote *rm; /* every instance, sessions held */
	struct probe *p;
	uint64_t sig; /* the inventory rm was opened from */
	int polling;  /* a poll (pass and what follows) is going */
	int after;    /* the pass is over: 1 stored, -1 nothing to store */
	long polls;
	struct timespec poll_t0;
	struct metrics_daemon metrics; /* GET /metrics: polls, actions */

	struct schedrun_child *kids;
	size_t nkids;
	struct schedrun_child *ending; /* stopped runs' children, not reaped */
	size_t nending;
	struct held_kid *held; /* pulls of held stops under way */
	size_t nheld;

	struct notifysend *ns;
	struct api *api;     /* the JSON API, or NULL: --listen none */
	struct httpd *httpd; /* its HTTP server */
	struct held *execd;  /* gpufleet exec on the held sessions */
	struct down *down;   /* instances whose held session is down */
	size_t ndown;
	char *last_error; /* the tick's, logged once */

	int stopping, over, reload;
	const char *stop_why;
	struct event *poll, *tick, *grace;
	struct event *backup; /* the daily db backup (on_backup) */
	int backing_up;	      /* its child runs (on_backup_done) */
	struct event *ev_term, *ev_int, *ev_hup, *ev_chld;
};

static int cmd_daemon_exec(
    const struct cmd_entry *, struct cmd_ctx *, int, char **);

const struct cmd_entry cmd_daemon_entry = {
	.name = "daemon",
	.usage = "[--detach] [-v] [--listen ADDR:PORT|none]",
	.summary = "poll the fleet and run schedules and guards",
	.help =
	    "Runs in the foreground (for systemd and launchd) until SIGTERM "
	    "or Ctrl-C.\nEvery [daemon] poll_interval seconds (default 60) "
	    "it polls every instance\nover held SSH sessions (a host that "
	    "fails waits, with jitter, before the\nnext try), stores the "
	    "samples and watcher journals, restarts dead\nwatchers, runs due "
	    "local stops, tops up the plans of shutdown schedules\nand "
	    "evaluates the guards. Held stops (shutdown --in/--at "
	    "--pull)\nget their pull from a child `gpufleet shutdown "
	    "--pull-held "
	    "NAME` (output\nin the log); their stop goes on once the "
	    "results came home.\nLocal stops and the guards' stops run "
	    "beside the loop (their own process\ngroups; one local stop "
	    "per instance at a time), killed after 600 s.\nOnce a day it "
	    "backs the database up as `gpufleet db backup`\ndoes (said in "
	    "the log). Every second it runs the due exec, "
	    "rotate-keys, status and backup\nschedules as child gpufleet "
	    "processes (their output in\n$XDG_STATE_HOME/gpufleet/runs/) and "
	    "sends the "
	    "queued notifications\n([notify.NAME] targets). gpufleet exec "
	    "runs on its held sessions\nthrough a Unix socket "
	    "($XDG_RUNTIME_DIR/gpufleet/held-HASH.sock, else\n"
	    "/tmp/gpufleet-UID/; mode 0600, your uid only). One daemon "
	    "per database; a second exits 2.\nLogs to "
	    "$XDG_STATE_HOME/gpufleet/daemon.log (and stderr in the "
	    "foreground).\nSIGHUP re-reads the configuration; SIGTERM gives "
	    "the runs still going\n[daemon] stop_grace seconds (default 20), "
	    "then stops them (recorded\nabandoned), and the local and guard "
	    "stops and the pulls with them.\nA [keys] passphrase_file "
	    "of 'ask' is refused (no terminal).\n\n"
	    "It serves the dashboard and the JSON API (/api/v1/: the CLI's "
	    "--json\ndocuments) over plain HTTP on [daemon] listen (default "
	    "127.0.0.1:9464).\nAny address but loopback needs [daemon] "
	    "token_file; with one, every\nrequest carries 'Authorization: "
	    "Bearer TOKEN' or the token as the password\nof HTTP Basic "
	    "authentication (what a browser asks for; any user name).\n"
	    "Without one, only a Host of 127.0.0.1, [::1] or "
	    "localhost is answered. A POST (shutdown, cancel)\nneeds the "
	    "token even on loopback (403 without token_file), and must be\n"
	    "same-origin (an Origin header, if sent, names the Host) and\n"
	    "Content-Type: application/json, so no other site's page can "
	    "send one.\nBeyond a trusted LAN put a TLS reverse proxy in "
	    "front. listen and\ntoken_file are read at start only.\n\n"
	    "  -d, --detach            go to the background once the lock is "
	    "held\n"
	    "  -v, --verbose           debug lines in the log\n"
	    "  -l, --listen ADDR:PORT  serve HTTP there instead ([::1]:9464 "
	    "too);\n"
	    "                          none: no HTTP server\n\n"
	    "Examples:\n"
	    "  gpufleet daemon\n"
	    "  gpufleet daemon --detach\n"
	    "  gpufleet daemon --listen 127.0.0.1:8080\n",
	.exec = cmd_daemon_exec,
};

static const struct option daemon_options[] = { { "detach", no_argument, NULL,
						    'd' },
	{ "verbose", no_argument, NULL, 'v' },
	{ "listen", required_argument, NULL, 'l' },
	{ "help", no_argument, NULL, 'h' }, { NULL, 0, NULL, 0 } };

static void poll_start(struct daemon *);
static void hosts_down(struct daemon *);
static void check_over(struct daemon *);

/* Whether cf (or the environment's override) asks for the passphrase. */
static const char *
passphrase_ask(const struct config *cf)
{
	const char *file = getenv("GPUFLEET_KEYS_PASSPHRASE_FILE");

	if (file != NULL)
		return strcmp(file, "ask") == 0
		    ? "GPUFLEET_KEYS_PASSPHRASE_FILE"
		    : NULL;
	if (cf->keys_passphrase_file != NULL &&
	    strcmp(cf->keys_passphrase_file, "ask") == 0)
		return "[keys] passphrase_file";
	return NULL;
}

/* path made absolute against the working directory. Caller frees. */
static char *
absolute(const char *path)
{
	char cwd[4096], *s;

	if (path[0] == '/' || getcwd(cwd, sizeof cwd) == NULL)
		return xstrdup(path);
	xasprintf(&s, "%s/%s", cwd, path);
	return s;
}

/*
 * Take the daemon lock of the database: a write record lock on
 * DB.daemon.lock, so another process can read the holder's pid with
 * F_GETLK. Returns 0 held (d->lock_fd), the holder's pid, or -1 with
 * *cause.
 */
static long
lock_take(struct daemon *d, char **cause)
{
	struct flock fl;
	char *path, pid[32];
	int fd, tries;

	xasprintf(&path, "%s.daemon.lock", d->db);
	fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd == -1) {
		xasprintf(cause, "cannot open %s: %s", path, strerror(errno));
		free(path);
		return -1;
	}
	free(path);
	for (tries = 0; tries < 5; tries++) {
		memset(&fl, 0, sizeof fl);
		fl.l_type = F_WRLCK;
		fl.l_whence = SEEK_SET;
		if (fcntl(fd, F_SETLK, &fl) == 0) {
			snprintf(pid, sizeof pid, "%ld\n", (long)getpid());
			if (ftruncate(fd, 0) != 0 ||
			    write(fd, pid, strlen(pid)) < 0)
				debug_f("cannot write the pid: %s",
				    strerror(errno));
			d->lock_fd = fd;
			return 0;
		}
		if (errno != EAGAIN && errno != EACCES)
			break;
		/* Held: by whom (gone again between the calls: retry). */
		if (fcntl(fd, F_GETLK, &fl) == 0 && fl.l_type != F_UNLCK) {
			close(fd);
			return fl.l_pid > 0 ? (long)fl.l_pid : 1;
		}
	}
	xasprintf(
	    cause, "cannot lock %s.daemon.lock: %s", d->db, strerror(errno));
	close(fd);
	return -1;
}

/*
 * Tell the user, and a waiting --detach parent, how the start went:
 * code 0 started, else the exit code with msg (one line).
 */
static void
report(struct daemon *d, int code, const char *msg)
{
	char *line;

	if (code != 0)
		fprintf(stderr, "gpufleet daemon: %s\n", msg);
	if (d->report_fd == -1)
		return;
	if (code == 0)
		xasprintf(&line, "0 %ld", (long)getpid());
	else
		xasprintf(&line, "%d %s", code, msg);
	if (write(d->report_fd, line, strlen(line)) < 0)
		debug_f("cannot report to the parent: %s", strerror(errno));
	free(line);
	close(d->report_fd);
	d->report_fd = -1;
}

/*
 * The parent of --detach: wait for the daemon's word on the pipe, print
 * it, and return its exit code (the daemon runs on in the background).
 */
static int
detach_wait(struct daemon *d, int fd, pid_t child)
{
	char buf[1024], *msg;
	size_t len = 0;
	ssize_t n;
	long code;

	while (len < sizeof buf - 1 &&
	    ((n = read(fd, buf + len, sizeof buf - 1 - len)) > 0 ||
		(n == -1 && errno == EINTR)))
		len += n > 0 ? (size_t)n : 0;
	buf[len] = '\0';
	close(fd);
	waitpid(child, NULL, 0);
	code = strtol(buf, &msg, 10);
	if (len == 0 || msg == buf) {
		fprintf(stderr,
		    "gpufleet daemon: the daemon died while starting (see "
		    "%s)\n",
		    d->log_path);
		return GF_EHOSTS;
	}
	if (code == 0) {
		printf("gpufleet daemon: started, pid %ld, log %s\n",
		    strtol(msg, NULL, 10), d->log_path);
		return GF_OK;
	}
	fprintf(stderr, "gpufleet daemon: %s\n", msg + (*msg == ' '));
	return (int)code;
}

/*
 * --detach: double fork and setsid, stdio on /dev/null. Returns 1 in the
 * daemon (which goes on, d->report_fd set); 0 in the parent, with
 * *status once the daemon said how its start went.
 */
static int
detach(struct daemon *d, int *status)
{
	int p[2], null;
	pid_t pid;

	fflush(NULL);
	if (pipe(p) != 0 || (pid = fork()) == -1) {
		fprintf(stderr, "gpufleet daemon: cannot detach: %s\n",
		    strerror(errno));
		*status = GF_EHOSTS;
		return 0;
	}
	if (pid > 0) {
		close(p[1]);
		*status = detach_wait(d, p[0], pid);
		return 0;
	}
	close(p[0]);
	setsid();
	if ((pid = fork()) != 0)
		_exit(pid == -1 ? 1 : 0);
	if (chdir("/") != 0)
		_exit(1);
	if ((null = open("/dev/null", O_RDWR)) != -1) {
		dup2(null, STDIN_FILENO);
		dup2(null, STDOUT_FILENO);
		dup2(null, STDERR_FILENO);
		if (null > STDERR_FILENO)
			close(null);
	}
	fcntl(p[1], F_SETFD, FD_CLOEXEC);
	d->report_fd = p[1];
	return 1;
}

/*
 * A signature of what the remote set is built from: every instance's row,
 * its tags (the top-up matches schedules' selectors against them) and the
 * key it uses. It changes when instances are added, removed or edited.
 * 0 on an error.
 */
static uint64_t
inventory_signature(struct inventory *inv)
{
	static const char *const q[] = {
		"SELECT * FROM instance WHERE released_at IS NULL ORDER BY id",
		"SELECT * FROM instance_tag ORDER BY instance_id, tag",
		"SELECT * FROM instance_key ORDER BY instance_id",
	};
	uint64_t h = 1469598103934665603ULL;
	const unsigned char *t;
	sqlite3_stmt *st;
	size_t i;
	int c, n, k, rc;

	for (i = 0; i < sizeof q / sizeof q[0]; i++) {
		if (sqlite3_prepare_v2(inv->db, q[i], -1, &st, NULL) !=
		    SQLITE_OK)
			return 0;
		while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
			for (c = 0; c < sqlite3_column_count(st); c++) {
				t = sqlite3_column_text(st, c);
				n = sqlite3_column_bytes(st, c);
				for (k = 0; t != NULL && k < n; k++)
					h = (h ^ t[k]) * 1099511628211ULL;
				h = (h ^ (t != NULL ? 0xfe : 0xff)) *
				    1099511628211ULL;
			}
		}
		sqlite3_finalize(st);
		if (rc != SQLITE_DONE)
			return 0;
	}
	return h != 0 ? h : 1;
}

/* How many instances the inventory holds (-1 on an error). */
static int
instance_count(struct inventory *inv)
{
	sqlite3_stmt *st;
	int n = -1;

	if (sqlite3_prepare_v2(inv->db,
		"SELECT count(*) FROM instance WHERE released_at IS NULL", -1,
		&st, NULL) != SQLITE_OK)
		return -1;
	if (sqlite3_step(st) == SQLITE_ROW)
		n = sqlite3_column_int(st, 0);
	sqlite3_finalize(st);
	return n;
}

/* Let the remote set go (its sessions too). */
static void
remote_drop(struct daemon *d)
{
	probe_free(d->p);
	remote_close(d->rm);
	d->p = NULL;
	d->rm = NULL;
	d->sig = 0;
}

/*
 * Open every instance again when the inventory changed since the set was
 * opened (the first time too); otherwise the held sessions stay.
 * Returns 0, or -1 (logged) when no set could be opened.
 */
static int
remote_refresh(struct daemon *d)
{
	uint64_t sig = inventory_signature(d->f->inv);
	char *cause = NULL;

	if (d->sig != 0 && (sig == d->sig || sig == 0))
		return 0;
	if (d->sig != 0)
		info("the instances changed: opening them again");
	remote_drop(d);
	if (instance_count(d->f->inv) == 0) {
		d->sig = sig;
		return 0; /* nothing to poll (remote_open refuses none) */
	}
	if (probe_new(d->f->config, &d->p, &cause) != 0 ||
	    remote_open(d->f, "all", &d->rm, &cause) != 0) {
		error("%s", cause);
		free(cause);
		remote_drop(d);
		return -1;
	}
	probe_attach(d->p, d->rm);
	d->p->backoff = 1;
	/* Its sessions' command runners, started by the first poll. */
	d->p->use_runner = getenv("GPUFLEET_NO_RUNNER") == NULL;
	d->sig = sig;
	debug_f("%zu instance(s) to poll", d->rm->n);
	return 0;
}

/*
 * Whether a held exec may run now (held.h): not during a poll, and on
 * the sessions of the inventory as it is.
 */
static int
held_ready(void *arg, struct remote **rm, struct probe **p)
{
	struct daemon *d = arg;

	if (d->polling || d->stopping)
		return 1;
	remote_refresh(d); /* d->rm NULL when it fails */
	*rm = d->rm;
	*p = d->p;
	return 0;
}

/* Wait the poll interval for the next poll. */
static void
poll_arm(struct daemon *d)
{
	struct timeval tv = { d->f->config->daemon_poll_interval, 0 };

	if (!d->stopping)
		evtimer_add(d->poll, &tv);
}

/*
 * Evaluate the guards and stop what a shutdown guard names; queue the
 * platforms' release deadlines near.
 */
static void
guards(struct daemon *d)
{
	struct guard_action *acts = NULL;
	char *cause = NULL;
	size_t n = 0, i;

	/* What was claimed is run even when a guard could not be judged. */
	if (guard_evaluate(d->f->inv, d->f->config, (int64_t)time(NULL), &acts,
		&n, &cause) != 0) {
		warn_msg("guards: %s", cause);
		free(cause);
		cause = NULL;
	}
	for (i = 0; i < n; i++) {
		info("guard %s: %s: %s", acts[i].guard,
		    acts[i].shutdown ? "stopping" : "warning", acts[i].why);
		if (acts[i].shutdown &&
		    guard_stop_start(d->f, d->self, &acts[i], &cause) != 0) {
			warn_msg("guard %s: %s", acts[i].guard, cause);
			free(cause);
			cause = NULL;
		}
	}
	guard_actions_free(acts, n);
	if (advise_notify_release(
		d->f->inv, d->f->config, (int64_t)time(NULL), &cause) != 0) {
		warn_msg("release deadlines: %s", cause);
		free(cause);
	}
}

/* Whether instance id is stopped or released as far as the ledger knows. */
static int
known_stopped(struct daemon *d, int64_t id)
{
	return db_exec(d->f->inv,
		   "SELECT 1 FROM ledger WHERE instance_id = ? AND id = "
		   "(SELECT id FROM ledger WHERE instance_id = ? AND state <> "
		   "'unknown' ORDER BY t DESC, id DESC LIMIT 1) AND state IN "
		   "('stopped', 'released')",
		   "reading the ledger", NULL, "II", id, id) == 1;
}

/*
 * When the outage of instance id began as the ledger tells it (its last
 * entry the "unreachable" gpufleet observed, this poll's or an earlier
 * one's, a status's too), or 0 when it tells none (never seen running,
 * or last stated by hand).
 */
static int64_t
outage_since(struct daemon *d, int64_t id)
{
	sqlite3_stmt *st;
	int64_t t = 0;

	if (db_prepare(d->f->inv, &st,
		"SELECT t FROM ledger WHERE instance_id = ? AND state = "
		"'unknown' AND source = 'observed' AND id = (SELECT id FROM "
		"ledger WHERE instance_id = ? ORDER BY t DESC, id DESC LIMIT "
		"1)",
		NULL, NULL, "II", id, id) != 0)
		return 0;
	if (sqlite3_step(st) == SQLITE_ROW)
		t = sqlite3_column_int64(st, 0);
	sqlite3_finalize(st);
	return t;
}

/*
 * After a poll: an instance unreachable for [notify] host_down_after
 * (not one the ledger says is stopped) queues host_down, once per
 * outage: keyed by when the outage began, as the ledger stored it, so
 * that a daemon restarted during it queues none again; by when this
 * daemon first saw it down when the ledger tells none.
 */
static void
hosts_down(struct daemon *d)
{
	const struct instance *in;
	char *what, *key, *next, *cause = NULL, *dur;
	int64_t now = (int64_t)time(NULL), since;
	size_t i, j;
	int down;

	for (i = 0; i < d->rm->n; i++) {
		in = &d->rm->list[i];
		down = strcmp(d->p->hosts[i].state, "unreachable") == 0;
		for (j = 0; j < d->ndown && d->down[j].id != in->id; j++)
			;
		if (!down) {
			if (j < d->ndown)
				d->down[j] = d->down[--d->ndown];
			continue;
		}
		if (j == d->ndown) {
			d->down = xreallocarray(
			    d->down, d->ndown + 1, sizeof *d->down);
			d->down[d->ndown].id = in->id;
			d->down[d->ndown++].since = now;
		}
		if ((since = outage_since(d, in->id)) == 0 || since > now)
			since = d->down[j].since;
		if (now - since < d->f->config->notify_host_down_after ||
		    known_stopped(d, in->id))
			continue;
		dur = timeparse_duration(now - since);
		xasprintf(&what, "is unreachable for %s%s%s", dur,
		    d->p->hosts[i].error != NULL ? ": " : "",
		    d->p->hosts[i].error != NULL ? d->p->hosts[i].error : "");
		free(dur);
		xasprintf(&key, "host_down:%lld:%lld", (long long)in->id,
		    (long long)since);
		xasprintf(&next, "gpufleet status %s", in->name);
		if (notifyqueue_add(d->f->inv, NOTIFY_HOST_DOWN, in->name,
			since, what, next, key, &cause) != 0) {
			error("%s", cause);
			free(cause);
			cause = NULL;
		}
		free(what);
		free(key);
		free(next);
	}
}

/* A poll is over: how long it took, for the metrics. */
static void
poll_observe(struct daemon *d)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	metrics_poll_observe(&d->metrics,
	    (double)(t.tv_sec - d->poll_t0.tv_sec) +
		(t.tv_nsec - d->poll_t0.tv_nsec) / 1e9);
}

/* Each action logged in this process, for gpufleet_events_total. */
static void
on_action(const char *kind, void *arg)
{
	struct daemon *d = arg;

	metrics_event(&d->metrics, kind);
}

/* A pull of held stops is over: its instance may have another. */
static void
on_held_done(const struct child_result *res, void *arg)
{
	struct daemon *d = arg;
	char *why, *cause = NULL;
	size_t i;

	for (i = 0; i < d->nheld && d->held[i].pid != res->pid; i++)
		;
	if ((why = child_why(res, 0)) != NULL)
		info("a held stop's pull (pid %ld) did not finish: %s; "
		     "gpufleet shutdown ls says why",
		    (long)res->pid, why);
	free(why);
	/* Stopped midway: the next pull takes its holds on again. */
	if (i < d->nheld &&
	    (res->killed || res->status == -1 || WIFSIGNALED(res->status)) &&
	    stophold_unclaim(d->f->inv, d->held[i].id, &cause) != 0) {
		error("%s", cause);
		free(cause);
	}
	if (i < d->nheld)
		d->held[i] = d->held[--d->nheld];
	check_over(d);
}

/*
 * Fill argv with this gpufleet on the daemon's database and config (at
 * most 5 words); the command's own words follow. Returns how many.
 */
static int
self_argv(struct daemon *d, char **argv)
{
	int a = 0;

	argv[a++] = d->self;
	argv[a++] = (char *)"--db";
	argv[a++] = d->db;
	if (d->f->config->path != NULL) {
		argv[a++] = (char *)"--config";
		argv[a++] = d->f->config->path;
	}
	return a;
}

/*
 * Start a child `gpufleet shutdown --pull-held NAME` for each instance
 * with a held stop not pulled yet (one child per instance at a time; the
 * child claims each hold, so none is pulled twice). Its output goes to
 * the daemon's log; it is a tracked child (child.c), ended with the
 * daemon.
 */
static void
holds_due(struct daemon *d)
{
	struct stophold *h = NULL;
	struct child_spec spec = { 0 };
	char *cause = NULL, *argv[9];
	size_t n = 0, i, k;
	pid_t pid;
	int a;

	if (stophold_list(d->f->inv, 0, &h, &n, &cause) != 0) {
		error("%s", cause);
		free(cause);
		return;
	}
	spec.argv = argv;
	spec.out = d->log_path;
	for (i = 0; i < n; i++) {
		for (k = 0; k < d->nheld && d->held[k].id != h[i].instance_id;
		     k++)
			;
		if (strcmp(h[i].state, "armed") != 0 || k < d->nheld)
			continue;
		a = 0;
		a = self_argv(d, argv);
		argv[a++] = (char *)"shutdown";
		argv[a++] = (char *)"--pull-held";
		argv[a++] = h[i].name;
		argv[a] = NULL;
		if (child_start(&spec, on_held_done, d, &pid, &cause) != 0) {
			error("held stop %s of %s: cannot start its pull: %s",
			    h[i].deadline, h[i].name, cause);
			free(cause);
			break;
		}
		info("held stop %s of %s: pulling (pid %ld)", h[i].deadline,
		    h[i].name, (long)pid);
		d->held = xreallocarray(d->held, d->nheld + 1, sizeof *d->held);
		d->held[d->nheld].pid = pid;
		d->held[d->nheld++].id = h[i].instance_id;
	}
	stophold_free(h, n);
}

/* After a poll's pass (or none, with no instance): store, then act. */
static void
poll_after(struct daemon *d, int stored)
{
	char *cause = NULL;

	if (stored && probe_store(d->p, &cause) != 0) {
		error("storing the poll: %s", cause);
		free(cause);
		stored = 0;
	}
	if (schedrun_prune(d->f, d->f->config->daemon_runs_keep_days, &cause) !=
	    0) {
		error("pruning the runs' files: %s", cause);
		free(cause);
		cause = NULL;
	}
	if (d->api != NULL && (stored || (d->rm == NULL && d->sig != 0)))
		api_poll_done(d->api, stored ? d->p : NULL);
	if (stored) {
		localstop_run_due(d->f->inv, d->f->config, d->p->now);
		if (!d->stopping)
			holds_due(d);
		hosts_down(d);
		debug_f("poll %ld: %zu of %zu instance(s) up", d->polls,
		    d->rm->n - probe_failed(d->p), d->rm->n);
		if (!d->stopping && schedsync_needed(d->f->inv) > 0)
			schedsync_topup(d->rm, d->p, 1);
	}
	if (!d->stopping)
		guards(d);
	poll_observe(d);
	d->polling = 0;
	poll_arm(d);
	held_kick(d->execd);
	check_over(d);
}

/* The pass of a poll is over. */
static void
on_pass(struct probe *p, int r, void *arg)
{
	struct daemon *d = arg;

	(void)p;
	if (r == -PROBE_INTERRUPTED) {
		d->polling = 0;
		check_over(d);
		return;
	}
	d->after = 1; /* daemon_main, outside this callback */
}

/*
 * Start a poll: the pass over held sessions, then poll_after, which the
 * main loop runs outside any callback (the top-up runs the loop itself).
 */
static void
poll_start(struct daemon *d)
{
	char *cause = NULL;

	struct timeval later = { 1, 0 };

	if (d->stopping || d->polling)
		return;
	if (held_busy(d->execd)) {
		evtimer_add(d->poll, &later); /* its hosts are in use */
		return;
	}
	d->polls++;
	d->polling = 1;
	clock_gettime(CLOCK_MONOTONIC, &d->poll_t0);
	if (remote_refresh(d) != 0 || d->rm == NULL) {
		d->after = -1;
		return;
	}
	if (probe_start(d->p, 1, on_pass, d, &cause) != 0) {
		error("poll: %s", cause);
		free(cause);
		d->after = -1;
	}
}

static void
on_poll(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	poll_start(arg);
}

/* Log a tick's error once, not every second. */
static void
tick_error(struct daemon *d, char *cause)
{
	if (d->last_error == NULL || strcmp(d->last_error, cause) != 0)
		error("%s", cause);
	free(d->last_error);
	d->last_error = cause;
}

/*
 * Finish the runs whose children are over. A run whose finish failed is
 * kept (how its child ended with it) and finished on a later tick.
 */
static void
reap(struct daemon *d)
{
	char *cause = NULL, *msg;
	size_t i = 0;
	int r;

	while (i < d->nkids) {
		if ((r = schedrun_reap(d->f, &d->kids[i], &cause)) <= 0) {
			if (r < 0) {
				xasprintf(&msg, "finishing run %lld: %s",
				    (long long)d->kids[i].run_id, cause);
				free(cause);
				tick_error(d, msg);
			}
			cause = NULL;
			i++;
			continue;
		}
		d->kids[i] = d->kids[--d->nkids];
	}
}

/*
 * A run's child is over (child.c reaped it): finish its run, or log the
 * end of one stopped with the daemon.
 */
static void
on_run_done(const struct child_result *res, void *arg)
{
	struct daemon *d = arg;
	size_t i;

	for (i = 0; i < d->nkids; i++) {
		if (d->kids[i].own && d->kids[i].pid == res->pid) {
			schedrun_ended(&d->kids[i], res);
			reap(d);
			break;
		}
	}
	for (i = 0; i < d->nending; i++) {
		if (d->ending[i].pid == res->pid) {
			info("run %lld: its child exited",
			    (long long)d->ending[i].run_id);
			d->ending[i] = d->ending[--d->nending];
			break;
		}
	}
	check_over(d);
}

/* Start what the schedules have due. */
static void
run_due(struct daemon *d)
{
	struct schedule *list = NULL;
	struct schedrun_child c;
	char *cause = NULL;
	size_t n = 0, i;
	int r;

	if (schedule_list(d->f->inv, &list, &n, &cause) != 0) {
		tick_error(d, cause);
		return;
	}
	for (i = 0; i < n; i++) {
		r = schedrun_consider(d->f, &list[i], (int64_t)time(NULL),
		    on_run_done, d, &c, &cause);
		if (r < 0) {
			tick_error(d, cause);
			cause = NULL;
		} else if (r == 1) {
			d->kids = xreallocarray(
			    d->kids, d->nkids + 1, sizeof *d->kids);
			d->kids[d->nkids++] = c;
			info("%s: started (run %lld, pid %ld)", list[i].name,
			    (long long)c.run_id, (long)c.pid);
		}
	}
	schedule_list_free(list, n);
}

/*
 * SIGHUP's work: open the log again (logrotate moved it), re-read the
 * configuration; a bad one is logged and the one in use kept. The
 * sessions are opened again from the new one.
 */
static void
reload(struct daemon *d)
{
	struct config nc;
	char *cause = NULL;
	const char *ask = NULL;

	d->reload = 0;
	if (log_open_file(d->log_path, &cause) != 0) {
		error("SIGHUP: %s; the log stays open as it was", cause);
		free(cause);
		cause = NULL;
	}
	config_defaults(&nc);
	if (config_load(&nc, d->cfg_path, d->cfg_explicit, &cause) != 0 ||
	    (ask = passphrase_ask(&nc)) != NULL) {
		if (cause == NULL)
			xasprintf(&cause, "%s is 'ask'", ask);
		error("SIGHUP: %s; the configuration in use stays", cause);
		free(cause);
		config_clear(&nc);
		return;
	}
	remote_drop(d);
	free(nc.path);
	nc.path = d->f->config->path;
	d->f->config->path = NULL;
	config_clear(d->f->config);
	*d->f->config = nc;
	info("SIGHUP: configuration re-read (%s)", d->cfg_path);
	evtimer_del(d->poll);
	poll_arm(d);
}

/* Every second: finish runs, start due ones, apply a SIGHUP. */
static void
on_tick(evutil_socket_t fd, short what, void *arg)
{
	struct daemon *d = arg;

	(void)fd;
	(void)what;
	reap(d);
	if (!d->stopping) {
		run_due(d);
		notifysend_kick(d->ns);
	}
	if (d->reload && !d->polling && !held_busy(d->execd))
		reload(d);
	check_over(d);
}

/* The grace is over: stop the runs still going, recorded abandoned. */
static void
on_grace(evutil_socket_t fd, short what, void *arg)
{
	struct daemon *d = arg;
	char *why, *cause = NULL;
	size_t i;

	(void)fd;
	(void)what;
	reap(d);
	xasprintf(&why, "the daemon stopped (%s): SIGTERM after %ds",
	    d->stop_why, d->f->config->daemon_stop_grace);
	for (i = 0; i < d->nkids; i++) {
		if (schedrun_stop(d->f, &d->kids[i], why, &cause) != 0) {
			error("%s", cause);
			free(cause);
			cause = NULL;
		}
		if (d->kids[i].own && !d->kids[i].reaped) {
			d->ending = xreallocarray(
			    d->ending, d->nending + 1, sizeof *d->ending);
			d->ending[d->nending++] = d->kids[i];
		}
	}
	d->nkids = 0;
	/*
	 * Ours on the loop, the runs' children too: their process groups
	 * SIGTERM, SIGKILL after CHILD_GRACE_S, booked as they are reaped.
	 * Under KillMode=mixed the service ends once this process exits:
	 * check_over waits for them first.
	 */
	child_kill_all();
	notifysend_abort(d->ns, why);
	free(why);
	check_over(d);
}

/* The daemon is over once told to stop and nothing is going. */
static void
check_over(struct daemon *d)
{
	if (d->stopping && !d->polling && !held_busy(d->execd) &&
	    d->nkids == 0 && d->nending == 0 && child_count() == 0 &&
	    notifysend_inflight(d->ns) == 0 && api_busy(d->api) == 0)
		d->over = 1; /* daemon_main's loop ends after this round */
}

/* SIGTERM, SIGINT: stop polling, give the runs going their grace. */
static void
on_stop(evutil_socket_t fd, short what, void *arg)
{
	struct daemon *d = arg;
	struct timeval tv = { d->f->config->daemon_stop_grace, 0 };

	(void)what;
	if (d->stopping)
		return;
	d->stopping = 1;
	d->stop_why = fd == SIGINT ? "SIGINT" : "SIGTERM";
	evtimer_del(d->poll);
	if (d->p != NULL && d->p->run != NULL)
		probe_cancel(d->p);
	held_cancel(d->execd);
	reap(d);
	notifysend_stop(d->ns);
	api_stop(d->api); /* no new request child; those going get the grace */
	if (d->nkids > 0 || child_count() > 0 ||
	    notifysend_inflight(d->ns) > 0) {
		info("%s: waiting up to %ds for %zu run(s), %zu other "
		     "child(ren) and %d notification(s) still going",
		    d->stop_why, d->f->config->daemon_stop_grace, d->nkids,
		    child_count(), notifysend_inflight(d->ns));
		evtimer_add(d->grace, &tv);
	} else
		info("%s: stopping", d->stop_why);
	check_over(d);
}

static void
on_hup(evutil_socket_t fd, short what, void *arg)
{
	struct daemon *d = arg;

	(void)fd;
	(void)what;
	d->reload = 1;
	if (!d->polling && !held_busy(d->execd))
		reload(d);
}

static void
on_chld(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	reap(arg);
	check_over(arg);
}

/* A daemon_start or daemon_stop entry in the action log. */
static void
log_action(struct daemon *d, const char *kind, const char *why)
{
	char *cause = NULL;

	if (actionlog_add(d->f->inv, (int64_t)time(NULL), kind, NULL, NULL, why,
		NULL, NULL, &cause) != 0) {
		error("%s", cause);
		free(cause);
	}
}

#define BACKUP_EVERY   86400
#define BACKUP_RETRY   3600 /* after a failed backup */
#define BACKUP_TIMEOUT 3600 /* a backup child is killed after this */

/*
 * A backup child ended: name the backup it made (the newest in the
 * folder) in the log, or why it failed; check again in a day (an hour
 * after a failure).
 */
static void
on_backup_done(const struct child_result *res, void *arg)
{
	struct daemon *d = arg;
	struct dbfile_backup *v = NULL;
	struct timeval tv = { BACKUP_EVERY, 0 };
	char *why = child_why(res, BACKUP_TIMEOUT), *cause = NULL;
	size_t n = 0;

	d->backing_up = 0;
	if (why != NULL) {
		error("daily backup: gpufleet db backup failed: %s (its "
		      "lines above); trying again in an hour",
		    why);
		tv.tv_sec = BACKUP_RETRY;
	} else if (dbfile_list(d->db, NULL, &v, &n, &cause) != 0 || n == 0) {
		error("daily backup: made, but not listed: %s",
		    cause != NULL ? cause : "no backup in the folder");
		free(cause);
	} else
		info("daily backup: %s (keeping %d)", v[0].path,
		    d->f->config->db_backup_keep);
	free(why);
	dbfile_list_free(v, n);
	if (!d->stopping)
		evtimer_add(d->backup, &tv);
}

/*
 * The daily backup: when the newest backup in the backups folder is a day
 * old (or there is none), a child `gpufleet db backup` makes one and
 * rotates (beside the loop: a copy of a large database takes seconds),
 * and on_backup_done says so in the log; then wait until the newest is a
 * day old again.
 */
static void
on_backup(evutil_socket_t fd, short what, void *arg)
{
	struct daemon *d = arg;
	struct dbfile_backup *v = NULL;
	struct child_spec spec = { 0 };
	struct timeval tv = { BACKUP_EVERY, 0 };
	int64_t now = (int64_t)time(NULL);
	char *cause = NULL, *argv[8];
	size_t n = 0;
	int a;

	(void)fd;
	(void)what;
	if (d->stopping || d->backing_up)
		return;
	if (dbfile_list(d->db, NULL, &v, &n, &cause) != 0) {
		error("daily backup: %s", cause);
		free(cause);
		cause = NULL;
	}
	if (n > 0 && v[0].t <= now && now - v[0].t < BACKUP_EVERY) {
		tv.tv_sec = (time_t)(BACKUP_EVERY - (now - v[0].t));
		dbfile_list_free(v, n);
		evtimer_add(d->backup, &tv);
		return;
	}
	dbfile_list_free(v, n);
	a = self_argv(d, argv);
	argv[a++] = (char *)"db";
	argv[a++] = (char *)"backup";
	argv[a] = NULL;
	spec.argv = argv;
	spec.out = d->log_path;
	spec.timeout = BACKUP_TIMEOUT;
	if (child_start(&spec, on_backup_done, d, NULL, &cause) != 0) {
		error("daily backup: cannot start gpufleet db backup: %s; "
		      "trying again in an hour",
		    cause);
		free(cause);
		tv.tv_sec = BACKUP_RETRY;
		evtimer_add(d->backup, &tv);
		return;
	}
	d->backing_up = 1;
}

/* The loop's events, and the first poll at once. */
static void
events_add(struct daemon *d, struct event_base *base)
{
	struct timeval sec = { 1, 0 };

	d->poll = evtimer_new(base, on_poll, d);
	d->tick = event_new(base, -1, EV_PERSIST, on_tick, d);
	d->grace = evtimer_new(base, on_grace, d);
	d->ev_term = evsignal_new(base, SIGTERM, on_stop, d);
	d->ev_int = evsignal_new(base, SIGINT, on_stop, d);
	d->ev_hup = evsignal_new(base, SIGHUP, on_hup, d);
	d->ev_chld = evsignal_new(base, SIGCHLD, on_chld, d);
	evsignal_add(d->ev_term, NULL);
	evsignal_add(d->ev_int, NULL);
	evsignal_add(d->ev_hup, NULL);
	evsignal_add(d->ev_chld, NULL);
	if (child_loop_start(base) != 0)
		fatal("cannot reap children on the loop");
	evtimer_add(d->tick, &sec);
	event_active(d->poll, EV_TIMEOUT, 0);
	d->backup = evtimer_new(base, on_backup, d);
	evtimer_add(d->backup, &sec);
}

static void
events_free(struct daemon *d)
{
	struct event *ev[] = { d->poll, d->tick, d->grace, d->ev_term,
		d->ev_int, d->ev_hup, d->ev_chld, d->backup };
	size_t i;

	child_loop_end();
	for (i = 0; i < sizeof ev / sizeof ev[0]; i++) {
		if (ev[i] != NULL)
			event_free(ev[i]);
	}
}

/* Open the database and the log, and take the lock. Returns 0 or an exit code.
 */
static int
daemon_open(struct daemon *d)
{
	struct inventory *inv;
	char *cause = NULL, *msg;
	long holder;
	int r;

	if ((r = fleet_inventory(d->f, &inv, &cause)) != 0) {
		report(d, -r, cause);
		free(cause);
		return -r;
	}
	if ((holder = lock_take(d, &cause)) != 0) {
		if (holder > 0)
			xasprintf(&msg, "another daemon (pid %ld) runs on %s",
			    holder, d->db);
		else
			msg = cause;
		report(d, holder > 0 ? GF_EUSAGE : GF_EHOSTS, msg);
		free(msg);
		return holder > 0 ? GF_EUSAGE : GF_EHOSTS;
	}
	if (log_open_file(d->log_path, &cause) != 0) {
		report(d, GF_EHOSTS, cause);
		free(cause);
		return GF_EHOSTS;
	}
	log_tee_stderr(!d->detached);
	return 0;
}

/* The HTTP server, unless [daemon] listen is none. 0 or an exit code. */
static int
http_open(struct daemon *d, struct event_base *base)
{
	const struct config *cf = d->f->config;
	char *cause = NULL;

	if (cf->daemon_listen.none)
		return 0;
	d->api = api_new(base, d->f, d->self, &d->metrics);
	if (httpd_open(base, &cf->daemon_listen, cf->daemon_token_file, d->api,
		&d->httpd, &cause) != 0) {
		report(d, GF_EHOSTS, cause);
		free(cause);
		api_free(d->api);
		d->api = NULL;
		return GF_EHOSTS;
	}
	return 0;
}

/*
 * Close the HTTP server: first a moment on the loop for the answers
 * still being written (to the requests whose commands the stop waited
 * for), then every connection.
 */
static void
http_close(struct daemon *d, struct event_base *base)
{
	struct timeval tv = { 0, 200000 };

	if (d->httpd == NULL)
		return;
	event_base_loopexit(base, &tv);
	event_base_dispatch(base);
	httpd_free(d->httpd);
	api_free(d->api);
	d->httpd = NULL;
	d->api = NULL;
}

/* The daemon itself, once started: returns its exit status. */
static int
daemon_main(struct daemon *d)
{
	struct event_base *base;
	char *why, *cause = NULL;
	int r;

	if ((r = daemon_open(d)) != 0)
		return r;
	if (fleet_engine(d->f) == NULL) {
		report(d, GF_EHOSTS, "cannot start the event loop");
		return GF_EHOSTS;
	}
	base = d->f->base;
	if ((r = http_open(d, base)) != 0)
		return r;
	/*
	 * Signals are caught (and kept for the loop) before the start is
	 * told: a SIGTERM sent once "daemon started" shows, or --detach has
	 * returned, stops it as one sent later does (exit 0, daemon_stop).
	 * The events run only in the loop, after the recovery below.
	 */
	events_add(d, base);
	/* Its schedule runs log in directly: they may outlive it. */
	setenv("GPUFLEET_NO_DAEMON", "1", 1);
	if (held_listen(base, d->db, held_ready, d, &d->execd, &cause) != 0) {
		/* exec then logs in anew: a loss of speed only. */
		error("held connections: %s", cause);
		free(cause);
		cause = NULL;
	}
	report(d, 0, NULL);
	actionlog_observe(on_action, d);
	xasprintf(&why, "pid %ld, database %s, poll every %ds", (long)getpid(),
	    d->db, d->f->config->daemon_poll_interval);
	info("daemon started: %s", why);
	log_action(d, "daemon_start", why);
	free(why);
	if (schedrun_recover(d->f, &d->kids, &d->nkids, &cause) != 0) {
		error("%s", cause);
		free(cause);
	}
	if (notifysend_recover(d->f->inv, &cause) != 0) {
		error("%s", cause);
		free(cause);
		cause = NULL;
	}
	d->ns = notifysend_new(base, d->f->inv, d->f->config, 0);
	/*
	 * The loop relays held execs and answers the API: another process
	 * holding the write lock must not stall it for long (a CLI hears
	 * nothing for the whole wait). Each write the loop makes is tried
	 * again on a later tick or poll.
	 */
	inventory_set_busy(d->f->inv, DAEMON_BUSY_MS);
	while (!d->over) {
		event_base_loop(base, EVLOOP_ONCE);
		if (d->after != 0) {
			r = d->after;
			d->after = 0;
			poll_after(d, r > 0);
		}
	}
	inventory_set_busy(d->f->inv, 0);
	xasprintf(&why, "%s, after %ld poll(s)", d->stop_why, d->polls);
	log_action(d, "daemon_stop", why);
	actionlog_observe(NULL, NULL);
	info("daemon stopped: %s", why);
	free(why);
	held_free(d->execd);
	d->execd = NULL;
	events_free(d);
	notifysend_free(d->ns);
	d->ns = NULL;
	http_close(d, base);
	remote_drop(d);
	return GF_OK;
}

static int
cmd_daemon_exec(
    const struct cmd_entry *e, struct cmd_ctx *ctx, int argc, char **argv)
{
	struct daemon d;
	struct config *cf = ctx->fleet->config;
	const char *db = ctx->fleet->db_path;
	char *cause = NULL, *dir;
	const char *ask = NULL;
	ssize_t n;
	int ch, status, detach_ = 0;

	while ((ch = cmd_getopt(
		    e, argc, argv, "dvl:h", daemon_options, &status)) != -1) {
		if (ch == -2)
			return status;
		if (ch == 'l' &&
		    config_parse_listen(optarg, &cf->daemon_listen, &cause) !=
			0) {
			status = cmd_usage_error(e, "--listen %s", cause);
			free(cause);
			return status;
		}
		if (ch == 'd')
			detach_ = 1;
		else if (ch == 'v')
			log_set_level(LOG_DEBUG);
	}
	if (optind != argc)
		return cmd_usage_error(e, "takes no arguments");
	if ((ask = passphrase_ask(cf)) != NULL) {
		xasprintf(&cause,
		    "daemon: %s is 'ask', but a daemon has no terminal to ask "
		    "on: name a file that holds the passphrase",
		    ask);
		return cmd_fail(GF_ECONFIG, cause);
	}
	if (httpd_check(&cf->daemon_listen, cf->daemon_token_file, &cause) !=
	    0) {
		xasprintf(&dir, "daemon: %s", cause);
		free(cause);
		return cmd_fail(GF_ECONFIG, dir);
	}
	if (log_get_level() < LOG_INFO)
		log_set_level(LOG_INFO);
	memset(&d, 0, sizeof d);
	d.f = ctx->fleet;
	d.report_fd = d.lock_fd = -1;
	d.db = absolute(d.f->db_path);
	d.f->db_path = d.db;
	d.cfg_explicit = cf->path != NULL;
	d.cfg_path =
	    cf->path != NULL ? absolute(cf->path) : config_default_path();
	if (cf->path != NULL) {
		free(cf->path);
		cf->path = xstrdup(d.cfg_path);
	}
	if ((n = readlink("/proc/self/exe", d.self, sizeof d.self - 1)) > 0)
		d.self[n] = '\0';
	dir = misc_xdg_path("XDG_STATE_HOME", ".local/state", "gpufleet");
	xasprintf(&d.log_path, "%s/daemon.log", dir);
	if (misc_mkdirs(dir, &cause) != 0) {
		free(dir);
		return cmd_fail(GF_EHOSTS, cause);
	}
	free(dir);
	status = GF_OK;
	d.detached = detach_;
	if (!detach_ || detach(&d, &status))
		status = daemon_main(&d);
	if (d.lock_fd != -1)
		close(d.lock_fd);
	free(d.last_error);
	free(d.kids);
	free(d.ending);
	free(d.held);
	free(d.down);
	free(d.log_path);
	free(d.cfg_path);
	d.f->db_path = db;
	free(d.db);
	return status;
}

/*
 * Run one command on every selected instance at once, from one process,
 * and show the results the way pdsh, ClusterShell and Ansible users expect:
 * lines prefixed with the host name as they arrive (default), hosts with
 * identical results grouped (-b), one JSON object per host (--json), or
 * one file per host and stream (-o DIR).
 */

#include <sys/stat.h>

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>

#include "cmd.h"
#include "deploy.h"
#include "engine.h"
#include "held.h"
#include "hostkey.h"
#include "keyring.h"
#include "keys.h"
#include "log.h"
#include "misc.h"
#include "probe.h"
#include "remote.h"
#include "status.h"
#include "vis.h"
#include "watcher.h"
#include "xmalloc.h"

#define LINE_MAX_BYTES (64 * 1024)
#define CAPTURE_MAX    (1024 * 1024)
/*
 * Output held for a reader that is behind, per stream (standard output,
 * standard error): past this every host is held (its channel's window
 * then stops its command at the instance) until half of it is taken.
 */
#define SINK_HOLD_MAX (256 * 1024)

enum exec_mode { MODE_PREFIX, MODE_GATHER, MODE_JSON, MODE_FILES };

struct host_out {
	struct misc_buf stream[2]; /* stdout, stderr */
	int fd[2]; /* -o DIR: NAME.out, NAME.err; -1 when closed */
	char *path[2];
	char *write_error; /* -o DIR: the first failed write or close */
};

/*
 * Standard output or standard error while the hosts run: non-blocking,
 * with what the reader has not taken yet queued (bounded: see
 * SINK_HOLD_MAX), so a reader that stops never stops the loop and the
 * deadlines. The descriptor's flags are put back as they were found (a
 * terminal shared with the shell must not stay non-blocking).
 */
struct sink {
	int fd;
	int flags; /* as found; -1: not changed */
	struct misc_buf q;
	struct event *ev; /* waits for the reader */
	size_t dropped;	  /* bytes given up on */
	int broken;	  /* the reader is gone: drop */
};

struct exec_run {
	enum exec_mode mode;
	struct sink sink[2]; /* stdout, stderr; in use while sinks_on */
	int sinks_on;
	int held;	  /* every host's output is held (engine runs) */
	int engine_run;	  /* the engine runs here (not the daemon) */
	int64_t drain_ms; /* the daemon's run waits for the reader at most
			     this long at a time; 0: no limit */
	int signalled;	  /* SIGINT or SIGTERM while waiting for the reader */
	int stalled; /* output was dropped for a reader that did not read */
	const char *outdir;
	int outdir_fd; /* -o DIR, opened once: files are made relative to it */
	struct remote *remote;
	struct host_out *outs;
	size_t n;
	size_t ndone;
	size_t nok;
	size_t nnonzero;
	size_t nfailed;
	size_t nwrite; /* hosts whose -o files could not be written */
	size_t by_reason[EF_NKINDS];
	int no_daemon; /* --no-daemon */
	int progress;  /* stderr is a terminal */
	int progress_shown;
};

static int cmd_exec_exec(
    const struct cmd_entry *, struct cmd_ctx *, int, char **);
static void progress_clear(struct exec_run *);
static void progress_draw(struct exec_run *);
static void emit_lines(struct exec_run *, struct engine_host *, int, int);
static void sinks_open(struct exec_run *, struct event_base *);
static void sinks_close(struct exec_run *);
static void sink_put(struct exec_run *, int, const char *, size_t);
static void sink_flush(struct sink *);
static void sink_cb(evutil_socket_t, short, void *);
static void sinks_hold(struct exec_run *);
static int sinks_wait(struct exec_run *, int64_t);
static void run_print(struct exec_run *, int, const char *, ...)
    __attribute__((format(printf, 3, 4)));
static void run_error(struct exec_run *, const char *, ...)
    __attribute__((format(printf, 2, 3)));
static void on_output(struct engine_host *, int, const char *, size_t, void *);
static void on_done(struct engine_host *, void *);
static json_t *json_bytes(const struct misc_buf *);
static void print_gathered(
    struct exec_run *, FILE *, struct engine_host *, size_t);
static int read_stdin_file(const char *, char **, size_t *, char **);
static int check_outdir(const char *, int, char **);
static int open_output(int, const char *, const char *, char **);
static void write_output(struct host_out *, int, const char *, size_t);
static void close_outputs(struct host_out *);
static int has_retired_keys(struct remote *);
static int has_watchers(struct remote *);
static void check_reinjected(struct remote *, struct engine_settings *);
static void ak_output(struct engine_host *, int, const char *, size_t, void *);
static int parse_args(const struct cmd_entry *, int, char **, struct exec_run *,
    struct engine_settings *, const char **, int *, int *);
static int prepare_outdir(struct exec_run *);
static int open_outputs(struct exec_run *, const struct engine_settings *);
static int print_summary(const struct exec_run *);
static void put_gathered(struct exec_run *);
static void finish_output(struct exec_run *, int);
static void free_outputs(struct exec_run *);

const struct cmd_entry cmd_exec_entry = {
	.name = "exec",
	.usage = "SELECTOR [options] -- COMMAND [ARG...]",
	.summary = "run a command on every selected instance at once",
	.help =
	    "The words after -- are joined with single spaces and the login "
	    "shell of\nthe remote user reads the line, as with ssh, pdsh and "
	    "clush: pipes,\nredirections and $VARIABLES work, and a word "
	    "meant to keep its spaces or\nquotes must be quoted again "
	    "('\"a b\"'). With --argv each ARG reaches the\ncommand exactly "
	    "as given instead (quoted for the remote shell).\n\n"
	    "Output:\n"
	    "  (default)            each line as it arrives, prefixed "
	    "\"NAME: \";\n"
	    "                       stderr lines go to stderr as \"NAME "
	    "[stderr]: \"\n"
	    "  -b, --gather         group hosts with identical stdout, "
	    "stderr and exit\n"
	    "                       status and print each group once\n"
	    "      --json           one JSON object per host per line: "
	    "name, exit_status,\n"
	    "                       signal, stdout, stderr, duration_ms, "
	    "error\n"
	    "  -o, --output-dir DIR write DIR/NAME.out and DIR/NAME.err "
	    "(DIR yours, not\n"
	    "                       writable by others unless sticky; "
	    "links refused;\n"
	    "                       a failed write fails the host)\n"
	    "  --gather and --json hold at most 1 MiB of each stream per host;"
	    "\n  the rest is dropped and marked truncated.\n"
	    "  A reader that falls behind holds the hosts (at most 256 KiB "
	    "queued per\n  stream), never the deadlines; output it has not "
	    "taken when the run is\n  over waits --timeout more, then is "
	    "dropped (said on stderr, exit 1).\n\n"
	    "Options:\n"
	    "      --argv           send each ARG as one word, exactly "
	    "(no shell syntax)\n"
	    "      --stdin FILE|-   send FILE (or standard input) to every "
	    "host\n"
	    "  -t, --timeout SECS   per-host limit for the command (default "
	    "from config, 0: none)\n"
	    "      --connect-timeout SECS  name, TCP connect and the server's "
	    "SSH banner\n"
	    "                       (default 10)\n"
	    "      --setup-timeout SECS    key exchange and login fail after "
	    "SECS\n"
	    "                       without a byte from the server, or 10 x "
	    "SECS in\n"
	    "                       all (default 30; a slow server is not a "
	    "dead one);\n"
	    "                       ssh-agent gets [ssh] agent_timeout "
	    "(default 10)\n"
	    "  -f, --fanout N       hosts contacted at once (1-65536, "
	    "default 256)\n"
	    "      --no-daemon      log in directly even when a daemon runs\n"
	    "                       (so does GPUFLEET_NO_DAEMON=1)\n\n"
	    "When `gpufleet daemon' runs on the same database, the command "
	    "runs on its\nheld SSH sessions (no new logins; hosts without one "
	    "are logged in to\nby the daemon), with the same output; --stdin, "
	    "-o DIR, --no-daemon and\ninstances with retired keys log in "
	    "directly. -v says which way it went.\n\n"
	    "A summary goes to stderr at the end. Exit status 0 only if every "
	    "host\nran the command and it returned 0; 1 otherwise; 130 after "
	    "Ctrl-C or SIGTERM.\n\n"
	    "A command stopped by --timeout, Ctrl-C or SIGTERM has its whole "
	    "process\ngroup on the instance ended (SIGTERM, then SIGKILL "
	    "2 s later); what\nleft the group (setsid) runs on.\n\n"
	    "Examples:\n"
	    "  gpufleet exec @train -- nvidia-smi\n"
	    "  gpufleet exec all -b -- cat /etc/os-release\n"
	    "  gpufleet exec 'a100-*' --json -- 'df -h / | tail -1'\n"
	    "  gpufleet exec all --argv -- touch 'name with spaces'\n",
	.exec = cmd_exec_exec,
};

enum {
	OPT_JSON = 256,
	OPT_STDIN,
	OPT_CONNECT_TIMEOUT,
	OPT_SETUP_TIMEOUT,
	OPT_ARGV,
	OPT_NO_DAEMON
};

static const struct option exec_options[] = { { "gather", no_argument, NULL,
						  'b' },
	{ "json", no_argument, NULL, OPT_JSON },
	{ "output-dir", required_argument, NULL, 'o' },
	{ "stdin", required_argument, NULL, OPT_STDIN },
	{ "timeout", required_argument, NULL, 't' },
	{ "connect-timeout", required_argument, NULL, OPT_CONNECT_TIMEOUT },
	{ "setup-timeout", required_argument, NULL, OPT_SETUP_TIMEOUT },
	{ "fanout", required_argument, NULL, 'f' },
	{ "argv", no_argument, NULL, OPT_ARGV },
	{ "no-daemon", no_argument, NULL, OPT_NO_DAEMON },
	{ "help", no_argument, NULL, 'h' }, { NULL, 0, NULL, 0 } };

static void
progress_clear(struct exec_run *r)
{
	if (r->progress_shown) {
		run_print(r, 1, "\r\033[K");
		r->progress_shown = 0;
	}
}

/*
 * Draw the progress line on stderr. It starts with CAN, which ends any
 * escape sequence a host's output left open (an OSC title without its
 * BEL), so the terminal never reads our line as part of one.
 */
static void
progress_draw(struct exec_run *r)
{
	if (!r->progress)
		return;
	run_print(r, 1, "\030\r\033[K[%zu/%zu done, %zu failed]", r->ndone,
	    r->n, r->nfailed + r->nnonzero);
	if (!r->sinks_on)
		fflush(stderr);
	r->progress_shown = 1;
}

/* The flags of stdout and stderr as found, for sink_fatal; -1: as they are. */
static volatile sig_atomic_t sink_saved[2] = { -1, -1 };
static volatile sig_atomic_t sink_signalled;

/* SIGTERM or SIGHUP outside the loop: put the flags back, then die of it. */
static void
sink_fatal(int sig)
{
	int i;

	for (i = 1; i >= 0; i--) {
		if (sink_saved[i] != -1)
			fcntl(i + 1, F_SETFL, (int)sink_saved[i]);
	}
	signal(sig, SIG_DFL);
	raise(sig);
}

static void
sink_signal(int sig)
{
	sink_signalled = sig;
}

/*
 * Make stdout and stderr non-blocking for the run, their output queued
 * (base: the loop that waits for their reader; NULL: the daemon's run,
 * which waits in sinks_wait instead).
 */
static void
sinks_open(struct exec_run *r, struct event_base *base)
{
	struct sigaction sa;
	int i, flags;

	for (i = 0; i < 2; i++) {
		struct sink *k = &r->sink[i];
		k->fd = i + 1;
		k->flags = -1;
		flags = fcntl(k->fd, F_GETFL);
		if (flags != -1 && (flags & O_NONBLOCK) == 0 &&
		    fcntl(k->fd, F_SETFL, flags | O_NONBLOCK) == 0)
			k->flags = flags;
		sink_saved[i] = k->flags;
		if (base != NULL)
			k->ev = event_new(base, k->fd, EV_WRITE, sink_cb, r);
	}
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = sink_fatal;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	r->sinks_on = 1;
}

/* Back to blocking stdout and stderr as found; what is queued is dropped. */
static void
sinks_close(struct exec_run *r)
{
	size_t i;
	int k;

	if (!r->sinks_on)
		return;
	signal(SIGTERM, SIG_DFL);
	signal(SIGHUP, SIG_DFL);
	for (k = 1; k >= 0; k--) {
		struct sink *s = &r->sink[k];
		s->dropped += s->q.len;
		s->q.len = 0;
		if (s->ev != NULL)
			event_free(s->ev);
		s->ev = NULL;
		if (s->flags != -1)
			fcntl(s->fd, F_SETFL, s->flags);
		sink_saved[k] = -1;
		free(s->q.data);
		memset(&s->q, 0, sizeof s->q);
	}
	for (i = 0; r->remote != NULL && i < r->remote->n; i++)
		r->remote->hosts[i].hold_output = 0;
	r->held = 0;
	r->sinks_on = 0;
}

/* Write what the reader takes now; a reader that is gone drops the rest. */
static void
sink_flush(struct sink *s)
{
	ssize_t n;

	while (s->q.len > 0 && !s->broken) {
		n = write(s->fd, s->q.data, s->q.len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return;
		if (n <= 0) {
			s->broken = 1;
			break;
		}
		memmove(s->q.data, s->q.data + n, s->q.len - (size_t)n);
		s->q.len -= (size_t)n;
	}
	if (s->broken) {
		s->dropped += s->q.len;
		s->q.len = 0;
	}
}

/* Queue output for stdout (0) or stderr (1) and write what fits. */
static void
sink_put(struct exec_run *r, int which, const char *data, size_t len)
{
	struct sink *s = &r->sink[which];

	if (s->broken) {
		s->dropped += len;
		return;
	}
	misc_buf_add(&s->q, data, len, 0);
	sink_flush(s);
	if (s->q.len > 0 && s->ev != NULL &&
	    !event_pending(s->ev, EV_WRITE, NULL))
		event_add(s->ev, NULL);
	sinks_hold(r);
}

/* The reader took some: write more. */
static void
sink_cb(evutil_socket_t fd, short what, void *arg)
{
	struct exec_run *r = arg;
	struct sink *s = &r->sink[fd == r->sink[0].fd ? 0 : 1];

	(void)what;
	sink_flush(s);
	if (s->q.len > 0)
		event_add(s->ev, NULL);
	sinks_hold(r);
}

/*
 * Hold every host while a queue is past SINK_HOLD_MAX, until both are
 * down to half of it. The daemon's run cannot be held from here: its
 * output waits in sinks_wait, as long as a run may (drain_ms).
 */
static void
sinks_hold(struct exec_run *r)
{
	size_t i, q0 = r->sink[0].q.len, q1 = r->sink[1].q.len;
	int over = q0 >= SINK_HOLD_MAX || q1 >= SINK_HOLD_MAX;

	int sig;

	if (!r->engine_run) {
		if (!over)
			return;
		if (r->signalled == 0 &&
		    (sig = sinks_wait(r,
			 r->drain_ms != 0 ? engine_now_ms() + r->drain_ms
					  : 0)) != 0) {
			/* Passed on: the daemon's run is to be cancelled. */
			r->signalled = sig;
			if (sig == SIGTERM)
				sinks_close(r); /* its handler may end us */
			raise(sig);
		}
		for (i = 0; i < 2; i++) {
			if (r->sinks_on && r->sink[i].q.len >= SINK_HOLD_MAX) {
				r->sink[i].dropped += r->sink[i].q.len;
				r->sink[i].q.len = 0;
			}
		}
		return;
	}
	if (over == r->held ||
	    (!over && (q0 > SINK_HOLD_MAX / 2 || q1 > SINK_HOLD_MAX / 2)))
		return;
	r->held = over;
	for (i = 0; i < r->remote->n; i++)
		r->remote->hosts[i].hold_output = over;
}

/*
 * Wait for the reader to take what is queued: until it has, until
 * until_ms (0: no limit) or until SIGINT or SIGTERM. Returns the signal
 * that came, or 0.
 */
static int
sinks_wait(struct exec_run *r, int64_t until_ms)
{
	struct sigaction sa, oint, oterm;
	struct pollfd pfd[2];
	nfds_t n;
	int64_t left;
	int i, sig;

	memset(&sa, 0, sizeof sa);
	sa.sa_handler = sink_signal;
	sigemptyset(&sa.sa_mask);
	sink_signalled = 0;
	sigaction(SIGINT, &sa, &oint);
	sigaction(SIGTERM, &sa, &oterm);
	while (!sink_signalled) {
		for (n = 0, i = 0; i < 2; i++) {
			if (r->sink[i].q.len == 0)
				continue;
			pfd[n].fd = r->sink[i].fd;
			pfd[n].events = POLLOUT;
			n++;
		}
		if (n == 0)
			break;
		left = until_ms != 0 ? until_ms - engine_now_ms() : 1000;
		if (left <= 0)
			break;
		if (poll(pfd, n, left > 1000 ? 1000 : (int)left) == -1 &&
		    errno != EINTR)
			break;
		for (i = 0; i < 2; i++)
			sink_flush(&r->sink[i]);
	}
	sigaction(SIGINT, &oint, NULL);
	sigaction(SIGTERM, &oterm, NULL);
	sig = sink_signalled;
	sink_signalled = 0;
	return sig;
}

/* printf to stdout (0) or stderr (1), through the queue while it is on. */
static void
run_print(struct exec_run *r, int which, const char *fmt, ...)
{
	va_list ap;
	char *msg;
	int len;

	va_start(ap, fmt);
	if (!r->sinks_on) {
		vfprintf(which ? stderr : stdout, fmt, ap);
		va_end(ap);
		return;
	}
	len = xvasprintf(&msg, fmt, ap);
	va_end(ap);
	sink_put(r, which, msg, (size_t)len);
	free(msg);
}

/* An error line as error() writes it, through the queue while it is on. */
static void
run_error(struct exec_run *r, const char *fmt, ...)
{
	va_list ap;
	char *msg, *safe;

	va_start(ap, fmt);
	xvasprintf(&msg, fmt, ap);
	va_end(ap);
	if (!r->sinks_on)
		error("%s", msg);
	else {
		safe = vis_str(msg);
		run_print(r, 1, "gpufleet: %s\n", safe);
		free(safe);
	}
	free(msg);
}

/*
 * Print the complete lines of one host's stream with its name; with all,
 * the unterminated rest too. Each line is one write, so lines of different
 * hosts never tear.
 */
static void
emit_lines(struct exec_run *r, struct engine_host *h, int is_stderr, int all)
{
	struct misc_buf *b = &r->outs[h - r->remote->hosts].stream[is_stderr];
	size_t start = 0, i;

	for (i = 0; i < b->len; i++) {
		if (b->data[i] != '\n' && i - start < LINE_MAX_BYTES)
			continue;
		progress_clear(r);
		run_print(r, is_stderr, "%s%s: %.*s\n", h->in->name,
		    is_stderr ? " [stderr]" : "", (int)(i - start),
		    b->data + start);
		start = b->data[i] == '\n' ? i + 1 : i;
	}
	if (all && start < b->len) {
		progress_clear(r);
		run_print(r, is_stderr, "%s%s: %.*s\n", h->in->name,
		    is_stderr ? " [stderr]" : "", (int)(b->len - start),
		    b->data + start);
		start = b->len;
	}
	if (start > 0) {
		memmove(b->data, b->data + start, b->len - start);
		b->len -= start;
	}
}

static void
on_output(struct engine_host *h, int is_stderr, const char *data, size_t len,
    void *arg)
{
	struct exec_run *r = arg;
	struct host_out *o = &r->outs[h - r->remote->hosts];

	switch (r->mode) {
	case MODE_PREFIX:
		misc_buf_add(&o->stream[is_stderr], data, len, 0);
		emit_lines(r, h, is_stderr, 0);
		break;
	case MODE_GATHER:
	case MODE_JSON:
		misc_buf_add(&o->stream[is_stderr], data, len, CAPTURE_MAX);
		break;
	case MODE_FILES:
		write_output(o, is_stderr, data, len);
		break;
	}
}

/*
 * Refuse an output directory where someone else could plant a file or a
 * link: it must be owned by us (or root) and not writable by group or
 * others unless sticky (as /tmp). dfd is the directory, opened once, so
 * what is checked is what the files are made in.
 */
static int
check_outdir(const char *dir, int dfd, char **cause)
{
	struct stat st;

	if (fstat(dfd, &st) != 0) {
		xasprintf(cause, "cannot use %s: %s", dir, strerror(errno));
		return -1;
	}
	if (!S_ISDIR(st.st_mode)) {
		xasprintf(cause, "cannot use %s: not a directory", dir);
		return -1;
	}
	if (st.st_uid != geteuid() && st.st_uid != 0) {
		xasprintf(cause,
		    "refusing output directory %s: owned by uid %lu, "
		    "not by you",
		    dir, (unsigned long)st.st_uid);
		return -1;
	}
	if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0 &&
	    (st.st_mode & S_ISVTX) == 0) {
		xasprintf(cause,
		    "refusing output directory %s: writable by "
		    "others (mode %04o) and not sticky",
		    dir, (unsigned)(st.st_mode & 07777));
		return -1;
	}
	return 0;
}

/*
 * Open one output file, name in the directory dfd (path names it in
 * messages), for writing from its start: never through a symbolic link,
 * and only a regular file of ours with no other name. Returns the
 * descriptor, or -1 with *cause set.
 */
static int
open_output(int dfd, const char *name, const char *path, char **cause)
{
	struct stat st;
	int fd, flags;

	fd = openat(dfd, name,
	    O_WRONLY | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0666);
	if (fd == -1) {
		xasprintf(cause, "cannot write %s: %s", path,
		    errno == ELOOP ? "it is a symbolic link" : strerror(errno));
		return -1;
	}
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) ||
	    st.st_uid != geteuid() || st.st_nlink != 1) {
		xasprintf(cause,
		    "cannot write %s: not a regular file of yours "
		    "with one link",
		    path);
		close(fd);
		return -1;
	}
	if ((flags = fcntl(fd, F_GETFL)) == -1 ||
	    fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) == -1 ||
	    ftruncate(fd, 0) != 0) {
		xasprintf(cause, "cannot write %s: %s", path, strerror(errno));
		close(fd);
		return -1;
	}
	return fd;
}

/* Write output to a host's file; the first failure closes both files. */
static void
write_output(struct host_out *o, int is_stderr, const char *data, size_t len)
{
	ssize_t n;

	while (len > 0 && o->fd[is_stderr] != -1) {
		n = write(o->fd[is_stderr], data, len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			xasprintf(&o->write_error, "cannot write %s: %s",
			    o->path[is_stderr],
			    n < 0 ? strerror(errno) : "nothing written");
			close_outputs(o);
			return;
		}
		data += n;
		len -= (size_t)n;
	}
}

/* Close a host's files; a failed close is a failed write. */
static void
close_outputs(struct host_out *o)
{
	int i;

	for (i = 0; i < 2; i++) {
		if (o->fd[i] == -1)
			continue;
		if (close(o->fd[i]) != 0 && o->write_error == NULL)
			xasprintf(&o->write_error, "cannot write %s: %s",
			    o->path[i], strerror(errno));
		o->fd[i] = -1;
	}
}

/* A JSON string of the bytes, invalid UTF-8 replaced by U+FFFD. */
static json_t *
json_bytes(const struct misc_buf *b)
{
	const unsigned char *p = (const unsigned char *)b->data;
	struct misc_buf clean = { NULL, 0, 0, 0 };
	json_t *j;
	size_t i = 0, n, k;

	if (b->len == 0)
		return json_string("");
	if ((j = json_stringn(b->data, b->len)) != NULL)
		return j;
	while (i < b->len) {
		if (p[i] < 0x80)
			n = 1;
		else if ((p[i] & 0xe0) == 0xc0 && p[i] >= 0xc2)
			n = 2;
		else if ((p[i] & 0xf0) == 0xe0)
			n = 3;
		else if ((p[i] & 0xf8) == 0xf0 && p[i] <= 0xf4)
			n = 4;
		else
			n = 0;
		for (k = 1; n != 0 && k < n; k++) {
			if (i + k >= b->len || (p[i + k] & 0xc0) != 0x80)
				n = 0;
		}
		if (n == 0 ||
		    (n > 1 && json_stringn((const char *)p + i, n) == NULL)) {
			misc_buf_add(&clean, "\xef\xbf\xbd", 3, 0);
			i++;
		} else {
			misc_buf_add(&clean, (const char *)p + i, n, 0);
			i += n;
		}
	}
	j = json_stringn(clean.data, clean.len);
	free(clean.data);
	return j != NULL ? j : json_string("");
}

static void
on_done(struct engine_host *h, void *arg)
{
	struct exec_run *r = arg;
	struct host_out *o = &r->outs[h - r->remote->hosts];
	json_t *j, *err;
	char *line;
	int i;

	if (r->mode == MODE_FILES)
		close_outputs(o);
	r->ndone++;
	if (h->fail != EF_NONE) {
		r->nfailed++;
		r->by_reason[h->fail]++;
	} else if (o->write_error != NULL) {
		r->nfailed++;
		r->nwrite++;
	} else if (h->exit_status != 0)
		r->nnonzero++;
	else
		r->nok++;

	switch (r->mode) {
	case MODE_PREFIX:
		emit_lines(r, h, 0, 1);
		emit_lines(r, h, 1, 1);
		for (i = 0; i < 2; i++) {
			free(o->stream[i].data);
			memset(&o->stream[i], 0, sizeof o->stream[i]);
		}
		/* FALLTHROUGH */
	case MODE_FILES:
		progress_clear(r);
		if (h->fail != EF_NONE)
			run_error(r, "%s: %s", h->in->name, h->fail_msg);
		else if (h->exit_signal != NULL)
			run_error(r, "%s: killed by signal %s", h->in->name,
			    h->exit_signal);
		else if (h->exit_status != 0)
			run_error(r, "%s: exited with status %d", h->in->name,
			    h->exit_status);
		if (h->fail == EF_NONE && o->write_error != NULL)
			run_error(r, "%s: %s", h->in->name, o->write_error);
		break;
	case MODE_JSON:
		j = json_object();
		json_object_set_new(j, "name", json_string(h->in->name));
		json_object_set_new(j, "exit_status",
		    h->exit_status >= 0 && h->exit_signal == NULL
			? json_integer(h->exit_status)
			: json_null());
		json_object_set_new(j, "signal",
		    h->exit_signal != NULL ? json_string(h->exit_signal)
					   : json_null());
		json_object_set_new(j, "stdout", json_bytes(&o->stream[0]));
		json_object_set_new(j, "stderr", json_bytes(&o->stream[1]));
		json_object_set_new(j, "stdout_truncated",
		    json_boolean(o->stream[0].truncated));
		json_object_set_new(j, "stderr_truncated",
		    json_boolean(o->stream[1].truncated));
		json_object_set_new(
		    j, "duration_ms", json_integer(h->end_ms - h->start_ms));
		if (h->fail != EF_NONE) {
			err = json_object();
			json_object_set_new(err, "code",
			    json_string(engine_fail_code(h->fail)));
			json_object_set_new(
			    err, "message", json_string(h->fail_msg));
			json_object_set_new(j, "error", err);
		} else
			json_object_set_new(j, "error", json_null());
		progress_clear(r);
		line = json_dumps(j, JSON_COMPACT | JSON_PRESERVE_ORDER);
		if (line != NULL)
			run_print(r, 0, "%s\n", line);
		free(line);
		if (!r->sinks_on)
			fflush(stdout);
		json_decref(j);
		for (i = 0; i < 2; i++) {
			free(o->stream[i].data);
			memset(&o->stream[i], 0, sizeof o->stream[i]);
		}
		break;
	case MODE_GATHER:
		break;
	}
	progress_draw(r);
}

/* Do two hosts have the same result, for --gather? */
static int
same_result(const struct exec_run *r, const struct engine_host *a,
    const struct engine_host *b)
{
	const struct host_out *oa = &r->outs[a - r->remote->hosts];
	const struct host_out *ob = &r->outs[b - r->remote->hosts];
	int i;

	if (a->fail != b->fail || a->exit_status != b->exit_status)
		return 0;
	if ((a->exit_signal == NULL) != (b->exit_signal == NULL) ||
	    (a->exit_signal != NULL &&
		strcmp(a->exit_signal, b->exit_signal) != 0))
		return 0;
	if (a->fail != EF_NONE)
		return 1;
	for (i = 0; i < 2; i++) {
		if (oa->stream[i].len != ob->stream[i].len ||
		    oa->stream[i].truncated != ob->stream[i].truncated ||
		    (oa->stream[i].len != 0 &&
			memcmp(oa->stream[i].data, ob->stream[i].data,
			    oa->stream[i].len) != 0))
			return 0;
	}
	return 1;
}

/* Print hosts grouped by identical results (ClusterShell -b) on out. */
static void
print_gathered(
    struct exec_run *r, FILE *out, struct engine_host *hosts, size_t n)
{
	size_t i, j, count;
	int *printed = xcalloc(n + 1, sizeof *printed), s;
	char *safe;

	for (i = 0; i < n; i++) {
		const struct host_out *o = &r->outs[i];
		if (printed[i])
			continue;
		fprintf(out, "==== %s", hosts[i].in->name);
		count = 1;
		for (j = i + 1; j < n; j++) {
			if (!printed[j] &&
			    same_result(r, &hosts[i], &hosts[j])) {
				printed[j] = 1;
				fprintf(out, ",%s", hosts[j].in->name);
				count++;
			}
		}
		fprintf(out, " (%zu host%s): ", count, count == 1 ? "" : "s");
		if (hosts[i].fail != EF_NONE)
			fprintf(out, "failed: %s\n",
			    engine_fail_code(hosts[i].fail));
		else if (hosts[i].exit_signal != NULL) {
			safe = vis_str(hosts[i].exit_signal);
			fprintf(out, "killed by signal %s\n", safe);
			free(safe);
		} else
			fprintf(out, "exit %d\n", hosts[i].exit_status);
		if (hosts[i].fail != EF_NONE) {
			for (j = i; j < n; j++) {
				if (j == i ||
				    (printed[j] &&
					hosts[j].fail == hosts[i].fail &&
					same_result(r, &hosts[i], &hosts[j]))) {
					safe = vis_str(hosts[j].fail_msg);
					fprintf(out, "  %s: %s\n",
					    hosts[j].in->name,
					    safe != NULL ? safe : "failed");
					free(safe);
				}
			}
			continue;
		}
		for (s = 0; s < 2; s++) {
			const struct misc_buf *b = &o->stream[s];
			if (b->len == 0 && !b->truncated)
				continue;
			if (s == 1)
				fprintf(out, "---- stderr\n");
			fwrite(b->data, 1, b->len, out);
			if (b->len > 0 && b->data[b->len - 1] != '\n')
				fprintf(out, "\n");
			if (b->truncated)
				fprintf(out, "[output truncated at %d bytes]\n",
				    CAPTURE_MAX);
		}
	}
	free(printed);
}

/* Does any selected instance have keys gpufleet took off it? */
static int
has_retired_keys(struct remote *rm)
{
	size_t i;

	for (i = 0; i < rm->n; i++) {
		if (keys_has_retired(rm->inv, rm->list[i].id))
			return 1;
	}
	return 0;
}

/* Whether a watcher's plan is stored for any of the instances. */
static int
has_watchers(struct remote *rm)
{
	unsigned char *only = xcalloc(rm->n + 1, 1);
	size_t n = watcher_planned(rm->inv, rm->list, rm->n, only);

	free(only);
	return n > 0;
}

static void
ak_output(struct engine_host *h, int is_stderr, const char *data, size_t len,
    void *arg)
{
	struct misc_buf *bufs = arg;
	struct remote *rm = h->user;

	if (!is_stderr)
		misc_buf_add(&bufs[h - rm->hosts], data, len, 256 * 1024);
}

/*
 * After the command: on the sessions still open, read authorized_keys of
 * instances with retired keys (one more channel, no new login) and warn
 * where a platform put one back.
 */
static void
check_reinjected(struct remote *rm, struct engine_settings *set)
{
	struct engine_settings s2 = *set;
	struct misc_buf *bufs = xcalloc(rm->n + 1, sizeof *bufs);
	char **cmds = xcalloc(rm->n + 1, sizeof *cmds), *cause, *script;
	size_t i;

	for (i = 0; i < rm->n; i++) {
		struct engine_host *h = &rm->hosts[i];
		h->skip = h->fail != EF_NONE ||
		    !keys_has_retired(rm->inv, rm->list[i].id);
		if (h->skip)
			continue;
		xasprintf(&script, "cat %s 2>/dev/null; exit 0",
		    rm->list[i].authorized_keys_file);
		cmds[i] = deploy_sh_command(script);
		free(script);
		h->command = cmds[i];
	}
	s2.command = NULL;
	s2.stdin_data = NULL;
	s2.stdin_len = 0;
	s2.keep_open = 0;
	s2.handle_sigint = 1;
	rm->ops.output = ak_output;
	rm->ops.done = NULL;
	rm->ops.arg = bufs;
	if (remote_run(rm, &s2) == 0) {
		for (i = 0; i < rm->n; i++) {
			if (rm->hosts[i].skip || rm->hosts[i].fail != EF_NONE ||
			    bufs[i].data == NULL)
				continue;
			bufs[i].data[bufs[i].len] = '\0';
			cause = NULL;
			keys_warn_reinjected(
			    rm->inv, &rm->list[i], bufs[i].data, &cause);
			free(cause);
		}
	}
	for (i = 0; i < rm->n; i++) {
		rm->hosts[i].command = NULL;
		rm->hosts[i].skip = 0;
		free(cmds[i]);
		free(bufs[i].data);
	}
	free(cmds);
	free(bufs);
}

/* Read the input sent to every host: a file, or "-" for stdin. */
static int
read_stdin_file(const char *path, char **data, size_t *len, char **cause)
{
	struct misc_buf b = { NULL, 0, 0, 0 };
	char chunk[65536];
	ssize_t n;
	int fd;

	fd = strcmp(path, "-") == 0 ? STDIN_FILENO
				    : open(path, O_RDONLY | O_CLOEXEC);
	if (fd == -1) {
		xasprintf(
		    cause, "cannot read --stdin %s: %s", path, strerror(errno));
		return -1;
	}
	while ((n = read(fd, chunk, sizeof chunk)) != 0) {
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			xasprintf(cause, "cannot read --stdin %s: %s", path,
			    strerror(errno));
			free(b.data);
			if (fd != STDIN_FILENO)
				close(fd);
			return -1;
		}
		misc_buf_add(&b, chunk, (size_t)n, 0);
	}
	if (fd != STDIN_FILENO)
		close(fd);
	*data = b.data != NULL ? b.data : xstrdup("");
	*len = b.len;
	return 0;
}

static int
parse_secs(const struct cmd_entry *e, const char *opt, const char *s, int min,
    int *out)
{
	return cmd_number(e, opt, s, "seconds", min, 604800, out);
}

/*
 * Parse exec's options into run and set; *dashdash gets the index of
 * "--", *exact is 1 with --argv. Returns -1 to go on, or the exit status.
 */
static int
parse_args(const struct cmd_entry *e, int argc, char **argv,
    struct exec_run *run, struct engine_settings *set, const char **stdin_path,
    int *dashdash, int *exact)
{
	int ch, status, r, k, end;

	for (k = 1; k < argc && *dashdash == 0; k++) {
		if (strcmp(argv[k], "--") == 0)
			*dashdash = k;
	}
	end = *dashdash ? *dashdash : argc;
	while ((ch = cmd_getopt(
		    e, end, argv, "bo:t:f:h", exec_options, &status)) != -1) {
		r = 0;
		switch (ch) {
		case -2:
			return status;
		case 'b':
			run->mode = MODE_GATHER;
			break;
		case OPT_JSON:
			run->mode = MODE_JSON;
			break;
		case 'o':
			run->mode = MODE_FILES;
			run->outdir = optarg;
			break;
		case OPT_STDIN:
			*stdin_path = optarg;
			break;
		case 't':
			r = parse_secs(
			    e, "--timeout", optarg, 0, &set->command_timeout);
			break;
		case OPT_CONNECT_TIMEOUT:
			r = parse_secs(e, "--connect-timeout", optarg, 1,
			    &set->connect_timeout);
			break;
		case OPT_SETUP_TIMEOUT:
			r = parse_secs(e, "--setup-timeout", optarg, 1,
			    &set->setup_timeout);
			break;
		case 'f':
			r = cmd_number(e, "--fanout", optarg, "hosts", 1, 65536,
			    &set->fanout);
			break;
		case OPT_ARGV:
			*exact = 1;
			break;
		case OPT_NO_DAEMON:
			run->no_daemon = 1;
			break;
		}
		if (r != 0)
			return r;
	}
	/* Options may also follow the selector, before "--". */
	if (optind < end - 1 || optind >= end)
		return cmd_usage_error(e, "needs SELECTOR, then -- COMMAND");
	if (!*dashdash || *dashdash + 1 >= argc)
		return cmd_usage_error(
		    e, "needs -- COMMAND after the SELECTOR");
	return -1;
}

/* -o DIR: create (or check) DIR before anything runs. Returns 0 or exit 2. */
static int
prepare_outdir(struct exec_run *run)
{
	const char *dir = run->outdir;
	char *cause = NULL;

	if (mkdir(dir, 0755) != 0 && errno != EEXIST) {
		xasprintf(&cause, "cannot create %s: %s", dir, strerror(errno));
		return cmd_fail(GF_EUSAGE, cause);
	}
	run->outdir_fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (run->outdir_fd == -1) {
		xasprintf(&cause, "cannot use %s: %s", dir,
		    errno == ENOTDIR ? "not a directory" : strerror(errno));
		return cmd_fail(GF_EUSAGE, cause);
	}
	if (check_outdir(dir, run->outdir_fd, &cause) != 0)
		return cmd_fail(GF_EUSAGE, cause);
	return 0;
}

/* -o DIR: open DIR/NAME.out and DIR/NAME.err for every host. */
static int
open_outputs(struct exec_run *run, const struct engine_settings *set)
{
	struct remote *remote = run->remote;
	char *cause = NULL;
	char *name;
	size_t i;
	int k;

	/* Two files per host stay open for the run, plus the fan-out. */
	engine_raise_nofile(2 * remote->n + (size_t)set->fanout);
	for (i = 0; i < remote->n; i++) {
		for (k = 0; k < 2; k++) {
			xasprintf(&run->outs[i].path[k], "%s/%s.%s",
			    run->outdir, remote->hosts[i].in->name,
			    k ? "err" : "out");
			xasprintf(&name, "%s.%s", remote->hosts[i].in->name,
			    k ? "err" : "out");
			run->outs[i].fd[k] = open_output(
			    run->outdir_fd, name, run->outs[i].path[k], &cause);
			free(name);
			if (run->outs[i].fd[k] == -1)
				return cmd_fail(GF_EUSAGE, cause);
		}
	}
	return 0;
}

/* The summary line on stderr; returns the exit status it stands for. */
static int
print_summary(const struct exec_run *run)
{
	const char *sep = "";
	size_t n = run->remote->n;
	int k;

	fprintf(stderr,
	    "%sgpufleet: exec: %zu host%s: %zu ok, %zu exit non-zero, %zu "
	    "failed",
	    run->progress ? "\030" : "", n, n == 1 ? "" : "s", run->nok,
	    run->nnonzero, run->nfailed);
	for (k = 1; k < EF_NKINDS; k++) {
		if (run->by_reason[k] == 0)
			continue;
		fprintf(stderr, "%s%s %zu", *sep ? ", " : " (",
		    engine_fail_code(k), run->by_reason[k]);
		sep = ",";
	}
	if (run->nwrite != 0)
		fprintf(stderr, "%swrite_error %zu", *sep ? ", " : " (",
		    run->nwrite);
	fprintf(stderr, "%s\n", *sep || run->nwrite != 0 ? ")" : "");
	if (run->by_reason[EF_INTERRUPTED] != 0)
		return 130;
	return run->nok == n ? GF_OK : GF_EHOSTS;
}

/* --gather: the groups, through the queue. */
static void
put_gathered(struct exec_run *r)
{
	char *text = NULL;
	size_t len = 0;
	FILE *f;

	if ((f = open_memstream(&text, &len)) == NULL) {
		sinks_close(r);
		print_gathered(r, stdout, r->remote->hosts, r->remote->n);
		return;
	}
	print_gathered(r, f, r->remote->hosts, r->remote->n);
	if (fclose(f) == 0)
		sink_put(r, 0, text, len);
	free(text);
}

/*
 * The run is over: let the reader take the output left, within the
 * command's --timeout (0, none: as long as it takes; -1: no wait), then put
 * stdout and stderr back as they were and say what was dropped for a reader
 * that did not read (one that closed its end chose to).
 */
static void
finish_output(struct exec_run *r, int timeout_s)
{
	int sig, k, stalled;
	size_t dropped[2];

	if (!r->sinks_on)
		return;
	sig = sinks_wait(r,
	    timeout_s < 0	? engine_now_ms()
		: timeout_s > 0 ? engine_now_ms() + (int64_t)timeout_s * 1000
				: 0);
	if (sig != 0 && r->signalled == 0)
		r->signalled = sig;
	for (k = 0; k < 2; k++)
		dropped[k] = r->sink[k].broken ? 0 : r->sink[k].q.len;
	sinks_close(r);
	for (k = 0; k < 2; k++) {
		stalled = dropped[k] != 0 ||
		    (!r->sink[k].broken && r->sink[k].dropped != 0);
		if (!stalled)
			continue;
		r->stalled = 1;
		error("exec: %zu bytes of %s dropped: the reader did not "
		      "take them%s",
		    r->sink[k].dropped, k ? "standard error" : "output",
		    r->signalled || timeout_s < 0 ? " before the interrupt"
			: timeout_s > 0 ? " within --timeout after the run"
					: "");
	}
}

/* Close and free the per-host outputs. */
static void
free_outputs(struct exec_run *run)
{
	size_t i;
	int k;

	if (run->outdir_fd != -1)
		close(run->outdir_fd);
	run->outdir_fd = -1;
	if (run->outs == NULL)
		return;
	for (i = 0; i < run->n; i++) {
		close_outputs(&run->outs[i]);
		for (k = 0; k < 2; k++) {
			free(run->outs[i].stream[k].data);
			free(run->outs[i].path[k]);
		}
		free(run->outs[i].write_error);
	}
	free(run->outs);
}

static int
cmd_exec_exec(
    const struct cmd_entry *e, struct cmd_ctx *ctx, int argc, char **argv)
{
	struct exec_run run;
	struct engine_settings set;
	struct remote *remote = NULL;
	const char *stdin_path = NULL;
	char *cause = NULL, *command = NULL, *stdin_data = NULL;
	size_t stdin_len = 0, i;
	int status, dashdash = 0, exact = 0, r;

	memset(&run, 0, sizeof run);
	run.outdir_fd = -1;
	memset(&set, 0, sizeof set);
	set.fanout = ctx->fleet->config->fanout;
	set.handshake_window = ctx->fleet->config->handshake_window;
	set.connect_timeout = ctx->fleet->config->connect_timeout;
	set.setup_timeout = ctx->fleet->config->setup_timeout;
	set.command_timeout = ctx->fleet->config->command_timeout;
	run.mode = MODE_PREFIX;
	if ((status = parse_args(e, argc, argv, &run, &set, &stdin_path,
		 &dashdash, &exact)) != -1)
		return status;
	if (run.mode == MODE_FILES && (status = prepare_outdir(&run)) != 0)
		goto out;
	if (stdin_path != NULL &&
	    read_stdin_file(stdin_path, &stdin_data, &stdin_len, &cause) != 0) {
		status = cmd_fail(GF_EUSAGE, cause);
		goto out;
	}

	/* As ssh: the words make one line for the login shell to read. */
	if (exact)
		command =
		    misc_quote_argv(argc - dashdash - 1, argv + dashdash + 1);
	else
		command =
		    misc_join_argv(argc - dashdash - 1, argv + dashdash + 1);
	if ((r = remote_open(ctx->fleet, argv[optind], &remote, &cause)) != 0) {
		status = cmd_fail(-r, cause);
		goto out;
	}
	run.remote = remote;
	run.n = remote->n;
	run.outs = xcalloc(remote->n, sizeof *run.outs);
	for (i = 0; i < remote->n; i++)
		run.outs[i].fd[0] = run.outs[i].fd[1] = -1;
	run.progress =
	    isatty(STDERR_FILENO) && getenv("GPUFLEET_NO_PROGRESS") == NULL;
	if (run.mode == MODE_FILES && (status = open_outputs(&run, &set)) != 0)
		goto out;
	set.command = command;
	set.stdin_data = stdin_data;
	set.stdin_len = stdin_len;
	set.handle_sigint = 1;
	set.handle_sigterm = 1;
	set.kill_group = 1;
	remote->ops.output = on_output;
	remote->ops.done = on_done;
	remote->ops.arg = &run;
	if (remote_engine(remote) == NULL) {
		status =
		    cmd_fail(GF_EHOSTS, xstrdup("cannot start the event loop"));
		goto out;
	}
	sinks_open(&run, ctx->fleet->base);
	run.drain_ms = (int64_t)set.command_timeout * 1000;
	/*
	 * Through a daemon's held sessions where one runs (it reads the
	 * watchers' journals on its polls); else hold sessions here where
	 * a re-injected key must be looked for after, and where a
	 * watcher's journal is to be read.
	 */
	if (run.mode != MODE_FILES && !run.no_daemon &&
	    getenv("GPUFLEET_NO_DAEMON") == NULL && !has_retired_keys(remote) &&
	    held_exec(ctx->fleet->db_path, remote, &set, &remote->ops) == 0)
		set.keep_open = 0;
	else {
		set.keep_open =
		    has_retired_keys(remote) || has_watchers(remote);
		run.engine_run = 1;
		if (remote_run(remote, &set) != 0) {
			sinks_close(&run);
			status = cmd_fail(
			    GF_EHOSTS, xstrdup("cannot start the event loop"));
			goto out;
		}
	}
	progress_clear(&run);
	if (run.mode == MODE_GATHER)
		put_gathered(&run);
	/* Interrupted: what the reader takes now, no waiting for it. */
	finish_output(&run,
	    run.by_reason[EF_INTERRUPTED] != 0 ? -1 : set.command_timeout);
	if (set.keep_open && run.by_reason[EF_INTERRUPTED] == 0 &&
	    run.signalled == 0) {
		check_reinjected(remote, &set);
		probe_journals(remote, ctx->fleet->config);
	}
	fflush(stdout);
	status = print_summary(&run);
	if (run.signalled != 0)
		status = 128 + run.signalled;
	else if (status == GF_OK && run.stalled != 0)
		status = GF_EHOSTS;
out:
	free_outputs(&run);
	remote_close(remote);
	free(command);
	free(stdin_data);
	return status;
}

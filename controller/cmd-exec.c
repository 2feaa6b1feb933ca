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
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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

enum exec_mode { MODE_PREFIX, MODE_GATHER, MODE_JSON, MODE_FILES };

struct host_out {
	struct misc_buf stream[2]; /* stdout, stderr */
	int fd[2]; /* -o DIR: NAME.out, NAME.err; -1 when closed */
	char *path[2];
	char *write_error; /* -o DIR: the first failed write or close */
};

struct exec_run {
	enum exec_mode mode;
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
static void on_output(struct engine_host *, int, const char *, size_t, void *);
static void on_done(struct engine_host *, void *);
static json_t *json_bytes(const struct misc_buf *);
static void print_gathered(struct exec_run *, struct engine_host *, size_t);
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
	    "\n  the rest is dropped and marked truncated.\n\n"
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
	    "Ctrl-C.\n\n"
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
		fputs("\r\033[K", stderr);
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
	fprintf(stderr, "\030\r\033[K[%zu/%zu done, %zu failed]", r->ndone,
	    r->n, r->nfailed + r->nnonzero);
	fflush(stderr);
	r->progress_shown = 1;
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
	FILE *f = is_stderr ? stderr : stdout;
	size_t start = 0, i;

	for (i = 0; i < b->len; i++) {
		if (b->data[i] != '\n' && i - start < LINE_MAX_BYTES)
			continue;
		progress_clear(r);
		fprintf(f, "%s%s: %.*s\n", h->in->name,
		    is_stderr ? " [stderr]" : "", (int)(i - start),
		    b->data + start);
		start = b->data[i] == '\n' ? i + 1 : i;
	}
	if (all && start < b->len) {
		progress_clear(r);
		fprintf(f, "%s%s: %.*s\n", h->in->name,
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
			error("%s: %s", h->in->name, h->fail_msg);
		else if (h->exit_signal != NULL)
			error("%s: killed by signal %s", h->in->name,
			    h->exit_signal);
		else if (h->exit_status != 0)
			error("%s: exited with status %d", h->in->name,
			    h->exit_status);
		if (h->fail == EF_NONE && o->write_error != NULL)
			error("%s: %s", h->in->name, o->write_error);
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
		json_dumpf(j, stdout, JSON_COMPACT | JSON_PRESERVE_ORDER);
		fputc('\n', stdout);
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

/* Print hosts grouped by identical results (ClusterShell -b). */
static void
print_gathered(struct exec_run *r, struct engine_host *hosts, size_t n)
{
	size_t i, j, count;
	int *printed = xcalloc(n + 1, sizeof *printed), s;
	char *safe;

	for (i = 0; i < n; i++) {
		const struct host_out *o = &r->outs[i];
		if (printed[i])
			continue;
		printf("==== %s", hosts[i].in->name);
		count = 1;
		for (j = i + 1; j < n; j++) {
			if (!printed[j] &&
			    same_result(r, &hosts[i], &hosts[j])) {
				printed[j] = 1;
				printf(",%s", hosts[j].in->name);
				count++;
			}
		}
		printf(" (%zu host%s): ", count, count == 1 ? "" : "s");
		if (hosts[i].fail != EF_NONE)
			printf("failed: %s\n", engine_fail_code(hosts[i].fail));
		else if (hosts[i].exit_signal != NULL) {
			safe = vis_str(hosts[i].exit_signal);
			printf("killed by signal %s\n", safe);
			free(safe);
		} else
			printf("exit %d\n", hosts[i].exit_status);
		if (hosts[i].fail != EF_NONE) {
			for (j = i; j < n; j++) {
				if (j == i ||
				    (printed[j] &&
					hosts[j].fail == hosts[i].fail &&
					same_result(r, &hosts[i], &hosts[j]))) {
					safe = vis_str(hosts[j].fail_msg);
					printf("  %s: %s\n", hosts[j].in->name,
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
				printf("---- stderr\n");
			fwrite(b->data, 1, b->len, stdout);
			if (b->len > 0 && b->data[b->len - 1] != '\n')
				printf("\n");
			if (b->truncated)
				printf("[output truncated at %d bytes]\n",
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
	remote->ops.output = on_output;
	remote->ops.done = on_done;
	remote->ops.arg = &run;
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
		if (remote_run(remote, &set) != 0) {
			status = cmd_fail(
			    GF_EHOSTS, xstrdup("cannot start the event loop"));
			goto out;
		}
	}
	progress_clear(&run);
	if (run.mode == MODE_GATHER)
		print_gathered(&run, remote->hosts, remote->n);
	if (set.keep_open && run.by_reason[EF_INTERRUPTED] == 0) {
		check_reinjected(remote, &set);
		probe_journals(remote, ctx->fleet->config);
	}
	fflush(stdout);
	status = print_summary(&run);
out:
	free_outputs(&run);
	remote_close(remote);
	free(command);
	free(stdin_data);
	return status;
}

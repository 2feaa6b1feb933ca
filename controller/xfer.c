/* Push and pull files with rsync over OpenSSH, or a tar stream without it. */

#include <sys/stat.h>
#include <sys/wait.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "hostkey.h"
#include "log.h"
#include "misc.h"
#include "sshexport.h"
#include "status.h"
#include "vis.h"
#include "xfer.h"
#include "xmalloc.h"

#define ERR_MAX	  4096
#define LINE_MAX_ 1024
#define RELAY_MAX 65536
#define SSH_OPTS                                                               \
	"-o BatchMode=yes -o ControlPath=none -o ConnectTimeout=10 "           \
	"-o ServerAliveInterval=15"
#define SWEEP_PREFIX "gpufleet-xfer."
#define PROBE_CMD    "command -v rsync >/dev/null 2>&1 && echo rsync || echo none"

enum step { STEP_WAIT, STEP_PROBE, STEP_XFER, STEP_DONE };

/* One instance's transfer: its child processes and what they said. */
struct job {
	const struct instance *in;
	struct xfer_host *h;
	enum step step;
	pid_t pid[2]; /* the tar fallback is a pipeline of two */
	int status[2];
	int fd[2];    /* stdout, stderr of the children; -1 when closed */
	int relay[2]; /* tar: read from one child, written to the other */
	char *rbuf;   /* what was read from relay[0], not yet written */
	size_t rlen, roff;
	char line[LINE_MAX_];
	size_t linelen;
	struct misc_buf out; /* the probe's answer */
	struct misc_buf err;
	struct xfer_progress prog;
	struct xfer_stats stats;
	char *tmp;   /* pull by tar: the directory unpacked into */
	char *local; /* pull: LOCAL_DIR/NAME */
	int64_t start_ms;
};

struct run {
	const struct xfer_req *req;
	const char *cfg; /* the ssh_config written for this run */
	char *ssh_e;	 /* rsync -e: ssh with that config */
	struct job *jobs;
	size_t n;
	int lines_drawn;
};

static volatile sig_atomic_t interrupted;

static int64_t now_ms(void);
static void on_signal(int);
static char *write_config(
    struct fleet *, struct instance *, size_t, char **, char **);
static void remove_tree(const char *);
static void sweep(const char *);
static pid_t spawn(char *const[], int, int, int);
static int start_probe(struct run *, struct job *);
static int start_rsync(struct run *, struct job *);
static int start_tar(struct run *, struct job *);
static void job_fail(struct job *, const char *, ...)
    __attribute__((format(printf, 2, 3)));
static void job_fail_output(struct job *, const char *);
static void job_read(struct job *, int);
static void job_relay(const struct run *, struct job *, int);
static void job_line(struct job *, const char *);
static void job_ended(struct run *, struct job *);
static int pull_install(struct job *, char **);
static void progress_draw(struct run *);
static void progress_clear(struct run *);

static int64_t
now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void
on_signal(int signo)
{
	(void)signo;
	interrupted = 1;
}

/* 1 if rsync is in this machine's PATH. */
int
xfer_have_rsync(void)
{
	const char *path = getenv("PATH");
	char *copy, *dir, *last, *file;
	int found = 0;

	if (path == NULL)
		path = "/usr/bin:/bin";
	copy = xstrdup(path);
	for (dir = strtok_r(copy, ":", &last); dir != NULL && !found;
	     dir = strtok_r(NULL, ":", &last)) {
		xasprintf(&file, "%s/rsync", *dir == '\0' ? "." : dir);
		found = access(file, X_OK) == 0;
		free(file);
	}
	free(copy);
	return found;
}

/*
 * A path as given on the command line: not empty, no control characters
 * (a newline in a name is almost always a mistake, and the tar fallback's
 * file lists could not hold it). 0, or -1 with *cause.
 */
int
xfer_check_path(const char *path, char **cause)
{
	const char *p;

	if (*path == '\0') {
		xasprintf(cause, "an empty path");
		return -1;
	}
	for (p = path; *p != '\0'; p++) {
		if ((unsigned char)*p < 0x20 || *p == 0x7f) {
			xasprintf(cause, "a path with a control character");
			return -1;
		}
	}
	return 0;
}

/*
 * A remote path for rsync --protect-args, which expands no ~: a leading
 * "~/" goes (rsync's remote side starts in the login directory) and "~"
 * is ".". Caller frees.
 */
char *
xfer_remote_path(const char *path)
{
	if (strcmp(path, "~") == 0)
		return xstrdup(".");
	if (strncmp(path, "~/", 2) == 0) {
		path += 2;
		while (*path == '/')
			path++;
		return xstrdup(*path == '\0' ? "." : path);
	}
	return xstrdup(path);
}

/*
 * The rsync command line for one instance, NULL-terminated (caller frees
 * with xfer_argv_free). ssh_e is the -e command; local is LOCAL_DIR/NAME
 * for a pull, ignored for a push.
 */
char **
xfer_rsync_argv(const struct xfer_req *req, const char *ssh_e, const char *name,
    const char *local)
{
	char **argv;
	char *rp;
	size_t n = 0, i;

	argv = xcalloc(16 + req->npaths, sizeof *argv);
	argv[n++] = xstrdup("rsync");
	argv[n++] = xstrdup("-rlpt");
	argv[n++] = xstrdup("--partial-dir=" XFER_PARTIAL_DIR);
	argv[n++] = xstrdup("--protect-args");
	xasprintf(&argv[n++], "--timeout=%d", req->timeout);
	argv[n++] = xstrdup("--no-human-readable");
	argv[n++] = xstrdup("--info=progress2");
	argv[n++] = xstrdup("--stats");
	if (req->dry_run)
		argv[n++] = xstrdup("--dry-run");
	if (req->delete)
		argv[n++] = xstrdup("--delete");
	argv[n++] = xstrdup("-e");
	argv[n++] = xstrdup(ssh_e);
	argv[n++] = xstrdup("--");
	for (i = 0; i < req->npaths; i++) {
		if (req->dir == XFER_PUSH)
			argv[n++] = xstrdup(req->paths[i]);
		else {
			rp = xfer_remote_path(req->paths[i]);
			xasprintf(&argv[n++], "%s:%s", name, rp);
			free(rp);
		}
	}
	if (req->dir == XFER_PUSH) {
		rp = xfer_remote_path(req->dest);
		xasprintf(&argv[n++], "%s:%s/", name, rp);
		free(rp);
	} else
		xasprintf(&argv[n++], "%s/", local);
	argv[n] = NULL;
	return argv;
}

void
xfer_argv_free(char **argv)
{
	size_t i;

	if (argv == NULL)
		return;
	for (i = 0; argv[i] != NULL; i++)
		free(argv[i]);
	free(argv);
}

/* A count with thousands separators (rsync's, unless -h0) read. */
static int
parse_count(const char **pp, uint64_t *v)
{
	const char *p = *pp;
	uint64_t n = 0;
	int digits = 0;

	for (; (*p >= '0' && *p <= '9') || (*p == ',' && digits); p++) {
		if (*p == ',')
			continue;
		if (n > (UINT64_MAX - 9) / 10)
			return -1;
		n = n * 10 + (uint64_t)(*p - '0');
		digits++;
	}
	if (digits == 0)
		return -1;
	*v = n;
	*pp = p;
	return 0;
}

/*
 * One line of rsync --info=progress2: "  4194304  50%  3.99MB/s  0:00:01
 * (xfr#1, to-chk=0/1)". 0 with *p filled, -1 for any other line.
 */
int
xfer_parse_progress(const char *line, struct xfer_progress *p)
{
	uint64_t bytes, pct;

	while (*line == ' ')
		line++;
	if (parse_count(&line, &bytes) != 0 || *line != ' ')
		return -1;
	while (*line == ' ')
		line++;
	if (parse_count(&line, &pct) != 0 || *line != '%' || pct > 100)
		return -1;
	p->bytes = bytes;
	p->percent = (int)pct;
	return 0;
}

/*
 * One line of rsync --stats: the files and bytes transferred. 1 if the
 * line was one of them (*s updated), else 0.
 */
int
xfer_parse_stats(const char *line, struct xfer_stats *s)
{
	static const char *const files[] = {
		"Number of regular files transferred: ",
		"Number of files transferred: ", /* rsync before 3.1 */
	};
	static const char bytes[] = "Total transferred file size: ";
	const char *p;
	uint64_t v;
	size_t i;

	for (i = 0; i < sizeof files / sizeof files[0]; i++) {
		if (strncmp(line, files[i], strlen(files[i])) == 0) {
			p = line + strlen(files[i]);
			if (parse_count(&p, &v) != 0 || *p != '\0')
				return 0;
			s->files = v;
			return 1;
		}
	}
	if (strncmp(line, bytes, strlen(bytes)) == 0) {
		p = line + strlen(bytes);
		if (parse_count(&p, &v) != 0 || strcmp(p, " bytes") != 0)
			return 0;
		s->bytes = v;
		return 1;
	}
	return 0;
}

/* "512 B", "8.0 MiB": a size for people. Caller frees. */
char *
xfer_size(uint64_t n)
{
	static const char *const unit[] = { "KiB", "MiB", "GiB", "TiB" };
	double v = (double)n;
	size_t i = 0;
	char *s;

	if (n < 1024) {
		xasprintf(&s, "%llu B", (unsigned long long)n);
		return s;
	}
	v /= 1024;
	while (v >= 1024 && i < sizeof unit / sizeof unit[0] - 1) {
		v /= 1024;
		i++;
	}
	xasprintf(&s, "%.1f %s", v, unit[i]);
	return s;
}

/*
 * The fleet's ssh_config for the instances (sshexport_render), written
 * 0600 into a new 0700 directory (*dir, caller removes and frees). The
 * known_hosts file it names is brought up to date first.
 */
static char *
write_config(struct fleet *fleet, struct instance *list, size_t n, char **dir,
    char **cause)
{
	struct inventory *inv;
	const char *tmpdir = getenv("TMPDIR");
	char *text = NULL, *path = NULL, *tmpl;
	size_t len, off = 0;
	ssize_t w;
	int fd;

	*dir = NULL;
	if (fleet_inventory(fleet, &inv, cause) != 0 ||
	    sshexport_render(inv, fleet->config, list, n, NULL, &text, cause) !=
		0 ||
	    hostkey_sync(inv, cause) != 0) {
		free(text);
		return NULL;
	}
	if (tmpdir == NULL || *tmpdir != '/')
		tmpdir = "/tmp";
	sweep(tmpdir);
	xasprintf(
	    &tmpl, "%s/" SWEEP_PREFIX "%ld.XXXXXX", tmpdir, (long)getpid());
	if (mkdtemp(tmpl) == NULL) { /* mode 0700 */
		xasprintf(cause, "cannot create a directory in %s: %s", tmpdir,
		    strerror(errno));
		free(tmpl);
		free(text);
		return NULL;
	}
	*dir = tmpl;
	xasprintf(&path, "%s/ssh_config", tmpl);
	fd = open(
	    path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	len = strlen(text);
	while (fd != -1 && off < len &&
	    ((w = write(fd, text + off, len - off)) > 0 || errno == EINTR)) {
		if (w > 0)
			off += (size_t)w;
	}
	if (fd == -1 || off < len || close(fd) != 0) {
		xasprintf(cause, "cannot write %s: %s", path, strerror(errno));
		if (fd != -1 && off < len)
			close(fd);
		free(path);
		path = NULL;
	}
	free(text);
	return path;
}

static int
remove_entry(const char *path, const struct stat *st, int type, struct FTW *f)
{
	(void)st;
	(void)f;
	if (type == FTW_DP)
		rmdir(path);
	else
		unlink(path);
	return 0;
}

/* rm -rf path, never following a link. */
static void
remove_tree(const char *path)
{
	nftw(path, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}

/*
 * Remove what a transfer killed before it could (its directory of
 * ssh_config, named with its pid: gpufleet-xfer.PID.XXXXXX) left in
 * tmpdir: ours, and only where that process is gone.
 */
static void
sweep(const char *tmpdir)
{
	DIR *d;
	struct dirent *e;
	struct stat st;
	char *path, *end;
	long pid;

	if ((d = opendir(tmpdir)) == NULL)
		return;
	while ((e = readdir(d)) != NULL) {
		if (strncmp(e->d_name, SWEEP_PREFIX, strlen(SWEEP_PREFIX)) != 0)
			continue;
		errno = 0;
		pid = strtol(e->d_name + strlen(SWEEP_PREFIX), &end, 10);
		if (errno != 0 || *end != '.' || !misc_pid_gone(pid))
			continue;
		xasprintf(&path, "%s/%s", tmpdir, e->d_name);
		if (lstat(path, &st) == 0 && S_ISDIR(st.st_mode) &&
		    st.st_uid == getuid())
			remove_tree(path);
		free(path);
	}
	closedir(d);
}

/*
 * Start argv with stdin from in (-1: /dev/null), stdout to out and stderr
 * to err. Returns the pid, or -1.
 */
static pid_t
spawn(char *const argv[], int in, int out, int err)
{
	pid_t pid;
	int null;

	if ((pid = fork()) != 0)
		return pid;
	signal(SIGINT, SIG_DFL);
	signal(SIGTERM, SIG_DFL);
	signal(SIGPIPE, SIG_DFL);
	if (in == -1 && (null = open("/dev/null", O_RDONLY)) != -1)
		in = null;
	if (dup2(in, STDIN_FILENO) == -1 || dup2(out, STDOUT_FILENO) == -1 ||
	    dup2(err, STDERR_FILENO) == -1)
		_exit(127);
	execvp(argv[0], argv);
	dprintf(STDERR_FILENO, "cannot run %s: %s\n", argv[0], strerror(errno));
	_exit(127);
}

/* Two close-on-exec pipes, or none. */
static int
pipe_pair(int a[2], int b[2])
{
	if (pipe2(a, O_CLOEXEC) != 0)
		return -1;
	if (pipe2(b, O_CLOEXEC) != 0) {
		close(a[0]);
		close(a[1]);
		return -1;
	}
	return 0;
}

/* Pipes for a job's stdout and stderr; the write ends in w[]. */
static int
job_pipes(struct job *j, int w[2])
{
	int o[2], e[2];

	if (pipe_pair(o, e) != 0)
		return -1;
	j->fd[0] = o[0];
	j->fd[1] = e[0];
	w[0] = o[1];
	w[1] = e[1];
	j->linelen = 0;
	j->err.len = 0;
	j->err.truncated = 0;
	j->out.len = 0;
	j->pid[0] = j->pid[1] = -1;
	j->status[0] = j->status[1] = 0;
	return 0;
}

/* Ask the instance whether it has rsync (and so check the connection). */
static int
start_probe(struct run *r, struct job *j)
{
	char *argv[] = { "ssh", "-F", (char *)r->cfg, "-o", "BatchMode=yes",
		"-o", "ControlPath=none", "-o", "ConnectTimeout=10",
		(char *)j->in->name, PROBE_CMD, NULL };
	int w[2];

	if (job_pipes(j, w) != 0)
		return -1;
	j->pid[0] = spawn(argv, -1, w[0], w[1]);
	close(w[0]);
	close(w[1]);
	j->step = STEP_PROBE;
	return j->pid[0] == -1 ? -1 : 0;
}

static int
start_rsync(struct run *r, struct job *j)
{
	char **argv;
	int w[2];

	if (job_pipes(j, w) != 0)
		return -1;
	argv = xfer_rsync_argv(r->req, r->ssh_e, j->in->name, j->local);
	j->pid[0] = spawn(argv, -1, w[0], w[1]);
	xfer_argv_free(argv);
	close(w[0]);
	close(w[1]);
	j->step = STEP_XFER;
	misc_test_point("xfer:2");
	return j->pid[0] == -1 ? -1 : 0;
}

/*
 * The remote side of a push by tar: unpack stdin into a new directory
 * beside the files, then rename each file into place (directories made
 * first), so a broken stream leaves only that directory, which goes.
 * dest is read as rsync reads it (xfer_remote_path: "~" is the login
 * directory, where the command starts). Caller frees.
 */
char *
xfer_tar_push_script(const char *dest)
{
	char *rp = xfer_remote_path(dest), *q = misc_quote_path(rp), *s;

	xasprintf(&s,
	    "set -e; d=%s; mkdir -p \"$d\"; d=$(cd \"$d\" && pwd); "
	    "t=$(mktemp -d \"$d/" XFER_TMP_PREFIX "XXXXXX\"); "
	    "trap 'rm -rf \"$t\"' EXIT; tar -xpf - -C \"$t\"; cd \"$t\"; "
	    "find . -mindepth 1 -type d -exec sh -c "
	    "'for p; do mkdir -p \"$0/$p\"; done' \"$d\" {} +; "
	    "find . -mindepth 1 ! -type d -exec sh -c "
	    "'for p; do mv -f \"$p\" \"$0/$p\"; done' \"$d\" {} +; "
	    "echo ok",
	    q);
	free(q);
	free(rp);
	return s;
}

/*
 * The remote side of a pull by tar: each path as tar -C DIR BASE (a
 * trailing / or a bare "~" as the directory's content, as rsync reads
 * them; xfer_remote_path). Caller frees.
 */
char *
xfer_tar_pull_script(const struct xfer_req *req)
{
	struct misc_buf b = { NULL, 0, 0, 0 };
	char *q, *s, *rp;
	size_t i, len;

	misc_buf_add(&b, "set -e; tar -cf -", strlen("set -e; tar -cf -"), 0);
	for (i = 0; i < req->npaths; i++) {
		rp = xfer_remote_path(req->paths[i]);
		len = strlen(rp);
		q = misc_quote_path(rp);
		if ((len > 0 && rp[len - 1] == '/') || strcmp(rp, ".") == 0)
			xasprintf(&s, " -C %s .", q);
		else
			xasprintf(&s,
			    " -C \"$(dirname -- %s)\" \"$(basename -- %s)\"", q,
			    q);
		misc_buf_add(&b, s, strlen(s), 0);
		free(s);
		free(q);
		free(rp);
	}
	return b.data;
}

/* nftw walks (one at a time): what they were given and what they found. */
static const char *install_from, *install_to;
static uint64_t install_files, install_bytes;
static int install_errno;

static int
count_entry(const char *path, const struct stat *st, int type, struct FTW *f)
{
	(void)path;
	(void)type;
	(void)f;
	if (S_ISREG(st->st_mode)) {
		install_files++;
		install_bytes += (uint64_t)st->st_size;
	}
	return 0;
}

/*
 * Pipes a (the first child's stdout, read here) and b (written here, the
 * second child's stdin) for the tar stream, which passes through this
 * process so its bytes are counted (job_relay).
 */
static int
relay_pipes(int a[2], int b[2])
{
	if (pipe_pair(a, b) != 0)
		return -1;
	if (fcntl(a[0], F_SETFL, O_NONBLOCK) == -1 ||
	    fcntl(b[1], F_SETFL, O_NONBLOCK) == -1) {
		close(a[0]);
		close(a[1]);
		close(b[0]);
		close(b[1]);
		return -1;
	}
	return 0;
}

/*
 * A tar pipeline in place of rsync, through ssh's exec channel: the
 * stream goes from the first child through job_relay to the second.
 */
static int
start_tar(struct run *r, struct job *j)
{
	const struct xfer_req *req = r->req;
	char *script, **targv, *tmpl, *base, *dir;
	char *sargv[] = { "ssh", "-F", (char *)r->cfg, "-o", "BatchMode=yes",
		"-o", "ControlPath=none", "-o", "ConnectTimeout=10",
		(char *)j->in->name, NULL, NULL };
	size_t i, n = 0, len;
	int w[2], p[2], q[2];

	if (job_pipes(j, w) != 0)
		return -1;
	if (relay_pipes(p, q) != 0) {
		close(w[0]);
		close(w[1]);
		return -1;
	}
	targv = xcalloc(8 + 3 * req->npaths, sizeof *targv);
	targv[n++] = xstrdup("tar");
	if (req->dir == XFER_PUSH) {
		targv[n++] = xstrdup("-cf");
		targv[n++] = xstrdup("-");
		for (i = 0; i < req->npaths; i++) {
			len = strlen(req->paths[i]);
			dir = xstrdup(req->paths[i]);
			if (len > 1 && dir[len - 1] == '/') {
				targv[n++] = xstrdup("-C");
				targv[n++] = dir;
				targv[n++] = xstrdup(".");
				continue;
			}
			while (len > 1 && dir[len - 1] == '/')
				dir[--len] = '\0';
			if ((base = strrchr(dir, '/')) == NULL) {
				targv[n++] = xstrdup("-C");
				targv[n++] = xstrdup(".");
				targv[n++] = dir;
				continue;
			}
			targv[n++] = xstrdup("-C");
			*base = '\0';
			targv[n++] = xstrdup(base == dir ? "/" : dir);
			targv[n++] = xstrdup(base + 1);
			free(dir);
		}
		install_files = install_bytes = 0;
		for (i = 0; i < req->npaths; i++)
			nftw(req->paths[i], count_entry, 16, FTW_PHYS);
		j->stats.files = install_files;
		j->stats.bytes = install_bytes;
		script = xfer_tar_push_script(req->dest);
		sargv[10] = script;
		j->pid[0] = spawn(targv, -1, p[1], w[1]);
		close(p[1]);
		j->pid[1] = spawn(sargv, q[0], w[0], w[1]);
		close(q[0]);
	} else {
		xasprintf(&tmpl, "%s/" XFER_TMP_PREFIX "XXXXXX", j->local);
		if (mkdtemp(tmpl) == NULL) {
			job_fail(j, "cannot create a directory in %s: %s",
			    j->local, strerror(errno));
			free(tmpl);
			close(p[0]);
			close(p[1]);
			close(q[0]);
			close(q[1]);
			close(w[0]);
			close(w[1]);
			xfer_argv_free(targv);
			return 1;
		}
		j->tmp = tmpl;
		targv[n++] = xstrdup("-xpf");
		targv[n++] = xstrdup("-");
		targv[n++] = xstrdup("-C");
		targv[n++] = xstrdup(tmpl);
		script = xfer_tar_pull_script(req);
		sargv[10] = script;
		j->pid[0] = spawn(sargv, -1, p[1], w[1]);
		close(p[1]);
		j->pid[1] = spawn(targv, q[0], w[0], w[1]);
		close(q[0]);
	}
	j->relay[0] = p[0];
	j->relay[1] = q[1];
	j->rlen = j->roff = 0;
	if (j->rbuf == NULL)
		j->rbuf = xmalloc(RELAY_MAX);
	free(script);
	xfer_argv_free(targv);
	close(w[0]);
	close(w[1]);
	j->step = STEP_XFER;
	j->h->tar = 1;
	misc_test_point("xfer:2");
	return j->pid[0] == -1 || j->pid[1] == -1 ? -1 : 0;
}

static void
job_fail(struct job *j, const char *fmt, ...)
{
	va_list ap;
	char *s;

	va_start(ap, fmt);
	if (vasprintf(&s, fmt, ap) == -1)
		fatal("vasprintf: %s", strerror(errno));
	va_end(ap);
	free(j->h->error);
	j->h->error = vis_str(s);
	free(s);
	j->h->ok = 0;
	j->step = STEP_DONE;
}

/*
 * Why a transfer failed, from what its children wrote on stderr: the last
 * line, leaving out the lines rsync adds after the cause ("rsync error:
 * ... (code 23)" and, since rsync 3.4, the receiver's "write error: Broken
 * pipe" when the sender has gone). NULL if there is no line. Caller frees.
 */
char *
xfer_reason(const char *err)
{
	char *e = xstrdup(err), *nl, *last, *r;
	size_t len = strlen(e);

	for (;;) {
		while (len > 0 && (e[len - 1] == '\n' || e[len - 1] == '\r'))
			e[--len] = '\0';
		nl = strrchr(e, '\n');
		last = nl != NULL ? nl + 1 : e;
		if (nl == NULL ||
		    (strncmp(last, "rsync error: ", 13) != 0 &&
			strstr(last, "write error: Broken pipe") == NULL))
			break;
		*nl = '\0';
		len = (size_t)(nl - e);
	}
	r = *last != '\0' ? xstrdup(last) : NULL;
	free(e);
	return r;
}

/* Fail with what the children said on stderr (xfer_reason), else what. */
static void
job_fail_output(struct job *j, const char *what)
{
	char *why = j->err.len > 0 ? xfer_reason(j->err.data) : NULL;

	job_fail(j, "%s", why != NULL ? why : what);
	free(why);
}

/* One line of rsync's stdout: progress or stats. */
static void
job_line(struct job *j, const char *line)
{
	struct xfer_progress p;

	if (xfer_parse_progress(line, &p) == 0)
		j->prog = p;
	else
		xfer_parse_stats(line, &j->stats);
}

/* Read what one of a job's children wrote on fd k (0 stdout, 1 stderr). */
static void
job_read(struct job *j, int k)
{
	char buf[8192];
	ssize_t n, i;

	n = read(j->fd[k], buf, sizeof buf);
	if (n < 0 && (errno == EINTR || errno == EAGAIN))
		return;
	if (n <= 0) {
		close(j->fd[k]);
		j->fd[k] = -1;
		return;
	}
	if (k == 1) {
		misc_buf_add(&j->err, buf, (size_t)n, ERR_MAX);
		return;
	}
	if (j->step == STEP_PROBE) {
		misc_buf_add(&j->out, buf, (size_t)n, 64);
		return;
	}
	for (i = 0; i < n; i++) {
		if (buf[i] == '\r' || buf[i] == '\n') {
			j->line[j->linelen] = '\0';
			job_line(j, j->line);
			j->linelen = 0;
		} else if (j->linelen < sizeof j->line - 1)
			j->line[j->linelen++] = buf[i];
	}
}

/* Stop passing the tar stream on: each child sees its end of it close. */
static void
relay_close(struct job *j)
{
	int k;

	for (k = 0; k < 2; k++) {
		if (j->relay[k] != -1)
			close(j->relay[k]);
		j->relay[k] = -1;
	}
	j->rlen = j->roff = 0;
}

/*
 * Pass the tar stream on: read from the first child when the buffer is
 * empty (k 0), write what it holds to the second (k 1). The bytes
 * counted for the progress line are those received from the instance
 * (pull) or sent to it (push), tar's headers included; the result's
 * bytes are the files' content, as rsync's --stats counts them.
 */
static void
job_relay(const struct run *r, struct job *j, int k)
{
	ssize_t n;

	if (k == 0) {
		n = read(j->relay[0], j->rbuf, RELAY_MAX);
		if (n < 0 && (errno == EINTR || errno == EAGAIN))
			return;
		if (n < 0) {
			relay_close(j);
			return;
		}
		if (n == 0) {
			close(j->relay[0]);
			j->relay[0] = -1;
			if (j->rlen == 0)
				relay_close(j);
			return;
		}
		j->rlen = (size_t)n;
		j->roff = 0;
		if (r->req->dir == XFER_PULL)
			j->prog.bytes += (uint64_t)n;
		return;
	}
	n = write(j->relay[1], j->rbuf + j->roff, j->rlen - j->roff);
	if (n < 0 && (errno == EINTR || errno == EAGAIN))
		return;
	if (n < 0) { /* the second child has gone: so does the first's pipe */
		relay_close(j);
		return;
	}
	j->roff += (size_t)n;
	if (r->req->dir == XFER_PUSH) {
		j->prog.bytes += (uint64_t)n;
		/* tar's headers make the stream longer than the files */
		j->prog.percent = j->stats.bytes == 0 ? 0
		    : j->prog.bytes >= j->stats.bytes
		    ? 99
		    : (int)(j->prog.bytes * 100 / j->stats.bytes);
	}
	if (j->roff == j->rlen) {
		j->rlen = j->roff = 0;
		if (j->relay[0] == -1)
			relay_close(j);
	}
}

/* Move one entry of the unpacked tree to its place under install_to. */
static int
install_entry(const char *path, const struct stat *st, int type, struct FTW *f)
{
	struct stat cur;
	char *to;
	int r = 0;

	(void)f;
	if (strcmp(path, install_from) == 0)
		return 0;
	xasprintf(&to, "%s%s", install_to, path + strlen(install_from));
	if (type == FTW_D) {
		/* A link (or file) where the instance now has a directory is
		 * replaced, as rsync does: renaming through it would write
		 * outside LOCAL_DIR/NAME. */
		if (lstat(to, &cur) == 0 && !S_ISDIR(cur.st_mode) &&
		    unlink(to) != 0)
			r = -1;
		else if (mkdir(to, st->st_mode & 07777) != 0 && errno != EEXIST)
			r = -1;
	} else if (type != FTW_DP) {
		if (rename(path, to) != 0)
			r = -1;
		else if (S_ISREG(st->st_mode)) {
			install_files++;
			install_bytes += (uint64_t)st->st_size;
		}
	}
	if (r != 0)
		install_errno = errno;
	free(to);
	return r;
}

/* A pull by tar arrived whole: rename its files into LOCAL_DIR/NAME. */
static int
pull_install(struct job *j, char **cause)
{
	install_from = j->tmp;
	install_to = j->local;
	install_files = install_bytes = 0;
	install_errno = 0;
	if (nftw(j->tmp, install_entry, 16, FTW_PHYS) != 0) {
		xasprintf(cause, "cannot move the files into %s: %s", j->local,
		    strerror(install_errno != 0 ? install_errno : errno));
		return -1;
	}
	j->stats.files = install_files;
	j->stats.bytes = install_bytes;
	return 0;
}

/* A job's children have all exited: take the next step or finish. */
static void
job_ended(struct run *r, struct job *j)
{
	int st = j->status[0], st2 = j->status[1];
	char *cause = NULL;

	if (j->step == STEP_PROBE) {
		if (WIFEXITED(st) && WEXITSTATUS(st) == 0 && j->out.len > 0 &&
		    strncmp(j->out.data, "rsync\n", 6) == 0) {
			if (start_rsync(r, j) < 0)
				job_fail(
				    j, "cannot run rsync: %s", strerror(errno));
		} else if (WIFEXITED(st) && WEXITSTATUS(st) == 0 &&
		    j->out.len > 0 && strncmp(j->out.data, "none\n", 5) == 0) {
			j->h->tar = 1;
			if (r->req->delete) {
				/* no copy without the deletion asked for */
				job_fail(j,
				    "--delete needs rsync on the instance (the "
				    "tar stream cannot delete)");
			} else if (r->req->dry_run) {
				j->h->ok = 1;
				j->step = STEP_DONE;
			} else if (start_tar(r, j) < 0)
				job_fail(
				    j, "cannot run tar: %s", strerror(errno));
		} else if (WIFSIGNALED(st))
			job_fail(j, "interrupted");
		else
			job_fail_output(j, "the instance did not answer");
		return;
	}
	if (j->h->tar) {
		if (!WIFEXITED(st) || WEXITSTATUS(st) != 0 || !WIFEXITED(st2) ||
		    WEXITSTATUS(st2) != 0) {
			job_fail_output(j,
			    WIFSIGNALED(st) || WIFSIGNALED(st2)
				? "interrupted"
				: "the tar stream failed");
		} else if (r->req->dir == XFER_PULL &&
		    pull_install(j, &cause) != 0) {
			job_fail(j, "%s", cause);
			free(cause);
		} else
			j->h->ok = 1;
		if (j->tmp != NULL) {
			remove_tree(j->tmp);
			free(j->tmp);
			j->tmp = NULL;
		}
	} else if (WIFEXITED(st) && WEXITSTATUS(st) == 0)
		j->h->ok = 1;
	else if (WIFSIGNALED(st))
		job_fail(j, "interrupted");
	else
		job_fail_output(j, "rsync failed");
	j->h->files = j->stats.files;
	j->h->bytes = j->stats.bytes;
	j->h->duration_ms = now_ms() - j->start_ms;
	j->step = STEP_DONE;
}

static void
progress_clear(struct run *r)
{
	if (r->lines_drawn > 0) {
		fprintf(stderr, "\r\033[%dA\033[J", r->lines_drawn);
		r->lines_drawn = 0;
	}
}

/* One line per transfer under way (bytes, rate, ETA), then the total. */
static void
progress_draw(struct run *r)
{
	uint64_t total = 0, rate;
	int64_t ms, eta;
	size_t i, active = 0;
	char *sz, *rs;

	if (!r->req->progress)
		return;
	progress_clear(r);
	for (i = 0; i < r->n; i++) {
		struct job *j = &r->jobs[i];
		if (j->step == STEP_DONE || j->step == STEP_WAIT)
			continue;
		active++;
		ms = now_ms() - j->start_ms;
		rate = ms > 0 ? j->prog.bytes * 1000 / (uint64_t)ms : 0;
		sz = xfer_size(j->prog.bytes);
		rs = xfer_size(rate);
		fprintf(stderr, "%s: %s%s %3d%% %s/s", j->in->name,
		    j->h->tar ? "(tar) " : "", sz, j->prog.percent, rs);
		if (rate > 0 && j->prog.percent > 0 && j->prog.percent < 100) {
			eta = (int64_t)((j->prog.bytes * 100 /
						(uint64_t)j->prog.percent -
					    j->prog.bytes) /
			    rate);
			fprintf(stderr, " ETA %lld:%02lld", (long long)eta / 60,
			    (long long)eta % 60);
		}
		fputs("\033[K\n", stderr);
		free(sz);
		free(rs);
		total += j->prog.bytes;
		r->lines_drawn++;
	}
	for (i = 0; i < r->n; i++) {
		if (r->jobs[i].step == STEP_DONE)
			total += r->jobs[i].h->bytes;
	}
	sz = xfer_size(total);
	fprintf(stderr, "total: %s, %zu in flight\033[K\n", sz, active);
	free(sz);
	r->lines_drawn++;
	fflush(stderr);
}

/*
 * Transfer req's paths for each of the n instances of list (updated in
 * place, as sshexport_render does), at most req->fanout at once. Returns
 * 0 with *res filled (each instance's result; caller frees with
 * xfer_result_free), or a negative status with *cause when nothing could
 * start.
 */
int
xfer_run(struct fleet *fleet, struct instance *list, size_t n,
    const struct xfer_req *req, struct xfer_result *res, char **cause)
{
	struct inventory *inv;
	struct hostkey k;
	struct sigaction sa, old_int, old_term;
	struct pollfd *pfd;
	struct job **owner;
	struct run r;
	char *dir = NULL, *qcfg;
	size_t i, next = 0, running = 0, npfd;
	int64_t start = now_ms(), last_draw = 0;
	int rc = 0, k2, status, got, killed = 0;
	pid_t pid;

	memset(res, 0, sizeof *res);
	memset(&r, 0, sizeof r);
	r.req = req;
	if ((rc = fleet_inventory(fleet, &inv, cause)) != 0)
		return rc;
	if ((r.cfg = write_config(fleet, list, n, &dir, cause)) == NULL) {
		rc = -GF_EUSAGE;
		goto out;
	}
	misc_test_point("xfer:1");
	qcfg = misc_shell_quote(r.cfg);
	xasprintf(&r.ssh_e, "ssh -F %s " SSH_OPTS, qcfg);
	free(qcfg);

	res->n = r.n = n;
	res->hosts = xcalloc(n, sizeof *res->hosts);
	r.jobs = xcalloc(n, sizeof *r.jobs);
	for (i = 0; i < n; i++) {
		struct job *j = &r.jobs[i];
		j->in = &list[i];
		j->h = &res->hosts[i];
		j->h->name = xstrdup(list[i].name);
		j->fd[0] = j->fd[1] = -1;
		j->relay[0] = j->relay[1] = -1;
		j->pid[0] = j->pid[1] = -1;
		if ((got = hostkey_get(inv, list[i].id, &k, cause)) < 0) {
			rc = got;
			goto out;
		}
		hostkey_clear(&k);
		if (got != 0) /* none pinned: ssh would refuse it */
			job_fail(j,
			    "no host key pinned yet: `gpufleet status %s` pins "
			    "one",
			    list[i].name);
	}

	interrupted = 0;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_signal;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, &old_int);
	sigaction(SIGTERM, &sa, &old_term);
	pfd = xcalloc(3 * n + 1, sizeof *pfd);
	owner = xcalloc(3 * n + 1, sizeof *owner);
	for (;;) {
		while (
		    !interrupted && running < (size_t)req->fanout && next < n) {
			struct job *j = &r.jobs[next++];
			if (j->step == STEP_DONE)
				continue;
			j->start_ms = now_ms();
			if (req->dir == XFER_PULL) {
				xasprintf(
				    &j->local, "%s/%s", req->dest, j->in->name);
				if (!req->dry_run &&
				    misc_mkdirs(j->local, cause) != 0) {
					job_fail(j, "%s", *cause);
					free(*cause);
					*cause = NULL;
					continue;
				}
			}
			if (start_probe(&r, j) != 0) {
				job_fail(
				    j, "cannot run ssh: %s", strerror(errno));
				continue;
			}
			running++;
		}
		if (running == 0)
			break;
		npfd = 0;
		for (i = 0; i < n; i++) {
			for (k2 = 0; k2 < 2; k2++) {
				if (r.jobs[i].fd[k2] == -1)
					continue;
				pfd[npfd].fd = r.jobs[i].fd[k2];
				pfd[npfd].events = POLLIN;
				owner[npfd++] = &r.jobs[i];
			}
			if (r.jobs[i].rlen > 0 && r.jobs[i].relay[1] != -1) {
				pfd[npfd].fd = r.jobs[i].relay[1];
				pfd[npfd].events = POLLOUT;
				owner[npfd++] = &r.jobs[i];
			} else if (r.jobs[i].relay[0] != -1) {
				pfd[npfd].fd = r.jobs[i].relay[0];
				pfd[npfd].events = POLLIN;
				owner[npfd++] = &r.jobs[i];
			}
		}
		if (npfd > 0 && poll(pfd, npfd, 500) > 0) {
			for (i = 0; i < npfd; i++) {
				if (pfd[i].revents == 0)
					continue;
				struct job *j = owner[i];
				if (pfd[i].fd == j->relay[0])
					job_relay(&r, j, 0);
				else if (pfd[i].fd == j->relay[1])
					job_relay(&r, j, 1);
				else
					job_read(
					    j, j->fd[0] == pfd[i].fd ? 0 : 1);
			}
		} else if (npfd == 0)
			poll(NULL, 0, 50);
		if (interrupted && !killed) {
			killed = 1;
			for (i = 0; i < n; i++) {
				for (k2 = 0; k2 < 2; k2++) {
					if (r.jobs[i].pid[k2] > 0)
						kill(
						    r.jobs[i].pid[k2], SIGTERM);
				}
			}
		}
		for (i = 0; i < n; i++) {
			struct job *j = &r.jobs[i];
			if (j->step != STEP_PROBE && j->step != STEP_XFER)
				continue;
			for (k2 = 0; k2 < 2; k2++) {
				if (j->pid[k2] <= 0)
					continue;
				pid = waitpid(j->pid[k2], &status, WNOHANG);
				if (pid == j->pid[k2]) {
					j->status[k2] = status;
					j->pid[k2] = -1;
				}
			}
			if (j->pid[0] > 0 || j->pid[1] > 0 || j->fd[0] != -1 ||
			    j->fd[1] != -1 || j->relay[0] != -1 ||
			    j->relay[1] != -1)
				continue;
			if (interrupted)
				job_fail(j, "interrupted");
			else
				job_ended(&r, j);
			if (j->step == STEP_DONE)
				running--;
			if (j->step == STEP_DONE && req->progress) {
				/* drawn again below, without it */
				last_draw = 0;
			}
		}
		if (req->progress && now_ms() - last_draw >= 500) {
			progress_draw(&r);
			last_draw = now_ms();
		}
	}
	progress_clear(&r);
	free(pfd);
	free(owner);
	sigaction(SIGINT, &old_int, NULL);
	sigaction(SIGTERM, &old_term, NULL);
	res->interrupted = interrupted;
	for (i = 0; i < n; i++) {
		struct job *j = &r.jobs[i];
		if (j->step != STEP_DONE)
			job_fail(j, "interrupted");
		res->nfailed += !res->hosts[i].ok;
		res->bytes += res->hosts[i].bytes;
		res->files += res->hosts[i].files;
	}
	res->duration_ms = now_ms() - start;
out:
	for (i = 0; r.jobs != NULL && i < n; i++) {
		free(r.jobs[i].out.data);
		free(r.jobs[i].err.data);
		free(r.jobs[i].local);
		free(r.jobs[i].rbuf);
		relay_close(&r.jobs[i]);
		if (r.jobs[i].tmp != NULL) {
			remove_tree(r.jobs[i].tmp);
			free(r.jobs[i].tmp);
		}
	}
	free(r.jobs);
	free(r.ssh_e);
	if (dir != NULL) {
		remove_tree(dir);
		free(dir);
	}
	free((char *)r.cfg);
	if (rc != 0)
		xfer_result_free(res);
	return rc;
}

void
xfer_result_free(struct xfer_result *res)
{
	size_t i;

	for (i = 0; i < res->n; i++) {
		free(res->hosts[i].name);
		free(res->hosts[i].error);
	}
	free(res->hosts);
	memset(res, 0, sizeof *res);
}

/*
 * Host state from /proc (or a captured copy of it: every path is relative
 * to the proc root) and statvfs(2) for the disks. A value that cannot be
 * read stays unknown and is printed as null.
 */

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "agent.h"
#include "gpufleet/report.h"
#include "../controller/xmalloc.h"

/* Bytes read of a process's cmdline: enough for an sshd title. */
#define HOST_CMDLINE_MAX 512
/* Ancestors followed from the agent before giving up (a loop). */
#define HOST_MAX_DEPTH 256
/* Bytes read of a process's environment for the session mark. */
#define HOST_ENVIRON_MAX 65536
/* Test knob: count only sessions that carry this NAME=VALUE (WATCH.md). */
#define HOST_SESSION_MARK "GPUFLEET_AGENT_SESSION_MARK"

/* One process, as the session count needs it. */
struct host_proc {
	long long pid;
	long long ppid;
	char comm[64];
	int kind;
	int marked; /* carries the session mark (with the test knob) */
	int runner; /* a gpufleet-agent serve: gpufleet's held session */
};

enum { PROC_OTHER, PROC_SSH, PROC_TERMINAL };

static int host_read(struct buf *, const char *, const char *);
static int host_ll(const char *, long long *);
static int host_double(const char *, double *);
static size_t host_tokens(char *, char **, size_t);
static char *host_line_value(const char *, const char *);
static void host_names(struct host *, const char *);
static void host_stat(struct host *, const char *);
static void host_container_start(struct host *, const char *);
static void host_loadavg(struct host *, const char *);
static void host_meminfo(struct host *, const char *);
static void host_disk(struct host_disk *, const char *);
static void host_netdev(struct host *, const char *);
static int host_terminal(const struct host_pstat *);
static int host_proc_cmp(const void *, const void *);
static struct host_proc *host_find(struct host_proc *, size_t, long long);
static int host_below_session(
    struct host_proc *, size_t, const struct host_proc *);
static void host_sessions(struct host *, const char *);
static int host_is_runner(const char *, long long);
static int host_has_env(const char *, long long, const char *);
static void host_keep_marked(
    struct host_proc *, size_t, const char *, const char *);

/* Read root/rel into b (emptied first); 0, or -1 if it cannot be read. */
static int
host_read(struct buf *b, const char *root, const char *rel)
{
	char *path;
	int r;

	buf_free(b);
	xasprintf(&path, "%s/%s", root, rel);
	r = buf_read_file(b, path, 1024 * 1024);
	free(path);
	return r;
}

/* Parse a whole token as a decimal integer; 0, or -1 if it is not one. */
static int
host_ll(const char *s, long long *v)
{
	char *end;

	if (*s != '-' && !isdigit((unsigned char)*s))
		return -1;
	errno = 0;
	*v = strtoll(s, &end, 10);
	if (errno != 0 || end == s || *end != '\0')
		return -1;
	return 0;
}

/* Parse a whole token as a plain decimal number (digits, one point). */
static int
host_double(const char *s, double *v)
{
	const char *p;
	char *end;
	int points = 0;

	if (*s == '\0')
		return -1;
	for (p = s; *p != '\0'; p++) {
		if (*p == '.') {
			if (points++ != 0)
				return -1;
		} else if (!isdigit((unsigned char)*p))
			return -1;
	}
	errno = 0;
	*v = strtod(s, &end);
	if (errno != 0 || end == s || *end != '\0')
		return -1;
	return 0;
}

/* Split s in place at white space into at most max tokens. */
static size_t
host_tokens(char *s, char **tok, size_t max)
{
	size_t n = 0;

	while (n < max) {
		while (*s == ' ' || *s == '\t' || *s == '\n')
			s++;
		if (*s == '\0')
			break;
		tok[n++] = s;
		while (*s != '\0' && *s != ' ' && *s != '\t' && *s != '\n')
			s++;
		if (*s == '\0')
			break;
		*s++ = '\0';
	}
	return n;
}

/*
 * The rest of the line of text that starts with key ("btime", "MemTotal:"),
 * up to the newline, or NULL. Caller frees.
 */
static char *
host_line_value(const char *text, const char *key)
{
	size_t kl = strlen(key);
	const char *p = text, *e;

	while (p != NULL && *p != '\0') {
		if (strncmp(p, key, kl) == 0) {
			p += kl;
			e = strchr(p, '\n');
			return xstrndup(
			    p, e == NULL ? strlen(p) : (size_t)(e - p));
		}
		if ((p = strchr(p, '\n')) != NULL)
			p++;
	}
	return NULL;
}

/* Hostname and kernel release from proc's sys/kernel, else uname(2). */
static void
host_names(struct host *h, const char *proc)
{
	struct buf b = { NULL, 0, 0 };
	struct utsname u;
	int have_uname;

	have_uname = uname(&u) == 0;
	if (host_read(&b, proc, "sys/kernel/hostname") == 0)
		h->hostname = buf_first_line(b.data, b.len);
	if (h->hostname == NULL && have_uname)
		h->hostname = xstrdup(u.nodename);
	if (host_read(&b, proc, "sys/kernel/osrelease") == 0)
		h->kernel = buf_first_line(b.data, b.len);
	if (h->kernel == NULL && have_uname)
		h->kernel = xstrdup(u.release);
	buf_free(&b);
}

/* Boot time ("btime") and the number of CPUs ("cpuN" lines) from stat. */
static void
host_stat(struct host *h, const char *proc)
{
	struct buf b = { NULL, 0, 0 };
	char *v, *tok[2];
	const char *p;
	long long n = 0, t;

	if (host_read(&b, proc, "stat") != 0)
		return;
	if ((v = host_line_value(b.data, "btime ")) != NULL) {
		if (host_tokens(v, tok, 2) == 1 && host_ll(tok[0], &t) == 0 &&
		    t > 0) {
			h->boot_time.set = 1;
			h->boot_time.v = t;
		}
		free(v);
	}
	for (p = b.data; p != NULL && *p != '\0';) {
		if (strncmp(p, "cpu", 3) == 0 && isdigit((unsigned char)p[3]))
			n++;
		if ((p = strchr(p, '\n')) != NULL)
			p++;
	}
	if (n > 0) {
		h->cpus.set = 1;
		h->cpus.v = n;
	}
	buf_free(&b);
}

/*
 * Parse a /proc/PID/stat line. The command name is between the first "("
 * and the last ")", since it may contain both and spaces. Returns 0, or -1
 * if the line is malformed.
 */
int
host_parse_pstat(const char *text, size_t len, struct host_pstat *ps)
{
	const char *open, *close;
	char *s, *tok[20];
	size_t n, i, cl;
	long long v[20];
	int r = -1;

	memset(ps, 0, sizeof *ps);
	if ((open = memchr(text, '(', len)) == NULL)
		return -1;
	close = text + len - 1; /* to the last ")" */
	while (close > open && *close != ')')
		close--;
	if (close == open)
		return -1;
	cl = (size_t)(close - open - 1);
	if (cl >= sizeof ps->comm)
		cl = sizeof ps->comm - 1;
	memcpy(ps->comm, open + 1, cl);
	ps->comm[cl] = '\0';

	/* The pid before the "(", then fields 3 (state) to 22 (starttime). */
	s = xstrndup(text, (size_t)(open - text));
	if (host_tokens(s, tok, 2) != 1 || host_ll(tok[0], &ps->pid) != 0)
		goto out;
	free(s);
	s = xstrndup(close + 1, (size_t)(text + len - close - 1));
	if ((n = host_tokens(s, tok, 20)) < 20)
		goto out;
	for (i = 1; i < 20; i++)
		if (host_ll(tok[i], &v[i]) != 0)
			goto out;
	ps->state = tok[0][0]; /* field 3 */
	ps->ppid = v[1];       /* field 4 */
	ps->pgrp = v[2];       /* field 5 */
	ps->session = v[3];    /* field 6 */
	ps->tty_nr = v[4];     /* field 7 */
	ps->starttime = v[19]; /* field 22, clock ticks after boot */
	r = 0;
out:
	free(s);
	return r;
}

/*
 * Start of PID 1 (the container's start): boot time + its starttime; read
 * from the file named by REPORT_CONTAINER_START_ENV instead when it is set
 * (a test fleet's emulated container).
 */
static void
host_container_start(struct host *h, const char *proc)
{
	struct buf b = { NULL, 0, 0 };
	struct host_pstat ps;
	const char *knob = getenv(REPORT_CONTAINER_START_ENV);
	char *line;
	long long v;
	long hz;

	if (knob != NULL && *knob != '\0') {
		if (buf_read_file(&b, knob, 64) == 0 &&
		    (line = buf_first_line(b.data, b.len)) != NULL) {
			if (host_ll(line, &v) == 0 && v >= 0) {
				h->container_start.set = 1;
				h->container_start.v = v;
			}
			free(line);
		}
		goto out;
	}
	if (!h->boot_time.set || host_read(&b, proc, "1/stat") != 0)
		goto out;
	if (host_parse_pstat(b.data, b.len, &ps) != 0 || ps.starttime < 0)
		goto out;
	if ((hz = sysconf(_SC_CLK_TCK)) <= 0)
		hz = 100;
	h->container_start.set = 1;
	h->container_start.v = h->boot_time.v + ps.starttime / hz;
out:
	buf_free(&b);
}

/* The 1, 5 and 15 minute load averages. */
static void
host_loadavg(struct host *h, const char *proc)
{
	struct buf b = { NULL, 0, 0 };
	char *tok[3];
	size_t i;

	if (host_read(&b, proc, "loadavg") == 0 &&
	    host_tokens(b.data, tok, 3) == 3) {
		for (i = 0; i < 3; i++)
			if (host_double(tok[i], &h->load[i].v) == 0)
				h->load[i].set = 1;
	}
	buf_free(&b);
}

/*
 * MemTotal and MemAvailable. Kernels before 3.14 have no MemAvailable; it
 * is then estimated as MemFree + Buffers + Cached, as free(1) did.
 */
static void
host_meminfo(struct host *h, const char *proc)
{
	static const char *keys[] = {
		"MemTotal:", "MemAvailable:", "MemFree:", "Buffers:", "Cached:"
	};
	struct buf b = { NULL, 0, 0 };
	long long v[5];
	int have[5];
	char *s, *tok[2];
	size_t i;

	if (host_read(&b, proc, "meminfo") != 0)
		return;
	for (i = 0; i < 5; i++) {
		have[i] = 0;
		if ((s = host_line_value(b.data, keys[i])) == NULL)
			continue;
		if (host_tokens(s, tok, 2) >= 1 &&
		    host_ll(tok[0], &v[i]) == 0 && v[i] >= 0)
			have[i] = 1;
		free(s);
	}
	if (have[0]) {
		h->mem_total_kib.set = 1;
		h->mem_total_kib.v = v[0];
	}
	if (have[1]) {
		h->mem_available_kib.set = 1;
		h->mem_available_kib.v = v[1];
	} else if (have[2] && have[3] && have[4]) {
		h->mem_available_kib.set = 1;
		h->mem_available_kib.v = v[2] + v[3] + v[4];
	}
	buf_free(&b);
}

/* Size and space available to unprivileged users of path's filesystem. */
static void
host_disk(struct host_disk *d, const char *path)
{
	struct statvfs sv;
	unsigned long long frsize;

	if (statvfs(path, &sv) != 0)
		return;
	frsize = sv.f_frsize != 0 ? sv.f_frsize : sv.f_bsize;
	d->total_kib.set = d->free_kib.set = 1;
	d->total_kib.v =
	    (long long)((unsigned long long)sv.f_blocks * frsize / 1024);
	d->free_kib.v =
	    (long long)((unsigned long long)sv.f_bavail * frsize / 1024);
}

/* Bytes received and sent over every interface but lo (net/dev). */
static void
host_netdev(struct host *h, const char *proc)
{
	struct buf b = { NULL, 0, 0 };
	char *line, *save, *colon, *name, *tok[9];
	long long rx = 0, tx = 0, r, t;
	size_t n;

	if (host_read(&b, proc, "net/dev") != 0)
		return;
	for (line = strtok_r(b.data, "\n", &save); line != NULL;
	     line = strtok_r(NULL, "\n", &save)) {
		if ((colon = strchr(line, ':')) == NULL)
			continue; /* the two header lines have "|" only */
		*colon = '\0';
		name = line;
		while (*name == ' ')
			name++;
		if (strcmp(name, "lo") == 0)
			continue;
		n = host_tokens(colon + 1, tok, 9);
		if (n < 9 || host_ll(tok[0], &r) != 0 ||
		    host_ll(tok[8], &t) != 0 || r < 0 || t < 0)
			goto out;
		rx += r;
		tx += t;
	}
	h->net_rx_bytes.set = h->net_tx_bytes.set = 1;
	h->net_rx_bytes.v = rx;
	h->net_tx_bytes.v = tx;
out:
	buf_free(&b);
}

/*
 * Whether a process title is that of an sshd session process, the one
 * per login that runs as the user: "sshd: USER@pts/N", "sshd: USER@notty"
 * (OpenSSH 9.8 and later: "sshd-session: ..."). Not the listener, nor the
 * privileged monitor "sshd: USER [priv]", nor one still authenticating.
 */
int
host_is_ssh_session(const char *title)
{
	const char *at;

	if (strncmp(title, "sshd: ", 6) == 0)
		title += 6;
	else if (strncmp(title, "sshd-session: ", 14) == 0)
		title += 14;
	else
		return 0;
	if ((at = strrchr(title, '@')) == NULL || at == title)
		return 0;
	at++;
	return strncmp(at, "pts/", 4) == 0 || strncmp(at, "notty", 5) == 0 ||
	    strncmp(at, "tty", 3) == 0;
}

/*
 * Whether a process leads a session on a terminal: a pseudo-terminal
 * (majors 136-143) or a console or serial tty (major 4), getty excluded.
 */
static int
host_terminal(const struct host_pstat *ps)
{
	long long major = (ps->tty_nr >> 8) & 0xfff;
	size_t cl = strlen(ps->comm);

	if (ps->pid != ps->session || ps->tty_nr <= 0)
		return 0;
	if (major != 4 && (major < 136 || major > 143))
		return 0;
	return !(cl >= 5 && strcmp(ps->comm + cl - 5, "getty") == 0);
}

/* Order of processes by pid (qsort, bsearch). */
static int
host_proc_cmp(const void *a, const void *b)
{
	long long x = ((const struct host_proc *)a)->pid;
	long long y = ((const struct host_proc *)b)->pid;

	return x < y ? -1 : x > y;
}

/* The process with this pid in procs (sorted by pid), or NULL. */
static struct host_proc *
host_find(struct host_proc *procs, size_t n, long long pid)
{
	struct host_proc key;

	key.pid = pid;
	return bsearch(&key, procs, n, sizeof *procs, host_proc_cmp);
}

/* Whether a (strict) ancestor of p is a session that is counted. */
static int
host_below_session(struct host_proc *procs, size_t n, const struct host_proc *p)
{
	long long pid = p->ppid;
	size_t depth;

	for (depth = 0; depth < HOST_MAX_DEPTH && pid > 0; depth++) {
		if ((p = host_find(procs, n, pid)) == NULL)
			return 0;
		if (p->kind != PROC_OTHER)
			return 1;
		pid = p->ppid;
	}
	return 0;
}

/* Whether process pid's environment holds the entry want ("NAME=VALUE"). */
static int
host_has_env(const char *proc, long long pid, const char *want)
{
	struct buf b = { NULL, 0, 0 };
	size_t off, len, wl = strlen(want);
	char *path;
	int found = 0;

	xasprintf(&path, "%s/%lld/environ", proc, pid);
	if (buf_read_file(&b, path, HOST_ENVIRON_MAX) == 0) {
		for (off = 0; off < b.len && !found; off += len + 1) {
			len = strnlen(b.data + off, b.len - off);
			found =
			    len == wl && memcmp(b.data + off, want, wl) == 0;
		}
	}
	free(path);
	buf_free(&b);
	return found;
}

/* Whether process pid is a command runner: gpufleet-agent... serve. */
static int
host_is_runner(const char *proc, long long pid)
{
	struct buf b = { NULL, 0, 0 };
	char *path;
	size_t len;
	int yes = 0;

	xasprintf(&path, "%s/%lld/cmdline", proc, pid);
	if (buf_read_file(&b, path, HOST_CMDLINE_MAX) == 0) {
		len = strnlen(b.data, b.len);
		/* argv[1]; buf's data ends in a NUL past len bytes. */
		yes = len < b.len && strcmp(b.data + len + 1, "serve") == 0;
	}
	free(path);
	buf_free(&b);
	return yes;
}

/*
 * With the test knob GPUFLEET_AGENT_SESSION_MARK=mark (WATCH.md), keep
 * counting only the sessions whose process or a descendant carries the
 * same mark in its environment: the test fleet's instances share one
 * /proc, and must not count each other's sessions.
 */
static void
host_keep_marked(
    struct host_proc *procs, size_t n, const char *proc, const char *mark)
{
	struct host_proc *p;
	size_t i, depth;
	long long pid;
	char *want;

	if (mark == NULL || *mark == '\0')
		return;
	xasprintf(&want, "%s=%s", HOST_SESSION_MARK, mark);
	/* Only a process below a session can mark one: read only theirs. */
	for (i = 0; i < n; i++)
		procs[i].marked = host_below_session(procs, n, &procs[i]) &&
		    host_has_env(proc, procs[i].pid, want);
	free(want);
	/* A marked process marks the sessions above it. */
	for (i = 0; i < n; i++) {
		if (!procs[i].marked)
			continue;
		pid = procs[i].ppid;
		for (depth = 0; depth < HOST_MAX_DEPTH && pid > 0; depth++) {
			if ((p = host_find(procs, n, pid)) == NULL)
				break;
			if (p->kind != PROC_OTHER)
				p->marked = 1;
			pid = p->ppid;
		}
	}
	for (i = 0; i < n; i++)
		if (!procs[i].marked)
			procs[i].kind = PROC_OTHER;
}

/*
 * Count interactive sessions: sshd session processes (with or without a
 * tty, so IDE remote sessions count) plus terminal sessions not opened
 * through sshd or inside tmux/screen (web terminals, docker exec -it,
 * console logins), less the one the agent itself runs in: any counted
 * process among the agent's ancestors (found from proc's "self").
 */
static void
host_sessions(struct host *h, const char *proc)
{
	static const char *skip_parents[] = { "sshd", "sshd-session", "tmux",
		"tmux: server", "screen", "SCREEN", NULL };
	struct buf b = { NULL, 0, 0 };
	struct host_proc *procs = NULL, *p, *parent;
	struct host_pstat ps;
	struct dirent *de;
	size_t n = 0, i, k, depth;
	long long pid, count = 0;
	char rel[64], link[64], *path;
	ssize_t ll;
	DIR *d;

	if ((d = opendir(proc)) == NULL)
		return;
	while ((de = readdir(d)) != NULL) {
		if (!isdigit((unsigned char)de->d_name[0]) ||
		    host_ll(de->d_name, &pid) != 0)
			continue;
		snprintf(rel, sizeof rel, "%lld/stat", pid);
		if (host_read(&b, proc, rel) != 0 ||
		    host_parse_pstat(b.data, b.len, &ps) != 0)
			continue;
		procs = xreallocarray(procs, n + 1, sizeof *procs);
		p = &procs[n++];
		p->pid = ps.pid;
		p->ppid = ps.ppid;
		memcpy(p->comm, ps.comm, sizeof p->comm);
		p->kind = host_terminal(&ps) ? PROC_TERMINAL : PROC_OTHER;
		p->marked = 0;
		p->runner = 0;
		if (strncmp(ps.comm, "gpufleet-agent", 14) == 0) {
			p->runner = host_is_runner(proc, pid);
			continue;
		}
		/* The titles tested are sshd's (comm sshd or sshd-session). */
		if (strncmp(ps.comm, "sshd", 4) != 0)
			continue;
		snprintf(rel, sizeof rel, "%lld/cmdline", pid);
		buf_free(&b);
		xasprintf(&path, "%s/%s", proc, rel);
		if (buf_read_file(&b, path, HOST_CMDLINE_MAX) == 0) {
			/* The title ends at the first NUL; trim padding. */
			size_t len = strnlen(b.data, b.len);

			while (len > 0 && b.data[len - 1] == ' ')
				len--;
			b.data[len] = '\0';
			if (host_is_ssh_session(b.data))
				p->kind = PROC_SSH;
		}
		free(path);
	}
	closedir(d);
	buf_free(&b);
	if (n > 0)
		qsort(procs, n, sizeof *procs, host_proc_cmp);

	/* Terminals opened from sshd or a multiplexer are not counted. */
	for (i = 0; i < n; i++) {
		if (procs[i].kind != PROC_TERMINAL)
			continue;
		if ((parent = host_find(procs, n, procs[i].ppid)) == NULL)
			continue;
		for (k = 0; skip_parents[k] != NULL; k++)
			if (strcmp(parent->comm, skip_parents[k]) == 0)
				procs[i].kind = PROC_OTHER;
	}

	host_keep_marked(procs, n, proc, getenv(HOST_SESSION_MARK));

	/*
	 * Nor a session gpufleet's daemon holds: the one with the command
	 * runner it starts on each (agent/serve.c). Every channel of that
	 * connection is the daemon's; a person's login is another one.
	 */
	for (i = 0; i < n; i++) {
		if (!procs[i].runner)
			continue;
		pid = procs[i].ppid;
		for (depth = 0; depth < HOST_MAX_DEPTH && pid > 0; depth++) {
			if ((p = host_find(procs, n, pid)) == NULL)
				break;
			if (p->kind == PROC_SSH) {
				p->kind = PROC_OTHER;
				break;
			}
			pid = p->ppid;
		}
	}

	/* Nor the session the agent runs in. */
	xasprintf(&path, "%s/self", proc);
	ll = readlink(path, link, sizeof link - 1);
	free(path);
	if (ll > 0) {
		link[ll] = '\0';
		if (host_ll(link, &pid) == 0) {
			for (depth = 0; depth < HOST_MAX_DEPTH && pid > 0;
			     depth++) {
				if ((p = host_find(procs, n, pid)) == NULL)
					break;
				p->kind = PROC_OTHER;
				pid = p->ppid;
			}
		}
	}

	for (i = 0; i < n; i++)
		if (procs[i].kind != PROC_OTHER)
			count++;
	free(procs);
	h->sessions.set = 1;
	h->sessions.v = count;
}

/*
 * Fill h from the proc root (e.g. "/proc") and the disks of "/" and dir.
 * Never fails: what cannot be read stays unknown.
 */
void
host_collect(struct host *h, const char *proc, const char *dir)
{
	memset(h, 0, sizeof *h);
	host_names(h, proc);
	host_stat(h, proc);
	host_container_start(h, proc);
	host_loadavg(h, proc);
	host_meminfo(h, proc);
	h->disks[0].path = xstrdup("/");
	h->disks[1].path = xstrdup(dir);
	host_disk(&h->disks[0], h->disks[0].path);
	host_disk(&h->disks[1], h->disks[1].path);
	host_netdev(h, proc);
	host_sessions(h, proc);
}

/* The container's start time (as in the report), or -1 when unknown. */
long long
host_container_start_now(const char *proc)
{
	struct host h;
	long long v;

	memset(&h, 0, sizeof h);
	host_stat(&h, proc);
	host_container_start(&h, proc);
	v = h.container_start.set ? h.container_start.v : -1;
	host_free(&h);
	return v;
}

/* The report's session count, or -1 when /proc cannot be read. */
long long
host_session_count(const char *proc)
{
	struct host h;
	long long v;

	memset(&h, 0, sizeof h);
	host_sessions(&h, proc);
	v = h.sessions.set ? h.sessions.v : -1;
	host_free(&h);
	return v;
}

/* Write the "host" object. */
void
host_write(struct jsonw *w, const struct host *h)
{
	size_t i;

	jsonw_object_begin(w, REPORT_KEY_HOST);
	jsonw_string(w, REPORT_KEY_HOSTNAME, h->hostname);
	jsonw_string(w, REPORT_KEY_KERNEL, h->kernel);
	jsonw_opt_int(w, REPORT_KEY_BOOT_TIME, h->boot_time);
	jsonw_opt_int(w, REPORT_KEY_CONTAINER_START, h->container_start);
	jsonw_array_begin(w, REPORT_KEY_LOAD);
	for (i = 0; i < 3; i++)
		jsonw_opt_num(w, NULL, h->load[i], 2);
	jsonw_array_end(w);
	jsonw_opt_int(w, REPORT_KEY_CPUS, h->cpus);
	jsonw_opt_int(w, REPORT_KEY_MEM_TOTAL_KIB, h->mem_total_kib);
	jsonw_opt_int(w, REPORT_KEY_MEM_AVAILABLE_KIB, h->mem_available_kib);
	jsonw_array_begin(w, REPORT_KEY_DISKS);
	for (i = 0; i < 2; i++) {
		jsonw_object_begin(w, NULL);
		jsonw_string(w, REPORT_KEY_DISK_PATH, h->disks[i].path);
		jsonw_opt_int(
		    w, REPORT_KEY_DISK_TOTAL_KIB, h->disks[i].total_kib);
		jsonw_opt_int(
		    w, REPORT_KEY_DISK_FREE_KIB, h->disks[i].free_kib);
		jsonw_object_end(w);
	}
	jsonw_array_end(w);
	jsonw_opt_int(w, REPORT_KEY_NET_RX_BYTES, h->net_rx_bytes);
	jsonw_opt_int(w, REPORT_KEY_NET_TX_BYTES, h->net_tx_bytes);
	jsonw_opt_int(w, REPORT_KEY_SESSIONS, h->sessions);
	jsonw_object_end(w);
}

/* Free what h holds. */
void
host_free(struct host *h)
{
	free(h->hostname);
	free(h->kernel);
	free(h->disks[0].path);
	free(h->disks[1].path);
	memset(h, 0, sizeof *h);
}

/* XDG paths, mkdir -p, shell quoting, secrets, capped buffers, name sets. */

#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "misc.h"
#include "xmalloc.h"

static char *quote(const char *, int);

static int secrets_held;
static volatile sig_atomic_t secret_signo;
static volatile sig_atomic_t deferred_signo;
static const int deferred_sigs[] = { SIGINT, SIGTERM, SIGHUP };
#define NDEFERRED_SIGS (sizeof deferred_sigs / sizeof deferred_sigs[0])
static struct sigaction deferred_saved[NDEFERRED_SIGS];
static int deferring;
static int saved_dumpable = -1;
static struct rlimit saved_core;

/*
 * $VAR/NAME when the XDG variable var is an absolute path, else
 * $HOME/FALLBACK/NAME (fallback as ".local/share"). Caller frees.
 */
char *
misc_xdg_path(const char *var, const char *fallback, const char *name)
{
	const char *xdg = getenv(var), *home = getenv("HOME");
	char *path;

	if (xdg != NULL && *xdg == '/')
		xasprintf(&path, "%s/%s", xdg, name);
	else
		xasprintf(&path, "%s/%s/%s",
		    home != NULL && *home != '\0' ? home : ".", fallback, name);
	return path;
}

/*
 * Create dir and its missing parents, each new one 0700 whatever the
 * umask (mkdir -p). Returns 0, or -1 with *cause set.
 */
int
misc_mkdirs(const char *dir, char **cause)
{
	char *p, *d = xstrdup(dir);
	int r = 0;
	char c;

	for (p = d + 1;; p++) {
		if (*p != '/' && *p != '\0')
			continue;
		c = *p;
		*p = '\0';
		if (mkdir(d, 0700) == 0) {
			if (chmod(d, 0700) != 0) {
				xasprintf(cause,
				    "cannot set the mode of %s: %s", d,
				    strerror(errno));
				r = -1;
				break;
			}
		} else if (errno != EEXIST) {
			xasprintf(cause, "cannot create directory %s: %s", d,
			    strerror(errno));
			r = -1;
			break;
		}
		*p = c;
		if (c == '\0')
			break;
	}
	free(d);
	return r;
}

/*
 * Write len bytes of text to path through a new temporary file beside it
 * (0600, never through a link), synced and renamed over path. Returns 0,
 * or -1 with *cause set and nothing left behind.
 */
int
misc_write_atomic(const char *path, const char *text, size_t len, char **cause)
{
	return misc_write_atomic_mode(path, text, len, 0600, cause);
}

/* The same with the file's mode (whatever the umask). */
int
misc_write_atomic_mode(
    const char *path, const char *text, size_t len, mode_t mode, char **cause)
{
	char *tmp;
	size_t off = 0;
	ssize_t w;
	int fd, err = 0;

	xasprintf(&tmp, "%s.tmp.%ld", path, (long)getpid());
	fd = open(
	    tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd == -1 && errno == EEXIST && unlink(tmp) == 0)
		fd = open(tmp,
		    O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd == -1) {
		xasprintf(cause, "cannot write %s: %s", tmp, strerror(errno));
		free(tmp);
		return -1;
	}
	while (off < len && err == 0) {
		if ((w = write(fd, text + off, len - off)) > 0)
			off += (size_t)w;
		else if (w == -1 && errno != EINTR)
			err = errno;
	}
	if (err == 0 && fchmod(fd, mode) != 0)
		err = errno;
	if (err == 0 && fsync(fd) != 0)
		err = errno;
	if (close(fd) != 0 && err == 0)
		err = errno;
	if (err == 0 && rename(tmp, path) != 0)
		err = errno;
	if (err != 0) {
		xasprintf(cause, "cannot write %s: %s", path, strerror(err));
		unlink(tmp);
		free(tmp);
		return -1;
	}
	free(tmp);
	return 0;
}

/* A local path with a leading ~/ expanded from $HOME. Caller frees. */
char *
misc_expand_home(const char *path)
{
	const char *home = getenv("HOME");
	char *s;

	if (strncmp(path, "~/", 2) == 0 && home != NULL) {
		xasprintf(&s, "%s/%s", home, path + 2);
		return s;
	}
	return xstrdup(path);
}

/*
 * s in single quotes, each ' as '\''; with backslash set each \ as '\\'
 * too, so that fish reads the same word as POSIX shells. Caller frees.
 */
static char *
quote(const char *s, int backslash)
{
	size_t n = 3, i;
	char *q, *p;

	for (i = 0; s[i] != '\0'; i++)
		n += s[i] == '\'' || (backslash && s[i] == '\\') ? 4 : 1;
	p = q = xmalloc(n);
	*p++ = '\'';
	for (i = 0; s[i] != '\0'; i++) {
		if (s[i] == '\'') {
			memcpy(p, "'\\''", 4);
			p += 4;
		} else if (backslash && s[i] == '\\') {
			memcpy(p, "'\\\\'", 4);
			p += 4;
		} else
			*p++ = s[i];
	}
	*p++ = '\'';
	*p = '\0';
	return q;
}

/* Single-quote s for a POSIX shell. Caller frees. */
char *
misc_shell_quote(const char *s)
{
	return quote(s, 0);
}

/* Quote s as one word for POSIX shells and fish alike. Caller frees. */
char *
misc_quote_any_shell(const char *s)
{
	return quote(s, 1);
}

/*
 * argv as one command line whose words a POSIX shell or fish reads back
 * exactly, each argument single-quoted. Caller frees.
 */
char *
misc_quote_argv(int argc, char **argv)
{
	struct misc_buf b = { NULL, 0, 0, 0 };
	char *q;
	int k;

	for (k = 0; k < argc; k++) {
		if (k != 0)
			misc_buf_add(&b, " ", 1, 0);
		q = quote(argv[k], 1);
		misc_buf_add(&b, q, strlen(q), 0);
		free(q);
	}
	return b.data != NULL ? b.data : xstrdup("");
}

/*
 * argv joined with single spaces, for the remote shell to read as ssh,
 * pdsh and clush send it. Caller frees.
 */
char *
misc_join_argv(int argc, char **argv)
{
	struct misc_buf b = { NULL, 0, 0, 0 };
	int k;

	for (k = 0; k < argc; k++) {
		if (k != 0)
			misc_buf_add(&b, " ", 1, 0);
		misc_buf_add(&b, argv[k], strlen(argv[k]), 0);
	}
	return b.data != NULL ? b.data : xstrdup("");
}

/* A remote path for sh, a leading ~/ as "$HOME"/. Caller frees. */
char *
misc_quote_path(const char *path)
{
	char *q, *s;

	if (strncmp(path, "~/", 2) != 0)
		return quote(path, 0);
	q = quote(path + 2, 0);
	xasprintf(&s, "\"$HOME\"/%s", q);
	free(q);
	return s;
}

/*
 * A secret is about to be held: while any is, the process cannot dump
 * core (RLIMIT_CORE 0) and is not dumpable (no core, no ptrace by others).
 */
void
misc_secret_hold(void)
{
	struct rlimit none;

	if (secrets_held++ > 0)
		return;
	saved_dumpable = prctl(PR_GET_DUMPABLE, 0, 0, 0, 0);
	prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
	if (getrlimit(RLIMIT_CORE, &saved_core) != 0)
		saved_core.rlim_cur = saved_core.rlim_max = 0;
	none.rlim_cur = 0;
	none.rlim_max = saved_core.rlim_max;
	setrlimit(RLIMIT_CORE, &none);
}

/* A secret was wiped: once none is held, core dumps are as they were. */
void
misc_secret_release(void)
{
	if (secrets_held == 0 || --secrets_held > 0)
		return;
	setrlimit(RLIMIT_CORE, &saved_core);
	if (saved_dumpable > 0)
		prctl(PR_SET_DUMPABLE, saved_dumpable, 0, 0, 0);
}

/*
 * The signals that would leave the terminal without echo if they came
 * while a secret is typed: caught, the terminal restored, then sent again.
 */
static const int secret_sigs[] = { SIGALRM, SIGHUP, SIGINT, SIGPIPE, SIGQUIT,
	SIGTERM, SIGTSTP, SIGTTIN, SIGTTOU };
#define NSECRET_SIGS (sizeof secret_sigs / sizeof secret_sigs[0])

static void
secret_catch(int signo)
{
	secret_signo = signo;
}

/*
 * Read one line typed on the terminal after prompt, without echo, into buf
 * (size len, NUL-terminated). Echo comes back on every path: a signal
 * that stops or ends the process is caught while echo is off, the
 * terminal restored, the line wiped, and the signal sent again (after a
 * stop, it asks again). Returns 0, or -1 with *cause set.
 */
static int
read_tty(const char *prompt, char *buf, size_t len, char **cause)
{
	struct sigaction sa, saved[NSECRET_SIGS];
	struct termios old, cur, noecho;
	ssize_t n;
	size_t i;
	int fd, signo, off, restored = 1;

again:
	/* After a stop with echo still off, old is still what to restore. */
	if ((fd = open("/dev/tty", O_RDWR | O_CLOEXEC)) == -1 ||
	    tcgetattr(fd, restored ? &old : &cur) != 0) {
		if (fd != -1)
			close(fd);
		xasprintf(cause, "no terminal to ask on");
		return -1;
	}
	memset(&sa, 0, sizeof sa);
	sigemptyset(&sa.sa_mask);
	sa.sa_handler = secret_catch; /* no SA_RESTART: read ends */
	secret_signo = 0;
	for (i = 0; i < NSECRET_SIGS; i++)
		sigaction(secret_sigs[i], &sa, &saved[i]);
	noecho = old;
	noecho.c_lflag &= ~(tcflag_t)(ECHO | ECHONL);
	dprintf(fd, "%s", prompt);
	/* TCSANOW: keep what was typed ahead. */
	off = secret_signo == 0 && tcsetattr(fd, TCSANOW, &noecho) == 0;
	n = off && secret_signo == 0 ? read(fd, buf, len - 1) : -1;
	/* In the background each try raises SIGTTOU again: then give up. */
	restored = 1;
	while (off && (restored = tcsetattr(fd, TCSANOW, &old) == 0) == 0 &&
	    errno == EINTR && secret_signo != SIGTTOU)
		;
	dprintf(fd, "\n");
	close(fd);
	for (i = 0; i < NSECRET_SIGS; i++)
		sigaction(secret_sigs[i], &saved[i], NULL);
	buf[n > 0 ? (size_t)n : 0] = '\0';
	if ((signo = secret_signo) != 0) {
		explicit_bzero(buf, len);
		secret_signo = 0;
		kill(getpid(), signo);
		if (signo == SIGTSTP || signo == SIGTTIN || signo == SIGTTOU)
			goto again;
		xasprintf(cause, "interrupted");
		return -1;
	}
	return 0;
}

/*
 * Read a passphrase: the first line of file, or typed on the terminal
 * after prompt when file is NULL. Returns the one heap copy (every other
 * buffer that held it is wiped), or NULL with *cause set. The caller holds
 * a secret (misc_secret_hold) before calling, and wipes and frees it.
 */
char *
misc_read_secret(const char *file, const char *prompt, char **cause)
{
	char buf[1024], *s;
	ssize_t n = 0;
	size_t len = 0;
	int fd;

	*cause = NULL;
	if (file != NULL) {
		if ((fd = open(file, O_RDONLY | O_CLOEXEC)) == -1) {
			xasprintf(
			    cause, "cannot read %s: %s", file, strerror(errno));
			return NULL;
		}
		/* Unbuffered reads: no stdio buffer keeps a copy. */
		while (len < sizeof buf - 1 &&
		    (n = read(fd, buf + len, sizeof buf - 1 - len)) != 0) {
			if (n < 0 && errno == EINTR)
				continue;
			if (n < 0)
				break;
			len += (size_t)n;
			if (memchr(buf, '\n', len) != NULL)
				break;
		}
		close(fd);
		if (n < 0) {
			explicit_bzero(buf, sizeof buf);
			xasprintf(
			    cause, "cannot read %s: %s", file, strerror(errno));
			return NULL;
		}
		buf[len] = '\0';
	} else if (read_tty(prompt, buf, sizeof buf, cause) != 0)
		return NULL;
	buf[strcspn(buf, "\r\n")] = '\0';
	s = xstrdup(buf);
	explicit_bzero(buf, sizeof buf);
	return s;
}

static void
defer_catch(int signo)
{
	if (deferred_signo == 0)
		deferred_signo = signo;
}

/*
 * Hold off Ctrl-C, SIGTERM and SIGHUP while a step runs that must not stop
 * half-way (a password changed and not yet checked, or not yet shown):
 * one that comes is kept, and acted on by misc_signals_resume. Process-wide
 * (a handler, not a mask), so no thread takes the signal meanwhile.
 */
void
misc_signals_defer(void)
{
	struct sigaction sa;
	size_t i;

	if (deferring++ > 0)
		return;
	memset(&sa, 0, sizeof sa);
	sigemptyset(&sa.sa_mask);
	sa.sa_handler = defer_catch;
	sa.sa_flags = SA_RESTART;
	deferred_signo = 0;
	for (i = 0; i < NDEFERRED_SIGS; i++)
		sigaction(deferred_sigs[i], &sa, &deferred_saved[i]);
}

/* The step is over: the signals act again, one that came now. */
void
misc_signals_resume(void)
{
	size_t i;
	int signo;

	if (deferring == 0 || --deferring > 0)
		return;
	for (i = 0; i < NDEFERRED_SIGS; i++)
		sigaction(deferred_sigs[i], &deferred_saved[i], NULL);
	if ((signo = deferred_signo) != 0) {
		deferred_signo = 0;
		raise(signo);
	}
}

/*
 * Append len bytes to b, keeping at most max in all (0: no cap); beyond the
 * cap only b->truncated is set.
 */
void
misc_buf_add(struct misc_buf *b, const char *data, size_t len, size_t max)
{
	if (max != 0 && b->len + len > max) {
		b->truncated = 1;
		len = b->len < max ? max - b->len : 0;
	}
	if (len == 0)
		return;
	if (b->len + len + 1 > b->size) {
		b->size = (b->len + len + 1) * 2;
		b->data = xreallocarray(b->data, 1, b->size);
	}
	memcpy(b->data + b->len, data, len);
	b->len += len;
	b->data[b->len] = '\0';
}

/*
 * Add name (the caller's allocation, now the set's) to the set of distinct
 * names *names (*n of them, in the order first added); a name already there
 * is freed. Returns its index. The caller frees the set.
 */
size_t
misc_names_add(char ***names, size_t *n, char *name)
{
	size_t i;

	for (i = 0; i < *n; i++) {
		if (strcmp((*names)[i], name) == 0) {
			free(name);
			return i;
		}
	}
	*names = xreallocarray(*names, *n + 1, sizeof **names);
	(*names)[*n] = name;
	return (*n)++;
}

/*
 * Whether process pid is gone (ESRCH), so what it named with its pid
 * (a temporary file or folder) may be removed; one of another user's
 * (EPERM) is not gone.
 */
int
misc_pid_gone(long pid)
{
	return pid > 0 && kill((pid_t)pid, 0) != 0 && errno == ESRCH;
}

/*
 * A test hook at a named point of an operation ("3": a key rotation's
 * step 3, "passwd:1"). GPUFLEET_TEST_CRASH_AT=POINT kills us there;
 * GPUFLEET_TEST_PAUSE_AT=POINT waits there, the first time. With either, and
 * GPUFLEET_TEST_CRASH_GATE=PATH, PATH is created first and we wait (up to
 * 60 s) until it is removed, so a test can act (stop our parent, cut the
 * network) while we are known to be at that point.
 */
void
misc_test_point(const char *point)
{
	struct timespec tick = { 0, 100 * 1000 * 1000 };
	const char *crash = getenv("GPUFLEET_TEST_CRASH_AT");
	const char *pause = getenv("GPUFLEET_TEST_PAUSE_AT");
	const char *gate = getenv("GPUFLEET_TEST_CRASH_GATE");
	static int paused; /* once: a step's point is passed once per host */
	int fd, t, die;

	die = crash != NULL && strcmp(crash, point) == 0;
	if (!die && (pause == NULL || strcmp(pause, point) != 0 || paused))
		return;
	paused = !die;
	if (gate != NULL && *gate != '\0' &&
	    (fd = open(gate, O_WRONLY | O_CREAT | O_CLOEXEC, 0600)) != -1) {
		close(fd);
		for (t = 0; t < 600 && access(gate, F_OK) == 0; t++)
			nanosleep(&tick, NULL);
	}
	if (die)
		raise(SIGKILL);
}

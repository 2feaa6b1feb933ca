/* The one runner of tracked children: start, deadline, reap, finish. */

#include <sys/wait.h>

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "child.h"
#include "xmalloc.h"

#ifdef NSIG
#define CHILD_NSIG NSIG
#else
#define CHILD_NSIG 65
#endif
#define CHILD_POLL_MS 20 /* child_run's look for its child (no SIGCHLD) */

/* A tracked child. */
struct child {
	pid_t pid;
	child_cb cb;
	void *arg;
	int killed; /* child_result's */
	int termed; /* its group had SIGTERM: the timer sends SIGKILL */
	int spared; /* child_kill_all leaves it */
	struct event *timer;
	struct child *next;
};

static volatile sig_atomic_t run_signal; /* child_run was told to stop */
static struct event_base *loop_base;	 /* child_loop_start's */
static struct event *loop_sigchld;
static struct child *children;

static void reap(void);
static void on_timer(evutil_socket_t, short, void *);
static void term(struct child *, int);
static void on_poll(evutil_socket_t, short, void *);

/* Start reaping tracked children on base's SIGCHLD. Returns 0 or -1. */
int
child_loop_start(struct event_base *base)
{
	if (loop_base != NULL)
		return -1;
	loop_sigchld = evsignal_new(base, SIGCHLD, on_poll, NULL);
	if (loop_sigchld == NULL || evsignal_add(loop_sigchld, NULL) != 0) {
		if (loop_sigchld != NULL)
			event_free(loop_sigchld);
		loop_sigchld = NULL;
		return -1;
	}
	loop_base = base;
	return 0;
}

/* Stop reaping on the loop (its base is about to go). */
void
child_loop_end(void)
{
	if (loop_sigchld != NULL)
		event_free(loop_sigchld);
	loop_sigchld = NULL;
	loop_base = NULL;
}

/* Whether child_start has a loop to run children beside. */
int
child_looping(void)
{
	return loop_base != NULL;
}

/* In the child: stdin, stdout and stderr as spec says, or _exit. */
static void
redirect(const struct child_spec *spec)
{
	int fd;

	fd = open(spec->in != NULL ? spec->in : "/dev/null", O_RDONLY);
	if (fd == -1 || dup2(fd, STDIN_FILENO) == -1)
		_exit(127);
	if (spec->out_fd > 0) {
		if (dup2(spec->out_fd, STDOUT_FILENO) == -1 ||
		    dup2(spec->out_fd, STDERR_FILENO) == -1)
			_exit(127);
	} else if (spec->out != NULL) {
		fd = open(spec->out, O_WRONLY | O_APPEND | O_CREAT, 0600);
		if (fd == -1 || dup2(fd, STDOUT_FILENO) == -1 ||
		    dup2(fd, STDERR_FILENO) == -1)
			_exit(127);
	} else if (dup2(STDERR_FILENO, STDOUT_FILENO) == -1)
		_exit(127);
	if (spec->err_fd > 0) {
		if (dup2(spec->err_fd, STDERR_FILENO) == -1)
			_exit(127);
	} else if (spec->err != NULL) {
		fd = open(spec->err, O_WRONLY | O_TRUNC | O_CREAT, 0600);
		if (fd == -1 || dup2(fd, STDERR_FILENO) == -1)
			_exit(127);
	}
}

/* In the child: every signal we handle or ignore back to its default. */
static void
defaults(void)
{
	struct sigaction sa;
	int sig;

	memset(&sa, 0, sizeof sa);
	sa.sa_handler = SIG_DFL;
	sigemptyset(&sa.sa_mask);
	for (sig = 1; sig < CHILD_NSIG; sig++) {
		if (sig != SIGKILL && sig != SIGSTOP)
			sigaction(sig, &sa, NULL);
	}
}

/* In the child: wait for the gate's byte. 1: go, else stop. */
static int
gate(const struct child_spec *spec)
{
	ssize_t r;
	char go;

	if (spec->gate_w > 0)
		close(spec->gate_w);
	while ((r = read(spec->gate_r, &go, 1)) == -1 && errno == EINTR)
		;
	return r == 1;
}

/* Fork and exec spec in its own process group; the child never returns. */
static pid_t
spawn(const struct child_spec *spec, char **cause)
{
	char *name, *eq;
	pid_t pid;
	size_t i;

	sigset_t all, old;

	fflush(NULL);
	/*
	 * Until it has reset our handlers, a signal to the child would run
	 * them there (libevent's would tell the loop of a SIGTERM it never
	 * got): signals wait, blocked, until the child has its defaults.
	 */
	sigfillset(&all);
	sigprocmask(SIG_SETMASK, &all, &old);
	if ((pid = fork()) == -1) {
		sigprocmask(SIG_SETMASK, &old, NULL);
		xasprintf(cause, "cannot fork: %s", strerror(errno));
		return -1;
	}
	if (pid > 0) {
		sigprocmask(SIG_SETMASK, &old, NULL);
		setpgid(pid, pid); /* as the child does: no race with a kill */
		return pid;
	}
	setpgid(0, 0);
	defaults();
	sigprocmask(SIG_SETMASK, &old, NULL);
	if (spec->gate_r > 0 && gate(spec) != 1)
		_exit(0);
	for (i = 0; spec->env != NULL && spec->env[i] != NULL; i++) {
		name = strdup(spec->env[i]);
		if (name == NULL || (eq = strchr(name, '=')) == NULL)
			_exit(127);
		*eq = '\0';
		setenv(name, eq + 1, 1);
	}
	redirect(spec);
	execv(spec->argv[0], spec->argv);
	dprintf(STDERR_FILENO, "cannot run %s: %s\n", spec->argv[0],
	    strerror(errno));
	_exit(127);
}

/* Start spec on base and track it; its end goes to cb. NULL with *cause. */
static struct child *
start(struct event_base *base, const struct child_spec *spec, child_cb cb,
    void *arg, pid_t *pidp, char **cause)
{
	struct timeval tv = { spec->timeout, 0 };
	struct child *c;
	pid_t pid;

	if ((pid = spawn(spec, cause)) == -1)
		return NULL;
	c = xcalloc(1, sizeof *c);
	c->pid = pid;
	c->cb = cb;
	c->arg = arg;
	c->spared = spec->spared;
	c->timer = evtimer_new(base, on_timer, c);
	if (spec->timeout > 0)
		evtimer_add(c->timer, &tv);
	c->next = children;
	children = c;
	if (pidp != NULL)
		*pidp = pid;
	return c;
}

/*
 * Start spec beside the loop of child_loop_start; cb gets how it ended
 * (on the loop, once it is reaped). Returns 0 (*pidp filled when not
 * NULL) or -1 with *cause.
 */
int
child_start(const struct child_spec *spec, child_cb cb, void *arg, pid_t *pidp,
    char **cause)
{
	if (loop_base == NULL) {
		*cause = xstrdup("no loop to run the child beside");
		return -1;
	}
	return start(loop_base, spec, cb, arg, pidp, cause) != NULL ? 0 : -1;
}

/* SIGTERM c's group now, SIGKILL once the grace is over. */
static void
term(struct child *c, int why)
{
	struct timeval tv = { CHILD_GRACE_S, 0 };

	if (c->killed == 0)
		c->killed = why;
	if (c->termed)
		return;
	c->termed = 1;
	kill(-c->pid, SIGTERM);
	evtimer_del(c->timer);
	evtimer_add(c->timer, &tv);
}

/* The deadline of a child (SIGTERM its group) or its grace (SIGKILL). */
static void
on_timer(evutil_socket_t fd, short what, void *arg)
{
	struct child *c = arg;

	(void)fd;
	(void)what;
	if (c->termed)
		kill(-c->pid, SIGKILL);
	else
		term(c, 1);
}

/*
 * Reap every tracked child that is over (each by its pid: other modules'
 * children are theirs) and call its callback, which may start others.
 */
static void
reap(void)
{
	struct child **pp, *c;
	struct child_result res;
	int st;
	pid_t w;

again:
	for (pp = &children; (c = *pp) != NULL; pp = &c->next) {
		while (
		    (w = waitpid(c->pid, &st, WNOHANG)) == -1 && errno == EINTR)
			;
		if (w == 0 || (w == -1 && errno != ECHILD))
			continue;
		if (w == -1)
			st = -1; /* someone else reaped it: not known */
		*pp = c->next;
		/* What is left of its group ends with it. */
		kill(-c->pid, c->killed ? SIGKILL : SIGTERM);
		res.pid = c->pid;
		res.status = st;
		res.killed = c->killed;
		event_free(c->timer);
		if (c->cb != NULL)
			c->cb(&res, c->arg);
		free(c);
		goto again;
	}
}

/* SIGCHLD on the loop, or child_run's look for its child. */
static void
on_poll(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	(void)arg;
	reap();
}

/* child_run's child is over. */
static void
on_done(const struct child_result *res, void *arg)
{
	struct child_result *out = arg;

	*out = *res;
	out->pid = -res->pid; /* negative: done */
}

/* child_run's SIGINT, SIGTERM, SIGHUP: its child goes first. */
static void
on_run_signal(int sig)
{
	run_signal = sig;
}

/*
 * Run spec to its end on a private event_base (the same runner, for
 * commands: it looks for its end every CHILD_POLL_MS rather than on
 * SIGCHLD, which the caller's own loop may hold). SIGINT, SIGTERM or
 * SIGHUP meanwhile (one not ignored) stops the child's group (killed 3),
 * then is passed on to the caller's own handling once it is reaped.
 * Returns 0 with *res, or -1 with *cause.
 */
int
child_run(const struct child_spec *spec, struct child_result *res, char **cause)
{
	static const int sigs[] = { SIGINT, SIGTERM, SIGHUP };
	struct timeval tv = { 0, CHILD_POLL_MS * 1000 };
	struct sigaction sa, old[3];
	struct event_base *base;
	struct event *poll;
	struct child_result got = { 0, 0, 0 };
	struct child *c;
	size_t i;
	int r = -1;

	if ((base = event_base_new()) == NULL) {
		*cause = xstrdup("cannot make an event loop");
		return -1;
	}
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_run_signal;
	sigemptyset(&sa.sa_mask);
	run_signal = 0;
	for (i = 0; i < 3; i++) {
		sigaction(sigs[i], NULL, &old[i]);
		if (old[i].sa_handler != SIG_IGN) /* nohup's SIGHUP stays so */
			sigaction(sigs[i], &sa, NULL);
	}
	poll = event_new(base, -1, EV_PERSIST, on_poll, NULL);
	if ((c = start(base, spec, on_done, &got, NULL, cause)) != NULL) {
		evtimer_add(poll, &tv);
		while (got.pid >= 0) {
			event_base_loop(base, EVLOOP_ONCE);
			if (run_signal != 0 && got.pid >= 0)
				term(c, 3); /* c lives until it is reaped */
		}
		got.pid = -got.pid;
		*res = got;
		r = 0;
	}
	event_free(poll);
	event_base_free(base);
	for (i = 0; i < 3; i++)
		sigaction(sigs[i], &old[i], NULL);
	if (run_signal != 0)
		raise(run_signal);
	return r;
}

/*
 * SIGTERM every tracked child's group but the spared ones', SIGKILL
 * after CHILD_GRACE_S (the daemon is stopping); their callbacks run as
 * they are reaped.
 */
void
child_kill_all(void)
{
	struct child *c;

	for (c = children; c != NULL; c = c->next) {
		if (!c->spared)
			term(c, 2);
	}
}

/* How many tracked children are not reaped yet. */
size_t
child_count(void)
{
	struct child *c;
	size_t n = 0;

	for (c = children; c != NULL; c = c->next)
		n++;
	return n;
}

/*
 * Why a child that ran with timeout did not exit 0, or NULL when it did.
 * Caller frees.
 */
char *
child_why(const struct child_result *res, int timeout)
{
	char *s;

	if (res->killed == 1)
		xasprintf(&s, "it ran past %ds and was killed", timeout);
	else if (res->killed == 2)
		s = xstrdup("it was stopped with the daemon");
	else if (res->killed == 3)
		s = xstrdup("it was stopped: gpufleet was interrupted");
	else if (res->status == -1)
		s = xstrdup("how it ended is not known");
	else if (WIFSIGNALED(res->status))
		xasprintf(
		    &s, "it was killed by signal %d", WTERMSIG(res->status));
	else if (WEXITSTATUS(res->status) != 0)
		xasprintf(&s, "it exited %d", WEXITSTATUS(res->status));
	else
		s = NULL;
	return s;
}

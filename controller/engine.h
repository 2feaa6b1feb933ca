/*
 * The SSH engine: runs one command on many hosts at once from a single
 * libevent loop, with libssh 0.10 sessions in non-blocking mode.
 *
 * Per host: resolve (numeric at once, names through evdns), a non-blocking
 * TCP connect of our own handed to libssh with SSH_OPTIONS_FD, the SSH
 * handshake, the host key check (a callback, so keys stay pinned per
 * instance in SQLite), public key authentication with keys loaded once for
 * the whole run (then a host's password, if it has one), one exec channel.
 * Each phase has its own deadline, which holds whatever the peer sends:
 * connect_timeout for the name, TCP and the server's banner (as OpenSSH's
 * ConnectTimeout); then set-up fails after setup_timeout seconds in which
 * the server sent nothing, or ten times that in all; then the command has
 * command_timeout. A host that fails gets a reason code and a message, and
 * the others go on.
 *
 * A host with a jump host (ProxyJump) is reached through a direct-tcpip
 * channel of the jump host's session: one session per jump host, logged in
 * and its key checked like any host's, shared by every host behind it and
 * closed once none uses it. The host's own SSH session runs over one end of
 * a socketpair; the loop moves bytes between the other end and the channel,
 * within the channel's window. If the jump fails, every host behind it
 * fails with the jump's reason code and a message naming it.
 */
#ifndef GPUFLEET_ENGINE_H
#define GPUFLEET_ENGINE_H

#include <libssh/libssh.h>
#include <stddef.h>
#include <stdint.h>

#include "instance.h"

enum engine_fail {
	EF_NONE,
	EF_RESOLVE,	    /* name does not resolve */
	EF_REFUSED,	    /* TCP connection refused */
	EF_UNREACHABLE,	    /* no route, network down */
	EF_CONNECT_TIMEOUT, /* no banner in time, or set-up stalled */
	EF_SSH,		    /* protocol or transport error */
	EF_HOSTKEY_CHANGED, /* key differs from the pinned one */
	EF_HOSTKEY_UNKNOWN, /* strict policy and no known key */
	EF_AUTH,	    /* every key was rejected */
	EF_TIMEOUT,	    /* the command ran past --timeout */
	EF_CHANNEL,	    /* channel open or exec refused */
	EF_UNSUPPORTED,	    /* e.g. ProxyJump */
	EF_INTERRUPTED,	    /* SIGINT before the host finished */
	EF_BACKOFF,	    /* not tried: failed lately, retry_at not reached */
	EF_NKINDS
};

#define ENGINE_MAX_KEYS 6

struct engine_conn;
struct engine_run;
struct event_base;
struct evdns_base;

struct engine_host {
	const struct instance *in;
	ssh_key keys[ENGINE_MAX_KEYS]; /* borrowed; NULL: ask ssh-agent */
	int nkeys;
	const char *keys_error; /* why no key, if nkeys == 0 */
	/*
	 * Borrowed; NULL: none. Tried after the keys, by password and then
	 * keyboard-interactive authentication (echo-off prompts get it). It
	 * never appears in a message.
	 */
	const char *password;
	const char *command;	/* or NULL: the run's command */
	const char *stdin_data; /* or NULL: the run's stdin */
	size_t stdin_len;
	int skip; /* leave this host out of the run */
	/*
	 * Set and cleared by the caller while the command runs: while set,
	 * the engine reads no more of the host's session, so the channel's
	 * window stops the command's output at the instance (a reader that
	 * is behind slows the host, never the loop). Deadlines still run;
	 * reading resumes at the next pump once it is cleared.
	 */
	int hold_output;
	/*
	 * Borrowed; NULL: none. With settings.use_runner, the command that
	 * starts a command runner (gpufleet-agent serve) on the host's held
	 * session, to which the run's command then goes.
	 */
	const char *runner;
	/* The host to reach this one through (borrowed; NULL: direct). It is
	   not one of the run's hosts and must itself be direct. */
	struct engine_host *jump;

	/* Results. */
	enum engine_fail fail;
	char *fail_msg;	   /* one line */
	int exit_status;   /* -1 if none */
	char *exit_signal; /* "KILL", or NULL */
	int64_t start_ms;
	int64_t exec_ms; /* the command was accepted (0: not yet) */
	int64_t end_ms;
	int done;
	int fails;	     /* connection failures in a row */
	int64_t retry_at_ms; /* with settings.backoff: not before this */

	void *user;		  /* the caller's */
	struct engine_conn *conn; /* private */
	uint64_t jump_failed;	  /* private: run serial of a jump failure */
	int runner_failed; /* private: its runner failed during a command */
};

struct engine_ops {
	/* Output of the command as it arrives. */
	void (*output)(struct engine_host *, int, const char *, size_t, void *);
	/* A host finished (ok or failed). */
	void (*done)(struct engine_host *, void *);
	/*
	 * Host key check: key type, base64 blob and SHA256 fingerprint.
	 * Returns 0 to go on, or sets *fail and *msg (caller-allocated) to
	 * refuse the host before any authentication.
	 */
	int (*hostkey)(struct engine_host *, const char *, const char *,
	    const char *, enum engine_fail *, char **, void *);
	/* The pinned key type for a host, to prefer it in the handshake. */
	const char *(*hostkey_type)(struct engine_host *, void *);
	/* Every host of the run is done (engine_start's runs). */
	void (*finished)(struct engine_run *, void *);
	void *arg;
};

struct engine_settings {
	const char *command;
	int fanout;
	int connect_timeout;	/* seconds: name, TCP and SSH banner */
	int setup_timeout;	/* seconds of server silence in set-up; 0: 30 */
	int command_timeout;	/* seconds, 0 for none */
	const char *stdin_data; /* or NULL */
	size_t stdin_len;
	int handle_sigint;  /* engine_run only: Ctrl-C cancels the run */
	int handle_sigterm; /* engine_run only: so does SIGTERM */
	int keep_open;	    /* hold sessions for the next run (watch) */
	int fresh;	    /* log in anew even where a session is held */
	int backoff; /* a host that failed to connect waits before the next try
		      */
	int handshake_window; /* ENGINE_WINDOW_AUTO (0), _OFF or a fixed size */
	int use_runner;	      /* on held sessions, through host->runner */
	/*
	 * A command stopped before it finished (command_timeout, a cancel)
	 * has its whole process group on the instance ended, TERM then KILL
	 * (a runner's command: by the runner, as its session goes).
	 */
	int kill_group;
};

/*
 * The handshake window: how many new connections may be in their first
 * phases (TCP, the server's banner, key exchange) at once. AUTO adapts it
 * as TCP's congestion window does: it grows for each phase that completes
 * with a server-side delay close to the least seen (the round trip, from
 * the kernel's estimate, taken out, so distance alone never shrinks it),
 * by one plus one per 25 ms of the phase's least whole time (so that
 * far-away hosts, whose handshakes wait on the network, not the server,
 * are all in flight after about a round trip), and halves, at most once
 * per round of handshakes and never below ENGINE_WINDOW_MIN, when a phase
 * takes far longer.
 */
#define ENGINE_WINDOW_AUTO   0
#define ENGINE_WINDOW_OFF    (-1)
#define ENGINE_WINDOW_MIN    8
#define ENGINE_WINDOW_INIT   16
#define ENGINE_WINDOW_PHASES 2 /* the banner, the key exchange */

struct engine_window {
	double cwnd;
	int64_t best[ENGINE_WINDOW_PHASES]; /* least delay seen, ms; -1 none */
	int64_t
	    floor[ENGINE_WINDOW_PHASES]; /* least whole phase, ms; -1 none */
	int64_t cut_ms;			 /* when it last shrank; 0 never */
};

const char *engine_fail_code(enum engine_fail);
int64_t engine_now_ms(void);
int64_t engine_backoff_ms(int, unsigned int);
struct engine;

/*
 * A run resets each host's done, exit_status and exit_signal, never fail
 * and fail_msg: the caller clears them (engine_host_clear and fail =
 * EF_NONE) before a run, or sets a failure the host is to report without
 * being tried. The ops callbacks must not free the engine.
 */
struct engine *engine_new(struct event_base *, struct evdns_base *);
struct engine_run *engine_start(struct engine *, struct engine_host *, size_t,
    const struct engine_settings *, const struct engine_ops *);
void engine_cancel(struct engine_run *);
int engine_run(struct engine *, struct engine_host *, size_t,
    const struct engine_settings *, const struct engine_ops *);
void engine_forget(struct engine_host *);
void engine_set_agent_timeout(struct engine *, int);
void engine_free(struct engine *);
void engine_host_clear(struct engine_host *);
size_t engine_raise_nofile(size_t);
void engine_window_init(struct engine_window *);
void engine_window_ack(
    struct engine_window *, int, int64_t, int64_t, int64_t, int64_t);
size_t engine_window_size(const struct engine_window *);

#endif

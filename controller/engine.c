/*
 * The SSH engine: many hosts, one libevent loop, libssh in non-blocking
 * mode. See engine.h for the contract and ../shared/notes/libssh-0.10.md
 * for the libssh behaviour this file works around:
 *  - DNS and the TCP connect are ours (numeric at once, names by evdns), the
 *    socket is handed over with SSH_OPTIONS_FD;
 *  - config parsing and known_hosts files are switched off: host keys are
 *    checked by the caller against the pins in SQLite;
 *  - after every libssh call the fd event is re-armed from
 *    ssh_get_poll_flags, and a pump timer catches data libssh took off the
 *    socket during another call;
 *  - channel data arrives through callbacks that only record it; libssh is
 *    never called from inside its own callbacks;
 *  - stdin is written in chunks of at most 32 KiB, only once libssh's
 *    output has drained, because libssh writes on a blocking socket;
 *  - ssh-agent's protocol is synchronous (poll(-1) inside libssh), so an
 *    agent login is handed, session and all, to one worker thread; the
 *    loop does not touch that session until the worker hands it back. A
 *    host whose deadline passes meanwhile is reported failed at once and
 *    its session left to the worker to free ("orphan"). A login the agent
 *    does not answer within agent_timeout fails the same way, and until
 *    the worker comes back the agent counts as hung: the logins queued
 *    behind it, and later ones, skip the agent for their next key;
 *  - a host behind a jump host talks SSH over a socketpair whose other end
 *    the loop joins to a direct-tcpip channel of the jump's session (see
 *    "Jump hosts" below);
 *  - with settings.use_runner, a command on a held session goes to the
 *    session's command runner (gpufleet-agent serve, started on a channel
 *    of its own by the first such run) rather than to a new channel: sshd
 *    then forks no session process and no shell for it (see "The command
 *    runner" below).
 */

#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/types.h>

#include <netinet/in.h>
#include <netinet/tcp.h>

#include <errno.h>
#include <stddef.h>
#include <fcntl.h>
#include <netdb.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <event2/dns.h>
#include <event2/event.h>
#include <event2/thread.h>
#include <event2/util.h>
#include <libssh/callbacks.h>
#include <libssh/libssh.h>

#include "engine.h"
#include "gpufleet/serve.h"
#include "log.h"
#include "xmalloc.h"

#define PUMP_MS	    100
#define STDIN_CHUNK (32 * 1024)
/* Bytes held per direction of a tunnel through a jump host. */
#define TUNNEL_BUF (32 * 1024)
/* Set-up: fail after this long without a byte from the server... */
#define SETUP_IDLE_DEFAULT 30
/* ...or after this many times that long in all. */
#define SETUP_CAP_FACTOR 10
/* Retrying a host that failed to connect: 1 s, doubling, at most 5 min. */
#define BACKOFF_FIRST_MS 1000
#define BACKOFF_MAX_MS	 (5 * 60 * 1000)
#define KEX_ALGORITHMS                                                         \
	"curve25519-sha256,curve25519-sha256@libssh.org,"                      \
	"ecdh-sha2-nistp256,diffie-hellman-group14-sha256"
#define CIPHERS                                                                \
	"aes128-gcm@openssh.com,chacha20-poly1305@openssh.com,"                \
	"aes256-gcm@openssh.com,aes128-ctr,aes256-ctr"
/* The handshake window: a phase this much slower than the best is noise. */
#define WINDOW_SLACK_MS 25
#define WINDOW_MAX	65536
/* At most this many more places per fast phase, however far the hosts. */
#define WINDOW_GROWTH_MAX 16
#define HOSTKEY_ALGORITHMS                                                     \
	"ssh-ed25519,ecdsa-sha2-nistp256,ecdsa-sha2-nistp384,"                 \
	"ecdsa-sha2-nistp521,rsa-sha2-512,rsa-sha2-256"

/* The longest command sent to a runner (in one write of one frame). */
#define RUNNER_COMMAND_MAX (STDIN_CHUNK - 5)
/*
 * Runners a session starts that end before their hello (the agent not
 * deployed yet: the poll deploys it) before it gives up on them.
 */
#define RUNNER_STARTS_MAX 3

/*
 * settings.kill_group: the line put before the command, which writes the
 * process group sshd made for it (the login shell's pid: sshd starts each
 * session's command with setsid) on stderr, first; that line is taken
 * out of the output. It is sh's parent's pid, and all in one quoted word,
 * so that fish and csh, as login shells, read it too.
 */
#define PGID_MARK     "gpufleet-pgid="
#define PGID_WRAP     "sh -c 'printf \"" PGID_MARK "%s\\n\" \"$PPID\" >&2'\n"
#define PGID_MARK_MAX 64
/* How long ending a command's group may take, its grace included. */
#define KILL_WAIT_MS (15 * 1000)

/* What conn_auth tries: the keys in order, then the host's password. */
enum { AUTH_KEYS, AUTH_PASSWORD, AUTH_KBDINT };
/* conn_auth's answer. */
enum { AUTH_OK, AUTH_WAIT, AUTH_GONE, AUTH_NEXT };
#define KBDINT_MAX_ROUNDS 8

enum conn_state {
	CS_RESOLVE,
	CS_TCP,
	CS_HANDSHAKE,
	CS_AUTH,
	CS_OPEN,
	CS_EXEC,
	CS_RUN,
	CS_KILL,   /* ending the command's process group (kill_group) */
	CS_IDLE,   /* held open between runs (keep_open) */
	CS_AGENT,  /* the ssh-agent worker has the session */
	CS_TUNNEL, /* waiting for a channel through the jump host */
	CS_JUMP,   /* a jump host's session, carrying tunnels */
};

/* A held session's command runner. */
enum runner_state {
	RS_NONE,    /* not started */
	RS_OPENING, /* its channel being opened */
	RS_EXEC,    /* gpufleet-agent serve being asked for */
	RS_HELLO,   /* waiting for its hello */
	RS_READY,   /* takes commands */
	RS_BROKEN,  /* not there or failed: commands get channels */
};

/* runner_start's answer. */
enum { RUNNER_WAIT, RUNNER_READY, RUNNER_BROKEN, RUNNER_GONE };

enum tunnel_state {
	TS_WAIT,    /* the jump is not logged in yet */
	TS_OPENING, /* direct-tcpip requested */
	TS_OPEN,    /* joined to the socketpair */
};

struct engine {
	struct event_base *base; /* the caller's */
	struct evdns_base *dns;	 /* the caller's, or ours if own_dns */
	int own_dns;
	struct engine_run *runs; /* in flight */

	/* The ssh-agent worker: a queue of connections, under lock. */
	pthread_mutex_t lock;
	pthread_cond_t wake;
	pthread_t worker;
	int worker_started;
	int worker_busy;
	int worker_stop;
	int agent_hung; /* the worker's request outlived agent_timeout */
	int agent_timeout_ms;
	struct engine_conn *queue;

	struct engine_jump *jumps; /* jump sessions, open or opening */
	uint64_t serial;	   /* of the last run started */
};

/* One run: a command on a set of hosts, reported through its ops. */
struct engine_run {
	struct engine *e;
	const struct engine_settings *set;
	const struct engine_ops *ops;
	struct engine_host *hosts;
	size_t n;
	size_t next; /* next host to start */
	size_t active;
	size_t finished;
	size_t max_active; /* what the open-file limit allows */
	struct engine_window win;
	size_t hs_inflight; /* connections inside the handshake window */
	struct event *done; /* delivers `finished' from the loop */
	int complete;	    /* every host is done */
	int reported;	    /* `finished' has been called */
	int keep;	    /* engine_run frees it, not the engine */
	uint64_t serial;
	struct engine_run *next_run;
};

/*
 * The session of one jump host. Its connection's run is its own, with a
 * copy of the settings and ops of the run that opened it (only the host
 * key check and the deadlines of set-up use them). Every tunnel holds a
 * reference; the session closes once the last is gone and the loop has
 * come round (so hosts started one after another share it).
 */
struct engine_jump {
	struct engine *e;
	struct engine_host *h; /* the jump host: h->conn is c */
	struct engine_conn *c; /* NULL once it is gone */
	struct engine_run run; /* c->r */
	struct engine_settings set;
	struct engine_ops ops;
	struct engine_tunnel *tunnels;
	struct event *idle; /* closes it when no tunnel is left */
	struct event *kick; /* services its tunnels from the loop */
	int refs;
	int ready; /* logged in */
	int dead;  /* failed: its tunnels are being failed */
	struct engine_jump *next;
};

/*
 * One host's way through a jump host: a direct-tcpip channel and our end
 * of the socketpair whose other end is the host's SSH socket. At most
 * TUNNEL_BUF bytes are held each way; the rest waits in the channel's
 * window or the socket buffer.
 */
struct engine_tunnel {
	struct engine_jump *j;
	struct engine_conn *c; /* the host behind the jump */
	enum tunnel_state state;
	ssh_channel ch;
	int fd; /* ours; -1 until open */
	struct event *ev;
	int start;	       /* open: start c's handshake from ev */
	enum engine_fail fail; /* set: fail c from ev with fail_msg */
	char *fail_msg;
	char in[TUNNEL_BUF]; /* from the channel, for fd */
	size_t in_len;
	char out[TUNNEL_BUF]; /* from fd, for the channel */
	size_t out_len;
	int ch_eof, fd_eof, eof_sent, shut;
	struct engine_tunnel *next;
};

struct engine_conn {
	struct engine *e;
	struct engine_run *r; /* the run using it; NULL while held idle */
	struct engine_host *h;
	enum conn_state state;
	struct evdns_getaddrinfo_request *dnsreq;
	struct evutil_addrinfo *ai;
	struct evutil_addrinfo *ai_next;
	int fd;
	int last_errno;
	ssh_session s;
	ssh_event sev;
	ssh_channel ch;
	struct ssh_channel_callbacks_struct cb;
	struct event *ev;
	struct event *deadline; /* the phase's deadline, added once */
	struct event *pump;	/* while running, catches what libssh holds */
	int64_t deadline_ms;	/* the phase's hard limit; 0: none */
	int64_t idle_limit_ms;	/* set-up: no bytes for this long; 0: off */
	int64_t last_read_ms;	/* when the socket last woke us to read */
	int banner_seen;	/* the server's SSH banner has come */
	int in_window;		/* counted in r->hs_inflight */
	int64_t tcp_ms;		/* when TCP came up */
	int64_t banner_ms;	/* when the banner came */
	int64_t rtt_ms;		/* the kernel's round-trip estimate */
	int key_index;
	int auth_phase;	     /* AUTH_KEYS, AUTH_PASSWORD, AUTH_KBDINT */
	int kbd_answered;    /* keyboard-interactive has had the password */
	char kbd_prompt[64]; /* the prompt it answered */
	int kbd_rounds;
	int agent_tried;
	size_t stdin_off;
	int eof_sent;
	int got_exit;
	int got_eof;
	int got_close;
	int reused;	 /* this run started on a held session */
	int ssh_started; /* ssh_connect has taken the socket */
	int local_fail;	 /* failed for a reason of ours, not the host's */
	struct engine_jump *jmp;   /* this is a jump host's session */
	struct engine_tunnel *tun; /* this host is behind a jump */
	int tun_setup;		   /* waiting on the jump's set-up */

	/* The command runner of a held session (its own channel). */
	ssh_channel rch;
	struct ssh_channel_callbacks_struct rcb;
	enum runner_state rstate;
	unsigned char *rbuf; /* a frame not yet whole */
	size_t rlen;
	int rstarts;	/* runners started on the session */
	int rhello;	/* its hello came */
	int rclosed;	/* its channel got EOF, CLOSE or an exit status */
	int rgarbage;	/* it sent what the protocol does not allow */
	int rdone;	/* the command's end ('X' or 'S') came */
	int via_runner; /* this run's command went to it */

	/* settings.kill_group: the command's process group, and its end. */
	long pgid;		   /* 0: not known */
	char pmark[PGID_MARK_MAX]; /* stderr's start, until the marker */
	size_t pmark_len;
	int pmark_done;	 /* found, or given up on */
	char *wrapped;	 /* the command as sent, with PGID_WRAP */
	ssh_channel kch; /* the channel that kills the group */
	struct ssh_channel_callbacks_struct kcb;
	int kstate;
	int kclosed;		/* it exited or closed */
	int kexit;		/* its exit status; -1: none */
	enum engine_fail kfail; /* what the host is failed with then */
	char *kmsg;

	/* ssh-agent login, shared with the worker under e->lock. */
	struct engine_conn *queue_next;
	struct event *agent_ev;
	struct event *agent_timer; /* the loop's bound on the worker's wait */
	int agent_skipped;	   /* the agent hung: its slot was passed */
	int in_agent;
	int64_t agent_picked_ms; /* when the worker took it up; 0: queued */
	int orphan;
	int agent_rc;
};

static const char *const fail_codes[EF_NKINDS] = {
	[EF_NONE] = "ok",
	[EF_RESOLVE] = "resolve",
	[EF_REFUSED] = "refused",
	[EF_UNREACHABLE] = "unreachable",
	[EF_CONNECT_TIMEOUT] = "connect_timeout",
	[EF_SSH] = "ssh_error",
	[EF_HOSTKEY_CHANGED] = "hostkey_changed",
	[EF_HOSTKEY_UNKNOWN] = "hostkey_unknown",
	[EF_AUTH] = "auth",
	[EF_TIMEOUT] = "timeout",
	[EF_CHANNEL] = "channel",
	[EF_UNSUPPORTED] = "unsupported",
	[EF_INTERRUPTED] = "interrupted",
	[EF_BACKOFF] = "backoff",
};

static void start_more(struct engine_run *);
static void run_done_cb(evutil_socket_t, short, void *);
static void run_free(struct engine_run *);
static void conn_start(struct engine_run *, struct engine_host *, int);
static int window_wants(struct engine_run *, struct engine_host *);
static int window_full(struct engine_run *, struct engine_host *);
static void window_ack(struct engine_conn *, int, int64_t, int64_t);
static void window_leave(struct engine_conn *);
static void conn_fail(struct engine_conn *, enum engine_fail, const char *, ...)
    __attribute__((format(printf, 3, 4)));
static void conn_finish(struct engine_conn *);
static void conn_step(struct engine_conn *);
static void conn_arm(struct engine_conn *, short);
static void conn_arm_ssh(struct engine_conn *);
static void conn_io_cb(evutil_socket_t, short, void *);
static void conn_deadline_cb(evutil_socket_t, short, void *);
static void conn_pump_cb(evutil_socket_t, short, void *);
static void conn_dns_cb(int, struct evutil_addrinfo *, void *);
static void conn_tcp_next(struct engine_conn *);
static void conn_tcp_done(struct engine_conn *);
static int conn_ssh_setup(struct engine_conn *);
static int conn_check_hostkey(struct engine_conn *);
static int conn_auth(struct engine_conn *);
static int auth_offered(struct engine_conn *, int);
static int auth_answer(struct engine_conn *, int);
static void auth_refused(struct engine_conn *);
static void kbdint_line(const char *, char *, size_t);
static int auth_kbdint_answer(struct engine_conn *);
static void conn_write_stdin(struct engine_conn *);
static void conn_phase(struct engine_conn *, int64_t, int64_t);
static void conn_setup_phase(struct engine_conn *);
static int64_t conn_idle_ms(struct engine_conn *, int64_t);
static void conn_deadline_fail(struct engine_conn *, int);
static int agent_picked(struct engine_conn *, int64_t);
static void sigint_cb(evutil_socket_t, short, void *);
static void conn_resolve(struct engine_conn *);
static void conn_via_jump(struct engine_conn *);
static struct engine_jump *jump_new(struct engine_run *, struct engine_host *);
static void jump_start(struct engine_jump *);
static void jump_ready(struct engine_jump *);
static int jump_service(struct engine_jump *);
static void jump_fail(struct engine_jump *, enum engine_fail, const char *);
static void jump_destroy(struct engine_jump *);
static int jump_wanted(struct engine_jump *);
static void jump_idle_cb(evutil_socket_t, short, void *);
static void jump_kick_cb(evutil_socket_t, short, void *);
static void tunnel_pump(struct engine_tunnel *);
static void tunnel_arm(struct engine_tunnel *);
static void tunnel_error(struct engine_tunnel *, enum engine_fail, const char *,
    ...) __attribute__((format(printf, 3, 4)));
static void tunnel_cb(evutil_socket_t, short, void *);
static void tunnel_free(struct engine_tunnel *);
static struct engine_run *run_start(struct engine *, struct engine_host *,
    size_t, const struct engine_settings *, const struct engine_ops *, int);
static int agent_submit(struct engine_conn *);
static void agent_timer_cb(evutil_socket_t, short, void *);
static void *agent_worker(void *);
static void agent_done_cb(evutil_socket_t, short, void *);
static void conn_release(struct engine_conn *);
static int data_cb(ssh_session, ssh_channel, void *, uint32_t, int, void *);
static void eof_cb(ssh_session, ssh_channel, void *);
static void close_cb(ssh_session, ssh_channel, void *);
static void exit_status_cb(ssh_session, ssh_channel, int, void *);
static void exit_signal_cb(ssh_session, ssh_channel, const char *, int,
    const char *, const char *, void *);
static int conn_running(struct engine_conn *);
static void conn_stop(struct engine_conn *, enum engine_fail, const char *);
static int kill_step(struct engine_conn *);
static void kill_end_cb(ssh_session, ssh_channel, void *);
static void kill_exit_cb(ssh_session, ssh_channel, int, void *);
static size_t pgid_take(struct engine_conn *, const char *, size_t);
static int runner_wanted(struct engine_conn *);
static int runner_start(struct engine_conn *);
static int runner_send(struct engine_conn *);
static void runner_poll(struct engine_conn *);
static void runner_frame(
    struct engine_conn *, int, const unsigned char *, size_t);
static void runner_broken(struct engine_conn *, const char *, int);
static size_t runner_flen(const unsigned char *);
static int runner_data_cb(
    ssh_session, ssh_channel, void *, uint32_t, int, void *);
static void runner_end_cb(ssh_session, ssh_channel, void *);
static void runner_exit_cb(ssh_session, ssh_channel, int, void *);

/* The stable reason code of a failure, as printed in summaries and JSON. */
const char *
engine_fail_code(enum engine_fail f)
{
	if ((unsigned)f >= EF_NKINDS)
		return "unknown";
	return fail_codes[f];
}

int64_t
engine_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/*
 * How long to wait before trying a host again after its fails-th
 * connection failure in a row: BACKOFF_FIRST_MS doubling up to
 * BACKOFF_MAX_MS, times a jitter of 0.5 to 1.5 taken from rnd (any value),
 * so that hosts that failed together do not come back together.
 */
int64_t
engine_backoff_ms(int fails, unsigned int rnd)
{
	int64_t d = BACKOFF_FIRST_MS;
	int k;

	if (fails < 1)
		return 0;
	for (k = 1; k < fails && d < BACKOFF_MAX_MS; k++)
		d *= 2;
	if (d > BACKOFF_MAX_MS)
		d = BACKOFF_MAX_MS;
	return d / 2 + d * (int64_t)(rnd % 1000) / 1000;
}

/*
 * Raise the open-file limit so that n connections fit; returns how many
 * connections the limit allows (each holds one socket, plus a reserve for
 * the database, output files and libraries).
 */
size_t
engine_raise_nofile(size_t n)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
		return n;
	if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < n + 64) {
		rl.rlim_cur = rl.rlim_max;
		if (setrlimit(RLIMIT_NOFILE, &rl) != 0)
			debug_f("setrlimit: %s", strerror(errno));
		getrlimit(RLIMIT_NOFILE, &rl);
	}
	if (rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur >= n + 64)
		return n;
	return rl.rlim_cur > 96 ? (size_t)rl.rlim_cur - 64 : 32;
}

/* A window that lets ENGINE_WINDOW_INIT handshakes start at once. */
void
engine_window_init(struct engine_window *w)
{
	int i;

	w->cwnd = ENGINE_WINDOW_INIT;
	for (i = 0; i < ENGINE_WINDOW_PHASES; i++)
		w->best[i] = w->floor[i] = -1;
	w->cut_ms = 0;
}

/*
 * A connection started at started_ms finished a phase at now_ms after
 * span_ms, the server having taken delay_ms of it beyond the round trips.
 * If that delay is close to the least seen, grow the window: by one, and
 * by one more for every WINDOW_SLACK_MS of the least span seen (the time
 * no crowd explains, mostly the network's: a handshake waiting on it
 * costs the server nothing, so far-away hosts open the window in about
 * one round trip instead of a doubling per round). Halve it if the delay
 * is far longer and so is the whole phase (a wait the network's share
 * dwarfs is no crowd), once per round (only for a connection started after
 * the last cut: those before it saw the crowd that caused it).
 */
void
engine_window_ack(struct engine_window *w, int phase, int64_t delay_ms,
    int64_t span_ms, int64_t started_ms, int64_t now_ms)
{
	int64_t best, more;

	if (phase < 0 || phase >= ENGINE_WINDOW_PHASES)
		return;
	if (delay_ms < 0)
		delay_ms = 0;
	if (span_ms < delay_ms)
		span_ms = delay_ms;
	if (w->best[phase] < 0 || delay_ms < w->best[phase])
		w->best[phase] = delay_ms;
	if (w->floor[phase] < 0 || span_ms < w->floor[phase])
		w->floor[phase] = span_ms;
	best = w->best[phase];
	if (delay_ms <= 2 * best + WINDOW_SLACK_MS) {
		more = w->floor[phase] / WINDOW_SLACK_MS;
		if (more > WINDOW_GROWTH_MAX)
			more = WINDOW_GROWTH_MAX;
		w->cwnd += 1 + (double)more;
		if (w->cwnd > WINDOW_MAX)
			w->cwnd = WINDOW_MAX;
	} else if (delay_ms > 4 * best + 4 * WINDOW_SLACK_MS &&
	    span_ms > 4 * w->floor[phase] + 4 * WINDOW_SLACK_MS &&
	    started_ms > w->cut_ms) {
		w->cwnd /= 2;
		if (w->cwnd < ENGINE_WINDOW_MIN)
			w->cwnd = ENGINE_WINDOW_MIN;
		w->cut_ms = now_ms;
	}
}

/* How many handshakes the window lets be in flight. */
size_t
engine_window_size(const struct engine_window *w)
{
	return (size_t)w->cwnd;
}

void
engine_host_clear(struct engine_host *h)
{
	free(h->fail_msg);
	free(h->exit_signal);
	h->fail_msg = h->exit_signal = NULL;
}

/* Start hosts until the fan-out limit or the handshake window is reached. */
static void
start_more(struct engine_run *r)
{
	struct engine_host *h;

	while (r->next < r->n && r->active < (size_t)r->set->fanout &&
	    r->active < r->max_active) {
		h = &r->hosts[r->next];
		if (h->skip) {
			r->next++;
			r->finished++;
			continue;
		}
		if (window_full(r, h))
			break; /* a handshake that completes starts more */
		r->next++;
		conn_start(r, h, window_wants(r, h));
	}
	if (r->finished == r->n && !r->complete) {
		/* Never call back into the caller from inside its own call. */
		r->complete = 1;
		event_active(r->done, EV_TIMEOUT, 1);
	}
}

/* The run is over: tell the caller, then free it (unless engine_run's). */
static void
run_done_cb(evutil_socket_t fd, short what, void *arg)
{
	struct engine_run *r = arg;

	(void)fd;
	(void)what;
	r->reported = 1;
	if (r->ops->finished != NULL)
		r->ops->finished(r, r->ops->arg);
	if (!r->keep)
		run_free(r);
}

/* Unlink a run from its engine and free it. */
static void
run_free(struct engine_run *r)
{
	struct engine_run **p;

	for (p = &r->e->runs; *p != NULL; p = &(*p)->next_run) {
		if (*p == r) {
			*p = r->next_run;
			break;
		}
	}
	event_free(r->done);
	free(r);
}

/* Whether h's start makes a new direct connection, under the window. */
static int
window_wants(struct engine_run *r, struct engine_host *h)
{
	const struct engine_conn *c = h->conn;

	if (r->set->handshake_window == ENGINE_WINDOW_OFF || h->jump != NULL)
		return 0;
	/* A held session goes straight to a new channel. */
	return c == NULL || c->state != CS_IDLE || h->fail != EF_NONE ||
	    r->set->fresh;
}

/* Whether h must wait for a handshake in flight to complete. */
static int
window_full(struct engine_run *r, struct engine_host *h)
{
	size_t size;

	if (!window_wants(r, h))
		return 0;
	if (r->set->handshake_window > 0)
		size = (size_t)r->set->handshake_window;
	else
		size = engine_window_size(&r->win);
	return r->hs_inflight >= size;
}

/*
 * c finished a phase of its handshake after span ms, delay ms of them the
 * server's.
 */
static void
window_ack(struct engine_conn *c, int phase, int64_t delay, int64_t span)
{
	struct engine_run *r = c->r;
	size_t before = engine_window_size(&r->win), after;

	if (!c->in_window)
		return;
	engine_window_ack(
	    &r->win, phase, delay, span, c->h->start_ms, engine_now_ms());
	if ((after = engine_window_size(&r->win)) < before)
		debug_f("%s: handshake window %zu -> %zu (%s took %lld ms "
			"beyond the round trips)",
		    c->h->in->name, before, after,
		    phase == 0 ? "the banner" : "the key exchange",
		    (long long)delay);
}

/* c is past the handshake (or gone): its place in the window is free. */
static void
window_leave(struct engine_conn *c)
{
	if (!c->in_window)
		return;
	c->in_window = 0;
	c->r->hs_inflight--;
}

/* Start h: a new channel on its held session, or a new connection. */
static void
conn_start(struct engine_run *r, struct engine_host *h, int window)
{
	struct engine *e = r->e;
	struct engine_conn *c;

	if ((c = h->conn) != NULL && c->state == CS_IDLE &&
	    (h->fail != EF_NONE || r->set->fresh)) {
		/* Asked for a new login: let the held session go. */
		engine_forget(h);
		c = NULL;
	}
	if (c != NULL && c->state == CS_IDLE) {
		/* A session held from the last run: only a new channel. */
		c->r = r;
		c->reused = 1;
		c->got_exit = c->got_eof = c->got_close = 0;
		c->eof_sent = 0;
		c->stdin_off = 0;
		c->key_index = 0;
		h->exit_status = -1;
		h->start_ms = engine_now_ms();
		h->exec_ms = 0;
		r->active++;
		c->state = CS_OPEN;
		conn_setup_phase(c);
		conn_step(c);
		return;
	}
	if (r->set->backoff && h->retry_at_ms > engine_now_ms() &&
	    h->fail == EF_NONE) {
		h->fail = EF_BACKOFF;
		xasprintf(&h->fail_msg,
		    "not tried: %d connection failure%s in a row, next attempt "
		    "in %llds",
		    h->fails, h->fails > 1 ? "s" : "",
		    (long long)((h->retry_at_ms - engine_now_ms() + 999) /
			1000));
	}
	c = xcalloc(1, sizeof *c);
	c->e = e;
	c->r = r;
	c->h = h;
	c->fd = -1;
	h->conn = c;
	h->exit_status = -1;
	h->start_ms = engine_now_ms();
	h->exec_ms = 0;
	r->active++;
	if (window) {
		c->in_window = 1;
		r->hs_inflight++;
	}
	c->deadline = evtimer_new(e->base, conn_deadline_cb, c);
	c->pump = event_new(e->base, -1, EV_PERSIST, conn_pump_cb, c);
	/* Like OpenSSH's ConnectTimeout: name, TCP and the server's banner. */
	conn_phase(c, h->start_ms + (int64_t)r->set->connect_timeout * 1000, 0);

	if (h->fail != EF_NONE) {
		/* Failed before it started (e.g. an unsupported ProxyJump). */
		char *msg = h->fail_msg;
		h->fail_msg = NULL;
		conn_fail(c, h->fail, "%s", msg != NULL ? msg : "failed");
		free(msg);
		return;
	}
	if (h->nkeys == 0 && h->password == NULL &&
	    (r->set->command != NULL || h->command != NULL)) {
		conn_fail(c, EF_AUTH, "%s",
		    h->keys_error != NULL ? h->keys_error
					  : "no identity to log in with");
		return;
	}
	if (h->jump != NULL)
		conn_via_jump(c);
	else
		conn_resolve(c);
}

/* Resolve the host (numeric at once, names by evdns), then connect. */
static void
conn_resolve(struct engine_conn *c)
{
	struct engine *e = c->e;
	struct engine_host *h = c->h;
	struct evutil_addrinfo hints;
	char port[16];

	memset(&hints, 0, sizeof hints);
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_protocol = IPPROTO_TCP;
	hints.ai_flags = EVUTIL_AI_NUMERICHOST | EVUTIL_AI_NUMERICSERV;
	snprintf(port, sizeof port, "%d", h->in->port);
	c->state = CS_RESOLVE;
	if (evutil_getaddrinfo(h->in->host, port, &hints, &c->ai) == 0) {
		c->ai_next = c->ai;
		conn_tcp_next(c);
		return;
	}
	/* Not numeric: ask evdns, which never blocks the loop. */
	if (e->dns == NULL) {
		e->dns =
		    evdns_base_new(e->base, EVDNS_BASE_INITIALIZE_NAMESERVERS);
		e->own_dns = e->dns != NULL;
	}
	if (e->dns == NULL) {
		conn_fail(c, EF_RESOLVE, "cannot resolve %s: no resolver",
		    h->in->host);
		return;
	}
	hints.ai_flags = EVUTIL_AI_NUMERICSERV | EVUTIL_AI_ADDRCONFIG;
	c->dnsreq = evdns_getaddrinfo(
	    e->dns, h->in->host, port, &hints, conn_dns_cb, c);
}

static void
conn_dns_cb(int result, struct evutil_addrinfo *ai, void *arg)
{
	struct engine_conn *c = arg;

	if (result == EVUTIL_EAI_CANCEL)
		return; /* c was freed by conn_release */
	c->dnsreq = NULL;
	if (result != 0) {
		conn_fail(c, EF_RESOLVE, "cannot resolve %s: %s",
		    c->h->in->host, evutil_gai_strerror(result));
		return;
	}
	c->ai = c->ai_next = ai;
	conn_tcp_next(c);
}

/* Try the next resolved address. */
static void
conn_tcp_next(struct engine_conn *c)
{
	struct evutil_addrinfo *ai;

	c->state = CS_TCP;
	while ((ai = c->ai_next) != NULL) {
		c->ai_next = ai->ai_next;
		c->fd = socket(ai->ai_family,
		    SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
		if (c->fd == -1 && (errno == EMFILE || errno == ENFILE)) {
			/* Our limit, not the host's fault: no backoff. */
			c->local_fail = 1;
			conn_fail(c, EF_UNREACHABLE,
			    "cannot open a socket: %s (a limit of this "
			    "machine)",
			    strerror(errno));
			return;
		}
		if (c->fd == -1) {
			c->last_errno = errno;
			continue;
		}
		if (connect(c->fd, ai->ai_addr, ai->ai_addrlen) == 0) {
			conn_tcp_done(c);
			return;
		}
		if (errno == EINPROGRESS) {
			conn_arm(c, EV_WRITE);
			return;
		}
		c->last_errno = errno;
		close(c->fd);
		c->fd = -1;
	}
	switch (c->last_errno) {
	case ECONNREFUSED:
		conn_fail(c, EF_REFUSED, "connection refused (%s port %d)",
		    c->h->in->host, c->h->in->port);
		break;
	case ETIMEDOUT:
		conn_fail(c, EF_CONNECT_TIMEOUT, "TCP connect timed out");
		break;
	default:
		conn_fail(c, EF_UNREACHABLE, "cannot connect to %s port %d: %s",
		    c->h->in->host, c->h->in->port, strerror(c->last_errno));
		break;
	}
}

/* TCP is up: hand the socket to a new libssh session. */
static void
conn_tcp_done(struct engine_conn *c)
{
	struct tcp_info ti;
	socklen_t len = sizeof ti;
	int one = 1;

	setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
	c->tcp_ms = engine_now_ms();
	c->rtt_ms = c->tcp_ms - c->h->start_ms;
	if (getsockopt(c->fd, IPPROTO_TCP, TCP_INFO, &ti, &len) == 0 &&
	    len >= offsetof(struct tcp_info, tcpi_rtt) + sizeof ti.tcpi_rtt &&
	    ti.tcpi_rtt > 0)
		c->rtt_ms = (ti.tcpi_rtt + 999) / 1000;
	if (conn_ssh_setup(c) != 0)
		return; /* c is gone */
	c->state = CS_HANDSHAKE;
	conn_step(c);
}

/* A libssh session over our socket; on failure c is failed and freed. */
static int
conn_ssh_setup(struct engine_conn *c)
{
	const struct instance *in = c->h->in;
	const struct engine_ops *ops = c->r->ops;
	const char *pinned = NULL;
	char *hostkeys = NULL;
	int no = 0, yes = 1, verbosity = SSH_LOG_NOLOG;
	unsigned int port = in->port;
	socket_t fd = c->fd;

	if ((c->s = ssh_new()) == NULL) {
		conn_fail(c, EF_SSH, "cannot create an SSH session");
		return -1;
	}
	if (ops->hostkey_type != NULL)
		pinned = ops->hostkey_type(c->h, ops->arg);
	if (pinned != NULL && strcmp(pinned, "ssh-rsa") == 0)
		xasprintf(&hostkeys, "rsa-sha2-512,rsa-sha2-256,%s",
		    HOSTKEY_ALGORITHMS);
	else if (pinned != NULL)
		xasprintf(&hostkeys, "%s,%s", pinned, HOSTKEY_ALGORITHMS);
	else
		hostkeys = xstrdup(HOSTKEY_ALGORITHMS);

	if (log_get_level() >= LOG_DEBUG && getenv("GPUFLEET_SSH_DEBUG"))
		verbosity = SSH_LOG_PROTOCOL;
	if (ssh_options_set(c->s, SSH_OPTIONS_LOG_VERBOSITY, &verbosity) < 0 ||
	    ssh_options_set(c->s, SSH_OPTIONS_PROCESS_CONFIG, &no) < 0 ||
	    ssh_options_set(c->s, SSH_OPTIONS_PORT, &port) < 0 ||
	    ssh_options_set(c->s, SSH_OPTIONS_USER, in->user) < 0 ||
	    ssh_options_set(c->s, SSH_OPTIONS_KNOWNHOSTS, "/dev/null") < 0 ||
	    ssh_options_set(c->s, SSH_OPTIONS_GLOBAL_KNOWNHOSTS, "/dev/null") <
		0 ||
	    ssh_options_set(c->s, SSH_OPTIONS_KEY_EXCHANGE, KEX_ALGORITHMS) <
		0 ||
	    ssh_options_set(c->s, SSH_OPTIONS_HOSTKEYS, hostkeys) < 0 ||
	    ssh_options_set(c->s, SSH_OPTIONS_CIPHERS_C_S, CIPHERS) < 0 ||
	    ssh_options_set(c->s, SSH_OPTIONS_CIPHERS_S_C, CIPHERS) < 0 ||
	    ssh_options_set(c->s, SSH_OPTIONS_COMPRESSION, "no") < 0 ||
	    ssh_options_set(c->s, SSH_OPTIONS_NODELAY, &yes) < 0 ||
	    ssh_options_set(c->s, SSH_OPTIONS_FD, &fd) < 0) {
		char *why = xstrdup(ssh_get_error(c->s));
		free(hostkeys);
		conn_fail(c, EF_SSH, "cannot set SSH options: %s", why);
		free(why);
		return -1;
	}
	free(hostkeys);
	/*
	 * The host name only labels the session (known_hosts is ours): a
	 * name libssh refuses, such as one with '_', must not stop it.
	 */
	if (ssh_options_set(c->s, SSH_OPTIONS_HOST, in->host) < 0)
		debug_f("%s: libssh refuses host name %s; going on without",
		    in->name, in->host);
	ssh_set_blocking(c->s, 0);
	return 0;
}

/* Wait for the fd with the given events (the timer runs separately). */
static void
conn_arm(struct engine_conn *c, short what)
{
	if (c->ev == NULL)
		c->ev = event_new(c->e->base, c->fd, what, conn_io_cb, c);
	else {
		event_del(c->ev);
		event_assign(c->ev, c->e->base, c->fd, what, conn_io_cb, c);
	}
	event_add(c->ev, NULL);
}

/* Wait for what libssh wants: always input, output while it has some. */
static void
conn_arm_ssh(struct engine_conn *c)
{
	short what = EV_READ;

	if (ssh_get_poll_flags(c->s) & SSH_WRITE_PENDING)
		what |= EV_WRITE;
	conn_arm(c, what);
}

static void
conn_io_cb(evutil_socket_t fd, short what, void *arg)
{
	struct engine_conn *c = arg;
	socklen_t len = sizeof c->last_errno;

	(void)fd;
	if (what & EV_READ)
		c->last_read_ms = engine_now_ms();
	if (c->state == CS_TCP) {
		if (getsockopt(
			c->fd, SOL_SOCKET, SO_ERROR, &c->last_errno, &len) != 0)
			c->last_errno = errno;
		if (c->last_errno == 0) {
			conn_tcp_done(c);
			return;
		}
		close(c->fd);
		c->fd = -1;
		conn_tcp_next(c);
		return;
	}
	conn_step(c);
}

/*
 * Enter a phase with its deadlines: a hard limit at_ms (0: none) and, for
 * set-up, a limit on silence from the server (idle_ms, 0: none). The
 * deadline timer is added here and in its own callback only, never from
 * the I/O path: re-adding a timer that has fired but not yet run takes it
 * off libevent's active list, and a peer that keeps sending would then
 * hold the deadline off for ever.
 */
static void
conn_phase(struct engine_conn *c, int64_t at_ms, int64_t idle_ms)
{
	int64_t now = engine_now_ms(), at = at_ms;
	struct timeval tv;

	c->deadline_ms = at_ms;
	c->idle_limit_ms = idle_ms;
	c->last_read_ms = now;
	if (idle_ms != 0 && (at == 0 || at > now + idle_ms))
		at = now + idle_ms;
	evtimer_del(c->deadline);
	if (at == 0)
		return;
	if (at < now)
		at = now;
	tv.tv_sec = (at - now) / 1000;
	tv.tv_usec = ((at - now) % 1000) * 1000;
	evtimer_add(c->deadline, &tv);
}

/*
 * Set-up after the banner (key exchange, login, channel, exec request):
 * a slow server is not a dead one, so the limit is silence, under an
 * overall cap.
 */
static void
conn_setup_phase(struct engine_conn *c)
{
	const struct engine_settings *set = c->r->set;
	int64_t idle =
	    (set->setup_timeout > 0 ? set->setup_timeout : SETUP_IDLE_DEFAULT) *
	    (int64_t)1000;

	if (c->reused) {
		/*
		 * A held session answers a channel request at once; one
		 * that does not within the connect timeout is gone (a NAT
		 * dropped it, the host rebooted): log in anew.
		 */
		idle = (int64_t)set->connect_timeout * 1000;
	}
	conn_phase(c, engine_now_ms() + idle * SETUP_CAP_FACTOR, idle);
}

/*
 * How long the server has sent nothing: the kernel's count where it has
 * one (it sees bytes libssh read during another call), otherwise the
 * last time the socket woke us to read.
 */
static int64_t
conn_idle_ms(struct engine_conn *c, int64_t now)
{
	struct tcp_info ti;
	socklen_t len = sizeof ti;
	int64_t idle = now - c->last_read_ms;

	if (c->fd != -1 &&
	    getsockopt(c->fd, IPPROTO_TCP, TCP_INFO, &ti, &len) == 0 &&
	    len >= offsetof(struct tcp_info, tcpi_last_data_recv) +
		    sizeof ti.tcpi_last_data_recv &&
	    (int64_t)ti.tcpi_last_data_recv < idle)
		idle = ti.tcpi_last_data_recv;
	return idle;
}

static void
conn_deadline_cb(evutil_socket_t fd, short what, void *arg)
{
	struct engine_conn *c = arg;
	int64_t now = engine_now_ms(), idle, at;
	struct timeval tv;

	(void)fd;
	(void)what;
	if (c->deadline_ms != 0 && now >= c->deadline_ms) {
		conn_deadline_fail(c, 0);
		return;
	}
	if (c->idle_limit_ms == 0) {
		/* Early by a millisecond: come back at the deadline. */
		at = c->deadline_ms;
	} else {
		idle = conn_idle_ms(c, now);
		if (c->state == CS_AGENT && !agent_picked(c, now))
			idle = 0; /* queued behind other logins: not silence */
		if (idle >= c->idle_limit_ms) {
			conn_deadline_fail(c, 1);
			return;
		}
		at = now + (c->idle_limit_ms - idle);
		if (c->deadline_ms != 0 && at > c->deadline_ms)
			at = c->deadline_ms;
	}
	if (at == 0)
		return;
	if (at <= now)
		at = now + 1;
	tv.tv_sec = (at - now) / 1000;
	tv.tv_usec = ((at - now) % 1000) * 1000;
	evtimer_add(c->deadline, &tv);
}

/*
 * Whether the ssh-agent worker has taken c up; the silence of a login
 * counts from then (while queued, only the overall cap applies).
 */
static int
agent_picked(struct engine_conn *c, int64_t now)
{
	int64_t picked;

	pthread_mutex_lock(&c->e->lock);
	picked = c->agent_picked_ms;
	pthread_mutex_unlock(&c->e->lock);
	if (picked == 0)
		return 0;
	if (picked > c->last_read_ms && picked <= now)
		c->last_read_ms = picked;
	return 1;
}

/* Say why the phase's deadline failed the host (idle: silence). */
static void
conn_deadline_fail(struct engine_conn *c, int idle)
{
	const struct engine_settings *set = c->r->set;
	int secs = set->connect_timeout;
	long quiet = (long)(c->idle_limit_ms / 1000);
	long cap = quiet * SETUP_CAP_FACTOR;

	switch (c->state) {
	case CS_IDLE:
	case CS_JUMP:
		break;
	case CS_TUNNEL: {
		/*
		 * The jump's banner came in time: its key exchange and login
		 * have set-up's limits, as a direct host's would.
		 */
		const struct engine_conn *jc = c->tun->j->c;
		const char *jname = c->h->jump->in->name;
		if (!c->tun_setup && jc != NULL && jc->banner_seen &&
		    jc->state != CS_JUMP) {
			c->tun_setup = 1;
			conn_setup_phase(c);
		} else if (jc != NULL && jc->state == CS_JUMP)
			conn_fail(c, EF_CONNECT_TIMEOUT,
			    "via jump %s: no channel to %s port %d within %ds",
			    jname, c->h->in->host, c->h->in->port, secs);
		else if (jc != NULL && !jc->banner_seen)
			conn_fail(c, EF_CONNECT_TIMEOUT,
			    "via jump %s: no SSH banner within %ds (the host "
			    "accepted TCP but did not speak SSH)",
			    jname, secs);
		else
			conn_fail(c, EF_CONNECT_TIMEOUT,
			    "via jump %s: logging in to the jump host did not "
			    "finish in time",
			    jname);
		break;
	}
	case CS_RESOLVE:
		conn_fail(c, EF_RESOLVE, "resolving %s timed out after %ds",
		    c->h->in->host, secs);
		break;
	case CS_TCP:
		conn_fail(c, EF_CONNECT_TIMEOUT,
		    "TCP connect timed out after %ds", secs);
		break;
	case CS_HANDSHAKE:
		if (!c->banner_seen) {
			conn_fail(c, EF_CONNECT_TIMEOUT,
			    "no SSH banner within %ds (the host accepted TCP "
			    "but did not speak SSH)",
			    secs);
			break;
		}
		/* FALLTHROUGH */
	case CS_AGENT:
	case CS_AUTH:
	case CS_OPEN:
	case CS_EXEC:
		if (c->state == CS_OPEN && c->rstate == RS_HELLO) {
			/* The session answered, its runner did not: a channel.
			 */
			runner_broken(c, "no hello in time", 0);
			conn_setup_phase(c);
			conn_step(c);
			break;
		}
		if (c->reused) {
			/* conn_fail logs in anew, once. */
			conn_fail(c, EF_SSH, "the held session did not answer");
			break;
		}
		if (idle)
			conn_fail(c, EF_CONNECT_TIMEOUT,
			    "session set-up stalled: nothing from the server "
			    "for %lds%s",
			    quiet,
			    c->state == CS_AGENT ? " (waiting for ssh-agent)"
						 : "");
		else
			conn_fail(c, EF_CONNECT_TIMEOUT,
			    "session set-up did not finish within %lds%s", cap,
			    c->state == CS_AGENT ? " (waiting for ssh-agent)"
						 : "");
		break;
	case CS_RUN: {
		char *msg;
		xasprintf(
		    &msg, "command timed out after %ds", set->command_timeout);
		conn_stop(c, EF_TIMEOUT, msg);
		free(msg);
		break;
	}
	case CS_KILL:
		if (c->pgid <= 0)
			conn_fail(c, c->kfail,
			    "%s; the remote command's process group was not "
			    "known: it may still run",
			    c->kmsg);
		else
			conn_fail(c, c->kfail,
			    "%s; killing the remote command (process group "
			    "%ld) did not finish in time: it may still run",
			    c->kmsg, c->pgid);
		break;
	}
}

/* While the command runs: handle what libssh may hold without a wake-up. */
static void
conn_pump_cb(evutil_socket_t fd, short what, void *arg)
{
	struct engine_conn *c = arg;

	(void)fd;
	(void)what;
	if (c->state == CS_RUN || c->state == CS_KILL || c->state == CS_JUMP)
		conn_step(c);
}

/*
 * Check the server's host key through the caller; returns 0 to go on.
 */
static int
conn_check_hostkey(struct engine_conn *c)
{
	const struct engine_ops *ops = c->r->ops;
	ssh_key key = NULL;
	unsigned char *hash = NULL;
	size_t hlen;
	char *b64 = NULL, *fp = NULL, *msg = NULL;
	const char *type;
	enum engine_fail fail = EF_NONE;
	int r = -1;

	if (ssh_get_server_publickey(c->s, &key) != SSH_OK ||
	    ssh_pki_export_pubkey_base64(key, &b64) != SSH_OK ||
	    ssh_get_publickey_hash(
		key, SSH_PUBLICKEY_HASH_SHA256, &hash, &hlen) != 0 ||
	    (fp = ssh_get_fingerprint_hash(
		 SSH_PUBLICKEY_HASH_SHA256, hash, hlen)) == NULL) {
		conn_fail(c, EF_SSH, "cannot read the server's host key");
		goto out;
	}
	type = ssh_key_type_to_char(ssh_key_type(key));
	if (ops->hostkey != NULL &&
	    ops->hostkey(c->h, type, b64, fp, &fail, &msg, ops->arg) != 0) {
		conn_fail(c, fail != EF_NONE ? fail : EF_HOSTKEY_CHANGED, "%s",
		    msg != NULL ? msg : "host key refused");
		free(msg);
		goto out;
	}
	r = 0;
out:
	if (hash != NULL)
		ssh_clean_pubkey_hash(&hash);
	ssh_string_free_char(fp);
	ssh_string_free_char(b64);
	ssh_key_free(key);
	return r;
}

/* Write what the remote window takes of stdin, then EOF. */
static void
conn_write_stdin(struct engine_conn *c)
{
	const struct engine_settings *set = c->r->set;
	const char *data = set->stdin_data;
	size_t len = set->stdin_len, left, n;
	uint32_t window;
	int w;

	if (c->h->stdin_data != NULL) {
		data = c->h->stdin_data;
		len = c->h->stdin_len;
	}
	if (c->eof_sent)
		return;
	if (data != NULL && c->stdin_off < len) {
		if (ssh_get_poll_flags(c->s) & SSH_WRITE_PENDING)
			return;
		left = len - c->stdin_off;
		window = ssh_channel_window_size(c->ch);
		n = left < STDIN_CHUNK ? left : STDIN_CHUNK;
		if (n > window)
			n = window;
		if (n == 0)
			return;
		w = ssh_channel_write(c->ch, data + c->stdin_off, (uint32_t)n);
		if (w < 0) {
			conn_fail(c, EF_SSH, "writing stdin: %s",
			    ssh_get_error(c->s));
			return;
		}
		c->stdin_off += (size_t)w;
		if (c->stdin_off < len)
			return;
	}
	if (ssh_channel_send_eof(c->ch) == SSH_ERROR) {
		conn_fail(c, EF_SSH, "sending EOF: %s", ssh_get_error(c->s));
		return;
	}
	c->eof_sent = 1;
}

/* Whether the server still offers METHOD (before it said: assume so). */
static int
auth_offered(struct engine_conn *c, int method)
{
	int m = ssh_userauth_list(c->s, NULL);

	return m == 0 || (m & method) != 0;
}

/* Fail the login as refused, saying what was tried (never the password). */
static void
auth_refused(struct engine_conn *c)
{
	struct engine_host *h = c->h;
	const char *keys =
	    h->nkeys > 1 || c->agent_tried ? "our keys" : "our key";
	const char *agent = c->agent_skipped
	    ? " (ssh-agent skipped: it did not answer)"
	    : c->agent_tried ? " (ssh-agent included)"
			     : "";
	int m = ssh_userauth_list(c->s, NULL);

	if (h->password != NULL && m != 0 &&
	    (m & (SSH_AUTH_METHOD_PASSWORD | SSH_AUTH_METHOD_INTERACTIVE)) ==
		0) {
		/* No password is taken at all: not "refused" this one. */
		if (h->nkeys == 0)
			conn_fail(c, EF_AUTH,
			    "%s@%s takes no password (its sshd offers neither "
			    "password nor keyboard-interactive login)",
			    h->in->user, h->in->host);
		else
			conn_fail(c, EF_AUTH,
			    "%s@%s refused %s%s and takes no password (its "
			    "sshd offers neither password nor "
			    "keyboard-interactive login)",
			    h->in->user, h->in->host, keys, agent);
	} else if (h->password == NULL)
		conn_fail(c, EF_AUTH, "%s@%s refused %s%s", h->in->user,
		    h->in->host, keys, agent);
	else if (h->nkeys == 0)
		conn_fail(c, EF_AUTH, "%s@%s refused the password", h->in->user,
		    h->in->host);
	else
		conn_fail(c, EF_AUTH, "%s@%s refused %s%s and the password",
		    h->in->user, h->in->host, keys, agent);
}

/* A server's prompt as one line of at most len - 1 bytes, for a message. */
static void
kbdint_line(const char *p, char *q, size_t len)
{
	size_t j = 0;

	for (; *p != '\0' && j < len - 1; p++)
		q[j++] = *p == '\n' || *p == '\r' || *p == '\t' ? ' ' : *p;
	while (j > 0 && q[j - 1] == ' ')
		j--;
	q[j] = '\0';
}

/*
 * Answer one keyboard-interactive round: every echo-off prompt gets the
 * password, once. A second round that asks again means it was refused; an
 * echoed prompt asks for something we do not have. Returns 0, or -1 with
 * the host failed.
 */
static int
auth_kbdint_answer(struct engine_conn *c)
{
	struct engine_host *h = c->h;
	const char *p;
	char q[128], echo;
	int i, n;

	n = ssh_userauth_kbdint_getnprompts(c->s);
	if (++c->kbd_rounds > KBDINT_MAX_ROUNDS) {
		conn_fail(c, EF_AUTH,
		    "%s@%s kept asking (keyboard-interactive)", h->in->user,
		    h->in->host);
		return -1;
	}
	for (i = 0; i < n; i++) {
		echo = 0;
		if ((p = ssh_userauth_kbdint_getprompt(
			 c->s, (unsigned int)i, &echo)) == NULL ||
		    echo) {
			conn_fail(c, EF_AUTH,
			    "%s@%s asked for more than a password "
			    "(keyboard-interactive)",
			    h->in->user, h->in->host);
			return -1;
		}
		if (c->kbd_answered &&
		    strncmp(p, c->kbd_prompt, sizeof c->kbd_prompt - 1) == 0) {
			auth_refused(c); /* the same question again */
			return -1;
		}
		if (c->kbd_answered) {
			/* Such as PAM's change of an expired password. */
			kbdint_line(p, q, sizeof q);
			conn_fail(c, EF_AUTH,
			    "%s@%s took the password, then asked \"%s\" "
			    "(keyboard-interactive): log in once by hand to "
			    "answer it",
			    h->in->user, h->in->host, q);
			return -1;
		}
		snprintf(c->kbd_prompt, sizeof c->kbd_prompt, "%s", p);
		if (ssh_userauth_kbdint_setanswer(
			c->s, (unsigned int)i, h->password) < 0) {
			conn_fail(c, EF_SSH, "keyboard-interactive: %s",
			    ssh_get_error(c->s));
			return -1;
		}
	}
	if (n > 0)
		c->kbd_answered = 1;
	return 0;
}

/*
 * What libssh's answer rc to one way of logging in means: AUTH_OK,
 * AUTH_WAIT, AUTH_GONE (an error: the host failed) or AUTH_NEXT (denied or
 * partial: try the next way).
 */
static int
auth_answer(struct engine_conn *c, int rc)
{
	if (rc == SSH_AUTH_SUCCESS)
		return AUTH_OK;
	if (rc == SSH_AUTH_AGAIN)
		return AUTH_WAIT;
	if (rc == SSH_AUTH_ERROR) {
		conn_fail(
		    c, EF_SSH, "authentication error: %s", ssh_get_error(c->s));
		return AUTH_GONE;
	}
	return AUTH_NEXT;
}

/*
 * Log in without waiting: the keys in order (a NULL slot hands the
 * connection to the ssh-agent worker), then, where the host has a password,
 * password authentication and keyboard-interactive, each only while the
 * server offers it. Returns AUTH_OK, AUTH_WAIT (call again when the socket
 * is ready) or AUTH_GONE (the host failed, or the worker has it).
 */
static int
conn_auth(struct engine_conn *c)
{
	struct engine_host *h = c->h;
	int rc;

	while (c->auth_phase == AUTH_KEYS && c->key_index < h->nkeys) {
		if (h->keys[c->key_index] == NULL) {
			if (agent_submit(c) == 0)
				return AUTH_GONE;
			c->key_index++; /* the agent hangs: next key */
			continue;
		}
		rc = ssh_userauth_publickey(c->s, NULL, h->keys[c->key_index]);
		if ((rc = auth_answer(c, rc)) != AUTH_NEXT)
			return rc;
		c->key_index++;
	}
	if (c->auth_phase == AUTH_KEYS) {
		if (h->password == NULL) {
			auth_refused(c);
			return AUTH_GONE;
		}
		c->auth_phase = AUTH_PASSWORD;
	}
	if (c->auth_phase == AUTH_PASSWORD) {
		if (auth_offered(c, SSH_AUTH_METHOD_PASSWORD)) {
			rc = ssh_userauth_password(c->s, NULL, h->password);
			if ((rc = auth_answer(c, rc)) != AUTH_NEXT)
				return rc;
		}
		c->auth_phase = AUTH_KBDINT;
	}
	if (auth_offered(c, SSH_AUTH_METHOD_INTERACTIVE)) {
		for (;;) {
			rc = ssh_userauth_kbdint(c->s, NULL, NULL);
			if (rc == SSH_AUTH_INFO) {
				if (auth_kbdint_answer(c) != 0)
					return AUTH_GONE;
				continue;
			}
			if ((rc = auth_answer(c, rc)) != AUTH_NEXT)
				return rc;
			break;
		}
	}
	auth_refused(c);
	return AUTH_GONE;
}

/* Run the state machine as far as it goes without waiting. */
static void
conn_step(struct engine_conn *c)
{
	const struct engine_settings *set = c->r->set;
	struct engine_host *h = c->h;
	int rc;

	switch (c->state) {
	case CS_RESOLVE:
	case CS_TCP:
	case CS_IDLE:
	case CS_AGENT:
	case CS_TUNNEL:
		return;
	case CS_JUMP:
		if (jump_service(c->jmp) != 0)
			return; /* c is gone */
		break;
	case CS_KILL:
		if ((rc = kill_step(c)) == 0)
			break;
		if (rc > 0)
			conn_fail(c, c->kfail,
			    "%s; killed the remote command (process group %ld)",
			    c->kmsg, c->pgid);
		else if (rc == -2)
			conn_fail(c, c->kfail, "%s", c->kmsg);
		else
			conn_fail(c, c->kfail,
			    "%s; could not kill the remote command (process "
			    "group %ld): it may still run",
			    c->kmsg, c->pgid);
		return;
	case CS_HANDSHAKE:
		c->ssh_started = 1;
		rc = ssh_connect(c->s);
		if (!c->banner_seen && ssh_get_serverbanner(c->s) != NULL) {
			c->banner_seen = 1;
			c->banner_ms = engine_now_ms();
			window_ack(c, 0, c->banner_ms - c->tcp_ms - c->rtt_ms,
			    c->banner_ms - c->h->start_ms);
			conn_setup_phase(c);
		}
		if (rc == SSH_AGAIN)
			break;
		if (rc != SSH_OK) {
			conn_fail(c, EF_SSH, "SSH handshake failed: %s",
			    ssh_get_error(c->s));
			return;
		}
		if (c->in_window) {
			window_ack(c, 1,
			    engine_now_ms() - c->banner_ms - 2 * c->rtt_ms,
			    engine_now_ms() - c->banner_ms);
			window_leave(c);
			start_more(c->r);
		}
		if (conn_check_hostkey(c) != 0)
			return;
		if (set->command == NULL && h->command == NULL &&
		    c->jmp == NULL) {
			/* Handshake only: the host key was all we wanted. */
			conn_finish(c);
			return;
		}
		c->state = CS_AUTH;
		/* FALLTHROUGH */
	case CS_AUTH:
		rc = conn_auth(c);
		if (rc == AUTH_GONE)
			return;
		if (rc == AUTH_WAIT)
			break;
		c->state = CS_OPEN;
		/* FALLTHROUGH */
	case CS_OPEN:
		if (c->jmp != NULL) {
			/* A jump host: logged in is all it needs. */
			jump_ready(c->jmp);
			return;
		}
		if (runner_wanted(c)) {
			rc = runner_start(c);
			if (rc == RUNNER_GONE)
				return;
			if (rc == RUNNER_WAIT)
				break;
			if (rc == RUNNER_READY &&
			    (rc = runner_send(c)) == RUNNER_WAIT)
				break;
			if (rc == RUNNER_READY) {
				if (conn_running(c) != 0)
					return;
				goto run;
			}
			/* Broken: the command gets a channel of its own. */
		}
		if (c->ch == NULL) {
			if ((c->ch = ssh_channel_new(c->s)) == NULL) {
				conn_fail(c, EF_CHANNEL,
				    "cannot create a "
				    "channel: %s",
				    ssh_get_error(c->s));
				return;
			}
			memset(&c->cb, 0, sizeof c->cb);
			c->cb.userdata = c;
			c->cb.channel_data_function = data_cb;
			c->cb.channel_eof_function = eof_cb;
			c->cb.channel_close_function = close_cb;
			c->cb.channel_exit_status_function = exit_status_cb;
			c->cb.channel_exit_signal_function = exit_signal_cb;
			ssh_callbacks_init(&c->cb);
			ssh_set_channel_callbacks(c->ch, &c->cb);
		}
		rc = ssh_channel_open_session(c->ch);
		if (rc == SSH_AGAIN)
			break;
		if (rc != SSH_OK) {
			conn_fail(c, EF_CHANNEL, "session channel refused: %s",
			    ssh_get_error(c->s));
			return;
		}
		c->state = CS_EXEC;
		/* FALLTHROUGH */
	case CS_EXEC:
		if (set->kill_group && c->wrapped == NULL)
			xasprintf(&c->wrapped, "%s%s", PGID_WRAP,
			    h->command != NULL ? h->command : set->command);
		rc = ssh_channel_request_exec(c->ch,
		    c->wrapped != NULL	     ? c->wrapped
			: h->command != NULL ? h->command
					     : set->command);
		if (rc == SSH_AGAIN)
			break;
		if (rc != SSH_OK) {
			conn_fail(c, EF_CHANNEL, "exec request refused: %s",
			    ssh_get_error(c->s));
			return;
		}
		if (conn_running(c) != 0)
			return;
		/* FALLTHROUGH */
	case CS_RUN:
	run:
		if (h->hold_output) {
			/* The caller's reader is behind: the pump comes back.
			 */
			if (c->ev != NULL)
				event_del(c->ev);
			return;
		}
		if (c->via_runner) {
			runner_poll(c);
			if (h->done)
				return;
			break;
		}
		conn_write_stdin(c);
		if (h->done)
			return;
		if (ssh_event_dopoll(c->sev, 0) == SSH_ERROR &&
		    !ssh_is_connected(c->s) && !c->got_close) {
			conn_fail(c, EF_SSH, "connection lost: %s",
			    ssh_get_error(c->s));
			return;
		}
		if (c->got_close || (c->got_eof && c->got_exit) ||
		    !ssh_is_connected(c->s)) {
			if (!c->got_exit && !c->got_close &&
			    h->exit_signal == NULL) {
				conn_fail(c, EF_SSH,
				    "connection closed "
				    "before the command finished");
				return;
			}
			conn_finish(c);
			return;
		}
		conn_write_stdin(c);
		if (h->done)
			return;
		break;
	}
	conn_arm_ssh(c);
}

/*
 * The command was accepted: its deadline, the pump and the session's
 * poller. Returns 0, or -1 when c failed (and may be gone).
 */
static int
conn_running(struct engine_conn *c)
{
	const struct engine_settings *set = c->r->set;
	struct timeval pump = { 0, PUMP_MS * 1000 };

	c->state = CS_RUN;
	c->h->exec_ms = engine_now_ms();
	conn_phase(c,
	    set->command_timeout > 0
		? engine_now_ms() + (int64_t)set->command_timeout * 1000
		: 0,
	    0);
	event_add(c->pump, &pump);
	if (c->sev == NULL &&
	    ((c->sev = ssh_event_new()) == NULL ||
		ssh_event_add_session(c->sev, c->s) != SSH_OK)) {
		conn_fail(c, EF_SSH, "cannot poll the session");
		return -1;
	}
	return 0;
}

static int
data_cb(ssh_session s, ssh_channel ch, void *data, uint32_t len, int is_stderr,
    void *arg)
{
	struct engine_conn *c = arg;
	const struct engine_ops *ops = c->r->ops;

	const char *p = data;
	size_t skip = 0;

	(void)s;
	if (ch != c->ch)
		return (int)len; /* a channel of an earlier run */
	if (is_stderr && c->wrapped != NULL && !c->pmark_done)
		skip = pgid_take(c, data, len);
	if (c->state == CS_KILL && c->h->hold_output)
		return (int)len; /* the caller's reader is behind: dropped */
	if (ops->output != NULL && len > skip)
		ops->output(c->h, is_stderr, p + skip, len - skip, ops->arg);
	return (int)len;
}

static void
eof_cb(ssh_session s, ssh_channel ch, void *arg)
{
	struct engine_conn *c = arg;

	(void)s;
	if (ch != c->ch)
		return;
	c->got_eof = 1;
}

static void
close_cb(ssh_session s, ssh_channel ch, void *arg)
{
	struct engine_conn *c = arg;

	(void)s;
	if (ch != c->ch)
		return;
	c->got_close = 1;
}

static void
exit_status_cb(ssh_session s, ssh_channel ch, int status, void *arg)
{
	struct engine_conn *c = arg;

	(void)s;
	if (ch != c->ch)
		return;
	c->h->exit_status = status;
	c->got_exit = 1;
}

static void
exit_signal_cb(ssh_session s, ssh_channel ch, const char *signal, int core,
    const char *errmsg, const char *lang, void *arg)
{
	struct engine_conn *c = arg;

	(void)s;
	if (ch != c->ch)
		return;
	(void)core;
	(void)errmsg;
	(void)lang;
	free(c->h->exit_signal);
	c->h->exit_signal = xstrdup(signal != NULL ? signal : "?");
	c->got_exit = 1;
}

/*
 * settings.kill_group: the start of the command's stderr, looked at for
 * the line PGID_WRAP writes (startup files of the remote shell may write
 * before it). Returns how many bytes of data to leave out of the output:
 * held while the marker may still come; all that was held comes out, in
 * front, once it cannot (no marker: the group is not known).
 */
static size_t
pgid_take(struct engine_conn *c, const char *data, size_t len)
{
	const struct engine_ops *ops = c->r->ops;
	size_t mlen = strlen(PGID_MARK), take, cmp, i;
	char *nl, *end;
	long pgid;

	take = sizeof c->pmark - 1 - c->pmark_len;
	if (take > len)
		take = len;
	memcpy(c->pmark + c->pmark_len, data, take);
	c->pmark_len += take;
	c->pmark[c->pmark_len] = '\0';
	cmp = c->pmark_len < mlen ? c->pmark_len : mlen;
	if (memcmp(c->pmark, PGID_MARK, cmp) == 0) {
		nl = memchr(c->pmark, '\n', c->pmark_len);
		if (nl == NULL && c->pmark_len < sizeof c->pmark - 1)
			return len; /* all of it held, so far */
		if (nl != NULL) {
			errno = 0;
			pgid = strtol(c->pmark + mlen, &end, 10);
			if (end == nl && end != c->pmark + mlen && errno == 0 &&
			    pgid > 1) {
				c->pgid = pgid;
				c->pmark_done = 1;
				/* What came after the line in this piece. */
				i = (size_t)(nl + 1 - c->pmark);
				return len - (c->pmark_len - i);
			}
		}
	}
	/* Not the marker: what was held, then the rest of data. */
	c->pmark_done = 1;
	if (ops->output != NULL && c->pmark_len > take)
		ops->output(c->h, 1, c->pmark, c->pmark_len - take, ops->arg);
	return 0;
}

/*
 * The command must end before it finished (a deadline, a cancel): with
 * settings.kill_group and its process group known, a channel of its own
 * sends the group SIGTERM, then SIGKILL if anything of it is left after
 * a grace, and c fails with fail and msg once that is done; else (or
 * already ending) at once.
 */
static void
conn_stop(struct engine_conn *c, enum engine_fail fail, const char *msg)
{
	if (c->state != CS_RUN || c->via_runner || c->wrapped == NULL ||
	    (c->pgid <= 0 && c->pmark_done) || c->jmp != NULL ||
	    !ssh_is_connected(c->s)) {
		if (c->state == CS_RUN && c->wrapped != NULL && c->pgid <= 0)
			conn_fail(c, fail,
			    "%s; the remote command's process group was not "
			    "known: it may still run",
			    msg);
		else
			conn_fail(c, fail, "%s", msg);
		return;
	}
	debug_f("%s: %s: ending its process group", c->h->in->name, msg);
	c->state = CS_KILL;
	/* Its group's line may not have come yet: wait for it first. */
	c->kstate = c->pgid > 0 ? 0 : -1;
	c->kfail = fail;
	c->kexit = -1;
	free(c->kmsg);
	c->kmsg = xstrdup(msg);
	conn_phase(c, engine_now_ms() + KILL_WAIT_MS, 0);
	conn_step(c);
}

/*
 * Bring the killing channel on: 0 (wait), 1 (it is done: the group was
 * signalled), -1 (it failed) or -2 (the group is not known: the command's
 * channel ended, or its stderr did not start with the group's line).
 */
static int
kill_step(struct engine_conn *c)
{
	char cmd[512];
	int rc;

	if (c->kstate == -1) {
		if (ssh_event_dopoll(c->sev, 0) == SSH_ERROR &&
		    !ssh_is_connected(c->s))
			return -1;
		if (c->pgid <= 0 &&
		    (c->pmark_done || c->got_close || !ssh_is_connected(c->s)))
			return -2;
		if (c->pgid <= 0)
			return 0;
		c->kstate = 0;
	}
	switch (c->kstate) {
	case 0:
		if ((c->kch = ssh_channel_new(c->s)) == NULL)
			return -1;
		memset(&c->kcb, 0, sizeof c->kcb);
		c->kcb.userdata = c;
		c->kcb.channel_close_function = kill_end_cb;
		c->kcb.channel_exit_status_function = kill_exit_cb;
		ssh_callbacks_init(&c->kcb);
		ssh_set_channel_callbacks(c->kch, &c->kcb);
		c->kstate = 1;
		/* FALLTHROUGH */
	case 1:
		if ((rc = ssh_channel_open_session(c->kch)) == SSH_AGAIN)
			return 0;
		if (rc != SSH_OK)
			return -1;
		c->kstate = 2;
		/* FALLTHROUGH */
	case 2:
		/*
		 * TERM; KILL to what is left after 2 s (in 0.1 s steps). One
		 * sh -c word: the login shell may be fish or csh.
		 */
		snprintf(cmd, sizeof cmd,
		    "sh -c 'kill -s TERM -- -%ld 2>/dev/null || exit 0; i=0; "
		    "while [ $i -lt 20 ] && kill -s 0 -- -%ld 2>/dev/null; "
		    "do sleep 0.1 2>/dev/null || sleep 1; i=$((i+1)); done; "
		    "kill -s KILL -- -%ld 2>/dev/null; exit 0'",
		    c->pgid, c->pgid, c->pgid);
		if ((rc = ssh_channel_request_exec(c->kch, cmd)) == SSH_AGAIN)
			return 0;
		if (rc != SSH_OK)
			return -1;
		c->kstate = 3;
		/* FALLTHROUGH */
	default:
		break;
	}
	if (ssh_event_dopoll(c->sev, 0) == SSH_ERROR && !ssh_is_connected(c->s))
		return -1;
	if (c->kclosed)
		return c->kexit == 0 ? 1 : -1;
	return ssh_is_connected(c->s) ? 0 : -1;
}

/* The killing channel closed. */
static void
kill_end_cb(ssh_session s, ssh_channel ch, void *arg)
{
	struct engine_conn *c = arg;

	(void)s;
	if (ch == c->kch)
		c->kclosed = 1;
}

/* The killing command exited: 0 once it sent what it had to. */
static void
kill_exit_cb(ssh_session s, ssh_channel ch, int status, void *arg)
{
	struct engine_conn *c = arg;

	(void)s;
	if (ch != c->kch)
		return;
	c->kexit = status;
	c->kclosed = 1;
}

/*
 * The command runner. A run with settings.use_runner and keep_open (the
 * daemon's, on sessions it holds) opens one more channel on each session,
 * once, running
 * host->runner (gpufleet-agent serve, agent/serve.c for the protocol),
 * and waits for its hello. Each command of that run and the next then
 * goes to it as a frame, and comes back as output frames and its end; the
 * channel stays open between runs. Whatever goes wrong before a command
 * is handed over (no agent there, an old one, garbage instead of the
 * hello, a command too long for one frame) breaks the runner for the
 * session's life, and the command gets a channel of its own as before.
 * Once a command was handed over, a runner that goes away or sends
 * garbage fails that host (the command may have run), and the host's
 * commands get channels from then on, on any session; a deadline or a
 * cancel drops the session, which hangs up the runner's command, as it
 * would a channel's.
 */

/* Whether c's command goes to the session's runner. */
static int
runner_wanted(struct engine_conn *c)
{
	const struct engine_settings *set = c->r->set;
	const struct engine_host *h = c->h;
	const char *cmd = h->command != NULL ? h->command : set->command;

	return set->use_runner && set->keep_open && h->runner != NULL &&
	    !h->runner_failed && c->ch == NULL && c->rstate != RS_BROKEN &&
	    cmd != NULL && cmd[0] != '\0' &&
	    strlen(cmd) <= RUNNER_COMMAND_MAX && set->stdin_data == NULL &&
	    h->stdin_data == NULL;
}

/*
 * Bring the runner up as far as it goes without waiting: RUNNER_READY,
 * RUNNER_WAIT, RUNNER_BROKEN (use a channel) or RUNNER_GONE (c failed).
 */
static int
runner_start(struct engine_conn *c)
{
	int rc;

	switch (c->rstate) {
	case RS_BROKEN:
		return RUNNER_BROKEN;
	case RS_NONE:
		if ((c->rch = ssh_channel_new(c->s)) == NULL) {
			runner_broken(c, "cannot create its channel", 0);
			return RUNNER_BROKEN;
		}
		memset(&c->rcb, 0, sizeof c->rcb);
		c->rcb.userdata = c;
		c->rcb.channel_data_function = runner_data_cb;
		c->rcb.channel_eof_function = runner_end_cb;
		c->rcb.channel_close_function = runner_end_cb;
		c->rcb.channel_exit_status_function = runner_exit_cb;
		ssh_callbacks_init(&c->rcb);
		ssh_set_channel_callbacks(c->rch, &c->rcb);
		c->rstate = RS_OPENING;
		c->rstarts++;
		/* FALLTHROUGH */
	case RS_OPENING:
		rc = ssh_channel_open_session(c->rch);
		if (rc == SSH_AGAIN)
			return RUNNER_WAIT;
		if (rc != SSH_OK) {
			runner_broken(c, "its channel was refused", 0);
			return RUNNER_BROKEN;
		}
		c->rstate = RS_EXEC;
		/* FALLTHROUGH */
	case RS_EXEC:
		rc = ssh_channel_request_exec(c->rch, c->h->runner);
		if (rc == SSH_AGAIN)
			return RUNNER_WAIT;
		if (rc != SSH_OK) {
			runner_broken(c, "its exec request was refused", 0);
			return RUNNER_BROKEN;
		}
		c->rstate = RS_HELLO;
		/* FALLTHROUGH */
	case RS_HELLO:
	case RS_READY:
		break;
	}
	/* Take in what came: the hello, or news of the runner's end. */
	if (c->sev == NULL &&
	    ((c->sev = ssh_event_new()) == NULL ||
		ssh_event_add_session(c->sev, c->s) != SSH_OK)) {
		conn_fail(c, EF_SSH, "cannot poll the session");
		return RUNNER_GONE;
	}
	if (ssh_event_dopoll(c->sev, 0) == SSH_ERROR &&
	    !ssh_is_connected(c->s)) {
		conn_fail(
		    c, EF_SSH, "connection lost: %s", ssh_get_error(c->s));
		return RUNNER_GONE;
	}
	if (c->rgarbage || c->rclosed) {
		/* Ended before its hello: perhaps no agent yet; next run. */
		runner_broken(c, c->rgarbage ? "it sent garbage" : "it ended",
		    !c->rgarbage && !c->rhello &&
			c->rstarts < RUNNER_STARTS_MAX);
		return RUNNER_BROKEN;
	}
	if (c->rstate == RS_HELLO && c->rhello)
		c->rstate = RS_READY;
	return c->rstate == RS_READY ? RUNNER_READY : RUNNER_WAIT;
}

/*
 * Hand the command to the runner in one frame: RUNNER_READY (sent),
 * RUNNER_WAIT (libssh's output is not drained yet: again when it is) or
 * RUNNER_BROKEN (not sent: the command gets a channel).
 */
static int
runner_send(struct engine_conn *c)
{
	const char *cmd =
	    c->h->command != NULL ? c->h->command : c->r->set->command;
	size_t len = strlen(cmd);
	unsigned char frame[5 + RUNNER_COMMAND_MAX];
	int w;

	if (ssh_get_poll_flags(c->s) & SSH_WRITE_PENDING)
		return RUNNER_WAIT; /* libssh writes on a blocking socket */
	if (ssh_channel_window_size(c->rch) < len + 5)
		return RUNNER_BROKEN; /* a channel this time; the runner stays
				       */
	frame[0] = 'C';
	frame[1] = (unsigned char)(len >> 24);
	frame[2] = (unsigned char)(len >> 16);
	frame[3] = (unsigned char)(len >> 8);
	frame[4] = (unsigned char)len;
	memcpy(frame + 5, cmd, len);
	if ((w = ssh_channel_write(c->rch, frame, (uint32_t)(len + 5))) < 0 ||
	    (size_t)w != len + 5) {
		runner_broken(c, "the command could not be written to it", 0);
		return RUNNER_BROKEN;
	}
	c->via_runner = 1;
	c->rdone = 0;
	return RUNNER_READY;
}

/* While a command runs on the runner: take in its frames and its end. */
static void
runner_poll(struct engine_conn *c)
{
	if (ssh_event_dopoll(c->sev, 0) == SSH_ERROR &&
	    !ssh_is_connected(c->s)) {
		conn_fail(
		    c, EF_SSH, "connection lost: %s", ssh_get_error(c->s));
		return;
	}
	if (c->rgarbage) {
		c->h->runner_failed = 1;
		c->local_fail = 1; /* the agent's fault: no backoff */
		runner_broken(c, "it sent garbage", 0);
		conn_fail(c, EF_SSH,
		    "the command runner on the instance sent garbage");
		return;
	}
	if (c->rdone) {
		conn_finish(c);
		return;
	}
	if (c->rclosed) {
		c->h->runner_failed = 1;
		c->local_fail = 1;
		runner_broken(c, "it ended during a command", 0);
		conn_fail(c, EF_SSH,
		    "the command runner on the instance ended before the "
		    "command finished");
		return;
	}
	if (!ssh_is_connected(c->s))
		conn_fail(
		    c, EF_SSH, "connection lost: %s", ssh_get_error(c->s));
}

/* One whole frame from the runner, in the state c is in. */
static void
runner_frame(
    struct engine_conn *c, int type, const unsigned char *p, size_t len)
{
	const struct engine_ops *ops;

	if (!c->rhello) {
		/* Its first frame, which may come with the exec's answer. */
		if (type == 'R' && len == strlen(SERVE_HELLO) &&
		    memcmp(p, SERVE_HELLO, len) == 0)
			c->rhello = 1;
		else
			c->rgarbage = 1;
		return;
	}
	if (c->r == NULL || !c->via_runner || c->rdone) {
		c->rgarbage = 1; /* nothing may come between commands */
		return;
	}
	ops = c->r->ops;
	switch (type) {
	case 'O':
	case 'E':
		if (ops->output != NULL && len > 0)
			ops->output(
			    c->h, type == 'E', (const char *)p, len, ops->arg);
		break;
	case 'X':
		if (len != 4 || p[0] != 0 || p[1] != 0 || p[2] != 0) {
			c->rgarbage = 1;
			break;
		}
		c->h->exit_status = p[3];
		c->rdone = 1;
		break;
	case 'S':
		if (len == 0 || len > 64 || memchr(p, '\0', len) != NULL) {
			c->rgarbage = 1;
			break;
		}
		free(c->h->exit_signal);
		c->h->exit_signal = xstrndup((const char *)p, len);
		c->rdone = 1;
		break;
	default:
		c->rgarbage = 1;
		break;
	}
}

/* The length a frame's header (5 bytes at p) gives. */
static size_t
runner_flen(const unsigned char *p)
{
	return (size_t)p[1] << 24 | (size_t)p[2] << 16 | (size_t)p[3] << 8 |
	    p[4];
}

/*
 * Data from the runner's channel: cut into frames (at most
 * SERVE_FRAME_MAX bytes each), each handled as it is whole.
 */
static int
runner_data_cb(ssh_session s, ssh_channel ch, void *data, uint32_t len,
    int is_stderr, void *arg)
{
	struct engine_conn *c = arg;
	const unsigned char *p = data, *end = p + len;
	size_t need, take;

	(void)s;
	if (ch != c->rch || is_stderr)
		return (int)len; /* its stderr: nothing it should say */
	if (c->rbuf == NULL)
		c->rbuf = xmalloc(5 + SERVE_FRAME_MAX);
	while (p < end && !c->rgarbage) {
		need = c->rlen < 5 ? 5 : 5 + runner_flen(c->rbuf);
		if (need > 5 + SERVE_FRAME_MAX) {
			c->rgarbage = 1;
			break;
		}
		take = need - c->rlen;
		if (take > (size_t)(end - p))
			take = (size_t)(end - p);
		memcpy(c->rbuf + c->rlen, p, take);
		c->rlen += take;
		p += take;
		if (c->rlen >= 5 && c->rlen == 5 + runner_flen(c->rbuf)) {
			runner_frame(c, c->rbuf[0], c->rbuf + 5, c->rlen - 5);
			c->rlen = 0;
		}
	}
	return (int)len;
}

/* The runner's channel got EOF or CLOSE. */
static void
runner_end_cb(ssh_session s, ssh_channel ch, void *arg)
{
	struct engine_conn *c = arg;

	(void)s;
	if (ch == c->rch)
		c->rclosed = 1;
}

/* The runner exited. */
static void
runner_exit_cb(ssh_session s, ssh_channel ch, int status, void *arg)
{
	struct engine_conn *c = arg;

	(void)s;
	(void)status;
	if (ch == c->rch)
		c->rclosed = 1;
}

/*
 * Give up on the runner (why: for the log): close its channel; with
 * again, a later run starts another, else commands get channels of their
 * own for the session's life.
 */
static void
runner_broken(struct engine_conn *c, const char *why, int again)
{
	debug_f("%s: no command runner%s: %s", c->h->in->name,
	    again ? " this time" : "", why);
	if (c->rch != NULL) {
		ssh_remove_channel_callbacks(c->rch, &c->rcb);
		if (ssh_is_connected(c->s))
			ssh_channel_close(c->rch);
		ssh_channel_free(c->rch);
		c->rch = NULL;
	}
	free(c->rbuf);
	c->rbuf = NULL;
	c->rlen = 0;
	c->rhello = c->rclosed = c->rgarbage = c->rdone = 0;
	c->rstate = again ? RS_NONE : RS_BROKEN;
}

static void
conn_fail(struct engine_conn *c, enum engine_fail fail, const char *fmt, ...)
{
	va_list ap;

	if (c->jmp != NULL) {
		char *msg;
		va_start(ap, fmt);
		xvasprintf(&msg, fmt, ap);
		va_end(ap);
		jump_fail(c->jmp, fail, msg);
		free(msg);
		return;
	}
	if (c->h->done)
		return;
	if (c->reused && c->state >= CS_OPEN && c->state <= CS_EXEC &&
	    (fail == EF_SSH || fail == EF_CHANNEL)) {
		/* The held session died while idle: start over, once. */
		struct engine_run *r = c->r;
		struct engine_host *h = c->h;
		debug_f("%s: held session is gone, reconnecting", h->in->name);
		h->conn = NULL;
		conn_release(c);
		r->active--;
		conn_start(r, h, 0);
		return;
	}
	c->h->fail = fail;
	va_start(ap, fmt);
	xvasprintf(&c->h->fail_msg, fmt, ap);
	va_end(ap);
	conn_finish(c);
}

/*
 * Free what a connection holds on the loop's side, and its session unless
 * the agent worker has it (then the worker frees it when it returns).
 * Hosts that failed are not sent a polite disconnect: they may be hung, and
 * the socket may block.
 */
static void
conn_release(struct engine_conn *c)
{
	struct engine *e = c->e;
	int orphan = 0;

	window_leave(c);
	if (c->ev != NULL)
		event_free(c->ev);
	event_free(c->deadline);
	event_free(c->pump);
	if (c->dnsreq != NULL)
		evdns_getaddrinfo_cancel(c->dnsreq);
	if (c->ai != NULL)
		evutil_freeaddrinfo(c->ai);
	if (c->agent_timer != NULL) {
		event_free(c->agent_timer);
		c->agent_timer = NULL;
	}
	if (c->agent_ev != NULL) {
		pthread_mutex_lock(&e->lock);
		event_free(c->agent_ev);
		c->agent_ev = NULL;
		if (c->in_agent)
			orphan = c->orphan = 1;
		pthread_mutex_unlock(&e->lock);
	}
	if (orphan) {
		/* The worker's login then sees the tunnel's end at once. */
		if (c->tun != NULL)
			tunnel_free(c->tun);
		return;
	}
	if (c->fd != -1)
		fcntl(c->fd, F_SETFL, fcntl(c->fd, F_GETFL) | O_NONBLOCK);
	if (c->sev != NULL) {
		ssh_event_remove_session(c->sev, c->s);
		ssh_event_free(c->sev);
	}
	if (c->rch != NULL)
		ssh_remove_channel_callbacks(c->rch, &c->rcb);
	if (c->kch != NULL)
		ssh_remove_channel_callbacks(c->kch, &c->kcb);
	free(c->rbuf);
	free(c->wrapped);
	free(c->kmsg);
	/*
	 * Who closes the socket: ssh_free does once ssh_connect has taken it,
	 * unless ssh_disconnect ran first (then, as before ssh_connect, we
	 * do). Never probe with fcntl: the worker thread opens fds too.
	 * No channel close before the disconnect: libssh 0.10 then never
	 * sends the DISCONNECT, and sshd's teardown of a connection that
	 * just closes cost it ~4 ms of CPU more per login, a third more
	 * than an OpenSSH client's (bench/profile.md). The DISCONNECT ends
	 * the channel too.
	 */
	if (c->s != NULL && c->ssh_started && c->h->fail == EF_NONE) {
		ssh_disconnect(c->s);
		ssh_free(c->s);
		close(c->fd);
	} else if (c->s != NULL && c->ssh_started)
		ssh_free(c->s);
	else {
		if (c->s != NULL)
			ssh_free(c->s);
		if (c->fd != -1)
			close(c->fd);
	}
	/* After the session: its goodbye went into the pair, not to EPIPE. */
	if (c->tun != NULL)
		tunnel_free(c->tun);
	free(c);
}

/* Report the host done and free its connection. */
static void
conn_finish(struct engine_conn *c)
{
	struct engine_run *r = c->r;
	struct engine_host *h = c->h;

	if (h->done)
		return;
	h->done = 1;
	h->end_ms = engine_now_ms();
	switch (h->fail) {
	case EF_NONE:
		h->fails = 0;
		h->retry_at_ms = 0;
		break;
	case EF_RESOLVE:
	case EF_REFUSED:
	case EF_UNREACHABLE:
	case EF_CONNECT_TIMEOUT:
	case EF_SSH:
		if (c->local_fail)
			break;
		h->fails++;
		h->retry_at_ms =
		    h->end_ms + engine_backoff_ms(h->fails, arc4random());
		break;
	default:
		break; /* the host answered; or we did not try (backoff) */
	}
	if (r->set->keep_open && h->fail == EF_NONE && c->s != NULL &&
	    ssh_is_connected(c->s)) {
		/* Keep the session for the next run; drop the channel. */
		if (c->sev != NULL) {
			ssh_event_remove_session(c->sev, c->s);
			ssh_event_free(c->sev);
			c->sev = NULL;
		}
		if (c->ch != NULL) {
			/*
			 * libssh still runs a freed channel's callbacks when
			 * its CLOSE arrives later; detach ours first.
			 */
			ssh_remove_channel_callbacks(c->ch, &c->cb);
			ssh_channel_close(c->ch);
			ssh_channel_free(c->ch);
			c->ch = NULL;
		}
		/* The runner, if the command went to it, stays for the next. */
		c->via_runner = 0;
		c->rdone = 0;
		free(c->wrapped);
		c->wrapped = NULL;
		c->pgid = 0;
		c->pmark_len = 0;
		c->pmark_done = 0;
		if (c->ev != NULL)
			event_del(c->ev);
		evtimer_del(c->deadline);
		event_del(c->pump);
		c->state = CS_IDLE;
		c->reused = 0;
		c->r = NULL;
	} else {
		h->conn = NULL;
		conn_release(c);
	}
	r->active--;
	r->finished++;
	if (r->ops->done != NULL)
		r->ops->done(h, r->ops->arg);
	start_more(r);
}

/*
 * Hand a connection to the agent worker for an ssh-agent login. Returns 0
 * when the worker has it (or c failed), 1 when the agent hangs and c
 * should go on to its next key.
 */
static int
agent_submit(struct engine_conn *c)
{
	struct engine *e = c->e;
	struct engine_conn *q;
	struct timeval tv;

	pthread_mutex_lock(&e->lock);
	if (e->agent_hung) {
		pthread_mutex_unlock(&e->lock);
		c->agent_skipped = 1;
		return 1;
	}
	pthread_mutex_unlock(&e->lock);
	if (c->ev != NULL)
		event_del(c->ev);
	if (c->agent_ev == NULL)
		c->agent_ev = event_new(e->base, -1, 0, agent_done_cb, c);
	if (c->agent_timer == NULL)
		c->agent_timer = evtimer_new(e->base, agent_timer_cb, c);
	pthread_mutex_lock(&e->lock);
	if (!e->worker_started) {
		if (pthread_create(&e->worker, NULL, agent_worker, e) != 0) {
			pthread_mutex_unlock(&e->lock);
			conn_fail(c, EF_AUTH,
			    "cannot start the ssh-agent "
			    "worker");
			return 0;
		}
		e->worker_started = 1;
	}
	c->in_agent = 1;
	c->agent_picked_ms = 0;
	c->state = CS_AGENT;
	c->queue_next = NULL;
	if (e->queue == NULL)
		e->queue = c;
	else {
		for (q = e->queue; q->queue_next != NULL; q = q->queue_next)
			;
		q->queue_next = c;
	}
	pthread_cond_signal(&e->wake);
	pthread_mutex_unlock(&e->lock);
	tv.tv_sec = e->agent_timeout_ms / 1000;
	tv.tv_usec = (e->agent_timeout_ms % 1000) * 1000;
	evtimer_add(c->agent_timer, &tv);
	return 0;
}

/*
 * The bound on the agent's answer, counted from when the worker took the
 * login up. Past it the login fails, the agent counts as hung, and the
 * logins queued behind it are handed back to go on to their next key.
 */
static void
agent_timer_cb(evutil_socket_t fd, short what, void *arg)
{
	struct engine_conn *c = arg, **pp, *q;
	struct engine *e = c->e;
	int64_t now = engine_now_ms(), left;
	struct timeval tv;

	(void)fd;
	(void)what;
	pthread_mutex_lock(&e->lock);
	if (!c->in_agent) {
		/* Answered: agent_done_cb is on its way. */
		pthread_mutex_unlock(&e->lock);
		return;
	}
	left = c->agent_picked_ms == 0
	    ? e->agent_timeout_ms
	    : c->agent_picked_ms + e->agent_timeout_ms - now;
	if (left > 0) {
		pthread_mutex_unlock(&e->lock);
		tv.tv_sec = left / 1000;
		tv.tv_usec = (left % 1000) * 1000;
		evtimer_add(c->agent_timer, &tv);
		return;
	}
	e->agent_hung = 1;
	for (pp = &e->queue; (q = *pp) != NULL;) {
		if (q->orphan) {
			pp = &q->queue_next; /* the worker frees it */
			continue;
		}
		*pp = q->queue_next;
		q->in_agent = 0;
		q->agent_rc = SSH_AUTH_DENIED;
		q->agent_skipped = 1;
		event_active(q->agent_ev, EV_READ, 1);
	}
	pthread_mutex_unlock(&e->lock);
	c->local_fail = 1; /* the agent's fault, not the host's */
	conn_fail(c, EF_AUTH, "ssh-agent did not answer in %d s",
	    e->agent_timeout_ms / 1000);
}

/*
 * The worker: one ssh-agent login at a time, in blocking mode, bounded by
 * the connection's deadline on the SSH side (the agent side has no bound:
 * that is why it runs here).
 */
static void *
agent_worker(void *arg)
{
	struct engine *e = arg;
	struct engine_conn *c;
	long secs;
	int rc;

	pthread_mutex_lock(&e->lock);
	for (;;) {
		while (e->queue == NULL && !e->worker_stop)
			pthread_cond_wait(&e->wake, &e->lock);
		if (e->queue == NULL)
			break;
		c = e->queue;
		e->queue = c->queue_next;
		if (c->orphan) {
			/* Given up on while queued: never ask the agent. */
			ssh_free(c->s); /* closes the socket too */
			free(c);
			continue;
		}
		e->worker_busy = 1;
		c->agent_picked_ms = engine_now_ms();
		pthread_mutex_unlock(&e->lock);

		secs = (long)(c->idle_limit_ms / 1000) + 1;
		if (secs < 1)
			secs = 1;
		ssh_options_set(c->s, SSH_OPTIONS_TIMEOUT, &secs);
		ssh_set_blocking(c->s, 1);
		rc = ssh_userauth_agent(c->s, NULL);
		ssh_set_blocking(c->s, 0);

		pthread_mutex_lock(&e->lock);
		e->worker_busy = 0;
		e->agent_hung = 0; /* it answered, or its socket closed */
		c->in_agent = 0;
		c->agent_rc = rc;
		if (c->orphan) {
			/* The loop gave up on this host; free it here. */
			ssh_free(c->s); /* closes the socket too */
			free(c);
		} else
			event_active(c->agent_ev, EV_READ, 1);
	}
	pthread_mutex_unlock(&e->lock);
	return NULL;
}

/* Back from the worker: go on with the login. */
static void
agent_done_cb(evutil_socket_t fd, short what, void *arg)
{
	struct engine_conn *c = arg;
	struct engine_host *h = c->h;

	(void)fd;
	(void)what;
	if (h->done)
		return;
	evtimer_del(c->agent_timer);
	c->state = CS_AUTH;
	if (c->agent_rc == SSH_AUTH_SUCCESS) {
		c->state = CS_OPEN;
		conn_step(c);
		return;
	}
	if (c->agent_rc == SSH_AUTH_ERROR) {
		conn_fail(c, EF_SSH, "authentication error (ssh-agent): %s",
		    ssh_get_error(c->s));
		return;
	}
	if (!c->agent_skipped)
		c->agent_tried = 1;
	c->key_index++;
	c->state = CS_AUTH;
	conn_step(c);
}

/*
 * Jump hosts. A host behind one waits in CS_TUNNEL for a direct-tcpip
 * channel of the jump's session, then runs its own SSH session over a
 * socketpair joined to that channel. The jump's connection is an ordinary
 * one (resolve, TCP, handshake, host key, login, ssh-agent included) that
 * stops in CS_JUMP once logged in. Its tunnels are serviced whenever its
 * socket, a tunnel's socket or its pump timer wakes the loop; nothing
 * that frees a tunnel or a host is done from inside that service: a
 * tunnel's failure, and the start of its host's handshake, go through the
 * tunnel's own event.
 */

/* Take c to its host through the jump host's session. */
static void
conn_via_jump(struct engine_conn *c)
{
	struct engine_host *h = c->h, *jh = h->jump;
	struct engine_jump *j = NULL;
	struct engine_tunnel *t;

	if (jh->conn == NULL && jh->fail != EF_NONE &&
	    c->r->serial <= jh->jump_failed) {
		/* The jump failed during this run: do not try it again. */
		conn_fail(c, jh->fail, "via jump %s: %s", jh->in->name,
		    jh->fail_msg != NULL ? jh->fail_msg : "failed");
		return;
	}
	if (jh->conn != NULL && jh->conn->jmp != NULL)
		j = jh->conn->jmp;
	else
		j = jump_new(c->r, jh);
	c->state = CS_TUNNEL;
	t = xcalloc(1, sizeof *t);
	t->j = j;
	t->c = c;
	t->fd = -1;
	t->ev = event_new(c->e->base, -1, 0, tunnel_cb, t);
	t->next = j->tunnels;
	j->tunnels = t;
	j->refs++;
	c->tun = t;
	if (j->c == NULL)
		jump_start(j); /* may fail c at once */
	else if (j->ready)
		event_active(j->kick, EV_TIMEOUT, 1);
}

/* A jump session for jh, not started yet. */
static struct engine_jump *
jump_new(struct engine_run *r, struct engine_host *jh)
{
	struct engine *e = r->e;
	struct engine_jump *j;

	j = xcalloc(1, sizeof *j);
	j->e = e;
	j->h = jh;
	j->set = *r->set;
	j->set.command = NULL;
	j->set.stdin_data = NULL;
	j->set.stdin_len = 0;
	j->ops.hostkey = r->ops->hostkey;
	j->ops.hostkey_type = r->ops->hostkey_type;
	j->ops.arg = r->ops->arg;
	j->run.e = e;
	j->run.set = &j->set;
	j->run.ops = &j->ops;
	j->run.serial = r->serial;
	j->idle = event_new(e->base, -1, 0, jump_idle_cb, j);
	j->kick = event_new(e->base, -1, 0, jump_kick_cb, j);
	j->next = e->jumps;
	e->jumps = j;
	return j;
}

/* Connect to the jump host and log in (like conn_start's first login). */
static void
jump_start(struct engine_jump *j)
{
	struct engine_host *jh = j->h;
	struct engine_conn *c;

	c = xcalloc(1, sizeof *c);
	c->e = j->e;
	c->r = &j->run;
	c->h = jh;
	c->fd = -1;
	c->jmp = j;
	j->c = c;
	jh->conn = c;
	jh->done = 0;
	jh->fail = EF_NONE;
	free(jh->fail_msg);
	jh->fail_msg = NULL;
	jh->start_ms = engine_now_ms();
	c->deadline = evtimer_new(j->e->base, conn_deadline_cb, c);
	c->pump = event_new(j->e->base, -1, EV_PERSIST, conn_pump_cb, c);
	conn_phase(c, jh->start_ms + (int64_t)j->set.connect_timeout * 1000, 0);
	if (jh->nkeys == 0) {
		conn_fail(c, EF_AUTH, "%s",
		    jh->keys_error != NULL ? jh->keys_error
					   : "no identity to log in with");
		return;
	}
	conn_resolve(c);
}

/* The jump host is logged in: open the tunnels waiting for it. */
static void
jump_ready(struct engine_jump *j)
{
	struct engine_conn *c = j->c;
	struct timeval pump = { 0, PUMP_MS * 1000 };

	c->state = CS_JUMP;
	j->ready = 1;
	conn_phase(c, 0, 0);
	event_add(c->pump, &pump);
	if ((c->sev = ssh_event_new()) == NULL ||
	    ssh_event_add_session(c->sev, c->s) != SSH_OK) {
		conn_fail(c, EF_SSH, "cannot poll the session");
		return;
	}
	debug_f("%s: jump host logged in", j->h->in->name);
	conn_step(c);
}

/*
 * Move what can move on every tunnel of the jump and open those waiting.
 * Returns -1 if the jump's session is lost (then j and c are gone).
 */
static int
jump_service(struct engine_jump *j)
{
	struct engine_conn *c = j->c;
	struct engine_tunnel *t;
	const struct instance *in;
	int sp[2], rc;

	if (ssh_event_dopoll(c->sev, 0) == SSH_ERROR &&
	    !ssh_is_connected(c->s)) {
		conn_fail(c, EF_SSH, "connection to the jump host lost: %s",
		    ssh_get_error(c->s));
		return -1;
	}
	for (t = j->tunnels; t != NULL; t = t->next) {
		if (t->fail != EF_NONE || t->start)
			continue;
		in = t->c->h->in;
		switch (t->state) {
		case TS_WAIT:
			if ((t->ch = ssh_channel_new(c->s)) == NULL) {
				tunnel_error(t, EF_CHANNEL,
				    "via jump %s: cannot create a channel: %s",
				    j->h->in->name, ssh_get_error(c->s));
				break;
			}
			t->state = TS_OPENING;
			/* The jump's TCP connect to the host: connect_timeout.
			 */
			t->c->tun_setup = 1;
			conn_phase(t->c,
			    engine_now_ms() +
				(int64_t)t->c->r->set->connect_timeout * 1000,
			    0);
			/* FALLTHROUGH */
		case TS_OPENING:
			rc = ssh_channel_open_forward(
			    t->ch, in->host, in->port, "127.0.0.1", 0);
			if (rc == SSH_AGAIN)
				break;
			if (rc != SSH_OK) {
				const char *why = ssh_get_error(c->s);
				tunnel_error(t,
				    strstr(why, "refused") != NULL
					? EF_REFUSED
					: EF_UNREACHABLE,
				    "via jump %s: cannot reach %s port %d: %s",
				    j->h->in->name, in->host, in->port, why);
				break;
			}
			if (socketpair(AF_UNIX,
				SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0,
				sp) != 0) {
				t->c->local_fail = 1;
				tunnel_error(t, EF_UNREACHABLE,
				    "cannot make a socket pair: %s (a limit of "
				    "this machine)",
				    strerror(errno));
				break;
			}
			t->fd = sp[1];
			t->c->fd = sp[0];
			t->state = TS_OPEN;
			t->start = 1;
			event_active(t->ev, EV_TIMEOUT, 1);
			break;
		case TS_OPEN:
			tunnel_pump(t);
			break;
		}
	}
	if (!ssh_is_connected(c->s)) {
		conn_fail(c, EF_SSH, "connection to the jump host lost");
		return -1;
	}
	return 0;
}

/*
 * Copy between the channel and our end of the socketpair, as far as the
 * buffers, the channel's window and libssh's output allow (libssh writes
 * on a blocking socket: only once its output has drained).
 */
static void
tunnel_pump(struct engine_tunnel *t)
{
	ssh_session s = t->j->c->s;
	uint32_t window;
	size_t n;
	ssize_t w;
	int k;

	/* Channel -> host. */
	for (;;) {
		if (t->in_len > 0) {
			w = write(t->fd, t->in, t->in_len);
			if (w > 0) {
				memmove(
				    t->in, t->in + w, t->in_len - (size_t)w);
				t->in_len -= (size_t)w;
			} else if (w == -1 && errno != EAGAIN &&
			    errno != EINTR) {
				t->in_len = 0; /* the host's side is gone */
				t->fd_eof = 1;
			}
			if (t->in_len > 0)
				break;
		}
		if (t->ch_eof)
			break;
		k = ssh_channel_read_nonblocking(t->ch, t->in, sizeof t->in, 0);
		if (k > 0) {
			t->in_len = (size_t)k;
			continue;
		}
		if (k != 0 || ssh_channel_is_eof(t->ch) ||
		    ssh_channel_is_closed(t->ch))
			t->ch_eof = 1;
		break;
	}
	if (t->ch_eof && t->in_len == 0 && !t->shut) {
		shutdown(t->fd, SHUT_WR);
		t->shut = 1;
	}

	/* Host -> channel. */
	for (;;) {
		if (t->out_len > 0 && !t->eof_sent) {
			if (ssh_get_poll_flags(s) & SSH_WRITE_PENDING)
				break;
			window = ssh_channel_window_size(t->ch);
			n = t->out_len < window ? t->out_len : window;
			if (n == 0)
				break; /* the window's adjust wakes the jump */
			k = ssh_channel_write(t->ch, t->out, (uint32_t)n);
			if (k < 0) {
				t->out_len = 0; /* the channel is gone */
				t->fd_eof = 1;
				break;
			}
			memmove(t->out, t->out + k, t->out_len - (size_t)k);
			t->out_len -= (size_t)k;
		}
		if (t->fd_eof || t->out_len == sizeof t->out)
			break;
		w = read(
		    t->fd, t->out + t->out_len, sizeof t->out - t->out_len);
		if (w > 0) {
			t->out_len += (size_t)w;
			continue;
		}
		if (w == 0 || (errno != EAGAIN && errno != EINTR))
			t->fd_eof = 1;
		break;
	}
	if (t->fd_eof && t->out_len == 0 && !t->eof_sent &&
	    !ssh_channel_is_closed(t->ch)) {
		ssh_channel_send_eof(t->ch);
		t->eof_sent = 1;
	}
	tunnel_arm(t);
}

/* Wait on our end for what the tunnel can take now. */
static void
tunnel_arm(struct engine_tunnel *t)
{
	short what = 0;

	if (!t->fd_eof && t->out_len < sizeof t->out)
		what |= EV_READ;
	if (t->in_len > 0)
		what |= EV_WRITE;
	event_del(t->ev);
	event_assign(t->ev, t->j->e->base, t->fd, what, tunnel_cb, t);
	if (what != 0)
		event_add(t->ev, NULL);
}

/* Fail the tunnel's host, from the tunnel's event (not from the service). */
static void
tunnel_error(
    struct engine_tunnel *t, enum engine_fail fail, const char *fmt, ...)
{
	va_list ap;

	t->fail = fail;
	va_start(ap, fmt);
	xvasprintf(&t->fail_msg, fmt, ap);
	va_end(ap);
	event_active(t->ev, EV_TIMEOUT, 1);
}

static void
tunnel_cb(evutil_socket_t fd, short what, void *arg)
{
	struct engine_tunnel *t = arg;
	struct engine_jump *j = t->j;

	(void)fd;
	(void)what;
	if (t->fail != EF_NONE) {
		conn_fail(t->c, t->fail, "%s", t->fail_msg); /* frees t */
		return;
	}
	if (t->start) {
		/* The channel is open: the host's handshake over our pair. */
		t->start = 0;
		event_active(j->kick, EV_TIMEOUT, 1);
		/* Like ConnectTimeout per hop: the banner has its own. */
		conn_phase(t->c,
		    engine_now_ms() +
			(int64_t)t->c->r->set->connect_timeout * 1000,
		    0);
		conn_tcp_done(t->c);
		return;
	}
	if (j->c != NULL && j->ready)
		conn_step(j->c);
}

/* Free a tunnel (its host's connection is being released). */
static void
tunnel_free(struct engine_tunnel *t)
{
	struct engine_jump *j = t->j;
	struct engine_tunnel **p;

	event_free(t->ev);
	if (t->fd != -1)
		close(t->fd);
	/*
	 * A channel not yet open is left to the session (libssh frees it
	 * with the session); one that is open is closed and freed.
	 */
	if (t->ch != NULL && j->c != NULL && !j->dead && t->state == TS_OPEN) {
		if (!ssh_channel_is_closed(t->ch))
			ssh_channel_close(t->ch);
		ssh_channel_free(t->ch);
	}
	for (p = &j->tunnels; *p != NULL; p = &(*p)->next) {
		if (*p == t) {
			*p = t->next;
			break;
		}
	}
	t->c->tun = NULL;
	free(t->fail_msg);
	free(t);
	if (--j->refs == 0 && !j->dead)
		event_active(j->idle, EV_TIMEOUT, 1);
	else if (j->c != NULL && j->ready)
		event_active(j->kick, EV_TIMEOUT, 1);
}

/*
 * The jump failed: every host behind it fails with its reason, named
 * (hosts held idle between runs just let their sessions go), and hosts of
 * runs already started that reach it later fail the same way at once.
 */
static void
jump_fail(struct engine_jump *j, enum engine_fail fail, const char *msg)
{
	struct engine_host *jh = j->h;
	struct engine_conn *c = j->c, *tc;
	struct engine_tunnel *t;

	if (j->dead)
		return;
	j->dead = 1;
	jh->fail = fail;
	free(jh->fail_msg);
	jh->fail_msg = xstrdup(msg);
	jh->done = 1;
	jh->end_ms = engine_now_ms();
	jh->jump_failed = j->e->serial;
	debug_f("%s: jump host failed: %s", jh->in->name, msg);
	j->c = NULL;
	jh->conn = NULL;
	if (c != NULL)
		conn_release(c);
	while ((t = j->tunnels) != NULL) {
		tc = t->c;
		if (tc->r != NULL && !tc->h->done)
			conn_fail(
			    tc, fail, "via jump %s: %s", jh->in->name, msg);
		else
			engine_forget(tc->h);
		if (j->tunnels == t) {
			/* Not released (cannot happen): detach it anyway. */
			tunnel_free(t);
		}
	}
	jump_destroy(j);
}

/*
 * Close a jump session and free it: politely if it is logged in and
 * healthy. Hosts still behind it let their sessions go first.
 */
static void
jump_destroy(struct engine_jump *j)
{
	struct engine_jump **p;
	struct engine_conn *c = j->c;
	struct engine_host *jh = j->h;

	while (j->tunnels != NULL) {
		struct engine_tunnel *t = j->tunnels;
		engine_forget(t->c->h);
		if (j->tunnels == t)
			tunnel_free(t);
	}
	for (p = &j->e->jumps; *p != NULL; p = &(*p)->next) {
		if (*p == j) {
			*p = j->next;
			break;
		}
	}
	if (c != NULL) {
		j->c = NULL;
		jh->conn = NULL;
		if (!j->ready)
			jh->fail = EF_INTERRUPTED; /* no polite goodbye */
		conn_release(c);
		if (!j->ready)
			jh->fail = EF_NONE;
	}
	event_free(j->idle);
	event_free(j->kick);
	free(j);
}

/*
 * Is a host behind the jump still to be started by a run in flight (a
 * fanout smaller than the run, a direct host between two behind it)?
 */
static int
jump_wanted(struct engine_jump *j)
{
	struct engine_run *r;
	size_t i;

	for (r = j->e->runs; r != NULL; r = r->next_run) {
		for (i = r->next; i < r->n; i++) {
			if (!r->hosts[i].skip && r->hosts[i].jump == j->h)
				return 1;
		}
	}
	return 0;
}

/*
 * No tunnel is left and the loop came round: close the jump, unless a run
 * has hosts behind it still to start (the last of them, or engine_cancel,
 * brings it back here).
 */
static void
jump_idle_cb(evutil_socket_t fd, short what, void *arg)
{
	struct engine_jump *j = arg;

	(void)fd;
	(void)what;
	if (j->refs == 0 && !j->dead && !jump_wanted(j))
		jump_destroy(j);
}

static void
jump_kick_cb(evutil_socket_t fd, short what, void *arg)
{
	struct engine_jump *j = arg;

	(void)fd;
	(void)what;
	if (j->c != NULL && j->ready)
		conn_step(j->c);
}

/*
 * Stop a run: start nothing more, close what is open, report every host
 * not done as interrupted. Its `finished' still comes, from the loop.
 */
void
engine_cancel(struct engine_run *r)
{
	struct engine_jump *j;
	size_t i;

	r->next = r->n;
	/* Jumps kept for hosts of this run that will not start now go. */
	for (j = r->e->jumps; j != NULL; j = j->next) {
		if (j->refs == 0 && !j->dead)
			event_active(j->idle, EV_TIMEOUT, 1);
	}
	for (i = 0; i < r->n; i++) {
		struct engine_host *h = &r->hosts[i];
		if (h->done || h->skip)
			continue;
		if (h->conn != NULL && h->conn->r == r &&
		    h->conn->state == CS_RUN)
			conn_stop(h->conn, EF_INTERRUPTED, "interrupted");
		else if (h->conn != NULL && h->conn->r == r)
			conn_fail(h->conn, EF_INTERRUPTED,
			    h->conn->state == CS_KILL
				? "interrupted again while its remote command "
				  "was being killed"
				: "interrupted");
		else {
			h->done = 1;
			h->exit_status = -1;
			h->fail = EF_INTERRUPTED;
			free(h->fail_msg);
			h->fail_msg = xstrdup("interrupted before it started");
			r->finished++;
			if (r->ops->done != NULL)
				r->ops->done(h, r->ops->arg);
		}
	}
	start_more(r);
}

/* Ctrl-C (or SIGTERM, if asked for) during engine_run. */
static void
sigint_cb(evutil_socket_t sig, short what, void *arg)
{
	(void)sig;
	(void)what;
	engine_cancel(arg);
}

/*
 * A new engine on the caller's loop. The base must be made after
 * evthread_use_pthreads() (the ssh-agent worker wakes the loop from its
 * thread). dns may be NULL: a resolver is then made when a name first
 * needs one, and freed with the engine. NULL on failure.
 */
struct engine *
engine_new(struct event_base *base, struct evdns_base *dns)
{
	struct engine *e;

	if (base == NULL)
		return NULL;
	e = xcalloc(1, sizeof *e);
	e->base = base;
	e->dns = dns;
	e->agent_timeout_ms = 10 * 1000;
	pthread_mutex_init(&e->lock, NULL);
	pthread_cond_init(&e->wake, NULL);
	return e;
}

/* How long ssh-agent may take to answer one login, in seconds (>= 1). */
void
engine_set_agent_timeout(struct engine *e, int seconds)
{
	e->agent_timeout_ms = (seconds < 1 ? 1 : seconds) * 1000;
}

/* Set up a run and start its first hosts (keep: the caller frees it). */
static struct engine_run *
run_start(struct engine *e, struct engine_host *hosts, size_t n,
    const struct engine_settings *set, const struct engine_ops *ops, int keep)
{
	struct engine_run *r;
	size_t i;

	r = xcalloc(1, sizeof *r);
	r->e = e;
	r->set = set;
	r->ops = ops;
	r->hosts = hosts;
	r->n = n;
	r->keep = keep;
	r->serial = ++e->serial;
	r->done = event_new(e->base, -1, 0, run_done_cb, r);
	r->next_run = e->runs;
	e->runs = r;
	for (i = 0; i < n; i++) {
		if (hosts[i].skip)
			continue; /* keeps the results of its last run */
		hosts[i].done = 0;
		hosts[i].exit_status = -1;
		free(hosts[i].exit_signal);
		hosts[i].exit_signal = NULL;
	}
	engine_window_init(&r->win);
	r->max_active =
	    engine_raise_nofile(set->fanout < (int)n ? (size_t)set->fanout : n);
	if (r->max_active < (size_t)set->fanout && r->max_active < n)
		debug_f("open-file limit allows %zu connections at once",
		    r->max_active);
	start_more(r);
	return r;
}

/*
 * Start settings->command on hosts[0..n) and return at once. Each host is
 * reported through ops->done as it finishes and the whole run through
 * ops->finished, always from the loop, never from inside this call. The
 * hosts, settings and ops must outlive the run; a host must not be in two
 * runs at once. Several runs may be in flight on one engine. The run is
 * freed after ops->finished returns.
 */
struct engine_run *
engine_start(struct engine *e, struct engine_host *hosts, size_t n,
    const struct engine_settings *set, const struct engine_ops *ops)
{
	return run_start(e, hosts, n, set, ops, 0);
}

/*
 * For the CLI: start a run and dispatch the loop until it is over, with
 * Ctrl-C cancelling it if settings->handle_sigint (SIGTERM too if
 * settings->handle_sigterm). With keep_open,
 * sessions stay open in the hosts for the next run on the same engine.
 * Returns 0.
 */
int
engine_run(struct engine *e, struct engine_host *hosts, size_t n,
    const struct engine_settings *set, const struct engine_ops *ops)
{
	struct engine_run *r;
	struct event *sigint = NULL, *sigterm = NULL;

	r = run_start(e, hosts, n, set, ops, 1);
	if (set->handle_sigint) {
		sigint = evsignal_new(e->base, SIGINT, sigint_cb, r);
		evsignal_add(sigint, NULL);
	}
	if (set->handle_sigterm) {
		sigterm = evsignal_new(e->base, SIGTERM, sigint_cb, r);
		evsignal_add(sigterm, NULL);
	}
	while (!r->reported)
		event_base_loop(e->base, EVLOOP_ONCE);
	if (sigint != NULL)
		event_free(sigint);
	if (sigterm != NULL)
		event_free(sigterm);
	run_free(r);
	return 0;
}

/* Close the session a host holds open, if any. */
void
engine_forget(struct engine_host *h)
{
	struct engine_conn *c = h->conn;

	if (c == NULL)
		return;
	if (c->jmp != NULL) {
		jump_destroy(c->jmp);
		return;
	}
	h->conn = NULL;
	conn_release(c);
}

/*
 * Free the engine, after engine_forget on every host that may hold a
 * session; runs still in flight are dropped, their connections closed,
 * without their callbacks. Not from inside an ops callback. The loop stays
 * the caller's. A worker stuck in ssh-agent keeps using e (its
 * lock, its queue of orphans, which it frees), so then e is left to it.
 */
void
engine_free(struct engine *e)
{
	int busy = 0;

	if (e == NULL)
		return;
	while (e->runs != NULL) {
		struct engine_run *r = e->runs;
		size_t i;
		/* Its connections' events would outlive it on the loop. */
		for (i = 0; i < r->n; i++) {
			struct engine_host *h = &r->hosts[i];
			if (h->conn != NULL && h->conn->r == r)
				engine_forget(h);
		}
		run_free(r);
	}
	while (e->jumps != NULL)
		jump_destroy(e->jumps);
	if (e->worker_started) {
		pthread_mutex_lock(&e->lock);
		e->worker_stop = 1;
		pthread_cond_signal(&e->wake);
		busy = e->worker_busy || e->queue != NULL;
		pthread_mutex_unlock(&e->lock);
		if (busy)
			pthread_detach(e->worker);
		else
			pthread_join(e->worker, NULL);
	}
	if (e->own_dns)
		evdns_base_free(e->dns, 1);
	if (!busy) {
		pthread_mutex_destroy(&e->lock);
		pthread_cond_destroy(&e->wake);
		free(e);
	}
}

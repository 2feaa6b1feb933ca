/*
 * Held connections: a running daemon lends `gpufleet exec` its SSH
 * sessions, so a repeated exec opens a channel on each held session
 * instead of logging in again.
 *
 * The daemon listens on a Unix socket of its database, made 0600 in a
 * directory of ours made 0700 ($XDG_RUNTIME_DIR/gpufleet, else
 * /tmp/gpufleet-UID), and serves only peers of its own uid. Requests run
 * one at a time, never during a poll (a host is in one run at a time).
 *
 * The protocol: frames of a 4-byte big-endian length, a type byte and
 * the payload (length bytes, the type not counted).
 *   CLI -> daemon  'Q' JSON {"hosts": [NAME...], "command": LINE,
 *                  "timeout", "connect_timeout", "setup_timeout",
 *                  "fanout"} (once)
 *   daemon -> CLI  'X' why (refused: the CLI runs direct), or
 *                  'A' (accepted), then for each host its output,
 *                  'O' u32 host, u8 stream (0 stdout, 1 stderr), bytes,
 *                  then its result, 'D' u32 host, u8 failure code,
 *                  i32 exit status, u32 duration ms, u16 signal length,
 *                  signal, message; at last 'F' (all done). 'K' (nothing
 *                  new, every few seconds) tells the CLI the daemon lives.
 * Host numbers index the request's list. The CLI closing its end cancels
 * the run.
 *
 * Each command goes to the command runner of the host's held session
 * (gpufleet-agent serve, the engine's use_runner), so that sshd forks no
 * session process and shell for it; where the agent is not deployed yet
 * it gets a channel of its own. GPUFLEET_NO_RUNNER=1 in the daemon's
 * environment (a test and benchmark knob) always uses channels.
 */

#include <sys/types.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <jansson.h>

#include "deploy.h"
#include "held.h"
#include "log.h"
#include "probe.h"
#include "xmalloc.h"

#define HELD_REQUEST_MAX (4 * 1024 * 1024) /* a request's JSON */
#define HELD_FRAME_MAX	 (2 * 1024 * 1024) /* what the CLI accepts */
#define HELD_HOSTS_MAX	 100000
#define HELD_BACKLOG_MAX (64 * 1024 * 1024) /* unread output: drop the CLI */
#define HELD_BEAT_S	 5
#define HELD_SILENCE_S	 30 /* the CLI gives up on a silent daemon */

enum client_state { C_READ, C_QUEUED, C_RUN, C_CLOSING };

struct held_client {
	struct held *held;
	struct bufferevent *bev; /* NULL once the CLI is gone */
	enum client_state state;
	char **names;
	size_t nnames;
	char *command;
	int timeout, connect_timeout, setup_timeout, fanout;
	struct held_client *next;
};

struct held {
	struct event_base *base;
	char *path;
	int fd;
	struct event *accept_ev, *beat;
	held_ready_cb ready;
	void *arg;
	struct held_client *clients;

	/* The run in flight. */
	struct held_client *running; /* NULL: its CLI went */
	struct remote *rm;
	struct engine_run *run;
	uint32_t *index; /* rm->n: the request's number of each host */
	char **runners;	 /* nrunners: each host's runner command, or NULL */
	size_t nrunners;
	struct engine_settings set;
	struct engine_ops ops;
};

static void client_free(struct held_client *);
static void runners(struct held *, struct remote *, const struct agent_bin *);
static void runners_free(struct held *);

/* A 64-bit FNV-1a hash of s, for the socket's name. */
static uint64_t
hash64(const char *s)
{
	uint64_t h = 1469598103934665603ULL;

	for (; *s != '\0'; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211ULL;
	return h;
}

/* The directory the sockets live in. Caller frees. */
static char *
socket_dir(void)
{
	const char *run = getenv("XDG_RUNTIME_DIR");
	char *dir;

	if (run != NULL && run[0] == '/')
		xasprintf(&dir, "%s/gpufleet", run);
	else
		xasprintf(&dir, "/tmp/gpufleet-%lu", (unsigned long)geteuid());
	return dir;
}

/*
 * The socket of the daemon of database db: named by a hash of the
 * database's real path, so every spelling of it finds one daemon. Caller
 * frees.
 */
char *
held_socket_path(const char *db)
{
	char *real = realpath(db, NULL), *dir, *path;

	dir = socket_dir();
	xasprintf(&path, "%s/held-%016llx.sock", dir,
	    (unsigned long long)hash64(real != NULL ? real : db));
	free(real);
	free(dir);
	return path;
}

/* Make (or accept) the socket directory: ours, a directory, mode 0700. */
static int
dir_ready(const char *dir, char **cause)
{
	struct stat st;

	if (mkdir(dir, 0700) != 0 && errno != EEXIST) {
		xasprintf(cause, "cannot create %s: %s", dir, strerror(errno));
		return -1;
	}
	if (lstat(dir, &st) != 0) {
		xasprintf(cause, "cannot use %s: %s", dir, strerror(errno));
		return -1;
	}
	if (!S_ISDIR(st.st_mode) || st.st_uid != geteuid() ||
	    (st.st_mode & 077) != 0) {
		xasprintf(cause,
		    "refusing %s for the daemon's socket: not a directory of "
		    "yours with mode 0700",
		    dir);
		return -1;
	}
	return 0;
}

/* Whether the peer on fd runs as our uid. */
static int
peer_is_us(int fd)
{
	struct ucred cr;
	socklen_t len = sizeof cr;

	return getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &len) == 0 &&
	    cr.uid == geteuid();
}

static void
put_u32(unsigned char *p, uint32_t v)
{
	p[0] = v >> 24;
	p[1] = v >> 16;
	p[2] = v >> 8;
	p[3] = v;
}

static uint32_t
get_u32(const unsigned char *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 |
	    (uint32_t)p[2] << 8 | p[3];
}

/* Send a frame of type t: head (hlen bytes) then data (len bytes). */
static void
client_send(struct held_client *c, int t, const void *head, size_t hlen,
    const void *data, size_t len)
{
	unsigned char hdr[5];
	struct evbuffer *out;

	if (c == NULL || c->bev == NULL)
		return;
	put_u32(hdr, (uint32_t)(hlen + len));
	hdr[4] = (unsigned char)t;
	out = bufferevent_get_output(c->bev);
	evbuffer_add(out, hdr, sizeof hdr);
	if (hlen > 0)
		evbuffer_add(out, head, hlen);
	if (len > 0)
		evbuffer_add(out, data, len);
}

/* Refuse a request with a reason; the CLI then runs direct. */
static void
client_refuse(struct held_client *c, const char *why)
{
	debug_f("refused a request: %s", why);
	client_send(c, 'X', why, strlen(why), NULL, 0);
	c->state = C_CLOSING;
}

/* Output for the request's host h. */
static void
on_output(struct engine_host *eh, int is_stderr, const char *data, size_t len,
    void *arg)
{
	struct held *h = arg;
	unsigned char head[5];

	put_u32(head, h->index[eh - h->rm->hosts]);
	head[4] = is_stderr != 0;
	client_send(h->running, 'O', head, sizeof head, data, len);
	if (h->running != NULL && h->running->bev != NULL &&
	    evbuffer_get_length(bufferevent_get_output(h->running->bev)) >
		HELD_BACKLOG_MAX) {
		/* The run goes on (and the sessions stay held). */
		error("a held exec's client reads nothing: dropping it");
		bufferevent_free(h->running->bev);
		h->running->bev = NULL;
	}
}

/* A host of the request is done: its result. */
static void
on_done(struct engine_host *eh, void *arg)
{
	struct held *h = arg;
	unsigned char head[15];
	size_t slen = eh->exit_signal != NULL ? strlen(eh->exit_signal) : 0;
	const char *msg =
	    eh->fail != EF_NONE && eh->fail_msg != NULL ? eh->fail_msg : "";
	struct evbuffer *tmp;
	int64_t ms = eh->end_ms - eh->start_ms;

	if (slen > 64)
		slen = 64;
	put_u32(head, h->index[eh - h->rm->hosts]);
	head[4] = (unsigned char)eh->fail;
	put_u32(head + 5, (uint32_t)(int32_t)eh->exit_status);
	put_u32(head + 9, ms > 0 && ms < UINT32_MAX ? (uint32_t)ms : 0);
	head[13] = (unsigned char)(slen >> 8);
	head[14] = (unsigned char)slen;
	tmp = evbuffer_new();
	evbuffer_add(tmp, head, sizeof head);
	if (slen > 0)
		evbuffer_add(tmp, eh->exit_signal, slen);
	evbuffer_add(tmp, msg, strlen(msg));
	client_send(h->running, 'D', evbuffer_pullup(tmp, -1),
	    evbuffer_get_length(tmp), NULL, 0);
	evbuffer_free(tmp);
}

/* The run is over: hand the hosts back and start the next request. */
static void
on_finished(struct engine_run *run, void *arg)
{
	struct held *h = arg;
	struct held_client *c = h->running;
	size_t i;

	(void)run;
	for (i = 0; i < h->rm->n; i++) {
		h->rm->hosts[i].skip = 0;
		h->rm->hosts[i].command = NULL;
		h->rm->hosts[i].runner = NULL;
	}
	runners_free(h);
	remote_run_done(h->rm);
	h->run = NULL;
	h->rm = NULL;
	h->running = NULL;
	free(h->index);
	h->index = NULL;
	if (c != NULL) {
		client_send(c, 'F', NULL, 0, NULL, 0);
		c->state = C_CLOSING;
		if (c->bev == NULL)
			client_free(c); /* else once 'F' is sent */
	}
	held_kick(h);
}

/*
 * Put the request of c on the hosts of rm: each named one in the run
 * (with the failure it had before any run, as a poll does), the others
 * skipped. Returns 0, or -1 with *why (caller frees).
 */
static int
prepare(struct held *h, struct held_client *c, struct remote *rm,
    struct probe *p, char **why)
{
	size_t i, k;

	h->index = xcalloc(rm->n + 1, sizeof *h->index);
	for (i = 0; i < rm->n; i++)
		h->index[i] = UINT32_MAX;
	for (k = 0; k < c->nnames; k++) {
		for (i = 0; i < rm->n; i++) {
			if (strcmp(rm->list[i].name, c->names[k]) == 0)
				break;
		}
		if (i == rm->n || h->index[i] != UINT32_MAX) {
			xasprintf(why, "%s instance %s",
			    i == rm->n ? "the daemon has no" : "twice the",
			    c->names[k]);
			free(h->index);
			h->index = NULL;
			return -1;
		}
		h->index[i] = (uint32_t)k;
	}
	for (i = 0; i < rm->n; i++) {
		struct engine_host *eh = &rm->hosts[i];
		eh->skip = h->index[i] == UINT32_MAX;
		if (eh->skip)
			continue;
		engine_host_clear(eh);
		eh->fail = EF_NONE;
		if (p != NULL && p->hosts[i].prefail != NULL) {
			eh->fail = p->hosts[i].prefail_kind;
			eh->fail_msg = xstrdup(p->hosts[i].prefail);
		}
		eh->command = NULL;
		eh->stdin_data = NULL;
		eh->stdin_len = 0;
	}
	return 0;
}

/* Each host of the request gets the command that starts its runner. */
static void
runners(struct held *h, struct remote *rm, const struct agent_bin *ab)
{
	size_t i;

	h->runners = xcalloc(rm->n, sizeof *h->runners);
	h->nrunners = rm->n;
	for (i = 0; i < rm->n; i++) {
		if (rm->hosts[i].skip)
			continue;
		h->runners[i] = deploy_serve_command(&rm->list[i], ab);
		rm->hosts[i].runner = h->runners[i];
	}
}

/* Free the runner commands of the last request. */
static void
runners_free(struct held *h)
{
	size_t i;

	for (i = 0; i < h->nrunners; i++)
		free(h->runners[i]);
	free(h->runners);
	h->runners = NULL;
	h->nrunners = 0;
}

/* Start the first queued request, unless one runs or a poll is going. */
void
held_kick(struct held *h)
{
	struct held_client *c;
	struct remote *rm = NULL;
	struct probe *p = NULL;
	struct engine *e;
	char *why = NULL;

	if (h == NULL || h->run != NULL)
		return;
	for (c = h->clients; c != NULL && c->state != C_QUEUED; c = c->next)
		;
	if (c == NULL || h->ready(h->arg, &rm, &p) == 1)
		return;
	if (rm == NULL || (e = remote_engine(rm)) == NULL) {
		client_refuse(c, "the daemon holds no sessions");
		held_kick(h);
		return;
	}
	if (prepare(h, c, rm, p, &why) != 0) {
		client_refuse(c, why);
		free(why);
		held_kick(h);
		return;
	}
	memset(&h->set, 0, sizeof h->set);
	h->set.command = c->command;
	h->set.fanout = c->fanout;
	h->set.connect_timeout = c->connect_timeout;
	h->set.setup_timeout = c->setup_timeout;
	h->set.command_timeout = c->timeout;
	h->set.handshake_window = rm->fleet->config->handshake_window;
	h->set.keep_open = 1;
	h->set.kill_group = 1;
	if (p != NULL && getenv("GPUFLEET_NO_RUNNER") == NULL) {
		h->set.use_runner = 1;
		runners(h, rm, probe_agent(p));
	}
	h->ops = rm->ops;
	h->ops.output = on_output;
	h->ops.done = on_done;
	h->ops.finished = on_finished;
	h->ops.arg = h;
	h->rm = rm;
	h->running = c;
	c->state = C_RUN;
	debug_f("exec on %zu held host(s): %s", c->nnames, c->command);
	client_send(c, 'A', NULL, 0, NULL, 0);
	h->run = engine_start(e, rm->hosts, rm->n, &h->set, &h->ops);
}

/* An integer member of the request in [min, max], or -1. */
static int
req_int(json_t *req, const char *key, int min, int max, int *out)
{
	json_t *v = json_object_get(req, key);

	if (!json_is_integer(v) || json_integer_value(v) < min ||
	    json_integer_value(v) > max)
		return -1;
	*out = (int)json_integer_value(v);
	return 0;
}

/* Parse a request into c. Returns 0, or -1 with *why set (static). */
static int
parse_request(
    struct held_client *c, const char *data, size_t len, const char **why)
{
	json_t *req, *hosts, *v;
	json_error_t err;
	size_t i;

	if ((req = json_loadb(data, len, 0, &err)) == NULL ||
	    !json_is_object(req)) {
		*why = "the request is not a JSON object";
		json_decref(req);
		return -1;
	}
	hosts = json_object_get(req, "hosts");
	v = json_object_get(req, "command");
	if (!json_is_array(hosts) || json_array_size(hosts) == 0 ||
	    json_array_size(hosts) > HELD_HOSTS_MAX || !json_is_string(v) ||
	    json_string_length(v) == 0 ||
	    strlen(json_string_value(v)) != json_string_length(v) ||
	    req_int(req, "timeout", 0, 604800, &c->timeout) != 0 ||
	    req_int(req, "connect_timeout", 1, 604800, &c->connect_timeout) !=
		0 ||
	    req_int(req, "setup_timeout", 1, 604800, &c->setup_timeout) != 0 ||
	    req_int(req, "fanout", 1, 65536, &c->fanout) != 0) {
		*why = "the request lacks hosts, command or limits in range";
		json_decref(req);
		return -1;
	}
	c->command = xstrdup(json_string_value(v));
	c->names = xcalloc(json_array_size(hosts), sizeof *c->names);
	for (i = 0; i < json_array_size(hosts); i++) {
		v = json_array_get(hosts, i);
		if (!json_is_string(v)) {
			*why = "a host of the request is not a string";
			json_decref(req);
			return -1;
		}
		c->names[c->nnames++] = xstrdup(json_string_value(v));
	}
	json_decref(req);
	return 0;
}

static void
on_client_read(struct bufferevent *bev, void *arg)
{
	struct held_client *c = arg;
	struct evbuffer *in = bufferevent_get_input(bev);
	unsigned char *hdr;
	const char *why = NULL;
	uint32_t len;

	if (c->state != C_READ) {
		/* Nothing more is asked of the CLI: ignore what it sends. */
		evbuffer_drain(in, evbuffer_get_length(in));
		return;
	}
	if (evbuffer_get_length(in) < 5)
		return;
	hdr = evbuffer_pullup(in, 5);
	len = get_u32(hdr);
	if (hdr[4] != 'Q' || len > HELD_REQUEST_MAX) {
		client_refuse(c,
		    hdr[4] != 'Q' ? "not a request"
				  : "the request is too large");
		return;
	}
	if (evbuffer_get_length(in) < 5 + (size_t)len)
		return;
	evbuffer_drain(in, 5);
	if (parse_request(
		c, (const char *)evbuffer_pullup(in, len), len, &why) != 0) {
		evbuffer_drain(in, len);
		client_refuse(c, why);
		return;
	}
	evbuffer_drain(in, len);
	c->state = C_QUEUED;
	held_kick(c->held);
}

/* What was to be sent is sent: a client at its end goes. */
static void
on_client_write(struct bufferevent *bev, void *arg)
{
	struct held_client *c = arg;

	(void)bev;
	if (c->state == C_CLOSING)
		client_free(c);
}

/* The CLI closed its end (or failed): a run of its request stops. */
static void
on_client_event(struct bufferevent *bev, short what, void *arg)
{
	struct held_client *c = arg;
	struct held *h = c->held;

	(void)bev;
	if ((what & (BEV_EVENT_EOF | BEV_EVENT_ERROR)) == 0)
		return;
	if (c->state != C_RUN) {
		client_free(c);
		return;
	}
	debug_f("the client went: cancelling its exec");
	bufferevent_free(c->bev);
	c->bev = NULL;
	engine_cancel(h->run); /* on_finished frees c */
}

/* Unlink c from its daemon and free it. */
static void
client_free(struct held_client *c)
{
	struct held_client **p;
	size_t i;

	for (p = &c->held->clients; *p != NULL; p = &(*p)->next) {
		if (*p == c) {
			*p = c->next;
			break;
		}
	}
	if (c->held->running == c)
		c->held->running = NULL;
	if (c->bev != NULL)
		bufferevent_free(c->bev);
	for (i = 0; i < c->nnames; i++)
		free(c->names[i]);
	free(c->names);
	free(c->command);
	free(c);
}

static void
on_accept(evutil_socket_t fd, short what, void *arg)
{
	struct held *h = arg;
	struct held_client *c;
	int s;

	(void)what;
	if ((s = accept4(fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC)) == -1)
		return;
	if (!peer_is_us(s)) {
		warn_msg(
		    "refused a connection to %s from another user", h->path);
		close(s);
		return;
	}
	c = xcalloc(1, sizeof *c);
	c->held = h;
	c->bev = bufferevent_socket_new(h->base, s, BEV_OPT_CLOSE_ON_FREE);
	bufferevent_setcb(
	    c->bev, on_client_read, on_client_write, on_client_event, c);
	bufferevent_enable(c->bev, EV_READ | EV_WRITE);
	c->next = h->clients;
	h->clients = c;
}

/* Every few seconds: tell the waiting and running CLIs we live. */
static void
on_beat(evutil_socket_t fd, short what, void *arg)
{
	struct held *h = arg;
	struct held_client *c;

	(void)fd;
	(void)what;
	for (c = h->clients; c != NULL; c = c->next) {
		if (c->state == C_QUEUED || c->state == C_RUN)
			client_send(c, 'K', NULL, 0, NULL, 0);
	}
}

/*
 * Listen for the CLI on the socket of database db. A socket left there
 * is stale (the caller holds the daemon lock) and replaced. Returns 0
 * with *hp, or -1 with *cause.
 */
int
held_listen(struct event_base *base, const char *db, held_ready_cb ready,
    void *arg, struct held **hp, char **cause)
{
	struct sockaddr_un sun;
	struct timeval beat = { HELD_BEAT_S, 0 };
	struct held *h;
	char *dir = socket_dir();
	mode_t old;
	int fd;

	*hp = NULL;
	if (dir_ready(dir, cause) != 0) {
		free(dir);
		return -1;
	}
	free(dir);
	h = xcalloc(1, sizeof *h);
	h->path = held_socket_path(db);
	memset(&sun, 0, sizeof sun);
	sun.sun_family = AF_UNIX;
	if (strlen(h->path) >= sizeof sun.sun_path) {
		xasprintf(cause, "socket path too long: %s", h->path);
		goto fail;
	}
	memcpy(sun.sun_path, h->path, strlen(h->path));
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd == -1) {
		xasprintf(cause, "cannot make a socket: %s", strerror(errno));
		goto fail;
	}
	h->fd = fd;
	unlink(h->path);
	/* Made 0600, never widened first: the umask holds at the bind. */
	old = umask(0177);
	if (bind(fd, (struct sockaddr *)&sun, sizeof sun) != 0 ||
	    listen(fd, 64) != 0) {
		umask(old);
		xasprintf(
		    cause, "cannot listen on %s: %s", h->path, strerror(errno));
		close(fd);
		goto fail;
	}
	umask(old);
	h->base = base;
	h->ready = ready;
	h->arg = arg;
	h->accept_ev = event_new(base, fd, EV_READ | EV_PERSIST, on_accept, h);
	event_add(h->accept_ev, NULL);
	h->beat = event_new(base, -1, EV_PERSIST, on_beat, h);
	evtimer_add(h->beat, &beat);
	debug_f("listening on %s", h->path);
	*hp = h;
	return 0;
fail:
	free(h->path);
	free(h);
	return -1;
}

/* Whether a request runs on the held sessions now. */
int
held_busy(const struct held *h)
{
	return h != NULL && h->run != NULL;
}

/*
 * Stop the request running, if any: its CLI is let go first, so it
 * reports the daemon gone for the hosts not done; on_finished still
 * comes from the loop.
 */
void
held_cancel(struct held *h)
{
	if (h == NULL || h->run == NULL)
		return;
	if (h->running != NULL && h->running->bev != NULL) {
		bufferevent_free(h->running->bev);
		h->running->bev = NULL;
	}
	engine_cancel(h->run);
}

/* Stop listening, let every CLI go and remove the socket. */
void
held_free(struct held *h)
{
	if (h == NULL)
		return;
	held_cancel(h);
	while (h->clients != NULL)
		client_free(h->clients);
	event_free(h->accept_ev);
	event_free(h->beat);
	close(h->fd);
	unlink(h->path);
	free(h->path);
	free(h->index);
	runners_free(h);
	free(h);
}

/* The CLI's side of one request. */
struct held_call {
	int fd;
	struct remote *rm;
	const struct engine_ops *ops;
	unsigned char *buf; /* what came and is not read yet */
	size_t len, size;
	size_t ndone;
	int eof;
};

static volatile sig_atomic_t held_interrupted;

static void
on_sigint(int sig)
{
	(void)sig;
	held_interrupted = 1;
}

/* Write all of data to fd. Returns 0 or -1. */
static int
write_all(int fd, const void *data, size_t len)
{
	const char *p = data;
	ssize_t n;

	while (len > 0) {
		if ((n = send(fd, p, len, MSG_NOSIGNAL)) < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

/*
 * Wait for the next frame: 1 with *type, *data and *len (in hc->buf, valid
 * until the next call), 0 at EOF, -1 on an error or a frame too large, -2
 * on Ctrl-C, -3 after HELD_SILENCE_S seconds without a byte.
 */
static int
next_frame(struct held_call *hc, int *type, unsigned char **data, size_t *len)
{
	struct pollfd pfd = { hc->fd, POLLIN, 0 };
	uint32_t flen;
	ssize_t n;
	int r;

	for (;;) {
		if (hc->len >= 5) {
			flen = get_u32(hc->buf);
			if (flen > HELD_FRAME_MAX)
				return -1;
			if (hc->len >= 5 + (size_t)flen) {
				*type = hc->buf[4];
				*data = hc->buf + 5;
				*len = flen;
				return 1;
			}
		}
		if (held_interrupted)
			return -2;
		if ((r = poll(&pfd, 1, HELD_SILENCE_S * 1000)) < 0 &&
		    errno == EINTR)
			continue;
		if (r <= 0)
			return r == 0 ? -3 : -1;
		if (hc->size - hc->len < 65536) {
			hc->size = hc->size * 2 + 65536;
			hc->buf = xreallocarray(hc->buf, 1, hc->size);
		}
		n = read(hc->fd, hc->buf + hc->len, hc->size - hc->len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n == 0 ? 0 : -1;
		hc->len += (size_t)n;
	}
}

/* Forget the frame next_frame returned. */
static void
frame_drop(struct held_call *hc)
{
	size_t used = 5 + get_u32(hc->buf);

	memmove(hc->buf, hc->buf + used, hc->len - used);
	hc->len -= used;
}

/* The request of a run of set on rm, as JSON. NULL: not UTF-8. */
static char *
request(struct remote *rm, const struct engine_settings *set)
{
	json_t *j = json_object(), *hosts = json_array(), *cmd, *name;
	char *s;
	size_t i;

	json_object_set_new(j, "hosts", hosts);
	for (i = 0; i < rm->n; i++) {
		/* Each name in its place: the daemon answers by index. */
		if ((name = json_string(rm->list[i].name)) == NULL) {
			json_decref(j);
			return NULL;
		}
		json_array_append_new(hosts, name);
	}
	if ((cmd = json_string(set->command)) == NULL) {
		json_decref(j);
		return NULL;
	}
	json_object_set_new(j, "command", cmd);
	json_object_set_new(j, "timeout", json_integer(set->command_timeout));
	json_object_set_new(
	    j, "connect_timeout", json_integer(set->connect_timeout));
	json_object_set_new(j, "setup_timeout",
	    json_integer(set->setup_timeout > 0 ? set->setup_timeout : 30));
	json_object_set_new(j, "fanout", json_integer(set->fanout));
	s = json_dumps(j, JSON_COMPACT);
	json_decref(j);
	return s;
}

/* Connect to the daemon of db: the socket, or -1 (none answers). */
static int
call_connect(const char *db)
{
	struct sockaddr_un sun;
	char *path = held_socket_path(db);
	int fd;

	memset(&sun, 0, sizeof sun);
	sun.sun_family = AF_UNIX;
	if (strlen(path) >= sizeof sun.sun_path ||
	    (fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)) == -1) {
		free(path);
		return -1;
	}
	memcpy(sun.sun_path, path, strlen(path));
	if (connect(fd, (struct sockaddr *)&sun, sizeof sun) != 0) {
		debug_f("no daemon at %s (%s): direct connections", path,
		    strerror(errno));
		close(fd);
		free(path);
		return -1;
	}
	if (!peer_is_us(fd)) {
		warn_msg(
		    "%s is not served by a daemon of yours: ignored", path);
		close(fd);
		free(path);
		return -1;
	}
	debug_f("exec through the daemon at %s (held sessions)", path);
	free(path);
	return fd;
}

/* A result frame: fill host k in and report it done. -1: malformed. */
static int
host_result(struct held_call *hc, const unsigned char *p, size_t len)
{
	struct engine_host *h;
	uint32_t k, slen;
	int32_t status;

	if (len < 15 || (k = get_u32(p)) >= hc->rm->n || p[4] >= EF_NKINDS ||
	    (slen = (uint32_t)p[13] << 8 | p[14]) > len - 15)
		return -1;
	h = &hc->rm->hosts[k];
	status = (int32_t)get_u32(p + 5);
	if (h->done || status < -1 || status > 255)
		return -1;
	h->fail = (enum engine_fail)p[4];
	h->exit_status = status;
	h->start_ms = 0;
	h->end_ms = get_u32(p + 9);
	if (slen > 0)
		h->exit_signal = xstrndup((const char *)p + 15, slen);
	if (h->fail != EF_NONE)
		h->fail_msg =
		    xstrndup((const char *)p + 15 + slen, len - 15 - slen);
	h->done = 1;
	hc->ndone++;
	if (hc->ops->done != NULL)
		hc->ops->done(h, hc->ops->arg);
	return 0;
}

/* The hosts not done fail with fail and msg. */
static void
fail_rest(struct held_call *hc, enum engine_fail fail, const char *msg)
{
	struct engine_host *h;
	size_t i;

	for (i = 0; i < hc->rm->n; i++) {
		h = &hc->rm->hosts[i];
		if (h->done)
			continue;
		h->fail = fail;
		h->fail_msg = xstrdup(msg);
		h->done = 1;
		if (hc->ops->done != NULL)
			hc->ops->done(h, hc->ops->arg);
	}
}

/*
 * Read the daemon's frames after its 'A' until 'F'. Returns 0 when every
 * host is done, or -1 with *why (static) for the hosts not done.
 */
static int
call_read(struct held_call *hc, enum engine_fail *fail, const char **why)
{
	unsigned char *p;
	size_t len;
	uint32_t k;
	int t, r;

	while ((r = next_frame(hc, &t, &p, &len)) == 1) {
		if (t == 'F' && hc->ndone == hc->rm->n)
			return 0;
		if (t == 'O' && len >= 5 && (k = get_u32(p)) < hc->rm->n &&
		    !hc->rm->hosts[k].done && p[4] <= 1) {
			if (hc->ops->output != NULL)
				hc->ops->output(&hc->rm->hosts[k], p[4],
				    (const char *)p + 5, len - 5, hc->ops->arg);
		} else if (t == 'D') {
			if (host_result(hc, p, len) != 0)
				break;
		} else if (t != 'K')
			break;
		frame_drop(hc);
	}
	*fail = r == -2 ? EF_INTERRUPTED : EF_SSH;
	if (r == -2)
		*why = "interrupted";
	else if (r == 1)
		*why = "the daemon sent what gpufleet cannot read";
	else if (r == -3)
		*why = "no word from the daemon for 30 s";
	else
		*why = "the daemon went away before this host finished";
	return -1;
}

/*
 * Run set's command on the hosts of rm through the daemon of database db,
 * reporting through ops as a direct run does. Returns 1 when no daemon
 * takes the request (run direct), else 0 with every host done: those the
 * daemon did not finish (it died, Ctrl-C) failed with a reason.
 */
int
held_exec(const char *db, struct remote *rm, const struct engine_settings *set,
    const struct engine_ops *ops)
{
	struct held_call hc;
	struct sigaction sa, old;
	unsigned char hdr[5], *p;
	enum engine_fail fail;
	const char *why = NULL;
	char *req;
	size_t len, i;
	int t, r, ret = 1;

	if (set->stdin_data != NULL || (req = request(rm, set)) == NULL)
		return 1;
	memset(&hc, 0, sizeof hc);
	hc.rm = rm;
	hc.ops = ops;
	if ((hc.fd = call_connect(db)) == -1) {
		free(req);
		return 1;
	}
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_sigint;
	sigemptyset(&sa.sa_mask);
	held_interrupted = 0;
	sigaction(SIGINT, &sa, &old);
	put_u32(hdr, (uint32_t)strlen(req));
	hdr[4] = 'Q';
	if (write_all(hc.fd, hdr, sizeof hdr) != 0 ||
	    write_all(hc.fd, req, strlen(req)) != 0)
		goto out;
	/* Until accepted nothing ran: a refusal or a dead daemon is direct. */
	while ((r = next_frame(&hc, &t, &p, &len)) == 1 && t == 'K')
		frame_drop(&hc);
	if (r == 1 && t == 'X')
		debug_f("the daemon refused: %.*s: direct connections",
		    (int)len, (const char *)p);
	if (r != -2 && (r != 1 || t != 'A'))
		goto out;
	for (i = 0; i < rm->n; i++) {
		engine_host_clear(&rm->hosts[i]);
		rm->hosts[i].fail = EF_NONE;
		rm->hosts[i].done = 0;
		rm->hosts[i].exit_status = -1;
	}
	ret = 0;
	if (r == -2) {
		/* Ctrl-C while the request waited: nothing runs. */
		fail_rest(&hc, EF_INTERRUPTED, "interrupted before it started");
		goto out;
	}
	frame_drop(&hc);
	if (call_read(&hc, &fail, &why) != 0) {
		if (fail != EF_INTERRUPTED)
			error("exec: the daemon's run broke off (%s): %zu of "
			      "%zu host(s) not done",
			    why, rm->n - hc.ndone, rm->n);
		fail_rest(&hc, fail, why);
	}
out:
	sigaction(SIGINT, &old, NULL);
	close(hc.fd);
	free(hc.buf);
	free(req);
	return ret;
}

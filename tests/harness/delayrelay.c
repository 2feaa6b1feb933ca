/*
 * delayrelay: a TCP relay on 127.0.0.1 that adds a round-trip time, for
 * measuring and testing the fleet as if its instances were far away
 * (netem is not available in the sandbox).
 *
 *   delayrelay RTT_MS PORTFILE TARGET_PORT...
 *
 * For each TARGET_PORT it listens on a free port of 127.0.0.1 and relays
 * every connection to 127.0.0.1:TARGET_PORT, holding each piece of data
 * RTT_MS / 2 in each direction (so a round trip through it takes RTT_MS
 * more), in order, with no cap on throughput.  An end of stream (or a
 * failed connect to the target) reaches the other side after the same
 * delay, once the data before it has been written; then both sides are
 * closed.  It writes "TARGET_PORT RELAY_PORT" lines, one per target in
 * the order given, to PORTFILE (through a temporary file and a rename, so
 * a reader never sees half of it) once every port listens.
 *
 * One process, one libevent loop, any number of connections.  It exits
 * when its parent dies, on SIGTERM, or after a day; tests kill it at the
 * end.  Only 127.0.0.1 is ever listened on or connected to.
 */
#include <sys/prctl.h>
#include <sys/queue.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/types.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/listener.h>

#include "number.h"

#define MAX_TARGETS 4096
#define LIFETIME_S  (24 * 3600)

/* A piece of data read from one side, due to be written to the other. */
struct chunk {
	struct timespec due;
	struct evbuffer *data; /* NULL: the end of the stream */
	TAILQ_ENTRY(chunk) entry;
};
TAILQ_HEAD(chunks, chunk);

struct conn;

/* One direction of a connection: what was read from side from. */
struct dir {
	struct conn *conn;
	int from;
	struct chunks queue;
	struct event *timer;
};

struct conn {
	struct bufferevent *side[2]; /* 0: the client, 1: the target */
	struct dir dir[2];
	int dead[2]; /* the side had an end of stream or an error */
	int closing; /* an end was delivered: close once flushed */
	int flush;   /* the side whose output must drain first */
};

struct target {
	int port;
	int relay_port;
};

static struct event_base *base;
static struct timespec delay;

static void conn_free(struct conn *);

static void
usage(void)
{
	fprintf(stderr, "usage: delayrelay RTT_MS PORTFILE TARGET_PORT...\n");
	exit(2);
}

static void
now(struct timespec *ts)
{
	clock_gettime(CLOCK_MONOTONIC, ts);
}

/* How long from a to b, at least zero, as a timeval. */
static void
until(const struct timespec *a, const struct timespec *b, struct timeval *tv)
{
	long long ns;

	ns = (long long)(b->tv_sec - a->tv_sec) * 1000000000LL +
	    (b->tv_nsec - a->tv_nsec);
	if (ns < 0)
		ns = 0;
	tv->tv_sec = (time_t)(ns / 1000000000LL);
	tv->tv_usec = (suseconds_t)((ns % 1000000000LL + 999) / 1000);
}

static int
due(const struct timespec *when, const struct timespec *t)
{
	if (when->tv_sec != t->tv_sec)
		return when->tv_sec < t->tv_sec;
	return when->tv_nsec <= t->tv_nsec;
}

/* Arm the direction's timer for the chunk at the head of its queue. */
static void
dir_arm(struct dir *d)
{
	struct chunk *c;
	struct timespec t;
	struct timeval tv;

	if ((c = TAILQ_FIRST(&d->queue)) == NULL ||
	    evtimer_pending(d->timer, NULL))
		return;
	now(&t);
	until(&t, &c->due, &tv);
	evtimer_add(d->timer, &tv);
}

/* Queue data (NULL: the end of the stream) to pass after the delay. */
static void
dir_push(struct dir *d, struct evbuffer *data)
{
	struct chunk *c;

	if ((c = calloc(1, sizeof *c)) == NULL) {
		perror("delayrelay: calloc");
		exit(1);
	}
	now(&c->due);
	c->due.tv_sec += delay.tv_sec;
	c->due.tv_nsec += delay.tv_nsec;
	if (c->due.tv_nsec >= 1000000000L) {
		c->due.tv_sec++;
		c->due.tv_nsec -= 1000000000L;
	}
	c->data = data;
	TAILQ_INSERT_TAIL(&d->queue, c, entry);
	dir_arm(d);
}

/* Close the connection if an end was delivered and it is all written. */
static void
conn_check_closed(struct conn *cn)
{
	int i;

	if (!cn->closing)
		return;
	i = cn->flush;
	if (!cn->dead[i] &&
	    evbuffer_get_length(bufferevent_get_output(cn->side[i])) != 0)
		return;
	conn_free(cn);
}

/* Write every chunk of the direction that is due to the other side. */
static void
dir_timer_cb(evutil_socket_t fd, short what, void *arg)
{
	struct dir *d = arg;
	struct conn *cn = d->conn;
	struct bufferevent *to = cn->side[!d->from];
	struct chunk *c;
	struct timespec t;

	(void)fd;
	(void)what;
	now(&t);
	while ((c = TAILQ_FIRST(&d->queue)) != NULL && due(&c->due, &t)) {
		TAILQ_REMOVE(&d->queue, c, entry);
		if (c->data != NULL) {
			bufferevent_write_buffer(to, c->data);
			evbuffer_free(c->data);
		} else {
			cn->closing = 1;
			cn->flush = !d->from;
		}
		free(c);
		if (cn->closing)
			break;
	}
	if (cn->closing) {
		conn_check_closed(cn);
		return;
	}
	dir_arm(d);
}

static void
side_read_cb(struct bufferevent *bev, void *arg)
{
	struct conn *cn = arg;
	struct evbuffer *data;
	int i = bev == cn->side[1];

	if ((data = evbuffer_new()) == NULL) {
		fprintf(stderr, "delayrelay: evbuffer_new failed\n");
		exit(1);
	}
	evbuffer_add_buffer(data, bufferevent_get_input(bev));
	dir_push(&cn->dir[i], data);
}

static void
side_write_cb(struct bufferevent *bev, void *arg)
{
	(void)bev;
	conn_check_closed(arg);
}

static void
side_event_cb(struct bufferevent *bev, short what, void *arg)
{
	struct conn *cn = arg;
	int i = bev == cn->side[1];

	if (what & BEV_EVENT_CONNECTED)
		return;
	if (what & (BEV_EVENT_EOF | BEV_EVENT_ERROR)) {
		/* what was read before the end still passes, then the end */
		if (evbuffer_get_length(bufferevent_get_input(bev)) != 0)
			side_read_cb(bev, cn);
		if (what & BEV_EVENT_ERROR)
			cn->dead[i] = 1;
		bufferevent_disable(bev, EV_READ);
		bufferevent_setcb(bev, NULL, side_write_cb, NULL, cn);
		dir_push(&cn->dir[i], NULL);
	}
}

static void
conn_free(struct conn *cn)
{
	struct chunk *c;
	int i;

	for (i = 0; i < 2; i++) {
		while ((c = TAILQ_FIRST(&cn->dir[i].queue)) != NULL) {
			TAILQ_REMOVE(&cn->dir[i].queue, c, entry);
			if (c->data != NULL)
				evbuffer_free(c->data);
			free(c);
		}
		event_free(cn->dir[i].timer);
		bufferevent_free(cn->side[i]);
	}
	free(cn);
}

static void
nodelay(evutil_socket_t fd)
{
	int one = 1;

	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

static void
accept_cb(struct evconnlistener *l, evutil_socket_t fd, struct sockaddr *sa,
    int salen, void *arg)
{
	struct target *t = arg;
	struct sockaddr_in sin;
	struct conn *cn;
	evutil_socket_t out;
	int i;

	(void)l;
	(void)sa;
	(void)salen;
	if ((out = socket(AF_INET, SOCK_STREAM, 0)) < 0) {
		perror("delayrelay: socket");
		close(fd);
		return;
	}
	evutil_make_socket_nonblocking(out);
	nodelay(fd);
	nodelay(out);
	if ((cn = calloc(1, sizeof *cn)) == NULL) {
		perror("delayrelay: calloc");
		exit(1);
	}
	cn->side[0] = bufferevent_socket_new(base, fd, BEV_OPT_CLOSE_ON_FREE);
	cn->side[1] = bufferevent_socket_new(base, out, BEV_OPT_CLOSE_ON_FREE);
	if (cn->side[0] == NULL || cn->side[1] == NULL) {
		fprintf(stderr, "delayrelay: bufferevent_socket_new failed\n");
		exit(1);
	}
	for (i = 0; i < 2; i++) {
		cn->dir[i].conn = cn;
		cn->dir[i].from = i;
		TAILQ_INIT(&cn->dir[i].queue);
		cn->dir[i].timer = evtimer_new(base, dir_timer_cb, &cn->dir[i]);
		bufferevent_setcb(cn->side[i], side_read_cb, side_write_cb,
		    side_event_cb, cn);
		bufferevent_enable(cn->side[i], EV_READ | EV_WRITE);
	}
	memset(&sin, 0, sizeof sin);
	sin.sin_family = AF_INET;
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	sin.sin_port = htons((unsigned short)t->port);
	/* a failed connect comes to side_event_cb as BEV_EVENT_ERROR */
	bufferevent_socket_connect(
	    cn->side[1], (struct sockaddr *)&sin, sizeof sin);
}

/* Listen on a free port of 127.0.0.1 for the target. */
static void
listen_for(struct target *t)
{
	struct sockaddr_in sin;
	socklen_t len = sizeof sin;
	struct evconnlistener *l;

	memset(&sin, 0, sizeof sin);
	sin.sin_family = AF_INET;
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	l = evconnlistener_new_bind(base, accept_cb, t,
	    LEV_OPT_CLOSE_ON_FREE | LEV_OPT_REUSEABLE, 4096,
	    (struct sockaddr *)&sin, sizeof sin);
	if (l == NULL) {
		perror("delayrelay: listen");
		exit(1);
	}
	if (getsockname(
		evconnlistener_get_fd(l), (struct sockaddr *)&sin, &len) != 0) {
		perror("delayrelay: getsockname");
		exit(1);
	}
	t->relay_port = ntohs(sin.sin_port);
}

static void
write_portfile(const char *path, const struct target *t, int n)
{
	char tmp[4096];
	FILE *f;
	int i;

	if (snprintf(tmp, sizeof tmp, "%s.tmp", path) >= (int)sizeof tmp) {
		fprintf(stderr, "delayrelay: PORTFILE path too long\n");
		exit(2);
	}
	if ((f = fopen(tmp, "w")) == NULL) {
		perror(tmp);
		exit(1);
	}
	for (i = 0; i < n; i++)
		fprintf(f, "%d %d\n", t[i].port, t[i].relay_port);
	if (fclose(f) != 0 || rename(tmp, path) != 0) {
		perror(path);
		exit(1);
	}
}

/* Room for two descriptors per connection and one per listener. */
static void
raise_nofile(void)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
}

int
main(int argc, char **argv)
{
	struct target *targets;
	long rtt;
	int i, n;

	if (argc < 4)
		usage();
	rtt = harness_number("delayrelay", argv[1], 0, 60000);
	n = argc - 3;
	if (n > MAX_TARGETS) {
		fprintf(
		    stderr, "delayrelay: at most %d targets\n", MAX_TARGETS);
		exit(2);
	}
	/* half the round trip each way, to the microsecond */
	delay.tv_sec = rtt / 2000;
	delay.tv_nsec = (rtt * 500000L) % 1000000000L;

	prctl(PR_SET_PDEATHSIG, SIGTERM);
	if (getppid() == 1)
		exit(0);
	signal(SIGPIPE, SIG_IGN);
	alarm(LIFETIME_S);
	raise_nofile();

	if ((targets = calloc((size_t)n, sizeof *targets)) == NULL) {
		perror("delayrelay: calloc");
		exit(1);
	}
	if ((base = event_base_new()) == NULL) {
		fprintf(stderr, "delayrelay: event_base_new failed\n");
		exit(1);
	}
	for (i = 0; i < n; i++) {
		targets[i].port =
		    (int)harness_number("delayrelay", argv[3 + i], 1, 65535);
		listen_for(&targets[i]);
	}
	write_portfile(argv[2], targets, n);
	event_base_dispatch(base);
	return 0;
}

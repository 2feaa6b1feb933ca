/*
 * slowpeer: misbehaving SSH servers on 127.0.0.1 for the deadline tests.
 *
 *   slowpeer PORTFILE prebanner [INTERVAL_US]
 *	accept connections and stream lines of pre-banner text at them, one
 *	every INTERVAL_US microseconds (default 0: as fast as they are read),
 *	for ever (no SSH banner ever comes)
 *   slowpeer PORTFILE relay TARGET_PORT DELAY_MS CHUNK
 *	relay each connection to 127.0.0.1:TARGET_PORT (a real sshd); the
 *	server's first line (its banner) passes at once, then every piece of
 *	at most CHUNK bytes from the server waits DELAY_MS first: a slow
 *	server, or with CHUNK 1 one that trickles
 *
 * It listens on a free port, writes the port number to PORTFILE (through
 * a temporary file and a rename, so a reader never sees half of it) and
 * serves each connection in a child process. It exits when its parent dies
 * or after an hour, whichever comes first; tests kill it at the end.
 */
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/wait.h>

#include <netinet/in.h>
#include <netinet/tcp.h>

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "number.h"

static void serve_prebanner(int, long);
static void serve_relay(int, int, long, size_t);
static int write_all(int, const char *, size_t);

static void
usage(void)
{
	fprintf(stderr,
	    "usage: slowpeer PORTFILE prebanner [INTERVAL_US]\n"
	    "       slowpeer PORTFILE relay TARGET_PORT DELAY_MS CHUNK\n");
	exit(2);
}

static int
write_all(int fd, const char *p, size_t n)
{
	ssize_t w;

	while (n > 0) {
		if ((w = write(fd, p, n)) < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

/* Lines of text that never become an SSH banner. */
static void
serve_prebanner(int fd, long interval_us)
{
	struct timespec ts = { interval_us / 1000000,
		(interval_us % 1000000) * 1000 };
	char line[128];
	unsigned long i;
	int n;

	for (i = 0;; i++) {
		if (interval_us > 0)
			nanosleep(&ts, NULL);
		n = snprintf(line, sizeof line,
		    "pre-banner line %lu: this server never speaks SSH\r\n", i);
		if (write_all(fd, line, (size_t)n) != 0)
			return;
	}
}

/* Relay fd to the target, delaying what the server sends after its banner. */
static void
serve_relay(int fd, int target, long delay_ms, size_t chunk)
{
	struct sockaddr_in sin;
	struct pollfd p[2];
	struct timespec ts;
	char buf[65536];
	int up, banner_done = 0;
	ssize_t r;
	size_t off, n;

	if ((up = socket(AF_INET, SOCK_STREAM, 0)) == -1)
		return;
	memset(&sin, 0, sizeof sin);
	sin.sin_family = AF_INET;
	sin.sin_port = htons((unsigned short)target);
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (connect(up, (struct sockaddr *)&sin, sizeof sin) != 0)
		return;
	if (chunk > sizeof buf)
		chunk = sizeof buf;
	ts.tv_sec = delay_ms / 1000;
	ts.tv_nsec = (delay_ms % 1000) * 1000000;
	for (;;) {
		p[0].fd = fd;
		p[0].events = POLLIN;
		p[1].fd = up;
		p[1].events = POLLIN;
		if (poll(p, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			return;
		}
		if (p[0].revents & (POLLIN | POLLHUP | POLLERR)) {
			if ((r = read(fd, buf, sizeof buf)) <= 0)
				return;
			if (write_all(up, buf, (size_t)r) != 0)
				return;
		}
		if (!(p[1].revents & (POLLIN | POLLHUP | POLLERR)))
			continue;
		if ((r = read(up, buf, banner_done ? chunk : sizeof buf)) <= 0)
			return;
		off = 0;
		if (!banner_done) {
			char *nl = memchr(buf, '\n', (size_t)r);
			n = nl != NULL ? (size_t)(nl - buf) + 1 : (size_t)r;
			if (write_all(fd, buf, n) != 0)
				return;
			off = n;
			banner_done = nl != NULL;
		}
		while (off < (size_t)r) {
			n = (size_t)r - off < chunk ? (size_t)r - off : chunk;
			nanosleep(&ts, NULL);
			if (write_all(fd, buf + off, n) != 0)
				return;
			off += n;
		}
	}
}

int
main(int argc, char **argv)
{
	struct sockaddr_in sin;
	socklen_t len = sizeof sin;
	char tmp[4096];
	FILE *f;
	int s, fd, one = 1, target = 0, relay;
	long delay = 0, interval = 0;
	size_t chunk = 0;

	if (argc < 3)
		usage();
	relay = strcmp(argv[2], "relay") == 0;
	if (relay) {
		if (argc != 6)
			usage();
		target = (int)harness_number("slowpeer", argv[3], 1, 65535);
		delay = harness_number("slowpeer", argv[4], 0, 60000);
		chunk = (size_t)harness_number("slowpeer", argv[5], 1, 65536);
	} else if (strcmp(argv[2], "prebanner") == 0 && argc <= 4) {
		if (argc == 4)
			interval =
			    harness_number("slowpeer", argv[3], 0, 10000000);
	} else
		usage();

	prctl(PR_SET_PDEATHSIG, SIGTERM);
	alarm(3600);
	signal(SIGPIPE, SIG_IGN);
	signal(SIGCHLD, SIG_IGN); /* children are reaped by the kernel */
	if ((s = socket(AF_INET, SOCK_STREAM, 0)) == -1) {
		perror("slowpeer: socket");
		return 1;
	}
	setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
	memset(&sin, 0, sizeof sin);
	sin.sin_family = AF_INET;
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (bind(s, (struct sockaddr *)&sin, sizeof sin) != 0 ||
	    listen(s, 64) != 0 ||
	    getsockname(s, (struct sockaddr *)&sin, &len) != 0) {
		perror("slowpeer: listen");
		return 1;
	}
	snprintf(tmp, sizeof tmp, "%s.tmp", argv[1]);
	if ((f = fopen(tmp, "w")) == NULL ||
	    fprintf(f, "%d\n", ntohs(sin.sin_port)) < 0 || fclose(f) != 0 ||
	    rename(tmp, argv[1]) != 0) {
		perror("slowpeer: port file");
		return 1;
	}
	for (;;) {
		if ((fd = accept(s, NULL, NULL)) == -1) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			perror("slowpeer: accept");
			return 1;
		}
		switch (fork()) {
		case -1:
			close(fd);
			continue;
		case 0:
			close(s);
			prctl(PR_SET_PDEATHSIG, SIGTERM);
			setsockopt(
			    fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
			if (relay)
				serve_relay(fd, target, delay, chunk);
			else
				serve_prebanner(fd, interval);
			_exit(0);
		default:
			close(fd);
		}
	}
}

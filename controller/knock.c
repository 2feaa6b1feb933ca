/* Is anyone home: a connect and an SSH banner, in parallel, bounded. */

#include <sys/socket.h>

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "knock.h"
#include "xmalloc.h"

struct door {
	int fd; /* -1: done */
	int connected;
	char buf[8];
	size_t len;
};

static int dial(const struct instance *);
static long long now_ms(void);

/* A non-blocking connect to in's host and port; the socket or -1. */
static int
dial(const struct instance *in)
{
	struct addrinfo hints, *res = NULL;
	char port[16];
	int fd;

	memset(&hints, 0, sizeof hints);
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_flags = AI_NUMERICSERV;
	snprintf(port, sizeof port, "%d", in->port);
	if (getaddrinfo(in->host, port, &hints, &res) != 0 || res == NULL)
		return -1;
	fd = socket(res->ai_family,
	    res->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, res->ai_protocol);
	if (fd != -1 && connect(fd, res->ai_addr, res->ai_addrlen) == -1 &&
	    errno != EINPROGRESS) {
		close(fd);
		fd = -1;
	}
	freeaddrinfo(res);
	return fd;
}

static long long
now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/*
 * Knock on list[i] for each i with want[i] (not behind a jump host: that
 * needs a login), waiting at most timeout_ms (capped at KNOCK_MAX_MS) in
 * all once the names are resolved (the system's resolver, one after the
 * other: a name that hangs takes its own time), at the first address of
 * each; answered[i] is 1 for each that sent "SSH-". Returns how many did.
 */
size_t
knock_banners(const struct instance *list, size_t n, const unsigned char *want,
    int timeout_ms, unsigned char *answered)
{
	struct door *d = xcalloc(n + 1, sizeof *d);
	struct pollfd *pf = xcalloc(n + 1, sizeof *pf);
	long long end, left;
	size_t i, k, open = 0, yes = 0;
	ssize_t got;
	int err;
	socklen_t len;

	if (timeout_ms > KNOCK_MAX_MS || timeout_ms <= 0)
		timeout_ms = KNOCK_MAX_MS;
	end = now_ms() + timeout_ms;
	for (i = 0; i < n; i++) {
		answered[i] = 0;
		d[i].fd = want[i] && list[i].jump == NULL ? dial(&list[i]) : -1;
		open += d[i].fd != -1;
	}
	while (open > 0 && (left = end - now_ms()) > 0) {
		for (i = 0, k = 0; i < n; i++) {
			if (d[i].fd == -1)
				continue;
			pf[k].fd = d[i].fd;
			pf[k].events = d[i].connected ? POLLIN : POLLOUT;
			pf[k++].revents = 0;
		}
		if (poll(pf, k, (int)left) <= 0)
			continue;
		for (i = 0, k = 0; i < n; i++) {
			if (d[i].fd == -1)
				continue;
			if (pf[k++].revents == 0)
				continue;
			if (!d[i].connected) {
				len = sizeof err;
				if (getsockopt(d[i].fd, SOL_SOCKET, SO_ERROR,
					&err, &len) == 0 &&
				    err == 0) {
					d[i].connected = 1;
					continue;
				}
			} else {
				got = read(
				    d[i].fd, d[i].buf + d[i].len, 4 - d[i].len);
				if (got > 0) {
					d[i].len += (size_t)got;
					if (d[i].len < 4)
						continue;
					answered[i] =
					    memcmp(d[i].buf, "SSH-", 4) == 0;
					yes += answered[i];
				} else if (got < 0 && errno == EAGAIN)
					continue;
			}
			close(d[i].fd);
			d[i].fd = -1;
			open--;
		}
	}
	for (i = 0; i < n; i++) {
		if (d[i].fd != -1)
			close(d[i].fd);
	}
	free(d);
	free(pf);
	return yes;
}

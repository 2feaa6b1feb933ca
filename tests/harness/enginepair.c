/*
 * enginepair: two engine runs and a timer on one caller-owned loop, for
 * tests/fleet/engine.sh.
 *
 *   enginepair KEYFILE USER PORT...
 *
 * The instances on 127.0.0.1 at the given ports are split in two: run A
 * takes the first half, run B the rest; both are started with
 * engine_start before the loop is dispatched. A's command waits until
 * every B host has written its marker file, so A can only finish if B runs
 * at the same time. A timer ticks every 100 ms on the same loop. Prints
 * one line per host, "NAME RUN ok|FAIL-CODE EXIT OUTPUT" (output with
 * newlines as '|'), then "finished A", "finished B" as they come, and
 * "ticks N" (how many ticks came before both runs were finished).
 *
 * Then the backoff policy: one host on a port that refuses connections is
 * run twice with settings.backoff; prints "backoff fails F delay_ok D"
 * after the first try (D: the recorded wait is 0.5-1.5 s) and "backoff
 * second expect E got G": E is what the clock says the second run must
 * do (backoff while retry_at is ahead, refused after it), G what it did.
 * Host keys are not checked: the fleet is ours, on loopback.
 */
#include <sys/socket.h>
#include <sys/stat.h>

#include <netinet/in.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>
#include <event2/thread.h>
#include <libssh/libssh.h>

#include "engine.h"
#include "instance.h"
#include "xmalloc.h"

struct side {
	const char *name;
	struct engine_host *hosts;
	struct instance *ins;
	char **out;
	size_t n;
	int finished;
	struct engine_settings set;
	struct engine_ops ops;
};

static int ticks, finished_runs;
static void backoff_check(struct engine *, ssh_key);
static struct event_base *base;

static void
output_cb(
    struct engine_host *h, int is_stderr, const char *p, size_t n, void *arg)
{
	struct side *sd = arg;
	size_t i = (size_t)(h - sd->hosts), old;

	if (is_stderr)
		return;
	old = sd->out[i] != NULL ? strlen(sd->out[i]) : 0;
	sd->out[i] = xreallocarray(sd->out[i], 1, old + n + 1);
	memcpy(sd->out[i] + old, p, n);
	sd->out[i][old + n] = '\0';
}

static void
finished_cb(struct engine_run *r, void *arg)
{
	struct side *sd = arg;
	size_t i;
	char *o;

	(void)r;
	for (i = 0; i < sd->n; i++) {
		struct engine_host *h = &sd->hosts[i];
		for (o = sd->out[i]; o != NULL && *o != '\0'; o++)
			if (*o == '\n')
				*o = '|';
		printf("%s %s %s %d %s\n", h->in->name, sd->name,
		    h->fail == EF_NONE ? "ok" : engine_fail_code(h->fail),
		    h->exit_status, sd->out[i] != NULL ? sd->out[i] : "");
	}
	printf("finished %s\n", sd->name);
	fflush(stdout);
	sd->finished = 1;
	if (++finished_runs == 2)
		event_base_loopbreak(base);
}

static void
tick_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	(void)arg;
	if (finished_runs < 2)
		ticks++;
}

/* A host whose connections are refused, run twice with backoff. */
static void
backoff_check(struct engine *e, ssh_key key)
{
	struct sockaddr_in sin;
	socklen_t len = sizeof sin;
	struct engine_settings set;
	struct engine_ops ops;
	struct engine_host h;
	struct instance in;
	const char *expect;
	int fd, delay;

	/* Bound, never listening: connecting to it is refused. */
	fd = socket(AF_INET, SOCK_STREAM, 0);
	memset(&sin, 0, sizeof sin);
	sin.sin_family = AF_INET;
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (fd == -1 || bind(fd, (struct sockaddr *)&sin, sizeof sin) != 0 ||
	    getsockname(fd, (struct sockaddr *)&sin, &len) != 0) {
		perror("enginepair: socket");
		exit(1);
	}
	instance_init(&in);
	free(in.name);
	in.name = xstrdup("refusing");
	in.host = xstrdup("127.0.0.1");
	in.port = ntohs(sin.sin_port);
	memset(&h, 0, sizeof h);
	h.in = &in;
	h.keys[0] = key;
	h.nkeys = 1;
	memset(&set, 0, sizeof set);
	set.command = "true";
	set.fanout = 1;
	set.connect_timeout = 30;
	set.backoff = 1;
	memset(&ops, 0, sizeof ops);

	engine_run(e, &h, 1, &set, &ops);
	delay = (int)(h.retry_at_ms - h.end_ms);
	printf("backoff first %s fails %d delay_ok %d\n",
	    engine_fail_code(h.fail), h.fails, delay >= 500 && delay <= 1500);
	engine_host_clear(&h);
	h.fail = EF_NONE;
	expect = engine_now_ms() < h.retry_at_ms ? "backoff" : "refused";
	engine_run(e, &h, 1, &set, &ops);
	printf("backoff second expect %s got %s\n", expect,
	    engine_fail_code(h.fail));
	engine_host_clear(&h);
	instance_clear(&in);
	close(fd);
}

int
main(int argc, char **argv)
{
	struct side sides[2];
	struct engine *e;
	struct event *tick;
	struct timeval tv = { 0, 100000 };
	ssh_key key = NULL;
	char dir[] = "/tmp/enginepair.XXXXXX", *cmd_a, *cmd_b, name[32], *why;
	size_t n, i, k;
	int s;

	if (argc < 5) {
		fprintf(
		    stderr, "usage: enginepair KEYFILE USER PORT PORT...\n");
		return 2;
	}
	if (ssh_pki_import_privkey_file(argv[1], NULL, NULL, NULL, &key) !=
	    SSH_OK) {
		fprintf(stderr, "enginepair: cannot load %s\n", argv[1]);
		return 1;
	}
	if (mkdtemp(dir) == NULL || chmod(dir, 0777) != 0) {
		perror("enginepair: mkdtemp");
		return 1;
	}
	n = (size_t)argc - 3;
	xasprintf(&cmd_b,
	    "echo B $GPUFLEET_INSTANCE; touch %s/$GPUFLEET_INSTANCE; "
	    "sleep 1; echo B done",
	    dir);
	xasprintf(&cmd_a,
	    "echo A $GPUFLEET_INSTANCE; while [ $(ls %s | wc -l) -lt %zu ]; "
	    "do sleep 0.1; done; echo A done",
	    dir, n - n / 2);
	evthread_use_pthreads();
	base = event_base_new();
	e = engine_new(base, NULL);
	memset(sides, 0, sizeof sides);
	for (s = 0; s < 2; s++) {
		struct side *sd = &sides[s];
		size_t from = s == 0 ? 0 : n / 2, to = s == 0 ? n / 2 : n;
		sd->name = s == 0 ? "A" : "B";
		sd->n = to - from;
		sd->hosts = xcalloc(sd->n, sizeof *sd->hosts);
		sd->ins = xcalloc(sd->n, sizeof *sd->ins);
		sd->out = xcalloc(sd->n, sizeof *sd->out);
		for (i = 0; i < sd->n; i++) {
			k = from + i;
			instance_init(&sd->ins[i]);
			snprintf(name, sizeof name, "inst-%zu", k + 1);
			sd->ins[i].name = xstrdup(name);
			sd->ins[i].host = xstrdup("127.0.0.1");
			free(sd->ins[i].user);
			sd->ins[i].user = xstrdup(argv[2]);
			if (instance_parse_port(
				argv[3 + k], &sd->ins[i].port, &why) != 0) {
				fprintf(stderr, "enginepair: %s\n", why);
				return 2;
			}
			sd->hosts[i].in = &sd->ins[i];
			sd->hosts[i].keys[0] = key;
			sd->hosts[i].nkeys = 1;
		}
		sd->set.command = s == 0 ? cmd_a : cmd_b;
		sd->set.fanout = 64;
		sd->set.connect_timeout = 30;
		sd->set.command_timeout = 120;
		sd->ops.output = output_cb;
		sd->ops.finished = finished_cb;
		sd->ops.arg = sd;
	}
	/* Start A first: it cannot finish unless B runs meanwhile. */
	for (s = 0; s < 2; s++)
		engine_start(e, sides[s].hosts, sides[s].n, &sides[s].set,
		    &sides[s].ops);
	tick = event_new(base, -1, EV_PERSIST, tick_cb, NULL);
	event_add(tick, &tv);
	event_base_dispatch(base);
	printf("ticks %d\n", ticks);
	event_free(tick);
	backoff_check(e, key);
	for (s = 0; s < 2; s++) {
		for (i = 0; i < sides[s].n; i++) {
			engine_forget(&sides[s].hosts[i]);
			engine_host_clear(&sides[s].hosts[i]);
			instance_clear(&sides[s].ins[i]);
			free(sides[s].out[i]);
		}
		free(sides[s].hosts);
		free(sides[s].ins);
		free(sides[s].out);
	}
	engine_free(e);
	event_base_free(base);
	ssh_key_free(key);
	free(cmd_a);
	free(cmd_b);
	for (i = 0; i < n; i++) {
		char path[64];
		snprintf(path, sizeof path, "%s/inst-%zu", dir, i + 1);
		unlink(path);
	}
	rmdir(dir);
	return 0;
}

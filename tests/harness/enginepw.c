/*
 * enginepw: one engine run that logs in with a password, for
 * tests/fleet/engine-password.sh.
 *
 *   enginepw USER PORT PASSWORD-FILE [KEYFILE...]
 *
 * Runs `echo "$GPUFLEET_INSTANCE $(id -un)"` on 127.0.0.1:PORT as USER,
 * with the keys (tried first) and then the password read by password.c
 * (the first line of PASSWORD-FILE; "-": standard input). Prints "ok EXIT
 * OUTPUT" or "CODE MESSAGE" (engine_fail_code and the host's message).
 * Host keys are not checked: the fleet is ours, on loopback.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>
#include <event2/thread.h>
#include <libssh/libssh.h>

#include "engine.h"
#include "instance.h"
#include "password.h"
#include "xmalloc.h"

static char out[4096];
static size_t outlen;

static void
output_cb(
    struct engine_host *h, int is_stderr, const char *p, size_t n, void *arg)
{
	(void)h;
	(void)arg;
	if (is_stderr || n > sizeof out - 1 - outlen)
		return;
	memcpy(out + outlen, p, n);
	outlen += n;
}

int
main(int argc, char **argv)
{
	struct event_base *base;
	struct engine *e;
	struct engine_host h;
	struct engine_settings set;
	struct engine_ops ops;
	struct instance in;
	char *pw, *why;
	int i;

	if (argc < 4) {
		fprintf(stderr,
		    "usage: enginepw USER PORT PASSWORD-FILE [KEYFILE...]\n");
		return 2;
	}
	memset(&h, 0, sizeof h);
	for (i = 4; i < argc && h.nkeys < ENGINE_MAX_KEYS; i++)
		if (ssh_pki_import_privkey_file(argv[i], NULL, NULL, NULL,
			&h.keys[h.nkeys++]) != SSH_OK) {
			fprintf(stderr, "enginepw: cannot load %s\n", argv[i]);
			return 1;
		}
	if ((pw = password_read(argv[3], argv[1], &why)) == NULL) {
		fprintf(stderr, "enginepw: %s\n", why);
		return 1;
	}
	instance_init(&in);
	free(in.name);
	in.name = xstrdup("pw");
	in.host = xstrdup("127.0.0.1");
	free(in.user);
	in.user = xstrdup(argv[1]);
	if (instance_parse_port(argv[2], &in.port, &why) != 0) {
		fprintf(stderr, "enginepw: %s\n", why);
		return 2;
	}
	h.in = &in;
	h.password = pw;
	memset(&set, 0, sizeof set);
	set.command = "echo \"$GPUFLEET_INSTANCE $(id -un)\"";
	set.fanout = 1;
	set.connect_timeout = 30;
	set.command_timeout = 60;
	memset(&ops, 0, sizeof ops);
	ops.output = output_cb;
	evthread_use_pthreads();
	base = event_base_new();
	e = engine_new(base, NULL);
	engine_run(e, &h, 1, &set, &ops);
	out[outlen] = '\0';
	out[strcspn(out, "\n")] = '\0';
	if (h.fail == EF_NONE)
		printf("ok %d %s\n", h.exit_status, out);
	else
		printf("%s %s\n", engine_fail_code(h.fail),
		    h.fail_msg != NULL ? h.fail_msg : "");
	engine_host_clear(&h);
	engine_free(e);
	event_base_free(base);
	password_free(pw);
	for (i = 0; i < h.nkeys; i++)
		ssh_key_free(h.keys[i]);
	instance_clear(&in);
	return 0;
}

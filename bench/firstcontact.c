/*
 * What first contact costs the loop in reading the user's ssh_config and
 * known_hosts (hostkey.c): N hosts declared in one ssh_config (as an
 * import of N instances makes it), each with its known_hosts line, looked
 * up once each; the config parsed once (as hostkey.c keeps it) and, for
 * comparison, parsed again per host. Usage: firstcontact DIR N...
 */

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "knownhosts.h"
#include "sshconfig.h"
#include "xmalloc.h"

#define KEY                                                                    \
	"AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl"

static double
now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* Look every host up; reparse: parse the config for each one. */
static double
run(const char *const *paths, int n, int reparse)
{
	struct sshconfig_set *set = NULL;
	struct knownhosts kh = { NULL, 0 };
	struct sshconfig sc;
	char alias[32], *name, *cause = NULL;
	double t0 = now_ms();
	size_t j;
	int i;

	for (i = 0; i < n; i++) {
		if (set == NULL &&
		    (set = sshconfig_load(paths, 2, "/", &cause)) == NULL) {
			fprintf(stderr, "%s\n", cause);
			exit(1);
		}
		snprintf(alias, sizeof alias, "inst-%d", i);
		sshconfig_lookup(set, alias, &sc);
		name = knownhosts_name("127.0.0.1", 20000 + i);
		for (j = 0; j < sc.hosts[0].nknown_hosts; j++)
			knownhosts_read(sc.hosts[0].known_hosts[j], name, &kh);
		if (kh.nkeys != 1) {
			fprintf(stderr, "%s: %zu keys\n", alias, kh.nkeys);
			exit(1);
		}
		knownhosts_free(&kh);
		free(name);
		sshconfig_free(&sc);
		if (reparse) {
			sshconfig_unload(set);
			set = NULL;
		}
	}
	sshconfig_unload(set);
	return (now_ms() - t0) / n;
}

/* Write an ssh_config and known_hosts of n hosts into dir and time them. */
static void
bench(const char *dir, int n)
{
	const char *paths[2];
	char *cfg, *kh;
	FILE *f, *g;
	int i;

	xasprintf(&cfg, "%s/ssh_config", dir);
	xasprintf(&kh, "%s/known_hosts", dir);
	if ((f = fopen(cfg, "w")) == NULL || (g = fopen(kh, "w")) == NULL) {
		perror(dir);
		exit(1);
	}
	for (i = 0; i < n; i++) {
		fprintf(f,
		    "Host inst-%d\n\tHostName 127.0.0.1\n\tPort %d\n\tUser "
		    "u\n\tIdentityFile ~/.ssh/id\n\tUserKnownHostsFile %s\n",
		    i, 20000 + i, kh);
		fprintf(g, "[127.0.0.1]:%d ssh-ed25519 " KEY "\n", 20000 + i);
	}
	fclose(f);
	fclose(g);
	paths[0] = cfg;
	paths[1] = "/nonexistent/ssh_config";
	printf("| %d | %.3f | %.3f |\n", n, run(paths, n, 0), run(paths, n, 1));
	free(cfg);
	free(kh);
}

int
main(int argc, char **argv)
{
	char *end;
	long n;
	int i;

	if (argc < 3) {
		fprintf(stderr, "usage: firstcontact DIR N...\n");
		return 2;
	}
	printf("| hosts | ms per first contact, config parsed once | "
	       "parsed per host |\n|---|---|---|\n");
	for (i = 2; i < argc; i++) {
		n = strtol(argv[i], &end, 10);
		if (*argv[i] == '\0' || *end != '\0' || n < 1 || n > 100000) {
			fprintf(stderr, "bad N '%s'\n", argv[i]);
			return 2;
		}
		bench(argv[1], (int)n);
	}
	return 0;
}

/*
 * Import instances from an OpenSSH client config (default ~/.ssh/config,
 * following Include): each concrete Host alias becomes an instance with the
 * HostName, Port, User and IdentityFile that `ssh -G ALIAS` shows. Several
 * aliases on one Host line that reach the same place are one instance,
 * named by the first. Hosts that are surely not GPU machines (code forges,
 * this machine) are left out unless --match names them. Running it again
 * changes nothing and says so.
 */

#include <arpa/inet.h>

#include <fnmatch.h>
#include <limits.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "cmd.h"
#include "log.h"
#include "sshconfig.h"
#include "status.h"
#include "xmalloc.h"

static int cmd_import_exec(
    const struct cmd_entry *, struct cmd_ctx *, int, char **);
static int to_instance(
    const struct sshconfig_host *, const char *, struct instance *, char **);
static char *differences(const struct instance *, const struct instance *);
static char *local_user(void);
static const char *well_known(const char *);
static int same_place(
    const struct sshconfig_host *, const struct sshconfig_host *);

/* One import: where to, with what, and the counts for the summary. */
struct import_run {
	struct inventory *inv;
	const char *path; /* the ssh_config, absolute */
	const char *provider;
	char **tags;
	size_t ntags;
	int dry;
	int added, same, differ, skipped;
	const struct sshconfig *sc; /* what is being imported */
	const char *match;	    /* --match, or NULL */
	const int *want;	    /* sc's hosts to import */
	const size_t *leader;	    /* the alias each is imported as */
};

static const char *proxy_jump(
    struct import_run *, const struct sshconfig_host *);

/*
 * The jump host of a "ProxyJump ALIAS" that gpufleet can take as the
 * instance's jump: ALIAS alone (no user, port or chain), in the inventory
 * or imported now, and not itself behind a proxy. NULL otherwise.
 */
static const char *
proxy_jump(struct import_run *run, const struct sshconfig_host *h)
{
	const char *alias;
	struct instance j;
	char *why = NULL;
	size_t i;
	int r;

	if (h->proxy == NULL || strncmp(h->proxy, "ProxyJump ", 10) != 0)
		return NULL;
	alias = h->proxy + 10;
	if (instance_check_name(alias, &why) != 0 ||
	    strcmp(alias, h->alias) == 0) {
		free(why);
		return NULL;
	}
	memset(&j, 0, sizeof j);
	if ((r = inventory_get(run->inv, alias, &j, &why)) == 0) {
		r = j.jump == NULL;
		instance_clear(&j);
		return r ? alias : NULL;
	}
	free(why);
	/*
	 * Imported now: only if this run imports it (not skipped as a
	 * well-known host, matched by --match), under the name of the alias
	 * leading its line when it reaches the same place.
	 */
	for (i = 0; i < run->sc->nhosts; i++) {
		const struct sshconfig_host *o = &run->sc->hosts[i];
		if (strcmp(o->alias, alias) != 0)
			continue;
		if (o->proxy != NULL || !run->want[i])
			return NULL;
		return run->sc->hosts[run->leader[i]].alias;
	}
	return NULL;
}

/*
 * The alias of a "ProxyJump ALIAS" that is a Host of the file, fit to be a
 * jump, but skipped by this import (well-known, loopback, --match). NULL
 * otherwise.
 */
static const char *
skipped_jump(struct import_run *run, const struct sshconfig_host *h)
{
	const char *alias;
	size_t i;

	if (h->proxy == NULL || strncmp(h->proxy, "ProxyJump ", 10) != 0)
		return NULL;
	alias = h->proxy + 10;
	for (i = 0; i < run->sc->nhosts; i++) {
		const struct sshconfig_host *o = &run->sc->hosts[i];
		if (strcmp(o->alias, alias) == 0)
			return !run->want[i] && o->proxy == NULL ? o->alias
								 : NULL;
	}
	return NULL;
}

static int import_host(
    struct import_run *, const struct sshconfig_host *, const char *, char **);

const struct cmd_entry cmd_import_entry = {
	.name = "import",
	.usage = "[SSH_CONFIG] [--match GLOB] [--dry-run] [--tag T]... "
		 "[--provider P]",
	.summary = "add instances from an OpenSSH client config",
	.help =
	    "Reads SSH_CONFIG (default ~/.ssh/config, following Include) "
	    "and adds each\nconcrete Host alias with the HostName, Port, "
	    "User and IdentityFile that\n`ssh -G ALIAS` shows (Host and "
	    "Match all/host/originalhost/user/localuser/\nfinal are "
	    "followed; Match exec is not run, its block is reported).\n"
	    "Aliases on one Host line that reach the same host, port and "
	    "user are one\ninstance named by the first. Wildcard patterns "
	    "are skipped and reported;\n`ProxyJump ALIAS`, ALIAS a Host "
	    "imported too (or in the inventory),\nbecomes the instance's "
	    "jump; other ProxyJump forms and ProxyCommand\nare imported "
	    "with a warning (not supported). Aliases already in the inventory "
	    "are left unchanged.\n"
	    "Without --match, github.com, gitlab.com, bitbucket.org, "
	    "localhost and\nloopback addresses (by alias or HostName) are "
	    "skipped and listed.\n\n"
	    "  -m, --match GLOB   only aliases matching GLOB, well-known "
	    "hosts included;\n"
	    "                     it is an error if none matches\n"
	    "  -n, --dry-run      show what would be added, change "
	    "nothing\n"
	    "  -t, --tag T        tag every imported instance; repeat for "
	    "more\n"
	    "      --provider P   set the provider of imported instances\n\n"
	    "Example: gpufleet import ~/.ssh/config --match 'a100-*' "
	    "--tag train\n",
	.exec = cmd_import_exec,
};

enum { OPT_PROVIDER = 256 };

static const struct option import_options[] = { { "match", required_argument,
						    NULL, 'm' },
	{ "dry-run", no_argument, NULL, 'n' },
	{ "tag", required_argument, NULL, 't' },
	{ "provider", required_argument, NULL, OPT_PROVIDER },
	{ "help", no_argument, NULL, 'h' }, { NULL, 0, NULL, 0 } };

/* The login name ssh would use when User is not set. Caller frees. */
static char *
local_user(void)
{
	struct passwd *pw = getpwuid(getuid());
	const char *u = getenv("USER");

	if (pw != NULL)
		return xstrdup(pw->pw_name);
	return xstrdup(u != NULL ? u : "root");
}

/*
 * Why a host is surely not a GPU machine: a code forge or this machine,
 * by name or address. NULL when it may be one.
 */
static const char *
well_known(const char *name)
{
	static const char *const forges[] = { "github.com", "ssh.github.com",
		"gitlab.com", "altssh.gitlab.com", "bitbucket.org",
		"altssh.bitbucket.org" };
	static const char *const locals[] = { "localhost",
		"localhost.localdomain", "ip6-localhost", "ip6-loopback" };
	unsigned char a[16];
	char buf[256];
	size_t i, len = strlen(name);

	if (len == 0 || len >= sizeof buf)
		return NULL;
	memcpy(buf, name, len + 1);
	if (buf[len - 1] == '.') /* a fully qualified name */
		buf[--len] = '\0';
	for (i = 0; i < sizeof forges / sizeof forges[0]; i++) {
		if (strcasecmp(buf, forges[i]) == 0)
			return "a code forge, not a GPU machine";
	}
	for (i = 0; i < sizeof locals / sizeof locals[0]; i++) {
		if (strcasecmp(buf, locals[i]) == 0)
			return "this machine";
	}
	if (len > 10 && strcasecmp(buf + len - 10, ".localhost") == 0)
		return "this machine";
	if (inet_pton(AF_INET, buf, a) == 1 && a[0] == 127)
		return "a loopback address";
	if (inet_pton(AF_INET6, buf, a) == 1) {
		static const unsigned char one[16] = { [15] = 1 };
		static const unsigned char v4[12] = {
			[10] = 0xff, [11] = 0xff
		};
		if (memcmp(a, one, 16) == 0 ||
		    (memcmp(a, v4, 12) == 0 && a[12] == 127))
			return "a loopback address";
	}
	return NULL;
}

/* Whether two aliases reach the same host, port, user, key and proxy. */
static int
same_place(const struct sshconfig_host *a, const struct sshconfig_host *b)
{
#define SAME(x, y)                                                             \
	((x) == NULL ? (y) == NULL : (y) != NULL && strcmp(x, y) == 0)
	return SAME(a->hostname != NULL ? a->hostname : a->alias,
		   b->hostname != NULL ? b->hostname : b->alias) &&
	    a->port == b->port && SAME(a->user, b->user) &&
	    SAME(a->identity, b->identity) && SAME(a->proxy, b->proxy);
#undef SAME
}

/* Fill an instance from one host of the config; fails on invalid values. */
static int
to_instance(const struct sshconfig_host *h, const char *source,
    struct instance *in, char **cause)
{
	char *why = NULL, *user = NULL;
	int r = -1;

	if (instance_set_field(in, "name", h->alias, &why) != 0 ||
	    instance_set_field(in, "host",
		h->hostname != NULL ? h->hostname : h->alias, &why) != 0)
		goto out;
	if (h->port != 0)
		in->port = h->port;
	user = h->user != NULL ? xstrdup(h->user) : local_user();
	if (instance_set_field(in, "user", user, &why) != 0)
		goto out;
	if (h->identity != NULL &&
	    instance_set_field(in, "identity", h->identity, &why) != 0)
		goto out;
	in->source = xstrdup(source);
	r = 0;
out:
	if (r != 0) {
		xasprintf(cause, "%s:%d: skipped Host %s: %s", h->file, h->line,
		    h->alias, why);
		free(why);
	}
	free(user);
	return r;
}

/* Describe how stored differs from wanted, or NULL if alike. Caller frees. */
static char *
differences(const struct instance *stored, const struct instance *wanted)
{
	char *s = NULL, *tmp;

#define DIFF(what, a, b, fmt)                                                  \
	do {                                                                   \
		xasprintf(&tmp, "%s%s" what " " fmt " -> " fmt,                \
		    s != NULL ? s : "", s != NULL ? ", " : "", a, b);          \
		free(s);                                                       \
		s = tmp;                                                       \
	} while (0)

	if (strcmp(stored->host, wanted->host) != 0)
		DIFF("host", stored->host, wanted->host, "%s");
	if (stored->port != wanted->port)
		DIFF("port", stored->port, wanted->port, "%d");
	if (strcmp(stored->user, wanted->user) != 0)
		DIFF("user", stored->user, wanted->user, "%s");
	if ((stored->identity == NULL) != (wanted->identity == NULL) ||
	    (stored->identity != NULL &&
		strcmp(stored->identity, wanted->identity) != 0))
		DIFF("identity", stored->identity ? stored->identity : "-",
		    wanted->identity ? wanted->identity : "-", "%s");
#undef DIFF
	return s;
}

/*
 * Import one Host block (or say why not, or that it differs from what the
 * inventory has). also is the other aliases of the same Host line that
 * reach the same place ("a, b"), or NULL. Returns 0, or a negative status
 * with *cause set when the database fails.
 */
static int
import_host(struct import_run *run, const struct sshconfig_host *h,
    const char *also, char **cause)
{
	struct instance in, old;
	const char *jump;
	char *diff, *target, *note;
	size_t j;
	int r;

	instance_init(&in);
	if (to_instance(h, run->path, &in, cause) != 0 ||
	    (run->provider != NULL &&
		instance_set_field(&in, "provider", run->provider, cause) !=
		    0)) {
		printf("skipped %s\n", *cause);
		free(*cause);
		*cause = NULL;
		run->skipped++;
		instance_clear(&in);
		return 0;
	}
	for (j = 0; j < run->ntags; j++)
		instance_add_tag(&in, run->tags[j]);
	if (also != NULL) {
		xasprintf(&note, "also %s in %s", also, h->file);
		if (instance_set_field(&in, "notes", note, cause) != 0) {
			free(*cause); /* too long to note: leave it out */
			*cause = NULL;
		}
		free(note);
	}
	if ((jump = proxy_jump(run, h)) != NULL)
		in.jump = xstrdup(jump);
	in.created_at = time(NULL);

	r = inventory_get(run->inv, in.name, &old, cause);
	if (r == -GF_EDB) {
		instance_clear(&in);
		return r;
	}
	free(*cause);
	*cause = NULL;
	if (r == 0) {
		if ((diff = differences(&old, &in)) != NULL) {
			printf("differs %s: already in the inventory with "
			       "other settings (%s); not changed\n",
			    in.name, diff);
			run->differ++;
		} else
			run->same++;
		free(diff);
		instance_clear(&old);
		instance_clear(&in);
		return 0;
	}
	if (h->proxy != NULL && in.jump == NULL &&
	    (jump = skipped_jump(run, h)) != NULL)
		warn_msg("%s uses ProxyJump %s, which this import skips; "
			 "connections to it will fail until %s is in the "
			 "inventory and `gpufleet set %s jump=%s`",
		    h->alias, jump, jump, h->alias, jump);
	else if (h->proxy != NULL && in.jump == NULL)
		warn_msg("%s uses %s, which gpufleet does not support yet; "
			 "connections to it will fail",
		    h->alias, h->proxy);
	if (!run->dry && (r = inventory_add(run->inv, &in, cause)) != 0) {
		instance_clear(&in);
		return r;
	}
	target = instance_target(&in);
	printf("%s %s: %s", run->dry ? "would add" : "added", in.name, target);
	if (in.jump != NULL)
		printf(" via jump %s", in.jump);
	if (also != NULL)
		printf(" (also %s)", also);
	printf("\n");
	free(target);
	run->added++;
	instance_clear(&in);
	return 0;
}

static int
cmd_import_exec(
    const struct cmd_entry *e, struct cmd_ctx *ctx, int argc, char **argv)
{
	struct sshconfig sc;
	struct import_run run;
	struct inventory *inv = NULL;
	const char *home = getenv("HOME"), *match = NULL, *provider = NULL;
	const struct sshconfig_host *h;
	const char *why;
	char *path = NULL, *cause = NULL, abs[PATH_MAX], *also, *tmp;
	char **tags = NULL;
	size_t i, j, ntags = 0, nmatched = 0, *leader = NULL;
	int ch, status, dry = 0, r, *want = NULL;

	memset(&sc, 0, sizeof sc);
	memset(&run, 0, sizeof run);
	while ((ch = cmd_getopt(
		    e, argc, argv, "m:nt:h", import_options, &status)) != -1) {
		switch (ch) {
		case -2:
			goto out;
		case 'm':
			match = optarg;
			break;
		case 'n':
			dry = 1;
			break;
		case 't':
			if (instance_check_tag(optarg, &cause) != 0) {
				status = cmd_fail(GF_EUSAGE, cause);
				goto out;
			}
			tags = xreallocarray(tags, ntags + 1, sizeof *tags);
			tags[ntags++] = optarg;
			break;
		case OPT_PROVIDER:
			provider = optarg;
			break;
		}
	}
	if (argc - optind > 1) {
		status = cmd_usage_error(e, "takes at most one SSH_CONFIG");
		goto out;
	}
	if (home == NULL || *home == '\0')
		home = "/";
	if (argc - optind == 1)
		path = xstrdup(argv[optind]);
	else
		xasprintf(&path, "%s/.ssh/config", home);
	if (realpath(path, abs) != NULL) {
		free(path);
		path = xstrdup(abs);
	}
	if (sshconfig_read(path, home, &sc, &cause) != 0) {
		status = cmd_fail(GF_ECONFIG, cause);
		goto out;
	}
	/* Which aliases to import, and which of them lead their line. */
	want = xcalloc(sc.nhosts + 1, sizeof *want);
	leader = xcalloc(sc.nhosts + 1, sizeof *leader);
	for (i = 0; i < sc.nhosts; i++) {
		h = &sc.hosts[i];
		want[i] = match == NULL || fnmatch(match, h->alias, 0) == 0;
		nmatched += want[i];
	}
	if (match != NULL && nmatched == 0) {
		status = cmd_usage_error(
		    e, "no Host alias in %s matches '%s'", path, match);
		goto out;
	}
	for (i = 0; i < sc.nnotes; i++)
		printf("skipped %s\n", sc.notes[i]);
	run.skipped = (int)sc.nnotes;
	for (i = 0; i < sc.nhosts; i++) {
		h = &sc.hosts[i];
		leader[i] = i;
		why = NULL;
		if (!want[i] || match != NULL)
			continue;
		if ((why = well_known(h->alias)) != NULL)
			printf("skipped %s: %s (name it with --match to "
			       "import it)\n",
			    h->alias, why);
		else if (h->hostname != NULL &&
		    (why = well_known(h->hostname)) != NULL)
			printf("skipped %s: HostName %s is %s (name it with "
			       "--match to import it)\n",
			    h->alias, h->hostname, why);
		if (why != NULL) {
			want[i] = 0;
			run.skipped++;
		}
	}
	for (i = 0; i < sc.nhosts; i++) {
		for (j = 0; j < i && want[i] && leader[i] == i; j++) {
			if (want[j] && leader[j] == j &&
			    sc.hosts[j].line == sc.hosts[i].line &&
			    strcmp(sc.hosts[j].file, sc.hosts[i].file) == 0 &&
			    same_place(&sc.hosts[j], &sc.hosts[i]))
				leader[i] = j;
		}
	}

	if ((status = cmd_open(ctx, &inv)) != 0)
		goto out;
	run.inv = inv;
	run.path = path;
	run.provider = provider;
	run.tags = tags;
	run.ntags = ntags;
	run.dry = dry;
	run.sc = &sc;
	run.match = match;
	run.want = want;
	run.leader = leader;
	if (!dry && (r = inventory_begin(inv, &cause)) != 0) {
		status = cmd_fail(-r, cause);
		goto out;
	}
	for (i = 0; i < sc.nhosts; i++) {
		if (!want[i] || leader[i] != i)
			continue;
		also = NULL;
		for (j = i + 1; j < sc.nhosts; j++) {
			if (!want[j] || leader[j] != i)
				continue;
			xasprintf(&tmp, "%s%s%s", also != NULL ? also : "",
			    also != NULL ? ", " : "", sc.hosts[j].alias);
			free(also);
			also = tmp;
		}
		r = import_host(&run, &sc.hosts[i], also, &cause);
		free(also);
		if (r != 0) {
			status = cmd_fail(-r, cause);
			goto out;
		}
	}
	if (!dry && (r = inventory_commit(inv, &cause)) != 0) {
		status = cmd_fail(-r, cause);
		goto out;
	}
	if (run.added == 0 && run.differ == 0)
		printf("nothing to import: %d host%s already in the "
		       "inventory, %d skipped\n",
		    run.same, run.same == 1 ? "" : "s", run.skipped);
	else
		printf("%s %d, unchanged %d, differing %d, skipped %d\n",
		    dry ? "would add" : "added", run.added, run.same,
		    run.differ, run.skipped);
	status = GF_OK;
out:
	inventory_close(inv);
	sshconfig_free(&sc);
	free(want);
	free(leader);
	free(tags);
	free(path);
	return status;
}

/*
 * Import instances from an OpenSSH client config (default ~/.ssh/config,
 * following Include): each concrete Host alias becomes an instance with the
 * HostName, Port, User and IdentityFile that `ssh ALIAS` would use. Running
 * it again changes nothing and says so.
 */

#include <fnmatch.h>
#include <limits.h>
#include <pwd.h>
#include <stdlib.h>
#include <string.h>
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
	for (i = 0; i < run->sc->nhosts; i++) {
		const struct sshconfig_host *o = &run->sc->hosts[i];
		if (strcmp(o->alias, alias) == 0)
			return o->proxy == NULL &&
				(run->match == NULL ||
				    fnmatch(run->match, alias, 0) == 0)
			    ? alias
			    : NULL;
	}
	return NULL;
}

static int import_host(
    struct import_run *, const struct sshconfig_host *, char **);

const struct cmd_entry cmd_import_entry = {
	.name = "import",
	.usage = "[SSH_CONFIG] [--match GLOB] [--dry-run] [--tag T]... "
		 "[--provider P]",
	.summary = "add instances from an OpenSSH client config",
	.help =
	    "Reads SSH_CONFIG (default ~/.ssh/config, following Include) "
	    "and adds each\nconcrete Host alias with its HostName, Port, "
	    "User and IdentityFile.\nWildcard patterns and Match blocks "
	    "are skipped and reported.\n`ProxyJump ALIAS`, ALIAS a Host "
	    "imported too (or in the inventory),\nbecomes the instance's "
	    "jump; other ProxyJump forms and ProxyCommand\nare imported "
	    "with a warning (not supported). Aliases already in the inventory "
	    "are left unchanged.\n\n"
	    "  -m, --match GLOB   only aliases matching GLOB\n"
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
 * inventory has). Returns 0, or a negative status with *cause set when the
 * database fails.
 */
static int
import_host(
    struct import_run *run, const struct sshconfig_host *h, char **cause)
{
	struct instance in, old;
	const char *jump;
	char *diff, *target;
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
	if (h->proxy != NULL && in.jump == NULL)
		warn_msg("%s uses %s, which gpufleet does not support yet; "
			 "connections to it will fail",
		    h->alias, h->proxy);
	if (!run->dry && (r = inventory_add(run->inv, &in, cause)) != 0) {
		instance_clear(&in);
		return r;
	}
	target = instance_target(&in);
	printf("%s %s: %s%s%s\n", run->dry ? "would add" : "added", in.name,
	    target, in.jump != NULL ? " via jump " : "",
	    in.jump != NULL ? in.jump : "");
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
	char *path = NULL, *cause = NULL, abs[PATH_MAX];
	char **tags = NULL;
	size_t i, ntags = 0;
	int ch, status, dry = 0, r;

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
	for (i = 0; i < sc.nnotes; i++)
		printf("skipped %s\n", sc.notes[i]);
	run.skipped = (int)sc.nnotes;

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
	if (!dry && (r = inventory_begin(inv, &cause)) != 0) {
		status = cmd_fail(-r, cause);
		goto out;
	}
	for (i = 0; i < sc.nhosts; i++) {
		if (match != NULL && fnmatch(match, sc.hosts[i].alias, 0) != 0)
			continue;
		if ((r = import_host(&run, &sc.hosts[i], &cause)) != 0) {
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
	free(tags);
	free(path);
	return status;
}

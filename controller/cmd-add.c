/*
 * Add one rented instance to the inventory, from [USER@]HOST[:PORT] or the
 * login line the platform prints ("ssh -p 38076 root@region-41..."). Every
 * value is validated before anything is written, so a bad one leaves the
 * inventory untouched. With --check the first contact happens at once:
 * the host key is pinned, the instance's key logs in and the agent
 * reports the machine; an instance that cannot be reached is not kept.
 */

#include <event2/event.h>

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cmd.h"
#include "install.h"
#include "hostkey.h"
#include "keys.h"
#include "ledger.h"
#include "inventory.h"
#include "log.h"
#include "loginline.h"
#include "preset.h"
#include "probe.h"
#include "remote.h"
#include "status.h"
#include "stopmethod.h"
#include "vis.h"
#include "xmalloc.h"

/* Where the instance is, from the target argument(s). */
struct target {
	char *user; /* or NULL */
	char *host;
	int port; /* 0: not given */
	char *identity;
	char *ignored; /* login line options skipped, or NULL */
	char *what;    /* how messages name it */
};

/* What the first contact found (see first_contact). */
struct contact {
	struct probe *p;
	struct remote *rm;
	int done;
	const char *state; /* probe state: "up", "unreachable", ... */
	char *fingerprint; /* the pinned host key, or NULL */
	char *key_type;
};

static int login_words(int, char **, int *, int *);
static int parse_target(char **, int, struct target *, char **);
static void target_clear(struct target *);
static int set_target(struct instance *, const struct target *, const char *,
    const char *, char **);
/* What --preset applies, and the options given by hand beside it. */
struct add_preset {
	struct preset *v;
	size_t n;
	const struct preset *p; /* or NULL: no --preset */
	const char *given[4];	/* fields given as options */
	size_t ngiven;
};

static int apply_preset(const char *, struct add_preset *, struct instance *,
    struct billing_rule *, struct stopmethod_fields *, char **);
static int set_identity(
    struct inventory *, struct instance *, const char *, int64_t *, char **);
static void on_contact(struct probe *, int, void *);
static int first_contact(
    struct cmd_ctx *, const char *, struct contact *, char **);
static void contact_clear(struct contact *);
static int contact_failed(const struct contact *);
static int forget(struct cmd_ctx *, const char *, char **);
static void print_contact(const struct contact *, const char *);
static int same(const char *, const char *);
static void half_added(struct inventory *, const struct instance *, char **);
static json_t *contact_json(const struct contact *);
static int cmd_add_exec(
    const struct cmd_entry *, struct cmd_ctx *, int, char **);

const struct cmd_entry cmd_add_entry = {
	.name = "add",
	.usage =
	    "NAME [USER@]HOST[:PORT] | 'ssh -p PORT USER@HOST' | "
	    "ssh://...\n"
	    "       [--check] [--port N] [--user U] [--identity KEY] "
	    "[--jump NAME]\n"
	    "       [--provider P] [--region R] [--tag T]... [--note TEXT] "
	    "[--json]\n"
	    "       [--since TIME] [--price P] [--billing U] [--currency C]\n"
	    "       [--preset NAME]\n"
	    "       [--password | --password-file FILE]",
	.summary = "add an instance to the inventory",
	.help =
	    "NAME is [A-Za-z0-9][A-Za-z0-9._-]{0,62}; IPv6 hosts are "
	    "written [ADDR]:PORT.\n"
	    "The target may be the login line a platform prints, quoted as "
	    "one argument\nor as separate words after NAME (gpufleet's options "
	    "then go before NAME\nor as --long options after it). From it "
	    "gpufleet reads -p, -l, -i,\n-o Port=, User=, HostName=, "
	    "IdentityFile= and ssh://USER@HOST:PORT; options\nthat do not "
	    "change where it connects (-v, -A, -X, -C, -t, -L, -o\n"
	    "StrictHostKeyChecking=...) are skipped with a note; -J and "
	    "others that do\nare refused.\n\n"
	    "  -p, --port N          SSH port (default 22)\n"
	    "  -u, --user U          login user (default from config, "
	    "else root)\n"
	    "  -i, --identity KEY    a managed key's name (gpufleet keys ls) "
	    "or a private\n"
	    "                        key file (default: the config's "
	    "identity); a name\n"
	    "                        without '/' is a managed key first, "
	    "./NAME is a file\n"
	    "  -J, --jump NAME       reach it through instance NAME "
	    "(ProxyJump)\n"
	    "      --check           make first contact now: pin the host "
	    "key, log in,\n"
	    "                        report GPUs and OS; an instance that "
	    "cannot be\n"
	    "                        reached is not added (exit 1)\n"
	    "      --password        first contact by password, typed "
	    "without echo: a key\n"
	    "                        of its own (gpufleet's, in keys ls) "
	    "goes into\n"
	    "                        authorized_keys, the host key is "
	    "pinned, a fresh\n"
	    "                        login with only that key is proven, "
	    "and the instance\n"
	    "                        uses it; on any failure it is not "
	    "added\n"
	    "      --password-file F the password is F's first line (- "
	    "for stdin)\n"
	    "      --provider P      rental platform (autodl, vast, ...)\n"
	    "      --region R        region or zone\n"
	    "  -t, --tag T           a tag; repeat for more\n"
	    "      --note TEXT       free text\n"
	    "      --since TIME      the rental began at TIME, before you "
	    "added it: the\n"
	    "                        books (first sighting, mark --at) may "
	    "go back to it\n"
	    "                        (else a container start before now is "
	    "clamped to now)\n"
	    "      --remote-dir DIR  where the agent lives (default "
	    "~/.cache/gpufleet)\n"
	    "      --authorized-keys-file PATH  (default "
	    "~/.ssh/authorized_keys)\n"
	    "      --price P         e.g. 2.69/h (more pricing fields: "
	    "gpufleet set)\n"
	    "      --billing U       second, minute or hour\n"
	    "      --currency C      ISO 4217, e.g. CNY (default), USD\n"
	    "      --preset NAME     apply a billing preset (gpufleet "
	    "preset ls): its price\n"
	    "                        rule, provider and stop method\n"
	    "      --json            print the added instance as JSON (with "
	    "--check, what\n"
	    "                        the first contact found under \"check\")"
	    "\n\n"
	    "Examples:\n"
	    "  gpufleet add a100-1 root@connect.example.com:32455 --provider "
	    "autodl\n"
	    "  gpufleet add --check a100-2 'ssh -p 38076 "
	    "root@region-41.seetacloud.com'\n"
	    "  gpufleet add h100-1 ssh -p 40123 root@ssh5.vast.ai --tag "
	    "train\n"
	    "  gpufleet add --password a100-3 'ssh -p 38077 "
	    "root@region-41.seetacloud.com'\n"
	    "  gpufleet add a100-4 root@connect.example.com:32456 --preset "
	    "autodl.a100-80g\n",
	.exec = cmd_add_exec,
};

enum {
	OPT_PROVIDER = 256,
	OPT_REGION,
	OPT_NOTE,
	OPT_SINCE,
	OPT_REMOTE_DIR,
	OPT_AUTHKEYS,
	OPT_JSON,
	OPT_PRICE,
	OPT_BILLING,
	OPT_CURRENCY,
	OPT_PASSWORD,
	OPT_PASSWORD_FILE,
	OPT_CHECK,
	OPT_PRESET
};

static const struct option add_options[] = { { "port", required_argument, NULL,
						 'p' },
	{ "user", required_argument, NULL, 'u' },
	{ "identity", required_argument, NULL, 'i' },
	{ "jump", required_argument, NULL, 'J' },
	{ "provider", required_argument, NULL, OPT_PROVIDER },
	{ "region", required_argument, NULL, OPT_REGION },
	{ "tag", required_argument, NULL, 't' },
	{ "note", required_argument, NULL, OPT_NOTE },
	{ "since", required_argument, NULL, OPT_SINCE },
	{ "remote-dir", required_argument, NULL, OPT_REMOTE_DIR },
	{ "authorized-keys-file", required_argument, NULL, OPT_AUTHKEYS },
	{ "json", no_argument, NULL, OPT_JSON },
	{ "price", required_argument, NULL, OPT_PRICE },
	{ "billing", required_argument, NULL, OPT_BILLING },
	{ "currency", required_argument, NULL, OPT_CURRENCY },
	{ "password", no_argument, NULL, OPT_PASSWORD },
	{ "password-file", required_argument, NULL, OPT_PASSWORD_FILE },
	{ "check", no_argument, NULL, OPT_CHECK },
	{ "preset", required_argument, NULL, OPT_PRESET },
	{ "help", no_argument, NULL, 'h' }, { NULL, 0, NULL, 0 } };

/*
 * Find a login line given as separate words: the second operand is the
 * word ssh, and the line runs to the next --option (ssh has none) or the
 * end. Operands are found as getopt_long would, skipping options and
 * their values. Sets [*start, *end) and returns 1, or returns 0.
 */
static int
login_words(int argc, char **argv, int *start, int *end)
{
	const struct option *o, *hit;
	const char *base;
	int i, j, operands = 0, nhits;
	size_t len;

	for (i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (strcmp(a, "--") == 0)
			return 0;
		if (strncmp(a, "--", 2) == 0) {
			len = strcspn(a + 2, "=");
			hit = NULL;
			nhits = 0;
			for (o = add_options; o->name != NULL; o++) {
				if (strncmp(o->name, a + 2, len) != 0)
					continue;
				if (strlen(o->name) == len) {
					hit = o;
					nhits = 1;
					break;
				}
				hit = o;
				nhits++;
			}
			if (nhits == 1 && a[2 + len] == '\0' &&
			    hit->has_arg == required_argument)
				i++;
			continue;
		}
		if (a[0] == '-' && a[1] != '\0') {
			for (j = 1; a[j] != '\0'; j++) {
				if (strchr("puiJt", a[j]) == NULL)
					continue;
				if (a[j + 1] == '\0')
					i++;
				break;
			}
			continue;
		}
		if (++operands != 2)
			continue;
		base = strrchr(a, '/');
		base = base != NULL ? base + 1 : a;
		if (strcmp(base, "ssh") != 0)
			return 0;
		*start = i;
		for (j = i + 1; j < argc; j++) {
			if (strncmp(argv[j], "--", 2) == 0 &&
			    argv[j][2] != '\0')
				break;
		}
		*end = j;
		return 1;
	}
	return 0;
}

/*
 * Read the target: n words of a login line, or one argument that is a
 * login line, ssh:// or [USER@]HOST[:PORT].
 */
static int
parse_target(char **words, int n, struct target *t, char **cause)
{
	struct loginline ll;
	int r;

	memset(t, 0, sizeof *t);
	if (n == 1 && !loginline_is_line(words[0])) {
		xasprintf(&t->what, "'%s'", words[0]);
		return instance_parse_hostspec(
		    words[0], &t->user, &t->host, &t->port, cause);
	}
	if (n == 1)
		r = loginline_parse(words[0], &ll, cause);
	else
		r = loginline_parse_words(words, n, &ll, cause);
	if (r != 0)
		return -1;
	t->user = ll.user;
	t->host = ll.host;
	t->port = ll.port;
	t->identity = ll.identity;
	t->ignored = ll.ignored;
	t->what = xstrdup("the login line");
	return 0;
}

static void
target_clear(struct target *t)
{
	free(t->user);
	free(t->host);
	free(t->identity);
	free(t->ignored);
	free(t->what);
	memset(t, 0, sizeof *t);
}

/*
 * Set host, port and user from the target and the --port and --user
 * options (either may be NULL); a value given both ways must agree.
 * Returns 0, or -1 with *cause set.
 */
static int
set_target(struct instance *in, const struct target *t, const char *port,
    const char *user, char **cause)
{
	int p;

	free(in->host);
	in->host = xstrdup(t->host);
	if (port != NULL) {
		if (instance_parse_port(port, &p, cause) != 0)
			return -1;
		if (t->port != 0 && t->port != p) {
			xasprintf(cause,
			    "port %d in %s conflicts with --port %d", t->port,
			    t->what, p);
			return -1;
		}
		in->port = p;
	} else if (t->port != 0)
		in->port = t->port;
	if (user != NULL && t->user != NULL && strcmp(user, t->user)) {
		xasprintf(cause, "user '%s' in %s conflicts with --user %s",
		    t->user, t->what, user);
		return -1;
	}
	if (user == NULL)
		user = t->user;
	if (user != NULL && instance_set_field(in, "user", user, cause) != 0)
		return -1;
	return 0;
}

/* Point in at the identity value names (keys_resolve_identity). */
static int
set_identity(struct inventory *inv, struct instance *in, const char *value,
    int64_t *key_id, char **cause)
{
	char *path;
	int r;

	if ((r = keys_resolve_identity(inv, value, &path, key_id, cause)) != 0)
		return r;
	free(in->identity);
	in->identity = path;
	return 0;
}

static void
on_contact(struct probe *p, int r, void *arg)
{
	struct contact *c = arg;

	(void)p;
	(void)r;
	c->done = 1;
}

/*
 * First contact with an instance just added: log in with its key, which
 * pins the host key under the config's policy as every run does, and run
 * the agent (uploading it), whose report is stored as status stores it.
 * Fills c (clear with contact_clear). A first contact by password, which
 * puts the key on the instance, belongs before this: this then proves
 * the key works. Returns 0 (the outcome, good or bad, in c) or a negative
 * status with *cause when the run could not start.
 */
static int
first_contact(
    struct cmd_ctx *ctx, const char *name, struct contact *c, char **cause)
{
	struct event_base *base;
	struct hostkey k;
	int r;

	memset(c, 0, sizeof *c);
	if ((r = probe_new(ctx->fleet->config, &c->p, cause)) != 0 ||
	    (r = remote_open(ctx->fleet, name, &c->rm, cause)) != 0)
		return r;
	probe_attach(c->p, c->rm);
	if ((r = probe_start(c->p, 0, on_contact, c, cause)) != 0)
		return r;
	base = c->rm->fleet->base;
	while (!c->done)
		event_base_loop(base, EVLOOP_ONCE);
	c->state = c->p->hosts[0].state;
	if (c->state == NULL)
		c->state = "error";
	if (hostkey_get(c->rm->inv, c->rm->list[0].id, &k, cause) == 0) {
		c->fingerprint = k.fingerprint;
		c->key_type = k.type;
		k.fingerprint = k.type = NULL;
		hostkey_clear(&k);
	}
	free(*cause);
	*cause = NULL;
	if (strcmp(c->state, "up") == 0 && (r = probe_store(c->p, cause)) != 0)
		return r;
	return 0;
}

static void
contact_clear(struct contact *c)
{
	probe_free(c->p);
	remote_close(c->rm);
	free(c->fingerprint);
	free(c->key_type);
	memset(c, 0, sizeof *c);
}

/*
 * Did the first contact fail to reach or log in to the instance (the
 * address, port, user, key or host key is wrong)? An agent error comes
 * after a login: the address is right.
 */
static int
contact_failed(const struct contact *c)
{
	return strcmp(c->state, "up") != 0 &&
	    strcmp(c->state, "agent error") != 0;
}

/* Take back an instance whose first contact failed, with its pinned key. */
static int
forget(struct cmd_ctx *ctx, const char *name, char **cause)
{
	struct inventory *inv;
	struct instance in;
	int r;

	if ((r = fleet_inventory(ctx->fleet, &inv, cause)) != 0)
		return r;
	memset(&in, 0, sizeof in);
	if ((r = inventory_begin(inv, cause)) != 0 ||
	    (r = inventory_get(inv, name, &in, cause)) != 0 ||
	    (r = inventory_purge(inv, in.id, cause)) != 0 ||
	    (r = inventory_commit(inv, cause)) != 0 ||
	    (r = hostkey_sync(inv, cause)) != 0) {
		instance_clear(&in);
		return r;
	}
	instance_clear(&in);
	return 0;
}

/* "2 x NVIDIA A100-SXM4-80GB (81920 MiB), ..." for the report. Caller frees. */
static char *
gpu_list(const struct report *rep)
{
	char *s = xstrdup(""), *t, *name;
	size_t i, j, same;

	for (i = 0; i < rep->ngpus; i += same) {
		const struct report_gpu *g = &rep->gpus[i];
		const char *n = g->name != NULL ? g->name : "?";
		for (same = 1; i + same < rep->ngpus; same++) {
			const char *m = rep->gpus[i + same].name;
			if (m == NULL || strcmp(m, n) != 0 ||
			    rep->gpus[i + same].mem_total_mib !=
				g->mem_total_mib)
				break;
		}
		name = vis_str(n);
		j = (size_t)g->mem_total_mib;
		if (g->mem_total_mib > 0)
			xasprintf(&t, "%s%s%zu x %s (%zu MiB)", s,
			    *s != '\0' ? ", " : "", same, name, j);
		else
			xasprintf(&t, "%s%s%zu x %s", s, *s != '\0' ? ", " : "",
			    same, name);
		free(name);
		free(s);
		s = t;
	}
	return s;
}

/* What the first contact found, on stdout (remote text escaped). */
static void
print_contact(const struct contact *c, const char *name)
{
	const struct probe_host *s = &c->p->hosts[0];
	const struct report *rep = &s->rep;
	char *a, *b, *g;

	if (c->fingerprint != NULL)
		printf("%s: host key %s %s (pinned)\n", name, c->key_type,
		    c->fingerprint);
	if (!s->have_report) {
		a = vis_str(s->error != NULL ? s->error : c->state);
		printf("%s: logged in, but the agent failed: %s\n", name, a);
		free(a);
		return;
	}
	a = vis_str(rep->hostname != NULL ? rep->hostname : "?");
	b = vis_str(rep->kernel != NULL ? rep->kernel : "?");
	printf("%s: logged in: %s, Linux %s, %d CPUs, %.1f GiB memory\n", name,
	    a, b, rep->cpus, (double)rep->mem_total_kib / (1024.0 * 1024.0));
	free(a);
	free(b);
	if (rep->ngpus > 0) {
		g = gpu_list(rep);
		a = vis_str(
		    rep->driver_version != NULL ? rep->driver_version : "?");
		b = vis_str(
		    rep->cuda_version != NULL ? rep->cuda_version : "?");
		printf("%s: GPUs: %s; driver %s, CUDA %s\n", name, g, a, b);
		free(g);
	} else {
		a = vis_str(rep->gpu_error != NULL ? rep->gpu_error
						   : "nvidia-smi lists none");
		b = NULL;
		printf("%s: no GPUs: %s\n", name, a);
	}
	free(a);
	free(b);
}

/* The "check" object of add --check --json. */
static json_t *
contact_json(const struct contact *c)
{
	const struct probe_host *s = &c->p->hosts[0];
	json_t *o = json_object(), *gpus, *g;
	size_t i;

	json_object_set_new(o, "state", json_string(c->state));
	json_object_set_new(
	    o, "error", s->error != NULL ? json_string(s->error) : json_null());
	json_object_set_new(o, "host_key_type",
	    c->key_type != NULL ? json_string(c->key_type) : json_null());
	json_object_set_new(o, "host_key_fingerprint",
	    c->fingerprint != NULL ? json_string(c->fingerprint) : json_null());
	if (!s->have_report)
		return o;
	json_object_set_new(o, "hostname",
	    json_string(s->rep.hostname != NULL ? s->rep.hostname : ""));
	json_object_set_new(o, "kernel",
	    json_string(s->rep.kernel != NULL ? s->rep.kernel : ""));
	json_object_set_new(o, "cpus", json_integer(s->rep.cpus));
	json_object_set_new(
	    o, "mem_total_kib", json_integer(s->rep.mem_total_kib));
	gpus = json_array();
	for (i = 0; i < s->rep.ngpus; i++) {
		g = json_object();
		json_object_set_new(g, "name",
		    json_string(s->rep.gpus[i].name != NULL
			    ? s->rep.gpus[i].name
			    : ""));
		json_object_set_new(g, "memory_total_mib",
		    json_real(s->rep.gpus[i].mem_total_mib));
		json_array_append_new(gpus, g);
	}
	json_object_set_new(o, "gpus", gpus);
	json_object_set_new(o, "gpu_error",
	    s->rep.gpu_error != NULL ? json_string(s->rep.gpu_error)
				     : json_null());
	json_object_set_new(o, "driver_version",
	    s->rep.driver_version != NULL ? json_string(s->rep.driver_version)
					  : json_null());
	json_object_set_new(o, "cuda_version",
	    s->rep.cuda_version != NULL ? json_string(s->rep.cuda_version)
					: json_null());
	return o;
}

/*
 * Apply preset name through the field parsers of `set`: the price rule to
 * rule, the stop method to sf, the provider to in. A field also given as
 * an option is refused.
 */
static int
apply_preset(const char *name, struct add_preset *ap, struct instance *in,
    struct billing_rule *rule, struct stopmethod_fields *sf, char **cause)
{
	char **a, *eq;
	size_t n, i, k;
	int known, r = 0;

	if (preset_load(NULL, &ap->v, &ap->n, cause) != 0 ||
	    (ap->p = preset_find(ap->v, ap->n, name, cause)) == NULL)
		return -1;
	a = preset_assignments(ap->p, &n);
	for (i = 0; i < n && r == 0; i++) {
		eq = strchr(a[i], '=');
		*eq = '\0';
		for (k = 0; k < ap->ngiven; k++) {
			if (strcmp(ap->given[k], a[i]) != 0)
				continue;
			xasprintf(cause,
			    "--%s is set by preset %s too: give one of them",
			    a[i], name);
			r = -1;
		}
		if (r == 0 &&
		    (r = stopmethod_field(sf, a[i], eq + 1, &known, cause)) ==
			0 &&
		    !known &&
		    (r = ledger_price_field(
			 rule, a[i], eq + 1, &known, cause)) == 0 &&
		    !known)
			r = instance_set_field(in, a[i], eq + 1, cause);
	}
	for (i = 0; i < n; i++)
		free(a[i]);
	free(a);
	return r;
}

static int
cmd_add_exec(
    const struct cmd_entry *e, struct cmd_ctx *ctx, int argc, char **argv)
{
	struct instance in;
	struct inventory *inv = NULL;
	struct target t;
	struct contact c;
	const char *port = NULL, *user = NULL, *field = NULL, *pwfile = NULL;
	const char *identity = NULL, *state;
	char *cause = NULL, **args, *msg, *keypath = NULL;
	struct install_first first;
	struct billing_rule rule;
	struct stopmethod_fields sf;
	struct add_preset ap;
	const char *preset = NULL;
	int ch, status, json = 0, check = 0, r, known, priced = 0, pw = 0;
	int start = 0, end = 0, nargs, nwords = 0, i;
	int64_t key_id = 0;
	json_t *o;

	memset(&first, 0, sizeof first);
	instance_init(&in);
	memset(&t, 0, sizeof t);
	memset(&c, 0, sizeof c);
	memset(&sf, 0, sizeof sf);
	memset(&ap, 0, sizeof ap);
	billing_rule_init(&rule, "CNY");
	free(in.user);
	in.user = xstrdup(ctx->fleet->config->user);

	/* A login line in words is kept away from getopt (its -p is ssh's). */
	args = xcalloc(argc + 1, sizeof *args);
	nargs = 0;
	if (login_words(argc, argv, &start, &end))
		nwords = end - start;
	for (i = 0; i < argc; i++) {
		if (nwords == 0 || i < start || i >= end)
			args[nargs++] = argv[i];
	}
	while ((ch = cmd_getopt(e, nargs, args, "p:u:i:J:t:h", add_options,
		    &status)) != -1) {
		field = NULL;
		switch (ch) {
		case -2:
			goto out;
		case 'p':
			port = optarg;
			break;
		case 'u':
			user = optarg;
			break;
		case 'i':
			if (instance_set_field(
				&in, "identity", optarg, &cause) != 0)
				goto usage_fail;
			identity = optarg;
			break;
		case 'J':
			field = "jump";
			break;
		case OPT_PROVIDER:
			field = "provider";
			ap.given[ap.ngiven++] = field;
			break;
		case OPT_REGION:
			field = "region";
			break;
		case OPT_NOTE:
			field = "notes";
			break;
		case OPT_SINCE:
			field = "since";
			break;
		case OPT_REMOTE_DIR:
			field = "remote_dir";
			break;
		case OPT_AUTHKEYS:
			field = "authorized_keys_file";
			break;
		case 't':
			if (instance_check_tag(optarg, &cause) != 0)
				goto usage_fail;
			instance_add_tag(&in, optarg);
			break;
		case OPT_JSON:
			json = 1;
			break;
		case OPT_PASSWORD_FILE:
			pwfile = optarg;
			/* FALLTHROUGH */
		case OPT_PASSWORD:
			pw = 1;
			break;
		case OPT_CHECK:
			check = 1;
			break;
		case OPT_PRICE:
		case OPT_BILLING:
		case OPT_CURRENCY:
			if (ledger_price_field(&rule,
				ch == OPT_PRICE		? "price"
				    : ch == OPT_BILLING ? "billing"
							: "currency",
				optarg, &known, &cause) != 0)
				goto usage_fail;
			priced = 1;
			ap.given[ap.ngiven++] = ch == OPT_PRICE ? "price"
			    : ch == OPT_BILLING			? "billing"
								: "currency";
			break;
		case OPT_PRESET:
			preset = optarg;
			break;
		}
		if (field != NULL &&
		    instance_set_field(&in, field, optarg, &cause) != 0)
			goto usage_fail;
	}
	if (nargs - optind != (nwords != 0 ? 1 : 2)) {
		status = cmd_usage_error(e,
		    nwords != 0 ? "needs NAME, then the login line"
				: "needs NAME and [USER@]HOST[:PORT] or the "
				  "login line");
		goto out;
	}
	if (instance_set_field(&in, "name", args[optind], &cause) != 0)
		goto usage_fail;
	if (preset != NULL) {
		if (apply_preset(preset, &ap, &in, &rule, &sf, &cause) != 0)
			goto usage_fail;
		priced = 1;
	}
	if ((nwords != 0 ? parse_target(argv + start, nwords, &t, &cause)
			 : parse_target(args + optind + 1, 1, &t, &cause)) != 0)
		goto usage_fail;
	if (set_target(&in, &t, port, user, &cause) != 0)
		goto usage_fail;
	if (t.identity != NULL) {
		if (identity != NULL && strcmp(identity, t.identity) != 0) {
			xasprintf(&cause,
			    "identity '%s' in %s conflicts with --identity %s",
			    t.identity, t.what, identity);
			goto usage_fail;
		}
		identity = t.identity;
		if (instance_set_field(&in, "identity", identity, &cause) != 0)
			goto usage_fail;
	}
	if (t.ignored != NULL)
		fprintf(stderr,
		    "note: skipped from the login line (they do not change "
		    "where gpufleet connects): %s\n",
		    t.ignored);
	in.created_at = time(NULL);
	if (pw &&
	    (r = install_first_prepare(
		 ctx->fleet, pwfile, &in, &first, &cause)) != 0) {
		status = cmd_fail(-r, cause);
		goto out;
	}

	if ((status = cmd_open(ctx, &inv)) != 0)
		goto out;
	if (identity != NULL &&
	    (r = set_identity(inv, &in, identity, &key_id, &cause)) != 0) {
		status = cmd_fail(-r, cause);
		goto out;
	}
	if ((r = inventory_begin(inv, &cause)) != 0 ||
	    (r = inventory_check_jump(inv, &in, &cause)) != 0 ||
	    (r = inventory_add(inv, &in, &cause)) != 0 ||
	    (key_id != 0 &&
		(r = keys_set_instance_key(inv, in.id,
		     &(struct keys_key){ .id = key_id, .path = in.identity },
		     &cause)) != 0) ||
	    (priced &&
		(r = ledger_price_put(inv, in.id, &rule, &cause)) != 0) ||
	    (sf.changed &&
		(r = inventory_stop_put(inv, in.id, &sf, &cause)) != 0) ||
	    (ap.p != NULL &&
		(r = preset_origin_put(
		     inv, in.id, ap.p, in.created_at, &cause)) != 0) ||
	    (r = inventory_commit(inv, &cause)) != 0) {
		if (pw && r == -GF_EUSAGE)
			half_added(inv, &in, &cause);
		status = cmd_fail(-r, cause);
		goto out;
	}
	inventory_close(inv);
	inv = NULL;

	if (pw) {
		/* First contact by password: nothing is left if it fails. */
		if ((r = install_added(
			 ctx->fleet, &in, &first, &keypath, &cause)) != 0) {
			xasprintf(
			    &msg, "add %s: %s; not added", in.name, cause);
			free(cause);
			cause = NULL;
			status = cmd_fail(-r, msg);
			goto out;
		}
		if (instance_set_field(&in, "identity", keypath, &cause) != 0) {
			free(cause);
			cause = NULL;
		}
	}
	if (check) {
		if ((r = first_contact(ctx, in.name, &c, &cause)) != 0 ||
		    contact_failed(&c)) {
			state = r != 0 ? "cannot make first contact" : c.state;
			if (r != 0)
				msg = cause;
			else
				msg = xstrdup(c.p->hosts[0].error != NULL
					? c.p->hosts[0].error
					: "no reason given");
			cause = NULL;
			status = r != 0 ? -r : GF_EHOSTS;
			contact_clear(&c);
			if ((r = forget(ctx, in.name, &cause)) != 0) {
				error("%s", cause);
				free(cause);
				cause = NULL;
			}
			error("%s not added: %s: %s", in.name, state, msg);
			free(msg);
			goto out;
		}
	}
	if (json) {
		o = instance_to_json(&in);
		if (check)
			json_object_set_new(o, "check", contact_json(&c));
		json_print(o, stdout);
	} else {
		char *target = instance_target(&in);
		printf("added %s: %s\n", in.name, target);
		if (keypath != NULL)
			printf("installed key %s on %s: it logs in with it\n",
			    keypath, in.name);
		free(target);
		if (check)
			print_contact(&c, in.name);
		else if (!pw) {
			fflush(stdout); /* after the line it is about */
			fprintf(stderr,
			    "hint: `gpufleet status %s` makes first contact "
			    "now (pins the host key, shows the GPUs); add "
			    "--check does it while adding\n",
			    in.name);
		}
	}
	status = GF_OK;
	if (check && !c.p->hosts[0].have_report)
		status = GF_EHOSTS;
	goto out;

usage_fail:
	status = cmd_fail(GF_EUSAGE, cause);
out:
	install_first_free(&first);
	free(keypath);
	contact_clear(&c);
	inventory_close(inv);
	instance_clear(&in);
	target_clear(&t);
	stopmethod_fields_clear(&sf);
	preset_free(ap.v, ap.n);
	free(args);
	return status;
}

/* Do two optional strings say the same? */
static int
same(const char *a, const char *b)
{
	return a == NULL ? b == NULL : b != NULL && strcmp(a, b) == 0;
}

/*
 * The name in is taken: when by an instance at the same address with no
 * key of gpufleet's, an `add --password` killed before its key was
 * installed (its row is committed first); *cause (replaced) says how to
 * finish that one.
 */
static void
half_added(struct inventory *inv, const struct instance *in, char **cause)
{
	struct instance old;
	int64_t kid;
	char *c = NULL, *t;

	memset(&old, 0, sizeof old);
	if (inventory_get(inv, in->name, &old, &c) == 0 &&
	    same(old.host, in->host) && old.port == in->port &&
	    same(old.user, in->user) && old.identity == NULL &&
	    keys_instance_key(inv, old.id, &kid, &c) == 1) {
		xasprintf(&t,
		    "%s, at that address and with no key of gpufleet's (an "
		    "`add --password` that did not finish?): `gpufleet keys "
		    "install %s --password-file FILE` gives it its key",
		    *cause, in->name);
		free(*cause);
		*cause = t;
	}
	free(c);
	instance_clear(&old);
}

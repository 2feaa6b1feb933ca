/* Preparing a run of the engine over selected instances. */

#include <sys/types.h>

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "hostkey.h"
#include "keys.h"
#include "log.h"
#include "remote.h"
#include "sshconfig.h"
#include "status.h"
#include "xmalloc.h"

static void follow_ssh_config(struct remote *);
static int add_jumps(struct remote *, char **);
static ssize_t jump_index(struct remote *, const struct engine_host *);
static int check_hostkey(struct engine_host *, const char *, const char *,
    const char *, enum engine_fail *, char **, void *);
static const char *pinned_type(struct engine_host *, void *);

/*
 * Instances imported from an ssh_config take its current HostName, Port,
 * User and IdentityFile, so gpufleet and `ssh ALIAS` agree. Where proxy is
 * not NULL, proxy[i] is set for an instance behind ProxyJump/ProxyCommand
 * to "WHAT (from FILE)" (caller frees).
 */
void
remote_follow_ssh_config(struct instance *list, size_t n, char **proxy)
{
	const char *home = getenv("HOME");
	struct sshconfig sc;
	char *cause = NULL;
	size_t i, j, k;

	for (i = 0; i < n; i++) {
		const char *src = list[i].source;
		int seen = 0;
		if (src == NULL)
			continue;
		for (j = 0; j < i && !seen; j++)
			seen = list[j].source != NULL &&
			    strcmp(list[j].source, src) == 0;
		if (seen)
			continue;
		memset(&sc, 0, sizeof sc);
		if (sshconfig_read(
			src, home != NULL ? home : "/", &sc, &cause) != 0) {
			debug_f("%s: %s (using stored values)", src, cause);
			free(cause);
			cause = NULL;
			continue;
		}
		for (j = i; j < n; j++) {
			struct instance *in = &list[j];
			if (in->source == NULL || strcmp(in->source, src) != 0)
				continue;
			for (k = 0; k < sc.nhosts; k++) {
				const struct sshconfig_host *h = &sc.hosts[k];
				if (strcmp(h->alias, in->name) != 0)
					continue;
				if (h->hostname != NULL &&
				    instance_check_host(h->hostname, &cause) ==
					0) {
					free(in->host);
					in->host = xstrdup(h->hostname);
				}
				free(cause);
				cause = NULL;
				if (h->port != 0)
					in->port = h->port;
				if (h->user != NULL &&
				    instance_check_user(h->user, &cause) == 0) {
					free(in->user);
					in->user = xstrdup(h->user);
				}
				free(cause);
				cause = NULL;
				if (h->identity != NULL) {
					free(in->identity);
					in->identity = xstrdup(h->identity);
				}
				/* A ProxyJump import made into a jump. */
				if (h->proxy != NULL && in->jump != NULL &&
				    strncmp(h->proxy, "ProxyJump ", 10) == 0 &&
				    strcmp(h->proxy + 10, in->jump) == 0)
					;
				else if (h->proxy != NULL && proxy != NULL) {
					free(proxy[j]);
					xasprintf(&proxy[j], "%s (from %s)",
					    h->proxy, src);
				}
				break;
			}
		}
		sshconfig_free(&sc);
	}
}

/* Follow the ssh_configs; a host behind a proxy fails with the reason. */
static void
follow_ssh_config(struct remote *rm)
{
	char **proxy = xcalloc(rm->n + 1, sizeof *proxy);
	size_t i;

	remote_follow_ssh_config(rm->list, rm->n, proxy);
	for (i = 0; i < rm->n; i++) {
		if (proxy[i] == NULL)
			continue;
		rm->hosts[i].fail = EF_UNSUPPORTED;
		xasprintf(&rm->hosts[i].fail_msg, "%s is not supported yet",
		    proxy[i]);
		free(proxy[i]);
	}
	free(proxy);
}

/* Open the inventory and prepare hosts for the instances selected. */
int
remote_open(struct fleet *fleet, const char *selector, struct remote **rmp,
    char **cause)
{
	struct remote *rm = xcalloc(1, sizeof *rm);
	struct hostkey k;
	size_t i;
	int r;

	*rmp = NULL;
	rm->fleet = fleet;
	keyring_init(&rm->keyring);
	if ((r = fleet_inventory(fleet, &rm->inv, cause)) != 0 ||
	    (r = inventory_select(
		 rm->inv, selector, &rm->list, &rm->n, cause)) != 0) {
		remote_close(rm);
		return r;
	}
	rm->hosts = xcalloc(rm->n, sizeof *rm->hosts);
	rm->pinned_type = xcalloc(rm->n, sizeof *rm->pinned_type);
	for (i = 0; i < rm->n; i++) {
		rm->hosts[i].in = &rm->list[i];
		rm->hosts[i].user = rm;
		rm->hosts[i].exit_status = -1;
		if ((r = hostkey_get(rm->inv, rm->list[i].id, &k, cause)) < 0) {
			remote_close(rm);
			return r;
		}
		if (r == 0)
			rm->pinned_type[i] = xstrdup(k.type);
		hostkey_clear(&k);
	}
	follow_ssh_config(rm);
	rm->listed_type = xcalloc(rm->n, sizeof *rm->listed_type);
	for (i = 0; i < rm->n; i++) {
		/* Unpinned: ask first for the type known_hosts lists. */
		if (rm->pinned_type[i] == NULL)
			rm->listed_type[i] = hostkey_listed_type(&rm->list[i]);
	}
	for (i = 0; i < rm->n; i++) {
		/* A key gpufleet rotated in wins over an ssh_config's. */
		if ((r = keys_apply_current(rm->inv, &rm->list[i], cause)) <
		    0) {
			remote_close(rm);
			return r;
		}
		keyring_for_host(&rm->keyring, fleet->config, &rm->hosts[i]);
	}
	if ((r = add_jumps(rm, cause)) != 0) {
		remote_close(rm);
		return r;
	}
	rm->ops.hostkey = check_hostkey;
	rm->ops.hostkey_type = pinned_type;
	*rmp = rm;
	return 0;
}

/*
 * Load the jump host of every selected instance that has one: once per
 * jump host, with its pinned key type and its keys. An instance whose jump
 * is missing or itself behind a jump fails without being tried.
 */
static int
add_jumps(struct remote *rm, char **cause)
{
	struct fleet *fleet = rm->fleet;
	struct instance *in, j;
	struct engine_host *h;
	struct hostkey k;
	char *why = NULL;
	size_t i, m;
	int r;

	for (i = 0; i < rm->n; i++) {
		in = &rm->list[i];
		h = &rm->hosts[i];
		if (in->jump == NULL || h->fail != EF_NONE)
			continue;
		for (m = 0; m < rm->nj; m++) {
			if (strcmp(rm->jlist[m].name, in->jump) == 0)
				break;
		}
		if (m < rm->nj) {
			h->jump = &rm->jhosts[m];
			continue;
		}
		memset(&j, 0, sizeof j);
		if ((r = inventory_get(rm->inv, in->jump, &j, &why)) != 0) {
			if (r != -GF_EUSAGE) {
				*cause = why;
				return r;
			}
			free(why);
			h->fail = EF_RESOLVE;
			xasprintf(&h->fail_msg,
			    "jump host '%s' is not in the inventory", in->jump);
			continue;
		}
		if (j.jump != NULL || strcmp(j.name, in->name) == 0) {
			h->fail = EF_UNSUPPORTED;
			if (j.jump != NULL)
				xasprintf(&h->fail_msg,
				    "jump host %s is itself behind jump host "
				    "%s; only one hop is supported",
				    j.name, j.jump);
			else
				xasprintf(&h->fail_msg,
				    "%s is its own jump host", in->name);
			instance_clear(&j);
			continue;
		}
		if (rm->jlist == NULL) {
			/* At most one per instance: pointers stay put. */
			rm->jlist = xcalloc(rm->n, sizeof *rm->jlist);
			rm->jhosts = xcalloc(rm->n, sizeof *rm->jhosts);
			rm->jpinned = xcalloc(rm->n, sizeof *rm->jpinned);
		}
		m = rm->nj++;
		rm->jlist[m] = j;
		rm->jhosts[m].in = &rm->jlist[m];
		rm->jhosts[m].user = rm;
		rm->jhosts[m].exit_status = -1;
		if ((r = hostkey_get(rm->inv, j.id, &k, cause)) < 0)
			return r;
		if (r == 0)
			rm->jpinned[m] = xstrdup(k.type);
		hostkey_clear(&k);
		if ((r = keys_apply_current(rm->inv, &rm->jlist[m], cause)) < 0)
			return r;
		keyring_for_host(&rm->keyring, fleet->config, &rm->jhosts[m]);
		h->jump = &rm->jhosts[m];
	}
	return 0;
}

/* Which jump host h is, or -1 if it is one of the selected hosts. */
static ssize_t
jump_index(struct remote *rm, const struct engine_host *h)
{
	uintptr_t p = (uintptr_t)h, base = (uintptr_t)rm->jhosts;

	if (rm->nj == 0 || p < base || p >= base + rm->nj * sizeof *rm->jhosts)
		return -1;
	return (ssize_t)((p - base) / sizeof *rm->jhosts);
}

static int
check_hostkey(struct engine_host *h, const char *type, const char *b64,
    const char *fp, enum engine_fail *fail, char **msg, void *arg)
{
	struct remote *rm = h->user;
	char *cause = NULL;

	(void)arg;
	if (rm->repin && jump_index(rm, h) == -1) {
		if (rm->expect_fp != NULL && strcmp(rm->expect_fp, fp) != 0) {
			*fail = EF_HOSTKEY_CHANGED;
			xasprintf(msg,
			    "presented %s %s, not the expected %s; "
			    "nothing pinned",
			    type, fp, rm->expect_fp);
			return -1;
		}
		if (hostkey_pin(rm->inv, h->in->id, type, b64, fp, "accepted",
			&cause) != 0 ||
		    hostkey_sync(rm->inv, &cause) != 0) {
			*fail = EF_SSH;
			*msg = cause;
			return -1;
		}
		return 0;
	}
	return hostkey_verify(rm->inv, rm->fleet->config->hostkey_policy, h->in,
	    type, b64, fp, fail, msg);
}

static const char *
pinned_type(struct engine_host *h, void *arg)
{
	struct remote *rm = h->user;

	ssize_t k = jump_index(rm, h);

	(void)arg;
	if (k != -1)
		return rm->jpinned[k];
	if (rm->pinned_type[h - rm->hosts] != NULL)
		return rm->pinned_type[h - rm->hosts];
	return rm->listed_type[h - rm->hosts];
}

/* The engine rm's runs use: the fleet's, on its loop; NULL on failure. */
struct engine *
remote_engine(struct remote *rm)
{
	return fleet_engine(rm->fleet);
}

/*
 * After a run: keys pinned on first contact rewrite the known_hosts file
 * that gpufleet ssh uses, once for the whole run.
 */
void
remote_run_done(struct remote *rm)
{
	char *cause = NULL;
	size_t i;
	int pinned = rm->repin;

	for (i = 0; i < rm->n; i++) {
		if (rm->pinned_type[i] == NULL && !rm->hosts[i].skip &&
		    rm->hosts[i].fail != EF_HOSTKEY_UNKNOWN)
			pinned = 1;
	}
	for (i = 0; i < rm->nj; i++) {
		if (rm->jpinned[i] == NULL && rm->jhosts[i].start_ms != 0)
			pinned = 1;
	}
	if (pinned && hostkey_sync(rm->inv, &cause) != 0) {
		warn_msg("%s", cause);
		free(cause);
	}
}

/* Run the engine over every prepared host. */
int
remote_run(struct remote *rm, const struct engine_settings *set)
{
	struct engine *e;
	int r;

	if ((e = remote_engine(rm)) == NULL)
		return -1;
	r = engine_run(e, rm->hosts, rm->n, set, &rm->ops);
	remote_run_done(rm);
	return r;
}

void
remote_close(struct remote *rm)
{
	size_t i;

	if (rm == NULL)
		return;
	for (i = 0; rm->hosts != NULL && i < rm->n; i++) {
		engine_forget(&rm->hosts[i]);
		engine_host_clear(&rm->hosts[i]);
	}
	for (i = 0; i < rm->nj; i++) {
		engine_forget(&rm->jhosts[i]);
		engine_host_clear(&rm->jhosts[i]);
		free(rm->jpinned[i]);
	}
	free(rm->jhosts);
	free(rm->jpinned);
	instance_free_array(rm->jlist, rm->nj);
	for (i = 0; rm->pinned_type != NULL && i < rm->n; i++)
		free(rm->pinned_type[i]);
	free(rm->pinned_type);
	for (i = 0; rm->listed_type != NULL && i < rm->n; i++)
		free(rm->listed_type[i]);
	free(rm->listed_type);
	free(rm->hosts);
	instance_free_array(rm->list, rm->n);
	keyring_free(&rm->keyring);
	free(rm);
}

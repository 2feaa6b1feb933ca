/*
 * Host keys pinned per instance in the inventory (rental platforms hand the
 * same IP:port to new machines, so pinning per address would be wrong).
 *
 * First contact reads the user's known_hosts files (those ssh -G names):
 * a key listed for HOST:PORT is pinned as "known_hosts"; a host listed
 * with other keys only, or with the key @revoked, is refused and nothing
 * is pinned. A host not listed is left to the policy
 * (config [ssh] host_key_policy):
 *   accept-new  a key seen for the first time is pinned; a different key
 *               later is refused;
 *   strict      only a pinned or a listed key is accepted.
 * There is no mode that skips the check.
 */
#ifndef GPUFLEET_HOSTKEY_H
#define GPUFLEET_HOSTKEY_H

#include <stdint.h>

#include "config.h"
#include "engine.h"
#include "inventory.h"

struct hostkey {
	char *type; /* "ssh-ed25519" */
	char *base64;
	char *fingerprint; /* "SHA256:..." */
	char *source;	   /* first-use, known_hosts, accepted */
	int64_t first_seen;
};

int hostkey_get(struct inventory *, int64_t, struct hostkey *, char **);
int hostkey_pin(struct inventory *, int64_t, const char *, const char *,
    const char *, const char *, char **);
int hostkey_forget(struct inventory *, int64_t, char **);
void hostkey_clear(struct hostkey *);
int hostkey_verify(struct inventory *, enum hostkey_policy,
    const struct instance *, const char *, const char *, const char *,
    enum engine_fail *, char **);
char *hostkey_listed_type(const struct instance *);
int hostkey_write_known_hosts(struct inventory *, const char *, char **);
char *hostkey_known_hosts_path(struct inventory *);
int hostkey_sync(struct inventory *, char **);

#endif

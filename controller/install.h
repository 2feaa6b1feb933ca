/*
 * First contact by password: give each instance of a struct remote a key
 * of its own that gpufleet manages, logging in with a password the way
 * rented machines are handed out (AutoDL, featurize: root and a password).
 * Nothing here prints: each host gets a struct install_host for the caller
 * to render.
 *
 * Per host, in this order: (1) a new managed key's files are made; (2)
 * logging in with the password (the host's keys are tried first), the host
 * key is checked (pinned on first contact, by the fleet's policy) and the
 * key is added to authorized_keys with the agent's byte-preserving,
 * atomic edit, as rotation step 2 does; (3) a fresh login with only the
 * new key runs true; (4) one transaction records the key and switches the
 * instance to it. Killed before (4), what is left is a key file with no
 * row, which `keys gc` removes (and, after (2), its line on the host,
 * which opens nothing once the file is gone).
 * A host that fails before (4) is left as it was: the key is taken off
 * again where it was added (by password) and deleted, and the error says
 * what, if anything, is left to do.
 */
#ifndef GPUFLEET_INSTALL_H
#define GPUFLEET_INSTALL_H

#include <stddef.h>
#include <time.h>

#include "deploy.h"
#include "remote.h"

struct install_opts {
	const char *type;	    /* the keys' type; NULL: ed25519 */
	const char *passphrase;	    /* keys.c's one copy, or NULL */
	const struct agent_bin *ab; /* edits authorized_keys */
	/* One per host of the remote, borrowed (one pointer may repeat). */
	char *const *passwords;
	time_t now;
};

struct install_host {
	const char *name;  /* the instance's, borrowed from the remote */
	int failed;	   /* with error */
	char *key;	   /* the new key's name, or NULL */
	char *fingerprint; /* the new key's, or NULL */
	char *path;	   /* its private key file, or NULL */
	char *error;	   /* why it failed (never the password), or NULL */
};

struct install_result {
	struct install_host *hosts; /* one per host of the remote, its order */
	size_t n;
};

int install_keys(struct remote *, const struct install_opts *,
    struct install_result *, char **);
void install_result_free(struct install_result *);
/* What `add --password` needs, read before the inventory is touched. */
struct install_first {
	char *password; /* password.c's, or NULL: no --password */
	struct agent_bin ab;
	struct install_opts opts;
};

int install_first_prepare(struct fleet *, const char *, const struct instance *,
    struct install_first *, char **);
int install_added(struct fleet *, const struct instance *,
    struct install_first *, char **, char **);
void install_first_free(struct install_first *);

#endif

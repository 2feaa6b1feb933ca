/* Loading private keys once per run, with at most one passphrase prompt. */

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "keyring.h"
#include "keys.h"
#include "log.h"
#include "misc.h"
#include "xmalloc.h"

static char *read_passphrase(const char *);
static int no_prompt(const char *, char *, size_t, int, int, void *);

void
keyring_init(struct keyring *kr)
{
	memset(kr, 0, sizeof *kr);
}

void
keyring_free(struct keyring *kr)
{
	size_t i;

	for (i = 0; i < kr->n; i++) {
		free(kr->items[i].path);
		ssh_key_free(kr->items[i].key);
		free(kr->items[i].error);
	}
	free(kr->items);
	if (kr->passphrase != NULL) {
		explicit_bzero(kr->passphrase, strlen(kr->passphrase));
		free(kr->passphrase);
		misc_secret_release();
	}
	if (kr->keys_passphrase != NULL)
		keys_passphrase_clear();
	memset(kr, 0, sizeof *kr);
}

/* libssh must never prompt on its own from inside the loop. */
static int
no_prompt(
    const char *prompt, char *buf, size_t len, int echo, int verify, void *arg)
{
	(void)prompt;
	(void)buf;
	(void)len;
	(void)echo;
	(void)verify;
	(void)arg;
	return -1;
}

/*
 * The passphrase from GPUFLEET_PASSPHRASE_FILE (its first line), else asked
 * on the terminal without echo; NULL if neither. Holds a secret (no core
 * dumps) until keyring_free. Caller frees.
 */
static char *
read_passphrase(const char *path)
{
	const char *file = getenv("GPUFLEET_PASSPHRASE_FILE");
	char *prompt, *cause = NULL, *s;

	misc_secret_hold();
	if (file != NULL && *file != '\0') {
		if ((s = misc_read_secret(file, NULL, &cause)) == NULL) {
			error("GPUFLEET_PASSPHRASE_FILE: %s", cause);
			free(cause);
			misc_secret_release();
		}
		return s;
	}
	xasprintf(&prompt, "Passphrase for %s: ", path);
	s = misc_read_secret(NULL, prompt, &cause);
	free(prompt);
	free(cause);
	if (s != NULL && *s == '\0') {
		free(s);
		s = NULL;
	}
	if (s == NULL)
		misc_secret_release();
	return s;
}

/*
 * The key at path, loaded on first use and cached. On failure returns NULL
 * with *error set (owned by the keyring).
 */
ssh_key
keyring_load(struct keyring *kr, const char *path, const char **error)
{
	struct keyring_item *it;
	ssh_key key = NULL;
	char *full = misc_expand_home(path);
	size_t i;
	int rc;

	for (i = 0; i < kr->n; i++) {
		if (strcmp(kr->items[i].path, full) == 0) {
			free(full);
			*error = kr->items[i].error;
			return kr->items[i].key;
		}
	}
	kr->items = xreallocarray(kr->items, kr->n + 1, sizeof *kr->items);
	it = &kr->items[kr->n++];
	memset(it, 0, sizeof *it);
	it->path = full;

	if (access(full, R_OK) != 0) {
		xasprintf(&it->error, "cannot read identity %s: %s", full,
		    strerror(errno));
		*error = it->error;
		return NULL;
	}
	rc = ssh_pki_import_privkey_file(
	    full, kr->passphrase, no_prompt, NULL, &key);
	if (rc != SSH_OK && !kr->asked) {
		/* Probably encrypted: get the passphrase once for the run. */
		kr->asked = 1;
		kr->passphrase = read_passphrase(full);
		if (kr->passphrase != NULL)
			rc = ssh_pki_import_privkey_file(
			    full, kr->passphrase, no_prompt, NULL, &key);
	}
	if (rc != SSH_OK && !kr->keys_asked) {
		/* Keys gpufleet made use the [keys] passphrase. */
		char *why = NULL;
		kr->keys_asked = 1;
		kr->keys_passphrase = keys_passphrase(kr->config, &why);
		free(why);
	}
	if (rc != SSH_OK && kr->keys_passphrase != NULL)
		rc = ssh_pki_import_privkey_file(
		    full, kr->keys_passphrase, no_prompt, NULL, &key);
	if (rc != SSH_OK) {
		xasprintf(&it->error,
		    "cannot load identity %s (not a private "
		    "key, or encrypted and no passphrase given: set "
		    "GPUFLEET_PASSPHRASE_FILE or run on a terminal)",
		    full);
		*error = it->error;
		return NULL;
	}
	it->key = key;
	*error = NULL;
	return key;
}

/*
 * Fill a host's keys, in the order they are tried: its own identity, the
 * keys of ssh-agent (a NULL entry; only if SSH_AUTH_SOCK is set), then the
 * config's default identity or, when neither identity is set, the usual
 * ~/.ssh/id_* files that exist.
 */
void
keyring_for_host(
    struct keyring *kr, const struct config *config, struct engine_host *h)
{
	static const char *const defaults[] = { "~/.ssh/id_ed25519",
		"~/.ssh/id_ecdsa", "~/.ssh/id_rsa", NULL };
	const char *paths[ENGINE_MAX_KEYS], *err = NULL;
	const char *sock = getenv("SSH_AUTH_SOCK");
	const char *const *d;
	char *full;
	ssh_key k;
	int n = 0, i, j, agent_at = -1;

	if (h->in->identity != NULL)
		paths[n++] = h->in->identity;
	if (sock != NULL && *sock != '\0')
		agent_at = n;
	if (config->identity != NULL)
		paths[n++] = config->identity;
	if (h->in->identity == NULL && config->identity == NULL) {
		for (d = defaults; *d != NULL && n < ENGINE_MAX_KEYS - 1; d++) {
			full = misc_expand_home(*d);
			if (access(full, F_OK) == 0)
				paths[n++] = *d;
			free(full);
		}
	}
	h->nkeys = 0;
	h->keys_error = NULL;
	kr->config = config;
	for (i = 0; i <= n; i++) {
		if (i == agent_at)
			h->keys[h->nkeys++] = NULL;
		if (i == n)
			break;
		if ((k = keyring_load(kr, paths[i], &err)) == NULL) {
			if (h->keys_error == NULL)
				h->keys_error = err;
			continue;
		}
		for (j = 0; j < h->nkeys; j++) {
			if (h->keys[j] == k)
				break;
		}
		if (j == h->nkeys)
			h->keys[h->nkeys++] = k;
	}
	if (h->nkeys == 0 && h->keys_error == NULL)
		h->keys_error = "no identity: set one with --identity, in the "
				"config, or create ~/.ssh/id_ed25519 (or run "
				"ssh-agent)";
}

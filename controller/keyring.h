/*
 * Private keys loaded once per run and shared by every session: no file
 * I/O or bcrypt per host, and a passphrase is asked (or read from
 * GPUFLEET_PASSPHRASE_FILE) at most once.
 */
#ifndef GPUFLEET_KEYRING_H
#define GPUFLEET_KEYRING_H

#include <libssh/libssh.h>

#include "config.h"
#include "engine.h"
#include "instance.h"

struct keyring_item {
	char *path;
	ssh_key key; /* NULL if it could not be loaded */
	char *error;
};

struct keyring {
	struct keyring_item *items;
	size_t n;
	char *passphrase;
	int asked;
	const struct config *config; /* of keyring_for_host, for [keys] */
	const char *keys_passphrase; /* keys.c's [keys] passphrase, or NULL */
	int keys_asked;
};

void keyring_init(struct keyring *);
void keyring_free(struct keyring *);
ssh_key keyring_load(struct keyring *, const char *, const char **);
void keyring_for_host(
    struct keyring *, const struct config *, struct engine_host *);

#endif

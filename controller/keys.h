/*
 * SSH keys that gpufleet manages: generated here, stored under
 * $XDG_DATA_HOME/gpufleet/keys/ (directory 0700, private keys 0600 created
 * with O_EXCL), recorded in the inventory with the instances that use them,
 * and the durable state of key rotations.
 *
 * Functions return 0 or a negative status (-GF_EUSAGE, -GF_EDB) with *cause
 * set (caller frees).
 */
#ifndef GPUFLEET_KEYS_H
#define GPUFLEET_KEYS_H

#include <libssh/libssh.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "config.h"
#include "deploy.h"
#include "inventory.h"

/* The steps of a rotation, recorded per host once done. */
enum keys_step {
	KEYS_STEP_NONE,
	KEYS_STEP_INTENT,   /* 1: intent recorded, new key generated */
	KEYS_STEP_ADDED,    /* 2: new key in authorized_keys */
	KEYS_STEP_VERIFIED, /* 3: a fresh login with only the new key worked */
	KEYS_STEP_SWITCHED, /* 4: the inventory uses the new key */
	KEYS_STEP_REMOVED,  /* 5: old key removed from authorized_keys */
	KEYS_STEP_REFUSED,  /* 6: a login with only the old key is refused */
	KEYS_STEP_RETIRED,  /* 7: old private key retired; rotation done */
};

struct keys_key {
	int64_t id;
	char *name;
	char *type;	   /* "ssh-ed25519" */
	char *path;	   /* private key file */
	char *pubkey;	   /* "TYPE BASE64 gpufleet:NAME:DATE" */
	char *blob;	   /* BASE64 */
	char *fingerprint; /* "SHA256:..." */
	int64_t created_at;
	int64_t deleted_at; /* private key deleted, or 0 */
};

struct keys_rotation {
	int64_t instance_id;
	int64_t old_key_id; /* 0: the old key is not managed by gpufleet */
	char *old_path;
	char *old_blob;
	char *old_type;
	int64_t new_key_id;
	int step;
	char *state; /* "running", "failed", "reverted", "done" */
	char *error; /* or NULL */
	int keep_old;
};

/* A key file nothing will use (see keys_orphans). */
struct keys_orphan {
	char *name;
	char *path;	/* private key; PATH.pub beside it */
	int64_t key_id; /* its managed_key row, or 0 if it has none */
	const char *why;
	time_t mtime;
};

void keys_key_clear(struct keys_key *);
void keys_free_array(struct keys_key *, size_t);
void keys_rotation_clear(struct keys_rotation *);
char *keys_dir(void);
int keys_make_dir(const char *, char **);
int keys_write_private(const char *, const char *, size_t, char **);
int keys_check_name(const char *, char **);
char *keys_comment(const char *, time_t);
int keys_parse_type(const char *, enum ssh_keytypes_e *, int *, char **);
const char *keys_passphrase(const struct config *, char **);
void keys_passphrase_clear(void);
int keys_generate(const char *, const char *, const char *, const char *,
    time_t, struct keys_key *, ssh_key *, char **);
int keys_describe(ssh_key, char **, char **, char **, char **);
int keys_load(const char *, const char *, ssh_key *, char **);
int keys_valid_blob(const char *);
char *keys_authkeys_command(const struct instance *, const struct agent_bin *,
    const char *, const char *, const char *, int);
char *keys_cat_script(const char *);
int keys_is_managed_blob(struct inventory *, const char *, char **);
int keys_has_retired(struct inventory *, int64_t);
int keys_parse_line(const char *, char **, const char **, const char **,
    const char **, const char **);
int keys_text_has_blob(const char *, size_t, const char *);

int keys_add(struct inventory *, struct keys_key *, char **);
int keys_get(struct inventory *, int64_t, struct keys_key *, char **);
int keys_get_by_name(
    struct inventory *, const char *, struct keys_key *, char **);
int keys_list(struct inventory *, struct keys_key **, size_t *, char **);
int keys_instance_key(struct inventory *, int64_t, int64_t *, char **);
char *keys_instances_using(struct inventory *, int64_t);
int keys_in_use(struct inventory *, int64_t, char **);
int keys_set_instance_key(
    struct inventory *, int64_t, const struct keys_key *, char **);
int keys_clear_instance_key(struct inventory *, int64_t, char **);
int keys_resolve_identity(
    struct inventory *, const char *, char **, int64_t *, char **);
int keys_mark_deleted(struct inventory *, int64_t, time_t, char **);
int keys_rotation_get(
    struct inventory *, int64_t, struct keys_rotation *, char **);
int keys_rotation_put(
    struct inventory *, const struct keys_rotation *, char **);
int keys_retire_blob(struct inventory *, int64_t, const char *, const char *,
    const char *, char **);
int keys_warn_reinjected(
    struct inventory *, const struct instance *, const char *, char **);
int keys_reinjected(
    struct inventory *, int64_t, const char *, char **, char **);
int keys_apply_current(struct inventory *, struct instance *, char **);
int keys_lock(struct inventory *, char **);
int keys_lock_holder(struct inventory *, int64_t *, char **);
void keys_unlock(struct inventory *);
int keys_sync_full(struct inventory *, char **);
int keys_orphans(
    struct inventory *, const char *, struct keys_orphan **, size_t *, char **);
void keys_orphans_free(struct keys_orphan *, size_t);
int keys_remove_orphan(struct inventory *, const struct keys_orphan *, char **);
int keys_drop_reverted(struct inventory *, const char *, int64_t, char **);
int keys_unique_name(struct inventory *, const char *, const char *, char **);
int keys_dated_name(
    struct inventory *, const char *, const char *, time_t, char **);

#endif

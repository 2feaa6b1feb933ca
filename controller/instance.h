/*
 * A rented instance as the inventory knows it, and the validation of every
 * field a user can set.
 */
#ifndef GPUFLEET_INSTANCE_H
#define GPUFLEET_INSTANCE_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#define INSTANCE_DEFAULT_PORT	    22
#define INSTANCE_DEFAULT_USER	    "root"
#define INSTANCE_DEFAULT_REMOTE_DIR "~/.cache/gpufleet"
#define INSTANCE_DEFAULT_AUTHKEYS   "~/.ssh/authorized_keys"
#define INSTANCE_SINCE_MAX	    (366 * 86400) /* since= back this far */

struct instance {
	int64_t id; /* 0 until stored */
	char *name;
	char *host;
	int port;
	char *user;
	char *provider; /* "" when unknown */
	char *region;	/* "" when unknown */
	char **tags;	/* sorted, unique */
	size_t ntags;
	char *identity; /* key file, or NULL for the config default */
	char *remote_dir;
	char *authorized_keys_file;
	char *notes;
	char *platform_id;   /* the platform's id of it, "" when not set */
	char *source;	     /* ssh_config it was imported from, or NULL */
	char *jump;	     /* the instance reached through, or NULL */
	int64_t created_at;  /* Unix seconds */
	int64_t released_at; /* 0 while in service */
	int64_t since;	     /* the rental began (add --since), else 0 */

	/* Read with it, never written from it: */
	char state[12];	     /* the ledger's last word, "" when it is empty */
	int64_t state_since; /* when it was said, 0 with "" */
	int64_t up_at; /* the last status pass, if the instance answered */
};

/* A stopped instance (its ledger says) that answered status since. */
#define INSTANCE_STILL_BILLING "marked stopped but reachable: still billing?"

void instance_init(struct instance *);
void instance_clear(struct instance *);
void instance_free_array(struct instance *, size_t);
int instance_check_name(const char *, char **);
int instance_check_host(const char *, char **);
int instance_check_user(const char *, char **);
int instance_check_tag(const char *, char **);
int instance_parse_port(const char *, int *, char **);
int instance_parse_hostspec(const char *, char **, char **, int *, char **);
int instance_check_jump(const struct instance *, const char *, char **);
int instance_set_field(struct instance *, const char *, const char *, char **);
const char *instance_field_names(void);
int instance_has_tag(const struct instance *, const char *);
const char *instance_state(const struct instance *);
int instance_still_billing(const struct instance *);
int instance_add_tag(struct instance *, const char *);
int instance_remove_tag(struct instance *, const char *);
json_t *instance_to_json(const struct instance *);
char *instance_format_time(int64_t);
char *instance_target(const struct instance *);
char *instance_local_path(const char *);

#endif

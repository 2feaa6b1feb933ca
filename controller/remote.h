/*
 * What every command that reaches instances shares: load the selected
 * instances (following the ssh_config they were imported from), their
 * keys (once), the pinned host key check, and a run of the engine.
 */
#ifndef GPUFLEET_REMOTE_H
#define GPUFLEET_REMOTE_H

#include "engine.h"
#include "fleet.h"
#include "keyring.h"

struct remote {
	struct fleet *fleet;
	struct inventory *inv; /* the fleet's */
	struct instance *list;
	size_t n;
	struct engine_host *hosts; /* n, parallel to list */
	char **pinned_type;	   /* n, or NULL entries */
	char **listed_type;	   /* n: unpinned, the type known_hosts lists */
	struct instance *jlist;	   /* the jump hosts they use, nj */
	struct engine_host *jhosts; /* nj, parallel to jlist */
	char **jpinned;		    /* nj, or NULL entries */
	size_t nj;
	struct keyring keyring;
	struct engine_ops ops; /* output/done/arg: caller's */
	int repin;	       /* hostkey accept: pin any key */
	const char *expect_fp; /* with repin: only this key */
};

int remote_open(struct fleet *, const char *, struct remote **, char **);
struct engine *remote_engine(struct remote *);
int remote_run(struct remote *, const struct engine_settings *);
void remote_run_done(struct remote *);
void remote_close(struct remote *);
void remote_follow_ssh_config(struct instance *, size_t, char **);

#endif

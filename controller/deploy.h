/*
 * Getting the agent onto an instance. The controller runs
 * REMOTE_DIR/gpufleet-agent-HASH in one round trip; only where it is
 * missing does a second command upload it through the exec channel (to a
 * temporary file in REMOTE_DIR, mode 0700, size checked, renamed into
 * place, so two controllers deploying at once cannot corrupt it) and run
 * it. HASH names the binary's content, so a new agent is a new file.
 */
#ifndef GPUFLEET_DEPLOY_H
#define GPUFLEET_DEPLOY_H

#include <stddef.h>

#include "instance.h"

#define DEPLOY_EXIT_MISSING 86 /* run command: no agent there yet */
#define DEPLOY_EXIT_WRITE   81 /* cannot create or write REMOTE_DIR */
#define DEPLOY_EXIT_SHORT   82 /* upload arrived truncated */
#define DEPLOY_EXIT_ARCH    83 /* not an x86_64 host */

struct agent_bin {
	char *path;
	char *data;
	size_t len;
	char hash[17];
};

int deploy_load(struct agent_bin *, char **);
void deploy_free(struct agent_bin *);
char *deploy_sh_command(const char *);
char *deploy_agent_command(
    const struct instance *, const struct agent_bin *, const char *, int);
char *deploy_run_command(
    const struct instance *, const struct agent_bin *, const char *);
char *deploy_serve_command(const struct instance *, const struct agent_bin *);
char *deploy_upload_command(
    const struct instance *, const struct agent_bin *, const char *);
char *deploy_explain(int, const char *, const struct instance *);

#endif

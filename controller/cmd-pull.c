/*
 * Copy files from every selected instance into LOCAL_DIR/NAME/ here: the
 * way results and checkpoints come home before an instance is released
 * (shares its options and output with push, cmd-push.c).
 */

#include "cmd.h"
#include "xfer.h"

static int cmd_pull_exec(
    const struct cmd_entry *, struct cmd_ctx *, int, char **);

const struct cmd_entry cmd_pull_entry = {
	.name = "pull",
	.usage = "SELECTOR [options] REMOTE_PATH... LOCAL_DIR",
	.summary = "copy files from the selected instances to LOCAL_DIR/NAME/",
	.help =
	    "Copies each REMOTE_PATH of every selected instance into "
	    "LOCAL_DIR/NAME/\n(NAME the instance's; made 0700 if missing) "
	    "with rsync over OpenSSH\n(gpufleet's pinned host keys and "
	    "current keys): only what changed is\nfetched, checksummed; "
	    "files, directories, symbolic links, permissions and\n"
	    "modification times are kept (rsync -rlpt). PATH/ (a trailing "
	    "slash) copies\nthe directory's content, PATH the directory "
	    "itself; a leading ~/ is the\nlogin directory. An interrupted "
	    "transfer keeps what arrived in\n" XFER_PARTIAL_DIR "/ and the "
	    "next run resumes from it; no file is half-written\nunder its "
	    "final name. An instance without rsync sends a tar stream over\n"
	    "ssh (said in the output), unpacked here under a temporary name "
	    "and renamed.\n\n"
	    "Options: -f/--fanout N (default 4), -n/--dry-run, --delete "
	    "(delete files in\nLOCAL_DIR/NAME/ the instance does not have; "
	    "never without it),\n-t/--timeout SECS (default 120), --json, as "
	    "for push (`gpufleet help push`).\n\n"
	    "Examples:\n"
	    "  gpufleet pull @train '~/ckpt/' ~/backups    # "
	    "~/backups/NAME/...\n"
	    "  gpufleet pull inst-1 --json '~/out/metrics.json' results\n",
	.exec = cmd_pull_exec,
};

static int
cmd_pull_exec(
    const struct cmd_entry *e, struct cmd_ctx *ctx, int argc, char **argv)
{
	return cmd_xfer_exec(e, ctx, argc, argv, 1);
}

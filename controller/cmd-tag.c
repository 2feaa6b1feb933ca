/* Add and remove tags: `gpufleet tag NAME +train -old`. */

#include <stdlib.h>
#include <string.h>

#include "cmd.h"
#include "status.h"
#include "xmalloc.h"

static int cmd_tag_exec(
    const struct cmd_entry *, struct cmd_ctx *, int, char **);

const struct cmd_entry cmd_tag_entry = {
	.name = "tag",
	.usage = "NAME +TAG|-TAG...",
	.summary = "add (+TAG) or remove (-TAG) tags of an instance",
	.help = "Tags select instances with @TAG in any SELECTOR. With no "
		"change given,\nprints the instance's tags.\n\n"
		"Example: gpufleet tag a100-1 +train +a100 -idle\n",
	.exec = cmd_tag_exec,
};

static int
cmd_tag_exec(
    const struct cmd_entry *e, struct cmd_ctx *ctx, int argc, char **argv)
{
	struct inventory *inv = NULL;
	struct instance in;
	char *cause = NULL, *tags;
	int status, i, r;

	memset(&in, 0, sizeof in);
	/* No getopt here: "-TAG" is an argument, not an option. */
	for (i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--help") == 0 ||
		    strcmp(argv[i], "-h") == 0)
			return cmd_help(stdout, e->name);
	}
	if (argc < 2)
		return cmd_usage_error(e, "needs NAME");
	if (instance_check_name(argv[1], &cause) != 0)
		return cmd_fail(GF_EUSAGE, cause);
	for (i = 2; i < argc; i++) {
		if (argv[i][0] != '+' && argv[i][0] != '-')
			return cmd_usage_error(
			    e, "'%s' must be +TAG or -TAG", argv[i]);
		if (instance_check_tag(argv[i] + 1, &cause) != 0)
			return cmd_fail(GF_EUSAGE, cause);
	}

	if ((status = cmd_open(ctx, &inv)) != 0)
		return status;
	if ((r = inventory_begin(inv, &cause)) != 0 ||
	    (r = inventory_get(inv, argv[1], &in, &cause)) != 0)
		goto fail;
	for (i = 2; i < argc; i++) {
		if (argv[i][0] == '+')
			instance_add_tag(&in, argv[i] + 1);
		else
			instance_remove_tag(&in, argv[i] + 1);
	}
	if ((r = inventory_update(inv, &in, &cause)) != 0 ||
	    (r = inventory_commit(inv, &cause)) != 0)
		goto fail;
	tags = tags_join(&in, " ");
	printf("%s: %s\n", in.name, *tags != '\0' ? tags : "(no tags)");
	free(tags);
	inventory_close(inv);
	instance_clear(&in);
	return GF_OK;
fail:
	inventory_close(inv);
	instance_clear(&in);
	return cmd_fail(-r, cause);
}

/* Show every field of one instance. */

#include <stdlib.h>

#include "cmd.h"
#include "status.h"

static int cmd_show_exec(
    const struct cmd_entry *, struct cmd_ctx *, int, char **);

const struct cmd_entry cmd_show_entry = {
	.name = "show",
	.usage = "NAME [--json]",
	.summary = "show one instance",
	.help = "      --json    print the instance as a JSON object\n\n"
		"Example: gpufleet show a100-1\n",
	.exec = cmd_show_exec,
};

static const struct option show_options[] = { { "json", no_argument, NULL,
						  'j' },
	{ "help", no_argument, NULL, 'h' }, { NULL, 0, NULL, 0 } };

static int
cmd_show_exec(
    const struct cmd_entry *e, struct cmd_ctx *ctx, int argc, char **argv)
{
	struct inventory *inv = NULL;
	struct instance in;
	char *cause = NULL, *tags, *created;
	int ch, status, json = 0, r;

	while ((ch = cmd_getopt(e, argc, argv, "jh", show_options, &status)) !=
	    -1) {
		if (ch == -2)
			return status;
		if (ch == 'j')
			json = 1;
	}
	if (argc - optind != 1)
		return cmd_usage_error(e, "needs exactly one NAME");
	if (instance_check_name(argv[optind], &cause) != 0)
		return cmd_fail(GF_EUSAGE, cause);
	if ((status = cmd_open(ctx, &inv)) != 0)
		return status;
	if ((r = inventory_get(inv, argv[optind], &in, &cause)) != 0) {
		inventory_close(inv);
		return cmd_fail(-r, cause);
	}
	inventory_close(inv);

	if (json)
		json_print(instance_to_json(&in), stdout);
	else {
		tags = tags_join(&in, ",");
		created = instance_format_time(in.created_at);
		printf("name:                 %s\n"
		       "host:                 %s\n"
		       "port:                 %d\n"
		       "user:                 %s\n"
		       "provider:             %s\n"
		       "region:               %s\n"
		       "tags:                 %s\n"
		       "identity:             %s\n"
		       "remote_dir:           %s\n"
		       "authorized_keys_file: %s\n"
		       "notes:                %s\n"
		       "source:               %s\n"
		       "created_at:           %s\n",
		    in.name, in.host, in.port, in.user, in.provider, in.region,
		    tags,
		    in.identity != NULL ? in.identity : "(config default)",
		    in.remote_dir, in.authorized_keys_file, in.notes,
		    in.source != NULL ? in.source : "(added by hand)", created);
		free(tags);
		free(created);
	}
	instance_clear(&in);
	return GF_OK;
}

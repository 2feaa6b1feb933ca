/*
 * List instances: an aligned table for people, JSON for scripts, Host blocks
 * a user can Include from ~/.ssh/config, or an Ansible INI inventory (one
 * group per tag and per provider) for when a team outgrows one laptop.
 */

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "cmd.h"
#include "misc.h"
#include "selector.h"
#include "status.h"
#include "xmalloc.h"

enum ls_format { LS_TABLE, LS_JSON, LS_SSH_CONFIG, LS_ANSIBLE };

static int cmd_ls_exec(
    const struct cmd_entry *, struct cmd_ctx *, int, char **);
static void print_table(const struct instance *, size_t, int);
static void print_ssh_config(
    const struct instance *, size_t, const struct config *);
static void print_ansible(
    const struct instance *, size_t, const struct config *);
static char *ansible_group(const char *, const char *);
static void ansible_value(FILE *, const char *, const char *);

const struct cmd_entry cmd_ls_entry = {
	.name = "ls",
	.usage = "[SELECTOR] [--all] [--json] "
		 "[--format table|json|ssh-config|ansible]",
	.summary = "list instances",
	.help = "With no SELECTOR, every instance in service.\n\n"
		"  -a, --all        include released instances\n"
		"      --json       same as --format json\n"
		"  -f, --format F   table (default), json, ssh-config "
		"(Host blocks to\n"
		"                   Include from ~/.ssh/config) or ansible "
		"(INI inventory)\n\n"
		"Examples:\n"
		"  gpufleet ls @train\n"
		"  gpufleet ls --format ssh-config > ~/.ssh/gpufleet.conf\n"
		"  gpufleet ls --format ansible > inventory.ini\n",
	.exec = cmd_ls_exec,
};

static const struct option ls_options[] = { { "all", no_argument, NULL, 'a' },
	{ "json", no_argument, NULL, 'j' },
	{ "format", required_argument, NULL, 'f' },
	{ "help", no_argument, NULL, 'h' }, { NULL, 0, NULL, 0 } };

static void
print_table(const struct instance *list, size_t n, int all)
{
	struct table *t;
	char port[16], *tags;
	size_t i;

	if (all)
		t = table_new(7, "NAME", "HOST", "PORT", "USER", "PROVIDER",
		    "TAGS", "RELEASED");
	else
		t = table_new(
		    6, "NAME", "HOST", "PORT", "USER", "PROVIDER", "TAGS");
	for (i = 0; i < n; i++) {
		const struct instance *in = &list[i];
		char *rel = in->released_at != 0
		    ? instance_format_time(in->released_at)
		    : NULL;
		snprintf(port, sizeof port, "%d", in->port);
		tags = tags_join(in, ",");
		table_add(t, in->name, in->host, port, in->user, in->provider,
		    tags, rel);
		free(tags);
		free(rel);
	}
	table_print(t, stdout);
	table_free(t);
}

static void
print_ssh_config(
    const struct instance *list, size_t n, const struct config *config)
{
	size_t i;
	const char *id;
	char *tags;

	printf("# gpufleet inventory: Include this file from ~/.ssh/config\n");
	for (i = 0; i < n; i++) {
		const struct instance *in = &list[i];
		if (in->released_at != 0)
			continue;
		id = in->identity != NULL ? in->identity : config->identity;
		tags = tags_join(in, ",");
		printf("\nHost %s\n", in->name);
		if (*in->provider != '\0' || *tags != '\0')
			printf(
			    "    # provider=%s tags=%s\n", in->provider, tags);
		printf("    HostName %s\n    Port %d\n    User %s\n", in->host,
		    in->port, in->user);
		if (in->jump != NULL)
			printf("    ProxyJump %s\n", in->jump);
		if (id != NULL)
			printf("    IdentityFile \"%s\"\n    IdentitiesOnly "
			       "yes\n",
			    id);
		free(tags);
	}
}

/* An Ansible group name: prefix_ then the word with non-[A-Za-z0-9_] as _. */
static char *
ansible_group(const char *prefix, const char *word)
{
	char *s, *p;

	xasprintf(&s, "%s_%s", prefix, word);
	for (p = s; *p != '\0'; p++) {
		if (!isalnum((unsigned char)*p) && *p != '_')
			*p = '_';
	}
	return s;
}

/* Print " key=value", quoting the value if it has blanks or quotes. */
static void
ansible_value(FILE *f, const char *key, const char *value)
{
	if (strpbrk(value, " \t'\"#;=") == NULL) {
		fprintf(f, " %s=%s", key, value);
		return;
	}
	fprintf(f, " %s='", key);
	for (; *value != '\0'; value++) {
		if (*value == '\'' || *value == '\\')
			fputc('\\', f);
		fputc(*value, f);
	}
	fputc('\'', f);
}

static void
print_ansible(
    const struct instance *list, size_t n, const struct config *config)
{
	char **groups = NULL, *g, port[16];
	size_t ngroups = 0, i, j, k;
	const char *id;

	printf("# gpufleet inventory for Ansible: ansible -i FILE all -m "
	       "ping\n[gpufleet]\n");
	for (i = 0; i < n; i++) {
		const struct instance *in = &list[i];
		if (in->released_at != 0)
			continue;
		printf("%s", in->name);
		ansible_value(stdout, "ansible_host", in->host);
		snprintf(port, sizeof port, "%d", in->port);
		ansible_value(stdout, "ansible_port", port);
		ansible_value(stdout, "ansible_user", in->user);
		id = in->identity != NULL ? in->identity : config->identity;
		if (id != NULL)
			ansible_value(
			    stdout, "ansible_ssh_private_key_file", id);
		printf("\n");
		for (j = 0; j <= in->ntags; j++) {
			if (j == in->ntags && *in->provider == '\0')
				break;
			g = j < in->ntags
			    ? ansible_group("tag", in->tags[j])
			    : ansible_group("provider", in->provider);
			misc_names_add(&groups, &ngroups, g);
		}
	}
	for (k = 0; k < ngroups; k++) {
		printf("\n[%s]\n", groups[k]);
		for (i = 0; i < n; i++) {
			const struct instance *in = &list[i];
			if (in->released_at != 0)
				continue;
			for (j = 0; j <= in->ntags; j++) {
				if (j == in->ntags && *in->provider == '\0')
					break;
				g = j < in->ntags
				    ? ansible_group("tag", in->tags[j])
				    : ansible_group("provider", in->provider);
				int same = strcmp(g, groups[k]) == 0;
				free(g);
				if (same) {
					printf("%s\n", in->name);
					break;
				}
			}
		}
		free(groups[k]);
	}
	free(groups);
}

static int
cmd_ls_exec(
    const struct cmd_entry *e, struct cmd_ctx *ctx, int argc, char **argv)
{
	struct inventory *inv = NULL;
	struct instance *list = NULL;
	struct selector *sel = NULL;
	enum ls_format format = LS_TABLE;
	char *cause = NULL;
	size_t n = 0, i, k;
	int ch, status, all = 0, r, *picked = NULL;
	json_t *arr;

	while ((ch = cmd_getopt(e, argc, argv, "af:jh", ls_options, &status)) !=
	    -1) {
		switch (ch) {
		case -2:
			return status;
		case 'a':
			all = 1;
			break;
		case 'j':
			format = LS_JSON;
			break;
		case 'f':
			if (strcmp(optarg, "table") == 0)
				format = LS_TABLE;
			else if (strcmp(optarg, "json") == 0)
				format = LS_JSON;
			else if (strcmp(optarg, "ssh-config") == 0)
				format = LS_SSH_CONFIG;
			else if (strcmp(optarg, "ansible") == 0)
				format = LS_ANSIBLE;
			else
				return cmd_usage_error(e,
				    "unknown format '%s' "
				    "(table, json, ssh-config, ansible)",
				    optarg);
			break;
		}
	}
	if (argc - optind > 1)
		return cmd_usage_error(e, "takes at most one SELECTOR");
	if (argc - optind == 1 &&
	    selector_parse(argv[optind], &sel, &cause) != 0)
		return cmd_fail(GF_EUSAGE, cause);

	if ((status = cmd_open(ctx, &inv)) != 0)
		goto out;
	if ((r = inventory_list(inv, all, &list, &n, &cause)) != 0) {
		status = cmd_fail(-r, cause);
		goto out;
	}
	if (sel != NULL) {
		picked = xcalloc(n + 1, sizeof *picked);
		if (selector_select(sel, list, n, picked, &cause) < 0) {
			status = cmd_fail(GF_EUSAGE, cause);
			goto out;
		}
		for (i = k = 0; i < n; i++) {
			if (picked[i])
				list[k++] = list[i];
			else
				instance_clear(&list[i]);
		}
		n = k;
	}

	switch (format) {
	case LS_TABLE:
		print_table(list, n, all);
		break;
	case LS_JSON:
		arr = json_array();
		for (i = 0; i < n; i++)
			json_array_append_new(arr, instance_to_json(&list[i]));
		json_print(arr, stdout);
		break;
	case LS_SSH_CONFIG:
		print_ssh_config(list, n, ctx->fleet->config);
		break;
	case LS_ANSIBLE:
		print_ansible(list, n, ctx->fleet->config);
		break;
	}
	status = GF_OK;
out:
	instance_free_array(list, n);
	free(picked);
	selector_free(sel);
	inventory_close(inv);
	return status;
}

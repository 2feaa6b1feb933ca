/*
 * Commands: one file per command (cmd-VERB.c) exporting cmd_VERB_entry,
 * listed in cmd.c's table. exec returns the process exit status (status.h).
 */
#ifndef GPUFLEET_CMD_H
#define GPUFLEET_CMD_H

#include <getopt.h>
#include <stdint.h>
#include <stdio.h>

#include "config.h"
#include "fleet.h"
#include "instance.h"
#include "inventory.h"

struct cmd_ctx {
	struct fleet *fleet; /* --db (GPUFLEET_DB, the default), the config */
};

struct cmd_entry {
	const char *name;
	const char *usage;   /* after "gpufleet NAME " */
	const char *summary; /* one line for `gpufleet help` */
	const char *help;    /* the options and details */
	int (*exec)(const struct cmd_entry *, struct cmd_ctx *, int, char **);
};

extern const struct cmd_entry *const cmd_table[];

const struct cmd_entry *cmd_find(const char *, char **);
int cmd_help(FILE *, const char *);
void cmd_usage(const struct cmd_entry *, FILE *);
int cmd_getopt(const struct cmd_entry *, int, char **, const char *,
    const struct option *, int *);
int cmd_usage_error(const struct cmd_entry *, const char *, ...)
    __attribute__((format(printf, 2, 3)));
int cmd_fail(int, char *);
int cmd_open(struct cmd_ctx *, struct inventory **);
int cmd_creates_inventory(const struct cmd_entry *, int, char **);
int cmd_duration(const struct cmd_entry *, const char *, const char *, int64_t,
    int64_t, int64_t *);
int cmd_number(const struct cmd_entry *, const char *, const char *,
    const char *, int, int, int *);
#define CMD_BEFORE_MAX 4096 /* the longest --before command */
int cmd_warn_minutes(const struct cmd_entry *, const char *, int *);
int cmd_before(const struct cmd_entry *, const char *);

/* cmd-push.c: push and pull */
struct xfer_req;
struct xfer_host;
int cmd_xfer_exec(
    const struct cmd_entry *, struct cmd_ctx *, int, char **, int);
void cmd_xfer_print(const struct xfer_req *, const struct xfer_host *);

/* output.c */
struct table;
struct table *table_new(size_t, ...);
void table_add(struct table *, ...);
void table_raw(struct table *);
void cmd_print_failed(const char *, const char *);
void table_print(struct table *, FILE *);
void table_free(struct table *);
void json_print(json_t *, FILE *);
void csv_row(FILE *, size_t, ...);
char *tags_join(const struct instance *, const char *);

#endif

/*
 * gpufleet: manage rented GPU instances from one laptop. main() reads the
 * global options and the configuration, then runs one command.
 */

#include <errno.h>
#include <getopt.h>
#include <locale.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include <event2/thread.h>

#include "cmd.h"
#include "config.h"
#include "fleet.h"
#include "gpufleet/version.h"
#include "inventory.h"
#include "log.h"
#include "sshexport.h"
#include "status.h"
#include "xmalloc.h"

static const struct option global_options[] = { { "db", required_argument, NULL,
						    'd' },
	{ "config", required_argument, NULL, 'c' },
	{ "verbose", no_argument, NULL, 'v' },
	{ "help", no_argument, NULL, 'h' },
	{ "version", no_argument, NULL, 'V' }, { NULL, 0, NULL, 0 } };

int
main(int argc, char **argv)
{
	const struct cmd_entry *e;
	struct config config;
	struct cmd_ctx ctx;
	struct fleet fleet;
	const char *db = getenv("GPUFLEET_DB");
	const char *cfg = getenv("GPUFLEET_CONFIG");
	char *cause = NULL, *default_db = NULL, *default_cfg = NULL;
	int ch, status, explicit_cfg, explicit_db;

	setlocale(LC_CTYPE, "");
	signal(SIGPIPE, SIG_IGN);
	/* Before any event loop: the ssh-agent worker wakes loops. */
	if (evthread_use_pthreads() != 0)
		fatal("cannot set up libevent for threads");
	log_hook_libraries();
	if (getenv("GPUFLEET_DEBUG") != NULL)
		log_set_level(LOG_DEBUG);

	opterr = 0;
	while ((ch = getopt_long(argc, argv, "+hvV", global_options, NULL)) !=
	    -1) {
		switch (ch) {
		case 'd':
			db = optarg;
			break;
		case 'c':
			cfg = optarg;
			break;
		case 'v':
			log_set_level(LOG_DEBUG);
			break;
		case 'h':
			return cmd_help(stdout, NULL);
		case 'V':
			printf("gpufleet %s\n", GPUFLEET_VERSION);
			return GF_OK;
		default:
			if (optopt != 0)
				error("unknown option -%c (try 'gpufleet "
				      "help')",
				    optopt);
			else
				error("bad option '%s' (try 'gpufleet help')",
				    argv[optind - 1]);
			return GF_EUSAGE;
		}
	}
	argc -= optind;
	argv += optind;
	if (argc == 0) {
		cmd_help(stderr, NULL);
		return GF_EUSAGE;
	}
	if ((e = cmd_find(argv[0], &cause)) == NULL)
		return cmd_fail(GF_EUSAGE, cause);

	explicit_cfg = cfg != NULL && *cfg != '\0';
	if (!explicit_cfg)
		cfg = default_cfg = config_default_path();
	config_defaults(&config);
	if (config_load(&config, cfg, explicit_cfg, &cause) != 0) {
		config_clear(&config);
		free(default_cfg);
		return cmd_fail(GF_ECONFIG, cause);
	}
	explicit_db = db != NULL && *db != '\0';
	if (!explicit_db)
		db = default_db = inventory_default_path();

	fleet_init(&fleet, db, &config);
	/* A named database is made by a writer only; the default by any. */
	fleet.db_must_exist =
	    explicit_db && !cmd_creates_inventory(e, argc, argv);
	ctx.fleet = &fleet;
	optind = 0;
	status = e->exec(e, &ctx, argc, argv);
	/* The one place an installed ~/.ssh/gpufleet.conf follows changes. */
	if (status != GF_EUSAGE && status != GF_EDB)
		sshexport_refresh(&fleet);
	fleet_free(&fleet);

	/* A reader that went away (| head) is not an error; a full disk is. */
	if (fflush(stdout) != 0 && status == GF_OK && errno != EPIPE) {
		error("write error on standard output: %s", strerror(errno));
		status = GF_EHOSTS;
	}
	config_clear(&config);
	free(default_db);
	free(default_cfg);
	return status;
}

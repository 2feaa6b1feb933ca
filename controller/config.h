/*
 * The user's configuration: $XDG_CONFIG_HOME/gpufleet/config.ini (or
 * --config / GPUFLEET_CONFIG), read with inih. Every key is documented in
 * config/gpufleet.ini.example.
 */
#ifndef GPUFLEET_CONFIG_H
#define GPUFLEET_CONFIG_H

#include <stdio.h>

enum hostkey_policy { HOSTKEY_ACCEPT_NEW, HOSTKEY_STRICT };

/* [provider.NAME]: a provider's stop method over the built-in default. */
struct config_stop {
	char *provider;
	char *command; /* "remote:CMD", "local:CMD", "none", or NULL */
	char *kind;    /* "stop", "release", or NULL */
};

/*
 * [notify.NAME]: a webhook target (controller/notify.h). The URL and the
 * secret are read when used (url_file, secret_file: their first line).
 */
struct config_notify {
	char *name;
	char *url;	    /* or NULL: url_file */
	char *url_file;	    /* or NULL */
	int format;	    /* enum notify_format */
	char *secret_file;  /* feishu, dingtalk signing, or NULL */
	unsigned events;    /* bit (1 << enum notify_kind) per event */
	int min_interval;   /* seconds between two sends */
	char *ca_file;	    /* extra CA bundle, or NULL */
	int timeout;	    /* seconds per attempt, connect included */
	int retries;	    /* attempts after the first */
	int from_instances; /* also sent by the watchers (notify.h) */
	int min_interval_set;
	int line; /* of the section's first key, for errors */
};

/*
 * [daemon] listen: where the daemon's HTTP server listens, or none. addr
 * is a numeric IPv4 or IPv6 address (no name: nothing resolves it).
 */
#define CONFIG_LISTEN_ADDR "127.0.0.1"
#define CONFIG_LISTEN_PORT 9464

struct config_listen {
	int none;
	char addr[48];
	int port;
};

struct config {
	char *path;			    /* file read, or NULL */
	char *user;			    /* [defaults] user */
	char *identity;			    /* [defaults] identity, or NULL */
	int connect_timeout;		    /* [ssh] seconds */
	int setup_timeout;		    /* [ssh] seconds of silence */
	int command_timeout;		    /* [ssh] seconds, 0 none */
	int agent_timeout;		    /* [ssh] seconds for ssh-agent */
	int fanout;			    /* [ssh] */
	enum hostkey_policy hostkey_policy; /* [ssh] */
	int handshake_window; /* [ssh] ENGINE_WINDOW_AUTO (0), _OFF (-1), N */
	int status_raw_hours; /* [status] raw_retention_hours */
	int status_agg_days;  /* [status] aggregate_retention_days */
	int status_journal_days;    /* [status] journal_retention_days */
	int status_idle_util;	    /* [status] idle_util_percent */
	int status_stale_minutes;   /* [status] stale_progress_minutes */
	int status_stop_confirm;    /* [status] stop_confirm_seconds */
	int status_timeout;	    /* [status] timeout */
	char *progress_file;	    /* [status] progress_file, or NULL */
	char *nvidia_smi;	    /* [status] nvidia_smi, or NULL */
	char *keys_passphrase_file; /* [keys] passphrase_file, or NULL */
	char *schedule_tz;	    /* [schedule] tz, or NULL: the system's */
	int daemon_poll_interval;   /* [daemon] poll_interval, seconds */
	int daemon_stop_grace;	    /* [daemon] stop_grace, seconds */
	int daemon_runs_keep_days;  /* [daemon] runs_keep_days */
	int db_backup_keep;	    /* [db] backup_keep */
	struct config_listen daemon_listen; /* [daemon] listen */
	char *daemon_token_file;	    /* [daemon] token_file, or NULL */
	struct config_stop *stops;	    /* [provider.NAME] sections */
	size_t nstops;
	int notify_host_down_after;	/* [notify] host_down_after, s */
	int notify_release_warn;	/* [notify] release_warn, s */
	struct config_notify *notifies; /* [notify.NAME] sections */
	size_t nnotifies;
};

/*
 * A file read with inih through config_ini_read, which counts lines and
 * ends the parse at a control byte or an over-long line. error is the
 * first complaint, without file:line (caller frees).
 */
struct config_input {
	FILE *f;
	int line; /* lines read so far */
	char *error;
	int error_line;
};

void config_defaults(struct config *);
char *config_ini_read(char *, int, void *);
int config_ini_error(const struct config_input *, int, const char *, char **);
char *config_default_path(void);
int config_load(struct config *, const char *, int, char **);
void config_clear(struct config *);
const struct config_stop *config_stop(const struct config *, const char *);
const struct config_notify *config_notify(const struct config *, const char *);
int config_parse_listen(const char *, struct config_listen *, char **);
int config_listen_loopback(const struct config_listen *);
char *config_listen_string(const struct config_listen *);

#endif

/*
 * Notifications: short messages to webhook targets ([notify.NAME] in the
 * config) when something a renter must know happens.
 *
 * Producers (any process: the watcher journal's ingestion, the schedule
 * runner, the guards, the host key check, the daemon) only queue: one
 * notify_msg row per event, UNIQUE by a dedupe key (journal entries by
 * instance, epoch and seq; action_log rows by id), and one notify_send row
 * per target whose events take it, created in the producer's transaction.
 * The daemon sends (notifysend.c); `gpufleet notify flush` sends when no
 * daemon runs.
 *
 * A send row goes pending -> sending (claimed by one process, named by
 * pid and start time, in a committed UPDATE before the request leaves)
 * -> sent | pending again (a retry at next_at) | failed. A row left
 * sending by a process that died is marked unknown ("may not have
 * arrived") and never sent again: a message is never delivered twice by
 * gpufleet. Every attempt is an action_log row, notify_sent or
 * notify_failed.
 *
 * A target marked from_instances is also in D/notify.json on the
 * instances (planwrite.c writes it), whose watcher sends job and stop
 * events itself. The row of such a message for a target the instance
 * holds is created pending and moved at once to 'instance' (watcher.c):
 * it waits for the watcher's "notify" entry, which makes it sent (by the
 * instance) or pending (the instance could not: the laptop sends it); one
 * still waiting NOTIFY_INSTANCE_WAIT after it was queued becomes pending.
 */
#ifndef GPUFLEET_NOTIFY_H
#define GPUFLEET_NOTIFY_H

#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "inventory.h"

enum notify_kind {
	NOTIFY_JOB_FINISHED,
	NOTIFY_JOB_FAILED,
	NOTIFY_STOPPED,
	NOTIFY_STOP_FAILED,
	NOTIFY_AUTOSTOPPED,
	NOTIFY_SCHEDULE_FAILED,
	NOTIFY_GUARD,
	NOTIFY_LOW_BALANCE,
	NOTIFY_STALLED,
	NOTIFY_HOST_DOWN,
	NOTIFY_HOSTKEY_CHANGED,
	NOTIFY_KEY_REINJECTED,
	NOTIFY_RELEASE_DEADLINE,
	NOTIFY_STOP_HELD,
	NOTIFY_NKINDS
};
#define NOTIFY_EVENTS_ALL ((1u << NOTIFY_NKINDS) - 1)

enum notify_format {
	NOTIFY_FORMAT_JSON,
	NOTIFY_FORMAT_SLACK,
	NOTIFY_FORMAT_DISCORD,
	NOTIFY_FORMAT_FEISHU,
	NOTIFY_FORMAT_DINGTALK,
	NOTIFY_FORMAT_NTFY
};

/* DingTalk takes 20 messages a minute, then throttles for 10 minutes. */
#define NOTIFY_DINGTALK_INTERVAL   3
#define NOTIFY_DINGTALK_PER_MINUTE 20
#define NOTIFY_TEXT_MAX		   1800 /* under Discord's 2000 */
/* How long a row waits in 'instance' for the watcher's own send. */
#define NOTIFY_INSTANCE_WAIT 600

/* One message, as queued. */
struct notify_msg {
	int64_t id;
	char *kind;
	char *instance; /* or NULL */
	int64_t t;
	char *text;
	char *next; /* the command to run next, or NULL */
};

/* What one attempt sends: where, the body, its type and headers. */
struct notify_request {
	char *url;
	char *body;
	const char *content_type;
	char *title; /* ntfy's Title header, or NULL */
};

enum notify_verdict { NOTIFY_OK, NOTIFY_RETRY, NOTIFY_FAIL };

const char *notify_kind_name(int);
int notify_kind_parse(const char *);
const char *notify_format_name(int);
int notify_format_parse(const char *);
int notify_events_parse(const char *, unsigned *, char **);
char *notify_events_string(unsigned);
int notify_url_check(const char *, char **);
char *notify_redact(const char *);
int notify_target_url(const struct config_notify *, char **, char **);
int notify_target_secret(const struct config_notify *, char **, char **);
int notify_sign_feishu(const char *, int64_t, char *, size_t);
int notify_sign_dingtalk(const char *, int64_t, char *, size_t);
int notify_request_build(const struct config_notify *, const char *,
    const char *, const struct notify_msg *, int64_t, struct notify_request *,
    char **);
void notify_request_clear(struct notify_request *);
enum notify_verdict notify_judge(int, long, const char *, char **);
char *notify_when(int64_t, int64_t);
void notify_msg_clear(struct notify_msg *);
char *notify_instance_doc(const struct config *, const char *, char *, char **);
int notify_any_from_instances(const struct config *);
char *notify_text(const char *, const char *, int64_t, int64_t, const char *);

/* notifyqueue.c */
int notifyqueue_add(struct inventory *, int, const char *, int64_t,
    const char *, const char *, const char *, char **);

#endif

/*
 * The login user's password on instances: locked so that only keys open
 * SSH (the method chosen so key login keeps working, checked on a fresh
 * connection and undone at once if it does not), or set to a new random
 * one for a web console. Used by `passwd` and `harden --fix`.
 */
#ifndef GPUFLEET_PASSWD_H
#define GPUFLEET_PASSWD_H

#include "remote.h"

/* One host's outcome; every string is the caller's to free. */
struct passwd_host {
	int ok;
	int changed;	 /* the shadow entry was written */
	int reverted;	 /* the change was undone (key login failed after) */
	char *method;	 /* "passwd -l", "usermod -p '*'",
			  "chpasswd -e '*'", "chpasswd", or NULL */
	char *outcome;	 /* one line, for the user and the action log */
	char *secret;	 /* --random: the new password (wiped by clear) */
	int old_refused; /* 1: the old password was refused; -1: not tried */
	int new_works;	 /* --random: 1 the new one logs in; -1 not tried */
};

extern const char passwd_sshd_lookup[];

int passwd_lock(struct remote *, const char *, struct passwd_host *);
int passwd_random(struct remote *, const char *, struct passwd_host *);
void passwd_record(
    struct remote *, const char *, const char *, const struct passwd_host *);
void passwd_host_clear(struct passwd_host *);

#endif

/*
 * subreaper: run a command as a child subreaper.
 *
 *   subreaper COMMAND [ARG...]
 *
 * Marks this process a child subreaper (prctl PR_SET_CHILD_SUBREAPER),
 * then execs COMMAND in its place; the mark survives the exec.  A process
 * orphaned anywhere below COMMAND is then reparented to COMMAND, not to
 * pid 1, and its CPU time reaches COMMAND's cutime and cstime when COMMAND
 * reaps it.
 *
 * For the fleet harness (FLEET_SUBREAPER): sshd's privileged monitor exits
 * without waiting for its post-auth child, so without this the session's
 * CPU (and its shell's) is reaped by pid 1 and a benchmark that reads the
 * sshd listener's reaped CPU misses it.  sshd must then run with -D (no
 * fork into the background, which would leave the mark behind); its
 * SIGCHLD handler reaps any child, so the orphans do not linger.
 */
#include <sys/prctl.h>

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

int
main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: subreaper COMMAND [ARG...]\n");
		return 2;
	}
	if (prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0) {
		fprintf(stderr, "subreaper: prctl: %s\n", strerror(errno));
		return 1;
	}
	execvp(argv[1], argv + 1);
	fprintf(stderr, "subreaper: %s: %s\n", argv[1], strerror(errno));
	return 127;
}

/*
 * Reading and wiping login passwords. misc_read_secret does the reading
 * (unbuffered, every other copy wiped); this adds "-" for standard input,
 * refuses an empty password and holds core dumps off until the free.
 */

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "misc.h"
#include "password.h"
#include "xmalloc.h"

/*
 * Read a password: the first line of file (CR LF or LF ends it; "-" reads
 * standard input), or, with file NULL, typed on the terminal after
 * "Password for WHAT: " without echo (so is "-" when standard input is a
 * terminal). Returns it (caller frees with
 * password_free), or NULL with *cause set (caller frees; it never holds the
 * password).
 */
char *
password_read(const char *file, const char *what, char **cause)
{
	char *prompt, *why = NULL, *s;
	const char *path = file;

	*cause = NULL;
	/* "-" on a terminal would echo what is typed: ask as --password. */
	if (file != NULL && strcmp(file, "-") == 0 && isatty(STDIN_FILENO))
		file = path = NULL;
	if (file != NULL && strcmp(file, "-") == 0)
		path = "/dev/stdin";
	misc_secret_hold();
	if (file == NULL) {
		xasprintf(&prompt, "Password for %s: ", what);
		s = misc_read_secret(NULL, prompt, &why);
		free(prompt);
	} else
		s = misc_read_secret(path, NULL, &why);
	if (s == NULL) {
		misc_secret_release();
		if (file == NULL)
			xasprintf(cause,
			    "--password: %s (use --password-file FILE, or - "
			    "for standard input)",
			    why);
		else
			xasprintf(cause, "--password-file: %s",
			    strcmp(file, "-") == 0
				? "cannot read standard input"
				: why);
		free(why);
		return NULL;
	}
	if (*s == '\0') {
		password_free(s);
		if (file == NULL)
			xasprintf(cause, "--password: no password typed");
		else if (strcmp(file, "-") == 0)
			xasprintf(cause,
			    "--password-file -: the first line of standard "
			    "input is empty");
		else
			xasprintf(cause,
			    "--password-file %s: the first line is empty",
			    file);
		return NULL;
	}
	return s;
}

/* Wipe and free a password from password_read (NULL: nothing). */
void
password_free(char *s)
{
	if (s == NULL)
		return;
	explicit_bzero(s, strlen(s));
	free(s);
	misc_secret_release();
}

/*
 * Cron expressions and their next firing in a time zone.
 *
 *   EXPR  := MINUTE HOUR DAY MONTH WEEKDAY | '@' MACRO
 *   FIELD := ITEM [',' ITEM]...
 *   ITEM  := '*' ['/' STEP] | VALUE ['-' VALUE ['/' STEP]]
 *   MACRO := hourly | daily | midnight | weekly | monthly | yearly | annually
 *
 * Fields are separated by blanks. VALUE is a number, or for MONTH a name
 * jan..dec and for WEEKDAY a name sun..sat (case-insensitive); WEEKDAY 0
 * and 7 are both Sunday, and "sun" as the end of a range is 7 ("mon-sun").
 * As in crontab(5) a step follows '*' or a range only: "5/10" is refused
 * (write "5-59/10"). Ranges do not wrap ("fri-mon" is refused).
 *
 * struct cron is a plain value: bit n of a mask is value n. It owns no
 * memory. cron_next sets TZ while it runs, so it is not thread-safe.
 */
#ifndef GPUFLEET_CRON_H
#define GPUFLEET_CRON_H

#include <stdint.h>

/* The longest expression cron_parse takes. */
#define CRON_MAX_LEN 256

#define CRON_DAY_STAR	  0x1 /* the day field was exactly "*" */
#define CRON_WEEKDAY_STAR 0x2 /* the weekday field was exactly "*" */

struct cron {
	uint64_t minutes; /* bits 0-59 */
	uint32_t hours;	  /* bits 0-23 */
	uint32_t days;	  /* bits 1-31 */
	uint16_t months;  /* bits 1-12 */
	uint8_t weekdays; /* bits 0-6, Sunday 0 */
	uint8_t flags;	  /* CRON_DAY_STAR, CRON_WEEKDAY_STAR */
};

/* The process's zone while another is in use (cron_zone_enter). */
struct cron_zone {
	int switched;
	char *saved; /* TZ before, or NULL: it was unset */
};

int cron_parse(const char *, struct cron *, char **);
int cron_zone_enter(const char *, struct cron_zone *, char **);
void cron_zone_leave(struct cron_zone *);
int cron_check_tz(const char *, char **);
int cron_next(const struct cron *, const char *, int64_t, int64_t *, char **);

#endif

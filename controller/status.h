/*
 * Exit codes of the gpufleet command, documented in the README and in
 * `gpufleet help`. Internal functions return 0 or the negated code, so a
 * command can end with `return -r`.
 */
#ifndef GPUFLEET_STATUS_H
#define GPUFLEET_STATUS_H

#define GF_OK	   0 /* success */
#define GF_EHOSTS  1 /* one or more hosts failed */
#define GF_EUSAGE  2 /* usage or validation error */
#define GF_EDB	   3 /* database error */
#define GF_ECONFIG 4 /* configuration error */

#endif

/*
 * The command runner of a held session (gpufleet-agent serve): what the
 * agent and the controller must agree on. The protocol is described in
 * agent/serve.c.
 */
#ifndef GPUFLEET_SERVE_H
#define GPUFLEET_SERVE_H

/* The runner's first frame ('R'): its protocol, version 1. */
#define SERVE_HELLO "gpufleet-agent serve 1"
/* The largest command line the runner takes. */
#define SERVE_COMMAND_MAX (256 * 1024)
/* The largest output frame it sends. */
#define SERVE_CHUNK (32 * 1024)
/* The largest frame of any kind it sends. */
#define SERVE_FRAME_MAX SERVE_CHUNK

#endif

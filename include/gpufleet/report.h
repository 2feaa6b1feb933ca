/*
 * The report gpufleet-agent prints and the controller parses: its schema
 * version, its field names and the fixed texts of its GPU errors. The schema
 * is described field by field in agent/REPORT.md; a change that removes or
 * retypes a field increments REPORT_SCHEMA.
 */
#ifndef GPUFLEET_REPORT_H
#define GPUFLEET_REPORT_H

#define REPORT_SCHEMA 1

/* Bytes of the progress file included; more sets "truncated". */
#define REPORT_PROGRESS_MAX 4096
/* Default bound on the nvidia-smi runs, all together, in milliseconds. */
#define REPORT_GPU_TIMEOUT_MS 4500
/* Environment variable that overrides REPORT_GPU_TIMEOUT_MS (tests). */
#define REPORT_GPU_TIMEOUT_ENV "GPUFLEET_AGENT_GPU_TIMEOUT_MS"
/* Environment variable naming a file that holds container_start (tests). */
#define REPORT_CONTAINER_START_ENV "GPUFLEET_AGENT_CONTAINER_START"

/* Exit status of gpufleet-agent: a report was printed, or a usage error. */
#define REPORT_EXIT_OK	  0
#define REPORT_EXIT_USAGE 2

/* gpu_error texts: exact, or the start of the text. */
#define REPORT_GPU_ERR_NOT_FOUND      "nvidia-smi not found"
#define REPORT_GPU_ERR_TIMEOUT_PREFIX "nvidia-smi timed out after "

/* Top level. */
#define REPORT_KEY_SCHEMA	  "schema"
#define REPORT_KEY_AGENT_VERSION  "agent_version"
#define REPORT_KEY_TIME		  "time"
#define REPORT_KEY_HOST		  "host"
#define REPORT_KEY_GPUS		  "gpus"
#define REPORT_KEY_GPU_ERROR	  "gpu_error"
#define REPORT_KEY_DRIVER_VERSION "driver_version"
#define REPORT_KEY_CUDA_VERSION	  "cuda_version"
#define REPORT_KEY_PROGRESS	  "progress"
#define REPORT_KEY_WATCHER	  "watcher"

/* "host" object. */
#define REPORT_KEY_HOSTNAME	     "hostname"
#define REPORT_KEY_KERNEL	     "kernel"
#define REPORT_KEY_BOOT_TIME	     "boot_time"
#define REPORT_KEY_CONTAINER_START   "container_start"
#define REPORT_KEY_LOAD		     "load"
#define REPORT_KEY_CPUS		     "cpus"
#define REPORT_KEY_MEM_TOTAL_KIB     "mem_total_kib"
#define REPORT_KEY_MEM_AVAILABLE_KIB "mem_available_kib"
#define REPORT_KEY_DISKS	     "disks"
#define REPORT_KEY_NET_RX_BYTES	     "net_rx_bytes"
#define REPORT_KEY_NET_TX_BYTES	     "net_tx_bytes"
#define REPORT_KEY_SESSIONS	     "sessions"

/* Elements of "disks". */
#define REPORT_KEY_DISK_PATH	  "path"
#define REPORT_KEY_DISK_TOTAL_KIB "total_kib"
#define REPORT_KEY_DISK_FREE_KIB  "free_kib"

/* Elements of "gpus". */
#define REPORT_KEY_GPU_INDEX	     "index"
#define REPORT_KEY_GPU_UUID	     "uuid"
#define REPORT_KEY_GPU_NAME	     "name"
#define REPORT_KEY_GPU_UTIL_GPU	     "util_gpu"
#define REPORT_KEY_GPU_UTIL_MEM	     "util_mem"
#define REPORT_KEY_GPU_MEM_USED_MIB  "mem_used_mib"
#define REPORT_KEY_GPU_MEM_TOTAL_MIB "mem_total_mib"
#define REPORT_KEY_GPU_TEMP_C	     "temp_c"
#define REPORT_KEY_GPU_POWER_W	     "power_w"
#define REPORT_KEY_GPU_POWER_LIMIT_W "power_limit_w"
#define REPORT_KEY_GPU_PROCESSES     "processes"

/* Elements of "processes". */
#define REPORT_KEY_PROC_PID	"pid"
#define REPORT_KEY_PROC_NAME	"name"
#define REPORT_KEY_PROC_MEM_MIB "mem_mib"

/* "progress" object. */
#define REPORT_KEY_PROGRESS_PATH      "path"
#define REPORT_KEY_PROGRESS_TEXT      "text"
#define REPORT_KEY_PROGRESS_TRUNCATED "truncated"
#define REPORT_KEY_PROGRESS_MTIME     "mtime"

/* "watcher" object (agent/WATCH.md "In the report"), in this order. */
#define REPORT_KEY_WATCHER_STATE      "state"
#define REPORT_KEY_WATCHER_PID	      "pid"
#define REPORT_KEY_WATCHER_CURRENT    "current"
#define REPORT_KEY_WATCHER_ERROR      "error"
#define REPORT_KEY_WATCHER_GENERATION "generation"
#define REPORT_KEY_WATCHER_PLAN	      "plan"
#define REPORT_KEY_WATCHER_NOTIFY     "notify"
#define REPORT_KEY_JOURNAL_EPOCH      "journal_epoch"
#define REPORT_KEY_JOURNAL	      "journal"
#define REPORT_KEY_JOURNAL_MORE	      "journal_more"
/* With journal_more: the stops journaled past the page (agent/WATCH.md). */
#define REPORT_KEY_JOURNAL_URGENT "journal_urgent"

/* Values of "state". */
#define REPORT_WATCHER_RUNNING "running"
#define REPORT_WATCHER_STARTED "started"
#define REPORT_WATCHER_DOWN    "down"
#define REPORT_WATCHER_NONE    "none"

#endif

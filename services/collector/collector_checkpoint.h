/*
 * collector_checkpoint — one worker's collector state in a file, so that a restarted collector
 * resumes from it (collector_stream_resume: proven by a replay from its last batch) instead of
 * replaying the worker's whole history, which the worker may no longer have.
 *
 * File: <dir>/<worker name, escaped>.ckpt (collector_checkpoint_path). Saved whole to a
 * temporary file in the same directory and renamed over the old one: a reader sees the old
 * file or the new one, never a mix, and a collector killed at any point leaves one of them.
 * Not fsync'd (the collector's loop must not wait on a disk): a file torn by a machine crash
 * fails its checksum and is ignored, and even an intact but stale file is only trusted once a
 * replay proves it.
 *
 * Format, version 1 (integers little-endian, doubles as their IEEE-754 bits):
 *
 *   off  size
 *     0     8  magic "IPLCKPT\n"
 *     8     4  version (1)
 *    12     4  flags (COLLECTOR_IMAGE_*)
 *    16     8  last_seq           the last applied batch...
 *    24     8  last_digest        ...and the ipl_hash_bytes digest of its payload
 *    32     8  epoch
 *    40     8  written_ms         wall clock
 *    48     8  start_time         the worker's process_start_time_seconds \ restart evidence
 *    56    24  counters[3]        (collector_sample_t)                     / of its /metrics
 *    80     4  block_size
 *    84     4  name_len           1..COLLECTOR_CHECKPOINT_MAX_NAME
 *    88     8  nblocks            held blocks   \ each at most
 *    96     8  nghosts            ghost blocks  / COLLECTOR_CHECKPOINT_MAX_BLOCKS
 *   104     .  the worker's name (no NUL)
 *     .     .  nblocks × {engine, ours, parent} (u64 each), then nghosts × the same
 *   end-8   8  XXH3-64 (ipl_hash_bytes) of every byte before it
 *
 * The file is local, but it is read as untrusted input: the decoder checks every length,
 * count and flag against the size of what it was given, and the checksum, before it allocates
 * anything; a file that fails is ignored (the caller logs why).
 */
#ifndef COLLECTOR_CHECKPOINT_H
#define COLLECTOR_CHECKPOINT_H

#include <stddef.h>
#include <stdint.h>

#include "collector_stream.h"

#define COLLECTOR_CHECKPOINT_VERSION    1u
#define COLLECTOR_CHECKPOINT_COUNTERS   3
#define COLLECTOR_CHECKPOINT_MAX_NAME   1024u
#define COLLECTOR_CHECKPOINT_MAX_BLOCKS (16u << 20) /* per section: 384 MiB of entries */
#define COLLECTOR_CHECKPOINT_MAX_FILE   (1024u << 20)

typedef struct {
    char *worker; /* decoded: malloc'd, NUL-terminated; encoded: borrowed */
    uint64_t written_ms;
    double start_time; /* restart evidence (collector_sample_t), 0 / < 0 when absent */
    double counters[COLLECTOR_CHECKPOINT_COUNTERS];
    collector_stream_image_t image; /* decoded: malloc'd arrays */
} collector_checkpoint_t;

/* Encodes `c` into a malloc'd buffer (*out, *len; the caller frees). 0, IPL_E_INVAL (a name
 * that is empty or too long, counts too large, flags that are not an image's), IPL_E_NOMEM. */
int collector_checkpoint_encode(const collector_checkpoint_t *c, uint8_t **out, size_t *len);

/* Decodes `len` bytes into *out (zeroed first; release with collector_checkpoint_clear).
 * 0, or IPL_E_INVAL / IPL_E_RANGE / IPL_E_NOMEM with what is wrong in `err` (always set,
 * e.g. "checksum mismatch"); *out then holds nothing. */
int collector_checkpoint_decode(const uint8_t *buf, size_t len, collector_checkpoint_t *out,
                                char *err, size_t errlen);
/* Frees what a decode allocated; *c is zeroed. */
void collector_checkpoint_clear(collector_checkpoint_t *c);

/* <dir>/<name>.ckpt with every byte of the name outside [A-Za-z0-9_.-] (and a leading '.')
 * written as %XX, so that any worker name is one file of `dir`. Malloc'd; NULL when out of
 * memory. */
char *collector_checkpoint_path(const char *dir, const char *worker);

/* Writes `len` bytes to the worker's file atomically (a temporary file, then rename). 0, or
 * IPL_E_IO with the path and strerror in `err`. */
int collector_checkpoint_save(const char *dir, const char *worker, const uint8_t *buf, size_t len,
                              char *err, size_t errlen);
/* Reads the worker's file into a malloc'd *buf. 0; IPL_E_NOTFOUND when there is none;
 * IPL_E_IO / IPL_E_RANGE (larger than COLLECTOR_CHECKPOINT_MAX_FILE) with `err` set. */
int collector_checkpoint_load(const char *dir, const char *worker, uint8_t **buf, size_t *len,
                              char *err, size_t errlen);
/* Deletes the worker's file (a worker that left the policy). 0 or IPL_E_NOTFOUND. */
int collector_checkpoint_remove(const char *dir, const char *worker);

#endif

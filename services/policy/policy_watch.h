/*
 * policy_watch — tells the policy server when to look at its directory again: on inotify
 * events, debounced, or (where inotify cannot be used) every second.
 *
 *   inotify: an event in --dir ─► drain ─► due `debounce_ms` after the last event (at most
 *            `max_delay_ms` after the first of a burst) ─┐
 *   poll:    due every `poll_ms` ─────────────────────────┴─► the server compares the
 *                                                             directory's signature and
 *                                                             compiles only when it changed
 *
 * So an editor's write + rename, or a `cp` of several files, compiles once, and events that
 * name no policy file (a swap file, a .tmp written before its rename) cost one readdir and
 * no compilation unless the signature changed. Watched on the directory: IN_CLOSE_WRITE,
 * IN_MOVED_TO, IN_MOVED_FROM, IN_CREATE, IN_DELETE — which covers a Kubernetes ConfigMap volume too
 * (it swaps its `..data` symlink with a rename in the directory). When the directory itself is
 * deleted or moved (IN_DELETE_SELF, IN_MOVE_SELF, IN_IGNORED) the watch polls, trying every
 * `poll_ms` to watch the path again; an event queue overflow makes it due at once.
 *
 * Polling is the fallback when inotify_init1 fails, when the directory cannot be watched
 * (yet), when it is on a filesystem whose changes made on other hosts raise no events (NFS,
 * SMB/CIFS, FUSE, 9p, virtiofs, Ceph, ...: statfs f_type), or when asked (`poll`).
 * policy_watch_mode says which runs and policy_watch_reason why it polls; a change of mode
 * is logged (policy_watch mode=...).
 *
 * Threads: one (the server's loop); not thread-safe. Times are ipl_mono_ms() milliseconds.
 */
#ifndef POLICY_WATCH_H
#define POLICY_WATCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct {
    uint64_t debounce_ms;  /* quiet time after the last event (0: 100) */
    uint64_t max_delay_ms; /* longest wait after the first event of a burst (0: 1000) */
    uint64_t poll_ms;      /* polling interval (0: 1000) */
    bool poll;             /* never use inotify (--watch poll) */
} policy_watch_config_t;

typedef struct policy_watch policy_watch_t;

/* Starts watching `dir` (copied) and logs the mode. Due at once (the first look). NULL only
 * when out of memory. */
policy_watch_t *policy_watch_new(const char *dir, const policy_watch_config_t *config);
void policy_watch_destroy(policy_watch_t **self_p);

/* The inotify descriptor to wait on for reading (it never changes), or -1 when inotify could
 * not be started at all (then polling runs for good). */
int policy_watch_fd(const policy_watch_t *self);

/* Reads every pending event (non-blocking; call when the fd is readable) and schedules the
 * next look. Returns the number of events read. */
size_t policy_watch_drain(policy_watch_t *self, uint64_t now_ms);

typedef enum {
    POLICY_WATCH_IDLE = 0,    /* not yet */
    POLICY_WATCH_LOOK = 1,    /* compare the directory's signature; compile when it changed */
    POLICY_WATCH_COMPILE = 2, /* an event named a policy file (or events were lost): compile
                               * (a signature can miss a same-size rewrite within one clock
                               * tick of the last look) */
} policy_watch_due_t;

/* Whether to look at the directory now; the next look is then scheduled (polling) or waits
 * for the next event (inotify). When polling, also retries watching the directory. */
policy_watch_due_t policy_watch_due(policy_watch_t *self, uint64_t now_ms);

/* Milliseconds until the next look (0: now), or -1 when only an event can bring one. */
long policy_watch_wait_ms(const policy_watch_t *self, uint64_t now_ms);

const char *policy_watch_mode(const policy_watch_t *self);   /* "inotify" or "poll" */
const char *policy_watch_reason(const policy_watch_t *self); /* why it polls; "" with inotify */
uint64_t policy_watch_events(const policy_watch_t *self);    /* inotify events read */
const policy_watch_config_t *policy_watch_config(const policy_watch_t *self); /* defaults set */

/* A hash of the names, sizes, inodes and modification times of the files of `dir` that the
 * compiler reads (policy_compiler_is_policy_file; stat follows symlinks), so
 * that any edit, rename, addition or removal changes it; 1 when the directory cannot be read,
 * never 0. */
uint64_t policy_watch_signature(const char *dir);

#endif

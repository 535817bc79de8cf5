/*
 * tenants_store — the live tenants of a process: a keys file (tenants_keys) reloaded without a
 * restart when it changes, switched atomically, the last good table kept when a change is
 * invalid.
 *
 *   tenants_store_t *s = tenants_store_new(path, 1000, err, sizeof err);   first load must pass
 *   per request:  r = tenants_store_lookup(s, key, len, tenant, sizeof tenant);
 *   (lookups stat the file at most every check_ms and reload it when it changed)
 *
 * "Changed" is any of device, inode, size or modification time (ns) of the path, following
 * symbolic links — so an editor's write, a `mv` over it, and kubelet's swap of a mounted
 * Secret's `..data` link are all seen. A reload that fails keeps the previous table, counts
 * the failure and keeps its message (tenants_store_stats) until a good one loads; it is tried
 * again when the file changes again.
 *
 * Thread-safe: lookups share a read lock; a reload builds the new table outside the lock and
 * swaps it under the write lock.
 */
#ifndef TENANTS_STORE_H
#define TENANTS_STORE_H

#include <stddef.h>
#include <stdint.h>

#include "tenants_keys.h"

typedef struct tenants_store tenants_store_t;

/* Loads `path` (copied). check_ms: how often lookups look at the file (0: 1000). NULL with
 * err (file:line:col...) when the first load fails. */
tenants_store_t *tenants_store_new(const char *path, uint64_t check_ms, char *err, size_t errlen);
void tenants_store_destroy(tenants_store_t **self_p);

/* tenants_keys_lookup on the current table; the tenant's name is copied to tenant[size]
 * ("" unless OK or DISABLED). May reload first (see above). */
tenants_result_t tenants_store_lookup(tenants_store_t *self, const char *key, size_t len,
                                      char *tenant, size_t size);

/* Looks at the file now: 1 reloaded, 0 unchanged, -1 changed but invalid (the last good table
 * stays; err gets why when errlen > 0). */
int tenants_store_check(tenants_store_t *self, char *err, size_t errlen);

typedef struct {
    uint64_t version;  /* tables loaded (1 after new) */
    uint64_t failures; /* reloads rejected */
    size_t tenants, keys;
    char last_error[512]; /* the last rejected reload's message, "" once a good one loaded */
} tenants_store_stats_t;

void tenants_store_stats(tenants_store_t *self, tenants_store_stats_t *out);

/* Called after every reload attempt with its result (1 loaded, -1 rejected) and, for -1, the
 * message (names and positions, never a key); from whichever thread reloaded, without the
 * store's locks held. Set it before lookups start. NULL: none. */
typedef void(tenants_store_observer_fn)(void *arg, int result, const char *error);
void tenants_store_set_observer(tenants_store_t *self, tenants_store_observer_fn *fn, void *arg);

#endif

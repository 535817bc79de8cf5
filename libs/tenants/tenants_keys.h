/*
 * tenants_keys — the tenants and their API keys, from one keys file, held as SHA-256 digests.
 *
 * The file (YAML; docs/tenants.md):
 *
 *   tenants:
 *     - name: team-a                 # 1..63 of [A-Za-z0-9._-]
 *       keys: ["ipk-team-a-4f1c..."] # the key as clients send it, or "sha256:<64 hex>"
 *     - name: team-b
 *       disabled: true               # known, but refused (403)
 *       keys: ["sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"]
 *
 * A key given in clear is hashed at load and the clear text is not kept; "sha256:" entries
 * let operators keep only digests in the file (`printf %s KEY | sha256sum`). A key must be at
 * least 16 bytes (a digest entry is taken as is), and a key (digest) may belong to one tenant
 * only. In Kubernetes the file is a Secret's key mounted as a volume (kubelet swaps it on
 * change; tenants_store reloads it).
 *
 * Lookup: the presented key's SHA-256, then an open-addressing table by the digest's first 8
 * bytes and a constant-time comparison of all 32 (the digest of an unknown key never equals
 * a stored one except by a SHA-256 collision; comparing digests, not keys, leaks nothing
 * about a key's bytes through timing).
 *
 * Errors name file:line:column, what is wrong and the fix. Immutable once loaded: lookups
 * from any number of threads. No key or digest is ever logged or put in an error message.
 */
#ifndef TENANTS_KEYS_H
#define TENANTS_KEYS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define TENANTS_MAX_NAME     63
#define TENANTS_MIN_KEY      16    /* bytes of a key given in clear */
#define TENANTS_MAX_KEY      512   /* bytes of a presented key looked at */
#define TENANTS_MAX_TENANTS  10000
#define TENANTS_MAX_KEYS     100000

typedef struct tenants_keys tenants_keys_t;

typedef enum {
    TENANTS_OK = 0,   /* a known, enabled tenant */
    TENANTS_MISSING,  /* no key presented → 401 */
    TENANTS_UNKNOWN,  /* a key no tenant has → 401 */
    TENANTS_DISABLED, /* a known tenant, disabled → 403 */
} tenants_result_t;

/* "ok", "missing", "unknown", "disabled". */
const char *tenants_result_name(tenants_result_t r);

/* Parses `len` bytes of a keys file named `file` (for messages). Returns the table, or NULL
 * with one line "file:line:col: what is wrong; how to fix" in err (errlen > 0) — also for an
 * empty text or allocation failure. */
tenants_keys_t *tenants_keys_parse(const char *file, const char *text, size_t len, char *err,
                                   size_t errlen);
/* Reads and parses the file at `path`. */
tenants_keys_t *tenants_keys_load(const char *path, char *err, size_t errlen);
void tenants_keys_destroy(tenants_keys_t **self_p);

size_t tenants_keys_tenants(const tenants_keys_t *self); /* tenants listed */
size_t tenants_keys_count(const tenants_keys_t *self);   /* keys (digests) held */

/* Who presents `key` (len bytes; NULL or 0: missing). *tenant gets the tenant's name
 * (borrowed from self) for OK and DISABLED, NULL otherwise. Thread-safe. */
tenants_result_t tenants_keys_lookup(const tenants_keys_t *self, const char *key, size_t len,
                                     const char **tenant);

/* The API key of a request's headers: "Authorization: Bearer <key>" (the scheme in any case,
 * the key up to the end with surrounding blanks removed), else "x-api-key: <key>". *len gets
 * its length. NULL when neither holds one. Borrowed from the header values. */
const char *tenants_keys_from_headers(const char *authorization, const char *x_api_key,
                                      size_t *len);

#endif

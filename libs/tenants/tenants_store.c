/*
 * tenants_store — see the header.
 */
#include "tenants_store.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "ipl_clock.h"

typedef struct {
    dev_t dev;
    ino_t ino;
    off_t size;
    int64_t mtime_ns;
    bool ok; /* stat succeeded */
} s_ident_t;

struct tenants_store {
    char *path;
    uint64_t check_ms;
    pthread_rwlock_t lock;      // guards keys
    pthread_mutex_t reload;     // one reload at a time; guards ident and the stats' texts
    tenants_keys_t *keys;       // the current table
    s_ident_t ident;            // of the file the current table (or the last try) came from
    _Atomic uint64_t next_ms;   // the next look at the file (monotonic)
    _Atomic uint64_t version, failures;
    char last_error[512];
    tenants_store_observer_fn *observer;
    void *observer_arg;
};

static s_ident_t s_stat(const char *path)
{
    struct stat st;
    s_ident_t id = {0};
    if (stat(path, &st) != 0) return id;
    id.dev = st.st_dev;
    id.ino = st.st_ino;
    id.size = st.st_size;
    id.mtime_ns = (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec;
    id.ok = true;
    return id;
}

static bool s_same(const s_ident_t *a, const s_ident_t *b)
{
    return a->ok == b->ok && a->dev == b->dev && a->ino == b->ino && a->size == b->size &&
           a->mtime_ns == b->mtime_ns;
}

tenants_store_t *tenants_store_new(const char *path, uint64_t check_ms, char *err, size_t errlen)
{
    tenants_store_t *self = calloc(1, sizeof *self);
    if (!self || !(self->path = strdup(path))) {
        if (errlen) snprintf(err, errlen, "out of memory");
        free(self);
        return NULL;
    }
    self->check_ms = check_ms ? check_ms : 1000;
    self->ident = s_stat(path);
    self->keys = tenants_keys_load(path, err, errlen);
    if (!self->keys) {
        free(self->path);
        free(self);
        return NULL;
    }
    pthread_rwlock_init(&self->lock, NULL);
    pthread_mutex_init(&self->reload, NULL);
    atomic_store(&self->version, 1);
    atomic_store(&self->next_ms, ipl_mono_ms() + self->check_ms);
    return self;
}

void tenants_store_destroy(tenants_store_t **self_p)
{
    if (!self_p || !*self_p) return;
    tenants_store_t *self = *self_p;
    tenants_keys_destroy(&self->keys);
    pthread_rwlock_destroy(&self->lock);
    pthread_mutex_destroy(&self->reload);
    free(self->path);
    free(self);
    *self_p = NULL;
}

int tenants_store_check(tenants_store_t *self, char *err, size_t errlen)
{
    if (errlen) err[0] = '\0';
    pthread_mutex_lock(&self->reload);
    atomic_store(&self->next_ms, ipl_mono_ms() + self->check_ms);
    s_ident_t now = s_stat(self->path);
    int rc = 0;
    if (!s_same(&now, &self->ident)) {
        self->ident = now;
        char why[512] = "";
        tenants_keys_t *fresh = tenants_keys_load(self->path, why, sizeof why);
        if (fresh) {
            pthread_rwlock_wrlock(&self->lock);
            tenants_keys_t *old = self->keys;
            self->keys = fresh;
            pthread_rwlock_unlock(&self->lock);
            tenants_keys_destroy(&old);
            atomic_fetch_add(&self->version, 1);
            self->last_error[0] = '\0';
            rc = 1;
        } else {
            atomic_fetch_add(&self->failures, 1);
            snprintf(self->last_error, sizeof self->last_error, "%s", why);
            if (errlen) snprintf(err, errlen, "%s", why);
            rc = -1;
        }
    }
    char copy[sizeof self->last_error];
    snprintf(copy, sizeof copy, "%s", self->last_error);
    pthread_mutex_unlock(&self->reload);
    if (rc != 0 && self->observer) self->observer(self->observer_arg, rc, rc < 0 ? copy : NULL);
    return rc;
}

void tenants_store_set_observer(tenants_store_t *self, tenants_store_observer_fn *fn, void *arg)
{
    self->observer = fn;
    self->observer_arg = arg;
}

tenants_result_t tenants_store_lookup(tenants_store_t *self, const char *key, size_t len,
                                      char *tenant, size_t size)
{
    if (ipl_mono_ms() >= atomic_load(&self->next_ms) && pthread_mutex_trylock(&self->reload) == 0) {
        // one thread looks; the others go on with the current table
        pthread_mutex_unlock(&self->reload);
        (void)tenants_store_check(self, NULL, 0);
    }
    const char *name = NULL;
    pthread_rwlock_rdlock(&self->lock);
    tenants_result_t r = tenants_keys_lookup(self->keys, key, len, &name);
    if (size) snprintf(tenant, size, "%s", name ? name : "");
    pthread_rwlock_unlock(&self->lock);
    return r;
}

void tenants_store_stats(tenants_store_t *self, tenants_store_stats_t *out)
{
    memset(out, 0, sizeof *out);
    out->version = atomic_load(&self->version);
    out->failures = atomic_load(&self->failures);
    pthread_rwlock_rdlock(&self->lock);
    out->tenants = tenants_keys_tenants(self->keys);
    out->keys = tenants_keys_count(self->keys);
    pthread_rwlock_unlock(&self->lock);
    pthread_mutex_lock(&self->reload);
    snprintf(out->last_error, sizeof out->last_error, "%s", self->last_error);
    pthread_mutex_unlock(&self->reload);
}

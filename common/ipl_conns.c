/*
 * ipl_conns — connection limits, per-state deadlines and drain. See ipl_conns.h.
 *
 * One mutex guards everything: the list of open connections, the per-address counts (a small
 * chained hash table keyed by the address, IPv4 as IPv4-mapped IPv6) and the watchdog's
 * wake-up time. The watchdog sleeps until the earliest deadline (at most S_MAX_SLEEP_MS); a
 * state change that sets an earlier one wakes it.
 *
 *   conns ──► [conn] ◄─► [conn] ◄─► … (state, deadline, fd, address)
 *   by_ip[hash(addr)] ──► {addr, count} ──► …
 */
#include "ipl_conns.h"

#include <arpa/inet.h>
#include <assert.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ipl_clock.h"
#include "ipl_log.h"

#define S_MAX_SLEEP_MS 1000
#define S_IP_BUCKETS   256

typedef enum { S_IDLE, S_READING, S_BODY, S_ACTIVE } s_state_t;

static const char *const s_state_names[] = {"idle", "read", "read", "active"};

typedef struct s_ip {
    unsigned char key[16];
    unsigned count;
    struct s_ip *next;
} s_ip_t;

struct ipl_conn {
    s_state_t state;
    uint64_t deadline_ms; /* 0: none */
    bool cut;             /* shut down by a deadline or the drain */
    int fd;
    bool has_ip;
    unsigned char key[16];
    char peer[INET6_ADDRSTRLEN];
    struct ipl_conn *prev, *next;
};

struct ipl_conns {
    ipl_conns_config_t cfg;
    char *name;
    pthread_mutex_t lock;
    pthread_cond_t wake;
    pthread_t watchdog;
    bool stop;
    bool draining;
    uint64_t wake_at_ms; /* when the watchdog looks next */
    ipl_conn_t *head;
    size_t count, inflight; /* inflight: in S_BODY or S_ACTIVE */
    s_ip_t *by_ip[S_IP_BUCKETS];
    ipl_metric_t *open_gauge, *refused_max, *refused_ip, *timeout_idle, *timeout_read;
};

/* Metrics are optional (ipl_conns_metrics). */
static void s_inc(ipl_metric_t *m)
{
    if (m) ipl_metric_inc(m);
}

static void s_gauge(ipl_metric_t *m, size_t v)
{
    if (m) ipl_metric_set(m, (double)v);
}

/* ---- addresses ------------------------------------------------------------------------------ */

/* The 16-byte key of a client address (IPv4 mapped into IPv6); false for other families. */
static bool s_key(const struct sockaddr *addr, socklen_t len, unsigned char key[16])
{
    if (addr && addr->sa_family == AF_INET && len >= (socklen_t)sizeof(struct sockaddr_in)) {
        memset(key, 0, 10);
        key[10] = key[11] = 0xff;
        memcpy(key + 12, &((const struct sockaddr_in *)addr)->sin_addr, 4);
        return true;
    }
    if (addr && addr->sa_family == AF_INET6 && len >= (socklen_t)sizeof(struct sockaddr_in6)) {
        memcpy(key, &((const struct sockaddr_in6 *)addr)->sin6_addr, 16);
        return true;
    }
    return false;
}

static void s_key_text(const unsigned char key[16], char *out, size_t size)
{
    static const unsigned char mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    bool v4 = memcmp(key, mapped, 12) == 0;
    if (!inet_ntop(v4 ? AF_INET : AF_INET6, v4 ? key + 12 : key, out, (socklen_t)size))
        snprintf(out, size, "?");
}

static unsigned s_hash(const unsigned char key[16])
{
    uint32_t h = 2166136261u; /* FNV-1a */
    for (int i = 0; i < 16; i++)
        h = (h ^ key[i]) * 16777619u;
    return h % S_IP_BUCKETS;
}

/* The count of `key` (lock held); NULL when none is open from it. */
static s_ip_t *s_ip_find(ipl_conns_t *self, const unsigned char key[16])
{
    for (s_ip_t *ip = self->by_ip[s_hash(key)]; ip; ip = ip->next)
        if (!memcmp(ip->key, key, 16)) return ip;
    return NULL;
}

/* +1 for `key` (lock held); false when out of memory. */
static bool s_ip_add(ipl_conns_t *self, const unsigned char key[16])
{
    s_ip_t *ip = s_ip_find(self, key);
    if (!ip) {
        ip = calloc(1, sizeof *ip);
        if (!ip) return false;
        memcpy(ip->key, key, 16);
        unsigned b = s_hash(key);
        ip->next = self->by_ip[b];
        self->by_ip[b] = ip;
    }
    ip->count++;
    return true;
}

static void s_ip_remove(ipl_conns_t *self, const unsigned char key[16])
{
    s_ip_t **pp = &self->by_ip[s_hash(key)];
    for (; *pp; pp = &(*pp)->next) {
        if (memcmp((*pp)->key, key, 16) != 0) continue;
        s_ip_t *ip = *pp;
        if (--ip->count == 0) {
            *pp = ip->next;
            free(ip);
        }
        return;
    }
}

/* ---- the watchdog --------------------------------------------------------------------------- */

/* Shuts `c` down (lock held): its server sees the end of the stream and closes it. */
static void s_cut(ipl_conn_t *c)
{
    if (c->cut) return;
    c->cut = true;
    c->deadline_ms = 0;
    (void)shutdown(c->fd, SHUT_RDWR);
}

static void s_expire(ipl_conns_t *self, ipl_conn_t *c)
{
    int ms = c->state == S_IDLE ? self->cfg.idle_timeout_ms : self->cfg.read_timeout_ms;
    s_inc(c->state == S_IDLE ? self->timeout_idle : self->timeout_read);
    IPL_LOG_EVERY(10, IPL_LOG_INFO, "http_connection_timeout",
                  "server=%s client=%s state=%s timeout_ms=%d (closed%s)", self->name, c->peer,
                  s_state_names[c->state], ms,
                  c->state == S_IDLE ? "" : ": the request did not arrive in time");
    s_cut(c);
}

static void s_timedwait(ipl_conns_t *self, uint64_t until_ms)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    uint64_t now = ipl_mono_ms();
    uint64_t ms = until_ms > now ? until_ms - now : 0;
    ts.tv_sec += (time_t)(ms / 1000);
    ts.tv_nsec += (long)(ms % 1000) * 1000000L;
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    (void)pthread_cond_timedwait(&self->wake, &self->lock, &ts);
}

static void *s_watch(void *arg)
{
    ipl_conns_t *self = arg;
    pthread_mutex_lock(&self->lock);
    while (!self->stop) {
        uint64_t now = ipl_mono_ms(), next = now + S_MAX_SLEEP_MS;
        for (ipl_conn_t *c = self->head; c; c = c->next) {
            if (!c->deadline_ms) continue;
            if (c->deadline_ms <= now)
                s_expire(self, c);
            else if (c->deadline_ms < next)
                next = c->deadline_ms;
        }
        self->wake_at_ms = next;
        s_timedwait(self, next);
    }
    pthread_mutex_unlock(&self->lock);
    return NULL;
}

static bool s_counted(s_state_t state)
{
    return state == S_BODY || state == S_ACTIVE;
}

/* Sets c's state and deadline (lock held), waking the watchdog when it is due sooner. A head
 * that arrives keeps the deadline its request line started. */
static void s_enter(ipl_conns_t *self, ipl_conn_t *c, s_state_t state)
{
    bool was = s_counted(c->state), is = s_counted(state);
    if (!was && is) self->inflight++;
    if (was && !is) self->inflight--;
    bool keep = state == S_BODY && c->state == S_READING;
    c->state = state;
    if (c->cut || keep) return;
    int ms = state == S_IDLE     ? self->cfg.idle_timeout_ms
             : state == S_ACTIVE ? 0
                                 : self->cfg.read_timeout_ms;
    c->deadline_ms = ms > 0 ? ipl_mono_ms() + (uint64_t)ms : 0;
    if (c->deadline_ms && c->deadline_ms < self->wake_at_ms) {
        self->wake_at_ms = c->deadline_ms;
        pthread_cond_signal(&self->wake);
    }
}

/* ---- the API -------------------------------------------------------------------------------- */

ipl_conns_t *ipl_conns_new(const ipl_conns_config_t *config, const char *name)
{
    ipl_conns_t *self = calloc(1, sizeof *self);
    if (!self) return NULL;
    self->cfg = config ? *config : IPL_CONNS_DEFAULTS;
    if (self->cfg.max_connections <= 0) self->cfg.max_connections = IPL_CONNS_DEFAULT_MAX;
    self->name = strdup(name ? name : "");
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_mutex_init(&self->lock, NULL);
    pthread_cond_init(&self->wake, &ca);
    pthread_condattr_destroy(&ca);
    self->wake_at_ms = UINT64_MAX;
    if (!self->name || pthread_create(&self->watchdog, NULL, s_watch, self) != 0) {
        pthread_cond_destroy(&self->wake);
        pthread_mutex_destroy(&self->lock);
        free(self->name);
        free(self);
        return NULL;
    }
    return self;
}

void ipl_conns_destroy(ipl_conns_t **self_p)
{
    assert(self_p);
    ipl_conns_t *self = *self_p;
    if (!self) return;
    pthread_mutex_lock(&self->lock);
    self->stop = true;
    pthread_cond_signal(&self->wake);
    pthread_mutex_unlock(&self->lock);
    pthread_join(self->watchdog, NULL);
    if (self->head) /* a server's bug (each open needs its close): freed, not left */
        IPL_ERROR("http_connections_left", "server=%s count=%zu", self->name, self->count);
    while (self->head) {
        ipl_conn_t *c = self->head;
        self->head = c->next;
        free(c);
    }
    for (int b = 0; b < S_IP_BUCKETS; b++)
        while (self->by_ip[b]) {
            s_ip_t *ip = self->by_ip[b];
            self->by_ip[b] = ip->next;
            free(ip);
        }
    pthread_cond_destroy(&self->wake);
    pthread_mutex_destroy(&self->lock);
    free(self->name);
    free(self);
    *self_p = NULL;
}

void ipl_conns_metrics(ipl_conns_t *self, ipl_metrics_t *metrics, const char *prefix)
{
    assert(self && metrics && prefix);
    char name[160];
    snprintf(name, sizeof name, "%s_connections", prefix);
    self->open_gauge = ipl_metrics_gauge(metrics, name, "Client connections open.", NULL);
    snprintf(name, sizeof name, "%s_connections_refused_total", prefix);
    const char *help = "Client connections closed at accept by a limit, by reason.";
    self->refused_max = ipl_metrics_counter(metrics, name, help, "reason=\"max_connections\"");
    self->refused_ip = ipl_metrics_counter(metrics, name, help, "reason=\"per_ip\"");
    snprintf(name, sizeof name, "%s_connection_timeouts_total", prefix);
    help = "Client connections closed because a request (read) or the next one (idle) did not "
           "come in time.";
    self->timeout_idle = ipl_metrics_counter(metrics, name, help, "state=\"idle\"");
    self->timeout_read = ipl_metrics_counter(metrics, name, help, "state=\"read\"");
}

bool ipl_conns_admit(ipl_conns_t *self, const struct sockaddr *addr, socklen_t addrlen)
{
    unsigned char key[16];
    bool has_ip = s_key(addr, addrlen, key);
    pthread_mutex_lock(&self->lock);
    bool full = self->count >= (size_t)self->cfg.max_connections;
    s_ip_t *ip = !full && has_ip && self->cfg.max_per_ip > 0 ? s_ip_find(self, key) : NULL;
    bool per_ip = ip && ip->count >= (unsigned)self->cfg.max_per_ip;
    size_t open = self->count;
    pthread_mutex_unlock(&self->lock);
    if (!full && !per_ip) return true;
    char peer[INET6_ADDRSTRLEN] = "?";
    if (has_ip) s_key_text(key, peer, sizeof peer);
    s_inc(full ? self->refused_max : self->refused_ip);
    if (full)
        IPL_LOG_EVERY(10, IPL_LOG_WARN, "http_connection_refused",
                      "server=%s client=%s reason=max_connections open=%zu limit=%d", self->name,
                      peer, open, self->cfg.max_connections);
    else
        IPL_LOG_EVERY(10, IPL_LOG_WARN, "http_connection_refused",
                      "server=%s client=%s reason=per_ip limit=%d", self->name, peer,
                      self->cfg.max_per_ip);
    return false;
}

ipl_conn_t *ipl_conns_open(ipl_conns_t *self, const struct sockaddr *addr, socklen_t addrlen,
                           int fd)
{
    ipl_conn_t *c = calloc(1, sizeof *c);
    if (!c) return NULL;
    c->fd = fd;
    c->has_ip = s_key(addr, addrlen, c->key);
    if (c->has_ip)
        s_key_text(c->key, c->peer, sizeof c->peer);
    else
        snprintf(c->peer, sizeof c->peer, "-");
    pthread_mutex_lock(&self->lock);
    if (c->has_ip && !s_ip_add(self, c->key)) {
        pthread_mutex_unlock(&self->lock);
        free(c);
        return NULL;
    }
    c->next = self->head;
    if (self->head) self->head->prev = c;
    self->head = c;
    self->count++;
    s_gauge(self->open_gauge, self->count);
    c->state = S_IDLE;
    s_enter(self, c, S_IDLE);
    if (self->draining) s_cut(c); /* accepted just before the listener was shut */
    pthread_mutex_unlock(&self->lock);
    return c;
}

void ipl_conns_close(ipl_conns_t *self, ipl_conn_t **conn_p)
{
    assert(conn_p);
    ipl_conn_t *c = *conn_p;
    if (!c) return;
    *conn_p = NULL;
    pthread_mutex_lock(&self->lock);
    if (s_counted(c->state)) self->inflight--;
    if (c->prev)
        c->prev->next = c->next;
    else
        self->head = c->next;
    if (c->next) c->next->prev = c->prev;
    if (c->has_ip) s_ip_remove(self, c->key);
    self->count--;
    s_gauge(self->open_gauge, self->count);
    pthread_mutex_unlock(&self->lock);
    free(c);
}

void ipl_conns_reading(ipl_conns_t *self, ipl_conn_t *conn)
{
    if (!conn) return;
    pthread_mutex_lock(&self->lock);
    s_enter(self, conn, S_READING);
    pthread_mutex_unlock(&self->lock);
}

void ipl_conns_head(ipl_conns_t *self, ipl_conn_t *conn)
{
    if (!conn) return;
    pthread_mutex_lock(&self->lock);
    s_enter(self, conn, S_BODY);
    pthread_mutex_unlock(&self->lock);
}

void ipl_conns_active(ipl_conns_t *self, ipl_conn_t *conn)
{
    if (!conn) return;
    pthread_mutex_lock(&self->lock);
    s_enter(self, conn, S_ACTIVE);
    pthread_mutex_unlock(&self->lock);
}

void ipl_conns_idle(ipl_conns_t *self, ipl_conn_t *conn)
{
    if (!conn) return;
    pthread_mutex_lock(&self->lock);
    s_enter(self, conn, S_IDLE);
    if (self->draining) s_cut(conn);
    pthread_mutex_unlock(&self->lock);
}

void ipl_conns_drain(ipl_conns_t *self)
{
    pthread_mutex_lock(&self->lock);
    self->draining = true;
    for (ipl_conn_t *c = self->head; c; c = c->next)
        if (c->state == S_IDLE) s_cut(c);
    pthread_mutex_unlock(&self->lock);
}

bool ipl_conns_draining(ipl_conns_t *self)
{
    pthread_mutex_lock(&self->lock);
    bool d = self->draining;
    pthread_mutex_unlock(&self->lock);
    return d;
}

size_t ipl_conns_inflight(ipl_conns_t *self)
{
    pthread_mutex_lock(&self->lock);
    size_t n = self->inflight;
    pthread_mutex_unlock(&self->lock);
    return n;
}

size_t ipl_conns_count(ipl_conns_t *self)
{
    pthread_mutex_lock(&self->lock);
    size_t n = self->count;
    pthread_mutex_unlock(&self->lock);
    return n;
}

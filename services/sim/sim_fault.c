/*
 * sim_fault — see the header.
 */
#include "sim_fault.h"

#include <assert.h>
#include <cjson/cJSON.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "ipl_clock.h"

#define S_STALL_SLICE_MS 20

struct sim_fault {
    pthread_mutex_t lock;
    int status, status_count;
    int stall_ms, stall_count;
};

sim_fault_t *sim_fault_new(void)
{
    sim_fault_t *self = calloc(1, sizeof *self);
    if (self) pthread_mutex_init(&self->lock, NULL);
    return self;
}

void sim_fault_destroy(sim_fault_t **self_p)
{
    assert(self_p);
    sim_fault_t *self = *self_p;
    if (!self) return;
    pthread_mutex_destroy(&self->lock);
    free(self);
    *self_p = NULL;
}

/* An integer member in [lo, hi], or `dflt` when absent; -1 when it is not one. */
static int s_int(const cJSON *root, const char *name, int lo, int hi, int dflt, int *out)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, name);
    if (!v) {
        *out = dflt;
        return 0;
    }
    if (!cJSON_IsNumber(v) || v->valuedouble < lo || v->valuedouble > hi ||
        v->valuedouble != (double)(int)v->valuedouble)
        return -1;
    *out = (int)v->valuedouble;
    return 0;
}

int sim_fault_arm(sim_fault_t *self, const char *json, size_t len, char *err, size_t errlen)
{
    cJSON *root = cJSON_ParseWithLength(json, len);
    int status = 0, stall = 0, count = 0;
    int rc = -1;
    if (!cJSON_IsObject(root))
        snprintf(err, errlen,
                 "the body must be a JSON object like {\"status\": 500, \"count\": 1}");
    else if (s_int(root, "status", 400, 599, 0, &status))
        snprintf(err, errlen, "status must be an HTTP error status, 400..599");
    else if (s_int(root, "stall_ms", 0, 600000, 0, &stall))
        snprintf(err, errlen, "stall_ms must be an integer, 0..600000");
    else if (s_int(root, "count", 0, 1000000, status || stall ? 1 : 0, &count))
        snprintf(err, errlen, "count must be an integer, 0..1000000");
    else
        rc = 0;
    cJSON_Delete(root);
    if (rc != 0) return rc;
    pthread_mutex_lock(&self->lock);
    self->status = status;
    self->status_count = status ? count : 0;
    self->stall_ms = stall;
    self->stall_count = stall ? count : 0;
    pthread_mutex_unlock(&self->lock);
    return 0;
}

void sim_fault_take(sim_fault_t *self, int *status, int *stall_ms)
{
    pthread_mutex_lock(&self->lock);
    *status = 0;
    *stall_ms = 0;
    if (self->status_count > 0) {
        self->status_count--;
        *status = self->status;
    } else if (self->stall_count > 0) {
        self->stall_count--;
        *stall_ms = self->stall_ms;
    }
    pthread_mutex_unlock(&self->lock);
}

char *sim_fault_json(sim_fault_t *self)
{
    pthread_mutex_lock(&self->lock);
    char buf[160];
    snprintf(buf, sizeof buf,
             "{\"status\":%d,\"status_count\":%d,\"stall_ms\":%d,\"stall_count\":%d}", self->status,
             self->status_count, self->stall_ms, self->stall_count);
    pthread_mutex_unlock(&self->lock);
    char *out = malloc(sizeof buf);
    if (out) snprintf(out, sizeof buf, "%s", buf);
    return out;
}

bool sim_fault_peer_gone(int fd, bool socket)
{
    if (fd < 0) return false;
    struct pollfd p = {.fd = fd, .events = socket ? POLLRDHUP : 0};
    if (poll(&p, 1, 0) <= 0) return false;
    return (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)) != 0;
}

bool sim_fault_stall(int ms, int fd, bool socket)
{
    uint64_t end = ipl_mono_ms() + (uint64_t)(ms > 0 ? ms : 0);
    for (;;) {
        if (sim_fault_peer_gone(fd, socket)) return true;
        uint64_t now = ipl_mono_ms();
        if (now >= end) return false;
        uint64_t left = end - now;
        ipl_sleep_ms(left < S_STALL_SLICE_MS ? (int)left : S_STALL_SLICE_MS);
    }
}

/*
 * policy_info — see the header.
 */
#include "policy_info.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "policy_digest.h"

struct policy_info {
    ipl_metrics_t *metrics;
    char *name, *help;
    ipl_policy_view_t *view; // followed at render time, or NULL
    pthread_mutex_t lock;
    ipl_metric_t *shown; // the series of `hash`
    uint64_t hash;
};

void policy_info_set(policy_info_t *self, uint64_t hash)
{
    pthread_mutex_lock(&self->lock);
    if (!self->shown || hash != self->hash) {
        char hex[POLICY_DIGEST_HEX_LEN], labels[32];
        snprintf(labels, sizeof labels, "hash=\"%s\"", hash ? policy_digest_hex(hash, hex) : "");
        if (self->shown) ipl_metric_set(self->shown, 0);
        self->shown = ipl_metrics_gauge(self->metrics, self->name, self->help, labels);
        self->hash = hash;
    }
    ipl_metric_set(self->shown, 1);
    pthread_mutex_unlock(&self->lock);
}

static void s_collect(void *arg, ipl_metrics_t *metrics)
{
    (void)metrics;
    policy_info_t *self = arg;
    ipl_policy_snap_t *snap = ipl_policy_view_get(self->view);
    policy_info_set(self, snap ? snap->policy->hash : 0);
    if (snap) ipl_policy_view_release(self->view, &snap);
}

policy_info_t *policy_info_new_view(ipl_metrics_t *metrics, const char *name, const char *help,
                                    ipl_policy_view_t *view)
{
    policy_info_t *self = calloc(1, sizeof *self);
    if (!self) return NULL;
    self->metrics = metrics;
    self->view = view;
    pthread_mutex_init(&self->lock, NULL);
    self->name = strdup(name);
    self->help = strdup(help);
    if (!self->name || !self->help) {
        policy_info_destroy(&self);
        return NULL;
    }
    policy_info_set(self, 0); // the series exists from the start
    if (view) ipl_metrics_on_collect(metrics, s_collect, self);
    return self;
}

policy_info_t *policy_info_new(ipl_metrics_t *metrics, const char *name, const char *help)
{
    return policy_info_new_view(metrics, name, help, NULL);
}

void policy_info_destroy(policy_info_t **self_p)
{
    if (!self_p || !*self_p) return;
    policy_info_t *self = *self_p;
    pthread_mutex_destroy(&self->lock);
    free(self->name);
    free(self->help);
    free(self);
    *self_p = NULL;
}

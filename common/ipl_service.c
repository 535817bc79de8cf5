/*
 * ipl_service — the start-up and shut-down sequence shared by every inferplane process.
 *
 *   new     config declared with the common options (--log-level, --admin-listen; ipl_config
 *           itself adds --config, --help, --version)
 *   start   parse → log init → signals → metrics (+ process series) → admin socket bound
 *   serve   admin HTTP answers; logs "started"
 *   stop    admin stopped (joins its handler threads); metrics and config stay
 *   destroy stop → metrics → config
 */
#include "ipl_service.h"

#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ipl_curve.h"
#include "ipl_error.h"
#include "ipl_log.h"
#include "ipl_signal.h"

#ifndef IPL_VERSION
#define IPL_VERSION "0.0.0-unknown"
#endif

struct ipl_service {
    char *name;
    ipl_config_t *config;
    char *log_level;        /* owned by config */
    char *admin_listen;     /* owned by config; NULL, "" or "off": no admin server */
    char *admin_token_file; /* owned by config; NULL: protected routes on loopback only */
    char *curve_dir;        /* owned by config; NULL or "": ZeroMQ sockets in clear */
    bool curve;             /* ipl_curve_setup succeeded: shut down in destroy */
    ipl_metrics_t *metrics;
    ipl_admin_t *admin;
    bool started; /* start succeeded */
    bool stopped; /* ipl_service_stop ran */
};

ipl_service_t *ipl_service_new(const char *name, const char *summary,
                               const char *default_admin_listen)
{
    assert(name);
    ipl_service_t *self = calloc(1, sizeof *self);
    if (!self) return NULL;
    self->name = strdup(name);
    char program[128];
    snprintf(program, sizeof program, "inferplane-%s", name);
    self->config = ipl_config_new(program, summary ? summary : "");
    if (!self->name || !self->config) {
        ipl_service_destroy(&self);
        return NULL;
    }
    ipl_config_add(self->config, "log-level", IPL_OPT_STR, &self->log_level, "info",
                   "log level: debug|info|warn|error|off");
    ipl_config_add(self->config, "admin-listen", IPL_OPT_STR, &self->admin_listen,
                   default_admin_listen,
                   "admin HTTP address (/healthz /readyz /metrics /version); \"off\" disables it");
    ipl_config_add(self->config, "admin-token-file", IPL_OPT_STR, &self->admin_token_file, NULL,
                   "file of the admin token(s), one per line (e.g. a mounted Secret; reloaded "
                   "when it changes): every admin route but /healthz /readyz /metrics /version "
                   "then needs \"Authorization: Bearer TOKEN\". Unset: those routes answer "
                   "loopback clients only (docs/security.md)");
    ipl_config_add(self->config, "curve-dir", IPL_OPT_STR, &self->curve_dir, NULL,
                   "directory of the cluster's CURVE certificate (cluster.key, cluster.key_secret; "
                   "e.g. a mounted Secret; make one with \"inferplanectl curve-keygen DIR\") and "
                   "of the public certificates allowed to connect: every control-plane ZeroMQ "
                   "socket is then encrypted and authenticated. Unset: in clear, as before "
                   "(docs/security.md)");
    return self;
}

void ipl_service_destroy(ipl_service_t **self_p)
{
    assert(self_p);
    ipl_service_t *self = *self_p;
    if (!self) return;
    ipl_service_stop(self);
    if (self->curve) ipl_curve_shutdown(); /* after the service's sockets: see ipl_curve.h */
    ipl_metrics_destroy(&self->metrics);
    ipl_config_destroy(&self->config);
    free(self->name);
    free(self);
    *self_p = NULL;
}

void ipl_service_stop(ipl_service_t *self)
{
    assert(self);
    ipl_admin_destroy(&self->admin);
    if (self->started && !self->stopped) IPL_INFO("stopped", NULL);
    self->stopped = true;
}

ipl_config_t *ipl_service_config(ipl_service_t *self)
{
    return self->config;
}

ipl_admin_t *ipl_service_admin(ipl_service_t *self)
{
    return self->admin;
}

ipl_metrics_t *ipl_service_metrics(ipl_service_t *self)
{
    return self->metrics;
}

const char *ipl_service_name(const ipl_service_t *self)
{
    return self->name;
}

static bool s_admin_enabled(const ipl_service_t *self)
{
    return self->admin_listen && *self->admin_listen && strcmp(self->admin_listen, "off") != 0;
}

/* Whether an admin address binds loopback only ("127.0.0.1:9101", "[::1]:9101",
 * "localhost:9101"); ":9101" and "9101" bind every interface. */
static bool s_loopback_listen(const char *listen)
{
    return !strncmp(listen, "127.", 4) || !strncmp(listen, "[::1]:", 6) ||
           !strncmp(listen, "localhost:", 10);
}

/* The admin token, if any, and a line saying who may call the protected admin routes. */
static int s_admin_access(ipl_service_t *self)
{
    char quoted[160];
    ipl_log_quote(quoted, sizeof quoted, self->admin_listen);
    if (self->admin_token_file && *self->admin_token_file) {
        char err[600];
        if (ipl_admin_set_token_file(self->admin, self->admin_token_file, err, sizeof err) != 0) {
            fprintf(stderr, "inferplane-%s: %s (from %s)\n", self->name, err,
                    ipl_config_source(self->config, "admin-token-file"));
            return -1;
        }
        IPL_INFO("admin_access", "mode=token admin=%s", quoted);
    } else if (s_loopback_listen(self->admin_listen)) {
        IPL_INFO("admin_access",
                 "mode=loopback admin=%s (no --admin-token-file: /debug and "
                 "other protected routes answer loopback clients only)",
                 quoted);
    } else {
        IPL_WARN("admin_access",
                 "mode=loopback admin=%s hint=\"no --admin-token-file: /debug "
                 "and other protected routes answer loopback clients only (403 to others); set "
                 "one to reach them over the network (docs/security.md)\"",
                 quoted);
    }
    return 0;
}

int ipl_service_start(ipl_service_t *self, int argc, char **argv)
{
    assert(self && !self->started);
    char err[512] = "";
    int rc = ipl_config_parse(self->config, argc, argv, err, sizeof err);
    if (rc == 1) return 1;
    if (rc != 0) {
        fprintf(stderr, "inferplane-%s: %s\n", self->name, err[0] ? err : ipl_strerror(rc));
        return -1;
    }
    ipl_log_level_t level = IPL_LOG_INFO;
    if (self->log_level && ipl_log_level_parse(self->log_level, &level) != 0) {
        fprintf(stderr,
                "inferplane-%s: --log-level \"%s\" (from %s) is not a level: use debug, info, "
                "warn, error or off\n",
                self->name, self->log_level, ipl_config_source(self->config, "log-level"));
        return -1;
    }
    ipl_log_init(self->name, level);
    if (ipl_signal_install() != 0) {
        fprintf(stderr, "inferplane-%s: cannot install signal handlers: %s\n", self->name,
                strerror(errno));
        return -1;
    }
    self->metrics = ipl_metrics_new();
    if (!self->metrics) {
        fprintf(stderr, "inferplane-%s: out of memory\n", self->name);
        return -1;
    }
    ipl_metrics_add_process(self->metrics, self->name);
    if (self->curve_dir && *self->curve_dir) { /* before any socket of the service exists */
        char what[4200], cerr[9000];
        snprintf(what, sizeof what, "--curve-dir \"%s\" (from %s)", self->curve_dir,
                 ipl_config_source(self->config, "curve-dir"));
        if (ipl_curve_setup(self->curve_dir, what, self->metrics, cerr, sizeof cerr) != 0) {
            fprintf(stderr, "inferplane-%s: %s\n", self->name, cerr);
            return -1;
        }
        self->curve = true;
    } else {
        IPL_INFO("curve_off", "hint=\"ZeroMQ sockets in clear: no --curve-dir "
                              "(docs/security.md)\"");
    }
    if (s_admin_enabled(self)) {
        self->admin = ipl_admin_new(self->admin_listen, self->name, self->metrics);
        if (!self->admin) {
            int e = errno;
            const char *src = ipl_config_source(self->config, "admin-listen");
            if (e != EINVAL)
                fprintf(stderr,
                        "inferplane-%s: cannot listen on --admin-listen \"%s\" (from %s): %s; "
                        "pick a local address and a free port, or \"off\"\n",
                        self->name, self->admin_listen, src, strerror(e));
            else
                fprintf(stderr,
                        "inferplane-%s: --admin-listen \"%s\" (from %s) is not an address; "
                        "use host:port, :port or port (e.g. 127.0.0.1:9101), or \"off\"\n",
                        self->name, self->admin_listen, src);
            return -1;
        }
        if (s_admin_access(self) != 0) {
            ipl_admin_destroy(&self->admin);
            return -1;
        }
    }
    self->started = true;
    return 0;
}

int ipl_service_serve(ipl_service_t *self)
{
    assert(self && self->started && !self->stopped && "ipl_service_start first, stop last");
    if (!self->admin) {
        IPL_INFO("started", "version=%s admin=off", IPL_VERSION);
        return 0;
    }
    if (ipl_admin_start(self->admin) != 0) return IPL_E_IO;
    char quoted[160];
    IPL_INFO("started", "version=%s admin=%s admin_port=%d", IPL_VERSION,
             ipl_log_quote(quoted, sizeof quoted, self->admin_listen), ipl_admin_port(self->admin));
    return 0;
}

/*
 * ipl_curve — the process's cluster certificate, and one thread (a zactor) that
 *
 *   - answers ZAP requests on inproc://zeromq.zap.01 (RFC 27): CURVE clients whose public key
 *     is a certificate in DIR get 200, everyone else 400, counted as unknown_key;
 *   - reads the socket monitors of server sockets: a handshake that failed because the peer
 *     spoke no CURVE (mechanism mismatch) is counted as plaintext, any other failed handshake
 *     (wrong server key, garbage) as handshake.
 *
 *   ipl_curve_server(sock) ──zmq_socket_monitor──► inproc://ipl-curve-mon-N ─┐
 *                         (endpoint queued under s_lock)                    │ PAIR, connected
 *   libzmq CURVE handshake ──ZAP request──► REP inproc://zeromq.zap.01 ─────┤ by the thread
 *                                                                           ▼
 *                                         s_actor: poll(pipe, zap, monitors) every 200 ms
 *
 * Why our own ZAP handler rather than czmq's zauth: zauth's certificate store asserts (aborts
 * the process) when two files in the directory hold the same key, which an operator can cause
 * by copying a file; and zauth counts nothing. Certificates are still read with zcert_load.
 */
#include "ipl_curve.h"

#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <czmq.h>

#include "ipl_error.h"
#include "ipl_log.h"

#define S_ZAP_ENDPOINT   "inproc://zeromq.zap.01"
#define S_MAX_MONITORS   64
#define S_RELOAD_MS      1000
#define S_LOG_SECONDS    10
#define S_ZERO_KEY       "0000000000000000000000000000000000000000"

enum { S_PLAINTEXT, S_HANDSHAKE, S_UNKNOWN_KEY, S_NREASONS };
static const char *const s_reason_names[S_NREASONS] = {"plaintext", "handshake", "unknown_key"};

typedef struct {
    char *dir;
    zcert_t *cert;
    zactor_t *actor;
    ipl_metric_t *refused[S_NREASONS];
    atomic_ulong nrefused;
    /* endpoints of monitors to connect, queued by ipl_curve_server, taken by the thread */
    pthread_mutex_t lock;
    char *pending[S_MAX_MONITORS];
    int npending;
    atomic_uint monitors; /* monitors created (names are unique per process) */
    bool zap_bound;       /* the thread bound the ZAP endpoint */
} s_curve_t;

static s_curve_t *s_curve; /* NULL: CURVE off */

/* ---- the allowed keys ------------------------------------------------------------------------ */

typedef struct {
    char (*keys)[41]; /* Z85 public keys, sorted */
    size_t n;
    uint64_t signature; /* of the directory when read */
    uint64_t checked_ms;
} s_allow_t;

static uint64_t s_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* Whether a directory entry names a public certificate: not hidden (Kubernetes keeps the real
 * files in ..data/), not a secret half, a regular file (symlinks followed). */
static bool s_public_file(const char *dir, const char *name, char *path, size_t size,
                          struct stat *st)
{
    size_t len = strlen(name);
    if (name[0] == '.' || (len >= 7 && !strcmp(name + len - 7, "_secret"))) return false;
    if ((size_t)snprintf(path, size, "%s/%s", dir, name) >= size) return false;
    return stat(path, st) == 0 && S_ISREG(st->st_mode);
}

/* A cheap fingerprint of what s_allow_load would read: names, sizes, times. */
static uint64_t s_dir_signature(const char *dir)
{
    uint64_t sig = 1469598103934665603ull;
    DIR *d = opendir(dir);
    if (!d) return 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        char path[4096];
        struct stat st;
        if (!s_public_file(dir, e->d_name, path, sizeof path, &st)) continue;
        uint64_t h = 1469598103934665603ull;
        for (const char *p = e->d_name; *p; p++) h = (h ^ (uint8_t)*p) * 1099511628211ull;
        h ^= (uint64_t)st.st_size * 0x9e3779b97f4a7c15ull;
        h ^= (uint64_t)st.st_mtim.tv_sec * 1000000007ull + (uint64_t)st.st_mtim.tv_nsec;
        sig += h * 0xff51afd7ed558ccdull; /* order-independent */
    }
    closedir(d);
    return sig;
}

static int s_key_cmp(const void *a, const void *b)
{
    return memcmp(a, b, 40);
}

/* Reads every public certificate in dir. Files that are not certificates are skipped (logged
 * at debug); duplicates are harmless. */
static void s_allow_load(s_allow_t *allow, const char *dir)
{
    allow->signature = s_dir_signature(dir);
    allow->n = 0;
    DIR *d = opendir(dir);
    if (!d) {
        IPL_LOG_EVERY(S_LOG_SECONDS, IPL_LOG_ERROR, "curve_keys_unreadable", "dir=%s error=\"%s\"",
                      dir, strerror(errno));
        return;
    }
    struct dirent *e;
    size_t skipped = 0;
    while ((e = readdir(d))) {
        char path[4096];
        struct stat st;
        if (!s_public_file(dir, e->d_name, path, sizeof path, &st)) continue;
        if (st.st_size > 65536) continue; /* not a certificate */
        if (allow->n == IPL_CURVE_MAX_KEYS) {
            skipped++;
            continue;
        }
        zcert_t *cert = zcert_load(path);
        if (!cert) {
            IPL_DEBUG("curve_key_skipped", "file=%s reason=not_a_certificate", path);
            continue;
        }
        memcpy(allow->keys[allow->n++], zcert_public_txt(cert), 41);
        zcert_destroy(&cert);
    }
    closedir(d);
    if (skipped)
        IPL_WARN("curve_keys_limit", "dir=%s max=%d ignored=%zu", dir, IPL_CURVE_MAX_KEYS,
                 skipped);
    qsort(allow->keys, allow->n, sizeof allow->keys[0], s_key_cmp);
    IPL_INFO("curve_keys_loaded", "dir=%s keys=%zu", dir, allow->n);
}

static bool s_allowed(s_allow_t *allow, const char *dir, const char *key)
{
    uint64_t now = s_now_ms();
    if (now - allow->checked_ms >= S_RELOAD_MS) {
        allow->checked_ms = now;
        if (s_dir_signature(dir) != allow->signature) s_allow_load(allow, dir);
    }
    return bsearch(key, allow->keys, allow->n, sizeof allow->keys[0], s_key_cmp) != NULL;
}

/* ---- counting --------------------------------------------------------------------------------- */

static void s_refuse(s_curve_t *c, int reason, const char *detail)
{
    atomic_fetch_add(&c->nrefused, 1);
    if (c->refused[reason]) ipl_metric_inc(c->refused[reason]);
    /* one window per reason, so that a storm of one kind does not hide the other */
    static ipl_log_limiter_t limiter[S_NREASONS];
    unsigned long suppressed;
    if (ipl_log_limiter_pass(&limiter[reason], S_LOG_SECONDS, &suppressed))
        ipl_log_suppressed(IPL_LOG_WARN, suppressed, "zmq_auth_refused", "reason=%s %s",
                           s_reason_names[reason], detail);
}

/* ---- the thread ------------------------------------------------------------------------------- */

/* One ZAP request → one reply. Frames (RFC 27): version, request id, domain, address, routing
 * id, mechanism, credentials... */
static void s_zap(s_curve_t *c, zsock_t *zap, s_allow_t *allow)
{
    zmsg_t *req = zmsg_recv(zap);
    if (!req) return;
    char *version = zmsg_popstr(req), *id = zmsg_popstr(req), *domain = zmsg_popstr(req),
         *address = zmsg_popstr(req), *routing = zmsg_popstr(req), *mechanism = zmsg_popstr(req);
    zframe_t *key = zmsg_pop(req);
    char key_txt[41] = "";
    if (key && zframe_size(key) == 32) zmq_z85_encode(key_txt, zframe_data(key), 32);
    bool ok = mechanism && !strcmp(mechanism, "CURVE") && key_txt[0] &&
              s_allowed(allow, c->dir, key_txt);
    if (!ok) {
        char detail[256], q[64];
        snprintf(detail, sizeof detail, "address=%s mechanism=%s key=%s",
                 ipl_log_quote(q, sizeof q, address ? address : ""), mechanism ? mechanism : "-",
                 key_txt[0] ? key_txt : "-");
        s_refuse(c, S_UNKNOWN_KEY, detail);
    }
    zmsg_t *rep = zmsg_new();
    zmsg_addstr(rep, "1.0");
    zmsg_addstr(rep, id ? id : "");
    zmsg_addstr(rep, ok ? "200" : "400");
    zmsg_addstr(rep, ok ? "OK" : "key not allowed");
    zmsg_addstr(rep, ok ? key_txt : ""); /* user id */
    zmsg_addmem(rep, "", 0);            /* metadata */
    zmsg_send(&rep, zap);
    zframe_destroy(&key);
    free(version), free(id), free(domain), free(address), free(routing), free(mechanism);
    zmsg_destroy(&req);
}

/* One monitor event: [uint16 event, uint32 value], [endpoint]. Returns false when the monitor
 * stopped (its socket closed). */
static bool s_monitor_event(s_curve_t *c, void *pair)
{
    zmq_msg_t part[2];
    int kept = 0;
    zmq_msg_init(&part[0]);
    zmq_msg_init(&part[1]);
    bool alive = true;
    if (zmq_msg_recv(&part[0], pair, ZMQ_DONTWAIT) < 0) goto done;
    kept = 1;
    if (zmq_msg_more(&part[0]) && zmq_msg_recv(&part[1], pair, 0) >= 0) kept = 2;
    while (zmq_msg_more(&part[kept - 1])) { /* never more than two frames; drain anyway */
        zmq_msg_t extra;
        zmq_msg_init(&extra);
        int more = zmq_msg_recv(&extra, pair, 0) >= 0 && zmq_msg_more(&extra);
        zmq_msg_close(&extra);
        if (!more) break;
    }
    if (zmq_msg_size(&part[0]) != 6) goto done;
    uint16_t event;
    uint32_t value;
    memcpy(&event, zmq_msg_data(&part[0]), 2);
    memcpy(&value, (uint8_t *)zmq_msg_data(&part[0]) + 2, 4);
    if (event == ZMQ_EVENT_MONITOR_STOPPED) {
        alive = false;
        goto done;
    }
    char endpoint[160] = "", detail[200];
    if (kept == 2)
        snprintf(endpoint, sizeof endpoint, "%.*s", (int)zmq_msg_size(&part[1]),
                 (const char *)zmq_msg_data(&part[1]));
    snprintf(detail, sizeof detail, "socket=%s event=%u error=%u", endpoint[0] ? endpoint : "-",
             event, value);
    if (event == ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL &&
        value == ZMQ_PROTOCOL_ERROR_ZMTP_MECHANISM_MISMATCH)
        s_refuse(c, S_PLAINTEXT, detail);
    else if (event == ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL ||
             event == ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL)
        s_refuse(c, S_HANDSHAKE, detail);
    /* ZMQ_EVENT_HANDSHAKE_FAILED_AUTH: the ZAP handler counted it */
done:
    zmq_msg_close(&part[0]);
    zmq_msg_close(&part[1]);
    return alive;
}

static void s_actor(zsock_t *pipe, void *arg)
{
    s_curve_t *c = arg;
    s_allow_t allow = {.keys = calloc(IPL_CURVE_MAX_KEYS, 41)};
    zsock_t *zap = zsock_new(ZMQ_REP);
    /* a previous handler's inproc name is released asynchronously (setup after shutdown) */
    for (int i = 0; zap && allow.keys && i < 100; i++) {
        if (zsock_bind(zap, S_ZAP_ENDPOINT) == 0) {
            c->zap_bound = true;
            break;
        }
        zclock_sleep(10);
    }
    if (c->zap_bound) {
        s_allow_load(&allow, c->dir);
        allow.checked_ms = s_now_ms();
    }
    zsock_signal(pipe, 0);
    void *monitors[S_MAX_MONITORS];
    int nmonitors = 0;
    while (c->zap_bound) {
        pthread_mutex_lock(&c->lock);
        for (int i = 0; i < c->npending; i++) {
            void *pair = zsys_socket(ZMQ_PAIR, NULL, 0);
            if (pair && zmq_connect(pair, c->pending[i]) == 0 && nmonitors < S_MAX_MONITORS)
                monitors[nmonitors++] = pair;
            else if (pair)
                zsys_close(pair, NULL, 0);
            free(c->pending[i]);
        }
        c->npending = 0;
        pthread_mutex_unlock(&c->lock);

        zmq_pollitem_t items[2 + S_MAX_MONITORS] = {
            {zsock_resolve(pipe), 0, ZMQ_POLLIN, 0}, {zsock_resolve(zap), 0, ZMQ_POLLIN, 0}};
        for (int i = 0; i < nmonitors; i++)
            items[2 + i] = (zmq_pollitem_t){monitors[i], 0, ZMQ_POLLIN, 0};
        int rc = zmq_poll(items, 2 + nmonitors, 200);
        if (rc < 0 && zmq_errno() != EINTR) break;
        if (rc <= 0) continue;
        if (items[0].revents & ZMQ_POLLIN) break; /* $TERM: the only message we get */
        if (items[1].revents & ZMQ_POLLIN) s_zap(c, zap, &allow);
        for (int i = nmonitors - 1; i >= 0; i--)
            if ((items[2 + i].revents & ZMQ_POLLIN) && !s_monitor_event(c, monitors[i])) {
                zsys_close(monitors[i], NULL, 0);
                monitors[i] = monitors[--nmonitors];
            }
    }
    for (int i = 0; i < nmonitors; i++) zsys_close(monitors[i], NULL, 0);
    zsock_destroy(&zap);
    free(allow.keys);
    if (!c->zap_bound) return; /* setup saw it, the pipe is read by nobody else */
    /* wait for $TERM if we left the loop on an error, so that zactor_destroy returns */
    char *cmd = zstr_recv(pipe);
    free(cmd);
}

/* ---- the certificate -------------------------------------------------------------------------- */

/* Loads DIR/cluster.key_secret and checks it. */
static zcert_t *s_load_cert(const char *dir, const char *what, char *err, size_t errlen)
{
    char path[4096], secret[4200];
    snprintf(path, sizeof path, "%s/%s", dir, IPL_CURVE_CERT);
    snprintf(secret, sizeof secret, "%s_secret", path);
    if (access(secret, R_OK) != 0) {
        snprintf(err, errlen,
                 "%s: cannot read the cluster certificate %s: %s; create it with "
                 "\"inferplanectl curve-keygen %s\" (docs/security.md)",
                 what, secret, strerror(errno), dir);
        return NULL;
    }
    zcert_t *cert = zcert_load(path);
    char derived[41] = "";
    if (cert && strcmp(zcert_secret_txt(cert), S_ZERO_KEY) != 0)
        zmq_curve_public(derived, zcert_secret_txt(cert));
    if (!cert || !derived[0] || strcmp(derived, zcert_public_txt(cert)) != 0) {
        snprintf(err, errlen,
                 "%s: %s is not a CURVE certificate whose public-key matches its secret-key; "
                 "write a new one with \"inferplanectl curve-keygen --force %s\"",
                 what, secret, dir);
        zcert_destroy(&cert);
        return NULL;
    }
    return cert;
}

/* ---- public ----------------------------------------------------------------------------------- */

int ipl_curve_setup(const char *dir, const char *what, ipl_metrics_t *metrics, char *err,
                    size_t errlen)
{
    char what_buf[4200];
    if (!what) what = "the CURVE directory";
    if (s_curve) {
        snprintf(err, errlen, "%s: CURVE is already set up in this process", what);
        return IPL_E_INVAL;
    }
    if (!dir || !*dir) {
        snprintf(err, errlen, "%s: no directory given", what);
        return IPL_E_INVAL;
    }
    if (!zmq_has("curve")) {
        snprintf(err, errlen,
                 "%s: this libzmq was built without CURVE (libsodium); install a libzmq with it "
                 "or leave CURVE off",
                 what);
        return IPL_E_INVAL;
    }
    snprintf(what_buf, sizeof what_buf, "%s", what);
    zcert_t *cert = s_load_cert(dir, what_buf, err, errlen);
    if (!cert) return IPL_E_IO;
    s_curve_t *c = calloc(1, sizeof *c);
    if (!c || !(c->dir = strdup(dir))) {
        free(c);
        zcert_destroy(&cert);
        snprintf(err, errlen, "out of memory");
        return IPL_E_NOMEM;
    }
    c->cert = cert;
    pthread_mutex_init(&c->lock, NULL);
    for (int r = 0; metrics && r < S_NREASONS; r++) {
        char labels[64];
        snprintf(labels, sizeof labels, "reason=\"%s\"", s_reason_names[r]);
        c->refused[r] = ipl_metrics_counter(
            metrics, IPL_CURVE_REFUSED_METRIC,
            "ZeroMQ connections refused by CURVE authentication, by reason: plaintext (the "
            "peer spoke no CURVE), handshake (wrong server key or garbage), unknown_key (a "
            "client key not in --curve-dir).",
            labels);
    }
    if (metrics)
        ipl_metric_set(ipl_metrics_gauge(metrics, "inferplane_zmq_curve_enabled",
                                         "1 when the process's ZeroMQ sockets use CURVE "
                                         "(--curve-dir).",
                                         NULL),
                       1);
    c->actor = zactor_new(s_actor, c);
    if (!c->actor || !c->zap_bound) {
        snprintf(err, errlen,
                 "%s: cannot start the ZAP handler on %s (another ZAP handler in this "
                 "process?)",
                 what, S_ZAP_ENDPOINT);
        zactor_destroy(&c->actor);
        pthread_mutex_destroy(&c->lock);
        zcert_destroy(&c->cert);
        free(c->dir);
        free(c);
        return IPL_E_IO;
    }
    s_curve = c;
    IPL_INFO("curve_on", "dir=%s public_key=%s", dir, zcert_public_txt(cert));
    return IPL_OK;
}

void ipl_curve_shutdown(void)
{
    s_curve_t *c = s_curve;
    if (!c) return;
    s_curve = NULL;
    zactor_destroy(&c->actor);
    for (int i = 0; i < c->npending; i++) free(c->pending[i]);
    pthread_mutex_destroy(&c->lock);
    zcert_destroy(&c->cert);
    free(c->dir);
    free(c);
}

bool ipl_curve_enabled(void)
{
    return s_curve != NULL;
}

const char *ipl_curve_public_key(void)
{
    return s_curve ? zcert_public_txt(s_curve->cert) : NULL;
}

unsigned long ipl_curve_refused(void)
{
    return s_curve ? atomic_load(&s_curve->nrefused) : 0;
}

/* Fail closed (ipl_curve.h): a socket that was to be CURVE must not work in clear. */
static void s_failed(const char *role)
{
    IPL_ERROR("curve_socket_failed", "role=%s error=\"%s\"", role, zmq_strerror(zmq_errno()));
    abort();
}

void ipl_curve_server(void *sock)
{
    s_curve_t *c = s_curve;
    if (!c || !sock) return; /* NULL: the caller's zsock_new failed, it handles that */
    void *raw = zsock_resolve(sock);
    zcert_apply(c->cert, sock);
    int on = 1;
    if (zmq_setsockopt(raw, ZMQ_ZAP_DOMAIN, IPL_CURVE_DOMAIN, strlen(IPL_CURVE_DOMAIN)) != 0 ||
        zmq_setsockopt(raw, ZMQ_CURVE_SERVER, &on, sizeof on) != 0)
        s_failed("server");
    char endpoint[64];
    snprintf(endpoint, sizeof endpoint, "inproc://ipl-curve-mon-%u",
             atomic_fetch_add(&c->monitors, 1) + 1);
    pthread_mutex_lock(&c->lock);
    bool room = c->npending < S_MAX_MONITORS;
    if (room &&
        zmq_socket_monitor(raw, endpoint,
                           ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL |
                               ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL) == 0)
        c->pending[c->npending++] = strdup(endpoint); /* NULL: not monitored, still secure */
    pthread_mutex_unlock(&c->lock);
}

void ipl_curve_client(void *sock)
{
    s_curve_t *c = s_curve;
    if (!c || !sock) return; /* NULL: the caller's zsock_new failed, it handles that */
    zcert_apply(c->cert, sock);
    const char *key = zcert_public_txt(c->cert);
    if (zmq_setsockopt(zsock_resolve(sock), ZMQ_CURVE_SERVERKEY, key, 40) != 0)
        s_failed("client");
}

int ipl_curve_keygen(const char *dir, bool force, char *err, size_t errlen)
{
    char path[4096], secret[4200];
    if (!dir || !*dir || (size_t)snprintf(path, sizeof path, "%s/%s", dir, IPL_CURVE_CERT) >=
                             sizeof path) {
        snprintf(err, errlen, "curve-keygen: give a directory");
        return IPL_E_INVAL;
    }
    snprintf(secret, sizeof secret, "%s_secret", path);
    if (mkdir(dir, 0700) != 0 && errno != EEXIST) {
        snprintf(err, errlen, "curve-keygen: cannot create %s: %s", dir, strerror(errno));
        return IPL_E_IO;
    }
    if (!force && (access(path, F_OK) == 0 || access(secret, F_OK) == 0)) {
        snprintf(err, errlen,
                 "curve-keygen: %s already holds a cluster certificate (%s); pass --force to "
                 "replace it (every process must then get the new one)",
                 dir, IPL_CURVE_CERT);
        return IPL_E_INVAL;
    }
    zcert_t *cert = zcert_new();
    if (!cert) {
        snprintf(err, errlen, "curve-keygen: cannot make a key pair");
        return IPL_E_NOMEM;
    }
    zcert_set_meta(cert, "name", "inferplane-cluster");
    zcert_set_meta(cert, "created-by", "inferplanectl curve-keygen");
    int rc = zcert_save(cert, path);
    zcert_destroy(&cert);
    if (rc != 0 || chmod(secret, 0600) != 0) {
        snprintf(err, errlen, "curve-keygen: cannot write %s: %s", path, strerror(errno));
        return IPL_E_IO;
    }
    return IPL_OK;
}

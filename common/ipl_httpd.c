/*
 * ipl_httpd — libmicrohttpd (MHD) with a route table, buffered and streamed responses.
 *
 * Request life cycle (one MHD connection thread per connection):
 *
 *   1st access call   headers known: match the route (404, 405), check Content-Length
 *                     against max_body (413)
 *   n access calls    body chunks appended to req->body, or dropped when the request is
 *                     refused or grows past max_body (a refusal is sent after the body, so
 *                     that clients sending it all before reading still see the answer)
 *   last access call  run the handler, turn ipl_http_resp_t into an MHD response, queue it
 *   completed         s_completed frees the request
 *
 * Streams: the handler gets the write end of a pipe; the response reads the other end through
 * s_stream_read, which polls three things: the pipe (data / EOF), the client socket (hang-up →
 * end the response, MHD closes the connection, the read end is closed, the writer gets EPIPE)
 * and the server's stop pipe (written by ipl_httpd_destroy so that MHD_stop_daemon never waits
 * for a producer). MHD_create_response_from_pipe is not used because MHD's pipe reader blocks
 * in read(2) and so could hang shutdown and miss client hang-ups while the producer is idle.
 * A stream with a pump (ipl_http_resp_stream_pump) has no producer thread: when the pipe is
 * empty, s_stream_read runs the pump on the connection's thread instead of polling the pipe,
 * and looks at the stop pipe and the client only after a pump round that wrote nothing.
 *
 * The listening socket is created and bound by ipl_httpd_new (so that a bad or busy address is
 * an error at construction and the port is known before serving) and handed to MHD with
 * MHD_OPTION_LISTEN_SOCKET by ipl_httpd_start.
 *
 * Connections (ipl_conns): MHD's accept policy callback asks the table whether a connection
 * may come in (limits), its connection notifications open and close the table's entries, the
 * URI log callback (the request line is in) marks a connection READING, the first access call
 * (the head is in) BODY, the last one ACTIVE and the completion IDLE; the table's watchdog shuts
 * down those past their deadline. MHD's own connection limit sits above the table's, so that MHD
 * never stops accepting (it would leave new connections waiting in the backlog instead of refusing
 * them).
 *
 * Draining: MHD_quiesce_daemon stops MHD accepting, and shutdown(2) of the listening socket
 * makes the kernel refuse new connections (MHD's duplicate of it stays open until
 * MHD_stop_daemon, as MHD requires); the table shuts idle connections down; a request whose
 * head arrives later gets the drain answer, and every response carries Connection: close.
 *
 * Framing (RFC 9112 6.3): Transfer-Encoding other than exactly "chunked", Transfer-Encoding
 * beside Content-Length, and several Content-Length headers are refused with 400 and the
 * connection closed (a request-smuggling shape); so is HTTP/1.1 without Host. A chunked body
 * that grows past max_body (or a refused body past S_DRAIN_LIMIT) cannot be answered through
 * MHD before it ends (MHD queues responses only before or after the body), so the 413 is
 * written on the socket directly (s_refuse_now), followed by a lingering close.
 */
#include "ipl_httpd.h"

#include <arpa/inet.h>
#include <assert.h>
#include <cjson/cJSON.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <microhttpd.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include "ipl_clock.h"
#include "ipl_conns.h"
#include "ipl_error.h"
#include "ipl_log.h"

#define S_DEFAULT_MAX_BODY (1024 * 1024)
#define S_STREAM_BLOCK     16384
#define S_PUMP_SLICE_MS    100 /* a pump round's longest wait: stop and hang-up checks */
#define S_LISTEN_BACKLOG   256
#define S_DRAIN_LIMIT      (64ull * 1024 * 1024) /* most body bytes read to answer 413 */
#define S_LINGER_MS        3000 /* after a 413 sent mid-body: how long the rest is read */
#define S_FDS_PER_CONN     4    /* client socket, a stream's pipe, its upstream connection */
#define S_FDS_RESERVE      512  /* descriptors for everything but the connections */
#define S_MHD_SLACK        16   /* MHD's limit above the table's (closing connections) */

typedef struct {
    char *method; /* "GET", "POST", ... or "*" */
    char *path;   /* without the trailing '*' of a prefix route */
    size_t path_len;
    bool prefix;
    ipl_http_handler_fn *fn;
    void *arg;
} s_route_t;

struct ipl_httpd {
    struct MHD_Daemon *daemon;
    int listen_fd;
    int family;
    int port;
    char listen[128]; /* as given, for logs */
    size_t max_body;
    size_t max_header, max_url;   /* ipl_httpd_limits (0: unchecked) */
    ipl_conns_config_t conns_cfg; /* ipl_httpd_connections */
    ipl_conns_t *conns;           /* made by ipl_httpd_start */
    ipl_metrics_t *metrics;       /* ipl_httpd_metrics (borrowed), or NULL */
    char metrics_prefix[64];
    ipl_http_handler_fn *drain_fn; /* answers requests that arrive while draining */
    int quiesced_fd;               /* MHD's listening socket after MHD_quiesce_daemon, or -1 */
    void *drain_arg;
    s_route_t *routes;
    size_t nroutes;
    size_t routes_cap;
    int stop_pipe[2]; /* the read end becomes readable when destroy begins */
    /* ipl_httpd_guard: run before every handler, or NULL */
    ipl_http_guard_fn *guard;
    void *guard_arg;
};

typedef struct {
    char *name;
    char *value;
} s_header_t;

struct ipl_http_resp {
    int status; /* 0: nothing set yet */
    char *content_type;
    char *body; /* malloc'd, may be NULL when len == 0 */
    size_t len;
    int stream_fd;        /* read end of a streamed response, or -1 */
    ipl_http_pump_t pump; /* pump.pump: the stream's producer runs in s_stream_read */
    s_header_t *headers;
    size_t nheaders;
    size_t headers_cap;
};

struct ipl_http_req {
    struct MHD_Connection *conn;
    const char *method; /* owned by MHD, valid for the request */
    const char *path;
    const s_route_t *route;
    char *body;
    size_t len;
    size_t cap;
    bool answered;  /* a response was queued */
    bool drop_body; /* refused: the body is read and dropped */
    size_t dropped; /* body bytes dropped */
    int err_status; /* 404, 405, 413: answered with err_msg instead of running a handler */
    char err_msg[256];
    char allow[128]; /* methods for a 405 */
    bool close;      /* a framing error: the connection is closed after the answer */
    bool chunked;    /* the body comes chunked (its size is known only at its end) */
    bool draining;   /* it arrived while draining: the drain answer */
};

typedef struct {
    int fd;        /* read end of the pipe; closed by s_stream_free */
    int stop_fd;   /* the server's stop pipe (borrowed) */
    int client_fd; /* the connection's socket (borrowed), or -1 */
    ipl_http_pump_t pump;
} s_stream_t;

/* ---------------------------------------------------------------------------------------- */
/* Listen address                                                                            */

/* Splits "host:port", ":port", "port" or "[v6]:port" into host and port. An empty host
 * means every interface (0.0.0.0). */
static int s_split_listen(const char *listen, char *host, size_t hostsz, char *port, size_t portsz)
{
    if (!listen || !*listen) return IPL_E_INVAL;
    const char *h = "", *p = listen;
    size_t hlen = 0;
    if (listen[0] == '[') {
        const char *end = strchr(listen, ']');
        if (!end || end[1] != ':') return IPL_E_INVAL;
        h = listen + 1;
        hlen = (size_t)(end - h);
        p = end + 2;
        if (hlen == 0) return IPL_E_INVAL;
    } else {
        const char *colon = strrchr(listen, ':');
        if (colon) {
            if (memchr(listen, ':', (size_t)(colon - listen)))
                return IPL_E_INVAL; /* an IPv6 address needs brackets */
            h = listen;
            hlen = (size_t)(colon - listen);
            p = colon + 1;
        }
    }
    size_t plen = strlen(p);
    if (plen == 0 || plen > 5 || hlen + 1 > hostsz || plen + 1 > portsz) return IPL_E_INVAL;
    for (size_t i = 0; i < plen; i++)
        if (!isdigit((unsigned char)p[i])) return IPL_E_INVAL;
    if (atol(p) > 65535) return IPL_E_INVAL;
    if (hlen == 0)
        snprintf(host, hostsz, "0.0.0.0");
    else
        snprintf(host, hostsz, "%.*s", (int)hlen, h);
    snprintf(port, portsz, "%s", p);
    return 0;
}

/* Creates, binds and listens; fills self->listen_fd, family and port. Logs on failure. */
static int s_bind(ipl_httpd_t *self, const char *addr)
{
    char host[256], port[8], quoted[160];
    ipl_log_quote(quoted, sizeof quoted, addr ? addr : "");
    if (s_split_listen(addr, host, sizeof host, port, sizeof port) != 0) {
        IPL_ERROR("http_listen_invalid", "addr=%s hint=\"expected host:port, :port or port\"",
                  quoted);
        errno = EINVAL;
        return IPL_E_INVAL;
    }
    struct addrinfo hints = {0}, *res = NULL;
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
    int gai = getaddrinfo(host, port, &hints, &res);
    if (gai != 0) {
        char why[128];
        IPL_ERROR("http_listen_failed", "addr=%s error=%s", quoted,
                  ipl_log_quote(why, sizeof why, gai_strerror(gai)));
        errno = EADDRNOTAVAIL; /* not a local address */
        return IPL_E_IO;
    }
    int err = 0;
    for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
        int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
        if (fd < 0) {
            err = errno;
            continue;
        }
        int one = 1;
        (void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (bind(fd, ai->ai_addr, ai->ai_addrlen) != 0 || listen(fd, S_LISTEN_BACKLOG) != 0) {
            err = errno;
            close(fd);
            continue;
        }
        struct sockaddr_storage ss;
        socklen_t sl = sizeof ss;
        if (getsockname(fd, (struct sockaddr *)&ss, &sl) != 0) {
            err = errno;
            close(fd);
            continue;
        }
        self->listen_fd = fd;
        self->family = ss.ss_family;
        self->port = ss.ss_family == AF_INET6 ? ntohs(((struct sockaddr_in6 *)&ss)->sin6_port)
                                              : ntohs(((struct sockaddr_in *)&ss)->sin_port);
        break;
    }
    freeaddrinfo(res);
    if (self->listen_fd < 0) {
        char why[128];
        IPL_ERROR("http_listen_failed", "addr=%s error=%s", quoted,
                  ipl_log_quote(why, sizeof why, strerror(err ? err : EADDRNOTAVAIL)));
        errno = err ? err : EADDRNOTAVAIL;
        return IPL_E_IO;
    }
    return 0;
}

/* ---------------------------------------------------------------------------------------- */
/* Server                                                                                    */

ipl_httpd_t *ipl_httpd_new(const char *listen, size_t max_body)
{
    ipl_httpd_t *self = calloc(1, sizeof *self);
    if (!self) return NULL;
    self->listen_fd = -1;
    self->quiesced_fd = -1;
    self->stop_pipe[0] = self->stop_pipe[1] = -1;
    self->max_body = max_body ? max_body : S_DEFAULT_MAX_BODY;
    self->conns_cfg = IPL_CONNS_DEFAULTS;
    snprintf(self->listen, sizeof self->listen, "%s", listen ? listen : "");
    if (pipe2(self->stop_pipe, O_CLOEXEC | O_NONBLOCK) != 0 || s_bind(self, listen) != 0) {
        int err = errno;
        ipl_httpd_destroy(&self);
        errno = err;
        return NULL;
    }
    return self;
}

void ipl_httpd_destroy(ipl_httpd_t **self_p)
{
    assert(self_p);
    ipl_httpd_t *self = *self_p;
    if (!self) return;
    if (self->daemon) {
        /* Wake every stream reader first: MHD_stop_daemon joins the connection threads (it
         * also shuts their sockets down, which s_stream_read sees too; this does not rely on
         * it). The pipe is non-blocking and written once, so the write cannot fail. */
        ssize_t rc = write(self->stop_pipe[1], "x", 1);
        (void)rc;
        MHD_stop_daemon(self->daemon);
        IPL_DEBUG("http_stopped", "port=%d", self->port);
    }
    if (self->quiesced_fd >= 0) close(self->quiesced_fd); /* MHD's copy, handed back */
    ipl_conns_destroy(&self->conns); /* after MHD: every connection has been closed */
    if (self->listen_fd >= 0) close(self->listen_fd);
    for (int i = 0; i < 2; i++)
        if (self->stop_pipe[i] >= 0) close(self->stop_pipe[i]);
    for (size_t i = 0; i < self->nroutes; i++) {
        free(self->routes[i].method);
        free(self->routes[i].path);
    }
    free(self->routes);
    free(self);
    *self_p = NULL;
}

void ipl_httpd_route(ipl_httpd_t *self, const char *method, const char *path,
                     ipl_http_handler_fn *fn, void *arg)
{
    if (!self) return; /* no server (e.g. the admin server is switched off) */
    assert(method && path && fn);
    assert(!self->daemon && "register routes before ipl_httpd_start");
    if (self->nroutes == self->routes_cap) {
        size_t cap = self->routes_cap ? self->routes_cap * 2 : 8;
        s_route_t *routes = realloc(self->routes, cap * sizeof *routes);
        assert(routes);
        self->routes = routes;
        self->routes_cap = cap;
    }
    s_route_t *r = &self->routes[self->nroutes++];
    size_t len = strlen(path);
    r->prefix = len > 0 && path[len - 1] == '*';
    r->path_len = r->prefix ? len - 1 : len;
    r->path = strndup(path, r->path_len);
    r->method = strdup(method);
    assert(r->path && r->method);
    r->fn = fn;
    r->arg = arg;
}

void ipl_httpd_guard(ipl_httpd_t *self, ipl_http_guard_fn *fn, void *arg)
{
    if (!self) return;
    assert(!self->daemon && "set the guard before ipl_httpd_start");
    self->guard = fn;
    self->guard_arg = arg;
}

void ipl_httpd_limits(ipl_httpd_t *self, size_t max_header_bytes, size_t max_url_bytes)
{
    if (!self) return;
    assert(!self->daemon && "set limits before ipl_httpd_start");
    self->max_header = max_header_bytes;
    self->max_url = max_url_bytes;
}

void ipl_httpd_connections(ipl_httpd_t *self, const ipl_conns_config_t *config)
{
    if (!self) return;
    assert(config && !self->daemon && "set connection limits before ipl_httpd_start");
    self->conns_cfg = *config;
    if (self->conns_cfg.max_connections <= 0)
        self->conns_cfg.max_connections = IPL_CONNS_DEFAULT_MAX;
}

void ipl_httpd_metrics(ipl_httpd_t *self, ipl_metrics_t *metrics, const char *prefix)
{
    if (!self) return;
    assert(metrics && prefix && !self->daemon && "register metrics before ipl_httpd_start");
    self->metrics = metrics;
    snprintf(self->metrics_prefix, sizeof self->metrics_prefix, "%s", prefix);
}

void ipl_httpd_drain_handler(ipl_httpd_t *self, ipl_http_handler_fn *fn, void *arg)
{
    if (!self) return;
    assert(!self->daemon && "set the drain handler before ipl_httpd_start");
    self->drain_fn = fn;
    self->drain_arg = arg;
}

void ipl_httpd_drain(ipl_httpd_t *self)
{
    if (!self || !self->daemon || ipl_conns_draining(self->conns)) return;
    /* MHD's copy of the listening socket must stay open until MHD_stop_daemon; shutting
     * ours down stops the kernel completing connections on it (they are refused). */
    self->quiesced_fd = MHD_quiesce_daemon(self->daemon); /* ours to close, after the stop */
    if (self->listen_fd >= 0) (void)shutdown(self->listen_fd, SHUT_RDWR);
    ipl_conns_drain(self->conns);
    IPL_DEBUG("http_draining", "port=%d in_flight=%zu", self->port,
              ipl_conns_inflight(self->conns));
}

size_t ipl_httpd_inflight(const ipl_httpd_t *self)
{
    return self && self->conns ? ipl_conns_inflight(self->conns) : 0;
}

int ipl_httpd_port(const ipl_httpd_t *self)
{
    return self ? self->port : 0;
}

/* ---------------------------------------------------------------------------------------- */
/* Responses                                                                                 */

static void s_resp_reset_body(ipl_http_resp_t *resp)
{
    free(resp->body);
    resp->body = NULL;
    resp->len = 0;
    free(resp->content_type);
    resp->content_type = NULL;
    if (resp->stream_fd >= 0) {
        close(resp->stream_fd);
        resp->stream_fd = -1;
    }
    if (resp->pump.release) resp->pump.release(resp->pump.arg); /* never queued */
    resp->pump = (ipl_http_pump_t){0};
}

static void s_resp_free(ipl_http_resp_t *resp)
{
    s_resp_reset_body(resp);
    for (size_t i = 0; i < resp->nheaders; i++) {
        free(resp->headers[i].name);
        free(resp->headers[i].value);
    }
    free(resp->headers);
}

void ipl_http_resp_take(ipl_http_resp_t *resp, int status, const char *content_type, char **body_p,
                        size_t len)
{
    assert(resp && body_p);
    s_resp_reset_body(resp);
    resp->status = status;
    resp->content_type = content_type ? strdup(content_type) : NULL;
    resp->body = *body_p;
    resp->len = *body_p ? len : 0;
    *body_p = NULL;
}

void ipl_http_resp_set(ipl_http_resp_t *resp, int status, const char *content_type,
                       const char *body, size_t len)
{
    assert(body || len == 0);
    char *copy = NULL;
    if (len) {
        copy = malloc(len);
        if (copy) memcpy(copy, body, len);
    }
    if (len && !copy) {
        ipl_http_resp_error(resp, 500, "server_error", "out of memory");
        return;
    }
    ipl_http_resp_take(resp, status, content_type, &copy, len);
}

void ipl_http_resp_header(ipl_http_resp_t *resp, const char *name, const char *value)
{
    assert(resp && name && value);
    if (resp->nheaders == resp->headers_cap) {
        size_t cap = resp->headers_cap ? resp->headers_cap * 2 : 4;
        s_header_t *h = realloc(resp->headers, cap * sizeof *h);
        if (!h) return;
        resp->headers = h;
        resp->headers_cap = cap;
    }
    s_header_t *h = &resp->headers[resp->nheaders];
    h->name = strdup(name);
    h->value = strdup(value);
    if (!h->name || !h->value) {
        free(h->name);
        free(h->value);
        return;
    }
    resp->nheaders++;
}

void ipl_http_resp_json(ipl_http_resp_t *resp, int status, cJSON **root_p)
{
    char *json = *root_p ? cJSON_PrintUnformatted(*root_p) : NULL;
    cJSON_Delete(*root_p);
    *root_p = NULL;
    if (!json) {
        ipl_http_resp_error(resp, 500, "server_error", "out of memory rendering JSON");
        return;
    }
    ipl_http_resp_take(resp, status, "application/json", &json, strlen(json));
}

void ipl_http_resp_error(ipl_http_resp_t *resp, int status, const char *type, const char *message)
{
    cJSON *root = cJSON_CreateObject();
    cJSON *err = cJSON_AddObjectToObject(root, "error");
    cJSON_AddStringToObject(err, "message", message ? message : "");
    cJSON_AddStringToObject(err, "type", type ? type : "server_error");
    cJSON_AddNullToObject(err, "param");
    cJSON_AddNumberToObject(err, "code", status);
    char *json = cJSON_PrintUnformatted(root); /* malloc'd (cJSON's default hooks) */
    cJSON_Delete(root);
    if (!json) {
        static const char oom[] = "{\"error\":{\"message\":\"out of memory\",\"type\":"
                                  "\"server_error\",\"param\":null,\"code\":500}}";
        json = strdup(oom);
        status = 500;
    }
    ipl_http_resp_take(resp, status, "application/json", &json, json ? strlen(json) : 0);
}

int ipl_http_resp_stream(ipl_http_resp_t *resp, int status, const char *content_type)
{
    assert(resp);
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0) {
        char why[128];
        IPL_LOG_EVERY(10, IPL_LOG_ERROR, "http_stream_failed", "error=%s",
                      ipl_log_quote(why, sizeof why, strerror(errno)));
        ipl_http_resp_error(resp, 500, "server_error", "cannot create a stream");
        return -1;
    }
    (void)fcntl(fds[0], F_SETFL, fcntl(fds[0], F_GETFL) | O_NONBLOCK);
    s_resp_reset_body(resp);
    resp->status = status;
    resp->content_type = content_type ? strdup(content_type) : NULL;
    resp->stream_fd = fds[0];
    return fds[1];
}

void ipl_http_resp_stream_pump(ipl_http_resp_t *resp, const ipl_http_pump_t *pump)
{
    assert(resp && pump && pump->pump && resp->stream_fd >= 0 && !resp->pump.pump);
    resp->pump = *pump;
}

int ipl_http_resp_stream_settle(ipl_http_resp_t *resp)
{
    assert(resp && resp->stream_fd >= 0 && !resp->pump.pump);
    size_t len = 0, cap = 0;
    char *body = NULL;
    for (;;) {
        if (cap - len < 4096) {
            char *grown = realloc(body, cap ? cap * 2 : S_STREAM_BLOCK);
            if (!grown) break;
            body = grown;
            cap = cap ? cap * 2 : S_STREAM_BLOCK;
        }
        ssize_t n = read(resp->stream_fd, body + len, cap - len);
        if (n > 0) {
            len += (size_t)n;
            continue;
        }
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) break;       /* EAGAIN: the writer has not closed it (a caller's bug) */
        close(resp->stream_fd); /* the end: the whole body is here */
        resp->stream_fd = -1;
        resp->body = body;
        resp->len = len;
        return 0;
    }
    free(body);
    IPL_LOG_EVERY(10, IPL_LOG_ERROR, "http_stream_settle_failed", "error=%s", strerror(errno));
    ipl_http_resp_error(resp, 500, "server_error", "the response was lost");
    return IPL_E_IO;
}

int ipl_http_write_all(int fd, const void *buf, size_t len)
{
    const char *p = buf;
    while (len > 0) {
        ssize_t n = write(fd, p, len);
        if (n < 0) {
            if (errno == EINTR) continue;
            return IPL_E_IO;
        }
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

/* MHD content reader of a streamed response: blocks until the producer writes, closes the
 * pipe (end of stream), the client hangs up or the server stops (both: error → MHD closes
 * the connection). Runs on the connection's thread. */
static ssize_t s_stream_read(void *cls, uint64_t pos, char *buf, size_t max)
{
    (void)pos;
    s_stream_t *st = cls;
    bool idle = false; /* the last pump round wrote nothing */
    for (;;) {
        ssize_t n = read(st->fd, buf, max);
        if (n > 0) return n;
        if (n == 0) return MHD_CONTENT_READER_END_OF_STREAM;
        if (errno != EAGAIN && errno != EINTR) return MHD_CONTENT_READER_END_WITH_ERROR;
        if (st->pump.pump && !idle) {
            st->pump.pump(st->pump.arg, S_PUMP_SLICE_MS);
            idle = true; /* until the read above finds something */
            continue;
        }
        idle = false;
        struct pollfd p[3] = {{.fd = st->fd, .events = POLLIN},
                              {.fd = st->stop_fd, .events = POLLIN},
                              {.fd = st->client_fd, .events = POLLRDHUP}};
        if (poll(p, st->client_fd >= 0 ? 3 : 2, st->pump.pump ? 0 : 1000) < 0 && errno != EINTR)
            return MHD_CONTENT_READER_END_WITH_ERROR;
        if (p[1].revents) return MHD_CONTENT_READER_END_WITH_ERROR;
        /* A client that closes (or half-closes) its side mid-stream has gone away. */
        if (st->client_fd >= 0 && (p[2].revents & (POLLRDHUP | POLLHUP | POLLERR)))
            return MHD_CONTENT_READER_END_WITH_ERROR;
    }
}

static void s_stream_free(void *cls)
{
    s_stream_t *st = cls;
    close(st->fd); /* the producer's next write gets EPIPE */
    if (st->pump.release) st->pump.release(st->pump.arg);
    free(st);
}

/* Turns `resp` into an MHD response and queues it. Consumes the body and the stream fd.
 * `close_after` (and draining) closes the connection after the response. */
static enum MHD_Result s_queue(ipl_httpd_t *self, struct MHD_Connection *conn,
                               ipl_http_resp_t *resp, bool close_after)
{
    if (resp->status < 100 || resp->status > 999)
        ipl_http_resp_error(resp, 500, "server_error", "the handler did not set a response");
    struct MHD_Response *mr = NULL;
    if (resp->stream_fd >= 0) {
        s_stream_t *st = calloc(1, sizeof *st);
        if (st) {
            const union MHD_ConnectionInfo *ci =
                MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
            st->fd = resp->stream_fd;
            st->stop_fd = self->stop_pipe[0];
            st->client_fd = ci ? ci->connect_fd : -1;
            st->pump = resp->pump;
            mr = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, S_STREAM_BLOCK, s_stream_read,
                                                   st, s_stream_free);
            if (mr) { /* the fd and the pump are st's now */
                resp->stream_fd = -1;
                resp->pump = (ipl_http_pump_t){0};
            } else {
                free(st);
            }
        }
        if (mr) /* the producer may pause for longer than the idle timeout */
            MHD_set_connection_option(conn, MHD_CONNECTION_OPTION_TIMEOUT, 0);
    } else {
        mr = MHD_create_response_from_buffer(resp->len, resp->body ? resp->body : (void *)"",
                                             resp->body ? MHD_RESPMEM_MUST_FREE
                                                        : MHD_RESPMEM_PERSISTENT);
        if (mr) resp->body = NULL; /* MHD frees it */
    }
    if (!mr) {
        IPL_LOG_EVERY(10, IPL_LOG_ERROR, "http_response_failed", "status=%d", resp->status);
        s_resp_free(resp);
        return MHD_NO; /* MHD closes the connection */
    }
    if (resp->content_type)
        MHD_add_response_header(mr, MHD_HTTP_HEADER_CONTENT_TYPE, resp->content_type);
    for (size_t i = 0; i < resp->nheaders; i++) {
        if (MHD_add_response_header(mr, resp->headers[i].name, resp->headers[i].value) != MHD_YES)
            IPL_LOG_EVERY(10, IPL_LOG_WARN, "http_header_rejected", "name=%s",
                          resp->headers[i].name);
    }
    if (close_after || (self->conns && ipl_conns_draining(self->conns)))
        MHD_add_response_header(mr, MHD_HTTP_HEADER_CONNECTION, "close");
    enum MHD_Result rc = MHD_queue_response(conn, (unsigned)resp->status, mr);
    MHD_destroy_response(mr); /* the connection keeps its reference */
    s_resp_free(resp);
    return rc;
}

/* Queues the refusal decided for `req` (400, 404, 405 with Allow, 413, 414, 431) as a JSON
 * error. */
static enum MHD_Result s_queue_error(ipl_httpd_t *self, struct MHD_Connection *conn,
                                     const ipl_http_req_t *req)
{
    char path[160];
    IPL_LOG_EVERY(10, IPL_LOG_DEBUG, "http_refused", "status=%d method=%s path=%s", req->err_status,
                  req->method, ipl_log_quote(path, sizeof path, req->path));
    ipl_http_resp_t resp = {.stream_fd = -1};
    const char *type = req->err_status == 404 ? "not_found_error" : "invalid_request_error";
    ipl_http_resp_error(&resp, req->err_status, type, req->err_msg);
    if (req->allow[0]) ipl_http_resp_header(&resp, MHD_HTTP_HEADER_ALLOW, req->allow);
    return s_queue(self, conn, &resp, req->close);
}

/* ---------------------------------------------------------------------------------------- */
/* Request handling                                                                          */

static bool s_path_matches(const s_route_t *r, const char *path)
{
    if (r->prefix) return strncmp(path, r->path, r->path_len) == 0;
    return strcmp(path, r->path) == 0;
}

static bool s_method_matches(const s_route_t *r, const char *method)
{
    return strcmp(r->method, "*") == 0 || strcmp(r->method, method) == 0 ||
           (strcmp(method, "HEAD") == 0 && strcmp(r->method, "GET") == 0);
}

/* The first route matching path and method, or NULL. When the path matches but no method
 * does, `allow` lists the methods that would ("GET, POST"). */
static const s_route_t *s_match(const ipl_httpd_t *self, const char *method, const char *path,
                                char *allow, size_t allow_size)
{
    allow[0] = '\0';
    for (size_t i = 0; i < self->nroutes; i++) {
        const s_route_t *r = &self->routes[i];
        if (!s_path_matches(r, path)) continue;
        if (s_method_matches(r, method)) return r;
        if (!strstr(allow, r->method)) {
            size_t used = strlen(allow);
            snprintf(allow + used, allow_size - used, "%s%s", used ? ", " : "", r->method);
        }
    }
    return NULL;
}

/* Adds the bytes of one header or query argument ("name: value\r\n", "name=value&"). */
static enum MHD_Result s_count_value(void *cls, enum MHD_ValueKind kind, const char *key,
                                     const char *value)
{
    (void)kind;
    *(size_t *)cls += (key ? strlen(key) : 0) + (value ? strlen(value) : 0) + 2;
    return MHD_YES;
}

/* 431 or 414 when the head exceeds ipl_httpd_limits, else 0 (err_msg filled). */
static int s_head_too_big(const ipl_httpd_t *self, struct MHD_Connection *conn, ipl_http_req_t *req)
{
    size_t header = 0, url = strlen(req->path);
    if (self->max_header) {
        MHD_get_connection_values(conn, MHD_HEADER_KIND, s_count_value, &header);
        if (header > self->max_header) {
            snprintf(req->err_msg, sizeof req->err_msg,
                     "request headers of %zu bytes exceed the limit of %zu bytes", header,
                     self->max_header);
            return 431;
        }
    }
    if (self->max_url) {
        MHD_get_connection_values(conn, MHD_GET_ARGUMENT_KIND, s_count_value, &url);
        if (url > self->max_url) {
            snprintf(req->err_msg, sizeof req->err_msg,
                     "request target of about %zu bytes exceeds the limit of %zu bytes", url,
                     self->max_url);
            return 414;
        }
    }
    return 0;
}

/* The connection's entry in the table (ipl_conns), or NULL. */
static ipl_conn_t *s_conn(struct MHD_Connection *conn)
{
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    return ci ? ci->socket_context : NULL;
}

typedef struct {
    const char *name;
    size_t n;
} s_named_t;

static enum MHD_Result s_count_named(void *cls, enum MHD_ValueKind kind, const char *key,
                                     const char *value)
{
    (void)kind;
    (void)value;
    s_named_t *c = cls;
    if (key && strcasecmp(key, c->name) == 0) c->n++;
    return MHD_YES;
}

static size_t s_header_count(struct MHD_Connection *conn, const char *name)
{
    s_named_t c = {.name = name};
    MHD_get_connection_values(conn, MHD_HEADER_KIND, s_count_named, &c);
    return c.n;
}

/* 400 when the head breaks HTTP/1.1's framing rules (RFC 9112 6.3: the body's length must be
 * unambiguous, a request-smuggling shape otherwise) or lacks Host (RFC 9112 3.2), else 0;
 * err_msg filled. A framing error closes the connection after the answer (req->close);
 * *unframed: not even MHD can find the body's end (answer at once). */
static int s_bad_head(struct MHD_Connection *conn, const char *version, ipl_http_req_t *req,
                      bool *unframed)
{
    size_t nte = s_header_count(conn, MHD_HTTP_HEADER_TRANSFER_ENCODING);
    size_t ncl = s_header_count(conn, MHD_HTTP_HEADER_CONTENT_LENGTH);
    const char *te =
        MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_TRANSFER_ENCODING);
    req->chunked = nte == 1 && te && strcasecmp(te, "chunked") == 0;
    *unframed = nte && !req->chunked;
    if (*unframed)
        snprintf(req->err_msg, sizeof req->err_msg,
                 "Transfer-Encoding must be exactly \"chunked\" (got %s%.64s%s)",
                 nte > 1 ? "several headers: " : "\"", te ? te : "", nte > 1 ? "" : "\"");
    else if (nte && ncl)
        snprintf(req->err_msg, sizeof req->err_msg,
                 "a request must not have both Content-Length and Transfer-Encoding (its body's "
                 "length would be ambiguous)");
    else if (ncl > 1)
        snprintf(req->err_msg, sizeof req->err_msg,
                 "a request must have one Content-Length header (got %zu)", ncl);
    if (*unframed || (nte && ncl) || ncl > 1) {
        req->close = true;
        return 400;
    }
    bool http11 = version && strncmp(version, "HTTP/1.", 7) == 0 && version[7] != '0';
    if (http11 && !MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_HOST)) {
        snprintf(req->err_msg, sizeof req->err_msg, "an HTTP/1.1 request needs a Host header");
        return 400;
    }
    return 0;
}

/* Decides, from the headers alone, whether the request is refused (400 by s_bad_head, 404,
 * 405, 413 by Content-Length, 431 and 414 by ipl_httpd_limits) or gets the drain answer, and
 * whether to say so at once or after draining the body. */
static enum MHD_Result s_first_call(ipl_httpd_t *self, struct MHD_Connection *conn,
                                    const char *version, ipl_http_req_t *req)
{
    char allow[128];
    bool unframed = false;
    ipl_conns_head(self->conns, s_conn(conn)); /* in flight from now: a drain waits for it */
    req->route = s_match(self, req->method, req->path, allow, sizeof allow);
    int bad = s_bad_head(conn, version, req, &unframed);
    int head = bad ? 0 : s_head_too_big(self, conn, req);
    if (bad || head) {
        req->err_status = bad ? bad : head;
    } else if (self->conns && ipl_conns_draining(self->conns)) {
        req->draining = true; /* its body is read (within max_body), then the drain answer */
    } else if (!req->route && allow[0]) {
        req->err_status = 405;
        snprintf(req->err_msg, sizeof req->err_msg, "method %s is not allowed on %s (allowed: %s)",
                 req->method, req->path, allow);
        snprintf(req->allow, sizeof req->allow, "%s", allow);
    } else if (!req->route) {
        req->err_status = 404;
        snprintf(req->err_msg, sizeof req->err_msg, "no route for %s %s", req->method, req->path);
    }
    const char *cl =
        MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
    unsigned long long declared = 0;
    if (cl && !req->chunked) {
        char *end;
        errno = 0;
        declared = strtoull(cl, &end, 10);
        if (errno != 0 || end == cl)
            declared = 0; /* MHD itself rejects a malformed Content-Length */
    }
    if (!req->err_status && declared > self->max_body) {
        req->err_status = 413;
        snprintf(req->err_msg, sizeof req->err_msg,
                 "request body of %llu bytes exceeds the limit of %zu bytes", declared,
                 self->max_body);
    }
    if (!req->err_status) return MHD_YES;
    req->drop_body = true;
    /* Answering before the body is read makes MHD close the connection without reading it,
     * and a client still sending (most do not wait for "100 Continue") then sees a reset
     * instead of our answer. So the body is drained first, unless the client waits for
     * "100 Continue", announces more than S_DRAIN_LIMIT bytes, or its body has no end MHD
     * can find. */
    const char *expect = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_EXPECT);
    bool waits = expect && strcasecmp(expect, "100-continue") == 0;
    if (!waits && !unframed && declared <= S_DRAIN_LIMIT) return MHD_YES;
    req->answered = true;
    ipl_conns_active(self->conns, s_conn(conn));
    return s_queue_error(self, conn, req);
}

/* Waits up to `ms` for `events` on fd. */
static bool s_wait_fd(int fd, short events, int ms)
{
    struct pollfd p = {.fd = fd, .events = events};
    int rc;
    do
        rc = poll(&p, 1, ms);
    while (rc < 0 && errno == EINTR);
    return rc > 0;
}

/* Answers the refusal of `req` on the socket itself, in the middle of its body (MHD cannot
 * queue a response then), and closes lingering: the client's remaining bytes are read and
 * dropped until it closes, S_LINGER_MS or S_DRAIN_LIMIT, so that it reads the answer rather
 * than a reset. Runs on the connection's thread inside the access callback, when MHD does not
 * touch the socket; the caller then returns MHD_NO (MHD closes the connection). */
static void s_refuse_now(ipl_httpd_t *self, struct MHD_Connection *conn, ipl_http_req_t *req)
{
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
    int fd = ci ? ci->connect_fd : -1;
    char path[160];
    IPL_LOG_EVERY(10, IPL_LOG_DEBUG, "http_refused", "status=%d method=%s path=%s body=chunked",
                  req->err_status, req->method, ipl_log_quote(path, sizeof path, req->path));
    if (fd < 0) return;
    ipl_conns_active(self->conns, s_conn(conn));
    ipl_http_resp_t resp = {.stream_fd = -1};
    ipl_http_resp_error(&resp, req->err_status,
                        req->err_status == 404 ? "not_found_error" : "invalid_request_error",
                        req->err_msg);
    const char *reason = MHD_get_reason_phrase_for((unsigned)resp.status);
    char head[256];
    int n = snprintf(head, sizeof head,
                     "HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n"
                     "Connection: close\r\n\r\n",
                     resp.status, reason ? reason : "", resp.len);
    uint64_t deadline = ipl_mono_ms() + S_LINGER_MS;
    const char *parts[2] = {head, resp.body ? resp.body : ""};
    size_t lens[2] = {(size_t)n, resp.len};
    for (int i = 0; i < 2; i++) {
        size_t off = 0;
        while (off < lens[i] && ipl_mono_ms() < deadline) {
            ssize_t w = send(fd, parts[i] + off, lens[i] - off, MSG_NOSIGNAL | MSG_DONTWAIT);
            if (w > 0)
                off += (size_t)w;
            else if (w < 0 && (errno == EAGAIN || errno == EINTR))
                (void)s_wait_fd(fd, POLLOUT, 100);
            else
                break;
        }
    }
    s_resp_free(&resp);
    (void)shutdown(fd, SHUT_WR);
    char sink[16384];
    uint64_t dropped = 0;
    while (dropped < S_DRAIN_LIMIT && ipl_mono_ms() < deadline) {
        if (!s_wait_fd(fd, POLLIN, 100)) continue;
        ssize_t r = recv(fd, sink, sizeof sink, MSG_DONTWAIT);
        if (r == 0 || (r < 0 && errno != EAGAIN && errno != EINTR)) break;
        if (r > 0) dropped += (uint64_t)r;
    }
}

/* Appends body bytes, or drops them once the request is refused. False when the connection
 * is to be closed: a refusal was answered on the socket (a chunked body past max_body, or a
 * refused body past S_DRAIN_LIMIT), or out of memory. */
static bool s_append_body(ipl_httpd_t *self, struct MHD_Connection *conn, ipl_http_req_t *req,
                          const char *data, size_t n)
{
    if (!req->drop_body && req->len + n > self->max_body) {
        req->drop_body = true;
        req->err_status = 413;
        snprintf(req->err_msg, sizeof req->err_msg, "request body exceeds the limit of %zu bytes",
                 self->max_body);
        req->dropped = req->len;
        free(req->body);
        req->body = NULL;
        req->len = req->cap = 0;
        if (req->chunked) { /* no end in sight: say so now */
            s_refuse_now(self, conn, req);
            return false;
        }
    }
    if (req->drop_body) {
        req->dropped += n;
        if (req->dropped <= S_DRAIN_LIMIT) return true;
        s_refuse_now(self, conn, req);
        return false;
    }
    if (req->len + n + 1 > req->cap) {
        size_t cap = req->cap ? req->cap : 1024;
        while (cap < req->len + n + 1)
            cap *= 2;
        char *body = realloc(req->body, cap);
        if (!body) return false;
        req->body = body;
        req->cap = cap;
    }
    memcpy(req->body + req->len, data, n);
    req->len += n;
    req->body[req->len] = '\0';
    return true;
}

/* The answer to a request that arrived while draining: the drain handler's, or a 503. */
static void s_drain_answer(ipl_httpd_t *self, const ipl_http_req_t *req, ipl_http_resp_t *resp)
{
    if (self->drain_fn)
        self->drain_fn(self->drain_arg, req, resp);
    else
        ipl_http_resp_error(resp, 503, "server_error", "the server is shutting down");
}

static enum MHD_Result s_access(void *cls, struct MHD_Connection *conn, const char *url,
                                const char *method, const char *version, const char *upload_data,
                                size_t *upload_data_size, void **con_cls)
{
    ipl_httpd_t *self = cls;
    ipl_http_req_t *req = *con_cls;
    if (!req) {
        req = calloc(1, sizeof *req);
        if (!req) return MHD_NO;
        req->conn = conn;
        req->method = method;
        req->path = url;
        *con_cls = req;
        return s_first_call(self, conn, version, req);
    }
    if (req->answered) { /* answered early: MHD discards the body */
        *upload_data_size = 0;
        return MHD_YES;
    }
    if (*upload_data_size) {
        bool ok = s_append_body(self, conn, req, upload_data, *upload_data_size);
        *upload_data_size = 0;
        return ok ? MHD_YES : MHD_NO;
    }
    req->answered = true;
    ipl_conns_active(self->conns, s_conn(conn)); /* the request is in: no read deadline */
    if (req->err_status) return s_queue_error(self, conn, req);
    ipl_http_resp_t resp = {.stream_fd = -1};
    if (req->draining)
        s_drain_answer(self, req, &resp);
    else if (!self->guard || self->guard(self->guard_arg, req, &resp))
        req->route->fn(req->route->arg, req, &resp);
    return s_queue(self, conn, &resp, false);
}

/* The response has been sent (or the request ended otherwise): the connection waits for the
 * next one, with the idle deadline (a stream had switched MHD's own timeout off). */
static void s_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                        enum MHD_RequestTerminationCode toe)
{
    ipl_httpd_t *self = cls;
    (void)toe;
    ipl_conns_idle(self->conns, s_conn(conn));
    int idle_ms = self->conns_cfg.idle_timeout_ms;
    MHD_set_connection_option(conn, MHD_CONNECTION_OPTION_TIMEOUT,
                              idle_ms > 0 ? (unsigned)((idle_ms + 999) / 1000) : 0u);
    ipl_http_req_t *req = *con_cls;
    if (!req) return;
    free(req->body);
    free(req);
    *con_cls = NULL;
}

/* MHD's accept policy: the table's limits. */
static enum MHD_Result s_admit(void *cls, const struct sockaddr *addr, socklen_t addrlen)
{
    ipl_httpd_t *self = cls;
    return ipl_conns_admit(self->conns, addr, addrlen) ? MHD_YES : MHD_NO;
}

static socklen_t s_addr_len(const struct sockaddr *addr)
{
    if (!addr) return 0;
    return addr->sa_family == AF_INET6  ? (socklen_t)sizeof(struct sockaddr_in6)
           : addr->sa_family == AF_INET ? (socklen_t)sizeof(struct sockaddr_in)
                                        : 0;
}

/* A connection opens (the accepting thread) or closes (MHD's cleanup, before its socket is
 * closed): its entry in the table. */
static void s_notify_connection(void *cls, struct MHD_Connection *conn, void **socket_context,
                                enum MHD_ConnectionNotificationCode toe)
{
    ipl_httpd_t *self = cls;
    if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
        const union MHD_ConnectionInfo *fd =
            MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
        const union MHD_ConnectionInfo *ad =
            MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
        const struct sockaddr *addr = ad ? ad->client_addr : NULL;
        *socket_context =
            fd ? ipl_conns_open(self->conns, addr, s_addr_len(addr), fd->connect_fd) : NULL;
    } else if (toe == MHD_CONNECTION_NOTIFY_CLOSED) {
        ipl_conn_t *c = *socket_context;
        ipl_conns_close(self->conns, &c);
        *socket_context = NULL;
    }
}

/* MHD's URI log callback: the request line is in, the read deadline starts. Returns the
 * request's initial context (none: s_access makes it). */
static void *s_request_line(void *cls, const char *uri, struct MHD_Connection *conn)
{
    ipl_httpd_t *self = cls;
    (void)uri;
    ipl_conns_reading(self->conns, s_conn(conn));
    return NULL;
}

/* Fits the connection limit to the descriptors the process may open: raises the soft limit
 * towards the hard one when the connections need more, else lowers the limit, with a warning
 * (running out of descriptors fails accepts, pipes and upstream connections alike, which is
 * worse than refusing connections cleanly). */
static void s_fit_fd_limit(ipl_httpd_t *self)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0) return;
    rlim_t need = (rlim_t)self->conns_cfg.max_connections * S_FDS_PER_CONN + S_FDS_RESERVE;
    if (rl.rlim_cur < need && rl.rlim_cur < rl.rlim_max) {
        rlim_t was = rl.rlim_cur;
        rl.rlim_cur = rl.rlim_max == RLIM_INFINITY || rl.rlim_max > need ? need : rl.rlim_max;
        if (setrlimit(RLIMIT_NOFILE, &rl) == 0)
            IPL_DEBUG("fd_limit_raised", "from=%llu to=%llu", (unsigned long long)was,
                      (unsigned long long)rl.rlim_cur);
        else if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
            return;
    }
    if (rl.rlim_cur >= need) return;
    int fit = rl.rlim_cur > S_FDS_RESERVE + S_FDS_PER_CONN
                  ? (int)((rl.rlim_cur - S_FDS_RESERVE) / S_FDS_PER_CONN)
                  : 1;
    IPL_WARN("http_connection_limit_lowered",
             "addr=%s max_connections=%d to=%d nofile=%llu hint=\"raise the descriptor limit "
             "(ulimit -n, LimitNOFILE) or lower the connection limit\"",
             self->listen, self->conns_cfg.max_connections, fit, (unsigned long long)rl.rlim_cur);
    self->conns_cfg.max_connections = fit;
}

int ipl_httpd_start(ipl_httpd_t *self)
{
    assert(self);
    if (self->daemon) return 0;
    /* MHD closes the socket it is given on stop; it gets a duplicate so that ours stays
     * ours to close in every case (also when MHD_start_daemon fails). */
    s_fit_fd_limit(self);
    if (!self->conns) self->conns = ipl_conns_new(&self->conns_cfg, self->listen);
    if (!self->conns) return IPL_E_IO;
    if (self->metrics) ipl_conns_metrics(self->conns, self->metrics, self->metrics_prefix);
    int fd = fcntl(self->listen_fd, F_DUPFD_CLOEXEC, 0);
    if (fd < 0) return IPL_E_IO;
    unsigned flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD |
                     MHD_USE_POLL | MHD_USE_ITC;
    if (self->family == AF_INET6) flags |= MHD_USE_IPv6;
    /* MHD's per-connection buffer holds the whole head: room for the limits, so that a head
     * above them reaches s_first_call and gets our JSON answer rather than MHD's. */
    size_t memory = 32 * 1024;
    if (self->max_header + self->max_url + 16 * 1024 > memory)
        memory = self->max_header + self->max_url + 16 * 1024;
    /* MHD's own inactivity timeout: the idle timeout, also while a request is read (the
     * table's deadlines are absolute, this one restarts at every byte); streams switch it off */
    int idle_ms = self->conns_cfg.idle_timeout_ms;
    unsigned idle_s = idle_ms > 0 ? (unsigned)((idle_ms + 999) / 1000) : 0u;
    unsigned limit = (unsigned)self->conns_cfg.max_connections + S_MHD_SLACK;
    self->daemon = MHD_start_daemon(
        flags, 0, s_admit, self, s_access, self, MHD_OPTION_LISTEN_SOCKET, fd,
        MHD_OPTION_NOTIFY_COMPLETED, s_completed, self, MHD_OPTION_NOTIFY_CONNECTION,
        s_notify_connection, self, MHD_OPTION_URI_LOG_CALLBACK, s_request_line, self,
        MHD_OPTION_CONNECTION_LIMIT, limit, MHD_OPTION_CONNECTION_TIMEOUT, idle_s,
        MHD_OPTION_CONNECTION_MEMORY_LIMIT, memory, MHD_OPTION_END);
    if (!self->daemon) {
        int err = errno;
        char quoted[160];
        IPL_ERROR("http_start_failed", "addr=%s port=%d",
                  ipl_log_quote(quoted, sizeof quoted, self->listen), self->port);
        errno = err;
        return IPL_E_IO;
    }
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(self->daemon, MHD_DAEMON_INFO_BIND_PORT);
    if (di && di->port) self->port = di->port;
    return 0;
}

/* ---------------------------------------------------------------------------------------- */
/* Request accessors                                                                         */

const char *ipl_http_req_method(const ipl_http_req_t *req)
{
    return req->method;
}

const char *ipl_http_req_path(const ipl_http_req_t *req)
{
    return req->path;
}

const char *ipl_http_req_header(const ipl_http_req_t *req, const char *name)
{
    /* MHD compares header names case-insensitively. */
    return MHD_lookup_connection_value(req->conn, MHD_HEADER_KIND, name);
}

typedef struct {
    const char *key;
    const char *value;
    bool found;
} s_query_find_t;

static enum MHD_Result s_query_iter(void *cls, enum MHD_ValueKind kind, const char *key,
                                    const char *value)
{
    (void)kind;
    s_query_find_t *f = cls;
    if (key && strcmp(key, f->key) == 0) {
        f->value = value ? value : ""; /* "?flag" has no value */
        f->found = true;
        return MHD_NO;
    }
    return MHD_YES;
}

const char *ipl_http_req_query(const ipl_http_req_t *req, const char *key)
{
    /* Iterated rather than looked up: MHD's lookup would ignore the case of keys. */
    s_query_find_t f = {.key = key};
    MHD_get_connection_values(req->conn, MHD_GET_ARGUMENT_KIND, s_query_iter, &f);
    return f.found ? f.value : NULL;
}

const char *ipl_http_req_body(const ipl_http_req_t *req, size_t *len)
{
    if (len) *len = req->len;
    return req->body ? req->body : "";
}

int ipl_http_req_socket(const ipl_http_req_t *req)
{
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(req->conn, MHD_CONNECTION_INFO_CONNECTION_FD);
    return ci ? ci->connect_fd : -1;
}

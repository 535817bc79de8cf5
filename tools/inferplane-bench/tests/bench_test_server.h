/*
 * bench_test_server — a tiny HTTP/1.1 server on a thread for the bench's unit tests (header
 * only: the Makefile builds each test from one .c file). It answers every POST with what
 * `mode` says, on 127.0.0.1 at an ephemeral port, one connection at a time per accept:
 *
 *   S_OK          an OpenAI chat stream: 3 content chunks, usage (cached 4), [DONE]
 *   S_HTTP_500    a 500 with an OpenAI error body
 *   S_TRUNCATED   one chunk, then the connection closes (no [DONE], no finish_reason)
 *   S_SLOW        waits delay_ms before answering S_OK
 *
 * Connections are closed after each answer (Connection: close). The last request body is
 * kept (last_body) so tests can check what was sent. Stop with s_server_stop.
 */
#ifndef BENCH_TEST_SERVER_H
#define BENCH_TEST_SERVER_H

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

typedef enum { S_OK = 0, S_HTTP_500, S_TRUNCATED, S_SLOW } s_mode_t;

typedef struct {
    int fd;
    int port;
    atomic_int mode;
    atomic_int delay_ms;
    atomic_int stop;
    atomic_int requests;
    pthread_t thread;
    pthread_mutex_t lock;
    char last_body[65536];
} s_server_t;

static void s_write_all(int fd, const char *p, size_t n)
{
    while (n) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
        if (w <= 0) return;
        p += w;
        n -= (size_t)w;
    }
}

static void s_serve_one(s_server_t *s, int c)
{
    char buf[70000];
    size_t len = 0;
    char *hend = NULL;
    while (len < sizeof buf - 1 && !hend) {
        ssize_t r = recv(c, buf + len, sizeof buf - 1 - len, 0);
        if (r <= 0) return;
        len += (size_t)r;
        buf[len] = '\0';
        hend = strstr(buf, "\r\n\r\n");
    }
    if (!hend) return;
    const char *cl = strcasestr(buf, "content-length:");
    size_t want = cl ? (size_t)atol(cl + 15) : 0, have = len - (size_t)(hend + 4 - buf);
    while (have < want && len < sizeof buf - 1) {
        ssize_t r = recv(c, buf + len, sizeof buf - 1 - len, 0);
        if (r <= 0) return;
        len += (size_t)r;
        have += (size_t)r;
    }
    buf[len] = '\0';
    pthread_mutex_lock(&s->lock);
    snprintf(s->last_body, sizeof s->last_body, "%s", hend + 4);
    pthread_mutex_unlock(&s->lock);
    atomic_fetch_add(&s->requests, 1);
    int mode = atomic_load(&s->mode);
    if (mode == S_SLOW) {
        for (int i = 0; i < atomic_load(&s->delay_ms) / 10 && !atomic_load(&s->stop); i++)
            usleep(10000);
        mode = S_OK;
    }
    if (mode == S_HTTP_500) {
        const char *body = "{\"error\":{\"message\":\"boom\",\"type\":\"server_error\"}}";
        char head[256];
        snprintf(head, sizeof head,
                 "HTTP/1.1 500 Internal Server Error\r\nContent-Type: "
                 "application/json\r\nContent-Length: %zu\r\nConnection: close\r\n\r\n",
                 strlen(body));
        s_write_all(c, head, strlen(head));
        s_write_all(c, body, strlen(body));
        return;
    }
    const char *head = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                       "Connection: close\r\n\r\n";
    s_write_all(c, head, strlen(head));
    const char *chunk = "data: {\"choices\":[{\"delta\":{\"content\":\" ok\"}}]}\n\n";
    s_write_all(c, chunk, strlen(chunk));
    if (mode == S_TRUNCATED) return;
    for (int i = 0; i < 2; i++) {
        usleep(1000);
        s_write_all(c, chunk, strlen(chunk));
    }
    const char *tail =
        "data: {\"choices\":[{\"delta\":{},\"finish_reason\":\"length\"}]}\n\n"
        "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":20,"
        "\"completion_tokens\":3,\"prompt_tokens_details\":{\"cached_tokens\":4}}}\n\n"
        "data: [DONE]\n\n";
    s_write_all(c, tail, strlen(tail));
}

static void *s_server_main(void *arg)
{
    s_server_t *s = arg;
    while (!atomic_load(&s->stop)) {
        struct pollfd p = {s->fd, POLLIN, 0};
        if (poll(&p, 1, 20) <= 0) continue;
        int c = accept(s->fd, NULL, NULL);
        if (c < 0) continue;
        s_serve_one(s, c);
        close(c);
    }
    return NULL;
}

/* Starts the server; 0 or -1. */
static int s_server_start(s_server_t *s)
{
    memset(s, 0, sizeof *s);
    pthread_mutex_init(&s->lock, NULL);
    s->fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t alen = sizeof a;
    if (s->fd < 0 || bind(s->fd, (struct sockaddr *)&a, sizeof a) != 0 || listen(s->fd, 64) != 0 ||
        getsockname(s->fd, (struct sockaddr *)&a, &alen) != 0)
        return -1;
    s->port = ntohs(a.sin_port);
    return pthread_create(&s->thread, NULL, s_server_main, s) == 0 ? 0 : -1;
}

static void s_server_stop(s_server_t *s)
{
    atomic_store(&s->stop, 1);
    pthread_join(s->thread, NULL);
    close(s->fd);
    pthread_mutex_destroy(&s->lock);
}

#endif

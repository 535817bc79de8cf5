/*
 * ipl_test_http — a small libcurl client for the unit tests of HTTP servers (header only:
 * the Makefile builds each test from one .c file).
 *
 *   s_reply_t r = {0};
 *   assert_int_equal(s_http(port, "GET", "/readyz", NULL, &r), CURLE_OK);
 *   assert_int_equal(r.status, 200);          // r.body is NUL-terminated
 *   s_reply_free(&r);
 *
 * Include after <cmocka.h>. Requests go to 127.0.0.1 with a 10 s timeout; call
 * curl_global_init() in main.
 */
#ifndef IPL_TEST_HTTP_H
#define IPL_TEST_HTTP_H

#include <cjson/cJSON.h>
#include <curl/curl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "ipl_clock.h"

#define S_TEST_FN static __attribute__((unused))

typedef struct {
    long status;
    char *body;
    size_t len;
    char headers[8192];
    size_t hlen;
    int writes; /* write callbacks, i.e. pieces received */
    uint64_t start_ms;
    uint64_t first_byte_ms; /* since start; 0 before the first byte */
    size_t abort_after;     /* hang up once this many body bytes arrived (0: never) */
    atomic_int got_data;    /* set at the first body byte (other threads wait on it) */
    CURLcode rc;
} s_reply_t;

S_TEST_FN size_t s_on_body(char *data, size_t size, size_t n, void *arg)
{
    s_reply_t *r = arg;
    size_t bytes = size * n;
    if (!r->first_byte_ms) r->first_byte_ms = ipl_mono_ms() - r->start_ms + 1;
    char *body = realloc(r->body, r->len + bytes + 1);
    assert_non_null(body);
    r->body = body;
    memcpy(r->body + r->len, data, bytes);
    r->len += bytes;
    r->body[r->len] = '\0';
    r->writes++;
    atomic_store(&r->got_data, 1);
    if (r->abort_after && r->len >= r->abort_after)
        return 0; /* makes libcurl abort the transfer and close the connection */
    return bytes;
}

S_TEST_FN size_t s_on_header(char *data, size_t size, size_t n, void *arg)
{
    s_reply_t *r = arg;
    size_t bytes = size * n;
    if (r->hlen + bytes < sizeof r->headers) {
        memcpy(r->headers + r->hlen, data, bytes);
        r->hlen += bytes;
        r->headers[r->hlen] = '\0';
    }
    return bytes;
}

/* Value of response header `name` (case-insensitive) copied into buf, or "(none)". */
S_TEST_FN const char *s_reply_header(const s_reply_t *r, const char *name, char *buf, size_t size)
{
    size_t nlen = strlen(name);
    for (const char *line = r->headers; line && *line;) {
        const char *eol = strstr(line, "\r\n");
        if (!eol) break;
        if (strncasecmp(line, name, nlen) == 0 && line[nlen] == ':') {
            const char *v = line + nlen + 1;
            while (*v == ' ')
                v++;
            snprintf(buf, size, "%.*s", (int)(eol - v), v);
            return buf;
        }
        line = eol + 2;
    }
    return "(none)";
}

S_TEST_FN void s_reply_free(s_reply_t *r)
{
    free(r->body);
    r->body = NULL;
}

typedef struct {
    const char *data;
    size_t len;
    size_t pos;
} s_upload_t;

S_TEST_FN size_t s_on_read(char *buf, size_t size, size_t n, void *arg)
{
    s_upload_t *u = arg;
    size_t want = size * n, left = u->len - u->pos;
    size_t k = left < want ? left : want;
    if (k > 100) k = 100; /* many small chunks */
    memcpy(buf, u->data + u->pos, k);
    u->pos += k;
    return k;
}

/* One request to 127.0.0.1:port. `headers` is NULL-terminated (or NULL). With `chunked` the
 * body is uploaded with Transfer-Encoding: chunked. Fills *r (free with s_reply_free). */
S_TEST_FN CURLcode s_http_ex(int port, const char *method, const char *path, const char *body,
                             size_t len, const char *const *headers, bool chunked, s_reply_t *r)
{
    CURL *c = curl_easy_init();
    assert_non_null(c);
    char url[512];
    snprintf(url, sizeof url, "http://127.0.0.1:%d%s", port, path);
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, 10000L);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, s_on_body);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, r);
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, s_on_header);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, r);
    struct curl_slist *hl = curl_slist_append(NULL, "Expect:");
    for (const char *const *h = headers; h && *h; h++)
        hl = curl_slist_append(hl, *h);
    s_upload_t up = {.data = body, .len = len};
    if (strcmp(method, "HEAD") == 0) {
        curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
    } else if (body && chunked) {
        curl_easy_setopt(c, CURLOPT_POST, 1L);
        curl_easy_setopt(c, CURLOPT_READFUNCTION, s_on_read);
        curl_easy_setopt(c, CURLOPT_READDATA, &up);
        hl = curl_slist_append(hl, "Transfer-Encoding: chunked");
    } else if (body) {
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
        curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, (long)len);
    }
    curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, strcmp(method, "HEAD") ? method : NULL);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, hl);
    r->start_ms = ipl_mono_ms();
    r->rc = curl_easy_perform(c);
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &r->status);
    curl_slist_free_all(hl);
    curl_easy_cleanup(c);
    return r->rc;
}

S_TEST_FN CURLcode s_http(int port, const char *method, const char *path, const char *body,
                          s_reply_t *r)
{
    return s_http_ex(port, method, path, body, body ? strlen(body) : 0, NULL, false, r);
}

/* Checks an OpenAI-shaped error body and its status. */
S_TEST_FN void s_assert_json_error(const s_reply_t *r, long status, const char *type)
{
    char ct[128];
    assert_int_equal(r->status, status);
    assert_string_equal(s_reply_header(r, "Content-Type", ct, sizeof ct), "application/json");
    cJSON *root = cJSON_Parse(r->body);
    assert_non_null(root);
    cJSON *err = cJSON_GetObjectItem(root, "error");
    assert_true(cJSON_IsObject(err));
    assert_true(cJSON_IsString(cJSON_GetObjectItem(err, "message")));
    assert_true(strlen(cJSON_GetObjectItem(err, "message")->valuestring) > 0);
    assert_string_equal(cJSON_GetObjectItem(err, "type")->valuestring, type);
    assert_true(cJSON_IsNull(cJSON_GetObjectItem(err, "param")));
    assert_int_equal(cJSON_GetObjectItem(err, "code")->valueint, status);
    cJSON_Delete(root);
}

/* A request on its own thread: fill port and path, pthread_create(&c.thread, NULL,
 * s_client_run, &c), later pthread_join and check c.reply. */
typedef struct {
    int port;
    const char *path;
    s_reply_t reply;
    pthread_t thread;
} s_client_t;

S_TEST_FN void *s_client_run(void *arg)
{
    s_client_t *c = arg;
    s_http(c->port, "GET", c->path, NULL, &c->reply);
    return NULL;
}

#endif

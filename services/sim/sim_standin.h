/*
 * sim_standin — inferplane-sim as a remote provider's stand-in (issue 12, "Providers"): it
 * requires an API key, adds a network latency, and records what reached it, so tests can
 * prove what did and did not get through a gateway.
 *
 *   sim_standin_t *s = sim_standin_new(&cfg);
 *   per /v1 request (on its connection thread):
 *     usleep(sim_standin_draw_latency_ms(s) * 1000);            the "network"
 *     sim_auth_t a = sim_standin_check(s, authorization, x_api_key);
 *     sim_standin_note_t n;  sim_standin_note_init(&n, method, path);
 *     n.headers = ...sim_standin_header_name(i) present...;  n.auth = a;
 *     ...answer (401 when a is MISSING or WRONG), fill n.status, n.model, tokens...
 *     sim_standin_record(s, &n);
 *   GET /stand-in/received:  cJSON *j = sim_standin_report(s);   POST /stand-in/reset
 *
 * Keys, as vLLM's --api-key (vllm/entrypoints/openai/server_utils.py,
 * AuthenticationMiddleware): "Authorization: <scheme> <token>" where the scheme is "bearer" in
 * any case and the token is everything after the first space; several keys may be valid. Keys
 * are kept only as SHA-256 digests and compared in constant time; nothing here ever logs or
 * reports a key or a header's value (only header *names*, and whether the key matched).
 *
 * Threads: every function is thread-safe (one mutex around the counters and the jitter draw).
 */
#ifndef SIM_STANDIN_H
#define SIM_STANDIN_H

#include <stdbool.h>
#include <stdint.h>

struct cJSON;

typedef enum {
    SIM_AUTH_NOT_REQUIRED = 0, /* no --api-key: everything is let in */
    SIM_AUTH_OK,               /* a configured key was presented */
    SIM_AUTH_MISSING,          /* no Authorization (nor x-api-key when accepted), or no bearer */
    SIM_AUTH_WRONG,            /* a key was presented and matches none */
} sim_auth_t;

/* "not_required", "ok", "missing", "wrong". */
const char *sim_auth_name(sim_auth_t a);

#define SIM_STANDIN_MAX_HEADERS 64 /* names watched, built-in and extra together */

typedef struct {
    const char *const *api_keys; /* valid keys (digested at sim_standin_new; not kept) */
    uint32_t napi_keys;          /* 0: no key required */
    bool accept_x_api_key;       /* also take Anthropic's "x-api-key: KEY" */
    uint32_t latency_ms;         /* added before every /v1 response's headers */
    uint32_t jitter_ms;          /* plus a uniform draw in [0, jitter_ms] */
    uint64_t seed;               /* of the jitter draws */
    uint32_t history;            /* the last N requests kept in detail (0: 100) */
    const char *extra_headers;   /* more header names to watch, comma-separated (copied) */
} sim_standin_config_t;

/* One request, as the stand-in saw it. Fixed-size: the record copies it. */
typedef struct {
    char method[8];
    char path[64];
    char model[128]; /* the request's "model" ("" when none or not a string; cut at 127) */
    bool stream;
    sim_auth_t auth;
    uint64_t headers; /* bit i: header sim_standin_header_name(self, i) was present */
    int status;       /* HTTP status answered */
    uint32_t prompt_tokens;
    uint32_t completion_tokens;
} sim_standin_note_t;

typedef struct sim_standin sim_standin_t;

/* NULL on allocation failure. */
sim_standin_t *sim_standin_new(const sim_standin_config_t *cfg);
void sim_standin_destroy(sim_standin_t **self_p);

/* Whether a key is required (cfg.napi_keys > 0). */
bool sim_standin_requires_key(const sim_standin_t *self);

/* Checks a request's credentials: the Authorization header's value and the x-api-key header's
 * (either may be NULL). x-api-key counts only with accept_x_api_key; a correct key in either
 * header lets the request in. */
sim_auth_t sim_standin_check(const sim_standin_t *self, const char *authorization,
                             const char *x_api_key);

/* The network latency for one request, in ms: latency_ms + a seeded draw in [0, jitter_ms]. */
uint32_t sim_standin_draw_latency_ms(sim_standin_t *self);

/* The i-th watched header name (lower case), or NULL past the last. */
const char *sim_standin_header_name(const sim_standin_t *self, int i);

/* Zeroes `note` and sets its method and path (cut to fit). */
void sim_standin_note_init(sim_standin_note_t *note, const char *method, const char *path);

/* Counts one answered request: served when its status is 2xx, rejected otherwise. */
void sim_standin_record(sim_standin_t *self, const sim_standin_note_t *note);

/* What was received since the start or the last reset (the caller owns the tree):
 *   {"api_key_required", "accept_x_api_key", "network_latency_ms", "network_jitter_ms",
 *    "received", "served", "rejected", "unauthorized",
 *    "by_status": {"401": n, ...},
 *    "by_path":  {"/v1/chat/completions": {"received", "served", "rejected"}, ...},
 *    "by_model": {"m": {"received", "served", "rejected", "prompt_tokens",
 *                       "completion_tokens"}, ...},      ("" = no model named)
 *    "tokens": {"prompt", "completion"},                 (served requests)
 *    "history": N,
 *    "last": [{"seq", "method", "path", "status", "outcome" ("served", "unauthorized",
 *              "rejected"), "model" (or null), "stream", "auth", "headers": [names],
 *              "prompt_tokens", "completion_tokens"}, ...]}   (oldest first, N at most)
 * At most 64 distinct paths and 64 models are counted apart; more fall into "(other)".
 * NULL on allocation failure. */
struct cJSON *sim_standin_report(sim_standin_t *self);

/* Forgets every count and the history (POST /stand-in/reset). */
void sim_standin_reset(sim_standin_t *self);

#endif

/*
 * gateway_api — the OpenAI request surface of the gateway: parsing and validating request
 * bodies, and the OpenAI-shaped error bodies.
 *
 *   POST /v1/chat/completions   {"model": str, "messages": [..], "stream"?: bool,
 *                                "max_tokens"? / "max_completion_tokens"?: int > 0, ...}
 *   POST /v1/completions        {"model": str, "prompt": str | [str, ...], "stream"?: bool,
 *                                "max_tokens"?: int > 0, ...}
 *
 * Fields the gateway does not look at are passed through to the worker untouched. A
 * validation failure yields a gateway_api_error_t: HTTP 400, "invalid_request_error", the
 * offending field in `param` and a message that names the field, what was found and what is
 * expected. Error bodies have OpenAI's shape:
 *
 *   {"error": {"message": "...", "type": "invalid_request_error", "param": "messages",
 *              "code": null}}
 *
 * Pure functions and per-request objects: thread-safe.
 */
#ifndef GATEWAY_API_H
#define GATEWAY_API_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct ipl_prompt;

/* MESSAGES: Anthropic's /v1/messages, translated to a chat request (gateway_messages) and
 * parsed as one; the kind says which API the client speaks (errors, records). */
typedef enum {
    GATEWAY_API_CHAT = 0,
    GATEWAY_API_COMPLETIONS = 1,
    GATEWAY_API_MESSAGES = 2,
} gateway_api_kind_t;

typedef struct {
    int status;        /* HTTP status */
    const char *type;  /* static: "invalid_request_error", ... */
    const char *param; /* static field name, or NULL */
    const char *code;  /* static machine code, or NULL */
    char message[512];
} gateway_api_error_t;

/* A parsed, valid request. Strings are owned by the request. */
typedef struct gateway_api_req {
    gateway_api_kind_t kind;
    const char *model;  /* the "model" field */
    bool stream;        /* "stream" (false when absent or null) */
    int64_t max_tokens; /* "max_tokens" / "max_completion_tokens", 0 when absent */
    char *prompt;       /* text to tokenize: the rendered chat, or the (first) prompt */
    size_t prompt_len;
    bool chat;              /* prompt is a rendered chat (encoded without special tokens) */
    const char *cache_salt; /* vLLM's "cache_salt", or NULL */
    size_t prompts;         /* completions: number of prompts in the batch (1 for chat) */
    bool worker_tokenize;   /* a chat the gateway's model cannot render (prompt is ""): its
                               ids come from a worker (gateway_api_tokenize_body) */
    /* private */
    void *root;       /* cJSON tree of the body */
    const char *body; /* borrowed original body, for pass-through */
    size_t body_len;
    bool edited; /* the tree differs from body (gateway_api_set_cache_salt): re-serialise */
} gateway_api_req_t;

/* Parses `body` (borrowed; it must outlive the request, as the request forwards it as is)
 * for endpoint `kind`; a chat's messages ("tools", "add_generation_prompt",
 * "continue_final_message" and "chat_template_kwargs" as vLLM reads them) are rendered by
 * `prompt` (borrowed; the gateway's model, ipl_prompt). Returns 0 and a new request in *out
 * (free with gateway_api_req_destroy), or IPL_E_INVAL with *err filled (status 400). */
int gateway_api_parse(gateway_api_kind_t kind, const char *body, size_t len,
                      const struct ipl_prompt *prompt, gateway_api_req_t **out,
                      gateway_api_error_t *err);
void gateway_api_req_destroy(gateway_api_req_t **self_p);

/* Sets the request's "cache_salt" to `salt` (copied; e.g. a tenant's, policy_isolation):
 * req->cache_salt then reads it, and the upstream body carries it. 0 or IPL_E_NOMEM. */
int gateway_api_set_cache_salt(gateway_api_req_t *req, const char *salt);

/* The body to send upstream: a malloc'd copy of the original when `model` is NULL or equal
 * to the request's model (and nothing was set), else the body re-serialised with "model"
 * replaced. NULL on allocation failure. *len receives the length (not counting the NUL). */
char *gateway_api_upstream_body(const gateway_api_req_t *req, const char *model, size_t *len);

/* For a chat: vLLM's POST /tokenize body (messages form) asking for the ids this request's
 * conversation prefills: "model", "messages", "tools", "add_generation_prompt",
 * "continue_final_message", "chat_template_kwargs" as the request has them, and
 * "add_special_tokens": false (a chat's template writes its specials). Serialised without
 * whitespace, keys in that order, so one conversation gives one body. malloc'd, *len its
 * length; NULL for a completions request or on allocation failure. */
char *gateway_api_tokenize_body(const gateway_api_req_t *req, size_t *len);

/* A malloc'd OpenAI error body. `param` and `code` may be NULL (JSON null). */
char *gateway_api_error_body(const char *type, const char *message, const char *param,
                             const char *code, size_t *len);

/* Fills *err (printf-style message). Returns err. */
gateway_api_error_t *gateway_api_error_set(gateway_api_error_t *err, int status, const char *type,
                                           const char *param, const char *code, const char *fmt,
                                           ...) __attribute__((format(printf, 6, 7)));

const char *gateway_api_kind_name(gateway_api_kind_t kind); /* "chat" | "completions" | "messages" */

#endif

/*
 * sim_api — request parsing, response shapes (vLLM's field names and order), the SSE writer.
 */
#include "sim_api.h"

#include <assert.h>
#include <cjson/cJSON.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ipl_clock.h"
#include "ipl_cond.h"
#include "ipl_error.h"
#include "ipl_log.h"
#include "sim_fault.h"
#include "sim_text.h"
#include "api_anthropic_error.h"
#include "api_anthropic_request.h"
#include "api_anthropic_response.h"
#include "api_anthropic_stream.h"
#include "api_buf.h"
#include "ipl_hash.h"

#define S_WAIT_SLICE_MS 100 /* how often a waiting request re-checks (its client, bounded) */
#define S_NV1           5   /* /v1 routes behind the stand-in's gate */

struct sim_api {
    sim_api_config_t cfg;
    char *model_name;
    char *vllm_version;
    sim_engine_t *engine;
    const ipl_prompt_t *prompt; /* renders chats and encodes prompts, as the gateway does */
    const ipl_tokenizer_t *tok; /* its tokenizer: decoding and generated text */
    ipl_metrics_t *metrics;
    ipl_metric_t *bad_requests;
    ipl_metric_t *client_gone;
    ipl_metric_t *injected_failures;
    sim_lora_t *loras;      /* owned copies */
    char **aliases;         /* owned copies of cfg.model_aliases */
    sim_standin_t *standin; /* the provider stand-in, or NULL */
    sim_fault_t *fault;     /* faults armed by POST /sim/fault */
    struct s_route *routes; /* the /v1 routes behind the stand-in's gate (S_NV1) */
    pthread_mutex_t lock;   /* writers, next_id, fail_state, epoch, ready_ns */
    pthread_cond_t writers_done;
    int writers;
    uint64_t next_id;
    uint64_t fail_state; /* --fail-rate draws */
    uint64_t epoch;      /* restarts so far: requests of an older epoch died with it */
    uint64_t ready_ns;   /* monotonic time before which the server is "starting" (503) */
    long started;        /* wall seconds, "created" of /v1/models */
};

/* One generation request, parsed. */
typedef struct {
    bool chat;
    bool stream;
    bool include_usage;
    bool continuous_usage;
    uint32_t *prompt; /* malloc'd */
    size_t nprompt;
    uint32_t max_tokens;
    uint32_t min_tokens;
    bool ignore_eos;
    uint64_t seed;
    char id[48];
    long created;
    const char *model;     /* the name asked for: the base model or an adapter (borrowed) */
    sim_block_keys_t keys; /* LoRA (borrowed name) and cache_salt (malloc'd) */
    uint64_t epoch;
    api_anthropic_request_t *anthropic; /* /v1/messages: the request, to answer in its shape */
} s_params_t;

static void s_params_free(s_params_t *p)
{
    api_anthropic_request_destroy(&p->anthropic);
    free(p->prompt);
    free((char *)p->keys.cache_salt);
    p->prompt = NULL;
    p->keys.cache_salt = NULL;
}

/* A /v1 route behind the stand-in's gate (latency, key check, record). */
typedef struct s_route {
    sim_api_t *api;
    ipl_http_handler_fn *fn;
} s_route_t;

/* The stand-in's record of the request being answered on this thread (MHD calls a handler
 * on its connection's thread, and s_error runs inside handlers only): s_error sets its
 * status, generation its tokens; a streaming response takes the record over (`deferred`) and
 * its writer thread files it when the stream ends. NULL when the stand-in is off. */
typedef struct {
    sim_standin_note_t note;
    bool deferred;
} s_pending_t;
static _Thread_local s_pending_t *s_pending;

/* A streaming response in flight: owned by its writer thread. */
typedef struct {
    sim_api_t *api;
    s_params_t p;
    sim_req_t *req;
    int fd;
    bool noted; /* file `note` at the end (the stand-in is on) */
    sim_standin_note_t note;
    api_anthropic_stream_t *an; /* /v1/messages: the chunks translated to Anthropic's events */
    api_buf_t out;
    int stall_ms; /* POST /sim/fault: nothing before this long (the headers are out) */
} s_stream_t;

/* --- small helpers ------------------------------------------------------------------------- */

static void s_error(sim_api_t *self, ipl_http_resp_t *resp, int status, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static void s_error(sim_api_t *self, ipl_http_resp_t *resp, int status, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    const char *type = status == 404   ? "NotFoundError"
                       : status == 400 ? "BadRequestError"
                       : status == 503 ? "ServiceUnavailableError"
                                       : "InternalServerError";
    if (status == 400 && self->bad_requests) ipl_metric_inc(self->bad_requests);
    if (s_pending) s_pending->note.status = status;
    char q[200];
    IPL_LOG_EVERY(5, IPL_LOG_INFO, "request_rejected", "status=%d reason=%s", status,
                  ipl_log_quote(q, sizeof q, msg));
    ipl_http_resp_error(resp, status, type, msg);
}

/* Sends a cJSON tree as the response (consumes it). */
static void s_send_json(ipl_http_resp_t *resp, int status, cJSON *root)
{
    char *json = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    if (!json) {
        ipl_http_resp_error(resp, 500, "InternalServerError", "out of memory");
        return;
    }
    ipl_http_resp_take(resp, status, "application/json", &json, strlen(json));
}

static cJSON *s_parse_body(sim_api_t *self, const ipl_http_req_t *req, ipl_http_resp_t *resp)
{
    size_t len = 0;
    const char *body = ipl_http_req_body(req, &len);
    cJSON *root = body && len ? cJSON_ParseWithLength(body, len) : NULL;
    if (!cJSON_IsObject(root)) {
        cJSON_Delete(root);
        s_error(self, resp, 400,
                "The request body is not a JSON object: expected e.g. "
                "{\"model\": \"%s\", \"prompt\": \"Hello\"}",
                self->model_name);
        return NULL;
    }
    return root;
}

/* An optional non-negative integer field. 0 (absent or valid) or -1 (error answered). */
static int s_get_uint(sim_api_t *self, ipl_http_resp_t *resp, const cJSON *root, const char *key,
                      uint32_t *out, uint32_t min)
{
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(root, key);
    if (!it || cJSON_IsNull(it)) return 0;
    if (!cJSON_IsNumber(it) || it->valuedouble != floor(it->valuedouble) || it->valuedouble < min ||
        it->valuedouble > 4294967295.0) {
        s_error(self, resp, 400, "%s must be an integer >= %u", key, min);
        return -1;
    }
    *out = (uint32_t)it->valuedouble;
    return 0;
}

static int s_get_bool(sim_api_t *self, ipl_http_resp_t *resp, const cJSON *root, const char *key,
                      bool *out)
{
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(root, key);
    if (!it || cJSON_IsNull(it)) return 0;
    if (!cJSON_IsBool(it)) {
        s_error(self, resp, 400, "%s must be true or false", key);
        return -1;
    }
    *out = cJSON_IsTrue(it);
    return 0;
}

/* Resolves the optional "model" field: the base model (or absent: *lora = -1) or a LoRA
 * adapter (*lora = its index). 0, or -1 (400/404 answered). */
static int s_resolve_model(sim_api_t *self, ipl_http_resp_t *resp, const cJSON *root, int *lora)
{
    *lora = -1;
    const cJSON *m = cJSON_GetObjectItemCaseSensitive(root, "model");
    if (!m || cJSON_IsNull(m)) return 0;
    if (!cJSON_IsString(m)) {
        s_error(self, resp, 400, "model must be a string");
        return -1;
    }
    if (strcmp(m->valuestring, self->model_name) == 0) return 0;
    for (uint32_t i = 0; i < self->cfg.nmodel_aliases; i++) /* vLLM: any served name */
        if (strcmp(m->valuestring, self->aliases[i]) == 0) return 0;
    for (uint32_t i = 0; i < self->cfg.nloras; i++)
        if (strcmp(m->valuestring, self->loras[i].name) == 0) {
            *lora = (int)i;
            return 0;
        }
    s_error(self, resp, 404, "The model `%.200s` does not exist.", m->valuestring);
    return -1;
}

static int s_check_model(sim_api_t *self, ipl_http_resp_t *resp, const cJSON *root)
{
    int lora;
    return s_resolve_model(self, resp, root, &lora);
}

/* While "starting" (--startup-delay, at start and after a restart) every route answers 503,
 * as a vLLM whose engine is not up yet. Returns true when it answered. */
static bool s_starting(sim_api_t *self, ipl_http_resp_t *resp)
{
    pthread_mutex_lock(&self->lock);
    uint64_t ready = self->ready_ns;
    pthread_mutex_unlock(&self->lock);
    if (ready == 0 || ipl_mono_ns() >= ready) return false;
    s_error(self, resp, 503, "The server is starting up (simulated model loading).");
    return true;
}

/* --fail-rate: one seeded draw per generation request. */
static bool s_inject_failure(sim_api_t *self)
{
    if (self->cfg.fail_rate <= 0) return false;
    pthread_mutex_lock(&self->lock);
    uint64_t z = self->fail_state; /* splitmix64, as in sim_text */
    self->fail_state += 0x9e3779b97f4a7c15ULL;
    pthread_mutex_unlock(&self->lock);
    z = ipl_mix64(z);
    return (double)(z >> 11) / 9007199254740992.0 < self->cfg.fail_rate;
}

static uint64_t s_epoch(sim_api_t *self)
{
    pthread_mutex_lock(&self->lock);
    uint64_t e = self->epoch;
    pthread_mutex_unlock(&self->lock);
    return e;
}

/* Token ids from a JSON array of non-negative integers. NULL when it is not one. */
static uint32_t *s_ids_from_json(const cJSON *arr, size_t *n)
{
    int count = cJSON_GetArraySize(arr);
    uint32_t *ids = malloc(((size_t)count + 1) * sizeof *ids);
    if (!ids) return NULL;
    size_t i = 0;
    const cJSON *it;
    cJSON_ArrayForEach(it, arr)
    {
        if (!cJSON_IsNumber(it) || it->valuedouble < 0 || it->valuedouble > 4294967295.0 ||
            it->valuedouble != floor(it->valuedouble)) {
            free(ids);
            return NULL;
        }
        ids[i++] = (uint32_t)it->valuedouble;
    }
    *n = i;
    return ids;
}

/* The prompt's token ids from "prompt" (completions) or "messages" (chat). 0 or -1 (400). */
static int s_prompt_tokens(sim_api_t *self, ipl_http_resp_t *resp, const cJSON *root, bool chat,
                           bool add_generation_prompt, uint32_t **ids, size_t *n)
{
    *ids = NULL;
    *n = 0;
    if (chat) {
        const cJSON *msgs = cJSON_GetObjectItemCaseSensitive(root, "messages");
        if (!cJSON_IsArray(msgs) || cJSON_GetArraySize(msgs) == 0) {
            s_error(self, resp, 400, "messages must be a non-empty array of messages");
            return -1;
        }
        /* vLLM's chat fields: tools, continue_final_message, chat_template_kwargs */
        const cJSON *tools = cJSON_GetObjectItemCaseSensitive(root, "tools");
        const cJSON *cont = cJSON_GetObjectItemCaseSensitive(root, "continue_final_message");
        const cJSON *kwargs = cJSON_GetObjectItemCaseSensitive(root, "chat_template_kwargs");
        char err[256] = "", *text = NULL;
        size_t len = 0;
        int rc =
            ipl_prompt_render(self->prompt, msgs, cJSON_IsArray(tools) ? tools : NULL,
                              add_generation_prompt, cJSON_IsTrue(cont),
                              cJSON_IsObject(kwargs) ? kwargs : NULL, &text, &len, err, sizeof err);
        if (rc == IPL_E_INVAL) {
            s_error(self, resp, 400, "%s", err[0] ? err : "invalid messages");
            return -1;
        }
        *ids = text ? ipl_prompt_encode(self->prompt, text, len, true, n) : NULL;
        free(text);
    } else {
        const cJSON *p = cJSON_GetObjectItemCaseSensitive(root, "prompt");
        if (cJSON_IsArray(p) && cJSON_GetArraySize(p) == 1 &&
            (cJSON_IsString(p->child) || cJSON_IsArray(p->child)))
            p = p->child; /* a batch of one prompt */
        if (cJSON_IsString(p)) {
            *ids =
                ipl_prompt_encode(self->prompt, p->valuestring, strlen(p->valuestring), false, n);
        } else if (cJSON_IsArray(p) && cJSON_GetArraySize(p) > 0 && cJSON_IsNumber(p->child)) {
            *ids = s_ids_from_json(p, n);
            if (!*ids) {
                s_error(self, resp, 400, "prompt token ids must be non-negative integers");
                return -1;
            }
        } else {
            s_error(self, resp, 400,
                    "prompt must be a string or an array of token ids (the "
                    "simulator serves one prompt per request)");
            return -1;
        }
    }
    if (!*ids) {
        s_error(self, resp, 500, "out of memory tokenizing the prompt");
        return -1;
    }
    return 0;
}

/* --- response pieces ----------------------------------------------------------------------- */

static cJSON *s_usage(const sim_api_t *self, uint32_t prompt, uint32_t completion, uint32_t cached)
{
    cJSON *u = cJSON_CreateObject();
    cJSON_AddNumberToObject(u, "prompt_tokens", prompt);
    cJSON_AddNumberToObject(u, "total_tokens", (double)prompt + completion);
    cJSON_AddNumberToObject(u, "completion_tokens", completion);
    if (self->cfg.prompt_tokens_details)
        cJSON_AddNumberToObject(cJSON_AddObjectToObject(u, "prompt_tokens_details"),
                                "cached_tokens", cached);
    return u;
}

static cJSON *s_envelope(const sim_api_t *self, const s_params_t *p, const char *object)
{
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "id", p->id);
    cJSON_AddStringToObject(root, "object", object);
    cJSON_AddNumberToObject(root, "created", (double)p->created);
    cJSON_AddStringToObject(root, "model", p->model ? p->model : self->model_name);
    return root;
}

static void s_add_finish(cJSON *choice, sim_finish_t finish)
{
    const char *name = sim_finish_name(finish);
    if (name)
        cJSON_AddStringToObject(choice, "finish_reason", name);
    else
        cJSON_AddNullToObject(choice, "finish_reason");
    cJSON_AddNullToObject(choice, "stop_reason");
}

/* Text of output tokens [from, to). malloc'd. */
static char *s_text(sim_api_t *self, sim_req_t *req, uint32_t from, uint32_t to)
{
    uint32_t n = 0;
    const uint32_t *out = sim_req_output(req, &n);
    if (to > n) to = n;
    if (from >= to) return strdup("");
    return ipl_tokenizer_decode(self->tok, out + from, to - from);
}

/* Writes n bytes of the OpenAI stream to the client: as they are, or translated to
 * Anthropic's events (/v1/messages). 0, or IPL_E_IO when the client left. */
static int s_emit(s_stream_t *s, const char *buf, size_t n)
{
    if (!s->an) return ipl_http_write_all(s->fd, buf, n);
    (void)api_anthropic_stream_feed(s->an, buf, n, &s->out);
    int rc = s->out.len ? ipl_http_write_all(s->fd, s->out.data, s->out.len) : 0;
    api_buf_clear(&s->out);
    return rc;
}

/* One SSE event "data: <json>\n\n" (consumes root). 0, or IPL_E_IO when the client left. */
static int s_sse(s_stream_t *s, cJSON *root)
{
    char *json = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    if (!json) return IPL_E_NOMEM;
    size_t n = strlen(json);
    char *buf = malloc(n + 9);
    if (!buf) {
        free(json);
        return IPL_E_NOMEM;
    }
    memcpy(buf, "data: ", 6);
    memcpy(buf + 6, json, n);
    memcpy(buf + 6 + n, "\n\n", 2);
    int rc = s_emit(s, buf, n + 8);
    free(buf);
    free(json);
    return rc;
}

/* A streamed chunk carrying `text` (NULL: the chat role chunk). */
static cJSON *s_chunk(sim_api_t *self, const s_params_t *p, const char *text, sim_finish_t finish,
                      const sim_req_status_t *st)
{
    cJSON *root = s_envelope(self, p, p->chat ? "chat.completion.chunk" : "text_completion");
    cJSON *choice = cJSON_CreateObject();
    cJSON_AddItemToArray(cJSON_AddArrayToObject(root, "choices"), choice);
    cJSON_AddNumberToObject(choice, "index", 0);
    if (p->chat) {
        cJSON *delta = cJSON_AddObjectToObject(choice, "delta");
        if (!text) cJSON_AddStringToObject(delta, "role", "assistant");
        cJSON_AddStringToObject(delta, "content", text ? text : "");
        cJSON_AddNullToObject(choice, "logprobs");
        const char *name = sim_finish_name(finish);
        if (name) {
            cJSON_AddStringToObject(choice, "finish_reason", name);
            cJSON_AddNullToObject(choice, "stop_reason");
        } else {
            cJSON_AddNullToObject(choice, "finish_reason");
        }
    } else {
        cJSON_AddStringToObject(choice, "text", text ? text : "");
        cJSON_AddNullToObject(choice, "logprobs");
        s_add_finish(choice, finish);
    }
    if (p->include_usage) {
        if (p->continuous_usage)
            cJSON_AddItemToObject(root, "usage",
                                  s_usage(self, st->prompt_tokens, st->emitted, st->cached_tokens));
        else
            cJSON_AddNullToObject(root, "usage");
    }
    return root;
}

/* --- streaming writer ---------------------------------------------------------------------- */

static void s_writer_exit(sim_api_t *self)
{
    pthread_mutex_lock(&self->lock);
    if (--self->writers == 0) pthread_cond_broadcast(&self->writers_done);
    pthread_mutex_unlock(&self->lock);
}

static void *s_stream_main(void *arg)
{
    s_stream_t *s = arg;
    sim_api_t *self = s->api;
    sim_req_status_t st = {0};
    uint32_t sent = 0;
    int rc = 0;
    if (s->stall_ms > 0 && sim_fault_stall(s->stall_ms, s->fd, false)) rc = IPL_E_IO;
    sim_engine_status(self->engine, s->req, &st);
    /* vLLM's chat stream sends its role chunk on the engine's first output (after the
     * prefill, with the first token: serving_chat.py, chat_completion_stream_generator's
     * first_iteration), not when the request arrives */
    bool role_due = s->p.chat;
    while (rc == 0) {
        sim_engine_wait(self->engine, s->req, sent, S_WAIT_SLICE_MS, &st);
        if (st.emitted == sent && st.finish == SIM_FINISH_NONE &&
            sim_fault_peer_gone(s->fd, false)) {
            rc = IPL_E_IO; /* the client hung up (ipl_httpd closed the stream): abort now */
            break;
        }
        if (role_due && (st.emitted > sent || st.finish != SIM_FINISH_NONE)) {
            role_due = false;
            if (!(st.finish == SIM_FINISH_ABORT && st.emitted == sent))
                rc = s_sse(s, s_chunk(self, &s->p, NULL, SIM_FINISH_NONE, &st));
            if (rc != 0) break;
        }
        if (st.emitted > sent) {
            char *text = s_text(self, s->req, sent, st.emitted);
            sent = st.emitted;
            rc = text ? s_sse(s, s_chunk(self, &s->p, text, st.finish, &st)) : IPL_E_NOMEM;
            free(text);
        } else if (st.finish != SIM_FINISH_NONE) {
            break; /* aborted without new tokens */
        }
        if (st.finish != SIM_FINISH_NONE) break;
    }
    if (st.finish == SIM_FINISH_ABORT && s_epoch(self) != s->p.epoch)
        rc = IPL_E_IO; /* the "process" died: the stream is cut, no usage, no [DONE] */
    if (rc == 0 && st.finish != SIM_FINISH_ABORT && s->p.include_usage) {
        cJSON *root =
            s_envelope(self, &s->p, s->p.chat ? "chat.completion.chunk" : "text_completion");
        cJSON_AddArrayToObject(root, "choices");
        cJSON_AddItemToObject(root, "usage",
                              s_usage(self, st.prompt_tokens, st.emitted, st.cached_tokens));
        rc = s_sse(s, root);
    }
    if (rc == 0) rc = s_emit(s, "data: [DONE]\n\n", 14);
    if (rc == 0 && s->an) {
        (void)api_anthropic_stream_finish(s->an, &s->out);
        rc = s->out.len ? ipl_http_write_all(s->fd, s->out.data, s->out.len) : 0;
    }
    if (rc != 0 && st.finish == SIM_FINISH_NONE) {
        /* The client went away: stop generating for it, as vLLM aborts the request. */
        sim_engine_abort(self->engine, s->req);
        if (self->client_gone) ipl_metric_inc(self->client_gone);
    }
    close(s->fd);
    if (s->noted) {
        s->note.prompt_tokens = st.prompt_tokens;
        s->note.completion_tokens = sent;
        sim_standin_record(self->standin, &s->note);
    }
    sim_engine_release(self->engine, &s->req);
    s_params_free(&s->p);
    api_anthropic_stream_destroy(&s->an);
    api_buf_free(&s->out);
    free(s);
    s_writer_exit(self);
    return NULL;
}

/* --- generation endpoints ------------------------------------------------------------------ */

/* Parses a completions / chat request into *p. 0, or -1 with the error answered. */
static int s_parse_generate(sim_api_t *self, ipl_http_resp_t *resp, const cJSON *root, bool chat,
                            s_params_t *p)
{
    *p = (s_params_t){.chat = chat, .max_tokens = 16, .epoch = s_epoch(self)};
    int lora = -1;
    if (s_resolve_model(self, resp, root, &lora) != 0) return -1;
    p->model = lora >= 0 ? self->loras[lora].name : self->model_name;
    if (lora >= 0) {
        p->keys.lora_id = lora + 1;
        p->keys.lora_name = self->loras[lora].name;
    }
    const cJSON *salt = cJSON_GetObjectItemCaseSensitive(root, "cache_salt");
    if (salt && !cJSON_IsNull(salt)) {
        if (!cJSON_IsString(salt) || !salt->valuestring[0]) {
            s_error(self, resp, 400,
                    "Parameter 'cache_salt' must be a non-empty string if provided.");
            return -1;
        }
        if (strlen(salt->valuestring) > SIM_HASHER_MAX_KEY) {
            s_error(self, resp, 400, "cache_salt is longer than the simulator's %d bytes",
                    SIM_HASHER_MAX_KEY);
            return -1;
        }
        if (!(p->keys.cache_salt = strdup(salt->valuestring))) {
            s_error(self, resp, 500, "out of memory");
            return -1;
        }
    }
    uint32_t n = 1, seed = 0;
    bool has_max_completion = false;
    if (s_get_bool(self, resp, root, "stream", &p->stream) ||
        s_get_bool(self, resp, root, "ignore_eos", &p->ignore_eos) ||
        s_get_uint(self, resp, root, "max_tokens", &p->max_tokens, 1) ||
        s_get_uint(self, resp, root, "min_tokens", &p->min_tokens, 0) ||
        s_get_uint(self, resp, root, "n", &n, 1) || s_get_uint(self, resp, root, "seed", &seed, 0))
        return -1;
    if (chat) {
        uint32_t mct = 0;
        if (s_get_uint(self, resp, root, "max_completion_tokens", &mct, 1)) return -1;
        has_max_completion = mct > 0;
        if (has_max_completion) p->max_tokens = mct;
    }
    if (n != 1) {
        s_error(self, resp, 400, "n must be 1 (the simulator generates one choice)");
        return -1;
    }
    if (p->min_tokens > p->max_tokens) {
        s_error(self, resp, 400, "min_tokens (%u) must be less than or equal to max_tokens (%u)",
                p->min_tokens, p->max_tokens);
        return -1;
    }
    const cJSON *so = cJSON_GetObjectItemCaseSensitive(root, "stream_options");
    if (so && !cJSON_IsNull(so)) {
        if (!cJSON_IsObject(so)) {
            s_error(self, resp, 400, "stream_options must be an object");
            return -1;
        }
        if (s_get_bool(self, resp, so, "include_usage", &p->include_usage) ||
            s_get_bool(self, resp, so, "continuous_usage_stats", &p->continuous_usage))
            return -1;
        if (!p->stream) {
            s_error(self, resp, 400, "Stream options can only be defined when `stream=True`.");
            return -1;
        }
    }
    bool add_gen = true;
    if (chat && s_get_bool(self, resp, root, "add_generation_prompt", &add_gen)) return -1;
    if (s_prompt_tokens(self, resp, root, chat, add_gen, &p->prompt, &p->nprompt) != 0) return -1;
    uint64_t max_len = self->cfg.max_model_len;
    if (p->nprompt == 0) {
        s_error(self, resp, 400, "The prompt is empty: at least one token is needed.");
        return -1;
    }
    if (p->nprompt + (uint64_t)p->max_tokens > max_len) {
        s_error(self, resp, 400,
                "This model's maximum context length is %" PRIu64 " tokens. However, you "
                "requested %" PRIu64 " tokens (%zu in the messages, %u in the completion). "
                "Please reduce the length of the messages or completion.",
                max_len, p->nprompt + (uint64_t)p->max_tokens, p->nprompt, p->max_tokens);
        return -1;
    }
    p->seed = sim_text_seed(self->cfg.seed, seed, p->prompt, p->nprompt);
    pthread_mutex_lock(&self->lock);
    uint64_t id = ++self->next_id;
    pthread_mutex_unlock(&self->lock);
    snprintf(p->id, sizeof p->id, "%s%016" PRIx64 "%016" PRIx64, chat ? "chatcmpl-" : "cmpl-",
             p->seed, id);
    p->created = (long)(ipl_wall_ms() / 1000);
    return 0;
}

static cJSON *s_final_response(sim_api_t *self, const s_params_t *p, sim_req_t *req,
                               const sim_req_status_t *st)
{
    char *text = s_text(self, req, 0, st->emitted);
    cJSON *root = s_envelope(self, p, p->chat ? "chat.completion" : "text_completion");
    cJSON *choice = cJSON_CreateObject();
    cJSON_AddItemToArray(cJSON_AddArrayToObject(root, "choices"), choice);
    cJSON_AddNumberToObject(choice, "index", 0);
    if (p->chat) {
        cJSON *msg = cJSON_AddObjectToObject(choice, "message");
        cJSON_AddStringToObject(msg, "role", "assistant");
        cJSON_AddStringToObject(msg, "content", text ? text : "");
        cJSON_AddNullToObject(msg, "refusal");
        cJSON_AddArrayToObject(msg, "tool_calls");
        cJSON_AddNullToObject(msg, "reasoning_content");
        cJSON_AddNullToObject(choice, "logprobs");
        s_add_finish(choice, st->finish);
    } else {
        cJSON_AddStringToObject(choice, "text", text ? text : "");
        cJSON_AddNullToObject(choice, "logprobs");
        s_add_finish(choice, st->finish);
        cJSON_AddNullToObject(choice, "prompt_logprobs");
    }
    cJSON_AddItemToObject(root, "usage",
                          s_usage(self, st->prompt_tokens, st->emitted, st->cached_tokens));
    if (p->chat) cJSON_AddNullToObject(root, "prompt_logprobs");
    free(text);
    return root;
}

/* /v1/messages: the request as the chat completion it is served as (vLLM's own
 * vllm/entrypoints/anthropic/serving.py does the same), or NULL with Anthropic's 400 sent. */
static cJSON *s_messages_body(sim_api_t *self, const ipl_http_req_t *hreq, ipl_http_resp_t *resp,
                              api_anthropic_request_t **areq)
{
    size_t len = 0;
    const char *body = ipl_http_req_body(hreq, &len);
    api_anthropic_error_t err = {0};
    if (api_anthropic_request_parse(API_ANTHROPIC_MESSAGES, body, len, areq, &err) != 0) {
        if (self->bad_requests) ipl_metric_inc(self->bad_requests);
        char *json = api_anthropic_error_body(err.status ? err.status : 400, err.message);
        if (json)
            ipl_http_resp_take(resp, err.status ? err.status : 400, "application/json", &json,
                               strlen(json));
        else
            ipl_http_resp_error(resp, 500, "api_error", "out of memory");
        if (s_pending) s_pending->note.status = err.status ? (unsigned)err.status : 400;
        return NULL;
    }
    return cJSON_Duplicate(api_anthropic_request_openai(*areq), 1);
}

/* A whole chat completion answered in Anthropic's shape (consumes root). */
static void s_send_messages(ipl_http_resp_t *resp, const api_anthropic_request_t *areq, cJSON *root)
{
    char *json = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    char *out = NULL;
    api_anthropic_error_t err = {0};
    int status = 200;
    if (!json || api_anthropic_response_translate(areq, json, strlen(json), &out, NULL, &err)) {
        status = err.status ? err.status : 500;
        out = api_anthropic_error_body(status, json ? err.message : "out of memory");
    }
    free(json);
    if (out)
        ipl_http_resp_take(resp, status, "application/json", &out, strlen(out));
    else
        ipl_http_resp_error(resp, 500, "api_error", "out of memory");
}

static void s_generate(sim_api_t *self, const ipl_http_req_t *hreq, ipl_http_resp_t *resp,
                       bool chat, bool messages)
{
    if (s_starting(self, resp)) return;
    api_anthropic_request_t *areq = NULL;
    cJSON *root =
        messages ? s_messages_body(self, hreq, resp, &areq) : s_parse_body(self, hreq, resp);
    if (!root) return;
    s_params_t p;
    int rc = s_parse_generate(self, resp, root, chat, &p);
    cJSON_Delete(root);
    p.anthropic = areq; /* owned by p from here on */
    if (rc != 0) {
        s_params_free(&p);
        return;
    }
    if (s_inject_failure(self)) {
        s_params_free(&p);
        if (self->injected_failures) ipl_metric_inc(self->injected_failures);
        s_error(self, resp, 500, "Internal server error (simulated failure, --fail-rate %g)",
                self->cfg.fail_rate);
        return;
    }
    int fault_status, stall_ms, client = ipl_http_req_socket(hreq);
    sim_fault_take(self->fault, &fault_status, &stall_ms);
    if (fault_status) {
        s_params_free(&p);
        if (self->injected_failures) ipl_metric_inc(self->injected_failures);
        s_error(self, resp, fault_status, "simulated failure (POST /sim/fault, status %d)",
                fault_status);
        return;
    }
    if (stall_ms && !p.stream && sim_fault_stall(stall_ms, client, true)) {
        s_params_free(&p); /* the client left while it stalled: nobody to answer */
        if (self->client_gone) ipl_metric_inc(self->client_gone);
        s_error(self, resp, 499, "the client went away");
        return;
    }
    /* What the model will say, and why it will stop. */
    uint32_t nout = p.max_tokens;
    sim_finish_t finish = SIM_FINISH_LENGTH;
    if (!p.ignore_eos) {
        uint32_t natural = sim_text_natural_length(p.seed, self->cfg.natural_mean_tokens,
                                                   p.min_tokens ? p.min_tokens : 1);
        if (natural < nout) {
            nout = natural;
            finish = SIM_FINISH_STOP;
        }
    }
    uint32_t *out = sim_text_generate(self->tok, p.seed, nout);
    sim_req_t *req = NULL;
    if (out) {
        sim_req_spec_t spec = {.prompt = p.prompt,
                               .nprompt = (uint32_t)p.nprompt,
                               .output = out,
                               .noutput = nout,
                               .finish = finish,
                               .keys = &p.keys};
        req = sim_engine_submit(self->engine, &spec);
        free(out);
    }
    if (!req) {
        s_params_free(&p);
        s_error(self, resp, 503, "The engine is not accepting requests (shutting down).");
        return;
    }
    if (ipl_log_get_level() <= IPL_LOG_DEBUG) { /* as vLLM's "Added request <id>" */
        const char *rid = ipl_http_req_header(hreq, "x-request-id");
        const char *api = chat ? "chat" : "completions";
        char id[160];
        IPL_DEBUG("request_added", "id=%s api=%s prompt_tokens=%zu max_tokens=%u stream=%d",
                  ipl_log_quote(id, sizeof id, rid && *rid ? rid : "-"),
                  messages ? "messages" : api, (size_t)p.nprompt, (unsigned)nout, p.stream ? 1 : 0);
    }
    if (p.stream) {
        s_stream_t *s = calloc(1, sizeof *s);
        int fd = s ? ipl_http_resp_stream(resp, 200, "text/event-stream; charset=utf-8") : -1;
        if (fd < 0) {
            sim_engine_abort(self->engine, req);
            sim_engine_release(self->engine, &req);
            s_params_free(&p);
            free(s);
            if (!s) ipl_http_resp_error(resp, 500, "InternalServerError", "out of memory");
            if (s_pending) s_pending->note.status = 500; /* a 500 either way */
            return;
        }
        *s = (s_stream_t){.api = self, .p = p, .req = req, .fd = fd, .stall_ms = stall_ms};
        if (p.anthropic) s->an = api_anthropic_stream_new(p.anthropic);
        if (s_pending) { /* the writer files the record when the stream ends */
            s_pending->note.status = 200;
            s_pending->deferred = true;
            s->noted = true;
            s->note = s_pending->note;
        }
        pthread_mutex_lock(&self->lock);
        self->writers++;
        pthread_mutex_unlock(&self->lock);
        pthread_t t;
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        pthread_attr_setstacksize(&attr, 256 * 1024);
        if (pthread_create(&t, &attr, s_stream_main, s) != 0) {
            /* The response has started streaming; all we can do is end it. */
            IPL_LOG_EVERY(10, IPL_LOG_ERROR, "stream_thread_failed", "error=%d", errno);
            sim_engine_abort(self->engine, req);
            sim_engine_release(self->engine, &req);
            close(fd);
            s_params_free(&p);
            free(s);
            s_writer_exit(self);
        }
        pthread_attr_destroy(&attr);
        return;
    }
    sim_req_status_t st;
    bool gone = false;
    do {
        sim_engine_wait(self->engine, req, UINT32_MAX, S_WAIT_SLICE_MS, &st);
        if (st.finish == SIM_FINISH_NONE && !gone && sim_fault_peer_gone(client, true)) {
            gone = true; /* as vLLM: a request whose client disconnected is aborted */
            sim_engine_abort(self->engine, req);
            if (self->client_gone) ipl_metric_inc(self->client_gone);
        }
    } while (st.finish == SIM_FINISH_NONE);
    if (st.finish == SIM_FINISH_ABORT && s_epoch(self) != p.epoch)
        s_error(self, resp, 500, "The engine died while serving the request (simulated restart).");
    else if (st.finish == SIM_FINISH_ABORT)
        s_error(self, resp, 503, "The request was aborted (the server is shutting down).");
    else if (p.anthropic)
        s_send_messages(resp, p.anthropic, s_final_response(self, &p, req, &st));
    else
        s_send_json(resp, 200, s_final_response(self, &p, req, &st));
    if (s_pending) {
        s_pending->note.prompt_tokens = st.prompt_tokens;
        s_pending->note.completion_tokens = st.emitted;
    }
    sim_engine_release(self->engine, &req);
    s_params_free(&p);
}

static void s_completions(void *arg, const ipl_http_req_t *req, ipl_http_resp_t *resp)
{
    s_generate(arg, req, resp, false, false);
}

static void s_chat_completions(void *arg, const ipl_http_req_t *req, ipl_http_resp_t *resp)
{
    s_generate(arg, req, resp, true, false);
}

static void s_messages(void *arg, const ipl_http_req_t *req, ipl_http_resp_t *resp)
{
    s_generate(arg, req, resp, true, true);
}

/* --- other endpoints ----------------------------------------------------------------------- */

static void s_models(void *arg, const ipl_http_req_t *req, ipl_http_resp_t *resp)
{
    (void)req;
    sim_api_t *self = arg;
    if (s_starting(self, resp)) return;
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "object", "list");
    cJSON *m = cJSON_CreateObject();
    cJSON_AddItemToArray(cJSON_AddArrayToObject(root, "data"), m);
    cJSON_AddStringToObject(m, "id", self->model_name);
    cJSON_AddStringToObject(m, "object", "model");
    cJSON_AddNumberToObject(m, "created", (double)self->started);
    cJSON_AddStringToObject(m, "owned_by", "vllm");
    cJSON_AddStringToObject(m, "root", self->model_name);
    cJSON_AddNullToObject(m, "parent");
    cJSON_AddNumberToObject(m, "max_model_len", self->cfg.max_model_len);
    cJSON *perm = cJSON_CreateObject();
    cJSON_AddItemToArray(cJSON_AddArrayToObject(m, "permission"), perm);
    cJSON_AddStringToObject(perm, "id", "modelperm-inferplane-sim");
    cJSON_AddStringToObject(perm, "object", "model_permission");
    cJSON_AddNumberToObject(perm, "created", (double)self->started);
    cJSON_AddBoolToObject(perm, "allow_create_engine", false);
    cJSON_AddBoolToObject(perm, "allow_sampling", true);
    cJSON_AddBoolToObject(perm, "allow_logprobs", true);
    cJSON_AddBoolToObject(perm, "allow_search_indices", false);
    cJSON_AddBoolToObject(perm, "allow_view", true);
    cJSON_AddBoolToObject(perm, "allow_fine_tuning", false);
    cJSON_AddStringToObject(perm, "organization", "*");
    cJSON_AddNullToObject(perm, "group");
    cJSON_AddBoolToObject(perm, "is_blocking", false);
    cJSON *data = cJSON_GetObjectItemCaseSensitive(root, "data");
    for (uint32_t i = 0; i < self->cfg.nmodel_aliases; i++) { /* vLLM: one card per name */
        cJSON *a = cJSON_Duplicate(m, true);
        cJSON_ReplaceItemInObject(a, "id", cJSON_CreateString(self->aliases[i]));
        cJSON_AddItemToArray(data, a);
    }
    for (uint32_t i = 0; i < self->cfg.nloras; i++) { /* vLLM: adapters, parent = base */
        cJSON *a = cJSON_Duplicate(m, true);
        cJSON_ReplaceItemInObject(a, "id", cJSON_CreateString(self->loras[i].name));
        cJSON_ReplaceItemInObject(a, "root", cJSON_CreateString(self->loras[i].path));
        cJSON_ReplaceItemInObject(a, "parent", cJSON_CreateString(self->model_name));
        cJSON_ReplaceItemInObject(a, "max_model_len", cJSON_CreateNull());
        cJSON_AddItemToArray(data, a);
    }
    s_send_json(resp, 200, root);
}

static void s_health(void *arg, const ipl_http_req_t *req, ipl_http_resp_t *resp)
{
    (void)req;
    if (s_starting(arg, resp)) return;
    ipl_http_resp_set(resp, 200, "application/json", "", 0);
}

static void s_version(void *arg, const ipl_http_req_t *req, ipl_http_resp_t *resp)
{
    (void)req;
    sim_api_t *self = arg;
    if (s_starting(self, resp)) return;
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "version", self->vllm_version);
#ifdef IPL_VERSION
    cJSON_AddStringToObject(root, "simulator", "inferplane-sim " IPL_VERSION);
#endif
    s_send_json(resp, 200, root);
}

static void s_metrics(void *arg, const ipl_http_req_t *req, ipl_http_resp_t *resp)
{
    (void)req;
    sim_api_t *self = arg;
    if (s_starting(self, resp)) return;
    size_t len = 0;
    char *text = self->metrics ? ipl_metrics_render(self->metrics, &len) : strdup("");
    if (!text) {
        ipl_http_resp_error(resp, 500, "InternalServerError", "out of memory");
        return;
    }
    ipl_http_resp_take(resp, 200, "text/plain; version=0.0.4; charset=utf-8", &text, len);
}

static void s_reset_prefix_cache(void *arg, const ipl_http_req_t *req, ipl_http_resp_t *resp)
{
    (void)req;
    sim_api_t *self = arg;
    if (s_starting(self, resp)) return;
    sim_engine_reset_prefix_cache(self->engine);
    ipl_http_resp_set(resp, 200, "application/json", "", 0);
}

static void s_tokenize(void *arg, const ipl_http_req_t *hreq, ipl_http_resp_t *resp)
{
    sim_api_t *self = arg;
    if (s_starting(self, resp)) return;
    cJSON *root = s_parse_body(self, hreq, resp);
    if (!root) return;
    bool chat = cJSON_GetObjectItemCaseSensitive(root, "messages") != NULL;
    bool add_gen = true, strs = false;
    uint32_t *ids = NULL;
    size_t n = 0;
    if (s_check_model(self, resp, root) ||
        s_get_bool(self, resp, root, "return_token_strs", &strs) ||
        (chat && s_get_bool(self, resp, root, "add_generation_prompt", &add_gen)) ||
        s_prompt_tokens(self, resp, root, chat, add_gen, &ids, &n)) {
        cJSON_Delete(root);
        return;
    }
    cJSON_Delete(root);
    cJSON *out = cJSON_CreateObject();
    cJSON_AddNumberToObject(out, "count", (double)n);
    cJSON_AddNumberToObject(out, "max_model_len", self->cfg.max_model_len);
    cJSON *tokens = cJSON_AddArrayToObject(out, "tokens");
    cJSON *token_strs = strs ? cJSON_AddArrayToObject(out, "token_strs") : NULL;
    if (!strs) cJSON_AddNullToObject(out, "token_strs");
    for (size_t i = 0; i < n; i++) {
        cJSON_AddItemToArray(tokens, cJSON_CreateNumber(ids[i]));
        if (token_strs) {
            char *piece = ipl_tokenizer_decode(self->tok, &ids[i], 1);
            cJSON_AddItemToArray(token_strs, cJSON_CreateString(piece ? piece : ""));
            free(piece);
        }
    }
    free(ids);
    s_send_json(resp, 200, out);
}

static void s_detokenize(void *arg, const ipl_http_req_t *hreq, ipl_http_resp_t *resp)
{
    sim_api_t *self = arg;
    if (s_starting(self, resp)) return;
    cJSON *root = s_parse_body(self, hreq, resp);
    if (!root) return;
    if (s_check_model(self, resp, root) != 0) {
        cJSON_Delete(root);
        return;
    }
    const cJSON *tokens = cJSON_GetObjectItemCaseSensitive(root, "tokens");
    size_t n = 0;
    uint32_t *ids = cJSON_IsArray(tokens) ? s_ids_from_json(tokens, &n) : NULL;
    cJSON_Delete(root);
    if (!ids) {
        s_error(self, resp, 400, "tokens must be an array of non-negative integer token ids");
        return;
    }
    char *text = ipl_tokenizer_decode(self->tok, ids, n);
    free(ids);
    cJSON *out = cJSON_CreateObject();
    cJSON_AddStringToObject(out, "prompt", text ? text : "");
    free(text);
    s_send_json(resp, 200, out);
}

/* POST /sim/fault (sim_fault.h): arms faults; GET shows what is armed. */
static void s_fault(void *arg, const ipl_http_req_t *req, ipl_http_resp_t *resp)
{
    sim_api_t *self = arg;
    char err[160];
    size_t len = 0;
    const char *body = ipl_http_req_body(req, &len);
    if (!strcmp(ipl_http_req_method(req), "POST") &&
        sim_fault_arm(self->fault, body, len, err, sizeof err) != 0) {
        s_error(self, resp, 400, "%s", err);
        return;
    }
    char *json = sim_fault_json(self->fault);
    if (json)
        ipl_http_resp_take(resp, 200, "application/json", &json, strlen(json));
    else
        ipl_http_resp_error(resp, 500, "InternalServerError", "out of memory");
}

static void s_restart(void *arg, const ipl_http_req_t *req, ipl_http_resp_t *resp)
{
    (void)req;
    sim_api_restart(arg);
    ipl_http_resp_set(resp, 200, "application/json", "{\"restarted\":true}", 18);
}

void sim_api_restart(sim_api_t *self)
{
    double delay = self->cfg.startup_delay_s / self->cfg.time_scale;
    pthread_mutex_lock(&self->lock);
    self->epoch++; /* before the engine aborts: writers see the new epoch with the abort */
    self->ready_ns = delay > 0 ? ipl_mono_ns() + (uint64_t)(delay * 1e9) : 0;
    pthread_mutex_unlock(&self->lock);
    sim_engine_restart(self->engine);
}

/* --- the provider stand-in ------------------------------------------------------------------ */

/* OpenAI's 401 (its error shape, as the official clients parse it; vLLM itself answers
 * {"error": "Unauthorized"}). The message never repeats what was presented. */
static void s_unauthorized(ipl_http_resp_t *resp, sim_auth_t auth)
{
    cJSON *root = cJSON_CreateObject();
    cJSON *err = cJSON_AddObjectToObject(root, "error");
    cJSON_AddStringToObject(err, "message",
                            auth == SIM_AUTH_MISSING
                                ? "You didn't provide an API key. You need to provide your API "
                                  "key in an Authorization header using Bearer auth (i.e. "
                                  "Authorization: Bearer YOUR_KEY)."
                                : "Incorrect API key provided.");
    cJSON_AddStringToObject(err, "type", "invalid_request_error");
    cJSON_AddNullToObject(err, "param");
    if (auth == SIM_AUTH_MISSING)
        cJSON_AddNullToObject(err, "code");
    else
        cJSON_AddStringToObject(err, "code", "invalid_api_key");
    IPL_LOG_EVERY(5, IPL_LOG_INFO, "request_unauthorized", "auth=%s", sim_auth_name(auth));
    s_send_json(resp, 401, root);
}

/* The record's model and stream flag, from the body when it is a JSON object (best effort:
 * the handler answers whatever is wrong with it). */
static void s_note_body(sim_standin_note_t *note, const ipl_http_req_t *req)
{
    size_t len = 0;
    const char *body = ipl_http_req_body(req, &len);
    cJSON *root = body && len ? cJSON_ParseWithLength(body, len) : NULL;
    const cJSON *m = cJSON_GetObjectItemCaseSensitive(root, "model");
    if (cJSON_IsString(m)) snprintf(note->model, sizeof note->model, "%s", m->valuestring);
    note->stream = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(root, "stream"));
    cJSON_Delete(root);
}

/* Every /v1 route in the stand-in mode: the network latency, the key, then the route's own
 * handler; the request is recorded whatever happens. */
static void s_gate(void *arg, const ipl_http_req_t *req, ipl_http_resp_t *resp)
{
    const s_route_t *r = arg;
    sim_api_t *self = r->api;
    s_pending_t pending;
    sim_standin_note_init(&pending.note, ipl_http_req_method(req), ipl_http_req_path(req));
    pending.deferred = false;
    for (int i = 0; i < SIM_STANDIN_MAX_HEADERS; i++) {
        const char *name = sim_standin_header_name(self->standin, i);
        if (!name) break;
        if (ipl_http_req_header(req, name)) pending.note.headers |= 1ULL << i;
    }
    s_note_body(&pending.note, req);
    uint32_t ms = sim_standin_draw_latency_ms(self->standin);
    if (ms) {
        struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};
        while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
        }
    }
    pending.note.auth = sim_standin_check(self->standin, ipl_http_req_header(req, "Authorization"),
                                          ipl_http_req_header(req, "x-api-key"));
    if (pending.note.auth == SIM_AUTH_MISSING || pending.note.auth == SIM_AUTH_WRONG) {
        s_unauthorized(resp, pending.note.auth); /* nothing reaches the engine */
        pending.note.status = 401;
        sim_standin_record(self->standin, &pending.note);
        return;
    }
    s_pending = &pending;
    r->fn(self, req, resp);
    s_pending = NULL;
    if (pending.deferred) return; /* a stream: its writer files the record */
    if (!pending.note.status) pending.note.status = 200;
    sim_standin_record(self->standin, &pending.note);
}

static void s_standin_received(void *arg, const ipl_http_req_t *req, ipl_http_resp_t *resp)
{
    (void)req;
    sim_api_t *self = arg;
    cJSON *root = sim_standin_report(self->standin);
    if (!root) {
        ipl_http_resp_error(resp, 500, "InternalServerError", "out of memory");
        return;
    }
    s_send_json(resp, 200, root);
}

static void s_standin_reset(void *arg, const ipl_http_req_t *req, ipl_http_resp_t *resp)
{
    (void)req;
    sim_api_t *self = arg;
    sim_standin_reset(self->standin);
    ipl_http_resp_set(resp, 200, "application/json", "{\"reset\":true}", 14);
}

/* --- life cycle ---------------------------------------------------------------------------- */

static void s_free_loras(sim_api_t *self);

/* Frees what sim_api_new allocated before its mutex and condition, and self. */
static void s_free_parts(sim_api_t *self)
{
    for (uint32_t i = 0; self->aliases && i < self->cfg.nmodel_aliases; i++)
        free(self->aliases[i]);
    free(self->aliases);
    free(self->routes);
    sim_standin_destroy(&self->standin);
    sim_fault_destroy(&self->fault);
    s_free_loras(self);
    free(self->model_name);
    free(self->vllm_version);
    free(self);
}

static void s_free_loras(sim_api_t *self)
{
    for (uint32_t i = 0; self->loras && i < self->cfg.nloras; i++) {
        free((char *)self->loras[i].name);
        free((char *)self->loras[i].path);
    }
    free(self->loras);
    self->loras = NULL;
}

sim_api_t *sim_api_new(const sim_api_config_t *cfg, sim_engine_t *engine,
                       const ipl_prompt_t *prompt, ipl_metrics_t *metrics)
{
    assert(cfg && engine && prompt);
    sim_api_t *self = calloc(1, sizeof *self);
    if (!self) return NULL;
    self->cfg = *cfg;
    self->model_name = strdup(cfg->model_name ? cfg->model_name : "sim-model");
    self->vllm_version = strdup(cfg->vllm_version ? cfg->vllm_version : "0.26.0");
    if (!self->model_name || !self->vllm_version) {
        free(self->model_name);
        free(self->vllm_version);
        free(self);
        return NULL;
    }
    self->cfg.model_name = self->model_name;
    self->cfg.vllm_version = self->vllm_version;
    if (cfg->nloras) {
        self->loras = calloc(cfg->nloras, sizeof *self->loras);
        for (uint32_t i = 0; self->loras && i < cfg->nloras; i++) {
            self->loras[i].name = strdup(cfg->loras[i].name);
            self->loras[i].path = strdup(cfg->loras[i].path ? cfg->loras[i].path : "");
            if (!self->loras[i].name || !self->loras[i].path) {
                s_free_loras(self);
                break;
            }
        }
        if (!self->loras) {
            free(self->model_name);
            free(self->vllm_version);
            free(self);
            return NULL;
        }
    }
    self->cfg.loras = self->loras;
    if (cfg->nmodel_aliases) {
        bool ok = (self->aliases = calloc(cfg->nmodel_aliases, sizeof *self->aliases)) != NULL;
        for (uint32_t i = 0; ok && i < cfg->nmodel_aliases; i++)
            ok = (self->aliases[i] = strdup(cfg->model_aliases[i])) != NULL;
        if (!ok) {
            s_free_parts(self);
            return NULL;
        }
    }
    self->cfg.model_aliases = (const char *const *)self->aliases;
    if (!(self->fault = sim_fault_new())) {
        s_free_parts(self);
        return NULL;
    }
    if (cfg->standin) {
        self->standin = sim_standin_new(cfg->standin);
        self->routes = self->standin ? calloc(S_NV1, sizeof *self->routes) : NULL;
        if (!self->routes) {
            s_free_parts(self);
            return NULL;
        }
    }
    self->cfg.standin = NULL; /* not kept: the stand-in has its copy */
    if (self->cfg.natural_mean_tokens <= 0) self->cfg.natural_mean_tokens = 256;
    if (self->cfg.time_scale <= 0) self->cfg.time_scale = 1;
    self->fail_state = cfg->seed ^ 0x6661696cULL; /* "fail" */
    if (cfg->startup_delay_s > 0)
        self->ready_ns =
            ipl_mono_ns() + (uint64_t)(cfg->startup_delay_s / self->cfg.time_scale * 1e9);
    self->engine = engine;
    self->prompt = prompt;
    self->tok = ipl_prompt_tokenizer(prompt);
    self->metrics = metrics;
    if (metrics) {
        self->bad_requests = ipl_metrics_counter(
            metrics, "inferplane_sim_bad_requests_total",
            "Requests rejected with 400 (malformed JSON, wrong types, too long).", NULL);
        self->client_gone = ipl_metrics_counter(
            metrics, "inferplane_sim_client_disconnects_total",
            "Requests aborted because the client went away (as vLLM aborts them).", NULL);
        self->injected_failures = ipl_metrics_counter(
            metrics, "inferplane_sim_injected_failures_total",
            "Generation requests answered with a simulated 500 (--fail-rate).", NULL);
    }
    pthread_mutex_init(&self->lock, NULL);
    ipl_cond_init_mono(&self->writers_done); /* deadlines on ipl_mono_ns */
    self->started = (long)(ipl_wall_ms() / 1000);
    return self;
}

/* A /v1 route: straight to its handler, or through the stand-in's gate when it is on. */
static void s_route_v1(sim_api_t *self, ipl_httpd_t *httpd, int i, const char *method,
                       const char *path, ipl_http_handler_fn *fn)
{
    assert(i < S_NV1);
    if (!self->standin) {
        ipl_httpd_route(httpd, method, path, fn, self);
        return;
    }
    self->routes[i] = (s_route_t){.api = self, .fn = fn};
    ipl_httpd_route(httpd, method, path, s_gate, &self->routes[i]);
}

/* vLLM's key check covers every path under /v1: an unknown one is refused (401) before it is
 * found missing (404). */
static void s_v1_unknown(void *arg, const ipl_http_req_t *req, ipl_http_resp_t *resp)
{
    (void)req;
    s_error(arg, resp, 404, "Not Found");
}

void sim_api_routes(sim_api_t *self, ipl_httpd_t *httpd)
{
    s_route_v1(self, httpd, 0, "POST", "/v1/completions", s_completions);
    s_route_v1(self, httpd, 1, "POST", "/v1/chat/completions", s_chat_completions);
    s_route_v1(self, httpd, 2, "GET", "/v1/models", s_models);
    if (self->cfg.serve_messages) s_route_v1(self, httpd, 4, "POST", "/v1/messages", s_messages);
    if (self->standin) {
        s_route_v1(self, httpd, 3, "*", "/v1/*", s_v1_unknown);
        ipl_httpd_route(httpd, "GET", "/stand-in/received", s_standin_received, self);
        ipl_httpd_route(httpd, "POST", "/stand-in/reset", s_standin_reset, self);
    }
    ipl_httpd_route(httpd, "GET", "/health", s_health, self);
    ipl_httpd_route(httpd, "GET", "/version", s_version, self);
    ipl_httpd_route(httpd, "GET", "/metrics", s_metrics, self);
    ipl_httpd_route(httpd, "POST", "/tokenize", s_tokenize, self);
    ipl_httpd_route(httpd, "POST", "/detokenize", s_detokenize, self);
    ipl_httpd_route(httpd, "POST", "/reset_prefix_cache", s_reset_prefix_cache, self);
    ipl_httpd_route(httpd, "POST", "/sim/restart", s_restart, self);
    ipl_httpd_route(httpd, "*", "/sim/fault", s_fault, self);
}

int sim_api_drain(sim_api_t *self, int timeout_ms)
{
    uint64_t ns = ipl_mono_ns() + (uint64_t)(timeout_ms > 0 ? timeout_ms : 0) * 1000000ull;
    pthread_mutex_lock(&self->lock);
    while (self->writers > 0 && ipl_cond_wait_until(&self->writers_done, &self->lock, ns)) {
    }
    int left = self->writers;
    pthread_mutex_unlock(&self->lock);
    return left;
}

void sim_api_destroy(sim_api_t **self_p)
{
    assert(self_p);
    sim_api_t *self = *self_p;
    if (!self) return;
    int left = sim_api_drain(self, 1000);
    if (left > 0) {
        /* Writers still hold a pointer to us: leak rather than free under them. */
        IPL_WARN("stream_writers_left", "count=%d", left);
        *self_p = NULL;
        return;
    }
    pthread_cond_destroy(&self->writers_done);
    pthread_mutex_destroy(&self->lock);
    s_free_parts(self);
    *self_p = NULL;
}

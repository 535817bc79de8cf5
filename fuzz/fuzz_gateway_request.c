/* libFuzzer target: the gateway's OpenAI request surface (services/gateway/gateway_api) —
 * every byte of a client's POST /v1/chat/completions or /v1/completions body — and the prompt
 * path it feeds (chat rendering, tokenization and block hashing with common/ipl_prompt's
 * built-in model, as the gateway routes with).
 *
 * The first byte's bit 0 picks the endpoint (chat or completions); the rest is the body.
 * Beyond "no crash" (ASan/UBSan), on every input:
 *   - a refusal is a 400 with a message (NUL-terminated inside its buffer), and no request;
 *   - an accepted request has a non-empty model, a prompt of prompt_len bytes, a non-negative
 *     max_tokens, prompts ≥ 1; its upstream body is the client's bytes unchanged when the
 *     model is kept, and JSON naming the new model when it is rewritten (the provider path);
 *     a chat's /tokenize body is JSON with the same model;
 *   - the prompt encodes to ids that hash to at most ids / 16 full blocks, the same with and
 *     without a cache salt in count, and differently (a salted prompt lives in its own hash
 *     space, so one tenant's blocks never match another's).
 * Built with the gateway's class and libs/api (the Makefile's FUZZ_EXTRA_fuzz_gateway_request). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "../services/gateway/gateway_api.h"
#include "ipl_prompt.h"

static ipl_prompt_t *s_prompt;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    char err[256];
    s_prompt = ipl_prompt_open("builtin", err, sizeof err);
    if (!s_prompt) abort();
    return 0;
}

static void s_check_model(const char *json, size_t len, const char *model)
{
    cJSON *root = cJSON_ParseWithLength(json, len);
    const cJSON *m = cJSON_GetObjectItemCaseSensitive(root, "model");
    if (!cJSON_IsString(m) || strcmp(m->valuestring, model) != 0) abort();
    cJSON_Delete(root);
}

static void s_check_prompt(const gateway_api_req_t *req)
{
    if (!req->prompt || strlen(req->prompt) > req->prompt_len) abort();
    size_t n = 0;
    uint32_t *ids = ipl_prompt_encode(s_prompt, req->prompt, req->prompt_len, req->chat, &n);
    if (!ids) return; /* out of memory */
    uint64_t a[64], b[64];
    size_t na = ipl_prompt_hashes(s_prompt, ids, n, 16, NULL, NULL, a, 64);
    size_t nb = ipl_prompt_hashes(s_prompt, ids, n, 16, NULL, "tenant-b", b, 64);
    size_t full = n / 16 < 64 ? n / 16 : 64;
    if (na != full || nb != full) abort();
    for (size_t i = 0; i < na; i++)
        if (a[i] == b[i]) abort();
    free(ids);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) return 0;
    gateway_api_kind_t kind = (data[0] & 1) ? GATEWAY_API_COMPLETIONS : GATEWAY_API_CHAT;
    const char *body = (const char *)data + 1;
    size_t len = size - 1;

    gateway_api_req_t *req = NULL;
    gateway_api_error_t err;
    memset(&err, 0, sizeof err);
    int rc = gateway_api_parse(kind, body, len, s_prompt, &req, &err);
    if (rc != 0) {
        if (req) abort();
        if (err.status != 400 && err.status != 500) abort();
        if (!err.message[0] || strnlen(err.message, sizeof err.message) == sizeof err.message)
            abort();
        if (!err.type) abort();
        size_t elen = 0;
        char *ebody = gateway_api_error_body(err.type, err.message, err.param, err.code, &elen);
        if (ebody) {
            cJSON *e = cJSON_ParseWithLength(ebody, elen);
            if (!cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(e, "error"))) abort();
            cJSON_Delete(e);
            free(ebody);
        }
        return 0;
    }
    if (!req || !req->model || !req->model[0] || req->max_tokens < 0 || req->prompts < 1)
        abort();
    if (req->kind != kind) abort();

    size_t ulen = 0;
    char *up = gateway_api_upstream_body(req, NULL, &ulen);
    if (up) {
        if (ulen != len || memcmp(up, body, len) != 0) abort();
        free(up);
    }
    up = gateway_api_upstream_body(req, "provider-model-x", &ulen);
    if (up) {
        s_check_model(up, ulen, "provider-model-x");
        free(up);
    }
    if (kind == GATEWAY_API_CHAT) {
        char *tok = gateway_api_tokenize_body(req, &ulen);
        if (tok) {
            s_check_model(tok, ulen, req->model);
            free(tok);
        }
    }
    if (!req->worker_tokenize) s_check_prompt(req);
    gateway_api_req_destroy(&req);
    if (req) abort();
    return 0;
}

/* libFuzzer target: the decider's JSON face (libs/decider/decider_http) — the body of
 * POST /v1/route and of inferplanectl's questions — parsed and hashed as the decider does.
 *
 * The whole input is the body. Beyond "no crash" (ASan/UBSan), on every input:
 *   - a refusal carries a message, NUL-terminated inside its buffer;
 *   - an accepted request names a model, holds at most DECIDER_HTTP_MAX_LABELS labels and
 *     headers (each header "name=value" with a lower-case name) and at most
 *     DECIDER_HTTP_MAX_HASHES hashes; exactly one of text and block hashes (or neither hashes
 *     nor text for an empty hash list);
 *   - hashing it gives at most prompt_tokens / block_size blocks for a text;
 *   - clearing it leaves nothing behind (LeakSanitizer).
 * Built with libs/decider's class and the libraries below it (FUZZ_EXTRA_fuzz_route). */
#include <ctype.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "decider_http.h"
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

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    decider_http_request_t r;
    memset(&r, 0, sizeof r);
    char err[256];
    memset(err, 0, sizeof err);
    int rc = decider_http_parse((const char *)data, size, s_prompt, &r, err, sizeof err);
    if (rc != 0) {
        if (!err[0] || strnlen(err, sizeof err) == sizeof err) abort();
        return 0;
    }
    if (!r.model || !r.model[0]) abort();
    if (r.nlabels > DECIDER_HTTP_MAX_LABELS || r.nheaders > DECIDER_HTTP_MAX_LABELS) abort();
    if (r.nhashes > DECIDER_HTTP_MAX_HASHES) abort();
    if (r.text && r.nhashes) abort();
    for (size_t i = 0; i < r.nheaders; i++) {
        const char *eq = strchr(r.headers[i], '=');
        if (!eq || eq == r.headers[i]) abort();
        for (const char *p = r.headers[i]; p < eq; p++)
            if (isupper((unsigned char)*p)) abort();
    }
    for (size_t i = 0; i < r.nlabels; i++)
        if (!r.labels[i]) abort();
    uint64_t bs = 16;
    if (decider_http_hash(&r, s_prompt, bs) == 0 && r.text) {
        if (r.nhashes > r.prompt_tokens / bs) abort();
    }
    decider_http_request_clear(&r);
    return 0;
}

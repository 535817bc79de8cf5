/* libFuzzer target: the vLLM KV-event batch decoder (ipl_vllm_kv) and, through it, ipl_mp.
 *
 * Beyond "no crash" (ASan/UBSan), it checks the decoder's contracts on every input:
 *   - all or nothing: a failed decode calls back zero times and leaves `batch` untouched;
 *     a successful one calls back exactly batch.nevents times;
 *   - validation-only (fn NULL) and delivering decodes agree;
 *   - every borrowed string lies inside the payload, every array is readable;
 *   - a successful decode means the payload is exactly one msgpack value (ipl_mp_skip agrees).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ipl_mp.h"
#include "ipl_vllm_kv.h"

typedef struct {
    const uint8_t *data;
    size_t size;
    uint32_t calls;
    uint64_t sink;
} s_ctx_t;

static void s_inside(const s_ctx_t *ctx, const char *s, uint32_t len)
{
    if (!s) return;
    const uint8_t *p = (const uint8_t *)s;
    if (p < ctx->data || p + len > ctx->data + ctx->size) abort();
}

static int s_event(void *arg, const ipl_vllm_kv_event_t *ev)
{
    s_ctx_t *ctx = arg;
    ctx->calls++;
    if (!ev->block_hashes || !ev->token_ids) abort();
    if (ev->kind < IPL_VLLM_KV_BLOCK_STORED || ev->kind > IPL_VLLM_KV_ALL_CLEARED) abort();
    if (ev->nblocks > IPL_VLLM_KV_MAX_BLOCKS || ev->ntokens > IPL_VLLM_KV_MAX_TOKENS) abort();
    if (ev->kind == IPL_VLLM_KV_BLOCK_STORED && ev->block_size == 0) abort();
    for (uint32_t i = 0; i < ev->nblocks; i++)
        ctx->sink += ev->block_hashes[i];
    for (uint32_t i = 0; i < ev->ntokens; i++)
        ctx->sink += ev->token_ids[i];
    s_inside(ctx, ev->medium, ev->medium_len);
    s_inside(ctx, ev->lora_name, ev->lora_name_len);
    s_inside(ctx, ev->spec_kind, ev->spec_kind_len);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static ipl_vllm_kv_decoder_t *dec; /* reused across inputs, as in the collector */
    if (!dec && !(dec = ipl_vllm_kv_decoder_new())) abort();

    /* An exact-size copy, so that reading one byte past the payload is caught. */
    uint8_t *payload = malloc(size ? size : 1);
    if (!payload) return 0;
    if (size) memcpy(payload, data, size);

    ipl_vllm_kv_batch_t sentinel = {.ts = -1.0, .dp_rank = -7, .nevents = 0xdeadbeef};
    ipl_vllm_kv_batch_t b1 = sentinel, b2 = sentinel;
    int rc1 = ipl_vllm_kv_decode(dec, payload, size, &b1, NULL, NULL);
    s_ctx_t ctx = {.data = payload, .size = size};
    int rc2 = ipl_vllm_kv_decode(dec, payload, size, &b2, s_event, &ctx);
    if (rc1 != rc2) abort();
    if (rc2 == 0) {
        if (ctx.calls != b2.nevents || b1.nevents != b2.nevents || b2.dp_rank < -1) abort();
        ipl_mp_reader_t r;
        ipl_mp_reader_init(&r, payload, size);
        if (ipl_mp_skip(&r) != 0 || ipl_mp_remaining(&r) != 0) abort();
    } else {
        if (rc2 > 0 || ctx.calls != 0 || b2.ts != sentinel.ts || b2.dp_rank != sentinel.dp_rank ||
            b2.nevents != sentinel.nevents)
            abort();
    }

    /* The sequence-frame helpers on the first bytes. */
    uint64_t seq;
    if ((ipl_vllm_kv_seq(payload, size < 8 ? size : 8, &seq) == 0) != (size >= 8)) abort();
    (void)ipl_vllm_kv_is_end_seq(payload, size < 8 ? size : 8);
    free(payload);
    return 0;
}

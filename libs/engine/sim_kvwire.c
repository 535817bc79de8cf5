/*
 * sim_kvwire — msgpack encoding (msgpack-c's packer, smallest int forms, float64 ts, str8 at
 * most: the same bytes msgspec writes). See sim_kvwire.h.
 */
#include "sim_kvwire.h"

#include <msgpack.h>
#include <string.h>

#include "ipl_error.h"

int sim_kv_format_parse(const char *text, sim_kv_format_t *out)
{
    if (text && strcmp(text, "map") == 0)
        *out = SIM_KV_FORMAT_MAP;
    else if (text && strcmp(text, "array") == 0)
        *out = SIM_KV_FORMAT_ARRAY;
    else if (text && strcmp(text, "array-legacy") == 0)
        *out = SIM_KV_FORMAT_ARRAY_LEGACY;
    else
        return IPL_E_INVAL;
    return 0;
}


static void s_pack_cstr(msgpack_packer *pk, const char *s)
{
    size_t n = strlen(s);
    msgpack_pack_str(pk, n);
    msgpack_pack_str_body(pk, s, n);
}

static void s_pack_hash(msgpack_packer *pk, const sim_hash_t *h, bool int_hashes)
{
    if (int_hashes) {
        msgpack_pack_uint64(pk, h->lo);
    } else {
        msgpack_pack_bin(pk, h->len);
        msgpack_pack_bin_body(pk, h->bytes, h->len);
    }
}

static void s_pack_hashes(msgpack_packer *pk, const sim_hash_t *h, uint32_t n, bool int_hashes)
{
    msgpack_pack_array(pk, n);
    for (uint32_t i = 0; i < n; i++)
        s_pack_hash(pk, &h[i], int_hashes);
}

static void s_pack_opt_str(msgpack_packer *pk, const char *s)
{
    if (s)
        s_pack_cstr(pk, s);
    else
        msgpack_pack_nil(pk);
}

/* One entry per block: None, or the tuple (lora_name?, cache_salt on the chain's block 0?). */
static void s_pack_extra_keys(msgpack_packer *pk, const sim_kv_event_t *ev)
{
    msgpack_pack_array(pk, ev->nhashes);
    for (uint32_t i = 0; i < ev->nhashes; i++) {
        bool salt = ev->keys.cache_salt && i == 0 && !ev->has_parent;
        uint32_t n = (ev->keys.lora_name ? 1u : 0u) + (salt ? 1u : 0u);
        if (!n) {
            msgpack_pack_nil(pk);
            continue;
        }
        msgpack_pack_array(pk, n);
        if (ev->keys.lora_name) s_pack_cstr(pk, ev->keys.lora_name);
        if (salt) s_pack_cstr(pk, ev->keys.cache_salt);
    }
}

static void s_pack_stored(msgpack_packer *pk, const sim_kv_event_t *ev, sim_kv_format_t fmt,
                          bool int_hashes)
{
    bool map = fmt == SIM_KV_FORMAT_MAP;
    if (map) {
        msgpack_pack_map(pk, 11);
        s_pack_cstr(pk, "type");
    } else {
        msgpack_pack_array(pk, fmt == SIM_KV_FORMAT_ARRAY ? 8 : 7);
    }
    s_pack_cstr(pk, "BlockStored");
    if (map) s_pack_cstr(pk, "block_hashes");
    s_pack_hashes(pk, ev->hashes, ev->nhashes, int_hashes);
    if (map) s_pack_cstr(pk, "parent_block_hash");
    if (ev->has_parent)
        s_pack_hash(pk, &ev->parent, int_hashes);
    else
        msgpack_pack_nil(pk);
    if (map) s_pack_cstr(pk, "token_ids");
    msgpack_pack_array(pk, ev->ntokens);
    for (uint32_t i = 0; i < ev->ntokens; i++)
        msgpack_pack_uint32(pk, ev->tokens[i]);
    if (map) s_pack_cstr(pk, "block_size");
    msgpack_pack_uint32(pk, ev->block_size);
    if (map) s_pack_cstr(pk, "lora_id");
    if (ev->keys.lora_id > 0)
        msgpack_pack_int64(pk, ev->keys.lora_id);
    else
        msgpack_pack_nil(pk);
    if (map) s_pack_cstr(pk, "medium");
    s_pack_cstr(pk, "GPU");
    if (fmt == SIM_KV_FORMAT_ARRAY_LEGACY) return;
    if (map) s_pack_cstr(pk, "lora_name");
    s_pack_opt_str(pk, ev->keys.lora_name);
    if (!map) return;
    s_pack_cstr(pk, "extra_keys");
    s_pack_extra_keys(pk, ev);
    s_pack_cstr(pk, "group_idx");
    msgpack_pack_uint32(pk, 0);
    s_pack_cstr(pk, "kv_cache_spec_kind");
    s_pack_cstr(pk, "full_attention");
}

static void s_pack_removed(msgpack_packer *pk, const sim_kv_event_t *ev, sim_kv_format_t fmt,
                           bool int_hashes)
{
    if (fmt == SIM_KV_FORMAT_MAP) {
        msgpack_pack_map(pk, 4);
        s_pack_cstr(pk, "type");
        s_pack_cstr(pk, "BlockRemoved");
        s_pack_cstr(pk, "block_hashes");
        s_pack_hashes(pk, ev->hashes, ev->nhashes, int_hashes);
        s_pack_cstr(pk, "medium");
        s_pack_cstr(pk, "GPU");
        s_pack_cstr(pk, "group_idx");
        msgpack_pack_uint32(pk, 0);
    } else {
        msgpack_pack_array(pk, 3);
        s_pack_cstr(pk, "BlockRemoved");
        s_pack_hashes(pk, ev->hashes, ev->nhashes, int_hashes);
        s_pack_cstr(pk, "GPU");
    }
}

uint8_t *sim_kvwire_encode(const sim_kvbatch_t *batch, double ts, sim_kv_format_t format,
                          bool int_hashes, size_t *len)
{
    msgpack_sbuffer sbuf;
    msgpack_sbuffer_init(&sbuf);
    msgpack_packer pk;
    msgpack_packer_init(&pk, &sbuf, msgpack_sbuffer_write);
    size_t n = sim_kvbatch_count(batch);
    msgpack_pack_array(&pk, 3);
    msgpack_pack_double(&pk, ts);
    msgpack_pack_array(&pk, n);
    for (size_t i = 0; i < n; i++) {
        sim_kv_event_t ev;
        sim_kvbatch_get(batch, i, &ev);
        if (ev.kind == SIM_KV_STORED) {
            s_pack_stored(&pk, &ev, format, int_hashes);
        } else if (ev.kind == SIM_KV_REMOVED) {
            s_pack_removed(&pk, &ev, format, int_hashes);
        } else {
            if (format == SIM_KV_FORMAT_MAP) {
                msgpack_pack_map(&pk, 1);
                s_pack_cstr(&pk, "type");
            } else {
                msgpack_pack_array(&pk, 1);
            }
            s_pack_cstr(&pk, "AllBlocksCleared");
        }
    }
    msgpack_pack_uint32(&pk, 0); /* data_parallel_rank */
    /* msgpack_sbuffer_write returns -1 on allocation failure and leaves the buffer short;
     * a NULL data pointer is the only failure we can observe afterwards. */
    if (!sbuf.data) {
        *len = 0;
        return NULL;
    }
    *len = sbuf.size;
    return (uint8_t *)msgpack_sbuffer_release(&sbuf);
}

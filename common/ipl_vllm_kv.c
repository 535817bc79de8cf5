/*
 * ipl_vllm_kv — decoder of vLLM KV-event batches (see ipl_vllm_kv.h; vllm-project/vllm:
 * vllm/distributed/kv_events.py).
 *
 * One pass decodes the whole batch into the decoder's scratch arrays; only when it is known to
 * be valid are the events handed to the callback (all or nothing). While decoding, an event
 * refers to its hashes and tokens by offset, because the scratch arrays may move as they
 * grow; the pointers are filled in just before each callback.
 *
 *   payload ─▶ envelope (array | map) ─▶ events[] ─▶ event (tagged array | map with "type")
 *                                                        └─ every field: s_field()
 *
 * Array- and map-encoded events share s_field(): the array form maps a position to a field
 * (per tag), the map form a key. Memory is bounded by the payload: ipl_mp_read_array refuses
 * a count larger than the bytes left, and the events array grows only as events are decoded.
 */
#include "ipl_vllm_kv.h"
#include "ipl_error.h"
#include "ipl_mp.h"

#include <stdlib.h>
#include <string.h>

typedef enum {
    F_UNKNOWN = 0, /* skipped */
    F_HASHES,
    F_PARENT,
    F_TOKENS,
    F_BLOCK_SIZE,
    F_LORA_ID,
    F_MEDIUM,
    F_LORA_NAME,
    F_EXTRA_KEYS,
    F_GROUP_IDX,
    F_SPEC_KIND,
    F_SLIDING_WINDOW,
} s_field_t;

/* True when the string (s, len) is the literal `lit` (its length a constant, so the compiler
 * turns the memcmp into a few word compares). */
#define S_IS(s, len, lit) ((len) == sizeof lit - 1 && memcmp(s, lit, sizeof lit - 1) == 0)

/* Map keys (msgspec uses the field names): a key is compared only with the known keys of its
 * length (every event carries about ten keys, and a batch hundreds of events). */
static s_field_t s_key_field(const char *key, uint32_t len)
{
    switch (len) {
    case 6:
        return S_IS(key, len, "medium") ? F_MEDIUM : F_UNKNOWN;
    case 7:
        return S_IS(key, len, "lora_id") ? F_LORA_ID : F_UNKNOWN;
    case 9:
        return S_IS(key, len, "token_ids")   ? F_TOKENS
               : S_IS(key, len, "lora_name") ? F_LORA_NAME
               : S_IS(key, len, "group_idx") ? F_GROUP_IDX
                                             : F_UNKNOWN;
    case 10:
        return S_IS(key, len, "block_size")   ? F_BLOCK_SIZE
               : S_IS(key, len, "extra_keys") ? F_EXTRA_KEYS
                                              : F_UNKNOWN;
    case 12:
        return S_IS(key, len, "block_hashes") ? F_HASHES : F_UNKNOWN;
    case 17:
        return S_IS(key, len, "parent_block_hash") ? F_PARENT : F_UNKNOWN;
    case 18:
        return S_IS(key, len, "kv_cache_spec_kind") ? F_SPEC_KIND : F_UNKNOWN;
    case 28:
        return S_IS(key, len, "kv_cache_spec_sliding_window") ? F_SLIDING_WINDOW : F_UNKNOWN;
    default:
        return F_UNKNOWN;
    }
}

/* Array form: the field at position 1, 2, ... of each tag (declaration order in
 * vllm-project/vllm: vllm/distributed/kv_events.py); `min` is the shortest valid array, tag
 * included. */
static const s_field_t s_stored_pos[] = {F_HASHES,    F_PARENT,    F_TOKENS,        F_BLOCK_SIZE,
                                         F_LORA_ID,   F_MEDIUM,    F_LORA_NAME,     F_EXTRA_KEYS,
                                         F_GROUP_IDX, F_SPEC_KIND, F_SLIDING_WINDOW};
static const s_field_t s_removed_pos[] = {F_HASHES, F_MEDIUM, F_GROUP_IDX};

static const struct {
    ipl_vllm_kv_kind_t kind;
    const s_field_t *pos;
    uint32_t npos;
    uint32_t min;
} s_tags[] = {
    {IPL_VLLM_KV_BLOCK_STORED, s_stored_pos, sizeof s_stored_pos / sizeof s_stored_pos[0], 5},
    {IPL_VLLM_KV_BLOCK_REMOVED, s_removed_pos, sizeof s_removed_pos / sizeof s_removed_pos[0], 2},
    {IPL_VLLM_KV_ALL_CLEARED, NULL, 0, 1},
};

/* An event being decoded: hashes and tokens by offset into the scratch arrays. */
typedef struct {
    ipl_vllm_kv_event_t ev;
    size_t hash_off;
    size_t token_off;
    unsigned seen; /* bit per s_field_t present */
} s_event_t;

struct ipl_vllm_kv_decoder {
    s_event_t *events;
    size_t events_cap, nevents;
    uint64_t *hashes;
    size_t hashes_cap, nhashes;
    uint32_t *tokens;
    size_t tokens_cap, ntokens;
};

ipl_vllm_kv_decoder_t *ipl_vllm_kv_decoder_new(void)
{
    return calloc(1, sizeof(ipl_vllm_kv_decoder_t));
}

void ipl_vllm_kv_decoder_destroy(ipl_vllm_kv_decoder_t **self_p)
{
    if (!self_p || !*self_p) return;
    ipl_vllm_kv_decoder_t *self = *self_p;
    free(self->events);
    free(self->hashes);
    free(self->tokens);
    free(self);
    *self_p = NULL;
}

/* Returns `arr` grown to hold at least `need` (>= 1) elements of `size` bytes, doubling, and
 * updates *cap; NULL when out of memory (then `arr` and *cap are unchanged). */
static void *s_grow(void *arr, size_t *cap, size_t size, size_t need)
{
    if (need == 0) need = 1;
    if (need <= *cap) return arr;
    size_t ncap = *cap ? *cap : 64;
    while (ncap < need)
        ncap *= 2;
    if (ncap > SIZE_MAX / size) return NULL;
    void *grown = realloc(arr, ncap * size);
    if (grown) *cap = ncap;
    return grown;
}

static int s_read_hashes(ipl_vllm_kv_decoder_t *self, ipl_mp_reader_t *r, s_event_t *e)
{
    uint32_t n;
    int rc = ipl_mp_read_array(r, &n);
    if (rc != 0) return rc;
    if (n > IPL_VLLM_KV_MAX_BLOCKS) return IPL_E_RANGE;
    uint64_t *hashes = s_grow(self->hashes, &self->hashes_cap, sizeof *hashes, self->nhashes + n);
    if (!hashes) return IPL_E_NOMEM;
    self->hashes = hashes;
    for (uint32_t i = 0; rc == 0 && i < n; i++)
        rc = ipl_mp_read_hash64(r, &self->hashes[self->nhashes + i]);
    if (rc != 0) return rc;
    e->hash_off = self->nhashes;
    e->ev.nblocks = n;
    self->nhashes += n;
    return 0;
}

static int s_read_tokens(ipl_vllm_kv_decoder_t *self, ipl_mp_reader_t *r, s_event_t *e)
{
    uint32_t n;
    int rc = ipl_mp_read_array(r, &n);
    if (rc != 0) return rc;
    if (n > IPL_VLLM_KV_MAX_TOKENS) return IPL_E_RANGE;
    uint32_t *tokens = s_grow(self->tokens, &self->tokens_cap, sizeof *tokens, self->ntokens + n);
    if (!tokens) return IPL_E_NOMEM;
    self->tokens = tokens;
    uint32_t *out = tokens + self->ntokens;
    /* Token ids are most of a batch's bytes, and msgspec writes each as a positive fixint,
     * uint8, uint16 or uint32: those are decoded right here, any other encoding (and any
     * error) by ipl_mp_read_uint. */
    const uint8_t *p = r->pos, *end = r->end;
    for (uint32_t i = 0; i < n; i++) {
        if (end - p >= 5) {
            uint8_t tag = p[0];
            if (tag <= 0x7f) {
                out[i] = tag;
                p += 1;
                continue;
            }
            if (tag == 0xcc) {
                out[i] = p[1];
                p += 2;
                continue;
            }
            if (tag == 0xcd) {
                out[i] = (uint32_t)p[1] << 8 | p[2];
                p += 3;
                continue;
            }
            if (tag == 0xce) {
                out[i] = (uint32_t)p[1] << 24 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 8 | p[4];
                p += 5;
                continue;
            }
        }
        uint64_t id;
        r->pos = p;
        rc = ipl_mp_read_uint(r, &id);
        if (rc == 0 && id > UINT32_MAX) rc = IPL_E_RANGE;
        if (rc != 0) return rc;
        out[i] = (uint32_t)id;
        p = r->pos;
    }
    r->pos = p;
    e->token_off = self->ntokens;
    e->ev.ntokens = n;
    self->ntokens += n;
    return 0;
}

/* nil → *s = NULL; else a string. */
static int s_read_opt_str(ipl_mp_reader_t *r, const char **s, uint32_t *len)
{
    *s = NULL;
    *len = 0;
    return ipl_mp_try_nil(r) ? 0 : ipl_mp_read_str(r, s, len);
}

/* nil → -1; else an int in [0, max]. */
static int s_read_opt_index(ipl_mp_reader_t *r, int64_t *out, int64_t max)
{
    *out = -1;
    if (ipl_mp_try_nil(r)) return 0;
    ipl_mp_reader_t save = *r;
    int64_t v;
    int rc = ipl_mp_read_int(r, &v);
    if (rc == 0 && (v < 0 || v > max)) {
        *r = save;
        rc = IPL_E_RANGE;
    }
    if (rc == 0) *out = v;
    return rc;
}

/* One extra_keys entry that is not nil: when it is a one-string tuple (a LoRA request's
 * (lora_name,)), that string in *str; else *str = NULL. */
static int s_read_extra_key(ipl_mp_reader_t *r, const char **str, uint32_t *len)
{
    *str = NULL;
    *len = 0;
    if (ipl_mp_peek(r) == IPL_MP_ARRAY) {
        ipl_mp_reader_t c = *r;
        uint32_t n;
        if (ipl_mp_read_array(&c, &n) == 0 && n == 1 && ipl_mp_peek(&c) == IPL_MP_STR &&
            ipl_mp_read_str(&c, str, len) == 0) {
            *r = c;
            return 0;
        }
        *str = NULL;
        *len = 0;
    }
    return ipl_mp_skip(r);
}

/* extra_keys: nil, or one entry per block, each nil or a tuple; ev->has_extra_keys when any
 * is not nil, and ev->extra_key_str when every non-nil one is the same one-string tuple. */
static int s_read_extra_keys(ipl_mp_reader_t *r, ipl_vllm_kv_event_t *ev)
{
    ev->has_extra_keys = false;
    ev->extra_key_str = NULL;
    ev->extra_key_str_len = 0;
    if (ipl_mp_try_nil(r)) return 0;
    if (ipl_mp_peek(r) != IPL_MP_ARRAY) {
        ev->has_extra_keys = true; /* not the documented shape, but a value: the hash covers it */
        return ipl_mp_skip(r);
    }
    ipl_mp_reader_t c = *r;
    uint32_t n;
    bool same = true; /* every non-nil entry so far is the one string */
    int rc = ipl_mp_read_array(&c, &n);
    for (uint32_t i = 0; rc == 0 && i < n; i++) {
        if (ipl_mp_try_nil(&c)) continue;
        const char *s;
        uint32_t len;
        rc = s_read_extra_key(&c, &s, &len);
        if (rc != 0) break;
        if (!s || (ev->has_extra_keys && (len != ev->extra_key_str_len ||
                                          memcmp(s, ev->extra_key_str, len) != 0)))
            same = false;
        else if (!ev->has_extra_keys) {
            ev->extra_key_str = s;
            ev->extra_key_str_len = len;
        }
        ev->has_extra_keys = true;
    }
    if (!same) {
        ev->extra_key_str = NULL;
        ev->extra_key_str_len = 0;
    }
    if (rc == 0) *r = c;
    return rc;
}

/* Decodes the value of one field into e. */
static int s_field(ipl_vllm_kv_decoder_t *self, ipl_mp_reader_t *r, s_field_t f, s_event_t *e)
{
    ipl_vllm_kv_event_t *ev = &e->ev;
    int rc = 0;
    switch (f) {
    case F_HASHES:
        rc = s_read_hashes(self, r, e);
        break;
    case F_PARENT:
        ev->has_parent = !ipl_mp_try_nil(r);
        ev->parent_hash = 0;
        if (ev->has_parent) rc = ipl_mp_read_hash64(r, &ev->parent_hash);
        break;
    case F_TOKENS:
        rc = s_read_tokens(self, r, e);
        break;
    case F_BLOCK_SIZE: {
        uint64_t bs;
        ipl_mp_reader_t save = *r;
        rc = ipl_mp_read_uint(r, &bs);
        if (rc == 0 && (bs == 0 || bs > IPL_VLLM_KV_MAX_TOKENS)) {
            *r = save;
            rc = IPL_E_RANGE;
        }
        if (rc == 0) ev->block_size = (uint32_t)bs;
        break;
    }
    case F_LORA_ID:
        ev->has_lora_id = !ipl_mp_try_nil(r);
        ev->lora_id = 0;
        if (ev->has_lora_id) rc = ipl_mp_read_int(r, &ev->lora_id);
        break;
    case F_MEDIUM:
        rc = s_read_opt_str(r, &ev->medium, &ev->medium_len);
        break;
    case F_LORA_NAME:
        rc = s_read_opt_str(r, &ev->lora_name, &ev->lora_name_len);
        break;
    case F_EXTRA_KEYS:
        rc = s_read_extra_keys(r, ev);
        break;
    case F_GROUP_IDX:
        rc = s_read_opt_index(r, &ev->group_idx, INT32_MAX);
        break;
    case F_SPEC_KIND:
        rc = s_read_opt_str(r, &ev->spec_kind, &ev->spec_kind_len);
        break;
    case F_SLIDING_WINDOW:
        rc = s_read_opt_index(r, &ev->sliding_window, INT64_MAX);
        break;
    case F_UNKNOWN:
        rc = ipl_mp_skip(r);
        break;
    }
    if (rc == 0) e->seen |= 1u << f;
    return rc;
}

/* The tag table entry for a type string, or -1 (IPL_E_UNKNOWN). */
static int s_tag(const char *s, uint32_t len)
{
    /* the order of s_tags */
    if (S_IS(s, len, "BlockStored")) return 0;
    if (S_IS(s, len, "BlockRemoved")) return 1;
    if (S_IS(s, len, "AllBlocksCleared")) return 2;
    return -1;
}

static int s_event_array(ipl_vllm_kv_decoder_t *self, ipl_mp_reader_t *r, s_event_t *e, int *tag)
{
    uint32_t n;
    const char *s;
    uint32_t len;
    int rc = ipl_mp_read_array(r, &n);
    if (rc != 0) return rc;
    if (n == 0) return IPL_E_INVAL;
    if ((rc = ipl_mp_read_str(r, &s, &len)) != 0) return rc;
    if ((*tag = s_tag(s, len)) < 0) return IPL_E_UNKNOWN;
    if (n < s_tags[*tag].min) return IPL_E_INVAL;
    for (uint32_t i = 1; rc == 0 && i < n; i++) {
        s_field_t f = i - 1 < s_tags[*tag].npos ? s_tags[*tag].pos[i - 1] : F_UNKNOWN;
        rc = s_field(self, r, f, e);
    }
    return rc;
}

/* A map key: a string (*key set), or any other value, skipped (*key NULL: an unknown key). */
static int s_read_key(ipl_mp_reader_t *r, const char **key, uint32_t *len)
{
    *key = NULL;
    *len = 0;
    int rc = ipl_mp_read_str(r, key, len);
    if (rc == IPL_E_TYPE) {
        *key = NULL;
        rc = ipl_mp_skip(r); /* IPL_E_TYPE again for 0xc1 */
    }
    return rc;
}

static int s_event_map(ipl_vllm_kv_decoder_t *self, ipl_mp_reader_t *r, s_event_t *e, int *tag)
{
    uint32_t n;
    int rc = ipl_mp_read_map(r, &n);
    *tag = -1;
    for (uint32_t i = 0; rc == 0 && i < n; i++) {
        const char *key = NULL;
        uint32_t klen = 0;
        if ((rc = s_read_key(r, &key, &klen)) != 0) break;
        if (key && S_IS(key, klen, "type")) {
            const char *s;
            uint32_t len;
            if ((rc = ipl_mp_read_str(r, &s, &len)) == 0 && (*tag = s_tag(s, len)) < 0)
                rc = IPL_E_UNKNOWN;
            continue;
        }
        rc = s_field(self, r, key ? s_key_field(key, klen) : F_UNKNOWN, e);
    }
    if (rc != 0) return rc;
    if (*tag < 0) return IPL_E_INVAL; /* no "type" */
    static const unsigned need_stored = 1u << F_HASHES | 1u << F_TOKENS | 1u << F_BLOCK_SIZE;
    if (s_tags[*tag].kind == IPL_VLLM_KV_BLOCK_STORED && (e->seen & need_stored) != need_stored)
        return IPL_E_INVAL;
    if (s_tags[*tag].kind == IPL_VLLM_KV_BLOCK_REMOVED && !(e->seen & 1u << F_HASHES))
        return IPL_E_INVAL;
    return 0;
}

static int s_event(ipl_vllm_kv_decoder_t *self, ipl_mp_reader_t *r)
{
    if (self->nevents >= IPL_VLLM_KV_MAX_EVENTS) return IPL_E_RANGE;
    s_event_t *events = s_grow(self->events, &self->events_cap, sizeof *events, self->nevents + 1);
    if (!events) return IPL_E_NOMEM;
    self->events = events;
    int rc = 0;
    s_event_t *e = &self->events[self->nevents];
    memset(e, 0, sizeof *e);
    e->ev.group_idx = -1;
    e->ev.sliding_window = -1;
    int tag = -1;
    switch (ipl_mp_peek(r)) {
    case IPL_MP_ARRAY:
        rc = s_event_array(self, r, e, &tag);
        break;
    case IPL_MP_MAP:
        rc = s_event_map(self, r, e, &tag);
        break;
    case IPL_MP_INVALID:
        rc = ipl_mp_skip(r);
        break; /* the precise error: truncated or 0xc1 */
    default:
        rc = IPL_E_TYPE;
        break;
    }
    if (rc != 0) return rc;
    ipl_vllm_kv_event_t *ev = &e->ev;
    ev->kind = s_tags[tag].kind;
    if (ev->kind != IPL_VLLM_KV_BLOCK_STORED) { /* fields of another kind, sent anyway */
        ev->has_parent = false;
        ev->parent_hash = 0;
        ev->ntokens = 0;
        ev->block_size = 0;
    }
    if (ev->kind == IPL_VLLM_KV_ALL_CLEARED) ev->nblocks = 0;
    self->nevents++;
    return 0;
}

static int s_events(ipl_vllm_kv_decoder_t *self, ipl_mp_reader_t *r)
{
    uint32_t n;
    int rc = ipl_mp_read_array(r, &n);
    if (rc != 0) return rc;
    if (n > IPL_VLLM_KV_MAX_EVENTS) return IPL_E_RANGE;
    self->nevents = self->nhashes = self->ntokens = 0; /* a repeated "events" key: last wins */
    for (uint32_t i = 0; rc == 0 && i < n; i++)
        rc = s_event(self, r);
    return rc;
}

/* ts: a float (msgspec) or, leniently, an int. */
static int s_ts(ipl_mp_reader_t *r, double *ts)
{
    ipl_mp_type_t t = ipl_mp_peek(r);
    if (t == IPL_MP_INVALID) return ipl_mp_skip(r);
    if (t != IPL_MP_FLOAT && t != IPL_MP_UINT && t != IPL_MP_INT) return IPL_E_TYPE;
    return ipl_mp_read_double(r, ts);
}

static int s_envelope(ipl_vllm_kv_decoder_t *self, ipl_mp_reader_t *r, ipl_vllm_kv_batch_t *b)
{
    uint32_t n;
    int rc;
    b->ts = 0;
    b->dp_rank = -1;
    switch (ipl_mp_peek(r)) {
    case IPL_MP_ARRAY: /* [ts, events, dp_rank?, ...ignored] */
        if ((rc = ipl_mp_read_array(r, &n)) != 0) return rc;
        if (n < 2) return IPL_E_INVAL;
        rc = s_ts(r, &b->ts);
        if (rc == 0) rc = s_events(self, r);
        if (rc == 0 && n >= 3) rc = s_read_opt_index(r, &b->dp_rank, INT32_MAX);
        for (uint32_t i = 3; rc == 0 && i < n; i++)
            rc = ipl_mp_skip(r);
        return rc;
    case IPL_MP_MAP: {
        bool has_ts = false, has_events = false;
        if ((rc = ipl_mp_read_map(r, &n)) != 0) return rc;
        for (uint32_t i = 0; rc == 0 && i < n; i++) {
            const char *key = NULL;
            uint32_t klen = 0;
            if ((rc = s_read_key(r, &key, &klen)) != 0) break;
            if (key && S_IS(key, klen, "ts")) {
                rc = s_ts(r, &b->ts);
                has_ts = true;
            } else if (key && S_IS(key, klen, "events")) {
                rc = s_events(self, r);
                has_events = true;
            } else if (key && S_IS(key, klen, "data_parallel_rank")) {
                rc = s_read_opt_index(r, &b->dp_rank, INT32_MAX);
            } else {
                rc = ipl_mp_skip(r);
            }
        }
        if (rc == 0 && !(has_ts && has_events)) rc = IPL_E_INVAL;
        return rc;
    }
    case IPL_MP_INVALID:
        return ipl_mp_skip(r); /* IPL_E_TRUNCATED or IPL_E_TYPE */
    default:
        return IPL_E_TYPE;
    }
}

int ipl_vllm_kv_decode(ipl_vllm_kv_decoder_t *self, const uint8_t *payload, size_t len,
                       ipl_vllm_kv_batch_t *batch, ipl_vllm_kv_event_fn *fn, void *arg)
{
    static const uint64_t s_no_hashes[1];
    static const uint32_t s_no_tokens[1];
    ipl_mp_reader_t r;
    ipl_vllm_kv_batch_t b;
    ipl_mp_reader_init(&r, payload, len);
    self->nevents = self->nhashes = self->ntokens = 0;
    int rc = s_envelope(self, &r, &b);
    if (rc == 0 && ipl_mp_remaining(&r) > 0) rc = IPL_E_TRAILING;
    if (rc != 0) return rc;
    b.nevents = (uint32_t)self->nevents;
    if (batch) *batch = b;
    for (size_t i = 0; fn && i < self->nevents; i++) {
        s_event_t *e = &self->events[i];
        e->ev.block_hashes = e->ev.nblocks ? self->hashes + e->hash_off : s_no_hashes;
        e->ev.token_ids = e->ev.ntokens ? self->tokens + e->token_off : s_no_tokens;
        if ((rc = fn(arg, &e->ev)) < 0) return rc;
    }
    return 0;
}

int ipl_vllm_kv_seq(const uint8_t *frame, size_t len, uint64_t *seq)
{
    if (!frame || len != 8) return IPL_E_INVAL;
    uint64_t v = 0;
    for (size_t k = 0; k < 8; k++)
        v = (v << 8) | frame[k];
    *seq = v;
    return 0;
}

bool ipl_vllm_kv_is_end_seq(const uint8_t *frame, size_t len)
{
    static const uint8_t s_end[8] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
    return frame && len == 8 && memcmp(frame, s_end, 8) == 0;
}

/*
 * ipl_proto — descriptor tables derived from the catalogue in ipl_proto.h, and one generic
 * encoder/decoder that walks them. Adding a message or a field never touches this file.
 *
 * Decoded strings and arrays live in a per-message arena (a short chain of blocks), so a
 * message is freed with one ipl_msg_clear however many fields it has.
 */
#include "ipl_proto.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <zmq.h>

#include "ipl_error.h"
#include "ipl_mp.h"

/* ---- descriptor tables ---------------------------------------------------------------------- */
#define FD_u64(S, n)            IPL_FT_U64, offsetof(S, n), 0, NULL
#define FD_f64(S, n)            IPL_FT_F64, offsetof(S, n), 0, NULL
#define FD_bool(S, n)           IPL_FT_BOOL, offsetof(S, n), 0, NULL
#define FD_str(S, n)            IPL_FT_STR, offsetof(S, n), 0, NULL
#define FD_u64s(S, n)           IPL_FT_U64S, offsetof(S, n), offsetof(S, n##_len), NULL
#define FD_strs(S, n)           IPL_FT_STRS, offsetof(S, n), offsetof(S, n##_len), NULL
#define FD_opt_u64(S, n)        IPL_FT_U64, offsetof(S, n), 0, NULL, true
#define FD_opt_str(S, n)        IPL_FT_STR, offsetof(S, n), 0, NULL, true
#define FD_opt_strs(S, n)       IPL_FT_STRS, offsetof(S, n), offsetof(S, n##_len), NULL, true
#define F_DESC(S, kind, n, doc) {#n, doc, FD_##kind(S, n)},
#define AD_arr                  false
#define AD_opt_arr              true
#define A_DESC(S, kind, elem, n, doc)                                                              \
    {#n, doc, IPL_FT_STRUCTS, offsetof(S, n), offsetof(S, n##_len), &s_struct_##elem, AD_##kind},
#define COUNT_FIELD(S, kind, n, doc)       +1
#define COUNT_ARRAY(S, kind, elem, n, doc) +1

#define STRUCT_TABLE(name, doc)                                                                    \
    static const ipl_proto_field_t s_fields_##name[] = {                                           \
        IPL_PROTO_FIELDS_##name(F_DESC, A_DESC, ipl_##name##_t)};                                  \
    static const ipl_proto_struct_t s_struct_##name = {                                            \
        #name, doc, sizeof(ipl_##name##_t), s_fields_##name,                                       \
        0 IPL_PROTO_FIELDS_##name(COUNT_FIELD, COUNT_ARRAY, _)};
IPL_PROTO_STRUCTS(STRUCT_TABLE)
#define MSG_TABLE(T, id, name, from, to, pat, doc) STRUCT_TABLE(name, doc)
IPL_PROTO_MESSAGES(MSG_TABLE)

static const ipl_proto_msg_desc_t s_messages[] = {
#define MSG_DESC(T, id, name, from, to, pat, doc)                                                  \
    {IPL_MSG_##T, #T, from, to, pat, doc, &s_struct_##name},
    IPL_PROTO_MESSAGES(MSG_DESC)
#undef MSG_DESC
};
#define S_NMESSAGES (sizeof s_messages / sizeof s_messages[0])

static const ipl_proto_struct_t *const s_structs[] = {
#define STRUCT_PTR(name, doc) &s_struct_##name,
    IPL_PROTO_STRUCTS(STRUCT_PTR)
#undef STRUCT_PTR
};

const ipl_proto_msg_desc_t *ipl_proto_messages(size_t *n)
{
    *n = S_NMESSAGES;
    return s_messages;
}

const ipl_proto_struct_t *const *ipl_proto_structs(size_t *n)
{
    *n = sizeof s_structs / sizeof s_structs[0];
    return s_structs;
}

const ipl_proto_msg_desc_t *ipl_proto_msg_desc(int type)
{
    for (size_t i = 0; i < S_NMESSAGES; i++)
        if ((int)s_messages[i].type == type) return &s_messages[i];
    return NULL;
}

const char *ipl_msg_type_name(int type)
{
    const ipl_proto_msg_desc_t *d = ipl_proto_msg_desc(type);
    return d ? d->type_name : "unknown";
}

/* ---- encoder --------------------------------------------------------------------------------
 * msgpack written with inline stores into the sbuffer: each struct first makes room for the
 * largest encoding of its scalars (strings and arrays then for their bodies), so the stores
 * never check. The forms are msgpack-c's (smallest uint form, float64 for doubles, str8 for
 * 32..255-byte strings; test_proto_encode compares the bytes with msgpack-c's packer); going
 * through msgpack-c's packer, a callback per value, cost a decider ~12% of its CPU on a
 * 64-candidate ROUTE_REP. */
#define S_HEAD 9 /* the largest msgpack header or scalar: 0xcf + 8 bytes */

/* Room for `more` bytes past w->size. 0 or IPL_E_NOMEM. */
static int s_grow(msgpack_sbuffer *w, size_t more)
{
    size_t cap = w->alloc ? w->alloc : 4096;
    while (cap - w->size < more)
        cap *= 2;
    char *d = realloc(w->data, cap); /* msgpack-c's sbuffer is realloc'd and free'd alike */
    if (!d) return IPL_E_NOMEM;
    w->data = d;
    w->alloc = cap;
    return IPL_OK;
}

static inline int s_reserve(msgpack_sbuffer *w, size_t more)
{
    return w->alloc - w->size >= more ? IPL_OK : s_grow(w, more);
}

/* Big-endian stores (msgpack's byte order). */
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
#define S_BE(bits, v) (v)
#else
#define S_BE(bits, v) __builtin_bswap##bits(v)
#endif

static inline uint8_t *s_be16(uint8_t *p, uint16_t v)
{
    v = S_BE(16, v);
    memcpy(p, &v, sizeof v);
    return p + 2;
}

static inline uint8_t *s_be32(uint8_t *p, uint32_t v)
{
    v = S_BE(32, v);
    memcpy(p, &v, sizeof v);
    return p + 4;
}

static inline uint8_t *s_be64(uint8_t *p, uint64_t v)
{
    v = S_BE(64, v);
    memcpy(p, &v, sizeof v);
    return p + 8;
}

/* The stores below write at p (room already made) and return the end. */
static inline uint8_t *s_uint(uint8_t *p, uint64_t v)
{
    if (v < 128) {
        *p++ = (uint8_t)v;
    } else if (v < 256) {
        *p++ = 0xcc;
        *p++ = (uint8_t)v;
    } else if (v < 65536) {
        *p++ = 0xcd;
        p = s_be16(p, (uint16_t)v);
    } else if (v <= UINT32_MAX) {
        *p++ = 0xce;
        p = s_be32(p, (uint32_t)v);
    } else {
        *p++ = 0xcf;
        p = s_be64(p, v);
    }
    return p;
}

static inline uint8_t *s_array(uint8_t *p, size_t n)
{
    if (n < 16) {
        *p++ = (uint8_t)(0x90 | n);
    } else if (n < 65536) {
        *p++ = 0xdc;
        p = s_be16(p, (uint16_t)n);
    } else {
        *p++ = 0xdd;
        p = s_be32(p, (uint32_t)n);
    }
    return p;
}

static inline uint8_t *s_str_head(uint8_t *p, size_t len)
{
    if (len < 32) {
        *p++ = (uint8_t)(0xa0 | len);
    } else if (len < 256) {
        *p++ = 0xd9;
        *p++ = (uint8_t)len;
    } else if (len < 65536) {
        *p++ = 0xda;
        p = s_be16(p, (uint16_t)len);
    } else {
        *p++ = 0xdb;
        p = s_be32(p, (uint32_t)len);
    }
    return p;
}

#define CAT(base, off, T) ((const T *)((const char *)(base) + (off)))

/* Writes the fields of `body`. On entry and after each field there is room for S_HEAD bytes
 * per field of sd, so scalars store without checking; strings and arrays make room for their
 * bodies (and that again) first. */
static int s_fields(msgpack_sbuffer *w, const ipl_proto_struct_t *sd, const void *body)
{
    size_t room = sd->nfields * S_HEAD;
    if (s_reserve(w, room) != IPL_OK) return IPL_E_NOMEM;
    uint8_t *p = (uint8_t *)w->data + w->size;
    for (size_t i = 0; i < sd->nfields; i++) {
        const ipl_proto_field_t *f = &sd->fields[i];
        switch (f->type) {
        case IPL_FT_U64:
            p = s_uint(p, *CAT(body, f->offset, uint64_t));
            break;
        case IPL_FT_F64: {
            uint64_t bits;
            memcpy(&bits, CAT(body, f->offset, double), sizeof bits);
            *p++ = 0xcb;
            p = s_be64(p, bits);
            break;
        }
        case IPL_FT_BOOL:
            *p++ = *CAT(body, f->offset, bool) ? 0xc3 : 0xc2;
            break;
        case IPL_FT_STR: {
            const char *s = *CAT(body, f->offset, char *);
            if (!s) {
                *p++ = 0xc0;
                break;
            }
            size_t len = strlen(s);
            if (len > IPL_PROTO_MAX_STR) return IPL_E_RANGE;
            w->size = (size_t)(s_str_head(p, len) - (uint8_t *)w->data);
            if (s_reserve(w, len + room) != IPL_OK) return IPL_E_NOMEM;
            p = (uint8_t *)w->data + w->size;
            memcpy(p, s, len);
            p += len;
            break;
        }
        case IPL_FT_U64S: {
            uint32_t n = *CAT(body, f->len_offset, uint32_t);
            const uint64_t *v = *CAT(body, f->offset, uint64_t *);
            if (n > IPL_PROTO_MAX_ARRAY) return IPL_E_RANGE;
            if (n && !v) return IPL_E_INVAL;
            w->size = (size_t)(s_array(p, n) - (uint8_t *)w->data);
            if (s_reserve(w, (size_t)n * S_HEAD + room) != IPL_OK) return IPL_E_NOMEM;
            p = (uint8_t *)w->data + w->size;
            for (uint32_t k = 0; k < n; k++)
                p = s_uint(p, v[k]);
            break;
        }
        case IPL_FT_STRS: {
            uint32_t n = *CAT(body, f->len_offset, uint32_t);
            const char *const *v = *CAT(body, f->offset, char *const *);
            if (n > IPL_PROTO_MAX_ARRAY) return IPL_E_RANGE;
            if (n && !v) return IPL_E_INVAL;
            w->size = (size_t)(s_array(p, n) - (uint8_t *)w->data);
            for (uint32_t k = 0; k < n; k++) {
                if (!v[k]) return IPL_E_INVAL;
                size_t len = strlen(v[k]);
                if (len > IPL_PROTO_MAX_STR) return IPL_E_RANGE;
                if (s_reserve(w, S_HEAD + len) != IPL_OK) return IPL_E_NOMEM;
                p = s_str_head((uint8_t *)w->data + w->size, len);
                memcpy(p, v[k], len);
                w->size = (size_t)(p + len - (uint8_t *)w->data);
            }
            if (s_reserve(w, room) != IPL_OK) return IPL_E_NOMEM;
            p = (uint8_t *)w->data + w->size;
            break;
        }
        case IPL_FT_STRUCTS: {
            uint32_t n = *CAT(body, f->len_offset, uint32_t);
            const char *v = *CAT(body, f->offset, char *);
            if (n > IPL_PROTO_MAX_ARRAY) return IPL_E_RANGE;
            if (n && !v) return IPL_E_INVAL;
            w->size = (size_t)(s_array(p, n) - (uint8_t *)w->data);
            for (uint32_t k = 0; k < n; k++) {
                if (s_reserve(w, S_HEAD) != IPL_OK) return IPL_E_NOMEM;
                w->size = (size_t)(s_array((uint8_t *)w->data + w->size, f->elem->nfields) -
                                   (uint8_t *)w->data);
                int rc = s_fields(w, f->elem, v + (size_t)k * f->elem->size);
                if (rc != IPL_OK) return rc;
            }
            if (s_reserve(w, room) != IPL_OK) return IPL_E_NOMEM;
            p = (uint8_t *)w->data + w->size;
            break;
        }
        }
    }
    w->size = (size_t)(p - (uint8_t *)w->data);
    return IPL_OK;
}

int ipl_msg_encode(int type, const void *body, msgpack_sbuffer *out)
{
    const ipl_proto_msg_desc_t *d = ipl_proto_msg_desc(type);
    if (!d || !body || !out) return d ? IPL_E_INVAL : IPL_E_UNKNOWN;
    size_t start = out->size;
    if (s_reserve(out, 3 * S_HEAD) != IPL_OK) return IPL_E_NOMEM;
    uint8_t *p = s_array((uint8_t *)out->data + out->size, 2 + d->body->nfields);
    p = s_uint(p, IPL_PROTO_VERSION);
    p = s_uint(p, (uint64_t)type);
    out->size = (size_t)(p - (uint8_t *)out->data);
    int rc = s_fields(out, d->body, body);
    if (rc != IPL_OK) out->size = start;
    return rc;
}

#define AT(base, off, T) ((T *)((char *)(base) + (off)))

/* ---- arena ---------------------------------------------------------------------------------- */
typedef struct s_block {
    struct s_block *next;
    size_t used, cap;
    max_align_t data[];
} s_block_t;

/* Memory from the arena whose head is *arena_p, zeroed when `zero` (callers that write every
 * byte pass false), or NULL when out of memory. */
static void *s_alloc(void **arena_p, size_t size, bool zero)
{
    size = (size + sizeof(max_align_t) - 1) / sizeof(max_align_t) * sizeof(max_align_t);
    s_block_t *b = *arena_p;
    if (!b || b->cap - b->used < size) {
        size_t cap = size > 4096 ? size : 4096;
        s_block_t *nb = malloc(sizeof *nb + cap);
        if (!nb) return NULL;
        nb->used = 0;
        nb->cap = cap;
        if (b && b->cap - b->used >= cap - size) {
            /* the old head still has more room than the new one will: keep it in front */
            nb->next = b->next;
            b->next = nb;
            b = nb;
        } else {
            nb->next = b;
            *arena_p = b = nb;
        }
    }
    void *p = (char *)b->data + b->used;
    b->used += size;
    if (zero) memset(p, 0, size);
    return p;
}

void ipl_msg_clear(ipl_msg_t *msg)
{
    if (!msg) return;
    s_block_t *b = msg->arena;
    while (b) {
        s_block_t *next = b->next;
        free(b);
        b = next;
    }
    memset(msg, 0, sizeof *msg);
}

/* ---- decoder -------------------------------------------------------------------------------- */
static int s_decode_fields(ipl_mp_reader_t *r, const ipl_proto_struct_t *sd, void *body,
                           uint32_t present, void **arena, int depth);

static int s_decode_field(ipl_mp_reader_t *r, const ipl_proto_field_t *f, void *body, void **arena,
                          int depth)
{
    int rc;
    switch (f->type) {
    case IPL_FT_U64:
        return ipl_mp_read_uint(r, AT(body, f->offset, uint64_t));
    case IPL_FT_F64:
        return ipl_mp_read_double(r, AT(body, f->offset, double));
    case IPL_FT_BOOL:
        return ipl_mp_read_bool(r, AT(body, f->offset, bool));
    case IPL_FT_STR: {
        if (ipl_mp_try_nil(r)) {
            *AT(body, f->offset, char *) = NULL;
            return IPL_OK;
        }
        const char *s;
        uint32_t len;
        if ((rc = ipl_mp_read_str(r, &s, &len))) return rc;
        if (len > IPL_PROTO_MAX_STR) return IPL_E_RANGE;
        char *copy = s_alloc(arena, (size_t)len + 1, false);
        if (!copy) return IPL_E_NOMEM;
        memcpy(copy, s, len);
        copy[len] = '\0';
        *AT(body, f->offset, char *) = copy;
        return IPL_OK;
    }
    case IPL_FT_U64S: {
        uint32_t n;
        if ((rc = ipl_mp_read_array(r, &n))) return rc;
        if (n > IPL_PROTO_MAX_ARRAY) return IPL_E_RANGE;
        uint64_t *v = n ? s_alloc(arena, (size_t)n * sizeof *v, false) : NULL; // all read
        if (n && !v) return IPL_E_NOMEM;
        if ((rc = ipl_mp_read_uints(r, v, n))) return rc;
        *AT(body, f->offset, uint64_t *) = v;
        *AT(body, f->len_offset, uint32_t) = n;
        return IPL_OK;
    }
    case IPL_FT_STRS: {
        uint32_t n;
        if ((rc = ipl_mp_read_array(r, &n))) return rc;
        if (n > IPL_PROTO_MAX_ARRAY) return IPL_E_RANGE;
        char **v = n ? s_alloc(arena, (size_t)n * sizeof *v, false) : NULL; // all written
        if (n && !v) return IPL_E_NOMEM;
        for (uint32_t k = 0; k < n; k++) {
            const char *s;
            uint32_t len;
            if ((rc = ipl_mp_read_str(r, &s, &len))) return rc;
            if (len > IPL_PROTO_MAX_STR) return IPL_E_RANGE;
            if (!(v[k] = s_alloc(arena, (size_t)len + 1, false))) return IPL_E_NOMEM;
            memcpy(v[k], s, len);
            v[k][len] = '\0';
        }
        *AT(body, f->offset, char **) = v;
        *AT(body, f->len_offset, uint32_t) = n;
        return IPL_OK;
    }
    case IPL_FT_STRUCTS: {
        uint32_t n;
        if (depth >= 4) return IPL_E_RANGE;
        if ((rc = ipl_mp_read_array(r, &n))) return rc;
        if (n > IPL_PROTO_MAX_ARRAY) return IPL_E_RANGE;
        char *v = n ? s_alloc(arena, (size_t)n * f->elem->size, true) : NULL;
        if (n && !v) return IPL_E_NOMEM;
        for (uint32_t k = 0; k < n; k++) {
            uint32_t m;
            if ((rc = ipl_mp_read_array(r, &m))) return rc;
            rc = s_decode_fields(r, f->elem, v + (size_t)k * f->elem->size, m, arena, depth + 1);
            if (rc) return rc;
        }
        *AT(body, f->offset, char *) = v;
        *AT(body, f->len_offset, uint32_t) = n;
        return IPL_OK;
    }
    }
    return IPL_E_TYPE;
}

/* Decodes `present` array elements into the struct: the known fields, then skips any extra
 * trailing ones (added by a newer sender). Fewer elements than fields is an error, unless the
 * missing ones are optional (added after the sender was built): those stay 0. */
static int s_decode_fields(ipl_mp_reader_t *r, const ipl_proto_struct_t *sd, void *body,
                           uint32_t present, void **arena, int depth)
{
    if (present < sd->nfields && !sd->fields[present].optional) return IPL_E_TRUNCATED;
    int rc;
    for (size_t i = 0; i < sd->nfields && i < present; i++)
        if ((rc = s_decode_field(r, &sd->fields[i], body, arena, depth))) return rc;
    for (uint32_t i = (uint32_t)sd->nfields; i < present; i++)
        if ((rc = ipl_mp_skip(r))) return rc;
    return IPL_OK;
}

int ipl_msg_decode(const void *buf, size_t len, ipl_msg_t *out)
{
    memset(out, 0, sizeof *out);
    if (!buf) return IPL_E_INVAL;
    if (len > IPL_PROTO_MAX_FRAME) return IPL_E_RANGE;
    ipl_mp_reader_t r;
    ipl_mp_reader_init(&r, buf, len);
    uint32_t n;
    uint64_t version, type;
    int rc;
    if ((rc = ipl_mp_read_array(&r, &n))) return rc;
    if (n < 2) return IPL_E_TRUNCATED;
    if ((rc = ipl_mp_read_uint(&r, &version))) return rc;
    if (version != IPL_PROTO_VERSION) return IPL_E_VERSION;
    if ((rc = ipl_mp_read_uint(&r, &type))) return rc;
    const ipl_proto_msg_desc_t *d = type <= 255 ? ipl_proto_msg_desc((int)type) : NULL;
    if (!d) return IPL_E_UNKNOWN;
    void *arena = NULL;
    rc = s_decode_fields(&r, d->body, &out->u, n - 2, &arena, 0);
    if (!rc && ipl_mp_remaining(&r)) rc = IPL_E_TRAILING;
    out->arena = arena;
    if (rc) {
        ipl_msg_clear(out);
        return rc;
    }
    out->type = d->type;
    return IPL_OK;
}

/* ---- sending -------------------------------------------------------------------------------- */
static pthread_key_t s_buf_key;
static pthread_once_t s_buf_once = PTHREAD_ONCE_INIT;

static void s_buf_free(void *p)
{
    msgpack_sbuffer_free(p);
}

static void s_buf_key_init(void)
{
    (void)pthread_key_create(&s_buf_key, s_buf_free);
}

int ipl_msg_send(void *zmq_socket, int type, const void *body, int zmq_flags)
{
    pthread_once(&s_buf_once, s_buf_key_init);
    msgpack_sbuffer *buf = pthread_getspecific(s_buf_key);
    if (!buf) {
        buf = msgpack_sbuffer_new();
        if (!buf) return IPL_E_NOMEM;
        pthread_setspecific(s_buf_key, buf);
    }
    msgpack_sbuffer_clear(buf);
    int rc = ipl_msg_encode(type, body, buf);
    if (rc) return rc;
    if (zmq_send(zmq_socket, buf->data, buf->size, zmq_flags) < 0)
        return errno == EAGAIN ? IPL_E_AGAIN : IPL_E_IO;
    /* keep a runaway buffer (one huge snapshot message) from pinning memory forever */
    if (buf->alloc > (1u << 20)) {
        msgpack_sbuffer_destroy(buf);
        msgpack_sbuffer_init(buf);
    }
    return IPL_OK;
}

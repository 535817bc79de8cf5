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
#define FD_u64(S, n) IPL_FT_U64, offsetof(S, n), 0, NULL
#define FD_f64(S, n) IPL_FT_F64, offsetof(S, n), 0, NULL
#define FD_bool(S, n) IPL_FT_BOOL, offsetof(S, n), 0, NULL
#define FD_str(S, n) IPL_FT_STR, offsetof(S, n), 0, NULL
#define FD_u64s(S, n) IPL_FT_U64S, offsetof(S, n), offsetof(S, n##_len), NULL
#define FD_opt_u64(S, n) IPL_FT_U64, offsetof(S, n), 0, NULL, true
#define FD_opt_str(S, n) IPL_FT_STR, offsetof(S, n), 0, NULL, true
#define F_DESC(S, kind, n, doc) {#n, doc, FD_##kind(S, n)},
#define A_DESC(S, elem, n, doc)                                                                    \
    {#n, doc, IPL_FT_STRUCTS, offsetof(S, n), offsetof(S, n##_len), &s_struct_##elem},
#define COUNT_FIELD(S, kind, n, doc) +1
#define COUNT_ARRAY(S, elem, n, doc) +1

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
#define MSG_DESC(T, id, name, from, to, pat, doc) {IPL_MSG_##T, #T, from, to, pat, doc, &s_struct_##name},
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

/* ---- encoder -------------------------------------------------------------------------------- */
#define AT(base, off, T) ((T *)((char *)(base) + (off)))
#define CAT(base, off, T) ((const T *)((const char *)(base) + (off)))

static int s_encode_fields(msgpack_packer *pk, const ipl_proto_struct_t *sd, const void *body)
{
    for (size_t i = 0; i < sd->nfields; i++) {
        const ipl_proto_field_t *f = &sd->fields[i];
        switch (f->type) {
        case IPL_FT_U64:
            msgpack_pack_uint64(pk, *CAT(body, f->offset, uint64_t));
            break;
        case IPL_FT_F64:
            msgpack_pack_double(pk, *CAT(body, f->offset, double));
            break;
        case IPL_FT_BOOL:
            if (*CAT(body, f->offset, bool))
                msgpack_pack_true(pk);
            else
                msgpack_pack_false(pk);
            break;
        case IPL_FT_STR: {
            const char *s = *CAT(body, f->offset, char *);
            if (!s) {
                msgpack_pack_nil(pk);
                break;
            }
            size_t len = strlen(s);
            if (len > IPL_PROTO_MAX_STR) return IPL_E_RANGE;
            msgpack_pack_str(pk, len);
            msgpack_pack_str_body(pk, s, len);
            break;
        }
        case IPL_FT_U64S: {
            uint32_t n = *CAT(body, f->len_offset, uint32_t);
            const uint64_t *v = *CAT(body, f->offset, uint64_t *);
            if (n > IPL_PROTO_MAX_ARRAY) return IPL_E_RANGE;
            if (n && !v) return IPL_E_INVAL;
            msgpack_pack_array(pk, n);
            for (uint32_t k = 0; k < n; k++) msgpack_pack_uint64(pk, v[k]);
            break;
        }
        case IPL_FT_STRUCTS: {
            uint32_t n = *CAT(body, f->len_offset, uint32_t);
            const char *v = *CAT(body, f->offset, char *);
            if (n > IPL_PROTO_MAX_ARRAY) return IPL_E_RANGE;
            if (n && !v) return IPL_E_INVAL;
            msgpack_pack_array(pk, n);
            for (uint32_t k = 0; k < n; k++) {
                msgpack_pack_array(pk, f->elem->nfields);
                int rc = s_encode_fields(pk, f->elem, v + (size_t)k * f->elem->size);
                if (rc) return rc;
            }
            break;
        }
        }
    }
    return IPL_OK;
}

int ipl_msg_encode(int type, const void *body, msgpack_sbuffer *out)
{
    const ipl_proto_msg_desc_t *d = ipl_proto_msg_desc(type);
    if (!d || !body || !out) return d ? IPL_E_INVAL : IPL_E_UNKNOWN;
    msgpack_packer pk;
    msgpack_packer_init(&pk, out, msgpack_sbuffer_write);
    msgpack_pack_array(&pk, 2 + d->body->nfields);
    msgpack_pack_uint64(&pk, IPL_PROTO_VERSION);
    msgpack_pack_uint64(&pk, (uint64_t)type);
    return s_encode_fields(&pk, d->body, body);
}

/* ---- arena ---------------------------------------------------------------------------------- */
typedef struct s_block {
    struct s_block *next;
    size_t used, cap;
    max_align_t data[];
} s_block_t;

/* Zeroed memory from the arena whose head is *arena_p, or NULL when out of memory. */
static void *s_alloc(void **arena_p, size_t size)
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
    memset(p, 0, size);
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

static int s_decode_field(ipl_mp_reader_t *r, const ipl_proto_field_t *f, void *body,
                          void **arena, int depth)
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
        char *copy = s_alloc(arena, (size_t)len + 1);
        if (!copy) return IPL_E_NOMEM;
        memcpy(copy, s, len);
        *AT(body, f->offset, char *) = copy;
        return IPL_OK;
    }
    case IPL_FT_U64S: {
        uint32_t n;
        if ((rc = ipl_mp_read_array(r, &n))) return rc;
        if (n > IPL_PROTO_MAX_ARRAY) return IPL_E_RANGE;
        uint64_t *v = n ? s_alloc(arena, (size_t)n * sizeof *v) : NULL;
        if (n && !v) return IPL_E_NOMEM;
        for (uint32_t k = 0; k < n; k++)
            if ((rc = ipl_mp_read_uint(r, &v[k]))) return rc;
        *AT(body, f->offset, uint64_t *) = v;
        *AT(body, f->len_offset, uint32_t) = n;
        return IPL_OK;
    }
    case IPL_FT_STRUCTS: {
        uint32_t n;
        if (depth >= 4) return IPL_E_RANGE;
        if ((rc = ipl_mp_read_array(r, &n))) return rc;
        if (n > IPL_PROTO_MAX_ARRAY) return IPL_E_RANGE;
        char *v = n ? s_alloc(arena, (size_t)n * f->elem->size) : NULL;
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

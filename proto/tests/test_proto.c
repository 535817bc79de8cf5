/*
 * Every message of the catalogue: round trip, and rejection of truncated, oversized,
 * wrong-typed, unknown-version, unknown-type and trailing-garbage frames. The tests walk the
 * descriptor tables, so a message added to the catalogue is covered without a new test.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "ipl_error.h"
#include "ipl_proto.h"

#define AT(base, off, T) ((T *)((char *)(base) + (off)))

/* A per-test pool of allocations made while filling sample bodies. */
static void *s_allocs[4096];
static size_t s_nallocs;

static void *s_keep(void *p)
{
    assert_non_null(p);
    assert_true(s_nallocs < sizeof s_allocs / sizeof s_allocs[0]);
    s_allocs[s_nallocs++] = p;
    return p;
}

static void s_free_all(void)
{
    while (s_nallocs) free(s_allocs[--s_nallocs]);
}

/* Fills every field of `body` with a value derived from `seed` and the field index, so that
 * two different fields never hold the same value. */
static void s_fill(const ipl_proto_struct_t *sd, void *body, unsigned seed)
{
    for (size_t i = 0; i < sd->nfields; i++) {
        const ipl_proto_field_t *f = &sd->fields[i];
        unsigned v = seed * 131u + (unsigned)i * 7u + 1u;
        switch (f->type) {
        case IPL_FT_U64:
            *AT(body, f->offset, uint64_t) = (uint64_t)v << (i % 2 ? 40 : 0);
            break;
        case IPL_FT_F64:
            *AT(body, f->offset, double) = v * 0.25;
            break;
        case IPL_FT_BOOL:
            *AT(body, f->offset, bool) = v % 2;
            break;
        case IPL_FT_STR: {
            char *s = s_keep(malloc(48));
            snprintf(s, 48, "%s-%u-é", f->name, v);
            *AT(body, f->offset, char *) = s;
            break;
        }
        case IPL_FT_U64S: {
            uint32_t n = 3 + v % 5;
            uint64_t *a = s_keep(calloc(n, sizeof *a));
            for (uint32_t k = 0; k < n; k++) a[k] = UINT64_MAX - v - k;
            *AT(body, f->offset, uint64_t *) = a;
            *AT(body, f->len_offset, uint32_t) = n;
            break;
        }
        case IPL_FT_STRS: {
            uint32_t n = v % 4; /* 0..3: empty lists too */
            char **a = s_keep(calloc(n + 1, sizeof *a));
            for (uint32_t k = 0; k < n; k++) {
                a[k] = s_keep(malloc(48));
                snprintf(a[k], 48, "%s[%u]-%u", f->name, k, v);
            }
            *AT(body, f->offset, char **) = a;
            *AT(body, f->len_offset, uint32_t) = n;
            break;
        }
        case IPL_FT_STRUCTS: {
            uint32_t n = 2;
            char *a = s_keep(calloc(n, f->elem->size));
            for (uint32_t k = 0; k < n; k++) s_fill(f->elem, a + k * f->elem->size, v + k);
            *AT(body, f->offset, char *) = a;
            *AT(body, f->len_offset, uint32_t) = n;
            break;
        }
        }
    }
}

static void s_assert_equal(const ipl_proto_struct_t *sd, const void *a, const void *b)
{
    for (size_t i = 0; i < sd->nfields; i++) {
        const ipl_proto_field_t *f = &sd->fields[i];
        switch (f->type) {
        case IPL_FT_U64:
            assert_true(*AT(a, f->offset, uint64_t) == *AT(b, f->offset, uint64_t));
            break;
        case IPL_FT_F64:
            assert_true(*AT(a, f->offset, double) == *AT(b, f->offset, double));
            break;
        case IPL_FT_BOOL:
            assert_int_equal(*AT(a, f->offset, bool), *AT(b, f->offset, bool));
            break;
        case IPL_FT_STR: {
            const char *x = *AT(a, f->offset, char *), *y = *AT(b, f->offset, char *);
            if (!x)
                assert_null(y);
            else
                assert_string_equal(x, y);
            break;
        }
        case IPL_FT_U64S: {
            uint32_t n = *AT(a, f->len_offset, uint32_t);
            assert_int_equal(n, *AT(b, f->len_offset, uint32_t));
            if (n)
                assert_memory_equal(*AT(a, f->offset, uint64_t *), *AT(b, f->offset, uint64_t *),
                                    n * sizeof(uint64_t));
            break;
        }
        case IPL_FT_STRS: {
            uint32_t n = *AT(a, f->len_offset, uint32_t);
            assert_int_equal(n, *AT(b, f->len_offset, uint32_t));
            for (uint32_t k = 0; k < n; k++)
                assert_string_equal((*AT(a, f->offset, char **))[k],
                                    (*AT(b, f->offset, char **))[k]);
            break;
        }
        case IPL_FT_STRUCTS: {
            uint32_t n = *AT(a, f->len_offset, uint32_t);
            assert_int_equal(n, *AT(b, f->len_offset, uint32_t));
            for (uint32_t k = 0; k < n; k++)
                s_assert_equal(f->elem, *AT(a, f->offset, char *) + k * f->elem->size,
                               *AT(b, f->offset, char *) + k * f->elem->size);
            break;
        }
        }
    }
}

/* Encodes a filled sample of message `d` into `buf`. */
static void s_sample(const ipl_proto_msg_desc_t *d, msgpack_sbuffer *buf, ipl_msg_t *src)
{
    memset(src, 0, sizeof *src);
    s_fill(d->body, &src->u, (unsigned)d->type);
    msgpack_sbuffer_init(buf);
    assert_int_equal(ipl_msg_encode(d->type, &src->u, buf), IPL_OK);
}

static void test_round_trip_every_message(void **state)
{
    (void)state;
    size_t n;
    const ipl_proto_msg_desc_t *msgs = ipl_proto_messages(&n);
    assert_true(n >= 9);
    for (size_t i = 0; i < n; i++) {
        msgpack_sbuffer buf;
        ipl_msg_t src, out;
        s_sample(&msgs[i], &buf, &src);
        assert_int_equal(ipl_msg_decode(buf.data, buf.size, &out), IPL_OK);
        assert_int_equal(out.type, msgs[i].type);
        s_assert_equal(msgs[i].body, &src.u, &out.u);
        ipl_msg_clear(&out);
        msgpack_sbuffer_destroy(&buf);
        s_free_all();
    }
}

static void test_empty_and_nil_values_round_trip(void **state)
{
    (void)state;
    size_t n;
    const ipl_proto_msg_desc_t *msgs = ipl_proto_messages(&n);
    for (size_t i = 0; i < n; i++) {
        ipl_msg_t src, out;
        memset(&src, 0, sizeof src); /* NULL strings, empty arrays, zeros */
        msgpack_sbuffer buf;
        msgpack_sbuffer_init(&buf);
        assert_int_equal(ipl_msg_encode(msgs[i].type, &src.u, &buf), IPL_OK);
        assert_int_equal(ipl_msg_decode(buf.data, buf.size, &out), IPL_OK);
        s_assert_equal(msgs[i].body, &src.u, &out.u);
        ipl_msg_clear(&out);
        msgpack_sbuffer_destroy(&buf);
    }
}

static void test_truncated_frames_are_rejected(void **state)
{
    (void)state;
    size_t n;
    const ipl_proto_msg_desc_t *msgs = ipl_proto_messages(&n);
    for (size_t i = 0; i < n; i++) {
        msgpack_sbuffer buf;
        ipl_msg_t src, out;
        s_sample(&msgs[i], &buf, &src);
        for (size_t cut = 0; cut < buf.size; cut++) {
            int rc = ipl_msg_decode(buf.data, cut, &out);
            assert_true(rc < 0);
            assert_null(out.arena);
        }
        msgpack_sbuffer_destroy(&buf);
        s_free_all();
    }
}

static void test_trailing_bytes_are_rejected(void **state)
{
    (void)state;
    size_t n;
    const ipl_proto_msg_desc_t *msgs = ipl_proto_messages(&n);
    msgpack_sbuffer buf;
    ipl_msg_t src, out;
    s_sample(&msgs[0], &buf, &src);
    msgpack_sbuffer_write(&buf, "\xc0", 1);
    assert_int_equal(ipl_msg_decode(buf.data, buf.size, &out), IPL_E_TRAILING);
    msgpack_sbuffer_destroy(&buf);
    s_free_all();
}

/* Hand-packs a message of zero values with field `bad` (SIZE_MAX: none) replaced by a value of another type. */
static void s_encode_first_fields(const ipl_proto_msg_desc_t *d, const void *body, size_t bad,
                                  size_t count, msgpack_sbuffer *buf);

static void s_encode_with_wrong_field(const ipl_proto_msg_desc_t *d, const void *body, size_t bad,
                                      msgpack_sbuffer *buf)
{
    s_encode_first_fields(d, body, bad, d->body->nfields, buf);
}

/* The same with only the first `count` fields (a sender that predates the others). */
static void s_encode_first_fields(const ipl_proto_msg_desc_t *d, const void *body, size_t bad,
                                  size_t count, msgpack_sbuffer *buf)
{
    msgpack_packer pk;
    msgpack_packer_init(&pk, buf, msgpack_sbuffer_write);
    msgpack_pack_array(&pk, 2 + count);
    msgpack_pack_uint64(&pk, IPL_PROTO_VERSION);
    msgpack_pack_uint64(&pk, d->type);
    for (size_t i = 0; i < count; i++) {
        const ipl_proto_field_t *f = &d->body->fields[i];
        if (i == bad) {
            msgpack_pack_map(&pk, 0); /* a map is never valid for any field type */
            continue;
        }
        switch (f->type) {
        case IPL_FT_U64:
            msgpack_pack_uint64(&pk, *AT(body, f->offset, uint64_t));
            break;
        case IPL_FT_F64:
            msgpack_pack_double(&pk, *AT(body, f->offset, double));
            break;
        case IPL_FT_BOOL:
            msgpack_pack_true(&pk);
            break;
        case IPL_FT_STR:
            msgpack_pack_str_with_body(&pk, "x", 1);
            break;
        case IPL_FT_U64S:
        case IPL_FT_STRS:
        case IPL_FT_STRUCTS:
            msgpack_pack_array(&pk, 0);
            break;
        }
    }
}

static void test_wrong_types_are_rejected(void **state)
{
    (void)state;
    size_t n;
    const ipl_proto_msg_desc_t *msgs = ipl_proto_messages(&n);
    for (size_t i = 0; i < n; i++) {
        ipl_msg_t src;
        memset(&src, 0, sizeof src);
        /* sanity: with no bad field the hand-packed frame decodes */
        msgpack_sbuffer buf;
        msgpack_sbuffer_init(&buf);
        s_encode_with_wrong_field(&msgs[i], &src.u, SIZE_MAX, &buf);
        ipl_msg_t out;
        assert_int_equal(ipl_msg_decode(buf.data, buf.size, &out), IPL_OK);
        ipl_msg_clear(&out);
        msgpack_sbuffer_destroy(&buf);
        for (size_t bad = 0; bad < msgs[i].body->nfields; bad++) {
            msgpack_sbuffer_init(&buf);
            s_encode_with_wrong_field(&msgs[i], &src.u, bad, &buf);
            assert_int_equal(ipl_msg_decode(buf.data, buf.size, &out), IPL_E_TYPE);
            assert_null(out.arena);
            msgpack_sbuffer_destroy(&buf);
        }
    }
}

static void s_pack_header(msgpack_sbuffer *buf, uint32_t n, uint64_t version, uint64_t type)
{
    msgpack_packer pk;
    msgpack_packer_init(&pk, buf, msgpack_sbuffer_write);
    msgpack_pack_array(&pk, n);
    msgpack_pack_uint64(&pk, version);
    msgpack_pack_uint64(&pk, type);
}

static void test_unknown_version_and_type(void **state)
{
    (void)state;
    msgpack_sbuffer buf;
    ipl_msg_t out;
    msgpack_sbuffer_init(&buf);
    s_pack_header(&buf, 3, 2, IPL_MSG_SNAPSHOT_REQ);
    msgpack_sbuffer_write(&buf, "\x00", 1);
    assert_int_equal(ipl_msg_decode(buf.data, buf.size, &out), IPL_E_VERSION);
    msgpack_sbuffer_clear(&buf);
    s_pack_header(&buf, 3, IPL_PROTO_VERSION, 200);
    msgpack_sbuffer_write(&buf, "\x00", 1);
    assert_int_equal(ipl_msg_decode(buf.data, buf.size, &out), IPL_E_UNKNOWN);
    msgpack_sbuffer_clear(&buf);
    s_pack_header(&buf, 3, IPL_PROTO_VERSION, UINT64_MAX);
    msgpack_sbuffer_write(&buf, "\x00", 1);
    assert_int_equal(ipl_msg_decode(buf.data, buf.size, &out), IPL_E_UNKNOWN);
    msgpack_sbuffer_destroy(&buf);
    assert_int_equal(ipl_msg_encode(200, &out.u, &buf), IPL_E_UNKNOWN);
    /* not an array at all */
    assert_int_equal(ipl_msg_decode("\x01", 1, &out), IPL_E_TYPE);
    assert_true(ipl_msg_decode("", 0, &out) < 0);
    assert_int_equal(ipl_msg_decode("\x91\x01", 2, &out), IPL_E_TRUNCATED);
}

static void test_extra_trailing_fields_are_ignored(void **state)
{
    (void)state;
    msgpack_sbuffer buf;
    msgpack_sbuffer_init(&buf);
    s_pack_header(&buf, 5, IPL_PROTO_VERSION, IPL_MSG_SNAPSHOT_REQ);
    msgpack_packer pk;
    msgpack_packer_init(&pk, &buf, msgpack_sbuffer_write);
    msgpack_pack_uint64(&pk, 0);                   /* flags */
    msgpack_pack_str_with_body(&pk, "future", 6); /* fields a newer sender added */
    msgpack_pack_map(&pk, 1);
    msgpack_pack_nil(&pk);
    msgpack_pack_array(&pk, 0);
    ipl_msg_t out;
    assert_int_equal(ipl_msg_decode(buf.data, buf.size, &out), IPL_OK);
    assert_int_equal(out.type, IPL_MSG_SNAPSHOT_REQ);
    ipl_msg_clear(&out);
    msgpack_sbuffer_destroy(&buf);
}

static void test_oversized_values_are_rejected(void **state)
{
    (void)state;
    /* encoder refuses a string above the limit */
    ipl_route_req_t req = {0};
    char *big = malloc(IPL_PROTO_MAX_STR + 2);
    assert_non_null(big);
    memset(big, 'a', IPL_PROTO_MAX_STR + 1);
    big[IPL_PROTO_MAX_STR + 1] = 0;
    req.model = big;
    msgpack_sbuffer buf;
    msgpack_sbuffer_init(&buf);
    assert_int_equal(ipl_msg_encode(IPL_MSG_ROUTE_REQ, &req, &buf), IPL_E_RANGE);
    msgpack_sbuffer_clear(&buf);

    /* decoder refuses one too (hand-packed) */
    s_pack_header(&buf, 9, IPL_PROTO_VERSION, IPL_MSG_ROUTE_REQ);
    msgpack_packer pk;
    msgpack_packer_init(&pk, &buf, msgpack_sbuffer_write);
    msgpack_pack_uint64(&pk, 1);
    msgpack_pack_str_with_body(&pk, big, IPL_PROTO_MAX_STR + 1);
    ipl_msg_t out;
    assert_int_equal(ipl_msg_decode(buf.data, buf.size, &out), IPL_E_RANGE);
    msgpack_sbuffer_clear(&buf);

    /* a declared array length far beyond the frame is caught before allocating */
    s_pack_header(&buf, 9, IPL_PROTO_VERSION, IPL_MSG_ROUTE_REQ);
    msgpack_pack_uint64(&pk, 1);
    msgpack_pack_str_with_body(&pk, "m", 1);
    msgpack_pack_str_with_body(&pk, "t", 1);
    msgpack_pack_uint64(&pk, 10);
    msgpack_pack_uint64(&pk, 16);
    msgpack_pack_array(&pk, 0xfffffff0u);
    assert_true(ipl_msg_decode(buf.data, buf.size, &out) < 0);
    assert_null(out.arena);
    msgpack_sbuffer_destroy(&buf);
    free(big);

    /* a frame above the size limit is refused before parsing */
    assert_int_equal(ipl_msg_decode("", (size_t)IPL_PROTO_MAX_FRAME + 1, &out), IPL_E_RANGE);
}

static void test_route_reply_with_candidates(void **state)
{
    (void)state;
    ipl_candidate_t cands[2] = {
        {.worker = "w0", .url = "http://a", .predicted_ttft_s = 0.25, .cached_tokens = 1024,
         .running = 1, .waiting = 0, .eligible = true, .note = ""},
        {.worker = "w1", .url = "http://b", .predicted_ttft_s = 1.5, .eligible = false,
         .note = "load_gate"},
    };
    ipl_route_rep_t rep = {.req_id = 42, .status = IPL_ROUTE_OK, .reason = "cache_hit",
                           .worker = "w0", .url = "http://a", .pool = "chat", .model = "m",
                           .predicted_ttft_s = 0.25, .cached_tokens = 1024, .state_seq = 7,
                           .candidates = cands, .candidates_len = 2, .strategy = "ttft"};
    msgpack_sbuffer buf;
    msgpack_sbuffer_init(&buf);
    assert_int_equal(ipl_msg_encode(IPL_MSG_ROUTE_REP, &rep, &buf), IPL_OK);
    ipl_msg_t out;
    assert_int_equal(ipl_msg_decode(buf.data, buf.size, &out), IPL_OK);
    assert_int_equal(out.type, IPL_MSG_ROUTE_REP);
    assert_int_equal(out.u.route_rep.req_id, 42);
    assert_null(out.u.route_rep.detail);
    assert_int_equal(out.u.route_rep.candidates_len, 2);
    assert_string_equal(out.u.route_rep.candidates[1].note, "load_gate");
    assert_false(out.u.route_rep.candidates[1].eligible);
    assert_true(out.u.route_rep.candidates[0].predicted_ttft_s == 0.25);
    assert_string_equal(out.u.route_rep.strategy, "ttft");
    ipl_msg_clear(&out);
    /* a decider that predates the field: no strategy (NULL) */
    rep.strategy = NULL;
    msgpack_sbuffer_clear(&buf);
    assert_int_equal(ipl_msg_encode(IPL_MSG_ROUTE_REP, &rep, &buf), IPL_OK);
    assert_int_equal(ipl_msg_decode(buf.data, buf.size, &out), IPL_OK);
    assert_null(out.u.route_rep.strategy);
    ipl_msg_clear(&out);
    assert_null(out.arena);
    msgpack_sbuffer_destroy(&buf);
}

static void test_large_message_spans_arena_blocks(void **state)
{
    (void)state;
    enum { N = 100000 };
    uint64_t *hashes = malloc(N * sizeof *hashes);
    assert_non_null(hashes);
    for (size_t i = 0; i < N; i++) hashes[i] = i * 0x9e3779b97f4a7c15ULL;
    ipl_kv_event_t ev = {.worker = "w", .op = IPL_KV_OP_STORED, .hashes = hashes,
                         .hashes_len = N, .block_size = 16};
    msgpack_sbuffer buf;
    msgpack_sbuffer_init(&buf);
    assert_int_equal(ipl_msg_encode(IPL_MSG_KV_EVENT, &ev, &buf), IPL_OK);
    ipl_msg_t out;
    assert_int_equal(ipl_msg_decode(buf.data, buf.size, &out), IPL_OK);
    assert_int_equal(out.u.kv_event.hashes_len, N);
    assert_memory_equal(out.u.kv_event.hashes, hashes, N * sizeof *hashes);
    ipl_msg_clear(&out);
    msgpack_sbuffer_destroy(&buf);
    free(hashes);
}

/* Fields added to a message later (opt_u64) come after every other field, and a frame from a
 * sender that predates them decodes with 0 there; one field fewer still is truncated. */
static void test_optional_fields_may_be_absent(void **state)
{
    (void)state;
    size_t n, with_optional = 0;
    const ipl_proto_msg_desc_t *msgs = ipl_proto_messages(&n);
    for (size_t i = 0; i < n; i++) {
        const ipl_proto_struct_t *sd = msgs[i].body;
        size_t required = sd->nfields;
        while (required > 0 && sd->fields[required - 1].optional) required--;
        for (size_t k = 0; k < required; k++) assert_false(sd->fields[k].optional);
        if (required == sd->nfields) continue;
        with_optional++;
        ipl_msg_t zero, out;
        memset(&zero, 0, sizeof zero);
        msgpack_sbuffer buf;
        msgpack_sbuffer_init(&buf);
        s_encode_first_fields(&msgs[i], &zero.u, SIZE_MAX, required, &buf);
        assert_int_equal(ipl_msg_decode(buf.data, buf.size, &out), IPL_OK);
        assert_int_equal(out.type, msgs[i].type);
        for (size_t k = required; k < sd->nfields; k++)
            assert_true(*AT(&out.u, sd->fields[k].offset, uint64_t) == 0);
        ipl_msg_clear(&out);
        msgpack_sbuffer_clear(&buf);
        s_encode_first_fields(&msgs[i], &zero.u, SIZE_MAX, required - 1, &buf);
        assert_int_equal(ipl_msg_decode(buf.data, buf.size, &out), IPL_E_TRUNCATED);
        msgpack_sbuffer_destroy(&buf);
    }
    assert_true(with_optional >= 4); /* KV_EVENT, LOAD, SNAPSHOT_END: incarnation; ROUTE_REP */
}

/* Packs a POLICY whose one worker element has `nfields` fields, of which the first `npacked`
 * are packed here (strings: the field's name; u64: 16); the caller appends the rest. */
static void s_pack_policy_worker_part(msgpack_sbuffer *buf, size_t nfields, size_t npacked)
{
    size_t nf;
    const ipl_proto_struct_t *const *structs = ipl_proto_structs(&nf);
    const ipl_proto_struct_t *worker = structs[1];
    msgpack_packer pk;
    msgpack_packer_init(&pk, buf, msgpack_sbuffer_write);
    s_pack_header(buf, 6, IPL_PROTO_VERSION, IPL_MSG_POLICY);
    msgpack_pack_uint64(&pk, 3);               /* version */
    msgpack_pack_str_with_body(&pk, "src", 3); /* source */
    msgpack_pack_array(&pk, 0);                /* pools */
    msgpack_pack_array(&pk, 1);                /* workers */
    msgpack_pack_array(&pk, nfields);
    for (size_t i = 0; i < npacked; i++) {
        const ipl_proto_field_t *f = &worker->fields[i];
        if (f->type == IPL_FT_U64) {
            msgpack_pack_uint64(&pk, 16);
            continue;
        }
        if (f->type == IPL_FT_STRS) /* lora_adapters: one element, its field's name */
            msgpack_pack_array(&pk, 1);
        msgpack_pack_str_with_body(&pk, f->name, strlen(f->name));
    }
}

/* Packs a POLICY whose one worker element carries its first `nfields` fields. */
static void s_pack_policy_worker(msgpack_sbuffer *buf, size_t nfields)
{
    s_pack_policy_worker_part(buf, nfields, nfields);
}

/* Struct elements gain fields the same way: a worker element from a policy service that
 * predates worker_set decodes with NULL there; one field fewer still is truncated. */
static void test_optional_struct_fields_may_be_absent(void **state)
{
    (void)state;
    size_t ns;
    const ipl_proto_struct_t *const *structs = ipl_proto_structs(&ns);
    for (size_t s = 0; s < ns; s++) {
        bool optional = false;
        for (size_t k = 0; k < structs[s]->nfields; k++) {
            if (optional) assert_true(structs[s]->fields[k].optional); /* trailing only */
            optional = structs[s]->fields[k].optional;
        }
    }
    const ipl_proto_struct_t *worker = structs[1];
    assert_string_equal(worker->name, "worker");
    size_t required = worker->nfields;
    while (required > 0 && worker->fields[required - 1].optional) required--;
    assert_true(required < worker->nfields);
    assert_string_equal(worker->fields[required].name, "worker_set");
    assert_int_equal(worker->fields[required].type, IPL_FT_STR);

    ipl_msg_t out;
    msgpack_sbuffer buf;
    msgpack_sbuffer_init(&buf);
    s_pack_policy_worker(&buf, required);
    assert_int_equal(ipl_msg_decode(buf.data, buf.size, &out), IPL_OK);
    assert_int_equal(out.u.policy.workers_len, 1);
    assert_string_equal(out.u.policy.workers[0].name, "name");
    assert_int_equal(out.u.policy.workers[0].block_size, 16);
    assert_null(out.u.policy.workers[0].worker_set);
    ipl_msg_clear(&out);

    msgpack_sbuffer_clear(&buf);
    s_pack_policy_worker(&buf, worker->nfields);
    assert_int_equal(ipl_msg_decode(buf.data, buf.size, &out), IPL_OK);
    assert_string_equal(out.u.policy.workers[0].worker_set, "worker_set");
    assert_int_equal(out.u.policy.workers[0].lora_adapters_len, 1);
    assert_string_equal(out.u.policy.workers[0].lora_adapters[0], "lora_adapters");
    ipl_msg_clear(&out);

    msgpack_sbuffer_clear(&buf);
    s_pack_policy_worker(&buf, required - 1);
    assert_int_equal(ipl_msg_decode(buf.data, buf.size, &out), IPL_E_TRUNCATED);
    assert_null(out.arena);

    /* and the encoder writes it: a round trip keeps it */
    ipl_worker_t w = {.name = "w0", .pool = "chat", .model = "m", .url = "http://w0",
                      .kv_endpoint = "", .replay_endpoint = "", .metrics_url = "",
                      .block_size = 16, .worker_set = "sims"};
    ipl_policy_t p = {.version = 1, .source = "s", .workers = &w, .workers_len = 1};
    msgpack_sbuffer_clear(&buf);
    assert_int_equal(ipl_msg_encode(IPL_MSG_POLICY, &p, &buf), IPL_OK);
    assert_int_equal(ipl_msg_decode(buf.data, buf.size, &out), IPL_OK);
    assert_string_equal(out.u.policy.workers[0].worker_set, "sims");
    ipl_msg_clear(&out);
    msgpack_sbuffer_destroy(&buf);
}

/* The worker's node (opt_str, the last field; policy_kube sets it from a pod's spec.nodeName):
 * absent in a frame from a policy service that predates it (NULL), round-trips when set,
 * and a wrong type or an oversized string there is rejected. */
static void test_worker_node_field(void **state)
{
    (void)state;
    size_t ns;
    const ipl_proto_struct_t *worker = ipl_proto_structs(&ns)[1];
    const ipl_proto_field_t *last = &worker->fields[worker->nfields - 1];
    assert_string_equal(last->name, "node");
    assert_int_equal(last->type, IPL_FT_STR);
    assert_true(last->optional);

    ipl_msg_t out;
    msgpack_sbuffer buf;
    msgpack_sbuffer_init(&buf);
    s_pack_policy_worker(&buf, worker->nfields - 1); /* a sender that predates it */
    assert_int_equal(ipl_msg_decode(buf.data, buf.size, &out), IPL_OK);
    assert_null(out.u.policy.workers[0].node);
    assert_string_equal(out.u.policy.workers[0].lora_adapters[0], "lora_adapters");
    ipl_msg_clear(&out);

    msgpack_sbuffer_clear(&buf);
    s_pack_policy_worker(&buf, worker->nfields);
    assert_int_equal(ipl_msg_decode(buf.data, buf.size, &out), IPL_OK);
    assert_string_equal(out.u.policy.workers[0].node, "node");
    ipl_msg_clear(&out);

    /* malformed: a number, an array, a string beyond the limit in its place */
    msgpack_packer pk;
    msgpack_packer_init(&pk, &buf, msgpack_sbuffer_write);
    msgpack_sbuffer_clear(&buf);
    s_pack_policy_worker_part(&buf, worker->nfields, worker->nfields - 1);
    msgpack_pack_uint64(&pk, 7);
    assert_int_equal(ipl_msg_decode(buf.data, buf.size, &out), IPL_E_TYPE);
    assert_null(out.arena);
    msgpack_sbuffer_clear(&buf);
    s_pack_policy_worker_part(&buf, worker->nfields, worker->nfields - 1);
    msgpack_pack_array(&pk, 0);
    assert_int_equal(ipl_msg_decode(buf.data, buf.size, &out), IPL_E_TYPE);
    assert_null(out.arena);
    char *huge = malloc(IPL_PROTO_MAX_STR + 1);
    assert_non_null(huge);
    memset(huge, 'n', IPL_PROTO_MAX_STR + 1);
    msgpack_sbuffer_clear(&buf);
    s_pack_policy_worker_part(&buf, worker->nfields, worker->nfields - 1);
    msgpack_pack_str_with_body(&pk, huge, IPL_PROTO_MAX_STR + 1);
    assert_int_equal(ipl_msg_decode(buf.data, buf.size, &out), IPL_E_RANGE);
    assert_null(out.arena);
    /* and cut short inside it: truncated */
    assert_true(ipl_msg_decode(buf.data, buf.size - 1, &out) < 0);
    assert_null(out.arena);
    free(huge);

    /* the encoder writes it: a round trip keeps it, and NULL stays NULL */
    ipl_worker_t w[2] = {{.name = "w0", .pool = "chat", .model = "m", .url = "http://w0",
                          .kv_endpoint = "", .replay_endpoint = "", .metrics_url = "",
                          .block_size = 16, .node = "gpu-node-1"},
                         {.name = "w1", .pool = "chat", .model = "m", .url = "http://w1",
                          .kv_endpoint = "", .replay_endpoint = "", .metrics_url = "",
                          .block_size = 16}};
    ipl_policy_t p = {.version = 1, .source = "s", .workers = w, .workers_len = 2};
    msgpack_sbuffer_clear(&buf);
    assert_int_equal(ipl_msg_encode(IPL_MSG_POLICY, &p, &buf), IPL_OK);
    assert_int_equal(ipl_msg_decode(buf.data, buf.size, &out), IPL_OK);
    assert_string_equal(out.u.policy.workers[0].node, "gpu-node-1");
    assert_null(out.u.policy.workers[1].node);
    ipl_msg_clear(&out);
    msgpack_sbuffer_destroy(&buf);
}

/* POLICY gained `hash` after workers (opt_u64, the first optional field; the published
 * resources follow it, test_proto_policy): a frame from a policy service that predates it
 * decodes with hash 0, and the full 64 bits round-trip. */
static void test_policy_hash_field(void **state)
{
    (void)state;
    const ipl_proto_struct_t *sd = ipl_proto_msg_desc(IPL_MSG_POLICY)->body;
    size_t h = 0;
    while (h < sd->nfields && strcmp(sd->fields[h].name, "hash"))
        h++;
    assert_true(h < sd->nfields);
    const ipl_proto_field_t *last = &sd->fields[h];
    assert_int_equal(last->type, IPL_FT_U64);
    assert_true(last->optional);
    assert_false(sd->fields[h - 1].optional); /* workers: the old end */

    size_t ns;
    const ipl_proto_struct_t *worker = ipl_proto_structs(&ns)[1];
    ipl_msg_t out;
    msgpack_sbuffer buf;
    msgpack_sbuffer_init(&buf);
    s_pack_policy_worker(&buf, worker->nfields); /* [1, 5, version, source, pools, workers] */
    assert_int_equal(ipl_msg_decode(buf.data, buf.size, &out), IPL_OK);
    assert_int_equal(out.u.policy.version, 3);
    assert_string_equal(out.u.policy.source, "src");
    assert_int_equal(out.u.policy.workers_len, 1);
    assert_true(out.u.policy.hash == 0);
    ipl_msg_clear(&out);

    ipl_policy_t p = {.version = 7, .source = "s", .hash = 0xfedcba9876543210ULL};
    msgpack_sbuffer_clear(&buf);
    assert_int_equal(ipl_msg_encode(IPL_MSG_POLICY, &p, &buf), IPL_OK);
    /* a fixarray up to 15 elements, then array 16 */
    if (2 + sd->nfields <= 15)
        assert_int_equal((unsigned char)buf.data[0], 0x90 | (2 + sd->nfields));
    else
        assert_int_equal((unsigned char)buf.data[0], 0xdc);
    assert_int_equal(ipl_msg_decode(buf.data, buf.size, &out), IPL_OK);
    assert_true(out.u.policy.hash == 0xfedcba9876543210ULL);
    assert_int_equal(out.u.policy.version, 7);
    ipl_msg_clear(&out);
    msgpack_sbuffer_destroy(&buf);
}

static void test_catalogue_is_consistent(void **state)
{
    (void)state;
    size_t n;
    const ipl_proto_msg_desc_t *msgs = ipl_proto_messages(&n);
    for (size_t i = 0; i < n; i++) {
        assert_ptr_equal(ipl_proto_msg_desc(msgs[i].type), &msgs[i]);
        assert_string_equal(ipl_msg_type_name(msgs[i].type), msgs[i].type_name);
        assert_true(msgs[i].body->nfields > 0);
        for (size_t j = 0; j < i; j++) assert_int_not_equal(msgs[i].type, msgs[j].type);
    }
    assert_string_equal(ipl_msg_type_name(0), "unknown");
    size_t ns;
    const ipl_proto_struct_t *const *structs = ipl_proto_structs(&ns);
    assert_int_equal(ns, 14); /* ... tenant_usage (LIMITS_USAGE), label_class */
    assert_string_equal(structs[2]->name, "candidate");
    assert_string_equal(structs[ns - 1]->name, "label_class");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip_every_message),
        cmocka_unit_test(test_empty_and_nil_values_round_trip),
        cmocka_unit_test(test_truncated_frames_are_rejected),
        cmocka_unit_test(test_trailing_bytes_are_rejected),
        cmocka_unit_test(test_wrong_types_are_rejected),
        cmocka_unit_test(test_unknown_version_and_type),
        cmocka_unit_test(test_extra_trailing_fields_are_ignored),
        cmocka_unit_test(test_optional_fields_may_be_absent),
        cmocka_unit_test(test_optional_struct_fields_may_be_absent),
        cmocka_unit_test(test_worker_node_field),
        cmocka_unit_test(test_policy_hash_field),
        cmocka_unit_test(test_oversized_values_are_rejected),
        cmocka_unit_test(test_route_reply_with_candidates),
        cmocka_unit_test(test_large_message_spans_arena_blocks),
        cmocka_unit_test(test_catalogue_is_consistent),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/*
 * Unit tests of ipl_msg_encode's bytes: the same as msgpack-c's own packer walking the same
 * catalogue descriptors (the reference below), for every message type, for ROUTE_REPs and
 * ROUTE_REQs with values in every msgpack size class, with the same errors; the encoder
 * appends to the sbuffer and leaves it as it was on an error.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "ipl_error.h"
#include "ipl_proto.h"

#define CAT(base, off, T) ((const T *)((const char *)(base) + (off)))

/* The reference: msgpack-c's packer, a callback per value (the encoder before it was inlined). */
static int s_ref_fields(msgpack_packer *pk, const ipl_proto_struct_t *sd, const void *body)
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
        case IPL_FT_STRS: {
            uint32_t n = *CAT(body, f->len_offset, uint32_t);
            const char *const *v = *CAT(body, f->offset, char *const *);
            if (n > IPL_PROTO_MAX_ARRAY) return IPL_E_RANGE;
            if (n && !v) return IPL_E_INVAL;
            msgpack_pack_array(pk, n);
            for (uint32_t k = 0; k < n; k++) {
                if (!v[k]) return IPL_E_INVAL;
                size_t len = strlen(v[k]);
                if (len > IPL_PROTO_MAX_STR) return IPL_E_RANGE;
                msgpack_pack_str(pk, len);
                msgpack_pack_str_body(pk, v[k], len);
            }
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
                int rc = s_ref_fields(pk, f->elem, v + (size_t)k * f->elem->size);
                if (rc) return rc;
            }
            break;
        }
        }
    }
    return IPL_OK;
}

static int s_ref_encode(int type, const void *body, msgpack_sbuffer *out)
{
    const ipl_proto_msg_desc_t *d = ipl_proto_msg_desc(type);
    if (!d || !body) return d ? IPL_E_INVAL : IPL_E_UNKNOWN;
    msgpack_packer pk;
    msgpack_packer_init(&pk, out, msgpack_sbuffer_write);
    msgpack_pack_array(&pk, 2 + d->body->nfields);
    msgpack_pack_uint64(&pk, IPL_PROTO_VERSION);
    msgpack_pack_uint64(&pk, (uint64_t)type);
    return s_ref_fields(&pk, d->body, body);
}

static uint64_t s_rand(uint64_t *x)
{
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    return *x;
}

/* A value in a random msgpack size class: fixint, uint8, 16, 32, 64 and their edges. */
static uint64_t s_u64(uint64_t *x)
{
    static const uint64_t edges[] = {0,     1,     127,        128,        255,       256,
                                     65535, 65536, UINT32_MAX, 1ull << 32, UINT64_MAX};
    uint64_t r = s_rand(x);
    if (r % 3 == 0) return edges[r / 3 % (sizeof edges / sizeof edges[0])];
    return s_rand(x) >> (s_rand(x) % 64);
}

/* ipl_msg_encode appends to what the buffer holds; on an error it leaves it as it was. */
static void s_same(int type, const void *body)
{
    msgpack_sbuffer want, got;
    msgpack_sbuffer_init(&want);
    msgpack_sbuffer_init(&got);
    msgpack_sbuffer_write(&got, "abc", 3);
    int want_rc = s_ref_encode(type, body, &want);
    int rc = ipl_msg_encode(type, body, &got);
    assert_int_equal(rc, want_rc);
    if (rc == IPL_OK) {
        assert_int_equal(got.size, 3 + want.size);
        assert_memory_equal(got.data + 3, want.data, want.size);
    } else {
        assert_int_equal(got.size, 3);
    }
    assert_memory_equal(got.data, "abc", 3);
    msgpack_sbuffer_destroy(&want);
    msgpack_sbuffer_destroy(&got);
}

static void test_every_message_type_zeroed(void **state)
{
    (void)state;
    size_t n;
    const ipl_proto_msg_desc_t *m = ipl_proto_messages(&n);
    assert_true(n > 5);
    static char zero[4096]; /* larger than any body */
    for (size_t i = 0; i < n; i++) {
        assert_true(m[i].body->size <= sizeof zero);
        s_same(m[i].type, zero);
    }
    msgpack_sbuffer w;
    msgpack_sbuffer_init(&w);
    assert_int_equal(ipl_msg_encode(999, zero, &w), IPL_E_UNKNOWN);
    assert_int_equal(ipl_msg_encode(IPL_MSG_ROUTE_REP, NULL, &w), IPL_E_INVAL);
    assert_int_equal(w.size, 0);
    msgpack_sbuffer_destroy(&w);
}

static char *s_str(uint64_t *x, size_t len)
{
    char *s = malloc(len + 1);
    for (size_t i = 0; i < len; i++)
        s[i] = (char)('a' + s_rand(x) % 26);
    s[len] = 0;
    return s;
}

static void test_route_replies_byte_for_byte(void **state)
{
    (void)state;
    static const size_t lens[] = {0, 1, 31, 32, 255, 256, 65535, 65536, 65537};
    static const uint32_t counts[] = {0, 1, 15, 16, 64, 300};
    uint64_t x = 0x243F6A8885A308D3ull;
    msgpack_sbuffer w; /* reused across messages, as the decider does */
    msgpack_sbuffer_init(&w);
    for (int round = 0; round < 200; round++) {
        uint32_t nc = counts[round % (sizeof counts / sizeof counts[0])];
        ipl_candidate_t *c = calloc(nc ? nc : 1, sizeof *c);
        char *strs[8];
        for (int k = 0; k < 8; k++)
            strs[k] = s_str(&x, lens[s_rand(&x) % (round % 7 ? 5 : 9)]);
        for (uint32_t i = 0; i < nc; i++) {
            c[i] = (ipl_candidate_t){.worker = strs[s_rand(&x) % 8],
                                     .url = s_rand(&x) % 5 ? strs[s_rand(&x) % 8] : NULL,
                                     .predicted_ttft_s = (double)s_u64(&x) / 3.0,
                                     .cached_tokens = s_u64(&x),
                                     .running = s_u64(&x),
                                     .waiting = s_u64(&x),
                                     .inflight = s_u64(&x),
                                     .kv_usage = -(double)(s_rand(&x) % 1000) / 7.0,
                                     .eligible = s_rand(&x) & 1,
                                     .note = strs[s_rand(&x) % 8]};
        }
        ipl_route_rep_t rep = {.req_id = s_u64(&x),
                               .status = s_u64(&x),
                               .reason = strs[0],
                               .detail = round % 3 ? strs[1] : NULL,
                               .worker = strs[2],
                               .url = strs[3],
                               .pool = strs[4],
                               .model = strs[5],
                               .predicted_ttft_s = 1.0 / (double)(round + 1),
                               .cached_tokens = s_u64(&x),
                               .state_seq = s_u64(&x),
                               .candidates = c,
                               .candidates_len = nc,
                               .observe = s_u64(&x)};
        s_same(IPL_MSG_ROUTE_REP, &rep);
        msgpack_sbuffer want;
        msgpack_sbuffer_init(&want);
        int rc = s_ref_encode(IPL_MSG_ROUTE_REP, &rep, &want);
        msgpack_sbuffer_clear(&w);
        assert_int_equal(ipl_msg_encode(IPL_MSG_ROUTE_REP, &rep, &w), rc);
        if (rc == IPL_OK) assert_memory_equal(w.data, want.data, want.size);
        msgpack_sbuffer_destroy(&want);
        for (int k = 0; k < 8; k++)
            free(strs[k]);
        free(c);
    }
    msgpack_sbuffer_destroy(&w);
}

static void test_route_requests_and_array_errors(void **state)
{
    (void)state;
    uint64_t x = 7;
    uint64_t hashes[600];
    for (size_t i = 0; i < 600; i++)
        hashes[i] = s_u64(&x);
    ipl_route_req_t rq = {.req_id = 3,
                          .model = "m",
                          .tenant = "",
                          .prompt_tokens = 8192,
                          .block_size = 16,
                          .hashes = hashes,
                          .hashes_len = 600,
                          .strategy = NULL};
    s_same(IPL_MSG_ROUTE_REQ, &rq);
    rq.hashes_len = 15;
    s_same(IPL_MSG_ROUTE_REQ, &rq);
    rq.hashes = NULL; /* a count without its array */
    s_same(IPL_MSG_ROUTE_REQ, &rq);
    rq.hashes = hashes;
    rq.hashes_len = IPL_PROTO_MAX_ARRAY + 1; /* beyond the limit: refused before reading */
    s_same(IPL_MSG_ROUTE_REQ, &rq);
    ipl_route_rep_t rep = {.candidates = NULL, .candidates_len = 2};
    s_same(IPL_MSG_ROUTE_REP, &rep);
}

/* POLICY's string lists (strs) and optional element arrays: lists of 0..20 strings of every
 * size class, byte for byte; a NULL entry in a list fails as in the reference. */
static void test_policy_lists_byte_for_byte(void **state)
{
    (void)state;
    static const size_t lens[] = {0, 1, 31, 32, 255, 256, 65535, 65536};
    static const uint32_t counts[] = {0, 1, 15, 16, 20};
    uint64_t x = 0x9E3779B97F4A7C15ull;
    for (int round = 0; round < 60; round++) {
        char *strs[20];
        for (int k = 0; k < 20; k++)
            strs[k] = s_str(&x, lens[s_rand(&x) % (round % 5 ? 6 : 8)]);
        ipl_rule_t rules[3];
        ipl_alias_t alias = {.policy = strs[0],
                             .name = strs[1],
                             .failover = strs,
                             .failover_len = counts[round % 5]};
        for (int r = 0; r < 3; r++)
            rules[r] = (ipl_rule_t){.policy = strs[r],
                                    .name = strs[r + 1],
                                    .index = s_u64(&x),
                                    .tenants = strs,
                                    .tenants_len = counts[(round + r) % 5],
                                    .labels = strs + 3,
                                    .labels_len = counts[(round + 2) % 5] % 17,
                                    .prompt_max = s_u64(&x),
                                    .has_time = s_rand(&x) & 1,
                                    .action = strs[5],
                                    .status = s_u64(&x)};
        ipl_limit_t limit = {
            .policy = strs[2], .tenant = strs[3], .requests_per_minute = s_u64(&x)};
        ipl_policy_t p = {.version = s_u64(&x),
                          .source = strs[4],
                          .hash = s_u64(&x),
                          .rules = rules,
                          .rules_len = 1 + round % 3,
                          .aliases = &alias,
                          .aliases_len = 1,
                          .limits = &limit,
                          .limits_len = round % 2};
        s_same(IPL_MSG_POLICY, &p);
        char *keep = strs[round % 20];
        strs[round % 20] = NULL; /* a NULL entry in a list */
        s_same(IPL_MSG_POLICY, &p);
        strs[round % 20] = keep;
        for (int k = 0; k < 20; k++)
            free(strs[k]);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_message_type_zeroed),
        cmocka_unit_test(test_route_replies_byte_for_byte),
        cmocka_unit_test(test_route_requests_and_array_errors),
        cmocka_unit_test(test_policy_lists_byte_for_byte),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/*
 * RECORD's outcome fields (outcome, queue_wait_us, attempts, target_kind, backend, cost_micros,
 * rule, strategy: optional, after `labels`): they round-trip, a frame from a gateway that
 * predates them (it ends at `labels`, or before it) decodes with NULL and 0, and malformed
 * values (a number for a string, a string for a number, an oversized string) are rejected
 * with the codec's errors.
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

static char *s_labels[] = {"pii"};

static ipl_record_t s_rec(void)
{
    return (ipl_record_t){.request_id = "r1",
                          .model = "m",
                          .tenant = "t",
                          .pool = "p",
                          .worker = "cloud",
                          .endpoint = "https://api.example.com/v1",
                          .api = "chat",
                          .status_code = 200,
                          .reason = "spill",
                          .stream = true,
                          .ttft_s = 0.25,
                          .e2e_s = 1.5,
                          .prompt_tokens = 100,
                          .completion_tokens = 20,
                          .labels = s_labels,
                          .labels_len = 1,
                          .outcome = "spilled",
                          .queue_wait_us = 12345,
                          .attempts = 2,
                          .target_kind = "provider",
                          .backend = "cloud-backend",
                          .cost_micros = 4200,
                          .rule = "policy-a/spill-when-slow",
                          .strategy = "ttft"};
}

static void test_outcome_fields_round_trip(void **state)
{
    (void)state;
    ipl_record_t rec = s_rec();
    msgpack_sbuffer buf;
    msgpack_sbuffer_init(&buf);
    assert_int_equal(ipl_msg_encode(IPL_MSG_RECORD, &rec, &buf), IPL_OK);
    ipl_msg_t out = {0};
    assert_int_equal(ipl_msg_decode(buf.data, buf.size, &out), IPL_OK);
    assert_int_equal(out.type, IPL_MSG_RECORD);
    const ipl_record_t *r = &out.u.record;
    assert_string_equal(r->outcome, "spilled");
    assert_int_equal(r->queue_wait_us, 12345);
    assert_int_equal(r->attempts, 2);
    assert_string_equal(r->target_kind, "provider");
    assert_string_equal(r->backend, "cloud-backend");
    assert_int_equal(r->cost_micros, 4200);
    assert_string_equal(r->rule, "policy-a/spill-when-slow");
    assert_string_equal(r->strategy, "ttft");
    assert_int_equal(r->labels_len, 1);
    assert_string_equal(r->labels[0], "pii");
    assert_string_equal(r->reason, "spill");
    ipl_msg_clear(&out);

    /* a zeroed record (what a gateway that sets none of them sends): NULL and 0 come back */
    ipl_record_t bare = {.request_id = "r2", .status_code = 503};
    msgpack_sbuffer_clear(&buf);
    assert_int_equal(ipl_msg_encode(IPL_MSG_RECORD, &bare, &buf), IPL_OK);
    memset(&out, 0, sizeof out);
    assert_int_equal(ipl_msg_decode(buf.data, buf.size, &out), IPL_OK);
    assert_null(out.u.record.outcome);
    assert_null(out.u.record.target_kind);
    assert_int_equal(out.u.record.attempts, 0);
    assert_int_equal(out.u.record.status_code, 503);
    ipl_msg_clear(&out);
    msgpack_sbuffer_destroy(&buf);
}

/* The index of RECORD's field `name`. */
static size_t s_field(const char *name)
{
    const ipl_proto_struct_t *sd = ipl_proto_msg_desc(IPL_MSG_RECORD)->body;
    for (size_t i = 0; i < sd->nfields; i++)
        if (!strcmp(sd->fields[i].name, name)) return i;
    fail_msg("RECORD has no field %s", name);
    return 0;
}

/* A RECORD frame by hand: its first `n` fields with plausible values, then, when `tail` is
 * set, tail(pk) for field n (and no more). */
static void s_pack(msgpack_sbuffer *buf, size_t n, void (*tail)(msgpack_packer *pk))
{
    const ipl_proto_struct_t *sd = ipl_proto_msg_desc(IPL_MSG_RECORD)->body;
    assert_true(n <= sd->nfields);
    msgpack_packer pk;
    msgpack_packer_init(&pk, buf, msgpack_sbuffer_write);
    msgpack_pack_array(&pk, (uint32_t)(2 + n + (tail ? 1 : 0)));
    msgpack_pack_uint64(&pk, IPL_PROTO_VERSION);
    msgpack_pack_uint64(&pk, IPL_MSG_RECORD);
    for (size_t i = 0; i < n; i++) {
        const ipl_proto_field_t *f = &sd->fields[i];
        switch (f->type) {
        case IPL_FT_U64:
            msgpack_pack_uint64(&pk, 200);
            break;
        case IPL_FT_F64:
            msgpack_pack_double(&pk, 0.5);
            break;
        case IPL_FT_BOOL:
            msgpack_pack_true(&pk);
            break;
        case IPL_FT_STR:
            msgpack_pack_str_with_body(&pk, f->name, strlen(f->name));
            break;
        default:
            msgpack_pack_array(&pk, 0);
            break; /* labels */
        }
    }
    if (tail) tail(&pk);
}

static void test_old_gateways_decode_with_the_new_fields_empty(void **state)
{
    (void)state;
    /* as the gateway before labels, and as the gateway with labels, sent it */
    size_t ends[] = {s_field("labels"), s_field("outcome")};
    for (size_t k = 0; k < 2; k++) {
        msgpack_sbuffer buf;
        msgpack_sbuffer_init(&buf);
        s_pack(&buf, ends[k], NULL);
        ipl_msg_t out = {0};
        assert_int_equal(ipl_msg_decode(buf.data, buf.size, &out), IPL_OK);
        const ipl_record_t *r = &out.u.record;
        assert_string_equal(r->model, "model");
        assert_int_equal(r->status_code, 200);
        assert_null(r->outcome);
        assert_null(r->target_kind);
        assert_null(r->backend);
        assert_null(r->rule);
        assert_null(r->strategy);
        assert_int_equal(r->queue_wait_us, 0);
        assert_int_equal(r->attempts, 0);
        assert_int_equal(r->cost_micros, 0);
        ipl_msg_clear(&out);
        msgpack_sbuffer_destroy(&buf);
    }
}

static void s_number(msgpack_packer *pk)
{
    msgpack_pack_uint64(pk, 5);
}

static void s_string(msgpack_packer *pk)
{
    msgpack_pack_str_with_body(pk, "ok", 2);
}

static void s_negative(msgpack_packer *pk)
{
    msgpack_pack_int64(pk, -3);
}

static void s_oversized(msgpack_packer *pk)
{
    static char big[IPL_PROTO_MAX_STR + 1];
    memset(big, 'o', sizeof big);
    msgpack_pack_str_with_body(pk, big, sizeof big);
}

static void s_array(msgpack_packer *pk)
{
    msgpack_pack_array(pk, 0);
}

static void test_malformed_new_fields_are_rejected(void **state)
{
    (void)state;
    struct {
        const char *field;
        void (*tail)(msgpack_packer *);
        int rc;
    } cases[] = {
        {"outcome", s_string, IPL_OK},         {"outcome", s_number, IPL_E_TYPE},
        {"outcome", s_array, IPL_E_TYPE},      {"outcome", s_oversized, IPL_E_RANGE},
        {"queue_wait_us", s_number, IPL_OK},   {"queue_wait_us", s_string, IPL_E_TYPE},
        {"queue_wait_us", s_negative, 1}, /* some error */
        {"attempts", s_string, IPL_E_TYPE},    {"target_kind", s_number, IPL_E_TYPE},
        {"backend", s_oversized, IPL_E_RANGE}, {"cost_micros", s_string, IPL_E_TYPE},
        {"rule", s_number, IPL_E_TYPE},        {"strategy", s_string, IPL_OK},
        {"strategy", s_array, IPL_E_TYPE},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        msgpack_sbuffer buf;
        msgpack_sbuffer_init(&buf);
        s_pack(&buf, s_field(cases[i].field), cases[i].tail);
        ipl_msg_t out = {0};
        int rc = ipl_msg_decode(buf.data, buf.size, &out);
        if (cases[i].rc == 1)
            assert_true(rc < 0);
        else if (cases[i].rc == IPL_E_TYPE)
            assert_true(rc == IPL_E_TYPE || rc == IPL_E_INVAL);
        else
            assert_int_equal(rc, cases[i].rc);
        if (rc == IPL_OK) {
            if (!strcmp(cases[i].field, "outcome")) assert_string_equal(out.u.record.outcome, "ok");
            if (!strcmp(cases[i].field, "queue_wait_us"))
                assert_int_equal(out.u.record.queue_wait_us, 5);
            if (!strcmp(cases[i].field, "strategy"))
                assert_string_equal(out.u.record.strategy, "ok");
            ipl_msg_clear(&out);
        } else {
            assert_null(out.arena);
        }
        msgpack_sbuffer_destroy(&buf);
    }
}

/* The new fields are optional and follow `labels` in this order (fields added later follow
 * them). */
static void test_new_fields_are_optional_and_last(void **state)
{
    (void)state;
    const ipl_proto_struct_t *sd = ipl_proto_msg_desc(IPL_MSG_RECORD)->body;
    const char *names[] = {"outcome", "queue_wait_us", "attempts", "target_kind",
                           "backend", "cost_micros",   "rule",     "strategy"};
    size_t first = s_field("outcome");
    assert_int_equal(first, s_field("labels") + 1);
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        size_t k = s_field(names[i]);
        assert_int_equal(k, first + i);
        assert_true(sd->fields[k].optional);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_outcome_fields_round_trip),
        cmocka_unit_test(test_old_gateways_decode_with_the_new_fields_empty),
        cmocka_unit_test(test_malformed_new_fields_are_rejected),
        cmocka_unit_test(test_new_fields_are_optional_and_last),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

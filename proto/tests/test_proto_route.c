/*
 * ROUTE_REQ.avoid (opt_strs): the names a gateway's retry avoids round-trip, a frame from a
 * gateway that predates the field (it ends at `headers`) decodes with none, and a malformed
 * avoid list (not an array, a non-string or nil element, an oversized name) is rejected with
 * the codec's errors. ROUTE_REQ.request_id (opt_str, the last field) likewise: round-trips,
 * reads NULL from senders that predate it (they end at `avoid`), and a wrong type or an
 * oversized id is rejected.
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

static uint64_t s_hashes[] = {1, 2, 3};
static char *s_labels[] = {"pii"};
static char *s_avoid[] = {"w0", "cloud-backend"};

static ipl_route_req_t s_req(void)
{
    return (ipl_route_req_t){.req_id = 7,
                             .model = "m",
                             .tenant = "t",
                             .prompt_tokens = 48,
                             .block_size = 16,
                             .hashes = s_hashes,
                             .hashes_len = 3,
                             .strategy = "",
                             .brief = 1,
                             .labels = s_labels,
                             .labels_len = 1,
                             .avoid = s_avoid,
                             .avoid_len = 2,
                             .request_id = "req-42"};
}

static void test_avoid_round_trips(void **state)
{
    (void)state;
    ipl_route_req_t rq = s_req();
    msgpack_sbuffer buf;
    msgpack_sbuffer_init(&buf);
    assert_int_equal(ipl_msg_encode(IPL_MSG_ROUTE_REQ, &rq, &buf), IPL_OK);
    ipl_msg_t out;
    assert_int_equal(ipl_msg_decode(buf.data, buf.size, &out), IPL_OK);
    assert_int_equal(out.type, IPL_MSG_ROUTE_REQ);
    const ipl_route_req_t *q = &out.u.route_req;
    assert_int_equal(q->avoid_len, 2);
    assert_string_equal(q->avoid[0], "w0");
    assert_string_equal(q->avoid[1], "cloud-backend");
    assert_int_equal(q->labels_len, 1);
    assert_int_equal(q->hashes_len, 3);
    assert_string_equal(q->request_id, "req-42");
    ipl_msg_clear(&out);
    /* none: an empty list */
    rq.avoid = NULL;
    rq.avoid_len = 0;
    msgpack_sbuffer_clear(&buf);
    assert_int_equal(ipl_msg_encode(IPL_MSG_ROUTE_REQ, &rq, &buf), IPL_OK);
    assert_int_equal(ipl_msg_decode(buf.data, buf.size, &out), IPL_OK);
    assert_int_equal(out.u.route_req.avoid_len, 0);
    ipl_msg_clear(&out);
    msgpack_sbuffer_destroy(&buf);
}

/* The index of ROUTE_REQ's field `name`. */
static size_t s_field(const char *name)
{
    const ipl_proto_struct_t *sd = ipl_proto_msg_desc(IPL_MSG_ROUTE_REQ)->body;
    for (size_t i = 0; i < sd->nfields; i++)
        if (!strcmp(sd->fields[i].name, name)) return i;
    fail_msg("ROUTE_REQ has no field %s", name);
    return 0;
}

/* A ROUTE_REQ frame by hand: the fields before `field` (as a sender that predates it packs
 * them; `avoid` packed empty), then, when `tail` is set, `tail(pk)` as `field`. */
static void s_pack_upto(msgpack_sbuffer *buf, const char *field, void (*tail)(msgpack_packer *pk))
{
    size_t navoid = s_field(field);
    const ipl_proto_struct_t *sd = ipl_proto_msg_desc(IPL_MSG_ROUTE_REQ)->body;
    msgpack_packer pk;
    msgpack_packer_init(&pk, buf, msgpack_sbuffer_write);
    msgpack_pack_array(&pk, (uint32_t)(2 + navoid + (tail ? 1 : 0)));
    msgpack_pack_uint64(&pk, IPL_PROTO_VERSION);
    msgpack_pack_uint64(&pk, IPL_MSG_ROUTE_REQ);
    for (size_t i = 0; i < navoid; i++) {
        const ipl_proto_field_t *f = &sd->fields[i];
        if (f->type == IPL_FT_U64)
            msgpack_pack_uint64(&pk, 16);
        else if (f->type == IPL_FT_STR)
            msgpack_pack_str_with_body(&pk, f->name, strlen(f->name));
        else
            msgpack_pack_array(&pk, 0); /* hashes, labels, headers, avoid */
    }
    if (tail) tail(&pk);
}

static void s_pack(msgpack_sbuffer *buf, void (*tail)(msgpack_packer *pk))
{
    s_pack_upto(buf, "avoid", tail);
}

static void test_old_senders_decode_with_no_avoid(void **state)
{
    (void)state;
    msgpack_sbuffer buf;
    msgpack_sbuffer_init(&buf);
    s_pack(&buf, NULL);
    ipl_msg_t out;
    assert_int_equal(ipl_msg_decode(buf.data, buf.size, &out), IPL_OK);
    assert_int_equal(out.u.route_req.avoid_len, 0);
    assert_string_equal(out.u.route_req.model, "model");
    assert_int_equal(out.u.route_req.block_size, 16);
    ipl_msg_clear(&out);
    msgpack_sbuffer_destroy(&buf);
}

static void s_not_an_array(msgpack_packer *pk)
{
    msgpack_pack_str_with_body(pk, "w0", 2);
}

static void s_number_element(msgpack_packer *pk)
{
    msgpack_pack_array(pk, 2);
    msgpack_pack_str_with_body(pk, "w0", 2);
    msgpack_pack_uint64(pk, 5);
}

static void s_nil_element(msgpack_packer *pk)
{
    msgpack_pack_array(pk, 1);
    msgpack_pack_nil(pk);
}

static void s_oversized_name(msgpack_packer *pk)
{
    static char big[IPL_PROTO_MAX_STR + 1];
    memset(big, 'w', sizeof big);
    msgpack_pack_array(pk, 1);
    msgpack_pack_str_with_body(pk, big, sizeof big);
}

static void s_declared_too_long(msgpack_packer *pk)
{
    msgpack_pack_array(pk, 0xfffffff0u); /* far beyond the frame */
}

static void s_good(msgpack_packer *pk)
{
    msgpack_pack_array(pk, 1);
    msgpack_pack_str_with_body(pk, "w1", 2);
}

static void test_malformed_avoid_is_rejected(void **state)
{
    (void)state;
    struct {
        void (*tail)(msgpack_packer *);
        int rc;
    } cases[] = {
        {s_good, IPL_OK},
        {s_not_an_array, IPL_E_TYPE},
        {s_number_element, IPL_E_TYPE},
        {s_nil_element, IPL_E_TYPE},
        {s_oversized_name, IPL_E_RANGE},
        {s_declared_too_long, 1}, /* some error, before allocating */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        msgpack_sbuffer buf;
        msgpack_sbuffer_init(&buf);
        s_pack(&buf, cases[i].tail);
        ipl_msg_t out;
        int rc = ipl_msg_decode(buf.data, buf.size, &out);
        if (cases[i].rc == 1) {
            assert_true(rc < 0);
        } else if (cases[i].rc == IPL_E_TYPE) {
            assert_true(rc == IPL_E_TYPE || rc == IPL_E_INVAL); /* nil: the codec's choice */
        } else {
            assert_int_equal(rc, cases[i].rc);
        }
        if (rc == IPL_OK) {
            assert_int_equal(out.u.route_req.avoid_len, 1);
            assert_string_equal(out.u.route_req.avoid[0], "w1");
            ipl_msg_clear(&out);
        } else {
            assert_null(out.arena);
        }
        msgpack_sbuffer_destroy(&buf);
    }
}

static void test_request_id_is_the_last_field(void **state)
{
    (void)state;
    const ipl_proto_struct_t *sd = ipl_proto_msg_desc(IPL_MSG_ROUTE_REQ)->body;
    assert_int_equal(s_field("request_id") + 1, sd->nfields);
    assert_int_equal(s_field("avoid") + 2, sd->nfields);
}

static void test_request_id_absent_or_nil_reads_null(void **state)
{
    (void)state;
    ipl_route_req_t rq = s_req();
    rq.request_id = NULL; /* encoded as nil */
    msgpack_sbuffer buf;
    msgpack_sbuffer_init(&buf);
    assert_int_equal(ipl_msg_encode(IPL_MSG_ROUTE_REQ, &rq, &buf), IPL_OK);
    ipl_msg_t out;
    assert_int_equal(ipl_msg_decode(buf.data, buf.size, &out), IPL_OK);
    assert_null(out.u.route_req.request_id);
    assert_int_equal(out.u.route_req.avoid_len, 2);
    ipl_msg_clear(&out);
    /* a sender that predates the field: the frame ends at avoid */
    msgpack_sbuffer_clear(&buf);
    s_pack_upto(&buf, "request_id", NULL);
    assert_int_equal(ipl_msg_decode(buf.data, buf.size, &out), IPL_OK);
    assert_null(out.u.route_req.request_id);
    assert_string_equal(out.u.route_req.model, "model");
    ipl_msg_clear(&out);
    msgpack_sbuffer_destroy(&buf);
}

static void s_id_good(msgpack_packer *pk)
{
    msgpack_pack_str_with_body(pk, "abc-1", 5);
}

static void s_id_number(msgpack_packer *pk)
{
    msgpack_pack_uint64(pk, 5);
}

static void s_id_array(msgpack_packer *pk)
{
    msgpack_pack_array(pk, 1);
    msgpack_pack_str_with_body(pk, "x", 1);
}

static void s_id_oversized(msgpack_packer *pk)
{
    static char big[IPL_PROTO_MAX_STR + 1];
    memset(big, 'r', sizeof big);
    msgpack_pack_str_with_body(pk, big, sizeof big);
}

static void test_malformed_request_id_is_rejected(void **state)
{
    (void)state;
    struct {
        void (*tail)(msgpack_packer *);
        int rc;
    } cases[] = {
        {s_id_good, IPL_OK},
        {s_id_number, IPL_E_TYPE},
        {s_id_array, IPL_E_TYPE},
        {s_id_oversized, IPL_E_RANGE},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        msgpack_sbuffer buf;
        msgpack_sbuffer_init(&buf);
        s_pack_upto(&buf, "request_id", cases[i].tail);
        ipl_msg_t out;
        int rc = ipl_msg_decode(buf.data, buf.size, &out);
        assert_int_equal(rc, cases[i].rc);
        if (rc == IPL_OK) {
            assert_string_equal(out.u.route_req.request_id, "abc-1");
            ipl_msg_clear(&out);
        } else {
            assert_null(out.arena);
        }
        msgpack_sbuffer_destroy(&buf);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_avoid_round_trips),
        cmocka_unit_test(test_old_senders_decode_with_no_avoid),
        cmocka_unit_test(test_malformed_avoid_is_rejected),
        cmocka_unit_test(test_request_id_is_the_last_field),
        cmocka_unit_test(test_request_id_absent_or_nil_reads_null),
        cmocka_unit_test(test_malformed_request_id_is_rejected),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

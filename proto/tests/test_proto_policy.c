/*
 * POLICY's published resources (the opt_arr element arrays after `hash`, and the `strs`
 * kind their elements use): each element round-trips, a full POLICY with all of them does,
 * a frame from a policy service that predates them decodes with them empty, and malformed
 * ones (truncated, wrong-typed, oversized) are rejected with the codec's errors. A policy of
 * 200 rules and 100 tenants stays far inside every decoder limit.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "ipl_error.h"
#include "ipl_proto.h"

static char *s_tenants[] = {"team-a", "team-b"};
static char *s_models[] = {"chat"};
static char *s_headers[] = {"x-class=batch", "x-trace"};
static char *s_targets[] = {"small", "cloud"};
static char *s_failover[] = {"large-model", "chat"};

static ipl_pool_t s_pools[] = {
    {.name = "chat", .model = "m", .strategy = "ttft", .ttft_slo_ms = 800}};
static ipl_backend_t s_backends[] = {{.name = "cloud-openai",
                                      .url = "https://api.example.com/v1",
                                      .protocol = "openai",
                                      .auth = "bearer",
                                      .auth_header = "",
                                      .secret_source = "secretRef",
                                      .secret_name = "cloud-credentials",
                                      .secret_key = "token",
                                      .ca_bundle = "",
                                      .ca_secret_name = "ca",
                                      .ca_secret_key = "ca.pem",
                                      .insecure_skip_verify = true,
                                      .connect_ms = 2000,
                                      .response_ms = 60000,
                                      .max_connections = 128}};
static ipl_provider_t s_providers[] = {{.name = "cloud",
                                        .backend = "cloud-openai",
                                        .latency_hint_ms = 400,
                                        .input_micros_per_mtok = 150000,
                                        .output_micros_per_mtok = 600000,
                                        .concurrent_requests = 64,
                                        .tokens_per_minute = 2000000}};
static ipl_provider_model_t s_provider_models[] = {
    {.provider = "cloud", .name = "m", .remote_name = "vendor/small-8b"},
    {.provider = "cloud", .name = "large-model", .remote_name = "vendor/large-70b"}};
static ipl_pool_target_t s_pool_targets[] = {
    {.pool = "chat", .kind = "workerSet", .name = "small", .role = "primary", .weight = 1},
    {.pool = "chat", .kind = "provider", .name = "cloud", .role = "overflow", .weight = 1000}};
static ipl_rule_t s_rules[] = {{.policy = "routing",
                                .name = "team-a-small",
                                .index = 3,
                                .tenants = s_tenants,
                                .tenants_len = 2,
                                .models = s_models,
                                .models_len = 1,
                                .headers = s_headers,
                                .headers_len = 2,
                                .prompt_min = 0,
                                .prompt_max = UINT64_MAX,
                                .has_queue_depth = true,
                                .queue_depth_above = 0,
                                .predicted_ttft_above_slo = 2,
                                .has_time = true,
                                .days = 0x1f,
                                .from_minute = 1320,
                                .to_minute = 360,
                                .action = "route",
                                .pool = "chat",
                                .targets = s_targets,
                                .targets_len = 2,
                                .target = "",
                                .unless_holder = "",
                                .provider = "",
                                .reason = "",
                                .status = 0},
                               {.policy = "guardrails",
                                .name = "blocked",
                                .action = "reject",
                                .prompt_max = UINT64_MAX,
                                .days = 0x7f,
                                .pool = "",
                                .target = "",
                                .unless_holder = "",
                                .provider = "",
                                .reason = "tenant suspended",
                                .status = 403}};
static ipl_alias_t s_aliases[] = {
    {.policy = "routing", .name = "chat", .failover = s_failover, .failover_len = 2},
    {.policy = "routing", .name = "assistant"}};
static ipl_alias_target_t s_alias_targets[] = {
    {.alias = "chat", .kind = "model", .name = "m", .weight = 9},
    {.alias = "chat", .kind = "pool", .name = "large", .weight = 1}};
static ipl_limit_t s_limits[] = {
    {.policy = "routing", .tenant = "*", .requests_per_minute = 60, .concurrent_requests = 4},
    {.policy = "routing",
     .tenant = "team-a",
     .requests_per_minute = 600,
     .input_tokens_per_minute = 2000000,
     .output_tokens_per_minute = 200000,
     .concurrent_requests = 32,
     .weight = 7,
     .priority = "interactive",
     .cost_per_day_micros = 12500000}};

static char *s_keywords[] = {"#include", "def "};
static char *s_examples[] = {"what is 2+2", "capital of France"};
static ipl_label_rule_t s_label_rules[] = {
    {.policy = "routing", .label = "code", .keywords = s_keywords, .keywords_len = 2,
     .substring = true, .regex = ""},
    {.policy = "routing", .label = "finance", .regex = "invoice", .icase = true}};
static ipl_label_class_t s_label_classes[] = {
    {.policy = "routing", .label = "simple", .examples = s_examples, .examples_len = 2}};

#define N(a) (uint32_t)(sizeof(a) / sizeof(a)[0])

static ipl_policy_t s_full(void)
{
    return (ipl_policy_t){.version = 9,
                          .source = "examples/policy-full",
                          .pools = s_pools,
                          .pools_len = N(s_pools),
                          .hash = 0x0123456789abcdefULL,
                          .backends = s_backends,
                          .backends_len = N(s_backends),
                          .providers = s_providers,
                          .providers_len = N(s_providers),
                          .provider_models = s_provider_models,
                          .provider_models_len = N(s_provider_models),
                          .pool_targets = s_pool_targets,
                          .pool_targets_len = N(s_pool_targets),
                          .rules = s_rules,
                          .rules_len = N(s_rules),
                          .aliases = s_aliases,
                          .aliases_len = N(s_aliases),
                          .alias_targets = s_alias_targets,
                          .alias_targets_len = N(s_alias_targets),
                          .limits = s_limits,
                          .limits_len = N(s_limits),
                          .label_detectors = "email,card",
                          .label_threshold_percent = 60,
                          .label_rules = s_label_rules,
                          .label_rules_len = N(s_label_rules),
                          .label_classes = s_label_classes,
                          .label_classes_len = N(s_label_classes)};
}

static void s_encode(const ipl_policy_t *p, msgpack_sbuffer *buf)
{
    msgpack_sbuffer_init(buf);
    assert_int_equal(ipl_msg_encode(IPL_MSG_POLICY, p, buf), IPL_OK);
}

static void s_strs_equal(char *const *a, uint32_t na, char *const *b, uint32_t nb)
{
    assert_int_equal(na, nb);
    for (uint32_t i = 0; i < na; i++)
        assert_string_equal(a[i], b[i]);
}

static void s_rule_equal(const ipl_rule_t *a, const ipl_rule_t *b)
{
    assert_string_equal(a->policy, b->policy);
    assert_string_equal(a->name, b->name);
    assert_int_equal(a->index, b->index);
    s_strs_equal(a->tenants, a->tenants_len, b->tenants, b->tenants_len);
    s_strs_equal(a->models, a->models_len, b->models, b->models_len);
    s_strs_equal(a->labels, a->labels_len, b->labels, b->labels_len);
    s_strs_equal(a->headers, a->headers_len, b->headers, b->headers_len);
    assert_true(a->prompt_min == b->prompt_min && a->prompt_max == b->prompt_max);
    assert_int_equal(a->has_queue_depth, b->has_queue_depth);
    assert_int_equal(a->queue_depth_above, b->queue_depth_above);
    assert_int_equal(a->has_kv_utilization, b->has_kv_utilization);
    assert_int_equal(a->kv_utilization_above_percent, b->kv_utilization_above_percent);
    assert_int_equal(a->predicted_ttft_above_slo, b->predicted_ttft_above_slo);
    assert_int_equal(a->has_time, b->has_time);
    assert_int_equal(a->days, b->days);
    assert_int_equal(a->from_minute, b->from_minute);
    assert_int_equal(a->to_minute, b->to_minute);
    assert_string_equal(a->action, b->action);
    assert_string_equal(a->pool, b->pool);
    s_strs_equal(a->targets, a->targets_len, b->targets, b->targets_len);
    assert_string_equal(a->target, b->target);
    assert_string_equal(a->unless_holder, b->unless_holder);
    assert_string_equal(a->provider, b->provider);
    assert_int_equal(a->while_above_slo, b->while_above_slo);
    assert_int_equal(a->enter_percent, b->enter_percent);
    assert_int_equal(a->exit_percent, b->exit_percent);
    assert_int_equal(a->min_hold_ms, b->min_hold_ms);
    assert_string_equal(a->reason, b->reason);
    assert_int_equal(a->status, b->status);
    assert_int_equal(a->max_utilization_percent, b->max_utilization_percent);
}

/* Every element, field by field, after a round trip of the full POLICY. */
static void test_full_policy_round_trips(void **state)
{
    (void)state;
    ipl_policy_t p = s_full();
    msgpack_sbuffer buf;
    s_encode(&p, &buf);
    ipl_msg_t out;
    assert_int_equal(ipl_msg_decode(buf.data, buf.size, &out), IPL_OK);
    const ipl_policy_t *q = &out.u.policy;
    assert_int_equal(q->version, 9);
    assert_true(q->hash == p.hash);
    assert_int_equal(q->pools_len, 1);
    assert_int_equal(q->pools[0].ttft_slo_ms, 800);

    assert_int_equal(q->backends_len, 1);
    const ipl_backend_t *b = &q->backends[0];
    assert_string_equal(b->name, "cloud-openai");
    assert_string_equal(b->url, "https://api.example.com/v1");
    assert_string_equal(b->protocol, "openai");
    assert_string_equal(b->auth, "bearer");
    assert_string_equal(b->auth_header, "");
    assert_string_equal(b->secret_source, "secretRef");
    assert_string_equal(b->secret_name, "cloud-credentials");
    assert_string_equal(b->secret_key, "token");
    assert_string_equal(b->ca_bundle, "");
    assert_string_equal(b->ca_secret_name, "ca");
    assert_string_equal(b->ca_secret_key, "ca.pem");
    assert_true(b->insecure_skip_verify);
    assert_int_equal(b->connect_ms, 2000);
    assert_int_equal(b->response_ms, 60000);
    assert_int_equal(b->max_connections, 128);

    assert_int_equal(q->providers_len, 1);
    const ipl_provider_t *v = &q->providers[0];
    assert_string_equal(v->name, "cloud");
    assert_string_equal(v->backend, "cloud-openai");
    assert_int_equal(v->latency_hint_ms, 400);
    assert_int_equal(v->input_micros_per_mtok, 150000);
    assert_int_equal(v->output_micros_per_mtok, 600000);
    assert_int_equal(v->concurrent_requests, 64);
    assert_int_equal(v->tokens_per_minute, 2000000);

    assert_int_equal(q->provider_models_len, 2);
    assert_string_equal(q->provider_models[1].provider, "cloud");
    assert_string_equal(q->provider_models[1].name, "large-model");
    assert_string_equal(q->provider_models[1].remote_name, "vendor/large-70b");

    assert_int_equal(q->pool_targets_len, 2);
    const ipl_pool_target_t *t = &q->pool_targets[1];
    assert_string_equal(t->pool, "chat");
    assert_string_equal(t->kind, "provider");
    assert_string_equal(t->name, "cloud");
    assert_string_equal(t->role, "overflow");
    assert_int_equal(t->weight, 1000);

    assert_int_equal(q->rules_len, 2);
    for (uint32_t i = 0; i < 2; i++)
        s_rule_equal(&p.rules[i], &q->rules[i]);
    assert_int_equal(q->rules[1].tenants_len, 0); /* an empty list round-trips empty */

    assert_int_equal(q->aliases_len, 2);
    s_strs_equal(q->aliases[0].failover, q->aliases[0].failover_len, s_failover, 2);
    assert_string_equal(q->aliases[1].name, "assistant");
    assert_int_equal(q->aliases[1].failover_len, 0);
    assert_int_equal(q->alias_targets_len, 2);
    assert_string_equal(q->alias_targets[1].kind, "pool");
    assert_string_equal(q->alias_targets[1].name, "large");
    assert_int_equal(q->alias_targets[0].weight, 9);

    assert_int_equal(q->limits_len, 2);
    const ipl_limit_t *l = &q->limits[1];
    assert_string_equal(l->policy, "routing");
    assert_string_equal(l->tenant, "team-a");
    assert_int_equal(l->requests_per_minute, 600);
    assert_int_equal(l->input_tokens_per_minute, 2000000);
    assert_int_equal(l->output_tokens_per_minute, 200000);
    assert_int_equal(l->concurrent_requests, 32);
    assert_int_equal(l->weight, 7);
    assert_string_equal(l->priority, "interactive");
    assert_int_equal(l->cost_per_day_micros, 12500000);
    assert_int_equal(q->limits[0].weight, 0); /* unset: encoded as 0 / nil */
    assert_null(q->limits[0].priority);
    ipl_msg_clear(&out);
    msgpack_sbuffer_destroy(&buf);
}

/* Each element array alone: the others stay empty, and the decoded array has what was sent
 * (its first string field compared, the rest by re-encoding to the same bytes). */
static void test_each_element_round_trips_alone(void **state)
{
    (void)state;
    ipl_policy_t full = s_full();
    const ipl_proto_struct_t *sd = ipl_proto_msg_desc(IPL_MSG_POLICY)->body;
    size_t nopt = 0;
    for (size_t i = 0; i < sd->nfields; i++) {
        const ipl_proto_field_t *f = &sd->fields[i];
        if (f->type != IPL_FT_STRUCTS || !f->optional) continue;
        nopt++;
        ipl_policy_t one = {.version = 1, .source = "s"};
        memcpy((char *)&one + f->offset, (char *)&full + f->offset, sizeof(void *));
        memcpy((char *)&one + f->len_offset, (char *)&full + f->len_offset, sizeof(uint32_t));
        msgpack_sbuffer a, b;
        s_encode(&one, &a);
        ipl_msg_t out;
        assert_int_equal(ipl_msg_decode(a.data, a.size, &out), IPL_OK);
        for (size_t k = 0; k < sd->nfields; k++) {
            const ipl_proto_field_t *g = &sd->fields[k];
            if (g->type != IPL_FT_STRUCTS) continue;
            uint32_t n = *(uint32_t *)((char *)&out.u.policy + g->len_offset);
            uint32_t want = k == i ? *(uint32_t *)((char *)&full + g->len_offset) : 0;
            assert_int_equal(n, want);
        }
        const char *elem = *(char **)((char *)&out.u.policy + f->offset);
        const char *sent = *(char **)((char *)&full + f->offset);
        assert_non_null(elem);
        assert_string_equal(*(char **)(elem + f->elem->fields[0].offset),
                            *(char *const *)(sent + f->elem->fields[0].offset));
        s_encode(&out.u.policy, &b);
        assert_int_equal(a.size, b.size);
        assert_memory_equal(a.data, b.data, a.size);
        ipl_msg_clear(&out);
        msgpack_sbuffer_destroy(&a);
        msgpack_sbuffer_destroy(&b);
    }
    assert_int_equal(nopt, 10); /* backends .. limits, label_rules, label_classes */
}

/* The first `nfields` fields of POLICY, element arrays empty: as a policy service that
 * predates the later fields sends it. */
/* POLICY fields [from, to) with stand-in values by type: a number, a string ("old" when
 * `old`, else nil), an empty array. */
static void s_pack_fields(msgpack_packer *pk, size_t from, size_t to, bool old)
{
    const ipl_proto_struct_t *sd = ipl_proto_msg_desc(IPL_MSG_POLICY)->body;
    for (size_t i = from; i < to && i < sd->nfields; i++) {
        const ipl_proto_field_t *f = &sd->fields[i];
        if (f->type == IPL_FT_U64)
            msgpack_pack_uint64(pk, old ? 5 : 0);
        else if (f->type == IPL_FT_STR && old)
            msgpack_pack_str_with_body(pk, "old", 3);
        else if (f->type == IPL_FT_STR)
            msgpack_pack_nil(pk);
        else
            msgpack_pack_array(pk, 0);
    }
}

static void s_pack_head(msgpack_sbuffer *buf, msgpack_packer *pk, size_t nfields)
{
    msgpack_sbuffer_init(buf);
    msgpack_packer_init(pk, buf, msgpack_sbuffer_write);
    msgpack_pack_array(pk, 2 + nfields);
    msgpack_pack_uint64(pk, IPL_PROTO_VERSION);
    msgpack_pack_uint64(pk, IPL_MSG_POLICY);
}

static void s_pack_old(msgpack_sbuffer *buf, size_t nfields)
{
    msgpack_packer pk;
    s_pack_head(buf, &pk, nfields);
    s_pack_fields(&pk, 0, nfields, true);
}

static size_t s_field(const char *name);

static void test_old_frames_decode_with_the_new_fields_empty(void **state)
{
    (void)state;
    const ipl_proto_struct_t *sd = ipl_proto_msg_desc(IPL_MSG_POLICY)->body;
    size_t required = 0;
    while (!sd->fields[required].optional)
        required++;
    assert_int_equal(required, 4); /* version, source, pools, workers */
    for (size_t n = required; n <= sd->nfields; n++) {
        msgpack_sbuffer buf;
        s_pack_old(&buf, n);
        ipl_msg_t out;
        assert_int_equal(ipl_msg_decode(buf.data, buf.size, &out), IPL_OK);
        const ipl_policy_t *q = &out.u.policy;
        assert_int_equal(q->version, 5);
        assert_true(q->hash == (n > required ? 5 : 0));
        assert_int_equal(q->backends_len + q->providers_len + q->provider_models_len +
                             q->pool_targets_len + q->rules_len + q->aliases_len +
                             q->alias_targets_len + q->limits_len,
                         0);
        assert_null(q->rules);
        assert_null(q->limits);
        ipl_msg_clear(&out);
        msgpack_sbuffer_destroy(&buf);
    }
    /* an old pool element (3 fields) decodes with no SLO */
    msgpack_sbuffer buf;
    msgpack_packer pk;
    msgpack_sbuffer_init(&buf);
    msgpack_packer_init(&pk, &buf, msgpack_sbuffer_write);
    msgpack_pack_array(&pk, 6);
    msgpack_pack_uint64(&pk, IPL_PROTO_VERSION);
    msgpack_pack_uint64(&pk, IPL_MSG_POLICY);
    msgpack_pack_uint64(&pk, 1);
    msgpack_pack_nil(&pk);
    msgpack_pack_array(&pk, 1);
    msgpack_pack_array(&pk, 3);
    for (int i = 0; i < 3; i++)
        msgpack_pack_str_with_body(&pk, "p", 1);
    msgpack_pack_array(&pk, 0);
    ipl_msg_t out;
    assert_int_equal(ipl_msg_decode(buf.data, buf.size, &out), IPL_OK);
    assert_int_equal(out.u.policy.pools_len, 1);
    assert_int_equal(out.u.policy.pools[0].ttft_slo_ms, 0);
    ipl_msg_clear(&out);
    msgpack_sbuffer_destroy(&buf);

    /* an old limit element (6 fields: no weight, priority, cost budget) decodes with 0 / NULL */
    s_pack_head(&buf, &pk, (size_t)s_field("limits") + 1);
    s_pack_fields(&pk, 0, s_field("limits"), true);
    msgpack_pack_array(&pk, 1);
    msgpack_pack_array(&pk, 6);
    msgpack_pack_str_with_body(&pk, "p", 1);
    msgpack_pack_str_with_body(&pk, "t", 1);
    for (int i = 0; i < 4; i++)
        msgpack_pack_uint64(&pk, 9);
    assert_int_equal(ipl_msg_decode(buf.data, buf.size, &out), IPL_OK);
    assert_int_equal(out.u.policy.limits_len, 1);
    assert_int_equal(out.u.policy.limits[0].concurrent_requests, 9);
    assert_int_equal(out.u.policy.limits[0].weight, 0);
    assert_null(out.u.policy.limits[0].priority);
    assert_int_equal(out.u.policy.limits[0].cost_per_day_micros, 0);
    ipl_msg_clear(&out);
    msgpack_sbuffer_destroy(&buf);
}

/* The first `upto` fields of the full policy's encoding, then `tail` (raw msgpack) in place
 * of field `upto`, in an envelope that claims every field. */
static void s_pack_with(msgpack_sbuffer *buf, size_t upto, const char *tail, size_t tail_len,
                        size_t nfields)
{
    msgpack_packer pk;
    s_pack_head(buf, &pk, nfields);
    s_pack_fields(&pk, 0, upto, true);
    msgpack_sbuffer_write(buf, tail, tail_len);
    s_pack_fields(&pk, upto + 1, nfields, false);
}

static size_t s_field(const char *name)
{
    const ipl_proto_struct_t *sd = ipl_proto_msg_desc(IPL_MSG_POLICY)->body;
    for (size_t i = 0; i < sd->nfields; i++)
        if (!strcmp(sd->fields[i].name, name)) return i;
    fail_msg("no POLICY field %s", name);
    return 0;
}

static int s_decode_with(const char *field, const char *tail, size_t tail_len)
{
    const ipl_proto_struct_t *sd = ipl_proto_msg_desc(IPL_MSG_POLICY)->body;
    msgpack_sbuffer buf;
    s_pack_with(&buf, s_field(field), tail, tail_len, sd->nfields);
    ipl_msg_t out;
    int rc = ipl_msg_decode(buf.data, buf.size, &out);
    if (rc == IPL_OK)
        ipl_msg_clear(&out);
    else
        assert_null(out.arena);
    msgpack_sbuffer_destroy(&buf);
    return rc;
}

/* `lit` (a string literal of msgpack) in place of POLICY field `field`. */
#define S_WITH(field, lit) s_decode_with(field, lit, sizeof lit - 1)

static void test_malformed_new_fields_are_rejected(void **state)
{
    (void)state;
    /* wrong types in place of an element array */
    assert_int_equal(S_WITH("rules", "\x80"), IPL_E_TYPE);     /* a map */
    assert_int_equal(S_WITH("limits", "\x07"), IPL_E_TYPE);    /* a number */
    assert_int_equal(S_WITH("backends", "\xa1x"), IPL_E_TYPE); /* a string */
    /* an element with too few fields, and one of the wrong shape */
    assert_int_equal(S_WITH("limits", "\x91\x92\xa1p\xa1t"), IPL_E_TRUNCATED);
    assert_int_equal(S_WITH("limits", "\x91\x07"), IPL_E_TYPE);
    /* an alias whose failover (a strs) is wrong: a nil entry, a number, not an array */
    assert_int_equal(S_WITH("aliases", "\x91\x93\xa1p\xa1n\x91\xc0"), IPL_E_TYPE);
    assert_int_equal(S_WITH("aliases", "\x91\x93\xa1p\xa1n\x91\x05"), IPL_E_TYPE);
    assert_int_equal(S_WITH("aliases", "\x91\x93\xa1p\xa1n\xa1x"), IPL_E_TYPE);
    /* a list claiming two strings where one follows: the next field's array is no string */
    assert_int_equal(S_WITH("aliases", "\x91\x93\xa1p\xa1n\x92\xa1x"), IPL_E_TYPE);
    /* well-formed, for contrast */
    assert_int_equal(S_WITH("aliases", "\x91\x93\xa1p\xa1n\x92\xa1x\xa0"), IPL_OK);

    /* every cut of a full frame is rejected, never crashes or leaks */
    ipl_policy_t p = s_full();
    msgpack_sbuffer buf;
    s_encode(&p, &buf);
    for (size_t cut = 0; cut < buf.size; cut++) {
        ipl_msg_t out;
        assert_true(ipl_msg_decode(buf.data, cut, &out) < 0);
        assert_null(out.arena);
    }
    msgpack_sbuffer_destroy(&buf);
}

static void test_oversized_new_fields_are_rejected(void **state)
{
    (void)state;
    /* arrays beyond IPL_PROTO_MAX_ARRAY (in a frame that holds that many elements) */
    size_t over = IPL_PROTO_MAX_ARRAY + 1;
    char *big = malloc(16 + over);
    assert_non_null(big);
    memcpy(big, "\x91\x93\xa1p\xa1n\xdd", 7); /* an alias, then failover's array32 header */
    for (int i = 0; i < 4; i++)
        big[7 + i] = (char)(over >> (24 - 8 * i));
    memset(big + 11, 0xa0, over); /* empty strings */
    assert_int_equal(s_decode_with("aliases", big, 11 + over), IPL_E_RANGE);
    memset(big + 11, 0x90, over); /* empty arrays */
    assert_int_equal(s_decode_with("rules", big + 6, 5 + over), IPL_E_RANGE);
    /* within the limit but beyond the frame: refused before allocating */
    memcpy(big + 7, "\x00\x0f\x42\x40", 4); /* 1,000,000 */
    assert_int_equal(s_decode_with("aliases", big, 16), IPL_E_TRUNCATED);
    assert_int_equal(s_decode_with("rules", big + 6, 10), IPL_E_TRUNCATED);
    free(big);

    /* the encoder: a string in a list beyond the limit, a NULL entry, a count without its
     * array */
    char *huge = malloc(IPL_PROTO_MAX_STR + 2);
    assert_non_null(huge);
    memset(huge, 'a', IPL_PROTO_MAX_STR + 1);
    huge[IPL_PROTO_MAX_STR + 1] = 0;
    char *list[] = {"ok", huge};
    ipl_alias_t a = {.policy = "p", .name = "n", .failover = list, .failover_len = 2};
    ipl_policy_t p = {.aliases = &a, .aliases_len = 1};
    msgpack_sbuffer buf;
    msgpack_sbuffer_init(&buf);
    assert_int_equal(ipl_msg_encode(IPL_MSG_POLICY, &p, &buf), IPL_E_RANGE);
    assert_int_equal(buf.size, 0);
    list[1] = NULL;
    assert_int_equal(ipl_msg_encode(IPL_MSG_POLICY, &p, &buf), IPL_E_INVAL);
    a.failover = NULL;
    assert_int_equal(ipl_msg_encode(IPL_MSG_POLICY, &p, &buf), IPL_E_INVAL);
    a.failover_len = 0;
    assert_int_equal(ipl_msg_encode(IPL_MSG_POLICY, &p, &buf), IPL_OK);
    /* and a decoded string of the list beyond the limit */
    msgpack_sbuffer_clear(&buf);
    msgpack_packer pk;
    msgpack_packer_init(&pk, &buf, msgpack_sbuffer_write);
    msgpack_pack_array(&pk, 3);
    msgpack_pack_str_with_body(&pk, "p", 1);
    msgpack_pack_str_with_body(&pk, "n", 1);
    msgpack_pack_array(&pk, 1);
    msgpack_pack_str_with_body(&pk, huge, IPL_PROTO_MAX_STR + 1);
    char *tail = malloc(buf.size + 1);
    tail[0] = (char)0x91;
    memcpy(tail + 1, buf.data, buf.size);
    assert_int_equal(s_decode_with("aliases", tail, buf.size + 1), IPL_E_RANGE);
    free(tail);
    free(huge);
    msgpack_sbuffer_destroy(&buf);
}

/* 200 rules with long lists, 100 tenants' limits, 100 aliases: encodes and decodes. */
static void test_a_large_policy_fits_the_limits(void **state)
{
    (void)state;
    enum { RULES = 200, TENANTS = 100 };
    static char names[TENANTS][24];
    static char *tenants[TENANTS];
    for (int i = 0; i < TENANTS; i++) {
        snprintf(names[i], sizeof names[i], "tenant-%03d", i);
        tenants[i] = names[i];
    }
    ipl_rule_t *rules = calloc(RULES, sizeof *rules);
    ipl_limit_t *limits = calloc(TENANTS, sizeof *limits);
    ipl_alias_t *aliases = calloc(TENANTS, sizeof *aliases);
    for (int i = 0; i < RULES; i++)
        rules[i] = (ipl_rule_t){.policy = "p",
                                .name = names[i % TENANTS],
                                .index = (uint64_t)i,
                                .tenants = tenants,
                                .tenants_len = TENANTS,
                                .models = tenants,
                                .models_len = 16,
                                .action = "route",
                                .pool = "chat",
                                .prompt_max = UINT64_MAX};
    for (int i = 0; i < TENANTS; i++) {
        limits[i] = (ipl_limit_t){.policy = "p", .tenant = names[i], .requests_per_minute = 60};
        aliases[i] =
            (ipl_alias_t){.policy = "p", .name = names[i], .failover = tenants, .failover_len = 8};
    }
    ipl_policy_t p = {.version = 1,
                      .source = "s",
                      .rules = rules,
                      .rules_len = RULES,
                      .limits = limits,
                      .limits_len = TENANTS,
                      .aliases = aliases,
                      .aliases_len = TENANTS};
    msgpack_sbuffer buf;
    s_encode(&p, &buf);
    assert_true(buf.size < IPL_PROTO_MAX_FRAME / 16);
    ipl_msg_t out;
    assert_int_equal(ipl_msg_decode(buf.data, buf.size, &out), IPL_OK);
    assert_int_equal(out.u.policy.rules_len, RULES);
    assert_int_equal(out.u.policy.rules[RULES - 1].tenants_len, TENANTS);
    assert_string_equal(out.u.policy.rules[RULES - 1].tenants[TENANTS - 1], "tenant-099");
    assert_string_equal(out.u.policy.limits[TENANTS - 1].tenant, "tenant-099");
    ipl_msg_clear(&out);
    msgpack_sbuffer_destroy(&buf);
    free(rules);
    free(limits);
    free(aliases);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_full_policy_round_trips),
        cmocka_unit_test(test_each_element_round_trips_alone),
        cmocka_unit_test(test_old_frames_decode_with_the_new_fields_empty),
        cmocka_unit_test(test_malformed_new_fields_are_rejected),
        cmocka_unit_test(test_oversized_new_fields_are_rejected),
        cmocka_unit_test(test_a_large_policy_fits_the_limits),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

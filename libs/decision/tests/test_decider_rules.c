/*
 * Unit tests of decider_rules: one table row per match condition (holding and not), one per
 * action, first match wins, time windows (wrapping midnight, days of week), aliases resolved,
 * the spill hysteresis and build errors; decider_rules_explain: every evaluation here runs it too
 * (s_eval) and asserts that it agrees with decider_rules_eval, and a table holds the words of
 * every condition and every action. The policies are built by hand: a decision test may not
 * include libs/policy's headers (tools/check-layers).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "decider_rules.h"
#include "ipl_error.h"
#include "ipl_proto.h"

#define S_LIST(...)      (char *[]){__VA_ARGS__}, sizeof((char *[]){__VA_ARGS__}) / sizeof(char *)
#define S_ANY_PROMPT     .prompt_max = UINT64_MAX
#define S_MIN(day, h, m) ((uint32_t)((day)*1440 + (h)*60 + (m))) /* day 0: Monday */

/* Pools, and aliases: chat → small-model; front → chat (a chain); big → pool "large";
 * c1 ⇄ c2 (a cycle the compiler would reject: it must not hang the build). */
static ipl_pool_t s_pools[] = {{.name = "chat", .model = "small-model"},
                               {.name = "large", .model = "large-model"}};
static ipl_alias_t s_aliases[] = {
    {.name = "big"}, {.name = "c1"}, {.name = "c2"}, {.name = "chat"}, {.name = "front"}};
static ipl_alias_target_t s_alias_targets[] = {
    {.alias = "big", .kind = "pool", .name = "large", .weight = 1},
    {.alias = "c1", .kind = "model", .name = "c2", .weight = 1},
    {.alias = "c2", .kind = "model", .name = "c1", .weight = 1},
    {.alias = "chat", .kind = "model", .name = "small-model", .weight = 9},
    {.alias = "front", .kind = "model", .name = "chat", .weight = 1},
};

static ipl_policy_t s_policy(ipl_rule_t *rules, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++) {
        if (!rules[i].action) rules[i].action = "route";
        if (!rules[i].name) rules[i].name = "r";
        rules[i].policy = "p";
        rules[i].index = i;
    }
    return (ipl_policy_t){.version = 1,
                          .pools = s_pools,
                          .pools_len = 2,
                          .rules = rules,
                          .rules_len = n,
                          .aliases = s_aliases,
                          .aliases_len = 5,
                          .alias_targets = s_alias_targets,
                          .alias_targets_len = 5};
}

static decider_rules_t *s_build(ipl_policy_t *p)
{
    decider_rules_t *r = NULL;
    char err[256];
    int rc = decider_rules_new(p, &r, err, sizeof err);
    if (rc != 0) fail_msg("decider_rules_new: %d %s", rc, err);
    return r;
}

/* ---- eval and explain agree ------------------------------------------------------------- */

typedef struct {
    size_t calls, last;
    bool ordered, matched;
    char why[DECIDER_RULES_WHY_MAX]; /* the last call's */
} s_trace_t;

static void s_trace(void *arg, size_t rule, bool matched, const char *why)
{
    s_trace_t *t = arg;
    if (t->calls ? rule != t->last + 1 || t->matched : rule != 0) t->ordered = false;
    if (strlen(why) >= sizeof t->why) t->ordered = false;
    t->calls++;
    t->last = rule;
    t->matched = matched;
    snprintf(t->why, sizeof t->why, "%s", why);
}

static void s_assert_same(const decider_rules_result_t *a, const decider_rules_result_t *b)
{
    assert_int_equal(a->action, b->action);
    assert_int_equal(a->rule, b->rule);
    assert_ptr_equal(a->name, b->name);
    assert_ptr_equal(a->policy, b->policy);
    assert_ptr_equal(a->pool, b->pool);
    assert_ptr_equal(a->targets, b->targets);
    assert_int_equal(a->ntargets, b->ntargets);
    assert_ptr_equal(a->target, b->target);
    assert_ptr_equal(a->unless_holder, b->unless_holder);
    assert_ptr_equal(a->provider, b->provider);
    assert_int_equal(a->spill.enter_percent, b->spill.enter_percent);
    assert_int_equal(a->spill.exit_percent, b->spill.exit_percent);
    assert_int_equal(a->spill.min_hold_ms, b->spill.min_hold_ms);
    assert_int_equal(a->spill.while_above_slo, b->spill.while_above_slo);
    assert_ptr_equal(a->reason, b->reason);
    assert_int_equal(a->status, b->status);
    assert_int_equal(a->max_utilization_percent, b->max_utilization_percent);
    assert_int_equal(a->admit, b->admit);
}

/* decider_rules_eval, after checking that decider_rules_explain gives the same result and
 * traces every rule up to the match (all of them when none matches), in order. `t` (may be
 * NULL) receives the trace. */
static decider_rules_action_t s_eval_traced(const decider_rules_t *r,
                                            const decider_rules_input_t *in,
                                            decider_rules_result_t *out, s_trace_t *t)
{
    s_trace_t local;
    if (!t) t = &local;
    *t = (s_trace_t){.ordered = true};
    decider_rules_result_t ex;
    memset(&ex, 0xa5, sizeof ex); // explain must fill every field, as eval does
    decider_rules_action_t a = decider_rules_explain(r, in, s_trace, t, &ex);
    decider_rules_action_t b = decider_rules_eval(r, in, out);
    assert_int_equal(a, b);
    s_assert_same(&ex, out);
    assert_true(t->ordered);
    if (out->rule >= 0) {
        assert_int_equal(t->calls, (size_t)out->rule + 1);
        assert_true(t->matched);
    } else {
        assert_int_equal(t->calls, decider_rules_count(r));
        assert_false(t->calls && t->matched);
    }
    assert_int_equal(decider_rules_explain(r, in, NULL, NULL, &ex), b); // fn may be NULL
    return b;
}

static decider_rules_action_t s_eval(const decider_rules_t *r, const decider_rules_input_t *in,
                                     decider_rules_result_t *out)
{
    return s_eval_traced(r, in, out, NULL);
}

/* A request matching every row's rule unless the row changes it: a later designated
 * initializer overrides the default, as C11 defines (GCC warns about it under -Wextra). */
#pragma GCC diagnostic ignored "-Woverride-init"
#define S_IN(...) ((decider_rules_input_t){.tenant = "team-a", .model = "small-model", __VA_ARGS__})

static const decider_rules_header_t s_hdrs[] = {{"X-Class", "batch"}, {"x-empty", ""}};

/* Mon-Fri 09:00-17:00; Fri 22:00-02:00 (wraps midnight) */
#define S_WORK_HOURS                                                                               \
    {                                                                                              \
        .has_time = true, .days = 0x1f, .from_minute = 540, .to_minute = 1020, S_ANY_PROMPT        \
    }
#define S_FRI_NIGHT                                                                                \
    {                                                                                              \
        .has_time = true, .days = 1u << 4, .from_minute = 1320, .to_minute = 120, S_ANY_PROMPT     \
    }

typedef struct {
    const char *what;
    ipl_rule_t rule;
    decider_rules_input_t in;
    bool match;
} s_row_t;

static const s_row_t s_match_rows[] = {
    {"no condition matches everything", {S_ANY_PROMPT}, S_IN(.tenant = NULL), true},
    {"tenant listed", {.tenants = S_LIST("x", "team-a"), S_ANY_PROMPT}, S_IN(), true},
    {"tenant not listed", {.tenants = S_LIST("x", "y"), S_ANY_PROMPT}, S_IN(), false},
    {"anonymous vs tenants",
     {.tenants = S_LIST("team-a"), S_ANY_PROMPT},
     S_IN(.tenant = ""),
     false},
    {"tenant case-sensitive", {.tenants = S_LIST("Team-A"), S_ANY_PROMPT}, S_IN(), false},
    {"model listed", {.models = S_LIST("small-model"), S_ANY_PROMPT}, S_IN(), true},
    {"model not listed", {.models = S_LIST("large-model"), S_ANY_PROMPT}, S_IN(), false},
    {"model unknown everywhere",
     {.models = S_LIST("large-model"), S_ANY_PROMPT},
     S_IN(.model = "nope"),
     false},
    {"NULL model vs models",
     {.models = S_LIST("large-model"), S_ANY_PROMPT},
     S_IN(.model = NULL),
     false},
    {"alias asked, rule on alias",
     {.models = S_LIST("chat"), S_ANY_PROMPT},
     S_IN(.model = "chat"),
     true},
    {"alias asked, rule on its model",
     {.models = S_LIST("small-model"), S_ANY_PROMPT},
     S_IN(.model = "chat"),
     true},
    {"alias chain resolved",
     {.models = S_LIST("small-model"), S_ANY_PROMPT},
     S_IN(.model = "front"),
     true},
    {"alias chain, rule on the middle",
     {.models = S_LIST("chat"), S_ANY_PROMPT},
     S_IN(.model = "front"),
     true},
    {"pool-kind alias resolves to the pool's model",
     {.models = S_LIST("large-model"), S_ANY_PROMPT},
     S_IN(.model = "big"),
     true},
    {"alias resolves to another model only",
     {.models = S_LIST("large-model"), S_ANY_PROMPT},
     S_IN(.model = "chat"),
     false},
    {"model asked, rule on an alias of it",
     {.models = S_LIST("chat"), S_ANY_PROMPT},
     S_IN(.model = "small-model"),
     false},
    {"alias cycle ends",
     {.models = S_LIST("small-model"), S_ANY_PROMPT},
     S_IN(.model = "c1"),
     false},
    {"alias cycle, rule on the other",
     {.models = S_LIST("c2"), S_ANY_PROMPT},
     S_IN(.model = "c1"),
     true},
    {"labels all present",
     {.labels = S_LIST("pii", "eu"), S_ANY_PROMPT},
     S_IN(.labels = (const char *const[]){"x", "eu", "pii"}, .nlabels = 3),
     true},
    {"labels one missing",
     {.labels = S_LIST("pii", "eu"), S_ANY_PROMPT},
     S_IN(.labels = (const char *const[]){"pii"}, .nlabels = 1),
     false},
    {"labels none given", {.labels = S_LIST("pii"), S_ANY_PROMPT}, S_IN(), false},
    {"header present, any value",
     {.headers = S_LIST("x-class"), S_ANY_PROMPT},
     S_IN(.headers = s_hdrs, .nheaders = 2),
     true},
    {"header present, empty value",
     {.headers = S_LIST("X-Empty"), S_ANY_PROMPT},
     S_IN(.headers = s_hdrs, .nheaders = 2),
     true},
    {"header absent",
     {.headers = S_LIST("x-other"), S_ANY_PROMPT},
     S_IN(.headers = s_hdrs, .nheaders = 2),
     false},
    {"header value equal",
     {.headers = S_LIST("x-class=batch"), S_ANY_PROMPT},
     S_IN(.headers = s_hdrs, .nheaders = 2),
     true},
    {"header value differs",
     {.headers = S_LIST("x-class=Batch"), S_ANY_PROMPT},
     S_IN(.headers = s_hdrs, .nheaders = 2),
     false},
    {"header value empty wanted",
     {.headers = S_LIST("x-empty="), S_ANY_PROMPT},
     S_IN(.headers = s_hdrs, .nheaders = 2),
     true},
    {"headers all needed",
     {.headers = S_LIST("x-class", "x-other"), S_ANY_PROMPT},
     S_IN(.headers = s_hdrs, .nheaders = 2),
     false},
    {"prompt at min", {.prompt_min = 100, .prompt_max = 200}, S_IN(.prompt_tokens = 100), true},
    {"prompt at max", {.prompt_min = 100, .prompt_max = 200}, S_IN(.prompt_tokens = 200), true},
    {"prompt below min", {.prompt_min = 100, .prompt_max = 200}, S_IN(.prompt_tokens = 99), false},
    {"prompt above max", {.prompt_min = 100, .prompt_max = 200}, S_IN(.prompt_tokens = 201), false},
    {"queue above",
     {.has_queue_depth = true, .queue_depth_above = 8, S_ANY_PROMPT},
     S_IN(.queue_depth = 9),
     true},
    {"queue at (not above)",
     {.has_queue_depth = true, .queue_depth_above = 8, S_ANY_PROMPT},
     S_IN(.queue_depth = 8),
     false},
    {"queue above 0 set",
     {.has_queue_depth = true, .queue_depth_above = 0, S_ANY_PROMPT},
     S_IN(.queue_depth = 0),
     false},
    {"kv above",
     {.has_kv_utilization = true, .kv_utilization_above_percent = 90, S_ANY_PROMPT},
     S_IN(.kv_utilization_percent = 91),
     true},
    {"kv at",
     {.has_kv_utilization = true, .kv_utilization_above_percent = 90, S_ANY_PROMPT},
     S_IN(.kv_utilization_percent = 90),
     false},
    {"ttft above slo",
     {.predicted_ttft_above_slo = 2, S_ANY_PROMPT},
     S_IN(.predicted_ttft_ms = 501, .ttft_slo_ms = 500),
     true},
    {"ttft at slo is not above",
     {.predicted_ttft_above_slo = 2, S_ANY_PROMPT},
     S_IN(.predicted_ttft_ms = 500, .ttft_slo_ms = 500),
     false},
    {"ttft within slo wanted",
     {.predicted_ttft_above_slo = 1, S_ANY_PROMPT},
     S_IN(.predicted_ttft_ms = 100, .ttft_slo_ms = 500),
     true},
    {"ttft within wanted, above",
     {.predicted_ttft_above_slo = 1, S_ANY_PROMPT},
     S_IN(.predicted_ttft_ms = 900, .ttft_slo_ms = 500),
     false},
    {"ttft condition without slo",
     {.predicted_ttft_above_slo = 2, S_ANY_PROMPT},
     S_IN(.predicted_ttft_ms = 900, .ttft_slo_ms = 0),
     false},
    {"ttft within, without slo",
     {.predicted_ttft_above_slo = 1, S_ANY_PROMPT},
     S_IN(.predicted_ttft_ms = 1, .ttft_slo_ms = 0),
     false},
    /* Mon-Fri 09:00-17:00 */
    {"window inside", S_WORK_HOURS, S_IN(.minute_of_week = S_MIN(2, 9, 0)), true},
    {"window end exclusive", S_WORK_HOURS, S_IN(.minute_of_week = S_MIN(2, 17, 0)), false},
    {"window before", S_WORK_HOURS, S_IN(.minute_of_week = S_MIN(2, 8, 59)), false},
    {"window on a day not listed", S_WORK_HOURS, S_IN(.minute_of_week = S_MIN(5, 10, 0)), false},
    {"window days 0 is every day",
     {.has_time = true, .days = 0, .from_minute = 540, .to_minute = 1020, S_ANY_PROMPT},
     S_IN(.minute_of_week = S_MIN(6, 10, 0)),
     true},
    /* Fri 22:00-02:00 (wraps): Friday only */
    {"wrap evening of the day", S_FRI_NIGHT, S_IN(.minute_of_week = S_MIN(4, 23, 0)), true},
    {"wrap morning after", S_FRI_NIGHT, S_IN(.minute_of_week = S_MIN(5, 1, 59)), true},
    {"wrap end exclusive", S_FRI_NIGHT, S_IN(.minute_of_week = S_MIN(5, 2, 0)), false},
    {"wrap morning of the day itself", S_FRI_NIGHT, S_IN(.minute_of_week = S_MIN(4, 1, 0)), false},
    {"wrap evening of the next day", S_FRI_NIGHT, S_IN(.minute_of_week = S_MIN(5, 23, 0)), false},
    /* Sun 23:00-01:00: Monday 00:30 is the week's minute 30 (the week wraps too) */
    {"wrap across the week",
     {.has_time = true, .days = 1u << 6, .from_minute = 1380, .to_minute = 60, S_ANY_PROMPT},
     S_IN(.minute_of_week = S_MIN(0, 0, 30)),
     true},
    {"all conditions together",
     {.tenants = S_LIST("team-a"),
      .models = S_LIST("chat"),
      .labels = S_LIST("pii"),
      .headers = S_LIST("x-class=batch"),
      .prompt_min = 10,
      .prompt_max = 20,
      .has_queue_depth = true,
      .queue_depth_above = 1},
     S_IN(.model = "front", .labels = (const char *const[]){"pii"}, .nlabels = 1, .headers = s_hdrs,
          .nheaders = 2, .prompt_tokens = 15, .queue_depth = 2),
     true},
    {"all conditions, one fails",
     {.tenants = S_LIST("team-a"),
      .models = S_LIST("chat"),
      .labels = S_LIST("pii"),
      .headers = S_LIST("x-class=batch"),
      .prompt_min = 10,
      .prompt_max = 20,
      .has_queue_depth = true,
      .queue_depth_above = 1},
     S_IN(.model = "front", .labels = (const char *const[]){"pii"}, .nlabels = 1, .headers = s_hdrs,
          .nheaders = 2, .prompt_tokens = 15, .queue_depth = 1),
     false},
};

static void test_match_conditions(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof s_match_rows / sizeof *s_match_rows; i++) {
        const s_row_t *row = &s_match_rows[i];
        ipl_rule_t rule = row->rule;
        ipl_policy_t p = s_policy(&rule, 1);
        decider_rules_t *r = s_build(&p);
        decider_rules_result_t out;
        decider_rules_action_t a = s_eval(r, &row->in, &out);
        if ((a != DECIDER_RULES_NONE) != row->match)
            fail_msg("row %zu \"%s\": matched %d, want %d", i, row->what, a != DECIDER_RULES_NONE,
                     row->match);
        assert_int_equal(out.rule, row->match ? 0 : -1);
        decider_rules_destroy(&r);
        assert_null(r);
    }
}

static const char *s_lookup(void *arg, const char *name)
{
    (*(int *)arg)++;
    return strcasecmp(name, "x-trusted") == 0 ? "yes" : NULL;
}

static void test_header_callback(void **state)
{
    (void)state;
    ipl_rule_t rules[] = {{.name = "cb", .headers = S_LIST("X-Trusted=yes"), S_ANY_PROMPT}};
    ipl_policy_t p = s_policy(rules, 1);
    decider_rules_t *r = s_build(&p);
    int calls = 0;
    decider_rules_result_t out;
    decider_rules_input_t in = S_IN(.header_fn = s_lookup, .header_arg = &calls, .headers = s_hdrs,
                                    .nheaders = 2); // the callback wins
    assert_int_equal(decider_rules_eval(r, &in, &out), DECIDER_RULES_ROUTE);
    assert_int_equal(calls, 1);
    assert_int_equal(s_eval(r, &in, &out), DECIDER_RULES_ROUTE); // explain asks the callback too
    assert_true(calls > 2);
    rules[0].headers[0] = "x-trusted=no";
    decider_rules_destroy(&r);
    r = s_build(&p);
    s_trace_t t;
    assert_int_equal(s_eval_traced(r, &in, &out, &t), DECIDER_RULES_NONE);
    assert_string_equal(t.why, "header x-trusted=no absent (x-trusted=yes)");
    decider_rules_destroy(&r);
}

static void test_actions(void **state)
{
    (void)state;
    ipl_rule_t rules[] = {
        {.name = "route",
         .tenants = S_LIST("t-route"),
         S_ANY_PROMPT,
         .action = "route",
         .pool = "large",
         .targets = S_LIST("cloud", "big-set")},
        {.name = "route-all",
         .tenants = S_LIST("t-route-all"),
         S_ANY_PROMPT,
         .action = "route",
         .pool = "chat"},
        {.name = "prefer",
         .tenants = S_LIST("t-prefer"),
         S_ANY_PROMPT,
         .action = "prefer",
         .pool = "chat",
         .target = "small",
         .unless_holder = "large"},
        {.name = "prefer-plain",
         .tenants = S_LIST("t-prefer-plain"),
         S_ANY_PROMPT,
         .action = "prefer",
         .pool = "chat",
         .target = "small",
         .unless_holder = ""},
        {.name = "spill",
         .tenants = S_LIST("t-spill"),
         S_ANY_PROMPT,
         .action = "spill",
         .provider = "burst",
         .while_above_slo = true,
         .enter_percent = 120,
         .exit_percent = 80,
         .min_hold_ms = 5000},
        {.name = "keep",
         .tenants = S_LIST("t-keep"),
         S_ANY_PROMPT,
         .action = "keepLocal",
         .reason = "pii stays"},
        {.name = "reject",
         .tenants = S_LIST("t-reject"),
         S_ANY_PROMPT,
         .action = "reject",
         .status = 403,
         .reason = "suspended"},
        {.name = "reject-default",
         .tenants = S_LIST("t-reject-default"),
         S_ANY_PROMPT,
         .action = "reject",
         .reason = "no"},
        {.name = "batch",
         .tenants = S_LIST("t-batch"),
         S_ANY_PROMPT,
         .action = "admitBatch",
         .max_utilization_percent = 60},
    };
    ipl_policy_t p = s_policy(rules, sizeof rules / sizeof *rules);
    decider_rules_t *r = s_build(&p);
    assert_int_equal(decider_rules_count(r), 9);
    decider_rules_result_t out;

    assert_int_equal(s_eval(r, &S_IN(.tenant = "t-route"), &out), DECIDER_RULES_ROUTE);
    assert_int_equal(out.rule, 0);
    assert_string_equal(out.name, "route");
    assert_string_equal(out.policy, "p");
    assert_string_equal(out.pool, "large");
    assert_int_equal(out.ntargets, 2);
    assert_string_equal(out.targets[1], "big-set");
    assert_null(out.reason);

    assert_int_equal(s_eval(r, &S_IN(.tenant = "t-route-all"), &out), DECIDER_RULES_ROUTE);
    assert_int_equal(out.ntargets, 0);

    assert_int_equal(s_eval(r, &S_IN(.tenant = "t-prefer"), &out), DECIDER_RULES_PREFER);
    assert_string_equal(out.pool, "chat");
    assert_string_equal(out.target, "small");
    assert_string_equal(out.unless_holder, "large");
    assert_int_equal(s_eval(r, &S_IN(.tenant = "t-prefer-plain"), &out), DECIDER_RULES_PREFER);
    assert_null(out.unless_holder);

    assert_int_equal(s_eval(r, &S_IN(.tenant = "t-spill"), &out), DECIDER_RULES_SPILL);
    assert_string_equal(out.provider, "burst");
    assert_true(out.spill.while_above_slo);
    assert_int_equal(out.spill.enter_percent, 120);
    assert_int_equal(out.spill.exit_percent, 80);
    assert_int_equal(out.spill.min_hold_ms, 5000);

    assert_int_equal(s_eval(r, &S_IN(.tenant = "t-keep"), &out), DECIDER_RULES_KEEP_LOCAL);
    assert_string_equal(out.reason, "pii stays");
    assert_int_equal(out.status, 0);

    assert_int_equal(s_eval(r, &S_IN(.tenant = "t-reject"), &out), DECIDER_RULES_REJECT);
    assert_int_equal(out.status, 403);
    assert_string_equal(out.reason, "suspended");
    assert_int_equal(s_eval(r, &S_IN(.tenant = "t-reject-default"), &out), DECIDER_RULES_REJECT);
    assert_int_equal(out.status, DECIDER_RULES_REJECT_STATUS);

    assert_int_equal(s_eval(r, &S_IN(.tenant = "t-batch", .kv_utilization_percent = 59), &out),
                     DECIDER_RULES_ADMIT_BATCH);
    assert_int_equal(out.max_utilization_percent, 60);
    assert_true(out.admit);
    assert_int_equal(s_eval(r, &S_IN(.tenant = "t-batch", .kv_utilization_percent = 60), &out),
                     DECIDER_RULES_ADMIT_BATCH);
    assert_false(out.admit);

    assert_int_equal(s_eval(r, &S_IN(.tenant = "nobody"), &out), DECIDER_RULES_NONE);
    assert_int_equal(out.rule, -1);
    assert_null(out.name);
    decider_rules_destroy(&r);

    assert_string_equal(decider_rules_action_name(DECIDER_RULES_KEEP_LOCAL), "keepLocal");
    assert_string_equal(decider_rules_action_name(DECIDER_RULES_NONE), "none");
}

static void test_first_match_wins(void **state)
{
    (void)state;
    /* 130 rules (three bitset words): rule i matches tenant "t<i>"; rule 100 also matches
     * every tenant with label "x"; the last matches everything. */
    static ipl_rule_t rules[130];
    static char names[130][8], *tenants[130];
    memset(rules, 0, sizeof rules);
    for (int i = 0; i < 130; i++) {
        snprintf(names[i], sizeof names[i], "t%d", i);
        tenants[i] = names[i];
        rules[i] =
            (ipl_rule_t){.name = names[i], .tenants = &tenants[i], .tenants_len = 1, S_ANY_PROMPT};
    }
    rules[100] = (ipl_rule_t){.name = "x", .labels = S_LIST("x"), S_ANY_PROMPT};
    rules[129] = (ipl_rule_t){.name = "last", S_ANY_PROMPT};
    ipl_policy_t p = s_policy(rules, 130);
    decider_rules_t *r = s_build(&p);
    decider_rules_result_t out;
    const char *const x[] = {"x"};
    assert_int_equal(s_eval(r, &S_IN(.tenant = "t5"), &out), DECIDER_RULES_ROUTE);
    assert_int_equal(out.rule, 5);
    assert_int_equal(s_eval(r, &S_IN(.tenant = "t5", .labels = x, .nlabels = 1), &out),
                     DECIDER_RULES_ROUTE);
    assert_int_equal(out.rule, 5); // earlier than the label rule
    assert_int_equal(s_eval(r, &S_IN(.tenant = "t120", .labels = x, .nlabels = 1), &out),
                     DECIDER_RULES_ROUTE);
    assert_int_equal(out.rule, 100); // the label rule comes first
    assert_string_equal(out.name, "x");
    assert_int_equal(s_eval(r, &S_IN(.tenant = "t120"), &out), DECIDER_RULES_ROUTE);
    assert_int_equal(out.rule, 120);
    assert_int_equal(s_eval(r, &S_IN(.tenant = "t128"), &out), DECIDER_RULES_ROUTE);
    assert_int_equal(out.rule, 128);
    assert_int_equal(s_eval(r, &S_IN(.tenant = "zz"), &out), DECIDER_RULES_ROUTE);
    assert_string_equal(out.name, "last");
    assert_int_equal(out.rule, 129);
    decider_rules_destroy(&r);
}

static void test_empty_policy_matches_nothing(void **state)
{
    (void)state;
    ipl_policy_t p = s_policy(NULL, 0);
    decider_rules_t *r = s_build(&p);
    decider_rules_result_t out;
    assert_int_equal(s_eval(r, &S_IN(.model = "chat"), &out), DECIDER_RULES_NONE);
    assert_int_equal(out.rule, -1);
    decider_rules_destroy(&r);
    decider_rules_destroy(&r); // NULL: nothing
}

static void test_build_errors(void **state)
{
    (void)state;
    const struct {
        ipl_rule_t rule;
        const char *needle;
    } rows[] = {
        {{.name = "bad", .action = "redirect", S_ANY_PROMPT}, "unknown action \"redirect\""},
        {{.name = "bad", .headers = S_LIST("=x"), S_ANY_PROMPT}, "headers[0] has an empty name"},
        {{.name = "bad", .prompt_min = 5, .prompt_max = 4}, "min 5 > max 4"},
        {{.name = "bad", .has_time = true, .from_minute = 60, .to_minute = 60, S_ANY_PROMPT},
         "time window 60..60"},
        {{.name = "bad", .has_time = true, .from_minute = 0, .to_minute = 1440, S_ANY_PROMPT},
         "time window 0..1440"},
        {{.name = "bad",
          .action = "spill",
          .provider = "x",
          .while_above_slo = true,
          .enter_percent = 80,
          .exit_percent = 80,
          S_ANY_PROMPT},
         "exit percent 80 is not below enter percent 80"},
        {{.name = "bad", .predicted_ttft_above_slo = 3, S_ANY_PROMPT}, "not 0, 1 or 2"},
    };
    for (size_t i = 0; i < sizeof rows / sizeof *rows; i++) {
        ipl_rule_t rules[2] = {{.name = "ok", S_ANY_PROMPT}, rows[i].rule};
        ipl_policy_t p = s_policy(rules, 2);
        decider_rules_t *r = (decider_rules_t *)&p; // must stay untouched on failure
        char err[256];
        assert_int_equal(decider_rules_new(&p, &r, err, sizeof err), IPL_E_INVAL);
        assert_ptr_equal(r, (decider_rules_t *)&p);
        if (!strstr(err, rows[i].needle) || !strstr(err, "rule \"bad\" (rules[1])"))
            fail_msg("row %zu: \"%s\" lacks \"%s\"", i, err, rows[i].needle);
    }
    /* Names that exist nowhere are not errors: they match by name only. */
    ipl_rule_t ghost[] = {{.name = "ghost",
                           .models = S_LIST("ghost-model"),
                           .action = "route",
                           .pool = "no-such-pool",
                           S_ANY_PROMPT}};
    ipl_policy_t p = s_policy(ghost, 1);
    decider_rules_t *r = s_build(&p);
    decider_rules_result_t out;
    assert_int_equal(s_eval(r, &S_IN(), &out), DECIDER_RULES_NONE);
    assert_int_equal(s_eval(r, &S_IN(.model = "ghost-model"), &out), DECIDER_RULES_ROUTE);
    assert_string_equal(out.pool, "no-such-pool");
    decider_rules_destroy(&r);
    /* A spill without whilePredictedTtftAboveSlo needs no thresholds. */
    ipl_rule_t always[] = {{.name = "always", .action = "spill", .provider = "x", S_ANY_PROMPT}};
    p = s_policy(always, 1);
    r = s_build(&p);
    decider_rules_destroy(&r);
}

static void test_spill_hysteresis(void **state)
{
    (void)state;
    const decider_rules_spill_params_t prm = {
        .enter_percent = 100, .exit_percent = 80, .min_hold_ms = 5000, .while_above_slo = true};
    decider_rules_spill_state_t st = {0};
    /* t (ms), percent, spilling after the step */
    static const struct {
        uint64_t t, pct;
        bool spill;
    } steps[] = {
        {1000, 90, false},   {1100, 100, false}, // at enter is not above
        {1200, 101, true},                       // enters at once: no hold before a first switch
        {1300, 50, true},    {6199, 10, true},   // below exit but held < 5000 ms
        {6200, 79, false},                       // held 5000 ms: leaves
        {6300, 200, false},                      // held 100 ms: stays out
        {11199, 150, false}, {11200, 150, true}, // held: enters
        {11300, 80, true},   {20000, 80, true},  // at exit is not below
    };
    for (size_t i = 0; i < sizeof steps / sizeof *steps; i++)
        if (decider_rules_spill_step(&st, steps[i].pct, steps[i].t, &prm) != steps[i].spill)
            fail_msg("step %zu (t %llu, %llu%%): want %d", i, (unsigned long long)steps[i].t,
                     (unsigned long long)steps[i].pct, steps[i].spill);
    /* A signal oscillating between the thresholds (85..95 %) for a minute never flaps,
     * whichever state it starts in. */
    for (int start = 0; start < 2; start++) {
        decider_rules_spill_state_t s = {.spilling = start, .switched = true, .since_ms = 0};
        int flips = 0;
        bool last = s.spilling;
        for (uint64_t t = 100000; t < 160000; t += 100) {
            bool now = decider_rules_spill_step(&s, t % 200 ? 85 : 95, t, &prm);
            flips += now != last;
            last = now;
        }
        assert_int_equal(flips, 0);
        assert_int_equal(last, start);
    }
    /* A signal crossing both thresholds every 100 ms switches at most once per hold. */
    decider_rules_spill_state_t s = {0};
    int flips = 0;
    bool last = false;
    for (uint64_t t = 1; t <= 60000; t += 100) {
        bool now = decider_rules_spill_step(&s, t % 200 == 1 ? 150 : 20, t, &prm);
        flips += now != last;
        last = now;
    }
    assert_true(flips >= 2 && flips <= 60000 / 5000 + 1);
    /* whilePredictedTtftAboveSlo false: always spill. */
    const decider_rules_spill_params_t always = {0};
    assert_true(decider_rules_spill_step(&s, 0, 1, &always));
    /* A clock that goes back does not count as held. */
    decider_rules_spill_state_t b = {.spilling = true, .switched = true, .since_ms = 10000};
    assert_true(decider_rules_spill_step(&b, 0, 9000, &prm));
}

static void test_helpers(void **state)
{
    (void)state;
    assert_int_equal(decider_rules_minute_of_week(1704067200000ull), 0); // Mon 2024-01-01
    assert_int_equal(decider_rules_minute_of_week(1704067200000ull + 90 * 60000ull), 90);
    // Sun 2024-01-07 23:59:59
    assert_int_equal(decider_rules_minute_of_week(1704671999000ull),
                     DECIDER_RULES_MINUTES_WEEK - 1);
    assert_int_equal(decider_rules_minute_of_week(0), 3 * 1440); // Thu 1970-01-01
    assert_int_equal(decider_rules_slo_percent(600, 500), 120);
    assert_int_equal(decider_rules_slo_percent(600, 0), 0);
    assert_int_equal(decider_rules_slo_percent(-1, 500), 0);
}

/* ---- the words of explain ---------------------------------------------------------------- */

static const decider_rules_header_t s_interactive[] = {{"X-Class", "interactive"}};

typedef struct {
    ipl_rule_t rule;
    decider_rules_input_t in;
    const char *why;
} s_why_row_t;

/* One row per condition kind (each way it can fail), the YAML order when several fail, and
 * the action texts. */
static const s_why_row_t s_why_rows[] = {
    {{.tenants = S_LIST("team-a"), S_ANY_PROMPT},
     S_IN(.tenant = "team-b"),
     "tenant \"team-b\" is not one of [team-a]"},
    {{.tenants = S_LIST("team-a", "team-c"), S_ANY_PROMPT},
     S_IN(.tenant = NULL),
     "anonymous request (no tenant) is not one of [team-a, team-c]"},
    {{.models = S_LIST("large-model"), S_ANY_PROMPT},
     S_IN(),
     "model \"small-model\" is not one of [large-model]"},
    {{.models = S_LIST("large-model"), S_ANY_PROMPT},
     S_IN(.model = "chat"),
     "model \"chat\" is not one of [large-model], nor is any name the alias resolves to"},
    {{.labels = S_LIST("eu", "pii"), S_ANY_PROMPT},
     S_IN(.labels = (const char *const[]){"eu"}, .nlabels = 1),
     "label \"pii\" missing"},
    {{.headers = S_LIST("x-other"), S_ANY_PROMPT},
     S_IN(.headers = s_hdrs, .nheaders = 2),
     "header x-other absent"},
    {{.headers = S_LIST("x-class=batch"), S_ANY_PROMPT},
     S_IN(.headers = s_interactive, .nheaders = 1),
     "header x-class=batch absent (x-class=interactive)"},
    {{.headers = S_LIST("x-class=batch"), S_ANY_PROMPT},
     S_IN(),
     "header x-class=batch absent (no x-class header)"},
    {{.prompt_max = 4000}, S_IN(.prompt_tokens = 5000), "prompt 5000 tokens above max 4000"},
    {{.prompt_min = 100, S_ANY_PROMPT},
     S_IN(.prompt_tokens = 10),
     "prompt 10 tokens below min 100"},
    {{.has_queue_depth = true, .queue_depth_above = 32, S_ANY_PROMPT},
     S_IN(.queue_depth = 3),
     "pool queue depth 3 not above 32"},
    {{.has_kv_utilization = true, .kv_utilization_above_percent = 90, S_ANY_PROMPT},
     S_IN(.kv_utilization_percent = 40),
     "pool KV utilization 40% not above 90%"},
    {{.predicted_ttft_above_slo = 2, S_ANY_PROMPT},
     S_IN(.predicted_ttft_ms = 120, .ttft_slo_ms = 800),
     "pool predicted TTFT 120.0 ms within the SLO 800 ms"},
    {{.predicted_ttft_above_slo = 1, S_ANY_PROMPT},
     S_IN(.predicted_ttft_ms = 900, .ttft_slo_ms = 800),
     "pool predicted TTFT 900.0 ms above the SLO 800 ms"},
    {{.predicted_ttft_above_slo = 2, S_ANY_PROMPT},
     S_IN(.predicted_ttft_ms = 900),
     "the pool has no TTFT SLO (predictedTtftAboveSlo: true needs one)"},
    {{.has_time = true, .days = 0x1f, .from_minute = 1320, .to_minute = 360, S_ANY_PROMPT},
     S_IN(.minute_of_week = S_MIN(0, 14, 5)),
     "time Mon 14:05 UTC outside Mon-Fri 22:00-06:00"},
    {{.has_time = true, .days = 0, .from_minute = 540, .to_minute = 1020, S_ANY_PROMPT},
     S_IN(.minute_of_week = S_MIN(6, 8, 0)),
     "time Sun 08:00 UTC outside every day 09:00-17:00"},
    {{.has_time = true, .days = 0x60, .from_minute = 540, .to_minute = 1020, S_ANY_PROMPT},
     S_IN(.minute_of_week = S_MIN(1, 10, 0)),
     "time Tue 10:00 UTC outside Sat,Sun 09:00-17:00"},
    {{.has_time = true, .days = 0x4f, .from_minute = 540, .to_minute = 1020, S_ANY_PROMPT},
     S_IN(.minute_of_week = S_MIN(4, 10, 0)),
     "time Fri 10:00 UTC outside Mon-Thu,Sun 09:00-17:00"},
    {{.has_time = true, .days = 0x15, .from_minute = 540, .to_minute = 1020, S_ANY_PROMPT},
     S_IN(.minute_of_week = S_MIN(1, 10, 0)),
     "time Tue 10:00 UTC outside Mon,Wed,Fri 09:00-17:00"},
    /* several fail: the first in the YAML's order, whatever order eval checks them in */
    {{.tenants = S_LIST("x"), .models = S_LIST("large-model"), .prompt_max = 1},
     S_IN(.prompt_tokens = 2),
     "tenant \"team-a\" is not one of [x]"},
    {{.labels = S_LIST("pii"), .prompt_max = 1, .has_time = true, .from_minute = 1, .to_minute = 2},
     S_IN(.prompt_tokens = 2),
     "label \"pii\" missing"},
    {{.headers = S_LIST("x-a"), .prompt_max = 1}, S_IN(.prompt_tokens = 2), "header x-a absent"},
    /* the match: the action */
    {{.action = "keepLocal", .reason = "personal data stays local", S_ANY_PROMPT},
     S_IN(),
     "keepLocal: personal data stays local"},
    {{.action = "keepLocal", .reason = "", S_ANY_PROMPT}, S_IN(), "keepLocal: never to a provider"},
    {{.action = "route", .pool = "chat", .targets = S_LIST("small", "burst"), S_ANY_PROMPT},
     S_IN(),
     "route: pool chat, targets [small, burst]"},
    {{.action = "route", .pool = "chat", S_ANY_PROMPT}, S_IN(), "route: pool chat, every target"},
    {{.action = "prefer",
      .pool = "chat",
      .target = "small",
      .unless_holder = "large",
      S_ANY_PROMPT},
     S_IN(),
     "prefer: target small of pool chat, unless large holds the prefix and predicts a lower TTFT"},
    {{.action = "prefer", .pool = "chat", .target = "small", .unless_holder = "", S_ANY_PROMPT},
     S_IN(),
     "prefer: target small of pool chat"},
    {{.action = "spill",
      .provider = "burst",
      .while_above_slo = true,
      .enter_percent = 100,
      .exit_percent = 80,
      .min_hold_ms = 5000,
      S_ANY_PROMPT},
     S_IN(),
     "spill: to provider burst while the predicted TTFT is above the SLO (enter above 100%, exit "
     "below 80%, hold 5000 ms)"},
    {{.action = "spill", .provider = "burst", S_ANY_PROMPT},
     S_IN(),
     "spill: to provider burst while this rule matches"},
    {{.action = "reject", .status = 403, .reason = "tenant suspended", S_ANY_PROMPT},
     S_IN(),
     "reject: 403, tenant suspended"},
    {{.action = "reject", .reason = "no", S_ANY_PROMPT}, S_IN(), "reject: 503, no"},
    {{.action = "admitBatch", .max_utilization_percent = 60, S_ANY_PROMPT},
     S_IN(.kv_utilization_percent = 59),
     "admitBatch: admit (KV utilization under 60%)"},
    {{.action = "admitBatch", .max_utilization_percent = 60, S_ANY_PROMPT},
     S_IN(.kv_utilization_percent = 60),
     "admitBatch: hold (KV utilization not under 60%)"},
};

static void test_explain_words(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof s_why_rows / sizeof *s_why_rows; i++) {
        ipl_rule_t rule = s_why_rows[i].rule;
        ipl_policy_t p = s_policy(&rule, 1);
        decider_rules_t *r = s_build(&p);
        decider_rules_result_t out;
        s_trace_t t;
        s_eval_traced(r, &s_why_rows[i].in, &out, &t);
        assert_int_equal(t.calls, 1);
        if (strcmp(t.why, s_why_rows[i].why) != 0)
            fail_msg("row %zu: why \"%s\", want \"%s\"", i, t.why, s_why_rows[i].why);
        decider_rules_destroy(&r);
    }
    char buf[DECIDER_RULES_WHY_MAX];
    decider_rules_result_t none = {.rule = -1};
    assert_string_equal(decider_rules_describe(&none, buf, sizeof buf),
                        "none: no rule matched (the pool's strategy routes)");
    assert_string_equal(decider_rules_describe(&none, buf, 9), "none:...");
}

/* Every row of the condition table, in one policy: explain walks the rules eval skips through
 * its bitsets, and still agrees; each rule before the match is reported as not matching. */
static void test_explain_agrees_across_rules(void **state)
{
    (void)state;
    enum { N = sizeof s_match_rows / sizeof *s_match_rows };
    static ipl_rule_t rules[N];
    for (size_t i = 0; i < N; i++)
        rules[i] = s_match_rows[i].rule;
    ipl_policy_t p = s_policy(rules, N);
    decider_rules_t *r = s_build(&p);
    size_t matched = 0;
    for (size_t i = 0; i < N; i++) {
        decider_rules_result_t out;
        s_trace_t t;
        s_eval_traced(r, &s_match_rows[i].in, &out, &t);
        matched += out.rule >= 0;
    }
    assert_int_equal(matched, N); // rule 0 matches everything
    /* Without the catch-all first, each request reaches its own rows. */
    decider_rules_destroy(&r);
    p = s_policy(rules + 1, N - 1);
    r = s_build(&p);
    for (size_t i = 1; i < N; i++) {
        decider_rules_result_t out;
        s_eval(r, &s_match_rows[i].in, &out);
    }
    decider_rules_destroy(&r);
}

static void test_explain_bounded(void **state)
{
    (void)state;
    static char names[100][40], *tenants[100];
    for (int i = 0; i < 100; i++) {
        snprintf(names[i], sizeof names[i], "a-rather-long-tenant-name-number-%03d", i);
        tenants[i] = names[i];
    }
    ipl_rule_t rules[] = {{.name = "many", .tenants = tenants, .tenants_len = 100, S_ANY_PROMPT}};
    ipl_policy_t p = s_policy(rules, 1);
    decider_rules_t *r = s_build(&p);
    decider_rules_result_t out;
    s_trace_t t;
    s_eval_traced(r, &S_IN(), &out, &t);
    assert_int_equal(strlen(t.why), DECIDER_RULES_WHY_MAX - 1);
    assert_string_equal(t.why + DECIDER_RULES_WHY_MAX - 4, "...");
    assert_memory_equal(t.why, "tenant \"team-a\" is not one of [a-rather-long", 44);
    decider_rules_destroy(&r);
}

static void test_minutes(void **state)
{
    (void)state;
    uint32_t m = 1;
    assert_int_equal(decider_rules_parse_minute("Mon 14:05", &m), 0);
    assert_int_equal(m, S_MIN(0, 14, 5));
    assert_int_equal(decider_rules_parse_minute("  sun  9:30 ", &m), 0);
    assert_int_equal(m, S_MIN(6, 9, 30));
    assert_int_equal(decider_rules_parse_minute("SAT 00:00", &m), 0);
    assert_int_equal(m, S_MIN(5, 0, 0));
    const char *bad[] = {"",         "Mon",        "Mon 24:00",  "Mon 10:60",
                         "Mon 14:5", "Xyz 10:00",  "Mon 10:00x", "Monday 10:00",
                         "Mon10:00", "Mon 123:00", "Mon :00"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        m = 7;
        if (decider_rules_parse_minute(bad[i], &m) != IPL_E_INVAL || m != 7)
            fail_msg("\"%s\" parsed", bad[i]);
    }
    assert_int_equal(decider_rules_parse_minute(NULL, &m), IPL_E_INVAL);
    char buf[16];
    for (uint32_t w = 0; w < DECIDER_RULES_MINUTES_WEEK; w += 7) {
        uint32_t back = 0;
        assert_int_equal(
            decider_rules_parse_minute(decider_rules_format_minute(w, buf, sizeof buf), &back), 0);
        assert_int_equal(back, w);
    }
    assert_string_equal(decider_rules_format_minute(S_MIN(4, 22, 0), buf, sizeof buf), "Fri 22:00");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_match_conditions),
        cmocka_unit_test(test_header_callback),
        cmocka_unit_test(test_actions),
        cmocka_unit_test(test_first_match_wins),
        cmocka_unit_test(test_empty_policy_matches_nothing),
        cmocka_unit_test(test_build_errors),
        cmocka_unit_test(test_spill_hysteresis),
        cmocka_unit_test(test_helpers),
        cmocka_unit_test(test_explain_words),
        cmocka_unit_test(test_explain_agrees_across_rules),
        cmocka_unit_test(test_explain_bounded),
        cmocka_unit_test(test_minutes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

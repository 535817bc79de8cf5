/*
 * Unit tests of policy_rules (InferencePolicy): every rule kind and action compiles to what
 * it says, rules are ordered by priority and name, and every validation error — one table
 * row each — has its exact message.
 */
#include "policy_cases.h"

#include "policy_rules.h"

#define P(body)  PT_HEAD("InferencePolicy", "p") "spec:\n" body
#define R(rules) P("  rules:\n" rules)

// Every rule kind and action, aliases and limits.
static const char *s_full =
    R("    - name: pii\n"
      "      match: {labels: [pii]}\n"
      "      keepLocal: {reason: personal data stays here}\n"
      "    - name: blocked\n"
      "      match: {tenants: [bad, worse]}\n"
      "      reject: {status: 403, reason: suspended}\n"
      "    - name: batch\n"
      "      match:\n"
      "        headers: [{name: x-class, value: batch}, {name: x-batch-id}]\n"
      "        time: {days: [Mon, Sun], from: '22:00', to: '06:30'}\n"
      "      admitBatch: {maxUtilizationPercent: 60}\n"
      "    - name: burst\n"
      "      match: {models: [chat-alias], pool: {predictedTtftAboveSlo: true}}\n"
      "      spill: {provider: cloud, hysteresis: {enterAbovePercent: 120, exitBelowPercent: 90, "
      "minHoldMs: 2500}}\n"
      "    - name: busy\n"
      "      match: {models: [large-model], pool: {queueDepthAbove: 8, "
      "kvUtilizationAbovePercent: 90}}\n"
      "      route: {pool: big, targets: [cloud]}\n"
      "    - name: small-first\n"
      "      match: {models: [small-model], promptTokens: {min: 1, max: 4000}}\n"
      "      prefer: {pool: chat, target: small, unlessHolderPredictsLowerTtft: large}\n"
      "  aliases:\n"
      "    - name: chat-alias\n"
      "      targets: [{model: small-model, weight: 9}, {pool: big}]\n"
      "      failover: [large-model, big]\n"
      "    - name: assistant\n"
      "      targets: [{model: chat-alias}]\n"
      "  limits:\n"
      "    - {tenant: team-a, requestsPerMinute: 600, inputTokensPerMinute: 2000000, "
      "outputTokensPerMinute: 20000, concurrentRequests: 8, weight: 3, priority: interactive, "
      "costPerDayUsd: 12.5}\n"
      "    - {tenant: '*', concurrentRequests: 2}\n"
      "    - {tenant: batchy, priority: batch}\n");

static void test_every_rule_kind_and_action_compiles(void **state)
{
    (void)state;
    policy_compiler_t *c = pt_ok(PT_BASE, s_full);
    assert_int_equal(policy_compiler_nrules(c), 6);
    const policy_rule_t *r = policy_compiler_rules_at(c, 0);
    assert_string_equal(r->name, "pii");
    assert_string_equal(r->policy, "p");
    assert_int_equal(r->action, POLICY_ACTION_KEEP_LOCAL);
    assert_int_equal(r->match.nlabels, 1);
    assert_string_equal(r->match.labels[0], "pii");
    assert_string_equal(r->reason, "personal data stays here");
    assert_int_equal(r->loc.line, 6);

    r = policy_compiler_rules_at(c, 1);
    assert_int_equal(r->action, POLICY_ACTION_REJECT);
    assert_int_equal(r->status, 403);
    assert_int_equal(r->match.ntenants, 2);
    assert_string_equal(r->match.tenants[1], "worse");

    r = policy_compiler_rules_at(c, 2);
    assert_int_equal(r->action, POLICY_ACTION_ADMIT_BATCH);
    assert_int_equal(r->max_utilization_percent, 60);
    assert_int_equal(r->match.nheaders, 2);
    assert_string_equal(r->match.headers[0].value, "batch");
    assert_null(r->match.headers[1].value);
    assert_true(r->match.has_time);
    assert_int_equal(r->match.days, 0x41); // Monday and Sunday
    assert_int_equal(r->match.from_minute, 22 * 60);
    assert_int_equal(r->match.to_minute, 6 * 60 + 30);

    r = policy_compiler_rules_at(c, 3);
    assert_int_equal(r->action, POLICY_ACTION_SPILL);
    assert_string_equal(r->provider, "cloud");
    assert_true(r->while_above_slo); // the default
    assert_int_equal(r->enter_percent, 120);
    assert_int_equal(r->exit_percent, 90);
    assert_int_equal(r->min_hold_ms, 2500);
    assert_int_equal(r->match.predicted_ttft_above_slo, POLICY_TRI_TRUE);
    assert_string_equal(r->match.models[0], "chat-alias");

    r = policy_compiler_rules_at(c, 4);
    assert_int_equal(r->action, POLICY_ACTION_ROUTE);
    assert_string_equal(r->pool, "big");
    assert_int_equal(r->ntargets, 1);
    assert_string_equal(r->targets[0], "cloud");
    assert_true(r->match.has_queue_depth);
    assert_int_equal(r->match.queue_depth_above, 8);
    assert_int_equal(r->match.kv_utilization_above_percent, 90);
    assert_int_equal(r->match.prompt_max, UINT64_MAX); // unset

    r = policy_compiler_rules_at(c, 5);
    assert_int_equal(r->action, POLICY_ACTION_PREFER);
    assert_string_equal(r->pool, "chat");
    assert_string_equal(r->target, "small");
    assert_string_equal(r->unless_holder, "large");
    assert_int_equal(r->match.prompt_min, 1);
    assert_int_equal(r->match.prompt_max, 4000);

    assert_int_equal(policy_compiler_naliases(c), 2); // sorted by name
    const policy_alias_t *a = policy_compiler_aliases_at(c, 0);
    assert_string_equal(a->name, "assistant");
    a = policy_compiler_aliases_at(c, 1);
    assert_string_equal(a->name, "chat-alias");
    assert_int_equal(a->ntargets, 2);
    assert_int_equal(a->targets[0].kind, POLICY_ALIAS_MODEL);
    assert_int_equal(a->targets[0].weight, 9);
    assert_int_equal(a->targets[1].kind, POLICY_ALIAS_POOL);
    assert_int_equal(a->targets[1].weight, 1);
    assert_int_equal(a->nfailover, 2);
    assert_string_equal(a->failover[1], "big");

    assert_int_equal(policy_compiler_nlimits(c), 3); // sorted by tenant: "*" first
    const policy_limit_t *l = policy_compiler_limits_at(c, 0);
    assert_string_equal(l->tenant, "*");
    assert_int_equal(l->concurrent_requests, 2);
    assert_int_equal(l->requests_per_minute, 0);
    assert_int_equal(l->weight, 1); // the defaults
    assert_string_equal(l->priority, "standard");
    assert_int_equal(l->cost_per_day_micros, 0);
    l = policy_compiler_limits_at(c, 1);
    assert_string_equal(l->tenant, "batchy"); // only a queuing setting: no rate limit
    assert_string_equal(l->priority, "batch");
    assert_int_equal(l->requests_per_minute + l->concurrent_requests, 0);
    l = policy_compiler_limits_at(c, 2);
    assert_int_equal(l->input_tokens_per_minute, 2000000);
    assert_int_equal(l->output_tokens_per_minute, 20000);
    assert_int_equal(l->weight, 3);
    assert_string_equal(l->priority, "interactive");
    assert_int_equal(l->cost_per_day_micros, 12500000);
    policy_compiler_destroy(&c);
}

static void test_rules_are_ordered_by_priority_then_name(void **state)
{
    (void)state;
    const char *doc = PT_HEAD(
        "InferencePolicy",
        "b") "spec: {rules: [{name: b1, match: {tenants: [x]}, "
             "reject: {reason: r}}]}\n"
             "---\n" PT_HEAD("InferencePolicy",
                             "a") "spec: {rules: [{name: a1, match: {tenants: "
                                  "[y]}, reject: {reason: r}}, {name: a2, match: "
                                  "{tenants: [z]}, reject: {reason: r}}]}\n"
                                  "---\n" PT_HEAD(
                                      "InferencePolicy",
                                      "c") "spec: {priority: 5, rules: [{name: c1, match: "
                                           "{tenants: [w]}, reject: {reason: r}}]}\n"
                                           "---\n" PT_HEAD(
                                               "InferencePolicy",
                                               "d") "spec: {priority: -1, rules: [{name: d1, "
                                                    "reject: {reason: r}}]}\n";
    policy_compiler_t *c = pt_ok(PT_BASE, doc);
    const char *order[] = {"c1", "a1", "a2", "b1", "d1"};
    assert_int_equal(policy_compiler_nrules(c), 5);
    for (size_t i = 0; i < 5; i++)
        assert_string_equal(policy_compiler_rules_at(c, i)->name, order[i]);
    assert_int_equal(policy_compiler_rules_at(c, 0)->priority, 5);
    assert_int_equal(policy_compiler_rules_at(c, 4)->priority, -1);
    assert_int_equal(policy_compiler_rules_at(c, 0)->match.days, 0x7f); // every day
    policy_compiler_destroy(&c);
}

static void test_defaults(void **state)
{
    (void)state;
    policy_compiler_t *c =
        pt_ok(PT_BASE, R("    - {name: r, match: {tenants: [t]}, reject: {reason: no}}\n"
                         "    - {name: s, spill: {provider: cloud}}\n"));
    const policy_rule_t *r = policy_compiler_rules_at(c, 0), *s = policy_compiler_rules_at(c, 1);
    assert_int_equal(s->enter_percent, 100);
    assert_int_equal(s->exit_percent, 80);
    assert_int_equal(s->min_hold_ms, 5000);
    assert_true(s->while_above_slo);
    assert_int_equal(r->status, 503);
    policy_compiler_destroy(&c);
}

// "Broader" (docs/crds.md): each row is (earlier, later, earlier covers later).
static void test_covers(void **state)
{
    (void)state;
    const char *t_ab[] = {"a", "b"}, *t_a[] = {"a"}, *l_pii[] = {"pii"},
               *l_pii_eu[] = {"pii", "eu"};
    const policy_header_match_t h_any[] = {{"X-Class", NULL}}, h_batch[] = {{"x-class", "batch"}};
    policy_match_t any = {.prompt_max = UINT64_MAX, .days = 0x7f};
    struct {
        const char *what;
        policy_match_t a, b;
        bool covers;
    } rows[] = {
        {"empty covers all", any, any, true},
        {"tenants superset",
         {.tenants = t_ab, .ntenants = 2, .prompt_max = UINT64_MAX},
         {.tenants = t_a, .ntenants = 1, .prompt_max = UINT64_MAX},
         true},
        {"tenants subset",
         {.tenants = t_a, .ntenants = 1, .prompt_max = UINT64_MAX},
         {.tenants = t_ab, .ntenants = 2, .prompt_max = UINT64_MAX},
         false},
        {"tenants vs any", {.tenants = t_a, .ntenants = 1, .prompt_max = UINT64_MAX}, any, false},
        {"models superset",
         {.models = t_ab, .nmodels = 2, .prompt_max = UINT64_MAX},
         {.models = t_a, .nmodels = 1, .prompt_max = UINT64_MAX},
         true},
        {"fewer labels",
         {.labels = l_pii, .nlabels = 1, .prompt_max = UINT64_MAX},
         {.labels = l_pii_eu, .nlabels = 2, .prompt_max = UINT64_MAX},
         true},
        {"more labels",
         {.labels = l_pii_eu, .nlabels = 2, .prompt_max = UINT64_MAX},
         {.labels = l_pii, .nlabels = 1, .prompt_max = UINT64_MAX},
         false},
        {"header present covers value",
         {.headers = h_any, .nheaders = 1, .prompt_max = UINT64_MAX},
         {.headers = h_batch, .nheaders = 1, .prompt_max = UINT64_MAX},
         true},
        {"header value vs present",
         {.headers = h_batch, .nheaders = 1, .prompt_max = UINT64_MAX},
         {.headers = h_any, .nheaders = 1, .prompt_max = UINT64_MAX},
         false},
        {"wider prompt range",
         {.prompt_min = 0, .prompt_max = 100},
         {.prompt_min = 10, .prompt_max = 50},
         true},
        {"narrower prompt range",
         {.prompt_min = 10, .prompt_max = 50},
         {.prompt_min = 0, .prompt_max = 100},
         false},
        {"lower queue threshold",
         {.has_queue_depth = true, .queue_depth_above = 4, .prompt_max = UINT64_MAX},
         {.has_queue_depth = true, .queue_depth_above = 8, .prompt_max = UINT64_MAX},
         true},
        {"higher queue threshold",
         {.has_queue_depth = true, .queue_depth_above = 8, .prompt_max = UINT64_MAX},
         {.has_queue_depth = true, .queue_depth_above = 4, .prompt_max = UINT64_MAX},
         false},
        {"kv threshold vs none",
         {.has_kv_utilization = true, .kv_utilization_above_percent = 1, .prompt_max = UINT64_MAX},
         any,
         false},
        {"ttft condition differs",
         {.predicted_ttft_above_slo = POLICY_TRI_TRUE, .prompt_max = UINT64_MAX},
         {.predicted_ttft_above_slo = POLICY_TRI_FALSE, .prompt_max = UINT64_MAX},
         false},
        {"same time window",
         {.has_time = true, .days = 1, .from_minute = 1, .to_minute = 2, .prompt_max = UINT64_MAX},
         {.has_time = true, .days = 1, .from_minute = 1, .to_minute = 2, .prompt_max = UINT64_MAX},
         true},
        {"other time window",
         {.has_time = true, .days = 1, .from_minute = 1, .to_minute = 2, .prompt_max = UINT64_MAX},
         {.has_time = true, .days = 1, .from_minute = 1, .to_minute = 3, .prompt_max = UINT64_MAX},
         false},
    };
    for (size_t i = 0; i < sizeof rows / sizeof *rows; i++) {
        if (policy_rules_covers(&rows[i].a, &rows[i].b) != rows[i].covers)
            fail_msg("row \"%s\": expected covers = %d", rows[i].what, rows[i].covers);
    }
}

static const pt_case_t s_errors[] = {
    // the rule's shape
    {"unknown rule field", R("    - {name: r, mtch: {}, reject: {reason: x}}\n"),
     "p.yaml:6:17: InferencePolicy \"p\": spec.rules[0].mtch is not a known field; did you mean "
     "\"match\"? (known: name, match, route, prefer, spill, keepLocal, reject, admitBatch)"},
    {"no action", R("    - {name: r, match: {tenants: [a]}}\n"),
     "p.yaml:6:7: InferencePolicy \"p\": spec.rules[0] has no action; give exactly one of route, "
     "prefer, spill, keepLocal, reject, admitBatch"},
    {"two actions", R("    - {name: r, reject: {reason: x}, keepLocal: {reason: y}}\n"),
     "p.yaml:6:49: InferencePolicy \"p\": spec.rules[0] has 2 actions (keepLocal, reject); a rule "
     "has exactly one: split it into several rules"},
    {"invalid rule name", R("    - {name: R_1, reject: {reason: x}}\n"),
     "p.yaml:6:14: InferencePolicy \"p\": spec.rules[0].name \"R_1\" is not a valid name: use "
     "lower-case letters, digits, '-' and '.', starting and ending with a letter or digit, at most "
     "63 characters"},
    {"duplicate rule name",
     R("    - {name: r, match: {tenants: [a]}, reject: {reason: x}}\n"
       "    - {name: r, match: {tenants: [b]}, reject: {reason: x}}\n"),

     "p.yaml:7:14: InferencePolicy \"p\": spec.rules[1].name \"r\" is already used by "
     "spec.rules[0] (line 6); rule names are unique in a policy"},
    // match
    {"unknown match field", R("    - {name: r, match: {tenant: [a]}, reject: {reason: x}}\n"),
     "p.yaml:6:25: InferencePolicy \"p\": spec.rules[0].match.tenant is not a known field; did you "
     "mean \"tenants\"? (known: tenants, models, labels, headers, promptTokens, pool, time)"},
    {"tenant listed twice", R("    - {name: r, match: {tenants: [a, a]}, reject: {reason: x}}\n"),
     "p.yaml:6:38: InferencePolicy \"p\": spec.rules[0].match.tenants[1] \"a\" is listed twice; "
     "remove one"},
    {"tenant with a space", R("    - {name: r, match: {tenants: ['a b']}, reject: {reason: x}}\n"),
     "p.yaml:6:35: InferencePolicy \"p\": spec.rules[0].match.tenants[0] \"a b\" is not a name (no "
     "spaces, at most 128 characters)"},
    {"label not a name", R("    - {name: r, match: {labels: [PII]}, reject: {reason: x}}\n"),
     "p.yaml:6:34: InferencePolicy \"p\": spec.rules[0].match.labels[0] \"PII\" is not a valid "
     "name: use lower-case letters, digits, '-' and '.', starting and ending with a letter or "
     "digit, at most 63 characters"},
    {"header name", R("    - {name: r, match: {headers: [{name: 'x y'}]}, reject: {reason: x}}\n"),
     "p.yaml:6:42: InferencePolicy \"p\": spec.rules[0].match.headers[0].name \"x y\" is not an "
     "HTTP header name"},
    {"header without name",
     R("    - {name: r, match: {headers: [{value: v}]}, reject: {reason: x}}\n"),
     "p.yaml:6:35: InferencePolicy \"p\": spec.rules[0].match.headers[0].name is required"},
    {"prompt min above max",
     R("    - {name: r, match: {promptTokens: {min: 10, max: 5}}, reject: {reason: x}}\n"),
     "p.yaml:6:54: InferencePolicy \"p\": spec.rules[0].match.promptTokens.min (10) is above .max "
     "(5); no prompt matches"},
    {"kv percent range",
     R("    - {name: r, match: {pool: {kvUtilizationAbovePercent: 101}}, reject: {reason: x}}\n"),
     "p.yaml:6:59: InferencePolicy \"p\": spec.rules[0].match.pool.kvUtilizationAbovePercent must "
     "be a whole number from 0 to 100, got \"101\""},
    {"ttft not a bool",
     R("    - {name: r, match: {pool: {predictedTtftAboveSlo: yes please}}, reject: {reason: "
       "x}}\n"),
     "p.yaml:6:55: InferencePolicy \"p\": spec.rules[0].match.pool.predictedTtftAboveSlo must be "
     "true or false, got \"yes please\""},
    {"time not HH:MM",
     R("    - {name: r, match: {time: {from: '25:00', to: '06:00'}}, reject: {reason: x}}\n"),
     "p.yaml:6:38: InferencePolicy \"p\": spec.rules[0].match.time.from \"25:00\" is not a time of "
     "day; write HH:MM (UTC), e.g. 22:00"},
    {"time without to", R("    - {name: r, match: {time: {from: '01:00'}}, reject: {reason: x}}\n"),
     "p.yaml:6:31: InferencePolicy \"p\": spec.rules[0].match.time.to is required"},
    {"empty time window",
     R("    - {name: r, match: {time: {from: '01:00', to: '01:00'}}, reject: {reason: x}}\n"),
     "p.yaml:6:51: InferencePolicy \"p\": spec.rules[0].match.time.from and .to are both 01:00: "
     "the window is empty; widen it (from > to wraps past midnight)"},
    {"unknown day",
     R("    - {name: r, match: {time: {days: [Monday], from: '01:00', to: '02:00'}}, reject: "
       "{reason: x}}\n"),
     "p.yaml:6:39: InferencePolicy \"p\": spec.rules[0].match.time.days[0] \"Monday\" is not one "
     "of the allowed values (known: Mon, Tue, Wed, Thu, Fri, Sat, Sun)"},
    {"day twice",
     R("    - {name: r, match: {time: {days: [Mon, Mon], from: '01:00', to: '02:00'}}, reject: "
       "{reason: x}}\n"),
     "p.yaml:6:44: InferencePolicy \"p\": spec.rules[0].match.time.days[1] \"Mon\" is listed "
     "twice"},
    {"unknown model", R("    - {name: r, match: {models: [smal-model]}, reject: {reason: x}}\n"),
     "p.yaml:6:34: InferencePolicy \"p\": spec.rules[0].match.models[0] \"smal-model\" is neither "
     "a pool's model nor an alias; did you mean \"small-model\"? (known: large-model, "
     "small-model)"},
    // actions
    {"route to a missing pool", R("    - {name: r, route: {pool: chta}}\n"),
     "p.yaml:6:31: InferencePolicy \"p\": spec.rules[0].route.pool \"chta\" does not exist; did "
     "you mean \"chat\"? (known: big, chat)"},
    {"route to a target outside the pool",
     R("    - {name: r, route: {pool: big, targets: [small]}}\n"),
     "p.yaml:6:46: InferencePolicy \"p\": spec.rules[0].route.targets[0] \"small\" is not a target "
     "of InferencePool \"big\" (known: cloud)"},
    {"route without pool", R("    - {name: r, route: {targets: [small]}}\n"),
     "p.yaml:6:24: InferencePolicy \"p\": spec.rules[0].route.pool is required"},
    {"prefer a target outside the pool", R("    - {name: r, prefer: {pool: big, target: small}}\n"),
     "p.yaml:6:45: InferencePolicy \"p\": spec.rules[0].prefer.target \"small\" is not a target of "
     "InferencePool \"big\" (known: cloud)"},
    {"prefer a missing holder",
     R("    - {name: r, prefer: {pool: chat, target: small, unlessHolderPredictsLowerTtft: "
       "huge}}\n"),
     "p.yaml:6:84: InferencePolicy \"p\": spec.rules[0].prefer.unlessHolderPredictsLowerTtft "
     "\"huge\" is not a target of InferencePool \"chat\" (known: small, large, cloud)"},
    {"prefer itself",
     R("    - {name: r, prefer: {pool: chat, target: small, unlessHolderPredictsLowerTtft: "
       "small}}\n"),
     "p.yaml:6:84: InferencePolicy \"p\": spec.rules[0].prefer.unlessHolderPredictsLowerTtft names "
     "the preferred target \"small\" itself; name another target of the pool"},
    {"spill to a missing provider", R("    - {name: r, spill: {provider: clodu}}\n"),
     "p.yaml:6:35: InferencePolicy \"p\": spec.rules[0].spill.provider \"clodu\" does not exist; "
     "did you mean \"cloud\"? (known: cloud)"},
    {"spill hysteresis inverted",
     R("    - {name: r, spill: {provider: cloud, hysteresis: {enterAbovePercent: 90, "
       "exitBelowPercent: 90}}}\n"),
     "p.yaml:6:96: InferencePolicy \"p\": spec.rules[0].spill.hysteresis.exitBelowPercent (90) "
     "must be below enterAbovePercent (90), or spilling flaps"},
    {"spill flag not a bool",
     R("    - {name: r, spill: {provider: cloud, whilePredictedTtftAboveSlo: 1}}\n"),
     "p.yaml:6:70: InferencePolicy \"p\": spec.rules[0].spill.whilePredictedTtftAboveSlo must be "
     "true or false, got \"1\""},
    {"keepLocal without reason", R("    - {name: r, keepLocal: {}}\n"),
     "p.yaml:6:28: InferencePolicy \"p\": spec.rules[0].keepLocal.reason is required"},
    {"reject status", R("    - {name: r, reject: {status: 200, reason: x}}\n"),
     "p.yaml:6:34: InferencePolicy \"p\": spec.rules[0].reject.status must be a whole number from "
     "400 to 599, got \"200\""},
    {"admitBatch without threshold", R("    - {name: r, admitBatch: {}}\n"),
     "p.yaml:6:29: InferencePolicy \"p\": spec.rules[0].admitBatch.maxUtilizationPercent is "
     "required (1..100)"},
    {"admitBatch threshold range", R("    - {name: r, admitBatch: {maxUtilizationPercent: 0}}\n"),
     "p.yaml:6:53: InferencePolicy \"p\": spec.rules[0].admitBatch.maxUtilizationPercent must be a "
     "whole number from 1 to 100, got \"0\""},
    // order
    {"shadowed in one policy",
     R("    - {name: wide, match: {tenants: [a, b]}, reject: {reason: x}}\n"
       "    - {name: narrow, match: {tenants: [a], labels: [pii]}, keepLocal: {reason: y}}\n"),

     "p.yaml:7:14: InferencePolicy \"p\": spec.rules[1]: rule \"narrow\" can never match: rule "
     "\"wide\" (p.yaml:6) matches everything it does; remove it, narrow \"wide\", or move it "
     "before \"wide\""},
    {"shadowed by a higher priority policy",
     R("    - {name: late, match: {labels: [pii]}, keepLocal: {reason: y}}\n") "---\n" PT_HEAD(
         "InferencePolicy",
         "first") "spec: {priority: 10, rules: [{name: all, reject: {reason: x}}]}\n",

     "p.yaml:6:14: InferencePolicy \"p\": spec.rules[0]: rule \"late\" can never match: rule "
     "\"all\" of InferencePolicy \"first\" (p.yaml:11) matches everything it does; remove it, "
     "narrow \"all\", or move it before \"all\""},
    {"duplicate policy",
     P("  limits: [{tenant: a, concurrentRequests: 1}]\n") "---\n" P(
         "  limits: [{tenant: b, concurrentRequests: 1}]\n"),
     "p.yaml:9:18: InferencePolicy \"p\": metadata.name is already used by the InferencePolicy at "
     "p.yaml:3:18; rename one of them"},
    {"priority range", P("  priority: 2000000\n"),
     "p.yaml:5:13: InferencePolicy \"p\": spec.priority must be a whole number from -1000000 to "
     "1000000, got \"2000000\""},
    {"unknown spec field", P("  rule: []\n"),
     "p.yaml:5:3: InferencePolicy \"p\": spec.rule is not a known field; did you mean \"rules\"? "
     "(known: priority, rules, aliases, limits, labels, cacheIsolation)"},
    // cacheIsolation
    {"cacheIsolation without tenants", P("  cacheIsolation: {}\n"),
     "p.yaml:5:19: InferencePolicy \"p\": spec.cacheIsolation needs tenants: the tenants whose "
     "prompts are cached apart, or [\"*\"] for every tenant"},
    {"cacheIsolation unknown field", P("  cacheIsolation: {tenant: [a]}\n"),
     "p.yaml:5:20: InferencePolicy \"p\": spec.cacheIsolation.tenant is not a known field; did "
     "you mean \"tenants\"? (known: tenants)"},
    {"cacheIsolation tenant twice", P("  cacheIsolation: {tenants: [a, a]}\n"),
     "p.yaml:5:33: InferencePolicy \"p\": spec.cacheIsolation.tenants[1] \"a\" is listed twice; "
     "remove one"},
    // aliases
    {"alias names model and pool",
     P("  aliases: [{name: al, targets: [{model: small-model, pool: chat}]}]\n"),
     "p.yaml:5:34: InferencePolicy \"p\": spec.aliases[0].targets[0] names both model and pool; "
     "give exactly one of model and pool"},
    {"alias names neither", P("  aliases: [{name: al, targets: [{weight: 2}]}]\n"),
     "p.yaml:5:34: InferencePolicy \"p\": spec.aliases[0].targets[0] names neither model nor pool; "
     "give exactly one of model and pool"},
    {"alias without targets", P("  aliases: [{name: al, targets: []}]\n"),
     "p.yaml:5:33: InferencePolicy \"p\": spec.aliases[0].targets is empty; list at least one of "
     "targets ({model | pool, weight})"},
    {"alias to a missing model", P("  aliases: [{name: al, targets: [{model: small-modle}]}]\n"),
     "p.yaml:5:42: InferencePolicy \"p\": spec.aliases[0].targets[0].model \"small-modle\" is "
     "neither a pool's model nor an alias; did you mean \"small-model\"? (known: large-model, "
     "small-model, al)"},
    {"alias to a missing pool", P("  aliases: [{name: al, targets: [{pool: cht}]}]\n"),
     "p.yaml:5:41: InferencePolicy \"p\": spec.aliases[0].targets[0].pool \"cht\" is not an "
     "InferencePool; did you mean \"chat\"? (known: big, chat)"},
    {"alias failover to nothing",
     P("  aliases: [{name: al, targets: [{pool: chat}], failover: [nowhere]}]\n"),
     "p.yaml:5:60: InferencePolicy \"p\": spec.aliases[0].failover[0] \"nowhere\" is not a pool's "
     "model, an alias or a pool (known: large-model, small-model, al, big, chat)"},
    {"alias weight range", P("  aliases: [{name: al, targets: [{pool: chat, weight: 0}]}]\n"),
     "p.yaml:5:55: InferencePolicy \"p\": spec.aliases[0].targets[0].weight must be a whole number "
     "from 1 to 1000, got \"0\""},
    {"alias named like a pool's model",
     P("  aliases: [{name: small-model, targets: [{pool: big}]}]\n"),
     "p.yaml:5:20: InferencePolicy \"p\": spec.aliases[0].name \"small-model\" is the model of "
     "InferencePool \"chat\" (base.yaml:27); an alias needs a name of its own"},
    {"alias defined twice",
     P("  aliases: [{name: al, targets: [{pool: big}]}]\n") "---\n" PT_HEAD(
         "InferencePolicy", "q") "spec: {aliases: [{name: al, targets: [{pool: chat}]}]}\n",

     "p.yaml:10:25: InferencePolicy \"q\": spec.aliases[0].name \"al\" is already an alias of "
     "InferencePolicy \"p\" (p.yaml:5); alias names are unique"},
    {"alias cycle",
     P("  aliases:\n    - {name: a, targets: [{model: b}]}\n    - {name: b, targets: [{pool: "
       "chat}], failover: [c]}\n"
       "    - {name: c, targets: [{model: a}]}\n"),

     "p.yaml:8:14: InferencePolicy \"p\": spec.aliases[2] (\"c\") is part of an alias cycle: a → b "
     "→ c → a; an alias must resolve to pools, break the cycle"},
    {"alias to itself", P("  aliases: [{name: a, targets: [{model: a}]}]\n"),
     "p.yaml:5:20: InferencePolicy \"p\": spec.aliases[0] (\"a\") is part of an alias cycle: a → "
     "a; an alias must resolve to pools, break the cycle"},
    // limits
    {"limit without limits", P("  limits: [{tenant: a}]\n"),
     "p.yaml:5:12: InferencePolicy \"p\": spec.limits[0] (tenant \"a\") sets no limit; give at "
     "least one of requestsPerMinute, inputTokensPerMinute, outputTokensPerMinute, "
     "concurrentRequests, costPerDayUsd, weight, priority"},
    {"limit zero", P("  limits: [{tenant: a, requestsPerMinute: 0}]\n"),
     "p.yaml:5:43: InferencePolicy \"p\": spec.limits[0].requestsPerMinute must be a whole number "
     "from 1 to 1000000000, got \"0\""},
    {"limit unknown field", P("  limits: [{tenant: a, requestPerMinute: 5}]\n"),
     "p.yaml:5:24: InferencePolicy \"p\": spec.limits[0].requestPerMinute is not a known field; "
     "did you mean \"requestsPerMinute\"? (known: tenant, requestsPerMinute, inputTokensPerMinute, "
     "outputTokensPerMinute, concurrentRequests, weight, priority, costPerDayUsd)"},
    {"limit weight zero", P("  limits: [{tenant: a, weight: 0}]\n"),
     "p.yaml:5:32: InferencePolicy \"p\": spec.limits[0].weight must be a whole number from 1 to "
     "1000, got \"0\""},
    {"limit weight too big", P("  limits: [{tenant: a, weight: 1001}]\n"),
     "p.yaml:5:32: InferencePolicy \"p\": spec.limits[0].weight must be a whole number from 1 to "
     "1000, got \"1001\""},
    {"limit unknown priority", P("  limits: [{tenant: a, priority: interactve}]\n"),
     "p.yaml:5:34: InferencePolicy \"p\": spec.limits[0].priority \"interactve\" is not one of "
     "the allowed values; did you mean \"interactive\"? (known: interactive, standard, batch)"},
    {"limit cost zero", P("  limits: [{tenant: a, costPerDayUsd: 0}]\n"),
     "p.yaml:5:39: InferencePolicy \"p\": spec.limits[0].costPerDayUsd must be a number of US "
     "dollars from 0.000001 to 1000000000 (e.g. 25 or 12.5), got \"0\""},
    {"limit cost not a number", P("  limits: [{tenant: a, costPerDayUsd: 5usd}]\n"),
     "p.yaml:5:39: InferencePolicy \"p\": spec.limits[0].costPerDayUsd must be a number of US "
     "dollars from 0.000001 to 1000000000 (e.g. 25 or 12.5), got \"5usd\""},
    {"limit without tenant", P("  limits: [{concurrentRequests: 5}]\n"),
     "p.yaml:5:12: InferencePolicy \"p\": spec.limits[0].tenant is required"},
    {"tenant limited twice",
     P("  limits: [{tenant: a, concurrentRequests: 5}]\n") "---\n" PT_HEAD(
         "InferencePolicy", "q") "spec: {limits: [{tenant: a, concurrentRequests: 6}]}\n",

     "p.yaml:10:26: InferencePolicy \"q\": spec.limits[0].tenant \"a\" already has limits in "
     "InferencePolicy \"p\" (p.yaml:5); give each tenant one entry"},
};

// Rows too long to write out: the limits of lists and strings.
static void test_limits(void **state)
{
    (void)state;
    char *doc = malloc(64 * 1024);
    assert_non_null(doc);
    strcpy(doc, R(""));
    for (int i = 0; i <= POLICY_MAX_RULES; i++)
        snprintf(doc + strlen(doc), 64 * 1024 - strlen(doc),
                 "    - {name: r%d, match: {tenants: [t%d]}, reject: {reason: x}}\n", i, i);
    pt_case_t rows[] = {{"too many rules", doc,
                         "p.yaml:6:5: InferencePolicy \"p\": spec.rules lists 201 rules ({name, "
                         "match, <action>}), above the limit of 200"},
                        {"reason too long", NULL,
                         "p.yaml:6:34: InferencePolicy \"p\": spec.rules[0].reject.reason is "
                         "longer than 256 characters; shorten it"}};
    char reason[400];
    memset(reason, 'x', sizeof reason - 1);
    reason[sizeof reason - 1] = '\0';
    char *doc2 = NULL;
    assert_true(asprintf(&doc2, R("    - {name: r, reject: {reason: %s}}\n"), reason) > 0);
    rows[1].doc = doc2;
    pt_run_cases(PT_BASE, rows, 2);
    free(doc);
    free(doc2);
}

/* A spill with hysteresis that matches only above the SLO never sees its exit threshold: a
 * warning (it compiles). */
static void test_spill_matching_only_above_the_slo_warns(void **state)
{
    (void)state;
    policy_compiler_t *c = pt_ok(PT_BASE, R("    - name: burst\n"
                                            "      match: {pool: {predictedTtftAboveSlo: true}}\n"
                                            "      spill: {provider: cloud}\n"));
    bool warned = false;
    for (size_t i = 0; i < policy_compiler_nwarnings(c); i++)
        warned |= strstr(policy_compiler_warning(c, i), "the exit threshold is never used") != NULL;
    assert_true(warned);
    policy_compiler_destroy(&c);
    c = pt_ok(PT_BASE, R("    - name: burst\n      spill: {provider: cloud}\n"));
    for (size_t i = 0; i < policy_compiler_nwarnings(c); i++)
        assert_null(strstr(policy_compiler_warning(c, i), "exit threshold"));
    policy_compiler_destroy(&c);
}

static void test_every_validation_error(void **state)
{
    (void)state;
    pt_run_cases(PT_BASE, s_errors, sizeof s_errors / sizeof *s_errors);
}

/* spec.cacheIsolation: the tenants of every policy, sorted, each once, on the wire. */
static void test_cache_isolation(void **state)
{
    (void)state;
    policy_compiler_t *c =
        pt_ok(PT_BASE, P("  cacheIsolation: {tenants: [team-b, '*', team-a]}\n") "---\n" PT_HEAD(
                           "InferencePolicy", "q") "spec: {cacheIsolation: {tenants: [team-a]}}\n");
    const ipl_policy_t *w = policy_compiler_policy(c);
    assert_int_equal(w->cache_isolated_tenants_len, 3);
    assert_string_equal(w->cache_isolated_tenants[0], "*");
    assert_string_equal(w->cache_isolated_tenants[1], "team-a");
    assert_string_equal(w->cache_isolated_tenants[2], "team-b");
    policy_compiler_destroy(&c);
    c = pt_ok(PT_BASE, s_full); /* none: one shared cache */
    assert_int_equal(policy_compiler_policy(c)->cache_isolated_tenants_len, 0);
    policy_compiler_destroy(&c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_rule_kind_and_action_compiles),
        cmocka_unit_test(test_rules_are_ordered_by_priority_then_name),
        cmocka_unit_test(test_defaults),
        cmocka_unit_test(test_covers),
        cmocka_unit_test(test_every_validation_error),
        cmocka_unit_test(test_limits),
        cmocka_unit_test(test_spill_matching_only_above_the_slo_warns),
        cmocka_unit_test(test_cache_isolation),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

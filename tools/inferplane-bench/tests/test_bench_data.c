/*
 * Unit tests of bench_data: conversations are deterministic by seed, shared prefixes are the
 * same text and own text differs, multi-turn turns and think times, trace conversations
 * (ours and Mooncake blocks), and words = tokens with the built-in tokenizer.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "bench_data.h"
#include "ipl_tokenizer.h"

static char *s_text(const bench_data_t *d, const bench_conv_t *c, uint32_t turn, size_t *len)
{
    const bench_turn_t *t = &c->turns[turn];
    size_t n = bench_data_text_len(c->segs + t->seg_off, t->nseg);
    char *buf = malloc(n + 1);
    assert_int_equal(bench_data_text(d, c->segs + t->seg_off, t->nseg, buf), n);
    buf[n] = '\0';
    *len = n;
    return buf;
}

static void test_deterministic_and_prefixes(void **state)
{
    (void)state;
    bench_data_config_t cfg;
    bench_data_config_defaults(&cfg);
    char err[128];
    assert_int_equal(bench_len_parse("uniform:20,40", &cfg.prompt, err, sizeof err), 0);
    assert_int_equal(bench_buckets_parse("100:1:64", &cfg, err, sizeof err), 0);
    bench_data_t *a = bench_data_new_synthetic(&cfg), *b = bench_data_new_synthetic(&cfg);
    cfg.seed = 43;
    bench_data_t *other = bench_data_new_synthetic(&cfg);
    bench_conv_t ca = {0}, cb = {0}, co = {0};
    assert_int_equal(bench_data_conv(a, 5, &ca), 0);
    assert_int_equal(bench_data_conv(b, 5, &cb), 0);
    assert_int_equal(bench_data_conv(other, 5, &co), 0);
    size_t la, lb, lo;
    char *ta = s_text(a, &ca, 0, &la), *tb = s_text(b, &cb, 0, &lb),
         *to = s_text(other, &co, 0, &lo);
    assert_int_equal(la, lb);
    assert_memory_equal(ta, tb, la);
    assert_true(la != lo || memcmp(ta, to, la) != 0);
    assert_int_equal(ca.turns[0].words, la / 3);
    assert_true(ca.turns[0].words >= 84 && ca.turns[0].words <= 104);
    // Another conversation shares the 64-word prefix (192 bytes) and nothing more.
    bench_conv_t c2 = {0};
    assert_int_equal(bench_data_conv(a, 6, &c2), 0);
    size_t l2;
    char *t2 = s_text(a, &c2, 0, &l2);
    assert_memory_equal(ta, t2, 192);
    assert_true(memcmp(ta + 192, t2 + 192, 30) != 0);
    assert_int_equal(bench_data_count(a), 0);
    free(ta), free(tb), free(to), free(t2);
    bench_conv_clear(&ca), bench_conv_clear(&cb), bench_conv_clear(&co), bench_conv_clear(&c2);
    bench_data_destroy(&a), bench_data_destroy(&b), bench_data_destroy(&other);
}

static void test_multi_turn(void **state)
{
    (void)state;
    bench_data_config_t cfg;
    bench_data_config_defaults(&cfg);
    char err[128];
    cfg.turns = 3;
    assert_int_equal(bench_len_parse("normal:500,100", &cfg.think_ms, err, sizeof err), 0);
    assert_int_equal(bench_len_parse("16", &cfg.output, err, sizeof err), 0);
    bench_data_t *d = bench_data_new_synthetic(&cfg);
    bench_conv_t c = {0};
    assert_int_equal(bench_data_conv(d, 0, &c), 0);
    assert_int_equal(c.nturns, 3);
    assert_float_equal(c.turns[0].think_s, 0, 1e-12);
    for (int t = 1; t < 3; t++)
        assert_true(c.turns[t].think_s > 0.05 && c.turns[t].think_s < 1.5);
    for (int t = 0; t < 3; t++) {
        assert_int_equal(c.turns[t].words, 128);
        assert_int_equal(c.turns[t].output_tokens, 16);
    }
    // The turns' texts differ.
    size_t l0, l1;
    char *t0 = s_text(d, &c, 0, &l0), *t1 = s_text(d, &c, 1, &l1);
    assert_true(memcmp(t0, t1, l0) != 0);
    free(t0), free(t1);
    bench_conv_clear(&c);
    bench_data_destroy(&d);
    cfg.turns = 0;
    assert_null(bench_data_new_synthetic(&cfg));
}

static void test_trace_conversations(void **state)
{
    (void)state;
    bench_trace_t *t = bench_trace_new();
    char err[160];
    const char *lines[] = {
        "{\"timestamp\": 2000, \"input_length\": 1100, \"output_length\": 8, \"hash_ids\": [1, 2, "
        "3]}",
        "{\"timestamp\": 3000, \"input_length\": 600, \"output_length\": 8, \"hash_ids\": [1, 9]}",
        "{\"arrival_s\": 1, \"prompt_tokens\": 300, \"output_tokens\": 4, \"prefix_group\": 5}",
    };
    for (int i = 0; i < 3; i++)
        assert_int_equal(bench_trace_add_line(t, lines[i], strlen(lines[i]), err, sizeof err), 0);
    bench_data_config_t cfg;
    bench_data_config_defaults(&cfg);
    cfg.trace_speed = 2;
    bench_data_t *d = bench_data_new_trace(&cfg, &t);
    assert_null(t);
    assert_int_equal(bench_data_count(d), 3);
    bench_conv_t a = {0}, b = {0}, c = {0};
    assert_int_equal(bench_data_conv(d, 0, &a), 0);
    assert_int_equal(bench_data_conv(d, 1, &b), 0);
    assert_int_equal(bench_data_conv(d, 2, &c), 0);
    assert_float_equal(a.arrival_s, 1.0, 1e-12); // 2 s at speed 2
    assert_int_equal(a.turns[0].words, 1100);    // 512 + 512 + 76: the blocks cut the prompt
    assert_int_equal(a.nsegs, 3);
    assert_int_equal(a.segs[2].words, 76);
    assert_int_equal(b.turns[0].words, 600);
    size_t la, lb;
    char *ta = s_text(d, &a, 0, &la), *tb = s_text(d, &b, 0, &lb);
    assert_memory_equal(ta, tb, 512 * 3); // hash id 1 is the same block
    assert_true(memcmp(ta + 1536, tb + 1536, 30) != 0);
    assert_int_equal(c.nsegs, 2); // prefix group (300 - 256 own) then own
    assert_int_equal(c.segs[0].words, 44);
    assert_int_equal(bench_data_conv(d, 3, &c), -3 /* IPL_E_RANGE */);
    free(ta), free(tb);
    bench_conv_clear(&a), bench_conv_clear(&b), bench_conv_clear(&c);
    bench_data_destroy(&d);
}

static void test_words_are_tokens(void **state)
{
    (void)state;
    bench_data_config_t cfg;
    bench_data_config_defaults(&cfg);
    bench_data_t *d = bench_data_new_synthetic(&cfg);
    ipl_tokenizer_t *tok = ipl_tokenizer_new_builtin();
    assert_int_equal(bench_data_use_tokenizer(d, tok), 0);
    assert_true(bench_data_vocabulary(d) >= 20);
    bench_conv_t c = {0};
    for (uint64_t i = 0; i < 20; i++) {
        assert_int_equal(bench_data_conv(d, i, &c), 0);
        size_t len, n;
        char *text = s_text(d, &c, 0, &len);
        uint32_t *ids = ipl_tokenizer_encode(tok, text, len, &n);
        assert_int_equal(n, c.turns[0].words);
        free(ids);
        free(text);
    }
    bench_conv_clear(&c);
    ipl_tokenizer_destroy(&tok);
    bench_data_destroy(&d);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_deterministic_and_prefixes),
        cmocka_unit_test(test_multi_turn),
        cmocka_unit_test(test_trace_conversations),
        cmocka_unit_test(test_words_are_tokens),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

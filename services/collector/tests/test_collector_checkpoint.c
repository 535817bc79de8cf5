/*
 * Unit tests for collector_checkpoint: a round trip of every field; every truncation and every
 * single flipped byte of a valid file is refused (checksum or structure), as are a wrong magic,
 * version, flag set, name and size even with a recomputed checksum; the file name escapes any
 * worker name; save is atomic (no temporary left behind) and load/remove report a missing file,
 * an oversized one and one that is not a regular file.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "collector_checkpoint.h"
#include "ipl_error.h"
#include "ipl_hash.h"

static collector_checkpoint_t s_sample(collector_block_t *blocks, collector_block_t *ghosts)
{
    for (uint64_t i = 0; i < 3; i++)
        blocks[i] = (collector_block_t){i, 100 + i, i ? i - 1 : 0};
    ghosts[0] = (collector_block_t){0xffffffffffffffffULL, 7, 9};
    return (collector_checkpoint_t){
        .worker = "w0",
        .written_ms = 1700000000123ULL,
        .start_time = 1699999999.5,
        .counters = {10, -1, 3.25},
        .image = {.last_seq = 41,
                  .last_digest = 0x0123456789abcdefULL,
                  .epoch = 77,
                  .block_size = 16,
                  .flags = COLLECTOR_IMAGE_RECOVERING | COLLECTOR_IMAGE_INCOMPLETE,
                  .blocks = blocks,
                  .nblocks = 3,
                  .ghosts = ghosts,
                  .nghosts = 1}};
}

static void test_round_trip(void **state)
{
    (void)state;
    collector_block_t blocks[3], ghosts[1];
    collector_checkpoint_t c = s_sample(blocks, ghosts);
    uint8_t *buf;
    size_t len;
    assert_int_equal(collector_checkpoint_encode(&c, &buf, &len), 0);
    assert_int_equal(len, 104 + 2 + 24 * 4 + 8);
    collector_checkpoint_t d;
    char err[128];
    assert_int_equal(collector_checkpoint_decode(buf, len, &d, err, sizeof err), 0);
    assert_string_equal(d.worker, "w0");
    assert_true(d.written_ms == c.written_ms);
    assert_true(d.start_time == c.start_time);
    for (int i = 0; i < 3; i++)
        assert_true(d.counters[i] == c.counters[i]);
    assert_true(d.image.last_seq == 41 && d.image.last_digest == c.image.last_digest);
    assert_true(d.image.epoch == 77 && d.image.block_size == 16);
    assert_int_equal(d.image.flags, c.image.flags);
    assert_int_equal(d.image.nblocks, 3);
    assert_int_equal(d.image.nghosts, 1);
    assert_memory_equal(d.image.blocks, blocks, sizeof blocks);
    assert_memory_equal(d.image.ghosts, ghosts, sizeof ghosts);
    collector_checkpoint_clear(&d);
    assert_null(d.worker);
    /* an empty image encodes too */
    c.image.nblocks = c.image.nghosts = 0;
    c.image.blocks = c.image.ghosts = NULL;
    uint8_t *b2;
    size_t l2;
    assert_int_equal(collector_checkpoint_encode(&c, &b2, &l2), 0);
    assert_int_equal(collector_checkpoint_decode(b2, l2, &d, err, sizeof err), 0);
    assert_int_equal(d.image.nblocks, 0);
    collector_checkpoint_clear(&d);
    free(b2);
    free(buf);
}

static void test_encode_refuses(void **state)
{
    (void)state;
    collector_block_t blocks[3], ghosts[1];
    uint8_t *buf;
    size_t len;
    collector_checkpoint_t c = s_sample(blocks, ghosts);
    c.worker = "";
    assert_int_equal(collector_checkpoint_encode(&c, &buf, &len), IPL_E_INVAL);
    c = s_sample(blocks, ghosts);
    c.image.flags = COLLECTOR_IMAGE_BASE | COLLECTOR_IMAGE_RECOVERING;
    assert_int_equal(collector_checkpoint_encode(&c, &buf, &len), IPL_E_INVAL);
    c = s_sample(blocks, ghosts);
    c.image.nblocks = COLLECTOR_CHECKPOINT_MAX_BLOCKS + 1;
    assert_int_equal(collector_checkpoint_encode(&c, &buf, &len), IPL_E_INVAL);
}

/* Rewrites the checksum after a deliberate change, so that the structure check is reached. */
static void s_reseal(uint8_t *buf, size_t len)
{
    uint64_t h = ipl_hash_bytes(buf, len - 8);
    for (int i = 0; i < 8; i++)
        buf[len - 8 + i] = (uint8_t)(h >> (8 * i));
}

static void s_expect_refused(const uint8_t *buf, size_t len, const char *why)
{
    collector_checkpoint_t d;
    char err[160] = "";
    int rc = collector_checkpoint_decode(buf, len, &d, err, sizeof err);
    assert_true(rc < 0);
    assert_null(d.worker);
    assert_null(d.image.blocks);
    if (why && !strstr(err, why)) fail_msg("error \"%s\" does not mention \"%s\"", err, why);
}

static void test_corruption_is_refused(void **state)
{
    (void)state;
    collector_block_t blocks[3], ghosts[1];
    collector_checkpoint_t c = s_sample(blocks, ghosts);
    uint8_t *buf;
    size_t len;
    assert_int_equal(collector_checkpoint_encode(&c, &buf, &len), 0);
    uint8_t *copy = malloc(len + 8);
    for (size_t n = 0; n < len; n++) /* every truncation */
        s_expect_refused(buf, n, NULL);
    for (size_t i = 0; i < len; i++) { /* every flipped byte */
        memcpy(copy, buf, len);
        copy[i] ^= 0x5a;
        s_expect_refused(copy, len, NULL);
    }
    memcpy(copy, buf, len); /* a byte more */
    copy[len] = 0;
    s_expect_refused(copy, len + 1, "size");
    /* structural errors behind a valid checksum */
    struct {
        size_t off;
        uint8_t val;
        const char *why;
    } cases[] = {
        {0, 'X', "magic"}, {8, 2, "version"},       {12, 5, "flags"},
        {12, 8, "flags"},  {84, 0, "out of range"}, {86, 1, "out of range"},
        {88, 9, "size"},   {95, 1, "out of range"}, {104, 0, "NUL"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        memcpy(copy, buf, len);
        if (cases[k].off == 84) memset(copy + 84, 0, 4); /* name length 0 */
        copy[cases[k].off] = cases[k].val;
        s_reseal(copy, len);
        s_expect_refused(copy, len, cases[k].why);
    }
    s_expect_refused(NULL, 0, "truncated");
    free(copy);
    free(buf);
}

static void test_path_escapes_names(void **state)
{
    (void)state;
    char *p = collector_checkpoint_path("/d", "w0.a_b-C");
    assert_string_equal(p, "/d/w0.a_b-C.ckpt");
    free(p);
    p = collector_checkpoint_path("/d/", "../x y/\xff");
    assert_string_equal(p, "/d/%2E.%2Fx%20y%2F%FF.ckpt");
    free(p);
}

static void test_save_load_remove(void **state)
{
    (void)state;
    char dir[] = "/tmp/test_collector_checkpoint.XXXXXX";
    assert_non_null(mkdtemp(dir));
    char err[256];
    uint8_t *got;
    size_t len;
    assert_int_equal(collector_checkpoint_load(dir, "w/0", &got, &len, err, sizeof err),
                     IPL_E_NOTFOUND);
    const uint8_t data[] = "first";
    assert_int_equal(collector_checkpoint_save(dir, "w/0", data, 5, err, sizeof err), 0);
    const uint8_t more[] = "second version";
    assert_int_equal(collector_checkpoint_save(dir, "w/0", more, 14, err, sizeof err), 0);
    assert_int_equal(collector_checkpoint_load(dir, "w/0", &got, &len, err, sizeof err), 0);
    assert_int_equal(len, 14);
    assert_memory_equal(got, more, 14);
    free(got);
    char *path = collector_checkpoint_path(dir, "w/0");
    char tmp[512];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    assert_int_not_equal(access(tmp, F_OK), 0); /* renamed, nothing left behind */
    /* larger than any checkpoint (a sparse file) */
    assert_int_equal(truncate(path, (off_t)COLLECTOR_CHECKPOINT_MAX_FILE + 1), 0);
    assert_int_equal(collector_checkpoint_load(dir, "w/0", &got, &len, err, sizeof err),
                     IPL_E_RANGE);
    assert_int_equal(collector_checkpoint_remove(dir, "w/0"), 0);
    assert_int_equal(collector_checkpoint_remove(dir, "w/0"), IPL_E_NOTFOUND);
    /* not a regular file */
    assert_int_equal(mkdir(path, 0700), 0);
    assert_int_equal(collector_checkpoint_load(dir, "w/0", &got, &len, err, sizeof err), IPL_E_IO);
    assert_non_null(strstr(err, "regular"));
    /* a directory that cannot be written */
    assert_int_equal(collector_checkpoint_save("/nonexistent/dir", "w0", data, 5, err, sizeof err),
                     IPL_E_IO);
    assert_non_null(strstr(err, "/nonexistent/dir/w0.ckpt.tmp"));
    rmdir(path);
    free(path);
    rmdir(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_encode_refuses),
        cmocka_unit_test(test_corruption_is_refused),
        cmocka_unit_test(test_path_escapes_names),
        cmocka_unit_test(test_save_load_remove),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

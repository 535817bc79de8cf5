/*
 * Unit tests of ipl_mp: every msgpack format, bounds and type checks, the cursor left unchanged
 * on every failure, skip depth, and a cross-check against msgpack-c's packer.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>
#include <msgpack.h>

#include "ipl_error.h"
#include "ipl_mp.h"

#define R(name, ...)                                                                               \
    static const uint8_t name##_buf[] = {__VA_ARGS__};                                             \
    ipl_mp_reader_t name;                                                                          \
    ipl_mp_reader_init(&name, name##_buf, sizeof name##_buf)

static void test_uint_formats(void **state)
{
    (void)state;
    uint64_t u = 0;
    R(r, 0x00, 0x7f, 0xcc, 0xff, 0xcd, 0x12, 0x34, 0xce, 0xde, 0xad, 0xbe, 0xef, 0xcf, 0xff, 0xff,
      0xff, 0xff, 0xff, 0xff, 0xff, 0xfe, 0xd0, 0x05, 0xd3, 0x7f, 0xff, 0xff, 0xff, 0xff, 0xff,
      0xff, 0xff);
    static const uint64_t want[] = {
        0, 127, 255, 0x1234, 0xdeadbeef, UINT64_C(0xfffffffffffffffe), 5, INT64_MAX};
    for (size_t k = 0; k < sizeof want / sizeof want[0]; k++) {
        assert_int_equal(ipl_mp_peek(&r), IPL_MP_UINT);
        assert_int_equal(ipl_mp_read_uint(&r, &u), 0);
        assert_true(u == want[k]);
    }
    assert_int_equal(ipl_mp_remaining(&r), 0);
    assert_int_equal(ipl_mp_peek(&r), IPL_MP_INVALID);
    assert_int_equal(ipl_mp_read_uint(&r, &u), IPL_E_TRUNCATED);
    /* the same values in one call; then a negative one and a truncated one stop it */
    R(all, 0x00, 0x7f, 0xcc, 0xff, 0xcd, 0x12, 0x34, 0xce, 0xde, 0xad, 0xbe, 0xef, 0xcf, 0xff, 0xff,
      0xff, 0xff, 0xff, 0xff, 0xff, 0xfe, 0xd0, 0x05, 0xd3, 0x7f, 0xff, 0xff, 0xff, 0xff, 0xff,
      0xff, 0xff);
    uint64_t got[8] = {0};
    assert_int_equal(ipl_mp_read_uints(&all, got, 8), 0);
    assert_memory_equal(got, want, sizeof want);
    assert_int_equal(ipl_mp_remaining(&all), 0);
    R(neg, 0x01, 0xff);
    assert_int_equal(ipl_mp_read_uints(&neg, got, 2), IPL_E_RANGE);
    R(cut, 0x01, 0xcd, 0x12);
    assert_int_equal(ipl_mp_read_uints(&cut, got, 2), IPL_E_TRUNCATED);
    assert_int_equal(ipl_mp_read_uints(&cut, got, 0), 0);
    /* uint 64s (the fast loop), then another form, then a uint 64 cut short */
    R(run, 0xcf, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0xcf, 0xff, 0, 0, 0, 0, 0, 0, 0,
      0x07, 0xcf, 0x12, 0x34, 0x56, 0x78, 0x9a, 0xbc, 0xde, 0xf0, 0xcf, 0x01, 0x02);
    static const uint64_t run_want[] = {UINT64_C(0x0102030405060708), UINT64_C(0xff00000000000000),
                                        7, UINT64_C(0x123456789abcdef0)};
    assert_int_equal(ipl_mp_read_uints(&run, got, 4), 0);
    assert_memory_equal(got, run_want, sizeof run_want);
    assert_int_equal(ipl_mp_remaining(&run), 3);
    assert_int_equal(ipl_mp_read_uints(&run, got, 1), IPL_E_TRUNCATED);
    /* an odd number of uint 64s that end exactly where the buffer does */
    R(exact, 0xcf, 0, 0, 0, 0, 0, 0, 0, 0x09, 0xcf, 0x0a, 0, 0, 0, 0, 0, 0, 0x0b, 0xcf, 0, 0, 0, 0,
      0, 0, 0x01, 0x02);
    assert_int_equal(ipl_mp_read_uints(&exact, got, 3), 0);
    assert_int_equal(got[0], 9);
    assert_int_equal(got[1], UINT64_C(0x0a0000000000000b));
    assert_int_equal(got[2], 0x0102);
    assert_int_equal(ipl_mp_remaining(&exact), 0);
}

static void test_int_formats(void **state)
{
    (void)state;
    int64_t i = 0;
    R(r, 0xff, 0xe0, 0xd0, 0x80, 0xd1, 0xff, 0x7f, 0xd2, 0x80, 0x00, 0x00, 0x00, 0xd3, 0x80, 0x00,
      0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xcc, 0xc8, 0x2a, 0xd1, 0x01, 0x00);
    static const int64_t want[] = {-1, -32, -128, -129, INT32_MIN, INT64_MIN, 200, 42, 256};
    for (size_t k = 0; k < sizeof want / sizeof want[0]; k++) {
        assert_int_equal(ipl_mp_peek(&r), want[k] < 0 ? IPL_MP_INT : IPL_MP_UINT);
        assert_int_equal(ipl_mp_read_int(&r, &i), 0);
        assert_true(i == want[k]);
    }
    assert_int_equal(ipl_mp_remaining(&r), 0);
}

static void test_int_range(void **state)
{
    (void)state;
    int64_t i = 7;
    uint64_t u = 7;
    R(big, 0xcf, 0x80, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00);
    assert_int_equal(ipl_mp_read_int(&big, &i), IPL_E_RANGE);
    assert_int_equal(ipl_mp_remaining(&big), 9);
    assert_int_equal(i, 7);
    assert_int_equal(ipl_mp_read_uint(&big, &u), 0);
    assert_true(u == UINT64_C(0x8000000000000000));

    R(neg, 0xd0, 0xff);
    assert_int_equal(ipl_mp_read_uint(&neg, &u), IPL_E_RANGE);
    assert_int_equal(ipl_mp_remaining(&neg), 2);
    assert_int_equal(ipl_mp_read_int(&neg, &i), 0);
    assert_int_equal(i, -1);
}

static void test_float_nil_bool(void **state)
{
    (void)state;
    double d = 0;
    bool b = false;
    /* float32 1.5, float64 1700000000.5, int -3 and uint 7 read as double */
    R(r, 0xca, 0x3f, 0xc0, 0x00, 0x00, 0xcb, 0x41, 0xd9, 0x54, 0xfc, 0x40, 0x20, 0x00, 0x00, 0xfd,
      0x07, 0xc0, 0xc2, 0xc3, 0xc0);
    assert_int_equal(ipl_mp_peek(&r), IPL_MP_FLOAT);
    assert_int_equal(ipl_mp_read_double(&r, &d), 0);
    assert_true(d == 1.5);
    assert_int_equal(ipl_mp_read_double(&r, &d), 0);
    assert_true(d == 1700000000.5);
    assert_int_equal(ipl_mp_read_double(&r, &d), 0);
    assert_true(d == -3.0);
    assert_int_equal(ipl_mp_read_double(&r, &d), 0);
    assert_true(d == 7.0);
    assert_int_equal(ipl_mp_peek(&r), IPL_MP_NIL);
    assert_int_equal(ipl_mp_read_bool(&r, &b), IPL_E_TYPE);
    assert_int_equal(ipl_mp_read_double(&r, &d), IPL_E_TYPE);
    assert_int_equal(ipl_mp_read_nil(&r), 0);
    assert_int_equal(ipl_mp_peek(&r), IPL_MP_BOOL);
    assert_int_equal(ipl_mp_try_nil(&r), 0);
    assert_int_equal(ipl_mp_read_nil(&r), IPL_E_TYPE);
    assert_int_equal(ipl_mp_read_bool(&r, &b), 0);
    assert_false(b);
    assert_int_equal(ipl_mp_read_bool(&r, &b), 0);
    assert_true(b);
    assert_int_equal(ipl_mp_try_nil(&r), 1);
    assert_int_equal(ipl_mp_try_nil(&r), 0);
    assert_int_equal(ipl_mp_read_nil(&r), IPL_E_TRUNCATED);
}

/* Builds a str or bin value with an explicit header form into buf; returns its size. */
static size_t s_put_blob(uint8_t *buf, uint8_t tag, size_t lenbytes, uint32_t len, uint8_t fill)
{
    size_t n = 0;
    buf[n++] = tag;
    for (size_t k = lenbytes; k > 0; k--)
        buf[n++] = (uint8_t)(len >> (8 * (k - 1)));
    memset(buf + n, fill, len);
    return n + len;
}

static void test_str_bin_formats(void **state)
{
    (void)state;
    static uint8_t buf[70000 * 3 + 64];
    size_t n = 0;
    n += s_put_blob(buf + n, 0xa3, 0, 3, 'a');      /* fixstr */
    n += s_put_blob(buf + n, 0xd9, 1, 200, 'b');    /* str8 */
    n += s_put_blob(buf + n, 0xda, 2, 1000, 'c');   /* str16 */
    n += s_put_blob(buf + n, 0xdb, 4, 70000, 'd');  /* str32 */
    n += s_put_blob(buf + n, 0xc4, 1, 32, 0x11);    /* bin8 */
    n += s_put_blob(buf + n, 0xc5, 2, 300, 0x22);   /* bin16 */
    n += s_put_blob(buf + n, 0xc6, 4, 70000, 0x33); /* bin32 */
    n += s_put_blob(buf + n, 0xa0, 0, 0, 0);        /* empty fixstr */
    ipl_mp_reader_t r;
    ipl_mp_reader_init(&r, buf, n);
    static const uint32_t slen[] = {3, 200, 1000, 70000};
    static const char sfill[] = {'a', 'b', 'c', 'd'};
    const char *s = NULL;
    const uint8_t *b = NULL;
    uint32_t len = 0;
    for (int k = 0; k < 4; k++) {
        assert_int_equal(ipl_mp_peek(&r), IPL_MP_STR);
        assert_int_equal(ipl_mp_read_bin(&r, &b, &len), IPL_E_TYPE);
        assert_int_equal(ipl_mp_read_str(&r, &s, &len), 0);
        assert_int_equal(len, slen[k]);
        assert_int_equal(s[0], sfill[k]);
        assert_int_equal(s[len - 1], sfill[k]);
    }
    static const uint32_t blen[] = {32, 300, 70000};
    for (int k = 0; k < 3; k++) {
        assert_int_equal(ipl_mp_peek(&r), IPL_MP_BIN);
        assert_int_equal(ipl_mp_read_str(&r, &s, &len), IPL_E_TYPE);
        assert_int_equal(ipl_mp_read_bin(&r, &b, &len), 0);
        assert_int_equal(len, blen[k]);
        assert_int_equal(b[len - 1], 0x11 * (k + 1));
    }
    assert_int_equal(ipl_mp_read_str(&r, &s, &len), 0);
    assert_int_equal(len, 0);
    assert_true(ipl_mp_str_eq(s, len, ""));
    assert_int_equal(ipl_mp_remaining(&r), 0);
}

static void test_str_eq(void **state)
{
    (void)state;
    R(r, 0xa3, 'G', 'P', 'U');
    const char *s;
    uint32_t len;
    assert_int_equal(ipl_mp_read_str(&r, &s, &len), 0);
    assert_true(ipl_mp_str_eq(s, len, "GPU"));
    assert_false(ipl_mp_str_eq(s, len, "GP"));
    assert_false(ipl_mp_str_eq(s, len, "GPUS"));
    assert_false(ipl_mp_str_eq(s, len, "CPU"));
}

static void test_array_map_formats(void **state)
{
    (void)state;
    uint32_t n = 0;
    R(r, 0x92, 0x01, 0x02, 0xdc, 0x00, 0x01, 0xc0, 0xdd, 0x00, 0x00, 0x00, 0x01, 0xc0, 0x81, 0x01,
      0x02, 0xde, 0x00, 0x01, 0x01, 0x02, 0xdf, 0x00, 0x00, 0x00, 0x01, 0x01, 0x02, 0x90, 0x80);
    assert_int_equal(ipl_mp_peek(&r), IPL_MP_ARRAY);
    assert_int_equal(ipl_mp_read_map(&r, &n), IPL_E_TYPE);
    assert_int_equal(ipl_mp_read_array(&r, &n), 0);
    assert_int_equal(n, 2);
    assert_int_equal(ipl_mp_remaining(&r), sizeof r_buf - 1); /* only the header */
    assert_int_equal(ipl_mp_skip(&r), 0);
    assert_int_equal(ipl_mp_skip(&r), 0);
    for (int k = 0; k < 2; k++) {
        assert_int_equal(ipl_mp_read_array(&r, &n), 0);
        assert_int_equal(n, 1);
        assert_int_equal(ipl_mp_read_nil(&r), 0);
    }
    for (int k = 0; k < 3; k++) {
        assert_int_equal(ipl_mp_peek(&r), IPL_MP_MAP);
        assert_int_equal(ipl_mp_read_array(&r, &n), IPL_E_TYPE);
        assert_int_equal(ipl_mp_read_map(&r, &n), 0);
        assert_int_equal(n, 1);
        assert_int_equal(ipl_mp_skip(&r), 0);
        assert_int_equal(ipl_mp_skip(&r), 0);
    }
    assert_int_equal(ipl_mp_read_array(&r, &n), 0);
    assert_int_equal(n, 0);
    assert_int_equal(ipl_mp_read_map(&r, &n), 0);
    assert_int_equal(n, 0);
    assert_int_equal(ipl_mp_remaining(&r), 0);
}

static void test_huge_declared_lengths(void **state)
{
    (void)state;
    uint32_t n = 0;
    const char *s;
    const uint8_t *b;
    uint32_t len;
    R(a32, 0xdd, 0xff, 0xff, 0xff, 0xff, 0x01, 0x02);
    assert_int_equal(ipl_mp_read_array(&a32, &n), IPL_E_TRUNCATED);
    assert_int_equal(ipl_mp_remaining(&a32), sizeof a32_buf);
    assert_int_equal(ipl_mp_skip(&a32), IPL_E_TRUNCATED);
    assert_int_equal(ipl_mp_peek(&a32), IPL_MP_INVALID);
    /* as many elements as bytes left is plausible; one more is not */
    R(a16ok, 0xdc, 0x00, 0x02, 0xc0, 0xc0);
    assert_int_equal(ipl_mp_read_array(&a16ok, &n), 0);
    R(a16bad, 0xdc, 0x00, 0x03, 0xc0, 0xc0);
    assert_int_equal(ipl_mp_read_array(&a16bad, &n), IPL_E_TRUNCATED);
    /* a map pair needs two bytes */
    R(m16bad, 0xde, 0x00, 0x02, 0xc0, 0xc0, 0xc0);
    assert_int_equal(ipl_mp_read_map(&m16bad, &n), IPL_E_TRUNCATED);
    R(m32, 0xdf, 0x80, 0x00, 0x00, 0x00, 0xc0, 0xc0);
    assert_int_equal(ipl_mp_read_map(&m32, &n), IPL_E_TRUNCATED);
    R(s32, 0xdb, 0xff, 0xff, 0xff, 0xff, 'x');
    assert_int_equal(ipl_mp_read_str(&s32, &s, &len), IPL_E_TRUNCATED);
    assert_int_equal(ipl_mp_skip(&s32), IPL_E_TRUNCATED);
    R(b32, 0xc6, 0xff, 0xff, 0xff, 0xf0, 'x');
    assert_int_equal(ipl_mp_read_bin(&b32, &b, &len), IPL_E_TRUNCATED);
    R(e32, 0xc9, 0xff, 0xff, 0xff, 0xff, 0x01, 0x00);
    assert_int_equal(ipl_mp_skip(&e32), IPL_E_TRUNCATED);
    assert_int_equal(ipl_mp_remaining(&e32), sizeof e32_buf);
}

static void test_ext_skip(void **state)
{
    (void)state;
    /* fixext 1/2/4/8/16, ext8/16/32, then a sentinel */
    static const uint8_t buf[] = {
        0xd4, 0x01, 0xaa, 0xd5, 0x01, 1,  2,    0xd6, 0x01, 1,    2,    3,    4,    0xd7, 0xff,
        1,    2,    3,    4,    5,    6,  7,    8,    0xd8, 0x05, 1,    2,    3,    4,    5,
        6,    7,    8,    9,    10,   11, 12,   13,   14,   15,   16,   0xc7, 0x02, 0x07, 1,
        2,    0xc8, 0x00, 0x01, 0x07, 9,  0xc9, 0x00, 0x00, 0x00, 0x00, 0x07, 0x2a};
    ipl_mp_reader_t r;
    ipl_mp_reader_init(&r, buf, sizeof buf);
    uint64_t u;
    for (int k = 0; k < 8; k++) {
        assert_int_equal(ipl_mp_peek(&r), IPL_MP_EXT);
        assert_int_equal(ipl_mp_read_uint(&r, &u), IPL_E_TYPE);
        assert_int_equal(ipl_mp_skip(&r), 0);
    }
    assert_int_equal(ipl_mp_read_uint(&r, &u), 0);
    assert_int_equal(u, 42);
}

static void test_reserved_c1(void **state)
{
    (void)state;
    R(r, 0xc1, 0x00);
    uint64_t u;
    assert_int_equal(ipl_mp_peek(&r), IPL_MP_INVALID);
    assert_int_equal(ipl_mp_read_uint(&r, &u), IPL_E_TYPE);
    assert_int_equal(ipl_mp_skip(&r), IPL_E_TYPE);
    R(inside, 0x92, 0x01, 0xc1);
    assert_int_equal(ipl_mp_skip(&inside), IPL_E_TYPE);
    assert_int_equal(ipl_mp_remaining(&inside), 3);
}

static void test_hash64(void **state)
{
    (void)state;
    uint64_t h = 0;
    R(r, 0xcf, 0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef);
    assert_int_equal(ipl_mp_read_hash64(&r, &h), 0);
    assert_true(h == UINT64_C(0x0123456789abcdef));

    R(neg, 0xff, 0xd3, 0x80, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x2a);
    assert_int_equal(ipl_mp_read_hash64(&neg, &h), 0);
    assert_true(h == UINT64_MAX);
    assert_int_equal(ipl_mp_read_hash64(&neg, &h), 0);
    assert_true(h == UINT64_C(0x8000000000000001));
    assert_int_equal(ipl_mp_read_hash64(&neg, &h), 0);
    assert_true(h == 42);

    /* bin8 of a 32-byte digest: the last 8 bytes, big-endian */
    uint8_t digest[2 + 32];
    digest[0] = 0xc4;
    digest[1] = 32;
    for (int k = 0; k < 32; k++)
        digest[2 + k] = (uint8_t)k;
    ipl_mp_reader_init(&r, digest, sizeof digest);
    assert_int_equal(ipl_mp_read_hash64(&r, &h), 0);
    assert_true(h == UINT64_C(0x18191a1b1c1d1e1f));
    assert_int_equal(ipl_mp_remaining(&r), 0);

    /* short bins are zero-padded on the left; bin32 works too */
    R(shortbin, 0xc4, 0x03, 0xab, 0xcd, 0xef, 0xc4, 0x00, 0xc6, 0x00, 0x00, 0x00, 0x09, 0xee, 1, 2,
      3, 4, 5, 6, 7, 8);
    assert_int_equal(ipl_mp_read_hash64(&shortbin, &h), 0);
    assert_true(h == 0xabcdef);
    assert_int_equal(ipl_mp_read_hash64(&shortbin, &h), 0);
    assert_true(h == 0);
    assert_int_equal(ipl_mp_read_hash64(&shortbin, &h), 0);
    assert_true(h == UINT64_C(0x0102030405060708));

    R(wrong, 0xa1, 'x', 0xc0, 0xcb, 0, 0, 0, 0, 0, 0, 0, 0);
    assert_int_equal(ipl_mp_read_hash64(&wrong, &h), IPL_E_TYPE);
    assert_int_equal(ipl_mp_skip(&wrong), 0);
    assert_int_equal(ipl_mp_read_hash64(&wrong, &h), IPL_E_TYPE);
    assert_int_equal(ipl_mp_skip(&wrong), 0);
    assert_int_equal(ipl_mp_read_hash64(&wrong, &h), IPL_E_TYPE);
}

static void test_skip_depth(void **state)
{
    (void)state;
    uint8_t buf[80];
    ipl_mp_reader_t r;
    /* 64 nested one-element arrays around a nil: allowed */
    memset(buf, 0x91, 64);
    buf[64] = 0xc0;
    buf[65] = 0x07;
    ipl_mp_reader_init(&r, buf, 66);
    assert_int_equal(ipl_mp_skip(&r), 0);
    assert_int_equal(ipl_mp_remaining(&r), 1);
    /* 65: refused, cursor unchanged */
    memset(buf, 0x91, 65);
    buf[65] = 0xc0;
    ipl_mp_reader_init(&r, buf, 66);
    assert_int_equal(ipl_mp_skip(&r), IPL_E_RANGE);
    assert_int_equal(ipl_mp_remaining(&r), 66);
    /* nested maps count the same way */
    memset(buf, 0x81, 65);
    ipl_mp_reader_init(&r, buf, 66);
    assert_int_equal(ipl_mp_skip(&r), IPL_E_TRUNCATED); /* a pair needs two bytes */
}

/* A buffer holding one of every format, as one array. */
static const uint8_t s_all[] = {
    0xdc, 0x00, 0x16, /* array16(22); the last is a map {"k": [nil], 1: fixext1} */
    0x05, 0xcc, 0x80, 0xcd, 0x01, 0x00, 0xce, 0x00, 0x01, 0x00, 0x00, 0xcf, 0,    0,    0,    1,
    0,    0,    0,    0,    0xe5, 0xd0, 0x80, 0xd1, 0x80, 0x00, 0xd2, 0x80, 0,    0,    0,    0xd3,
    0x80, 0,    0,    0,    0,    0,    0,    0,    0xca, 0x3f, 0x80, 0x00, 0x00, 0xcb, 0x3f, 0xf0,
    0,    0,    0,    0,    0,    0,    0xc0, 0xc3, 0xa2, 'h',  'i',  0xd9, 0x01, 'x',  0xda, 0x00,
    0x01, 'y',  0xdb, 0x00, 0x00, 0x00, 0x01, 'z',  0xc4, 0x01, 0x00, 0xc5, 0x00, 0x01, 0x00, 0xc6,
    0x00, 0x00, 0x00, 0x01, 0x00, 0x82, 0xa1, 'k',  0x91, 0xc0, 0x01, 0xd4, 0x01, 0x02};

static void test_truncated_everywhere(void **state)
{
    (void)state;
    ipl_mp_reader_t r;
    ipl_mp_reader_init(&r, s_all, sizeof s_all);
    assert_int_equal(ipl_mp_skip(&r), 0);
    assert_int_equal(ipl_mp_remaining(&r), 0);
    for (size_t cut = 0; cut < sizeof s_all; cut++) {
        ipl_mp_reader_init(&r, s_all, cut);
        assert_int_equal(ipl_mp_skip(&r), IPL_E_TRUNCATED);
        assert_true(r.pos == s_all && ipl_mp_remaining(&r) == cut);
    }
    /* every single value, cut anywhere inside it, fails without moving */
    ipl_mp_reader_t whole;
    ipl_mp_reader_init(&whole, s_all + 3, sizeof s_all - 3);
    while (ipl_mp_remaining(&whole) > 0) {
        ipl_mp_reader_t one = whole;
        assert_int_equal(ipl_mp_skip(&one), 0);
        size_t size = (size_t)(one.pos - whole.pos);
        for (size_t cut = 0; cut < size; cut++) {
            ipl_mp_reader_t t;
            ipl_mp_reader_init(&t, whole.pos, cut);
            uint64_t u;
            int64_t i;
            double d;
            bool b;
            const char *s;
            const uint8_t *bin;
            uint32_t len, n;
            /* a container's header alone may be plausible: only skip must fail then */
            bool container = (whole.pos[0] & 0xf0) == 0x80 || (whole.pos[0] & 0xf0) == 0x90;
            if (!container) {
                assert_int_equal(ipl_mp_peek(&t), IPL_MP_INVALID);
                assert_int_equal(ipl_mp_read_array(&t, &n), IPL_E_TRUNCATED);
                assert_int_equal(ipl_mp_read_map(&t, &n), IPL_E_TRUNCATED);
            }
            int rcs[] = {ipl_mp_read_uint(&t, &u),
                         ipl_mp_read_int(&t, &i),
                         ipl_mp_read_double(&t, &d),
                         ipl_mp_read_bool(&t, &b),
                         ipl_mp_read_str(&t, &s, &len),
                         ipl_mp_read_bin(&t, &bin, &len),
                         ipl_mp_read_hash64(&t, &u),
                         ipl_mp_read_nil(&t),
                         ipl_mp_skip(&t)};
            if (container)
                rcs[0] = rcs[1] = rcs[2] = rcs[3] = rcs[4] = rcs[5] = rcs[6] = rcs[7] =
                    IPL_E_TRUNCATED; /* wrong-type reads of a container are IPL_E_TYPE */
            for (size_t k = 0; k < sizeof rcs / sizeof rcs[0]; k++)
                assert_int_equal(rcs[k], IPL_E_TRUNCATED);
            assert_true(t.pos == whole.pos && ipl_mp_remaining(&t) == cut);
        }
        whole = one;
    }
}

/* Packs a sequence of values with msgpack-c (its smallest forms) and reads them back. */
static void test_against_msgpack_c(void **state)
{
    (void)state;
    static const int64_t ints[] = {
        0,         1,  127, 128, 255,  256,  65535,  65536,  4294967295LL,  4294967296LL,
        INT64_MAX, -1, -32, -33, -128, -129, -32768, -32769, -2147483648LL, -2147483649LL,
        INT64_MIN};
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    msgpack_packer pk;
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    size_t nints = sizeof ints / sizeof ints[0];
    msgpack_pack_array(&pk, (uint32_t)nints);
    for (size_t k = 0; k < nints; k++)
        msgpack_pack_int64(&pk, ints[k]);
    msgpack_pack_uint64(&pk, UINT64_MAX);
    msgpack_pack_float(&pk, 0.25f);
    msgpack_pack_double(&pk, -2.5e300);
    static char big[70000];
    memset(big, 'q', sizeof big);
    static const uint32_t lens[] = {0, 31, 32, 255, 256, 65535, 65536};
    for (size_t k = 0; k < sizeof lens / sizeof lens[0]; k++) {
        msgpack_pack_str(&pk, lens[k]);
        msgpack_pack_str_body(&pk, big, lens[k]);
        msgpack_pack_bin(&pk, lens[k]);
        msgpack_pack_bin_body(&pk, big, lens[k]);
    }
    msgpack_pack_map(&pk, 16); /* declares 16 pairs, holds one: 0 => [nil x 70000] */
    msgpack_pack_int(&pk, 0);
    msgpack_pack_array(&pk, 70000);
    for (int j = 0; j < 70000; j++)
        msgpack_pack_nil(&pk);

    ipl_mp_reader_t r;
    ipl_mp_reader_init(&r, sb.data, sb.size);
    uint32_t n;
    assert_int_equal(ipl_mp_read_array(&r, &n), 0);
    assert_int_equal(n, nints);
    for (size_t k = 0; k < nints; k++) {
        int64_t i;
        assert_int_equal(ipl_mp_read_int(&r, &i), 0);
        assert_true(i == ints[k]);
    }
    uint64_t u;
    assert_int_equal(ipl_mp_read_int(&r, &(int64_t){0}), IPL_E_RANGE);
    assert_int_equal(ipl_mp_read_uint(&r, &u), 0);
    assert_true(u == UINT64_MAX);
    double d;
    assert_int_equal(ipl_mp_read_double(&r, &d), 0);
    assert_true(d == 0.25);
    assert_int_equal(ipl_mp_read_double(&r, &d), 0);
    assert_true(d == -2.5e300);
    for (size_t k = 0; k < sizeof lens / sizeof lens[0]; k++) {
        const char *s;
        const uint8_t *b;
        uint32_t len;
        assert_int_equal(ipl_mp_read_str(&r, &s, &len), 0);
        assert_int_equal(len, lens[k]);
        assert_int_equal(ipl_mp_read_bin(&r, &b, &len), 0);
        assert_int_equal(len, lens[k]);
    }
    /* the map declares 16 pairs but holds one: the header is plausible, the skip is not */
    ipl_mp_reader_t m = r;
    assert_int_equal(ipl_mp_read_map(&m, &n), 0);
    assert_int_equal(n, 16);
    assert_int_equal(ipl_mp_skip(&r), IPL_E_TRUNCATED);
    assert_int_equal(ipl_mp_skip(&m), 0);
    assert_int_equal(ipl_mp_read_array(&m, &n), 0);
    assert_int_equal(n, 70000);
    msgpack_sbuffer_destroy(&sb);
}

static void test_empty_reader(void **state)
{
    (void)state;
    ipl_mp_reader_t r;
    ipl_mp_reader_init(&r, NULL, 0);
    assert_int_equal(ipl_mp_remaining(&r), 0);
    assert_int_equal(ipl_mp_peek(&r), IPL_MP_INVALID);
    assert_int_equal(ipl_mp_skip(&r), IPL_E_TRUNCATED);
    assert_int_equal(ipl_mp_try_nil(&r), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_uint_formats),
        cmocka_unit_test(test_int_formats),
        cmocka_unit_test(test_int_range),
        cmocka_unit_test(test_float_nil_bool),
        cmocka_unit_test(test_str_bin_formats),
        cmocka_unit_test(test_str_eq),
        cmocka_unit_test(test_array_map_formats),
        cmocka_unit_test(test_huge_declared_lengths),
        cmocka_unit_test(test_ext_skip),
        cmocka_unit_test(test_reserved_c1),
        cmocka_unit_test(test_hash64),
        cmocka_unit_test(test_skip_depth),
        cmocka_unit_test(test_truncated_everywhere),
        cmocka_unit_test(test_against_msgpack_c),
        cmocka_unit_test(test_empty_reader),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

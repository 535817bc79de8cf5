/*
 * Unit tests of ipl_sha256: the FIPS 180-4 / NIST example vectors (empty, "abc", the 448- and
 * 896-bit messages, a million 'a'), lengths around the padding boundaries (55..65, 119, 120,
 * 128 bytes; digests from Python's hashlib), and streaming in every split equals one shot.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "ipl_sha256.h"

static void s_hex(const uint8_t d[IPL_SHA256_LEN], char out[2 * IPL_SHA256_LEN + 1])
{
    for (int i = 0; i < IPL_SHA256_LEN; i++)
        snprintf(out + 2 * i, 3, "%02x", d[i]);
}

static void s_check(const void *data, size_t len, const char *hex)
{
    uint8_t d[IPL_SHA256_LEN];
    char got[2 * IPL_SHA256_LEN + 1];
    ipl_sha256(data, len, d);
    s_hex(d, got);
    assert_string_equal(got, hex);
}

static void test_nist_vectors(void **state)
{
    (void)state;
    s_check(NULL, 0, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    s_check("abc", 3, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    const char *m448 = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
    s_check(m448, strlen(m448), "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
    const char *m896 = "abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmno"
                       "ijklmnopjklmnopqklmnopqrlmnopqrsmnopqrstnopqrstu";
    s_check(m896, strlen(m896), "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1");
    char *a = malloc(1000000);
    assert_non_null(a);
    memset(a, 'a', 1000000);
    s_check(a, 1000000, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
    free(a);
}

static void test_padding_boundaries(void **state)
{
    (void)state;
    static const struct {
        size_t len;
        const char *hex;
    } v[] = {
        {55, "e7313d333c272e639f790978283f9eb392e843d0f29b7016828bb1daa4aac70b"},
        {56, "4324d65f3c103567f5589c710bc08f8523f929a9272e3af36fc968e52abc6c27"},
        {57, "35df609437dcfea3279283ab79fd554e2bf78f8f7ae2de532d8ee300b09e8f73"},
        {63, "81c80242132f230c3bd41b3e63bbcff16107339549214a99614ff26664625055"},
        {64, "39e3d7b6b5d075d37d053ad89b24b41bef4f3c29760c84447cab3f3be1882241"},
        {65, "aacca6ff74fdbb296d165a45cecfa04e5127bc008770fbbdd48006f2d2fae95e"},
        {119, "9ce7368e4daf32341631b492e80359dc9f594b48453cd0dd5bf0b19279cc177e"},
        {120, "7836b787757e95e58b3ca5aec90b1b004e8deba1e50e9675af9cabf1a13a04b5"},
        {128, "d2742f1f4ac6bb7ca2b239ee18402ba8b3f9f8e652d2a72973c2b9ba11c08cf6"},
    };
    uint8_t m[128];
    for (size_t i = 0; i < sizeof m; i++)
        m[i] = (uint8_t)(i * 7 + 3);
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++)
        s_check(m, v[i].len, v[i].hex);
}

static void test_streaming_equals_one_shot(void **state)
{
    (void)state;
    uint8_t m[300], whole[IPL_SHA256_LEN], parts[IPL_SHA256_LEN];
    for (size_t i = 0; i < sizeof m; i++)
        m[i] = (uint8_t)(i * 131 + 17);
    for (size_t len = 0; len <= sizeof m; len += 37) {
        ipl_sha256(m, len, whole);
        for (size_t a = 0; a <= len; a += 13)
            for (size_t b = a; b <= len; b += 29) {
                ipl_sha256_t h;
                ipl_sha256_init(&h);
                ipl_sha256_update(&h, m, a);
                ipl_sha256_update(&h, m + a, b - a);
                ipl_sha256_update(&h, NULL, 0);
                ipl_sha256_update(&h, m + b, len - b);
                ipl_sha256_final(&h, parts);
                assert_memory_equal(whole, parts, IPL_SHA256_LEN);
            }
    }
    /* A single changed bit changes the digest. */
    ipl_sha256(m, 100, whole);
    m[50] ^= 1;
    ipl_sha256(m, 100, parts);
    assert_memory_not_equal(whole, parts, IPL_SHA256_LEN);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_nist_vectors),
        cmocka_unit_test(test_padding_boundaries),
        cmocka_unit_test(test_streaming_equals_one_shot),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/*
 * Unit tests of labels_pii, table-driven: every detector's positives and near misses (where a
 * number stands, not only its check digit), counts, detectors switched off, names, and that
 * the mask is the same with and without counting (the early stop changes nothing).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "labels_checksum.h"
#include "labels_pii.h"

#define E  (1u << LABELS_PII_EMAIL)
#define P  (1u << LABELS_PII_PHONE)
#define I  (1u << LABELS_PII_IBAN)
#define C  (1u << LABELS_PII_CARD)
#define S  (1u << LABELS_PII_SSN)
#define CZ (1u << LABELS_PII_CZ_BIRTH_NUMBER)
#define UA (1u << LABELS_PII_UA_TAX_ID)

typedef struct {
    const char *text;
    uint32_t want;
} s_case_t;

static labels_pii_t s_all(void)
{
    return (labels_pii_t){.detectors = LABELS_PII_ALL, .today = labels_checksum_days(2025, 6, 1)};
}

static void s_names(uint32_t mask, char *out, size_t n)
{
    out[0] = '\0';
    for (int d = 0; d < LABELS_PII_COUNT; d++)
        if (mask >> d & 1) {
            size_t l = strlen(out);
            snprintf(out + l, n - l, "%s%s", l ? "," : "",
                     labels_pii_name((labels_pii_detector_t)d));
        }
}

static void s_run(const s_case_t *cases, size_t n)
{
    labels_pii_t pii = s_all();
    for (size_t i = 0; i < n; i++) {
        uint32_t counts[LABELS_PII_COUNT] = {0};
        const char *t = cases[i].text;
        uint32_t got = labels_pii_scan(&pii, t, strlen(t), NULL);
        uint32_t counted = labels_pii_scan(&pii, t, strlen(t), counts);
        if (got != cases[i].want || counted != got) {
            char g[128], w[128];
            s_names(got, g, sizeof g), s_names(cases[i].want, w, sizeof w);
            fail_msg("\"%s\": got {%s}, want {%s}", t, g, w);
        }
        for (int d = 0; d < LABELS_PII_COUNT; d++)
            assert_true((counts[d] > 0) == ((got >> d) & 1));
    }
}

#define RUN(cases) s_run(cases, sizeof cases / sizeof *cases)

static void test_email(void **state)
{
    (void)state;
    static const s_case_t cases[] = {
        {"Contact jan.novak@example.cz tomorrow.", E},
        {"john.smith+news@mail.example.co.uk", E},
        {"EMAIL: ALICE.W@EXAMPLE.ORG.", E},
        {"<support@help.example.io>", E},
        {"info@příklad.cz", E},
        {"mailto:sales@example.com?subject=x", E},
        {"x@y.zz", E},
        {"o'brien@example.ie", E},
        {"...dots@example.com", E},
        {"@john_doe", 0},
        {"admin@localhost", 0},
        {"a@b.c", 0},
        {"lodash@4.17.21", 0},
        {"@Override", 0},
        {"name@domain..com", 0},
        {"x@-example.com", 0},
        {"x@example-.com", 0},
        {"x@example.123", 0},
        {"trailing.@example.com", 0},
        {"dou..ble@example.com", 0},
        {"user@", 0},
        {"a@b.com@c", 0},
    };
    RUN(cases);
    // A local part of 64 bytes is the longest.
    char t[200];
    memset(t, 'a', 64);
    strcpy(t + 64, "@example.com");
    labels_pii_t pii = s_all();
    assert_int_equal(labels_pii_scan(&pii, t, strlen(t), NULL), E);
    memset(t, 'a', 65);
    strcpy(t + 65, "@example.com");
    assert_int_equal(labels_pii_scan(&pii, t, strlen(t), NULL), 0);
}

static void test_phone(void **state)
{
    (void)state;
    static const s_case_t cases[] = {
        {"Call +420 777 123 456 now", P},
        {"+1 (555) 123-4567", P},
        {"+44 20 7946 0958", P},
        {"Tel:+420777123456", P},
        {"+380 (67) 234-56-78", P},
        {"0049 30 1234567", P},
        {"(555) 123-4567", P},
        {"(555)123-4567", P},
        {"555-987-6543", P},
        {"212.555.0147", P},
        {"1-800-555-0199", P},
        {"030 1234567", P},
        {"(050) 123-45-67", P},
        {"089/12345678", P},
        {"07700 900123", P},
        {"tel. 777 123 456", P},
        {"Telefon: 224 123 456", P},
        {"Mobil 602 123 456", P},
        {"Тел.: 67 123 45 67", P},
        {"моб. 93 765 43 21", P},
        {"+5 points", 0},
        {"+1234567", 0},          // 7 digits
        {"+1234567890123456", 0}, // 16 digits
        {"2024-03-15", 0},
        {"15.03.2024", 0},
        {"03/15/2024", 0},
        {"10:30:45", 0},
        {"v1.2.3 and 2.10.4", 0},
        {"192.168.1.10", 0},
        {"Order 12345678", 0},
        {"$1,234.56", 0},
        {"1 299 Kč", 0},
        {"ISBN 978-3-16-148410-0", 0},
        {"555-12-3456", S},             // an SSN's shape, not a phone's
        {"Bestellnummer 100234567", 0}, // "tel" inside a word announces nothing
        {"hotel 777 123 456", 0},
        {"tel. 15.03.2024", 0}, // never a date
        {"(2019)", 0},
        {"012-45-6789", S},
    };
    RUN(cases);
}

static void test_iban(void **state)
{
    (void)state;
    static const s_case_t cases[] = {
        {"IBAN CZ65 0800 0000 1920 0014 5399.", I},
        {"IBAN:CZ6508000000192000145399", I},
        {"DE89370400440532013000", I},
        {"GB82 WEST 1234 5698 7654 32", I},
        {"cz65 0800 0000 1920 0014 5399", I},
        {"NO93 8601 1117 947", I},
        {"CZ66 0800 0000 1920 0014 5399", 0}, // check digits
        {"CZ65 0800 0000 1920 0014 539", 0},  // short
        {"CZ65080000001920001453990", 0},     // long
        {"CZ65 08000000 1920 0014 5399", 0},  // the groups of four broken
        {"xCZ6508000000192000145399", 0},     // inside a word
        {"CZ6508000000192000145399x", 0},
        {"US64 SVBK US6S 3300 9588 79", 0},
        {"DE44 ships in May", 0},
    };
    RUN(cases);
}

static void test_card(void **state)
{
    (void)state;
    static const s_case_t cases[] = {
        {"4111 1111 1111 1111", C},      {"4111-1111-1111-1111", C},
        {"4111111111111111", C},         {"3782 822463 10005", C},
        {"378282246310005", C},          {"Card: 5555 5555 5555 4444, exp 12/27", C},
        {"4111111111111111 12/25", C},   {"4111111111111111 5555555555554444", C},
        {"4111 1111 1111 1112", 0}, // Luhn
        {"1234 5678 9012 3452", 0}, // no issuer
        {"4111 1111 1111", 0},      // 12 digits
        {"4111 1111 1111 1111 1111", 0}, {"#4111111111111111", 0},
        {"GC-4111-1111-1111-1111", 0},   {"4111-1111-1111-1111-AB", 0},
        {"4111 1111-1111 1111", 0}, // mixed separators
        {"41 11 11 11 11 11 11 11", 0},  {"4111.1111.1111.1111", 0},
        {"+4111111111111111", 0},        {"4111111111111111%", 0},
        {"x4111111111111111", 0},
    };
    RUN(cases);
}

static void test_ssn(void **state)
{
    (void)state;
    static const s_case_t cases[] = {
        {"SSN 536-22-8174.", S}, {"ssn=536-22-8174", S}, {"536 22 8174", S},  {"000-12-3456", 0},
        {"666-12-3456", 0},      {"912-34-5678", 0},     {"123-00-4567", 0},  {"123-45-0000", 0},
        {"078-05-1120", 0},      {"123-45-67890", 0},    {"12-345-6789", 0},  {"1-536-22-8174", 0},
        {"536-22-8174-01", 0},   {"536-22 8174", 0},     {"536-22-8174x", 0},
    };
    RUN(cases);
}

static void test_cz_birth_number(void **state)
{
    (void)state;
    static const s_case_t cases[] = {
        {"RČ 710319/2745", CZ},
        {"710319/2745", CZ}, // the slash needs no word before it
        {"500601/454", CZ},  // 9 digits, 1950
        {"072504/7466", CZ}, // +20, 2007
        {"Rodné číslo 7103192745", CZ},
        {"rc=7103192745", CZ},
        {"7103192745", 0},        // ten bare digits: no word, no label
        {"source 7103192745", 0}, // "rc" inside a word
        {"710319/2746", 0},
        {"600601/454", 0},
        {"851315/1234", 0},
        {"710319/27456", 0},
        {"12/710319/2745", 0},
        {"710319/2745/2020", 0},
        {"19-2000145399/0800", 0},
    };
    RUN(cases);
}

static void test_ua_tax_id(void **state)
{
    (void)state;
    static const s_case_t cases[] = {
        {"РНОКПП 1759013776", UA},
        {"Мій ІПН: 2935782434.", UA},
        {"ідентифікаційний код 2935782434", UA},
        {"tax ID 2935782434", UA},
        {"ipn=2935782434", UA},
        {"Податковий номер пенсіонера 2935782434", UA}, // the word 28 characters before
        {"2935782434", 0},                              // no word naming it
        {"РНОКПП 2935782435", 0},                       // check digit
        {"ІПН 0501234567", 0},                          // born before 1930
        {"ІПН 5012345678", 0},                          // born after today
        {"ІПН #2935782434", 0},
        {"ІПН +2935782434", P}, // with a "+" it is a phone number
    };
    RUN(cases);
}

static void test_several_and_counts(void **state)
{
    (void)state;
    labels_pii_t pii = s_all();
    const char *t = "a@example.com, b@example.com; 4111 1111 1111 1111 and 5555-5555-5555-4444; "
                    "SSN 536-22-8174; +420 777 123 456";
    uint32_t counts[LABELS_PII_COUNT] = {0};
    assert_int_equal(labels_pii_scan(&pii, t, strlen(t), counts), E | C | S | P);
    assert_int_equal(counts[LABELS_PII_EMAIL], 2);
    assert_int_equal(counts[LABELS_PII_CARD], 2);
    assert_int_equal(counts[LABELS_PII_SSN], 1);
    assert_int_equal(counts[LABELS_PII_PHONE], 1);
    // Detectors switched off find nothing; the others still do.
    pii.detectors = C | S;
    assert_int_equal(labels_pii_scan(&pii, t, strlen(t), NULL), C | S);
    pii.detectors = 0;
    assert_int_equal(labels_pii_scan(&pii, t, strlen(t), NULL), 0);
    pii.detectors = LABELS_PII_ALL;
    assert_int_equal(labels_pii_scan(&pii, NULL, 0, NULL), 0);
    assert_int_equal(labels_pii_scan(&pii, "", 0, NULL), 0);
    // With IBAN off, an IBAN's digits are not taken for another number.
    pii.detectors = LABELS_PII_ALL & ~I;
    const char *iban = "DE89 3704 0044 0532 0130 00";
    assert_int_equal(labels_pii_scan(&pii, iban, strlen(iban), NULL), 0);
}

static void test_names(void **state)
{
    (void)state;
    assert_string_equal(labels_pii_name(LABELS_PII_EMAIL), "email");
    assert_string_equal(labels_pii_label(LABELS_PII_UA_TAX_ID), "pii:ua_tax_id");
    assert_null(labels_pii_name(LABELS_PII_COUNT));
    assert_null(labels_pii_label((labels_pii_detector_t)-1));
    assert_int_equal(labels_pii_find("iban", 4), LABELS_PII_IBAN);
    assert_int_equal(labels_pii_find("pii:cz_birth_number", 19), LABELS_PII_CZ_BIRTH_NUMBER);
    assert_int_equal(labels_pii_find("ibanx", 5), -1);
    assert_int_equal(labels_pii_find("iba", 3), -1);
    labels_pii_t now = labels_pii_make(LABELS_PII_ALL | 0x100);
    assert_int_equal(now.detectors, LABELS_PII_ALL);
    assert_true(now.today > labels_checksum_days(2024, 1, 1));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_email),     cmocka_unit_test(test_phone),
        cmocka_unit_test(test_iban),      cmocka_unit_test(test_card),
        cmocka_unit_test(test_ssn),       cmocka_unit_test(test_cz_birth_number),
        cmocka_unit_test(test_ua_tax_id), cmocka_unit_test(test_several_and_counts),
        cmocka_unit_test(test_names),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

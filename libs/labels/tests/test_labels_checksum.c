/*
 * Unit tests of labels_checksum, table-driven: dates, Luhn and issuer prefixes, the IBAN
 * registry and mod 97, SSN ranges, Czech/Slovak birth numbers (check digit, the historical
 * remainder-10 rule, the +20/+50/+70 months, 9-digit numbers, future dates), Ukrainian
 * taxpayer numbers (weights, negative sums, the birth-date window).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "labels_checksum.h"

static int32_t s_today(void)
{
    return labels_checksum_days(2025, 6, 1);
}

static void test_days_and_dates(void **state)
{
    (void)state;
    assert_int_equal(labels_checksum_days(1970, 1, 1), 0);
    assert_int_equal(labels_checksum_days(1970, 1, 2), 1);
    assert_int_equal(labels_checksum_days(1969, 12, 31), -1);
    assert_int_equal(labels_checksum_days(2000, 3, 1), 11017);
    assert_int_equal(labels_checksum_days(1899, 12, 31), -25568);
    assert_int_equal(labels_checksum_days(2024, 2, 29) + 1, labels_checksum_days(2024, 3, 1));
    assert_true(labels_checksum_date_valid(2024, 2, 29));
    assert_false(labels_checksum_date_valid(2023, 2, 29));
    assert_false(labels_checksum_date_valid(1900, 2, 29));
    assert_true(labels_checksum_date_valid(2000, 2, 29));
    assert_false(labels_checksum_date_valid(2024, 4, 31));
    assert_false(labels_checksum_date_valid(2024, 13, 1));
    assert_false(labels_checksum_date_valid(2024, 0, 1));
    assert_false(labels_checksum_date_valid(2024, 1, 0));
}

typedef struct {
    const char *s;
    bool ok;
} s_case_t;

static void test_luhn_and_cards(void **state)
{
    (void)state;
    static const s_case_t luhn[] = {{"79927398713", true}, {"79927398710", false}, {"0", false},
                                    {"00", true},          {"18", true},           {"1x", false}};
    for (size_t i = 0; i < sizeof luhn / sizeof *luhn; i++)
        if (labels_checksum_luhn(luhn[i].s, strlen(luhn[i].s)) != luhn[i].ok)
            fail_msg("luhn(%s) should be %d", luhn[i].s, luhn[i].ok);
    static const s_case_t cards[] = {
        {"4111111111111111", true},      // Visa
        {"4222222222222", true},         // Visa, 13 digits
        {"4111111111111111110", true},   // Visa, 19 digits
        {"411111111111111", false},      // Visa has no 15-digit numbers
        {"5555555555554444", true},      // Mastercard
        {"2223003122003222", true},      // Mastercard 2-series
        {"2721003122003229", false},     // past the 2-series (Luhn valid)
        {"378282246310005", true},       // American Express
        {"3782822463100052", false},     // Amex has 15 digits (Luhn valid)
        {"6011111111111117", true},      // Discover
        {"3530111333300000", true},      // JCB
        {"30569309025904", true},        // Diners, 14 digits
        {"6200000000000005", true},      // UnionPay
        {"2200000000000004", true},      // Mir
        {"6759649826438453", true},      // Maestro UK
        {"4111111111111112", false},     // Luhn fails
        {"1234567890123452", false},     // Luhn passes, no issuer starts with 1
        {"9000000000000001", false},     // nor with 9
        {"411111111111", false},         // 12 digits
        {"41111111111111111111", false}, // 20 digits
        {"41111111111111a1", false},
    };
    for (size_t i = 0; i < sizeof cards / sizeof *cards; i++)
        if (labels_checksum_card(cards[i].s, strlen(cards[i].s)) != cards[i].ok)
            fail_msg("card(%s) should be %d", cards[i].s, cards[i].ok);
    // The near misses above that only the issuer table or the length rejects are Luhn valid.
    static const char *const valid[] = {"1234567890123452", "2721003122003229", "3782822463100052",
                                        "9000000000000001"};
    for (size_t i = 0; i < sizeof valid / sizeof *valid; i++)
        assert_true(labels_checksum_luhn(valid[i], 16));
}

static void test_iban(void **state)
{
    (void)state;
    assert_int_equal(labels_checksum_iban_length("CZ"), 24);
    assert_int_equal(labels_checksum_iban_length("DE"), 22);
    assert_int_equal(labels_checksum_iban_length("NO"), 15);
    assert_int_equal(labels_checksum_iban_length("LC"), 32);
    assert_int_equal(labels_checksum_iban_length("RU"), 33);
    assert_int_equal(labels_checksum_iban_length("US"), 0);
    assert_int_equal(labels_checksum_iban_length("cz"), 0); // upper case only here
    static const s_case_t cases[] = {
        {"CZ6508000000192000145399", true},
        {"DE89370400440532013000", true},
        {"GB82WEST12345698765432", true},
        {"UA213223130000026007233566001", true},
        {"NO9386011117947", true},
        {"FR1420041010050500013M02606", true},
        {"CZ6608000000192000145399", false},  // check digits
        {"CZ650800000019200014539", false},   // one short
        {"CZ65080000001920001453990", false}, // one long
        {"DE89370400440532013001", false},    // mod 97
        {"US64SVBKUS6S3300958879", false},    // no IBAN country
        {"DEXX370400440532013000", false},    // check digits are digits
        {"GB82west12345698765432", false},    // upper case only
        {"CZ65 0800000019200014539", false},  // a space is no character of it
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
        if (labels_checksum_iban(cases[i].s, strlen(cases[i].s)) != cases[i].ok)
            fail_msg("iban(%s) should be %d", cases[i].s, cases[i].ok);
}

static void test_ssn(void **state)
{
    (void)state;
    static const s_case_t cases[] = {
        {"536228174", true},  {"001010001", true},  {"899999999", true},  {"665123456", true},
        {"667123456", true},  {"000123456", false}, {"666123456", false}, {"900123456", false},
        {"999999999", false}, {"123004567", false}, {"123450000", false}, {"078051120", false},
        {"219099999", false}, {"12345678x", false},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
        if (labels_checksum_ssn(cases[i].s) != cases[i].ok)
            fail_msg("ssn(%s) should be %d", cases[i].s, cases[i].ok);
}

static void test_cz_birth_number(void **state)
{
    (void)state;
    static const s_case_t cases[] = {
        {"7103192745", true},   // 1971-03-19, divisible by 11
        {"7103192746", false},  // check digit
        {"7153192740", true},   // +50 (a woman); 715319274 leaves 10: the old rule, check digit 0
        {"7153192741", false},  // … and no other check digit
        {"8502284504", false},  // 1985-02-28 with a wrong check digit
        {"0725047466", true},   // 2007-05-04 with +20: allowed from 2004
        {"8523150000", false},  // +20 in 1985
        {"7803150000", false},  // remainder 10 → 0 allowed before 1986: 780315000 % 11 != 10
        {"500601454", true},    // 9 digits: 1950-06-01
        {"600601454", false},   // 9 digits after 1953
        {"8513151234", false},  // month 13
        {"8501321239", false},  // day 32
        {"8502290000", false},  // 1985 is no leap year
        {"4512310000", false},  // 2045: in the future
        {"85522912345", false}, // 11 digits
        {"85022", false},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
        if (labels_checksum_cz_birth_number(cases[i].s, strlen(cases[i].s), s_today()) !=
            cases[i].ok)
            fail_msg("cz_birth_number(%s) should be %d", cases[i].s, cases[i].ok);
    // The historical rule: the first nine digits leave 10, the check digit 0 — before 1986.
    char b[24];
    int found = 0;
    for (int serial = 0; serial < 1000 && found < 2; serial++) {
        snprintf(b, sizeof b, "780315%03d0", serial);
        long long v = 0;
        for (int k = 0; k < 9; k++)
            v = v * 10 + (b[k] - '0');
        if (v % 11 != 10) continue;
        assert_true(labels_checksum_cz_birth_number(b, 10, s_today()));
        b[1] = '9'; // 1998: too late for the old rule
        memcpy(b, "98", 2);
        v = 0;
        for (int k = 0; k < 9; k++)
            v = v * 10 + (b[k] - '0');
        if (v % 11 == 10) assert_false(labels_checksum_cz_birth_number(b, 10, s_today()));
        found++;
    }
    assert_true(found > 0);
    // A date after today is no birth date: 2025-06-02 with today 2025-06-01.
    for (int serial = 0; serial < 1000; serial++) {
        snprintf(b, sizeof b, "250602%03d", serial);
        long long v = 0;
        for (int k = 0; k < 9; k++)
            v = v * 10 + (b[k] - '0');
        int check = (int)((11 - v * 10 % 11) % 11);
        if (check == 10) continue;
        b[9] = (char)('0' + check), b[10] = '\0';
        assert_false(labels_checksum_cz_birth_number(b, 10, s_today()));
        assert_true(labels_checksum_cz_birth_number(b, 10, s_today() + 1));
        break;
    }
}

static void test_ua_tax_id(void **state)
{
    (void)state;
    static const s_case_t cases[] = {
        {"1759013776", true},  // 1948-02-28 (python-stdnum's example)
        {"1759013770", false}, // check digit
        {"2935782434", true},  // 1980-05-17
        {"0501234567", false}, // born 1913: a phone number's shape
        {"1095700000", false}, // 1929-12-31 (day 10957), before the window
        {"5012345678", false}, // 2037: in the future
        {"175901377x", false},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
        if (labels_checksum_ua_tax_id(cases[i].s, s_today()) != cases[i].ok)
            fail_msg("ua_tax_id(%s) should be %d", cases[i].s, cases[i].ok);
    // Weighted sums below zero: 9000000000 sums to -9, mod 11 (as Python) 2, check digit 2.
    assert_false(labels_checksum_ua_tax_id("9000000002", s_today())); // a future date
    assert_true(labels_checksum_ua_tax_id("9000000002", labels_checksum_days(2200, 1, 1)));
    assert_false(labels_checksum_ua_tax_id("9000000009", labels_checksum_days(2200, 1, 1)));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_days_and_dates),
        cmocka_unit_test(test_luhn_and_cards),
        cmocka_unit_test(test_iban),
        cmocka_unit_test(test_ssn),
        cmocka_unit_test(test_cz_birth_number),
        cmocka_unit_test(test_ua_tax_id),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

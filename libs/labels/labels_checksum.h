/*
 * labels_checksum — the check-digit, length and range rules of the identifiers labels_pii
 * detects, apart from where they stand in a text.
 *
 * Each function takes the identifier's characters with its separators removed ("CZ65 0800 …"
 * as "CZ650800…", "855229/1234" as "8552291234") and only reads them. Dates are days since
 * 1970-01-01 (labels_checksum_days); `today` bounds birth dates, so that a number whose date
 * lies in the future is no birth number. Pure functions: any thread.
 */
#ifndef LABELS_CHECKSUM_H
#define LABELS_CHECKSUM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Days from 1970-01-01 to y-m-d in the proleptic Gregorian calendar (negative before 1970).
 * m in 1..12, d in 1..31 (not checked: see labels_checksum_date_valid). */
int32_t labels_checksum_days(int y, int m, int d);

/* True when d is a day of month m of year y. */
bool labels_checksum_date_valid(int y, int m, int d);

/* Luhn (mod 10) over n >= 2 ASCII digits, the last one the check digit. */
bool labels_checksum_luhn(const char *digits, size_t n);

/* A payment card number: 13..19 digits, a known issuer prefix (IIN: Visa, Mastercard, American
 * Express, Discover, JCB, Diners Club, UnionPay, Maestro, Mir) with a length that issuer uses,
 * and Luhn valid. */
bool labels_checksum_card(const char *digits, size_t n);

/* The IBAN length of country `cc` (two upper-case letters) in the SWIFT IBAN registry, 0 when
 * the country has none. */
int labels_checksum_iban_length(const char cc[2]);

/* ISO 13616: two upper-case letters of a registry country, two check digits, the BBAN of
 * upper-case letters and digits, the country's length, and mod 97 of the rearranged number
 * (the first four characters moved to the end, A = 10 … Z = 35) equal to 1. */
bool labels_checksum_iban(const char *iban, size_t n);

/* A US Social Security number, 9 digits AAAGGSSSS: area 001..899 but 666, group 01..99,
 * serial 0001..9999 (the SSA never issues the others), and not one of the two numbers the
 * SSA voided after they appeared in print (078-05-1120, 219-09-9999). No checksum exists. */
bool labels_checksum_ssn(const char digits[9]);

/* A Czech or Slovak birth number (rodné číslo) YYMMDDXXX[X]:
 *  - 10 digits (born 1954 or later; YY >= 54 is 19YY, else 20YY): the number divisible by 11,
 *    or — numbers issued before 1986 — the first nine digits leaving 10 and the last one 0;
 *  - 9 digits (born before 1954, 19YY with YY <= 53): no check digit;
 *  - MM is the month, +50 for women, and from 2004 on also +20 (men) or +70 (women);
 *  - the date exists and is not after `today`. */
bool labels_checksum_cz_birth_number(const char *digits, size_t n, int32_t today);

/* A Ukrainian taxpayer number (РНОКПП), 10 digits: the first five the birth date as days after
 * 1899-12-31, here between 1930-01-01 and `today` (older people's numbers, and the 0…
 * prefixes of Ukrainian phone numbers, are not taken), and the tenth the check digit
 * (Σ d[i]·w[i] over the first nine with w = -1, 5, 7, 9, 4, 6, 10, 5, 7) mod 11 mod 10. */
bool labels_checksum_ua_tax_id(const char digits[10], int32_t today);

#endif

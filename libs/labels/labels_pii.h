/*
 * labels_pii — the built-in personal-data detectors: which of them find something in a text.
 *
 *   detector          label                 what it takes (docs/tenants.md, "Labels")
 *   EMAIL             pii:email             local@domain.tld: RFC 5322 atext local part of at
 *                                           most 64 bytes, a dotted domain, a TLD of >= 2 letters
 *   PHONE             pii:phone             +<country><digits> (8..15 digits), 00<country>…,
 *                                           (NXX) NXX-XXXX and NXX-NXX-XXXX, national numbers
 *                                           with a trunk 0 and separators, and any grouped 7..15
 *                                           digits right after a word such as "tel", "phone",
 *                                           "mobil", "тел" — never a date shape
 *   IBAN              pii:iban              ISO 13616, optionally in groups of four
 *   CARD              pii:card              13..19 digits, whole or in groups (4-4-4-4, 4-6-5),
 *                                           a known issuer prefix, Luhn
 *   SSN               pii:ssn               AAA-GG-SSSS (or with spaces) outside the SSA's
 *                                           never-issued ranges
 *   CZ_BIRTH_NUMBER   pii:cz_birth_number   YYMMDD/XXXX, YYMMDD/XXX (before 1954); ten bare
 *                                           digits only after a word such as "rodné číslo", "RČ"
 *   UA_TAX_ID         pii:ua_tax_id         10 digits, РНОКПП check digit and birth date, after
 *                                           a word such as "РНОКПП", "ІПН", "податковий", "tax"
 *                                           (a bare 10-digit number passes 1 time in 30)
 *
 * Where a number stands matters as much as its check digit: it must stand alone — not inside a
 * word, a longer number, a decimal ("1,234"), a time ("10:30"), a version ("v1.2.3"), an
 * identifier ("#4111…", "ID-…", "/orders/…", "?id=…") or a price ("100€"); a grouped number
 * must be all of its run of groups, or be joined to its neighbours by spaces only when its own
 * separator is another. The checksums themselves are labels_checksum's.
 *
 * Nothing of the text is kept or returned: only which detectors fired (and, for tests, how
 * often). Pure: any thread; nothing allocates. One pass over the bytes, skipping to the next
 * digit or '@', plus a bounded look at each number and address found.
 */
#ifndef LABELS_PII_H
#define LABELS_PII_H

#include <stddef.h>
#include <stdint.h>

typedef enum {
    LABELS_PII_EMAIL = 0,
    LABELS_PII_PHONE,
    LABELS_PII_IBAN,
    LABELS_PII_CARD,
    LABELS_PII_SSN,
    LABELS_PII_CZ_BIRTH_NUMBER,
    LABELS_PII_UA_TAX_ID,
    LABELS_PII_COUNT
} labels_pii_detector_t;

#define LABELS_PII_ALL ((1u << LABELS_PII_COUNT) - 1)

/* The settings of a scan: a value, copied freely. */
typedef struct {
    uint32_t detectors; /* bit (1 << labels_pii_detector_t) per detector that runs */
    int32_t today;      /* days since 1970-01-01: later birth dates are no birth dates */
} labels_pii_t;

/* Settings for `detectors`, today from the clock (UTC). */
labels_pii_t labels_pii_make(uint32_t detectors);

/* The label of detector d ("pii:email", …), NULL when d is out of range. */
const char *labels_pii_label(labels_pii_detector_t d);

/* The detector's short name, as operators list them ("email", "phone", "iban", "card", "ssn",
 * "cz_birth_number", "ua_tax_id"), NULL when d is out of range. */
const char *labels_pii_name(labels_pii_detector_t d);

/* The detector named `name` (short name or label, exactly), or -1. */
int labels_pii_find(const char *name, size_t len);

/* Which detectors fire on text[0 .. len) (a bit per detector, among self->detectors). With
 * `counts` (LABELS_PII_COUNT entries, added to), every match is counted; without, the scan
 * stops once every detector has fired. text may be NULL when len is 0. */
uint32_t labels_pii_scan(const labels_pii_t *self, const char *text, size_t len, uint32_t *counts);

#endif

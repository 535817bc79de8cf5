/*
 * labels_checksum — see labels_checksum.h.
 */
#include "labels_checksum.h"

#include <string.h>

int32_t labels_checksum_days(int y, int m, int d)
{
    /* Howard Hinnant's days_from_civil: March-based years, 400-year eras. */
    y -= m <= 2;
    int era = (y >= 0 ? y : y - 399) / 400;
    int yoe = y - era * 400;
    int doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    int doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + doe - 719468;
}

bool labels_checksum_date_valid(int y, int m, int d)
{
    static const unsigned char mdays[12] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    if (m < 1 || m > 12 || d < 1) return false;
    bool leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    return d <= mdays[m - 1] + (m == 2 && leap);
}

static int s_num(const char *s, size_t n)
{
    int v = 0;
    for (size_t i = 0; i < n; i++)
        v = v * 10 + (s[i] - '0');
    return v;
}

bool labels_checksum_luhn(const char *digits, size_t n)
{
    if (n < 2) return false;
    unsigned sum = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned d = (unsigned)(digits[n - 1 - i] - '0');
        if (d > 9) return false;
        if (i & 1) d = d * 2 > 9 ? d * 2 - 9 : d * 2;
        sum += d;
    }
    return sum % 10 == 0;
}

/* Issuer prefixes: the first `digits` digits of the number in [lo, hi], lengths min..max. */
typedef struct {
    uint32_t lo, hi;
    uint8_t digits, min, max;
} s_iin_t;

static const s_iin_t s_iins[] = {
    {4, 4, 1, 13, 19},       /* Visa (13, 16, 19; checked below) */
    {51, 55, 2, 16, 16},     /* Mastercard */
    {2221, 2720, 4, 16, 16}, /* Mastercard 2-series */
    {34, 34, 2, 15, 15},     /* American Express */
    {37, 37, 2, 15, 15},     /* American Express */
    {6011, 6011, 4, 16, 19}, /* Discover */
    {644, 649, 3, 16, 19},   /* Discover */
    {65, 65, 2, 16, 19},     /* Discover */
    {3528, 3589, 4, 16, 19}, /* JCB */
    {300, 305, 3, 14, 19},   /* Diners Club International */
    {3095, 3095, 4, 14, 19}, /* Diners Club International */
    {36, 36, 2, 14, 19},     /* Diners Club International */
    {38, 39, 2, 16, 19},     /* Diners Club */
    {62, 62, 2, 16, 19},     /* UnionPay (and Discover's 622126-622925) */
    {2200, 2204, 4, 16, 19}, /* Mir */
    {5018, 5018, 4, 13, 19}, /* Maestro */
    {5020, 5020, 4, 13, 19}, /* Maestro */
    {5038, 5038, 4, 13, 19}, /* Maestro */
    {5893, 5893, 4, 13, 19}, /* Maestro */
    {6304, 6304, 4, 13, 19}, /* Maestro */
    {6759, 6759, 4, 13, 19}, /* Maestro UK */
    {6761, 6763, 4, 13, 19}, /* Maestro */
};

bool labels_checksum_card(const char *digits, size_t n)
{
    if (n < 13 || n > 19) return false;
    for (size_t i = 0; i < n; i++)
        if (digits[i] < '0' || digits[i] > '9') return false;
    bool known = false;
    for (size_t k = 0; k < sizeof s_iins / sizeof *s_iins && !known; k++) {
        const s_iin_t *t = &s_iins[k];
        uint32_t p = (uint32_t)s_num(digits, t->digits);
        known = p >= t->lo && p <= t->hi && n >= t->min && n <= t->max;
        if (known && t->lo == 4) known = n == 13 || n == 16 || n == 19;
    }
    return known && labels_checksum_luhn(digits, n);
}

/* The SWIFT IBAN registry: country code and IBAN length. */
static const struct {
    char cc[3];
    uint8_t len;
} s_ibans[] = {
    {"AD", 24}, {"AE", 23}, {"AL", 28}, {"AT", 20}, {"AZ", 28}, {"BA", 20}, {"BE", 16}, {"BG", 22},
    {"BH", 22}, {"BI", 27}, {"BR", 29}, {"BY", 28}, {"CH", 21}, {"CR", 22}, {"CY", 28}, {"CZ", 24},
    {"DE", 22}, {"DJ", 27}, {"DK", 18}, {"DO", 28}, {"EE", 20}, {"EG", 29}, {"ES", 24}, {"FI", 18},
    {"FK", 18}, {"FO", 18}, {"FR", 27}, {"GB", 22}, {"GE", 22}, {"GI", 23}, {"GL", 18}, {"GR", 27},
    {"GT", 28}, {"HN", 28}, {"HR", 21}, {"HU", 28}, {"IE", 22}, {"IL", 23}, {"IQ", 23}, {"IS", 26},
    {"IT", 27}, {"JO", 30}, {"KW", 30}, {"KZ", 20}, {"LB", 28}, {"LC", 32}, {"LI", 21}, {"LT", 20},
    {"LU", 20}, {"LV", 21}, {"LY", 25}, {"MC", 27}, {"MD", 24}, {"ME", 22}, {"MK", 19}, {"MN", 20},
    {"MR", 27}, {"MT", 31}, {"MU", 30}, {"NI", 28}, {"NL", 18}, {"NO", 15}, {"OM", 23}, {"PK", 24},
    {"PL", 28}, {"PS", 29}, {"PT", 25}, {"QA", 29}, {"RO", 24}, {"RS", 22}, {"RU", 33}, {"SA", 24},
    {"SC", 31}, {"SD", 18}, {"SE", 24}, {"SI", 19}, {"SK", 24}, {"SM", 27}, {"SO", 23}, {"ST", 25},
    {"SV", 28}, {"TL", 23}, {"TN", 24}, {"TR", 26}, {"UA", 29}, {"VA", 22}, {"VG", 24}, {"XK", 20},
    {"YE", 30},
};

int labels_checksum_iban_length(const char cc[2])
{
    for (size_t k = 0; k < sizeof s_ibans / sizeof *s_ibans; k++)
        if (s_ibans[k].cc[0] == cc[0] && s_ibans[k].cc[1] == cc[1]) return s_ibans[k].len;
    return 0;
}

bool labels_checksum_iban(const char *iban, size_t n)
{
    if (n < 5 || (size_t)labels_checksum_iban_length(iban) != n) return false;
    if (iban[2] < '0' || iban[2] > '9' || iban[3] < '0' || iban[3] > '9') return false;
    unsigned r = 0;
    for (size_t k = 0; k < n; k++) {
        char c = iban[(k + 4) % n]; /* the BBAN, then the country and check digits */
        if (c >= '0' && c <= '9')
            r = (r * 10 + (unsigned)(c - '0')) % 97;
        else if (c >= 'A' && c <= 'Z')
            r = (r * 100 + (unsigned)(c - 'A' + 10)) % 97;
        else
            return false;
    }
    return r == 1;
}

bool labels_checksum_ssn(const char digits[9])
{
    for (int i = 0; i < 9; i++)
        if (digits[i] < '0' || digits[i] > '9') return false;
    int area = s_num(digits, 3), group = s_num(digits + 3, 2), serial = s_num(digits + 5, 4);
    if (area == 0 || area == 666 || area >= 900 || group == 0 || serial == 0) return false;
    return memcmp(digits, "078051120", 9) != 0 && memcmp(digits, "219099999", 9) != 0;
}

bool labels_checksum_cz_birth_number(const char *digits, size_t n, int32_t today)
{
    if (n != 9 && n != 10) return false;
    for (size_t i = 0; i < n; i++)
        if (digits[i] < '0' || digits[i] > '9') return false;
    int yy = s_num(digits, 2), mm = s_num(digits + 2, 2), dd = s_num(digits + 4, 2);
    int year = n == 9 ? (yy <= 53 ? 1900 + yy : -1) : (yy >= 54 ? 1900 + yy : 2000 + yy);
    if (year < 0) return false;
    int month = mm > 70 ? mm - 70 : mm > 50 ? mm - 50 : mm > 20 ? mm - 20 : mm;
    if ((mm > 20 && mm <= 32) || mm > 70) { /* the +20 / +70 series exists since 2004 */
        if (year < 2004) return false;
    }
    if (!labels_checksum_date_valid(year, month, dd)) return false;
    if (labels_checksum_days(year, month, dd) > today) return false;
    if (n == 9) return true;
    long long v = 0;
    for (int i = 0; i < 9; i++)
        v = v * 10 + (digits[i] - '0');
    int last = digits[9] - '0';
    if ((v * 10 + last) % 11 == 0) return true;
    return v % 11 == 10 && last == 0 && year < 1986;
}

bool labels_checksum_ua_tax_id(const char digits[10], int32_t today)
{
    static const int w[9] = {-1, 5, 7, 9, 4, 6, 10, 5, 7};
    int sum = 0;
    for (int i = 0; i < 10; i++)
        if (digits[i] < '0' || digits[i] > '9') return false;
    for (int i = 0; i < 9; i++)
        sum += w[i] * (digits[i] - '0');
    int check = ((sum % 11) + 11) % 11 % 10;
    if (check != digits[9] - '0') return false;
    int32_t born = labels_checksum_days(1899, 12, 31) + s_num(digits, 5);
    return born >= labels_checksum_days(1930, 1, 1) && born <= today;
}

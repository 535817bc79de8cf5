/*
 * ipl_mp — bounds-checked, allocation-free msgpack reader (see ipl_mp.h).
 *
 * Every read goes through s_head(), which decodes the header of the next value without moving
 * the cursor and checks that the whole value header — and, for str/bin/ext, its payload; for
 * array/map, a lower bound of its contents — fits in the bytes left. The public readers then
 * check the type and commit the cursor in one step, so a failed read never moves it.
 *
 * The hot encodings (positive ints, fixstr, array and map headers: token ids, block hashes,
 * map keys) first try a fast path that applies the same checks to that one encoding; anything
 * else, including every error, falls through to s_head().
 */
#include "ipl_mp.h"

#include <endian.h>
#include <string.h>

#include "ipl_error.h"

/* The decoded header of the next value. */
typedef struct {
    ipl_mp_type_t type;
    size_t size; /* bytes to consume for a scalar, str, bin or ext (header + payload); the
                    header alone for array and map */
    uint64_t u;  /* IPL_MP_UINT value; str/bin/ext payload length; array/map element count */
    int64_t i;   /* IPL_MP_INT value (always negative) */
    double d;    /* IPL_MP_FLOAT value */
    bool b;      /* IPL_MP_BOOL value */
    const uint8_t *data; /* str/bin/ext payload */
} s_head_t;

static uint64_t s_be(const uint8_t *p, size_t n)
{
    uint64_t v = 0;
    for (size_t k = 0; k < n; k++)
        v = (v << 8) | p[k];
    return v;
}

static double s_f32(const uint8_t *p)
{
    uint32_t bits = (uint32_t)s_be(p, 4);
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

static double s_f64(const uint8_t *p)
{
    uint64_t bits = s_be(p, 8);
    double d;
    memcpy(&d, &bits, sizeof d);
    return d;
}

/* A signed int of `n` bytes: non-negative values are reported as UINT (see ipl_mp_type_t). */
static void s_signed(s_head_t *h, const uint8_t *p, size_t n)
{
    uint64_t raw = s_be(p, n);
    int64_t v;
    if (n < 8 && (raw >> (8 * n - 1)) & 1) raw |= ~UINT64_C(0) << (8 * n); /* sign-extend */
    memcpy(&v, &raw, sizeof v);
    if (v < 0) {
        h->type = IPL_MP_INT;
        h->i = v;
    } else {
        h->type = IPL_MP_UINT;
        h->u = (uint64_t)v;
    }
}

/* Decodes the header at r->pos into h; 0, IPL_E_TRUNCATED, or IPL_E_TYPE (0xc1). */
static int s_head(const ipl_mp_reader_t *r, s_head_t *h)
{
    size_t left = ipl_mp_remaining(r);
    if (left == 0) return IPL_E_TRUNCATED;
    const uint8_t *p = r->pos;
    uint8_t tag = p[0];
    size_t fixed = 0;   /* bytes after the tag holding a value or a length */
    size_t payload = 0; /* 1 for ext: the ext type byte, counted with the data */
    memset(h, 0, sizeof *h);

    if (tag <= 0x7f) {
        h->type = IPL_MP_UINT;
        h->u = tag;
    } else if (tag >= 0xe0) {
        h->type = IPL_MP_INT;
        h->i = (int8_t)tag;
    } else if ((tag & 0xe0) == 0xa0) {
        h->type = IPL_MP_STR;
        h->u = tag & 0x1f;
    } else if ((tag & 0xf0) == 0x90) {
        h->type = IPL_MP_ARRAY;
        h->u = tag & 0x0f;
    } else if ((tag & 0xf0) == 0x80) {
        h->type = IPL_MP_MAP;
        h->u = tag & 0x0f;
    } else {
        static const uint8_t s_fixed[0x20] = {
            /* c0 nil, c1 -, c2 false, c3 true, c4-c6 bin8/16/32, c7-c9 ext8/16/32 */
            0, 0, 0, 0, 1, 2, 4, 1, 2, 4,
            /* ca f32, cb f64, cc-cf u8..u64, d0-d3 i8..i64 */
            4, 8, 1, 2, 4, 8, 1, 2, 4, 8,
            /* d4-d8 fixext 1/2/4/8/16 (the type byte only), d9-db str8/16/32 */
            1, 1, 1, 1, 1, 1, 2, 4,
            /* dc-dd array16/32, de-df map16/32 */
            2, 4, 2, 4};
        fixed = s_fixed[tag - 0xc0];
        if (tag == 0xc1) return IPL_E_TYPE;
        if (left < 1 + fixed) return IPL_E_TRUNCATED;
        const uint8_t *v = p + 1;
        switch (tag) {
        case 0xc0:
            h->type = IPL_MP_NIL;
            break;
        case 0xc2:
        case 0xc3:
            h->type = IPL_MP_BOOL;
            h->b = tag == 0xc3;
            break;
        case 0xc4:
        case 0xc5:
        case 0xc6:
            h->type = IPL_MP_BIN;
            h->u = s_be(v, fixed);
            break;
        case 0xc7:
        case 0xc8:
        case 0xc9:
            /* ext8/16/32: length, then the type byte, then the data */
            h->type = IPL_MP_EXT;
            h->u = s_be(v, fixed);
            payload = 1;
            break;
        case 0xca:
            h->type = IPL_MP_FLOAT;
            h->d = s_f32(v);
            break;
        case 0xcb:
            h->type = IPL_MP_FLOAT;
            h->d = s_f64(v);
            break;
        case 0xcc:
        case 0xcd:
        case 0xce:
        case 0xcf:
            h->type = IPL_MP_UINT;
            h->u = s_be(v, fixed);
            break;
        case 0xd0:
        case 0xd1:
        case 0xd2:
        case 0xd3:
            s_signed(h, v, fixed);
            break;
        case 0xd4:
        case 0xd5:
        case 0xd6:
        case 0xd7:
        case 0xd8:
            /* fixext: the type byte is "fixed", the data length is implied */
            h->type = IPL_MP_EXT;
            h->u = (uint64_t)1 << (tag - 0xd4);
            break;
        case 0xd9:
        case 0xda:
        case 0xdb:
            h->type = IPL_MP_STR;
            h->u = s_be(v, fixed);
            break;
        case 0xdc:
        case 0xdd:
            h->type = IPL_MP_ARRAY;
            h->u = s_be(v, fixed);
            break;
        default: /* 0xde, 0xdf */
            h->type = IPL_MP_MAP;
            h->u = s_be(v, fixed);
            break;
        }
    }

    size_t hdr = 1 + fixed + payload;
    if (hdr > left) return IPL_E_TRUNCATED;
    left -= hdr;
    switch (h->type) {
    case IPL_MP_STR:
    case IPL_MP_BIN:
    case IPL_MP_EXT:
        if (h->u > left) return IPL_E_TRUNCATED;
        h->data = p + hdr;
        h->size = hdr + (size_t)h->u;
        break;
    case IPL_MP_ARRAY:
        if (h->u > left) /* each element needs at least one byte */
            return IPL_E_TRUNCATED;
        h->size = hdr;
        break;
    case IPL_MP_MAP:
        if (h->u > left / 2) /* each pair needs at least two bytes */
            return IPL_E_TRUNCATED;
        h->size = hdr;
        break;
    default:
        h->size = hdr;
        break;
    }
    return 0;
}

/* Decodes the next header and checks its type; on success the caller may commit h->size. */
static int s_expect(const ipl_mp_reader_t *r, s_head_t *h, ipl_mp_type_t type)
{
    int rc = s_head(r, h);
    if (rc == 0 && h->type != type) rc = IPL_E_TYPE;
    return rc;
}

/* ---- fast paths (see the top of the file) ---- */

/* A big-endian unsigned of 1, 2, 4 or 8 bytes. */
static inline uint64_t s_be_n(const uint8_t *p, size_t n)
{
    switch (n) {
    case 1:
        return p[0];
    case 2:
        return (uint64_t)p[0] << 8 | p[1];
    case 4:
        return (uint64_t)p[0] << 24 | (uint64_t)p[1] << 16 | (uint64_t)p[2] << 8 | p[3];
    default: {
        uint64_t v;
        memcpy(&v, p, 8);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
        v = __builtin_bswap64(v);
#endif
        return v;
    }
    }
}

/* A positive fixint or uint8/16/32/64 at r->pos: consumes it and returns true. */
static inline bool s_fast_uint(ipl_mp_reader_t *r, uint64_t *out)
{
    const uint8_t *p = r->pos;
    if (p >= r->end) return false;
    uint8_t tag = p[0];
    if (tag <= 0x7f) {
        *out = tag;
        r->pos = p + 1;
        return true;
    }
    if (tag < 0xcc || tag > 0xcf) return false;
    size_t n = (size_t)1 << (tag - 0xcc);
    if ((size_t)(r->end - p) <= n) return false;
    *out = s_be_n(p + 1, n);
    r->pos = p + 1 + n;
    return true;
}

/* A container header (fixarray/fixmap, or array16/32, map16/32) at r->pos whose count fits in
 * the bytes left (each element needs 1 byte, each pair 2): consumes it, returns true. */
static inline bool s_fast_container(ipl_mp_reader_t *r, uint32_t *n, bool map)
{
    const uint8_t *p = r->pos;
    if (p >= r->end) return false;
    uint8_t tag = p[0];
    size_t hdr, count;
    if ((tag & 0xf0) == (map ? 0x80 : 0x90)) {
        hdr = 1;
        count = tag & 0x0f;
    } else if (tag == (map ? 0xde : 0xdc) || tag == (map ? 0xdf : 0xdd)) {
        size_t fixed = (tag & 1) ? 4 : 2;
        if ((size_t)(r->end - p) <= fixed) return false;
        hdr = 1 + fixed;
        count = (size_t)s_be_n(p + 1, fixed);
    } else {
        return false;
    }
    size_t left = (size_t)(r->end - p) - hdr;
    if (count > (map ? left / 2 : left)) return false;
    *n = (uint32_t)count;
    r->pos = p + hdr;
    return true;
}

void ipl_mp_reader_init(ipl_mp_reader_t *r, const void *buf, size_t len)
{
    static const uint8_t s_empty[1];
    if (!buf) { /* no arithmetic on NULL, even + 0 */
        r->pos = r->end = s_empty;
        return;
    }
    r->pos = buf;
    r->end = r->pos + len;
}

size_t ipl_mp_remaining(const ipl_mp_reader_t *r)
{
    return (size_t)(r->end - r->pos);
}

ipl_mp_type_t ipl_mp_peek(const ipl_mp_reader_t *r)
{
    /* the containers a decoder dispatches on (events, envelopes), without an s_head_t */
    ipl_mp_reader_t c = *r;
    uint32_t n;
    if (s_fast_container(&c, &n, true)) return IPL_MP_MAP;
    if (s_fast_container(&c, &n, false)) return IPL_MP_ARRAY;
    s_head_t h;
    return s_head(r, &h) == 0 ? h.type : IPL_MP_INVALID;
}

int ipl_mp_read_nil(ipl_mp_reader_t *r)
{
    s_head_t h;
    int rc = s_expect(r, &h, IPL_MP_NIL);
    if (rc == 0) r->pos += h.size;
    return rc;
}

int ipl_mp_try_nil(ipl_mp_reader_t *r)
{
    if (r->pos < r->end && r->pos[0] == 0xc0) {
        r->pos++;
        return 1;
    }
    return 0;
}

int ipl_mp_read_bool(ipl_mp_reader_t *r, bool *out)
{
    s_head_t h;
    int rc = s_expect(r, &h, IPL_MP_BOOL);
    if (rc == 0) {
        *out = h.b;
        r->pos += h.size;
    }
    return rc;
}

int ipl_mp_read_uint(ipl_mp_reader_t *r, uint64_t *out)
{
    if (s_fast_uint(r, out)) return 0;
    s_head_t h;
    int rc = s_head(r, &h);
    if (rc != 0) return rc;
    if (h.type == IPL_MP_INT) return IPL_E_RANGE;
    if (h.type != IPL_MP_UINT) return IPL_E_TYPE;
    *out = h.u;
    r->pos += h.size;
    return 0;
}

int ipl_mp_read_uints(ipl_mp_reader_t *r, uint64_t *out, uint32_t n)
{
    // uint 64s (0xcf + 8 bytes big-endian), how block hashes nearly always come: a tight loop
    // on locals (`out` might alias the reader as far as the compiler knows).
    // The bytes left bound how many 9-byte elements the loop may read: one compare each.
    const uint8_t *p = r->pos;
    size_t fit = (size_t)(r->end - p) / 9;
    uint32_t lim = fit < n ? (uint32_t)fit : n;
    uint32_t k = 0;
    for (; k + 2 <= lim && p[0] == 0xcf && p[9] == 0xcf; k += 2, p += 18) { // two a step
        out[k] = s_be_n(p + 1, 8);
        out[k + 1] = s_be_n(p + 10, 8);
    }
    for (; k < lim && p[0] == 0xcf; k++, p += 9)
        out[k] = s_be_n(p + 1, 8);
    r->pos = p;
    for (; k < n; k++) { // anything else from the first other element on
        if (s_fast_uint(r, &out[k])) continue;
        int rc = ipl_mp_read_uint(r, &out[k]);
        if (rc != 0) return rc;
    }
    return 0;
}

int ipl_mp_read_int(ipl_mp_reader_t *r, int64_t *out)
{
    ipl_mp_reader_t c = *r;
    uint64_t u;
    if (s_fast_uint(&c, &u) && u <= (uint64_t)INT64_MAX) {
        *out = (int64_t)u;
        *r = c;
        return 0;
    }
    s_head_t h;
    int rc = s_head(r, &h);
    if (rc != 0) return rc;
    if (h.type == IPL_MP_INT) {
        *out = h.i;
    } else if (h.type == IPL_MP_UINT) {
        if (h.u > (uint64_t)INT64_MAX) return IPL_E_RANGE;
        *out = (int64_t)h.u;
    } else {
        return IPL_E_TYPE;
    }
    r->pos += h.size;
    return 0;
}

int ipl_mp_read_double(ipl_mp_reader_t *r, double *out)
{
    s_head_t h;
    int rc = s_head(r, &h);
    if (rc != 0) return rc;
    switch (h.type) {
    case IPL_MP_FLOAT:
        *out = h.d;
        break;
    case IPL_MP_UINT:
        *out = (double)h.u;
        break;
    case IPL_MP_INT:
        *out = (double)h.i;
        break;
    default:
        return IPL_E_TYPE;
    }
    r->pos += h.size;
    return 0;
}

int ipl_mp_read_str(ipl_mp_reader_t *r, const char **s, uint32_t *len)
{
    const uint8_t *p = r->pos;
    if (p < r->end && (p[0] & 0xe0) == 0xa0) { /* fixstr: map keys, event tags */
        uint32_t n = p[0] & 0x1f;
        if ((size_t)(r->end - p) > n) {
            *s = (const char *)p + 1;
            *len = n;
            r->pos = p + 1 + n;
            return 0;
        }
    }
    s_head_t h;
    int rc = s_expect(r, &h, IPL_MP_STR);
    if (rc == 0) {
        *s = (const char *)h.data;
        *len = (uint32_t)h.u;
        r->pos += h.size;
    }
    return rc;
}

int ipl_mp_read_bin(ipl_mp_reader_t *r, const uint8_t **b, uint32_t *len)
{
    s_head_t h;
    int rc = s_expect(r, &h, IPL_MP_BIN);
    if (rc == 0) {
        *b = h.data;
        *len = (uint32_t)h.u;
        r->pos += h.size;
    }
    return rc;
}

int ipl_mp_read_array(ipl_mp_reader_t *r, uint32_t *n)
{
    if (s_fast_container(r, n, false)) return 0;
    s_head_t h;
    int rc = s_expect(r, &h, IPL_MP_ARRAY);
    if (rc == 0) {
        *n = (uint32_t)h.u;
        r->pos += h.size;
    }
    return rc;
}

int ipl_mp_read_map(ipl_mp_reader_t *r, uint32_t *n)
{
    if (s_fast_container(r, n, true)) return 0;
    s_head_t h;
    int rc = s_expect(r, &h, IPL_MP_MAP);
    if (rc == 0) {
        *n = (uint32_t)h.u;
        r->pos += h.size;
    }
    return rc;
}

int ipl_mp_read_hash64(ipl_mp_reader_t *r, uint64_t *out)
{
    if (s_fast_uint(r, out)) return 0;
    s_head_t h;
    int rc = s_head(r, &h);
    if (rc != 0) return rc;
    switch (h.type) {
    case IPL_MP_UINT:
        *out = h.u;
        break;
    case IPL_MP_INT:
        *out = (uint64_t)h.i;
        break; /* two's complement, as Python's hash() */
    case IPL_MP_BIN: {
        size_t n = h.u < 8 ? (size_t)h.u : 8;
        *out = s_be(h.data + h.u - n, n);
        break;
    }
    default:
        return IPL_E_TYPE;
    }
    r->pos += h.size;
    return 0;
}

#define S_SKIP_DEPTH 64

int ipl_mp_skip(ipl_mp_reader_t *r)
{
    /* pending[d] = values still to skip in the container open at depth d (depth 0 is the one
     * value asked for). Works on a copy so that a failure leaves *r unchanged. */
    uint64_t pending[S_SKIP_DEPTH + 1];
    int depth = 0;
    ipl_mp_reader_t c = *r;
    pending[0] = 1;
    while (depth >= 0) {
        if (pending[depth] == 0) {
            depth--;
            continue;
        }
        s_head_t h;
        int rc = s_head(&c, &h);
        if (rc != 0) return rc;
        pending[depth]--;
        c.pos += h.size;
        if ((h.type == IPL_MP_ARRAY || h.type == IPL_MP_MAP) && h.u > 0) {
            if (depth == S_SKIP_DEPTH) return IPL_E_RANGE;
            pending[++depth] = h.type == IPL_MP_MAP ? 2 * h.u : h.u;
        }
    }
    *r = c;
    return 0;
}

bool ipl_mp_str_eq(const char *s, uint32_t len, const char *literal)
{
    size_t n = strlen(literal);
    return n == len && (n == 0 || memcmp(s, literal, n) == 0);
}

/*
 * ipl_mp — a bounds-checked, allocation-free msgpack reader (a cursor over a buffer).
 *
 * Writing uses msgpack-c's msgpack_packer directly; reading remote input goes through this
 * cursor so that every length is checked against the end of the buffer before it is used and
 * a hostile frame can neither crash nor make us allocate. Each read consumes one value on
 * success; on failure the cursor is left unchanged and a negative IPL_E_* code is returned
 * (IPL_E_TRUNCATED, IPL_E_TYPE, IPL_E_RANGE). Strings and binaries are returned as borrowed
 * pointers into the buffer (not NUL-terminated).
 */
#ifndef IPL_MP_H
#define IPL_MP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct {
    const uint8_t *pos;
    const uint8_t *end;
} ipl_mp_reader_t;

typedef enum {
    IPL_MP_NIL, IPL_MP_BOOL, IPL_MP_UINT, IPL_MP_INT, /* IPL_MP_INT: negative integers only */
    IPL_MP_FLOAT, IPL_MP_STR, IPL_MP_BIN, IPL_MP_ARRAY, IPL_MP_MAP, IPL_MP_EXT,
    IPL_MP_INVALID, /* 0xc1, a value cut short by the end of the buffer, or nothing left */
} ipl_mp_type_t;

void ipl_mp_reader_init(ipl_mp_reader_t *r, const void *buf, size_t len);
size_t ipl_mp_remaining(const ipl_mp_reader_t *r);
ipl_mp_type_t ipl_mp_peek(const ipl_mp_reader_t *r);

int ipl_mp_read_nil(ipl_mp_reader_t *r);
/* Returns 1 and consumes when the next value is nil, else 0 (nothing consumed). */
int ipl_mp_try_nil(ipl_mp_reader_t *r);
int ipl_mp_read_bool(ipl_mp_reader_t *r, bool *out);
int ipl_mp_read_uint(ipl_mp_reader_t *r, uint64_t *out);   /* IPL_E_RANGE when negative */
/* n unsigned integers into out[0..n) (the body of an array whose header was read), as n calls of
 * ipl_mp_read_uint but in one loop (a ROUTE_REQ carries 512 hashes). On an error out and r are
 * left part-way. */
int ipl_mp_read_uints(ipl_mp_reader_t *r, uint64_t *out, uint32_t n);
int ipl_mp_read_int(ipl_mp_reader_t *r, int64_t *out);     /* IPL_E_RANGE above INT64_MAX */
int ipl_mp_read_double(ipl_mp_reader_t *r, double *out);   /* float32/64 and any int */
int ipl_mp_read_str(ipl_mp_reader_t *r, const char **s, uint32_t *len);
int ipl_mp_read_bin(ipl_mp_reader_t *r, const uint8_t **b, uint32_t *len);
/* Array/map headers: *n is the element (pair) count. Fails with IPL_E_TRUNCATED when the
 * count cannot possibly fit in the bytes left (each element needs at least one byte, each map
 * pair two), so a caller may size an allocation by *n safely. Only the header is consumed. */
int ipl_mp_read_array(ipl_mp_reader_t *r, uint32_t *n);
int ipl_mp_read_map(ipl_mp_reader_t *r, uint32_t *n);
/* A block hash as vLLM sends it (ExternalBlockHash = int | bytes): any msgpack int (a
 * negative one is taken as its two's-complement u64) or bin (its last 8 bytes read big-endian,
 * zero-padded on the left when shorter). */
int ipl_mp_read_hash64(ipl_mp_reader_t *r, uint64_t *out);
/* Skips one complete value of any type (ext included), nested at most 64 containers deep
 * (IPL_E_RANGE beyond). */
int ipl_mp_skip(ipl_mp_reader_t *r);
/* Compares a just-read string with a literal. */
bool ipl_mp_str_eq(const char *s, uint32_t len, const char *literal);

#endif

/*
 * collector_checkpoint — the checkpoint file format and its atomic save (see the header).
 */
#include "collector_checkpoint.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ipl_error.h"
#include "ipl_hash.h"

#define S_MAGIC  "IPLCKPT\n"
#define S_HEADER 104u /* bytes before the name */
#define S_ENTRY  24u  /* bytes per block */
#define S_TAIL   8u   /* the checksum */

/* ------------------------------------------------------------------------------------------ */
/* little-endian fields */

static void s_put32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static void s_put64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static uint32_t s_get32(const uint8_t *p)
{
    uint32_t v = 0;
    for (int i = 3; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

static uint64_t s_get64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

static uint64_t s_dbits(double d)
{
    uint64_t v;
    memcpy(&v, &d, sizeof v);
    return v;
}

static double s_bitsd(uint64_t v)
{
    double d;
    memcpy(&d, &v, sizeof d);
    return d;
}

static bool s_flags_ok(uint32_t f)
{
    return !(f & ~(uint32_t)COLLECTOR_IMAGE_FLAGS) &&
           !((f & COLLECTOR_IMAGE_BASE) && (f & COLLECTOR_IMAGE_RECOVERING));
}

/* ------------------------------------------------------------------------------------------ */
/* encode / decode */

static uint8_t *s_put_blocks(uint8_t *p, const collector_block_t *b, size_t n)
{
    for (size_t i = 0; i < n; i++, p += S_ENTRY) {
        s_put64(p, b[i].engine);
        s_put64(p + 8, b[i].ours);
        s_put64(p + 16, b[i].parent);
    }
    return p;
}

int collector_checkpoint_encode(const collector_checkpoint_t *c, uint8_t **out, size_t *len)
{
    assert(c && out && len);
    const collector_stream_image_t *img = &c->image;
    size_t name_len = c->worker ? strlen(c->worker) : 0;
    if (name_len == 0 || name_len > COLLECTOR_CHECKPOINT_MAX_NAME ||
        img->nblocks > COLLECTOR_CHECKPOINT_MAX_BLOCKS ||
        img->nghosts > COLLECTOR_CHECKPOINT_MAX_BLOCKS || !s_flags_ok(img->flags) ||
        (img->nblocks && !img->blocks) || (img->nghosts && !img->ghosts))
        return IPL_E_INVAL;
    size_t total = S_HEADER + name_len + S_ENTRY * (img->nblocks + img->nghosts) + S_TAIL;
    uint8_t *buf = malloc(total);
    if (!buf) return IPL_E_NOMEM;
    memcpy(buf, S_MAGIC, 8);
    s_put32(buf + 8, COLLECTOR_CHECKPOINT_VERSION);
    s_put32(buf + 12, img->flags);
    s_put64(buf + 16, img->last_seq);
    s_put64(buf + 24, img->last_digest);
    s_put64(buf + 32, img->epoch);
    s_put64(buf + 40, c->written_ms);
    s_put64(buf + 48, s_dbits(c->start_time));
    for (int i = 0; i < COLLECTOR_CHECKPOINT_COUNTERS; i++)
        s_put64(buf + 56 + 8 * i, s_dbits(c->counters[i]));
    s_put32(buf + 80, img->block_size);
    s_put32(buf + 84, (uint32_t)name_len);
    s_put64(buf + 88, img->nblocks);
    s_put64(buf + 96, img->nghosts);
    uint8_t *p = buf + S_HEADER;
    memcpy(p, c->worker, name_len);
    p = s_put_blocks(p + name_len, img->blocks, img->nblocks);
    p = s_put_blocks(p, img->ghosts, img->nghosts);
    s_put64(p, ipl_hash_bytes(buf, total - S_TAIL));
    *out = buf;
    *len = total;
    return 0;
}

void collector_checkpoint_clear(collector_checkpoint_t *c)
{
    if (!c) return;
    free(c->worker);
    free(c->image.blocks);
    free(c->image.ghosts);
    memset(c, 0, sizeof *c);
}

static collector_block_t *s_get_blocks(const uint8_t *p, size_t n)
{
    collector_block_t *b = malloc((n ? n : 1) * sizeof *b);
    if (!b) return NULL;
    for (size_t i = 0; i < n; i++, p += S_ENTRY)
        b[i] = (collector_block_t){s_get64(p), s_get64(p + 8), s_get64(p + 16)};
    return b;
}

int collector_checkpoint_decode(const uint8_t *buf, size_t len, collector_checkpoint_t *out,
                                char *err, size_t errlen)
{
    assert(out && (buf || len == 0));
    memset(out, 0, sizeof *out);
    if (len < S_HEADER + S_TAIL) {
        ipl_errf(err, errlen, "truncated: %zu bytes, a checkpoint has at least %u", len,
                 S_HEADER + S_TAIL);
        return IPL_E_INVAL;
    }
    if (memcmp(buf, S_MAGIC, 8) != 0) {
        ipl_errf(err, errlen, "not a checkpoint (bad magic)");
        return IPL_E_INVAL;
    }
    uint32_t version = s_get32(buf + 8), flags = s_get32(buf + 12);
    if (version != COLLECTOR_CHECKPOINT_VERSION) {
        ipl_errf(err, errlen, "version %u, this collector reads %u", version,
                 COLLECTOR_CHECKPOINT_VERSION);
        return IPL_E_INVAL;
    }
    if (!s_flags_ok(flags)) {
        ipl_errf(err, errlen, "invalid flags 0x%x", flags);
        return IPL_E_INVAL;
    }
    uint32_t name_len = s_get32(buf + 84);
    uint64_t nblocks = s_get64(buf + 88), nghosts = s_get64(buf + 96);
    if (name_len == 0 || name_len > COLLECTOR_CHECKPOINT_MAX_NAME ||
        nblocks > COLLECTOR_CHECKPOINT_MAX_BLOCKS || nghosts > COLLECTOR_CHECKPOINT_MAX_BLOCKS) {
        ipl_errf(err, errlen, "out of range: name %u bytes, %llu blocks, %llu ghosts", name_len,
                 (unsigned long long)nblocks, (unsigned long long)nghosts);
        return IPL_E_RANGE;
    }
    /* all three are bounded: the sum cannot overflow 64 bits */
    uint64_t want =
        (uint64_t)S_HEADER + name_len + (uint64_t)S_ENTRY * (nblocks + nghosts) + S_TAIL;
    if (want != (uint64_t)len) {
        ipl_errf(err, errlen, "size %zu, its header says %llu", len, (unsigned long long)want);
        return IPL_E_INVAL;
    }
    if (ipl_hash_bytes(buf, len - S_TAIL) != s_get64(buf + len - S_TAIL)) {
        ipl_errf(err, errlen, "checksum mismatch (a torn or corrupted file)");
        return IPL_E_INVAL;
    }
    const uint8_t *name = buf + S_HEADER;
    if (memchr(name, '\0', name_len)) {
        ipl_errf(err, errlen, "the worker name holds a NUL byte");
        return IPL_E_INVAL;
    }
    out->worker = strndup((const char *)name, name_len);
    const uint8_t *p = name + name_len;
    out->image.blocks = s_get_blocks(p, (size_t)nblocks);
    out->image.ghosts = s_get_blocks(p + S_ENTRY * nblocks, (size_t)nghosts);
    if (!out->worker || !out->image.blocks || !out->image.ghosts) {
        collector_checkpoint_clear(out);
        ipl_errf(err, errlen, "out of memory");
        return IPL_E_NOMEM;
    }
    out->image.nblocks = (size_t)nblocks;
    out->image.nghosts = (size_t)nghosts;
    out->image.flags = flags;
    out->image.last_seq = s_get64(buf + 16);
    out->image.last_digest = s_get64(buf + 24);
    out->image.epoch = s_get64(buf + 32);
    out->image.block_size = s_get32(buf + 80);
    out->written_ms = s_get64(buf + 40);
    out->start_time = s_bitsd(s_get64(buf + 48));
    for (int i = 0; i < COLLECTOR_CHECKPOINT_COUNTERS; i++)
        out->counters[i] = s_bitsd(s_get64(buf + 56 + 8 * i));
    return 0;
}

/* ------------------------------------------------------------------------------------------ */
/* files */

static bool s_plain(unsigned char c, bool first)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '-' || (c == '.' && !first);
}

char *collector_checkpoint_path(const char *dir, const char *worker)
{
    assert(dir && worker);
    size_t dlen = strlen(dir), wlen = strlen(worker);
    char *path = malloc(dlen + 1 + 3 * wlen + sizeof ".ckpt");
    if (!path) return NULL;
    char *p = path;
    memcpy(p, dir, dlen);
    p += dlen;
    if (dlen == 0 || dir[dlen - 1] != '/') *p++ = '/';
    for (size_t i = 0; i < wlen; i++) {
        unsigned char c = (unsigned char)worker[i];
        if (s_plain(c, i == 0))
            *p++ = (char)c;
        else
            p += sprintf(p, "%%%02X", c);
    }
    memcpy(p, ".ckpt", sizeof ".ckpt");
    return path;
}

int collector_checkpoint_save(const char *dir, const char *worker, const uint8_t *buf, size_t len,
                              char *err, size_t errlen)
{
    assert(dir && worker && (buf || len == 0));
    char *path = collector_checkpoint_path(dir, worker);
    size_t plen = path ? strlen(path) : 0;
    char *tmp = path ? malloc(plen + sizeof ".tmp") : NULL;
    if (!tmp) {
        free(path);
        ipl_errf(err, errlen, "out of memory");
        return IPL_E_IO;
    }
    memcpy(tmp, path, plen);
    memcpy(tmp + plen, ".tmp", sizeof ".tmp");
    int rc = 0;
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) {
        ipl_errf(err, errlen, "%s: %s", tmp, strerror(errno));
        rc = IPL_E_IO;
    }
    for (size_t off = 0; rc == 0 && off < len;) {
        ssize_t n = write(fd, buf + off, len - off);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            ipl_errf(err, errlen, "%s: %s", tmp, n < 0 ? strerror(errno) : "short write");
            rc = IPL_E_IO;
            break;
        }
        off += (size_t)n;
    }
    if (fd >= 0 && close(fd) != 0 && rc == 0) {
        ipl_errf(err, errlen, "%s: %s", tmp, strerror(errno));
        rc = IPL_E_IO;
    }
    if (rc == 0 && rename(tmp, path) != 0) {
        ipl_errf(err, errlen, "rename %s to %s: %s", tmp, path, strerror(errno));
        rc = IPL_E_IO;
    }
    if (rc != 0 && fd >= 0) unlink(tmp);
    free(tmp);
    free(path);
    return rc;
}

int collector_checkpoint_load(const char *dir, const char *worker, uint8_t **buf, size_t *len,
                              char *err, size_t errlen)
{
    assert(dir && worker && buf && len);
    *buf = NULL;
    *len = 0;
    char *path = collector_checkpoint_path(dir, worker);
    if (!path) {
        ipl_errf(err, errlen, "out of memory");
        return IPL_E_IO;
    }
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        int e = errno;
        ipl_errf(err, errlen, "%s: %s", path, strerror(e));
        free(path);
        return e == ENOENT ? IPL_E_NOTFOUND : IPL_E_IO;
    }
    struct stat sb;
    int rc = 0;
    uint8_t *data = NULL;
    size_t size = 0;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        ipl_errf(err, errlen, "%s: not a regular file", path);
        rc = IPL_E_IO;
    } else if ((uint64_t)sb.st_size > COLLECTOR_CHECKPOINT_MAX_FILE) {
        ipl_errf(err, errlen, "%s: %lld bytes, more than a checkpoint may have", path,
                 (long long)sb.st_size);
        rc = IPL_E_RANGE;
    } else {
        size = (size_t)sb.st_size;
        data = malloc(size ? size : 1);
        if (!data) {
            ipl_errf(err, errlen, "out of memory");
            rc = IPL_E_IO;
        }
    }
    for (size_t off = 0; rc == 0 && off < size;) {
        ssize_t n = read(fd, data + off, size - off);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) { /* shrank under us, or an error: a size mismatch fails the decode */
            if (n < 0) {
                ipl_errf(err, errlen, "%s: %s", path, strerror(errno));
                rc = IPL_E_IO;
            }
            size = off;
            break;
        }
        off += (size_t)n;
    }
    close(fd);
    free(path);
    if (rc != 0) {
        free(data);
        return rc;
    }
    *buf = data;
    *len = size;
    return 0;
}

int collector_checkpoint_remove(const char *dir, const char *worker)
{
    char *path = collector_checkpoint_path(dir, worker);
    if (!path) return IPL_E_NOTFOUND;
    int rc = unlink(path) == 0 ? 0 : IPL_E_NOTFOUND;
    free(path);
    return rc;
}

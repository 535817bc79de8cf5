/* libFuzzer target: the collector's checkpoint decoder (services/collector/collector_checkpoint).
 * A checkpoint file is local, but the collector reads it as untrusted input: a corrupt one must
 * be refused (and the collector goes on without it), never crash it.
 *
 * Each input is decoded twice: as it is (nearly always refused by the checksum), and with its
 * last 8 bytes replaced by the checksum of the rest, so that the structural checks behind the
 * checksum are reached. Beyond "no crash" (ASan/UBSan), on every input:
 *   - a refused decode leaves the output empty and says why;
 *   - an accepted one re-encodes to exactly the same bytes (nothing read is left unchecked),
 *     and its counts agree with the input's size.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../services/collector/collector_checkpoint.h"
#include "ipl_hash.h"

static void s_check(const uint8_t *data, size_t size)
{
    collector_checkpoint_t c;
    char err[256] = "";
    int rc = collector_checkpoint_decode(data, size, &c, err, sizeof err);
    if (rc != 0) {
        if (c.worker || c.image.blocks || c.image.ghosts || !err[0]) abort();
        return;
    }
    if (size != 104 + strlen(c.worker) + 24 * (c.image.nblocks + c.image.nghosts) + 8) abort();
    uint8_t *again;
    size_t len;
    if (collector_checkpoint_encode(&c, &again, &len) != 0) abort();
    if (len != size || memcmp(again, data, size) != 0) abort();
    free(again);
    collector_checkpoint_clear(&c);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    s_check(data, size);
    if (size < 8) return 0;
    uint8_t *sealed = malloc(size);
    if (!sealed) return 0;
    memcpy(sealed, data, size);
    uint64_t h = ipl_hash_bytes(sealed, size - 8);
    for (int i = 0; i < 8; i++)
        sealed[size - 8 + i] = (uint8_t)(h >> (8 * i));
    s_check(sealed, size);
    free(sealed);
    return 0;
}

/* libFuzzer target: every proto decoder (one entry point, the envelope picks the message).
 * Whatever decodes must re-encode and decode to the same bytes (round-trip stability): a
 * frame from an older sender re-encodes with its optional fields present (0, nil, empty).
 * Seeds (fuzz/seeds/fuzz_proto/): examples/policy-full's POLICY, with every published element
 * array and string list (policy_full), a POLICY from before hash and them (policy_old), and
 * a gateway replica's LIMITS_USAGE with two tenants (limits_usage). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ipl_proto.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    ipl_msg_t msg;
    if (ipl_msg_decode(data, size, &msg) != 0) return 0;
    msgpack_sbuffer a;
    msgpack_sbuffer_init(&a);
    if (ipl_msg_encode(msg.type, &msg.u, &a) != 0) abort();
    ipl_msg_t again;
    if (ipl_msg_decode(a.data, a.size, &again) != 0) abort();
    msgpack_sbuffer b;
    msgpack_sbuffer_init(&b);
    if (ipl_msg_encode(again.type, &again.u, &b) != 0) abort();
    if (a.size != b.size || memcmp(a.data, b.data, a.size) != 0) abort();
    msgpack_sbuffer_destroy(&a);
    msgpack_sbuffer_destroy(&b);
    ipl_msg_clear(&again);
    ipl_msg_clear(&msg);
    return 0;
}

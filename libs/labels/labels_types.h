/*
 * labels_types — what the classes of the labels library share: the label mask and its limits.
 *
 * A labels_set_t interns every label name it can give (the built-in "pii" labels first, then
 * the operator's, in configuration order) to a small id; the classes below the facade report
 * what they found as a mask of those ids (bit i set: label i), never as text, so nothing of
 * the prompt leaves them.
 */
#ifndef LABELS_TYPES_H
#define LABELS_TYPES_H

#include <stdint.h>

typedef uint64_t labels_mask_t;

#define LABELS_MAX            64 /* distinct labels of one set (the bits of a mask) */
#define LABELS_NAME_MAX_BYTES 63 /* of a label name (the gateway's limit is 64, NUL included) */

#define LABELS_BIT(id) ((labels_mask_t)1 << (id))

#endif

/*
 * ipl_split — the items of a comma-separated option value.
 *
 * Every list-valued option (--aggregator, --listen, --state-sub, --peers, --workers,
 * clustersim's --strategies and --workloads) is split the same way: at each ',', every item
 * trimmed of spaces and tabs, empty items skipped, so "a, b,,c," has three items (a, b, c)
 * and "", " , " and NULL have none. There is no quoting: an item never contains a comma.
 *
 *   const char *cursor = list, *item;
 *   size_t len;
 *   while (ipl_split_next(&cursor, &item, &len))
 *       ...item[0 .. len-1]...
 *
 * Both functions only read `list`; any thread.
 */
#ifndef IPL_SPLIT_H
#define IPL_SPLIT_H

#include <stdbool.h>
#include <stddef.h>

/* Finds the next non-empty item at or after *cursor (NULL is an empty list): sets *item to
 * its first byte (pointing into the list, borrowed) and *len to its trimmed length, moves
 * *cursor past the item's comma and returns true; returns false when no item is left. The
 * cursor never points at or before item[len] afterwards, so a caller that owns the list may
 * overwrite item[len] (e.g. with '\0' to cut the items out in place). */
bool ipl_split_next(const char **cursor, const char **item, size_t *len);

/* Copies the items of `list` into out[0 .. max-1] as malloc'd NUL-terminated strings (the
 * caller frees them). Returns how many items the list has — like snprintf, possibly more
 * than `max`, of which only the first `max` are stored — or IPL_E_NOMEM, in which case
 * nothing is stored (every copy made is freed and its slot set to NULL). */
int ipl_split_dup(const char *list, char **out, size_t max);

#endif

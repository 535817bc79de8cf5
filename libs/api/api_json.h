/*
 * api_json — the few cJSON helpers every API translator needs: a strict parse of untrusted
 * bytes and the name of a value's JSON type for error messages.
 */
#ifndef API_JSON_H
#define API_JSON_H

#include <stddef.h>

struct cJSON;

/* Parses text[0..len) as exactly one JSON value (white space around it allowed, nothing
 * else). Returns the tree (the caller cJSON_Delete()s it), or NULL with *error_at (may be
 * NULL) set to the byte offset near which the text stopped being valid JSON. Nesting deeper
 * than cJSON's limit (1000) fails too. */
struct cJSON *api_json_parse(const char *text, size_t len, size_t *error_at);

/* "a string", "an array", "null", ... (for "got %s" in messages); "nothing" for NULL. */
const char *api_json_type(const struct cJSON *item);

/* True when item is absent or JSON null: how optional fields are left out. */
int api_json_absent(const struct cJSON *item);

#endif

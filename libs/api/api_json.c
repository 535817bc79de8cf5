/*
 * api_json — strict parsing and type names. See api_json.h.
 */
#include "api_json.h"

#include <cjson/cJSON.h>

cJSON *api_json_parse(const char *text, size_t len, size_t *error_at)
{
    if (error_at) *error_at = 0;
    if (!text || len == 0) return NULL;
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(text, len, &end, 0);
    if (root && end) {
        /* cJSON stops after the first value: anything but white space after it is an error. */
        const char *p = end, *stop = text + len;
        while (p < stop && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r'))
            p++;
        if (p < stop) {
            cJSON_Delete(root);
            if (error_at) *error_at = (size_t)(p - text);
            return NULL;
        }
    }
    if (!root && error_at && end && end >= text && end <= text + len)
        *error_at = (size_t)(end - text);
    return root;
}

const char *api_json_type(const cJSON *item)
{
    if (!item) return "nothing";
    if (cJSON_IsNull(item)) return "null";
    if (cJSON_IsBool(item)) return "a boolean";
    if (cJSON_IsNumber(item)) return "a number";
    if (cJSON_IsString(item)) return "a string";
    if (cJSON_IsArray(item)) return "an array";
    if (cJSON_IsObject(item)) return "an object";
    return "an unknown value";
}

int api_json_absent(const cJSON *item)
{
    return !item || cJSON_IsNull(item);
}

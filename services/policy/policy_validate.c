/*
 * policy_validate — POST /validate: a request body → policy_compiler → a JSON verdict.
 */
#include "policy_validate.h"

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "ipl_log.h"
#include "policy_compiler.h"
#include "policy_digest.h"

#define S_YAML_NAME "request.yaml" // the file name of a YAML body in messages
#define S_MAX_NAME  255

static const char *const s_yaml_types[] = {"application/yaml", "application/x-yaml", "text/yaml",
                                           "text/x-yaml", NULL};

// Whether the media type of `content_type` (before any ';', spaces trimmed) is `type`.
static bool s_is_type(const char *content_type, const char *type)
{
    if (!content_type) return false;
    while (*content_type == ' ' || *content_type == '\t')
        content_type++;
    size_t n = strcspn(content_type, "; \t");
    return n == strlen(type) && strncasecmp(content_type, type, n) == 0;
}

// A refusal: {"valid": false, "errors": [why]} with `status`.
static int s_refuse(int status, const char *why, char **json_p)
{
    cJSON *root = cJSON_CreateObject();
    cJSON_AddBoolToObject(root, "valid", false);
    cJSON *errors = cJSON_AddArrayToObject(root, "errors");
    cJSON_AddItemToArray(errors, cJSON_CreateString(why));
    *json_p = root ? cJSON_PrintUnformatted(root) : NULL;
    cJSON_Delete(root);
    return *json_p ? status : 500;
}

// The verdict of a finished compilation: 200 or 422.
static int s_verdict(const policy_compiler_t *c, char **json_p)
{
    const ipl_policy_t *p = policy_compiler_policy(c);
    cJSON *root = cJSON_CreateObject();
    cJSON_AddBoolToObject(root, "valid", p != NULL);
    if (p) {
        char hex[POLICY_DIGEST_HEX_LEN];
        cJSON_AddNumberToObject(root, "pools", p->pools_len);
        cJSON_AddNumberToObject(root, "worker_sets", (double)policy_compiler_nworker_sets(c));
        cJSON_AddNumberToObject(root, "workers", p->workers_len);
        cJSON_AddStringToObject(root, "hash", policy_digest_hex(p->hash, hex));
    }
    policy_digest_add_report(root, c);
    *json_p = root ? cJSON_PrintUnformatted(root) : NULL;
    cJSON_Delete(root);
    return !*json_p ? 500 : p ? 200 : 422;
}

static bool s_valid_name(const char *name)
{
    size_t n = strlen(name);
    if (n == 0 || n > S_MAX_NAME || strchr(name, '/')) return false;
    for (const unsigned char *s = (const unsigned char *)name; *s; s++)
        if (*s < 0x20 || *s == 0x7f) return false;
    return true;
}

static int s_name_cmp(const void *a, const void *b)
{
    return strcmp((*(cJSON *const *)a)->string, (*(cJSON *const *)b)->string);
}

// {"files": {name: yaml, ...}} into `c`, in name order. 0, or a 400 with `why` filled.
static int s_add_files(policy_compiler_t *c, const char *body, size_t len, char *why, size_t size)
{
    static const char *form = "send {\"files\": {\"name.yaml\": \"<YAML>\", ...}}";
    cJSON *root = cJSON_ParseWithLength(body, len);
    cJSON *files = cJSON_GetObjectItemCaseSensitive(root, "files");
    if (!root || !cJSON_IsObject(root) || !cJSON_IsObject(files)) {
        snprintf(why, size, "the body is %s; %s",
                 !root                   ? "not valid JSON"
                 : !cJSON_IsObject(root) ? "not a JSON object"
                                         : "without a \"files\" object",
                 form);
        cJSON_Delete(root);
        return -1;
    }
    size_t n = (size_t)cJSON_GetArraySize(files);
    cJSON **items = calloc(n ? n : 1, sizeof *items);
    if (!items) abort(); // as the compiler: a request this small cannot exhaust memory
    size_t k = 0;
    for (cJSON *f = files->child; f; f = f->next)
        items[k++] = f;
    qsort(items, n, sizeof *items, s_name_cmp);
    int rc = 0;
    for (size_t i = 0; i < n && rc == 0; i++) {
        const char *name = items[i]->string;
        if (!s_valid_name(name)) {
            snprintf(why, size,
                     "files: the name \"%.64s\" is not a file name; use 1 to %d characters, "
                     "no '/' and no control characters",
                     name, S_MAX_NAME);
            rc = -1;
        } else if (i > 0 && !strcmp(name, items[i - 1]->string)) {
            snprintf(why, size, "files: \"%.64s\" is given twice; send each file once", name);
            rc = -1;
        } else if (!cJSON_IsString(items[i])) {
            snprintf(why, size, "files: \"%.64s\" must be a string holding its YAML", name);
            rc = -1;
        }
    }
    for (size_t i = 0; i < n && rc == 0; i++)
        policy_compiler_add_string(c, items[i]->string, items[i]->valuestring,
                                   strlen(items[i]->valuestring));
    free(items);
    cJSON_Delete(root);
    return rc;
}

int policy_validate_body(const char *content_type, const char *body, size_t len, size_t max_bytes,
                         char **json_p)
{
    *json_p = NULL;
    char why[512];
    bool yaml = false;
    for (size_t i = 0; s_yaml_types[i]; i++)
        yaml = yaml || s_is_type(content_type, s_yaml_types[i]);
    bool json = s_is_type(content_type, "application/json");
    if (!yaml && !json) {
        snprintf(why, sizeof why,
                 "Content-Type \"%.100s\" is not accepted; send the YAML as application/yaml "
                 "(or text/yaml), or several files as application/json {\"files\": "
                 "{\"name.yaml\": \"<YAML>\"}}",
                 content_type ? content_type : "");
        return s_refuse(415, why, json_p);
    }
    if (len > max_bytes) {
        snprintf(why, sizeof why,
                 "the body is %zu bytes, above the %zu-byte limit; validate the directory with "
                 "`inferplanectl validate DIR` instead",
                 len, max_bytes);
        return s_refuse(413, why, json_p);
    }
    policy_compiler_t *c = policy_compiler_new();
    if (!c) return 500;
    int status;
    if (yaml) {
        policy_compiler_add_string(c, S_YAML_NAME, body ? body : "", body ? len : 0);
    } else if (s_add_files(c, body ? body : "", body ? len : 0, why, sizeof why) != 0) {
        policy_compiler_destroy(&c);
        return s_refuse(400, why, json_p);
    }
    policy_compiler_finish(c, NULL);
    status = s_verdict(c, json_p);
    policy_compiler_destroy(&c);
    return status;
}

void policy_validate_http(void *arg, const ipl_http_req_t *req, ipl_http_resp_t *resp)
{
    (void)arg;
    size_t len = 0;
    const char *body = ipl_http_req_body(req, &len);
    char *json = NULL;
    int status = policy_validate_body(ipl_http_req_header(req, "Content-Type"), body, len,
                                      POLICY_VALIDATE_MAX_BYTES, &json);
    IPL_DEBUG("policy_validate", "status=%d bytes=%zu", status, len);
    if (!json) {
        ipl_http_resp_error(resp, 500, "server_error", "out of memory");
        return;
    }
    ipl_http_resp_take(resp, status, "application/json", &json, strlen(json));
}

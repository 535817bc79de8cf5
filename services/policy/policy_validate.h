/*
 * policy_validate — POST /validate on the policy service's admin port: compiles policy YAML
 * sent in the request with the service's own compiler (libs/policy), without installing it.
 *
 * Request, by Content-Type (parameters such as "; charset=utf-8" are ignored):
 *   application/yaml, application/x-yaml, text/yaml, text/x-yaml
 *       the body is one multi-document YAML file, named "request.yaml" in errors
 *   application/json
 *       {"files": {"pools.yaml": "<YAML>", "sets.yaml": "<YAML>", ...}}: several files,
 *       compiled in name order like a directory (names: 1-255 bytes, no '/', no control
 *       characters, each once)
 *
 * Response (application/json):
 *   200 {"valid": true, "pools": N, "worker_sets": N, "workers": N, "hash": "16 hex",
 *        "files": [...], "warnings": [...], "errors": []}
 *       hash: what the service would publish for these files (policy_digest)
 *   422 {"valid": false, "errors": ["request.yaml:14:13: InferencePool \"chat\": ...", ...],
 *        "warnings": [...], "files": [...]}: the compiler's file:line:col: what; how to fix
 *   400 the JSON body is malformed or not of the form above
 *   413 the body is above POLICY_VALIDATE_MAX_BYTES (1 MiB; the admin server refuses larger
 *       bodies with 413 before the handler runs)
 *   415 another Content-Type
 * Every refusal is {"valid": false, "errors": ["what; how to fix"]}.
 *
 * Threads: any (each request compiles with its own compiler).
 */
#ifndef POLICY_VALIDATE_H
#define POLICY_VALIDATE_H

#include <stddef.h>

#include "ipl_httpd.h"

#define POLICY_VALIDATE_MAX_BYTES (1u << 20)

/* Validates a request body sent with `content_type` (NULL: none), refusing bodies above
 * `max_bytes`. Returns the HTTP status and sets *json_p to the response body (malloc'd, the
 * caller's; NULL only when out of memory, then the status is 500). */
int policy_validate_body(const char *content_type, const char *body, size_t len, size_t max_bytes,
                         char **json_p);

/* An ipl_http_handler_fn for POST /validate (policy_validate_body, POLICY_VALIDATE_MAX_BYTES);
 * `arg` is unused. */
void policy_validate_http(void *arg, const ipl_http_req_t *req, ipl_http_resp_t *resp);

#endif

/*
 * Helpers shared by the libs/api unit tests (header-only, static).
 *
 * Test tables write JSON with single quotes for readability: api_test_q("{'a':'b'}") returns
 * the same text with every ' turned into " (so table strings never hold a real apostrophe).
 * Include it after <cmocka.h>: api_test_request fails the running test.
 */
#ifndef API_TEST_H
#define API_TEST_H

#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "api_anthropic_request.h"

/* A malloc'd copy of text with ' → ". */
static inline char *api_test_q(const char *text)
{
    char *s = strdup(text);
    for (char *p = s; p && *p; p++)
        if (*p == '\'') *p = '"';
    return s;
}

/* Parses single-quoted JSON (the caller cJSON_Delete()s it); NULL when it is not JSON. */
static inline cJSON *api_test_json(const char *text)
{
    char *s = api_test_q(text);
    cJSON *j = cJSON_Parse(s);
    free(s);
    return j;
}

/* Parses a single-quoted request body of `kind` that must be accepted (the test fails with
 * the refusal's message otherwise). The caller destroys the request. */
static inline api_anthropic_request_t *api_test_request(api_anthropic_kind_t kind, const char *body)
{
    char *in = api_test_q(body);
    api_anthropic_request_t *req = NULL;
    api_anthropic_error_t err;
    if (api_anthropic_request_parse(kind, in, strlen(in), &req, &err) != 0)
        fail_msg("refused (%d): %s\nbody: %s", err.status, err.message, in);
    free(in);
    return req;
}

#endif

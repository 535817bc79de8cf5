/* libFuzzer target: ipl_jinja on any template text. The input is the template; it is parsed
 * and, when that succeeds, rendered against a fixed chat (messages with tool calls, tools, a
 * namespace-friendly mix of types) under tight limits, so runaway loops, recursion, string
 * or list blow-ups and huge outputs must end in an error instead of a hang or a crash.
 * Parse errors must carry a message; a successful render must return exactly *len bytes. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "ipl_jinja.h"

static const char s_vars[] =
    "{\"messages\": [{\"role\": \"system\", \"content\": \"sys \\u00e9\"},"
    " {\"role\": \"user\", \"content\": \"hi <think>x</think> \\ud83d\\ude00\"},"
    " {\"role\": \"assistant\", \"content\": null, \"tool_calls\": [{\"type\": \"function\","
    "   \"function\": {\"name\": \"f\", \"arguments\": {\"a\": [1, 2.5, true, null]}}}]},"
    " {\"role\": \"tool\", \"content\": \"42\"}, {\"role\": \"user\", \"content\": [{\"type\": \"text\", \"text\": \"t\"}]}],"
    " \"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"f\", \"parameters\": {\"type\": \"object\","
    "   \"properties\": {\"a\": {\"type\": \"array\", \"items\": {\"type\": \"string\"}}}, \"required\": [\"a\"]}}}],"
    " \"add_generation_prompt\": true, \"bos_token\": \"<s>\", \"eos_token\": \"</s>\", \"n\": 7, \"f\": -0.5}";

static cJSON *s_ctx;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!s_ctx) s_ctx = cJSON_Parse(s_vars);
    char err[512];
    err[0] = '\0';
    ipl_jinja_t *t = ipl_jinja_new((const char *)data, size, err, sizeof err);
    if (!t) {
        if (!err[0]) abort(); /* a refusal always says why */
        return 0;
    }
    (void)ipl_jinja_uses(t, "messages");
    ipl_jinja_limits_t lim = {.max_output = 64 << 10, .max_memory = 16 << 20,
                              .max_iterations = 20000, .max_call_depth = 20, .now = 1721952000};
    char *out = NULL;
    size_t len = 0;
    int rc = ipl_jinja_render(t, s_ctx, &lim, &out, &len, err, sizeof err);
    if (rc == 0) {
        if (!out || strlen(out) > len || len > lim.max_output) abort();
        free(out);
    } else if (out) {
        abort();
    }
    ipl_jinja_destroy(&t);
    return 0;
}

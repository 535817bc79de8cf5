/*
 * api_anthropic_request — Anthropic Messages request → OpenAI chat request. See the header
 * for the mapping; docs/api-anthropic.md for the table and every rejection.
 *
 * One pass over the client's JSON builds the OpenAI body; the first problem stops it with a
 * 400 naming the field path. Paths use Anthropic's own notation (dots, numeric indexes:
 * "messages.2.content.0.type"), which is what its API and SDK users read.
 */
#include "api_anthropic_request.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "api_json.h"
#include "ipl_error.h"

/* Claude Code puts a per-request hash in a system block that starts with this; vLLM leaves
 * the block out so that the prompt prefix, and with it the prefix cache, stays the same
 * (vllm/entrypoints/anthropic/serving.py, _convert_system_message). */
#define S_BILLING_HEADER "x-anthropic-billing-header"

struct api_anthropic_request {
    api_anthropic_kind_t kind;
    cJSON *openai;
    char *model;
    char **stops;
    size_t nstop;
    bool stream;
    bool has_tools;
    int64_t max_tokens;
};

/* Content block types that are Anthropic's but cannot reach a text model through an OpenAI
 * chat request, and why (the rest of the message after the quoted type). */
static const struct {
    const char *type;
    const char *why;
} s_refused_blocks[] = {
    {"image", "is not supported by this text model"},
    {"document", "is not supported by this text model"},
    {"search_result", "is not supported by this text model"},
    {"container_upload", "is not supported by this text model"},
    {"thinking", "is not supported on this text path (extended thinking is off here; send the "
                 "conversation without thinking blocks)"},
    {"redacted_thinking", "is not supported on this text path (extended thinking is off here; "
                          "send the conversation without thinking blocks)"},
    {"server_tool_use", "is not supported: this gateway runs no server tools"},
    {"web_search_tool_result", "is not supported: this gateway runs no server tools"},
    {"web_fetch_tool_result", "is not supported: this gateway runs no server tools"},
    {"code_execution_tool_result", "is not supported: this gateway runs no server tools"},
    {"mcp_tool_use", "is not supported: this gateway connects to no MCP servers"},
    {"mcp_tool_result", "is not supported: this gateway connects to no MCP servers"},
};

/* Top-level fields whose meaning cannot be carried over; refused unless absent or null. */
static const struct {
    const char *field;
    const char *why;
} s_refused_fields[] = {
    {"mcp_servers", "MCP servers are not supported by this gateway"},
    {"container", "code-execution containers are not supported by this gateway"},
    {"output_format", "structured output formats are not supported by this gateway"},
    {"output_config", "output_config (effort, structured output) is not supported by this "
                      "gateway"},
};

static int s_fail(api_anthropic_error_t *err, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static int s_fail(api_anthropic_error_t *err, const char *fmt, ...)
{
    err->status = 400;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->message, sizeof(err->message), fmt, ap);
    va_end(ap);
    return IPL_E_INVAL;
}

static int s_nomem(api_anthropic_error_t *err)
{
    api_anthropic_error_set(err, 500, "out of memory translating the request");
    return IPL_E_NOMEM;
}

/* Adds item to obj under key; frees item and fails when memory ran out. */
static int s_add(cJSON *obj, const char *key, cJSON *item, api_anthropic_error_t *err)
{
    if (!item || !cJSON_AddItemToObject(obj, key, item)) {
        cJSON_Delete(item);
        return s_nomem(err);
    }
    return 0;
}

static int s_push(cJSON *array, cJSON *item, api_anthropic_error_t *err)
{
    if (!item || !cJSON_AddItemToArray(array, item)) {
        cJSON_Delete(item);
        return s_nomem(err);
    }
    return 0;
}

static int s_add_string(cJSON *obj, const char *key, const char *value, api_anthropic_error_t *err)
{
    return s_add(obj, key, cJSON_CreateString(value), err);
}

/* A copy of a number of the client's (exact, as cJSON holds it). */
static int s_add_number(cJSON *obj, const char *key, const cJSON *number,
                        api_anthropic_error_t *err)
{
    return s_add(obj, key, cJSON_Duplicate(number, 0), err);
}

/* A string field: required (absent is an error), or optional (absent → *out NULL).
 * `nonempty` refuses "". */
static int s_string(const cJSON *obj, const char *key, const char *path, bool required,
                    bool nonempty, const char **out, api_anthropic_error_t *err)
{
    const cJSON *item = cJSON_GetObjectItemCaseSensitive(obj, key);
    *out = NULL;
    if (api_json_absent(item)) {
        if (required) return s_fail(err, "%s%s: field required (a string)", path, key);
        return 0;
    }
    if (!cJSON_IsString(item))
        return s_fail(err, "%s%s: must be a string, got %s", path, key, api_json_type(item));
    if (nonempty && !item->valuestring[0]) return s_fail(err, "%s%s: must not be empty", path, key);
    *out = item->valuestring;
    return 0;
}

/* ------------------------------------------------------------------------------------- */
/* messages                                                                                */

/* The user message being assembled from one Anthropic message's blocks. */
typedef struct {
    cJSON *parts;      /* OpenAI text parts, in order */
    cJSON *tool_calls; /* assistant: OpenAI tool_calls */
    size_t tool_results;
} s_turn_t;

static int s_refused_block(const char *type, const char *path, api_anthropic_error_t *err)
{
    for (size_t i = 0; i < sizeof(s_refused_blocks) / sizeof(s_refused_blocks[0]); i++)
        if (strcmp(type, s_refused_blocks[i].type) == 0)
            return s_fail(err, "%s.type: \"%s\" %s", path, type, s_refused_blocks[i].why);
    return 0;
}

static int s_text_part(cJSON *parts, const char *text, api_anthropic_error_t *err)
{
    cJSON *part = cJSON_CreateObject();
    if (!part) return s_nomem(err);
    if (s_add_string(part, "type", "text", err) || s_add_string(part, "text", text, err)) {
        cJSON_Delete(part);
        return IPL_E_NOMEM;
    }
    return s_push(parts, part, err);
}

/* A text block: its text joins the turn's parts (an empty one adds nothing, as in vLLM). */
static int s_block_text(const cJSON *block, const char *path, s_turn_t *turn,
                        api_anthropic_error_t *err)
{
    const cJSON *text = cJSON_GetObjectItemCaseSensitive(block, "text");
    if (!cJSON_IsString(text))
        return s_fail(err, "%s.text: must be a string, got %s", path, api_json_type(text));
    if (!text->valuestring[0]) return 0;
    return s_text_part(turn->parts, text->valuestring, err);
}

/* An assistant's tool_use block → one OpenAI tool call; arguments are its input as JSON. */
static int s_block_tool_use(const cJSON *block, const char *path, s_turn_t *turn,
                            api_anthropic_error_t *err)
{
    char at[96];
    snprintf(at, sizeof(at), "%s.", path);
    const char *id, *name;
    if (s_string(block, "id", at, true, true, &id, err) ||
        s_string(block, "name", at, true, true, &name, err))
        return IPL_E_INVAL;
    const cJSON *input = cJSON_GetObjectItemCaseSensitive(block, "input");
    if (!cJSON_IsObject(input))
        return s_fail(err, "%s.input: must be an object (the tool arguments), got %s", path,
                      api_json_type(input));
    char *arguments = cJSON_PrintUnformatted(input);
    if (!arguments) return s_nomem(err);
    cJSON *call = cJSON_CreateObject(), *function = cJSON_CreateObject();
    int rc = call && function ? 0 : s_nomem(err);
    if (!rc) rc = s_add_string(function, "name", name, err);
    if (!rc) rc = s_add_string(function, "arguments", arguments, err);
    free(arguments);
    if (!rc) rc = s_add_string(call, "id", id, err);
    if (!rc) rc = s_add_string(call, "type", "function", err);
    if (!rc) {
        rc = s_add(call, "function", function, err);
        function = NULL;
    }
    cJSON_Delete(function);
    if (rc) {
        cJSON_Delete(call);
        return rc;
    }
    return s_push(turn->tool_calls, call, err);
}

/* A tool_result's content: absent/null → "", a string, or text blocks joined with "\n"
 * (vLLM's _convert_user_tool_result). Writes the text into *text (malloc'd). */
static int s_tool_result_text(const cJSON *content, const char *path, char **text,
                              api_anthropic_error_t *err)
{
    *text = NULL;
    if (api_json_absent(content)) {
        *text = strdup("");
        return *text ? 0 : s_nomem(err);
    }
    if (cJSON_IsString(content)) {
        *text = strdup(content->valuestring);
        return *text ? 0 : s_nomem(err);
    }
    if (!cJSON_IsArray(content))
        return s_fail(err, "%s.content: must be a string or an array of text blocks, got %s", path,
                      api_json_type(content));
    int n = cJSON_GetArraySize(content);
    if (n > API_ANTHROPIC_MAX_ITEMS)
        return s_fail(err, "%s.content: at most %d blocks, got %d", path, API_ANTHROPIC_MAX_ITEMS,
                      n);
    /* Two passes: validate and measure, then copy. */
    size_t total = 0, k = 0;
    const cJSON *part;
    cJSON_ArrayForEach(part, content)
    {
        if (!cJSON_IsObject(part))
            return s_fail(err, "%s.content.%zu: must be a content block object, got %s", path, k,
                          api_json_type(part));
        const cJSON *type = cJSON_GetObjectItemCaseSensitive(part, "type");
        if (!cJSON_IsString(type))
            return s_fail(err, "%s.content.%zu.type: field required (a string such as \"text\")",
                          path, k);
        if (strcmp(type->valuestring, "text") != 0) {
            char at[96];
            snprintf(at, sizeof(at), "%s.content.%zu", path, k);
            if (s_refused_block(type->valuestring, at, err)) return IPL_E_INVAL;
            return s_fail(err, "%s.type: \"%s\" cannot be part of a tool_result (text blocks only)",
                          at, type->valuestring);
        }
        const cJSON *t = cJSON_GetObjectItemCaseSensitive(part, "text");
        if (!cJSON_IsString(t))
            return s_fail(err, "%s.content.%zu.text: must be a string, got %s", path, k,
                          api_json_type(t));
        total += strlen(t->valuestring) + (k ? 1 : 0);
        k++;
    }
    char *out = malloc(total + 1);
    if (!out) return s_nomem(err);
    size_t len = 0;
    k = 0;
    cJSON_ArrayForEach(part, content)
    {
        const char *t = cJSON_GetObjectItemCaseSensitive(part, "text")->valuestring;
        if (k++) out[len++] = '\n';
        size_t n_t = strlen(t);
        memcpy(out + len, t, n_t);
        len += n_t;
    }
    out[len] = '\0';
    *text = out;
    return 0;
}

/* A user's tool_result block → an OpenAI "tool" message, appended now (before the user
 * message that holds the block's text siblings, as vLLM orders them). */
static int s_block_tool_result(const cJSON *block, const char *path, cJSON *messages,
                               s_turn_t *turn, api_anthropic_error_t *err)
{
    char at[96];
    snprintf(at, sizeof(at), "%s.", path);
    const char *id;
    if (s_string(block, "tool_use_id", at, true, true, &id, err)) return IPL_E_INVAL;
    const cJSON *is_error = cJSON_GetObjectItemCaseSensitive(block, "is_error");
    if (!api_json_absent(is_error) && !cJSON_IsBool(is_error))
        return s_fail(err, "%s.is_error: must be a boolean, got %s", path, api_json_type(is_error));
    char *text = NULL;
    int rc =
        s_tool_result_text(cJSON_GetObjectItemCaseSensitive(block, "content"), path, &text, err);
    if (rc) return rc;
    cJSON *msg = cJSON_CreateObject();
    rc = msg ? 0 : s_nomem(err);
    if (!rc) rc = s_add_string(msg, "role", "tool", err);
    if (!rc) rc = s_add_string(msg, "tool_call_id", id, err);
    if (!rc) rc = s_add_string(msg, "content", text, err);
    free(text);
    if (rc) {
        cJSON_Delete(msg);
        return rc;
    }
    turn->tool_results++;
    return s_push(messages, msg, err);
}

static int s_block(const cJSON *block, bool assistant, const char *path, cJSON *messages,
                   s_turn_t *turn, api_anthropic_error_t *err)
{
    if (!cJSON_IsObject(block))
        return s_fail(err, "%s: must be a content block object, got %s", path,
                      api_json_type(block));
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(block, "type");
    if (!cJSON_IsString(type))
        return s_fail(err, "%s.type: field required (a string such as \"text\")", path);
    const char *t = type->valuestring;
    if (strcmp(t, "text") == 0) return s_block_text(block, path, turn, err);
    if (strcmp(t, "tool_use") == 0) {
        if (!assistant)
            return s_fail(err, "%s.type: \"tool_use\" blocks belong in assistant messages", path);
        return s_block_tool_use(block, path, turn, err);
    }
    if (strcmp(t, "tool_result") == 0) {
        if (assistant)
            return s_fail(err, "%s.type: \"tool_result\" blocks belong in user messages", path);
        return s_block_tool_result(block, path, messages, turn, err);
    }
    if (s_refused_block(t, path, err)) return IPL_E_INVAL;
    return s_fail(err,
                  "%s.type: unknown content block type \"%s\" (this gateway takes text, tool_use "
                  "and tool_result)",
                  path, t);
}

/* Puts the turn's text into msg as vLLM does: one part → a string, several → the parts. */
static int s_turn_content(cJSON *msg, s_turn_t *turn, api_anthropic_error_t *err)
{
    int nparts = cJSON_GetArraySize(turn->parts);
    if (nparts == 1) {
        cJSON *only = cJSON_GetArrayItem(turn->parts, 0);
        return s_add_string(msg, "content",
                            cJSON_GetObjectItemCaseSensitive(only, "text")->valuestring, err);
    }
    cJSON *parts = turn->parts;
    turn->parts = NULL;
    return s_add(msg, "content", parts, err);
}

/* One Anthropic message → zero or more OpenAI messages appended to `messages`. */
static int s_message(const cJSON *m, size_t i, cJSON *messages, api_anthropic_error_t *err)
{
    if (!cJSON_IsObject(m))
        return s_fail(err, "messages.%zu: must be a message object, got %s", i, api_json_type(m));
    const cJSON *role = cJSON_GetObjectItemCaseSensitive(m, "role");
    if (!cJSON_IsString(role))
        return s_fail(err, "messages.%zu.role: field required (\"user\" or \"assistant\")", i);
    bool assistant = strcmp(role->valuestring, "assistant") == 0;
    if (!assistant && strcmp(role->valuestring, "user") != 0) {
        if (strcmp(role->valuestring, "system") == 0)
            return s_fail(err,
                          "messages.%zu.role: \"system\" is not a message role; put the system "
                          "prompt in the top-level \"system\" field",
                          i);
        return s_fail(err, "messages.%zu.role: must be \"user\" or \"assistant\", got \"%s\"", i,
                      role->valuestring);
    }
    const cJSON *content = cJSON_GetObjectItemCaseSensitive(m, "content");
    if (cJSON_IsString(content)) {
        cJSON *msg = cJSON_CreateObject();
        if (!msg) return s_nomem(err);
        if (s_add_string(msg, "role", role->valuestring, err) ||
            s_add_string(msg, "content", content->valuestring, err)) {
            cJSON_Delete(msg);
            return IPL_E_NOMEM;
        }
        return s_push(messages, msg, err);
    }
    if (!cJSON_IsArray(content))
        return s_fail(err,
                      "messages.%zu.content: must be a string or an array of content blocks, got "
                      "%s",
                      i, api_json_type(content));
    int n = cJSON_GetArraySize(content);
    if (n == 0) return s_fail(err, "messages.%zu.content: must not be an empty array", i);
    if (n > API_ANTHROPIC_MAX_ITEMS)
        return s_fail(err, "messages.%zu.content: at most %d blocks, got %d", i,
                      API_ANTHROPIC_MAX_ITEMS, n);

    s_turn_t turn = {.parts = cJSON_CreateArray(), .tool_calls = cJSON_CreateArray()};
    cJSON *msg = cJSON_CreateObject();
    int rc = turn.parts && turn.tool_calls && msg ? 0 : s_nomem(err);
    size_t k = 0;
    const cJSON *block;
    cJSON_ArrayForEach(block, content)
    {
        if (rc) break;
        char path[64];
        snprintf(path, sizeof(path), "messages.%zu.content.%zu", i, k++);
        rc = s_block(block, assistant, path, messages, &turn, err);
    }
    if (!rc) rc = s_add_string(msg, "role", role->valuestring, err);
    bool has_text = turn.parts && cJSON_GetArraySize(turn.parts) > 0;
    bool has_calls = turn.tool_calls && cJSON_GetArraySize(turn.tool_calls) > 0;
    if (!rc && has_text) rc = s_turn_content(msg, &turn, err);
    if (!rc && has_calls) {
        rc = s_add(msg, "tool_calls", turn.tool_calls, err);
        turn.tool_calls = NULL;
    }
    /* A turn with no text keeps its place with empty content, except a user turn that held
     * only tool results: those became "tool" messages (vLLM: the user message is left out). */
    if (!rc && !has_text && !has_calls) {
        if (turn.tool_results) {
            cJSON_Delete(msg);
            msg = NULL;
        } else {
            rc = s_add_string(msg, "content", "", err);
        }
    }
    cJSON_Delete(turn.parts);
    cJSON_Delete(turn.tool_calls);
    if (rc) {
        cJSON_Delete(msg);
        return rc;
    }
    return msg ? s_push(messages, msg, err) : 0;
}

/* ------------------------------------------------------------------------------------- */
/* top-level fields                                                                        */

/* "system": a string, or an array of text blocks joined as they are (vLLM joins with ""). */
static int s_system(const cJSON *system, cJSON *messages, api_anthropic_error_t *err)
{
    if (api_json_absent(system)) return 0;
    char *text = NULL;
    if (cJSON_IsString(system)) {
        text = strdup(system->valuestring);
    } else if (cJSON_IsArray(system)) {
        int n = cJSON_GetArraySize(system);
        if (n > API_ANTHROPIC_MAX_ITEMS)
            return s_fail(err, "system: at most %d blocks, got %d", API_ANTHROPIC_MAX_ITEMS, n);
        api_buf_t joined = {0};
        size_t k = 0;
        const cJSON *block;
        cJSON_ArrayForEach(block, system)
        {
            const cJSON *type = cJSON_GetObjectItemCaseSensitive(block, "type");
            const cJSON *t = cJSON_GetObjectItemCaseSensitive(block, "text");
            int rc = 0;
            if (!cJSON_IsObject(block))
                rc = s_fail(err, "system.%zu: must be a text block object, got %s", k,
                            api_json_type(block));
            else if (!cJSON_IsString(type))
                rc = s_fail(err, "system.%zu.type: field required (\"text\")", k);
            else if (strcmp(type->valuestring, "text") != 0)
                rc = s_fail(err,
                            "system.%zu.type: \"%s\" is not allowed in system (text blocks only)",
                            k, type->valuestring);
            else if (!cJSON_IsString(t))
                rc = s_fail(err, "system.%zu.text: must be a string, got %s", k, api_json_type(t));
            if (rc) {
                api_buf_free(&joined);
                return rc;
            }
            if (strncmp(t->valuestring, S_BILLING_HEADER, strlen(S_BILLING_HEADER)) != 0)
                api_buf_puts(&joined, t->valuestring);
            k++;
        }
        text = api_buf_take(&joined);
    } else {
        return s_fail(err, "system: must be a string or an array of text blocks, got %s",
                      api_json_type(system));
    }
    if (!text) return s_nomem(err);
    int rc = 0;
    if (text[0]) { /* an empty system prompt adds no message (vLLM: `if system:`) */
        cJSON *msg = cJSON_CreateObject();
        rc = msg ? 0 : s_nomem(err);
        if (!rc) rc = s_add_string(msg, "role", "system", err);
        if (!rc) rc = s_add_string(msg, "content", text, err);
        if (!rc)
            rc = s_push(messages, msg, err);
        else
            cJSON_Delete(msg);
    }
    free(text);
    return rc;
}

/* An optional number within [lo, hi]; whole when `integer`. Copied to the OpenAI body. */
static int s_number(const cJSON *root, const char *key, double lo, double hi, bool integer,
                    cJSON *openai, api_anthropic_error_t *err)
{
    const cJSON *item = cJSON_GetObjectItemCaseSensitive(root, key);
    if (api_json_absent(item)) return 0;
    if (!cJSON_IsNumber(item))
        return s_fail(err, "%s: must be a number, got %s", key, api_json_type(item));
    double v = item->valuedouble;
    if (!isfinite(v) || v < lo || v > hi || (integer && v != floor(v)))
        return s_fail(err, "%s: must be %s from %.10g to %.10g, got %.10g", key,
                      integer ? "a whole number" : "a number", lo, hi, v);
    return s_add_number(openai, key, item, err);
}

static int s_max_tokens(const cJSON *root, api_anthropic_request_t *req, cJSON *openai,
                        api_anthropic_error_t *err)
{
    const cJSON *item = cJSON_GetObjectItemCaseSensitive(root, "max_tokens");
    if (req->kind == API_ANTHROPIC_COUNT_TOKENS) return 0; /* not part of count_tokens */
    if (api_json_absent(item))
        return s_fail(err, "max_tokens: field required (a positive whole number, e.g. "
                           "\"max_tokens\": 1024)");
    double v = cJSON_IsNumber(item) ? item->valuedouble : NAN;
    if (!isfinite(v) || v != floor(v) || v < 1 || v > API_ANTHROPIC_MAX_TOKENS)
        return s_fail(err, "max_tokens: must be a positive whole number up to %.0f, got %s",
                      API_ANTHROPIC_MAX_TOKENS,
                      cJSON_IsNumber(item) ? "a number out of range or with a fraction"
                                           : api_json_type(item));
    req->max_tokens = (int64_t)v;
    return s_add(openai, "max_tokens", cJSON_CreateNumber(v), err);
}

static int s_stop_sequences(const cJSON *root, api_anthropic_request_t *req, cJSON *openai,
                            api_anthropic_error_t *err)
{
    const cJSON *stops = cJSON_GetObjectItemCaseSensitive(root, "stop_sequences");
    if (api_json_absent(stops)) return 0;
    if (!cJSON_IsArray(stops))
        return s_fail(err, "stop_sequences: must be an array of strings, got %s",
                      api_json_type(stops));
    int n = cJSON_GetArraySize(stops);
    if (n > API_ANTHROPIC_MAX_STOP)
        return s_fail(err, "stop_sequences: at most %d, got %d", API_ANTHROPIC_MAX_STOP, n);
    if (n == 0) return 0;
    req->stops = calloc((size_t)n, sizeof(char *));
    cJSON *stop = cJSON_CreateArray();
    if (!req->stops || !stop) {
        cJSON_Delete(stop);
        return s_nomem(err);
    }
    size_t k = 0;
    const cJSON *s;
    cJSON_ArrayForEach(s, stops)
    {
        int rc = 0;
        if (!cJSON_IsString(s))
            rc = s_fail(err, "stop_sequences.%zu: must be a string, got %s", k, api_json_type(s));
        else if (!s->valuestring[0])
            rc = s_fail(err, "stop_sequences.%zu: must not be empty", k);
        else if (!(req->stops[k] = strdup(s->valuestring)))
            rc = s_nomem(err);
        else
            req->nstop = ++k;
        if (!rc) rc = s_push(stop, cJSON_CreateString(s->valuestring), err);
        if (rc) {
            cJSON_Delete(stop);
            return rc;
        }
    }
    return s_add(openai, "stop", stop, err);
}

static int s_metadata(const cJSON *root, cJSON *openai, api_anthropic_error_t *err)
{
    const cJSON *metadata = cJSON_GetObjectItemCaseSensitive(root, "metadata");
    if (api_json_absent(metadata)) return 0;
    if (!cJSON_IsObject(metadata))
        return s_fail(err, "metadata: must be an object, got %s", api_json_type(metadata));
    const char *user;
    if (s_string(metadata, "user_id", "metadata.", false, false, &user, err)) return IPL_E_INVAL;
    if (!user) return 0;
    if (strlen(user) > 256)
        return s_fail(err, "metadata.user_id: at most 256 bytes, got %zu", strlen(user));
    return s_add_string(openai, "user", user, err);
}

/* One client tool → an OpenAI function tool. `names` collects the names (duplicates refused). */
static int s_tool(const cJSON *tool, size_t k, cJSON *names, cJSON *tools,
                  api_anthropic_error_t *err)
{
    if (!cJSON_IsObject(tool))
        return s_fail(err, "tools.%zu: must be a tool object, got %s", k, api_json_type(tool));
    char at[48];
    snprintf(at, sizeof(at), "tools.%zu.", k);
    const char *type, *name, *description;
    if (s_string(tool, "type", at, false, false, &type, err)) return IPL_E_INVAL;
    if (type && strcmp(type, "custom") != 0)
        return s_fail(err,
                      "tools.%zu.type: \"%s\" is a server tool, which this gateway does not run; "
                      "only client tools (name, description, input_schema) are supported",
                      k, type);
    if (s_string(tool, "name", at, true, true, &name, err) ||
        s_string(tool, "description", at, false, false, &description, err))
        return IPL_E_INVAL;
    if (strlen(name) > API_ANTHROPIC_MAX_TOOL_NAME)
        return s_fail(err, "tools.%zu.name: at most %d bytes, got %zu", k,
                      API_ANTHROPIC_MAX_TOOL_NAME, strlen(name));
    if (cJSON_GetObjectItemCaseSensitive(names, name))
        return s_fail(err, "tools.%zu.name: \"%s\" is given twice; tool names must be unique", k,
                      name);
    const cJSON *schema = cJSON_GetObjectItemCaseSensitive(tool, "input_schema");
    if (!cJSON_IsObject(schema))
        return s_fail(err, "tools.%zu.input_schema: field required (a JSON Schema object), got %s",
                      k, api_json_type(schema));
    if (s_add(names, name, cJSON_CreateTrue(), err)) return IPL_E_NOMEM;

    cJSON *parameters = cJSON_Duplicate(schema, 1);
    cJSON *function = cJSON_CreateObject(), *out = cJSON_CreateObject();
    int rc = parameters && function && out ? 0 : s_nomem(err);
    /* A schema without "type" is an object schema; vLLM's AnthropicTool adds it too. */
    if (!rc && !cJSON_GetObjectItemCaseSensitive(parameters, "type"))
        rc = s_add_string(parameters, "type", "object", err);
    if (!rc) rc = s_add_string(function, "name", name, err);
    if (!rc && description) rc = s_add_string(function, "description", description, err);
    if (!rc) {
        rc = s_add(function, "parameters", parameters, err);
        parameters = NULL;
    }
    if (!rc) rc = s_add_string(out, "type", "function", err);
    if (!rc) {
        rc = s_add(out, "function", function, err);
        function = NULL;
    }
    cJSON_Delete(parameters);
    cJSON_Delete(function);
    if (rc) {
        cJSON_Delete(out);
        return rc;
    }
    return s_push(tools, out, err);
}

static int s_tools(const cJSON *root, api_anthropic_request_t *req, cJSON *openai, cJSON *names,
                   api_anthropic_error_t *err)
{
    const cJSON *tools = cJSON_GetObjectItemCaseSensitive(root, "tools");
    if (api_json_absent(tools)) return 0;
    if (!cJSON_IsArray(tools))
        return s_fail(err, "tools: must be an array of tools, got %s", api_json_type(tools));
    int n = cJSON_GetArraySize(tools);
    if (n > API_ANTHROPIC_MAX_ITEMS)
        return s_fail(err, "tools: at most %d, got %d", API_ANTHROPIC_MAX_ITEMS, n);
    if (n == 0) return 0; /* OpenAI refuses an empty "tools"; none is the same meaning */
    cJSON *out = cJSON_CreateArray();
    if (!out) return s_nomem(err);
    size_t k = 0;
    const cJSON *tool;
    cJSON_ArrayForEach(tool, tools)
    {
        int rc = s_tool(tool, k++, names, out, err);
        if (rc) {
            cJSON_Delete(out);
            return rc;
        }
    }
    req->has_tools = true;
    return s_add(openai, "tools", out, err);
}

/* tool_choice; `names` holds the tools' names. Without tools, "auto" and "none" mean no tool
 * call either way and are left out (OpenAI refuses tool_choice without tools). */
static int s_tool_choice(const cJSON *root, bool has_tools, const cJSON *names, cJSON *openai,
                         api_anthropic_error_t *err)
{
    const cJSON *choice = cJSON_GetObjectItemCaseSensitive(root, "tool_choice");
    if (api_json_absent(choice))
        return has_tools ? s_add_string(openai, "tool_choice", "auto", err) : 0;
    if (!cJSON_IsObject(choice))
        return s_fail(err, "tool_choice: must be an object such as {\"type\": \"auto\"}, got %s",
                      api_json_type(choice));
    const char *type;
    if (s_string(choice, "type", "tool_choice.", true, false, &type, err)) return IPL_E_INVAL;
    const cJSON *dptu = cJSON_GetObjectItemCaseSensitive(choice, "disable_parallel_tool_use");
    if (!api_json_absent(dptu) && !cJSON_IsBool(dptu))
        return s_fail(err, "tool_choice.disable_parallel_tool_use: must be a boolean, got %s",
                      api_json_type(dptu));
    bool any = strcmp(type, "any") == 0, tool = strcmp(type, "tool") == 0;
    if (!any && !tool && strcmp(type, "auto") != 0 && strcmp(type, "none") != 0)
        return s_fail(
            err, "tool_choice.type: must be \"auto\", \"any\", \"tool\" or \"none\", got \"%s\"",
            type);
    if ((any || tool) && !has_tools)
        return s_fail(err, "tool_choice.type: \"%s\" needs at least one tool in \"tools\"", type);
    if (!has_tools) return 0;
    int rc;
    if (tool) {
        const char *name;
        if (s_string(choice, "name", "tool_choice.", true, true, &name, err)) return IPL_E_INVAL;
        if (!cJSON_GetObjectItemCaseSensitive(names, name)) {
            const cJSON *first = names->child;
            return s_fail(err, "tool_choice.name: \"%s\" is not one of the tools (e.g. \"%s\")",
                          name, first ? first->string : "");
        }
        cJSON *named = cJSON_CreateObject(), *function = cJSON_CreateObject();
        rc = named && function ? 0 : s_nomem(err);
        if (!rc) rc = s_add_string(function, "name", name, err);
        if (!rc) rc = s_add_string(named, "type", "function", err);
        if (!rc) {
            rc = s_add(named, "function", function, err);
            function = NULL;
        }
        cJSON_Delete(function);
        if (!rc)
            rc = s_add(openai, "tool_choice", named, err);
        else
            cJSON_Delete(named);
    } else {
        rc = s_add_string(openai, "tool_choice", any ? "required" : type, err);
    }
    if (!rc && cJSON_IsTrue(dptu))
        rc = s_add(openai, "parallel_tool_calls", cJSON_CreateFalse(), err);
    return rc;
}

static int s_stream(const cJSON *root, api_anthropic_request_t *req, cJSON *openai,
                    api_anthropic_error_t *err)
{
    const cJSON *stream = cJSON_GetObjectItemCaseSensitive(root, "stream");
    if (req->kind == API_ANTHROPIC_COUNT_TOKENS || api_json_absent(stream)) return 0;
    if (!cJSON_IsBool(stream))
        return s_fail(err, "stream: must be a boolean, got %s", api_json_type(stream));
    if (!cJSON_IsTrue(stream)) return 0;
    req->stream = true;
    cJSON *options = cJSON_CreateObject();
    if (!options || s_add(options, "include_usage", cJSON_CreateTrue(), err)) {
        cJSON_Delete(options);
        return s_nomem(err);
    }
    if (s_add(openai, "stream", cJSON_CreateTrue(), err)) {
        cJSON_Delete(options);
        return IPL_E_NOMEM;
    }
    return s_add(openai, "stream_options", options, err);
}

/* Fields this text path cannot honour: "thinking" unless disabled, and the table above. */
static int s_refused(const cJSON *root, api_anthropic_error_t *err)
{
    const cJSON *thinking = cJSON_GetObjectItemCaseSensitive(root, "thinking");
    if (!api_json_absent(thinking)) {
        const cJSON *type = cJSON_GetObjectItemCaseSensitive(thinking, "type");
        if (!cJSON_IsObject(thinking) || !cJSON_IsString(type))
            return s_fail(err,
                          "thinking: must be an object such as {\"type\": \"disabled\"}, "
                          "got %s",
                          api_json_type(thinking));
        if (strcmp(type->valuestring, "disabled") != 0)
            return s_fail(err,
                          "thinking.type: \"%s\": extended thinking is not supported by this text "
                          "model; leave \"thinking\" out or set {\"type\": \"disabled\"}",
                          type->valuestring);
    }
    for (size_t i = 0; i < sizeof(s_refused_fields) / sizeof(s_refused_fields[0]); i++)
        if (!api_json_absent(cJSON_GetObjectItemCaseSensitive(root, s_refused_fields[i].field)))
            return s_fail(err, "%s: %s; leave it out", s_refused_fields[i].field,
                          s_refused_fields[i].why);
    return 0;
}

static int s_messages(const cJSON *root, cJSON *openai, api_anthropic_error_t *err)
{
    cJSON *messages = cJSON_CreateArray();
    if (s_add(openai, "messages", messages, err)) return IPL_E_NOMEM;
    int rc = s_system(cJSON_GetObjectItemCaseSensitive(root, "system"), messages, err);
    if (rc) return rc;
    const cJSON *in = cJSON_GetObjectItemCaseSensitive(root, "messages");
    if (!cJSON_IsArray(in))
        return s_fail(err, "messages: field required (an array of messages), got %s",
                      api_json_type(in));
    int n = cJSON_GetArraySize(in);
    if (n == 0) return s_fail(err, "messages: must contain at least one message");
    if (n > API_ANTHROPIC_MAX_ITEMS)
        return s_fail(err, "messages: at most %d messages, got %d", API_ANTHROPIC_MAX_ITEMS, n);
    size_t i = 0;
    const cJSON *m;
    cJSON_ArrayForEach(m, in)
    {
        rc = s_message(m, i++, messages, err);
        if (rc) return rc;
    }
    return 0;
}

/* Every field in the order the OpenAI body lists them. */
static int s_translate(const cJSON *root, api_anthropic_request_t *req, cJSON *openai,
                       api_anthropic_error_t *err)
{
    const char *model;
    if (s_string(root, "model", "", true, true, &model, err)) return IPL_E_INVAL;
    if (!(req->model = strdup(model))) return s_nomem(err);
    int rc = s_add_string(openai, "model", model, err);
    if (!rc) rc = s_refused(root, err);
    if (!rc) rc = s_messages(root, openai, err);
    if (!rc) rc = s_max_tokens(root, req, openai, err);
    if (!rc) rc = s_stop_sequences(root, req, openai, err);
    if (!rc) rc = s_number(root, "temperature", 0, 1, false, openai, err);
    if (!rc) rc = s_number(root, "top_p", 0, 1, false, openai, err);
    if (!rc) rc = s_number(root, "top_k", 0, 1e9, true, openai, err);
    if (!rc) rc = s_metadata(root, openai, err);
    cJSON *names = cJSON_CreateObject();
    if (!rc && !names) rc = s_nomem(err);
    if (!rc) rc = s_tools(root, req, openai, names, err);
    if (!rc) rc = s_tool_choice(root, req->has_tools, names, openai, err);
    cJSON_Delete(names);
    if (!rc) rc = s_stream(root, req, openai, err);
    return rc;
}

int api_anthropic_request_parse(api_anthropic_kind_t kind, const char *body, size_t len,
                                api_anthropic_request_t **out, api_anthropic_error_t *err)
{
    *out = NULL;
    if (!body || len == 0) return s_fail(err, "the request body is empty; send a JSON object");
    size_t at = 0;
    cJSON *root = api_json_parse(body, len, &at);
    if (!root) return s_fail(err, "the request body is not valid JSON (error near byte %zu)", at);
    int rc;
    api_anthropic_request_t *req = NULL;
    if (!cJSON_IsObject(root)) {
        rc = s_fail(err, "the request body must be a JSON object, got %s", api_json_type(root));
        goto done;
    }
    req = calloc(1, sizeof(*req));
    if (!req || !(req->openai = cJSON_CreateObject())) {
        rc = s_nomem(err);
        goto done;
    }
    req->kind = kind;
    rc = s_translate(root, req, req->openai, err);
done:
    cJSON_Delete(root);
    if (rc) {
        api_anthropic_request_destroy(&req);
        return rc;
    }
    *out = req;
    return 0;
}

void api_anthropic_request_destroy(api_anthropic_request_t **self_p)
{
    if (!self_p || !*self_p) return;
    api_anthropic_request_t *self = *self_p;
    cJSON_Delete(self->openai);
    free(self->model);
    for (size_t i = 0; i < self->nstop; i++)
        free(self->stops[i]);
    free(self->stops);
    free(self);
    *self_p = NULL;
}

cJSON *api_anthropic_request_openai(const api_anthropic_request_t *self)
{
    return self->openai;
}

char *api_anthropic_request_openai_json(const api_anthropic_request_t *self)
{
    return cJSON_PrintUnformatted(self->openai);
}

api_anthropic_kind_t api_anthropic_request_kind(const api_anthropic_request_t *self)
{
    return self->kind;
}

const char *api_anthropic_request_model(const api_anthropic_request_t *self)
{
    return self->model;
}

bool api_anthropic_request_stream(const api_anthropic_request_t *self)
{
    return self->stream;
}

int64_t api_anthropic_request_max_tokens(const api_anthropic_request_t *self)
{
    return self->max_tokens;
}

const char *const *api_anthropic_request_stops(const api_anthropic_request_t *self, size_t *n)
{
    *n = self->nstop;
    return (const char *const *)self->stops;
}

bool api_anthropic_request_has_tools(const api_anthropic_request_t *self)
{
    return self->has_tools;
}

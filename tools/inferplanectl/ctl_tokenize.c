/* inferplanectl tokenize — encodes stdin with a tokenizer (a Hugging Face tokenizer.json or
 * the built-in one), decodes ids, or measures encoding throughput.
 *
 *   inferplanectl tokenize --tokenizer FILE|builtin [--add-special-tokens] < text
 *       prints the ids of the whole input, space-separated, on one line
 *   inferplanectl tokenize --tokenizer FILE --decode < ids
 *       reads ids (separated by blanks or commas; [ and ] ignored) and writes the text
 *   inferplanectl tokenize --tokenizer MODEL_DIR|FILE|builtin --chat [--render] < chat
 *       reads an OpenAI `messages` JSON array (or {"messages": [..], "tools": [..],
 *       "add_generation_prompt": bool}), renders it as the gateway does (ipl_prompt: the
 *       folder's chat template, else ChatML) and prints the ids as a JSON array (--render:
 *       the rendered prompt text)
 *   --jsonl     one JSON value per input line: a string to encode (an array of ids with
 *               --decode); one JSON line out per line in (tools/node/hf_tokenize.js speaks the
 *               same, for parity tests)
 *   --bench     cold and warm (the section cache off, then on), side by side: the plain
 *               input, or with --chat the chat (ctl_tokenize_bench.c)
 */
#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ctl.h"
#include "ipl_prompt.h"
#include "ipl_unicode.h"

#define S_MAX_INPUT (1u << 30)

typedef struct {
    const char *file;
    bool special, decode, jsonl, bench, chat, render;
} s_opts_t;

static int s_usage(FILE *out, int rc)
{
    fprintf(out,
            "usage: inferplanectl tokenize --tokenizer FILE|builtin [--add-special-tokens]\n"
            "                              [--decode] [--jsonl] [--bench]\n"
            "       inferplanectl tokenize --tokenizer MODEL_DIR|FILE|builtin --chat [--render]\n"
            "  Encodes stdin and prints the ids, space-separated (--decode: reads ids, writes\n"
            "  text). FILE is a Hugging Face tokenizer.json (Llama-3, Qwen2/2.5/3).\n"
            "  --add-special-tokens  add the post-processor's tokens (Llama-3.1: BOS)\n"
            "  --jsonl               one JSON string (--decode: array of ids) per line in,\n"
            "                        one JSON array of ids (--decode: string) per line out\n"
            "  --bench               encode stdin repeatedly, cold (no cache) then warm\n"
            "                        (seen before), ~1 s each; with --chat: the chat's\n"
            "                        render+encode, each round's last message distinct\n"
            "  --chat                stdin is a chat (a messages array, or an object with\n"
            "                        messages, tools, add_generation_prompt) rendered with the\n"
            "                        model folder's chat template; ids out as a JSON array\n"
            "  --render              with --chat: print the rendered prompt, not its ids\n");
    return rc;
}

/* All of stdin (NUL-terminated); NULL when unreadable or larger than S_MAX_INPUT. */
static char *s_read_all(FILE *in, size_t *len)
{
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap + 1);
    while (buf) {
        size_t k = fread(buf + n, 1, cap - n, in);
        n += k;
        if (k == 0) break;
        if (n == cap) {
            char *b = cap < S_MAX_INPUT ? realloc(buf, cap * 2 + 1) : NULL;
            if (!b) {
                free(buf);
                return NULL;
            }
            buf = b;
            cap *= 2;
        }
    }
    if (!buf || ferror(in)) {
        free(buf);
        return NULL;
    }
    buf[n] = '\0';
    *len = n;
    return buf;
}

static int s_hex4(const char *s)
{
    int v = 0;
    for (int i = 0; i < 4; i++) {
        int c = (unsigned char)s[i], d = -1;
        if (c >= '0' && c <= '9') d = c - '0';
        if ((c | 0x20) >= 'a' && (c | 0x20) <= 'f') d = (c | 0x20) - 'a' + 10;
        if (d < 0) return -1;
        v = v * 16 + d;
    }
    return v;
}

/* Decodes the JSON string literal of line[0..len) (blanks around it allowed) into a malloc'd
 * buffer. Unlike cJSON it keeps \u0000, since NUL is an ordinary byte to a tokenizer. A lone
 * surrogate becomes U+FFFD, as JavaScript's TextEncoder makes it. NULL when malformed. */
static char *s_json_string(const char *s, size_t len, size_t *outlen)
{
    while (len > 0 && strchr(" \t\r\n", s[len - 1]))
        len--;
    while (len > 0 && strchr(" \t\r\n", *s))
        s++, len--;
    if (len < 2 || s[0] != '"' || s[len - 1] != '"') return NULL;
    static const char esc[] = "\"\\/bfnrt", val[] = "\"\\/\b\f\n\r\t";
    char *out = malloc(len); /* an escape never decodes to more bytes than it takes */
    size_t o = 0, end = len - 1;
    for (size_t i = 1; out && i < end; i++) {
        if (s[i] != '\\') {
            out[o++] = s[i];
            continue;
        }
        const char *e = ++i < end && s[i] ? strchr(esc, s[i]) : NULL;
        if (e) {
            out[o++] = val[e - esc];
            continue;
        }
        int cp = i < end && s[i] == 'u' && i + 4 < end ? s_hex4(s + i + 1) : -1;
        if (cp < 0) {
            free(out);
            return NULL;
        }
        i += 4;
        if (cp >= 0xD800 && cp <= 0xDBFF && i + 6 < end && s[i + 1] == '\\' && s[i + 2] == 'u') {
            int lo = s_hex4(s + i + 3);
            if (lo >= 0xDC00 && lo <= 0xDFFF) {
                cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                i += 6;
            }
        }
        if (cp >= 0xD800 && cp <= 0xDFFF) cp = 0xFFFD;
        o += ipl_utf8_put((uint32_t)cp, (unsigned char *)out + o);
    }
    *outlen = o;
    return out;
}

static uint32_t *s_encode(const ipl_tokenizer_t *tok, const s_opts_t *o, const char *text,
                          size_t len, size_t *n)
{
    return o->special ? ipl_tokenizer_encode_with_special(tok, text, len, n)
                      : ipl_tokenizer_encode(tok, text, len, n);
}

/* Parses ids separated by blanks, commas or brackets into a malloc'd array. */
static uint32_t *s_parse_ids(const char *s, size_t *n)
{
    size_t cap = 64;
    uint32_t *ids = malloc(cap * sizeof *ids);
    *n = 0;
    while (ids && *s) {
        if (strchr(" \t\r\n,[]", *s)) {
            s++;
            continue;
        }
        char *end;
        unsigned long v = strtoul(s, &end, 10);
        if (end == s || v > UINT32_MAX) {
            fprintf(stderr, "tokenize: not an id near \"%.20s\"\n", s);
            free(ids);
            return NULL;
        }
        if (*n == cap) {
            uint32_t *b = realloc(ids, (cap *= 2) * sizeof *ids);
            if (!b) break;
            ids = b;
        }
        ids[(*n)++] = (uint32_t)v;
        s = end;
    }
    return ids;
}

static int s_print_ids(const uint32_t *ids, size_t n)
{
    for (size_t i = 0; i < n; i++)
        printf(i ? " %u" : "%u", ids[i]);
    printf("\n");
    return 0;
}

/* --chat: stdin's chat rendered as the gateway renders it; its ids (or --render: the text). */
static int s_chat(const ipl_prompt_t *model, const s_opts_t *o)
{
    size_t len = 0;
    char *input = s_read_all(stdin, &len);
    cJSON *root = input ? cJSON_ParseWithLength(input, len) : NULL;
    free(input);
    const cJSON *msgs =
        cJSON_IsObject(root) ? cJSON_GetObjectItemCaseSensitive(root, "messages") : root;
    const cJSON *tools = cJSON_GetObjectItemCaseSensitive(root, "tools");
    const cJSON *agp = cJSON_GetObjectItemCaseSensitive(root, "add_generation_prompt");
    if (!cJSON_IsArray(msgs)) {
        fprintf(stderr, "tokenize: --chat: stdin must be a JSON array of chat messages or an "
                        "object with \"messages\"\n");
        cJSON_Delete(root);
        return 2;
    }
    char err[512] = "", *text = NULL;
    size_t n = 0;
    int rc = ipl_prompt_render(model, msgs, cJSON_IsArray(tools) ? tools : NULL,
                               !cJSON_IsFalse(agp), false, NULL, &text, &n, err, sizeof err);
    cJSON_Delete(root);
    if (rc) {
        fprintf(stderr, "tokenize: --chat: %s\n", *err ? err : "out of memory");
        return 1;
    }
    if (o->render) {
        fwrite(text, 1, n, stdout);
        free(text);
        return 0;
    }
    size_t nids = 0;
    uint32_t *ids = ipl_prompt_encode(model, text, n, true, &nids);
    free(text);
    if (!ids) {
        fprintf(stderr, "tokenize: out of memory\n");
        return 1;
    }
    printf("[");
    for (size_t i = 0; i < nids; i++)
        printf(i ? ",%u" : "%u", ids[i]);
    printf("]\n");
    free(ids);
    return 0;
}

/* --jsonl: one JSON value per line in, one out. */
static int s_jsonl(const ipl_tokenizer_t *tok, const s_opts_t *o)
{
    char *line = NULL;
    size_t cap = 0;
    ssize_t len;
    int rc = 0, lineno = 0;
    while (rc == 0 && (len = getline(&line, &cap, stdin)) > 0) {
        lineno++;
        cJSON *in = o->decode ? cJSON_ParseWithLength(line, (size_t)len) : NULL;
        size_t tlen = 0;
        char *text = o->decode ? NULL : s_json_string(line, (size_t)len, &tlen);
        char *out = NULL;
        if (text) {
            size_t n;
            uint32_t *ids = s_encode(tok, o, text, tlen, &n);
            cJSON *arr = ids ? cJSON_CreateArray() : NULL;
            for (size_t i = 0; arr && i < n; i++)
                cJSON_AddItemToArray(arr, cJSON_CreateNumber(ids[i]));
            out = arr ? cJSON_PrintUnformatted(arr) : NULL;
            cJSON_Delete(arr);
            free(ids);
            free(text);
        } else if (o->decode && cJSON_IsArray(in)) {
            size_t n = (size_t)cJSON_GetArraySize(in), k = 0;
            uint32_t *ids = malloc((n ? n : 1) * sizeof *ids);
            for (const cJSON *it = in->child; ids && it; it = it->next)
                ids[k++] = cJSON_IsNumber(it) && it->valuedouble >= 0 ? (uint32_t)it->valuedouble
                                                                      : UINT32_MAX;
            char *decoded = ids ? ipl_tokenizer_decode(tok, ids, k) : NULL;
            cJSON *str = decoded ? cJSON_CreateString(decoded) : NULL;
            out = str ? cJSON_PrintUnformatted(str) : NULL;
            cJSON_Delete(str);
            free(decoded);
            free(ids);
        } else {
            fprintf(stderr, "tokenize: stdin line %d: not a JSON %s\n", lineno,
                    o->decode ? "array of ids" : "string");
            rc = 1;
        }
        if (out) {
            printf("%s\n", out);
            free(out);
        } else if (rc == 0) {
            fprintf(stderr, "tokenize: stdin line %d: out of memory\n", lineno);
            rc = 1;
        }
        cJSON_Delete(in);
    }
    free(line);
    return rc;
}

int ctl_tokenize(int argc, char **argv)
{
    s_opts_t o = {0};
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--tokenizer") && i + 1 < argc)
            o.file = argv[++i];
        else if (!strcmp(argv[i], "--add-special-tokens"))
            o.special = true;
        else if (!strcmp(argv[i], "--decode"))
            o.decode = true;
        else if (!strcmp(argv[i], "--jsonl"))
            o.jsonl = true;
        else if (!strcmp(argv[i], "--bench"))
            o.bench = true;
        else if (!strcmp(argv[i], "--chat"))
            o.chat = true;
        else if (!strcmp(argv[i], "--render"))
            o.render = true;
        else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h"))
            return s_usage(stdout, 0);
        else {
            fprintf(stderr, "tokenize: unknown option '%s'\n", argv[i]);
            return s_usage(stderr, 2);
        }
    }
    if (!o.file) {
        fprintf(stderr, "tokenize: --tokenizer is required\n");
        return s_usage(stderr, 2);
    }
    char err[512] = "";
    ipl_prompt_t *model = ipl_prompt_open(o.file, err, sizeof err);
    if (!model) {
        fprintf(stderr, "tokenize: %s\n", *err ? err : "out of memory");
        return 1;
    }
    const ipl_tokenizer_t *tok = ipl_prompt_tokenizer(model);
    int rc = 0;
    if (o.bench) {
        size_t len = 0;
        char *text = s_read_all(stdin, &len);
        rc = text ? ctl_tokenize_bench(model, text, len, o.chat, o.special) : 1;
        free(text);
    } else if (o.chat) {
        rc = s_chat(model, &o);
    } else if (o.jsonl) {
        rc = s_jsonl(tok, &o);
    } else {
        size_t len = 0;
        char *text = s_read_all(stdin, &len);
        if (!text) {
            fprintf(stderr, "tokenize: cannot read stdin (or larger than %u bytes)\n", S_MAX_INPUT);
            rc = 1;
        } else if (o.decode) {
            size_t n;
            uint32_t *ids = s_parse_ids(text, &n);
            char *out = ids ? ipl_tokenizer_decode(tok, ids, n) : NULL;
            if (out) fputs(out, stdout);
            rc = out ? 0 : 1;
            free(out);
            free(ids);
        } else {
            size_t n;
            uint32_t *ids = s_encode(tok, &o, text, len, &n);
            rc = ids ? s_print_ids(ids, n) : 1;
            free(ids);
        }
        free(text);
    }
    ipl_prompt_destroy(&model);
    return rc;
}

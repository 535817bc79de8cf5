/*
 * template-render — renders chat requests with a model's chat template (common/ipl_template),
 * for the differential test integration/test_chat_templates.py and for people checking what
 * prompt text a model gets.
 *
 *     template-render --model-dir DIR [--now EPOCH] [--bench N] < requests.jsonl
 *
 * stdin: one JSON object per line,
 *     {"messages": [...], "tools": [...] | null, "add_generation_prompt": bool,
 *      "continue_final_message": bool, "kwargs": {...}}
 * stdout: one JSON object per line, {"text": "..."} or {"error": "...", "code": "..."}.
 * --now pins the clock strftime_now reads (seconds since the epoch; local time zone).
 * --bench N renders each request N times more and prints the mean time per render to stderr.
 * Exit status: 0 when every line was read (render errors are reported per line), 1 when the
 * template cannot be loaded, 2 for bad usage.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cjson/cJSON.h>

#include "ipl_error.h"
#include "ipl_template.h"

static void s_usage(FILE *out)
{
    fprintf(out, "usage: template-render --model-dir DIR [--now EPOCH] [--bench N] < requests.jsonl\n"
                 "  stdin: one request per line: {\"messages\": [...], \"tools\": [...]|null,\n"
                 "         \"add_generation_prompt\": bool, \"continue_final_message\": bool,\n"
                 "         \"kwargs\": {...}}\n"
                 "  stdout: one line per request: {\"text\": \"...\"} or {\"error\": \"...\"}\n");
}

static double s_now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static void s_print(cJSON *obj)
{
    char *line = cJSON_PrintUnformatted(obj);
    if (line) {
        fputs(line, stdout);
        fputc('\n', stdout);
        free(line);
    }
    cJSON_Delete(obj);
}

static void s_request(const ipl_template_t *tpl, const char *line, long bench)
{
    cJSON *req = cJSON_Parse(line);
    cJSON *res = cJSON_CreateObject();
    if (!cJSON_IsObject(req)) {
        cJSON_AddStringToObject(res, "error", "the line is not a JSON object");
        cJSON_AddStringToObject(res, "code", "invalid");
        cJSON_Delete(req);
        s_print(res);
        return;
    }
    const cJSON *messages = cJSON_GetObjectItemCaseSensitive(req, "messages");
    const cJSON *tools = cJSON_GetObjectItemCaseSensitive(req, "tools");
    const cJSON *kwargs = cJSON_GetObjectItemCaseSensitive(req, "kwargs");
    bool agp = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(req, "add_generation_prompt"));
    bool cfm = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(req, "continue_final_message"));
    char err[1024];
    char *text = NULL;
    size_t len = 0;
    int rc = ipl_template_render(tpl, messages, tools, agp, cfm, kwargs, &text, &len, err,
                                 sizeof err);
    if (rc == 0 && bench > 0) {
        double t0 = s_now_us();
        for (long i = 0; i < bench; i++) {
            char *again = NULL;
            size_t n;
            if (ipl_template_render(tpl, messages, tools, agp, cfm, kwargs, &again, &n, err,
                                    sizeof err) == 0)
                free(again);
        }
        double us = (s_now_us() - t0) / (double)bench;
        fprintf(stderr, "render: %.2f us per render (%ld renders, %zu bytes of prompt)\n", us,
                bench, len);
    }
    if (rc == 0) {
        cJSON_AddStringToObject(res, "text", text);
    } else {
        cJSON_AddStringToObject(res, "error", err);
        cJSON_AddStringToObject(res, "code", ipl_strerror(rc));
    }
    free(text);
    cJSON_Delete(req);
    s_print(res);
}

int main(int argc, char **argv)
{
    const char *dir = NULL;
    long bench = 0;
    time_t now = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            s_usage(stdout);
            return 0;
        } else if (!strcmp(argv[i], "--version")) {
            printf("template-render %s\n", IPL_VERSION);
            return 0;
        } else if (!strcmp(argv[i], "--model-dir") && i + 1 < argc) {
            dir = argv[++i];
        } else if (!strcmp(argv[i], "--bench") && i + 1 < argc) {
            bench = strtol(argv[++i], NULL, 10);
        } else if (!strcmp(argv[i], "--now") && i + 1 < argc) {
            now = (time_t)strtoll(argv[++i], NULL, 10);
        } else {
            fprintf(stderr, "template-render: unknown argument '%s'\n", argv[i]);
            s_usage(stderr);
            return 2;
        }
    }
    if (!dir) {
        s_usage(stderr);
        return 2;
    }
    char err[1024];
    ipl_template_t *tpl = ipl_template_load(dir, err, sizeof err);
    if (!tpl) {
        fprintf(stderr, "template-render: %s\n", err);
        return 1;
    }
    if (now) ipl_template_set_limits(tpl, &(ipl_jinja_limits_t){.now = now});
    char *line = NULL;
    size_t cap = 0;
    ssize_t n;
    while ((n = getline(&line, &cap, stdin)) > 0) {
        if (n == 1 && line[0] == '\n') continue;
        s_request(tpl, line, bench);
        fflush(stdout);
    }
    free(line);
    ipl_template_destroy(&tpl);
    return 0;
}

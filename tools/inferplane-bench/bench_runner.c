/*
 * bench_runner — one benchmark's scheduling loop. See bench_runner.h.
 *
 *   ┌──────────── loop until a constraint ends the run ────────────┐
 *   │ open loop: create the sessions whose arrival time has come   │
 *   │ start every waiting session whose turn is due (cap, max)     │
 *   │ bench_client_run(until the next due time, at most 50 ms)     │
 *   │   └─ done(): record the request; next turn due after think,  │
 *   │      or the session ends (closed loop: it takes a new one)   │
 *   └───────────────────────────────────────────────────────────────┘
 */
#include "bench_runner.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "bench_body.h"
#include "bench_rng.h"
#include "ipl_clock.h"
#include "ipl_error.h"
#include "ipl_log.h"

#define S_DEFAULT_CAP 512
#define S_MAX_WAIT_MS 50
#define S_PROGRESS_NS 250000000ull

typedef struct s_session {
    bench_conv_t conv;
    uint32_t turn;  /* the next turn to send */
    char **answers; /* per finished turn (malloc'd, may be NULL: nothing arrived) */
    size_t *answer_len;
    uint32_t answers_cap;
    uint64_t answer_tokens; /* completion tokens of the finished turns */
    uint64_t due_ns;        /* when the next turn may be sent */
    double late_s;          /* how long after due_ns the turn in flight was sent */
    bool waiting, inflight;
    struct s_session *next; /* the active list */
} s_session_t;

typedef struct {
    const bench_run_config_t *cfg;
    const bench_data_t *data;
    bench_client_t *client;
    bench_run_result_t *out;
    size_t cap_reqs;
    bool failed; /* out of memory */
    uint64_t t0_ns;
    double wall0;
    uint64_t started, finished, errors;
    double ttft_sum;
    uint64_t ttft_n;
    uint64_t next_conv;
    bool exhausted; /* the data has no more conversations */
    s_session_t *active, *tail, *pool;
    uint32_t closed_streams; /* closed loop: sessions that keep taking conversations */
    uint32_t cap;
    bool open_loop;
    uint64_t next_arrival_ns;
    s_session_t *arriving; /* replay: the next conversation, waiting for its time */
    bench_rng_t rng;
    bench_buf_t texts, body;
} s_run_t;

const char *bench_strat_name(bench_strat_kind_t kind)
{
    static const char *const names[] = {"synchronous", "concurrent", "throughput",
                                        "constant",    "poisson",    "replay"};
    return kind <= BENCH_STRAT_REPLAY ? names[kind] : "?";
}

const char *bench_strategy_label(const bench_strategy_t *s)
{
    static char buf[64];
    switch (s->kind) {
    case BENCH_STRAT_CONCURRENT:
        snprintf(buf, sizeof buf, "concurrent@%u", s->streams);
        break;
    case BENCH_STRAT_CONSTANT:
    case BENCH_STRAT_POISSON:
        snprintf(buf, sizeof buf, "%s@%.2f", bench_strat_name(s->kind), s->rate);
        break;
    default:
        snprintf(buf, sizeof buf, "%s", bench_strat_name(s->kind));
    }
    return buf;
}

void bench_run_result_free(bench_run_result_t *r)
{
    free(r->reqs);
    memset(r, 0, sizeof *r);
}

static double s_wall(const s_run_t *run, uint64_t ns)
{
    return run->wall0 + (double)(ns - run->t0_ns) / 1e9;
}

static double s_cpu_s(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_utime.tv_sec + ru.ru_stime.tv_sec +
           (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

static bench_req_t *s_record(s_run_t *run)
{
    bench_run_result_t *o = run->out;
    if (o->n == run->cap_reqs) {
        size_t cap = run->cap_reqs ? run->cap_reqs * 2 : 1024;
        bench_req_t *g = realloc(o->reqs, cap * sizeof *g);
        if (!g) {
            run->failed = true;
            return NULL;
        }
        o->reqs = g;
        run->cap_reqs = cap;
    }
    bench_req_t *r = &o->reqs[o->n++];
    memset(r, 0, sizeof *r);
    return r;
}

static void s_session_reset(s_session_t *s)
{
    for (uint32_t i = 0; i < s->turn && i < s->answers_cap; i++) {
        free(s->answers[i]);
        s->answers[i] = NULL;
    }
    s->turn = 0;
    s->answer_tokens = 0;
    s->waiting = s->inflight = false;
}

/* Loads the next conversation into s; false when the data has none left. */
static bool s_load(s_run_t *run, s_session_t *s)
{
    if (run->exhausted) return false;
    uint64_t n = bench_data_count(run->data);
    uint64_t most = run->cfg->max_conversations;
    if ((n && run->next_conv >= n) ||
        (most && run->next_conv - run->cfg->first_conversation >= most)) {
        run->exhausted = true;
        return false;
    }
    s_session_reset(s);
    int rc = bench_data_conv(run->data, run->next_conv, &s->conv);
    if (rc != 0) {
        if (rc == IPL_E_NOMEM) run->failed = true;
        run->exhausted = true;
        return false;
    }
    run->next_conv++;
    if (s->conv.nturns > s->answers_cap) {
        char **a = realloc(s->answers, s->conv.nturns * sizeof *a);
        size_t *l = a ? realloc(s->answer_len, s->conv.nturns * sizeof *l) : NULL;
        if (a) s->answers = a;
        if (!a || !l) {
            run->failed = true;
            return false;
        }
        for (uint32_t i = s->answers_cap; i < s->conv.nturns; i++)
            s->answers[i] = NULL;
        s->answer_len = l;
        s->answers_cap = s->conv.nturns;
    }
    return true;
}

static s_session_t *s_session_new(s_run_t *run)
{
    s_session_t *s = run->pool;
    if (s)
        run->pool = s->next;
    else if (!(s = calloc(1, sizeof *s)))
        run->failed = true;
    if (s) s->next = NULL;
    return s;
}

static void s_activate(s_run_t *run, s_session_t *s, uint64_t due)
{
    s->due_ns = due;
    s->waiting = true;
    s->next = NULL;
    if (run->tail)
        run->tail->next = s;
    else
        run->active = s;
    run->tail = s;
}

static void s_session_free(s_session_t *s)
{
    if (!s) return;
    for (uint32_t i = 0; i < s->answers_cap; i++)
        free(s->answers[i]);
    free(s->answers);
    free(s->answer_len);
    bench_conv_clear(&s->conv);
    free(s);
}

/* Sends the due turn of s. */
static void s_send(s_run_t *run, s_session_t *s, uint64_t now)
{
    const bench_conv_t *c = &s->conv;
    uint32_t k = s->turn;
    /* every user text up to turn k, generated into one buffer, then the messages */
    run->texts.len = 0;
    run->texts.failed = false;
    size_t off[k + 1], len[k + 1];
    for (uint32_t t = 0; t <= k; t++) {
        const bench_turn_t *tu = &c->turns[t];
        size_t n = bench_data_text_len(c->segs + tu->seg_off, tu->nseg);
        off[t] = run->texts.len;
        char *dst = bench_buf_extend(&run->texts, n);
        if (!dst) {
            run->failed = true;
            return;
        }
        len[t] = bench_data_text(run->data, c->segs + tu->seg_off, tu->nseg, dst);
    }
    bench_msg_t msgs[2 * k + 1];
    size_t nm = 0;
    for (uint32_t t = 0; t <= k; t++) {
        /* drop the first text's leading space: a message starts with its first word */
        size_t skip = len[t] ? 1 : 0;
        msgs[nm++] = (bench_msg_t){false, run->texts.p + off[t] + skip, len[t] - skip};
        if (t < k)
            msgs[nm++] = (bench_msg_t){true, s->answers[t] ? s->answers[t] : "",
                                       s->answers[t] ? s->answer_len[t] : 0};
    }
    bench_body_opts_t bo = {run->cfg->api, run->cfg->model, run->cfg->stream, run->cfg->ignore_eos};
    bench_body_build(&run->body, &bo, msgs, nm, c->turns[k].output_tokens);
    char *body = run->body.failed ? NULL : malloc(run->body.len + 1);
    if (!body) {
        run->failed = true;
        return;
    }
    memcpy(body, run->body.p, run->body.len + 1);
    /* the record is written at completion; what it needs from now rides along in s */
    s->waiting = false;
    s->inflight = true;
    s->late_s = (double)(now - s->due_ns) / 1e9;
    bool keep = k + 1 < c->nturns;
    if (bench_client_start(run->client, &body, run->body.len, run->cfg->stream, keep, s) != 0) {
        free(body);
        s->inflight = false;
        bench_req_t *r = s_record(run);
        if (r) {
            double w = s_wall(run, now);
            *r = (bench_req_t){.start = w,
                               .end = w,
                               .scheduled = s_wall(run, s->due_ns),
                               .prompt_tokens = -1,
                               .output_tokens = -1,
                               .cached_tokens = -1,
                               .conversation = (uint32_t)c->index,
                               .turn = k,
                               .status = BENCH_ERRORED,
                               .error = BENCH_ERR_CONNECT};
        }
        run->errors++;
        s->turn = c->nturns; /* the conversation ends */
        return;
    }
    run->started++;
}

/* Classifies a finished transfer. */
static void s_classify(const bench_xfer_info_t *info, const bench_stream_stats_t *st,
                       bench_run_config_t const *cfg, bench_req_t *r)
{
    r->status = BENCH_ERRORED;
    if (info->cancelled) {
        r->status = BENCH_INCOMPLETE;
        r->error = BENCH_ERR_CANCELLED;
    } else if (info->curl_code == 28 /* CURLE_OPERATION_TIMEDOUT */) {
        r->error = BENCH_ERR_TIMEOUT;
    } else if (info->curl_code != 0) {
        r->error = info->got_data ? BENCH_ERR_TRANSFER : BENCH_ERR_CONNECT;
    } else if (info->http_status >= 400 || info->http_status < 200) {
        r->error = BENCH_ERR_HTTP;
    } else if (st->error) {
        r->error = BENCH_ERR_STREAM;
    } else if (st->done || (cfg->stream && st->finished)) {
        r->status = BENCH_SUCCESSFUL;
        r->error = BENCH_ERR_NONE;
    } else if (st->malformed || st->overlong) {
        r->error = BENCH_ERR_MALFORMED;
    } else {
        r->error = BENCH_ERR_TRUNCATED;
    }
}

static void s_on_done(void *arg, const bench_xfer_info_t *info)
{
    s_run_t *run = arg;
    s_session_t *s = info->user;
    const bench_stream_stats_t *st = bench_stream_stats(info->stream);
    s->inflight = false;
    run->finished++;
    bench_req_t *r = s_record(run);
    uint32_t k = s->turn;
    const bench_conv_t *c = &s->conv;
    if (r) {
        r->start = s_wall(run, info->start_ns);
        r->end = s_wall(run, info->end_ns);
        r->scheduled = r->start - s->late_s;
        r->first_token = st->first_ns ? s_wall(run, st->first_ns) : 0;
        r->first_output = st->first_output_ns ? s_wall(run, st->first_output_ns) : 0;
        r->last_token = st->last_ns ? s_wall(run, st->last_ns) : 0;
        r->iterations = st->iterations;
        uint64_t words = 0;
        for (uint32_t t = 0; t <= k; t++)
            words += c->turns[t].words;
        r->prompt_tokens =
            st->prompt_tokens >= 0 ? st->prompt_tokens : (int64_t)(words + s->answer_tokens);
        r->output_tokens = st->completion_tokens;
        r->cached_tokens = st->cached_tokens;
        r->conversation = (uint32_t)c->index;
        r->turn = k;
        r->http_status =
            (uint16_t)(info->http_status > 0 && info->http_status < 65536 ? info->http_status : 0);
        s_classify(info, st, run->cfg, r);
        if (st->malformed || st->overlong)
            IPL_LOG_EVERY(5, IPL_LOG_WARN, "answer events that are not the JSON expected",
                          "malformed=%llu overlong=%llu http=%ld outcome=%s",
                          (unsigned long long)st->malformed, (unsigned long long)st->overlong,
                          info->http_status, bench_err_name(r->error));
        if (r->status == BENCH_ERRORED)
            IPL_LOG_EVERY(5, IPL_LOG_INFO, "request failed", "cause=%s http=%ld curl=%d error=%s",
                          bench_err_name(r->error), info->http_status, info->curl_code,
                          info->curl_error);
        if (r->status == BENCH_SUCCESSFUL && r->first_token > 0) {
            run->ttft_sum += 1000 * (r->first_token - r->start);
            run->ttft_n++;
        }
        if (r->status != BENCH_SUCCESSFUL) run->errors++;
    }
    bool ok = r && r->status == BENCH_SUCCESSFUL;
    if (ok && k + 1 < c->nturns) {
        size_t len;
        const char *text = bench_stream_text(info->stream, &len);
        s->answers[k] = malloc(len + 1);
        if (s->answers[k]) {
            memcpy(s->answers[k], text, len + 1);
            s->answer_len[k] = len;
        }
        s->answer_tokens +=
            st->completion_tokens > 0 ? (uint64_t)st->completion_tokens : st->iterations;
        s->turn = k + 1;
        s->waiting = true;
        s->due_ns = info->end_ns + (uint64_t)(c->turns[k + 1].think_s * 1e9);
    } else {
        s->turn = c->nturns; /* the conversation is over (or broke) */
    }
}

static double s_now_s(const s_run_t *run, uint64_t now)
{
    return (double)(now - run->t0_ns) / 1e9;
}

static void s_progress(s_run_t *run, uint64_t now, bool last)
{
    FILE *f = run->cfg->progress;
    if (!f) return;
    double el = s_now_s(run, now);
    fprintf(f,
            "\r%-22s %7.1fs  sent %-8llu done %-8llu failed %-6llu in flight %-5zu "
            "%8.1f req/s  mean ttft %8.1f ms%s",
            run->cfg->progress_label ? run->cfg->progress_label : "", el,
            (unsigned long long)run->started, (unsigned long long)run->finished,
            (unsigned long long)run->errors, bench_client_inflight(run->client),
            el > 0 ? run->finished / el : 0, run->ttft_n ? run->ttft_sum / run->ttft_n : 0,
            last ? "\n" : "");
    fflush(f);
}

/* Open loop: the next arrival time after `prev` (ns since t0 base). */
static uint64_t s_next_gap_ns(s_run_t *run)
{
    double rate = run->cfg->strategy.rate;
    double gap = run->cfg->strategy.kind == BENCH_STRAT_POISSON ? bench_rng_exp(&run->rng, 1 / rate)
                                                                : 1 / rate;
    return (uint64_t)(gap * 1e9);
}

/* Creates the sessions whose arrival has come. */
static void s_arrivals(s_run_t *run, uint64_t now)
{
    bool replay = run->cfg->strategy.kind == BENCH_STRAT_REPLAY;
    while (!run->exhausted && !run->failed && run->next_arrival_ns <= now) {
        s_session_t *s = run->arriving;
        run->arriving = NULL;
        if (!s) {
            s = s_session_new(run);
            if (!s || !s_load(run, s)) {
                if (s) {
                    s->next = run->pool;
                    run->pool = s;
                }
                return;
            }
            if (replay) { /* its own time decides */
                uint64_t at = run->t0_ns + (uint64_t)(s->conv.arrival_s * 1e9);
                if (at > now) {
                    run->arriving = s;
                    run->next_arrival_ns = at;
                    return;
                }
            }
        }
        s_activate(run, s, run->next_arrival_ns);
        if (!replay) run->next_arrival_ns += s_next_gap_ns(run);
    }
}

int bench_run(bench_client_t *client, const bench_data_t *data, const bench_run_config_t *cfg,
              bench_run_result_t *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    const bench_strategy_t *st = &cfg->strategy;
    if ((st->kind == BENCH_STRAT_CONSTANT || st->kind == BENCH_STRAT_POISSON) && !(st->rate > 0)) {
        ipl_errf(err, errlen, "%s needs a rate > 0", bench_strat_name(st->kind));
        return IPL_E_INVAL;
    }
    if (st->kind == BENCH_STRAT_CONCURRENT && st->streams < 1) {
        ipl_errf(err, errlen, "concurrent needs streams >= 1");
        return IPL_E_INVAL;
    }
    if (st->kind == BENCH_STRAT_REPLAY && bench_data_count(data) == 0) {
        ipl_errf(err, errlen, "replay needs a trace (--data trace FILE)");
        return IPL_E_INVAL;
    }
    if (!(cfg->max_duration_s > 0) && !cfg->max_requests && !cfg->max_conversations &&
        bench_data_count(data) == 0) {
        ipl_errf(err, errlen,
                 "nothing bounds the run: give --max-seconds, --max-requests or "
                 "--max-conversations");
        return IPL_E_INVAL;
    }
    s_run_t run = {.cfg = cfg,
                   .data = data,
                   .client = client,
                   .out = out,
                   .next_conv = cfg->first_conversation};
    run.cap = st->max_concurrency ? st->max_concurrency : S_DEFAULT_CAP;
    run.open_loop = st->kind >= BENCH_STRAT_CONSTANT;
    run.closed_streams = st->kind == BENCH_STRAT_SYNCHRONOUS  ? 1
                         : st->kind == BENCH_STRAT_CONCURRENT ? st->streams
                         : st->kind == BENCH_STRAT_THROUGHPUT ? run.cap
                                                              : 0;
    if (run.closed_streams > run.cap && st->kind == BENCH_STRAT_CONCURRENT)
        run.cap = run.closed_streams;
    bench_rng_seed(&run.rng, cfg->seed);
    bench_client_set_done(client, s_on_done, &run);
    double cpu0 = s_cpu_s();
    run.t0_ns = ipl_mono_ns();
    run.wall0 = ipl_wall_s();
    run.next_arrival_ns = run.t0_ns;
    uint64_t deadline =
        cfg->max_duration_s > 0 ? run.t0_ns + (uint64_t)(cfg->max_duration_s * 1e9) : UINT64_MAX;
    for (uint32_t i = 0; i < run.closed_streams; i++) {
        s_session_t *s = s_session_new(&run);
        if (!s) break;
        if (!s_load(&run, s)) {
            s_session_free(s);
            break;
        }
        s_activate(&run, s, run.t0_ns);
    }
    uint64_t last_progress = 0;
    bool cancelled = false;
    while (!run.failed) {
        uint64_t now = ipl_mono_ns();
        if (now >= deadline) {
            bench_client_cancel_all(client);
            cancelled = true;
            break;
        }
        bool may_send = !cfg->max_requests || run.started < cfg->max_requests;
        if (run.open_loop && may_send) s_arrivals(&run, now);
        /* start what is due; retire finished sessions; find the next due time */
        uint64_t next_due = UINT64_MAX;
        s_session_t *prev = NULL, *s = run.active;
        while (s) {
            s_session_t *next = s->next;
            if (!s->inflight && !s->waiting && s->turn >= s->conv.nturns) {
                /* over: a closed-loop stream takes a new conversation, else it leaves */
                if (!run.open_loop && may_send && s_load(&run, s)) {
                    s->waiting = true;
                    s->due_ns = now;
                } else {
                    if (prev)
                        prev->next = next;
                    else
                        run.active = next;
                    if (run.tail == s) run.tail = prev;
                    s->next = run.pool;
                    run.pool = s;
                    s = next;
                    continue;
                }
            }
            if (s->waiting && may_send) {
                if (s->due_ns <= now && bench_client_inflight(client) < run.cap) {
                    s_send(&run, s, now);
                    may_send = !cfg->max_requests || run.started < cfg->max_requests;
                } else if (s->due_ns > now && s->due_ns < next_due) {
                    next_due = s->due_ns;
                }
            }
            prev = s;
            s = next;
        }
        if (run.open_loop && may_send && !run.exhausted && run.next_arrival_ns < next_due)
            next_due = run.next_arrival_ns;
        size_t inflight = bench_client_inflight(client);
        bool pending = false;
        for (s_session_t *p = run.active; p && !pending; p = p->next)
            pending = p->waiting && may_send;
        bool more_arrivals = run.open_loop && may_send && !run.exhausted;
        if (!inflight && !pending && !more_arrivals) break;
        if (!pending && !inflight && run.active == NULL && !run.open_loop) break;
        uint64_t wake = next_due < deadline ? next_due : deadline;
        int wait_ms = S_MAX_WAIT_MS;
        if (wake != UINT64_MAX) {
            uint64_t now2 = ipl_mono_ns();
            uint64_t d = wake > now2 ? wake - now2 : 0;
            uint64_t ms = (d + 999999) / 1000000; /* rounded up: never early */
            if (ms < (uint64_t)wait_ms) wait_ms = (int)ms;
        }
        bench_client_run(client, wait_ms);
        now = ipl_mono_ns();
        if (cfg->progress && now - last_progress >= S_PROGRESS_NS) {
            last_progress = now;
            s_progress(&run, now, false);
        }
    }
    uint64_t end = ipl_mono_ns();
    if (run.failed) bench_client_cancel_all(client);
    s_progress(&run, end, true);
    out->wall_s = (double)(end - run.t0_ns) / 1e9;
    out->cpu_s = s_cpu_s() - cpu0;
    out->next_conversation = run.next_conv;
    out->end = s_wall(&run, end);
    out->cancelled = cancelled;
    /* the window starts at the first request sent */
    out->start = out->n ? out->reqs[0].start : run.wall0;
    for (size_t i = 1; i < out->n; i++)
        if (out->reqs[i].start < out->start) out->start = out->reqs[i].start;
    if (run.arriving) s_session_free(run.arriving);
    for (s_session_t *s = run.active, *n; s; s = n) {
        n = s->next;
        s_session_free(s);
    }
    for (s_session_t *s = run.pool, *n; s; s = n) {
        n = s->next;
        s_session_free(s);
    }
    bench_buf_free(&run.texts);
    bench_buf_free(&run.body);
    bench_client_set_done(client, NULL, NULL);
    if (run.failed) {
        ipl_errf(err, errlen, "out of memory");
        return IPL_E_NOMEM;
    }
    return 0;
}

/*
 * inferplanectl route — asks a decider where a request would go, exactly as the gateway asks
 * (tokenize, chat template, chained block hashes, ROUTE_REQ over a DEALER), and prints the
 * decision; --explain adds every candidate's figures and why the winner won.
 *
 *   inferplanectl route --decider tcp://127.0.0.1:7021 --model sim-model --prompt "Hello"
 *   inferplanectl route --model sim-model --messages '[{"role":"user","content":"hi"}]' --explain
 *
 * Note: asking routes for real — the decider counts the request as in flight on the winner
 * and assumes it caches the prompt for a while, as it would for a gateway's request.
 */
#include <cjson/cJSON.h>
#include <czmq.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctl.h"
#include "ipl_chat.h"
#include "ipl_clock.h"
#include "ipl_error.h"
#include "ipl_hash.h"
#include "ipl_proto.h"
#include "ipl_tokenizer.h"

typedef struct {
    const char *decider, *model, *prompt, *messages, *tenant, *strategy;
    long block_size, timeout_ms;
    bool explain;
} s_opts_t;

static void s_usage(FILE *out)
{
    fprintf(out, "usage: inferplanectl route [--decider ENDPOINT] --model MODEL (--prompt TEXT | "
                 "--messages JSON)\n"
                 "                           [--tenant T] [--strategy S] [--block-size N] "
                 "[--timeout-ms MS] [--explain]\n\n"
                 "Asks a decider where this request would go and prints its decision.\n\n"
                 "  --decider ENDPOINT  the decider's ROUTER (default tcp://127.0.0.1:7021)\n"
                 "  --model MODEL       the model a client would ask for\n"
                 "  --prompt TEXT       a completion prompt, or\n"
                 "  --messages JSON     a chat messages array (rendered with the chat template)\n"
                 "  --tenant T          tenant name (default none)\n"
                 "  --strategy S        override the pool's strategy: ttft, least-loaded, random\n"
                 "  --block-size N      tokens per hashed block, as the gateway's --block-size "
                 "(default 16)\n"
                 "  --timeout-ms MS     how long to wait for the answer (default 2000)\n"
                 "  --explain           print every candidate's figures and why the winner won\n\n"
                 "The decider records the routing (in flight, optimistic cache) as for a real "
                 "request.\n");
}

static int s_parse(int argc, char **argv, s_opts_t *o)
{
    static const struct option longs[] = {
        {"decider", required_argument, NULL, 'd'},
        {"model", required_argument, NULL, 'm'},
        {"prompt", required_argument, NULL, 'p'},
        {"messages", required_argument, NULL, 'M'},
        {"tenant", required_argument, NULL, 't'},
        {"strategy", required_argument, NULL, 's'},
        {"block-size", required_argument, NULL, 'b'},
        {"timeout-ms", required_argument, NULL, 'T'},
        {"explain", no_argument, NULL, 'e'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    *o = (s_opts_t){.decider = "tcp://127.0.0.1:7021", .block_size = 16, .timeout_ms = 2000};
    optind = 1;
    opterr = 0;
    int c;
    while ((c = getopt_long(argc, argv, "", longs, NULL)) != -1) {
        char *end = NULL;
        switch (c) {
        case 'd':
            o->decider = optarg;
            break;
        case 'm':
            o->model = optarg;
            break;
        case 'p':
            o->prompt = optarg;
            break;
        case 'M':
            o->messages = optarg;
            break;
        case 't':
            o->tenant = optarg;
            break;
        case 's':
            o->strategy = optarg;
            break;
        case 'e':
            o->explain = true;
            break;
        case 'b':
        case 'T': {
            long v = strtol(optarg, &end, 10);
            if (!*optarg || *end || v < 1 || v > (c == 'b' ? 1024 : 600000)) {
                fprintf(stderr, "inferplanectl route: --%s must be a number from 1 to %d\n",
                        c == 'b' ? "block-size" : "timeout-ms", c == 'b' ? 1024 : 600000);
                return 2;
            }
            if (c == 'b')
                o->block_size = v;
            else
                o->timeout_ms = v;
            break;
        }
        case 'h':
            s_usage(stdout);
            return 1;
        default:
            fprintf(stderr, "inferplanectl route: unknown or incomplete option '%s'\n",
                    argv[optind - 1]);
            s_usage(stderr);
            return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "inferplanectl route: unexpected argument '%s'\n", argv[optind]);
        return 2;
    }
    if (!o->model || !*o->model || !o->prompt == !o->messages) {
        fprintf(stderr, "inferplanectl route: --model and exactly one of --prompt or --messages "
                        "are required (see --help)\n");
        return 2;
    }
    return 0;
}

// The prompt text as the gateway would tokenize it; malloc'd, or NULL after printing why.
static char *s_text(const s_opts_t *o)
{
    if (o->prompt) return strdup(o->prompt);
    cJSON *msgs = cJSON_Parse(o->messages);
    if (!msgs || !cJSON_IsArray(msgs)) {
        fprintf(stderr, "inferplanectl route: --messages must be a JSON array of chat messages\n");
        cJSON_Delete(msgs);
        return NULL;
    }
    char err[256] = "";
    char *text = ipl_chat_render(msgs, true, err, sizeof err);
    cJSON_Delete(msgs);
    if (!text) fprintf(stderr, "inferplanectl route: --messages: %s\n", err);
    return text;
}

static void s_print(const ipl_route_rep_t *rep, uint64_t prompt_tokens, bool explain)
{
    if (rep->status == IPL_ROUTE_OK) {
        printf("%s  %s  (pool %s, reason %s)\n", rep->worker, rep->url, rep->pool, rep->reason);
        printf("  predicted TTFT %.1f ms, %llu of %llu prompt tokens cached, state seq %llu\n",
               rep->predicted_ttft_s * 1000.0, (unsigned long long)rep->cached_tokens,
               (unsigned long long)prompt_tokens, (unsigned long long)rep->state_seq);
    } else {
        printf("not routed: reason %s (status %llu)\n", rep->reason,
               (unsigned long long)rep->status);
    }
    if (!explain) {
        if (rep->detail && *rep->detail) printf("  %s\n", rep->detail);
        return;
    }
    if (rep->status != IPL_ROUTE_OK && rep->detail && *rep->detail) printf("  %s\n", rep->detail);
    printf("\n  %-2s%-16s %-8s %12s %8s %7s %7s %8s %8s  %s\n", "", "WORKER", "ELIGIBLE",
           "PRED_TTFT_MS", "CACHED", "RUNNING", "WAITING", "INFLIGHT", "KV_USAGE", "NOTE");
    for (uint32_t i = 0; i < rep->candidates_len; i++) {
        const ipl_candidate_t *c = &rep->candidates[i];
        bool chosen = rep->status == IPL_ROUTE_OK && rep->worker && c->worker &&
                      !strcmp(rep->worker, c->worker);
        printf("  %-2s%-16s %-8s %12.1f %8llu %7llu %7llu %8llu %8.2f  %s\n", chosen ? "*" : "",
               c->worker ? c->worker : "", c->eligible ? "yes" : "no", c->predicted_ttft_s * 1000.0,
               (unsigned long long)c->cached_tokens, (unsigned long long)c->running,
               (unsigned long long)c->waiting, (unsigned long long)c->inflight, c->kv_usage,
               c->note ? c->note : "");
    }
    printf("\n  PRED_TTFT_MS = queue (waiting + in flight) x mean request prefill + running x "
           "per-running cost\n"
           "                 + uncached prompt tokens / prefill speed; CACHED = prefix blocks "
           "held (index + optimistic)\n"
           "                 x block size. Not eligible: down, no load sample, or queue above "
           "the load gate.\n");
    if (rep->status == IPL_ROUTE_OK) printf("  Why %s: %s\n", rep->worker, rep->detail);
}

int ctl_route(int argc, char **argv)
{
    s_opts_t o;
    int rc = s_parse(argc, argv, &o);
    if (rc) return rc == 1 ? 0 : rc;
    char *text = s_text(&o);
    if (!text) return 2;
    ipl_tokenizer_t *tok = ipl_tokenizer_new_builtin();
    size_t ntok = 0;
    uint32_t *ids = tok ? ipl_tokenizer_encode(tok, text, strlen(text), &ntok) : NULL;
    free(text);
    ipl_tokenizer_destroy(&tok);
    size_t nblocks = ntok / (size_t)o.block_size;
    uint64_t *hashes = malloc((nblocks ? nblocks : 1) * sizeof *hashes);
    if (!ids || !hashes) {
        fprintf(stderr, "inferplanectl route: out of memory\n");
        free(ids);
        free(hashes);
        return 1;
    }
    nblocks =
        ipl_block_hashes(ipl_hash_chain_start(0), ids, ntok, (size_t)o.block_size, hashes, nblocks);
    free(ids);

    zsys_handler_set(NULL);
    zsock_t *dealer = zsock_new(ZMQ_DEALER);
    rc = 1;
    if (!dealer || zsock_connect(dealer, "%s", o.decider) != 0) {
        fprintf(stderr,
                "inferplanectl route: cannot connect to --decider '%s' (use "
                "tcp://host:port)\n",
                o.decider);
        rc = 2;
        goto done;
    }
    zsock_set_linger(dealer, 0);
    uint64_t req_id = ipl_wall_ms();
    ipl_route_req_t req = {
        .req_id = req_id,
        .model = (char *)o.model,
        .tenant = (char *)(o.tenant ? o.tenant : ""),
        .prompt_tokens = ntok,
        .block_size = (uint64_t)o.block_size,
        .hashes = hashes,
        .hashes_len = (uint32_t)nblocks,
        .strategy = (char *)(o.strategy ? o.strategy : ""),
    };
    if (ipl_msg_send(zsock_resolve(dealer), IPL_MSG_ROUTE_REQ, &req, 0) != IPL_OK) {
        fprintf(stderr, "inferplanectl route: cannot send the request\n");
        goto done;
    }
    uint64_t deadline = ipl_mono_ms() + (uint64_t)o.timeout_ms;
    zpoller_t *poller = zpoller_new(dealer, NULL);
    while (ipl_mono_ms() < deadline) {
        if (!zpoller_wait(poller, (int)(deadline - ipl_mono_ms()))) continue;
        zframe_t *frame = zframe_recv(dealer);
        if (!frame) break;
        ipl_msg_t msg = {0};
        int drc = ipl_msg_decode(zframe_data(frame), zframe_size(frame), &msg);
        zframe_destroy(&frame);
        if (drc != IPL_OK) {
            fprintf(stderr, "inferplanectl route: undecodable reply (%s)\n", ipl_strerror(drc));
            break;
        }
        if (msg.type == IPL_MSG_ROUTE_REP && msg.u.route_rep.req_id == req_id) {
            s_print(&msg.u.route_rep, ntok, o.explain);
            rc = msg.u.route_rep.status == IPL_ROUTE_OK ? 0 : 1;
            ipl_msg_clear(&msg);
            break;
        }
        ipl_msg_clear(&msg); // a reply to someone else's request id: keep waiting
    }
    zpoller_destroy(&poller);
    if (rc == 1 && ipl_mono_ms() >= deadline)
        fprintf(stderr,
                "inferplanectl route: no answer from %s within %ld ms (is the decider "
                "running?)\n",
                o.decider, o.timeout_ms);
done:
    zsock_destroy(&dealer);
    free(hashes);
    return rc;
}

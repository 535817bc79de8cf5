/*
 * inferplanectl — the operator's command-line tool. One file per subcommand; each exports
 * `int ctl_<name>(int argc, char **argv)` (argv[0] is the subcommand name) returning the exit
 * code: 0 success, 1 failure of the operation, 2 usage error.
 */
#ifndef CTL_H
#define CTL_H

#include <stdbool.h>
#include <stdint.h>

#include "ipl_proto.h"

int ctl_route(int argc, char **argv);     /* ask a decider where a request would go */
int ctl_explain(int argc, char **argv);   /* which policy rule decides a request, and why */
int ctl_poke(int argc, char **argv);      /* send malformed frames to a ZeroMQ endpoint */
int ctl_proto_doc(int argc, char **argv); /* print the message catalogue as Markdown */
int ctl_tokenize(int argc, char **argv);  /* encode/decode with a tokenizer.json */
int ctl_validate(int argc, char **argv);  /* compile a policy directory, print its errors */
int ctl_curve_keygen(int argc, char **argv); /* write the cluster CURVE certificate */

/* ---- A request as the gateway would send it: shared by route and explain (ctl_route.c) ----
 * `cmd` names the subcommand in the messages these print on stderr. Return codes are exit
 * codes: 0, 1 (failure of the operation), 2 (usage). */

/* A prompt's token count and the chained hashes of its full blocks (ROUTE_REQ). */
typedef struct {
    uint64_t tokens;
    uint64_t *hashes; /* owned: ctl_prompt_clear */
    uint32_t nhashes;
} ctl_prompt_t;

/* Encodes a prompt with the model a --tokenizer flag names (NULL: built-in; ipl_prompt, as
 * the gateway's --tokenizer) and hashes its full blocks of block_size tokens, exactly as the
 * gateway does: `text` as a plain prompt (/v1/completions), or else `messages`, a chat's
 * JSON array, rendered with the model's chat template (generation prompt added). The hashes
 * are in the space of LoRA adapter `lora` and `cache_salt` (either NULL: none), as
 * ipl_prompt_hashes keys them; explain finds the adapter with decider_targets_resolve_lora, as
 * the gateway does. 2: bad --tokenizer or --messages (printed). */
int ctl_prompt_encode(const char *cmd, const char *tokenizer, const char *text,
                      const char *messages, long block_size, const char *lora,
                      const char *cache_salt, ctl_prompt_t *out);
void ctl_prompt_clear(ctl_prompt_t *p);

/* inferplanectl tokenize --bench (ctl_tokenize_bench.c): cold and warm, side by side, of the
 * plain prompt `text` (special: with the post-processor's tokens) or, with `chat`, of the
 * messages array `text`. Prints JSON lines; 0, 1 (failed) or 2 (bad input). */
struct ipl_prompt;
int ctl_tokenize_bench(struct ipl_prompt *model, const char *text, size_t len, bool chat,
                       bool special);

/* What InferencePolicy rules match on besides tenant and model, as ROUTE_REQ carries it: the
 * repeatable --label L and --header NAME=VALUE flags. Zero-initialise; strings owned. */
typedef struct {
    char **labels;
    uint32_t nlabels;
    char **headers; /* "name=value", the name lower-cased */
    uint32_t nheaders;
} ctl_attrs_t;

/* Adds one flag's value (header: a --header, else a --label). 2 after printing why for an
 * empty label or a header without "NAME=" (a valid HTTP field name). */
int ctl_attrs_add(ctl_attrs_t *a, const char *cmd, bool header, const char *arg);
void ctl_attrs_clear(ctl_attrs_t *a);

/* Sends `req` to the decider's ROUTER over a DEALER (req_id 0: set from the clock) and waits
 * up to timeout_ms for the reply to it. 0: *reply holds it (ipl_msg_clear it); 2: a bad
 * endpoint; 1: no answer, or an undecodable one. */
int ctl_route_ask(const char *cmd, const char *decider, ipl_route_req_t *req, long timeout_ms,
                  ipl_msg_t *reply);

/* "ok", "no_pool", ..., "rejected", "deferred" (IPL_ROUTE_*), "unknown". */
const char *ctl_route_status_name(uint64_t status);
/* The HTTP status the gateway answers a reply with (a rejection's own, else by status). */
unsigned ctl_route_http_status(const ipl_route_rep_t *rep);
/* Prints "  target provider via backend B; rule policy/rule; HTTP 403; retry after N ms" with
 * the parts a reply has, or nothing when it has none (deciders that predate them). */
void ctl_route_print_policy(const ipl_route_rep_t *rep);

#endif

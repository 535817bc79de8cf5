/*
 * decider_options — the decider's settings, declared once for the two processes that run a
 * decider: inferplane-decider (its flags) and inferplane-gateway with `--decider embedded`
 * (its --decider-config file and INFERPLANE_DECIDER_* variables).
 *
 *   decider_options_t o;
 *   decider_options_add(&o, config, false);        // before ipl_config_parse
 *   ...parse...
 *   char err[256];
 *   if (decider_options_check(&o, err, sizeof err) != 0) ...refuse with err...
 *   decider_server_config_t cfg;
 *   decider_options_server_config(&o, &cfg);        // borrows o's strings
 *
 * The strings are the config's (valid until ipl_config_destroy); the struct must outlive the
 * config, which keeps pointers to its fields and help texts.
 */
#ifndef DECIDER_OPTIONS_H
#define DECIDER_OPTIONS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "decider_server.h"
#include "ipl_config.h"

typedef struct {
    char *listen, *state_sub, *state_snapshot, *policy_sub, *policy_req, *strategy, *id, *peer_pub,
        *peers, *tokenizer;
    double prefill_tps, running_cost_ms, base_ms, temperature_s;
    int64_t max_queue, load_gate, ttl_ms, stale_ms, seed, snapshot_timeout_ms, silence_ms,
        observe_window_ms, busy_poll_us, cpu;
    char strategy_help[512]; /* help text naming the strategies (borrowed by the config) */
} decider_options_t;

/* Declares every option on `config`. `embedded`: for a decider inside another process: its
 * --listen defaults to none (the host process adds its inproc:// endpoint) and there is no
 * --cpu (the host process's threads are not the decider's to pin). */
void decider_options_add(decider_options_t *self, ipl_config_t *config, bool embedded);

/* After parsing (which checked every numeric range): 0, or IPL_E_INVAL with the problem in
 * `err` (an unknown strategy, a core the process may not use). */
int decider_options_check(const decider_options_t *self, char *err, size_t errlen);

/* Fills `cfg` (every field) from the options; strings borrowed from `self`. */
void decider_options_server_config(const decider_options_t *self, decider_server_config_t *cfg);

#endif

/*
 * gateway_drain — the gateway's graceful stop: what SIGTERM does, so that a rolling deploy
 * breaks no stream.
 *
 *   1st SIGTERM/SIGINT ─► /readyz 503 at once (ipl_admin: stopping) — out of load balancing
 *          │              main's loop ends; gateway_drain(api, --drain-timeout-ms):
 *          ▼              ipl_httpd_drain: new connections refused, idle ones closed,
 *   requests in flight    requests arriving on open connections 503 shutting_down +
 *   finish: streams go    Connection: close
 *   on to their end       waits until none is in flight, or the timeout, or
 *          │              2nd SIGTERM/SIGINT ─► stops waiting at once
 *          ▼
 *   gateway_server_destroy: what is left is cut, each stream with an error event that says
 *   the gateway cut it (reason shutting_down: gateway_trailer), and the process exits.
 *
 * The default drain timeout (25 s) fits Kubernetes' default terminationGracePeriodSeconds
 * (30 s: SIGKILL comes then) with time left to cut the rest cleanly: longer streams need a
 * longer grace period on the pod and a longer --drain-timeout-ms (docs/failover.md).
 *
 * Log lines: draining (in flight at the start), then drained (how long it took),
 * drain_timeout or drain_interrupted (how many are being cut).
 */
#ifndef GATEWAY_DRAIN_H
#define GATEWAY_DRAIN_H

#include <stddef.h>

#include "ipl_httpd.h"

#define GATEWAY_DRAIN_DEFAULT_MS 25000

/* Drains `api` (started): returns the requests still in flight when it stopped waiting (0:
 * all finished) after at most timeout_ms (0: does not wait), or at once on another stop
 * signal (ipl_signal_count grows). */
size_t gateway_drain(ipl_httpd_t *api, int timeout_ms);

/* The API server's drain handler (ipl_httpd_drain_handler; arg unused): a request that arrives
 * on an open connection while draining gets 503 shutting_down, in Anthropic's error shape on
 * /v1/messages, else OpenAI's; its connection closes after the answer. */
void gateway_drain_answer(void *arg, const ipl_http_req_t *req, ipl_http_resp_t *resp);

#endif

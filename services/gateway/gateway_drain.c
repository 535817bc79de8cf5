/*
 * gateway_drain — waits for the requests in flight after ipl_httpd_drain. See gateway_drain.h.
 *
 * The wait polls (every S_TICK_MS) the server's count and the signal count rather than the
 * signal fd: that fd stays readable after the first signal, so poll(2) on it would spin.
 */
#include "gateway_drain.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gateway_api.h"
#include "gateway_messages.h"
#include "ipl_clock.h"
#include "ipl_log.h"
#include "ipl_signal.h"

#define S_TICK_MS 20

size_t gateway_drain(ipl_httpd_t *api, int timeout_ms)
{
    unsigned signals = ipl_signal_count();
    uint64_t start = ipl_mono_ms();
    uint64_t deadline = start + (uint64_t)(timeout_ms > 0 ? timeout_ms : 0);
    ipl_httpd_drain(api);
    size_t left = ipl_httpd_inflight(api);
    IPL_INFO("draining", "in_flight=%zu drain_timeout_ms=%d", left, timeout_ms);
    while (left > 0 && ipl_mono_ms() < deadline && ipl_signal_count() == signals) {
        ipl_sleep_ms(S_TICK_MS);
        left = ipl_httpd_inflight(api);
    }
    uint64_t took = ipl_mono_ms() - start;
    if (left == 0)
        IPL_INFO("drained", "ms=%llu", (unsigned long long)took);
    else if (ipl_signal_count() != signals)
        IPL_WARN("drain_interrupted",
                 "in_flight=%zu ms=%llu (another stop signal: cutting them now)", left,
                 (unsigned long long)took);
    else
        IPL_WARN("drain_timeout",
                 "in_flight=%zu drain_timeout_ms=%d (cutting them: each stream ends with an "
                 "error event, reason shutting_down)",
                 left, timeout_ms);
    return left;
}

void gateway_drain_answer(void *arg, const ipl_http_req_t *req, ipl_http_resp_t *resp)
{
    (void)arg;
    static const char msg[] = "the gateway is shutting down; send the request again (another "
                              "replica takes it)";
    size_t len = 0;
    char *body = !strncmp(ipl_http_req_path(req), "/v1/messages", 12)
                     ? gateway_messages_error_body(503, msg, &len)
                     : gateway_api_error_body("server_error", msg, NULL, "shutting_down", &len);
    if (body)
        ipl_http_resp_take(resp, 503, "application/json", &body, len);
    else
        ipl_http_resp_error(resp, 503, "server_error", msg);
}

/*
 * gateway_trailer — the error events that end a stream that broke off. See gateway_trailer.h.
 */
#include "gateway_trailer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api_anthropic_error.h"
#include "api_buf.h"
#include "gateway_api.h"
#include "ipl_error.h"
#include "ipl_httpd.h"

void gateway_trailer_classify(const gateway_xfer_result_t *res, const char *what, const char *name,
                              gateway_cut_t *cut)
{
    memset(cut, 0, sizeof *cut);
    if (res->aborted) {
        cut->status = 503;
        cut->reason = "shutting_down";
        snprintf(cut->message, sizeof cut->message,
                 "the gateway is shutting down and cut this stream: it did not end within the "
                 "gateway's drain timeout (--drain-timeout-ms); %s `%s` was not at fault",
                 what, name);
    } else if (res->idle_timeout) {
        cut->status = 504;
        cut->reason = "stream_idle_timeout";
        snprintf(cut->message, sizeof cut->message, "%s `%s` stopped sending: %s", what, name,
                 res->error);
    } else {
        cut->status = 502;
        cut->reason = "upstream_failed";
        snprintf(cut->message, sizeof cut->message, "the %s's stream broke off: %s", what,
                 res->error);
    }
}

int gateway_trailer_write(int fd, bool anthropic, const gateway_cut_t *cut)
{
    if (anthropic) {
        api_buf_t out = {0};
        int rc = api_anthropic_error_event(&out, cut->status, cut->message);
        if (rc == 0) rc = ipl_http_write_all(fd, out.data, out.len);
        api_buf_free(&out);
        return rc;
    }
    size_t len = 0;
    char *body = gateway_api_error_body("server_error", cut->message, NULL, cut->reason, &len);
    if (!body) return IPL_E_NOMEM;
    static const char head[] = "data: ", done[] = "\n\ndata: [DONE]\n\n";
    int rc = ipl_http_write_all(fd, head, sizeof head - 1);
    if (rc == 0) rc = ipl_http_write_all(fd, body, len);
    if (rc == 0) rc = ipl_http_write_all(fd, done, sizeof done - 1);
    free(body);
    return rc;
}

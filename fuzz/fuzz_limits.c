/* libFuzzer target: a gateway replica's view of its peers' LIMITS_USAGE (libs/limits). Any
 * frame that decodes as LIMITS_USAGE is applied to a table with limits, twice (a repeat
 * must change nothing), with admissions and settlements in between; whatever counters,
 * incarnations and tenant names a peer sends, nothing crashes, and a repeated report charges
 * nothing more. Seeds: fuzz/seeds/fuzz_limits/ (a LIMITS_USAGE with two tenants). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ipl_proto.h"
#include "limits_table.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    ipl_msg_t msg;
    if (ipl_msg_decode(data, size, &msg) != 0) return 0;
    if (msg.type != IPL_MSG_LIMITS_USAGE) {
        ipl_msg_clear(&msg);
        return 0;
    }
    ipl_limit_t limits[] = {
        {.policy = "p", .tenant = "*", .requests_per_minute = 60, .concurrent_requests = 4},
        {.policy = "p",
         .tenant = "team-a",
         .input_tokens_per_minute = 10000,
         .output_tokens_per_minute = 5000,
         .cost_per_day_micros = 1000000}};
    limits_table_t *t = limits_table_new(&(limits_options_t){.max_tenants = 64});
    int64_t now = 1700000000000LL;
    limits_table_set(t, limits, 2, now);
    limits_handle_t h;
    limits_verdict_t v;
    limits_table_admit(t, "team-a", 100, 50, now, &h, &v);
    limits_table_apply(t, &msg.u.limits_usage, now);
    limits_tenant_stats_t before[80], after[80];
    size_t n = limits_table_stats(t, now, before, 80);
    limits_table_apply(t, &msg.u.limits_usage, now); /* a repeat */
    if (limits_table_stats(t, now, after, 80) != n) abort();
    for (size_t i = 0; i < n && i < 80; i++)
        for (int d = 0; d < 3; d++)
            if (memcmp(&before[i].level[d], &after[i].level[d], sizeof(double))) abort();
    limits_table_settle(t, &h, 70, 10, now + 10);
    limits_table_admit(t, msg.u.limits_usage.replica ? msg.u.limits_usage.replica : "", 1, 0,
                       now + 20, &h, &v);
    limits_table_settle(t, &h, 0, 0, now + 30);
    uint32_t nu;
    free(limits_table_usage(t, &nu));
    limits_table_destroy(&t);
    ipl_msg_clear(&msg);
    return 0;
}

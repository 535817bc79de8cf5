/*
 * limits_format — header values for rate limits.
 */
#include "limits_format.h"

#include <stdio.h>

char *limits_format_reset(char *buf, size_t size, int64_t ms)
{
    if (ms <= 0) {
        snprintf(buf, size, "0s");
        return buf;
    }
    if (ms < 1000) {
        snprintf(buf, size, "%lldms", (long long)ms);
        return buf;
    }
    long long s = (long long)((ms + 999) / 1000);
    long long h = s / 3600, m = s / 60 % 60, sec = s % 60;
    if (h)
        snprintf(buf, size, "%lldh%lldm%llds", h, m, sec);
    else if (m)
        snprintf(buf, size, "%lldm%llds", m, sec);
    else
        snprintf(buf, size, "%llds", sec);
    return buf;
}

int64_t limits_format_retry_after_s(int64_t ms)
{
    return ms <= 0 ? 0 : (ms + 999) / 1000;
}

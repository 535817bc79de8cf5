/*
 * ipl_strategy — the strategy list's lookups. See ipl_strategy.h.
 */
#include "ipl_strategy.h"

#include <string.h>

#define S_NAME(name, measurement)        name,
#define S_MEASUREMENT(name, measurement) measurement,
#define S_LIST(name, measurement)        ", " name

static const char *const s_names[] = {IPL_STRATEGIES(S_NAME)};
static const bool s_measurement[] = {IPL_STRATEGIES(S_MEASUREMENT)};
static const char s_list[] = "" IPL_STRATEGIES(S_LIST); /* ", ttft, oracle, ..." */

size_t ipl_strategy_count(void)
{
    return sizeof s_names / sizeof s_names[0];
}

const char *ipl_strategy_name(size_t i)
{
    return i < ipl_strategy_count() ? s_names[i] : NULL;
}

bool ipl_strategy_measurement(size_t i)
{
    return i < ipl_strategy_count() && s_measurement[i];
}

bool ipl_strategy_known(const char *name)
{
    for (size_t i = 0; name && i < ipl_strategy_count(); i++)
        if (!strcmp(s_names[i], name)) return true;
    return false;
}

const char *ipl_strategy_list(void)
{
    return s_list + 2;
}

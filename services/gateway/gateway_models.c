/*
 * gateway_models — GET /v1/models's body. See gateway_models.h.
 */
#include "gateway_models.h"

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <string.h>

/* Whether pool i's model was listed by an earlier pool. */
static bool s_seen(const ipl_policy_t *p, uint32_t i)
{
    for (uint32_t k = 0; k < i; k++)
        if (p->pools[k].model && strcmp(p->pools[k].model, p->pools[i].model) == 0) return true;
    return false;
}

cJSON *gateway_models_list(const ipl_policy_t *p, uint64_t created_s)
{
    cJSON *root = cJSON_CreateObject();
    if (!root || !cJSON_AddStringToObject(root, "object", "list")) goto nomem;
    cJSON *data = cJSON_AddArrayToObject(root, "data");
    if (!data) goto nomem;
    for (uint32_t i = 0; i < p->pools_len; i++) {
        const char *model = p->pools[i].model;
        if (!model || !model[0] || s_seen(p, i)) continue;
        cJSON *m = cJSON_CreateObject();
        if (!m) goto nomem;
        cJSON_AddItemToArray(data, m);
        cJSON *pools = NULL;
        if (!cJSON_AddStringToObject(m, "id", model) ||
            !cJSON_AddStringToObject(m, "object", "model") ||
            !cJSON_AddNumberToObject(m, "created", (double)created_s) ||
            !cJSON_AddStringToObject(m, "owned_by", "inferplane") ||
            !(pools = cJSON_AddArrayToObject(m, "pools")))
            goto nomem;
        for (uint32_t k = i; k < p->pools_len; k++) {
            if (!p->pools[k].model || strcmp(p->pools[k].model, model) != 0) continue;
            cJSON *name = cJSON_CreateString(p->pools[k].name ? p->pools[k].name : "");
            if (!name) goto nomem;
            cJSON_AddItemToArray(pools, name);
        }
    }
    return root;
nomem:
    cJSON_Delete(root);
    return NULL;
}

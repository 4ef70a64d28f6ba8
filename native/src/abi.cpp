// abi.cpp — drmas_abi_value: the sizes and field offsets of drmas.h's structs and the values of
// its constants, as this library was compiled, so that a binding (the Java one checks at load)
// can tell a copy of the header that has drifted from the library it loaded. The table is
// written from the header's own names (#NAME, NAME), so a value can never disagree with it;
// test_cpu.cpp checks that every constant and field of drmas.h has an entry.
#include <stddef.h>
#include <string.h>

#include "drmas.h"

namespace {

struct Entry {
    const char* name;
    int64_t value;
};

#define DRMAS_C(name) {#name, (int64_t)(name)}
#define DRMAS_SIZE(type) {#type, (int64_t)sizeof(type)}
#define DRMAS_FIELD(type, field) {#type "." #field, (int64_t)offsetof(type, field)}

const Entry kEntries[] = {
    DRMAS_SIZE(drmas_norm_config),
    DRMAS_FIELD(drmas_norm_config, mean_from),
    DRMAS_FIELD(drmas_norm_config, std_from),
    DRMAS_FIELD(drmas_norm_config, numerator),
    DRMAS_FIELD(drmas_norm_config, global_pooling),
    DRMAS_FIELD(drmas_norm_config, singleton),
    DRMAS_FIELD(drmas_norm_config, ddof),
    DRMAS_FIELD(drmas_norm_config, scale_by_std),
    DRMAS_FIELD(drmas_norm_config, reserved),
    DRMAS_FIELD(drmas_norm_config, eps),
    DRMAS_SIZE(drmas_loss_config),
    DRMAS_FIELD(drmas_loss_config, clip_low),
    DRMAS_FIELD(drmas_loss_config, clip_high),
    DRMAS_FIELD(drmas_loss_config, dual_clip),
    DRMAS_FIELD(drmas_loss_config, kl_coef),
    DRMAS_FIELD(drmas_loss_config, normalizer),
    DRMAS_FIELD(drmas_loss_config, kl_type),
    DRMAS_FIELD(drmas_loss_config, per_row_mean),
    DRMAS_SIZE(drmas_lmhead_config),
    DRMAS_FIELD(drmas_lmhead_config, clip_low),
    DRMAS_FIELD(drmas_lmhead_config, clip_high),
    DRMAS_FIELD(drmas_lmhead_config, dual_clip),
    DRMAS_FIELD(drmas_lmhead_config, kl_coef),
    DRMAS_FIELD(drmas_lmhead_config, normalizer),
    DRMAS_FIELD(drmas_lmhead_config, entropy_coef),
    DRMAS_FIELD(drmas_lmhead_config, kl_type),
    DRMAS_FIELD(drmas_lmhead_config, per_row_mean),

    DRMAS_C(DRMAS_OK),
    DRMAS_C(DRMAS_ERR_NULL),
    DRMAS_C(DRMAS_ERR_SIZE),
    DRMAS_C(DRMAS_ERR_RANGE),
    DRMAS_C(DRMAS_ERR_NONFINITE),
    DRMAS_C(DRMAS_ERR_CONFIG),
    DRMAS_C(DRMAS_ERR_UNSUPPORTED),
    DRMAS_C(DRMAS_ERR_CUDA),
    DRMAS_C(DRMAS_ERR_ALLOC),
    DRMAS_C(DRMAS_ERR_INCONSISTENT),
    DRMAS_C(DRMAS_DEVICE_CPU),
    DRMAS_C(DRMAS_DEVICE_CUDA),
    DRMAS_C(DRMAS_FROM_GROUP),
    DRMAS_C(DRMAS_FROM_AGENT),
    DRMAS_C(DRMAS_NUMERATOR_ROW),
    DRMAS_C(DRMAS_NUMERATOR_TRAJECTORY),
    DRMAS_C(DRMAS_POOL_TRAJECTORIES),
    DRMAS_C(DRMAS_POOL_ROWS),
    DRMAS_C(DRMAS_SINGLETON_FALLBACK),
    DRMAS_C(DRMAS_SINGLETON_ZERO),
    DRMAS_C(DRMAS_SINGLETON_RAW),
    DRMAS_C(DRMAS_DIAG_AGENT_COUNT),
    DRMAS_C(DRMAS_DIAG_AGENT_MEAN),
    DRMAS_C(DRMAS_DIAG_AGENT_M2),
    DRMAS_C(DRMAS_DIAG_AGENT_STD),
    DRMAS_C(DRMAS_DIAG_GROUP_COUNT),
    DRMAS_C(DRMAS_DIAG_GROUP_MEAN),
    DRMAS_C(DRMAS_DIAG_GROUP_M2),
    DRMAS_C(DRMAS_DIAG_GROUP_STD),
    DRMAS_C(DRMAS_DIAG_INFLATION),
    DRMAS_C(DRMAS_DIAG_FIELDS),
    DRMAS_C(DRMAS_KL_NONE),
    DRMAS_C(DRMAS_KL_K1),
    DRMAS_C(DRMAS_KL_K2),
    DRMAS_C(DRMAS_KL_K3),
    DRMAS_C(DRMAS_LOSS_LOSS),
    DRMAS_C(DRMAS_LOSS_PG_LOSS),
    DRMAS_C(DRMAS_LOSS_KL_LOSS),
    DRMAS_C(DRMAS_LOSS_TOKENS),
    DRMAS_C(DRMAS_LOSS_CLIPPED),
    DRMAS_C(DRMAS_LOSS_CLIPPED_LOWER),
    DRMAS_C(DRMAS_LOSS_PPO_KL),
    DRMAS_C(DRMAS_LOSS_KL),
    DRMAS_C(DRMAS_LOSS_SUMS),
    DRMAS_C(DRMAS_LMHEAD_ENTROPY),
    DRMAS_C(DRMAS_LMHEAD_SUMS),
    DRMAS_C(DRMAS_COPY_HOST_TO_DEVICE),
    DRMAS_C(DRMAS_COPY_DEVICE_TO_HOST),
    DRMAS_C(DRMAS_COPY_DEVICE_TO_DEVICE),
};

}  // namespace

extern "C" int64_t drmas_abi_value(const char* name) {
    if (name == nullptr) return -1;
    for (const Entry& e : kEntries)
        if (strcmp(e.name, name) == 0) return e.value;
    return -1;
}

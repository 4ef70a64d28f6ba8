// AbiIndices.java — the index constants of drmas.h that Java reads results with: the fields of
// the advantage diagnostics (DRMAS_DIAG_*), the loss sums (DRMAS_LOSS_*) and the LM head's
// (DRMAS_LMHEAD_*). This is their one
// Java spelling; each is named as its #define without the DRMAS_ prefix, and AbiTest checks every
// one against the loaded library, so that the two cannot drift apart.
package dev.drmas.bindings;

public final class AbiIndices {
    private AbiIndices() {}

    // diagnostics[f * S + u * K + k], S = num_uids * K (drmas_advantage_f32)
    public static final int DIAG_AGENT_COUNT = 0;
    public static final int DIAG_AGENT_MEAN = 1;
    public static final int DIAG_AGENT_M2 = 2;
    public static final int DIAG_AGENT_STD = 3;
    public static final int DIAG_GROUP_COUNT = 4;
    public static final int DIAG_GROUP_MEAN = 5;
    public static final int DIAG_GROUP_M2 = 6;
    public static final int DIAG_GROUP_STD = 7;
    /** Lemma 4.2's (σ_uk² + (μ_uk − μ_u)²) / σ_u² with population variances (M2 / count), NaN where undefined. */
    public static final int DIAG_INFLATION = 8;
    /** Fields per (uid, agent) segment. */
    public static final int DIAG_FIELDS = 9;

    // sums[DRMAS_LOSS_SUMS] of drmas_clipped_loss_f32
    /** The aggregated loss (pg + kl_coef · kl). */
    public static final int LOSS_LOSS = 0;
    public static final int LOSS_PG_LOSS = 1;
    /** The aggregated KL term, without kl_coef. */
    public static final int LOSS_KL_LOSS = 2;
    /** Raw sums over the call's valid tokens from here on. */
    public static final int LOSS_TOKENS = 3;
    public static final int LOSS_CLIPPED = 4;
    public static final int LOSS_CLIPPED_LOWER = 5;
    public static final int LOSS_PPO_KL = 6;
    public static final int LOSS_KL = 7;
    /** Entries of the sums array. */
    public static final int LOSS_SUMS = 8;

    // sums[DRMAS_LMHEAD_SUMS] of drmas_lmhead_chunk_f32: LOSS_* first, then
    /** The raw sum of the valid tokens' entropies. */
    public static final int LMHEAD_ENTROPY = 8;
    /** Entries of the LM head's sums array. */
    public static final int LMHEAD_SUMS = 9;
}

// PpoConfig.java — `ppo:`: the update of each model from one step's rows (epochs × mini-batches
// × micro-batches) and the clipped loss of ARCHITECTURE §6, turned into the algo package's
// LossConfig, which checks the loss's values (here, at config time, under their key paths).
// Defaults as verl's actor.
package dev.drmas.config;

import dev.drmas.algo.KlEstimator;
import dev.drmas.algo.LossAggregation;
import dev.drmas.algo.LossConfig;
import dev.drmas.algo.SettingException;

/**
 * @param epochs          passes over a step's rows; default 1
 * @param miniBatchSize   rows (agent turns) per optimiser step; default 64. Unused when
 *                        updates_per_step is set
 * @param updatesPerStep  0 (default): mini-batches of mini_batch_size rows. n &gt;= 1: a fixed number
 *                        of optimiser steps per epoch for every model, whatever its row count (the
 *                        Dr. MAS reference's use_adaptive_ppo_mini_batch_size with
 *                        ppo_mini_update_num = n): each model's rows of the step, all ranks together,
 *                        are cut into n mini-batches of ⌈rows / n⌉ or ⌊rows / n⌋ rows (a model
 *                        with fewer than n rows takes one step per row). The reference sizes its
 *                        mini-batches ⌈rows / n⌉ after padding the batch with duplicated rows to a
 *                        multiple; drmas duplicates nothing and balances the cut instead, so that
 *                        the count is exactly n
 * @param microBatchSize  rows per forward/backward (gradient accumulation; the loss is still
 *                        normalised over the whole mini-batch), &lt;= mini_batch_size unless
 *                        updates_per_step is set; default 16
 * @param maxTokensPerMicroBatch dynamic micro-batches (verl's use_dynamic_bsz): rows are packed in
 *                        order into micro-batches of at most this many prompt + response tokens,
 *                        counted as the padded forward holds them (rows × the longest row), for
 *                        the update and the log-prob passes, instead of micro_batch_size rows; the
 *                        gradients are the same; 0 = off (default); else at least
 *                        rollout.max_prompt_tokens + rollout.max_new_tokens (one whole row)
 * @param shuffle         shuffle rows before cutting mini-batches; default true
 * @param clipLow         ε_low, in [0, 1); default 0.2
 * @param clipHigh        ε_high, &gt;= 0; default 0.2
 * @param dualClip        c &gt; 1: the loss of a token with A &lt; 0 is at most −A·c; null (or 0)
 *                        turns it off; default 3.0
 * @param lossAgg         {@code token-mean} (default), {@code seq-mean-token-sum},
 *                        {@code seq-mean-token-mean} or {@code seq-mean-token-sum-norm}: how the
 *                        policy loss (and the KL term) is aggregated. The entropy bonus is not: it
 *                        is always the mean over the mini-batch's response tokens (all ranks), where
 *                        verl aggregates it with loss_agg_mode too; a deliberate choice, the same
 *                        under token-mean, the default and the reference scripts' mode
 * @param klCoef          weight of the KL to the reference policy in the loss, &gt;= 0; &gt; 0
 *                        needs reference_model; default 0
 * @param klType          KL estimator: {@code k1}, {@code k2}, {@code k3} (default; also
 *                        {@code low_var_kl}) or {@code none}
 * @param entropyCoef     weight of the entropy bonus, &gt;= 0 (a per-token mean over the
 *                        mini-batch whatever loss_agg says); default 0
 * @param referenceModel  keep a frozen copy of each model's initial weights and compute the KL to
 *                        it (logged, and in the loss when kl_coef &gt; 0); default false
 * @param fusedLmHead     the fused LM head (dev.drmas.algo.FusedLmHead) in the update and the log-prob
 *                        passes: log-probs, entropy and the loss a chunk of response tokens at a time,
 *                        so that no [tokens, vocab] logits tensor exists; the same loss and gradients
 *                        up to rounding; CPU and CUDA models. Default true (measured faster on the
 *                        CPU at a real vocabulary, bench/README.md); false: the materialised
 *                        [tokens, vocab] logits, the reference path
 */
public record PpoConfig(int epochs, int miniBatchSize, int updatesPerStep, int microBatchSize, int maxTokensPerMicroBatch,
                        boolean shuffle, double clipLow, double clipHigh, Double dualClip, LossAggregation lossAgg, double klCoef, KlEstimator klType,
                        double entropyCoef, boolean referenceModel, boolean fusedLmHead) {
    public PpoConfig {
        Check.positive(epochs, "epochs");
        Check.positive(miniBatchSize, "mini_batch_size");
        Check.that(updatesPerStep >= 0, "updates_per_step",
                "must be >= 0 (0 = off: mini_batch_size rows per optimiser step), got " + updatesPerStep);
        Check.positive(microBatchSize, "micro_batch_size");
        // with updates_per_step the mini-batches are sized per step and mini_batch_size is unused
        Check.that(updatesPerStep > 0 || microBatchSize <= miniBatchSize, "micro_batch_size",
                "must be <= mini_batch_size (" + miniBatchSize + "), got " + microBatchSize);
        Check.nonNegative(maxTokensPerMicroBatch, "max_tokens_per_micro_batch");
        Check.given(lossAgg, "loss_agg");
        Check.given(klType, "kl_type");
        // the loss's own ranges (clip, dual clip, kl_coef) are LossConfig's to check
        try {
            // (the fields are not assigned yet: build from the parameters)
            lossConfig(clipLow, clipHigh, dualClip, lossAgg, klCoef, klType, referenceModel);
        } catch (SettingException e) {
            throw ConfigException.at(e.key(), e.problem());
        }
        Check.that(klCoef == 0 || referenceModel, "kl_coef",
                "> 0 needs ppo.reference_model: true (the KL is to the reference policy)");
        Check.that(klCoef == 0 || klType != KlEstimator.NONE, "kl_type", "is none but ppo.kl_coef is > 0");
        Check.nonNegative(entropyCoef, "entropy_coef");
    }

    public static PpoConfig defaults() {
        return new PpoConfig(1, 64, 0, 16, 0, true, 0.2, 0.2, 3.0, LossAggregation.TOKEN_MEAN, 0.0, KlEstimator.K3, 0.0,
                false, true);
    }

    /** The loss settings: the KL estimator only when there is a reference model. */
    public LossConfig toLossConfig() {
        return lossConfig(clipLow, clipHigh, dualClip, lossAgg, klCoef, klType, referenceModel);
    }

    private static LossConfig lossConfig(double clipLow, double clipHigh, Double dualClip, LossAggregation lossAgg,
                                         double klCoef, KlEstimator klType, boolean referenceModel) {
        return new LossConfig(clipLow, clipHigh, dualClip == null ? 0 : dualClip,
                referenceModel ? klType : KlEstimator.NONE, klCoef, lossAgg);
    }
}

// SettingsTest.java — the algo settings' own checks and spellings, without the config layer: each
// range of LossConfig and NormConfig at its edges (the edge value on each side, a non-finite one),
// the error naming its key apart from the problem, SettingException.num's two forms, and every
// enum's config spelling (trimmed, any case), KlEstimator's verl aliases, and the error of a bad one.
package dev.drmas.algo;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.function.Executable;

class SettingsTest {
    private static SettingException refused(Executable call) {
        return assertThrows(SettingException.class, call);
    }

    private static LossConfig loss(double clipLow, double clipHigh, double dualClip, double klCoef) {
        return new LossConfig(clipLow, clipHigh, dualClip, KlEstimator.K1, klCoef, LossAggregation.TOKEN_MEAN);
    }

    @Test
    void lossConfigRangesAtTheirEdges() {
        // the edges that are allowed
        assertEquals(0.0, loss(0, 0.2, 3, 0).clipLow());
        assertEquals(0.0, loss(0.2, 0, 3, 0).clipHigh());
        assertEquals(0.0, loss(0.2, 0.2, 0, 0).dualClip());
        assertEquals(1.0000001, loss(0.2, 0.2, 1.0000001, 0).dualClip());
        assertEquals(0.0, loss(0.2, 0.2, 3, 0).klCoef());

        SettingException e = refused(() -> loss(1, 0.2, 3, 0));
        assertEquals("clip_low", e.key());
        assertEquals("must be in [0, 1), got 1", e.problem());
        assertEquals("clip_low: must be in [0, 1), got 1", e.getMessage());
        assertEquals("clip_low", refused(() -> loss(-0.1, 0.2, 3, 0)).key());

        e = refused(() -> loss(0.2, -0.5, 3, 0));
        assertEquals("clip_high", e.key());
        assertEquals("must be a finite number >= 0, got -0.5", e.problem());
        assertEquals("clip_high", refused(() -> loss(0.2, Double.POSITIVE_INFINITY, 3, 0)).key());

        e = refused(() -> loss(0.2, 0.2, 1, 0));
        assertEquals("dual_clip", e.key());
        assertEquals("must be > 1, or null (or 0) to turn it off, got 1", e.problem());
        assertEquals("dual_clip", refused(() -> loss(0.2, 0.2, 0.5, 0)).key());
        assertEquals("dual_clip", refused(() -> loss(0.2, 0.2, Double.POSITIVE_INFINITY, 0)).key());

        e = refused(() -> loss(0.2, 0.2, 3, -1e-3));
        assertEquals("kl_coef", e.key());
        assertEquals("must be a finite number >= 0, got -0.001", e.problem());
        assertEquals("kl_coef", refused(() -> loss(0.2, 0.2, 3, Double.NaN)).key());
    }

    @Test
    void lossConfigWithersKeepTheOtherFields() {
        LossConfig d = LossConfig.defaults();
        assertEquals(new LossConfig(0.2, 0.2, 3.0, KlEstimator.NONE, 0.0, LossAggregation.TOKEN_MEAN), d);
        assertEquals(new LossConfig(0.1, 0.3, 3.0, KlEstimator.NONE, 0.0, LossAggregation.TOKEN_MEAN), d.withClip(0.1, 0.3));
        assertEquals(new LossConfig(0.2, 0.2, 0.0, KlEstimator.NONE, 0.0, LossAggregation.TOKEN_MEAN), d.withDualClip(0));
        assertEquals(new LossConfig(0.2, 0.2, 3.0, KlEstimator.K2, 0.5, LossAggregation.TOKEN_MEAN), d.withKl(KlEstimator.K2, 0.5));
        assertEquals(new LossConfig(0.2, 0.2, 3.0, KlEstimator.NONE, 0.0, LossAggregation.SEQ_MEAN_TOKEN_SUM),
                d.withAggregation(LossAggregation.SEQ_MEAN_TOKEN_SUM));
        assertEquals(false, d.usesReference());
        assertEquals(true, d.withKl(KlEstimator.K3, 0).usesReference());
    }

    @Test
    void normConfigEpsAtItsEdges() {
        NormConfig d = NormConfig.of(NormMode.DRMAS);
        // scaled: eps > 0 (it is added to a std that may be 0)
        SettingException e = refused(() -> d.withEps(0));
        assertEquals("eps", e.key());
        assertEquals("must be a finite number > 0, got 0", e.problem());
        assertEquals("eps", refused(() -> d.withEps(Double.POSITIVE_INFINITY)).key());
        assertEquals(Double.MIN_VALUE, d.withEps(Double.MIN_VALUE).eps());
        // centred only: eps >= 0
        NormConfig centred = d.withScaleByStd(false);
        assertEquals(0.0, centred.withEps(0).eps());
        e = refused(() -> centred.withEps(-1e-6));
        assertEquals("eps", e.key());
        assertEquals("must be a finite number >= 0, got -1.0E-6", e.problem());
        assertEquals("eps", refused(() -> centred.withEps(Double.NaN)).key());
        assertEquals("eps", refused(() -> centred.withEps(Double.POSITIVE_INFINITY)).key());
    }

    @Test
    void aNumberInAMessage() {
        assertEquals("1", SettingException.num(1));
        assertEquals("-3", SettingException.num(-3));
        assertEquals("0", SettingException.num(0));
        assertEquals("1.5", SettingException.num(1.5));
        assertEquals("1.0E-6", SettingException.num(1e-6));
        // integers print as such below 1e15 only (a long would print 1e15 as 1000000000000000)
        assertEquals("999999999999999", SettingException.num(999999999999999.0));
        assertEquals("1.0E15", SettingException.num(1e15));
        assertEquals("-1.0E15", SettingException.num(-1e15));
        assertEquals("NaN", SettingException.num(Double.NaN));
        assertEquals("Infinity", SettingException.num(Double.POSITIVE_INFINITY));
    }

    @Test
    void everyEnumParsesItsConfigSpelling() {
        assertEquals(List.of("grpo", "drmas", "agent-mean", "agent-std"),
                List.of(NormMode.values()).stream().map(NormMode::configName).toList());
        for (NormMode m : NormMode.values()) {
            assertEquals(m, NormMode.parse(m.configName()));
            assertEquals(m, NormMode.parse("  " + m.configName().toUpperCase(java.util.Locale.ROOT) + " "));
        }
        assertEquals(List.of("token-mean", "seq-mean-token-sum", "seq-mean-token-mean", "seq-mean-token-sum-norm"),
                List.of(LossAggregation.values()).stream().map(LossAggregation::configName).toList());
        for (LossAggregation a : LossAggregation.values()) {
            assertEquals(a, LossAggregation.parse(a.configName()));
            assertEquals(a, LossAggregation.parse(" " + a.configName().toUpperCase(java.util.Locale.ROOT)));
        }
        assertEquals(List.of("trajectories", "rows"),
                List.of(GlobalPooling.values()).stream().map(GlobalPooling::configName).toList());
        for (GlobalPooling p : GlobalPooling.values()) {
            assertEquals(p, GlobalPooling.parse(p.configName()));
            assertEquals(p, GlobalPooling.parse(p.configName().toUpperCase(java.util.Locale.ROOT) + " "));
        }
        assertEquals(List.of("fallback", "zero", "raw"),
                List.of(SingletonPolicy.values()).stream().map(SingletonPolicy::configName).toList());
        for (SingletonPolicy p : SingletonPolicy.values()) {
            assertEquals(p, SingletonPolicy.parse(p.configName()));
            assertEquals(p, SingletonPolicy.parse(" " + p.configName().toUpperCase(java.util.Locale.ROOT)));
        }
        assertEquals(List.of("none", "k1", "k2", "k3"),
                List.of(KlEstimator.values()).stream().map(KlEstimator::configName).toList());
        for (KlEstimator k : KlEstimator.values()) {
            assertEquals(k, KlEstimator.parse(k.configName()));
            assertEquals(k, KlEstimator.parse(k.configName().toUpperCase(java.util.Locale.ROOT) + "\t"));
        }
    }

    @Test
    void klEstimatorTakesVerlsNames() {
        assertEquals(KlEstimator.K3, KlEstimator.parse("low_var_kl"));
        assertEquals(KlEstimator.K3, KlEstimator.parse(" Low_Var_KL "));
        assertEquals(KlEstimator.K1, KlEstimator.parse("kl"));
        assertEquals(KlEstimator.K1, KlEstimator.parse("KL"));
        assertEquals(KlEstimator.K2, KlEstimator.parse("mse"));
        assertEquals(KlEstimator.K2, KlEstimator.parse(" MSE"));
    }

    @Test
    void aBadSpellingListsTheValidOnes() {
        assertEquals("mode: 'drmas2' is not one of grpo, drmas, agent-mean, agent-std",
                assertThrows(IllegalArgumentException.class, () -> NormMode.parse("drmas2")).getMessage());
        assertEquals("loss_agg_mode: 'token_mean' is not one of token-mean, seq-mean-token-sum, seq-mean-token-mean, "
                        + "seq-mean-token-sum-norm",
                assertThrows(IllegalArgumentException.class, () -> LossAggregation.parse("token_mean")).getMessage());
        assertEquals("global_pooling: 'row' is not one of trajectories, rows",
                assertThrows(IllegalArgumentException.class, () -> GlobalPooling.parse("row")).getMessage());
        assertEquals("singleton: 'none' is not one of fallback, zero, raw",
                assertThrows(IllegalArgumentException.class, () -> SingletonPolicy.parse("none")).getMessage());
        assertEquals("kl_type: 'k4' is not one of none, k1, k2, k3",
                assertThrows(IllegalArgumentException.class, () -> KlEstimator.parse("k4")).getMessage());
    }
}

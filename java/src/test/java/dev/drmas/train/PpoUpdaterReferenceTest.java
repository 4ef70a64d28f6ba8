// PpoUpdaterReferenceTest.java — the PPO update against a reference trainer written out in the
// test: each mini-batch's loss (clipped surrogate + KL from TorchReference's LibTorch composition,
// minus the entropy bonus) over the whole mini-batch in one forward, with the normaliser, each row's
// advantage on its tokens, the old and reference log-probs and the clipping of the gradient norm all
// computed here, not by PpoUpdater. The optimiser is AdamW with beta1 = beta2 = 0, eps = 1, so each
// step is memoryless and moves each weight by lr·g/(|g| + 1): nearly proportional to its gradient
// (plain Adam's steps are lr·sign(g) at first, blind to the gradient's size, and so to a wrong
// normaliser, a lost clip or a wrong entropy scale). The other PpoUpdater tests compare two runs of
// the same pipeline (native vs LibTorch loss, micro-batch sizes), which share those steps. Also each
// agent's gradient norm (trainer.grad_norm_per_agent) against its own loss's backward.
package dev.drmas.train;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.drmas.algo.KlEstimator;
import dev.drmas.algo.LossAggregation;
import dev.drmas.algo.LossConfig;
import dev.drmas.algo.TorchReference;
import dev.drmas.model.CausalLm;
import dev.drmas.model.Family;
import dev.drmas.model.ModelConfig;
import dev.drmas.model.Tensors;
import dev.drmas.rollout.TeacherForcing;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;
import org.bytedeco.javacpp.PointerScope;
import org.bytedeco.pytorch.NoGradGuard;
import org.bytedeco.pytorch.Scalar;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.global.torch;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

class PpoUpdaterReferenceTest {
    static final int VOCAB = PpoUpdaterTest.VOCAB;
    static final double LR = 0.1, TEMPERATURE = 0.8;

    @BeforeAll
    static void threads() {
        torch.set_num_threads(2);
    }

    enum Variant {
        /** token-mean: the normaliser is the mini-batch's response tokens; K3 KL to a reference model */
        TOKEN_MEAN_K3,
        /** seq-mean-token-mean: the normaliser is the mini-batch's rows (empty ones too); K1 KL */
        SEQ_MEAN_TOKEN_MEAN_K1
    }

    @ParameterizedTest
    @EnumSource(Variant.class)
    void updateMatchesAReferenceTrainer(Variant v) {
        ModelConfig cfg = ModelConfig.tiny(Family.LLAMA, VOCAB);
        LossConfig loss = switch (v) {
            case TOKEN_MEAN_K3 -> LossConfig.defaults().withKl(KlEstimator.K3, 0.2);
            case SEQ_MEAN_TOKEN_MEAN_K1 -> LossConfig.defaults().withAggregation(LossAggregation.SEQ_MEAN_TOKEN_MEAN)
                    .withKl(KlEstimator.K1, 0.2);
        };
        final double entropyCoef = 0.05, clip = 8.0;  // the norms here are about 4 to 30
        final int epochs = 2, miniBatch = 5;
        final long seed = 17;
        // 12 rows (some with empty responses), signed advantages; mini-batches of 5 cut from a
        // seeded permutation, accumulated in micro-batches of 2
        List<PpoUpdater.Row> rows = PpoUpdaterTest.rows(5, 12);
        PpoUpdater.Settings s = new PpoUpdater.Settings(epochs, miniBatch, 2, TEMPERATURE, entropyCoef, clip, loss, 1);
        AdamW.Settings memoryless = new AdamW.Settings(LR, 0.0, 0.0, 1.0, 0.0, 0);
        Map<String, float[]> initial, got, want;
        int clipped = 0, steps = 0;
        List<Double> norms = new ArrayList<>();
        try (CausalLm m1 = CausalLm.random(cfg, 5); CausalLm m2 = CausalLm.random(cfg, 5); CausalLm ref = CausalLm.random(cfg, 6);
             AdamW o1 = new AdamW(m1.parameters(), memoryless)) {
            initial = PpoUpdaterTest.snapshot(m1);
            PpoUpdater.Stats st = new PpoUpdater(m1, o1, ref, s).update(rows, seed);
            got = PpoUpdaterTest.snapshot(m1);

            // the reference trainer on m2 (the same initial weights)
            List<int[]> prompts = new ArrayList<>(), responses = new ArrayList<>();
            for (PpoUpdater.Row r : rows) {
                prompts.add(r.promptIds());
                responses.add(r.responseIds());
            }
            long[] start = new long[rows.size() + 1];
            for (int i = 0; i < rows.size(); i++) start[i + 1] = start[i] + rows.get(i).responseIds().length;
            float[] oldLp, refLp;
            try (PointerScope scope = new PointerScope(); NoGradGuard ng = new NoGradGuard()) {
                // old log-probs: the policy before any step, fixed for the whole update
                oldLp = Tensors.toFloats(TeacherForcing.logProbs(m2, prompts, responses, TEMPERATURE, false).logprobs());
                refLp = Tensors.toFloats(TeacherForcing.logProbs(ref, prompts, responses, TEMPERATURE, false).logprobs());
            }
            SplittableRandom rng = new SplittableRandom(seed);
            m2.setRequiresGrad(true);
            for (int epoch = 0; epoch < epochs; epoch++) {
                int[] order = PpoUpdater.permutation(rows.size(), rng);
                for (int from = 0; from < order.length; from += miniBatch) {
                    int to = Math.min(order.length, from + miniBatch);
                    List<int[]> p = new ArrayList<>(), a = new ArrayList<>();
                    List<Float> adv = new ArrayList<>(), old = new ArrayList<>(), rf = new ArrayList<>();
                    for (int i = from; i < to; i++) {
                        int row = order[i];
                        p.add(prompts.get(row));
                        a.add(responses.get(row));
                        for (long t = start[row]; t < start[row + 1]; t++) {
                            adv.add(rows.get(row).advantage());
                            old.add(oldLp[(int) t]);
                            rf.add(refLp[(int) t]);
                        }
                    }
                    int tokens = adv.size();
                    if (tokens == 0) continue;
                    double normalizer = v == Variant.TOKEN_MEAN_K3 ? tokens : to - from;
                    try (PointerScope scope = new PointerScope()) {
                        TeacherForcing.Result tf = TeacherForcing.logProbs(m2, p, a, TEMPERATURE, true);
                        Tensor lossT = TorchReference.clippedLossTensor(loss, normalizer, Tensors.longs(tf.offsets()), tf.logprobs(),
                                floats(old), floats(adv), floats(rf), null);
                        lossT = lossT.sub(tf.entropy().sum().mul(new Scalar(entropyCoef / tokens)));
                        lossT.backward();
                        // clip_grad_norm_ (fp64 norm), then AdamW with beta1 = beta2 = 0: w −= lr·g/(|g| + eps)
                        double sq = 0;
                        for (Tensor w : m2.parameters().values()) sq += squares(w.grad());
                        double norm = Math.sqrt(sq), scale = norm > clip ? clip / (norm + 1e-6) : 1.0;
                        if (scale < 1) clipped++;
                        norms.add(norm);
                        steps++;
                        try (NoGradGuard ng = new NoGradGuard()) {
                            for (Tensor w : m2.parameters().values()) {
                                if (!w.grad().defined()) continue;
                                Tensor g = w.grad().to(torch.ScalarType.Double).mul(new Scalar(scale));
                                Tensor step = g.div(g.abs().add(new Scalar(1.0))).mul(new Scalar(LR));
                                w.copy_(w.to(torch.ScalarType.Double).sub(step));
                                w.grad().zero_();
                            }
                        }
                    }
                }
            }
            m2.setRequiresGrad(false);
            want = PpoUpdaterTest.snapshot(m2);
            assertEquals(steps, st.optimizerSteps(), "optimiser steps");
        }
        // the test means something only if the clip acted on some steps and not on others, and the weights moved
        assertTrue(clipped > 0 && clipped < steps, "steps clipped by the reference: " + clipped + " of " + steps + ", norms " + norms);
        assertTrue(PpoUpdaterTest.maxMove(initial, want) > 1e-3, "the reference moved no weight by 1e-3");
        for (String k : want.keySet()) {
            float[] x = want.get(k), y = got.get(k), x0 = initial.get(k);
            for (int i = 0; i < x.length; i++) {
                // compared as moves: rounding of the two paths (native kernel, micro-batches) is ~1e-7 of a move
                double ref = x[i] - x0[i], moved = y[i] - x0[i];
                assertEquals(ref, moved, 2e-6 + 1e-3 * Math.abs(ref), k + "[" + i + "] moved");
            }
        }
    }

    @Test
    void perAgentNormsDivideEachAgentsLossByItsOwnRows() {
        // trainer.grad_norm_per_agent: each agent's norm is that of its rows' loss as if trained alone, so under a
        // per-row aggregation the divisor is the agent's own rows (empty ones too), not the model's. At the old
        // policy the ratio is 1 and no clip acts: dL/dlogp of a token of row r is −A_r / (n_r · rows of its agent).
        ModelConfig cfg = ModelConfig.tiny(Family.LLAMA, VOCAB);
        LossConfig loss = LossConfig.defaults().withAggregation(LossAggregation.SEQ_MEAN_TOKEN_MEAN);
        List<PpoUpdater.Row> rows = new ArrayList<>();
        for (PpoUpdater.Row r : PpoUpdaterTest.rows(7, 10)) {
            // agent 0 has 4 rows, agent 1 has 6: a divisor of all 10 rows is wrong for both
            rows.add(new PpoUpdater.Row(r.promptIds(), r.responseIds(), r.advantage(), rows.size() % 3 == 0 ? 0 : 1));
        }
        PpoUpdater.Settings s = new PpoUpdater.Settings(1, 10, 3, TEMPERATURE, 0.0, 0.0, loss, 1, true);
        try (CausalLm m = CausalLm.random(cfg, 5); AdamW o = new AdamW(m.parameters(), AdamW.Settings.of(1e-3))) {
            double[] want = new double[2];
            m.setRequiresGrad(true);
            for (int a = 0; a < 2; a++) {
                List<int[]> prompts = new ArrayList<>(), responses = new ArrayList<>();
                List<Float> weight = new ArrayList<>();
                int agentRows = 0;
                for (PpoUpdater.Row r : rows) {
                    if (r.agent() != a) continue;
                    agentRows++;
                    prompts.add(r.promptIds());
                    responses.add(r.responseIds());
                }
                for (PpoUpdater.Row r : rows) {
                    if (r.agent() != a) continue;
                    for (int t = 0; t < r.responseIds().length; t++) weight.add(r.advantage() / (r.responseIds().length * (float) agentRows));
                }
                try (PointerScope scope = new PointerScope()) {
                    Tensor lp = TeacherForcing.logProbs(m, prompts, responses, TEMPERATURE, true).logprobs();
                    lp.mul(floats(weight)).sum().neg().backward();
                    want[a] = GradNorm.of(m.parameters());
                    for (Tensor w : m.parameters().values()) if (w.grad().defined()) w.grad().zero_();
                }
            }
            m.setRequiresGrad(false);
            PpoUpdater.Stats st = new PpoUpdater(m, o, null, s).update(rows, 3);
            for (int a = 0; a < 2; a++) {
                assertTrue(want[a] > 0, "agent " + a + " has a gradient");
                assertEquals(want[a], st.agentGradNorms().get(a), 1e-4 * want[a], "agent " + a + "'s gradient norm");
            }
        }
    }

    private static Tensor floats(List<Float> xs) {
        float[] a = new float[xs.size()];
        for (int i = 0; i < a.length; i++) a[i] = xs.get(i);
        return Tensors.floats(a);
    }

    private static double squares(Tensor g) {
        if (!g.defined()) return 0;
        Tensor d = g.to(torch.ScalarType.Double);
        return d.mul(d).sum().item_double();
    }
}

// PerModelSettingsTest.java — what the config says reaches the update: the run's ppo/rollout keys
// become PpoUpdater's settings (entropy bonus, temperature, Dr. GRPO's constant divisor, ...), each
// model's optim block (with its agent's overrides) becomes that model's AdamW settings and grad
// clip, and each model's own grad_clip bounds its own steps in a real training step, and
// ppo.updates_per_step gives each model that many steps per epoch there. The expected
// values are written out here, not read back from the config records.
package dev.drmas.train;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.drmas.algo.KlEstimator;
import dev.drmas.algo.LossAggregation;
import dev.drmas.algo.LossConfig;
import dev.drmas.config.RunConfig;
import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.bytedeco.javacpp.PointerScope;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class PerModelSettingsTest {
    @TempDir
    Path tmp;

    static final PrintStream QUIET = new PrintStream(new ByteArrayOutputStream());

    /** Two models, each with optim settings unlike the defaults and unlike each other's; the verifier's agent overrides some. */
    static final String YAML = """
            run: {name: per-model, seed: 3, threads: 2, device: cpu}
            data:
              synthetic: {operands: 2, digits: 1, operators: ["+"], train_size: 40, test_size: 4}
            models:
              big:
                family: qwen3
                size: {hidden: 32, layers: 1, heads: 2, kv_heads: 1, intermediate: 64, max_positions: 512}
                optim: {lr: 2.0e-3, betas: [0.8, 0.95], eps: 1.0e-7, weight_decay: 0.05, warmup_steps: 3, grad_clip: 2.0}
              small:
                family: llama
                size: {hidden: 32, layers: 1, heads: 2, kv_heads: 2, intermediate: 64, max_positions: 512}
                optim: {lr: 5.0e-4, betas: [0.7, 0.9], eps: 1.0e-6, weight_decay: 0.02, warmup_steps: 1, grad_clip: 0.5}
            agents:
              - {id: solver, role: solver, model: big}
              - {id: verifier, role: verifier, model: small, optim: {betas: [0.6, 0.99], weight_decay: 0.3, warmup_steps: 0, grad_clip: 0.25}}
            rollout: {tasks_per_step: 2, rollouts_per_task: 3, temperature: 1.0, max_new_tokens: 6, max_prompt_tokens: 300}
            algorithm: {mode: drmas}
            ppo: {epochs: 2, mini_batch_size: 6, micro_batch_size: 3}
            trainer: {steps: 1, eval_freq: 0, eval_before_train: false, save_freq: 0}
            eval: {tasks: 2, k: 2, temperature: 1.0, top_p: 1.0}
            metrics: {progress_bar: false}
            """;

    RunConfig config(String... overrides) {
        List<String> o = new ArrayList<>(List.of("run.output_dir=" + tmp));
        o.addAll(List.of(overrides));
        return RunConfig.parse(YAML, o);
    }

    @Test
    void theRunsPpoKeysBecomeTheUpdateSettings() {
        RunConfig cfg = config("ppo.epochs=3", "ppo.mini_batch_size=6", "ppo.micro_batch_size=2", "rollout.temperature=0.7",
                "ppo.entropy_coef=0.03", "ppo.loss_agg=seq-mean-token-sum-norm", "ppo.clip_low=0.1", "ppo.clip_high=0.28",
                "ppo.dual_clip=4.0", "ppo.reference_model=true", "ppo.kl_coef=0.02", "ppo.kl_type=k2",
                "trainer.grad_norm_per_agent=true", "ppo.shuffle=false", "ppo.max_tokens_per_micro_batch=400",
                "ppo.fused_lm_head=false", "eval.temperature=0.4");
        // the constant divisor of seq-mean-token-sum-norm is the longest response allowed (max_new_tokens 6,
        // not max_prompt_tokens 300); the log-probs are taken at the rollout's temperature, not eval's
        PpoUpdater.Settings want = new PpoUpdater.Settings(3, 6, 2, 0.7, 0.03, 0.25,
                new LossConfig(0.1, 0.28, 4.0, KlEstimator.K2, 0.02, LossAggregation.SEQ_MEAN_TOKEN_SUM_NORM), 6, true, false, 400, false);
        assertEquals(want, Trainer.ppoSettings(cfg, 0.25));
    }

    @Test
    void eachModelsOptimiserGetsItsOwnSettings() {
        try (Trainer t = Trainer.open(config(), QUIET)) {
            Map<String, Policies.Policy> p = t.policiesForTest();
            assertEquals(new AdamW.Settings(2e-3, 0.8, 0.95, 1e-7, 0.05, 3), p.get("big").optim().settings(), "big");
            assertEquals(2.0, p.get("big").gradClip(), "big's grad_clip");
            // the verifier's overrides over small's own block; its lr and eps are small's
            assertEquals(new AdamW.Settings(5e-4, 0.6, 0.99, 1e-6, 0.3, 0), p.get("small").optim().settings(), "small");
            assertEquals(0.25, p.get("small").gradClip(), "small's grad_clip, the verifier's override");
        }
    }

    @Test
    void eachModelsGradClipBoundsItsOwnSteps() {
        // eps 1 and no weight decay: an AdamW step moves a weight by lr·|m̂|/(sqrt(v̂) + 1) <= lr·max|g| <= lr·grad_clip,
        // as the bias-corrected first moment is an average of the (clipped) gradients; float32 rounding adds at most an
        // ulp of 1 (the norms' weights) per step. The entropy bonus gives every model a gradient whatever the
        // advantages of a random model's rows (small's norm is ~1e-3 here).
        final double lr = 1.0, clip = 1e-5;
        RunConfig cfg = config("ppo.entropy_coef=0.1", "models.big.optim.eps=1.0", "models.big.optim.weight_decay=0.0",
                "models.big.optim.warmup_steps=0", "models.big.optim.lr=" + lr, "models.big.optim.grad_clip=0.0",
                "models.small.optim.eps=1.0", "models.small.optim.lr=" + lr, "agents.verifier.optim.weight_decay=0.0",
                "agents.verifier.optim.grad_clip=" + clip);
        try (Trainer t = Trainer.open(cfg, QUIET)) {
            Map<String, Policies.Policy> p = t.policiesForTest();
            Map<String, float[]> before = snapshot(p.get("small")), beforeBig = snapshot(p.get("big"));
            Map<String, Double> m = t.trainStep();
            long steps = p.get("small").optim().steps();
            assertTrue(steps > 0, "small stepped");
            double norm = m.get("model/small/grad_norm"), moved = PpoUpdaterTest.maxMove(before, snapshot(p.get("small")));
            assertTrue(norm > 10 * clip, "the clip has something to do: small's gradient norm " + norm);
            assertTrue(moved > 0, "small's weights moved");
            assertTrue(moved <= steps * (lr * clip * (1 + 1e-4) + 2e-7),
                    "small's weights moved by " + moved + " in " + steps + " steps clipped at " + clip + ": more than lr·clip per step");
            // big does not clip (grad_clip 0): its steps are not held to small's bound
            double bigMoved = PpoUpdaterTest.maxMove(beforeBig, snapshot(p.get("big")));
            assertTrue(bigMoved > 10 * lr * clip * p.get("big").optim().steps(), "big, unclipped, moved by " + bigMoved + " in "
                    + p.get("big").optim().steps() + " steps");
        }
    }

    @Test
    void updatesPerStepGivesEveryModelThatManyStepsPerEpoch() {
        // ppo.updates_per_step 3 in a real training step of the two-model team: each model (big: the solver's
        // rows, small: the verifier's) takes 3 optimiser steps in each of the 2 epochs, where mini_batch_size 6
        // gives big, with its 6 rows, 1 step an epoch. The entropy bonus gives both a gradient.
        RunConfig cfg = config("ppo.updates_per_step=3", "ppo.entropy_coef=0.1");
        try (Trainer t = Trainer.open(cfg, QUIET)) {
            Map<String, Policies.Policy> p = t.policiesForTest();
            Map<String, float[]> beforeBig = snapshot(p.get("big")), beforeSmall = snapshot(p.get("small"));
            Map<String, Double> m = t.trainStep();
            for (String id : List.of("big", "small")) {
                assertEquals(6, p.get(id).optim().steps(), id + "'s optimiser steps");
                assertEquals(0.0, m.get("model/" + id + "/skipped_steps"), id);
            }
            assertTrue(PpoUpdaterTest.maxMove(beforeBig, snapshot(p.get("big"))) > 0, "big's weights moved");
            assertTrue(PpoUpdaterTest.maxMove(beforeSmall, snapshot(p.get("small"))) > 0, "small's weights moved");
        }
    }

    static Map<String, float[]> snapshot(Policies.Policy p) {
        try (PointerScope scope = new PointerScope()) {
            return PpoUpdaterTest.snapshot(p.model());
        }
    }
}

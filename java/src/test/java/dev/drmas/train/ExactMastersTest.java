// ExactMastersTest.java — a mixed-precision model (dtype bfloat16, fp32 masters) loaded from weight
// files that hold more than bf16 keeps starts its masters from the files' exact values, the live
// weights being their rounding: a bf16 resume of an fp32 checkpoint (unsharded and sharded), a
// bf16 run from an fp32 warm start (run.warm_start), from an fp32 HF folder (models.id.path), and
// the warm start's own optimiser. The masters once came from the bf16 weights, the low bits lost.
package dev.drmas.train;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.drmas.config.RunConfig;
import dev.drmas.model.SafeTensors;
import dev.drmas.model.Tensors;
import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.bytedeco.javacpp.PointerScope;
import org.bytedeco.pytorch.Device;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.global.torch.ScalarType;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

class ExactMastersTest {
    @TempDir
    Path tmp;

    private static final Device CPU = new Device("cpu");

    private static RunConfig config(Path out, String... overrides) {
        List<String> o = new ArrayList<>(List.of("run.output_dir=" + out, "trainer.steps=1", "trainer.save_freq=1", "trainer.eval_freq=0",
                "ppo.epochs=1"));
        o.addAll(List.of(overrides));
        return RunConfig.parse(TrainerEndToEndTest.YAML, o);
    }

    /**
     * The masters of {@code p} are the values of the fp32 files in {@code dir} bit for bit, its bf16
     * weights their rounding, and the two differ somewhere (else the masters could be either).
     */
    private static void assertMastersAreTheFiles(Path dir, Policies.Policy p) {
        assertEquals(ScalarType.BFloat16, p.model().dtype());
        assertTrue(p.optim().keepsMasterWeights(), "fp32 masters");
        try (PointerScope scope = new PointerScope(); SafeTensors st = SafeTensors.open(dir)) {
            Map<String, Tensor> masters = p.optim().gatherState().master();
            long between = 0;
            for (Map.Entry<String, Tensor> e : p.model().parameters().entrySet()) {
                String name = e.getKey();
                assertEquals(ScalarType.Float, st.info(name).dtype().scalarType(), dir + ": " + name + " is fp32 in the files");
                float[] exact = Tensors.toFloats(st.get(name, ScalarType.Float, CPU));
                float[] rounded = Tensors.toFloats(st.get(name, ScalarType.BFloat16, CPU).to(ScalarType.Float));
                assertArrayEquals(exact, Tensors.toFloats(masters.get(name).to(ScalarType.Float)), "master " + name + " is the file's value");
                assertArrayEquals(rounded, Tensors.toFloats(e.getValue().to(ScalarType.Float)), "weight " + name + " is its bf16 rounding");
                for (int i = 0; i < exact.length; i++) if (Float.floatToIntBits(exact[i]) != Float.floatToIntBits(rounded[i])) between++;
            }
            assertTrue(between > 0, "the fp32 files hold values between bf16's");
        }
    }

    @ParameterizedTest
    @ValueSource(booleans = {false, true})
    void aBf16ResumeOfAnFp32CheckpointStartsItsMastersFromTheCheckpointsFp32Weights(boolean sharded) throws Exception {
        Path out = tmp.resolve("out");
        String shard = "distributed.shard_optimizer=" + sharded;
        try (Trainer t = Trainer.open(config(out, "models.policy.dtype=float32", shard), TrainerEndToEndTest.QUIET)) {
            t.train();
        }
        Path cp = new Checkpoints(out.resolve("e2e").resolve("checkpoints")).latest().orElseThrow();
        assertFalse(Files.exists(cp.resolve("master")), "an fp32 run's checkpoint has no masters apart: its weights are them");
        ByteArrayOutputStream log = new ByteArrayOutputStream();
        try (Trainer t = Trainer.open(config(out, "models.policy.dtype=bfloat16", shard), new PrintStream(log, true))) {
            assertEquals(1, t.step(), "resumed");
            assertTrue(log.toString().contains("models.policy.dtype: float32 -> bfloat16"), "the change is allowed and logged: " + log);
            assertMastersAreTheFiles(cp.resolve("models").resolve("policy"), t.policiesForTest().get("policy"));
        }
    }

    @Test
    void aBf16RunFromAnFp32WarmStartStartsItsMastersFromTheWarmStartsWeights() throws Exception {
        try (Trainer t = Trainer.open(config(tmp.resolve("w"), "models.policy.dtype=float32", "sft.steps=2", "run.resume=never"),
                TrainerEndToEndTest.QUIET)) {
            t.sft();
        }
        Path warm = WarmStart.weights(tmp.resolve("w").resolve("e2e"));
        try (Trainer t = Trainer.open(config(tmp.resolve("r"), "models.policy.dtype=bfloat16", "run.warm_start=" + warm),
                TrainerEndToEndTest.QUIET)) {
            assertMastersAreTheFiles(warm.resolve("policy"), t.policiesForTest().get("policy"));
        }
    }

    @Test
    void aBf16ModelFromAnFp32FolderStartsItsMastersAndItsWarmStartsFromTheFolder() throws Exception {
        Path model = PathModelTest.folder(tmp.resolve("m"));  // saved in fp32
        RunConfig cfg = config(tmp.resolve("out"), "models.policy.path=" + model, "models.policy.dtype=bfloat16");
        try (Policies ps = Policies.open(cfg, tmp.resolve("run"), null, null)) {
            assertMastersAreTheFiles(model, ps.get("policy"));
            // the warm start's own optimiser (drmas sft) too
            try (ModelOptimizer o = WarmStart.optimizer(ps, "policy", cfg.sft(), true, null)) {
                assertMastersAreTheFiles(model, ps.get("policy").withOptim(o));
            }
            // and a run optimiser made again while the weights are still the folder's (the warm start closes unstepped ones)
            ps.reopenOptimizers(ps.closeUnsteppedOptimizers());
            assertMastersAreTheFiles(model, ps.get("policy"));
        }
    }

    @Test
    void afterAWarmStartTrainsTheMastersAreItsMastersNotTheFolders() throws Exception {
        Path model = PathModelTest.folder(tmp.resolve("m"));
        RunConfig cfg = config(tmp.resolve("out"), "models.policy.path=" + model, "models.policy.dtype=bfloat16", "sft.steps=2",
                "run.resume=never");
        try (Trainer t = Trainer.open(cfg, TrainerEndToEndTest.QUIET); PointerScope scope = new PointerScope()) {
            t.sft();
            // the run's optimiser, made again after the warm start: from the warm start's trained masters, which it saved in
            // sft/master (the folder's values would undo the training; the trained weights are their rounding)
            Policies.Policy p = t.policiesForTest().get("policy");
            SftMastersTest.assertMastersAre(cfg.run().runDir().resolve("sft").resolve("master").resolve("policy"), p);
            long moved = 0;
            try (SafeTensors st = SafeTensors.open(model)) {
                for (Map.Entry<String, Tensor> e : p.model().parameters().entrySet()) {
                    float[] w = Tensors.toFloats(e.getValue().to(ScalarType.Float));
                    float[] before = Tensors.toFloats(st.get(e.getKey(), ScalarType.BFloat16, CPU).to(ScalarType.Float));
                    for (int i = 0; i < w.length; i++) if (w[i] != before[i]) moved++;
                }
            }
            assertTrue(moved > 0, "the warm start trained the weights");
        }
    }
}

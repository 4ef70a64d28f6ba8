// FusedLmHeadCudaTrainingTest.java — ppo.fused_lm_head on a CUDA model: a PPO update (two epochs,
// micro-batches, a KL term, the entropy bonus) with the fused LM head on the GPU lands on the
// weights of the materialised path on the GPU and of the fused path on the CPU, for tied and untied
// heads, with and without activation checkpointing (float32 models, so fp32 tolerances apply). Tagged
// "gpu"; skipped with a message where no GPU is usable, failed under DRMAS_REQUIRE_GPU=1.
package dev.drmas.train;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.drmas.algo.KlEstimator;
import dev.drmas.algo.LossConfig;
import dev.drmas.bindings.Backend;
import dev.drmas.model.CausalLm;
import dev.drmas.model.Family;
import dev.drmas.model.ModelConfig;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.bytedeco.pytorch.Device;
import org.bytedeco.pytorch.global.torch;
import org.bytedeco.pytorch.global.torch.ScalarType;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

@Tag("gpu")
class FusedLmHeadCudaTrainingTest {
    @BeforeEach
    void needsCuda() {
        boolean torchCuda = torch.cuda_is_available(), drmasCuda = Backend.CUDA.available();
        String why = "no CUDA device (LibTorch sees one: " + torchCuda + ", libdrmas's CUDA backend usable: " + drmasCuda + ")";
        if ("1".equals(System.getenv("DRMAS_REQUIRE_GPU"))) {
            assertTrue(torchCuda && drmasCuda, "DRMAS_REQUIRE_GPU=1 but " + why);
        } else {
            Assumptions.assumeTrue(torchCuda && drmasCuda, why + ": skipping the fused LM head's CUDA training tests");
        }
    }

    record Result(PpoUpdater.Stats stats, Map<String, float[]> initial, Map<String, float[]> weights) {
    }

    static Result update(ModelConfig cfg, boolean checkpointing, Device dev, boolean fused) {
        LossConfig loss = LossConfig.defaults().withKl(KlEstimator.K3, 0.05);
        PpoUpdater.Settings s = new PpoUpdater.Settings(2, 5, 2, 0.9, 0.01, 1.0, loss, 8, true, true, 0, fused);
        List<PpoUpdater.Row> rows = new ArrayList<>();
        for (PpoUpdater.Row r : PpoUpdaterTest.rows(7, 10)) {
            rows.add(new PpoUpdater.Row(r.promptIds(), r.responseIds(), r.advantage(), rows.size() % 2));
        }
        // the same seeds give the same float32 models on every device (CausalLm.random)
        try (CausalLm m = CausalLm.random(cfg, 5, ScalarType.Float, dev); CausalLm ref = CausalLm.random(cfg, 6, ScalarType.Float, dev);
             AdamW o = new AdamW(m.parameters(), FusedLmHeadTrainingTest.OPT)) {
            m.setActivationCheckpointing(checkpointing);
            assertEquals(dev.is_cuda(), m.device().is_cuda(), "the model is where the test put it");
            Map<String, float[]> initial = PpoUpdaterTest.snapshot(m);
            PpoUpdater.Stats st = new PpoUpdater(m, o, ref, s).update(rows, 42);
            return new Result(st, initial, PpoUpdaterTest.snapshot(m));
        }
    }

    static void assertSame(String what, Result want, Result got) {
        PpoUpdater.Stats a = want.stats(), b = got.stats();
        assertEquals(a.optimizerSteps(), b.optimizerSteps(), what);
        assertEquals(a.pgLoss(), b.pgLoss(), 1e-5 + 1e-4 * Math.abs(a.pgLoss()), what + " pg_loss");
        assertEquals(a.kl(), b.kl(), 1e-5 + 1e-4 * Math.abs(a.kl()), what + " kl");
        assertEquals(a.entropy(), b.entropy(), 1e-5 + 1e-4 * Math.abs(a.entropy()), what + " entropy");
        assertEquals(a.clipfrac(), b.clipfrac(), 1e-9, what + " clipfrac");
        ActivationCheckpointingTest.assertClose(want.weights(), got.weights(), 1e-5, 1e-4);
    }

    @ParameterizedTest(name = "tied {0}, checkpointing {1}")
    @CsvSource({"true, false", "false, false", "true, true"})
    void aFusedUpdateOnCudaLandsOnTheMaterialisedAndTheCpuWeights(boolean tied, boolean checkpointing) {
        ModelConfig cfg = ModelConfig.tiny(Family.LLAMA, FusedLmHeadTrainingTest.VOCAB).withTiedEmbeddings(tied);
        Device cuda = new Device("cuda:0"), cpu = new Device("cpu");
        Result fusedCuda = update(cfg, checkpointing, cuda, true);
        assertSame("CUDA: materialised vs fused", update(cfg, checkpointing, cuda, false), fusedCuda);
        assertSame("fused: CPU vs CUDA", update(cfg, checkpointing, cpu, true), fusedCuda);
        double moved = 0;
        for (String k : fusedCuda.initial().keySet()) {
            float[] a = fusedCuda.initial().get(k), b = fusedCuda.weights().get(k);
            for (int i = 0; i < a.length; i++) moved = Math.max(moved, Math.abs(b[i] - a[i]));
        }
        assertTrue(moved > 1e-3, "the update did not move the weights: " + moved);
    }
}

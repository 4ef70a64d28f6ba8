// GpuPeakMemoryCudaTest.java — a real training step on cuda:0 logs, per phase, the CUDA caching
// allocator's peaks of the device (memory/gpu_peak_<phase>_allocated_bytes and _reserved_bytes,
// CudaPeakMemory): each allocated peak at least the model's parameter bytes (the weights are on
// the device through every phase) and each reserved peak at least the allocated one (the
// allocator hands out only what it holds). Tagged "gpu"; skipped with a message where no GPU is
// usable, failed under DRMAS_REQUIRE_GPU=1.
package dev.drmas.train;

import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import dev.drmas.bindings.Backend;
import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.List;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.global.torch;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

@Tag("gpu")
class GpuPeakMemoryCudaTest {
    @TempDir
    Path tmp;

    @BeforeEach
    void needsCuda() {
        boolean torchCuda = torch.cuda_is_available(), drmasCuda = Backend.CUDA.available();
        String why = "no CUDA device (LibTorch sees one: " + torchCuda + ", libdrmas's CUDA backend usable: " + drmasCuda + ")";
        if ("1".equals(System.getenv("DRMAS_REQUIRE_GPU"))) {
            assertTrue(torchCuda && drmasCuda, "DRMAS_REQUIRE_GPU=1 but " + why);
        } else {
            Assumptions.assumeTrue(torchCuda && drmasCuda, why + ": skipping the device memory metrics' CUDA test");
        }
    }

    @Test
    void aCudaStepLogsTheAllocatorsPeaksOfEachPhase() throws Exception {
        var out = new ByteArrayOutputStream();
        var cfg = new TrainerEndToEndTest().config(tmp, "run.device=cuda", "trainer.steps=1", "trainer.save_freq=0",
                "trainer.eval_freq=0", "ppo.fused_lm_head=false");
        long paramBytes = 0;
        try (Trainer t = Trainer.open(cfg, new PrintStream(out, true, StandardCharsets.UTF_8))) {
            var model = t.policiesForTest().get("policy").model();
            assertTrue(model.device().is_cuda(), "the model is on the GPU");
            for (Tensor p : model.parameters().values()) paramBytes += p.numel() * p.element_size();
            t.train();
        }
        String log = out.toString(StandardCharsets.UTF_8);
        assertFalse(log.contains("CUDA allocator"), log);
        List<JsonNode> steps = TrainerEndToEndTest.metrics(tmp.resolve("e2e")).stream().filter(l -> l.has("reward/mean")).toList();
        assertFalse(steps.isEmpty(), "a training step logged");
        for (JsonNode l : steps) {
            for (String p : GpuPeakMemoryTest.PHASES) {
                String a = "memory/gpu_peak_" + p + "_allocated_bytes", r = "memory/gpu_peak_" + p + "_reserved_bytes";
                assertTrue(l.has(a) && l.has(r), p + ": " + a + " and " + r + " in " + l);
                double allocated = l.get(a).asDouble(), reserved = l.get(r).asDouble();
                assertTrue(allocated >= paramBytes, a + " = " + allocated + " < the parameters' " + paramBytes + " bytes");
                assertTrue(reserved >= allocated, r + " = " + reserved + " < " + a + " = " + allocated);
            }
        }
    }
}

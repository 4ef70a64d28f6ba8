// GpuPeakMemoryTest.java — on the CPU a real short training run logs the host peaks per phase
// (memory/peak_<phase>_bytes), its size after each step (memory/resident_bytes, and
// memory/heap_live_bytes under the heap counter) and none of the device's (memory/gpu_peak_*: absent, not 0), and
// nothing of LibTorch's CUDA half is reached: no warning that the CUDA allocator could not be read
// (which is what reaching torch_cuda on the CPU build gives), no torch_cuda library loaded. The
// device's figures on a GPU are GpuPeakMemoryCudaTest's.
package dev.drmas.train;

import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import dev.drmas.metrics.CudaPeakMemory;
import dev.drmas.metrics.PeakMemory;
import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.List;
import org.bytedeco.javacpp.Loader;
import org.bytedeco.pytorch.Device;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class GpuPeakMemoryTest {
    @TempDir
    Path tmp;

    static final List<String> PHASES = List.of("rollout", "reward", "advantage", "update");

    @Test
    void aCpuRunLogsNoDeviceFiguresAndReachesNothingOfCuda() throws Exception {
        var out = new ByteArrayOutputStream();
        var cfg = new TrainerEndToEndTest().config(tmp, "trainer.steps=2", "trainer.save_freq=0", "trainer.eval_freq=0");
        try (Trainer t = Trainer.open(cfg, new PrintStream(out, true, StandardCharsets.UTF_8))) {
            t.train();
        }
        List<JsonNode> steps = TrainerEndToEndTest.metrics(tmp.resolve("e2e")).stream().filter(l -> l.has("reward/mean")).toList();
        assertFalse(steps.isEmpty(), "training steps logged");
        for (JsonNode l : steps) {
            if (PeakMemory.source() != PeakMemory.Source.NONE) {
                for (String p : PHASES) assertTrue(l.has("memory/peak_" + p + "_bytes"), "host peak of " + p + " in " + l);
            }
            // the process's size after the step: at least LibTorch's and the JVM's own libraries
            // (the JVM's heap is not resident in full), at most the machine
            double resident = l.path("memory/resident_bytes").asDouble(-1);
            assertTrue(resident > 64e6 && resident < ((com.sun.management.OperatingSystemMXBean) java.lang.management.ManagementFactory.getOperatingSystemMXBean()).getTotalMemorySize(), "memory/resident_bytes in " + l);
            if (PeakMemory.source() == PeakMemory.Source.HEAP) {
                // malloc's live bytes: the models' weights and the optimiser's moments at least
                assertTrue(l.path("memory/heap_live_bytes").asDouble(-1) > 1e6, "memory/heap_live_bytes in " + l);
            } else {
                assertFalse(l.has("memory/heap_live_bytes"), "a heap count without the counter: " + l);
            }
            l.fieldNames().forEachRemaining(k -> assertFalse(k.startsWith("memory/gpu_"), k + " logged on a CPU run: " + l));
        }
        String log = out.toString(StandardCharsets.UTF_8);
        assertFalse(log.contains("CUDA allocator"), "the CPU run reached the CUDA allocator: " + log);
        for (String lib : Loader.getLoadedLibraries().values()) {
            assertFalse(lib != null && lib.contains("torch_cuda"), "a CPU run loaded " + lib);
        }
    }

    @Test
    void aCpuDeviceHasNoMeterAndNoComplaint() {
        CudaPeakMemory.Opened o = CudaPeakMemory.of(new Device("cpu"));
        assertNull(o.meter());
        assertNull(o.reason(), "the CPU is not a device whose figures are missing");
        assertNull(CudaPeakMemory.of(null).meter());
    }
}

// StepMemoryTest.java — the per-parameter loops after a step's micro-batches (the gradient norm and
// its clipping, AdamW's step) and of the ranks' weight checksum hold one parameter's temporaries at
// a time, as `drmas plan` assumes (MemoryPlan's stepTransient: those of the largest tensor), not a
// copy of the whole model: one PointerScope around a whole loop keeps every iteration's tensors
// until the last. Measured with the exact heap counter the pom preloads, on many equal parameters,
// so that "holds one" and "holds all" differ by far more than the JVM's own native allocations.
package dev.drmas.train;

import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.drmas.testing.HeapCounter;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.function.Supplier;
import org.bytedeco.javacpp.PointerScope;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.global.torch;
import org.bytedeco.pytorch.global.torch.ScalarType;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

class StepMemoryTest {
    /** 160 parameters of 512 × 256: 21 M values, 80 MiB in float32; one of them is 512 KiB. */
    static final int COUNT = 160;
    static final long ROWS = 512, COLS = 256, PARAMS = COUNT * ROWS * COLS, ONE = ROWS * COLS;


    @BeforeAll
    static void exactCounter() {
        HeapCounter.require();
        torch.set_num_threads(1);
    }

    /** COUNT parameters of {@code dtype}, random, each with a random .grad. */
    static Map<String, Tensor> parameters(ScalarType dtype) {
        torch.manual_seed(11);
        Map<String, Tensor> p = new LinkedHashMap<>();
        for (int i = 0; i < COUNT; i++) {
            Tensor t = torch.randn(ROWS, COLS).to(dtype).requires_grad_(true);
            t.mutable_grad().put(torch.randn(ROWS, COLS).to(dtype));
            p.put("layers." + i + ".weight", t);
        }
        return p;
    }

    /** What {@code work} added to the heap at its peak, bytes: the least of three runs (HeapCounter.leastAdded). */
    static long added(Supplier<?> work) {
        return HeapCounter.leastAdded(3, work::get);
    }

    /**
     * {@code added} is at most what a loop that frees each parameter's temporaries before the next
     * may add, {@code bytesPerValue} of temporaries a value: those of a few parameters.
     */
    static void assertFew(long added, long bytesPerValue, String what) {
        long bound = 4 * bytesPerValue * ONE + HeapCounter.JVM_SLACK, whole = bytesPerValue * PARAMS;
        assertTrue(whole > 5 * bound, "the whole model's temporaries (" + whole + " bytes) must dwarf the bound (" + bound + ")");
        assertTrue(added <= bound, what + " added " + added + " bytes to the heap at its peak: more than a few parameters' "
                + "temporaries (" + bound + "); those of every parameter are " + whole);
    }

    @Test
    void theGradientNormHoldsOneParametersFloat64Copy() {
        try (PointerScope scope = new PointerScope()) {
            for (boolean mixed : new boolean[] {false, true}) {
                Map<String, Tensor> p = parameters(mixed ? ScalarType.BFloat16 : ScalarType.Float);
                try (ModelOptimizer o = ModelOptimizer.create(p, PpoUpdaterDistributedTest.OPT, mixed)) {
                    o.afterBackward();  // mixed: the .grad into the fp32 accumulators, which the norm reads
                    o.clipGradNorm(1e-3);  // a first time: the allocator's and the JIT's one-time costs
                    // the norm's float64 copy and its square: 16 bytes a value of every gradient if all are held
                    assertFew(added(() -> o.clipGradNorm(1e-3)), 16, (mixed ? "mixed" : "full") + " precision's gradient norm");
                }
            }
        }
    }

    @Test
    void adamWsStepHoldsOneParametersTemporaries() {
        try (PointerScope scope = new PointerScope()) {
            for (boolean mixed : new boolean[] {false, true}) {
                Map<String, Tensor> p = parameters(mixed ? ScalarType.BFloat16 : ScalarType.Float);
                try (ModelOptimizer o = ModelOptimizer.create(p, PpoUpdaterDistributedTest.OPT, mixed)) {
                    o.afterBackward();
                    o.step();
                    // the denominator sqrt(v)/bc2 + eps is float32 [rows, cols] per parameter
                    assertFew(added(() -> {
                        o.step();
                        return null;
                    }), 4, (mixed ? "mixed" : "full") + " precision's AdamW step");
                }
            }
        }
    }

    @Test
    void theWeightChecksumHoldsOneParametersFloat64Copy() {
        try (PointerScope scope = new PointerScope()) {
            Map<String, Tensor> p = parameters(ScalarType.Float);
            Policies.checksum(p.values());
            // a float64 copy of each weight and its square: 16 bytes a value if all are held
            assertFew(added(() -> Policies.checksum(p.values())), 16, "the ranks' weight checksum");
        }
    }
}

// RandomInitMemoryTest.java — making a model's weights holds no second copy of the model: a random
// bfloat16 model draws each weight in float32 and keeps only its bfloat16 copy (the float32 draws of
// the whole model used to live until the last weight was drawn: on a GPU, a float32 host copy of the
// model), and an uninitialised model (the KL reference's, copied from the policy's weights right
// after) takes its own bytes only. Measured with the exact heap counter the pom preloads.
package dev.drmas.model;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.drmas.testing.HeapCounter;
import java.util.List;
import java.util.Map;
import org.bytedeco.javacpp.PointerScope;
import org.bytedeco.pytorch.Device;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.global.torch;
import org.bytedeco.pytorch.global.torch.ScalarType;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

class RandomInitMemoryTest {
    @BeforeAll
    static void exactCounter() {
        HeapCounter.require();
        torch.set_num_threads(1);
    }

    // 24 layers of 512-wide Qwen3 blocks: 28 M weights (bfloat16 57 MB, their float32 draws 113 MB)
    static final ModelConfig C = new ModelConfig(Family.QWEN3, 512, 512, 24, 4, 2, 64, 1e-6, 1e6, null, 61, false, false, false,
            256, "float32", null, List.of(), Map.of());

    /** C's weights: {count, largest tensor's}. */
    static long[] weights() {
        long params = 0, largest = 0;
        for (long[] sh : CausalLm.parameterShapes(C).values()) {
            long n = java.util.Arrays.stream(sh).reduce(1, (x, y) -> x * y);
            params += n;
            largest = Math.max(largest, n);
        }
        return new long[] {params, largest};
    }

    @Test
    void aRandomBfloat16ModelHoldsOneFloat32DrawAtATime() {
        long params = weights()[0], largest = weights()[1];
        try (PointerScope scope = new PointerScope()) {
            CausalLm.random(C, 1, ScalarType.BFloat16, new Device("cpu")).close();  // one-time costs
            // the least of three, each started once the JIT is quiet (a compilation the call itself
            // starts may still fall within one reading). (Not a lower bound: native memory of earlier
            // objects freed meanwhile, by JavaCPP's deallocator after a GC, lowers a reading: one CI run
            // read 38.0 MB for a model of 56.8 MB of weights.)
            long added = HeapCounter.leastAdded(3, () -> CausalLm.random(C, 1, ScalarType.BFloat16, new Device("cpu")).close());
            long bound = 2 * params + 2 * 4 * largest + HeapCounter.JVM_SLACK;
            assertTrue(4 * params > 2 * (bound - 2 * params), "the float32 draws must dwarf the room left");
            assertTrue(added <= bound, "a random bfloat16 model of " + params + " weights added " + added
                    + " bytes at its peak: more than its own bfloat16 weights and a few float32 draws (" + bound + ")");
        }
    }

    @Test
    void anUninitialisedModelTakesItsOwnBytesAndCopiesExactly() {
        long params = weights()[0];
        try (PointerScope scope = new PointerScope(); CausalLm src = CausalLm.random(C, 5, ScalarType.BFloat16, new Device("cpu"))) {
            CausalLm.uninitialised(C, ScalarType.BFloat16, new Device("cpu")).close();
            long added = HeapCounter.leastAdded(3, () -> CausalLm.uninitialised(C, ScalarType.BFloat16, new Device("cpu")).close());
            assertTrue(added <= 2 * params + HeapCounter.JVM_SLACK, "an uninitialised bfloat16 model added " + added + " bytes");
            try (CausalLm m = CausalLm.uninitialised(C, ScalarType.BFloat16, new Device("cpu"))) {
                assertEquals(src.parameters().keySet(), m.parameters().keySet());
                try (org.bytedeco.pytorch.NoGradGuard ng = new org.bytedeco.pytorch.NoGradGuard()) {
                    src.parameters().forEach((k, t) -> m.parameters().get(k).copy_(t));
                }
                for (Map.Entry<String, Tensor> e : src.parameters().entrySet()) {
                    Tensor got = m.parameters().get(e.getKey());
                    assertEquals(ScalarType.BFloat16, got.scalar_type().intern(), e.getKey());
                    assertTrue(torch.equal(e.getValue(), got), e.getKey() + " differs after the copy");
                }
            }
        }
    }
}

// ResumeMemoryTest.java — an unsharded optimiser's resume (full precision, and bf16 weights with fp32
// masters) reads each tensor of the checkpoint straight into the live state: under the exact heap
// counter the pom preloads it adds a few tensors' bytes, not a copy of every AdamW moment (8 bytes a
// parameter, which on a GPU sat beside the live moments at resume) nor of every master (4), and it
// restores the saved state exactly. The sharded resume's bound is ShardedCheckpointTest's.
package dev.drmas.train;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.ObjectMapper;
import dev.drmas.testing.HeapCounter;
import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.Map;
import org.bytedeco.javacpp.PointerScope;
import org.bytedeco.pytorch.NoGradGuard;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.global.torch;
import org.bytedeco.pytorch.global.torch.ScalarType;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class ResumeMemoryTest {
    @TempDir
    Path dir;

    /** Zeros of ShardedOptimizerTest's shapes in {@code dtype}: a model's weights before the resume restores them. */
    static Map<String, Tensor> weights(ScalarType dtype) {
        Map<String, Tensor> p = new LinkedHashMap<>();
        ShardedOptimizerTest.shapes().forEach((k, s) -> p.put(k, torch.zeros(s).to(dtype)));
        return p;
    }

    @Test
    void anUnshardedResumeReadsOneTensorAtATimeAndRestoresTheStateExactly() throws Exception {
        HeapCounter.require();
        torch.set_num_threads(1);
        ShardedCheckpointTest.State state = ShardedCheckpointTest.State.random();
        long largest = 0;
        for (Tensor t : state.masters().values()) largest = Math.max(largest, 4 * t.numel());
        // a few of the largest tensor's fp32 bytes (the one being read, its conversion) and the JVM's own
        long bound = 4 * largest + HeapCounter.JVM_SLACK, moments = 8 * ShardedOptimizerTest.parameters();
        assertTrue(moments > 4 * bound, "the moments (" + moments + " bytes) must dwarf the bound (" + bound + ")");
        Checkpoints cps = new Checkpoints(dir.resolve("checkpoints"));
        long step = 0;
        for (boolean mixed : new boolean[] {false, true}) {
            ScalarType dtype = mixed ? ScalarType.BFloat16 : ScalarType.Float;
            String what = mixed ? "bf16 weights with fp32 masters" : "full precision";
            step++;
            try (PointerScope scope = new PointerScope(); ModelOptimizer saved = holding(state, dtype, mixed)) {
                cps.write(step, Map.of(), Map.of("policy", saved), new ObjectMapper().createObjectNode(), tmp -> { });
            }
            try (PointerScope scope = new PointerScope()) {
                Map<String, Tensor> w = weights(dtype);
                try (ModelOptimizer o = ModelOptimizer.create(w, ShardedCheckpointTest.OPT, mixed)) {
                    Checkpoints.loadOptimizer(cps.dir(step), "policy", o);
                    assertEquals(ShardedCheckpointTest.STEPS, o.steps(), what);
                    state.moments().forEach((k, t) -> assertTrue(torch.equal(t, o.state().get(k)), what + ": " + k));
                    // (full precision: the weights are the model's, which Checkpoints.loadModel restores)
                    if (mixed) {
                        for (Map.Entry<String, Tensor> e : state.masters().entrySet()) {
                            String k = e.getKey();
                            assertTrue(torch.equal(e.getValue(), o.masterWeights().get(k)), what + ": master " + k);
                            // and the weights: the masters rounded to bf16
                            assertTrue(torch.equal(e.getValue().to(dtype), w.get(k)), what + ": weight " + k);
                        }
                    }
                    // measured after a first resume (it pays the allocator's and the JIT's one-time costs), and the
                    // least of three readings, each started once the JIT is quiet: the JVM's own native allocations
                    // (its compilers' arenas) came within one reading in a fresh-clone CI run (9.36 MB against
                    // 1.5-3.1 MB alone); a copy of every moment (49 MB) stays in every reading
                    Path at = cps.dir(step);
                    long added = HeapCounter.leastAdded(3, () -> Checkpoints.loadOptimizer(at, "policy", o));
                    assertTrue(added <= bound, what + ": the resume added " + added + " bytes to the heap at its peak: more than a "
                            + "few tensors (" + bound + "); every moment is " + moments + " bytes");
                }
            }
        }
    }

    /** An unsharded optimiser of {@code dtype} weights holding {@code state} after STEPS steps (the weights are the masters). */
    private static ModelOptimizer holding(ShardedCheckpointTest.State state, ScalarType dtype, boolean mixed) {
        Map<String, Tensor> w = weights(dtype);
        ModelOptimizer o = ModelOptimizer.create(w, ShardedCheckpointTest.OPT, mixed);
        if (mixed) {
            o.loadMasterWeights(state.masters());
        } else {
            try (NoGradGuard ng = new NoGradGuard()) {
                state.masters().forEach((k, t) -> w.get(k).copy_(t));
            }
        }
        o.load(state.moments(), ShardedCheckpointTest.STEPS);
        return o;
    }
}

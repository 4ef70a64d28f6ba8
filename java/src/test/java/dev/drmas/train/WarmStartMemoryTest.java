// WarmStartMemoryTest.java — the warm start (`drmas sft`) trains with optimisers of its own, and the
// run's optimisers, fresh (nothing stepped: moments zero, masters the weights), are closed meanwhile
// and made again from the warm-started weights: each model's optimiser state is held once, not twice.
// Measured with the exact heap counter the pom preloads, on a model whose optimiser state dwarfs a
// checkpointed demonstration's activations and the JVM's own native allocations; the run's optimiser
// after the warm start is a fresh one, as before.
package dev.drmas.train;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.drmas.config.RunConfig;
import dev.drmas.metrics.PeakMemory;
import dev.drmas.testing.HeapCounter;
import java.nio.file.Path;
import java.util.List;
import org.bytedeco.javacpp.PointerScope;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class WarmStartMemoryTest {
    @TempDir
    Path tmp;


    @BeforeAll
    static void exactCounter() {
        HeapCounter.require();
    }

    @Test
    void theWarmStartHoldsOneOptimiserStateAModel() throws Exception {
        // 16 layers 512 wide: about 25 M float32 weights, whose AdamW moments are 8 bytes a weight
        RunConfig cfg = RunConfig.parse(TrainerEndToEndTest.YAML, List.of("run.output_dir=" + tmp,
                "models.policy.size.hidden=512", "models.policy.size.layers=16", "models.policy.size.heads=4",
                "models.policy.size.kv_heads=2", "models.policy.size.intermediate=512",
                "models.policy.activation_checkpointing=true", "sft.steps=1", "sft.batch_size=1", "sft.lr=1.0e-3", "run.resume=never"));
        try (Trainer t = Trainer.open(cfg, TrainerEndToEndTest.QUIET); PointerScope scope = new PointerScope()) {
            t.sft();  // a first time: the allocator's and the JIT's one-time costs, and the gradients
            long state = t.policiesForTest().get("policy").optim().stateBytes();
            dev.drmas.testing.HeapCounter.awaitQuietJit();
            PeakMemory phase = PeakMemory.start();
            t.sft();
            long added = phase.addedBytes();
            // a second optimiser state beside the run's adds `state` by itself; one checkpointed
            // demonstration's activations (the gradients stay from the first time) far less
            assertTrue(added <= state / 2, "the warm start added " + added + " bytes to the heap at its peak: more than half of"
                    + " an optimiser's state (" + state + "), as if the run's optimiser were kept beside its own");
            // the run's optimiser after it: fresh, as it was (no step, zero moments), for the warm-started weights
            ModelOptimizer o = t.policiesForTest().get("policy").optim();
            assertEquals(0, o.steps());
            assertEquals(state, o.stateBytes());
            for (var e : o.state().entrySet()) assertEquals(0.0, e.getValue().abs().max().item_double(), e.getKey());
        }
    }
}

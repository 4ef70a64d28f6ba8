// PrefillMemoryTest.java — the continuous engine's prefill of an admission holds one bucket's
// forward at a time: each bucket's hidden states go when its keys and values are placed and its
// last logits taken, not when the whole admission ends. Measured with the exact heap counter the
// pom preloads, on a model whose hidden states dwarf its KV cache and its logits (hidden 1024, one
// KV head of 16, a 61-id vocabulary), so that "one bucket's" and "every bucket's" differ by far
// more than the JVM's own native allocations.
package dev.drmas.rollout;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.drmas.model.CausalLm;
import dev.drmas.model.Family;
import dev.drmas.model.ModelConfig;
import dev.drmas.testing.HeapCounter;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.SplittableRandom;
import org.bytedeco.javacpp.PointerScope;
import org.bytedeco.pytorch.global.torch;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

class PrefillMemoryTest {
    static final int VOCAB = 61, HIDDEN = 1024;
    /** Prompt lengths, and how many distinct prompts of each: about 4096 tokens a length. */
    static final int[] LENGTHS = {512, 448, 384, 320, 256, 192, 128, 64}, COUNTS = {8, 9, 11, 13, 16, 21, 32, 64};


    @BeforeAll
    static void exactCounter() {
        HeapCounter.require();
        torch.set_num_threads(1);
    }

    /** Distinct prompts, COUNTS[g] of length LENGTHS[g] for the groups g of {@code groups}: one request each. */
    static List<Request> prompts(int groups) {
        SplittableRandom rng = new SplittableRandom(3);
        List<Request> out = new ArrayList<>();
        for (int g = 0; g < groups; g++) {
            for (int r = 0; r < COUNTS[g]; r++) {
                int[] p = new int[LENGTHS[g]];
                for (int j = 0; j < p.length; j++) p[j] = rng.nextInt(VOCAB);
                out.add(new Request(p, out.size()));
            }
        }
        return out;
    }

    /**
     * The least and the most the call added over five runs, after a first (HeapCounter.addedRange):
     * over three, the admission's least came within ~3.3 MB (1.5%) of its bound while single readings
     * spanned 206-228 MB.
     */
    static long[] added(Generator g, List<Request> reqs, GenerationConfig cfg) {
        g.generate(reqs, cfg);  // a first time: the allocator's and the JIT's one-time costs
        return HeapCounter.addedRange(5, () -> g.generate(reqs, cfg));
    }

    @Test
    void anAdmissionsPrefillHoldsOneBucketsHiddenStates() {
        ModelConfig c = new ModelConfig(Family.QWEN3, HIDDEN, 64, 1, 2, 1, 16, 1e-6, 1e6, null, VOCAB, false, false, false,
                4096, "float32", null, List.of(), Map.of());
        GenerationConfig cfg = new GenerationConfig(SamplingParams.temperature(1.0), 1, Set.of(), List.of(), null, 7, true, 0);
        try (PointerScope scope = new PointerScope(); CausalLm m = CausalLm.random(c, 5)) {
            Generator g = new Generator(m, 0, Generator.Engine.CONTINUOUS);
            List<Request> all = prompts(LENGTHS.length), first = prompts(1);
            // the admission's least reading against one bucket's most: each moves between runs by more than the slack
            long many = added(g, all, cfg)[0];
            assertEquals(LENGTHS.length, g.lastStats().prefills(), "one prefill forward a length: " + g.lastStats());
            long one = added(g, first, cfg)[1];
            assertEquals(1, g.lastStats().prefills());
            // beside the first bucket's forward, the longer call holds only a larger batch cache (and
            // its rows' last logits: 61 floats a row); the other buckets' hidden states were held too
            long cache = (long) (all.size() - first.size()) * (LENGTHS[0] + 1) * ContinuousEngine.slotBytes(m);
            long others = 0;
            for (int i = 1; i < LENGTHS.length; i++) others += (long) COUNTS[i] * LENGTHS[i] * HIDDEN * Float.BYTES;
            long bound = one + cache + HeapCounter.JVM_SLACK;
            assertTrue(others > 5 * (cache + HeapCounter.JVM_SLACK), "the other buckets' hidden states (" + others + " bytes) must dwarf the slack");
            assertTrue(many <= bound, "an admission of " + LENGTHS.length + " prefill buckets added " + many + " bytes at its peak, one"
                    + " bucket's " + one + ": more than that, its larger batch cache (" + cache + ") and " + HeapCounter.JVM_SLACK + " bytes;"
                    + " the other buckets' hidden states are " + others);
        }
    }
}

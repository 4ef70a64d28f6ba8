// CausalAttentionTrainingTest.java — the trainer's forward and backward (TeacherForcing, the native
// clipped loss, the entropy bonus, finishBackward) over a right-padded batch of unequal rows give
// the same log-probs, entropies, loss and gradients with the attention causal and unmasked (what
// CausalLm runs for such a batch) as with the padding mask, with and without activation
// checkpointing (whose recompute makes its own pass), for every family, tied and untied heads.
package dev.drmas.train;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.drmas.model.ModelConfig;
import java.util.List;
import java.util.stream.Stream;
import org.bytedeco.pytorch.global.torch;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

class CausalAttentionTrainingTest {
    /** Rows of 7, 7, 3 and 11 tokens (one response empty): padded on the right by 4, 4, 8 and 0 slots. */
    static final List<int[]> PROMPTS = List.of(new int[] {3, 1, 4}, new int[] {1, 5, 9, 2, 6, 5, 3}, new int[] {5},
            new int[] {8, 9, 7, 9, 3});
    static final List<int[]> RESPONSES = List.of(new int[] {2, 3, 8, 4}, new int[] {}, new int[] {6, 2},
            new int[] {8, 3, 1, 1, 5, 9});

    @BeforeAll
    static void threads() {
        torch.set_num_threads(2);
    }

    static Stream<Arguments> models() {
        return ActivationCheckpointingTest.models();
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource("models")
    void causalAttentionTrainsAsTheMaskedForm(String name, ModelConfig cfg) {
        for (boolean checkpointing : new boolean[] {false, true}) {
            String what = name + (checkpointing ? ", checkpointed" : "");
            ActivationCheckpointingTest.Pass masked = ActivationCheckpointingTest.forwardBackward(cfg, checkpointing, false, PROMPTS, RESPONSES);
            ActivationCheckpointingTest.Pass causal = ActivationCheckpointingTest.forwardBackward(cfg, checkpointing, true, PROMPTS, RESPONSES);
            assertEquals(12, masked.logprobs().length, what + ": response tokens");
            // bit for bit: at every real token LibTorch's CPU attention adds the same products in the
            // same order (a masked key adds exp(−∞) = 0 where causal attention skips it), and the
            // padding positions, which the two forms compute differently, reach neither the loss nor
            // a gradient (their rows of the picked hidden states are never picked)
            assertArrayEquals(masked.logprobs(), causal.logprobs(), what + ": log-probs");
            assertArrayEquals(masked.entropy(), causal.entropy(), what + ": entropy");
            assertArrayEquals(masked.lossSums(), causal.lossSums(), what + ": loss sums");
            for (String k : masked.grads().keySet()) assertArrayEquals(masked.grads().get(k), causal.grads().get(k), what + ": " + k);
            // equal gradients mean something only if they are not all zero
            float[] g = masked.grads().get("model.layers.0.self_attn.k_proj.weight");
            double max = 0;
            for (float v : g) max = Math.max(max, Math.abs(v));
            assertTrue(max > 1e-6, what + ": the first layer's k_proj gradient is ~0 (" + max + "): nothing was compared");
        }
    }
}

// DecodeTransfersTest.java — how many host transfers one decoding step of each rollout engine makes
// on the path a GPU runs (CausalLm's general layers, LibTorch's sampler), counted by Tensors' helpers:
// on a GPU every read into Java waits for the device and every upload is a host-to-device copy. A
// step reads the drawn tokens and their log-probs back once, and uploads its ids, positions and the
// sampler's uniforms once (the attention mask is made on the device from the positions).
// Counted per step as the difference between two runs that differ only in their number of steps.
// The one read gives the bits that two reads gave (tokens exact, log-probs float32 as computed).
package dev.drmas.rollout;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;

import dev.drmas.model.CausalLm;
import dev.drmas.model.Family;
import dev.drmas.model.ModelConfig;
import dev.drmas.model.Tensors;
import java.util.List;
import java.util.Set;
import org.bytedeco.javacpp.PointerScope;
import org.bytedeco.pytorch.Device;
import org.bytedeco.pytorch.Scalar;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.global.torch;
import org.bytedeco.pytorch.global.torch.ScalarType;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

class DecodeTransfersTest {
    @BeforeAll
    static void threads() {
        torch.set_num_threads(2);
    }

    /** Reads into Java and uploads of one generate call. */
    private static long[] transfers(Generator g, List<Request> reqs, SamplingParams sampling, int maxNew) {
        // no stop token: every row runs maxNew tokens, one prefill and maxNew - 1 decoding steps
        GenerationConfig cfg = new GenerationConfig(sampling, maxNew, Set.of(), List.of(), null, 5, true, 0);
        long r0 = Tensors.readBacks(), u0 = Tensors.uploads();
        List<Completion> out = g.generate(reqs, cfg);
        for (Completion c : out) assertEquals(maxNew, c.length());
        return new long[] {Tensors.readBacks() - r0, Tensors.uploads() - u0};
    }

    @ParameterizedTest
    @EnumSource(Generator.Engine.class)
    void aDecodingStepReadsBackOnceAndUploadsItsInputsOnce(Generator.Engine engine) {
        // float64 on the CPU: the decoding step runs CausalLm's general layers, as on a GPU
        CausalLm m = CausalLm.random(ModelConfig.tiny(Family.QWEN3, 61), 91, ScalarType.Double, new Device("cpu"));
        boolean was = Sampler.nativeOn;
        Sampler.nativeOn = false;  // LibTorch's sampler, as for device logits
        try {
            List<Request> reqs = List.of(new Request(new int[] {5, 9, 2, 7}, 0), new Request(new int[] {4, 1}, 1),
                    new Request(new int[] {8, 8, 3}, 2));
            Generator g = new Generator(m, 0, engine);
            for (SamplingParams s : new SamplingParams[] {SamplingParams.GREEDY, new SamplingParams(0.9, 20, 0.95)}) {
                transfers(g, reqs, s, 3);  // once before counting: nothing lazy in the counts
                long[] a = transfers(g, reqs, s, 4), b = transfers(g, reqs, s, 10);
                String what = engine + ", " + (s.greedy() ? "greedy" : "sampling") + ": per decoding step, ";
                assertEquals(1, (b[0] - a[0]) / 6.0, what + "reads into Java (tokens and log-probs in one)");
                // the ids, the positions and (sampling) the uniforms in one
                assertEquals(1, (b[1] - a[1]) / 6.0, what + "uploads");
            }
        } finally {
            Sampler.nativeOn = was;
            m.close();
        }
    }

    @Test
    void theOneReadGivesWhatTwoReadsGave() {
        try (PointerScope scope = new PointerScope()) {
            torch.manual_seed(3);
            Tensor logits = torch.randn(new long[] {6, 61}).mul(new Scalar(4.0));
            logits.select(0, 2).narrow(0, 0, 30).fill_(new Scalar(Double.NEGATIVE_INFINITY));
            double[] u = {0.0, 0.999999, 0.5, 0.25, 0.75, 0.125};
            for (SamplingParams s : new SamplingParams[] {SamplingParams.GREEDY, new SamplingParams(0.7, 0, 1.0),
                    new SamplingParams(1.3, 9, 0.9)}) {
                long r0 = Tensors.readBacks();
                Sampler.Draw d = Sampler.sampleTorch(logits, s, u);
                assertEquals(1, Tensors.readBacks() - r0, s + ": reads into Java");
                // the log-probs as sampleTorch computes them, read on their own
                Tensor tokens = Tensors.upload(d.tokens(), new Device("cpu"), 6, 1);
                Tensor scaled = s.greedy() ? logits : logits.div(new Scalar(s.temperature()));
                float[] want = Tensors.toFloats(scaled.log_softmax(1).gather(1, tokens));
                assertArrayEquals(want, d.logprobs(), s.toString());  // Float.equals: the bits
                // the uniforms given as a tensor (as CausalLm.decode uploads them): the same draw, no copy
                long up = Tensors.uploads();
                Sampler.Draw e = Sampler.sampleTorch(logits, s, u, Tensors.doubles(u, 6, 1));
                assertEquals(0, Tensors.uploads() - up, s + ": uploads with the uniforms given");
                assertArrayEquals(d.tokens(), e.tokens(), s.toString());
                assertArrayEquals(d.logprobs(), e.logprobs(), s.toString());
                if (s.greedy()) assertArrayEquals(Tensors.toLongs(logits.argmax(new org.bytedeco.pytorch.LongOptional(1), true)), d.tokens());
            }
        }
    }
}

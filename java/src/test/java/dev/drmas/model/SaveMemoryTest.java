// SaveMemoryTest.java — CausalLm.save converts and writes the weights one tensor at a time: a model
// saved in another dtype than its own (a float32 model's bfloat16 checkpoint) holds one tensor's
// converted copy, not a copy of the whole model, and the files are those SafeTensorsWriter writes
// from the whole converted model, byte for byte. Measured with the exact heap counter the pom
// preloads, on many equal weights, so that "one tensor's" and "the model's" differ by far more than
// the JVM's own native allocations.
package dev.drmas.model;

import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.drmas.testing.HeapCounter;
import java.io.IOException;
import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.bytedeco.javacpp.PointerScope;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.global.torch;
import org.bytedeco.pytorch.global.torch.ScalarType;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class SaveMemoryTest {
    @TempDir
    Path dir;

    /** Shards of at most this many bytes: several files, as a large model's. */
    static final long SHARD_BYTES = 8L << 20;

    @BeforeAll
    static void exactCounter() {
        HeapCounter.require();
        torch.set_num_threads(1);
    }

    @Test
    void aBfloat16SaveOfAFloat32ModelHoldsOneTensorsCopy() throws IOException {
        // 24 layers of 512-wide Qwen3 blocks: 28 M weights, whose bfloat16 copy is 57 MB; the largest weight's is 0.5 MB
        ModelConfig c = new ModelConfig(Family.QWEN3, 512, 512, 24, 4, 2, 64, 1e-6, 1e6, null, 61, false, false, false,
                256, "float32", null, List.of(), Map.of());
        try (PointerScope scope = new PointerScope(); CausalLm m = CausalLm.random(c, 3)) {
            long params = 0, largest = 0;
            for (Tensor t : m.parameters().values()) {
                params += t.numel();
                largest = Math.max(largest, t.numel());
            }
            m.save(dir.resolve("first"), ScalarType.BFloat16, SHARD_BYTES);  // the allocator's and the JIT's one-time costs
            // the least of three saves (the last one into bf16/, which the files are checked in below), each
            // started once the JIT is quiet: a compilation the save itself starts may still fall within one
            int[] saves = {0};
            long added = HeapCounter.leastAdded(3, () -> {
                try {
                    m.save(dir.resolve(++saves[0] == 3 ? "bf16" : "again" + saves[0]), ScalarType.BFloat16, SHARD_BYTES);
                } catch (IOException e) {
                    throw new java.io.UncheckedIOException(e);
                }
            });
            long bound = 4 * 2 * largest + HeapCounter.JVM_SLACK, whole = 2 * params;
            assertTrue(whole > 5 * bound, "the model's bfloat16 copy (" + whole + " bytes) must dwarf the bound (" + bound + ")");
            assertTrue(added <= bound, "a bfloat16 save of a float32 model added " + added + " bytes to the heap at its peak: more than"
                    + " a few tensors' copies (" + bound + "); the whole model's is " + whole);

            // the same files as SafeTensorsWriter's from the whole converted model
            Map<String, Tensor> converted = new LinkedHashMap<>();
            m.parameters().forEach((k, t) -> converted.put(k, t.detach().to(ScalarType.BFloat16)));
            Path reference = dir.resolve("reference");
            SafeTensorsWriter.writeCheckpoint(reference, converted, SHARD_BYTES);
            c.withTorchDtype("bfloat16").write(reference.resolve("config.json"));
            assertTrue(CheckpointTest.files(reference).size() > 3, "several shards: " + CheckpointTest.files(reference));
            CheckpointTest.assertSameFiles(reference, dir.resolve("bf16"));
        }
    }
}

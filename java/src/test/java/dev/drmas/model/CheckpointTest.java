// CheckpointTest.java — tiny checkpoints of each family in HF layout (config.json plus
// model.safetensors, or shards with model.safetensors.index.json): they load, compute what the
// model that wrote them computes, and save back byte for byte; BF16/F16 checkpoints hold the
// rounded weights; a checkpoint that does not fit its config is refused with every misfit named.
package dev.drmas.model;

import dev.drmas.testing.TorchScope;

import static dev.drmas.algo.TorchReference.bools;
import static dev.drmas.algo.TorchReference.floats;
import static dev.drmas.algo.TorchReference.longs;
import static dev.drmas.algo.TorchReference.toFloats;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.stream.Stream;
import org.bytedeco.pytorch.Device;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.global.torch;
import org.bytedeco.pytorch.global.torch.ScalarType;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

@ExtendWith(TorchScope.class)
class CheckpointTest {
    static final int VOCAB = 97;
    /** Small enough that the tiny models need several shards and the embedding one of its own. */
    static final long SHARD_BYTES = 20_000;

    @TempDir
    Path dir;


    static List<String> files(Path d) throws IOException {
        try (Stream<Path> s = Files.list(d)) {
            return s.map(p -> p.getFileName().toString()).sorted().toList();
        }
    }

    static void assertSameFiles(Path expected, Path actual) throws IOException {
        assertEquals(files(expected), files(actual));
        for (String f : files(expected)) {
            assertArrayEquals(Files.readAllBytes(expected.resolve(f)), Files.readAllBytes(actual.resolve(f)), f + " differs");
        }
    }

    static float[] logits(CausalLm m) {
        Tensor mask = bools(false, true, true, true, true, true, true, true).view(2, 4);
        Tensor ids = longs(0, 5, 17, 3, 9, 2, 96, 40).view(2, 4);
        return toFloats(m.forward(ids, CausalLm.positionIds(mask), mask, null));
    }

    @ParameterizedTest
    @EnumSource(Family.class)
    void singleFileAndShardedCheckpointsLoadAndSaveBackByteForByte(Family family) throws IOException {
        ModelConfig c = ModelConfig.tiny(family, VOCAB);
        try (CausalLm m = CausalLm.random(c, 21)) {
            Path single = dir.resolve("single"), sharded = dir.resolve("sharded");
            m.save(single);
            m.save(sharded, ScalarType.Float, SHARD_BYTES);
            assertEquals(List.of("config.json", "model.safetensors"), files(single));

            // the sharded layout: save_pretrained's names, shards filled in parameter order, an index
            List<String> shardFiles = files(sharded).stream().filter(f -> f.startsWith("model-")).toList();
            int n = shardFiles.size();
            assertTrue(n >= 3, "expected several shards, got " + shardFiles);
            for (int i = 0; i < n; i++) assertEquals(String.format("model-%05d-of-%05d.safetensors", i + 1, n), shardFiles.get(i));
            JsonNode index = ModelConfig.JSON.readTree(sharded.resolve("model.safetensors.index.json").toFile());
            // save_pretrained's rule: a tensor above the limit gets a shard of its own; the others
            // fill shards greedily in parameter order, a shard closing when the next one does not fit
            List<String> smallOrder = new ArrayList<>();
            long total = 0, previousFill = -1;
            for (String f : shardFiles) {
                try (SafeTensors st = SafeTensors.open(sharded.resolve(f))) {
                    long bytes = 0;
                    for (SafeTensors.Info i : st.tensors().values()) {
                        bytes += i.bytes();
                        assertEquals(f, index.get("weight_map").get(i.name()).asText(), i.name());
                    }
                    total += bytes;
                    if (bytes > SHARD_BYTES) {
                        assertEquals(1, st.tensors().size(), f + " holds " + bytes + " bytes in several tensors");
                        continue;
                    }
                    List<String> names = m.parameters().keySet().stream().filter(st.tensors()::containsKey).toList();
                    if (previousFill >= 0) {
                        long next = st.info(names.getFirst()).bytes();
                        assertTrue(previousFill + next > SHARD_BYTES, f + " was started while " + names.getFirst() + " fit the last shard");
                    }
                    previousFill = bytes;
                    smallOrder.addAll(names);
                }
            }
            assertEquals(m.parameters().entrySet().stream()
                    .filter(e -> e.getValue().numel() * 4 <= SHARD_BYTES).map(Map.Entry::getKey).toList(), smallOrder);
            assertEquals(total, index.get("metadata").get("total_size").longValue());
            long parameters = m.parameters().values().stream().mapToLong(Tensor::numel).sum();
            assertEquals(parameters, index.get("metadata").get("total_parameters").longValue());
            assertEquals(m.parameters().size(), index.get("weight_map").size());

            float[] expected = logits(m);
            for (Path src : List.of(single, sharded)) {
                try (CausalLm loaded = CausalLm.load(src)) {
                    assertEquals(c.withTorchDtype("float32"), loaded.config());
                    for (Map.Entry<String, Tensor> e : m.parameters().entrySet()) {
                        assertTrue(torch.equal(e.getValue(), loaded.parameters().get(e.getKey())), e.getKey());
                    }
                    assertArrayEquals(expected, logits(loaded));
                    Path again = dir.resolve(src.getFileName() + "-again");
                    loaded.save(again, ScalarType.Float, src == single ? CausalLm.DEFAULT_SHARD_BYTES : SHARD_BYTES);
                    assertSameFiles(src, again);
                }
            }
        }
    }

    @Test
    void halfPrecisionCheckpointsHoldTheRoundedWeights() throws IOException {
        ModelConfig c = ModelConfig.tiny(Family.QWEN3, VOCAB);
        try (CausalLm m = CausalLm.random(c, 4)) {
            for (ScalarType t : List.of(ScalarType.BFloat16, ScalarType.Half)) {
                Path d = dir.resolve(t.toString());
                m.save(d, t, SHARD_BYTES);
                assertEquals(t == ScalarType.Half ? "float16" : "bfloat16", ModelConfig.read(d.resolve("config.json")).torchDtype());
                try (CausalLm loaded = CausalLm.load(d)) {
                    assertEquals(ScalarType.Float, loaded.dtype());
                    for (Map.Entry<String, Tensor> e : m.parameters().entrySet()) {
                        float[] w = toFloats(e.getValue());
                        float[] rounded = new float[w.length];
                        for (int i = 0; i < w.length; i++) {
                            rounded[i] = t == ScalarType.Half ? Float.float16ToFloat(Float.floatToFloat16(w[i]))
                                    : SafeTensorsTest.fromBf16(SafeTensorsTest.bf16(w[i]));
                        }
                        assertArrayEquals(rounded, toFloats(loaded.parameters().get(e.getKey())), e.getKey());
                    }
                    // float32 in memory, the same half-precision files on disk
                    Path again = dir.resolve(t + "-again");
                    loaded.save(again, t, SHARD_BYTES);
                    assertSameFiles(d, again);
                }
            }
        }
    }

    @Test
    void loadsIntoAnotherDtype() throws IOException {
        try (CausalLm m = CausalLm.random(ModelConfig.tiny(Family.LLAMA, VOCAB), 5)) {
            m.save(dir);
            try (CausalLm b = CausalLm.load(dir, ScalarType.BFloat16, new Device("cpu"))) {
                Tensor w = b.parameters().get("model.layers.0.mlp.up_proj.weight");
                assertEquals(ScalarType.BFloat16, w.scalar_type().intern());
                float[] orig = toFloats(m.parameters().get("model.layers.0.mlp.up_proj.weight"));
                float[] got = toFloats(w);
                for (int i = 0; i < orig.length; i++) {
                    assertEquals(SafeTensorsTest.fromBf16(SafeTensorsTest.bf16(orig[i])), got[i]);
                }
            }
        }
    }

    /** The weights of a saved tiny Qwen2 model, to be altered and written back. */
    private Map<String, Tensor> savedWeights(Path d) throws IOException {
        try (CausalLm m = CausalLm.random(ModelConfig.tiny(Family.QWEN2, VOCAB), 6)) {
            m.save(d);
        }
        Map<String, Tensor> w = new LinkedHashMap<>();
        try (SafeTensors st = SafeTensors.open(d)) {
            for (String name : st.tensors().keySet()) w.put(name, st.get(name, ScalarType.Float, new Device("cpu")));
        }
        return w;
    }

    private ModelFileException loadFails(Path d, Map<String, Tensor> weights) throws IOException {
        SafeTensorsWriter.write(d.resolve("model.safetensors"), weights);
        return assertThrows(ModelFileException.class, () -> CausalLm.load(d).close());
    }

    @Test
    void missingTensor() throws IOException {
        Map<String, Tensor> w = savedWeights(dir);
        w.remove("model.layers.1.self_attn.k_proj.bias");
        ModelFileException e = loadFails(dir, w);
        assertTrue(e.getMessage().startsWith(dir + ": the weights do not fit config.json (Qwen2ForCausalLM, 2 layers"), e.getMessage());
        assertTrue(e.getMessage().contains("missing tensors (1): model.layers.1.self_attn.k_proj.bias"), e.getMessage());
    }

    @Test
    void unexpectedTensor() throws IOException {
        Map<String, Tensor> w = savedWeights(dir);
        w.put("model.layers.2.mlp.up_proj.weight", floats(1f, 2f));
        ModelFileException e = loadFails(dir, w);
        assertTrue(e.getMessage().contains("unexpected tensors (1): model.layers.2.mlp.up_proj.weight (in model.safetensors)"),
                e.getMessage());
        // what HF ignores too: the LM head of a tied model, old rotary buffers
        w.remove("model.layers.2.mlp.up_proj.weight");
        w.put("lm_head.weight", w.get("model.embed_tokens.weight"));
        w.put("model.layers.0.self_attn.rotary_emb.inv_freq", floats(1f, 0.1f));
        SafeTensorsWriter.write(dir.resolve("model.safetensors"), w);
        CausalLm.load(dir).close();
    }

    @Test
    void shapeMismatch() throws IOException {
        Map<String, Tensor> w = savedWeights(dir);
        w.put("model.norm.weight", floats(new float[32]));
        ModelFileException e = loadFails(dir, w);
        assertTrue(e.getMessage().contains("shape mismatches (1): model.norm.weight is [32] in model.safetensors, "
                + "config.json expects [64]"), e.getMessage());
    }

    @Test
    void everyMisfitIsReportedAtOnce() throws IOException {
        Map<String, Tensor> w = savedWeights(dir);
        w.remove("model.embed_tokens.weight");
        w.put("extra", floats(1f));
        w.put("model.norm.weight", floats(new float[3]));
        String m = loadFails(dir, w).getMessage();
        for (String part : List.of("missing tensors (1): model.embed_tokens.weight", "unexpected tensors (1): extra",
                "shape mismatches (1): model.norm.weight is [3]")) {
            assertTrue(m.contains(part), m);
        }
    }

    @Test
    void configWithoutWeightsOrWeightsWithoutConfig() throws IOException {
        ModelConfig.tiny(Family.LLAMA, VOCAB).write(dir.resolve("config.json"));
        ModelFileException e = assertThrows(ModelFileException.class, () -> CausalLm.load(dir).close());
        assertTrue(e.getMessage().contains("no model.safetensors or model.safetensors.index.json"), e.getMessage());
        Files.delete(dir.resolve("config.json"));
        e = assertThrows(ModelFileException.class, () -> CausalLm.load(dir).close());
        assertEquals(dir.resolve("config.json") + ": no such file", e.getMessage());
    }

    @Test
    void savingReplacesAnEarlierSave() throws IOException {
        try (CausalLm m = CausalLm.random(ModelConfig.tiny(Family.QWEN2, VOCAB), 7)) {
            m.save(dir, ScalarType.Float, SHARD_BYTES);
            m.save(dir);
            assertEquals(List.of("config.json", "model.safetensors"), files(dir));
        }
    }

    // ================================================================== checks found untested (PIT review)

    /** The twelve tensors of layer 1 of the tiny Qwen2, in HF's state-dict order. */
    static final List<String> QWEN2_LAYER1 = Stream.of("self_attn.q_proj.weight", "self_attn.q_proj.bias", "self_attn.k_proj.weight",
            "self_attn.k_proj.bias", "self_attn.v_proj.weight", "self_attn.v_proj.bias", "self_attn.o_proj.weight",
            "mlp.gate_proj.weight", "mlp.up_proj.weight", "mlp.down_proj.weight", "input_layernorm.weight",
            "post_attention_layernorm.weight").map(n -> "model.layers.1." + n).toList();

    @Test
    void aLongListOfMisfitsNamesTheFirstTen() throws IOException {
        String fit = dir + ": the weights do not fit config.json (Qwen2ForCausalLM, 2 layers, hidden_size 64, vocab_size 97)";
        Map<String, Tensor> w = savedWeights(dir);
        for (String n : QWEN2_LAYER1) w.remove(n);
        assertEquals(fit + "; missing tensors (12): " + String.join(", ", QWEN2_LAYER1.subList(0, 10)) + ", ...",
                loadFails(dir, w).getMessage());
        w.put(QWEN2_LAYER1.get(10), floats(new float[64]));
        w.put(QWEN2_LAYER1.get(11), floats(new float[64]));
        assertEquals(fit + "; missing tensors (10): " + String.join(", ", QWEN2_LAYER1.subList(0, 10)),
                loadFails(dir, w).getMessage());
    }

    @Test
    void nonFiniteWeightsAreNamedWithTheirCounts() throws IOException {
        Map<String, Tensor> w = savedWeights(dir);
        float[] norm = new float[64];
        java.util.Arrays.fill(norm, 1f);
        norm[3] = Float.NaN;
        norm[60] = Float.POSITIVE_INFINITY;
        w.put("model.norm.weight", floats(norm));
        float[] embed = toFloats(w.get("model.embed_tokens.weight"));
        embed[100] = Float.NEGATIVE_INFINITY;
        w.put("model.embed_tokens.weight", floats(embed).view(VOCAB, 64));
        assertEquals(dir + ": weights that are NaN or infinite; tensors (2): model.embed_tokens.weight (1 of 6208 values, in "
                + "model.safetensors), model.norm.weight (2 of 64 values, in model.safetensors)", loadFails(dir, w).getMessage());
    }

    @Test
    void checkpointsAreOfTheThreeFloatTypesOnly() throws IOException {
        try (CausalLm m = CausalLm.random(ModelConfig.tiny(Family.QWEN2, VOCAB), 7)) {
            Path d = dir.resolve("double");
            IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> m.save(d, ScalarType.Double, SHARD_BYTES));
            assertEquals("checkpoints are float32, bfloat16 or float16, not Double", e.getMessage());
            assertTrue(Files.notExists(d));
        }
    }

    @Test
    void aShardedSaveReplacesASingleFile() throws IOException {
        // the other way round from savingReplacesAnEarlierSave: a model.safetensors left beside the
        // new index would be what a load reads (it wins, as in transformers)
        try (CausalLm m = CausalLm.random(ModelConfig.tiny(Family.QWEN2, VOCAB), 7)) {
            m.save(dir);
            m.save(dir, ScalarType.Float, SHARD_BYTES);
            List<String> f = files(dir);
            assertTrue(f.contains("model.safetensors.index.json") && !f.contains("model.safetensors"), f.toString());
        }
    }
}

// HfLoadsDrmasCheckpointsTest.java — the direction HfReferenceTest does not cover: folders drmas saves
// (its config.json, its safetensors, single and sharded with its index) opened by HF transformers itself
// (load_drmas.py, run with the Python of DRMAS_HF_PYTHON), for every family, tied and untied embeddings,
// the biases of each family, float32, bfloat16 and float16 files, and transformers' own fixtures changed and saved
// back by drmas (their config.json rewritten by drmas): transformers must load each as the class and
// dtype config.json names, with no missing, unexpected or mismatched key and no warning, and compute the
// logits drmas computes. Tagged "hf"; skipped where DRMAS_HF_PYTHON is unset.
package dev.drmas.model;

import static org.junit.jupiter.api.Assertions.assertAll;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.drmas.testing.HfPython;
import dev.drmas.testing.TorchScope;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.bytedeco.javacpp.PointerScope;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.global.torch.ScalarType;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.junit.jupiter.api.function.Executable;
import org.junit.jupiter.api.io.TempDir;

@Tag("hf")
@ExtendWith(TorchScope.class)
class HfLoadsDrmasCheckpointsTest {
    /** An awkward vocabulary (prime), so that a transposed or misnamed [V, H] tensor cannot pass for another. */
    static final int VOCAB = 61;
    /** Shards of ~24 KB: every tiny model below is split into several files plus the index. */
    static final long SMALL_SHARDS = 24_000;
    /**
     * float32 on both sides over the same bf16-representable weights; the two differ only in the order of
     * their sums (drmas's fused attention arrangement against transformers' eager attention).
     */
    static final double ATOL = 1e-4, RTOL = 1e-4;

    /** Three rows of 9: two left-padded (as generation batches prompts), one full. */
    static final long[][] IDS = {{0, 0, 0, 5, 17, 3, 9, 2, 60}, {26, 30, 1, 7, 8, 9, 10, 59, 4}, {0, 0, 0, 0, 0, 0, 14, 15, 33}};
    static final long[][] MASK = {{0, 0, 0, 1, 1, 1, 1, 1, 1}, {1, 1, 1, 1, 1, 1, 1, 1, 1}, {0, 0, 0, 0, 0, 0, 1, 1, 1}};

    @TempDir
    Path dir;

    /**
     * One folder: a model of {@code config}'s shape with drmas's random weights, or, with {@code from} set,
     * the HF fixture {@code from} loaded (its transformers-written config.json: rope_parameters, "dtype"),
     * its weights changed by drmas, and saved back; then saved as {@code fileDtype} in {@code shardBytes}.
     */
    record Variant(String name, ModelConfig config, Path from, ScalarType fileDtype, long shardBytes) {
        CausalLm model(long seed) {
            return from == null ? CausalLm.random(config, seed) : CausalLm.load(from);
        }
    }

    static List<Variant> variants() throws Exception {
        List<Variant> v = new ArrayList<>();
        Map<String, ModelConfig> shapes = new LinkedHashMap<>();
        for (Family f : Family.values()) {
            for (boolean tied : new boolean[] {false, true}) {
                shapes.put(f.modelType() + (tied ? "_tied" : "_untied"), ModelConfig.tiny(f, VOCAB).withTiedEmbeddings(tied));
            }
        }
        // the biases a family can have beyond Qwen2's q/k/v ones: attention_bias (q/k/v/o) on Qwen3 and
        // Llama, mlp_bias on Llama
        ModelConfig q3 = ModelConfig.tiny(Family.QWEN3, VOCAB), ll = ModelConfig.tiny(Family.LLAMA, VOCAB);
        shapes.put("qwen3_attention_bias", new ModelConfig(q3.family(), q3.hiddenSize(), q3.intermediateSize(), q3.numLayers(),
                q3.numHeads(), q3.numKvHeads(), q3.headDim(), q3.rmsNormEps(), q3.ropeTheta(), q3.ropeScaling(), VOCAB, false,
                true, false, q3.maxPositionEmbeddings(), q3.torchDtype(), null, List.of(), Map.of()));
        shapes.put("llama_all_biases", new ModelConfig(ll.family(), ll.hiddenSize(), ll.intermediateSize(), ll.numLayers(),
                ll.numHeads(), ll.numKvHeads(), ll.headDim(), ll.rmsNormEps(), ll.ropeTheta(), RopeScaling.linear(4), VOCAB, true,
                true, true, ll.maxPositionEmbeddings(), ll.torchDtype(), 1, List.of(2), Map.of()));
        shapes.forEach((name, c) -> {
            for (ScalarType d : new ScalarType[] {ScalarType.Float, ScalarType.BFloat16, ScalarType.Half}) {
                for (long shard : new long[] {CausalLm.DEFAULT_SHARD_BYTES, SMALL_SHARDS}) {
                    if (d == ScalarType.Half && shard == SMALL_SHARDS) continue;  // (float16 files: the layout is bfloat16's)
                    String n = name + "_" + suffix(d) + (shard == SMALL_SHARDS ? "_sharded" : "");
                    v.add(new Variant(n, c, null, d, shard));
                }
            }
        });
        // transformers' own folders, changed and saved back by drmas (its config.json as drmas writes it back)
        for (String f : new String[] {"qwen2", "qwen3", "llama", "llama_tied_bias"}) {
            Path from = HfReferenceTest.fixture(f);
            ModelConfig c = ModelConfig.read(from.resolve("config.json"));
            v.add(new Variant("hf_" + f + "_resaved_f32", c, from, ScalarType.Float, CausalLm.DEFAULT_SHARD_BYTES));
            v.add(new Variant("hf_" + f + "_resaved_bf16_sharded", c, from, ScalarType.BFloat16, SMALL_SHARDS / 4));
        }
        return v;
    }

    static String suffix(ScalarType d) {
        return d == ScalarType.Float ? "f32" : d == ScalarType.Half ? "f16" : "bf16";
    }

    /** Weights of drmas's own drawing, rounded to bfloat16 values (HfPython.perturb): a bf16 file holds exactly the float32 model. */
    static void perturb(CausalLm m, long seed) {
        HfPython.perturb(m, seed, true);
    }

    @Test
    void transformersLoadsEveryFolderDrmasSavesAndComputesItsLogits() throws Exception {
        HfPython python = HfPython.require();
        List<Variant> variants = variants();
        List<HfPython.Case> cases = new ArrayList<>();
        Map<String, float[]> expected = new LinkedHashMap<>();
        long seed = 1;
        for (Variant v : variants) {
            Path folder = dir.resolve(v.name());
            long[][] ids = ids(v.config().vocabSize());
            try (CausalLm m = v.model(seed); PointerScope scope = new PointerScope()) {
                perturb(m, seed++);
                m.save(folder, v.fileDtype(), v.shardBytes());
                Tensor mask = Tensors.longs(flat(MASK), MASK.length, MASK[0].length);
                expected.put(v.name(), Tensors.toFloats(m.forward(Tensors.longs(flat(ids), ids.length, ids[0].length),
                        CausalLm.positionIds(mask), mask, null)));
            }
            boolean sharded = Files.exists(folder.resolve(SafeTensors.INDEX_FILE));
            assertTrue(sharded == (v.shardBytes() != CausalLm.DEFAULT_SHARD_BYTES), v.name() + ": sharded as asked");
            cases.add(new HfPython.Case(v.name(), folder, ids, MASK, List.of()));
        }
        HfPython.Result hf = python.load(cases, dir.resolve("hf"));
        List<Executable> checks = new ArrayList<>();
        double[] worst = {0};
        for (Variant v : variants) {
            checks.add(() -> {
                hf.assertLoadedCleanly(v.name(), v.config().family().architecture(), CausalLm.dtypeName(v.fileDtype()), v.config().tieWordEmbeddings());
                worst[0] = Math.max(worst[0], hf.assertLogits(v.name(), expected.get(v.name()), v.config().vocabSize(), ATOL, RTOL));
            });
        }
        assertAll("transformers on drmas's folders (" + hf.versions() + ")", checks);
        System.out.printf("HfLoadsDrmasCheckpointsTest: %d folders, %s, largest |logit difference| %.3g%n", variants.size(),
                hf.versions(), worst[0]);
    }

    /** IDS within a vocabulary of {@code vocab} (the HF fixtures have 31 ids). */
    static long[][] ids(int vocab) {
        long[][] out = new long[IDS.length][];
        for (int i = 0; i < IDS.length; i++) out[i] = java.util.Arrays.stream(IDS[i]).map(x -> x % vocab).toArray();
        return out;
    }

    static long[] flat(long[][] a) {
        long[] out = new long[a.length * a[0].length];
        for (int i = 0; i < a.length; i++) System.arraycopy(a[i], 0, out, i * a[0].length, a[0].length);
        return out;
    }
}

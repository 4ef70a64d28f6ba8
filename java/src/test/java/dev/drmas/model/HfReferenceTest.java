// HfReferenceTest.java — checkpoints written by HF transformers itself (5.18, by
// src/test/resources/dev/drmas/model/hf/make_fixtures.py: its config.json with rope_parameters and
// "dtype", its bf16 safetensors, its name-ordered shards) load in drmas and give HF's own logits;
// drmas saves the single-file ones back byte for byte.
package dev.drmas.model;

import dev.drmas.testing.TorchScope;

import static dev.drmas.algo.TorchReference.toFloats;
import static dev.drmas.algo.TorchReference.toLongs;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;

import dev.drmas.algo.Tolerance;
import java.io.IOException;
import java.net.URISyntaxException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import org.bytedeco.pytorch.Device;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.global.torch;
import org.bytedeco.pytorch.global.torch.ScalarType;
import org.junit.jupiter.api.extension.ExtendWith;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

@ExtendWith(TorchScope.class)
class HfReferenceTest {
    @TempDir
    Path dir;


    static Path fixture(String name) throws URISyntaxException {
        return Path.of(HfReferenceTest.class.getResource("hf/" + name).toURI());
    }

    @ParameterizedTest
    @ValueSource(strings = {"qwen2", "qwen3", "llama", "llama_tied_bias"})
    void hfCheckpointsGiveHfLogits(String name) throws Exception {
        Path d = fixture(name);
        Device cpu = new Device("cpu");
        try (CausalLm m = CausalLm.load(d); SafeTensors ref = SafeTensors.open(d.resolve("reference.safetensors"))) {
            assertEquals(name.startsWith("llama") ? Family.LLAMA : name.equals("qwen2") ? Family.QWEN2 : Family.QWEN3,
                    m.config().family());
            Tensor ids = ref.get("ids", ScalarType.Long, cpu), mask = ref.get("mask", ScalarType.Bool, cpu);
            Tensor pos = ref.get("pos", ScalarType.Long, cpu);
            assertArrayEquals(toLongs(pos), toLongs(CausalLm.positionIds(mask)));
            float[] logits = toFloats(m.forward(ids, pos, mask, null));
            float[] expected = toFloats(ref.get("logits", ScalarType.Float, cpu));
            // padding queries are not compared: HF's eager attention gives them uniform weights
            boolean[] valid = dev.drmas.algo.TorchReference.toBooleans(mask);
            int vocab = m.config().vocabSize();
            List<Integer> keep = new ArrayList<>();
            for (int s = 0; s < valid.length; s++) if (valid[s]) for (int v = 0; v < vocab; v++) keep.add(s * vocab + v);
            float[] a = new float[keep.size()], e = new float[keep.size()];
            for (int i = 0; i < a.length; i++) {
                a[i] = logits[keep.get(i)];
                e[i] = expected[keep.get(i)];
            }
            Tolerance.assertClose(name + " logits vs transformers", a, e, 1e-4, 1e-4);

            if (Files.exists(d.resolve("model.safetensors"))) {
                m.save(dir, ScalarType.BFloat16, CausalLm.DEFAULT_SHARD_BYTES);
                assertArrayEquals(Files.readAllBytes(d.resolve("model.safetensors")),
                        Files.readAllBytes(dir.resolve("model.safetensors")), "resaved " + name);
            }
        }
    }

    @ParameterizedTest
    @ValueSource(strings = {"qwen2", "llama"})
    void hfConfigsReadAsWritten(String name) throws URISyntaxException, IOException {
        ModelConfig c = ModelConfig.read(fixture(name).resolve("config.json"));
        assertEquals("bfloat16", c.torchDtype()); // transformers 5 writes "dtype"
        if (name.equals("llama")) assertEquals(RopeScaling.llama3(8, 1, 4, 64), c.ropeScaling()); // from rope_parameters
        else assertEquals(1e6, c.ropeTheta());
        // what drmas writes back reads as the same configuration
        c.write(dir.resolve("config.json"));
        assertEquals(c, ModelConfig.read(dir.resolve("config.json")));
    }
}

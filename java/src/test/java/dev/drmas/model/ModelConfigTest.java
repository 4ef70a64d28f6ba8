// ModelConfigTest.java — config.json as the three families publish it (Qwen2.5-0.5B, Qwen3-0.6B and
// Llama-3.2-1B configs, written out here), the transformers v5 rope_parameters form, the write/read
// round trip, and the errors for bad values, each naming the file and the key path.
package dev.drmas.model;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

class ModelConfigTest {
    @TempDir
    Path dir;

    static final String QWEN25_05B = """
            {
              "architectures": ["Qwen2ForCausalLM"],
              "attention_dropout": 0.0,
              "bos_token_id": 151643,
              "eos_token_id": 151643,
              "hidden_act": "silu",
              "hidden_size": 896,
              "initializer_range": 0.02,
              "intermediate_size": 4864,
              "max_position_embeddings": 32768,
              "max_window_layers": 24,
              "model_type": "qwen2",
              "num_attention_heads": 14,
              "num_hidden_layers": 24,
              "num_key_value_heads": 2,
              "rms_norm_eps": 1e-06,
              "rope_theta": 1000000.0,
              "sliding_window": 32768,
              "tie_word_embeddings": true,
              "torch_dtype": "bfloat16",
              "transformers_version": "4.40.1",
              "use_cache": true,
              "use_sliding_window": false,
              "vocab_size": 151936
            }
            """;

    static final String QWEN3_06B = """
            {
              "architectures": ["Qwen3ForCausalLM"],
              "attention_bias": false,
              "bos_token_id": 151643,
              "eos_token_id": 151645,
              "head_dim": 128,
              "hidden_act": "silu",
              "hidden_size": 1024,
              "intermediate_size": 3072,
              "max_position_embeddings": 40960,
              "model_type": "qwen3",
              "num_attention_heads": 16,
              "num_hidden_layers": 28,
              "num_key_value_heads": 8,
              "rms_norm_eps": 1e-06,
              "rope_scaling": null,
              "rope_theta": 1000000,
              "tie_word_embeddings": true,
              "torch_dtype": "bfloat16",
              "vocab_size": 151936
            }
            """;

    static final String LLAMA32_1B = """
            {
              "architectures": ["LlamaForCausalLM"],
              "attention_bias": false,
              "bos_token_id": 128000,
              "eos_token_id": [128001, 128008, 128009],
              "head_dim": 64,
              "hidden_act": "silu",
              "hidden_size": 2048,
              "intermediate_size": 8192,
              "max_position_embeddings": 131072,
              "mlp_bias": false,
              "model_type": "llama",
              "num_attention_heads": 32,
              "num_hidden_layers": 16,
              "num_key_value_heads": 8,
              "pretraining_tp": 1,
              "rms_norm_eps": 1e-05,
              "rope_scaling": {
                "factor": 32.0,
                "high_freq_factor": 4.0,
                "low_freq_factor": 1.0,
                "original_max_position_embeddings": 8192,
                "rope_type": "llama3"
              },
              "rope_theta": 500000.0,
              "tie_word_embeddings": true,
              "torch_dtype": "bfloat16",
              "vocab_size": 128256
            }
            """;

    private Path write(String json) throws IOException {
        Path f = dir.resolve("config.json");
        Files.writeString(f, json);
        return f;
    }

    @Test
    void readsQwen25() throws IOException {
        ModelConfig c = ModelConfig.read(write(QWEN25_05B));
        assertEquals(Family.QWEN2, c.family());
        assertEquals(896, c.hiddenSize());
        assertEquals(64, c.headDim()); // hidden_size / num_attention_heads
        assertEquals(2, c.numKvHeads());
        assertEquals(1e-6, c.rmsNormEps());
        assertEquals(1e6, c.ropeTheta());
        assertNull(c.ropeScaling());
        assertTrue(c.tieWordEmbeddings());
        assertTrue(c.qkvBias());
        assertFalse(c.outputBias());
        assertEquals("bfloat16", c.torchDtype());
        assertEquals(151643, c.bosTokenId());
        assertEquals(List.of(151643), c.eosTokenIds());
        assertEquals(32768, c.extra().get("sliding_window").intValue());
        assertFalse(c.extra().containsKey("hidden_size"));
    }

    @Test
    void readsQwen3WithItsOwnHeadDim() throws IOException {
        ModelConfig c = ModelConfig.read(write(QWEN3_06B));
        assertEquals(Family.QWEN3, c.family());
        assertEquals(128, c.headDim()); // not 1024 / 16
        assertEquals(8, c.numKvHeads());
        assertFalse(c.qkvBias());
        assertTrue(c.family().qkNorm());
        // a Qwen3 config without head_dim means Qwen3Config's default, 128
        ModelConfig d = ModelConfig.read(write(QWEN3_06B.replace("\"head_dim\": 128,", "")));
        assertEquals(128, d.headDim());
    }

    @Test
    void readsLlama32WithLlama3RopeScaling() throws IOException {
        ModelConfig c = ModelConfig.read(write(LLAMA32_1B));
        assertEquals(Family.LLAMA, c.family());
        assertEquals(RopeScaling.llama3(32, 1, 4, 8192), c.ropeScaling());
        assertEquals(5e5, c.ropeTheta());
        assertEquals(List.of(128001, 128008, 128009), c.eosTokenIds());
        assertFalse(c.attentionBias());
        assertEquals(1, c.extra().get("pretraining_tp").intValue());
    }

    @Test
    void readsTheTransformersV5RopeParametersForm() throws IOException {
        String v5 = QWEN3_06B.replace("\"rope_scaling\": null,\n", "")
                .replace("\"rope_theta\": 1000000,", "\"rope_parameters\": {\"rope_type\": \"linear\", \"factor\": 2.0, \"rope_theta\": 250000.0},");
        ModelConfig c = ModelConfig.read(write(v5));
        assertEquals(2.5e5, c.ropeTheta());
        assertEquals(RopeScaling.linear(2), c.ropeScaling());
        // the legacy "type" key and "default" (no scaling)
        ModelConfig d = ModelConfig.read(write(QWEN3_06B.replace("\"rope_scaling\": null", "\"rope_scaling\": {\"type\": \"default\"}")));
        assertNull(d.ropeScaling());
    }

    @Test
    void writesWhatItReads() throws IOException {
        for (String json : List.of(QWEN25_05B, QWEN3_06B, LLAMA32_1B)) {
            ModelConfig c = ModelConfig.read(write(json));
            Path out = dir.resolve("out.json");
            c.write(out);
            assertEquals(c, ModelConfig.read(out), json);
        }
        for (Family f : Family.values()) {
            ModelConfig c = ModelConfig.tiny(f, 50);
            Path out = dir.resolve("tiny.json");
            c.write(out);
            assertEquals(c, ModelConfig.read(out), f.toString());
        }
        // HF's layout: sorted keys, two-space indent, "key": value, one list element per line
        ModelConfig.read(write(LLAMA32_1B)).write(dir.resolve("llama.json"));
        String text = Files.readString(dir.resolve("llama.json"));
        assertTrue(text.startsWith("{\n  \"architectures\": [\n    \"LlamaForCausalLM\"\n  ],\n  \"attention_bias\": false,\n"), text);
        assertTrue(text.contains("\n  \"rope_scaling\": {\n    \"factor\": 32.0,\n"), text);
        assertTrue(text.endsWith("\n  \"vocab_size\": 128256\n}\n"), text);
    }

    @ParameterizedTest(name = "{0}")
    @CsvSource(delimiter = '|', textBlock = """
            heads not dividing hidden | "num_attention_heads": 14, | "num_attention_heads": 13,  | config.json: num_attention_heads (13) must divide hidden_size (896)
            kv heads not dividing     | "num_key_value_heads": 2,  | "num_key_value_heads": 3,  | config.json: num_key_value_heads (3) must divide num_attention_heads (14)
            negative size             | "hidden_size": 896,        | "hidden_size": -896,       | config.json: hidden_size must be a positive integer, got -896
            size as text              | "vocab_size": 151936       | "vocab_size": "big"        | config.json: vocab_size must be a positive integer, got "big"
            missing size              | "intermediate_size": 4864, | ''                         | config.json: intermediate_size is missing
            unknown architecture      | "Qwen2ForCausalLM"         | "MistralForCausalLM"       | config.json: architectures[0] 'MistralForCausalLM' is not supported
            inconsistent model_type   | "model_type": "qwen2",     | "model_type": "qwen3",     | config.json: model_type 'qwen3' does not match architectures[0] 'Qwen2ForCausalLM'
            unknown rope type         | "rope_theta": 1000000.0,   | "rope_theta": 1e6, "rope_scaling": {"rope_type": "yarn", "factor": 4.0}, | config.json: rope_scaling.rope_type 'yarn' is not supported (drmas supports default, linear, llama3)
            unknown legacy rope type  | "rope_theta": 1000000.0,   | "rope_theta": 1e6, "rope_scaling": {"type": "dynamic", "factor": 4.0}, | config.json: rope_scaling.type 'dynamic' is not supported
            llama3 key missing        | "rope_theta": 1000000.0,   | "rope_theta": 1e6, "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0}, | config.json: rope_scaling.original_max_position_embeddings is missing
            zero rope factor          | "rope_theta": 1000000.0,   | "rope_theta": 1e6, "rope_scaling": {"rope_type": "linear", "factor": 0}, | config.json: rope_scaling.factor must be a positive number, got 0
            negative eps              | "rms_norm_eps": 1e-06,     | "rms_norm_eps": -1e-06,    | config.json: rms_norm_eps must be a positive number, got -1.0E-6
            other activation          | "hidden_act": "silu",      | "hidden_act": "gelu",      | config.json: hidden_act "gelu" is not supported
            sliding window            | "use_sliding_window": false, | "use_sliding_window": true, | config.json: use_sliding_window true is not supported
            bad eos                   | "eos_token_id": 151643,    | "eos_token_id": [1, -2],   | config.json: eos_token_id[1] must be a token id (an integer >= 0), got -2
            """)
    void badValuesNameTheFileAndKey(String what, String from, String to, String message) throws IOException {
        assertTrue(QWEN25_05B.contains(from), from);
        Path f = write(QWEN25_05B.replace(from, to));
        ModelFileException e = assertThrows(ModelFileException.class, () -> ModelConfig.read(f));
        assertTrue(e.getMessage().startsWith(f.toString().replace("config.json", "")), e.getMessage());
        assertTrue(e.getMessage().contains(message), e.getMessage());
    }

    @Test
    void notJsonAndMissingFile() throws IOException {
        Path f = write("{\"hidden_size\": 64,");
        ModelFileException e = assertThrows(ModelFileException.class, () -> ModelConfig.read(f));
        assertTrue(e.getMessage().startsWith(f + ": not valid JSON"), e.getMessage());
        e = assertThrows(ModelFileException.class, () -> ModelConfig.read(dir.resolve("nope/config.json")));
        assertTrue(e.getMessage().endsWith("nope/config.json: no such file"), e.getMessage());
    }

    /** The required keys of a config.json of {@code family}, and {@code more} after them. */
    static String minimal(Family family, String more) {
        return "{\"architectures\": [\"" + family.architecture() + "\"], \"hidden_size\": 64, \"intermediate_size\": 96, "
                + "\"num_hidden_layers\": 2, \"num_attention_heads\": 4, \"vocab_size\": 10" + more + "}";
    }

    @Test
    void architecturesWithoutModelTypeIsEnough() throws IOException {
        // either key names the family; with architectures alone, the message of the model_type
        // mismatch (not to be shown) read model_type's text: a NullPointerException for every such config
        String q = QWEN25_05B.replace("  \"model_type\": \"qwen2\",\n", "");
        assertFalse(q.contains("model_type"));
        assertEquals(ModelConfig.read(write(QWEN25_05B)), ModelConfig.read(write(q)));
        for (Family f : Family.values()) assertEquals(f, ModelConfig.read(write(minimal(f, ""))).family());
    }

    @Test
    void aConfigThatCannotBeReadIsNotCalledInvalidJson() throws IOException {
        Path d = Files.createDirectory(dir.resolve("config.json"));
        ModelFileException e = assertThrows(ModelFileException.class, () -> ModelConfig.read(d));
        assertTrue(e.getMessage().startsWith(d + ": cannot read: "), e.getMessage());
    }
}

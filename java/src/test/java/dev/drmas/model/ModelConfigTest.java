// ModelConfigTest.java — config.json as the three families publish it (Qwen2.5-0.5B, Qwen3-0.6B and
// Llama-3.2-1B configs, written out here), the transformers v5 rope_parameters form, the write/read
// round trip, and the errors for bad values, each naming the file and the key path.
package dev.drmas.model;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.Set;
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

    /**
     * Every config.json drmas writes says transformers_version, as save_pretrained's do: without it
     * transformers 5.18 warns, on loading a Qwen3 tokenizer beside it, that its regex is Mistral's faulty
     * one (HfLoadsTrainedCheckpointsTest found it). The version is that of the layout drmas writes
     * (transformers 4's), also where the file read said another: drmas rewrites the v5 keys.
     */
    @Test
    void saysTheTransformersVersionOfItsLayout() throws IOException {
        assertEquals("4.51.0", ModelConfig.TRANSFORMERS_LAYOUT_VERSION);
        for (Family f : Family.values()) {
            ModelConfig.tiny(f, 151_669).write(dir.resolve("made.json"));
            JsonNode made = ModelConfig.JSON.readTree(dir.resolve("made.json").toFile());
            assertEquals("4.51.0", made.path("transformers_version").asText(), made.toString());
        }
        // a file transformers 5 wrote (rope_parameters, dtype): written back in transformers 4's layout, and says so
        String v5 = QWEN3_06B.replace("\"torch_dtype\": \"bfloat16\",", "\"dtype\": \"bfloat16\", \"transformers_version\": \"5.18.0\",")
                .replace("\"rope_scaling\": null,\n", "")
                .replace("\"rope_theta\": 1000000,", "\"rope_parameters\": {\"rope_type\": \"default\", \"rope_theta\": 1000000.0},");
        assertTrue(v5.contains("\"5.18.0\"") && v5.contains("\"dtype\"") && v5.contains("rope_parameters"), v5);
        ModelConfig c = ModelConfig.read(write(v5));
        assertFalse(c.extra().containsKey("transformers_version"), c.extra().toString());
        c.write(dir.resolve("back.json"));
        JsonNode back = ModelConfig.JSON.readTree(dir.resolve("back.json").toFile());
        assertEquals("4.51.0", back.path("transformers_version").asText(), back.toString());
        assertTrue(back.has("torch_dtype") && back.has("rope_theta") && !back.has("dtype") && !back.has("rope_parameters"),
                back.toString());
        assertEquals(c, ModelConfig.read(dir.resolve("back.json")));
    }

    @Test
    void tokenIdsDrmasDoesNotReadAreKeptAsTheyAre() throws IOException {
        // HF keeps any value here; drmas reads its stop tokens from the tokenizer and generation_config.json
        for (String[] ids : new String[][] {{"[1, 2]", "[1, -2]"}, {"-1", "1.5"}, {"null", "[]"}}) {
            String json = LLAMA32_1B.replaceFirst("\"bos_token_id\": \\d+", "\"bos_token_id\": " + ids[0])
                    .replaceFirst("\"eos_token_id\": \\[[^\\]]*\\]", "\"eos_token_id\": " + ids[1]);
            assertTrue(json.contains("\"bos_token_id\": " + ids[0]) && json.contains("\"eos_token_id\": " + ids[1]), json);
            ModelConfig c = ModelConfig.read(write(json));
            assertEquals(List.of(), c.eosTokenIds());
            com.fasterxml.jackson.databind.JsonNode back = c.toJson();
            assertEquals(new com.fasterxml.jackson.databind.ObjectMapper().readTree(ids[1]), back.get("eos_token_id"), back.toString());
            if (!ids[0].equals("null")) {
                assertEquals(new com.fasterxml.jackson.databind.ObjectMapper().readTree(ids[0]), back.get("bos_token_id"), back.toString());
            }
            Path out = dir.resolve("back.json");
            c.write(out);
            assertEquals(c, ModelConfig.read(out));
        }
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
            empty architectures       | ["Qwen2ForCausalLM"]       | []                         | config.json: architectures must be a non-empty list of names
            architectures not a list  | ["Qwen2ForCausalLM"]       | "Qwen2ForCausalLM"         | config.json: architectures must be a non-empty list of names
            architecture not a name   | ["Qwen2ForCausalLM"]       | [2]                        | config.json: architectures must be a non-empty list of names
            unknown model_type        | "model_type": "qwen2",     | "model_type": "mistral",   | config.json: model_type 'mistral' is not supported (drmas runs Qwen2ForCausalLM, Qwen3ForCausalLM, LlamaForCausalLM)
            odd head_dim              | "hidden_size": 896,        | "hidden_size": 896, "head_dim": 7, | config.json: head_dim (7) must be even (rotary embeddings rotate pairs)
            zero kv heads             | "num_key_value_heads": 2,  | "num_key_value_heads": 0,  | config.json: num_key_value_heads must be a positive integer, got 0
            size above an int         | "vocab_size": 151936       | "vocab_size": 3000000000   | config.json: vocab_size must be a positive integer, got 3000000000
            fractional size           | "vocab_size": 151936       | "vocab_size": 151936.0     | config.json: vocab_size must be a positive integer, got 151936.0
            tie as text               | "tie_word_embeddings": true, | "tie_word_embeddings": "true", | config.json: tie_word_embeddings must be true or false, got "true"
            zero rope theta           | "rope_theta": 1000000.0,   | "rope_theta": 0,           | config.json: rope_theta must be a positive number, got 0
            rope theta as text        | "rope_theta": 1000000.0,   | "rope_theta": "1e6",       | config.json: rope_theta must be a positive number, got "1e6"
            infinite rope theta       | "rope_theta": 1000000.0,   | "rope_theta": 1e400,       | config.json: rope_theta must be a positive number, got
            zero eps                  | "rms_norm_eps": 1e-06,     | "rms_norm_eps": 0,         | config.json: rms_norm_eps must be a positive number, got 0
            rope_scaling not an object | "rope_theta": 1000000.0,  | "rope_theta": 1e6, "rope_scaling": 2, | config.json: rope_scaling must be an object or null
            rope type missing         | "rope_theta": 1000000.0,   | "rope_theta": 1e6, "rope_scaling": {"factor": 2.0}, | config.json: rope_scaling.rope_type is missing
            rope type not a name      | "rope_theta": 1000000.0,   | "rope_theta": 1e6, "rope_scaling": {"rope_type": 3, "factor": 2.0}, | config.json: rope_scaling.rope_type is missing
            linear factor missing     | "rope_theta": 1000000.0,   | "rope_theta": 1e6, "rope_scaling": {"rope_type": "linear"}, | config.json: rope_scaling.factor is missing
            llama3 bands not ordered  | "rope_theta": 1000000.0,   | "rope_theta": 1e6, "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 4.0, "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}, | config.json: rope_scaling.high_freq_factor (4.0) must be greater than rope_scaling.low_freq_factor (4.0) > 0
            llama3 zero low factor    | "rope_theta": 1000000.0,   | "rope_theta": 1e6, "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 0, "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}, | config.json: rope_scaling.low_freq_factor must be a positive number, got 0
            llama3 zero original      | "rope_theta": 1000000.0,   | "rope_theta": 1e6, "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0, "original_max_position_embeddings": 0}, | config.json: rope_scaling.original_max_position_embeddings must be a positive integer, got 0
            rope_parameters not an object | "rope_theta": 1000000.0, | "rope_parameters": [1],  | config.json: rope_parameters must be an object
            rope_parameters bad theta | "rope_theta": 1000000.0,   | "rope_parameters": {"rope_type": "default", "rope_theta": -1}, | config.json: rope_parameters.rope_theta must be a positive number, got -1
            activation not a name     | "hidden_act": "silu",      | "hidden_act": 5,           | config.json: hidden_act 5 is not supported
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

    /**
     * A config.json that is not JSON, or is cut short, is named with what is wrong and where
     * (line:column of the file), in drmas's words: the parser's own text named its classes, a
     * "Source: REDACTED" the user never saw and its settings.
     */
    @ParameterizedTest(name = "{0}")
    @CsvSource(delimiter = '|', quoteCharacter = '`', value = {
        "malformed   | `{\\n  \"hidden_size\": 64\\n  \"x\": 1\\n}`      | not valid JSON (unexpected character ('\"' (code 34)): was expecting comma to separate Object entries) at line 3, column 3",
        "truncated   | `{\\n  \"hidden_size\": 64,\\n  \"vocab_s`       | not valid JSON (unexpected end-of-input in field name) at line 3, column 11",
        "cut after value | `{\\n  \"hidden_size\": 64`                   | not valid JSON (unexpected end-of-input: expected close marker for Object) at line 2, column 20",
        "text after  | `{\"hidden_size\": 64}\\n{}`                      | text after the JSON value at line 2, column 1",
        "duplicate   | `{\"hidden_size\": 64, \"hidden_size\": 65}`    | not valid JSON (duplicate field 'hidden_size') at line 1, column 34",
    })
    void jsonErrorsNameTheFileAndPlaceInDrmasWords(String what, String text, String message) throws IOException {
        Path f = write(text.replace("\\n", "\n"));
        ModelFileException e = assertThrows(ModelFileException.class, () -> ModelConfig.read(f));
        assertEquals(f + ": " + message, e.getMessage());
    }

    /** A value of the wrong type is named by its key and value, not by a parser's or binder's text. */
    @Test
    void wronglyTypedFieldsNameTheKey() throws IOException {
        Path f = write(QWEN25_05B.replace("\"num_hidden_layers\": 24", "\"num_hidden_layers\": \"x\""));
        ModelFileException e = assertThrows(ModelFileException.class, () -> ModelConfig.read(f));
        assertEquals(f + ": num_hidden_layers must be a positive integer, got \"x\"", e.getMessage());
        Path g = write(QWEN25_05B.replace("\"torch_dtype\": \"bfloat16\"", "\"torch_dtype\": {\"a\": 1}"));
        e = assertThrows(ModelFileException.class, () -> ModelConfig.read(g));
        assertEquals(g + ": torch_dtype must be a string (float32, bfloat16, float16), got {\"a\":1}", e.getMessage());
    }

    // ================================================================== checks found untested (PIT review)

    /** The required keys of a config.json of {@code family}, and {@code more} after them. */
    static String minimal(Family family, String more) {
        return "{\"architectures\": [\"" + family.architecture() + "\"], \"hidden_size\": 64, \"intermediate_size\": 96, "
                + "\"num_hidden_layers\": 2, \"num_attention_heads\": 4, \"vocab_size\": 10" + more + "}";
    }

    @Test
    void missingKeysTakeTheFamiliesDefaults() throws IOException {
        // transformers' LlamaConfig, Qwen2Config and Qwen3Config defaults
        for (Family f : Family.values()) {
            ModelConfig c = ModelConfig.read(write(minimal(f, "")));
            assertEquals(f, c.family());
            assertEquals(f == Family.QWEN3 ? 128 : 16, c.headDim(), f.toString());
            assertEquals(4, c.numKvHeads());
            assertEquals(1e-6, c.rmsNormEps());
            assertEquals(10000.0, c.ropeTheta());
            assertNull(c.ropeScaling());
            assertFalse(c.tieWordEmbeddings());
            assertFalse(c.attentionBias());
            assertFalse(c.mlpBias());
            assertEquals(f == Family.LLAMA ? 2048 : 32768, c.maxPositionEmbeddings(), f.toString());
            assertNull(c.torchDtype());
            assertNull(c.bosTokenId());
            assertEquals(List.of(), c.eosTokenIds());
            assertEquals(Map.of(), c.extra());
            // written back without the keys that have no value
            JsonNode j = c.toJson();
            assertFalse(j.has("torch_dtype") || j.has("bos_token_id") || j.has("eos_token_id"), j.toString());
            assertTrue(j.get("rope_scaling").isNull(), j.toString());
        }
        // model_type alone names the family, as does architectures alone
        ModelConfig t = ModelConfig.read(write(minimal(Family.LLAMA, "").replace("\"architectures\": [\"LlamaForCausalLM\"]",
                "\"model_type\": \"qwen3\"")));
        assertEquals(Family.QWEN3, t.family());
        ModelConfig n = ModelConfig.read(write(minimal(Family.QWEN2, ", \"model_type\": null, \"head_dim\": null, \"bos_token_id\": 0")));
        assertEquals(Family.QWEN2, n.family());
        assertEquals(16, n.headDim());
        assertEquals(0, n.bosTokenId());  // token id 0 is a token id
    }

    @Test
    void biasKeysBelongToTheirFamilies() throws IOException {
        String both = ", \"attention_bias\": true, \"mlp_bias\": true";
        ModelConfig llama = ModelConfig.read(write(minimal(Family.LLAMA, both)));
        assertTrue(llama.attentionBias() && llama.mlpBias() && llama.qkvBias() && llama.outputBias());
        assertEquals(Map.of(), llama.extra());
        // Qwen3 has attention_bias but no mlp_bias: kept as it is, unread
        ModelConfig qwen3 = ModelConfig.read(write(minimal(Family.QWEN3, both)));
        assertTrue(qwen3.attentionBias() && qwen3.qkvBias() && qwen3.outputBias());
        assertFalse(qwen3.mlpBias());
        assertEquals(Set.of("mlp_bias"), qwen3.extra().keySet());
        // Qwen2 has q/k/v biases whatever the keys say, and no o_proj bias
        ModelConfig qwen2 = ModelConfig.read(write(minimal(Family.QWEN2, both)));
        assertFalse(qwen2.attentionBias() || qwen2.mlpBias() || qwen2.outputBias());
        assertTrue(qwen2.qkvBias());
        assertEquals(Set.of("attention_bias", "mlp_bias"), qwen2.extra().keySet());
        for (ModelConfig c : List.of(llama, qwen3, qwen2)) {
            Path out = dir.resolve("out.json");
            c.write(out);
            assertEquals(c, ModelConfig.read(out), c.family().toString());
            assertTrue(Files.readString(out).contains("\"mlp_bias\": true"), c.family().toString());
        }
        // the record refuses what config.json cannot say
        ModelConfig q = ModelConfig.tiny(Family.QWEN2, 10);
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> new ModelConfig(Family.QWEN2, 64, 128, 2, 4, 2,
                16, 1e-6, 1e6, null, 10, true, true, false, 256, null, null, List.of(), Map.of()));
        assertEquals("config.json: attention_bias is not a Qwen2 setting (Qwen2 always has q/k/v biases)", e.getMessage());
        e = assertThrows(IllegalArgumentException.class, () -> new ModelConfig(Family.QWEN3, 64, 128, 2, 4, 2,
                16, 1e-6, 1e6, null, 10, true, false, true, 256, null, null, List.of(), Map.of()));
        assertEquals("config.json: mlp_bias is only a Llama setting", e.getMessage());
        e = assertThrows(IllegalArgumentException.class, () -> new ModelConfig(null, 64, 128, 2, 4, 2,
                16, 1e-6, 1e6, null, 10, true, false, false, 256, null, null, List.of(), Map.of()));
        assertEquals("config.json: architectures is missing", e.getMessage());
        e = assertThrows(IllegalArgumentException.class, () -> new ModelConfig(Family.LLAMA, 64, 128, 2, 4, 2,
                16, 1e-6, 1e6, null, 10, true, false, false, 256, null, null, List.of(), Map.of("hidden_size", q.toJson().get("hidden_size"))));
        assertEquals("config.json: extra holds the interpreted key hidden_size", e.getMessage());
    }

    @Test
    void theV5DtypeKeyAndTheLegacyOne() throws IOException {
        assertEquals("float16", ModelConfig.read(write(minimal(Family.QWEN3, ", \"dtype\": \"float16\""))).torchDtype());
        assertEquals("float16", ModelConfig.read(write(minimal(Family.QWEN3, ", \"torch_dtype\": null, \"dtype\": \"float16\""))).torchDtype());
        // both: torch_dtype, which transformers 4.x reads
        assertEquals("bfloat16", ModelConfig.read(write(minimal(Family.QWEN3,
                ", \"torch_dtype\": \"bfloat16\", \"dtype\": \"float16\""))).torchDtype());
        Path f = write(minimal(Family.QWEN3, ", \"torch_dtype\": \"float64\""));
        ModelFileException e = assertThrows(ModelFileException.class, () -> ModelConfig.read(f));
        assertEquals(f + ": torch_dtype 'float64' is not one of float32, bfloat16, float16", e.getMessage());
    }

    @Test
    void errorsNameTheFileWhateverItIsCalled() throws IOException {
        Path f = dir.resolve("qwen-0.5b.json");
        Files.writeString(f, minimal(Family.QWEN2, "").replace("\"hidden_size\": 64", "\"hidden_size\": 0"));
        ModelFileException e = assertThrows(ModelFileException.class, () -> ModelConfig.read(f));
        assertEquals(f + ": hidden_size must be a positive integer, got 0", e.getMessage());
        Files.writeString(f, "[" + minimal(Family.QWEN2, "") + "]");
        e = assertThrows(ModelFileException.class, () -> ModelConfig.read(f));
        assertEquals(f + ": expected a JSON object", e.getMessage());
        Files.writeString(f, "");
        e = assertThrows(ModelFileException.class, () -> ModelConfig.read(f));
        assertEquals(f + ": expected a JSON object", e.getMessage());
        // neither architectures nor model_type
        Files.writeString(f, minimal(Family.QWEN2, "").replace("\"architectures\": [\"Qwen2ForCausalLM\"],", ""));
        e = assertThrows(ModelFileException.class, () -> ModelConfig.read(f));
        assertEquals(f + ": architectures and model_type are missing", e.getMessage());
    }

    @Test
    void aConfigThatCannotBeReadIsNotCalledInvalidJson() throws IOException {
        Path d = Files.createDirectory(dir.resolve("config.json"));
        ModelFileException e = assertThrows(ModelFileException.class, () -> ModelConfig.read(d));
        assertTrue(e.getMessage().startsWith(d + ": cannot read: "), e.getMessage());
    }

    /** A Llama config of the record's int components in order (sizes, heads, head_dim, vocab, positions), eps and theta. */
    private static ModelConfig llamaWith(int[] ints, double eps, double theta) {
        return new ModelConfig(Family.LLAMA, ints[0], ints[1], ints[2], ints[3], ints[4], ints[5], eps, theta, null, ints[6], false,
                false, false, ints[7], null, null, List.of(), Map.of());
    }

    @Test
    void theRecordRefusesWhatItCannotRun() {
        // the record's own checks, for configs made in code (tiny, with*) rather than read
        String[] keys = {"hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads",
                "head_dim", "vocab_size", "max_position_embeddings"};
        int[] ok = {64, 128, 2, 4, 2, 16, 10, 256};
        assertEquals(16, llamaWith(ok, 1e-6, 1e4).headDim());
        for (int i = 0; i < keys.length; i++) {
            int[] bad = ok.clone();
            bad[i] = 0;
            IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> llamaWith(bad, 1e-6, 1e4), keys[i]);
            assertEquals("config.json: " + keys[i] + " must be a positive integer, got 0", e.getMessage());
        }
        for (double eps : new double[] {0, -1e-6, Double.NaN, Double.POSITIVE_INFINITY}) {
            IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> llamaWith(ok, eps, 1e4));
            assertEquals("config.json: rms_norm_eps must be a positive number, got " + eps, e.getMessage());
            e = assertThrows(IllegalArgumentException.class, () -> llamaWith(ok, 1e-6, eps));
            assertEquals("config.json: rope_theta must be a positive number, got " + eps, e.getMessage());
        }
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> llamaWith(new int[] {64, 128, 2, 4, 3, 16, 10, 256}, 1e-6, 1e4));
        assertEquals("config.json: num_key_value_heads (3) must divide num_attention_heads (4)", e.getMessage());
        e = assertThrows(IllegalArgumentException.class, () -> llamaWith(new int[] {64, 128, 2, 4, 2, 15, 10, 256}, 1e-6, 1e4));
        assertEquals("config.json: head_dim (15) must be even (rotary embeddings rotate pairs)", e.getMessage());
        e = assertThrows(IllegalArgumentException.class, () -> ModelConfig.tiny(Family.QWEN2, 10).withTorchDtype("int8"));
        assertEquals("config.json: torch_dtype 'int8' is not one of float32, bfloat16, float16", e.getMessage());
        e = assertThrows(IllegalArgumentException.class, () -> ModelConfig.tiny(Family.QWEN2, 10).withMaxPositions(0));
        assertEquals("config.json: max_position_embeddings must be a positive integer, got 0", e.getMessage());
        // and what the with* copies change: only their own component
        ModelConfig t = ModelConfig.tiny(Family.QWEN3, 10);
        assertEquals(new ModelConfig(Family.QWEN3, 64, 128, 2, 4, 2, 32, 1e-6, 1e6, null, 10, true, false, false, 77, "bfloat16", null,
                List.of(), Map.of()), t.withTiedEmbeddings(true).withMaxPositions(77).withTorchDtype("bfloat16"));
    }

    @Test
    void ropeScalingRefusesWhatConfigJsonCannotReachToo() {
        // what the record checks beyond config.json's positive numbers (which doubleValue already refuses)
        for (double f : new double[] {0, -2, Double.NaN, Double.POSITIVE_INFINITY}) {
            IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> RopeScaling.linear(f));
            assertEquals("config.json: rope_scaling.factor must be a positive number, got " + f, e.getMessage());
        }
        assertEquals(3.0, RopeScaling.linear(3).factor());  // a linear one needs no llama3 bands
        for (double[] lh : new double[][] {{0, 4}, {-1, 4}, {4, 4}, {4, 3}, {1, Double.POSITIVE_INFINITY}}) {
            IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> RopeScaling.llama3(8, lh[0], lh[1], 8192));
            assertEquals("config.json: rope_scaling.high_freq_factor (" + lh[1] + ") must be greater than rope_scaling.low_freq_factor ("
                    + lh[0] + ") > 0", e.getMessage());
        }
        assertEquals(4.0, RopeScaling.llama3(8, 1e-9, 4, 1).highFreqFactor());
        for (long p : new long[] {0, -1}) {
            IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> RopeScaling.llama3(8, 1, 4, p));
            assertEquals("config.json: rope_scaling.original_max_position_embeddings must be a positive integer, got " + p, e.getMessage());
        }
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> new RopeScaling(null, 2, 0, 0, 0));
        assertEquals("config.json: rope_scaling.rope_type is missing", e.getMessage());
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
}

// ModelConfig.java — the shape of a decoder-only transformer as HF config.json describes it: read
// from (and written back to) config.json, so that drmas checkpoints and HF checkpoints are
// interchangeable. Keys drmas does not use are kept and written back unchanged.
package dev.drmas.model;

import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.core.util.DefaultIndenter;
import com.fasterxml.jackson.core.util.DefaultPrettyPrinter;
import com.fasterxml.jackson.core.util.Separators;
import com.fasterxml.jackson.databind.DeserializationFeature;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.ObjectReader;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;

/**
 * One model's configuration. Validation errors name the config.json key path; {@link #read}
 * prefixes them with the file. Qwen2 always has q/k/v biases (HF hard-codes them);
 * {@code attentionBias} (q/k/v/o biases) and {@code mlpBias} are the Llama/Qwen3 keys of the same
 * names. {@code ropeScaling} is null for plain rotary embeddings. {@code extra} holds the
 * config.json keys drmas does not interpret, written back as they were.
 */
public record ModelConfig(Family family, int hiddenSize, int intermediateSize, int numLayers, int numHeads,
                          int numKvHeads, int headDim, double rmsNormEps, double ropeTheta, RopeScaling ropeScaling,
                          int vocabSize, boolean tieWordEmbeddings, boolean attentionBias, boolean mlpBias,
                          int maxPositionEmbeddings, String torchDtype, Integer bosTokenId, List<Integer> eosTokenIds,
                          Map<String, JsonNode> extra) {

    static final ObjectMapper JSON = new ObjectMapper()
            .enable(JsonParser.Feature.STRICT_DUPLICATE_DETECTION)
            .enable(DeserializationFeature.FAIL_ON_TRAILING_TOKENS);
    /** Reads one value from a parser that the caller checks for trailing text itself. */
    private static final ObjectReader TREE = JSON.reader().without(DeserializationFeature.FAIL_ON_TRAILING_TOKENS);

    /** config.json keys that this record interprets; every other key goes to {@code extra}. */
    private static final Set<String> KNOWN = Set.of("architectures", "model_type", "hidden_size", "intermediate_size",
            "num_hidden_layers", "num_attention_heads", "num_key_value_heads", "head_dim", "rms_norm_eps",
            "rope_theta", "rope_scaling", "rope_parameters", "vocab_size", "tie_word_embeddings", "torch_dtype",
            "dtype", "max_position_embeddings", "bos_token_id", "eos_token_id", "hidden_act", "transformers_version");

    /**
     * The transformers_version config.json says: the version whose layout drmas writes (torch_dtype,
     * rope_theta and rope_scaling at the top level, as transformers 4 writes them; transformers 5 writes
     * dtype and rope_parameters, and reads both), from the first that reads every family drmas runs
     * (Qwen3 came in 4.51). Written always, not the value a file was read with, since drmas rewrites the
     * file in this layout. HF's save_pretrained always writes the key, and readers take a config without
     * it for an unknown writer's: transformers 5.18, loading a tokenizer of more than 100,000 tokens
     * beside such a config, suspects Mistral's faulty pre-tokenizer regex and warns on every load that
     * tokenization will be wrong unless fix_mistral_regex=True, which would replace the tokenizer's own.
     */
    public static final String TRANSFORMERS_LAYOUT_VERSION = "4.51.0";

    public ModelConfig {
        check(family != null, "architectures is missing");
        positive("hidden_size", hiddenSize);
        positive("intermediate_size", intermediateSize);
        positive("num_hidden_layers", numLayers);
        positive("num_attention_heads", numHeads);
        positive("num_key_value_heads", numKvHeads);
        positive("head_dim", headDim);
        positive("vocab_size", vocabSize);
        positive("max_position_embeddings", maxPositionEmbeddings);
        check(numHeads % numKvHeads == 0, "num_key_value_heads (" + numKvHeads + ") must divide num_attention_heads ("
                + numHeads + ")");
        check(headDim % 2 == 0, "head_dim (" + headDim + ") must be even (rotary embeddings rotate pairs)");
        check(rmsNormEps > 0 && Double.isFinite(rmsNormEps), "rms_norm_eps must be a positive number, got " + rmsNormEps);
        check(ropeTheta > 0 && Double.isFinite(ropeTheta), "rope_theta must be a positive number, got " + ropeTheta);
        check(torchDtype == null || torchDtype.equals("float32") || torchDtype.equals("bfloat16")
                || torchDtype.equals("float16"), "torch_dtype '" + torchDtype + "' is not one of float32, bfloat16, float16");
        check(family != Family.QWEN2 || !attentionBias, "attention_bias is not a Qwen2 setting (Qwen2 always has q/k/v biases)");
        check(family == Family.LLAMA || !mlpBias, "mlp_bias is only a Llama setting");
        eosTokenIds = eosTokenIds == null ? List.of() : List.copyOf(eosTokenIds);
        extra = extra == null ? Map.of() : Map.copyOf(extra);
        for (String k : extra.keySet()) {
            // (bos/eos ids that are no token id stay raw in extra, where the fields are unset)
            boolean raw = k.equals("bos_token_id") && bosTokenId == null || k.equals("eos_token_id") && eosTokenIds.isEmpty();
            check(!KNOWN.contains(k) || raw, "extra holds the interpreted key " + k);
        }
    }

    /** Whether q_proj, k_proj and v_proj carry a bias. */
    public boolean qkvBias() {
        return family == Family.QWEN2 || attentionBias;
    }

    /** Whether o_proj carries a bias (Llama/Qwen3 attention_bias). */
    public boolean outputBias() {
        return family != Family.QWEN2 && attentionBias;
    }

    /**
     * A small model of {@code family} for tests and CPU runs. The three presets differ in shape on
     * purpose: Qwen2 tied embeddings (as Qwen2.5-0.5B), Qwen3 a head_dim that is not
     * hidden/heads (as real Qwen3), Llama 4:1 grouped-query attention with llama3 rope scaling
     * whose wavelength bands all occur at head_dim 8.
     */
    public static ModelConfig tiny(Family family, int vocabSize) {
        return switch (family) {
            case QWEN2 -> new ModelConfig(family, 64, 128, 2, 4, 2, 16, 1e-6, 1e6, null, vocabSize, true, false, false,
                    256, "float32", null, List.of(), Map.of());
            case QWEN3 -> new ModelConfig(family, 64, 128, 2, 4, 2, 32, 1e-6, 1e6, null, vocabSize, false, false, false,
                    256, "float32", null, List.of(), Map.of());
            case LLAMA -> new ModelConfig(family, 64, 160, 3, 8, 2, 8, 1e-5, 10000, RopeScaling.llama3(8, 1, 4, 64),
                    vocabSize, false, false, false, 256, "float32", null, List.of(), Map.of());
        };
    }

    public ModelConfig withTiedEmbeddings(boolean tied) {
        return new ModelConfig(family, hiddenSize, intermediateSize, numLayers, numHeads, numKvHeads, headDim, rmsNormEps,
                ropeTheta, ropeScaling, vocabSize, tied, attentionBias, mlpBias, maxPositionEmbeddings, torchDtype,
                bosTokenId, eosTokenIds, extra);
    }

    public ModelConfig withMaxPositions(int positions) {
        return new ModelConfig(family, hiddenSize, intermediateSize, numLayers, numHeads, numKvHeads, headDim, rmsNormEps,
                ropeTheta, ropeScaling, vocabSize, tieWordEmbeddings, attentionBias, mlpBias, positions, torchDtype,
                bosTokenId, eosTokenIds, extra);
    }

    public ModelConfig withTorchDtype(String dtype) {
        return new ModelConfig(family, hiddenSize, intermediateSize, numLayers, numHeads, numKvHeads, headDim, rmsNormEps,
                ropeTheta, ropeScaling, vocabSize, tieWordEmbeddings, attentionBias, mlpBias, maxPositionEmbeddings, dtype,
                bosTokenId, eosTokenIds, extra);
    }

    // ------------------------------------------------------------------ reading

    /**
     * A model folder's JSON file (config.json, a safetensors index): a file that is not there or
     * cannot be read is said so, apart from one that is not JSON, whose error says what is wrong
     * and where (line:column) in drmas's words (JsonProblem); each names the file.
     */
    static JsonNode readJson(Path file) {
        byte[] bytes;
        try {
            bytes = Files.readAllBytes(file);
        } catch (NoSuchFileException e) {
            throw new ModelFileException(file + ": no such file");
        } catch (IOException e) {
            throw new ModelFileException(file + ": cannot read: " + e.getMessage(), e);
        }
        // a token at a time, so that text after the value is found here and its place said (the mapper's
        // FAIL_ON_TRAILING_TOKENS error names its classes and setting instead)
        try (JsonParser p = JSON.createParser(bytes)) {
            JsonNode root = p.nextToken() == null ? null : TREE.readTree(p);
            if (p.nextToken() != null) {
                throw new ModelFileException(file + ": text after the JSON value" + JsonProblem.at(p.currentTokenLocation()));
            }
            return root;
        } catch (JsonProcessingException e) {
            ModelFileException x = new ModelFileException(file + ": not valid JSON (" + JsonProblem.describe(e) + ")"
                    + JsonProblem.at(e.getLocation()));
            x.addSuppressed(e);  // for --verbose's stack trace; not a cause, whose text the one-line report would repeat
            throw x;
        } catch (IOException e) {  // (the parser's signature: a byte array is never an I/O error)
            throw new ModelFileException(file + ": cannot be read: " + e.getMessage(), e);
        }
    }

    /** Reads config.json; errors name the file and the key path. */
    public static ModelConfig read(Path file) {
        JsonNode root = readJson(file);
        try {
            return fromJson(root);
        } catch (IllegalArgumentException e) {
            // messages start with "config.json:"; name the actual file instead
            String m = String.valueOf(e.getMessage());
            throw new ModelFileException(file + (m.startsWith("config.json:") ? m.substring("config.json".length()) : ": " + m), e);
        }
    }

    /** Parses a config.json tree; errors are IllegalArgumentExceptions naming the key path. */
    public static ModelConfig fromJson(JsonNode root) {
        check(root != null && root.isObject(), "expected a JSON object");
        Family family = family(root);
        int hidden = requiredInt(root, "hidden_size");
        int heads = requiredInt(root, "num_attention_heads");
        JsonNode hd = root.get("head_dim");
        int headDim;
        if (hd != null && !hd.isNull()) {
            headDim = intValue(hd, "head_dim");
        } else if (family == Family.QWEN3) {
            headDim = 128; // Qwen3Config's default, not hidden/heads
        } else {
            check(hidden % heads == 0, "num_attention_heads (" + heads + ") must divide hidden_size (" + hidden
                    + ") when head_dim is not given");
            headDim = hidden / heads;
        }
        JsonNode act = root.get("hidden_act");
        check(act == null || act.isNull() || act.asText().equals("silu"),
                "hidden_act " + act + " is not supported (the SwiGLU MLP of these families uses silu)");
        JsonNode sliding = root.get("use_sliding_window");
        check(sliding == null || !sliding.asBoolean(false), "use_sliding_window true is not supported");

        double theta = optionalDouble(root, "rope_theta", 10000.0);
        RopeScaling scaling = null;
        JsonNode rs = root.get("rope_scaling");
        JsonNode rp = root.get("rope_parameters"); // the transformers v5 form: theta and type in one object
        if (rs != null && !rs.isNull()) {
            scaling = ropeScaling(rs, "rope_scaling");
        } else if (rp != null && !rp.isNull()) {
            check(rp.isObject(), "rope_parameters must be an object");
            theta = optionalDouble(rp, "rope_parameters.", "rope_theta", theta);
            scaling = ropeScaling(rp, "rope_parameters");
        }
        boolean attnBias = family != Family.QWEN2 && optionalBool(root, "attention_bias", false);
        boolean mlpBias = family == Family.LLAMA && optionalBool(root, "mlp_bias", false);

        String dtKey = root.hasNonNull("torch_dtype") ? "torch_dtype" : "dtype";
        JsonNode dt = root.get(dtKey);
        // (asText of an object or array is "", which the check below would call the dtype '')
        check(dt == null || dt.isNull() || dt.isTextual(), dtKey + " must be a string (float32, bfloat16, float16), got " + dt);
        String torchDtype = dt == null || dt.isNull() ? null : dt.asText();
        // drmas reads neither (stop tokens come from the tokenizer and generation_config.json): values HF keeps that are
        // no token id here (a list of bos ids, -1 for none) are kept as they are and written back, not refused
        Map<String, JsonNode> extra = new LinkedHashMap<>();
        JsonNode bos = root.get("bos_token_id");
        Integer bosId = null;
        if (bos != null && !bos.isNull()) {
            if (isTokenId(bos)) bosId = bos.intValue();
            else extra.put("bos_token_id", bos);
        }
        List<Integer> eos = new ArrayList<>();
        JsonNode eosNode = root.get("eos_token_id");
        if (eosNode != null && eosNode.isArray()) {
            for (int i = 0; i < eosNode.size(); i++) eos.add(isTokenId(eosNode.get(i)) ? eosNode.get(i).intValue() : null);
        } else if (eosNode != null && !eosNode.isNull()) {
            eos.add(isTokenId(eosNode) ? eosNode.intValue() : null);
        }
        if (eos.contains(null) || eosNode != null && eosNode.isArray() && eosNode.isEmpty()) {
            eos.clear();
            extra.put("eos_token_id", eosNode);
        }

        for (Iterator<Map.Entry<String, JsonNode>> it = root.fields(); it.hasNext(); ) {
            Map.Entry<String, JsonNode> e = it.next();
            boolean interpreted = KNOWN.contains(e.getKey())
                    || (family != Family.QWEN2 && e.getKey().equals("attention_bias"))
                    || (family == Family.LLAMA && e.getKey().equals("mlp_bias"));
            if (!interpreted) extra.put(e.getKey(), e.getValue());
        }
        return new ModelConfig(family, hidden, requiredInt(root, "intermediate_size"), requiredInt(root, "num_hidden_layers"),
                heads, optionalInt(root, "num_key_value_heads", heads), headDim,
                optionalDouble(root, "rms_norm_eps", 1e-6), theta, scaling, requiredInt(root, "vocab_size"),
                optionalBool(root, "tie_word_embeddings", false), attnBias, mlpBias,
                optionalInt(root, "max_position_embeddings", family == Family.LLAMA ? 2048 : 32768),
                torchDtype, bosId, eos, extra);
    }

    private static Family family(JsonNode root) {
        JsonNode arch = root.get("architectures");
        JsonNode type = root.get("model_type");
        Family byType = null;
        if (type != null && !type.isNull()) {
            byType = Family.byModelType(type.asText());
            check(byType != null, "model_type '" + type.asText() + "' is not supported (drmas runs "
                    + Family.supported() + ")");
        }
        if (arch != null && !arch.isNull()) {
            check(arch.isArray() && !arch.isEmpty() && arch.get(0).isTextual(), "architectures must be a non-empty list of names");
            Family f = Family.byArchitecture(arch.get(0).asText());
            check(f != null, "architectures[0] '" + arch.get(0).asText() + "' is not supported (drmas runs "
                    + Family.supported() + ")");
            // (the message only when there is a model_type: it reads its text)
            if (byType != null && byType != f) {
                check(false, "model_type '" + type.asText() + "' does not match architectures[0] '" + arch.get(0).asText() + "'");
            }
            return f;
        }
        check(byType != null, "architectures and model_type are missing");
        return byType;
    }

    private static RopeScaling ropeScaling(JsonNode n, String path) {
        check(n.isObject(), path + " must be an object or null");
        String key = n.hasNonNull("rope_type") ? "rope_type" : "type";
        JsonNode t = n.get(key);
        check(t != null && t.isTextual(), path + ".rope_type is missing");
        String p = path + ".";
        return switch (t.asText()) {
            case "default" -> null;
            case "linear" -> RopeScaling.linear(requiredDouble(n, p, "factor"));
            case "llama3" -> RopeScaling.llama3(requiredDouble(n, p, "factor"), requiredDouble(n, p, "low_freq_factor"),
                    requiredDouble(n, p, "high_freq_factor"), intValue(require(n, p, "original_max_position_embeddings"),
                            p + "original_max_position_embeddings"));
            default -> throw new IllegalArgumentException("config.json: " + p + key + " '" + t.asText()
                    + "' is not supported (drmas supports default, linear, llama3)");
        };
    }

    // ------------------------------------------------------------------ writing

    /** The config.json tree, as HF writes it: every key, sorted by name. */
    public ObjectNode toJson() {
        Map<String, Object> m = new TreeMap<>(extra);
        m.put("architectures", List.of(family.architecture()));
        m.put("model_type", family.modelType());
        m.put("hidden_size", hiddenSize);
        m.put("intermediate_size", intermediateSize);
        m.put("num_hidden_layers", numLayers);
        m.put("num_attention_heads", numHeads);
        m.put("num_key_value_heads", numKvHeads);
        m.put("head_dim", headDim);
        m.put("hidden_act", "silu");
        m.put("rms_norm_eps", rmsNormEps);
        m.put("rope_theta", ropeTheta);
        if (ropeScaling == null) {
            m.put("rope_scaling", null);
        } else {
            Map<String, Object> s = new TreeMap<>();
            s.put("rope_type", ropeScaling.type().configName());
            s.put("factor", ropeScaling.factor());
            if (ropeScaling.type() == RopeScaling.Type.LLAMA3) {
                s.put("low_freq_factor", ropeScaling.lowFreqFactor());
                s.put("high_freq_factor", ropeScaling.highFreqFactor());
                s.put("original_max_position_embeddings", ropeScaling.originalMaxPositions());
            }
            m.put("rope_scaling", s);
        }
        m.put("vocab_size", vocabSize);
        m.put("tie_word_embeddings", tieWordEmbeddings);
        m.put("max_position_embeddings", maxPositionEmbeddings);
        if (family != Family.QWEN2) m.put("attention_bias", attentionBias);
        if (family == Family.LLAMA) m.put("mlp_bias", mlpBias);
        if (torchDtype != null) m.put("torch_dtype", torchDtype);
        if (bosTokenId != null) m.put("bos_token_id", bosTokenId);
        if (eosTokenIds.size() == 1) m.put("eos_token_id", eosTokenIds.getFirst());
        else if (!eosTokenIds.isEmpty()) m.put("eos_token_id", eosTokenIds);
        m.put("transformers_version", TRANSFORMERS_LAYOUT_VERSION);
        return JSON.valueToTree(m);
    }

    /** Writes config.json (sorted keys, two-space indent, final newline: the layout HF writes). */
    public void write(Path file) throws IOException {
        Files.writeString(file, pythonStyleJson(toJson()), StandardCharsets.UTF_8);
    }

    /** JSON as Python's json.dumps(indent=2) lays it out: "key": value, one element per line. */
    static String pythonStyleJson(JsonNode node) {
        DefaultIndenter indent = new DefaultIndenter("  ", "\n");
        DefaultPrettyPrinter pp = new DefaultPrettyPrinter(Separators.createDefaultInstance()
                .withObjectFieldValueSpacing(Separators.Spacing.AFTER))
                .withObjectIndenter(indent).withArrayIndenter(indent);
        try {
            return JSON.writer(pp).writeValueAsString(node) + "\n";
        } catch (IOException e) {
            throw new IllegalStateException(e); // a tree always serialises
        }
    }

    // ------------------------------------------------------------------ key access

    private static void check(boolean ok, String message) {
        if (!ok) throw new IllegalArgumentException("config.json: " + message);
    }

    private static void positive(String key, int v) {
        check(v > 0, key + " must be a positive integer, got " + v);
    }

    private static JsonNode require(JsonNode n, String prefix, String key) {
        JsonNode v = n.get(key);
        check(v != null && !v.isNull(), prefix + key + " is missing");
        return v;
    }

    private static int requiredInt(JsonNode n, String key) {
        return intValue(require(n, "", key), key);
    }

    private static int optionalInt(JsonNode n, String key, int dflt) {
        JsonNode v = n.get(key);
        return v == null || v.isNull() ? dflt : intValue(v, key);
    }

    private static int intValue(JsonNode v, String path) {
        check(v.isIntegralNumber() && v.canConvertToInt() && v.intValue() > 0,
                path + " must be a positive integer, got " + v);
        return v.intValue();
    }

    private static boolean isTokenId(JsonNode v) {
        return v.isIntegralNumber() && v.canConvertToInt() && v.intValue() >= 0;
    }

    private static double requiredDouble(JsonNode n, String prefix, String key) {
        return doubleValue(require(n, prefix, key), prefix + key);
    }

    private static double optionalDouble(JsonNode n, String key, double dflt) {
        return optionalDouble(n, "", key, dflt);
    }

    private static double optionalDouble(JsonNode n, String prefix, String key, double dflt) {
        JsonNode v = n.get(key);
        return v == null || v.isNull() ? dflt : doubleValue(v, prefix + key);
    }

    private static double doubleValue(JsonNode v, String path) {
        check(v.isNumber() && v.doubleValue() > 0 && Double.isFinite(v.doubleValue()),
                path + " must be a positive number, got " + v);
        return v.doubleValue();
    }

    private static boolean optionalBool(JsonNode n, String key, boolean dflt) {
        JsonNode v = n.get(key);
        if (v == null || v.isNull()) return dflt;
        check(v.isBoolean(), key + " must be true or false, got " + v);
        return v.booleanValue();
    }
}

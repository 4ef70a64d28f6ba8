// HfTokenizer.java — a Hugging Face tokenizer folder served through DJL's binding of the Rust
// `tokenizers` library, so that encode and decode are HF's own code. The vocabulary, the special
// tokens and the chat template are read here from the same files, because DJL exposes neither
// token_to_id nor the vocabulary, and reads tokenizer_config.json with defaults of its own (padding,
// lower-casing, space clean-up) that differ from HF transformers'.
//
// Files of a folder: tokenizer.json (required); tokenizer_config.json (special tokens,
// clean_up_tokenization_spaces, chat_template); special_tokens_map.json, whose entries override
// tokenizer_config.json's as in transformers; generation_config.json (eos_token_id: more stop ids);
// chat_template.jinja, which takes precedence over tokenizer_config.json's chat_template as in
// transformers >= 4.47.
//
// Nothing here touches the network. DJL would (a telemetry call to the EC2 metadata address on every
// tokenizer it creates, and a download of a CUDA build of its native library on machines with a
// GPU) unless it runs offline, so the static block below sets the system properties ai.djl.offline
// and OPT_OUT_TRACKING to true when the user has not set them (env DJL_OFFLINE / OPT_OUT_TRACKING
// win over them). DJL then loads the CPU library shipped in its jar, extracted once into
// $DJL_CACHE_DIR (default ~/.djl.ai, or java.io.tmpdir/.djl.ai when the home is not writable)
// under tokenizers/.
package dev.drmas.tokenizer;

import ai.djl.engine.EngineException;
import ai.djl.huggingface.tokenizers.Encoding;
import ai.djl.huggingface.tokenizers.HuggingFaceTokenizer;
import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.core.JsonToken;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.drmas.model.JsonProblem;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.OptionalInt;
import java.util.Set;

public final class HfTokenizer implements Tokenizer {

    static {
        if (System.getenv("DJL_OFFLINE") == null && System.getProperty("ai.djl.offline") == null) {
            System.setProperty("ai.djl.offline", "true");
        }
        if (System.getenv("OPT_OUT_TRACKING") == null && System.getProperty("OPT_OUT_TRACKING") == null) {
            System.setProperty("OPT_OUT_TRACKING", "true");
        }
    }

    private static final ObjectMapper JSON = new ObjectMapper();
    /** Turn and text end markers that stop generation wherever they are special tokens. */
    private static final List<String> END_MARKERS = List.of("<|im_end|>", "<|endoftext|>", "<|eot_id|>", "<|end_of_text|>");

    private final HuggingFaceTokenizer native_;
    private final String[] tokens; // id -> token; null where no token has that id
    private final Map<String, Integer> ids;
    private final Set<Integer> specialIds;
    private final boolean cleanUpSpaces;
    private final String eosToken;
    private final int eosId;
    private final String bosToken;
    private final Integer padId;
    private final List<Integer> stopIds;
    private final String chatTemplate;
    private final Path chatTemplateFile;
    private final String chatTemplateError; // thrown by chatTemplate() when the declared template is unusable
    private final Map<String, Object> templateContext;

    /**
     * The special tokens a chat template sees by name, as transformers passes its special-tokens map
     * (sep, cls and mask too: a template may print them; only eos, bos and pad are checked against
     * the vocabulary, as the ones drmas itself uses).
     */
    static final List<String> SPECIAL_TOKEN_KEYS = List.of("bos_token", "eos_token", "pad_token", "unk_token", "sep_token",
            "cls_token", "mask_token");

    private HfTokenizer(HuggingFaceTokenizer nativeTokenizer, Vocabulary vocab, Config cfg, List<Integer> generationEos,
            Path dir) {
        this.native_ = nativeTokenizer;
        this.tokens = vocab.tokens;
        this.ids = vocab.ids;
        this.specialIds = vocab.specialIds;
        this.cleanUpSpaces = cfg.cleanUpSpaces;
        Map<String, String> special = cfg.specialTokens;
        String eos = special.get("eos_token");
        if (eos == null && !generationEos.isEmpty()) {
            eos = idToToken(generationEos.getFirst()); // some configs name eos only by id
        }
        if (eos == null) {
            throw new TokenizerFileException(dir + ": no eos_token in tokenizer_config.json, special_tokens_map.json "
                    + "or generation_config.json: generation would never stop");
        }
        this.eosToken = eos;
        this.eosId = requireToken(dir, "eos_token", eos);
        this.bosToken = special.get("bos_token");
        if (bosToken != null) requireToken(dir, "bos_token", bosToken);
        String pad = special.get("pad_token");
        this.padId = pad == null ? null : requireToken(dir, "pad_token", pad);

        LinkedHashSet<Integer> stops = new LinkedHashSet<>();
        stops.add(eosId);
        stops.addAll(generationEos);
        for (String marker : END_MARKERS) {
            Integer id = ids.get(marker);
            if (id != null && specialIds.contains(id)) stops.add(id);
        }
        this.stopIds = List.copyOf(stops);
        this.chatTemplate = cfg.chatTemplate;
        this.chatTemplateFile = cfg.chatTemplateFile;
        this.chatTemplateError = cfg.chatTemplateError;

        Map<String, Object> ctx = new LinkedHashMap<>();
        for (String key : SPECIAL_TOKEN_KEYS) {
            String v = key.equals("eos_token") ? eosToken : special.get(key);
            if (v != null) ctx.put(key, v);
        }
        if (cfg.additionalSpecialTokens != null) ctx.put("additional_special_tokens", cfg.additionalSpecialTokens);
        this.templateContext = Collections.unmodifiableMap(ctx);
    }

    /**
     * Loads the tokenizer folder {@code dir}.
     *
     * @throws TokenizerFileException naming the file and the problem: a missing folder or tokenizer.json,
     *     malformed JSON, a special token that is not in the vocabulary, no eos token anywhere
     */
    public static HfTokenizer load(Path dir) {
        if (!Files.isDirectory(dir)) {
            throw new TokenizerFileException(dir + ": " + (Files.exists(dir) ? "not a directory" : "no such directory")
                    + " (expected a tokenizer folder with tokenizer.json)");
        }
        Path tokenizerJson = dir.resolve("tokenizer.json");
        if (!Files.isRegularFile(tokenizerJson)) {
            throw new TokenizerFileException(tokenizerJson + ": missing (a Hugging Face tokenizer folder has tokenizer.json)");
        }
        Vocabulary vocab = Vocabulary.read(tokenizerJson);
        Config cfg = Config.read(dir);
        List<Integer> generationEos = readGenerationEos(dir.resolve("generation_config.json"), vocab);
        HuggingFaceTokenizer nat;
        try {
            // HF transformers calls neither truncation nor padding unless asked; DJL's defaults differ.
            nat = HuggingFaceTokenizer.newInstance(tokenizerJson,
                    Map.of("addSpecialTokens", "false", "truncation", "false", "padding", "false"));
        } catch (IOException e) {
            throw new TokenizerFileException(tokenizerJson + ": cannot read: " + e.getMessage(), e);
        } catch (EngineException e) { // the machine's fault, not the file's: no native library for this platform
            throw new IllegalStateException("DJL's native tokenizers library cannot be loaded: " + e.getMessage()
                    + (e.getCause() == null ? "" : " (" + e.getCause().getMessage() + ")"), e);
        } catch (RuntimeException e) { // the Rust library's parse error, with line and column
            throw new TokenizerFileException(tokenizerJson + ": the tokenizers library rejects it: " + e.getMessage(), e);
        }
        try {
            return new HfTokenizer(nat, vocab, cfg, generationEos, dir);
        } catch (RuntimeException e) {
            nat.close();
            throw e;
        }
    }

    @Override
    public int[] encode(String text, boolean addSpecialTokens) {
        return ids(native_.encode(text, addSpecialTokens, false));
    }

    // an encoding's ids as ints (DJL hands them out as longs)
    private static int[] ids(Encoding e) {
        long[] ids = e.getIds();
        int[] out = new int[ids.length];
        for (int i = 0; i < ids.length; i++) out[i] = Math.toIntExact(ids[i]);
        return out;
    }

    /**
     * The tokenizers library's batch encoding: the texts are encoded on its own thread pool (rayon's: as
     * many threads as cores, or RAYON_NUM_THREADS), so that a rollout round's hundreds of long prompts do
     * not wait on one core while the GPU idles.
     */
    @Override
    public List<int[]> encodeAll(List<String> texts) {
        if (texts.size() < 2) return Tokenizer.super.encodeAll(texts);
        Encoding[] enc = native_.batchEncode(texts, false, false);
        List<int[]> out = new ArrayList<>(enc.length);
        for (Encoding e : enc) out.add(ids(e));
        return out;
    }

    /**
     * The text of {@code ids}. An id inside the vocabulary's range that names no token (a gap: a vocabulary
     * whose added tokens sit past ids it leaves unused) decodes to nothing, as the tokenizers library and
     * transformers decode it: a model whose output layer covers the range can sample it, and its reply must
     * not stop the rollout. An id outside the range is an error naming it.
     */
    @Override
    public String decode(int[] ids, boolean skipSpecialTokens) {
        long[] wide = new long[ids.length];
        int n = 0;
        for (int i = 0; i < ids.length; i++) {
            if (ids[i] < 0 || ids[i] >= tokens.length) {
                throw new IllegalArgumentException("token id " + ids[i] + " at position " + i
                        + " is not in the vocabulary (ids 0.." + (tokens.length - 1) + ")");
            }
            if (tokens[ids[i]] != null) wide[n++] = ids[i];
        }
        String text = native_.decode(n == wide.length ? wide : java.util.Arrays.copyOf(wide, n), skipSpecialTokens);
        return cleanUpSpaces ? cleanUpTokenization(text) : text;
    }

    /** transformers' clean_up_tokenization, applied when tokenizer_config.json asks for it. */
    static String cleanUpTokenization(String s) {
        return s.replace(" .", ".").replace(" ?", "?").replace(" !", "!").replace(" ,", ",").replace(" ' ", "'")
                .replace(" n't", "n't").replace(" 'm", "'m").replace(" 's", "'s").replace(" 've", "'ve").replace(" 're", "'re");
    }

    @Override
    public int vocabSize() {
        return tokens.length;
    }

    @Override
    public OptionalInt tokenId(String token) {
        Integer id = ids.get(token);
        return id == null ? OptionalInt.empty() : OptionalInt.of(id);
    }

    @Override
    public String idToToken(int id) {
        if (id < 0 || id >= tokens.length || tokens[id] == null) {
            throw new IllegalArgumentException("token id " + id + " is not in the vocabulary (ids 0.." + (tokens.length - 1) + ")");
        }
        return tokens[id];
    }

    @Override
    public String eosToken() {
        return eosToken;
    }

    @Override
    public int eosTokenId() {
        return eosId;
    }

    @Override
    public Optional<String> bosToken() {
        return Optional.ofNullable(bosToken);
    }

    @Override
    public OptionalInt bosTokenId() {
        return bosToken == null ? OptionalInt.empty() : OptionalInt.of(ids.get(bosToken));
    }

    @Override
    public OptionalInt padTokenId() {
        return padId == null ? OptionalInt.empty() : OptionalInt.of(padId);
    }

    @Override
    public List<Integer> stopTokenIds() {
        return stopIds;
    }

    @Override
    public Optional<String> chatTemplate() {
        if (chatTemplateError != null) throw new TokenizerFileException(chatTemplateError);
        return Optional.ofNullable(chatTemplate);
    }

    @Override
    public Optional<Path> chatTemplateFile() {
        return Optional.ofNullable(chatTemplateFile);
    }

    @Override
    public Map<String, Object> templateContext() {
        return templateContext;
    }

    @Override
    public void close() {
        native_.close();
    }

    private int requireToken(Path dir, String key, String token) {
        Integer id = ids.get(token);
        if (id == null) {
            throw new TokenizerFileException(dir.resolve("tokenizer_config.json") + ": " + key + " '" + token
                    + "' is not a token of tokenizer.json");
        }
        return id;
    }

    private static JsonNode readJson(Path file) {
        try {
            return JSON.readTree(file.toFile());
        } catch (JsonProcessingException e) {
            throw new TokenizerFileException(file + ": not valid JSON (" + JsonProblem.describe(e) + ")" + JsonProblem.at(e.getLocation()), e);
        } catch (IOException e) {
            throw new TokenizerFileException(file + ": cannot read: " + e.getMessage(), e);
        }
    }

    /** generation_config.json eos_token_id (an int or a list of ints), if the file exists. */
    private static List<Integer> readGenerationEos(Path file, Vocabulary vocab) {
        if (!Files.exists(file)) return List.of();
        JsonNode eos = readJson(file).path("eos_token_id");
        List<Integer> out = new ArrayList<>();
        for (JsonNode n : eos.isArray() ? eos : List.of(eos)) {
            if (n.isMissingNode() || n.isNull()) continue;
            if (!n.canConvertToExactIntegral() || !n.canConvertToInt() || !vocab.has(n.asInt())) {
                throw new TokenizerFileException(file + ": eos_token_id " + n + " is not a token id of tokenizer.json");
            }
            out.add(n.asInt());
        }
        return out;
    }

    /** The id <-> token maps of tokenizer.json: model.vocab plus added_tokens. */
    private record Vocabulary(String[] tokens, Map<String, Integer> ids, Set<Integer> specialIds) {
        boolean has(int id) {
            return id >= 0 && id < tokens.length && tokens[id] != null;
        }

        // Streams the file rather than building a tree: a real tokenizer.json is ~10 MB, mostly merges we skip.
        static Vocabulary read(Path file) {
            Map<String, Integer> ids = HashMap.newHashMap(1 << 16);
            Set<Integer> special = new HashSet<>();
            try (JsonParser p = JSON.getFactory().createParser(file.toFile())) {
                expect(p, p.nextToken() == JsonToken.START_OBJECT, file, "a JSON object");
                boolean sawModel = false;
                while (p.nextToken() == JsonToken.FIELD_NAME) {
                    String field = p.currentName();
                    p.nextToken();
                    if (field.equals("model")) {
                        sawModel = true;
                        readModel(p, file, ids);
                    } else if (field.equals("added_tokens") && p.currentToken() == JsonToken.START_ARRAY) {
                        JsonNode list = JSON.readTree(p);
                        for (JsonNode t : list) {
                            JsonNode content = t.get("content");
                            JsonNode id = t.get("id");
                            expect(p, content != null && content.isTextual() && id != null && id.canConvertToInt() && id.asInt() >= 0,
                                    file, "added_tokens entries with \"id\" and \"content\" (found " + t + ")");
                            ids.put(content.asText(), id.asInt());
                            if (t.path("special").asBoolean(false)) special.add(id.asInt());
                        }
                    } else {
                        p.skipChildren();
                    }
                }
                expect(p, p.currentToken() == JsonToken.END_OBJECT && p.nextToken() == null, file, "one JSON object");
                expect(p, sawModel, file, "a \"model\" object");
            } catch (JsonProcessingException e) {
                throw new TokenizerFileException(file + ": not valid JSON (" + JsonProblem.describe(e) + ")" + JsonProblem.at(e.getLocation()), e);
            } catch (NoSuchFileException e) {
                throw new TokenizerFileException(file + ": missing", e);
            } catch (IOException e) {
                throw new TokenizerFileException(file + ": cannot read: " + e.getMessage(), e);
            }
            expect(null, !ids.isEmpty(), file, "a non-empty vocabulary");
            int size = Collections.max(ids.values()) + 1;
            String[] tokens = new String[size];
            ids.forEach((tok, id) -> tokens[id] = tok);
            return new Vocabulary(tokens, Collections.unmodifiableMap(ids), Set.copyOf(special));
        }

        /** model.vocab: an object token -> id (BPE, WordPiece, WordLevel) or a list of [piece, score] (Unigram). */
        private static void readModel(JsonParser p, Path file, Map<String, Integer> ids) throws IOException {
            expect(p, p.currentToken() == JsonToken.START_OBJECT, file, "\"model\" to be an object");
            while (p.nextToken() == JsonToken.FIELD_NAME) {
                String field = p.currentName();
                JsonToken t = p.nextToken();
                if (!field.equals("vocab")) {
                    p.skipChildren();
                } else if (t == JsonToken.START_OBJECT) {
                    while (p.nextToken() == JsonToken.FIELD_NAME) {
                        String tok = p.currentName();
                        expect(p, p.nextToken() == JsonToken.VALUE_NUMBER_INT && p.getIntValue() >= 0, file,
                                "model.vocab ids to be non-negative integers (at '" + tok + "')");
                        ids.put(tok, p.getIntValue());
                    }
                } else if (t == JsonToken.START_ARRAY) {
                    int id = 0;
                    while (p.nextToken() == JsonToken.START_ARRAY) {
                        expect(p, p.nextToken() == JsonToken.VALUE_STRING, file, "model.vocab entries [piece, score]");
                        ids.put(p.getText(), id++);
                        while (p.nextToken() != JsonToken.END_ARRAY) p.skipChildren();
                    }
                } else {
                    expect(p, false, file, "model.vocab to be an object or a list");
                }
            }
        }

        private static void expect(JsonParser p, boolean ok, Path file, String what) {
            if (!ok) {
                String where = p == null ? "" : " (line " + p.currentLocation().getLineNr() + ", column "
                        + p.currentLocation().getColumnNr() + ")";
                throw new TokenizerFileException(file + ": expected " + what + where);
            }
        }
    }

    /** What tokenizer_config.json (and special_tokens_map.json, chat_template.jinja) say. */
    private record Config(Map<String, String> specialTokens, List<String> additionalSpecialTokens, boolean cleanUpSpaces,
            String chatTemplate, Path chatTemplateFile, String chatTemplateError) {

        static Config read(Path dir) {
            Path file = dir.resolve("tokenizer_config.json");
            JsonNode cfg = Files.exists(file) ? readJson(file) : JSON.createObjectNode();
            if (!cfg.isObject()) throw new TokenizerFileException(file + ": expected a JSON object");
            Map<String, String> special = new HashMap<>();
            readSpecialTokens(file, cfg, special);
            Path mapFile = dir.resolve("special_tokens_map.json");
            JsonNode map = Files.exists(mapFile) ? readJson(mapFile) : JSON.createObjectNode();
            readSpecialTokens(mapFile, map, special); // overrides, as in transformers
            JsonNode extra = map.has("additional_special_tokens") ? map.get("additional_special_tokens")
                    : cfg.get("additional_special_tokens");
            List<String> additional = null;
            if (extra != null && !extra.isNull()) {
                Path from = map.has("additional_special_tokens") ? mapFile : file;
                if (!extra.isArray()) throw new TokenizerFileException(from + ": additional_special_tokens must be a list");
                additional = new ArrayList<>();
                for (JsonNode t : extra) additional.add(tokenContent(from, "additional_special_tokens", t));
                additional = List.copyOf(additional);
            }
            JsonNode cleanUp = cfg.path("clean_up_tokenization_spaces");
            if (!cleanUp.isMissingNode() && !cleanUp.isBoolean()) {
                throw new TokenizerFileException(file + ": clean_up_tokenization_spaces must be true or false, found " + cleanUp);
            }

            String template = null;
            String templateError = null;
            Path jinja = dir.resolve("chat_template.jinja");
            JsonNode t = cfg.path("chat_template");
            if (Files.exists(jinja)) {
                try {
                    template = Files.readString(jinja);
                } catch (IOException e) {
                    throw new TokenizerFileException(jinja + ": cannot read: " + e.getMessage(), e);
                }
            } else if (t.isTextual()) {
                template = t.asText();
            } else if (t.isArray()) {
                // [{"name": ..., "template": ...}]: transformers renders "default" unless told otherwise
                List<String> names = new ArrayList<>();
                for (JsonNode named : t) {
                    names.add(named.path("name").asText());
                    if (named.path("name").asText().equals("default") && named.path("template").isTextual()) {
                        template = named.get("template").asText();
                    }
                }
                if (template == null) {
                    templateError = file + ": chat_template lists templates " + names + " but none named \"default\"";
                }
            } else if (!t.isMissingNode() && !t.isNull()) {
                throw new TokenizerFileException(file + ": chat_template must be a string or a list of {name, template}, found "
                        + t.getNodeType());
            }
            Path templateFile = template == null ? null : Files.exists(jinja) ? jinja : file;
            return new Config(Map.copyOf(special), additional, cleanUp.asBoolean(false), template, templateFile, templateError);
        }

        private static void readSpecialTokens(Path file, JsonNode cfg, Map<String, String> into) {
            for (String key : SPECIAL_TOKEN_KEYS) {
                JsonNode v = cfg.get(key);
                if (v == null) continue;
                if (v.isNull()) {
                    into.remove(key);
                } else {
                    into.put(key, tokenContent(file, key, v));
                }
            }
        }

        /** A special token is a string or an AddedToken object {"content": ..., ...}. */
        private static String tokenContent(Path file, String key, JsonNode v) {
            if (v.isTextual()) return v.asText();
            if (v.isObject() && v.path("content").isTextual()) return v.get("content").asText();
            throw new TokenizerFileException(file + ": " + key + " must be a string or an object with \"content\", found " + v);
        }
    }

    @Override
    public String toString() {
        return "HfTokenizer[vocab " + tokens.length + ", eos " + eosToken + ", stop " + stopIds + "]";
    }
}

// BuiltinTokenizer.java — the small tokenizer of the synthetic tasks (arithmetic questions and
// answers, tagged agent outputs), written out as a standard tokenizer.json + tokenizer_config.json so
// that HfTokenizer.load serves it like any HF tokenizer (one loading path), and so that HF
// transformers can load a folder drmas saves with it.
//
// Layout of the ids (stable: checkpoints trained with it depend on it):
//   0 .. 13    added tokens: <|endoftext|> <|im_start|> <|im_end|> (special), then the agent tags
//              <think> </think> <verify> </verify> <search> </search> <answer> </answer>
//              <information> </information> and "\boxed{" (not special: decode keeps them even when
//              skipping special tokens, like Qwen3's <think>)
//   14         "\n"
//   15 .. 109  the printable ASCII characters ' ' .. '~', in code order
//   110 .. 365 the bytes <0x00> .. <0xFF>
// A character-level BPE with no merges: every printable ASCII character and newline is one token;
// any other character (tab, é, emoji) becomes the tokens of its UTF-8 bytes (byte_fallback), so
// nothing is unknown and decode(encode(s)) == s for every string. The decoder turns byte tokens back
// into UTF-8 (ByteFallback) and joins tokens without separators (Fuse). eos is <|im_end|> and pad is
// <|endoftext|>, as in Qwen3; there is no bos and no chat template (chat goes through ChatMl).
package dev.drmas.tokenizer;

import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;

public final class BuiltinTokenizer {
    private BuiltinTokenizer() {
    }

    /** Special tokens: skipped by decode(ids, true). */
    public static final List<String> SPECIAL_TOKENS = List.of("<|endoftext|>", "<|im_start|>", "<|im_end|>");
    /** The agents' tags and the answer marker: single tokens, kept by every decode. */
    public static final List<String> TAG_TOKENS = List.of("<think>", "</think>", "<verify>", "</verify>", "<search>",
            "</search>", "<answer>", "</answer>", "<information>", "</information>", "\\boxed{");

    /** Its vocabulary: the added tokens, "\n", the 95 printable ASCII characters and the 256 bytes (366 ids). */
    public static final int VOCAB_SIZE = SPECIAL_TOKENS.size() + TAG_TOKENS.size() + 1 + 95 + 256;

    public static final String EOS_TOKEN = "<|im_end|>";
    public static final String PAD_TOKEN = "<|endoftext|>";

    /** Writes tokenizer.json and tokenizer_config.json into {@code dir} (created if needed), replacing existing ones. */
    public static void writeTo(Path dir) {
        Map<String, Integer> vocab = new LinkedHashMap<>();
        List<Map<String, Object>> added = new ArrayList<>();
        for (String t : SPECIAL_TOKENS) added.add(addedToken(vocab, t, true));
        for (String t : TAG_TOKENS) added.add(addedToken(vocab, t, false));
        vocab.put("\n", vocab.size());
        for (char c = ' '; c <= '~'; c++) vocab.put(String.valueOf(c), vocab.size());
        for (int b = 0; b < 256; b++) vocab.put(String.format(Locale.ROOT, "<0x%02X>", b), vocab.size());

        Map<String, Object> model = new LinkedHashMap<>();
        model.put("type", "BPE");
        model.put("dropout", null);
        model.put("unk_token", null);
        model.put("continuing_subword_prefix", null);
        model.put("end_of_word_suffix", null);
        model.put("fuse_unk", false);
        model.put("byte_fallback", true);
        model.put("ignore_merges", false);
        model.put("vocab", vocab);
        model.put("merges", List.of());

        Map<String, Object> tokenizer = new LinkedHashMap<>();
        tokenizer.put("version", "1.0");
        tokenizer.put("truncation", null);
        tokenizer.put("padding", null);
        tokenizer.put("added_tokens", added);
        tokenizer.put("normalizer", null);
        tokenizer.put("pre_tokenizer", null);
        tokenizer.put("post_processor", null);
        tokenizer.put("decoder", Map.of("type", "Sequence",
                "decoders", List.of(Map.of("type", "ByteFallback"), Map.of("type", "Fuse"))));
        tokenizer.put("model", model);

        Map<String, Object> config = new LinkedHashMap<>();
        config.put("tokenizer_class", "PreTrainedTokenizerFast");
        config.put("bos_token", null);
        config.put("eos_token", EOS_TOKEN);
        config.put("pad_token", PAD_TOKEN);
        config.put("unk_token", null);
        config.put("additional_special_tokens", List.of("<|im_start|>", "<|im_end|>"));
        config.put("clean_up_tokenization_spaces", false);

        ObjectMapper json = new ObjectMapper();
        try {
            Files.createDirectories(dir);
            json.writerWithDefaultPrettyPrinter().writeValue(dir.resolve("tokenizer.json").toFile(), tokenizer);
            json.writerWithDefaultPrettyPrinter().writeValue(dir.resolve("tokenizer_config.json").toFile(), config);
        } catch (IOException e) {
            throw new UncheckedIOException(dir + ": cannot write the built-in tokenizer: " + e.getMessage(), e);
        }
    }

    /** The built-in tokenizer, loaded through HfTokenizer from files written to a temporary folder (deleted again). */
    public static HfTokenizer load() {
        Path dir = null;
        try {
            dir = Files.createTempDirectory("drmas-builtin-tokenizer");
            writeTo(dir);
            return HfTokenizer.load(dir);
        } catch (IOException e) {
            throw new UncheckedIOException("cannot create a temporary folder for the built-in tokenizer: " + e.getMessage(), e);
        } finally {
            if (dir != null) deleteQuietly(dir);
        }
    }

    private static Map<String, Object> addedToken(Map<String, Integer> vocab, String content, boolean special) {
        int id = vocab.size();
        // In model.vocab as well: the tokenizers library re-derives added-token ids from the model vocab.
        vocab.put(content, id);
        Map<String, Object> t = new LinkedHashMap<>();
        t.put("id", id);
        t.put("content", content);
        t.put("single_word", false);
        t.put("lstrip", false);
        t.put("rstrip", false);
        t.put("normalized", false);
        t.put("special", special);
        return t;
    }

    private static void deleteQuietly(Path dir) {
        try (var files = Files.list(dir)) {
            for (Path f : files.toList()) Files.deleteIfExists(f);
            Files.deleteIfExists(dir);
        } catch (IOException e) {
            // a leftover temporary folder is harmless; the tokenizer is already in memory
        }
    }
}

// Qwen3TokenizerTest.java — the real Qwen3 tokenizer (shared fixture) through HfTokenizer: round
// trips, special tokens and ordinary words mapping to the ids that tokenizer.json itself lists (read
// here with Jackson, independently of the code under test), and the special tokens and stop ids of
// tokenizer_config.json. Skipped, with a message, where the fixture is absent.
package dev.drmas.tokenizer;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.drmas.testing.Fixtures;
import java.io.IOException;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.OptionalInt;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

class Qwen3TokenizerTest {
    static HfTokenizer tok;
    static JsonNode vocab; // model.vocab of tokenizer.json
    static Map<String, Integer> added = new HashMap<>(); // added_tokens content -> id
    static Map<String, Boolean> addedSpecial = new HashMap<>();
    static JsonNode config; // tokenizer_config.json

    // Loaded once when the fixture exists; each test then skips with Fixtures' message when it does not
    // (an assumption failing in @BeforeAll would drop the tests from the report without that message).
    @BeforeAll
    static void load() throws IOException {
        Optional<Path> found = Fixtures.find("qwen3-tokenizer");
        if (found.isEmpty()) return;
        Path dir = found.get();
        ObjectMapper json = new ObjectMapper();
        JsonNode file = json.readTree(dir.resolve("tokenizer.json").toFile());
        vocab = file.get("model").get("vocab");
        for (JsonNode t : file.get("added_tokens")) {
            added.put(t.get("content").asText(), t.get("id").asInt());
            addedSpecial.put(t.get("content").asText(), t.get("special").asBoolean());
        }
        config = json.readTree(dir.resolve("tokenizer_config.json").toFile());
        tok = HfTokenizer.load(dir);
    }

    @BeforeEach
    void requireFixture() {
        Fixtures.qwen3Tokenizer();
    }

    @AfterAll
    static void close() {
        if (tok != null) tok.close();
    }

    static int v(String token) {
        assertTrue(vocab.has(token), token + " is in model.vocab");
        return vocab.get(token).asInt();
    }

    @Test
    void ordinaryWordsMapToTheirVocabularyIds() {
        assertArrayEquals(new int[] {v("Hello")}, tok.encode("Hello"));
        assertArrayEquals(new int[] {v("Ġworld")}, tok.encode(" world"));
        assertArrayEquals(new int[] {v("Hello"), v("Ġworld"), v("!")}, tok.encode("Hello world!"));
        assertArrayEquals(new int[] {v("Ċ")}, tok.encode("\n"));
        assertEquals(OptionalInt.of(v("Ġworld")), tok.tokenId("Ġworld"));
        assertEquals("Ġworld", tok.idToToken(v("Ġworld")));
        assertEquals(OptionalInt.empty(), tok.tokenId("not a token of Qwen3"));
    }

    @Test
    void everyAddedTokenEncodesToExactlyItsId() {
        assertEquals(26, added.size());
        added.forEach((content, id) -> {
            assertArrayEquals(new int[] {id}, tok.encode(content), content);
            assertEquals(content, tok.idToToken(id));
            assertEquals(content, tok.decode(new int[] {id}, false));
        });
    }

    @Test
    void specialTokensInsideTextAreSingleIdsAtTheirPlace() {
        int[] ids = tok.encode("<|im_start|>user\nHi<|im_end|>\n<think>\n</think>");
        assertEquals(added.get("<|im_start|>"), ids[0]);
        assertArrayEquals(new int[] {v("user"), v("Ċ"), v("Hi")}, java.util.Arrays.copyOfRange(ids, 1, 4));
        assertEquals(added.get("<|im_end|>"), ids[4]);
        assertEquals(v("Ċ"), ids[5]);
        assertEquals(added.get("<think>"), ids[6]);
        assertEquals(added.get("</think>"), ids[ids.length - 1]);
    }

    @ParameterizedTest
    @ValueSource(strings = {
            "The quick brown fox jumps over the lazy dog.",
            "naïve café — 東京タワー, Ελληνικά, emoji 😀🚀 and math ∑ x² ≤ π",
            "def f(x):\n    return {\"k\": [x ** 2, x // 3]}  # comment\n\tindented\r\n",
            "<|im_start|>system\nYou are helpful.<|im_end|>\n<|im_start|>user\nWhat is 2+3?<|im_end|>\n"
                    + "<|im_start|>assistant\n<think>\nadd them\n</think>\n\nThe answer is 5.<|im_end|><|endoftext|>",
            "  leading and trailing spaces  ",
            ""})
    void decodeOfEncodeGivesTheTextBack(String text) {
        assertEquals(text, tok.decode(tok.encode(text), false));
    }

    @Test
    void encodingManyTextsTogetherGivesEachTextsOwnIds() {
        // the batch (the tokenizers library's threads) must be encode() of each, in order: special tokens, other
        // scripts, an empty text, and texts far past DJL's default truncation of 512 tokens
        StringBuilder longText = new StringBuilder();
        for (int i = 0; i < 900; i++) longText.append("step ").append(i).append(": x^2 + ").append(i % 7).append("x = \\frac{1}{2}\n");
        List<String> texts = List.of("<|im_start|>user\nWhat is 2+3?<|im_end|>\n<|im_start|>assistant\n", "naïve café 東京タワー 😀",
                "", longText.toString(), longText + "<|im_end|>", "  spaced  ");
        List<int[]> all = tok.encodeAll(texts);
        assertEquals(texts.size(), all.size());
        for (int i = 0; i < texts.size(); i++) assertArrayEquals(tok.encode(texts.get(i)), all.get(i), "text " + i);
        assertTrue(all.get(3).length > 2000, "not truncated: " + all.get(3).length);
        assertEquals(List.of(), tok.encodeAll(List.of()));
    }

    @Test
    void skippingSpecialTokensDropsOnlyThoseMarkedSpecial() {
        // in Qwen3's tokenizer.json <|im_start|>/<|im_end|> are special, <think> is not
        assertTrue(addedSpecial.get("<|im_start|>"));
        assertFalse(addedSpecial.get("<think>"));
        int[] ids = tok.encode("<|im_start|>assistant\n<think>ok</think>5<|im_end|>");
        assertEquals("assistant\n<think>ok</think>5", tok.decode(ids, true));
    }

    @Test
    void addSpecialTokensAddsNothingForQwen3sByteLevelPostProcessor() {
        assertArrayEquals(tok.encode("Hello world", false), tok.encode("Hello world", true));
        assertArrayEquals(tok.encode("Hello world", false), tok.encode("Hello world"));
    }

    @Test
    void vocabularySizeCountsModelVocabularyAndAddedTokens() {
        int maxId = added.values().stream().mapToInt(Integer::intValue).max().orElseThrow();
        for (JsonNode id : vocab) maxId = Math.max(maxId, id.asInt());
        assertEquals(maxId + 1, tok.vocabSize());
        assertEquals(vocab.size() + added.size(), tok.vocabSize()); // Qwen3's ids have no holes
    }

    @Test
    void specialTokensComeFromTokenizerConfig() {
        String eos = config.get("eos_token").asText();
        assertEquals("<|im_end|>", eos);
        assertEquals(eos, tok.eosToken());
        assertEquals(added.get(eos), tok.eosTokenId());
        assertEquals(OptionalInt.of(added.get(config.get("pad_token").asText())), tok.padTokenId());
        assertTrue(config.get("bos_token").isNull());
        assertEquals(Optional.empty(), tok.bosToken());
        assertEquals(OptionalInt.empty(), tok.bosTokenId());
        // no generation_config.json in the fixture: eos, then the end-of-text marker
        assertEquals(List.of(added.get("<|im_end|>"), added.get("<|endoftext|>")), tok.stopTokenIds());
    }

    @Test
    void chatTemplateAndItsContextAreTokenizerConfigs() {
        assertEquals(Optional.of(config.get("chat_template").asText()), tok.chatTemplate());
        Map<String, Object> ctx = tok.templateContext();
        assertEquals("<|im_end|>", ctx.get("eos_token"));
        assertEquals("<|endoftext|>", ctx.get("pad_token"));
        assertFalse(ctx.containsKey("bos_token"));
        assertFalse(ctx.containsKey("unk_token"));
        assertEquals(config.get("additional_special_tokens").size(), ((List<?>) ctx.get("additional_special_tokens")).size());
    }

    @Test
    void idsOutsideTheVocabularyAreRejected() {
        int n = tok.vocabSize();
        var e = assertThrows(IllegalArgumentException.class, () -> tok.decode(new int[] {1, n}, false));
        assertTrue(e.getMessage().contains("token id " + n + " at position 1"), e.getMessage());
        assertThrows(IllegalArgumentException.class, () -> tok.decode(new int[] {-1}, false));
        assertThrows(IllegalArgumentException.class, () -> tok.idToToken(n));
    }
}

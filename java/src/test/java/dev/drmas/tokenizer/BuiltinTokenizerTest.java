// BuiltinTokenizerTest.java — the built-in tokenizer, written to files and loaded back through
// HfTokenizer: the documented id layout, one token per character, tags and special tokens as single
// ids, exact round trips on random arithmetic and agent outputs, and characters outside printable
// ASCII carried as their UTF-8 bytes.
package dev.drmas.tokenizer;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Optional;
import java.util.OptionalInt;
import java.util.Random;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class BuiltinTokenizerTest {
    @TempDir
    static Path dir;
    static HfTokenizer tok;
    static JsonNode vocab; // model.vocab of the written tokenizer.json

    @BeforeAll
    static void writeAndLoad() throws IOException {
        BuiltinTokenizer.writeTo(dir);
        vocab = new ObjectMapper().readTree(dir.resolve("tokenizer.json").toFile()).get("model").get("vocab");
        tok = HfTokenizer.load(dir);
    }

    @AfterAll
    static void close() {
        tok.close();
    }

    @org.junit.jupiter.api.Test
    void vocabSizeConstantIsTheWrittenVocabulary() {
        org.junit.jupiter.api.Assertions.assertEquals(BuiltinTokenizer.VOCAB_SIZE, tok.vocabSize());
        org.junit.jupiter.api.Assertions.assertEquals(366, BuiltinTokenizer.VOCAB_SIZE);
    }

    static int v(String token) {
        assertTrue(vocab.has(token), token);
        return vocab.get(token).asInt();
    }

    @Test
    void idsFollowTheDocumentedLayout() {
        List<String> added = new ArrayList<>(BuiltinTokenizer.SPECIAL_TOKENS);
        added.addAll(BuiltinTokenizer.TAG_TOKENS);
        for (int i = 0; i < added.size(); i++) assertEquals(i, v(added.get(i)), added.get(i));
        assertEquals(14, v("\n"));
        assertEquals(15, v(" "));
        assertEquals(15 + ('0' - ' '), v("0"));
        assertEquals(109, v("~"));
        assertEquals(110, v("<0x00>"));
        assertEquals(365, v("<0xFF>"));
        assertEquals(366, vocab.size());
        assertEquals(366, tok.vocabSize());
    }

    @Test
    void specialTokensAndStopIds() {
        assertEquals("<|im_end|>", tok.eosToken());
        assertEquals(v("<|im_end|>"), tok.eosTokenId());
        assertEquals(OptionalInt.of(v("<|endoftext|>")), tok.padTokenId());
        assertEquals(Optional.empty(), tok.bosToken());
        assertEquals(List.of(v("<|im_end|>"), v("<|endoftext|>")), tok.stopTokenIds());
        assertEquals(Optional.empty(), tok.chatTemplate());
        assertEquals("<|im_end|>", tok.templateContext().get("eos_token"));
        assertEquals("<|endoftext|>", tok.templateContext().get("pad_token"));
    }

    @Test
    void everyPrintableCharacterIsOneToken() {
        StringBuilder all = new StringBuilder("\n");
        for (char c = ' '; c <= '~'; c++) all.append(c);
        int[] ids = tok.encode(all.toString());
        assertEquals(all.length(), ids.length);
        for (int i = 0; i < ids.length; i++) assertEquals(v(String.valueOf(all.charAt(i))), ids[i]);
        assertEquals(all.toString(), tok.decode(ids, false));
    }

    @Test
    void tagsAndSpecialTokensAreSingleTokensEvenInsideText() {
        for (String t : BuiltinTokenizer.SPECIAL_TOKENS) assertArrayEquals(new int[] {v(t)}, tok.encode(t), t);
        for (String t : BuiltinTokenizer.TAG_TOKENS) assertArrayEquals(new int[] {v(t)}, tok.encode(t), t);
        assertArrayEquals(new int[] {v("x"), v("<answer>"), v("4"), v("2"), v("</answer>"), v("y")},
                tok.encode("x<answer>42</answer>y"));
        assertArrayEquals(new int[] {v("\\boxed{"), v("7"), v("}")}, tok.encode("\\boxed{7}"));
    }

    @Test
    void encodingManyTextsTogetherGivesEachTextsOwnIds() {
        StringBuilder longText = new StringBuilder();
        for (int i = 0; i < 300; i++) longText.append("<search>q").append(i).append("</search> 12+").append(i).append("=? ");
        List<String> texts = List.of("<|im_start|>user\n3+4<|im_end|>", "", longText.toString(), "\\boxed{7}");
        List<int[]> all = tok.encodeAll(texts);
        for (int i = 0; i < texts.size(); i++) assertArrayEquals(tok.encode(texts.get(i)), all.get(i), "text " + i);
        assertTrue(all.get(2).length > 3000, "not truncated: " + all.get(2).length);
    }

    @Test
    void skippingSpecialTokensKeepsTheTags() {
        int[] ids = tok.encode("<|im_start|>assistant\n<think>2+2</think><answer>\\boxed{4}</answer><|im_end|><|endoftext|>");
        assertEquals("assistant\n<think>2+2</think><answer>\\boxed{4}</answer>", tok.decode(ids, true));
    }

    @Test
    void randomArithmeticAndAgentOutputsRoundTripExactly() {
        Random rnd = new Random(20261129);
        String[] ops = {"+", "-", "*", "/"};
        for (int i = 0; i < 300; i++) {
            int a = rnd.nextInt(10_000) - 5_000;
            int b = rnd.nextInt(1_000);
            String op = ops[rnd.nextInt(ops.length)];
            String q = String.format(Locale.ROOT, "What is %d %s %d?", a, op, b);
            String text = switch (i % 4) {
                case 0 -> q;
                case 1 -> "<think>\n" + a + op + b + " = ?\n</think>\n<answer>\\boxed{" + (a + b) + "}</answer>";
                case 2 -> "<search>" + q + "</search>\n<information>" + a + "</information>";
                default -> "<|im_start|>user\n" + q + "<|im_end|>\n<|im_start|>assistant\n<verify>" + (rnd.nextBoolean()
                        ? "correct" : "wrong") + "</verify><|im_end|>";
            };
            assertEquals(text, tok.decode(tok.encode(text), false), text);
        }
        for (int i = 0; i < 200; i++) { // arbitrary printable ASCII, including partial tags like "<ans" and "\boxed"
            char[] cs = new char[rnd.nextInt(60)];
            for (int j = 0; j < cs.length; j++) cs[j] = rnd.nextInt(20) == 0 ? '\n' : (char) (' ' + rnd.nextInt(95));
            String text = new String(cs) + "<ans\\boxed";
            assertEquals(text, tok.decode(tok.encode(text), false));
        }
    }

    @Test
    void longTextsAreNeitherTruncatedNorPadded() {
        String text = "12345+67890=80235\n".repeat(1000); // far beyond DJL's default 512-token limit
        int[] ids = tok.encode(text);
        assertEquals(text.length(), ids.length);
        assertEquals(text, tok.decode(ids, false));
        assertEquals(1, tok.encode("7").length);
    }

    @Test
    void charactersOutsidePrintableAsciiBecomeTheirUtf8Bytes() {
        String text = "é\t😀";
        List<Integer> expected = new ArrayList<>();
        for (byte b : text.getBytes(StandardCharsets.UTF_8)) expected.add(v(String.format(Locale.ROOT, "<0x%02X>", b & 0xff)));
        assertEquals(7, expected.size());
        assertEquals(expected, java.util.Arrays.stream(tok.encode(text)).boxed().toList());
        assertEquals(text, tok.decode(tok.encode(text), false));
        assertEquals("a\r\nb ∑ 東京", tok.decode(tok.encode("a\r\nb ∑ 東京"), false));
    }

    @Test
    void loadWritesToATemporaryFolderAndGivesTheSameTokenizer() {
        try (HfTokenizer other = BuiltinTokenizer.load()) {
            assertEquals(tok.vocabSize(), other.vocabSize());
            String text = "<think>1+1</think>é";
            assertArrayEquals(tok.encode(text), other.encode(text));
        }
    }
}

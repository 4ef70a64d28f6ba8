// TokenizerFilesTest.java — what HfTokenizer.load makes of the files around tokenizer.json, on
// folders written by BuiltinTokenizer and then edited: bad files give an error naming the file and
// the problem; AddedToken objects, special_tokens_map.json, generation_config.json, listed chat
// templates, chat_template.jinja and clean_up_tokenization_spaces are read as transformers reads them;
// an id in a gap of the vocabulary decodes to nothing, as the tokenizers library decodes it.
package dev.drmas.tokenizer;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.OptionalInt;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class TokenizerFilesTest {
    @TempDir
    Path dir;

    Path builtin() {
        BuiltinTokenizer.writeTo(dir);
        return dir;
    }

    void write(String name, String text) throws IOException {
        Files.writeString(dir.resolve(name), text);
    }

    String loadFails(Path d) {
        return assertThrows(TokenizerFileException.class, () -> HfTokenizer.load(d).close()).getMessage();
    }

    static void assertContains(String message, String... parts) {
        for (String p : parts) assertTrue(message.contains(p), "'" + p + "' in: " + message);
    }

    @Test
    void missingFolder() {
        Path missing = dir.resolve("nope");
        assertContains(loadFails(missing), missing.toString(), "no such directory");
    }

    @Test
    void folderWithoutTokenizerJson() throws IOException {
        write("tokenizer_config.json", "{}");
        assertContains(loadFails(dir), dir.resolve("tokenizer.json").toString(), "missing");
    }

    @Test
    void truncatedTokenizerJson() throws IOException {
        String full = Files.readString(builtin().resolve("tokenizer.json"));
        write("tokenizer.json", full.substring(0, full.length() / 2));
        assertContains(loadFails(dir), dir.resolve("tokenizer.json").toString(), "not valid JSON", "line ");
    }

    @Test
    void tokenizerJsonThatIsNotATokenizer() throws IOException {
        builtin();
        write("tokenizer.json", "[1, 2]");
        assertContains(loadFails(dir), "tokenizer.json", "expected a JSON object");
        write("tokenizer.json", "{\"version\": \"1.0\"}");
        assertContains(loadFails(dir), "tokenizer.json", "\"model\"");
        write("tokenizer.json", "{\"model\": {\"type\": \"NoSuchModel\", \"vocab\": {\"a\": 0}}}");
        assertContains(loadFails(dir), "tokenizer.json", "the tokenizers library rejects it");
    }

    @Test
    void corruptTokenizerConfig() throws IOException {
        builtin();
        write("tokenizer_config.json", "{\"eos_token\": \"<|im_end|>\",,}");
        assertContains(loadFails(dir), dir.resolve("tokenizer_config.json").toString(), "not valid JSON", "line 1");
        write("tokenizer_config.json", "{\"eos_token\": 42}");
        assertContains(loadFails(dir), "tokenizer_config.json", "eos_token must be a string or an object with \"content\"");
    }

    @Test
    void specialTokenThatIsNotInTheVocabulary() throws IOException {
        builtin();
        write("tokenizer_config.json", "{\"eos_token\": \"</s>\"}");
        assertContains(loadFails(dir), "tokenizer_config.json", "eos_token '</s>' is not a token of tokenizer.json");
    }

    @Test
    void noEosTokenAnywhere() throws IOException {
        builtin();
        Files.delete(dir.resolve("tokenizer_config.json"));
        assertContains(loadFails(dir), dir.toString(), "no eos_token");
    }

    @Test
    void specialTokensAsAddedTokenObjectsAndFromSpecialTokensMap() throws IOException {
        builtin();
        write("tokenizer_config.json", """
                {"eos_token": {"__type": "AddedToken", "content": "<|endoftext|>", "special": true},
                 "bos_token": {"content": "<|im_start|>"}, "pad_token": null}""");
        try (HfTokenizer t = HfTokenizer.load(dir)) {
            assertEquals("<|endoftext|>", t.eosToken());
            assertEquals(Optional.of("<|im_start|>"), t.bosToken());
            assertEquals(t.tokenId("<|im_start|>"), t.bosTokenId());
            assertEquals(OptionalInt.empty(), t.padTokenId());
            assertEquals("<|im_start|>", t.templateContext().get("bos_token"));
        }
        write("special_tokens_map.json", "{\"eos_token\": \"<|im_end|>\", \"pad_token\": {\"content\": \"<|endoftext|>\"}}");
        try (HfTokenizer t = HfTokenizer.load(dir)) {
            assertEquals("<|im_end|>", t.eosToken()); // the map overrides tokenizer_config.json, as in transformers
            assertEquals(t.tokenId("<|endoftext|>"), t.padTokenId());
        }
        // sep, cls and mask reach the template by name too, as transformers passes its whole map
        write("tokenizer_config.json", """
                {"eos_token": "<|im_end|>", "sep_token": "<|im_start|>", "cls_token": {"content": "[CLS]"}, "mask_token": "[MASK]",
                 "chat_template": "{{ cls_token }}{% for m in messages %}{{ m.content }}{{ sep_token }}{% endfor %}{{ mask_token }}"}""");
        try (HfTokenizer t = HfTokenizer.load(dir)) {
            assertEquals("[CLS]a<|im_start|>b<|im_start|>[MASK]", ChatRenderers.forTokenizer(t).render(
                    List.of(Map.of("role", "user", "content", "a"), Map.of("role", "user", "content", "b")), false));
        }
    }

    @Test
    void generationConfigAddsStopIds() throws IOException {
        builtin();
        int think = 3; // <think>: an odd stop token, so that it cannot come from elsewhere
        write("generation_config.json", "{\"eos_token_id\": [2, " + think + "], \"do_sample\": true}");
        try (HfTokenizer t = HfTokenizer.load(dir)) {
            assertEquals("<think>", t.idToToken(think));
            assertEquals(List.of(2, think, 0), t.stopTokenIds()); // eos, generation_config, <|endoftext|>
        }
        write("generation_config.json", "{\"eos_token_id\": 100000}");
        assertContains(loadFails(dir), "generation_config.json", "eos_token_id 100000 is not a token id");
        write("generation_config.json", "{\"eos_token_id\": ");
        assertContains(loadFails(dir), "generation_config.json", "not valid JSON");
        // cut short inside a list: the parser's text named a "Source: REDACTED" and its settings
        write("generation_config.json", "{\"eos_token_id\": [1, 2");
        assertEquals(dir.resolve("generation_config.json") + ": not valid JSON (unexpected end-of-input: expected close marker for Array)"
                + " at line 1, column 23", loadFails(dir));
    }

    @Test
    void chatTemplateAsStringListOrJinjaFile() throws IOException {
        builtin();
        write("tokenizer_config.json", """
                {"eos_token": "<|im_end|>", "chat_template": [{"name": "tool_use", "template": "T"},
                 {"name": "default", "template": "{% for m in messages %}[{{ m.role }}]{{ m.content }}{% endfor %}{{ eos_token }}"}]}""");
        try (HfTokenizer t = HfTokenizer.load(dir)) {
            assertEquals(Optional.of("{% for m in messages %}[{{ m.role }}]{{ m.content }}{% endfor %}{{ eos_token }}"), t.chatTemplate());
            // the default template renders, with the tokenizer's special tokens in its context
            assertEquals("[user]hi<|im_end|>",
                    ChatRenderers.forTokenizer(t).render(List.of(java.util.Map.of("role", "user", "content", "hi")), true));
        }
        write("tokenizer_config.json", "{\"eos_token\": \"<|im_end|>\", \"chat_template\": [{\"name\": \"rag\", \"template\": \"R\"}]}");
        try (HfTokenizer t = HfTokenizer.load(dir)) {
            var e = assertThrows(TokenizerFileException.class, t::chatTemplate);
            assertContains(e.getMessage(), "tokenizer_config.json", "[rag]", "none named \"default\"");
            assertThrows(TokenizerFileException.class, () -> ChatRenderers.forTokenizer(t));
        }
        write("chat_template.jinja", "{% for m in messages %}{{ m.content }}{% endfor %}");
        try (HfTokenizer t = HfTokenizer.load(dir)) {
            assertEquals(Optional.of("{% for m in messages %}{{ m.content }}{% endfor %}"), t.chatTemplate());
        }
    }

    @Test
    void anIdInAGapOfTheVocabularyDecodesToNothing() throws IOException {
        // a token five ids past the rest (in the model's vocabulary, where the tokenizers library keeps its id):
        // ids size .. size + 4 name no token, yet a model whose output layer covers them can sample one; the
        // tokenizers library decodes it to nothing, and so must decode
        builtin();
        var json = new com.fasterxml.jackson.databind.ObjectMapper();
        var tj = (com.fasterxml.jackson.databind.node.ObjectNode) json.readTree(dir.resolve("tokenizer.json").toFile());
        int size = BuiltinTokenizer.VOCAB_SIZE, extra = size + 5;
        ((com.fasterxml.jackson.databind.node.ObjectNode) tj.get("model").get("vocab")).put("<|extra|>", extra);
        ((com.fasterxml.jackson.databind.node.ArrayNode) tj.get("added_tokens")).addObject().put("id", extra).put("content", "<|extra|>")
                .put("single_word", false).put("lstrip", false).put("rstrip", false).put("normalized", false).put("special", true);
        json.writeValue(dir.resolve("tokenizer.json").toFile(), tj);
        try (HfTokenizer t = HfTokenizer.load(dir)) {
            assertEquals(extra + 1, t.vocabSize());
            int[] hi = t.encode("Hi");
            int[] withGap = new int[hi.length + 2];
            System.arraycopy(hi, 0, withGap, 0, hi.length);
            withGap[hi.length] = size + 2;
            withGap[hi.length + 1] = extra;
            assertEquals("Hi<|extra|>", t.decode(withGap, false));
            assertEquals("Hi", t.decode(withGap, true));
            assertEquals("", t.decode(new int[] {size, size + 4}, false));
            var out = assertThrows(IllegalArgumentException.class, () -> t.decode(new int[] {hi[0], extra + 1}, false));
            assertContains(out.getMessage(), "token id " + (extra + 1) + " at position 1 is not in the vocabulary (ids 0.." + extra + ")");
            assertThrows(IllegalArgumentException.class, () -> t.decode(new int[] {-1}, false));
        }
    }

    @Test
    void cleanUpTokenizationSpacesWhenTheConfigAsksForIt() throws IOException {
        builtin();
        String text = "Hi , it 's done .";
        try (HfTokenizer t = HfTokenizer.load(dir)) {
            assertEquals(text, t.decode(t.encode(text), false));
        }
        write("tokenizer_config.json", "{\"eos_token\": \"<|im_end|>\", \"clean_up_tokenization_spaces\": true}");
        try (HfTokenizer t = HfTokenizer.load(dir)) {
            assertEquals("Hi, it's done.", t.decode(t.encode(text), false));
        }
    }

    @Test
    void aChatTemplateThatFailsNamesItsFileAndLine() throws IOException {
        builtin();
        List<java.util.Map<String, Object>> twoUsers = List.of(java.util.Map.of("role", "user", "content", "a"),
                java.util.Map.of("role", "user", "content", "b"));
        write("tokenizer_config.json", "{\"eos_token\": \"<|im_end|>\", \"chat_template\": \"{% for m in messages %}\\n{% if %}\"}");
        try (HfTokenizer t = HfTokenizer.load(dir)) {
            var e = assertThrows(TokenizerFileException.class, () -> ChatRenderers.forTokenizer(t));
            assertContains(e.getMessage(), dir.resolve("tokenizer_config.json") + ": chat_template does not parse", "line 2:");
        }
        write("chat_template.jinja", "{% for m in messages %}{% if loop.index0 > 0 and m.role == messages[loop.index0 - 1].role %}"
                + "{{ raise_exception('roles must alternate') }}{% endif %}{{ m.content }}{% endfor %}");
        try (HfTokenizer t = HfTokenizer.load(dir)) {
            ChatRenderer chat = ChatRenderers.forTokenizer(t);
            assertEquals("a", chat.render(twoUsers.subList(0, 1), false));
            var e = assertThrows(TokenizerFileException.class, () -> chat.render(twoUsers, true));
            assertContains(e.getMessage(), dir.resolve("chat_template.jinja") + ": chat_template fails on 2 messages (roles user, user)",
                    "roles must alternate", "line 1:");
        }
    }
}

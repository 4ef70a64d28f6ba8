// ChatMlFallbackTest.java — the ChatML fallback warns, once per model, where ChatML does not suit a
// tokenizer without a chat template: a Llama-like base folder (a bos_token, which ChatML never
// writes) and one whose vocabulary lacks <|im_start|> and <|im_end|> (the markers become plain
// text); the built-in tokenizer and a folder with a template get no warning.
package dev.drmas.tokenizer;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.IOException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

public class ChatMlFallbackTest {
    @TempDir
    Path tmp;

    static final ObjectMapper JSON = new ObjectMapper();

    /**
     * The built-in tokenizer with Llama 3's <|begin_of_text|> (bos) and <|eot_id|> (eos) added, as a
     * Llama base model's folder has them: no chat template; with {@code chatMlTokens} false its
     * <|im_start|> and <|im_end|> are renamed to reserved tokens, as a real Llama vocabulary has none.
     */
    public static Path llamaBase(Path dir, boolean chatMlTokens, String template) throws IOException {
        BuiltinTokenizer.writeTo(dir);
        ObjectNode tj = (ObjectNode) JSON.readTree(dir.resolve("tokenizer.json").toFile());
        ObjectNode vocab = (ObjectNode) tj.get("model").get("vocab");
        ArrayNode added = (ArrayNode) tj.get("added_tokens");
        if (!chatMlTokens) {
            int i = 0;
            for (String marker : List.of("<|im_start|>", "<|im_end|>")) {
                String reserved = "<|reserved_special_token_" + i++ + "|>";
                int id = vocab.remove(marker).asInt();
                vocab.put(reserved, id);
                for (var n : added) if (n.get("content").asText().equals(marker)) ((ObjectNode) n).put("content", reserved);
            }
        }
        for (String s : List.of("<|begin_of_text|>", "<|eot_id|>")) {
            int id = vocab.size();
            vocab.put(s, id);
            ObjectNode n = added.addObject();
            n.put("id", id).put("content", s).put("single_word", false).put("lstrip", false).put("rstrip", false)
                    .put("normalized", false).put("special", true);
        }
        JSON.writeValue(dir.resolve("tokenizer.json").toFile(), tj);
        ObjectNode tc = (ObjectNode) JSON.readTree(dir.resolve("tokenizer_config.json").toFile());
        tc.put("bos_token", "<|begin_of_text|>").put("eos_token", "<|eot_id|>");
        tc.putArray("additional_special_tokens");
        if (template != null) tc.put("chat_template", template);
        JSON.writeValue(dir.resolve("tokenizer_config.json").toFile(), tc);
        return dir;
    }

    static List<String> warnings(Path dir, String whose) {
        List<String> out = new ArrayList<>();
        try (HfTokenizer tok = HfTokenizer.load(dir)) {
            ChatRenderer r = ChatRenderers.forTokenizer(tok, Map.of(), whose, out::add);
            assertEquals(tok.chatTemplate().isEmpty(), r instanceof ChatMl, "ChatML only without a template");
        }
        return out;
    }

    @Test
    void aLlamaBaseFolderIsWarnedThatItGetsChatMlWithoutBos() throws IOException {
        Path dir = llamaBase(tmp.resolve("llama-base"), true, null);
        String whose = "model solver_model's tokenizer folder " + dir;
        List<String> w = warnings(dir, whose);
        assertEquals(1, w.size(), w.toString());
        String m = w.getFirst();
        assertTrue(m.startsWith(whose + " has no chat template, so drmas renders its chats as ChatML"), m);
        assertTrue(m.contains("no BOS added") && m.contains("its bos_token <|begin_of_text|> is not added"), m);
        assertTrue(m.contains("chat_template in its tokenizer_config.json or a chat_template.jinja file"), m);
        assertTrue(!m.contains("not a token"), "its markers are tokens here: " + m);
        // once per model: the same model's renderer made again says nothing; another model is warned
        assertEquals(List.of(), warnings(dir, whose));
        assertEquals(1, warnings(dir, "model verifier_model's tokenizer folder " + dir).size());
    }

    @Test
    void aVocabularyWithoutChatMlsMarkersIsWarnedThatTheyArePlainText() throws IOException {
        Path dir = llamaBase(tmp.resolve("llama-real"), false, null);
        List<String> w = warnings(dir, "model policy's tokenizer folder " + dir);
        assertEquals(1, w.size(), w.toString());
        assertTrue(w.getFirst().contains("<|im_start|> and <|im_end|> are not a token of its vocabulary, so ChatML's markers are split"
                + " into plain-text pieces and a turn ends only at its eos_token (<|eot_id|>) or rollout.max_new_tokens"), w.getFirst());
        try (HfTokenizer tok = HfTokenizer.load(dir)) {
            assertTrue(tok.encode("<|im_start|>").length > 1, "the marker is not one token here");
        }
    }

    @Test
    void theBuiltinTokenizerAndATemplatedFolderGetNoWarning() throws IOException {
        try (HfTokenizer tok = BuiltinTokenizer.load()) {
            List<String> w = new ArrayList<>();
            assertInstanceOf(ChatMl.class, ChatRenderers.forTokenizer(tok, Map.of(), "model policy (built-in tokenizer)", w::add));
            assertEquals(List.of(), w);
        }
        Path dir = llamaBase(tmp.resolve("llama-templated"), false,
                "{{ bos_token }}{% for m in messages %}{{ m['role'] + ': ' + m['content'] + '<|eot_id|>' }}{% endfor %}");
        assertEquals(List.of(), warnings(dir, "model policy's tokenizer folder " + dir));
    }
}

// ChatTemplateGoldenTest.java — real chat templates rendered byte for byte as HF transformers
// renders them: the Qwen3 template of the tokenizer fixture (skipped without the fixture) and a
// Llama-3.1-style template from the test resources, against make_goldens.py's jinja2 output; plus
// Qwen3 conversations spelled out literally, as a readable spec independent of Python.
package dev.drmas.tokenizer.template;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.time.Clock;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.stream.Stream;
import org.junit.jupiter.api.DynamicTest;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestFactory;

class ChatTemplateGoldenTest {
    private static String qwen3Template() throws IOException {
        return (String) Goldens.qwen3TokenizerConfig().get("chat_template");
    }

    private static String sha256(String s) throws NoSuchAlgorithmException {
        return HexFormat.of().formatHex(MessageDigest.getInstance("SHA-256").digest(s.getBytes(java.nio.charset.StandardCharsets.UTF_8)));
    }

    @SuppressWarnings("unchecked")
    private static Stream<DynamicTest> goldenCases(ChatTemplate template, Map<String, Object> golden) {
        Clock clock = Goldens.clock(golden);
        return Goldens.cases(golden).stream().map(c -> DynamicTest.dynamicTest((String) c.get("name"), () -> {
            List<Map<String, Object>> messages = (List<Map<String, Object>>) c.get("messages");
            boolean addGenerationPrompt = (Boolean) c.get("add_generation_prompt");
            Map<String, Object> extra = (Map<String, Object>) c.get("extra");
            if (c.containsKey("error")) {
                TemplateException e = assertThrows(TemplateException.class,
                        () -> template.render(messages, addGenerationPrompt, extra, clock));
                assertTrue(e.raisedByTemplate(), e.getMessage());
                assertEquals(c.get("error"), e.reason());
            } else {
                String expected = (String) c.get("expected");
                String actual = template.render(messages, addGenerationPrompt, extra, clock);
                assertEquals(expected, actual, () -> Goldens.diff(expected, actual));
            }
        }));
    }

    @TestFactory
    Stream<DynamicTest> qwen3MatchesTransformers() throws Exception {
        String source = qwen3Template();
        Map<String, Object> golden = Goldens.load("qwen3-goldens.json");
        assertEquals(golden.get("template_sha256"), sha256(source),
                "the fixture's chat_template changed since qwen3-goldens.json was made; rerun make_goldens.py");
        return goldenCases(ChatTemplate.parse(source), golden);
    }

    @TestFactory
    Stream<DynamicTest> llama3StyleMatchesTransformers() {
        return goldenCases(ChatTemplate.parse(Goldens.text("llama3-style.jinja")), Goldens.load("llama3-goldens.json"));
    }

    @Test
    void qwen3TwoTurnConversationIsChatML() throws IOException {
        ChatTemplate t = ChatTemplate.parse(qwen3Template());
        List<Map<String, Object>> messages = List.of(
                Map.of("role", "system", "content", "You are a helpful assistant."),
                Map.of("role", "user", "content", "Hi"),
                Map.of("role", "assistant", "content", "Hello! How can I help?"),
                Map.of("role", "user", "content", "What is 2+2?"));
        assertEquals("""
                <|im_start|>system
                You are a helpful assistant.<|im_end|>
                <|im_start|>user
                Hi<|im_end|>
                <|im_start|>assistant
                Hello! How can I help?<|im_end|>
                <|im_start|>user
                What is 2+2?<|im_end|>
                <|im_start|>assistant
                """, t.render(messages, true, Map.of()));
        // Without thinking, Qwen3 pre-fills an empty think block after the generation prompt.
        assertEquals("""
                <|im_start|>user
                What is 2+2?<|im_end|>
                <|im_start|>assistant
                <think>

                </think>

                """, t.render(List.of(Map.of("role", "user", "content", "What is 2+2?")), true,
                Map.of("enable_thinking", false)));
    }

    @Test
    void qwen3KeepsReasoningOnlyAfterTheLastUserTurn() throws IOException {
        ChatTemplate t = ChatTemplate.parse(qwen3Template());
        List<Map<String, Object>> messages = List.of(
                Map.of("role", "user", "content", "1+1?"),
                Map.of("role", "assistant", "content", "<think>\nadd\n</think>\n\n2"),
                Map.of("role", "user", "content", "2+2?"),
                Map.of("role", "assistant", "content", "<think>\nadd again\n</think>\n\n4"));
        assertEquals("""
                <|im_start|>user
                1+1?<|im_end|>
                <|im_start|>assistant
                2<|im_end|>
                <|im_start|>user
                2+2?<|im_end|>
                <|im_start|>assistant
                <think>
                add again
                </think>

                4<|im_end|>
                """, t.render(messages, false, null));
    }

    @Test
    void toolsAndDocumentsAreDefinedAsNoneLikeInTransformers() {
        ChatTemplate t = ChatTemplate.parse("{{ tools is defined }} {{ tools is none }} {{ documents is none }} {{ messages | length }}");
        assertEquals("True True True 0", t.render(List.of(), false, null));
        assertThrows(IllegalArgumentException.class, () -> t.render(List.of(), false, Map.of("messages", List.of())));
    }
}

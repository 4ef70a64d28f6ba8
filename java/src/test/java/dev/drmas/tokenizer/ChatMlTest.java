// ChatMlTest.java — the ChatML fallback renders a conversation exactly as Qwen's ChatML (expected
// text written out literally), and ChatRenderers picks it for a tokenizer without a template.
package dev.drmas.tokenizer;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

class ChatMlTest {
    static final List<Map<String, Object>> TWO_TURNS = List.of(
            Map.of("role", "system", "content", "You solve arithmetic."),
            Map.of("role", "user", "content", "What is 2+3?"),
            Map.of("role", "assistant", "content", "<think>\n2+3=5\n</think>\n<answer>5</answer>"),
            Map.of("role", "user", "content", "And 5*4?"));

    @Test
    void rendersATwoTurnConversation() {
        String expected = "<|im_start|>system\nYou solve arithmetic.<|im_end|>\n"
                + "<|im_start|>user\nWhat is 2+3?<|im_end|>\n"
                + "<|im_start|>assistant\n<think>\n2+3=5\n</think>\n<answer>5</answer><|im_end|>\n"
                + "<|im_start|>user\nAnd 5*4?<|im_end|>\n";
        assertEquals(expected, new ChatMl().render(TWO_TURNS, false));
        assertEquals(expected + "<|im_start|>assistant\n", new ChatMl().render(TWO_TURNS, true));
        assertEquals("<|im_start|>assistant\n", new ChatMl().render(List.of(), true));
    }

    @Test
    void aMessageWithoutRoleOrContentIsRejected() {
        var e = assertThrows(IllegalArgumentException.class,
                () -> new ChatMl().render(List.of(Map.of("role", "user", "content", "hi"), Map.of("content", "x")), false));
        assertTrue(e.getMessage().startsWith("message 1:"), e.getMessage());
        assertThrows(IllegalArgumentException.class, () -> new ChatMl().render(List.of(Map.of("role", "user")), false));
    }

    @Test
    void tokenizersWithoutATemplateGetChatMl() {
        try (HfTokenizer tok = BuiltinTokenizer.load()) {
            ChatRenderer r = ChatRenderers.forTokenizer(tok);
            assertInstanceOf(ChatMl.class, r);
            // the rendered markers are single special tokens, the rest one token per character
            List<String> pieces = new java.util.ArrayList<>(List.of("<|im_start|>", "u", "s", "e", "r", "\n", "1", "+", "1",
                    "<|im_end|>", "\n", "<|im_start|>"));
            for (char c : "assistant\n".toCharArray()) pieces.add(String.valueOf(c));
            int[] expected = pieces.stream().mapToInt(p -> tok.tokenId(p).getAsInt()).toArray();
            assertArrayEquals(expected, tok.encode(r.render(List.of(Map.of("role", "user", "content", "1+1")), true)));
        }
    }
}

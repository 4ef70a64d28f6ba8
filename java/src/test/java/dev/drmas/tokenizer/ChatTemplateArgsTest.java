// ChatTemplateArgsTest.java — extra chat template variables (HF's apply_chat_template(**kwargs)) on
// the real Qwen3 template: enable_thinking=false renders the empty think block exactly as
// transformers does (expected text checked against jinja2 with the fixture's template), names the
// renderer sets itself are refused, and a tokenizer without a template refuses any.
package dev.drmas.tokenizer;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.drmas.testing.Fixtures;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class ChatTemplateArgsTest {
    static final List<Map<String, Object>> HI = List.of(Map.of("role", "user", "content", "hi"));

    @Test
    void enableThinkingFalseOpensTheReplyWithAnEmptyThinkBlock() {
        try (HfTokenizer qwen3 = HfTokenizer.load(Fixtures.qwen3Tokenizer())) {
            String head = "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n";
            // transformers: tok.apply_chat_template(msgs, add_generation_prompt=True, tokenize=False, enable_thinking=False)
            assertEquals(head + "<think>\n\n</think>\n\n", ChatRenderers.forTokenizer(qwen3, Map.of("enable_thinking", false)).render(HI, true));
            assertEquals(head, ChatRenderers.forTokenizer(qwen3, Map.of("enable_thinking", true)).render(HI, true));
            assertEquals(head, ChatRenderers.forTokenizer(qwen3).render(HI, true), "Qwen3 thinks by default");
            // a system message and an earlier turn: the block follows only the generation prompt
            List<Map<String, Object>> turns = List.of(Map.of("role", "system", "content", "Be brief."), Map.of("role", "user", "content", "1+1?"),
                    Map.of("role", "assistant", "content", "2"), Map.of("role", "user", "content", "2+2?"));
            assertEquals("<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\n1+1?<|im_end|>\n<|im_start|>assistant\n2<|im_end|>\n"
                    + "<|im_start|>user\n2+2?<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n",
                    ChatRenderers.forTokenizer(qwen3, Map.of("enable_thinking", false)).render(turns, true));
        }
    }

    @Test
    void variablesTheRendererSetsItselfAreRefused() {
        try (HfTokenizer qwen3 = HfTokenizer.load(Fixtures.qwen3Tokenizer())) {
            for (String name : List.of("messages", "add_generation_prompt", "tools", "documents", "eos_token", "bos_token",
                    "additional_special_tokens", "raise_exception")) {
                var e = assertThrows(IllegalArgumentException.class, () -> ChatRenderers.forTokenizer(qwen3, Map.of(name, "x")));
                assertTrue(e.getMessage().startsWith("'" + name + "' is set by drmas's chat renderer itself"), e.getMessage());
            }
            var e = assertThrows(IllegalArgumentException.class, () -> ChatRenderers.forTokenizer(qwen3, Map.of("enable-thinking", false)));
            assertEquals("'enable-thinking' is not a template variable name (letters, digits and _, not starting with a digit)", e.getMessage());
            assertTrue(ChatRenderers.variableProblem("None").contains("constant"), ChatRenderers.variableProblem("None"));
            assertNull(ChatRenderers.variableProblem("_x1"));
        }
    }

    @Test
    void aTokenizerWithoutATemplateRefusesArguments(@TempDir Path dir) {
        BuiltinTokenizer.writeTo(dir);
        try (HfTokenizer builtin = HfTokenizer.load(dir)) {
            assertInstanceOf(ChatMl.class, ChatRenderers.forTokenizer(builtin, Map.of()));
            var e = assertThrows(IllegalArgumentException.class, () -> ChatRenderers.forTokenizer(builtin, Map.of("enable_thinking", false)));
            assertEquals("the tokenizer has no chat template (drmas renders ChatML for it, which reads no variables), so template "
                    + "arguments (enable_thinking) would do nothing", e.getMessage());
        }
    }
}

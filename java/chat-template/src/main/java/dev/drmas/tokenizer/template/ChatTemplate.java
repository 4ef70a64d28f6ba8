// ChatTemplate.java — a tokenizer's chat_template, rendered exactly as HF transformers'
// apply_chat_template(messages, add_generation_prompt=..., tokenize=False) renders it: the
// variables messages, add_generation_prompt, tools and documents (None unless given), plus the
// caller's extra context (bos_token, eos_token, enable_thinking, ...).
package dev.drmas.tokenizer.template;

import java.time.Clock;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

public final class ChatTemplate {
    private final Template template;

    private ChatTemplate(Template template) {
        this.template = template;
    }

    /** Parses a chat template; a syntax error is a TemplateException naming line:col. */
    public static ChatTemplate parse(String source) {
        return new ChatTemplate(Template.parse(source));
    }

    /**
     * messages: List of Map with "role", "content" (and optional extra keys such as tool_calls,
     * reasoning_content). extraContext may be null; it must not set messages or
     * add_generation_prompt. Like HF, tools and documents are defined (as None) even when not given,
     * which templates testing `tools is defined` rely on.
     */
    public String render(List<Map<String, Object>> messages, boolean addGenerationPrompt, Map<String, Object> extraContext) {
        return render(messages, addGenerationPrompt, extraContext, Clock.systemDefaultZone());
    }

    /** As render, with strftime_now reading the given clock (tests pin the date). */
    String render(List<Map<String, Object>> messages, boolean addGenerationPrompt, Map<String, Object> extraContext,
            Clock clock) {
        Map<String, Object> ctx = new HashMap<>();
        ctx.put("tools", null);
        ctx.put("documents", null);
        if (extraContext != null) {
            for (String reserved : List.of("messages", "add_generation_prompt")) {
                if (extraContext.containsKey(reserved)) {
                    throw new IllegalArgumentException("extraContext must not set '" + reserved + "'; it is a parameter of render");
                }
            }
            ctx.putAll(extraContext);
        }
        ctx.put("messages", messages);
        ctx.put("add_generation_prompt", addGenerationPrompt);
        return template.render(ctx, clock);
    }
}

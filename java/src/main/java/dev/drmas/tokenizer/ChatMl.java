// ChatMl.java — the fallback chat format for tokenizers that carry no chat template (the built-in
// one): ChatML as Qwen writes it, "<|im_start|>{role}\n{content}<|im_end|>\n" per message and
// "<|im_start|>assistant\n" as the generation prompt. No default system message is added.
package dev.drmas.tokenizer;

import java.util.List;
import java.util.Map;

public final class ChatMl implements ChatRenderer {

    @Override
    public String render(List<Map<String, Object>> messages, boolean addGenerationPrompt) {
        StringBuilder sb = new StringBuilder();
        for (int i = 0; i < messages.size(); i++) {
            Map<String, Object> m = messages.get(i);
            Object role = m.get("role");
            Object content = m.get("content");
            if (!(role instanceof String) || ((String) role).isEmpty() || content == null) {
                throw new IllegalArgumentException("message " + i + ": needs a \"role\" string and a \"content\", got " + m);
            }
            sb.append("<|im_start|>").append(role).append('\n').append(content).append("<|im_end|>\n");
        }
        if (addGenerationPrompt) sb.append("<|im_start|>assistant\n");
        return sb.toString();
    }
}

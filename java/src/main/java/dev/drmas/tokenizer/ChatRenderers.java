// ChatRenderers.java — picks the chat renderer of a tokenizer: its own chat template (rendered by
// drmas's Jinja engine exactly as HF transformers renders it, with the tokenizer's special tokens
// in the context) when it has one, ChatML otherwise.
package dev.drmas.tokenizer;

import dev.drmas.tokenizer.template.ChatTemplate;
import java.util.Map;

public final class ChatRenderers {
    private ChatRenderers() {
    }

    public static ChatRenderer forTokenizer(Tokenizer tokenizer) {
        if (tokenizer.chatTemplate().isEmpty()) {
            return new ChatMl();
        }
        ChatTemplate t = ChatTemplate.parse(tokenizer.chatTemplate().get());
        Map<String, Object> context = tokenizer.templateContext();
        return (messages, addGenerationPrompt) -> t.render(messages, addGenerationPrompt, context);
    }
}

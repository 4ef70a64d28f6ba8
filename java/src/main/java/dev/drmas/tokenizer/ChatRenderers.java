// ChatRenderers.java — picks the chat renderer of a tokenizer: its own chat template (rendered by
// drmas's Jinja engine exactly as HF transformers renders it, with the tokenizer's special tokens
// in the context) when it has one, ChatML otherwise. A template that does not parse, or that fails
// on a conversation (its own raise_exception included), is the tokenizer folder's fault: a
// TokenizerFileException naming the file it came from, which every command reports as bad input.
package dev.drmas.tokenizer;

import dev.drmas.tokenizer.template.ChatTemplate;
import dev.drmas.tokenizer.template.TemplateException;
import java.util.Map;
import java.util.stream.Collectors;

public final class ChatRenderers {
    private ChatRenderers() {
    }

    /** @throws TokenizerFileException when the tokenizer's chat template cannot be used, naming its file and line:col */
    public static ChatRenderer forTokenizer(Tokenizer tokenizer) {
        if (tokenizer.chatTemplate().isEmpty()) {
            return new ChatMl();
        }
        String file = tokenizer.chatTemplateFile().map(Object::toString).orElse("the tokenizer");
        ChatTemplate t;
        try {
            t = ChatTemplate.parse(tokenizer.chatTemplate().get());
        } catch (TemplateException e) {
            throw new TokenizerFileException(file + ": chat_template does not parse: " + e.getMessage(), e);
        }
        Map<String, Object> context = tokenizer.templateContext();
        return (messages, addGenerationPrompt) -> {
            try {
                return t.render(messages, addGenerationPrompt, context);
            } catch (TemplateException e) {
                // the roles say which conversation it refused (templates check their order and kinds)
                String roles = messages.stream().map(m -> String.valueOf(m.get("role"))).collect(Collectors.joining(", "));
                throw new TokenizerFileException(file + ": chat_template fails on " + messages.size()
                        + (messages.size() == 1 ? " message" : " messages") + (messages.isEmpty() ? "" : " (roles " + roles + ")")
                        + ": " + e.getMessage(), e);
            }
        };
    }
}

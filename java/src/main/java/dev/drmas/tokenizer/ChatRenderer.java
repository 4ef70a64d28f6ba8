// ChatRenderer.java — the one seam through which a conversation becomes prompt text: ChatMl for
// tokenizers without a chat template, the Jinja chat-template engine for those with one (see
// ChatRenderers). Messages are HF-style maps with "role" and "content".
package dev.drmas.tokenizer;

import java.util.List;
import java.util.Map;

public interface ChatRenderer {
    /**
     * The prompt text of {@code messages}; with {@code addGenerationPrompt}, followed by the opening of an
     * assistant turn so that the model writes the reply.
     */
    String render(List<Map<String, Object>> messages, boolean addGenerationPrompt);
}

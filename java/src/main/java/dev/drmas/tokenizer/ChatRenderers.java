// ChatRenderers.java — picks the chat renderer of a tokenizer: its own chat template when it has one,
// ChatML otherwise. The template branch waits for the Jinja engine (dev.drmas.tokenizer.template),
// which lands on another branch; until then it fails loudly rather than render a format the model
// was not trained on.
package dev.drmas.tokenizer;

public final class ChatRenderers {
    private ChatRenderers() {
    }

    public static ChatRenderer forTokenizer(Tokenizer tokenizer) {
        if (tokenizer.chatTemplate().isEmpty()) {
            return new ChatMl();
        }
        throw new IllegalStateException("this tokenizer has a chat template, but the chat template engine is not yet "
                + "wired into drmas; only tokenizers without a template (ChatML fallback) can render chats");
    }
}

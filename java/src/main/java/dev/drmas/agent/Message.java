// Message.java — one chat message (system, user or assistant) of the conversation an agent is
// prompted with. The tokenizer layer renders HF-style maps, so toMap() is the bridge to it.
package dev.drmas.agent;

import java.util.List;
import java.util.Map;
import java.util.Objects;

public record Message(String role, String content) {
    public static final String SYSTEM = "system";
    public static final String USER = "user";
    public static final String ASSISTANT = "assistant";

    public Message {
        Objects.requireNonNull(role, "role");
        Objects.requireNonNull(content, "content");
    }

    public static Message system(String content) {
        return new Message(SYSTEM, content);
    }

    public static Message user(String content) {
        return new Message(USER, content);
    }

    public static Message assistant(String content) {
        return new Message(ASSISTANT, content);
    }

    /** The HF-style {"role", "content"} map that ChatRenderer takes. */
    public Map<String, Object> toMap() {
        return Map.of("role", role, "content", content);
    }

    /** A whole conversation as ChatRenderer input. */
    public static List<Map<String, Object>> toMaps(List<Message> conversation) {
        return conversation.stream().map(Message::toMap).toList();
    }
}

// ChatRenderers.java — picks the chat renderer of a tokenizer: its own chat template (rendered by
// drmas's Jinja engine exactly as HF transformers renders it, with the tokenizer's special tokens
// in the context) when it has one, ChatML otherwise. A template that does not parse, or that fails
// on a conversation (its own raise_exception included), is the tokenizer folder's fault: a
// TokenizerFileException naming the file it came from, which every command reports as bad input.
// Extra template variables (HF's apply_chat_template(**kwargs), verl's apply_chat_template_kwargs,
// e.g. Qwen3's enable_thinking) go into the context beside the special tokens; they may not replace
// a variable the renderer sets itself, and a tokenizer without a template refuses them, since
// ChatML reads no variables and a silently ignored enable_thinking: false would mislead.
package dev.drmas.tokenizer;

import dev.drmas.tokenizer.template.ChatTemplate;
import dev.drmas.tokenizer.template.TemplateException;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.regex.Pattern;
import java.util.stream.Collectors;

public final class ChatRenderers {
    private ChatRenderers() {
    }

    /**
     * The variables a chat template gets from drmas itself: the conversation and its options
     * (ChatTemplate.render), the special tokens (Tokenizer.templateContext, all of them, set or not,
     * so that whether a name is refused does not depend on the tokenizer), and the functions of HF's
     * environment, which a variable of the same name would hide from the template.
     */
    public static final List<String> RENDERER_VARIABLES = List.of("messages", "add_generation_prompt", "tools", "documents",
            "bos_token", "eos_token", "pad_token", "unk_token", "sep_token", "cls_token", "mask_token", "additional_special_tokens",
            "raise_exception", "strftime_now", "range", "namespace", "dict");

    private static final Pattern IDENTIFIER = Pattern.compile("[A-Za-z_][A-Za-z0-9_]*");
    // Jinja reads these names as constants, so a variable of that name never reaches the template
    private static final List<String> CONSTANTS = List.of("true", "false", "none", "True", "False", "None");

    /** Why {@code name} cannot be an extra template variable; null when it can. */
    public static String variableProblem(String name) {
        if (!IDENTIFIER.matcher(name).matches()) {
            return "'" + name + "' is not a template variable name (letters, digits and _, not starting with a digit)";
        }
        if (CONSTANTS.contains(name)) return "'" + name + "' is a constant in a template, which never reads it as a variable";
        if (RENDERER_VARIABLES.contains(name)) {
            return "'" + name + "' is set by drmas's chat renderer itself (it sets " + String.join(", ", RENDERER_VARIABLES)
                    + "); it cannot be an extra template variable";
        }
        return null;
    }

    /** @throws TokenizerFileException when the tokenizer's chat template cannot be used, naming its file and line:col */
    public static ChatRenderer forTokenizer(Tokenizer tokenizer) {
        return forTokenizer(tokenizer, Map.of());
    }

    /**
     * The renderer of {@code tokenizer}'s chat template with {@code templateArgs} as extra variables
     * (name → Map, List, String, Long/Integer, Double, Boolean or null), as HF's
     * {@code apply_chat_template(messages, **template_args)}.
     *
     * @throws IllegalArgumentException when a name is not allowed (variableProblem), or when there are
     *         arguments but the tokenizer has no chat template
     * @throws TokenizerFileException when the tokenizer's chat template cannot be used, naming its file and line:col
     */
    public static ChatRenderer forTokenizer(Tokenizer tokenizer, Map<String, Object> templateArgs) {
        for (String name : templateArgs.keySet()) {
            String problem = variableProblem(name);
            if (problem != null) throw new IllegalArgumentException(problem);
        }
        if (tokenizer.chatTemplate().isEmpty()) {
            if (!templateArgs.isEmpty()) {
                throw new IllegalArgumentException("the tokenizer has no chat template (drmas renders ChatML for it, which reads no "
                        + "variables), so template arguments (" + String.join(", ", templateArgs.keySet()) + ") would do nothing");
            }
            return new ChatMl();
        }
        String file = tokenizer.chatTemplateFile().map(Object::toString).orElse("the tokenizer");
        ChatTemplate t;
        try {
            t = ChatTemplate.parse(tokenizer.chatTemplate().get());
        } catch (TemplateException e) {
            throw new TokenizerFileException(file + ": chat_template does not parse: " + e.getMessage(), e);
        }
        Map<String, Object> context = new HashMap<>(tokenizer.templateContext());
        context.putAll(templateArgs);
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

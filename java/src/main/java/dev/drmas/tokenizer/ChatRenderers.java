// ChatRenderers.java — picks the chat renderer of a tokenizer: its own chat template (rendered by
// drmas's Jinja engine exactly as HF transformers renders it, with the tokenizer's special tokens
// in the context) when it has one, ChatML otherwise. A template that does not parse, or that fails
// on a conversation (its own raise_exception included), is the tokenizer folder's fault: a
// TokenizerFileException naming the file it came from, which every command reports as bad input.
// Extra template variables (HF's apply_chat_template(**kwargs), verl's apply_chat_template_kwargs,
// e.g. Qwen3's enable_thinking) go into the context beside the special tokens; they may not replace
// a variable the renderer sets itself, and a tokenizer without a template refuses them, since
// ChatML reads no variables and a silently ignored enable_thinking: false would mislead.
// ChatML is Qwen's format: for a tokenizer that is not Qwen-like (a bos_token, or no <|im_start|>
// and <|im_end|> tokens, e.g. a Llama base model's folder) the fallback is still used, since it
// renders the same text in training and in generation, but with a warning, once per model, saying
// what the model gets (its markers as plain text, no BOS) and how to choose a template instead.
package dev.drmas.tokenizer;

import dev.drmas.tokenizer.template.ChatTemplate;
import dev.drmas.tokenizer.template.TemplateException;
import java.util.HashMap;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.function.Consumer;
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

    /** Where the ChatML fallback's warnings go: standard error, as the CLI's other warnings. */
    private static final Consumer<String> STDERR = w -> System.err.println("drmas: warning: " + w);
    // the warnings given in this process: each once, however often a model's renderer is made
    private static final Set<String> WARNED = ConcurrentHashMap.newKeySet();

    /** @throws TokenizerFileException when the tokenizer's chat template cannot be used, naming its file and line:col */
    public static ChatRenderer forTokenizer(Tokenizer tokenizer) {
        return forTokenizer(tokenizer, Map.of());
    }

    /** As below, for a tokenizer that a warning calls "a tokenizer". */
    public static ChatRenderer forTokenizer(Tokenizer tokenizer, Map<String, Object> templateArgs) {
        return forTokenizer(tokenizer, templateArgs, null, STDERR);
    }

    /**
     * As below; {@code whose} names the tokenizer in the ChatML fallback's warning (e.g. "model
     * policy's tokenizer folder models/Llama-3.2-1B"), which goes to standard error.
     */
    public static ChatRenderer forTokenizer(Tokenizer tokenizer, Map<String, Object> templateArgs, String whose) {
        return forTokenizer(tokenizer, templateArgs, whose, STDERR);
    }

    /**
     * Why ChatML does not suit {@code tokenizer}, which has no chat template: its bos_token, which
     * ChatML never writes, and its vocabulary without ChatML's markers as tokens; null when it suits
     * (Qwen-like vocabularies, the built-in tokenizer).
     */
    static String chatMlMismatch(Tokenizer tokenizer) {
        List<String> why = new ArrayList<>();
        List<String> missing = new ArrayList<>();
        for (String marker : List.of("<|im_start|>", "<|im_end|>")) if (tokenizer.tokenId(marker).isEmpty()) missing.add(marker);
        if (!missing.isEmpty()) {
            why.add(String.join(" and ", missing) + (missing.size() == 1 ? " is" : " are") + " not a token of its vocabulary, so"
                    + " ChatML's markers are split into plain-text pieces and a turn ends only at its eos_token ("
                    + tokenizer.eosToken() + ") or rollout.max_new_tokens");
        }
        tokenizer.bosToken().ifPresent(bos -> why.add("its bos_token " + bos + " is not added (ChatML has none)"));
        return why.isEmpty() ? null : String.join("; ", why);
    }

    /**
     * The renderer of {@code tokenizer}'s chat template with {@code templateArgs} as extra variables
     * (name → Map, List, String, Long/Integer, Double, Boolean or null), as HF's
     * {@code apply_chat_template(messages, **template_args)}.
     *
     * A tokenizer without a chat template gets ChatML; where ChatML does not suit it ({@link
     * #chatMlMismatch}) {@code warn} is told so, naming it by {@code whose} (null: "a tokenizer"),
     * once per process for the same warning.
     *
     * @throws IllegalArgumentException when a name is not allowed (variableProblem), or when there are
     *         arguments but the tokenizer has no chat template
     * @throws TokenizerFileException when the tokenizer's chat template cannot be used, naming its file and line:col
     */
    public static ChatRenderer forTokenizer(Tokenizer tokenizer, Map<String, Object> templateArgs, String whose, Consumer<String> warn) {
        for (String name : templateArgs.keySet()) {
            String problem = variableProblem(name);
            if (problem != null) throw new IllegalArgumentException(problem);
        }
        if (tokenizer.chatTemplate().isEmpty()) {
            if (!templateArgs.isEmpty()) {
                throw new IllegalArgumentException("the tokenizer has no chat template (drmas renders ChatML for it, which reads no "
                        + "variables), so template arguments (" + String.join(", ", templateArgs.keySet()) + ") would do nothing");
            }
            String mismatch = chatMlMismatch(tokenizer);
            if (mismatch != null) {
                String w = (whose == null ? "a tokenizer" : whose) + " has no chat template, so drmas renders its chats as ChatML"
                        + " (Qwen's format), no BOS added: " + mismatch + ". To use another format, put a chat_template in its"
                        + " tokenizer_config.json or a chat_template.jinja file in its folder";
                if (WARNED.add(w)) warn.accept(w);
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

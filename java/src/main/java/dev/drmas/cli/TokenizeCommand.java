// TokenizeCommand.java — `drmas tokenize`: lets users check how a tokenizer folder splits their text
// and renders a chat, and what ids mean. Encoding prints the ids as a JSON array on one line (HF
// add_special_tokens=False, as for a rendered prompt); --decode prints the text of a list of ids.
package dev.drmas.cli;

import dev.drmas.config.ConfigException;
import dev.drmas.config.ModelSpec;
import dev.drmas.tokenizer.ChatRenderer;
import dev.drmas.tokenizer.ChatRenderers;
import dev.drmas.tokenizer.HfTokenizer;
import dev.drmas.tokenizer.TokenizerFileException;
import java.io.PrintWriter;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.StringJoiner;
import java.util.concurrent.Callable;
import picocli.CommandLine.Command;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.Parameters;
import picocli.CommandLine.Spec;

@Command(name = "tokenize", mixinStandardHelpOptions = true,
        description = {"Encode TEXT with a tokenizer folder (tokenizer.json, tokenizer_config.json) and print the ids",
                "as a JSON array, or with --decode print the text of a list of ids.",
                "No special tokens are added beyond those written in TEXT (or by --chat)."})
final class TokenizeCommand implements Callable<Integer> {

    @Spec
    CommandSpec spec;

    @Option(names = "--tokenizer", required = true, paramLabel = "DIR", description = "a Hugging Face tokenizer folder")
    Path tokenizerDir;

    @Option(names = "--chat", description = "render TEXT as one user message followed by the generation prompt, then encode")
    boolean chat;

    @Option(names = "--template-arg", paramLabel = "NAME=VALUE", description = {"with --chat: a variable of the chat template, "
            + "e.g. enable_thinking=false (Qwen3);", "VALUE is read as YAML (false, 3, text, [1, 2], {k: v}); repeatable"})
    List<String> templateArgs = List.of();

    @Option(names = "--decode", paramLabel = "IDS", description = "decode these ids instead: a JSON array like [1,2,3] or 1,2,3")
    String decodeIds;

    @Option(names = "--skip-special", description = "with --decode: leave out special tokens")
    boolean skipSpecial;

    @Parameters(index = "0", arity = "0..1", paramLabel = "TEXT", description = "the text to encode")
    String text;

    @Override
    public Integer call() {
        if ((decodeIds == null) == (text == null)) {
            throw new UserError("give either TEXT to encode or --decode IDS");
        }
        if (decodeIds != null && chat) throw new UserError("--chat applies to encoding, not to --decode");
        if (decodeIds == null && skipSpecial) throw new UserError("--skip-special applies to --decode only");
        if (!templateArgs.isEmpty() && !chat) throw new UserError("--template-arg applies to --chat only");
        Map<String, Object> args = templateArgs(templateArgs);
        PrintWriter out = spec.commandLine().getOut();
        try (HfTokenizer tok = HfTokenizer.load(tokenizerDir)) {
            if (decodeIds != null) {
                int[] ids = parseIds(decodeIds, tok.vocabSize());
                try {
                    out.println(tok.decode(ids, skipSpecial));
                } catch (IllegalArgumentException e) { // an id in range that no token has
                    throw new UserError("--decode: " + e.getMessage());
                }
            } else {
                String input = chat ? chatPrompt(tok, tokenizerDir, text, args) : text;
                StringJoiner json = new StringJoiner(",", "[", "]");
                for (int id : tok.encode(input)) json.add(Integer.toString(id));
                out.println(json);
            }
        } catch (TokenizerFileException e) {
            throw new UserError(e.getMessage(), e);
        }
        out.flush();
        return 0;
    }

    /**
     * {@code content} as one user message with the generation prompt, by the tokenizer's chat template
     * (or ChatML) with {@code templateArgs} as extra variables. A template that fails is a
     * TokenizerFileException naming its file and line:col; arguments for a tokenizer (in {@code tokDir})
     * without a template are a UserError.
     */
    static String chatPrompt(HfTokenizer tok, Path tokDir, String content, Map<String, Object> templateArgs) {
        ChatRenderer renderer;
        try {
            renderer = ChatRenderers.forTokenizer(tok, templateArgs);
        } catch (IllegalArgumentException e) {  // the names were checked: the tokenizer has no template
            throw new UserError("--template-arg: " + tokDir + ": " + e.getMessage());
        }
        return renderer.render(List.of(Map.of("role", "user", "content", content)), true);
    }

    /** The --template-arg options as template variables; a bad one is a UserError naming it. */
    static Map<String, Object> templateArgs(List<String> assignments) {
        try {
            return ModelSpec.parseTemplateArgs(assignments, "--template-arg");
        } catch (ConfigException e) {
            throw new UserError(e.getMessage(), e);
        }
    }

    /** "[1, 2,3]" or "1,2,3": each id an integer below the vocabulary size. */
    static int[] parseIds(String s, int vocabSize) {
        String body = s.strip();
        if (body.startsWith("[") != body.endsWith("]")) {
            throw new UserError("--decode: unbalanced brackets in '" + s + "' (expected [1,2,3] or 1,2,3)");
        }
        if (body.startsWith("[")) body = body.substring(1, body.length() - 1).strip();
        List<Integer> ids = new ArrayList<>();
        if (!body.isEmpty()) {
            String[] parts = body.split(",", -1);
            for (int i = 0; i < parts.length; i++) {
                String p = parts[i].strip();
                int id;
                try {
                    id = Integer.parseInt(p);
                } catch (NumberFormatException e) {
                    throw new UserError("--decode: item " + (i + 1) + " '" + p + "' is not a token id (expected [1,2,3] or 1,2,3)");
                }
                if (id < 0 || id >= vocabSize) {
                    throw new UserError("--decode: token id " + id + " is outside the vocabulary (ids 0.." + (vocabSize - 1) + ")");
                }
                ids.add(id);
            }
        }
        return ids.stream().mapToInt(Integer::intValue).toArray();
    }
}

// GenerateCommand.java — `drmas generate`: continues a prompt with a checkpoint folder (HF layout:
// config.json, safetensors weights, tokenizer files) on the CPU, through the same rollout engine
// that training uses, so that users can check a model and its sampling settings by hand.
package dev.drmas.cli;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.drmas.model.CausalLm;
import dev.drmas.model.ModelFileException;
import dev.drmas.rollout.Completion;
import dev.drmas.rollout.GenerationConfig;
import dev.drmas.rollout.Generator;
import dev.drmas.rollout.Request;
import dev.drmas.rollout.SamplingParams;
import dev.drmas.tokenizer.HfTokenizer;
import dev.drmas.tokenizer.TokenizerFileException;
import java.io.PrintWriter;
import java.nio.file.Path;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.concurrent.Callable;
import org.bytedeco.pytorch.global.torch;
import picocli.CommandLine.Command;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.Spec;

@Command(name = "generate", mixinStandardHelpOptions = true,
        description = {"Continue a prompt with a checkpoint folder (config.json, *.safetensors and the tokenizer files)",
                "and print the generated text; --json prints tokens, log-probs and the finish reason too."})
final class GenerateCommand implements Callable<Integer> {

    @Spec
    CommandSpec spec;

    @Option(names = "--model", required = true, paramLabel = "DIR", description = "checkpoint folder in HF layout")
    Path modelDir;

    @Option(names = "--tokenizer", paramLabel = "DIR", description = "tokenizer folder (default: the model folder)")
    Path tokenizerDir;

    @Option(names = "--prompt", required = true, paramLabel = "TEXT", description = "the prompt")
    String prompt;

    @Option(names = "--chat", description = "render the prompt as one user message with the generation prompt first")
    boolean chat;

    @Option(names = "--template-arg", paramLabel = "NAME=VALUE", description = {"with --chat: a variable of the chat template, "
            + "e.g. enable_thinking=false (Qwen3);", "VALUE is read as YAML (false, 3, text, [1, 2], {k: v}); repeatable"})
    List<String> templateArgs = List.of();

    @Option(names = "--max-new-tokens", defaultValue = "64", paramLabel = "N", description = "token budget (default: ${DEFAULT-VALUE})")
    int maxNewTokens;

    @Option(names = "--temperature", defaultValue = "0", paramLabel = "T", description = "0 = greedy (default: ${DEFAULT-VALUE})")
    double temperature;

    @Option(names = "--top-k", defaultValue = "0", paramLabel = "K", description = "0 = off (default: ${DEFAULT-VALUE})")
    int topK;

    @Option(names = "--top-p", defaultValue = "1", paramLabel = "P", description = "1 = off (default: ${DEFAULT-VALUE})")
    double topP;

    @Option(names = "--seed", defaultValue = "0", paramLabel = "S", description = "seed of the draws (default: ${DEFAULT-VALUE})")
    long seed;

    @Option(names = "--stop", paramLabel = "STRING", description = "also stop when the text contains STRING (repeatable)")
    List<String> stopStrings = List.of();

    @Option(names = "--threads", defaultValue = "2", paramLabel = "N", description = "LibTorch CPU threads (default: ${DEFAULT-VALUE})")
    int threads;

    @Option(names = "--json", description = "print a JSON object with the ids, log-probs and finish reason")
    boolean json;

    @Override
    public Integer call() throws Exception {
        SamplingParams sampling;
        GenerationConfig base;
        try {
            sampling = new SamplingParams(temperature, topK, topP);
            base = GenerationConfig.greedy(maxNewTokens, null);
        } catch (IllegalArgumentException e) {
            throw new UserError(e.getMessage().replace("_", "-").replaceFirst("^", "--"));
        }
        if (threads < 1) throw new UserError("--threads must be >= 1, got " + threads);
        String tiny = dev.drmas.config.RolloutConfig.greedyOrSampledProblem(temperature);
        if (tiny != null) throw new UserError("--temperature " + tiny);
        if (stopStrings.stream().anyMatch(String::isEmpty)) throw new UserError("--stop must not be empty (it would stop at once)");
        if (!templateArgs.isEmpty() && !chat) throw new UserError("--template-arg applies to --chat only");
        Map<String, Object> args = TokenizeCommand.templateArgs(templateArgs);
        torch.set_num_threads(threads);
        PrintWriter out = spec.commandLine().getOut();
        Path tokDir = tokenizerDir != null ? tokenizerDir : modelDir;
        try (HfTokenizer tok = HfTokenizer.load(tokDir);
             CausalLm model = CausalLm.load(modelDir)) {
            String text = chat ? TokenizeCommand.chatPrompt(tok, tokDir, prompt, args) : prompt;
            int[] ids = tok.encode(text);
            if (ids.length == 0) throw new UserError("--prompt encodes to no tokens");
            int modelVocab = model.config().vocabSize();
            for (int i = 0; i < ids.length; i++) {
                // the model has no embedding for it: a --tokenizer of another model
                if (ids[i] >= modelVocab) {
                    throw new UserError("--prompt: token " + i + " is id " + ids[i] + " of the tokenizer in " + tokDir + ", but the model has "
                            + modelVocab + " ids (vocab_size in " + modelDir.resolve("config.json") + "): the tokenizer is not this model's");
                }
            }
            int positions = model.config().maxPositionEmbeddings();
            if (ids.length >= positions) {
                throw new UserError("--prompt is " + ids.length + " tokens; the model in " + modelDir + " takes at most " + positions
                        + " positions (max_position_embeddings), prompt and completion together");
            }
            int budget = base.maxNewTokens();
            if (ids.length + (long) budget > positions) {
                budget = positions - ids.length;
                spec.commandLine().getErr().println("drmas generate: --max-new-tokens " + base.maxNewTokens() + " goes past the model's "
                        + positions + " positions (max_position_embeddings) after the " + ids.length + "-token prompt; generating at most "
                        + budget + " tokens");
                spec.commandLine().getErr().flush();
            }
            GenerationConfig cfg = new GenerationConfig(sampling, budget, new HashSet<>(tok.stopTokenIds()),
                    stopStrings, stopStrings.isEmpty() ? null : t -> tok.decode(t, false), seed, true,
                    Math.min(tok.vocabSize(), model.config().vocabSize()));
            Completion c;
            try {
                c = new Generator(model).generate(List.of(new Request(ids, 0)), cfg).get(0);
            } catch (IllegalStateException e) {
                throw new UserError(modelDir + ": " + e.getMessage(), e);  // non-finite logits: the model, not drmas
            }
            String completion = tok.decode(c.tokens(), true);
            if (json) {
                ObjectMapper m = new ObjectMapper();
                ObjectNode o = m.createObjectNode();
                o.put("text", completion);
                o.set("prompt_ids", m.valueToTree(ids));
                o.set("ids", m.valueToTree(c.tokens()));
                o.set("logprobs", m.valueToTree(c.logprobs()));
                o.put("finish_reason", c.finishReason().name().toLowerCase(java.util.Locale.ROOT));  // not "stop_strıng" in Turkish
                out.println(m.writeValueAsString(o));
            } else {
                out.println(completion);
            }
        } catch (TokenizerFileException | ModelFileException e) {
            throw new UserError(e.getMessage(), e);
        }
        out.flush();
        return 0;
    }
}

// ChatTemplateKwargsTest.java — models.<id>.chat_template_kwargs in a run: a tiny model folder with
// the real Qwen3 tokenizer, whose every rollout prompt of the math workflow (solver and verifier
// turns, built by the trainer's own policy) opens the reply with Qwen3's empty think block when
// enable_thinking is false; a folder whose tokenizer has no template refuses the key; a resume that
// changes it goes on and logs the change, as for the other settings that leave the weights usable.
package dev.drmas.train;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.drmas.agent.Episode;
import dev.drmas.agent.Message;
import dev.drmas.agent.Step;
import dev.drmas.config.ConfigException;
import dev.drmas.config.RunConfig;
import dev.drmas.model.CausalLm;
import dev.drmas.model.Family;
import dev.drmas.model.ModelConfig;
import dev.drmas.testing.Fixtures;
import dev.drmas.tokenizer.BuiltinTokenizer;
import dev.drmas.tokenizer.HfTokenizer;
import dev.drmas.workflow.Workflows;
import dev.drmas.workflow.Workload;
import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import org.bytedeco.pytorch.global.torch;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class ChatTemplateKwargsTest {
    @TempDir
    Path tmp;

    @BeforeAll
    static void threads() {
        torch.set_num_threads(2);
    }

    /** A tiny random model (tied embeddings: one matrix of Qwen3's 151,669 ids) with the Qwen3 tokenizer's files. */
    static Path qwen3Folder(Path dir) throws Exception {
        Path tok = Fixtures.qwen3Tokenizer();
        Files.createDirectories(dir);
        for (String f : List.of("tokenizer.json", "tokenizer_config.json")) Files.copy(tok.resolve(f), dir.resolve(f));
        int vocab;
        try (HfTokenizer t = HfTokenizer.load(dir)) {
            vocab = t.vocabSize();
        }
        try (CausalLm m = CausalLm.random(ModelConfig.tiny(Family.QWEN2, vocab), 5)) {
            m.save(dir);
        }
        return dir;
    }

    RunConfig config(Path model, String... overrides) {
        List<String> o = new ArrayList<>(List.of("run.output_dir=" + tmp.resolve("out"), "models.policy.path=" + model,
                "rollout.max_prompt_tokens=200", "rollout.max_new_tokens=3"));
        o.addAll(List.of(overrides));
        return RunConfig.parse(TrainerEndToEndTest.YAML, o);
    }

    /** Per episode (the first two tasks, two rollouts each), the prompt ids of its turns, in order. */
    List<List<int[]>> rolloutPrompts(RunConfig cfg, String name) {
        List<List<int[]>> prompts = new ArrayList<>();
        try (Workload w = Workflows.open(cfg, new PrintStream(new ByteArrayOutputStream()));
             Policies ps = Policies.open(cfg, tmp.resolve(name), null, null)) {
            EnginePolicy engine = new EnginePolicy(ps, cfg.rollout().sampling(), cfg.rollout().maxPromptTokens(), cfg.rollout().truncation(),
                    cfg.rollout().maxNewTokens(), SamplingStreams.training(0), 5, t -> t);
            for (Episode e : RolloutBatch.run(w.orchestra(), w.train().subList(0, 2), 2, engine)) {
                List<int[]> turns = new ArrayList<>();
                for (Step s : e.steps()) turns.add(((TurnData) s.output().payload()).promptIds());
                prompts.add(turns);
            }
            assertEquals(0, engine.truncated(), "no prompt cut: its start is compared below");
            // the warm start's demonstrations render with the same renderer (WarmStart: p.chat())
            String sft = ps.get("policy").chat().render(Message.toMaps(List.of(Message.user("1+1"))), true);
            assertEquals(cfg.models().get("policy").chatTemplateKwargs().isEmpty(), !sft.endsWith("<think>\n\n</think>\n\n"), sft);
        }
        return prompts;
    }

    @Test
    void everyRolloutPromptOpensTheReplyWithTheEmptyThinkBlock() throws Exception {
        Path model = qwen3Folder(tmp.resolve("m"));
        List<List<int[]>> thinking = rolloutPrompts(config(model), "default");
        List<List<int[]>> direct = rolloutPrompts(config(model, "+models.policy.chat_template_kwargs.enable_thinking=false"), "direct");
        assertEquals(4, direct.size());
        int[] head, block;
        try (HfTokenizer tok = HfTokenizer.load(model)) {
            head = tok.encode("<|im_start|>assistant\n");
            block = tok.encode("<|im_start|>assistant\n<think>\n\n</think>\n\n");
        }
        int turns = 0;
        for (int e = 0; e < direct.size(); e++) {
            for (int[] a : thinking.get(e)) {
                assertArrayEquals(head, Arrays.copyOfRange(a, a.length - head.length, a.length), "episode " + e + " without kwargs");
            }
            for (int[] b : direct.get(e)) {
                assertArrayEquals(block, Arrays.copyOfRange(b, b.length - block.length, b.length), "episode " + e + " with enable_thinking false");
                turns++;
            }
            // the first turn asks the same question (later ones quote replies, which differ with the prompt)
            int[] a = thinking.get(e).getFirst(), b = direct.get(e).getFirst();
            assertArrayEquals(Arrays.copyOf(a, a.length - head.length), Arrays.copyOf(b, b.length - block.length), "episode " + e);
        }
        assertTrue(turns >= 8, turns + " turns: a solver's and a verifier's per episode at least");
    }

    @Test
    void aFolderWhoseTokenizerHasNoTemplateRefusesTheKey() throws Exception {
        Path model = tmp.resolve("builtin");
        BuiltinTokenizer.writeTo(model);
        try (CausalLm m = CausalLm.random(ModelConfig.tiny(Family.QWEN3, BuiltinTokenizer.VOCAB_SIZE), 5)) {
            m.save(model);
        }
        RunConfig cfg = config(model, "+models.policy.chat_template_kwargs.enable_thinking=false");
        var e = assertThrows(ConfigException.class, () -> Policies.open(cfg, tmp.resolve("run"), null, null).close());
        assertEquals("models.policy.chat_template_kwargs: " + model + ": the tokenizer has no chat template (drmas renders ChatML for "
                + "it, which reads no variables), so template arguments (enable_thinking) would do nothing", e.getMessage());
    }

    @Test
    void aResumeThatChangesTheKwargsGoesOnAndLogsTheChange() throws Exception {
        Path model = qwen3Folder(tmp.resolve("m"));
        RunConfig before = config(model, "+models.policy.chat_template_kwargs.enable_thinking=false");
        Path checkpoint = tmp.resolve("run/checkpoints/step_000001");
        Files.createDirectories(checkpoint.resolve("models/policy"));
        Files.copy(model.resolve("config.json"), checkpoint.resolve("models/policy/config.json"));
        before.save(checkpoint.resolve(ResumeCheck.CONFIG_FILE));

        for (String change : List.of("models.policy.chat_template_kwargs.enable_thinking=true", "~models.policy.chat_template_kwargs")) {
            ByteArrayOutputStream log = new ByteArrayOutputStream();
            List<String> forTraining = ResumeCheck.check(before.withOverrides(List.of(change)), checkpoint, tmp.resolve("run"),
                    new PrintStream(log, true, StandardCharsets.UTF_8));
            assertEquals(List.of(), forTraining, "the weights and the data position still hold");
            String text = log.toString(StandardCharsets.UTF_8);
            String want = change.startsWith("~") ? "models.policy.chat_template_kwargs.enable_thinking: false -> (absent)"
                    : "models.policy.chat_template_kwargs.enable_thinking: false -> true";
            assertTrue(text.startsWith("drmas: resuming with changed settings: " + want + "\n"), text);
            assertFalse(text.contains("chat_template_kwargs: {}"), "the emptied mapping itself is no change of its own: " + text);
        }
    }
}

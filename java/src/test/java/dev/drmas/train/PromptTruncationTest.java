// PromptTruncationTest.java — rollout.truncation on real prompts: the math workflow's turns rendered
// with the real Qwen3 tokenizer's chat template through the trainer's own policy, cut to
// max_prompt_tokens from the left, the middle (verl's halves) or the right, compared with the same
// prompts uncut; `error` stops with the agent named; the cut itself on awkward lengths; the key's
// binding and its error.
package dev.drmas.train;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.drmas.agent.Episode;
import dev.drmas.config.ConfigException;
import dev.drmas.config.RolloutConfig.Truncation;
import dev.drmas.config.RunConfig;
import dev.drmas.workflow.Workflows;
import dev.drmas.workflow.Workload;
import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.stream.IntStream;
import org.bytedeco.pytorch.global.torch;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class PromptTruncationTest {
    @TempDir
    Path tmp;

    @BeforeAll
    static void threads() {
        torch.set_num_threads(2);
    }

    private record Prompts(List<int[]> first, List<Boolean> cut, int truncated) {
    }

    /** The first turn's prompt of each episode (two tasks, two rollouts each) under one truncation. */
    private Prompts firstPrompts(Path model, int maxPrompt, String truncation) {
        RunConfig cfg = RunConfig.parse(TrainerEndToEndTest.YAML, List.of("run.output_dir=" + tmp.resolve("out"),
                "models.policy.path=" + model, "rollout.max_prompt_tokens=" + maxPrompt, "rollout.max_new_tokens=3",
                "rollout.truncation=" + truncation));
        List<int[]> first = new ArrayList<>();
        List<Boolean> cut = new ArrayList<>();
        try (Workload w = Workflows.open(cfg, new PrintStream(new ByteArrayOutputStream()));
             Policies ps = Policies.open(cfg, tmp.resolve(truncation + maxPrompt), null, null)) {
            EnginePolicy engine = new EnginePolicy(ps, cfg.rollout().sampling(), cfg.rollout().maxPromptTokens(), cfg.rollout().truncation(),
                    cfg.rollout().maxNewTokens(), SamplingStreams.training(0), 5, t -> t);
            for (Episode e : RolloutBatch.run(w.orchestra(), w.train().subList(0, 2), 2, engine)) {
                TurnData d = (TurnData) e.steps().getFirst().output().payload();
                first.add(d.promptIds());
                cut.add(d.promptTruncated());
            }
            return new Prompts(first, cut, engine.truncated());
        }
    }

    @Test
    void overLongPromptsAreCutAsTheSettingSays() throws Exception {
        Path model = ChatTemplateKwargsTest.qwen3Folder(tmp.resolve("m"));
        Prompts whole = firstPrompts(model, 250, "left");
        assertEquals(0, whole.truncated());
        int limit = 17;  // odd: middle keeps 8 then 9
        assertTrue(whole.first().stream().allMatch(p -> p.length > limit), "every first prompt is longer than " + limit);
        Prompts left = firstPrompts(model, limit, "left"), middle = firstPrompts(model, limit, "middle"),
                right = firstPrompts(model, limit, "right");
        for (int e = 0; e < whole.first().size(); e++) {
            int[] w = whole.first().get(e);
            assertArrayEquals(Arrays.copyOfRange(w, w.length - limit, w.length), left.first().get(e), "left, episode " + e);
            assertArrayEquals(Arrays.copyOf(w, limit), right.first().get(e), "right, episode " + e);
            int[] mid = IntStream.concat(Arrays.stream(w, 0, 8), Arrays.stream(w, w.length - 9, w.length)).toArray();
            assertArrayEquals(mid, middle.first().get(e), "middle, episode " + e);
            for (Prompts p : List.of(left, middle, right)) assertTrue(p.cut().get(e), "episode " + e + " marked as cut");
            assertTrue(!whole.cut().get(e));
        }
        // every turn is counted (the verifier's prompts quote the solver's answer, so they are cut too)
        for (Prompts p : List.of(left, middle, right)) assertTrue(p.truncated() >= whole.first().size(), p.truncated() + " cut");
        // the middle keeps the chat's start (Qwen3's <|im_start|>) and the reply's opening; the left cut loses the start
        assertEquals(whole.first().getFirst()[0], middle.first().getFirst()[0]);

        IllegalStateException err = assertThrows(IllegalStateException.class, () -> firstPrompts(model, limit, "error"));
        assertTrue(err.getMessage().startsWith("agent 'solver' (trajectory 0, turn 0): its prompt is " + whole.first().getFirst().length
                + " tokens, over rollout.max_prompt_tokens 17, and rollout.truncation is error"), err.getMessage());
        // a prompt that fits is not touched, whatever the setting
        assertEquals(0, firstPrompts(model, 250, "error").truncated());
    }

    @Test
    void theCutOnAwkwardLengths() {
        int[] ids = IntStream.range(0, 11).toArray();
        assertSame(ids, Truncation.MIDDLE.cut(ids, 11), "a prompt that fits is the same array");
        assertArrayEquals(new int[] {10}, Truncation.LEFT.cut(ids, 1));
        assertArrayEquals(new int[] {0}, Truncation.RIGHT.cut(ids, 1));
        assertArrayEquals(new int[] {10}, Truncation.MIDDLE.cut(ids, 1), "max 1: no head, a tail of one, as verl's halves");
        assertArrayEquals(new int[] {0, 10}, Truncation.MIDDLE.cut(ids, 2));
        assertArrayEquals(new int[] {0, 9, 10}, Truncation.MIDDLE.cut(ids, 3));
        assertArrayEquals(new int[] {0, 1, 2, 3, 4, 6, 7, 8, 9, 10}, Truncation.MIDDLE.cut(ids, 10));
        assertArrayEquals(new int[] {1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, Truncation.LEFT.cut(ids, 10));
        assertThrows(IllegalStateException.class, () -> Truncation.ERROR.cut(ids, 10));
    }

    @Test
    void theKeyBindsAndAnUnknownValueIsNamed() {
        assertEquals(Truncation.LEFT, RunConfig.parse(TrainerEndToEndTest.YAML, List.of()).rollout().truncation(), "default: left, as before");
        assertEquals(Truncation.MIDDLE, RunConfig.parse(TrainerEndToEndTest.YAML, List.of("rollout.truncation=middle")).rollout().truncation());
        ConfigException e = assertThrows(ConfigException.class,
                () -> RunConfig.parse(TrainerEndToEndTest.YAML, List.of("rollout.truncation=center")));
        assertTrue(e.getMessage().contains("rollout.truncation") && e.getMessage().contains("left, middle, right, error"), e.getMessage());
    }
}

// WarmStartTruncationTest.java — `drmas sft` cuts its demonstrations' prompts as the RL rollouts'
// are: over rollout.max_prompt_tokens, from the left, the middle (verl's halves) or the right as
// rollout.truncation says, compared with the same demonstrations uncut; `error` stops naming the
// agent; the responses are untouched. Before, the warm start taught on the whole prompts.
package dev.drmas.train;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.drmas.config.RunConfig;
import dev.drmas.workflow.Workflows;
import dev.drmas.workflow.Workload;
import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.SplittableRandom;
import java.util.stream.IntStream;
import org.bytedeco.pytorch.global.torch;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class WarmStartTruncationTest {
    @TempDir
    Path tmp;

    private int runs;

    @BeforeAll
    static void threads() {
        torch.set_num_threads(2);
    }

    /** Every demonstration row (solver's model first) of two scripted episodes under these settings. */
    private List<PpoUpdater.Row> rows(int maxPrompt, String truncation) {
        RunConfig cfg = RunConfig.parse(WarmStartUntrainedModelTest.YAML, List.of("run.output_dir=" + tmp.resolve("out"),
                "rollout.max_prompt_tokens=" + maxPrompt, "rollout.truncation=" + truncation));
        PrintStream quiet = new PrintStream(new ByteArrayOutputStream());
        try (Workload w = Workflows.open(cfg, quiet); Policies ps = Policies.open(cfg, tmp.resolve("run" + runs++), null, null)) {
            WarmStart ws = new WarmStart(cfg, w, ps, new TaskStream(w.train(), cfg.run().seed(), 0), quiet);
            List<PpoUpdater.Row> out = new ArrayList<>();
            ws.demonstrations(2, 1.0, new SplittableRandom(11)).values().forEach(out::addAll);
            return out;
        }
    }

    @Test
    void demonstrationPromptsAreCutAsTheRolloutsAre() {
        List<PpoUpdater.Row> whole = rows(300, "left");
        int limit = 9;  // odd: middle keeps 4 then 5
        assertTrue(whole.size() >= 4, "two episodes of solver and verifier turns: " + whole.size());
        assertTrue(whole.stream().allMatch(r -> r.promptIds().length > limit), "every prompt is longer than " + limit);
        List<PpoUpdater.Row> left = rows(limit, "left"), middle = rows(limit, "middle"), right = rows(limit, "right");
        for (List<PpoUpdater.Row> cut : List.of(left, middle, right)) assertEquals(whole.size(), cut.size());
        for (int i = 0; i < whole.size(); i++) {
            int[] w = whole.get(i).promptIds();
            assertArrayEquals(Arrays.copyOfRange(w, w.length - limit, w.length), left.get(i).promptIds(), "left, row " + i);
            assertArrayEquals(Arrays.copyOf(w, limit), right.get(i).promptIds(), "right, row " + i);
            int[] mid = IntStream.concat(Arrays.stream(w, 0, 4), Arrays.stream(w, w.length - 5, w.length)).toArray();
            assertArrayEquals(mid, middle.get(i).promptIds(), "middle, row " + i);
            for (List<PpoUpdater.Row> cut : List.of(left, middle, right)) {
                assertArrayEquals(whole.get(i).responseIds(), cut.get(i).responseIds(), "the response is not cut, row " + i);
            }
        }

        IllegalStateException err = assertThrows(IllegalStateException.class, () -> rows(limit, "error"));
        assertTrue(err.getMessage().startsWith("drmas sft: agent 'solver' (demonstration episode 0, turn 0): its prompt is "
                + whole.getFirst().promptIds().length + " tokens, over rollout.max_prompt_tokens 9, and rollout.truncation is error"),
                err.getMessage());
        // prompts that fit are not touched, whatever the setting
        List<PpoUpdater.Row> fits = rows(300, "error");
        for (int i = 0; i < whole.size(); i++) assertArrayEquals(whole.get(i).promptIds(), fits.get(i).promptIds());
    }
}

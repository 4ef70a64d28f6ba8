// EvaluationProgressTest.java — a long evaluation shows that it is alive (issue 20: orchestra rounds
// up to the bound make one evaluation run for minutes with no line): with the progress interval at
// 0 every agent round prints a line, and the results are those of a silent evaluation. A greedy
// evaluation of several samples a task is warned that they are identical.
package dev.drmas.train;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.drmas.config.RunConfig;
import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class EvaluationProgressTest {
    @TempDir
    Path tmp;

    @Test
    void everyRoundPrintsALineWhenAskedAndTheResultsStayTheSame() {
        RunConfig cfg = RunConfig.parse(TrainerEndToEndTest.YAML, List.of("run.output_dir=" + tmp, "orchestra.options.max_loops=3"));
        Map<String, Double> quiet, loud;
        ByteArrayOutputStream log = new ByteArrayOutputStream();
        String saved = System.getProperty("drmas.progress.interval_s");
        try (Trainer t = Trainer.open(cfg, new PrintStream(log, true, StandardCharsets.UTF_8))) {
            quiet = t.evaluate();
            assertTrue(!log.toString(StandardCharsets.UTF_8).contains("eval: round"), "the default interval (15 s) is not reached here");
            System.setProperty("drmas.progress.interval_s", "0");
            loud = t.evaluate();
        } finally {
            if (saved == null) System.clearProperty("drmas.progress.interval_s");
            else System.setProperty("drmas.progress.interval_s", saved);
        }
        String text = log.toString(StandardCharsets.UTF_8);
        assertTrue(text.contains("eval: round 1 done (solver, 4 of 4 episodes still running)"), text);
        assertTrue(text.contains("eval: round 2 done (verifier"), text);
        quiet.remove("time/eval_s");
        loud.remove("time/eval_s");
        assertEquals(quiet, loud);
        assertTrue(!text.contains("eval.temperature is 0"), "sampled evaluation: no greedy warning");
    }

    @Test
    void greedyEvaluationOfSeveralSamplesIsWarnedThatTheyAreIdentical() {
        RunConfig cfg = RunConfig.parse(TrainerEndToEndTest.YAML, List.of("run.output_dir=" + tmp, "eval.temperature=0", "eval.k=2",
                "eval.tasks=2"));
        ByteArrayOutputStream log = new ByteArrayOutputStream();
        Map<String, Double> r;
        try (Trainer t = Trainer.open(cfg, new PrintStream(log, true, StandardCharsets.UTF_8))) {
            r = t.evaluate();
        }
        String text = log.toString(StandardCharsets.UTF_8);
        assertTrue(text.contains("drmas: warning: eval.temperature is 0 (greedy): the 2 samples of a task are identical, so eval/pass@2"
                + " equals eval/pass@1"), text);
        // and so it is: each task's two replies are the same, solved both or neither
        assertEquals(r.get("eval/pass@1"), r.get("eval/pass@2"), r.toString());
        assertEquals(r.get("eval/pass@1"), r.get("eval/avg@2"), r.toString());
    }
}

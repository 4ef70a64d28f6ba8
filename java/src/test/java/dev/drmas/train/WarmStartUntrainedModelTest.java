// WarmStartUntrainedModelTest.java — `drmas sft` warns, naming the model and its agents, when a
// model got no demonstration rows (here math with max_loops 1: the verifier, on a model of its
// own, never acts), since it still writes that model's weights among the warm-start ones.
package dev.drmas.train;

import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.drmas.config.RunConfig;
import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class WarmStartUntrainedModelTest {
    @TempDir
    Path tmp;

    static final String YAML = """
            run: {name: sft, seed: 3, threads: 2, device: cpu, resume: never}
            data:
              synthetic: {operands: 2, digits: 1, operators: ["+"], train_size: 40, test_size: 4}
            models:
              sm:
                family: qwen3
                size: {hidden: 32, layers: 1, heads: 2, kv_heads: 1, intermediate: 64, max_positions: 512}
              vm:
                family: qwen3
                size: {hidden: 32, layers: 1, heads: 2, kv_heads: 1, intermediate: 64, max_positions: 512}
            agents:
              - {id: solver, role: solver, model: sm}
              - {id: verifier, role: verifier, model: vm}
            rollout: {tasks_per_step: 2, rollouts_per_task: 2, max_new_tokens: 6, max_prompt_tokens: 300}
            sft: {steps: 2, batch_size: 2, lr: 1.0e-3}
            metrics: {progress_bar: false}
            """;

    static String sft(Path out, String... overrides) throws Exception {
        RunConfig cfg = RunConfig.parse(YAML, List.of(java.util.stream.Stream.concat(
                java.util.stream.Stream.of("run.output_dir=" + out), java.util.stream.Stream.of(overrides)).toArray(String[]::new)));
        ByteArrayOutputStream buf = new ByteArrayOutputStream();
        try (PrintStream log = new PrintStream(buf, true, StandardCharsets.UTF_8); Trainer t = Trainer.open(cfg, log)) {
            Map<String, Double> losses = t.sft();
            assertTrue(losses.containsKey("sft/sm/loss"), losses.toString());
        }
        return buf.toString(StandardCharsets.UTF_8);
    }

    @Test
    void aModelWhoseAgentsNeverActIsNamed() throws Exception {
        String out = sft(tmp.resolve("one"), "orchestra.options.max_loops=1");
        assertTrue(out.contains("drmas: warning: model 'vm' (agents verifier) got no demonstration rows in 2 sft steps"), out);
        assertFalse(out.contains("model 'sm'"), out);
        assertTrue(Files.isDirectory(tmp.resolve("one/sft/sft/models/vm")), "its weights are still written");
    }

    @Test
    void noWarningWhenEveryModelLearns() throws Exception {
        String out = sft(tmp.resolve("two"), "orchestra.options.max_loops=2");
        assertFalse(out.contains("warning"), out);
    }
}

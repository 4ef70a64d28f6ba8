// IdleAgentsTest.java — `drmas train` warns, from the config alone, about an agent that the
// workflow's options leave without a turn and about a model none of whose agents acts (math with
// max_loops 1: the verifier, here on a model of its own), as `drmas sft` warns about a model that
// got no demonstration rows; the default max_loops 2 warns of nothing.
package dev.drmas.train;

import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.drmas.config.RunConfig;
import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class IdleAgentsTest {
    @TempDir
    Path tmp;

    private String train(Path out, String... overrides) throws Exception {
        List<String> o = new ArrayList<>(List.of("run.output_dir=" + out, "trainer.steps=1", "trainer.eval_freq=0", "trainer.save_freq=0"));
        o.addAll(List.of(overrides));
        RunConfig cfg = RunConfig.parse(WarmStartUntrainedModelTest.YAML, o);
        ByteArrayOutputStream buf = new ByteArrayOutputStream();
        try (PrintStream log = new PrintStream(buf, true, StandardCharsets.UTF_8); Trainer t = Trainer.open(cfg, log)) {
            t.train();
        }
        return buf.toString(StandardCharsets.UTF_8);
    }

    @Test
    void trainNamesTheVerifierThatMaxLoops1LeavesWithoutATurnAndItsModel() throws Exception {
        String out = train(tmp.resolve("one"), "orchestra.options.max_loops=1");
        assertTrue(out.contains("drmas: warning: agent 'verifier' (role verifier, model vm) never acts and gets no training rows: the math "
                + "workflow calls the verifier only after a solver turn before the last round, which needs orchestra.options.max_loops "
                + ">= 2 (it is 1)"), out);
        assertTrue(out.contains("drmas: warning: model 'vm' (agents verifier) never trains: none of its agents acts"), out);
        assertFalse(out.contains("agent 'solver'") || out.contains("model 'sm'"), out);
    }

    @Test
    void theDefaultMaxLoopsWarnsOfNothing() throws Exception {
        String out = train(tmp.resolve("two"));
        assertFalse(out.contains("never acts") || out.contains("never trains"), out);
    }
}

// SamplingStreamsTest.java — the sampler's stream keys: the layout the runs were recorded with
// ((step+1)·2^24 + traj·64 + turn; evaluation below zero), keys outside their fields refused, and a
// workflow setting that allows more turns than the key holds stopped at start-up with its key named.
package dev.drmas.train;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.drmas.config.ConfigException;
import dev.drmas.config.RunConfig;
import dev.drmas.workflow.Workflows;
import dev.drmas.workflow.Workload;
import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.util.List;
import org.junit.jupiter.api.Test;

class SamplingStreamsTest {
    @Test
    void keysPackStepTrajectoryAndTurn() {
        assertEquals((3L << 24) + 5 * 64 + 2, SamplingStreams.training(2).key(5, 2));
        assertEquals(-(1L << 40) + 7 * 64, SamplingStreams.evaluation().key(7, 0));
        assertTrue(SamplingStreams.evaluation().key((1L << 34) - 1, 63) < 0, "evaluation keys never meet training keys");
        assertThrows(IllegalStateException.class, () -> SamplingStreams.training(0).key(0, 64));
        assertThrows(IllegalStateException.class, () -> SamplingStreams.training(0).key(1 << 18, 0));
        assertThrows(IllegalStateException.class, () -> SamplingStreams.training(0).key(-1, 0));
    }

    static String check(String... overrides) {
        RunConfig cfg = RunConfig.parse("", List.of(overrides));
        try (Workload w = Workflows.open(cfg, new PrintStream(new ByteArrayOutputStream()))) {
            return assertThrows(ConfigException.class, () -> SamplingStreams.check(cfg, w)).getMessage();
        }
    }

    @Test
    void settingsBeyondTheKeyAreConfigErrors() {
        assertEquals("orchestra.options: workflow 'math' can take up to 79 agent turns an episode with these options; the "
                + "sampler's random streams hold at most 64 (fewer rounds or turns)", check("orchestra.options.max_loops=40"));
        assertTrue(check("orchestra.name=search", "orchestra.options.max_turns=33")
                .contains("workflow 'search' can take up to 66 agent turns"));
        // values whose turn count would not fit an int: refused as too many, not wrapped to a negative count that passes
        assertTrue(check("orchestra.options.max_loops=1073741825").contains("workflow 'math' can take up to 2147483647 agent turns"));
        assertTrue(check("orchestra.name=search", "orchestra.options.max_turns=1073741824")
                .contains("workflow 'search' can take up to 2147483647 agent turns"));
        assertTrue(check("rollout.tasks_per_step=70000", "rollout.rollouts_per_task=4")
                .startsWith("rollout.tasks_per_step: × rollout.rollouts_per_task = 280000 trajectories a step"));
        RunConfig ok = RunConfig.parse("", List.of("orchestra.options.max_loops=32"));
        try (Workload w = Workflows.open(ok, new PrintStream(new ByteArrayOutputStream()))) {
            SamplingStreams.check(ok, w);  // 63 turns fit
        }
    }
}

// PhaseTimerTest.java — phase seconds on a hand-driven clock: accumulation within a step, the
// reset at drain, nesting, and the errors of a phase opened twice.
package dev.drmas.metrics;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

class PhaseTimerTest {
    final long[] now = {1_000};
    final PhaseTimer timer = new PhaseTimer(() -> now[0]);

    void advanceSeconds(double s) {
        now[0] += Math.round(s * 1e9);
    }

    @Test
    void accumulatesPerPhaseAndResetsAtDrain() {
        try (var t = timer.phase("rollout")) {
            advanceSeconds(1.5);
        }
        try (var t = timer.phase("update")) {
            advanceSeconds(0.25);
            try (var inner = timer.phase("update/policy")) {
                advanceSeconds(0.125);
            }
        }
        try (var t = timer.phase("rollout")) { // a second rollout in the same step adds up
            advanceSeconds(2.0);
        }
        advanceSeconds(10); // outside any phase: counted nowhere
        assertEquals(3.5, timer.seconds("rollout"));
        Map<String, Double> step1 = timer.drain();
        assertEquals(List.of("time/rollout_s", "time/update_s", "time/update/policy_s"), List.copyOf(step1.keySet()));
        assertEquals(3.5, step1.get("time/rollout_s"));
        assertEquals(0.375, step1.get("time/update_s"));
        assertEquals(0.125, step1.get("time/update/policy_s"));

        try (var t = timer.phase("reward")) {
            advanceSeconds(0.5);
        }
        assertEquals(Map.of("time/reward_s", 0.5), timer.drain());
        assertEquals(Map.of(), timer.drain());
    }

    @Test
    void phaseOpenAtDrainCountsInTheStepItClosesIn() {
        var update = timer.phase("update");
        advanceSeconds(1);
        try (var t = timer.phase("rollout")) {
            advanceSeconds(2);
        }
        assertEquals(Map.of("time/rollout_s", 2.0), timer.drain());
        advanceSeconds(3);
        update.close();
        assertEquals(Map.of("time/update_s", 6.0), timer.drain()); // 1 + 2 + 3: all of its wall time
    }

    @Test
    void phaseOpenTwiceIsAnError() {
        var outer = timer.phase("rollout");
        var e = assertThrows(IllegalStateException.class, () -> timer.phase("rollout"));
        assertEquals("phase 'rollout' is already open; close it first", e.getMessage());
        advanceSeconds(1);
        outer.close();
        outer.close(); // closing twice counts once
        assertEquals(1.0, timer.seconds("rollout"));
        timer.phase("rollout").close(); // reopening after close is fine
        assertThrows(IllegalArgumentException.class, () -> timer.phase(" "));
    }
}

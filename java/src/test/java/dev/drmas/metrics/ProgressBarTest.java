// ProgressBarTest.java — the console sink on a hand-driven clock: exact plain lines and their
// cadence, the redrawn bar with its padding and final newline, ETA from a resumed step and without
// the evaluation before training, shown scalars that persist across logs lacking them, and the
// environment overrides.
package dev.drmas.metrics;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

class ProgressBarTest {
    final long[] now = {5_000_000_000L};
    final ByteArrayOutputStream bytes = new ByteArrayOutputStream();
    final PrintStream out = new PrintStream(bytes, true, StandardCharsets.UTF_8);

    void advanceSeconds(long s) {
        now[0] += s * 1_000_000_000L;
    }

    String printed() {
        return bytes.toString(StandardCharsets.UTF_8);
    }

    @Test
    void plainLinesEveryNStepsAndAtTheLast() {
        var bar = new ProgressBar(10, 0, List.of("reward/mean", "time/rollout_s"), out, ProgressBar.Mode.PLAIN, 3, () -> now[0]);
        for (int step = 1; step <= 10; step++) {
            advanceSeconds(2);
            bar.log(step, Map.of("reward/mean", step / 4.0, "time/rollout_s", 1.5, "other", 9.0));
            if (step == 3) bar.log(3, Map.of("eval/pass@1", 0.5)); // a second log at step 3 prints nothing more
        }
        bar.close();
        // step 3 after 6 s: 2 s a step, 7 to go -> 14 s; step 9: 18 s, 1 to go -> 2 s
        assertEquals("""
                step 3/10 (30%) elapsed 00:06 eta 00:14 reward/mean=0.7500 time/rollout_s=1.500
                step 6/10 (60%) elapsed 00:12 eta 00:08 reward/mean=1.500 time/rollout_s=1.500
                step 9/10 (90%) elapsed 00:18 eta 00:02 reward/mean=2.250 time/rollout_s=1.500
                step 10/10 (100%) elapsed 00:20 eta 00:00 reward/mean=2.500 time/rollout_s=1.500
                """, printed());
    }

    @Test
    void aSecondLogOfAPrintedStepIsPrintedWhenItShowsAValue() {
        // the trainer logs a step's training, then its evaluation: the last step's evaluation never reached the console
        var bar = new ProgressBar(2, 0, List.of("reward/mean", "eval/pass@1"), out, ProgressBar.Mode.PLAIN, 1, () -> now[0]);
        advanceSeconds(3);
        bar.log(1, Map.of("reward/mean", 0.5));
        bar.log(1, Map.of("other", 1.0)); // shows nothing: no line
        advanceSeconds(3);
        bar.log(2, Map.of("reward/mean", 0.75));
        bar.log(2, Map.of("eval/pass@1", 0.25));
        bar.close();
        assertEquals("""
                step 1/2 (50%) elapsed 00:03 eta 00:03 reward/mean=0.5000
                step 2/2 (100%) elapsed 00:06 eta 00:00 reward/mean=0.7500
                step 2/2 (100%) elapsed 00:06 eta 00:00 reward/mean=0.7500 eval/pass@1=0.2500
                """, printed());
    }

    @Test
    void barIsRedrawnInPlaceAndEndedByClose() {
        var bar = new ProgressBar(20, 0, List.of("reward/mean"), out, ProgressBar.Mode.BAR, 1, () -> now[0]);
        advanceSeconds(10);
        bar.log(5, Map.of("reward/mean", 12345.678));
        advanceSeconds(10);
        bar.log(6, Map.of("loss", 1.0)); // reward/mean keeps its last value; the line is shorter
        bar.close();
        // 5/20 = 25%: 6 of 24 cells; 10 s for 5 steps, 15 to go -> 30 s
        String first = "5/20 [######------------------]  25% 00:10<00:30 reward/mean=1.235e+04";
        // 6/20 = 30%: floor(7.2) = 7 cells; 20 s for 6 steps, 14 to go -> 46.67 s
        String second = "6/20 [#######-----------------]  30% 00:20<00:46 reward/mean=1.235e+04";
        assertEquals("\r" + first + "\r" + second + "\n", printed());

        bytes.reset();
        var bar2 = new ProgressBar(20, 0, List.of("x"), out, ProgressBar.Mode.BAR, 1, () -> now[0]);
        bar2.log(1, Map.of("x", 1234.5));
        bar2.log(2, Map.of("x", 1.0));
        String[] draws = printed().split("\r", -1);
        assertEquals(draws[1].length(), draws[2].length()); // padded over the longer line
        assertEquals(' ', draws[2].charAt(draws[2].length() - 1));
    }

    @Test
    void etaCountsOnlyTheStepsOfThisProcess() {
        var bar = new ProgressBar(100, 50, List.of(), out, ProgressBar.Mode.PLAIN, 10, () -> now[0]);
        advanceSeconds(10);
        bar.log(60, Map.of());
        // 10 steps in 10 s since the resume at 50, 40 to go
        assertEquals("step 60/100 (60%) elapsed 00:10 eta 00:40\n", printed());
        assertEquals("?", ProgressBar.eta(50, 100, 50, 1_000_000_000L));
    }

    @Test
    void etaLeavesOutTheEvaluationBeforeTraining() {
        // 100 s of evaluation at step 0, then 2 s a step: 9 steps to go are 18 s, not 9 x 102 s
        var bar = new ProgressBar(10, 0, List.of("eval/pass@1"), out, ProgressBar.Mode.PLAIN, 1, () -> now[0]);
        advanceSeconds(100);
        bar.log(0, Map.of("eval/pass@1", 0.125));
        advanceSeconds(2);
        bar.log(1, Map.of("reward/mean", 0.5));
        assertEquals("""
                step 0/10 (0%) elapsed 01:40 eta ? eval/pass@1=0.1250
                step 1/10 (10%) elapsed 01:42 eta 00:18 eval/pass@1=0.1250
                """, printed());
        // a resumed run's pending evaluation of its checkpoint's step alike
        bytes.reset();
        var resumed = new ProgressBar(100, 50, List.of(), out, ProgressBar.Mode.PLAIN, 1, () -> now[0]);
        advanceSeconds(60);
        resumed.log(50, Map.of("eval/pass@1", 0.5));
        advanceSeconds(10);
        resumed.log(60, Map.of());
        assertEquals("step 50/100 (50%) elapsed 01:00 eta ?\nstep 60/100 (60%) elapsed 01:10 eta 00:40\n", printed());
    }

    @Test
    void formats() {
        assertEquals("00:59", ProgressBar.duration(59_999_999_999L));
        assertEquals("1:01:01", ProgressBar.duration(3661_000_000_000L));
        assertEquals("123:00:00", ProgressBar.duration(123 * 3600_000_000_000L));
        assertEquals("0.5000", ProgressBar.number(0.5));
        assertEquals("3", ProgressBar.number(3.0));
        assertEquals("-0.0001230", ProgressBar.number(-0.000123));
        assertEquals("NaN", ProgressBar.number(Double.NaN));
        assertEquals("-Infinity", ProgressBar.number(Double.NEGATIVE_INFINITY));
    }

    @Test
    void environmentOverrides() {
        assertEquals(ProgressBar.Mode.PLAIN, ProgressBar.consoleMode(" Plain "));
        assertEquals(ProgressBar.Mode.BAR, ProgressBar.consoleMode("bar"));
        var e = assertThrows(IllegalArgumentException.class, () -> ProgressBar.consoleMode("fancy"));
        assertEquals("DRMAS_PROGRESS must be 'bar' or 'plain', got 'fancy'", e.getMessage());
        assertEquals(5, ProgressBar.plainEvery(null, 100));
        assertEquals(1, ProgressBar.plainEvery(null, 7));
        assertEquals(6, ProgressBar.plainEvery(null, 101));
        assertEquals(3, ProgressBar.plainEvery("3", 100));
        assertThrows(IllegalArgumentException.class, () -> ProgressBar.plainEvery("0", 100));
        assertThrows(IllegalArgumentException.class, () -> ProgressBar.plainEvery("x", 100));
        assertThrows(IllegalArgumentException.class,
                () -> new ProgressBar(0, 0, List.of(), out, ProgressBar.Mode.PLAIN, 1, () -> 0L));
    }
}

// RunReportPartsTest.java — the run report's parts on runs made in memory, as ReportRuns.read makes
// them: the series a plot draws (the mean of a mode's seeds, its lowest and highest seed dashed and
// out of the legend for a mode of two seeds or more only, a point alone marked), the logarithmic axis
// (chosen past a span of LOG_SPAN, not at it; its non-positive points left out of the drawing but
// kept in the data; a band with no positive point left out), the seed counts in the legends, the
// summary's sentences (the runs listed, how few seeds, no comparison with one mode, pass@1 as the
// headline wherever it stands in the line, the mean over two benchmarks with a seed that lacks one
// left out), a gradient-norm cell with only infinite and undefined seeds, a run whose only
// evaluation is the one before training, the progress line of a finished run, the order of the
// modes, the agent names read from the metrics, and the warnings and errors of reading runs.
package dev.drmas.metrics;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.knowm.xchart.XYChart;
import org.knowm.xchart.XYSeries;
import org.knowm.xchart.style.lines.SeriesLines;
import org.knowm.xchart.style.markers.SeriesMarkers;

class RunReportPartsTest {
    @TempDir
    Path tmp;

    static final ObjectMapper JSON = new ObjectMapper();

    /** A run of {@code label} and {@code seed} with these metric lines, trainer.steps {@code planned} (0: its config does not say). */
    static ReportRuns.Run run(String label, long seed, long planned, String... lines) {
        List<JsonNode> steps = new ArrayList<>(), evals = new ArrayList<>();
        for (String l : lines) {
            JsonNode n;
            try {
                n = JSON.readTree(l);
            } catch (JsonProcessingException e) {
                throw new IllegalArgumentException(l, e);
            }
            if (n.has("reward/mean")) steps.add(n);
            if (n.has("eval/pass@1")) evals.add(n);
        }
        return new ReportRuns.Run(Path.of(label + "-s" + seed), label, seed, "math", steps, evals, planned, 0);
    }

    /** Training lines with {@code key} = values[i] at step i + 1 (and a reward of 0.5 where the key is not the reward). */
    static String[] steps(String key, double... values) {
        String[] out = new String[values.length];
        for (int i = 0; i < values.length; i++) {
            out[i] = "{\"step\":" + (i + 1) + ",\"reward/mean\":" + (key.equals("reward/mean") ? values[i] : 0.5) + ",\"" + key + "\":" + values[i] + "}";
        }
        return out;
    }

    static Map<String, List<ReportRuns.Run>> groups(ReportRuns.Run... runs) {
        return ReportRuns.byLabel(List.of(runs));
    }

    static RunReport.Drawn draw(String key, boolean logIfWide, Map<String, List<ReportRuns.Run>> groups) {
        return RunReport.draw(new RunReport.Plot(key.replace('/', '-'), key, key, r -> r.series(key), logIfWide), groups);
    }

    static XYSeries series(XYChart chart, String name) {
        XYSeries s = chart.getSeriesMap().get(name);
        assertTrue(s != null, name + " is not drawn; drawn: " + chart.getSeriesMap().keySet());
        return s;
    }

    @Test
    void aModeOfSeveralSeedsHasItsLowestAndHighestSeedDashedAndOneSeedHasNone() {
        // grpo: seed 1 rewards −0.5, 0.5; seed 2 0.5, 1 (mean 0, 0.75: a linear axis draws the 0 and the −0.5).
        // drmas: one seed, one step: a point alone, marked
        var g = groups(run("grpo", 1, 0, steps("reward/mean", -0.5, 0.5)), run("grpo", 2, 0, steps("reward/mean", 0.5, 1)),
                run("drmas", 1, 0, steps("reward/mean", 0.25)));
        XYChart chart = draw("reward/mean", false, g).chart();
        assertEquals(List.of("grpo (2 seeds)", "grpo (2 seeds) min", "grpo (2 seeds) max", "drmas (1 seed)"),
                List.copyOf(chart.getSeriesMap().keySet()));
        XYSeries mean = series(chart, "grpo (2 seeds)"), lo = series(chart, "grpo (2 seeds) min"), hi = series(chart, "grpo (2 seeds) max");
        assertArrayEquals(new double[] {1, 2}, mean.getXData());
        assertArrayEquals(new double[] {0, 0.75}, mean.getYData(), 1e-12);
        assertArrayEquals(new double[] {-0.5, 0.5}, lo.getYData(), 1e-12);
        assertArrayEquals(new double[] {0.5, 1}, hi.getYData(), 1e-12);
        assertEquals(SeriesLines.SOLID, mean.getLineStyle());
        assertTrue(mean.isShowInLegend());
        assertEquals(SeriesMarkers.NONE, mean.getMarker(), "a line of two points has no markers");
        for (XYSeries band : List.of(lo, hi)) {
            assertEquals(SeriesLines.DASH_DASH, band.getLineStyle(), band.getName());
            assertFalse(band.isShowInLegend(), band.getName());
            assertEquals(mean.getLineColor(), band.getLineColor(), band.getName());
        }
        XYSeries alone = series(chart, "drmas (1 seed)");
        assertEquals(SeriesMarkers.CIRCLE, alone.getMarker(), "one point is drawn as a marker, or it would not show");
        assertFalse(mean.getLineColor().equals(alone.getLineColor()), "each mode its colour");
        assertFalse(chart.getStyler().isYAxisLogarithmic());
    }

    @Test
    void aWideScaleIsDrawnOnALogAxisWithoutItsNonPositivePoints() {
        // grpo's norms 0.001, 0 (no gradient), 10: a span of 1e4 over the positive ones. Seed 2 has no positive norm: its
        // band of lowest values has no point a log axis can draw and is left out, its highest (seed 1's) is drawn
        var g = groups(run("grpo", 1, 0, steps("agent/solver/grad_norm", 0.001, 0, 10)),
                run("grpo", 2, 0, steps("agent/solver/grad_norm", 0, 0, 0)));
        RunReport.Drawn d = draw("agent/solver/grad_norm", true, g);
        XYChart chart = d.chart();
        assertTrue(chart.getStyler().isYAxisLogarithmic());
        assertTrue(d.data().get("log_y").asBoolean());
        assertEquals("agent/solver/grad_norm, log", chart.getYAxisTitle());
        XYSeries mean = series(chart, "grpo (2 seeds)");
        assertArrayEquals(new double[] {1, 3}, mean.getXData(), "the step without a gradient is not drawn");
        assertArrayEquals(new double[] {0.0005, 5}, mean.getYData(), 1e-12);
        assertEquals(0.0, d.data().get("series").get(0).get("mean").get(1).asDouble(), "the data keeps it");
        assertEquals(List.of("grpo (2 seeds)", "grpo (2 seeds) max"), List.copyOf(chart.getSeriesMap().keySet()));
        assertArrayEquals(new double[] {0.001, 10}, series(chart, "grpo (2 seeds) max").getYData(), 1e-12);
        assertEquals(SeriesLines.DASH_DASH, series(chart, "grpo (2 seeds) max").getLineStyle());

        // a span of exactly LOG_SPAN stays linear (the axis turns logarithmic past it), and so does a plot that is not a scale
        var exact = groups(run("grpo", 1, 0, steps("agent/solver/grad_norm", 0.5, RunReport.LOG_SPAN * 0.5)));
        assertFalse(draw("agent/solver/grad_norm", true, exact).chart().getStyler().isYAxisLogarithmic());
        var wider = groups(run("grpo", 1, 0, steps("agent/solver/grad_norm", 0.5, RunReport.LOG_SPAN * 0.5 + 1)));
        assertTrue(draw("agent/solver/grad_norm", true, wider).chart().getStyler().isYAxisLogarithmic());
        assertFalse(draw("agent/solver/grad_norm", false, g).chart().getStyler().isYAxisLogarithmic());
        assertNull(draw("agent/verifier/grad_norm", true, g), "no run has the series: no plot");
    }

    @Test
    void theSeedCountIsNoPartOfTheScale() {
        // tight curves far from 1 (a span of 1.5): linear, whatever the number of seeds behind each point
        for (double base : new double[] {2e-4, 2e4}) {
            var g = groups(run("grpo", 1, 0, steps("agent/solver/grad_norm", base, 1.5 * base)));
            RunReport.Drawn d = draw("agent/solver/grad_norm", true, g);
            assertFalse(d.data().get("log_y").asBoolean(), "norms " + base + " to " + 1.5 * base);
        }
    }

    @Test
    void legendsCountTheSeedsBehindThePoints() {
        assertEquals("1 seed", RunReport.seedCount(1, 1, 1));
        assertEquals("4 seeds", RunReport.seedCount(4, 4, 4));
        assertEquals("3 of 4 seeds", RunReport.seedCount(3, 3, 4), "a seed that never logged the value");
        assertEquals("2–4 of 4 seeds", RunReport.seedCount(2, 4, 4), "seeds that stopped early");
        // three seeds, of which one did not log the inflation at all
        var g = groups(run("grpo", 1, 0, steps("agent/solver/inflation", 1, 2)), run("grpo", 2, 0, steps("agent/solver/inflation", 3, 4)),
                run("grpo", 3, 0, steps("reward/mean", 0.5, 0.5)));
        assertEquals("grpo (2 of 3 seeds)", draw("agent/solver/inflation", false, g).data().get("series").get(0).get("legend").asText());
    }

    @Test
    void theSummaryListsTheRunsAndSaysHowFewSeedsAre() {
        String[] evals = {"{\"step\":0,\"eval/pass@1\":0.1}", "{\"step\":2,\"eval/pass@1\":0.3}"};
        var two = groups(run("grpo", 1, 2, evals), run("grpo", 2, 2, evals), run("drmas", 1, 2, evals), run("drmas", 2, 2, evals));
        assertEquals("Runs: grpo × 2, drmas × 2 (mode × seeds). Intervals are over 2 seeds, few enough that only large differences "
                + "can show.", RunReport.summaryText(two).getFirst());
        List<ReportRuns.Run> five = new ArrayList<>();
        for (int s = 1; s <= 5; s++) five.add(run("grpo", s, 2, evals));
        List<String> text = RunReport.summaryText(ReportRuns.byLabel(five));
        assertEquals("Runs: grpo × 5 (mode × seeds). Intervals are over 5 seeds.", text.getFirst());
        // one mode: nothing to compare it with
        assertTrue(text.stream().noneMatch(l -> l.startsWith("Held-out")), text.toString());
    }

    @Test
    void theHeadlineIsPassAt1WhereverItStandsInTheLine() {
        String[] grpo = {"{\"step\":2,\"eval/avg@4\":0.9,\"eval/pass@1\":0.25}"}, drmas = {"{\"step\":2,\"eval/avg@4\":0.8,\"eval/pass@1\":0.5}"};
        List<String> text = RunReport.summaryText(groups(run("grpo", 1, 2, grpo), run("drmas", 1, 2, drmas)));
        assertTrue(text.contains("Held-out pass@1 (all test tasks pooled) after training: grpo 0.250; drmas 0.500. No intervals are apart. "
                + "grpo, drmas have fewer than two finished seeds: no interval, no comparison with them. These runs do not show that "
                + "one mode evaluates better than another."), text.toString());
    }

    @Test
    void theMeanOverBenchmarksWeighsEachAlikeAndLeavesOutASeedThatLacksOne() {
        // grpo seed 2's final evaluation has no math500: it stands behind no mean (not a 0 for math500)
        var g = groups(run("grpo", 1, 10, "{\"step\":10,\"eval/pass@1\":0.3,\"eval/aime24/pass@1\":0.125,\"eval/math500/pass@1\":0.375}"),
                run("grpo", 2, 10, "{\"step\":10,\"eval/pass@1\":0.3,\"eval/aime24/pass@1\":0.5}"),
                run("drmas", 1, 10, "{\"step\":10,\"eval/pass@1\":0.3,\"eval/aime24/pass@1\":0.5,\"eval/math500/pass@1\":0.25}"));
        List<String> text = RunReport.summaryText(g);
        assertTrue(text.contains("Mean of the benchmarks' pass@1 (2, each weighed alike): grpo 0.250 (n=1); drmas 0.375."), text.toString());
    }

    @Test
    void aNormCellOfOnlyInfiniteAndUndefinedSeedsShowsNoMean() {
        String key = "agent/solver/grad_norm";
        // (both at step 2: finished alike, with no note of seeds that were not)
        var g = List.of(run("grpo", 1, 0, "{\"step\":2,\"reward/mean\":0.5,\"" + key + "\":null,\"nonfinite\":{\"" + key + "\":\"Infinity\"}}"),
                run("grpo", 2, 0, steps(key, 0, 0)));
        assertEquals("∞ in 1 seed (a non-finite norm); no positive norm in 1 seed", RunReport.maxOverMedianCell(g, key));
    }

    @Test
    void aRunWhoseOnlyEvaluationIsBeforeTrainingHasNotFinished() {
        // no trainer.steps in its config and nothing logged past step 0: its target is step 0, and the evaluation there is no "after"
        ReportRuns.Run r = run("grpo", 1, 0, "{\"step\":0,\"eval/pass@1\":0.1}");
        assertNull(RunReport.finalEval(r, List.of(r)));
        assertFalse(RunReport.finished(r, List.of(r)));
    }

    @Test
    void aFinishedRunsProgressLineHasItsFirstAndLastRewardAndPass1() throws IOException {
        Path d = Files.createDirectories(tmp.resolve("grpo-s1"));
        assertEquals("", RunReport.oneLine(d), "no metrics yet");
        Files.write(d.resolve("metrics.jsonl"), List.of("{\"step\":0,\"eval/pass@1\":0.1}", "{\"step\":1,\"reward/mean\":0.25}",
                "{\"step\":2,\"reward/mean\":0.75}", "{\"step\":2,\"eval/pass@1\":0.125}"));
        assertEquals(" (reward 0.250 → 0.750; pass@1 0.100 → 0.125)", RunReport.oneLine(d));
        Files.write(d.resolve("metrics.jsonl"), List.of("{\"step\":1,\"reward/mean\":0.25}"));
        assertEquals(" (reward 0.250 → 0.250)", RunReport.oneLine(d));
        Files.write(d.resolve("metrics.jsonl"), List.of("{\"step\":0,\"eval/pass@1\":0.1}"));
        assertEquals(" (pass@1 0.100 → 0.100)", RunReport.oneLine(d));
    }

    @Test
    void modesAreInTheOrderTheyAreDiscussedThenByName() {
        List<ReportRuns.Run> runs = new ArrayList<>();
        for (String l : List.of("zeta", "agent-std", "grpo-rows", "alpha", "drmas", "grpo")) runs.add(run(l, 1, 0, steps("reward/mean", 0.5)));
        assertEquals(List.of("grpo", "grpo-rows", "drmas", "agent-std", "alpha", "zeta"), List.copyOf(ReportRuns.byLabel(runs).keySet()));
    }

    @Test
    void agentNamesAreTheOneSegmentBetweenPrefixAndSuffix() {
        ReportRuns.Run r = run("grpo", 1, 0, "{\"step\":1,\"reward/mean\":0.5,\"agent/rows\":1,\"agent//rows\":1,\"agent/a/b/rows\":1,"
                + "\"agent/solver/rows\":4,\"agent/verifier/rows\":4}");
        assertEquals(List.of("solver", "verifier"), r.names("agent/", "/rows"));
        // a non-finite value JsonlSink did not spell is no number: NaN, never 0
        ReportRuns.Run odd = run("grpo", 1, 0, "{\"step\":1,\"reward/mean\":0.5,\"g\":null,\"nonfinite\":{\"g\":\"huge\"}}");
        assertTrue(Double.isNaN(odd.valuesWithNonFinite("g")[0]));
    }

    @Test
    void aRunThatAlsoHoldsRunsIsReportedAloneWithAWarning() throws IOException {
        Path top = Files.createDirectories(tmp.resolve("top"));
        Files.writeString(top.resolve("metrics.jsonl"), "{\"step\":1,\"reward/mean\":0.5}\n");
        Path a = Files.createDirectories(top.resolve("a"));
        Files.writeString(a.resolve("metrics.jsonl"), "{\"step\":1,\"reward/mean\":0.25}\n");
        List<String> notes = new ArrayList<>();
        assertEquals(1, ReportRuns.find(List.of(top), notes::add).size());
        assertEquals(List.of(top + " is a run and also holds runs in sub-folders (a): only its own run is reported; name the others as DIRs"),
                notes);
        Files.writeString(Files.createDirectories(top.resolve("b")).resolve("metrics.jsonl"), "{\"step\":1,\"reward/mean\":0.75}\n");
        notes.clear();
        ReportRuns.find(List.of(top), notes::add);
        assertTrue(notes.getFirst().contains("(a, ...)"), notes.toString());
    }

    @Test
    void aLineWithoutANumericStepIsNamedByItsNumber() throws IOException {
        Path d = Files.createDirectories(tmp.resolve("r"));
        Path m = d.resolve("metrics.jsonl");
        Files.write(m, List.of("{\"step\":1,\"reward/mean\":0.5}", "{\"step\":\"2\",\"reward/mean\":0.5}", "{\"step\":3,\"reward/mean\":0.5}"));
        var e = assertThrows(IllegalArgumentException.class, () -> ReportRuns.read(d));
        assertEquals(m + ":2: a metrics line needs an object with a numeric \"step\"", e.getMessage());
    }
}

// RunReportTest.java — the run report on fixture runs written as the trainer writes them (metrics.jsonl
// and config.yaml in real folders): the HTML and the plot files exist, each plot's data has the
// modes' series with the mean, lowest and highest seed at every step, the summary states intervals
// over seeds and spikiness, a blow-up goes on a log axis, and a missing, corrupt or empty metrics
// file is an error naming it (but a last line a crash cut short is left out, and so is an
// experiment's run without data yet, with a note); "before" is the step-0 evaluation only, "after"
// each finished run's final evaluation (a seed that stopped early is left out and named); non-finite
// and zero gradient norms have their rules; each cell's n shows where it is not the row's; two runs
// of one mode and seed are an error; files are replaced by rename; the summary names the pairs of
// modes whose intervals do not overlap, and claims nothing of a mode with fewer than two finished
// seeds; the table's inflation and benchmark-mean columns hold their values (and the latter are
// there only with benchmarks); a run of trainer.epochs finishes at the step count the trainer printed
// (an experiment's log), where that is unknown at its mode's last step, which the summary says, and
// one without evaluations that stopped short of it has not finished; spikes are counted per 100
// logged steps, and the gradient-norm cells of a mode with seeds that did not finish say so; runs
// of different workflows are an error.
package dev.drmas.metrics;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class RunReportTest {
    @TempDir
    Path tmp;

    /** A run folder: `steps` training lines (reward = base + step/100, solver grad norm spiking at step 5) and two evaluations. */
    Path run(Path exp, String mode, int seed, double base) throws IOException {
        Path d = exp.resolve(mode + "-s" + seed);
        Files.createDirectories(d);
        Files.writeString(d.resolve("config.yaml"), "run: {name: " + mode + "-s" + seed + ", seed: " + seed + "}\n"
                + "algorithm: {mode: " + mode + ", global_pooling: trajectories}\norchestra: {name: math}\n");
        List<String> lines = new ArrayList<>();
        lines.add(String.format(Locale.ROOT, "{\"step\":0,\"wall_time\":1.0,\"eval/pass@1\":%.2f,\"eval/avg@4\":%.2f}", base, base));
        for (int s = 1; s <= 6; s++) {
            double g = s == 5 ? 10.0 : 1.0 + 0.1 * s;
            lines.add(String.format(Locale.ROOT, "{\"step\":%d,\"wall_time\":1.0,\"reward/mean\":%.4f,\"rows\":8.0,"
                    + "\"agent/solver/rows\":4.0,\"agent/solver/grad_norm\":%.3f,\"agent/solver/inflation\":2.0,"
                    + "\"agent/verifier/rows\":4.0,\"agent/verifier/grad_norm\":1.0,\"model/policy/clipfrac\":0.01}", s, base + s / 100.0, g));
        }
        lines.add(String.format(Locale.ROOT, "{\"step\":6,\"wall_time\":1.0,\"eval/pass@1\":%.2f,\"eval/avg@4\":%.2f}", base + 0.1, base + 0.1));
        Files.write(d.resolve("metrics.jsonl"), lines);
        return d;
    }

    @Test
    void experimentReportHasPlotsTablesAndAnHonestSummary() throws IOException {
        Path exp = tmp.resolve("exp");
        run(exp, "grpo", 1, 0.10);
        run(exp, "grpo", 2, 0.20);
        run(exp, "drmas", 1, 0.30);
        run(exp, "drmas", 2, 0.32);
        Files.createDirectories(exp.resolve("sft-s1").resolve("sft"));  // a warm start has no metrics: not a run
        Path html = RunReport.write(List.of(exp), exp.resolve("report.html"));
        String page = Files.readString(html);
        assertTrue(page.startsWith("<!DOCTYPE html>") && page.contains("data:image/png;base64,"), "plots are inline");
        for (String id : List.of("reward", "grad_norm-solver", "grad_norm-verifier", "inflation-solver", "eval-pass_1", "clipfrac-policy")) {
            assertTrue(Files.size(exp.resolve("plots").resolve(id + ".png")) > 1000, id);
        }
        JsonNode reward = new ObjectMapper().readTree(exp.resolve("plots/reward.json").toFile());
        assertEquals("grpo", reward.get("series").get(0).get("name").asText(), "grpo first");
        JsonNode grpo = reward.get("series").get(0);
        assertEquals(2, grpo.get("seeds").asInt());
        assertEquals(6, grpo.get("x").size());
        assertEquals(0.16, grpo.get("mean").get(0).asDouble(), 1e-9, "step 1: mean of 0.11 and 0.21");
        assertEquals(0.11, grpo.get("min").get(0).asDouble(), 1e-9);
        assertEquals(0.21, grpo.get("max").get(0).asDouble(), 1e-9);
        // the table: pass@1 after = mean ± t(1)·sd/√2 over the two seeds
        double sd = Math.sqrt(2 * 0.05 * 0.05), half = 12.706 * sd / Math.sqrt(2);
        assertTrue(page.contains(String.format(Locale.ROOT, "<td>%.3f ± %.3f</td>", 0.25, half)), page);
        // spikiness of the solver: max/median = 10 / 1.35; one spike (step 5)
        assertTrue(page.contains(String.format(Locale.ROOT, "%.3f", 10 / 1.35)), "max/median");
        assertTrue(page.contains("Every pair of intervals overlaps"), "two seeds: wide intervals, no claim");
        assertTrue(page.contains("Intervals are over 2 seeds"));
        assertTrue(page.contains("<p>" + exp.toAbsolutePath() + "</p>"), "the inputs are named");
        assertFalse(page.contains("<figure></figure>"), "a plot that no run has is left out, not an empty figure");
        // the solver's inflation is 2 at every step of every seed; the verifier's ‖g‖ is 1 throughout, its inflation not logged
        assertTrue(page.contains("<td>2.000 ± 0.000</td><td>1.000 ± 0.000</td><td>0.000 ± 0.000</td><td>–</td></tr>"), page);
        assertFalse(page.contains("their mean"), "no benchmarks, no mean of them");
    }

    @Test
    void statistics() {
        var i = ReportStats.interval(new double[] {1, 2, 3});
        assertEquals(2, i.mean(), 1e-12);
        assertEquals(4.303 * 1 / Math.sqrt(3), i.halfWidth(), 1e-12);
        assertTrue(Double.isNaN(ReportStats.interval(new double[] {5}).halfWidth()));
        assertEquals(2.5, ReportStats.median(new double[] {4, 1, 3, 2}));
        assertEquals(10 / 2.5, ReportStats.maxOverMedian(new double[] {1, 2, 3, 10}), 1e-12);
        assertEquals(1, ReportStats.spikes(new double[] {1, 1, 1, 4, 1, 2.9}));
        assertTrue(Double.isNaN(ReportStats.maxOverMedian(new double[] {0, 0, 0})), "no positive norm: undefined");
    }

    @Test
    void studentsTBeyondTheTableIsNotTheNormalQuantile() {
        // scipy.stats.t.ppf(0.975, df)
        assertEquals(2.0395, ReportStats.t975(31), 1e-4);
        assertEquals(2.0003, ReportStats.t975(60), 1e-4);
        assertEquals(1.9799, ReportStats.t975(120), 1e-4);
        assertEquals(2.042, ReportStats.t975(30), 1e-12, "the table below");
        double[] xs = new double[32];
        for (int i = 0; i < xs.length; i++) xs[i] = i % 2;
        double sd = Math.sqrt(16 * 0.25 * 2 / 31.0);  // 32 values of 0 and 1 about their mean 0.5
        assertEquals(2.0395 * sd / Math.sqrt(32), ReportStats.interval(xs).halfWidth(), 1e-4);
    }

    @Test
    void zeroNormsAreNoBaselineAndNonFiniteOnesAreSpikes() {
        // an agent without a non-zero advantage for its first steps: the baseline waits for three positive norms
        assertEquals(0, ReportStats.spikes(new double[] {0, 0, 0, 0, 0, 1, 1, 1, 1, 1.1}));
        assertEquals(1, ReportStats.spikes(new double[] {0, 0, 0, 0, 0, 1, 1, 1, 1, 3.5}));
        assertEquals(1.1, ReportStats.maxOverMedian(new double[] {0, 0, 0, 0, 0, 1, 1, 1, 1, 1.1}), 1e-12);
        assertEquals(0, ReportStats.spikes(new double[] {1, 1, 10}), "the first three are never judged");
        // a non-finite norm is a blow-up wherever it is
        assertEquals(2, ReportStats.spikes(new double[] {Double.NaN, 1, 1, 1, Double.POSITIVE_INFINITY, 1}));
        assertEquals(Double.POSITIVE_INFINITY, ReportStats.maxOverMedian(new double[] {1, 1, Double.NaN, 1}));
    }

    /** A run folder with the given metric lines and, where {@code steps} > 0, trainer.steps in its config. */
    Path runWith(Path exp, String mode, int seed, int steps, List<String> lines) throws IOException {
        Path d = Files.createDirectories(exp.resolve(mode + "-s" + seed));
        Files.writeString(d.resolve("config.yaml"), "run: {name: " + mode + "-s" + seed + ", seed: " + seed + "}\n"
                + "algorithm: {mode: " + mode + ", global_pooling: trajectories}\norchestra: {name: math}\n"
                + (steps > 0 ? "trainer: {steps: " + steps + "}\n" : ""));
        Files.write(d.resolve("metrics.jsonl"), lines);
        return d;
    }

    /** Training lines for steps 1..last (solver norm norm(step)), and evaluations: step → pass@1 (pass@4 twice it). */
    static List<String> lines(int last, java.util.function.IntFunction<Double> norm, double[][] evals) {
        List<String> out = new ArrayList<>();
        for (int s = 1; s <= last; s++) {
            java.util.Map<String, Double> m = new java.util.TreeMap<>(java.util.Map.of("reward/mean", 0.5, "agent/solver/rows", 8.0));
            Double g = norm.apply(s);
            if (g != null) m.put("agent/solver/grad_norm", g);
            out.add(JsonlSink.toLine(s, 1.0, m).strip());
        }
        for (double[] e : evals) {
            out.add(JsonlSink.toLine((long) e[0], 1.0, java.util.Map.of("eval/pass@1", e[1], "eval/pass@4", 2 * e[1], "eval/tasks", 40.0)).strip());
        }
        return out;
    }

    @Test
    void aSeedThatStoppedEarlyIsLeftOutOfAfterAndNamed() throws IOException {
        Path exp = tmp.resolve("early");
        runWith(exp, "drmas", 1, 60, lines(60, s -> 1.0, new double[][] {{0, 0.05}, {30, 0.2}, {60, 0.30}}));
        runWith(exp, "drmas", 2, 60, lines(60, s -> 1.0, new double[][] {{0, 0.05}, {30, 0.2}, {60, 0.32}}));
        runWith(exp, "drmas", 3, 60, lines(30, s -> 1.0, new double[][] {{0, 0.05}, {30, 0.10}}));  // crashed after step 30
        runWith(exp, "drmas", 4, 60, lines(12, s -> 1.0, new double[][] {{0, 0.05}}));  // only the evaluation before training
        // without trainer.steps in its config a run is finished at the last step any seed of its mode logged
        runWith(exp, "grpo", 1, 0, lines(60, s -> 1.0, new double[][] {{0, 0.05}, {60, 0.30}}));
        runWith(exp, "grpo", 2, 0, lines(60, s -> 1.0, new double[][] {{0, 0.05}, {60, 0.34}}));
        runWith(exp, "grpo", 3, 0, lines(40, s -> 1.0, new double[][] {{0, 0.05}, {40, 0.9}}));
        String page = Files.readString(RunReport.write(List.of(exp), exp.resolve("report.html"), w -> { }));
        double half = 12.706 * Math.sqrt(2 * 0.01 * 0.01) / Math.sqrt(2);
        // mode, seeds, finished, steps (the runs' last), pass@1 before, after (over the two finished seeds)
        assertTrue(page.contains(String.format(Locale.ROOT, "<tr><td>drmas</td><td>4</td><td>2</td><td>12–60</td><td>0.050 ± 0.000</td>"
                + "<td>%.3f ± %.3f (n=2)</td>", 0.31, half)), page);
        assertTrue(page.contains(String.format(Locale.ROOT, "<tr><td>grpo</td><td>3</td><td>2</td><td>40–60</td><td>0.050 ± 0.000</td>"
                + "<td>%.3f ± %.3f (n=2)</td>", 0.32, 12.706 * Math.sqrt(2 * 0.02 * 0.02) / Math.sqrt(2))), page);
        assertTrue(page.contains("drmas-s3 (step 30 of 60, last evaluation at step 30), drmas-s4 (step 12 of 60, last evaluation at step 0)"), page);
        assertTrue(page.contains("grpo-s3 (step 40 of 60, last evaluation at step 40)"), page);
        // the plots say how many seeds stand behind their points
        JsonNode reward = new ObjectMapper().readTree(exp.resolve("plots/reward.json").toFile());
        JsonNode drmas = reward.get("series").get(1);
        assertEquals("drmas (2–4 of 4 seeds)", drmas.get("legend").asText());
        assertEquals(4, drmas.get("n").get(0).asInt());
        assertEquals(2, drmas.get("n").get(59).asInt());
    }

    @Test
    void afterIsEachRunsFinalEvaluationNotTheLastThatHasTheKey() throws IOException {
        Path exp = tmp.resolve("k");
        for (int seed = 1; seed <= 3; seed++) {
            List<String> l = lines(60, s -> 1.0, new double[][] {{0, 0.05}, {30, seed == 2 ? 0.1 : 0.2}});
            // seed 2 resumed at step 30 with eval.k 8: its final evaluation has no pass@4
            l.add(JsonlSink.toLine(60, 1.0, java.util.Map.of("eval/pass@1", 0.3, seed == 2 ? "eval/pass@8" : "eval/pass@4", 0.5)).strip());
            runWith(exp, "drmas", seed, 60, l);
        }
        String page = Files.readString(RunReport.write(List.of(exp), exp.resolve("report.html"), w -> { }));
        // pass@1 before/after, pass@4 before/after (seeds 1 and 3 only), pass@8 before/after (seed 2)
        assertTrue(page.contains("<td>0.050 ± 0.000</td><td>0.300 ± 0.000</td><td>0.100 ± 0.000</td><td>0.500 ± 0.000 (n=2)</td>"
                + "<td>–</td><td>0.500 (n=1)</td>"), page);
    }

    /** A run folder whose config.yaml has {@code trainer} as its trainer section (as config.yaml holds every setting, steps too). */
    Path runWithTrainer(Path exp, String mode, int seed, String trainer, List<String> lines) throws IOException {
        Path d = Files.createDirectories(exp.resolve(mode + "-s" + seed));
        Files.writeString(d.resolve("config.yaml"), "run: {name: " + mode + "-s" + seed + ", seed: " + seed + "}\n"
                + "algorithm: {mode: " + mode + ", global_pooling: trajectories}\norchestra: {name: math}\ntrainer: " + trainer + "\n");
        Files.write(d.resolve("metrics.jsonl"), lines);
        return d;
    }

    /** The experiment's log of {@code run} with the line the trainer prints at its start under trainer.epochs. */
    static void epochsLog(Path exp, String run, int epochs, int steps) throws IOException {
        Files.createDirectories(exp.resolve("logs"));
        Files.writeString(exp.resolve("logs").resolve(run + ".log"), "=== drmas experiment: " + run + " started 2026-01-01T00:00:00Z ===\n"
                + "drmas: trainer.epochs " + epochs + ": " + steps + " steps (" + epochs + " x floor(" + steps / epochs * 32
                + " training tasks / 32 a step)); trainer.steps is not used\nstep 1/" + steps + " ...\n");
    }

    @Test
    void runsOfTrainerEpochsFinishAtTheStepCountTheTrainerPrinted() throws IOException {
        // the GPU configs: trainer.epochs 2 over 23 steps a pass = 46 steps, while config.yaml still says steps: 100
        Path exp = tmp.resolve("epochs");
        for (String mode : List.of("grpo", "drmas")) {
            for (int seed = 1; seed <= 2; seed++) {
                double end = (mode.equals("grpo") ? 0.3 : 0.6) + seed / 100.0;
                runWithTrainer(exp, mode, seed, "{steps: 100, epochs: 2, eval_freq: 20}", lines(46, s -> 1.0, new double[][] {{0, 0.1}, {20, 0.2},
                        {40, 0.25}, {46, end}}));
                epochsLog(exp, mode + "-s" + seed, 2, 46);
            }
        }
        String page = Files.readString(RunReport.write(List.of(exp), exp.resolve("report.html"), w -> { }));
        assertFalse(page.contains("Unfinished") || page.contains("Steps planned unknown"), page);
        assertTrue(page.contains("<tr><td>grpo</td><td>2</td><td>2</td><td>46</td><td>0.100 ± 0.000</td><td>"
                + String.format(Locale.ROOT, "%.3f ± %.3f", 0.315, 12.706 * Math.sqrt(0.005 * 0.005 * 2) / Math.sqrt(2)) + "</td>"), page);
        assertTrue(page.contains("Intervals that do not overlap: grpo vs drmas."), page);
    }

    @Test
    void theTrainersPlanGivesTheStepsOfItsEpochs() throws IOException {
        // plan.json (Trainer.PLAN_FILE), written at the run's start, without an experiment's log or marker
        Path exp = tmp.resolve("plan");
        Path r = runWithTrainer(exp, "grpo", 1, "{steps: 100, epochs: 2, eval_freq: 20}", lines(30, s -> 1.0, new double[][] {{0, 0.1}, {20, 0.2}}));
        assertEquals(0, ReportRuns.read(r).plannedSteps(), "without a record: unknown");
        Files.writeString(r.resolve(ReportRuns.PLAN_FILE), "{\"total_steps\":46,\"epochs\":2,\"train_tasks\":92,\"tasks_per_step\":4}\n");
        assertEquals(46, ReportRuns.read(r).plannedSteps());
        // a plan of other epochs (the run resumed with a larger trainer.epochs, its plan not yet rewritten) is not this config's
        Files.writeString(r.resolve(ReportRuns.PLAN_FILE), "{\"total_steps\":23,\"epochs\":1}\n");
        assertEquals(0, ReportRuns.read(r).plannedSteps());
    }

    @Test
    void aRunWithoutEvaluationsThatCrashedBeforeItsEpochsIsUnfinished() throws IOException {
        // trainer.eval_freq 0: finished means having logged the last step; seed 2 crashed at step 150 of 468 (past trainer.steps' 100)
        Path exp = tmp.resolve("crash");
        runWithTrainer(exp, "grpo", 1, "{steps: 100, epochs: 2, eval_freq: 0}", lines(468, s -> 1.0, new double[0][]));
        runWithTrainer(exp, "grpo", 2, "{steps: 100, epochs: 2, eval_freq: 0}", lines(150, s -> 1.0, new double[0][]));
        epochsLog(exp, "grpo-s1", 2, 468);
        epochsLog(exp, "grpo-s2", 2, 468);
        String page = Files.readString(RunReport.write(List.of(exp), exp.resolve("report.html"), w -> { }));
        assertTrue(page.contains("<tr><td>grpo</td><td>2</td><td>1</td><td>150–468</td>"), page);
        assertTrue(page.contains("grpo-s2 (step 150 of 468, no evaluation)"), page);
    }

    @Test
    void withoutTheStepCountOfItsEpochsARunIsJudgedByItsModesOthersAndTheReportSaysSo() throws IOException {
        // no experiment log: seed 1 has the experiment's marker of a finished job (its last step is its last), seeds 2 and 3
        // neither: their planned steps are unknown, and the group's last step stands in
        Path exp = tmp.resolve("unknown");
        Path s1 = runWithTrainer(exp, "grpo", 1, "{steps: 100, epochs: 2, eval_freq: 20}", lines(46, s -> 1.0, new double[][] {{0, 0.1}, {46, 0.3}}));
        Files.writeString(s1.resolve(ReportRuns.EXPERIMENT_DONE), "[train]\n");
        runWithTrainer(exp, "grpo", 2, "{steps: 100, epochs: 2, eval_freq: 20}", lines(46, s -> 1.0, new double[][] {{0, 0.1}, {46, 0.32}}));
        runWithTrainer(exp, "grpo", 3, "{steps: 100, epochs: 2, eval_freq: 20}", lines(30, s -> 1.0, new double[][] {{0, 0.1}, {20, 0.2}}));
        assertEquals(46, ReportRuns.read(s1).plannedSteps());
        assertEquals(0, ReportRuns.read(exp.resolve("grpo-s2")).plannedSteps());
        String page = Files.readString(RunReport.write(List.of(exp), exp.resolve("report.html"), w -> { }));
        assertTrue(page.contains("<tr><td>grpo</td><td>3</td><td>2</td><td>30–46</td>"), page);
        assertTrue(page.contains("grpo-s3 (step 30 of 46, last evaluation at step 20)"), page);
        assertTrue(page.contains("Steps planned unknown for grpo-s2, grpo-s3: trainer.epochs sets their length"), page);
    }

    @Test
    void noOverlapIsClaimedForAModeWithFewerThanTwoFinishedSeeds() throws IOException {
        // drmas seed 2 stopped early: drmas's "after" is one seed, whose interval has no width
        Path exp = tmp.resolve("one");
        runWith(exp, "grpo", 1, 10, lines(10, s -> 1.0, new double[][] {{0, 0.05}, {10, 0.30}}));
        runWith(exp, "grpo", 2, 10, lines(10, s -> 1.0, new double[][] {{0, 0.05}, {10, 0.31}}));
        runWith(exp, "drmas", 1, 10, lines(10, s -> 1.0, new double[][] {{0, 0.05}, {10, 0.90}}));
        runWith(exp, "drmas", 2, 10, lines(5, s -> 1.0, new double[][] {{0, 0.05}}));
        String page = Files.readString(RunReport.write(List.of(exp), exp.resolve("report.html"), w -> { }));
        assertFalse(page.contains("Every pair of intervals overlaps"), page);
        assertTrue(page.contains("No intervals are apart. drmas has fewer than two finished seeds: no interval, no comparison with it. "
                + "These runs do not show that one mode evaluates better than another."), page);
    }

    @Test
    void nonFiniteAndZeroNormsAreCountedNotDropped() throws IOException {
        Path exp = tmp.resolve("norms");
        // agent-std blew up: Infinity at steps 10 and 15 of seed 1, NaN at step 10 of seed 2 (JsonlSink writes null + "nonfinite")
        runWith(exp, "agent-std", 1, 20, lines(20, s -> s == 10 || s == 15 ? Double.POSITIVE_INFINITY : 1.0, new double[][] {{20, 0.1}}));
        runWith(exp, "agent-std", 2, 20, lines(20, s -> s == 10 ? Double.NaN : 1.0, new double[][] {{20, 0.1}}));
        // grpo: a finite spike in seed 1; seed 2's solver never had a gradient
        runWith(exp, "grpo", 1, 20, lines(20, s -> s == 10 ? 5.0 : 1.0, new double[][] {{20, 0.1}}));
        runWith(exp, "grpo", 2, 20, lines(20, s -> 0.0, new double[][] {{20, 0.1}}));
        assertTrue(Files.readString(exp.resolve("agent-std-s2/metrics.jsonl")).contains("\"nonfinite\":{\"agent/solver/grad_norm\":\"NaN\"}"));
        String page = Files.readString(RunReport.write(List.of(exp), exp.resolve("report.html"), w -> { }));
        // max/median, spikes per 100 logged steps per seed (2 and 1 of 20: 10 and 5), inflation (none logged)
        assertTrue(page.contains("<td>∞ in 2 seeds (a non-finite norm)</td><td>"
                + String.format(Locale.ROOT, "%.3f ± %.3f", 7.5, 12.706 * 2.5) + "; 3 non-finite</td>"), page);
        assertTrue(page.contains("<td>5.000 (n=1); no positive norm in 1 seed</td><td>"
                + String.format(Locale.ROOT, "%.3f ± %.3f", 2.5, 12.706 * 2.5) + "</td>"), page);
        assertTrue(page.contains("Gradient-norm max/median of agent solver: grpo 5.000 (n=1); no positive norm in 1 seed; "
                + "agent-std ∞ in 2 seeds (a non-finite norm)."), page);
    }

    @Test
    void spikesAreCountedPerLoggedStepAndAModeWithUnfinishedSeedsIsMarked() throws IOException {
        // one spike every 20 steps in every seed of both modes; grpo-s3 stopped at step 20: 1 spike in 20 steps is the
        // same rate as 3 in 60 (a count made it 2.333 against drmas's 3)
        Path exp = tmp.resolve("rate");
        for (int seed = 1; seed <= 3; seed++) {
            int last = seed == 3 ? 20 : 60;
            runWith(exp, "grpo", seed, 60, lines(last, s -> s % 20 == 0 ? 10.0 : 1.0, new double[][] {{0, 0.1}, {last, 0.2}}));
            runWith(exp, "drmas", seed, 60, lines(60, s -> s % 20 == 0 ? 10.0 : 1.0, new double[][] {{0, 0.1}, {60, 0.2}}));
        }
        String page = Files.readString(RunReport.write(List.of(exp), exp.resolve("report.html"), w -> { }));
        assertTrue(page.contains("<th>solver spikes per 100 logged steps</th>"), page);
        assertTrue(page.contains("<td>10.000 ± 0.000 (2 of 3 finished)</td><td>5.000 ± 0.000 (2 of 3 finished)</td>"), page);
        assertTrue(page.contains("<td>10.000 ± 0.000</td><td>5.000 ± 0.000</td>"), page);
        assertTrue(page.contains("Gradient-norm max/median of agent solver: grpo 10.000 ± 0.000 (2 of 3 finished); drmas 10.000 ± 0.000."),
                page);
    }

    @Test
    void theSummaryNamesThePairsWhoseIntervalsAreApart() throws IOException {
        // pass@1 after: grpo 0.30, 0.31; drmas 0.60, 0.61 (each 0.305 or 0.605 ± 12.706 · 0.005); agent-std 0.45, 0.55
        // (0.5 ± 12.706 · 0.05 = 0.635, over both others): only grpo and drmas are apart
        Path exp = tmp.resolve("apart");
        double[][] after = {{0.30, 0.31}, {0.60, 0.61}, {0.45, 0.55}};
        String[] modes = {"grpo", "drmas", "agent-std"};
        for (int m = 0; m < modes.length; m++) {
            for (int seed = 1; seed <= 2; seed++) {
                runWith(exp, modes[m], seed, 10, lines(10, s -> 1.0, new double[][] {{0, 0.05}, {10, after[m][seed - 1]}}));
            }
        }
        String page = Files.readString(RunReport.write(List.of(exp), exp.resolve("report.html"), w -> { }));
        assertTrue(page.contains(String.format(Locale.ROOT, "grpo %.3f ± %.3f; drmas %.3f ± %.3f; agent-std %.3f ± %.3f. ",
                0.305, 12.706 * 0.005, 0.605, 12.706 * 0.005, 0.5, 12.706 * 0.05)), page);
        assertTrue(page.contains("Intervals that do not overlap: grpo vs drmas."), page);
        assertFalse(page.contains("Every pair of intervals overlaps"), page);
    }

    @Test
    void theSummarySaysWhichModesHaveOneSeed() throws IOException {
        Path exp = tmp.resolve("seeds");
        run(exp, "grpo", 1, 0.10);
        run(exp, "grpo", 2, 0.20);
        run(exp, "grpo", 3, 0.20);
        run(exp, "drmas", 1, 0.30);
        String page = Files.readString(RunReport.write(List.of(exp), exp.resolve("report.html"), w -> { }));
        assertFalse(page.contains("one seed per mode"), page);
        assertTrue(page.contains("drmas has one seed: no measure of spread there"), page);
        run(exp, "drmas", 2, 0.30);
        page = Files.readString(RunReport.write(List.of(exp), exp.resolve("report.html"), w -> { }));
        assertTrue(page.contains("Intervals are over 2 to 3 seeds"), page);
    }

    @Test
    void unreadableRunsAreNamed() throws IOException {
        Path d = run(tmp, "drmas", 1, 0.1);
        Path m = d.resolve("metrics.jsonl");
        List<String> lines = new ArrayList<>(Files.readAllLines(m));
        lines.set(3, lines.get(3).substring(0, 20));  // a line cut by a crash
        Files.write(m, lines);
        var e = assertThrows(IllegalArgumentException.class, () -> RunReport.write(List.of(d), tmp.resolve("r.html")));
        assertTrue(e.getMessage().startsWith(m + ":4: not a JSON object"), e.getMessage());
        Files.writeString(m, "");
        e = assertThrows(IllegalArgumentException.class, () -> RunReport.write(List.of(d), tmp.resolve("r.html")));
        assertEquals(m + ": no training step or evaluation in it", e.getMessage());
        Path empty = Files.createDirectories(tmp.resolve("nothing"));
        e = assertThrows(IllegalArgumentException.class, () -> RunReport.write(List.of(empty), tmp.resolve("r.html")));
        assertTrue(e.getMessage().contains("no metrics.jsonl"), e.getMessage());
        e = assertThrows(IllegalArgumentException.class, () -> RunReport.write(List.of(tmp.resolve("missing")), tmp.resolve("r.html")));
        assertTrue(e.getMessage().endsWith("missing: no such folder"), e.getMessage());
    }

    @Test
    void aBlowUpIsDrawnOnALogAxisWithoutFlatteningTheOthers() throws IOException {
        Path exp = tmp.resolve("wide");
        for (String mode : List.of("grpo", "agent-std")) {
            Path d = Files.createDirectories(exp.resolve(mode + "-s1"));
            Files.writeString(d.resolve("config.yaml"), "run: {name: " + mode + "-s1, seed: 1}\n"
                    + "algorithm: {mode: " + mode + ", global_pooling: trajectories}\norchestra: {name: math}\n");
            List<String> lines = new ArrayList<>();
            for (int s = 1; s <= 5; s++) {
                // grpo: norms near 1 with a zero (an agent without a non-zero advantage); agent-std: 1e5
                double g = mode.equals("grpo") ? (s == 3 ? 0 : 0.5 + 0.1 * s) : 1e5 * s;
                lines.add(String.format(Locale.ROOT, "{\"step\":%d,\"wall_time\":1.0,\"reward/mean\":0.5,\"rows\":4.0,"
                        + "\"agent/solver/rows\":4.0,\"agent/solver/grad_norm\":%s,\"model/policy/clipfrac\":0.01}", s, g));
            }
            Files.write(d.resolve("metrics.jsonl"), lines);
        }
        RunReport.write(List.of(exp), exp.resolve("report.html"));
        String page = Files.readString(exp.resolve("report.html"));
        // runs without evaluations (trainer.eval_freq 0) that logged their last step have finished
        assertTrue(page.contains("<tr><td>grpo</td><td>1</td><td>1</td><td>5</td>") && !page.contains("Unfinished"), page);
        JsonNode norms = new ObjectMapper().readTree(exp.resolve("plots/grad_norm-solver.json").toFile());
        assertTrue(norms.get("log_y").asBoolean(), "a span of 1e5 / 0.6 is drawn on a log axis");
        assertEquals(0.0, norms.get("series").get(0).get("mean").get(2).asDouble(), "the data keeps the zero");
        assertTrue(Files.size(exp.resolve("plots/grad_norm-solver.png")) > 1000);
        JsonNode reward = new ObjectMapper().readTree(exp.resolve("plots/reward.json").toFile());
        assertTrue(!reward.get("log_y").asBoolean(), "the reward keeps its linear axis");
        // without the blow-up the norms are drawn linearly
        Files.walk(exp.resolve("agent-std-s1")).sorted(java.util.Comparator.reverseOrder()).forEach(f -> f.toFile().delete());
        RunReport.write(List.of(exp), exp.resolve("report.html"));
        norms = new ObjectMapper().readTree(exp.resolve("plots/grad_norm-solver.json").toFile());
        assertTrue(!norms.get("log_y").asBoolean(), "norms within 0.6..1.0 stay linear");
    }

    @Test
    void aLastLineCutShortIsLeftOutWithANoteButADamagedMiddleLineIsAnError() throws IOException {
        Path d = run(tmp, "drmas", 1, 0.1);
        Path m = d.resolve("metrics.jsonl");
        String whole = Files.readString(m);
        Files.writeString(m, whole + "{\"step\":7,\"wall_ti");  // the crash cut the write of step 7
        List<String> notes = new ArrayList<>();
        RunReport.write(List.of(d), tmp.resolve("r.html"), notes::add);
        assertEquals(1, notes.size(), notes.toString());
        assertTrue(notes.getFirst().startsWith(m + ":9: a last line cut short"), notes.getFirst());
        // the same text with its newline is a damaged line, not a write cut short
        Files.writeString(m, whole + "{\"step\":7,\"wall_ti\n");
        var e = assertThrows(IllegalArgumentException.class, () -> RunReport.write(List.of(d), tmp.resolve("r.html"), notes::add));
        assertTrue(e.getMessage().startsWith(m + ":9: not a JSON object"), e.getMessage());
    }

    @Test
    void anExperimentsRunWithoutDataYetIsLeftOutWithAWarning() throws IOException {
        Path exp = tmp.resolve("exp");
        run(exp, "grpo", 1, 0.10);
        Path started = Files.createDirectories(exp.resolve("drmas-s1"));
        Files.writeString(started.resolve("metrics.jsonl"), "");  // as the trainer leaves it before its first step
        List<String> notes = new ArrayList<>();
        RunReport.write(List.of(exp), exp.resolve("report.html"), notes::add);
        assertEquals(1, notes.size(), notes.toString());
        assertTrue(notes.getFirst().contains(started.resolve("metrics.jsonl") + ": no training step or evaluation in it"), notes.getFirst());
        String page = Files.readString(exp.resolve("report.html"));
        assertTrue(page.contains("<td>grpo</td>") && !page.contains("<td>drmas</td>"), page);
        Files.writeString(exp.resolve("grpo-s1/metrics.jsonl"), "");
        var e = assertThrows(IllegalArgumentException.class, () -> RunReport.write(List.of(exp), exp.resolve("report.html"), notes::add));
        assertTrue(e.getMessage().contains("none of its runs has a training step or evaluation yet"), e.getMessage());
    }

    @Test
    void beforeIsTheStepZeroEvaluationAndStepsAreStepsNotLines() throws IOException {
        Path exp = tmp.resolve("exp");
        Path d = run(exp, "grpo", 1, 0.10);
        Path m = d.resolve("metrics.jsonl");
        // trainer.eval_before_train=false and metrics.log_freq=3: no step-0 evaluation, lines for steps 3 and 6
        List<String> lines = Files.readAllLines(m).stream()
                .filter(l -> !l.startsWith("{\"step\":0,") && (!l.contains("reward/mean") || l.matches("\\{\"step\":[36],.*"))).toList();
        Files.write(m, lines);
        RunReport.write(List.of(exp), exp.resolve("report.html"), w -> { });
        String page = Files.readString(exp.resolve("report.html"));
        // mode, seeds, steps, pass@1 before, pass@1 after
        assertTrue(page.contains("<tr><td>grpo</td><td>1</td><td>1</td><td>6</td><td>–</td><td>0.200</td>"), page);
    }

    @Test
    void twoRunsOfTheSameModeAndSeedAreAnError() throws IOException {
        Path exp = tmp.resolve("exp");
        Path a = run(exp, "grpo", 1, 0.10);
        Path b = exp.resolve("grpo-trajectories-s1");  // an earlier experiment's --pooling trajectories,rows name
        Files.move(run(tmp.resolve("other"), "grpo", 1, 0.2), b);
        var e = assertThrows(IllegalArgumentException.class, () -> RunReport.write(List.of(exp), exp.resolve("report.html"), w -> { }));
        assertTrue(e.getMessage().contains(a + " and " + b + " are both grpo with seed 1"), e.getMessage());
    }

    @Test
    void runsOfDifferentWorkflowsAreAnError() throws IOException {
        // a search experiment's drmas-s2 named beside a math experiment: one drmas row would pool their seeds
        Path math = tmp.resolve("math"), search = tmp.resolve("search");
        run(math, "grpo", 1, 0.10);
        run(math, "drmas", 1, 0.30);
        Path s2 = run(search, "drmas", 2, 0.50);
        Files.writeString(s2.resolve("config.yaml"), Files.readString(s2.resolve("config.yaml")).replace("{name: math}", "{name: search}"));
        var e = assertThrows(IllegalArgumentException.class, () -> RunReport.write(List.of(math, search), tmp.resolve("r.html"), w -> { }));
        assertTrue(e.getMessage().startsWith("runs of different workflows: math (" + math.resolve("drmas-s1") + " and 1 more), search ("
                + s2 + "); a report compares modes on one workflow"), e.getMessage());
    }

    @Test
    void theReportReplacesTheOldFileInsteadOfWritingIntoIt() throws IOException {
        Path d = run(tmp, "drmas", 1, 0.1);
        Path html = tmp.resolve("r.html");
        Files.writeString(html, "old");
        Path link = Files.createLink(tmp.resolve("old.html"), html);  // the same file, as long as nothing renames onto r.html
        RunReport.write(List.of(d), html, w -> { });
        assertEquals("old", Files.readString(link), "a reader of the old file keeps it whole");
        assertTrue(Files.readString(html).startsWith("<!DOCTYPE html>"));
        try (var s = Files.list(tmp)) {
            assertEquals(List.of(), s.filter(f -> f.getFileName().toString().endsWith(".tmp")).toList(), "no temporary file left");
        }
        Path fresh = tmp.resolve("fresh.html");
        Files.writeString(fresh, "");  // a file as any other write makes it: the report gets the same mode
        var mode = Files.getPosixFilePermissions(fresh);
        Files.delete(fresh);
        RunReport.write(List.of(d), fresh, w -> { });
        assertEquals(mode, Files.getPosixFilePermissions(fresh), "readable as before, not a temporary file's 0600");
    }
    @Test
    void eachBenchmarkOfAMixedTestFileHasItsPlotAndItsRowInTheTable() throws IOException {
        Path exp = tmp.resolve("bench");
        for (String mode : List.of("grpo", "drmas")) {
            Path d = run(exp, mode, 1, mode.equals("grpo") ? 0.10 : 0.30);
            // evaluation.per benchmark (data.data_source_field): the last evaluation line gains aime24's numbers
            List<String> lines = new ArrayList<>(Files.readAllLines(d.resolve("metrics.jsonl")));
            String last = lines.removeLast();
            lines.add(last.substring(0, last.length() - 1) + ",\"eval/aime24/pass@1\":" + (mode.equals("grpo") ? "0.125" : "0.375")
                    + ",\"eval/aime24/avg@4\":0.5,\"eval/aime24/tasks\":30.0,\"eval/search/f1\":0.5}");
            Files.write(d.resolve("metrics.jsonl"), lines);
        }
        String page = Files.readString(RunReport.write(List.of(exp), exp.resolve("report.html")));
        assertTrue(Files.size(exp.resolve("plots").resolve("eval-aime24-pass_1.png")) > 1000);
        assertTrue(page.contains("aime24/pass@1") && page.contains("0.375") && page.contains("0.125"), page);
        // the headline pools every test task; the mean over the benchmarks weighs each alike
        assertTrue(page.contains("<th>pass@1 (all tasks pooled) after</th>") && page.contains("<th>pass@1, mean of 1 benchmark after</th>"), page);
        assertTrue(page.contains("Held-out pass@1 (all test tasks pooled: the benchmarks weigh by their task counts) after training"), page);
        assertTrue(page.contains("Mean of the benchmarks' pass@1 (1, each weighed alike): grpo 0.125; drmas 0.375."), page);
        // grpo's row: aime24's pass@1 and avg@4 before (none at step 0) and after, then the benchmarks' mean before and after
        assertTrue(page.contains("<td>–</td><td>0.125</td><td>–</td><td>0.500</td><td>–</td><td>0.125</td>"), page);
        assertTrue(page.contains("; their mean (pass@1, mean of 1 benchmark) weighs each alike."), page);
        assertFalse(Files.exists(exp.resolve("plots").resolve("eval-aime24-tasks.png")), "a count is no score");
        assertFalse(Files.exists(exp.resolve("plots").resolve("eval-search-f1.png")), "a workflow's metric is no score");
        assertTrue(RunReport.evalScore("eval/pass@1") && RunReport.evalScore("eval/HuggingFaceH4/MATH-500/avg@16"));
        assertFalse(RunReport.evalScore("eval/tasks") || RunReport.evalScore("eval/aime24/tasks") || RunReport.evalScore("reward/pass@1"));
    }
}

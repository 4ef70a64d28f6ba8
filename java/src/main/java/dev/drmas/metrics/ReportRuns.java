// ReportRuns.java — the runs a report shows, read back from their folders: metrics.jsonl (training
// steps and evaluations, every line checked: a corrupt file is an error naming its line, but for a
// last line a crash cut short) and the resolved config.yaml (mode, pooling, seed, workflow, the steps it trains), grouped by
// what was compared (mode and pooling) with the seeds of each group.
package dev.drmas.metrics;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.dataformat.yaml.YAMLMapper;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.function.Consumer;
import java.util.stream.Stream;

final class ReportRuns {
    private ReportRuns() {
    }

    /**
     * One run: its folder, what it compared (label: mode, plus pooling when rows), its seed, its
     * metric lines (training steps have reward/mean, evaluations eval/*), the steps it trains to
     * ({@link #plannedSteps(Path, JsonNode, long)}; 0 where unknown) and its trainer.epochs (0: it
     * trains trainer.steps).
     */
    record Run(Path dir, String label, long seed, String workflow, List<JsonNode> steps, List<JsonNode> evals, long plannedSteps,
               long epochs) {
        /** The agents or models that the run's metrics name under prefix…suffix, sorted. */
        List<String> names(String prefix, String suffix) {
            TreeSet<String> out = new TreeSet<>();
            for (JsonNode n : steps) {
                for (Iterator<String> it = n.fieldNames(); it.hasNext(); ) {
                    String k = it.next();
                    if (k.startsWith(prefix) && k.endsWith(suffix) && k.length() > prefix.length() + suffix.length()) {
                        String name = k.substring(prefix.length(), k.length() - suffix.length());
                        if (!name.contains("/")) out.add(name);
                    }
                }
            }
            return List.copyOf(out);
        }

        /** {@code key} over the training steps: (step, value) where logged and finite. */
        double[][] series(String key) {
            List<double[]> pts = new ArrayList<>();
            for (JsonNode n : steps) {
                JsonNode v = n.get(key);
                if (v != null && v.isNumber() && Double.isFinite(v.asDouble())) pts.add(new double[] {n.get("step").asDouble(), v.asDouble()});
            }
            return pts.toArray(double[][]::new);
        }

        /**
         * {@code key}'s values over the training steps that logged it, non-finite ones included: JsonlSink
         * writes those as null with the value spelt in the line's "nonfinite" member.
         */
        double[] valuesWithNonFinite(String key) {
            List<Double> out = new ArrayList<>();
            for (JsonNode n : steps) {
                JsonNode v = n.get(key);
                if (v == null) continue;
                if (v.isNumber()) {
                    out.add(v.asDouble());
                } else if (v.isNull() && n.path("nonfinite").path(key).isTextual()) {
                    out.add(nonFinite(n.path("nonfinite").path(key).asText()));
                }
            }
            return out.stream().mapToDouble(Double::doubleValue).toArray();
        }

        // JsonlSink spells a non-finite value with Double.toString ("NaN", "Infinity", "-Infinity"); anything
        // else there is not a number it wrote, and reads as NaN
        static double nonFinite(String text) {
            try {
                return Double.parseDouble(text);
            } catch (NumberFormatException e) {
                return Double.NaN;
            }
        }

        /** The last step the run logged, a training step's or an evaluation's. */
        long lastStep() {
            long last = 0;
            for (JsonNode n : steps) last = Math.max(last, n.get("step").asLong());
            for (JsonNode n : evals) last = Math.max(last, n.get("step").asLong());
            return last;
        }

        /** The folder's name, as the report names the run. */
        String name() {
            return dir.getFileName().toString();
        }

        /** {@code key} over the evaluations. */
        double[][] evalSeries(String key) {
            List<double[]> pts = new ArrayList<>();
            for (JsonNode n : evals) {
                JsonNode v = n.get(key);
                if (v != null && v.isNumber()) pts.add(new double[] {n.get("step").asDouble(), v.asDouble()});
            }
            return pts.toArray(double[][]::new);
        }
    }

    /**
     * The runs under {@code inputs}: a folder with metrics.jsonl is a run, any other folder holds runs
     * (an experiment), of which those without a training step or evaluation yet (a run that stopped
     * before its first step) are left out with a note to {@code warn}. Two runs of the same mode and
     * seed are an error: the report would count that seed twice; so are runs of different workflows
     * (config.yaml's orchestra.name).
     */
    static List<Run> find(List<Path> inputs, Consumer<String> warn) {
        List<Run> runs = new ArrayList<>();
        for (Path in : inputs) {
            if (!Files.isDirectory(in)) throw new IllegalArgumentException(in + ": no such folder");
            List<Path> dirs;
            try (Stream<Path> s = Files.list(in)) {
                dirs = s.filter(d -> Files.isRegularFile(d.resolve("metrics.jsonl"))).sorted().toList();
            } catch (IOException e) {
                throw new UncheckedIOException("listing " + in, e);
            }
            if (Files.isRegularFile(in.resolve("metrics.jsonl"))) {
                if (!dirs.isEmpty()) {
                    warn.accept(in + " is a run and also holds runs in sub-folders (" + dirs.getFirst().getFileName()
                            + (dirs.size() > 1 ? ", ..." : "") + "): only its own run is reported; name the others as DIRs");
                }
                runs.add(read(in, warn));
                continue;
            }
            if (dirs.isEmpty()) throw new IllegalArgumentException(in + ": no metrics.jsonl in it or in its sub-folders: not a run or an experiment");
            int before = runs.size();
            for (Path d : dirs) {
                try {
                    runs.add(read(d, warn));
                } catch (NoData e) {
                    warn.accept(e.getMessage() + ": left out of the report (a run that has not logged yet)");
                }
            }
            if (runs.size() == before) throw new IllegalArgumentException(in + ": none of its runs has a training step or evaluation yet");
        }
        // one mode row pools its seeds, and the summary compares the rows: runs of another workflow (other tasks, agents
        // and rewards) in a row or beside it would be read as seeds or modes of one comparison
        Map<String, List<Path>> workflows = new TreeMap<>();
        for (Run r : runs) if (!r.workflow().isEmpty()) workflows.computeIfAbsent(r.workflow(), k -> new ArrayList<>()).add(r.dir());
        if (workflows.size() > 1) {
            List<String> each = new ArrayList<>();
            workflows.forEach((w, dirs) -> each.add(w + " (" + dirs.getFirst() + (dirs.size() > 1 ? " and " + (dirs.size() - 1) + " more" : "") + ")"));
            throw new IllegalArgumentException("runs of different workflows: " + String.join(", ", each) + "; a report compares modes on "
                    + "one workflow: report each workflow's runs separately");
        }
        Map<String, Run> seen = new java.util.HashMap<>();
        for (Run r : runs) {
            if (r.seed() == 0) continue;  // no config.yaml: the seed is unknown
            Run other = seen.putIfAbsent(r.label() + "\0" + r.seed(), r);
            if (other != null) {
                throw new IllegalArgumentException(other.dir() + " and " + r.dir() + " are both " + r.label() + " with seed " + r.seed()
                        + ": the report would count that seed twice; report them separately or remove one");
            }
        }
        return runs;
    }

    /** A metrics file without a training step or evaluation in it. */
    static final class NoData extends IllegalArgumentException {
        NoData(String message) {
            super(message);
        }
    }

    /** Runs by label, labels in the order the modes are usually discussed (grpo first). */
    static Map<String, List<Run>> byLabel(List<Run> runs) {
        Map<String, List<Run>> out = new TreeMap<>((a, b) -> {
            int c = Integer.compare(order(a), order(b));
            return c != 0 ? c : a.compareTo(b);
        });
        for (Run r : runs) out.computeIfAbsent(r.label(), k -> new ArrayList<>()).add(r);
        return out;
    }

    private static int order(String label) {
        String[] known = {"grpo", "drmas", "agent-mean", "agent-std"};
        for (int i = 0; i < known.length; i++) if (label.equals(known[i]) || label.startsWith(known[i] + "-")) return i;
        return known.length;
    }

    static Run read(Path dir) {
        return read(dir, w -> { });
    }

    /**
     * One run folder. A last line without its newline that is not JSON is a write a crash cut short
     * (JsonlSink drops it when the run resumes): left out, with a note; any other bad line is an error.
     */
    static Run read(Path dir, Consumer<String> warn) {
        Path file = dir.resolve("metrics.jsonl");
        String text;
        try {
            text = Files.readString(file);
        } catch (IOException e) {
            throw new UncheckedIOException("reading " + file, e);
        }
        List<String> lines = new ArrayList<>(List.of(text.split("\n", -1)));
        String tail = lines.removeLast();  // "" after a final newline
        ObjectMapper json = new ObjectMapper();
        if (!tail.isBlank()) {
            try {
                json.readTree(tail);
                lines.add(tail);
            } catch (JsonProcessingException e) {
                warn.accept(file + ":" + (lines.size() + 1) + ": a last line cut short (no newline, not JSON): left out");
            }
        }
        List<JsonNode> steps = new ArrayList<>(), evals = new ArrayList<>();
        for (int i = 0; i < lines.size(); i++) {
            if (lines.get(i).isBlank()) continue;
            JsonNode n;
            try {
                n = json.readTree(lines.get(i));
            } catch (JsonProcessingException e) {
                throw new IllegalArgumentException(file + ":" + (i + 1) + ": not a JSON object (a truncated or corrupt metrics file): "
                        + dev.drmas.model.JsonProblem.describe(e) + dev.drmas.model.JsonProblem.atColumn(e.getLocation()));
            }
            if (n == null || !n.isObject() || !n.path("step").isNumber()) {
                throw new IllegalArgumentException(file + ":" + (i + 1) + ": a metrics line needs an object with a numeric \"step\"");
            }
            if (n.has("reward/mean")) steps.add(n);
            if (n.has("eval/pass@1")) evals.add(n);
        }
        if (steps.isEmpty() && evals.isEmpty()) throw new NoData(file + ": no training step or evaluation in it");
        String mode = dir.getFileName().toString(), pool = "trajectories", workflow = "";
        long seed = 0, plannedSteps = 0, epochs = 0;
        Path cfg = dir.resolve("config.yaml");
        if (Files.isRegularFile(cfg)) {
            JsonNode c;
            try {
                c = new YAMLMapper().readTree(cfg.toFile());
                mode = c.path("algorithm").path("mode").asText(mode);
                pool = c.path("algorithm").path("global_pooling").asText(pool);
                seed = c.path("run").path("seed").asLong(0);
                workflow = c.path("orchestra").path("name").asText("");
                epochs = c.path("trainer").path("epochs").asLong(0);
            } catch (IOException e) {
                throw new IllegalArgumentException(cfg + ": not a readable config (" + e.getMessage() + ")");
            }
            plannedSteps = plannedSteps(dir, c, last(steps, evals));
        }
        return new Run(dir, pool.equals("trajectories") ? mode : mode + "-" + pool, seed, workflow, steps, evals, plannedSteps, epochs);
    }

    /** The trainer's record of the steps it trains to (Trainer.PLAN_FILE; the metrics package does not depend on train). */
    static final String PLAN_FILE = "plan.json";

    /** {@link RunReport#EXPERIMENT_DONE}. */
    static final String EXPERIMENT_DONE = RunReport.EXPERIMENT_DONE;

    /** The line the trainer prints at its start when trainer.epochs sets its length: "drmas: trainer.epochs E: N steps (...". */
    private static final java.util.regex.Pattern EPOCHS_LINE = java.util.regex.Pattern.compile("drmas: trainer\\.epochs (\\d+): (\\d+) steps .*");

    /**
     * The steps a run trains to. config.yaml holds every setting, trainer.steps (default 100) included, but with
     * trainer.epochs set the run trains epochs × ⌊training tasks / rollout.tasks_per_step⌋ steps instead: the
     * trainer records that count in plan.json; for a run folder from before it did, the count is taken from the count the trainer printed at its start, which an
     * experiment keeps in its logs/&lt;run&gt;.log (the last such line for these epochs), else from the experiment's
     * marker of a finished job (its last step logged is its last step); 0 (unknown) otherwise.
     */
    static long plannedSteps(Path dir, JsonNode config, long lastStep) {
        long epochs = config.path("trainer").path("epochs").asLong(0);
        if (epochs <= 0) return config.path("trainer").path("steps").asLong(0);
        // the trainer's own record (plan.json, written at its start since it has existed), for these epochs
        Path plan = dir.resolve(PLAN_FILE);
        if (Files.isRegularFile(plan)) {
            try {
                JsonNode p = new com.fasterxml.jackson.databind.ObjectMapper().readTree(plan.toFile());
                if (p.path("epochs").asLong(-1) == epochs && p.path("total_steps").asLong(0) > 0) return p.path("total_steps").asLong();
            } catch (IOException e) {
                // unreadable: the other records below
            }
        }
        Path log = dir.toAbsolutePath().getParent().resolve("logs").resolve(dir.getFileName() + ".log");
        long printed = 0;
        if (Files.isRegularFile(log)) {
            // (Latin-1: a job's tools may write bytes that are not UTF-8, and the line itself is ASCII)
            try (Stream<String> lines = Files.lines(log, java.nio.charset.StandardCharsets.ISO_8859_1)) {
                for (String l : (Iterable<String>) lines::iterator) {
                    var m = EPOCHS_LINE.matcher(l);
                    if (m.matches() && Long.parseLong(m.group(1)) == epochs) printed = Long.parseLong(m.group(2));
                }
            } catch (IOException | UncheckedIOException | NumberFormatException e) {
                printed = 0;  // unreadable: unknown, as without the log
            }
        }
        if (printed > 0) return printed;
        return Files.isRegularFile(dir.resolve(EXPERIMENT_DONE)) ? lastStep : 0;
    }

    private static long last(List<JsonNode> steps, List<JsonNode> evals) {
        long last = 0;
        for (JsonNode n : steps) last = Math.max(last, n.get("step").asLong());
        for (JsonNode n : evals) last = Math.max(last, n.get("step").asLong());
        return last;
    }

    /**
     * Per-step mean over runs of {@code key} (steps logged by at least one run), with the minimum, the
     * maximum and the number of runs behind them (fewer than the runs where one stopped early).
     */
    static Map<Double, double[]> meanMinMax(List<Run> runs, java.util.function.Function<Run, double[][]> series) {
        Map<Double, List<Double>> at = new TreeMap<>();
        for (Run r : runs) for (double[] p : series.apply(r)) at.computeIfAbsent(p[0], k -> new ArrayList<>()).add(p[1]);
        Map<Double, double[]> out = new LinkedHashMap<>();
        at.forEach((step, vs) -> out.put(step, new double[] {
                vs.stream().mapToDouble(Double::doubleValue).average().orElse(Double.NaN),
                vs.stream().mapToDouble(Double::doubleValue).min().orElse(Double.NaN),
                vs.stream().mapToDouble(Double::doubleValue).max().orElse(Double.NaN), vs.size()}));
        return out;
    }
}

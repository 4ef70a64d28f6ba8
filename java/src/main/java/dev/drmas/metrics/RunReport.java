// RunReport.java — `drmas report`: one self-contained HTML file for runs or experiments (plots inline
// as PNG, also written as plots/*.png with their data as plots/*.json): per mode, the mean over
// seeds with the lowest and highest seed, of the per-agent gradient norm (the paper's Fig. 4), the
// Lemma 4.2 inflation factor and E[A²], the reward, validity, response lengths, clipfrac and KL, and
// held-out avg@k / pass@k; a summary table per mode (avg@k and pass@k at the final evaluation of the
// runs that finished, with 95% intervals over seeds, gradient-norm spikiness per agent, mean inflation)
// and a text that states what the numbers show and what they do not, which runs stopped early among
// them. Plots are drawn by XChart, headless.
package dev.drmas.metrics;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.awt.Color;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.function.Function;
import org.knowm.xchart.BitmapEncoder;
import org.knowm.xchart.XYChart;
import org.knowm.xchart.XYChartBuilder;
import org.knowm.xchart.XYSeries;
import org.knowm.xchart.style.Styler;
import org.knowm.xchart.style.XYStyler;
import org.knowm.xchart.style.lines.SeriesLines;
import org.knowm.xchart.style.markers.SeriesMarkers;

public final class RunReport {
    /**
     * What `drmas experiment` writes into a job's folder when the job ended well, its training done (a stopped or
     * failed job ends otherwise): the report takes such a run of trainer.epochs to have trained to its last step.
     */
    public static final String EXPERIMENT_DONE = "experiment.done";

    /** Builds and writes the plots' JSON data (thread-safe once configured). */
    private static final ObjectMapper JSON = new ObjectMapper();

    private RunReport() {
    }

    private static final Color[] PALETTE = {new Color(0x1f77b4), new Color(0xd62728), new Color(0x2ca02c), new Color(0x9467bd),
        new Color(0xff7f0e), new Color(0x8c564b), new Color(0xe377c2), new Color(0x7f7f7f)};

    /**
     * One plot: its file id, title, y-axis and the series of a run it draws; {@code logIfWide}: a
     * scale (a norm, E[A²]) that is drawn on a logarithmic axis when its positive values span more
     * than {@link #LOG_SPAN}, so that one mode's blow-up does not flatten the others to a line at 0.
     */
    record Plot(String id, String title, String yAxis, Function<ReportRuns.Run, double[][]> series, boolean logIfWide) {
        Plot(String id, String title, String yAxis, Function<ReportRuns.Run, double[][]> series) {
            this(id, title, yAxis, series, false);
        }
    }

    static final double LOG_SPAN = 1000;

    /**
     * Writes the report of the runs under {@code inputs} to {@code html}, and its plots to
     * plots/ beside it; returns {@code html}.
     *
     * @throws IllegalArgumentException naming the folder or file:line that is not a readable run
     */
    public static Path write(List<Path> inputs, Path html) throws IOException {
        return write(inputs, html, w -> System.err.println("drmas: warning: " + w));
    }

    /**
     * As above, with what was left out (runs without data yet, a last line cut short) told to
     * {@code warn}. Each file is written beside its place and renamed into it: whole or not at all.
     */
    public static Path write(List<Path> inputs, Path html, java.util.function.Consumer<String> warn) throws IOException {
        System.setProperty("java.awt.headless", "true");
        List<ReportRuns.Run> runs = ReportRuns.find(inputs, warn);
        Map<String, List<ReportRuns.Run>> groups = ReportRuns.byLabel(runs);
        Path dir = html.toAbsolutePath().getParent();
        Path plotsDir = dir.resolve("plots");
        Files.createDirectories(plotsDir);

        StringBuilder page = new StringBuilder();
        page.append("<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>drmas report</title><style>")
                .append("body{font-family:sans-serif;max-width:1400px;margin:2em auto;padding:0 1em}")
                .append("table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #bbb;padding:3px 8px;text-align:right}")
                .append("th:first-child,td:first-child{text-align:left}figure{display:inline-block;margin:4px}")
                .append("</style></head><body>\n<h1>drmas report</h1>\n<p>").append(escape(String.join(", ",
                        inputs.stream().map(p -> p.toAbsolutePath().toString()).toList()))).append("</p>\n");
        page.append("<h2>Summary</h2>\n");
        for (String line : summaryText(groups)) page.append("<p>").append(escape(line)).append("</p>\n");
        page.append(summaryTable(groups));
        page.append("<h2>Plots</h2>\n<p>Each line is the mean over a mode's seeds; the dashed lines of its colour are its "
                + "lowest and highest seed at each step. A step is averaged over the seeds that logged it: where a seed stopped "
                + "early, or did not log a value, the legend says how many seeds stand behind the points (and the plot's JSON, "
                + "n, at each step).</p>\n");
        for (Plot p : plots(runs)) {
            String img = plot(p, groups, plotsDir);
            if (img != null) page.append("<figure>").append(img).append("</figure>\n");
        }
        page.append("</body></html>\n");
        writeWhole(html, page.toString().getBytes(java.nio.charset.StandardCharsets.UTF_8));
        return html;
    }

    /** What one finished run did, for a progress line: " (reward a → b; pass@1 c → d)", or "" without metrics. */
    public static String oneLine(Path runDir) {
        if (!Files.isRegularFile(runDir.resolve("metrics.jsonl"))) return "";
        ReportRuns.Run r = ReportRuns.read(runDir);
        StringBuilder sb = new StringBuilder(" (");
        double[][] reward = r.series("reward/mean");
        if (reward.length > 0) sb.append(String.format(Locale.ROOT, "reward %.3f → %.3f", reward[0][1], reward[reward.length - 1][1]));
        double[][] pass = r.evalSeries("eval/pass@1");
        if (pass.length > 0) {
            sb.append(reward.length > 0 ? "; " : "").append(String.format(Locale.ROOT, "pass@1 %.3f → %.3f", pass[0][1], pass[pass.length - 1][1]));
        }
        return sb.length() == 2 ? "" : sb.append(')').toString();
    }

    // ------------------------------------------------------------------ plots

    private static List<Plot> plots(List<ReportRuns.Run> runs) {
        Set<String> agents = new LinkedHashSet<>(), models = new LinkedHashSet<>(), evalKeys = new LinkedHashSet<>();
        for (ReportRuns.Run r : runs) {
            agents.addAll(r.names("agent/", "/rows"));
            models.addAll(r.names("model/", "/clipfrac"));
            for (var n : r.evals()) {
                for (Iterator<String> it = n.fieldNames(); it.hasNext(); ) {
                    String k = it.next();
                    if (evalScore(k)) evalKeys.add(k);
                }
            }
        }
        List<Plot> out = new ArrayList<>();
        for (String a : agents) {
            out.add(new Plot("grad_norm-" + a, "gradient norm of agent " + a, "‖g‖ (before clipping)",
                    r -> r.series("agent/" + a + "/grad_norm"), true));
        }
        out.add(new Plot("reward", "training reward", "reward/mean", r -> r.series("reward/mean")));
        for (String k : evalKeys) out.add(new Plot(k.replace('/', '-').replace('@', '_'), "held-out " + k.substring(5), k, r -> r.evalSeries(k)));
        for (String a : agents) {
            out.add(new Plot("inflation-" + a, "Lemma 4.2 inflation of agent " + a, "(σ_k² + (μ_k − μ)²) / σ²",
                    r -> r.series("agent/" + a + "/inflation")));
            out.add(new Plot("adv_sq_mean-" + a, "E[A²] of agent " + a, "E[A²]", r -> r.series("agent/" + a + "/adv_sq_mean"), true));
            out.add(new Plot("valid_ratio-" + a, "valid outputs of agent " + a, "valid ratio", r -> r.series("agent/" + a + "/valid_ratio")));
            out.add(new Plot("response_len-" + a, "response length of agent " + a, "tokens", r -> r.series("agent/" + a + "/response_len")));
        }
        for (String m : models) {
            out.add(new Plot("grad_norm_model-" + m, "gradient norm of model " + m + " (its mini-batches)", "‖g‖ (before clipping)",
                    r -> r.series("model/" + m + "/grad_norm"), true));
            out.add(new Plot("clipfrac-" + m, "clipped fraction, model " + m, "clipfrac", r -> r.series("model/" + m + "/clipfrac")));
            out.add(new Plot("ppo_kl-" + m, "PPO KL (old → new), model " + m, "ppo_kl", r -> r.series("model/" + m + "/ppo_kl")));
            out.add(new Plot("kl-" + m, "KL to the reference, model " + m, "kl", r -> r.series("model/" + m + "/kl")));
        }
        return out;
    }

    /** Draws one plot into plots/ (PNG and its data as JSON); returns its inline image element, or null when no run has the series. */
    private static String plot(Plot p, Map<String, List<ReportRuns.Run>> groups, Path plotsDir) throws IOException {
        Drawn d = draw(p, groups);
        if (d == null) return null;
        byte[] png = BitmapEncoder.getBitmapBytes(d.chart(), BitmapEncoder.BitmapFormat.PNG);
        writeWhole(plotsDir.resolve(p.id() + ".png"), png);
        writeWhole(plotsDir.resolve(p.id() + ".json"), JSON.writerWithDefaultPrettyPrinter().writeValueAsBytes(d.data()));
        return "<img alt=\"" + escape(p.title()) + "\" src=\"data:image/png;base64,"
                + java.util.Base64.getEncoder().encodeToString(png) + "\">";
    }

    /** A plot as drawn (the chart the PNG is made of) and its data (the JSON beside it). */
    record Drawn(XYChart chart, ObjectNode data) {
    }

    /** One plot's chart and data, without writing them (so that a test can read the series drawn); null when no run has the series. */
    static Drawn draw(Plot p, Map<String, List<ReportRuns.Run>> groups) {
        XYChart chart = new XYChartBuilder().width(560).height(340).title(p.title()).xAxisTitle("step").yAxisTitle(p.yAxis()).build();
        XYStyler st = chart.getStyler();
        st.setLegendPosition(Styler.LegendPosition.InsideNE);
        st.setChartBackgroundColor(Color.WHITE);
        ObjectNode data = JSON.createObjectNode().put("title", p.title()).put("y", p.yAxis());
        ArrayNode series = data.putArray("series");
        Map<String, Map<Double, double[]>> stats = new LinkedHashMap<>();
        double minPositive = Double.POSITIVE_INFINITY, max = 0;
        boolean negative = false;
        for (var e : groups.entrySet()) {
            Map<Double, double[]> mm = ReportRuns.meanMinMax(e.getValue(), p.series());
            stats.put(e.getKey(), mm);
            for (double[] v : mm.values()) {
                for (double y : new double[] {v[0], v[1], v[2]}) {  // the mean, lowest and highest seed; v[3] counts the seeds
                    if (y < 0) negative = true;
                    if (y > 0) minPositive = Math.min(minPositive, y);
                    max = Math.max(max, y);
                }
            }
        }
        boolean log = p.logIfWide() && !negative && max > LOG_SPAN * minPositive;
        if (log) {
            st.setYAxisLogarithmic(true);
            chart.setYAxisTitle(p.yAxis() + ", log");  // zeros are not drawn (the JSON keeps them)
        }
        data.put("log_y", log);
        int colour = 0;
        boolean any = false;
        for (var e : groups.entrySet()) {
            Color c = PALETTE[colour++ % PALETTE.length];
            Map<Double, double[]> mm = stats.get(e.getKey());
            if (mm.isEmpty()) continue;
            any = true;
            double[] x = new double[mm.size()], mean = new double[mm.size()], lo = new double[mm.size()], hi = new double[mm.size()];
            int i = 0;
            for (var pt : mm.entrySet()) {
                x[i] = pt.getKey();
                mean[i] = pt.getValue()[0];
                lo[i] = pt.getValue()[1];
                hi[i++] = pt.getValue()[2];
            }
            int nMin = Integer.MAX_VALUE, nMax = 0;
            for (double[] v : mm.values()) {
                nMin = Math.min(nMin, (int) v[3]);
                nMax = Math.max(nMax, (int) v[3]);
            }
            String name = e.getKey() + " (" + seedCount(nMin, nMax, e.getValue().size()) + ")";
            XYSeries s = log ? addPositive(chart, name, x, mean) : chart.addSeries(name, x, mean);
            if (s != null) {
                s.setLineColor(c);
                s.setLineStyle(SeriesLines.SOLID);  // XChart's theme cycles line styles past four series
                s.setMarker(x.length == 1 ? SeriesMarkers.CIRCLE : SeriesMarkers.NONE);
                s.setMarkerColor(c);
                s.setLineWidth(2f);
            }
            if (e.getValue().size() > 1) {
                for (double[] band : new double[][] {lo, hi}) {
                    String bandName = name + (band == lo ? " min" : " max");
                    XYSeries b = log ? addPositive(chart, bandName, x, band) : chart.addSeries(bandName, x, band);
                    if (b == null) continue;
                    b.setLineColor(c);
                    b.setMarker(SeriesMarkers.NONE);
                    b.setLineStyle(SeriesLines.DASH_DASH);
                    b.setLineWidth(0.8f);
                    b.setShowInLegend(false);
                }
            }
            ObjectNode sj = series.addObject().put("name", e.getKey()).put("seeds", e.getValue().size()).put("legend", name);
            ArrayNode xs = sj.putArray("x"), ys = sj.putArray("mean"), mins = sj.putArray("min"), maxs = sj.putArray("max"),
                    ns = sj.putArray("n");
            int k = 0;
            for (double[] v : mm.values()) {
                xs.add(x[k]);
                ys.add(mean[k]);
                mins.add(lo[k]);
                maxs.add(hi[k++]);
                ns.add((int) v[3]);
            }
        }
        return any ? new Drawn(chart, data) : null;
    }

    /** "4 seeds", or where fewer logged some steps (a seed that stopped early) "2–4 of 4 seeds". */
    static String seedCount(int nMin, int nMax, int seeds) {
        if (nMin == seeds && nMax == seeds) return seeds(seeds);
        return (nMin == nMax ? "" + nMin : nMin + "–" + nMax) + " of " + seeds + " seeds";
    }

    /** {@code bytes} into a temporary file beside {@code file}, then renamed onto it: a failure leaves the old file or none. */
    private static void writeWhole(Path file, byte[] bytes) throws IOException {
        // not createTempFile: its 0600 would become the report's mode; this one gets the umask's, as before
        Path tmp = file.toAbsolutePath().resolveSibling("." + file.getFileName() + "." + ProcessHandle.current().pid() + ".tmp");
        try {
            Files.write(tmp, bytes);
            try {
                Files.move(tmp, file, java.nio.file.StandardCopyOption.REPLACE_EXISTING, java.nio.file.StandardCopyOption.ATOMIC_MOVE);
            } catch (java.nio.file.AtomicMoveNotSupportedException e) {
                Files.move(tmp, file, java.nio.file.StandardCopyOption.REPLACE_EXISTING);
            }
        } finally {
            Files.deleteIfExists(tmp);
        }
    }

    /**
     * A series without its non-positive points, which a logarithmic axis cannot show (the JSON keeps
     * them); null when no point is left.
     */
    private static XYSeries addPositive(XYChart chart, String name, double[] x, double[] y) {
        int n = 0;
        for (double v : y) if (v > 0) n++;
        if (n == 0) return null;
        double[] px = new double[n], py = new double[n];
        for (int i = 0, k = 0; i < y.length; i++) {
            if (y[i] > 0) {
                px[k] = x[i];
                py[k++] = y[i];
            }
        }
        return chart.addSeries(name, px, py);
    }

    // ------------------------------------------------------------------ the summary

    private static final java.util.regex.Pattern EVAL_SCORE = java.util.regex.Pattern.compile("eval/(.+/)?(avg|pass)@\\d+");
    private static final java.util.regex.Pattern BENCHMARK_PASS1 = java.util.regex.Pattern.compile("eval/(.+)/pass@1");

    /** An evaluation score: eval/avg@n or eval/pass@k, overall or of one benchmark (eval/<benchmark>/pass@k). */
    static boolean evalScore(String key) {
        return EVAL_SCORE.matcher(key).matches();
    }

    private static List<String> evalKeys(Map<String, List<ReportRuns.Run>> groups) {
        Set<String> keys = new LinkedHashSet<>();
        for (List<ReportRuns.Run> g : groups.values()) {
            for (ReportRuns.Run r : g) {
                if (r.evals().isEmpty()) continue;
                for (Iterator<String> it = r.evals().getLast().fieldNames(); it.hasNext(); ) {
                    String k = it.next();
                    if (evalScore(k)) keys.add(k);
                }
            }
        }
        return new ArrayList<>(keys);
    }

    /** The benchmarks with their own pass@1 (eval/<benchmark>/pass@1, a mixed test file's) in any run's last evaluation. */
    private static List<String> benchmarkPass1(List<String> evalKeys) {
        return evalKeys.stream().filter(k -> BENCHMARK_PASS1.matcher(k).matches()).toList();
    }

    /**
     * The step at which a run of group {@code g} has finished: the steps it trains (trainer.steps, or
     * trainer.epochs' count where known), or where that is unknown, the last step that any run of the
     * group logged.
     */
    static long target(ReportRuns.Run r, List<ReportRuns.Run> g) {
        return r.plannedSteps() > 0 ? r.plannedSteps() : g.stream().mapToLong(ReportRuns.Run::lastStep).max().orElse(0);
    }

    /**
     * A run's final evaluation: its last evaluation line when that is at the step it finishes at
     * (the trainer always evaluates at its last step); null for a run that stopped before it, or
     * whose only evaluation is the one before training.
     */
    static JsonNode finalEval(ReportRuns.Run r, List<ReportRuns.Run> g) {
        if (r.evals().isEmpty()) return null;
        JsonNode last = r.evals().getLast();
        long at = last.get("step").asLong(), t = target(r, g);
        return at > 0 && at == t ? last : null;
    }

    /**
     * Whether a run finished: it has its final evaluation, or, run without evaluations
     * (trainer.eval_freq 0), it logged its last step.
     */
    static boolean finished(ReportRuns.Run r, List<ReportRuns.Run> g) {
        return finalEval(r, g) != null || r.evals().isEmpty() && r.lastStep() >= target(r, g);
    }

    /** The value of {@code key} in an evaluation line, or null where it has none. */
    private static Function<JsonNode, Double> key(String key) {
        return n -> n.path(key).isNumber() ? n.get(key).asDouble() : null;
    }

    /** The mean of the benchmarks' pass@1, each weighed alike; null where the line lacks one of them. */
    private static Function<JsonNode, Double> benchmarkMean(List<String> keys) {
        return n -> {
            double sum = 0;
            for (String k : keys) {
                if (!n.path(k).isNumber()) return null;
                sum += n.get(k).asDouble();
            }
            return sum / keys.size();
        };
    }

    /**
     * After training: {@code value} of each run's final evaluation (not the last one that has the key:
     * a key the final evaluation lacks is missing for that run); runs that did not finish are left out.
     */
    private static ReportStats.Interval after(List<ReportRuns.Run> g, Function<JsonNode, Double> value) {
        List<Double> v = new ArrayList<>();
        for (ReportRuns.Run r : g) {
            JsonNode f = finalEval(r, g);
            Double x = f == null ? null : value.apply(f);
            if (x != null) v.add(x);
        }
        return ReportStats.interval(v.stream().mapToDouble(Double::doubleValue).toArray());
    }

    /** Before training: {@code value} of the evaluation at step 0 (with trainer.eval_before_train off the first is a trained one). */
    private static ReportStats.Interval before(List<ReportRuns.Run> g, Function<JsonNode, Double> value) {
        List<Double> v = new ArrayList<>();
        for (ReportRuns.Run r : g) {
            if (r.evals().isEmpty() || r.evals().getFirst().get("step").asLong() != 0) continue;
            Double x = value.apply(r.evals().getFirst());
            if (x != null) v.add(x);
        }
        return ReportStats.interval(v.stream().mapToDouble(Double::doubleValue).toArray());
    }

    private static double[] values(double[][] series) {
        double[] out = new double[series.length];
        for (int i = 0; i < series.length; i++) out[i] = series[i][1];
        return out;
    }

    private static List<String> agents(Map<String, List<ReportRuns.Run>> groups) {
        Set<String> a = new LinkedHashSet<>();
        for (List<ReportRuns.Run> g : groups.values()) for (ReportRuns.Run r : g) a.addAll(r.names("agent/", "/rows"));
        return new ArrayList<>(a);
    }

    /** Per seed, f of the finite curve of {@code key}; the interval over the seeds that logged it. */
    private static ReportStats.Interval perSeed(List<ReportRuns.Run> g, String key, java.util.function.ToDoubleFunction<double[]> f) {
        List<Double> v = new ArrayList<>();
        for (ReportRuns.Run r : g) {
            double[] xs = values(r.series(key));
            if (xs.length == 0) continue;
            v.add(f.applyAsDouble(xs));
        }
        return ReportStats.interval(v.stream().mapToDouble(Double::doubleValue).toArray());
    }

    private static String seeds(int n) {
        return n + " seed" + (n == 1 ? "" : "s");
    }

    /**
     * A gradient norm's max/median over the seeds whose norms were all finite, with the seeds where
     * it is infinite (a non-finite norm) or undefined (no positive norm) counted beside it, not dropped.
     */
    static String maxOverMedianCell(List<ReportRuns.Run> g, String key) {
        List<Double> finite = new ArrayList<>();
        int infinite = 0, undefined = 0;
        for (ReportRuns.Run r : g) {
            double[] xs = r.valuesWithNonFinite(key);
            if (xs.length == 0) continue;
            double m = ReportStats.maxOverMedian(xs);
            if (Double.isInfinite(m)) infinite++;
            else if (Double.isNaN(m)) undefined++;
            else finite.add(m);
        }
        ReportStats.Interval i = ReportStats.interval(finite.stream().mapToDouble(Double::doubleValue).toArray());
        List<String> parts = new ArrayList<>();
        if (i.n() > 0 || infinite + undefined == 0) parts.add(i.show(g.size()));
        if (infinite > 0) parts.add("∞ in " + seeds(infinite) + " (a non-finite norm)");
        if (undefined > 0) parts.add("no positive norm in " + seeds(undefined));
        return String.join("; ", parts) + unfinishedNote(g);
    }

    /**
     * Spikes per 100 logged steps per seed (a non-finite norm is one), with how many non-finite norms there were in
     * all: a seed that stopped early has fewer steps to spike in, and a count of spikes would rank it calmer.
     */
    static String spikesCell(List<ReportRuns.Run> g, String key) {
        List<Double> v = new ArrayList<>();
        int nonFinite = 0;
        for (ReportRuns.Run r : g) {
            double[] xs = r.valuesWithNonFinite(key);
            if (xs.length == 0) continue;
            v.add(100.0 * ReportStats.spikes(xs) / xs.length);
            nonFinite += ReportStats.nonFinite(xs);
        }
        String s = ReportStats.interval(v.stream().mapToDouble(Double::doubleValue).toArray()).show(g.size());
        return (nonFinite == 0 ? s : s + "; " + nonFinite + " non-finite") + unfinishedNote(g);
    }

    /**
     * " (2 of 3 finished)" where some of the group's seeds did not finish, "" where all did: the gradient-norm cells
     * are over every step each seed logged, finished or not, and a max/median over a shorter run is not the same measure.
     */
    private static String unfinishedNote(List<ReportRuns.Run> g) {
        long finished = g.stream().filter(r -> finished(r, g)).count();
        return finished == g.size() ? "" : " (" + finished + " of " + g.size() + " finished)";
    }

    /** The last steps the group's runs logged: "60", or "12–60" where they differ. */
    private static String stepsCell(List<ReportRuns.Run> g) {
        long lo = g.stream().mapToLong(ReportRuns.Run::lastStep).min().orElse(0), hi = g.stream().mapToLong(ReportRuns.Run::lastStep).max().orElse(0);
        return lo == hi ? "" + hi : lo + "–" + hi;
    }

    private static String header(String key, boolean pooledNamed) {
        String k = key.substring(5);
        return escape(pooledNamed && !k.contains("/") ? k + " (all tasks pooled)" : k);
    }

    private static String summaryTable(Map<String, List<ReportRuns.Run>> groups) {
        List<String> evalKeys = evalKeys(groups), agents = agents(groups), benchmarks = benchmarkPass1(evalKeys);
        boolean mixed = !benchmarks.isEmpty();
        String benchHeader = "pass@1, mean of " + benchmarks.size() + " benchmark" + (benchmarks.size() == 1 ? "" : "s");
        StringBuilder t = new StringBuilder("<table><tr><th>mode</th><th>seeds</th><th>finished</th><th>steps</th>");
        for (String k : evalKeys) t.append("<th>").append(header(k, mixed)).append(" before</th><th>").append(header(k, mixed)).append(" after</th>");
        if (mixed) t.append("<th>").append(benchHeader).append(" before</th><th>").append(benchHeader).append(" after</th>");
        for (String a : agents) {
            t.append("<th>").append(escape(a)).append(" ‖g‖ max/median</th><th>").append(escape(a)).append(" spikes per 100 logged steps</th><th>")
                    .append(escape(a)).append(" inflation</th>");
        }
        t.append("</tr>\n");
        for (var e : groups.entrySet()) {
            List<ReportRuns.Run> g = e.getValue();
            int n = g.size();
            long finished = g.stream().filter(r -> finished(r, g)).count();
            // the last step logged, not the lines: with metrics.log_freq > 1 there are fewer lines than steps
            t.append("<tr><td>").append(escape(e.getKey())).append("</td><td>").append(n).append("</td><td>").append(finished)
                    .append("</td><td>").append(stepsCell(g)).append("</td>");
            for (String k : evalKeys) {
                t.append("<td>").append(before(g, key(k)).show(n)).append("</td><td>").append(after(g, key(k)).show(n)).append("</td>");
            }
            if (mixed) {
                t.append("<td>").append(before(g, benchmarkMean(benchmarks)).show(n)).append("</td><td>")
                        .append(after(g, benchmarkMean(benchmarks)).show(n)).append("</td>");
            }
            for (String a : agents) {
                String gn = "agent/" + a + "/grad_norm";
                t.append("<td>").append(escape(maxOverMedianCell(g, gn))).append("</td><td>").append(escape(spikesCell(g, gn)))
                        .append("</td><td>").append(perSeed(g, "agent/" + a + "/inflation", xs -> java.util.Arrays.stream(xs).average()
                                .orElse(Double.NaN)).show(n)).append("</td>");
            }
            t.append("</tr>\n");
        }
        return t.append("</table>\n<p>Values are means over the seeds ± the half-width of a 95% interval (Student's t; none "
                + "with one seed); (n=…) where fewer seeds than the row's stand behind a value. Finished: the runs whose last "
                + "evaluation is at the last step they train, their config's trainer.steps or trainer.epochs' count (or, without "
                + "evaluations, that logged it); \"after\" is each finished run's final evaluation, and a run "
                + "that stopped early (or evaluated only before training) is left out of it. Scores without a benchmark in their "
                + "name are over all test tasks pooled: a mixed test file's benchmarks weigh by their task counts"
                + (mixed ? "; their mean (" + benchHeader + ") weighs each alike" : "") + ". ‖g‖ is the per-agent gradient norm before "
                + "clipping (trainer.grad_norm_per_agent); a spike is a non-finite norm, or a norm above 3× the median of the "
                + "positive norms before it, judged once there are three (never the first three logged norms), counted per 100 "
                + "steps that the seed logged; max/median is over the positive norms, ∞ for a seed with a non-finite norm. Both "
                + "are over every step each seed logged, \"(2 of 3 finished)\" where seeds that stopped early are among them. Inflation is Lemma 4.2's factor, averaged over the "
                + "steps.</p>\n").toString();
    }

    /** Plain statements of what the figures show and do not, without claims beyond them. */
    static List<String> summaryText(Map<String, List<ReportRuns.Run>> groups) {
        List<String> out = new ArrayList<>();
        StringBuilder runs = new StringBuilder();
        for (var e : groups.entrySet()) runs.append(runs.isEmpty() ? "" : ", ").append(e.getKey()).append(" × ").append(e.getValue().size());
        int minSeeds = groups.values().stream().mapToInt(List::size).min().orElse(0);
        int maxSeeds = groups.values().stream().mapToInt(List::size).max().orElse(0);
        List<String> single = groups.entrySet().stream().filter(e -> e.getValue().size() < 2).map(Map.Entry::getKey).toList();
        String spread;
        if (maxSeeds < 2) {
            spread = "With one seed per mode there is no measure of spread: differences between modes may be noise.";
        } else if (!single.isEmpty()) {
            spread = String.join(", ", single) + (single.size() == 1 ? " has" : " have") + " one seed: no measure of spread there, "
                    + "and differences with it may be noise. Other intervals are over up to " + maxSeeds + " seeds.";
        } else {
            spread = "Intervals are over " + (minSeeds == maxSeeds ? "" + minSeeds : minSeeds + " to " + maxSeeds)
                    + (minSeeds < 5 ? " seeds, few enough that only large differences can show." : " seeds.");
        }
        out.add("Runs: " + runs + " (mode × seeds). " + spread);
        List<String> unfinished = new ArrayList<>();
        for (List<ReportRuns.Run> g : groups.values()) {
            for (ReportRuns.Run r : g) {
                if (finished(r, g)) continue;
                String lastEval = r.evals().isEmpty() ? "no evaluation" : "last evaluation at step " + r.evals().getLast().get("step").asLong();
                unfinished.add(r.name() + " (step " + r.lastStep() + " of " + target(r, g) + ", " + lastEval + ")");
            }
        }
        if (!unfinished.isEmpty()) {
            out.add("Unfinished runs, left out of every \"after\" (a run is finished when its last evaluation is at the last step it "
                    + "trains, its trainer.steps or trainer.epochs' count): " + String.join(", ", unfinished) + ".");
        }
        List<String> unknown = new ArrayList<>();
        for (List<ReportRuns.Run> g : groups.values()) for (ReportRuns.Run r : g) if (r.plannedSteps() == 0 && r.epochs() > 0) unknown.add(r.name());
        if (!unknown.isEmpty()) {
            // trainer.epochs counts steps from the training tasks, which the run folder does not record: the count the trainer
            // printed is read from an experiment's logs/, and without it a run can only be judged against its mode's others
            out.add("Steps planned unknown for " + String.join(", ", unknown) + ": trainer.epochs sets their length, which their "
                    + "folders do not record (the trainer prints it at its start; an experiment keeps that in logs/<run>.log); each "
                    + "counts as finished once it reached the last step any run of its mode logged.");
        }
        List<String> keys = evalKeys(groups), benchmarks = benchmarkPass1(keys);
        String main = keys.contains("eval/pass@1") ? "eval/pass@1" : keys.isEmpty() ? null : keys.getFirst();
        if (main != null && groups.size() > 1) {
            List<String> labels = new ArrayList<>(groups.keySet());
            String pooled = main.substring(5).contains("/") ? "" : " (all " + tasks(groups) + "test tasks pooled"
                    + (benchmarks.isEmpty() ? "" : ": the benchmarks weigh by their task counts") + ")";
            StringBuilder sb = new StringBuilder("Held-out " + main.substring(5) + pooled + " after training: ");
            List<ReportStats.Interval> after = new ArrayList<>();
            for (String l : labels) after.add(after(groups.get(l), key(main)));
            for (int i = 0; i < labels.size(); i++) sb.append(i == 0 ? "" : "; ").append(labels.get(i)).append(' ')
                    .append(after.get(i).show(groups.get(labels.get(i)).size()));
            sb.append(". ");
            List<String> distinct = new ArrayList<>();
            for (int i = 0; i < labels.size(); i++) {
                for (int j = i + 1; j < labels.size(); j++) {
                    if (!after.get(i).overlaps(after.get(j))) distinct.add(labels.get(i) + " vs " + labels.get(j));
                }
            }
            // an interval of fewer than two finished seeds has no width, and overlaps() takes it as overlapping everything:
            // no statement about those modes, which are named instead
            List<String> noInterval = new ArrayList<>();
            for (int i = 0; i < labels.size(); i++) if (after.get(i).n() < 2) noInterval.add(labels.get(i));
            String without = noInterval.isEmpty() ? "" : " " + String.join(", ", noInterval) + (noInterval.size() == 1 ? " has" : " have")
                    + " fewer than two finished seeds: no interval, no comparison with " + (noInterval.size() == 1 ? "it." : "them.");
            if (!distinct.isEmpty()) {
                sb.append("Intervals that do not overlap: ").append(String.join(", ", distinct)).append('.').append(without);
            } else if (noInterval.isEmpty()) {
                sb.append("Every pair of intervals overlaps: these runs do not show that one mode evaluates better than another.");
            } else {
                sb.append("No intervals are apart.").append(without).append(" These runs do not show that one mode evaluates better than another.");
            }
            out.add(sb.toString());
            if (main.equals("eval/pass@1") && !benchmarks.isEmpty()) {
                StringBuilder bm = new StringBuilder("Mean of the benchmarks' pass@1 (" + benchmarks.size() + ", each weighed alike): ");
                for (int i = 0; i < labels.size(); i++) bm.append(i == 0 ? "" : "; ").append(labels.get(i)).append(' ')
                        .append(after(groups.get(labels.get(i)), benchmarkMean(benchmarks)).show(groups.get(labels.get(i)).size()));
                out.add(bm.append('.').toString());
            }
        }
        for (String a : agents(groups)) {
            String key = "agent/" + a + "/grad_norm";
            StringBuilder sb = new StringBuilder();
            for (var e : groups.entrySet()) {
                if (e.getValue().stream().allMatch(r -> r.valuesWithNonFinite(key).length == 0)) continue;
                sb.append(sb.isEmpty() ? "" : "; ").append(e.getKey()).append(' ').append(maxOverMedianCell(e.getValue(), key));
            }
            if (!sb.isEmpty()) out.add("Gradient-norm max/median of agent " + a + ": " + sb + ".");
        }
        return out;
    }

    /** "N " test tasks, from the finished runs' eval/tasks where they agree; "" where unknown or they differ. */
    private static String tasks(Map<String, List<ReportRuns.Run>> groups) {
        Set<Long> n = new java.util.TreeSet<>();
        for (List<ReportRuns.Run> g : groups.values()) {
            for (ReportRuns.Run r : g) {
                JsonNode f = finalEval(r, g);
                if (f != null && f.path("eval/tasks").isNumber()) n.add(f.get("eval/tasks").asLong());
            }
        }
        return n.size() == 1 ? n.iterator().next() + " " : "";
    }

    private static String escape(String s) {
        return s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;");
    }
}

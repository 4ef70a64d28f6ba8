// RunReport.java — `drmas report`: one self-contained HTML file for runs or experiments (plots inline
// as PNG, also written as plots/*.png with their data as plots/*.json): per mode, the mean over
// seeds with the lowest and highest seed, of the per-agent gradient norm (the paper's Fig. 4), the
// Lemma 4.2 inflation factor and E[A²], the reward, validity, response lengths, clipfrac and KL, and
// held-out avg@k / pass@k; a summary table per mode (final avg@k and pass@k with 95% intervals over
// seeds, gradient-norm spikiness per agent, mean inflation) and a text that states what the numbers
// show and what they do not. Plots are drawn by XChart, headless.
package dev.drmas.metrics;

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
    private RunReport() {
    }

    private static final Color[] PALETTE = {new Color(0x1f77b4), new Color(0xd62728), new Color(0x2ca02c), new Color(0x9467bd),
        new Color(0xff7f0e), new Color(0x8c564b), new Color(0xe377c2), new Color(0x7f7f7f)};

    /**
     * One plot: its file id, title, y-axis and the series of a run it draws; {@code logIfWide}: a
     * scale (a norm, E[A²]) that is drawn on a logarithmic axis when its positive values span more
     * than {@link #LOG_SPAN}, so that one mode's blow-up does not flatten the others to a line at 0.
     */
    private record Plot(String id, String title, String yAxis, Function<ReportRuns.Run, double[][]> series, boolean logIfWide) {
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
                + "lowest and highest seed at each step.</p>\n");
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
        XYChart chart = new XYChartBuilder().width(560).height(340).title(p.title()).xAxisTitle("step").yAxisTitle(p.yAxis()).build();
        XYStyler st = chart.getStyler();
        st.setLegendPosition(Styler.LegendPosition.InsideNE);
        st.setChartBackgroundColor(Color.WHITE);
        ObjectMapper json = new ObjectMapper();
        ObjectNode data = json.createObjectNode().put("title", p.title()).put("y", p.yAxis());
        ArrayNode series = data.putArray("series");
        Map<String, Map<Double, double[]>> stats = new LinkedHashMap<>();
        double minPositive = Double.POSITIVE_INFINITY, max = 0;
        boolean negative = false;
        for (var e : groups.entrySet()) {
            Map<Double, double[]> mm = ReportRuns.meanMinMax(e.getValue(), p.series());
            stats.put(e.getKey(), mm);
            for (double[] v : mm.values()) {
                for (double y : v) {
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
            String name = e.getKey() + " (" + e.getValue().size() + " seed" + (e.getValue().size() == 1 ? "" : "s") + ")";
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
            ObjectNode sj = series.addObject().put("name", e.getKey()).put("seeds", e.getValue().size());
            ArrayNode xs = sj.putArray("x"), ys = sj.putArray("mean"), mins = sj.putArray("min"), maxs = sj.putArray("max");
            for (int k = 0; k < x.length; k++) {
                xs.add(x[k]);
                ys.add(mean[k]);
                mins.add(lo[k]);
                maxs.add(hi[k]);
            }
        }
        if (!any) return null;
        byte[] png = BitmapEncoder.getBitmapBytes(chart, BitmapEncoder.BitmapFormat.PNG);
        writeWhole(plotsDir.resolve(p.id() + ".png"), png);
        writeWhole(plotsDir.resolve(p.id() + ".json"), json.writerWithDefaultPrettyPrinter().writeValueAsBytes(data));
        return "<img alt=\"" + escape(p.title()) + "\" src=\"data:image/png;base64,"
                + java.util.Base64.getEncoder().encodeToString(png) + "\">";
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

    /**
     * The last evaluation's {@code key} of every run of a group that has one, or (last false) the one
     * before training: at step 0 only (with trainer.eval_before_train off the first is a trained one).
     */
    private static ReportStats.Interval evalAt(List<ReportRuns.Run> g, String key, boolean last) {
        List<Double> v = new ArrayList<>();
        for (ReportRuns.Run r : g) {
            double[][] s = r.evalSeries(key);
            if (s.length > 0 && (last || s[0][0] == 0)) v.add(s[last ? s.length - 1 : 0][1]);
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

    /** Per seed, f of agent a's curve of {@code key}; the interval over the seeds that logged it. */
    private static ReportStats.Interval perSeed(List<ReportRuns.Run> g, String key, java.util.function.ToDoubleFunction<double[]> f) {
        List<Double> v = new ArrayList<>();
        for (ReportRuns.Run r : g) {
            double[] xs = values(r.series(key));
            if (xs.length == 0) continue;
            double x = f.applyAsDouble(xs);
            if (Double.isFinite(x)) v.add(x);
        }
        return ReportStats.interval(v.stream().mapToDouble(Double::doubleValue).toArray());
    }

    private static String summaryTable(Map<String, List<ReportRuns.Run>> groups) {
        List<String> evalKeys = evalKeys(groups), agents = agents(groups);
        StringBuilder t = new StringBuilder("<table><tr><th>mode</th><th>seeds</th><th>steps</th>");
        for (String k : evalKeys) t.append("<th>").append(escape(k.substring(5))).append(" before</th><th>").append(escape(k.substring(5))).append(" after</th>");
        for (String a : agents) {
            t.append("<th>").append(escape(a)).append(" ‖g‖ max/median</th><th>").append(escape(a)).append(" spikes &gt; 3× median</th><th>")
                    .append(escape(a)).append(" inflation</th>");
        }
        t.append("</tr>\n");
        for (var e : groups.entrySet()) {
            List<ReportRuns.Run> g = e.getValue();
            // the last step logged, not the lines: with metrics.log_freq > 1 there are fewer lines than steps
            long steps = g.stream().mapToLong(r -> r.steps().isEmpty() ? 0 : r.steps().getLast().path("step").asLong()).max().orElse(0);
            t.append("<tr><td>").append(escape(e.getKey())).append("</td><td>").append(g.size()).append("</td><td>").append(steps).append("</td>");
            for (String k : evalKeys) {
                t.append("<td>").append(evalAt(g, k, false).show()).append("</td><td>").append(evalAt(g, k, true).show()).append("</td>");
            }
            for (String a : agents) {
                String gn = "agent/" + a + "/grad_norm";
                t.append("<td>").append(perSeed(g, gn, ReportStats::maxOverMedian).show()).append("</td><td>")
                        .append(perSeed(g, gn, xs -> ReportStats.spikes(xs)).show()).append("</td><td>")
                        .append(perSeed(g, "agent/" + a + "/inflation", xs -> java.util.Arrays.stream(xs).average().orElse(Double.NaN)).show())
                        .append("</td>");
            }
            t.append("</tr>\n");
        }
        return t.append("</table>\n<p>Values are means over the seeds ± the half-width of a 95% interval (Student's t; none "
                + "with one seed). ‖g‖ is the per-agent gradient norm before clipping (trainer.grad_norm_per_agent); a spike is a "
                + "step whose norm exceeds 3× the median of the steps before it. Inflation is Lemma 4.2's factor, averaged over the "
                + "steps.</p>\n").toString();
    }

    /** Plain statements of what the figures show and do not, without claims beyond them. */
    static List<String> summaryText(Map<String, List<ReportRuns.Run>> groups) {
        List<String> out = new ArrayList<>();
        StringBuilder runs = new StringBuilder();
        for (var e : groups.entrySet()) runs.append(runs.isEmpty() ? "" : ", ").append(e.getKey()).append(" × ").append(e.getValue().size());
        int minSeeds = groups.values().stream().mapToInt(List::size).min().orElse(0);
        out.add("Runs: " + runs + " (mode × seeds). " + (minSeeds < 2
                ? "With one seed per mode there is no measure of spread: differences between modes may be noise."
                : "Intervals are over " + minSeeds + (minSeeds < 5 ? " seeds, few enough that only large differences can show." : " seeds.")));
        List<String> keys = evalKeys(groups);
        String main = keys.contains("eval/pass@1") ? "eval/pass@1" : keys.isEmpty() ? null : keys.getFirst();
        if (main != null && groups.size() > 1) {
            List<String> labels = new ArrayList<>(groups.keySet());
            StringBuilder sb = new StringBuilder("Held-out " + main.substring(5) + " after training: ");
            for (int i = 0; i < labels.size(); i++) sb.append(i == 0 ? "" : "; ").append(labels.get(i)).append(' ')
                    .append(evalAt(groups.get(labels.get(i)), main, true).show());
            sb.append(". ");
            List<String> distinct = new ArrayList<>();
            for (int i = 0; i < labels.size(); i++) {
                for (int j = i + 1; j < labels.size(); j++) {
                    ReportStats.Interval a = evalAt(groups.get(labels.get(i)), main, true), b = evalAt(groups.get(labels.get(j)), main, true);
                    if (!a.overlaps(b)) distinct.add(labels.get(i) + " vs " + labels.get(j));
                }
            }
            sb.append(distinct.isEmpty() ? "Every pair of intervals overlaps: these runs do not show that one mode evaluates better than another."
                    : "Intervals that do not overlap: " + String.join(", ", distinct) + ".");
            out.add(sb.toString());
        }
        for (String a : agents(groups)) {
            String key = "agent/" + a + "/grad_norm";
            StringBuilder sb = new StringBuilder();
            for (var e : groups.entrySet()) {
                ReportStats.Interval s = perSeed(e.getValue(), key, ReportStats::maxOverMedian);
                if (s.n() > 0) sb.append(sb.isEmpty() ? "" : "; ").append(e.getKey()).append(' ').append(s.show());
            }
            if (!sb.isEmpty()) out.add("Gradient-norm max/median of agent " + a + ": " + sb + ".");
        }
        return out;
    }

    private static String escape(String s) {
        return s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;");
    }
}

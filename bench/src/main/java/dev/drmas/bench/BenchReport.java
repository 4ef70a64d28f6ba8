// BenchReport.java — runs the JMH benchmarks programmatically and prints one Markdown table per
// operation: ms/op, effective GB/s over the bytes the kernel must touch, native's speed-up over
// LibTorch and plain Java, and its bandwidth as a share of a memory copy's (--out saves the tables).
package dev.drmas.bench;

import static dev.drmas.bench.BenchSupport.human;
import static dev.drmas.bench.BenchSupport.ms;
import static dev.drmas.bench.BenchSupport.num;
import static dev.drmas.bench.BenchSupport.ratio;

import dev.drmas.algo.NormMode;
import dev.drmas.bindings.LibDrmas;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.ZonedDateTime;
import java.time.format.DateTimeFormatter;
import java.util.ArrayList;
import java.util.Collection;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.TreeSet;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;
import org.openjdk.jmh.results.RunResult;
import org.openjdk.jmh.results.format.ResultFormatType;
import org.openjdk.jmh.runner.NoBenchmarksException;
import org.openjdk.jmh.runner.Runner;
import org.openjdk.jmh.runner.RunnerException;
import org.openjdk.jmh.runner.options.ChainedOptionsBuilder;
import org.openjdk.jmh.runner.options.OptionsBuilder;
import org.openjdk.jmh.runner.options.TimeValue;

public final class BenchReport {
    private BenchReport() {}

    static final String USAGE = """
            usage: BenchReport [options]
              --quick            n = 64K and 1M only, warmup 1 x 500 ms, measurement 2 x 500 ms
              --include REGEX    only benchmarks whose name (dev.drmas.bench.Class.method) matches
              --out FILE.md      also write the tables as Markdown
              --json FILE        also write JMH's raw results as JSON
              --sizes N,N,...    row / token counts (default 65536,1048576,16777216)
              --layouts L,L      AdvantageBench row layouts (default grouped,random)
              --modes M,M        AdvantageBench normalisation modes as configs name them (default drmas; e.g.
                                 drmas,grpo: the paper's baseline beside it, as rows "grouped grpo", ...)
              --threads N        threads of the native kernels, LibTorch and the copy (default 2)
              --warmup N         warmup iterations (default 2; --quick 1)
              --iterations N     measurement iterations (default 3; --quick 2)
              --time MS          length of every iteration in ms (default 1000; --quick 500)
              --forks N          JVM forks per benchmark (default 1)
              --no-reference     skip the ReferenceKernels oracles (referenceJava)
            Implementations: nativeCpu (headline), nativeTrusted (advantage, trusted entry), nativeRows (loss, per-row
            advantages), arrayApi, libtorch, plainJava, referenceJava (<= 1M), copy.""";

    static final List<String> DEFAULT_SIZES = List.of("65536", "1048576", "16777216");
    static final String DEFAULT_MODE = "drmas";
    static final List<String> IMPLS = List.of("nativeCpu", "nativeTrusted", "nativeRows", "arrayApi", "libtorch", "plainJava",
            "referenceJava", "copy");

    /**
     * One benchmark class: its size parameter, the bytes its kernel must touch per element, and
     * those of its variant (trusted / per-row), whose GB/s and share of the copy count its own
     * traffic: the copy's time scaled to those bytes.
     */
    record Spec(String className, String title, String sizeParam, String unit, int bytesPerElement, String bytesNote,
                boolean hasLayout, int variantBytesPerElement) {
        int bytesOf(String impl) {
            return impl.equals("nativeTrusted") || impl.equals("nativeRows") ? variantBytesPerElement : bytesPerElement;
        }
    }

    static final List<Spec> SPECS = List.of(
            new Spec("AdvantageBench", "Advantage (segment statistics + normalisation; drmas, trajectory pooling)",
                    "rows", "row", AdvantageBench.BYTES_PER_ROW,
                    "16 B/row read (score f32 + uid, traj, agent int32) + 4 B/row written (advantage f32); the trusted"
                            + " entry touches the same", true, AdvantageBench.BYTES_PER_ROW),
            new Spec("ClippedLossBench", "Clipped PPO loss, forward + backward (token-mean, 10% masked)",
                    "tokens", "token", ClippedLossBench.BYTES_PER_TOKEN,
                    "13 B/token read (logp, old logp, adv f32 + mask u8) + 4 B/token written (grad f32); nativeRows (one"
                            + " advantage a row) touches " + ClippedLossBench.ROWS_BYTES_PER_TOKEN + " B/token, and its GB/s and"
                            + " share of the copy count those", false, ClippedLossBench.ROWS_BYTES_PER_TOKEN));

    static final class Args {
        boolean quick, reference = true;
        String include = "dev\\.drmas\\.bench\\..*Bench\\..*";
        Path out, json;
        List<String> sizes, layouts = List.of("grouped", "random"), modes = List.of(DEFAULT_MODE);
        int threads = 2, warmup = -1, iterations = -1, timeMs = -1, forks = 1;
    }

    public static void main(String[] argv) throws IOException {
        Args a = parse(argv);
        if (a == null) return;
        if (a.sizes == null) a.sizes = a.quick ? List.of("65536", "1048576") : DEFAULT_SIZES;
        if (a.warmup < 0) a.warmup = a.quick ? 1 : 2;
        if (a.iterations < 0) a.iterations = a.quick ? 2 : 3;
        if (a.timeMs < 0) a.timeMs = a.quick ? 500 : 1000;

        List<RunResult> results = new ArrayList<>();
        List<String> refSizes = a.sizes.stream().filter(s -> Long.parseLong(s) <= BenchSupport.REFERENCE_MAX).toList();
        // referenceJava runs separately, only at the sizes it can handle
        results.addAll(run(a, a.sizes, ".*\\.referenceJava$"));
        if (a.reference && !refSizes.isEmpty()) results.addAll(run(a, refSizes, "^(?!.*\\.referenceJava$)"));

        String report = report(a, results);
        System.out.println();
        System.out.println(report);
        if (a.out != null) {
            Files.writeString(a.out, report);
            System.out.println("written to " + a.out.toAbsolutePath());
        }
    }

    private static Collection<RunResult> run(Args a, List<String> sizes, String exclude) {
        ChainedOptionsBuilder o = new OptionsBuilder()
                .include(a.include)
                .exclude(exclude)
                .forks(a.forks)
                .warmupIterations(a.warmup)
                .warmupTime(TimeValue.milliseconds(a.timeMs))
                .measurementIterations(a.iterations)
                .measurementTime(TimeValue.milliseconds(a.timeMs))
                .timeUnit(TimeUnit.MILLISECONDS)
                .shouldFailOnError(false)
                .jvmArgs(jvmArgs(a))
                .param("rows", sizes.toArray(String[]::new))
                .param("tokens", sizes.toArray(String[]::new))
                .param("layout", a.layouts.toArray(String[]::new))
                .param("mode", a.modes.toArray(String[]::new));
        if (a.json != null) {
            String f = a.json.toString();
            // two runs (with and without the oracles): keep both result files
            if (exclude.contains("(?!")) f = f.replaceFirst("(\\.json)?$", "-reference.json");
            o.result(f).resultFormat(ResultFormatType.JSON);
        }
        try {
            return new Runner(o.build()).run();
        } catch (NoBenchmarksException e) {
            return List.of();
        } catch (RunnerException e) {
            throw new IllegalStateException("JMH failed: " + e.getMessage(), e);
        }
    }

    static String[] jvmArgs(Args a) {
        List<String> j = new ArrayList<>(List.of("--enable-native-access=ALL-UNNAMED", "-Xmx12g",
                "-Dorg.bytedeco.javacpp.maxPhysicalBytes=0", "-D" + BenchSupport.THREADS_PROPERTY + "=" + a.threads));
        // the forks find libdrmas (and any backend override) as this JVM does
        for (String p : List.of("drmas.native.path", "drmas.backend")) {
            String v = System.getProperty(p);
            if (v != null) j.add("-D" + p + "=" + v);
        }
        return j.toArray(String[]::new);
    }

    static Args parse(String[] argv) {
        Args a = new Args();
        for (int i = 0; i < argv.length; i++) {
            String k = argv[i];
            String val = i + 1 < argv.length ? argv[i + 1] : null;
            switch (k) {
                case "--quick" -> a.quick = true;
                case "--no-reference" -> a.reference = false;
                case "-h", "--help" -> {
                    System.out.println(USAGE);
                    return null;
                }
                case "--include", "--out", "--json", "--sizes", "--layouts", "--modes", "--threads", "--warmup", "--iterations",
                     "--time", "--forks" -> {
                    if (val == null) throw new IllegalArgumentException(k + " needs a value\n" + USAGE);
                    i++;
                    switch (k) {
                        case "--include" -> a.include = val;
                        case "--out" -> a.out = Path.of(val);
                        case "--json" -> a.json = Path.of(val);
                        case "--sizes" -> a.sizes = List.of(val.split(","));
                        case "--layouts" -> a.layouts = List.of(val.split(","));
                        case "--modes" -> a.modes = modes(val);
                        case "--threads" -> a.threads = positive(k, val);
                        case "--warmup" -> a.warmup = positive(k, val);
                        case "--iterations" -> a.iterations = positive(k, val);
                        case "--time" -> a.timeMs = positive(k, val);
                        case "--forks" -> a.forks = positive(k, val);
                        default -> throw new AssertionError(k);
                    }
                }
                default -> throw new IllegalArgumentException("unknown option " + k + "\n" + USAGE);
            }
        }
        return a;
    }

    /** --modes: each must be a mode a config can name (checked here, not in a forked JVM's setup). */
    static List<String> modes(String val) {
        List<String> m = Stream.of(val.split(",")).map(String::trim).toList();
        m.forEach(NormMode::parse);
        return m;
    }

    /** A row layout in the report, with the mode where it is not the default: "grouped", "grouped grpo". */
    static String layoutKey(String layout, String mode) {
        return layout == null || mode == null || mode.equals(DEFAULT_MODE) ? layout : layout + " " + mode;
    }

    private static int positive(String k, String v) {
        try {
            int n = Integer.parseInt(v.trim());
            if (n >= 1) return n;
        } catch (NumberFormatException ignored) {
            // reported below
        }
        throw new IllegalArgumentException(k + " needs a positive integer, got " + v);
    }

    // ------------------------------------------------------------------ report

    /** A score: ms per op and its 99.9% half-interval (NaN with too few iterations). */
    record Score(double ms, double err) {}

    static String report(Args a, List<RunResult> results) {
        StringBuilder sb = new StringBuilder();
        sb.append("# drmas kernel benchmarks\n\n");
        sb.append(String.format(Locale.ROOT, "%s · JDK %s · %s %s · %d CPUs · libdrmas %s · threads %d (OMP_NUM_THREADS=%s)%n",
                ZonedDateTime.now().format(DateTimeFormatter.ISO_OFFSET_DATE_TIME), System.getProperty("java.version"),
                System.getProperty("os.name"), System.getProperty("os.arch"), Runtime.getRuntime().availableProcessors(),
                libdrmasVersion(), a.threads, System.getenv().getOrDefault("OMP_NUM_THREADS", "unset")));
        sb.append(String.format(Locale.ROOT, "JMH: %d fork(s), warmup %d × %d ms, measurement %d × %d ms, average time; "
                        + "± is JMH's 99.9%% confidence half-interval.%n", a.forks, a.warmup, a.timeMs, a.iterations, a.timeMs));
        sb.append("GB/s = bytes the kernel must minimally touch / time (1 GB = 1e9 B); the copy baseline copies half "
                + "that many bytes (a copy reads and writes each byte), so it moves the same traffic.\n");
        for (Spec spec : SPECS) {
            Map<String, Map<String, Score>> byKey = new LinkedHashMap<>(); // "size|layout" -> impl -> score
            TreeSet<Long> sizes = new TreeSet<>();
            TreeSet<String> layouts = new TreeSet<>();
            for (RunResult r : results) {
                String bench = r.getParams().getBenchmark();
                int dot = bench.lastIndexOf('.');
                String cls = bench.substring(bench.lastIndexOf('.', dot - 1) + 1, dot), impl = bench.substring(dot + 1);
                if (!cls.equals(spec.className())) continue;
                String size = r.getParams().getParam(spec.sizeParam());
                if (size == null) continue;
                String layout = spec.hasLayout() ? layoutKey(r.getParams().getParam("layout"), r.getParams().getParam("mode")) : null;
                sizes.add(Long.parseLong(size));
                if (layout != null) layouts.add(layout);
                byKey.computeIfAbsent(size + "|" + (layout == null ? "" : layout), x -> new LinkedHashMap<>())
                        .put(impl, new Score(r.getPrimaryResult().getScore(), r.getPrimaryResult().getScoreError()));
            }
            if (sizes.isEmpty()) continue;
            if (!spec.hasLayout() || layouts.isEmpty()) layouts = new TreeSet<>(List.of(""));
            // layouts in a fixed order: grouped first
            List<String> layoutOrder = layouts.stream().sorted((x, y) -> x.equals("grouped") ? -1 : y.equals("grouped") ? 1 : x.compareTo(y)).toList();

            sb.append("\n## ").append(spec.title()).append("\n\n");
            sb.append(spec.bytesPerElement()).append(" B/").append(spec.unit()).append(": ").append(spec.bytesNote()).append(".\n\n");
            String layoutCol = spec.hasLayout() ? " layout |" : "";
            String layoutSep = spec.hasLayout() ? "---|" : "";
            sb.append("| ").append(spec.sizeParam()).append(" |").append(layoutCol)
                    .append(" implementation | ms/op | ± | GB/s | time / native |\n");
            sb.append("|---:|").append(layoutSep).append("---|---:|---:|---:|---:|\n");
            for (long n : sizes) {
                for (String layout : layoutOrder) {
                    Score nat = score(byKey, n, layout, "nativeCpu");
                    for (String impl : IMPLS) {
                        Score s = score(byKey, n, layout, impl);
                        if (s == null) continue;
                        sb.append("| ").append(human(n)).append(" |");
                        if (spec.hasLayout()) sb.append(' ').append(layout).append(" |");
                        sb.append(' ').append(impl).append(" | ").append(ms(s.ms())).append(" | ").append(ms(s.err()))
                                .append(" | ").append(num(gbps(spec.bytesOf(impl), n, s.ms()))).append(" | ")
                                .append(nat == null ? "—" : ratio(s.ms() / nat.ms())).append(" |\n");
                    }
                }
            }
            sb.append("\nSummary (speed-up = other's time / native's time):\n\n");
            sb.append("| ").append(spec.sizeParam()).append(" |").append(layoutCol)
                    .append(" native ms | native GB/s | copy GB/s | native % of copy | vs LibTorch | vs plain Java | vs array API |")
                    .append(" variant (trusted / per-row) ms | variant % of copy | variant vs LibTorch |\n");
            sb.append("|---:|").append(layoutSep).append("---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
            for (long n : sizes) {
                for (String layout : layoutOrder) {
                    Score nat = score(byKey, n, layout, "nativeCpu"), copy = score(byKey, n, layout, "copy");
                    Score lt = score(byKey, n, layout, "libtorch"), pj = score(byKey, n, layout, "plainJava");
                    Score api = score(byKey, n, layout, "arrayApi");
                    String varImpl = score(byKey, n, layout, "nativeTrusted") != null ? "nativeTrusted" : "nativeRows";
                    Score var = score(byKey, n, layout, varImpl);
                    sb.append("| ").append(human(n)).append(" |");
                    if (spec.hasLayout()) sb.append(' ').append(layout).append(" |");
                    sb.append(' ').append(nat == null ? "—" : ms(nat.ms()))
                            .append(" | ").append(nat == null ? "—" : num(gbps(spec.bytesPerElement(), n, nat.ms())))
                            .append(" | ").append(copy == null ? "—" : num(gbps(spec.bytesPerElement(), n, copy.ms())))
                            .append(" | ").append(nat == null || copy == null ? "—"
                                    : String.format(Locale.ROOT, "%.0f%%", shareOfCopy(spec, "nativeCpu", copy.ms(), nat.ms())))
                            .append(" | ").append(speedup(lt, nat))
                            .append(" | ").append(speedup(pj, nat))
                            .append(" | ").append(speedup(api, nat))
                            .append(" | ").append(var == null ? "—" : ms(var.ms()))
                            .append(" | ").append(var == null || copy == null ? "—"
                                    : String.format(Locale.ROOT, "%.0f%%", shareOfCopy(spec, varImpl, copy.ms(), var.ms())))
                            .append(" | ").append(speedup(lt, var)).append(" |\n");
                }
            }
        }
        if (results.isEmpty()) sb.append("\nNo results (no benchmark matched, or all failed: see the JMH output above).\n");
        return sb.toString();
    }

    private static String libdrmasVersion() {
        try {
            return LibDrmas.version();
        } catch (RuntimeException | LinkageError e) {
            return "?";
        }
    }

    // the copy baseline has no layout: it stands for every layout of its size
    private static Score score(Map<String, Map<String, Score>> byKey, long n, String layout, String impl) {
        Map<String, Score> m = byKey.get(n + "|" + layout);
        Score s = m == null ? null : m.get(impl);
        if (s == null) {
            Map<String, Score> any = byKey.get(n + "|");
            s = any == null ? null : any.get(impl);
        }
        return s;
    }

    /**
     * An implementation's time as a share of the copy's (percent), the copy's time scaled to the
     * bytes that implementation must touch (the copy moves the headline's bytes).
     */
    static double shareOfCopy(Spec spec, String impl, double copyMs, double implMs) {
        return 100 * copyMs * spec.bytesOf(impl) / spec.bytesPerElement() / implMs;
    }

    static double gbps(int bytesPerElement, long n, double ms) {
        return (double) bytesPerElement * n / (ms * 1e-3) / 1e9;
    }

    private static String speedup(Score other, Score nat) {
        return other == null || nat == null ? "—" : ratio(other.ms() / nat.ms());
    }
}

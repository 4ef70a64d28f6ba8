// NormalizeCommand.java — `drmas normalize`: advantages for a file of rollout rows, so that users can
// check the normalisation on their own data. JSONL in, JSONL out: each output line is the input
// object plus "advantage", in input order. Safetensors in (uid, traj, agent, score columns),
// safetensors out (one advantage column). Any bad row stops the command before any output.
package dev.drmas.cli;

import dev.drmas.algo.AdvantageSummary;
import dev.drmas.algo.Advantages;
import dev.drmas.algo.GlobalPooling;
import dev.drmas.algo.NormConfig;
import dev.drmas.algo.NormMode;
import dev.drmas.algo.SettingException;
import dev.drmas.algo.SingletonPolicy;
import dev.drmas.bindings.AbiIndices;
import dev.drmas.bindings.Backend;
import dev.drmas.bindings.DrmasException;
import dev.drmas.bindings.Kernels;
import java.io.IOException;
import java.io.OutputStream;
import java.io.PrintStream;
import java.io.UncheckedIOException;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.Callable;
import java.util.stream.IntStream;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;
import picocli.CommandLine.Parameters;

@Command(name = "normalize", mixinStandardHelpOptions = true,
        description = {"Compute advantages for rollout rows: JSONL (uid, traj, agent, score per line) or safetensors",
                "(1-D tensors uid, traj, agent and score). Writes each JSONL row plus \"advantage\", in input order,",
                "or a safetensors file with one tensor \"advantage\", to stdout (or --output).",
                "JSONL: traj identifies a trajectory within its uid. Safetensors: ids are dense (0..count-1) as given."})
final class NormalizeCommand implements Callable<Integer> {

    @Option(names = "--mode", required = true, paramLabel = "MODE", description = "drmas | grpo | agent-mean | agent-std")
    String mode;

    @Option(names = "--global-pooling", defaultValue = "trajectories", paramLabel = "P",
            description = "trajectories (default) | rows: what the group statistics pool over")
    String pooling;

    @Option(names = "--eps", defaultValue = "1e-6", paramLabel = "E", converter = Typed.Converter.class,
            description = "added to the std (default ${DEFAULT-VALUE})")
    Typed eps;

    /**
     * A number and its text as typed: an error names what the user wrote, not the double it became
     * (1e-400 is 0 as a double, and "got 0" would say the user typed 0).
     */
    record Typed(String text, double value) {
        static final class Converter implements CommandLine.ITypeConverter<Typed> {
            @Override
            public Typed convert(String s) {
                try {
                    return new Typed(s, Double.parseDouble(s));
                } catch (NumberFormatException e) {
                    throw new CommandLine.TypeConversionException("'" + s + "' is not a number");
                }
            }
        }
    }

    @Option(names = "--singleton", defaultValue = "fallback", paramLabel = "POLICY",
            description = "fallback (default) | zero | raw: single-member segments")
    String singleton;

    @Option(names = "--biased-std", description = "std with n instead of n - 1")
    boolean biasedStd;

    @Option(names = "--no-std", description = "only subtract the mean (Dr. GRPO style)")
    boolean noStd;

    @Option(names = "--format", paramLabel = "F",
            description = "jsonl | safetensors: the input's format, and so the output's (default: safetensors for a "
                    + ".safetensors file, else JSONL)")
    String format;

    @Option(names = {"-o", "--output"}, paramLabel = "OUT", description = "write here instead of stdout (a regular file is replaced whole: "
            + "written beside it, then renamed; a symbolic link stays, and its target is written, which needs the target's folder "
            + "to exist); - is stdout, as - is stdin for IN (./- names a file called -)")
    Path output;

    @Option(names = "--summary", description = "print per-agent statistics to stderr")
    boolean summary;

    @Parameters(index = "0", paramLabel = "IN", description = "input rows (.jsonl, .safetensors), or - for stdin")
    Path input;

    NormConfig config() {
        // NormConfig's rule for eps, checked here first so that the message has the text as typed
        double v = eps.value();
        if (!Double.isFinite(v) || (noStd ? v < 0 : v <= 0)) {
            throw new UserError("eps: must be a finite number " + (noStd ? ">= 0" : "> 0") + ", got " + eps.text()
                    + (eps.text().strip().equals(SettingException.num(v)) ? "" : " (" + SettingException.num(v) + " as a double)"));
        }
        try {
            return new NormConfig(NormMode.parse(mode), GlobalPooling.parse(pooling), SingletonPolicy.parse(singleton),
                    !biasedStd, !noStd, v);
        } catch (IllegalArgumentException e) {
            throw new UserError(e.getMessage());
        }
    }

    /** The input's format: --format, else by the file's extension (JSONL unless it is .safetensors). */
    boolean safetensors() {
        if (format != null) {
            return switch (format.toLowerCase(Locale.ROOT)) {
                case "jsonl", "json" -> false;
                case "safetensors" -> true;
                default -> throw new UserError("format: '" + format + "' is not one of jsonl, safetensors");
            };
        }
        return input.getFileName() != null && input.getFileName().toString().toLowerCase(Locale.ROOT).endsWith(".safetensors");
    }

    /** Whether {@code p} is "-": stdin as IN, stdout as OUT, on every path (a file of that name is ./-). */
    static boolean dash(Path p) {
        return p.toString().equals("-");
    }

    @Override
    public Integer call() throws IOException {
        NormConfig cfg = config();
        boolean st = safetensors();
        if (output != null && dash(output)) output = null;  // -o -: stdout, as if no -o were given
        if (output != null) {
            String o = output.getFileName() == null ? "" : output.getFileName().toString().toLowerCase(Locale.ROOT);
            boolean otherKind = st ? o.endsWith(".jsonl") || o.endsWith(".json") : o.endsWith(".safetensors");
            if (otherKind) {
                throw new UserError(output + ": the output has the input's format (" + (st ? "safetensors" : "JSONL")
                        + "); name it " + (st ? ".safetensors" : ".jsonl") + " (--format names the input's format)");
            }
        }
        if (st) return safetensors(cfg);
        ScoredRows rows = ScoredRows.readColumns(input);
        int n = rows.size(), k = Math.max(1, rows.numAgents());
        // the statistics are sized by uids x agents (as for safetensors): an 'agent' that takes a new
        // value on every row would make the work grow with the square of the rows
        long segments = (long) rows.numUids * k;
        if (SafetensorsRows.tooManySegments(segments, n)) {
            throw new UserError(String.format(Locale.ROOT, "%s: %d uids x %d agents = %d (uid, agent) segments for %d rows: "
                    + "at most %d a row (does 'agent' name the acting agent, not the row?)", rows.source, rows.numUids, k, segments, n,
                    SafetensorsRows.MAX_SEGMENTS_PER_ROW));
        }
        // the kernel reads the first n values of the columns (which the reader sized from the file, and does not copy)
        float[] adv = new float[n];
        double[] diag = summary ? summaryBuffer(rows.source, rows.numUids, k) : null;
        try {
            Kernels.advantage(Backend.CPU, Advantages.params(cfg), n, MemorySegment.ofArray(rows.scores), MemorySegment.ofArray(rows.uid),
                    MemorySegment.ofArray(rows.traj), MemorySegment.ofArray(rows.agent), rows.numUids, rows.numTrajs, k,
                    MemorySegment.ofArray(adv), diag == null ? null : MemorySegment.ofArray(diag), null);
        } catch (DrmasException e) {
            throw new UserError(rows.source + ": " + e.getMessage());
        }
        requireFinite(rows, adv);
        if (output == null) {
            // System.out throws on a failed write (StdStreams): a full disk or a closed pipe stops the command
            write(rows, adv, System.out);
        } else {
            writeFile(output, rows, adv);
        }
        if (summary) {
            rows.trim();
            printSummary(System.err, cfg, rows.source, rows.scores, rows.agent, adv, diag, rows.numUids, rows.numTrajs,
                    rows.agentNames);
        }
        return 0;
    }

    static void write(ScoredRows rows, float[] adv, OutputStream os) throws IOException {
        JsonlOutput.write(rows, adv, os);
    }

    /** The rows with their advantages to {@code out} (OutputFile: whole or not at all, devices written in place). */
    static void writeFile(Path out, ScoredRows rows, float[] adv) {
        OutputFile.write(out, os -> JsonlOutput.write(rows, adv, os));
    }

    /**
     * The diagnostics --summary reads: DIAG_FIELDS doubles per (uid, agent) segment, in one Java
     * array. The kernel lays them out by uid x agent, so rows that each have their own uid ask for
     * up to 64 segments a row (tooManySegments' bound): more than the heap may hold, where the same
     * rows without --summary need little. That is the user's choice to make, so it is a UserError
     * that says how much and what to do, never an OutOfMemoryError's stack trace.
     */
    private static double[] summaryBuffer(String source, long numUids, int numAgents) {
        long size = numUids * numAgents * AbiIndices.DIAG_FIELDS;
        long heap = Runtime.getRuntime().maxMemory();
        if (size > Integer.MAX_VALUE - 8 || size * Double.BYTES > heap) throw summaryTooLarge(source, numUids, numAgents, size, heap);
        try {
            return new double[(int) size];
        } catch (OutOfMemoryError e) {
            // one allocation, which failed whole after a full collection: nothing else is left short of memory
            throw summaryTooLarge(source, numUids, numAgents, size, heap);
        }
    }

    /**
     * --summary keeps the rows' scores, agents and advantages in Java arrays, which hold at most
     * Integer.MAX_VALUE - 8 values: more rows are a UserError naming both counts (Math.toIntExact's
     * bare "integer overflow" before).
     */
    static void requireSummaryRows(String source, long n) {
        if (n > Integer.MAX_VALUE - 8) {
            throw new UserError(String.format(Locale.ROOT, "%s: --summary keeps every row in Java arrays, which hold at most %d values; "
                    + "the file has %d rows (run without --summary)", source, Integer.MAX_VALUE - 8, n));
        }
    }

    private static UserError summaryTooLarge(String source, long numUids, int numAgents, long size, long heap) {
        boolean array = size > Integer.MAX_VALUE - 8;  // no heap helps there
        String limit = array ? String.format(Locale.ROOT, "more than a Java array holds (%d values); run without --summary",
                Integer.MAX_VALUE - 8)
                : "more than the Java heap can give (at most " + mib(heap) + "); run without --summary, or give Java a larger heap "
                        + "(DRMAS_JAVA_OPTS=-Xmx<size>)";
        return new UserError(String.format(Locale.ROOT, "%s: --summary needs %s (%d values for each of %d uids x %d agents), %s",
                source, mib(size * Double.BYTES), AbiIndices.DIAG_FIELDS, numUids, numAgents, limit));
    }

    private static String mib(long bytes) {
        return bytes < (1L << 30) ? String.format(Locale.ROOT, "%.1f MiB", bytes / (double) (1 << 20))
                : String.format(Locale.ROOT, "%.1f GiB", bytes / (double) (1L << 30));
    }

    /** An advantage that overflowed float32 (|score − mean| > 3.4e38) would be written as no number: refused first. */
    private static void requireFinite(ScoredRows rows, float[] adv) {
        int i = (int) SafetensorsRows.firstNonFinite(MemorySegment.ofArray(adv), adv.length);
        if (i < 0) return;
        long line;
        try {
            line = JsonlOutput.lineOf(rows, i);
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
        throw new UserError(rows.source + ":" + line + ": the advantage is " + adv[i] + " (the scores are too far apart for float32)");
    }

    private Integer safetensors(NormConfig cfg) throws IOException {
        // rows sorted as rollouts write them go through small buffers, chunk by chunk, where the output
        // is a file replaced by rename (a chunk this path does not cover falls back to the code below,
        // before anything is renamed into place); --summary needs every row at once
        // (not for "-", which is stdin even where a file of that name is in the working folder)
        if (output != null && !summary && !dash(input) && Files.isRegularFile(input) && OutputFile.replacesByRename(output)) {
            try {
                if (SafetensorsStream.normalize(input, output, cfg, n -> outputMetadata(cfg, n))) return 0;
            } catch (SafetensorsStream.Fallback e) {
                // the whole-file path: the same advantages for what it covers, and the errors as ever
            }
        }
        try (SafetensorsRows rows = SafetensorsRows.open(input)) {
            long n = rows.n;
            int k = Math.max(1, rows.numAgents);
            double[] diag = summary ? summaryBuffer(rows.source, rows.numUids, k) : null;
            if (summary) requireSummaryRows(rows.source, n);
            float[] kept = summary ? new float[(int) n] : null;  // the advantages, for the summary after the write
            Map<String, String> meta = outputMetadata(cfg, n);
            // the kernel writes the advantages where the output holds them (for -o, the new file's
            // mapping); an error there leaves no output, as before any write
            var body = new SafetensorsRows.Output(SafetensorsRows.outputHeader(n, meta), n, adv -> {
                try {
                    Kernels.advantage(Backend.CPU, Advantages.params(cfg), n, rows.scores, rows.uid, rows.traj, rows.agent,
                            rows.numUids, rows.numTrajs, k, adv, diag == null ? null : MemorySegment.ofArray(diag), null);
                } catch (DrmasException e) {
                    throw new UserError(rows.source + ": " + e.getMessage());
                }
                // refused as on the JSONL path: an advantage past float32's range is written as no number
                long bad = SafetensorsRows.firstNonFinite(adv, n);
                if (bad >= 0) {
                    throw new UserError(rows.source + ": row " + bad + ": the advantage is "
                            + adv.getAtIndex(ValueLayout.JAVA_FLOAT_UNALIGNED, bad) + " (the scores are too far apart for float32)");
                }
                if (kept != null) MemorySegment.copy(adv, ValueLayout.JAVA_FLOAT_UNALIGNED, 0, kept, 0, kept.length);
            });
            if (output == null) {
                try {
                    body.writeTo(System.out);
                } catch (IOException e) {
                    throw new UncheckedIOException(e);
                }
            } else {
                OutputFile.write(output, body);
            }
            if (summary) {
                List<String> names = IntStream.range(0, rows.numAgents).mapToObj(Integer::toString).toList();
                printSummary(System.err, cfg, rows.source, rows.scoresArray(), rows.agentArray(), kept, diag, rows.numUids,
                        rows.numTrajs, names);
            }
        }
        return 0;
    }

    /** The safetensors output's __metadata__: the normalisation and the row count. */
    static Map<String, String> outputMetadata(NormConfig cfg, long n) {
        Map<String, String> meta = new LinkedHashMap<>();
        meta.put("producer", "drmas normalize");
        meta.put("mode", cfg.mode().configName());
        meta.put("global_pooling", cfg.globalPooling().configName());
        meta.put("singleton", cfg.singleton().configName());
        meta.put("std", cfg.unbiased() ? "unbiased" : "biased");
        meta.put("scale_by_std", Boolean.toString(cfg.scaleByStd()));
        meta.put("eps", Double.toString(cfg.eps()));
        meta.put("rows", Long.toString(n));
        return meta;
    }

    static void printSummary(PrintStream err, NormConfig cfg, String source, float[] scores, int[] agent, float[] adv,
                             double[] diag, int numUids, int numTrajs, List<String> agentNames) {
        AdvantageSummary[] s = AdvantageSummary.perAgent(scores, agent, adv, diag, numUids, agentNames.size());
        err.printf(Locale.ROOT, "%s: %d rows, %d groups, %d trajectories, %d agents (mode %s, pooling %s)%n", source,
                scores.length, numUids, numTrajs, agentNames.size(), cfg.mode().configName(), cfg.globalPooling().configName());
        err.printf(Locale.ROOT, "  %-12s %7s %10s %10s %10s %15s %15s%n", "agent", "rows", "score", "adv mean", "E[adv^2]",
                "inflation mean", "inflation max");
        for (AdvantageSummary a : s) {
            err.printf(Locale.ROOT, "  %-12s %7d %10.4f %10.4f %10.4f %15.4f %15.4f%n", agentNames.get(a.agent()), a.rows(),
                    a.scoreMean(), a.advantageMean(), a.advantageSecondMoment(), a.inflationMean(), a.inflationMax());
        }
    }
}

// NormalizeBench.java — `drmas normalize` at scale (issue 17, item 6): generates rollout rows as a
// trainer writes them (8 rollouts per task, 2-3 agents, 1-3 turns), then runs the command's own
// code end to end (read, normalise, write) in a fresh child JVM per run, which reports its time and
// its resident high-water mark over the baseline it had before the run, so the memory per row is
// what the process really held. Safetensors runs are also put against a memory copy of the same
// traffic (bytes read + bytes written) in this JVM.
package dev.drmas.bench;

import dev.drmas.algo.Advantages;
import dev.drmas.algo.NormConfig;
import dev.drmas.algo.NormMode;
import dev.drmas.bindings.Backend;
import dev.drmas.bindings.Kernels;
import dev.drmas.cli.ChildJvm;
import dev.drmas.cli.Main;
import dev.drmas.metrics.PeakMemory;
import java.io.BufferedOutputStream;
import java.io.IOException;
import java.io.OutputStream;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Comparator;
import java.util.List;
import java.util.Locale;
import java.util.SplittableRandom;
import java.util.stream.Stream;

public final class NormalizeBench {
    private NormalizeBench() {
    }

    static final String[] AGENTS = {"solver", "verifier", "critic"};

    /** One generated row: dense ids (traj global, as the columnar format wants) and the score as ten-thousandths. */
    interface RowSink {
        void row(int task, int rollout, int traj, int agent, int turn, int score10k) throws IOException;
    }

    /**
     * The rows of {@code n} as rollouts produce them: tasks in order, 8 rollouts each, every third
     * task with 3 agents (else 2), 1-3 turns per rollout, each agent acting once a turn; a task
     * has a success rate, a rollout succeeds or not, and an agent's score is the team's reward
     * plus its own shaping, rounded to 4 decimals.
     */
    static void generate(long n, long seed, RowSink sink) throws IOException {
        SplittableRandom rng = new SplittableRandom(seed);
        long rows = 0;
        int traj = 0;
        for (int task = 0; rows < n; task++) {
            int agents = task % 3 == 2 ? 3 : 2;
            double p = rng.nextDouble();
            for (int r = 0; r < 8 && rows < n; r++, traj++) {
                int turns = 1 + rng.nextInt(3);
                boolean success = rng.nextDouble() < p;
                for (int t = 0; t < turns && rows < n; t++) {
                    for (int a = 0; a < agents && rows < n; a++, rows++) {
                        double s = (success ? 0.8 : 0.0) + 0.2 * rng.nextDouble() - (a == 1 ? 0.05 : 0.0);
                        sink.row(task, r, traj, a, t, (int) Math.round(Math.max(0, Math.min(1, s)) * 10000));
                    }
                }
            }
        }
    }

    /** Ten-thousandths as Python's repr(round(x, 4)) writes them: 0.7342, 0.73, 1.0, 0.0. */
    static void decimal(StringBuilder sb, int score10k) {
        sb.append(score10k / 10000).append('.');
        int frac = score10k % 10000;
        if (frac == 0) {
            sb.append('0');
            return;
        }
        int len = 4;
        while (frac % 10 == 0) {
            frac /= 10;
            len--;
        }
        String f = Integer.toString(frac);
        for (int i = f.length(); i < len; i++) sb.append('0');
        sb.append(f);
    }

    /** JSONL rows; {@code spaced} as Python's json.dumps writes them ({"uid": ..., ...}), else compact. */
    static long writeJsonl(Path file, long n, boolean spaced) throws IOException {
        String sep = spaced ? ", " : ",", colon = spaced ? ": " : ":";
        try (OutputStream os = new BufferedOutputStream(Files.newOutputStream(file), 1 << 20)) {
            StringBuilder sb = new StringBuilder(128);
            generate(n, BenchSupport.SEED, (task, rollout, traj, agent, turn, score) -> {
                sb.setLength(0);
                sb.append("{\"uid\"").append(colon).append("\"task-").append(String.format(Locale.ROOT, "%07d", task)).append('"')
                        .append(sep).append("\"traj\"").append(colon).append(rollout)
                        .append(sep).append("\"agent\"").append(colon).append('"').append(AGENTS[agent]).append('"')
                        .append(sep).append("\"turn\"").append(colon).append(turn)
                        .append(sep).append("\"score\"").append(colon);
                decimal(sb, score);
                sb.append("}\n");
                os.write(sb.toString().getBytes(StandardCharsets.US_ASCII));
            });
        }
        return Files.size(file);
    }

    /**
     * uid, traj, agent and score as safetensors.numpy.save_file writes them: tensors sorted by
     * dtype (descending, safetensors' order: I64 > F64 > F32 > I32), then name; a compact JSON
     * header padded with spaces to a multiple of 8.
     */
    static long writeSafetensors(Path file, long n, boolean ids64, boolean scores64) throws IOException {
        int ib = ids64 ? 8 : 4, sb = scores64 ? 8 : 4;
        String id = ids64 ? "I64" : "I32", sc = scores64 ? "F64" : "F32";
        record T(String name, String dtype, int bytes, int rank) {}
        int idRank = ids64 ? 13 : 9, scRank = scores64 ? 12 : 11;
        List<T> ts = new ArrayList<>(List.of(new T("agent", id, ib, idRank), new T("traj", id, ib, idRank),
                new T("uid", id, ib, idRank), new T("score", sc, sb, scRank)));
        ts.sort(Comparator.comparingInt((T t) -> -t.rank()).thenComparing(T::name));
        StringBuilder h = new StringBuilder("{");
        long off = 0;
        long[] start = new long[4];
        for (int i = 0; i < 4; i++) {
            T t = ts.get(i);
            if (i > 0) h.append(',');
            h.append('"').append(t.name()).append("\":{\"dtype\":\"").append(t.dtype()).append("\",\"shape\":[").append(n)
                    .append("],\"data_offsets\":[").append(off).append(',').append(off + n * t.bytes()).append("]}");
            start[i] = off;
            off += n * t.bytes();
        }
        h.append('}');
        while (h.length() % 8 != 0) h.append(' ');
        byte[] header = h.toString().getBytes(StandardCharsets.US_ASCII);
        long dataStart = 8 + header.length;
        try (FileChannel ch = FileChannel.open(file, StandardOpenOption.CREATE, StandardOpenOption.TRUNCATE_EXISTING,
                StandardOpenOption.READ, StandardOpenOption.WRITE)) {
            ByteBuffer len = ByteBuffer.allocate(8).order(ByteOrder.LITTLE_ENDIAN).putLong(0, header.length);
            ch.write(len, 0);
            ch.write(ByteBuffer.wrap(header), 8);
            int chunk = 1 << 16;
            ByteBuffer[] bufs = new ByteBuffer[4];
            long[] pos = new long[4];
            int[] slot = new int[4];  // column (0 uid, 1 traj, 2 agent, 3 score) -> tensor index
            for (int i = 0; i < 4; i++) {
                T t = ts.get(i);
                bufs[i] = ByteBuffer.allocateDirect(chunk * t.bytes()).order(ByteOrder.LITTLE_ENDIAN);
                pos[i] = dataStart + start[i];
                slot[switch (t.name()) { case "uid" -> 0; case "traj" -> 1; case "agent" -> 2; default -> 3; }] = i;
            }
            generate(n, BenchSupport.SEED, (task, rollout, traj, agent, turn, score) -> {
                long[] v = {task, traj, agent};
                for (int c = 0; c < 3; c++) {
                    ByteBuffer b = bufs[slot[c]];
                    if (ids64) b.putLong(v[c]); else b.putInt((int) v[c]);
                }
                ByteBuffer b = bufs[slot[3]];
                double s = score / 10000.0;
                if (scores64) b.putDouble(s); else b.putFloat((float) s);
                if (!b.hasRemaining()) {
                    for (int i = 0; i < 4; i++) pos[i] += drain(ch, bufs[i], pos[i]);
                }
            });
            for (int i = 0; i < 4; i++) pos[i] += drain(ch, bufs[i], pos[i]);
        }
        return Files.size(file);
    }

    private static long drain(FileChannel ch, ByteBuffer b, long at) throws IOException {
        b.flip();
        long w = 0;
        while (b.hasRemaining()) w += ch.write(b, at + w);
        b.clear();
        return w;
    }

    // ------------------------------------------------------------------ runs

    /** What one child run measured. */
    record Result(String label, long rows, long inBytes, long outBytes, double seconds, long addedBytes, long baselineBytes,
                  long hwmBytes) {
        double rowsPerSecond() {
            return rows / seconds;
        }

        double bytesPerRow() {
            return (double) addedBytes / rows;
        }

        double gbPerSecond() {
            return (inBytes + outBytes) / seconds / 1e9;
        }
    }

    public static void main(String[] argv) throws Exception {
        String formats = "jsonl,safetensors";
        long jsonlRows = 4L << 20, stRows = 16L << 20;
        int rounds = 3;
        String mode = "drmas", style = "spaced,compact", dtypes = "i32-f32,i64-f64";
        Path work = null, out = null;
        boolean keep = false;
        String[] child = null;
        for (int i = 0; i < argv.length; i++) {
            switch (argv[i]) {
                case "--formats" -> formats = argv[++i];
                case "--jsonl-rows" -> jsonlRows = parseCount(argv[++i]);
                case "--safetensors-rows" -> stRows = parseCount(argv[++i]);
                case "--rounds" -> rounds = Integer.parseInt(argv[++i]);
                case "--mode" -> mode = argv[++i];
                case "--style" -> style = argv[++i];
                case "--dtypes" -> dtypes = argv[++i];
                case "--dir" -> work = Path.of(argv[++i]);
                case "--keep" -> keep = true;
                case "--out" -> out = Path.of(argv[++i]);
                case "--child" -> child = new String[] {argv[++i], argv[++i], argv[++i], argv[++i]};
                case "--help", "-h" -> {
                    System.out.println("""
                            usage: drmas bench-normalize [--formats jsonl,safetensors] [--jsonl-rows 4M] [--safetensors-rows 16M]
                                   [--style spaced,compact] [--dtypes i32-f32,i64-f64,i32-f64,i64-f32] [--mode drmas]
                                   [--rounds 3] [--dir DIR] [--keep] [--out FILE.md]
                            Generates rollout rows (8 rollouts per task, 2-3 agents, 1-3 turns) into DIR (default a new
                            folder under the temporary directory, removed at the end unless --keep), then runs
                            `drmas normalize` on them in --rounds fresh child JVMs per case: rows/s, the resident memory
                            the run added per row (VmHWM over the child's baseline), and for safetensors the traffic
                            (bytes read + written) per second against a memory copy of the same traffic.""");
                    return;
                }
                default -> throw new IllegalArgumentException("unknown option " + argv[i] + " (see --help)");
            }
        }
        if (child != null) {
            runChild(child[0], child[1], child[2], child[3]);
            return;
        }
        boolean tmp = work == null;
        if (tmp) work = Files.createTempDirectory("drmas-normalize-bench");
        Files.createDirectories(work);
        List<Result> results = new ArrayList<>();
        List<String> notes = new ArrayList<>();
        try {
            for (String f : formats.split(",")) {
                switch (f.trim()) {
                    case "jsonl" -> {
                        for (String st : style.split(",")) {
                            boolean spaced = st.equals("spaced");
                            Path in = work.resolve("rows-" + st + ".jsonl"), warm = work.resolve("warm-" + st + ".jsonl");
                            long bytes = writeJsonl(in, jsonlRows, spaced);
                            writeJsonl(warm, Math.min(jsonlRows, 20_000), spaced);
                            notes.add(String.format(Locale.ROOT, "jsonl (%s): %,d rows, %.1f MB, %.1f bytes a row", st, jsonlRows,
                                    bytes / 1e6, (double) bytes / jsonlRows));
                            results.add(runRounds("jsonl " + st, in, warm, work.resolve("out.jsonl"), jsonlRows, mode, rounds));
                        }
                    }
                    case "safetensors" -> {
                        for (String d : dtypes.split(",")) {
                            boolean i64 = d.startsWith("i64"), f64 = d.endsWith("f64");
                            Path in = work.resolve("rows-" + d + ".safetensors"), warm = work.resolve("warm-" + d + ".safetensors");
                            long bytes = writeSafetensors(in, stRows, i64, f64);
                            // 1M rows: over two of the command's chunks, so the warm-up takes the chunked path as the run does
                            writeSafetensors(warm, Math.min(stRows, 1 << 20), i64, f64);
                            notes.add(String.format(Locale.ROOT, "safetensors %s: %,d rows, %.1f MB", d, stRows, bytes / 1e6));
                            results.add(runRounds("safetensors " + d, in, warm, work.resolve("out.safetensors"), stRows, mode, rounds));
                        }
                        results.add(kernelAlone(stRows, mode));
                    }
                    default -> throw new IllegalArgumentException("--formats: '" + f + "' is not jsonl or safetensors");
                }
            }
        } finally {
            if (tmp && !keep) deleteTree(work);
        }
        String report = report(results, notes, mode, rounds);
        System.out.println(report);
        if (out != null) {
            Files.writeString(out, report);
            System.out.println("written to " + out.toAbsolutePath());
        }
    }

    static long parseCount(String s) {
        s = s.trim().toUpperCase(Locale.ROOT);
        long mul = s.endsWith("M") ? 1L << 20 : s.endsWith("K") ? 1L << 10 : 1;
        if (mul != 1) s = s.substring(0, s.length() - 1);
        return Long.parseLong(s) * mul;
    }

    /** {@code rounds} child runs of one case: the median time, the largest memory. */
    static Result runRounds(String label, Path in, Path warm, Path out, long rows, String mode, int rounds)
            throws IOException, InterruptedException {
        List<Result> rs = new ArrayList<>();
        for (int r = 0; r < rounds; r++) {
            Result x = fork(label, in, warm, out, rows, mode);
            System.err.printf(Locale.ROOT, "%s, round %d: %.3f s, %.2f M rows/s, %.1f bytes/row added (baseline %s, peak %s)%n", label,
                    r + 1, x.seconds(), x.rowsPerSecond() / 1e6, x.bytesPerRow(), mib(x.baselineBytes()), mib(x.hwmBytes()));
            rs.add(x);
        }
        double[] secs = rs.stream().mapToDouble(Result::seconds).toArray();
        Result worstMem = rs.stream().max(Comparator.comparingLong(Result::addedBytes)).orElseThrow();
        Result first = rs.getFirst();
        return new Result(label, rows, first.inBytes(), first.outBytes(), BenchSupport.median(secs), worstMem.addedBytes(),
                worstMem.baselineBytes(), worstMem.hwmBytes());
    }

    private static Result fork(String label, Path in, Path warm, Path out, long rows, String mode)
            throws IOException, InterruptedException {
        List<String> cmd = ChildJvm.command(a -> a.startsWith("--enable-native-access") || a.startsWith("-Dorg.bytedeco")
                || a.startsWith("-Ddrmas."));
        cmd.addAll(List.of(NormalizeBench.class.getName(), "--child", in.toString(), warm.toString(), out.toString(), mode));
        String[] f = BenchSupport.childResult(cmd, label + ": the child run");
        return new Result(label, rows, Files.size(in), Long.parseLong(f[5]), Double.parseDouble(f[1]), Long.parseLong(f[2]),
                Long.parseLong(f[3]), Long.parseLong(f[4]));
    }

    /** In the child: one warm-up run on the small file (JIT, libdrmas loaded), the baseline, then the timed run. */
    private static void runChild(String in, String warm, String out, String mode) throws IOException {
        normalize(warm, out, mode);
        Files.deleteIfExists(Path.of(out));
        System.gc();
        PeakMemory peak = PeakMemory.start();
        if (!peak.available()) throw new IllegalStateException("no resident high-water mark here (Linux /proc/self/clear_refs)");
        long t0 = System.nanoTime();
        normalize(in, out, mode);
        double secs = (System.nanoTime() - t0) / 1e9;
        long added = peak.addedBytes(), hwm = peak.peakBytes();
        long outBytes = Files.size(Path.of(out));
        Files.deleteIfExists(Path.of(out));
        System.out.println("RESULT " + secs + " " + added + " " + peak.startBytes() + " " + hwm + " " + outBytes);
    }

    private static void normalize(String in, String out, String mode) {
        StringWriter err = new StringWriter();
        var cl = Main.commandLine();
        cl.setErr(new PrintWriter(err));
        int rc = cl.execute("normalize", "--mode", mode, "-o", out, in);
        if (rc != 0) throw new IllegalStateException("normalize " + in + " failed (" + rc + "): " + err);
    }

    /**
     * The libdrmas kernel alone on the same rows, int32/float32 already in memory, warm, in this
     * JVM (median of 5): what the command's end-to-end figure can at best approach.
     */
    static Result kernelAlone(long n, String mode) throws IOException {
        int rows = Math.toIntExact(n);
        float[] score = new float[rows];
        int[] uid = new int[rows], traj = new int[rows], agent = new int[rows];
        int[] i = {0};
        generate(n, BenchSupport.SEED, (task, rollout, t, a, turn, s) -> {
            uid[i[0]] = task;
            traj[i[0]] = t;
            agent[i[0]] = a;
            score[i[0]++] = (float) (s / 10000.0);
        });
        BenchSupport.configureNativeThreads();
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment s = BenchSupport.offHeap(arena, score), u = BenchSupport.offHeap(arena, uid),
                    t = BenchSupport.offHeap(arena, traj), a = BenchSupport.offHeap(arena, agent), adv = BenchSupport.zeroed(arena, 4L * rows);
            int numUids = uid[rows - 1] + 1, numTrajs = traj[rows - 1] + 1, numAgents = AGENTS.length;
            Kernels.NormParams p = Advantages.params(NormConfig.of(NormMode.parse(mode)));
            double[] secs = new double[6];
            for (int r = 0; r < secs.length; r++) {
                long t0 = System.nanoTime();
                Kernels.advantage(Backend.CPU, p, rows, s, u, t, a, numUids, numTrajs, numAgents, adv, null, null);
                secs[r] = (System.nanoTime() - t0) / 1e9;
            }
            double median = BenchSupport.median(Arrays.copyOfRange(secs, 1, secs.length));
            return new Result("kernel alone (int32/float32 in memory, warm)", n, 16 * n, 4 * n, median, -1, -1, -1);
        }
    }

    // ------------------------------------------------------------------ report

    static String report(List<Result> results, List<String> notes, String mode, int rounds) {
        StringBuilder sb = new StringBuilder();
        sb.append(String.format(Locale.ROOT, "%s · JDK %s · %s %s · %d CPUs · mode %s · median of %d child JVMs%n%n", Instant.now(),
                System.getProperty("java.version"), System.getProperty("os.name"), System.getProperty("os.arch"),
                Runtime.getRuntime().availableProcessors(), mode, rounds));
        for (String n : notes) sb.append("- ").append(n).append('\n');
        sb.append("\nmemory = the child's resident high-water mark (VmHWM) during the run over its resident size before it "
                + "(after a warm-up run on a smaller file; for safetensors, sorted rows are read through small buffers and the whole-file "
                + "path's mapped pages count where it runs). peak RSS: the "
                + "child's whole VmHWM (JVM, libraries, heap).\n\n");
        sb.append("| input | rows | s | M rows/s | MB read | MB written | GB/s (read + written) | copy GB/s | share of copy | memory added | bytes/row | peak RSS |\n");
        sb.append("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
        for (Result r : results) {
            String copy = "", share = "";
            if (r.label().startsWith("safetensors") || r.label().startsWith("kernel")) {
                double c = copyGbPerSecond(r.inBytes() + r.outBytes());
                copy = String.format(Locale.ROOT, "%.2f", c);
                share = String.format(Locale.ROOT, "%.0f%%", 100 * r.gbPerSecond() / c);
            }
            sb.append(String.format(Locale.ROOT, "| %s | %,d | %.3f | %.2f | %.1f | %.1f | %.2f | %s | %s | %s | %s | %s |%n",
                    r.label(), r.rows(), r.seconds(), r.rowsPerSecond() / 1e6, r.inBytes() / 1e6, r.outBytes() / 1e6, r.gbPerSecond(),
                    copy, share, r.addedBytes() < 0 ? "" : mib(r.addedBytes()),
                    r.addedBytes() < 0 ? "" : String.format(Locale.ROOT, "%.1f", r.bytesPerRow()), r.hwmBytes() < 0 ? "" : mib(r.hwmBytes())));
        }
        return sb.toString();
    }

    /** MemorySegment.copy moving {@code traffic} bytes (read + written) on the kernels' 2 threads: the median GB/s of 7. */
    static double copyGbPerSecond(long traffic) {
        try (CopyBaseline c = CopyBaseline.forTraffic(traffic, BenchSupport.threads())) {
            c.run();
            double[] gbs = new double[7];
            for (int i = 0; i < gbs.length; i++) {
                long t0 = System.nanoTime();
                c.run();
                gbs[i] = 2.0 * c.bytesCopied() / ((System.nanoTime() - t0) / 1e9) / 1e9;
            }
            if (c.probe() != 0x5a) throw new IllegalStateException("the copy baseline copied nothing");
            return BenchSupport.median(gbs);
        }
    }

    static String mib(long bytes) {
        return bytes < 0 ? "n/a" : String.format(Locale.ROOT, "%.1f MiB", bytes / (1024.0 * 1024.0));
    }

    private static void deleteTree(Path dir) throws IOException {
        try (Stream<Path> s = Files.walk(dir)) {
            for (Path p : s.sorted(Comparator.reverseOrder()).toList()) Files.deleteIfExists(p);
        }
    }
}

// GenerationBench.java — tokens/s of the in-process rollout engine on a tiny model (4 layers,
// hidden 256, Qwen3 layout, random weights) at several batch sizes, with the KV cache and with
// recomputing the whole sequence at every step, in one process. A bench entry point rather than
// JMH: one measurement is a whole generate call of seconds, repeated a few times.
package dev.drmas.bench;

import dev.drmas.model.CausalLm;
import dev.drmas.model.Family;
import dev.drmas.model.ModelConfig;
import dev.drmas.rollout.Completion;
import dev.drmas.rollout.GenerationConfig;
import dev.drmas.rollout.Generator;
import dev.drmas.rollout.Request;
import dev.drmas.rollout.SamplingParams;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.SplittableRandom;
import org.bytedeco.pytorch.global.torch;

public final class GenerationBench {
    private GenerationBench() {
    }

    record Result(int batch, boolean cache, double seconds, long tokens) {
        double tokensPerSecond() {
            return tokens / seconds;
        }
    }

    public static void main(String[] argv) throws IOException {
        List<Integer> batches = List.of(1, 16, 64), recomputeBatches = List.of(1, 16);
        int newTokens = 128, promptTokens = 32, repeats = 5, threads = 2;
        Path out = null;
        for (int i = 0; i < argv.length; i++) {
            switch (argv[i]) {
                case "--batches" -> batches = ints(argv[++i]);
                case "--recompute-batches" -> recomputeBatches = ints(argv[++i]);
                case "--new-tokens" -> newTokens = Integer.parseInt(argv[++i]);
                case "--prompt-tokens" -> promptTokens = Integer.parseInt(argv[++i]);
                case "--repeats" -> repeats = Integer.parseInt(argv[++i]);
                case "--threads" -> threads = Integer.parseInt(argv[++i]);
                case "--out" -> out = Path.of(argv[++i]);
                case "--help", "-h" -> {
                    System.out.println("""
                            usage: drmas bench-generation [--batches 1,16,64] [--recompute-batches 1,16]
                                   [--new-tokens 128] [--prompt-tokens 32] [--repeats 5] [--threads 2] [--out FILE.md]""");
                    return;
                }
                default -> throw new IllegalArgumentException("unknown option " + argv[i] + " (see --help)");
            }
        }
        torch.set_num_threads(threads);
        // 4 layers, hidden 256, 8 heads of 32 (4 kv heads), SwiGLU 768, a 512-token vocabulary
        ModelConfig cfg = new ModelConfig(Family.QWEN3, 256, 768, 4, 8, 4, 32, 1e-6, 1e6, null, 512, false, false, false,
                promptTokens + newTokens, "float32", null, List.of(), Map.of());
        List<Result> results;
        try (CausalLm model = CausalLm.random(cfg, 7)) {
            results = measure(new Generator(model), batches, recomputeBatches, promptTokens, newTokens, repeats,
                    cfg.vocabSize());
        }
        String report = report(results, promptTokens, newTokens, threads);
        System.out.println(report);
        if (out != null) {
            Files.writeString(out, report);
            System.out.println("written to " + out.toAbsolutePath());
        }
    }

    /**
     * Every batch size in KV-cache mode, and in recompute mode too where {@code recomputeBatches}
     * has it: one warm-up call of each, then rounds of one call per (batch, mode), so that a slow
     * spell of the machine (this VM drifts by tens of percent over minutes) hits every side of
     * the ratios the targets compare (KV cache vs recompute at one batch size, batch 64 vs
     * batch 1); the medians are reported. Recompute at batch ≥ 16 takes ~30 s a call: it gets
     * at most two. Every row generates exactly newTokens.
     */
    static List<Result> measure(Generator g, List<Integer> batches, List<Integer> recomputeBatches, int promptTokens,
                                int newTokens, int repeats, int vocab) {
        GenerationConfig kv = GenerationConfig.greedy(newTokens, Set.of())
                .withSampling(SamplingParams.temperature(1.0), 11).withCache(true);
        GenerationConfig recompute = kv.withCache(false);
        int n = batches.size();
        List<List<Request>> reqs = new ArrayList<>();
        int[] recomputeRepeats = new int[n];
        double[][] tk = new double[n][repeats], tr = new double[n][];
        long[][] tokens = new long[n][2];
        for (int i = 0; i < n; i++) {
            int batch = batches.get(i);
            SplittableRandom rng = new SplittableRandom(batch);
            List<Request> rows = new ArrayList<>();
            for (int r = 0; r < batch; r++) {
                int[] p = new int[promptTokens - (r % 4)];  // a few lengths, so padding is exercised
                for (int j = 0; j < p.length; j++) p[j] = rng.nextInt(vocab);
                rows.add(new Request(p, r));
            }
            reqs.add(rows);
            recomputeRepeats[i] = !recomputeBatches.contains(batch) ? 0 : batch <= 1 ? repeats : Math.min(repeats, 2);
            tr[i] = new double[recomputeRepeats[i]];
            g.generate(rows, kv);
            if (recomputeRepeats[i] > 0) g.generate(rows, recompute);
        }
        for (int round = 0; round < repeats; round++) {
            for (int i = 0; i < n; i++) {
                tk[i][round] = timed(g, reqs.get(i), kv, tokens[i], 0);
                if (round < recomputeRepeats[i]) tr[i][round] = timed(g, reqs.get(i), recompute, tokens[i], 1);
            }
        }
        List<Result> rs = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            rs.add(result(batches.get(i), true, tk[i], tokens[i][0]));
            if (recomputeRepeats[i] > 0) rs.add(result(batches.get(i), false, tr[i], tokens[i][1]));
        }
        return rs;
    }

    private static double timed(Generator g, List<Request> reqs, GenerationConfig gc, long[] tokens, int slot) {
        long t0 = System.nanoTime();
        List<Completion> out = g.generate(reqs, gc);
        double s = (System.nanoTime() - t0) / 1e9;
        tokens[slot] = out.stream().mapToLong(Completion::length).sum();
        return s;
    }

    private static Result result(int batch, boolean cache, double[] t, long tokens) {
        Arrays.sort(t);
        Result r = new Result(batch, cache, t[t.length / 2], tokens);
        System.out.printf("batch %3d %-9s %8.3f s  %9.1f tokens/s%n", batch, cache ? "kv-cache" : "recompute", r.seconds(),
                r.tokensPerSecond());
        return r;
    }

    static String report(List<Result> rs, int promptTokens, int newTokens, int threads) {
        StringBuilder sb = new StringBuilder();
        sb.append(Instant.now()).append(" · JDK ").append(Runtime.version()).append(" · ")
                .append(Runtime.getRuntime().availableProcessors()).append(" CPUs · LibTorch threads ").append(threads)
                .append('\n');
        sb.append("Tiny Qwen3-layout model: 4 layers, hidden 256, 8 heads (4 kv), vocab 512, fp32, CPU. Prompts of ")
                .append(promptTokens - 3).append("–").append(promptTokens).append(" tokens, ").append(newTokens)
                .append(" new tokens per row (sampling at temperature 1, no stop), median of the repeats; the calls of all")
                .append(" rows take turns, round after round.\n\n");
        sb.append("| batch | mode | s/call | tokens/s | vs batch 1 (kv-cache) | kv-cache / recompute |\n");
        sb.append("|---:|---|---:|---:|---:|---:|\n");
        Result base = rs.stream().filter(r -> r.batch() == 1 && r.cache()).findFirst().orElse(null);
        for (Result r : rs) {
            Result cached = rs.stream().filter(x -> x.batch() == r.batch() && x.cache()).findFirst().orElse(null);
            String vs1 = base == null ? "" : String.format("%.1f×", r.tokensPerSecond() / base.tokensPerSecond());
            String speedup = !r.cache() && cached != null ? String.format("%.1f×", cached.tokensPerSecond() / r.tokensPerSecond()) : "";
            sb.append(String.format("| %d | %s | %.3f | %.1f | %s | %s |%n", r.batch(), r.cache() ? "kv-cache" : "recompute",
                    r.seconds(), r.tokensPerSecond(), vs1, speedup));
        }
        return sb.toString();
    }

    private static List<Integer> ints(String csv) {
        return Arrays.stream(csv.split(",")).map(String::trim).filter(s -> !s.isEmpty()).map(Integer::parseInt).toList();
    }
}

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
        int newTokens = 128, promptTokens = 32, repeats = 3, threads = 2;
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
                                   [--new-tokens 128] [--prompt-tokens 32] [--repeats 3] [--threads 2] [--out FILE.md]""");
                    return;
                }
                default -> throw new IllegalArgumentException("unknown option " + argv[i] + " (see --help)");
            }
        }
        torch.set_num_threads(threads);
        // 4 layers, hidden 256, 8 heads of 32 (4 kv heads), SwiGLU 768, a 512-token vocabulary
        ModelConfig cfg = new ModelConfig(Family.QWEN3, 256, 768, 4, 8, 4, 32, 1e-6, 1e6, null, 512, false, false, false,
                promptTokens + newTokens, "float32", null, List.of(), Map.of());
        List<Result> results = new ArrayList<>();
        try (CausalLm model = CausalLm.random(cfg, 7)) {
            Generator g = new Generator(model);
            for (int b : batches) {
                // recompute at batch 16 takes ~30 s a call: two calls there
                int recomputeRepeats = !recomputeBatches.contains(b) ? 0 : b <= 1 ? repeats : Math.min(repeats, 2);
                results.addAll(measure(g, b, promptTokens, newTokens, repeats, recomputeRepeats, cfg.vocabSize()));
            }
        }
        String report = report(results, promptTokens, newTokens, threads);
        System.out.println(report);
        if (out != null) {
            Files.writeString(out, report);
            System.out.println("written to " + out.toAbsolutePath());
        }
    }

    /**
     * The KV-cache mode at one batch size, and the recompute mode too when {@code recomputeRepeats}
     * > 0: one warm-up call of each, then the calls of the two modes alternate (kv, recompute,
     * kv, ...), so that a slow spell of the machine (this VM drifts by tens of percent over
     * minutes) hits both and their ratio stays fair; the medians are reported. Every row
     * generates exactly newTokens.
     */
    static List<Result> measure(Generator g, int batch, int promptTokens, int newTokens, int repeats, int recomputeRepeats,
                                int vocab) {
        SplittableRandom rng = new SplittableRandom(batch);
        List<Request> reqs = new ArrayList<>();
        for (int r = 0; r < batch; r++) {
            int[] p = new int[promptTokens - (r % 4)];  // a few lengths, so padding is exercised
            for (int j = 0; j < p.length; j++) p[j] = rng.nextInt(vocab);
            reqs.add(new Request(p, r));
        }
        GenerationConfig kv = GenerationConfig.greedy(newTokens, Set.of())
                .withSampling(SamplingParams.temperature(1.0), 11).withCache(true);
        GenerationConfig recompute = kv.withCache(false);
        g.generate(reqs, kv);
        if (recomputeRepeats > 0) g.generate(reqs, recompute);
        double[] tk = new double[repeats], tr = new double[recomputeRepeats];
        long[] tokens = new long[2];
        for (int i = 0; i < Math.max(repeats, recomputeRepeats); i++) {
            if (i < repeats) tk[i] = timed(g, reqs, kv, tokens, 0);
            if (i < recomputeRepeats) tr[i] = timed(g, reqs, recompute, tokens, 1);
        }
        List<Result> rs = new ArrayList<>();
        rs.add(result(batch, true, tk, tokens[0]));
        if (recomputeRepeats > 0) rs.add(result(batch, false, tr, tokens[1]));
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
                .append(" new tokens per row (sampling at temperature 1, no stop), median of the repeats; at a batch size")
                .append(" with both modes their calls alternate.\n\n");
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

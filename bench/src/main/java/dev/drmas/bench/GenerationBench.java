// GenerationBench.java — tokens/s of the in-process rollout engine on a tiny model (4 layers,
// hidden 256, Qwen3 layout, random weights) at several batch sizes, with the KV cache and with
// recomputing the whole sequence at every step, in one process, and the machine's limit in the same
// run: the decoding step's matrix products alone (the same shapes through LibTorch into buffers
// made once: no attention, no sampling, no Java between them), so that each configuration's
// tokens/s is also a share of what the products allow. A bench entry point rather than JMH: one
// measurement is a whole generate call of seconds, repeated a few times.
package dev.drmas.bench;

import dev.drmas.model.CausalLm;
import dev.drmas.model.Family;
import dev.drmas.model.ModelConfig;
import dev.drmas.rollout.Completion;
import dev.drmas.rollout.GenerationConfig;
import dev.drmas.rollout.Generator;
import dev.drmas.rollout.Request;
import dev.drmas.rollout.Sampler;
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
import org.bytedeco.javacpp.PointerScope;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.global.torch;

public final class GenerationBench {
    private GenerationBench() {
    }

    /**
     * A configuration's median call; with the KV cache also the median of the same call with one new
     * token (its prefill and one draw), and the medians over the rounds of the two shares of the
     * products limit timed in the same round (NaN: none).
     */
    record Result(int batch, boolean cache, double seconds, long tokens, double prefillSeconds, double share, double stepsShare) {
        double tokensPerSecond() {
            return tokens / seconds;
        }
    }

    /** The decoding step's products alone at one batch size: median seconds for newTokens steps over the rounds, and their FLOPs. */
    record Limit(int batch, double seconds, long tokens, double flops) {
        double tokensPerSecond() {
            return tokens / seconds;
        }
    }

    public static void main(String[] argv) throws IOException {
        List<Integer> batches = List.of(1, 16, 64), recomputeBatches = List.of(1, 16);
        int newTokens = 128, promptTokens = 32, repeats = 5, threads = 2, sharedPrompt = 512, rollouts = 8, mixedNew = 128;
        Path out = null;
        for (int i = 0; i < argv.length; i++) {
            switch (argv[i]) {
                case "--batches" -> batches = ints(argv[++i]);
                case "--recompute-batches" -> recomputeBatches = ints(argv[++i]);
                case "--new-tokens" -> newTokens = Integer.parseInt(argv[++i]);
                case "--prompt-tokens" -> promptTokens = Integer.parseInt(argv[++i]);
                case "--repeats" -> repeats = Integer.parseInt(argv[++i]);
                case "--threads" -> threads = Integer.parseInt(argv[++i]);
                case "--shared-prompt" -> sharedPrompt = Integer.parseInt(argv[++i]);
                case "--rollouts" -> rollouts = Integer.parseInt(argv[++i]);
                case "--mixed-new-tokens" -> mixedNew = Integer.parseInt(argv[++i]);
                case "--out" -> out = Path.of(argv[++i]);
                case "--help", "-h" -> {
                    System.out.println("""
                            usage: drmas bench-generation [--batches 1,16,64] [--recompute-batches 1,16]
                                   [--new-tokens 128] [--prompt-tokens 32] [--repeats 5] [--threads 2] [--out FILE.md]
                                   [--shared-prompt 512] [--rollouts 8] [--mixed-new-tokens 128]   (0 skips that part)""");
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
        List<Limit> limits = new ArrayList<>();
        String attention;
        try (CausalLm model = CausalLm.random(cfg, 7)) {
            results = measure(new Generator(model, 0, Generator.Engine.STATIC), cfg, batches, recomputeBatches, promptTokens, newTokens,
                    repeats, limits);
            attention = stepAb(model, batches.stream().distinct().sorted().toList(), promptTokens, newTokens, repeats, cfg.vocabSize());
        }
        String report = report(results, limits, promptTokens, newTokens, threads) + "\n" + attention;
        // the continuous engine: a task's rollouts sharing one long prompt, and a realistic mix of lengths
        ModelConfig longer = new ModelConfig(Family.QWEN3, 256, 768, 4, 8, 4, 32, 1e-6, 1e6, null, 512, false, false, false,
                Math.max(sharedPrompt + 1, 64 + mixedNew), "float32", null, List.of(), Map.of());
        try (CausalLm model = CausalLm.random(longer, 7)) {
            // 0 skips a part (a run of the decoding figures alone)
            if (sharedPrompt > 0) report += "\n" + sharedPrefix(model, sharedPrompt, rollouts, repeats);
            if (mixedNew > 0) report += "\n" + mixedLengths(model, rollouts, mixedNew, repeats);
        }
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
     * batch 1); the medians are reported. The products limit of each batch size is timed in the
     * same rounds, right after its calls, and each share is the median over the rounds of that
     * round's ratio: timed in a block of its own, the limit moved by up to 2x against the calls
     * (bench/README.md). Recompute at batch ≥ 16 takes ~30 s a call: it gets at most two. Every
     * row generates exactly newTokens. The limits found are added to {@code limits}.
     */
    static List<Result> measure(Generator g, ModelConfig cfg, List<Integer> batches, List<Integer> recomputeBatches, int promptTokens,
                                int newTokens, int repeats, List<Limit> limits) {
        int vocab = cfg.vocabSize();
        GenerationConfig kv = GenerationConfig.greedy(newTokens, Set.of())
                .withSampling(SamplingParams.temperature(1.0), 11).withCache(true);
        GenerationConfig recompute = kv.withCache(false);
        GenerationConfig first = GenerationConfig.greedy(1, Set.of()).withSampling(SamplingParams.temperature(1.0), 11).withCache(true);
        int n = batches.size();
        List<List<Request>> reqs = new ArrayList<>();
        int[] recomputeRepeats = new int[n];
        double[][] tk = new double[n][repeats], tr = new double[n][], tp = new double[n][repeats], tl = new double[n][repeats];
        long[][] tokens = new long[n][3];
        try (PointerScope scope = new PointerScope()) {
            Products[] products = new Products[n];
            for (int i = 0; i < n; i++) {
                int batch = batches.get(i);
                List<Request> rows = prompts(batch, promptTokens, vocab);
                reqs.add(rows);
                recomputeRepeats[i] = !recomputeBatches.contains(batch) ? 0 : batch <= 1 ? repeats : Math.min(repeats, 2);
                tr[i] = new double[recomputeRepeats[i]];
                products[i] = new Products(cfg, batch);
                g.generate(rows, kv);
                if (recomputeRepeats[i] > 0) g.generate(rows, recompute);
                products[i].seconds(newTokens);
            }
            for (int round = 0; round < repeats; round++) {
                for (int i = 0; i < n; i++) {
                    tk[i][round] = timed(g, reqs.get(i), kv, tokens[i], 0);
                    tp[i][round] = timed(g, reqs.get(i), first, tokens[i], 2);
                    tl[i][round] = products[i].seconds(newTokens);
                    if (round < recomputeRepeats[i]) tr[i][round] = timed(g, reqs.get(i), recompute, tokens[i], 1);
                }
            }
            for (int i = 0; i < n; i++) {
                Limit lim = new Limit(batches.get(i), BenchSupport.median(tl[i]), (long) batches.get(i) * newTokens,
                        products[i].flops * newTokens);
                System.out.printf("batch %3d products  %8.3f s  %9.1f tokens/s  %6.1f GFLOP/s%n", lim.batch(), lim.seconds(),
                        lim.tokensPerSecond(), lim.flops() / lim.seconds() / 1e9);
                limits.add(lim);
            }
        }
        List<Result> rs = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            // per round: the products' time over the call's (the same tokens), and over its decoding steps alone
            double[] share = new double[repeats], steps = new double[repeats];
            for (int r = 0; r < repeats; r++) {
                share[r] = tl[i][r] / tk[i][r];
                steps[r] = tl[i][r] * (newTokens - 1) / newTokens / (tk[i][r] - tp[i][r]);
            }
            rs.add(result(batches.get(i), true, tk[i], tokens[i][0], BenchSupport.median(tp[i]), BenchSupport.median(share),
                    BenchSupport.median(steps)));
            if (recomputeRepeats[i] > 0) rs.add(result(batches.get(i), false, tr[i], tokens[i][1], 0, Double.NaN, Double.NaN));
        }
        return rs;
    }

    /**
     * The products one decoding step of {@code batch} rows makes, per layer q, k, v, o, gate, up,
     * down and then the LM head, as the engine calls them: one row by matrix-vector products with
     * the [out, in] weight (mv), more rows by matrix products with its transposed view (mm), into
     * outputs made once. Random values of the model's shapes, made in the caller's PointerScope.
     */
    static final class Products {
        final int batch;
        final Tensor[] w, x, out;
        final double flops;  // of one step

        Products(ModelConfig c, int batch) {
            this.batch = batch;
            long h = c.hiddenSize(), q = (long) c.numHeads() * c.headDim(), kv = (long) c.numKvHeads() * c.headDim();
            long inter = c.intermediateSize();
            List<long[]> shapes = new ArrayList<>();  // {out, in}
            for (int l = 0; l < c.numLayers(); l++) {
                shapes.addAll(List.of(new long[] {q, h}, new long[] {kv, h}, new long[] {kv, h}, new long[] {h, q},
                        new long[] {inter, h}, new long[] {inter, h}, new long[] {h, inter}));
            }
            shapes.add(new long[] {c.vocabSize(), h});
            int k = shapes.size();
            w = new Tensor[k];
            x = new Tensor[k];
            out = new Tensor[k];
            double f = 0;
            for (int i = 0; i < k; i++) {
                long o = shapes.get(i)[0], in = shapes.get(i)[1];
                w[i] = torch.randn(o, in);
                if (batch > 1) w[i] = w[i].t();  // the engine's pre-transposed view (Layer.qT, ...)
                x[i] = batch > 1 ? torch.randn(batch, in) : torch.randn(in);
                out[i] = batch > 1 ? torch.zeros(batch, o) : torch.zeros(o);
                f += 2.0 * batch * o * in;
            }
            flops = f;
        }

        /** Seconds for {@code steps} steps' products. */
        double seconds(int steps) {
            long t0 = System.nanoTime();
            for (int step = 0; step < steps; step++) {
                for (int i = 0; i < w.length; i++) {
                    if (batch > 1) torch.mm_out(out[i], x[i], w[i]);
                    else torch.mv_out(out[i], w[i], x[i]);
                }
            }
            return (System.nanoTime() - t0) / 1e9;
        }
    }

    /**
     * Median seconds of each of {@code works}: one warm-up run of each, then {@code repeats}
     * rounds in which each runs once in turn, so that a slow spell of the machine hits them all.
     */
    static double[] interleaved(int repeats, Runnable... works) {
        for (Runnable w : works) w.run();
        double[][] t = new double[works.length][repeats];
        for (int i = 0; i < repeats; i++) {
            for (int w = 0; w < works.length; w++) {
                long t0 = System.nanoTime();
                works[w].run();
                t[w][i] = (System.nanoTime() - t0) / 1e9;
            }
        }
        double[] out = new double[works.length];
        for (int w = 0; w < works.length; w++) out[w] = BenchSupport.median(t[w]);
        return out;
    }

    /** {@code batch} random prompts of promptTokens − (r mod 4) tokens (a few lengths, so padding is exercised), seeded by the batch size. */
    static List<Request> prompts(int batch, int promptTokens, int vocab) {
        SplittableRandom rng = new SplittableRandom(batch);
        List<Request> rows = new ArrayList<>();
        for (int r = 0; r < batch; r++) {
            int[] p = new int[promptTokens - (r % 4)];
            for (int j = 0; j < p.length; j++) p[j] = rng.nextInt(vocab);
            rows.add(new Request(p, r));
        }
        return rows;
    }

    /**
     * The decoding step in libdrmas (the default: residual and RMSNorm, attention, SwiGLU and the
     * sampler in native calls between LibTorch's products) against LibTorch's ops for all of it,
     * the same calls at the largest batch and at batch 1 taking turns; the tokens must be the same.
     */
    static String stepAb(CausalLm model, List<Integer> batches, int promptTokens, int newTokens, int repeats, int vocab) {
        GenerationConfig kv = GenerationConfig.greedy(newTokens, Set.of()).withSampling(SamplingParams.temperature(1.0), 11).withCache(true);
        Generator g = new Generator(model, 0, Generator.Engine.STATIC);
        StringBuilder sb = new StringBuilder(String.format("""
                The decoding step in libdrmas (the default: residual and RMSNorm, attention, SwiGLU, sampling) against LibTorch's \
                ops for all of it (static engine, %d new tokens a row), median of %d interleaved rounds:

                | batch | libdrmas s/call | LibTorch s/call | LibTorch / libdrmas | same tokens |
                |---:|---:|---:|---:|---|
                """, newTokens, repeats));
        for (int batch : batches) {
            List<Request> rows = prompts(batch, promptTokens, vocab);
            Runnable nat = () -> {
                model.decodeNative(true);
                Sampler.useNative(true);
                g.generate(rows, kv);
            }, lib = () -> {
                model.decodeNative(false);
                Sampler.useNative(false);
                g.generate(rows, kv);
            };
            double[] t = interleaved(repeats, nat, lib);
            model.decodeNative(false);
            Sampler.useNative(false);
            List<Completion> torchTokens = g.generate(rows, kv);
            model.decodeNative(true);
            Sampler.useNative(true);
            boolean same = sameTokens(g.generate(rows, kv), torchTokens);
            System.out.printf("batch %3d step: libdrmas %.3f s, LibTorch %.3f s (%.2fx), same tokens %s%n", batch, t[0], t[1], t[1] / t[0], same);
            sb.append(String.format("| %d | %.3f | %.3f | %.2f× | %s |%n", batch, t[0], t[1], t[1] / t[0], same ? "yes" : "NO"));
        }
        return sb.toString();
    }

    /**
     * The prefill of one task's {@code n} rollouts of one {@code prompt}-token prompt (one new
     * token each: the call is its prefill and one draw): the continuous engine, which prefills
     * the prompt once and copies its keys and values to the rows, against the static engine's
     * batched prefill of the n rows and against n separate one-row prefills.
     */
    static String sharedPrefix(CausalLm model, int prompt, int n, int repeats) {
        SplittableRandom rng = new SplittableRandom(17);
        int[] p = new int[prompt];
        for (int j = 0; j < prompt; j++) p[j] = rng.nextInt(model.config().vocabSize());
        List<Request> group = new ArrayList<>();
        for (int r = 0; r < n; r++) group.add(new Request(p, r));
        GenerationConfig one = GenerationConfig.greedy(1, Set.of()).withSampling(SamplingParams.temperature(1.0), 3);
        Generator continuous = new Generator(model, 0, Generator.Engine.CONTINUOUS);
        Generator batched = new Generator(model, 0, Generator.Engine.STATIC);
        double[] t = interleaved(repeats, () -> continuous.generate(group, one), () -> batched.generate(group, one), () -> {
            for (Request r : group) batched.generate(List.of(r), one);
        });
        double shared = t[0], together = t[1], separate = t[2];
        if (!sameTokens(continuous.generate(group, one), batched.generate(group, one))) throw new IllegalStateException("tokens differ");
        System.out.printf("prefill of %d × %d: shared %.4f s, static batch %.4f s, %d separate %.4f s%n", n, prompt, shared, together, n,
                separate);
        return String.format("""
                Shared prompt: the prefill of one task's %d rollouts of a %d-token prompt (one new token each), median of %d interleaved rounds:

                | engine | s | vs %d separate prefills | vs the static batch |
                |---|---:|---:|---:|
                | continuous (the prompt once, its keys and values copied to the rows) | %.4f | %.2f× | %.2f× |
                | static (one batched prefill of the %d rows) | %.4f | %.2f× | 1.00× |
                | %d separate one-row prefills | %.4f | 1.00× | |
                """, n, prompt, repeats, n, shared, shared / separate, shared / together, n, together, together / separate, n, separate);
    }

    /**
     * A realistic mix of response lengths: 8 tasks × n rollouts, prompts of 32–63 tokens shared
     * within a task, sampling at temperature 1 with 32 of the 512 ids as stop tokens (so that
     * lengths run from a token to the budget, most short: the workflows' verdicts against their
     * answers); the static engine against the continuous one, wall time and tokens/s, same tokens.
     */
    static String mixedLengths(CausalLm model, int n, int maxNew, int repeats) {
        SplittableRandom rng = new SplittableRandom(23);
        List<Request> reqs = new ArrayList<>();
        for (int t = 0; t < 8; t++) {
            int[] p = new int[32 + rng.nextInt(32)];
            for (int j = 0; j < p.length; j++) p[j] = rng.nextInt(model.config().vocabSize());
            for (int r = 0; r < n; r++) reqs.add(new Request(p, 100L * t + r));
        }
        Set<Integer> stops = new java.util.HashSet<>();
        for (int id = 0; id < 512; id += 16) stops.add(id);
        GenerationConfig gc = new GenerationConfig(SamplingParams.temperature(1.0), maxNew, stops, List.of(), null, 29, true, 0);
        Generator st = new Generator(model, 0, Generator.Engine.STATIC);
        Generator co = new Generator(model, 0, Generator.Engine.CONTINUOUS);
        List<Completion> a = st.generate(reqs, gc), b = co.generate(reqs, gc);
        if (!sameTokens(a, b)) throw new IllegalStateException("the engines' tokens differ");
        int[] lengths = a.stream().mapToInt(Completion::length).sorted().toArray();
        long tokens = Arrays.stream(lengths).sum();
        double[] t = interleaved(repeats, () -> st.generate(reqs, gc), () -> co.generate(reqs, gc));
        double s = t[0], c = t[1];
        System.out.printf("mixed lengths: static %.3f s, continuous %.3f s (%d tokens)%n", s, c, tokens);
        return String.format("""
                Mixed lengths: 8 tasks × %d rollouts (prompts of 32–63 tokens, shared within a task), up to %d new tokens, 32 stop
                ids of 512: responses of %d to %d tokens (median %d; %d in all), one call, median of %d; same tokens from both engines:

                | engine | s/call | tokens/s | static / continuous |
                |---|---:|---:|---:|
                | static | %.3f | %.1f | |
                | continuous | %.3f | %.1f | %.2f× |
                """, n, maxNew, lengths[0], lengths[lengths.length - 1], lengths[lengths.length / 2], tokens, repeats, s, tokens / s, c,
                tokens / c, s / c);
    }

    static boolean sameTokens(List<Completion> a, List<Completion> b) {
        if (a.size() != b.size()) return false;
        for (int i = 0; i < a.size(); i++) if (!Arrays.equals(a.get(i).tokens(), b.get(i).tokens())) return false;
        return true;
    }

    private static double timed(Generator g, List<Request> reqs, GenerationConfig gc, long[] tokens, int slot) {
        long t0 = System.nanoTime();
        List<Completion> out = g.generate(reqs, gc);
        double s = (System.nanoTime() - t0) / 1e9;
        tokens[slot] = out.stream().mapToLong(Completion::length).sum();
        return s;
    }

    private static Result result(int batch, boolean cache, double[] t, long tokens, double prefill, double share, double stepsShare) {
        Arrays.sort(t);
        Result r = new Result(batch, cache, t[t.length / 2], tokens, prefill, share, stepsShare);
        System.out.printf("batch %3d %-9s %8.3f s  %9.1f tokens/s%n", batch, cache ? "kv-cache" : "recompute", r.seconds(),
                r.tokensPerSecond());
        return r;
    }

    static String report(List<Result> rs, List<Limit> limits, int promptTokens, int newTokens, int threads) {
        StringBuilder sb = new StringBuilder();
        sb.append(Instant.now()).append(" · JDK ").append(Runtime.version()).append(" · ")
                .append(Runtime.getRuntime().availableProcessors()).append(" CPUs · LibTorch threads ").append(threads)
                .append('\n');
        sb.append("Tiny Qwen3-layout model: 4 layers, hidden 256, 8 heads (4 kv), vocab 512, fp32, CPU. Prompts of ")
                .append(promptTokens - 3).append("–").append(promptTokens).append(" tokens, ").append(newTokens)
                .append(" new tokens per row (sampling at temperature 1, no stop), median of the repeats; the calls of all")
                .append(" rows take turns, round after round.\n\n");
        sb.append("| batch | mode | s/call | tokens/s | vs batch 1 (kv-cache) | kv-cache / recompute | share of the products limit |")
                .append(" decoding steps only: s, share |\n");
        sb.append("|---:|---|---:|---:|---:|---:|---:|---:|\n");
        Result base = rs.stream().filter(r -> r.batch() == 1 && r.cache()).findFirst().orElse(null);
        for (Result r : rs) {
            Result cached = rs.stream().filter(x -> x.batch() == r.batch() && x.cache()).findFirst().orElse(null);
            String vs1 = base == null ? "" : String.format("%.1f×", r.tokensPerSecond() / base.tokensPerSecond());
            String speedup = !r.cache() && cached != null ? String.format("%.1f×", cached.tokensPerSecond() / r.tokensPerSecond()) : "";
            String share = r.cache() && !Double.isNaN(r.share()) ? String.format("%.0f%%", 100 * r.share()) : "";
            // the call less its prefill and first draw (a call of one new token): its newTokens - 1 decoding steps
            String steps = r.cache() && !Double.isNaN(r.stepsShare())
                    ? String.format("%.3f s, %.0f%%", r.seconds() - r.prefillSeconds(), 100 * r.stepsShare()) : "";
            sb.append(String.format("| %d | %s | %.3f | %.1f | %s | %s | %s | %s |%n", r.batch(), r.cache() ? "kv-cache" : "recompute",
                    r.seconds(), r.tokensPerSecond(), vs1, speedup, share, steps));
        }
        sb.append("\nShare of the products limit: the call's tokens/s (its prefill included) over the products' alone; decoding")
                .append(" steps only: the call less a call of one new token (the prefill and first draw), against the products of")
                .append(" as many steps. Each is the median over the rounds of the ratio within a round (the products are timed in")
                .append(" the same round, after the calls).\n");
        sb.append("\nThe limit: the decoding step's matrix products alone (per layer q, k, v, o, gate, up, down, then the LM head;")
                .append(" mv for one row, mm with the transposed weight view for more, as the engine calls them, into buffers made once), ")
                .append(newTokens).append(" steps, median of the rounds:\n\n");
        sb.append("| batch | products s | tokens/s | GFLOP/s |\n|---:|---:|---:|---:|\n");
        for (Limit l : limits) {
            sb.append(String.format("| %d | %.3f | %.1f | %.1f |%n", l.batch(), l.seconds(), l.tokensPerSecond(), l.flops() / l.seconds() / 1e9));
        }
        return sb.toString();
    }

    private static List<Integer> ints(String csv) {
        return Arrays.stream(csv.split(",")).map(String::trim).filter(s -> !s.isEmpty()).map(Integer::parseInt).toList();
    }
}

// TrainStepBench.java — peak memory and time of one training micro-batch step (the trainer's own
// path: TeacherForcing's forward with entropy, the native clipped loss, backward) of an 8-layer
// model on 2048-token rows, with and without activation checkpointing (models.<id>.
// activation_checkpointing). Each configuration runs in a fresh child JVM, so that neither
// inherits the other's allocator caches: the peak is the resident high-water mark over a baseline
// taken after a short warm-up step (thread pools, BLAS buffers and gradient buffers exist by then).
package dev.drmas.bench;

import dev.drmas.algo.ClippedLoss;
import dev.drmas.cli.ChildJvm;
import dev.drmas.algo.LossConfig;
import dev.drmas.metrics.PeakMemory;
import dev.drmas.model.CausalLm;
import dev.drmas.model.Family;
import dev.drmas.model.ModelConfig;
import dev.drmas.model.Tensors;
import dev.drmas.rollout.TeacherForcing;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.SplittableRandom;
import org.bytedeco.javacpp.PointerScope;
import org.bytedeco.pytorch.Scalar;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.global.torch;

public final class TrainStepBench {
    private TrainStepBench() {
    }

    /** The shape of the run; every child gets the same. */
    record Shape(int layers, int hidden, int intermediate, int heads, int kvHeads, int vocab, int rows, int promptTokens,
                 int responseTokens, int steps, int threads) {
        ModelConfig model() {
            return new ModelConfig(Family.QWEN3, hidden, intermediate, layers, heads, kvHeads, hidden / heads, 1e-6, 1e6, null,
                    vocab, false, false, false, promptTokens + responseTokens, "float32", null, List.of(), Map.of());
        }

        List<String> args() {
            return List.of("--layers", "" + layers, "--hidden", "" + hidden, "--intermediate", "" + intermediate, "--heads",
                    "" + heads, "--kv-heads", "" + kvHeads, "--vocab", "" + vocab, "--rows", "" + rows, "--prompt-tokens",
                    "" + promptTokens, "--response-tokens", "" + responseTokens, "--steps", "" + steps, "--threads", "" + threads);
        }
    }

    /** One child's figures: peak bytes over its baseline, seconds of each step, and what the steps computed. */
    record Result(boolean checkpointing, long peakBytes, long baselineBytes, double[] seconds, double loss, double gradNorm) {
        double medianSeconds() {
            return BenchSupport.median(seconds);
        }
    }

    public static void main(String[] argv) throws Exception {
        // hidden 256 and vocab 4096 keep the proportions of Qwen3-4B's training step: per token, the
        // activations the layers keep are ~4.5x the [N, V] tensors of the LM head, log-softmax and
        // entropy (bench/README.md, "Training step")
        int layers = 8, hidden = 256, intermediate = 768, heads = 8, kvHeads = 4, vocab = 4096, rows = 2, prompt = 512,
                response = 1536, steps = 2, threads = 2, rounds = 1;
        String child = null;
        Path out = null;
        for (int i = 0; i < argv.length; i++) {
            switch (argv[i]) {
                case "--layers" -> layers = Integer.parseInt(argv[++i]);
                case "--hidden" -> hidden = Integer.parseInt(argv[++i]);
                case "--intermediate" -> intermediate = Integer.parseInt(argv[++i]);
                case "--heads" -> heads = Integer.parseInt(argv[++i]);
                case "--kv-heads" -> kvHeads = Integer.parseInt(argv[++i]);
                case "--vocab" -> vocab = Integer.parseInt(argv[++i]);
                case "--rows" -> rows = Integer.parseInt(argv[++i]);
                case "--prompt-tokens" -> prompt = Integer.parseInt(argv[++i]);
                case "--response-tokens" -> response = Integer.parseInt(argv[++i]);
                case "--steps" -> steps = Integer.parseInt(argv[++i]);
                case "--rounds" -> rounds = Integer.parseInt(argv[++i]);
                case "--threads" -> threads = Integer.parseInt(argv[++i]);
                case "--out" -> out = Path.of(argv[++i]);
                case "--child" -> child = argv[++i];
                case "--help", "-h" -> {
                    System.out.println("""
                            usage: drmas bench-step [--layers 8] [--hidden 256] [--intermediate 768] [--heads 8] [--kv-heads 4]
                                   [--vocab 4096] [--rows 2] [--prompt-tokens 512] [--response-tokens 1536] [--steps 2]
                                   [--rounds 1] [--threads 2] [--out FILE.md]
                            One training micro-batch step (forward, clipped loss with entropy, backward) of --rows rows of
                            prompt + response tokens, with and without activation checkpointing, each configuration in
                            --rounds fresh child JVMs of --steps steps (alternating, so a slow spell of the machine hits both).""");
                    return;
                }
                default -> throw new IllegalArgumentException("unknown option " + argv[i] + " (see --help)");
            }
        }
        Shape shape = new Shape(layers, hidden, intermediate, heads, kvHeads, vocab, rows, prompt, response, steps, threads);
        if (child != null) {
            Result r = measure(shape, switch (child) {
                case "on" -> true;
                case "off" -> false;
                default -> throw new IllegalArgumentException("--child takes on or off, got " + child);
            });
            System.out.println("RESULT " + r.checkpointing() + " " + r.peakBytes() + " " + r.baselineBytes() + " " + r.loss() + " "
                    + r.gradNorm() + " " + String.join(",", Arrays.stream(r.seconds()).mapToObj(Double::toString).toList()));
            return;
        }
        List<Result> results = new ArrayList<>();
        for (int round = 0; round < rounds; round++) {
            // alternate which goes first
            for (boolean on : round % 2 == 0 ? new boolean[] {false, true} : new boolean[] {true, false}) {
                Result r = fork(shape, on);
                System.err.printf(Locale.ROOT, "round %d, checkpointing %-3s: peak %s over a baseline of %s, steps %s s%n", round + 1,
                        on ? "on" : "off", mib(r.peakBytes()), mib(r.baselineBytes()), Arrays.toString(r.seconds()));
                results.add(r);
            }
        }
        String report = report(shape, results);
        System.out.println(report);
        if (out != null) {
            Files.writeString(out, report);
            System.out.println("written to " + out.toAbsolutePath());
        }
    }

    /** Runs one configuration in a child JVM with this one's class path and native-access options. */
    private static Result fork(Shape shape, boolean on) throws IOException, InterruptedException {
        List<String> cmd = ChildJvm.command(a -> a.startsWith("--enable-native-access") || a.startsWith("-Dorg.bytedeco")
                || a.startsWith("-Ddrmas."));
        // a heap that is resident from the start, so that its growth is not counted as the step's
        cmd.addAll(List.of("-Xms256m", "-Xmx256m", "-XX:+AlwaysPreTouch", TrainStepBench.class.getName(), "--child", on ? "on" : "off"));
        cmd.addAll(shape.args());
        String[] f = BenchSupport.childResult(cmd, "the child run (checkpointing " + on + ")");
        double[] secs = Arrays.stream(f[6].split(",")).mapToDouble(Double::parseDouble).toArray();
        return new Result(Boolean.parseBoolean(f[1]), Long.parseLong(f[2]), Long.parseLong(f[3]), secs, Double.parseDouble(f[4]),
                Double.parseDouble(f[5]));
    }

    /** In this process: a warm-up step on short rows, the baseline, then the steps. */
    static Result measure(Shape shape, boolean on) {
        torch.set_num_threads(shape.threads());
        try (CausalLm model = CausalLm.random(shape.model(), 7)) {
            model.setRequiresGrad(true);
            model.setActivationCheckpointing(on);
            SplittableRandom rng = new SplittableRandom(20250101L);
            List<int[]> prompts = new ArrayList<>(), responses = new ArrayList<>();
            for (int r = 0; r < shape.rows(); r++) {
                prompts.add(tokens(rng, shape.promptTokens(), shape.vocab()));
                responses.add(tokens(rng, shape.responseTokens(), shape.vocab()));
            }
            List<int[]> shortPrompts = List.of(tokens(rng, 16, shape.vocab())), shortResponses = List.of(tokens(rng, 48, shape.vocab()));
            step(model, shortPrompts, shortResponses);
            zeroGrad(model);
            System.gc();
            PeakMemory peak = PeakMemory.start();
            double[] secs = new double[shape.steps()];
            double[] last = null;
            for (int s = 0; s < shape.steps(); s++) {
                long t0 = System.nanoTime();
                double loss = step(model, prompts, responses);
                secs[s] = (System.nanoTime() - t0) / 1e9;
                last = new double[] {loss, gradNorm(model)};
                zeroGrad(model);
            }
            if (!peak.available()) throw new IllegalStateException("no resident high-water mark here (Linux /proc/self/clear_refs)");
            return new Result(on, peak.addedBytes(), peak.startBytes(), secs, last[0], last[1]);
        }
    }

    /** The trainer's micro-batch step (PpoUpdater.microBatch): forward with entropy, native clipped loss, backward. */
    static double step(CausalLm model, List<int[]> prompts, List<int[]> responses) {
        try (PointerScope scope = new PointerScope()) {
            TeacherForcing.Result tf = TeacherForcing.logProbs(model, prompts, responses, 1.0, true);
            long[] off = tf.offsets();
            int n = (int) off[off.length - 1];
            float[] shift = new float[n], adv = new float[n];
            SplittableRandom rng = new SplittableRandom(3);
            for (int i = 0; i < n; i++) {
                shift[i] = (float) (rng.nextDouble() * 0.4 - 0.2);
                adv[i] = (float) (rng.nextDouble() * 2 - 1);
            }
            Tensor logp = tf.logprobs();
            Tensor old = logp.detach().add(Tensors.floats(shift));
            ClippedLoss.DeviceResult r = ClippedLoss.computeOnDevice(LossConfig.defaults(), n, off, Tensors.longs(off),
                    logp.detach().contiguous(), old, Tensors.floats(adv), null, null);
            Tensor surrogate = logp.mul(r.grad()).sum().sub(tf.entropy().sum().mul(new Scalar(1e-3 / n)));
            surrogate.backward();
            tf.finishBackward();
            double[] sums = new double[(int) r.sums().numel()];
            r.sums().data_ptr_double().get(sums);
            return sums[dev.drmas.bindings.AbiIndices.LOSS_PG_LOSS];
        }
    }

    private static double gradNorm(CausalLm model) {
        double sq = 0;
        try (PointerScope scope = new PointerScope()) {
            for (Tensor p : model.parameters().values()) {
                Tensor g = p.grad();
                if (g.defined()) sq += g.to(org.bytedeco.pytorch.global.torch.ScalarType.Double).pow(new Scalar(2.0)).sum().item_double();
            }
        }
        return Math.sqrt(sq);
    }

    /** As AdamW.zeroGrad: the gradient buffers stay (the trainer keeps them between steps). */
    private static void zeroGrad(CausalLm model) {
        try (PointerScope scope = new PointerScope()) {
            for (Tensor p : model.parameters().values()) {
                Tensor g = p.grad();
                if (g.defined()) g.detach_().zero_();
            }
        }
    }

    private static int[] tokens(SplittableRandom rng, int n, int vocab) {
        int[] t = new int[n];
        for (int i = 0; i < n; i++) t[i] = rng.nextInt(vocab);
        return t;
    }

    static String report(Shape s, List<Result> results) {
        Map<Boolean, List<Result>> by = new LinkedHashMap<>();
        for (Result r : results) by.computeIfAbsent(r.checkpointing(), k -> new ArrayList<>()).add(r);
        List<Result> off = by.get(false), on = by.get(true);
        // the same computation: the loss exactly, the gradient norm to summation order
        for (Result r : on) {
            if (r.loss() != off.get(0).loss() || Math.abs(r.gradNorm() - off.get(0).gradNorm()) > 1e-4 * off.get(0).gradNorm()) {
                throw new IllegalStateException("checkpointing changed the step: loss " + r.loss() + " vs " + off.get(0).loss()
                        + ", gradient norm " + r.gradNorm() + " vs " + off.get(0).gradNorm());
            }
        }
        long peakOff = off.stream().mapToLong(Result::peakBytes).max().orElseThrow();
        long peakOn = on.stream().mapToLong(Result::peakBytes).max().orElseThrow();
        double timeOff = off.stream().mapToDouble(Result::medianSeconds).min().orElseThrow();
        double timeOn = on.stream().mapToDouble(Result::medianSeconds).min().orElseThrow();
        long tokens = (long) s.rows() * (s.promptTokens() + s.responseTokens());
        long n = (long) s.rows() * s.responseTokens();
        StringBuilder b = new StringBuilder();
        b.append(String.format(Locale.ROOT, "%s · JDK %s · %d CPUs · threads %d%n", Instant.now(), Runtime.version(),
                Runtime.getRuntime().availableProcessors(), s.threads()));
        b.append(String.format(Locale.ROOT, "Qwen3 layout, %d layers, hidden %d (%d heads, %d kv heads), SwiGLU %d, vocab %d, untied; "
                        + "%d rows of %d prompt + %d response tokens (%d tokens, %d through the LM head)%n",
                s.layers(), s.hidden(), s.heads(), s.kvHeads(), s.intermediate(), s.vocab(), s.rows(), s.promptTokens(),
                s.responseTokens(), tokens, n));
        b.append(String.format(Locale.ROOT, "the [N, V] logits: %s per float32 tensor; saved layer inputs with checkpointing: %s%n",
                mib(4L * n * s.vocab()), mib(4L * tokens * s.hidden() * s.layers())));
        b.append(String.format(Locale.ROOT, "each configuration in %d fresh JVMs of %d steps; peak = resident high-water mark over the "
                + "baseline after a warm-up step (largest of the JVMs); time = median step (smallest of the JVMs)%n%n", off.size(), s.steps()));
        b.append("| activation checkpointing | peak over baseline | step time | peak / without | time / without |\n");
        b.append("|---|---:|---:|---:|---:|\n");
        b.append(String.format(Locale.ROOT, "| off | %s | %.2f s | 1.00 | 1.00 |%n", mib(peakOff), timeOff));
        b.append(String.format(Locale.ROOT, "| on | %s | %.2f s | %.2f | %.2f |%n", mib(peakOn), timeOn, (double) peakOn / peakOff,
                timeOn / timeOff));
        b.append(String.format(Locale.ROOT, "%nloss %.6g and gradient norm %.6g, the same with and without%n", off.get(0).loss(),
                off.get(0).gradNorm()));
        return b.toString();
    }

    private static String mib(long bytes) {
        return String.format(Locale.ROOT, "%.0f MiB", bytes / (1024.0 * 1024.0));
    }
}

// ClippedLossBench.java — times the fused clipped PPO loss, forward + backward, at 64K–16M tokens
// (rows of 1–512 tokens, 10% masked, token-mean): native CPU kernel vs LibTorch autograd, plain Java
// and a memory copy of the kernel's minimal traffic (17 B/token), to show where the native kernel stands.
package dev.drmas.bench;

import dev.drmas.algo.ClippedLoss;
import dev.drmas.algo.KlEstimator;
import dev.drmas.algo.LossConfig;
import dev.drmas.algo.ReferenceKernels;
import dev.drmas.algo.TorchReference;
import dev.drmas.bindings.AbiIndices;
import dev.drmas.bindings.Backend;
import dev.drmas.bindings.Kernels;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.Random;
import java.util.concurrent.TimeUnit;
import org.bytedeco.javacpp.PointerScope;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.global.torch;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.TearDown;

@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.MILLISECONDS)
public class ClippedLossBench {
    /** Bytes the kernel must minimally read and write per token (row offsets are negligible). */
    public static final int READ_BYTES_PER_TOKEN = 13, WRITE_BYTES_PER_TOKEN = 4;
    public static final int BYTES_PER_TOKEN = READ_BYTES_PER_TOKEN + WRITE_BYTES_PER_TOKEN;
    /**
     * The per-row form's traffic: the same without the per-token advantage (its row offsets and
     * advantages, 12 B a row of 256 tokens on average, are ~0.05 B/token).
     */
    public static final int ROWS_BYTES_PER_TOKEN = BYTES_PER_TOKEN - 4;
    static final LossConfig CONFIG = LossConfig.defaults();

    // ------------------------------------------------------------------ inputs

    /**
     * Rows of uniform random length in [1, 512] tokens (the last one cut to make exactly n), 10%
     * of tokens masked at random. logp = −|N(0, 1.5²)| (log-probs of sampled tokens), old logp =
     * logp + N(0, 0.2²) (so a fair share of ratios leaves [0.8, 1.2]), one N(0, 1) advantage per
     * row broadcast to its tokens. The token-mean normaliser is the number of valid tokens.
     */
    public record Data(int n, long[] offsets, float[] logp, float[] old, float[] adv, boolean[] mask, byte[] maskBytes,
                       double normalizer) {
        public static final int MAX_ROW = 512;
        public static final double MASKED = 0.10;

        public int numRows() {
            return offsets.length - 1;
        }

        public static Data generate(int n, long seed) {
            if (n < 1) throw new IllegalArgumentException("tokens must be >= 1, got " + n);
            Random rng = new Random(seed);
            long[] off = new long[n / (MAX_ROW / 2) + 16];
            int rows = 0;
            long pos = 0;
            while (pos < n) {
                pos = Math.min(n, pos + 1 + rng.nextInt(MAX_ROW));
                if (rows + 1 == off.length) off = java.util.Arrays.copyOf(off, 2 * off.length);
                off[++rows] = pos;
            }
            long[] offsets = java.util.Arrays.copyOf(off, rows + 1);
            float[] logp = new float[n], old = new float[n], adv = new float[n];
            boolean[] mask = new boolean[n];
            byte[] maskBytes = new byte[n];
            long valid = 0;
            for (int r = 0; r < rows; r++) {
                float a = (float) rng.nextGaussian();
                for (int t = (int) offsets[r]; t < offsets[r + 1]; t++) {
                    logp[t] = (float) -Math.abs(1.5 * rng.nextGaussian());
                    old[t] = logp[t] + (float) (0.2 * rng.nextGaussian());
                    adv[t] = a;
                    mask[t] = rng.nextDouble() >= MASKED;
                    maskBytes[t] = (byte) (mask[t] ? 1 : 0);
                    if (mask[t]) valid++;
                }
            }
            return new Data(n, offsets, logp, old, adv, mask, maskBytes, Math.max(1, valid));
        }
    }

    @State(Scope.Benchmark)
    public static class Tokens {
        @Param({"65536", "1048576", "16777216"})
        public int tokens;

        Data data;

        @Setup(Level.Trial)
        public void setup() {
            BenchSupport.configureNativeThreads();
            data = Data.generate(tokens, BenchSupport.SEED);
        }
    }

    /** The production result: dL/dlogp and the loss every other implementation is checked against. */
    static ClippedLoss.Result expected(Data d) {
        return ClippedLoss.compute(CONFIG, d.normalizer(), d.offsets(), d.logp(), d.old(), d.adv(), null, d.mask());
    }

    static Kernels.LossParams lossParams(LossConfig c, double normalizer) {
        return ClippedLoss.params(c, normalizer);
    }

    /** Inputs and outputs off-heap, allocated once. */
    @State(Scope.Benchmark)
    public static class Native {
        Arena arena;
        MemorySegment offsets, logp, old, adv, rowAdv, mask, grad, sums;
        Kernels.LossParams params;

        @Setup(Level.Trial)
        public void setup(Tokens tk) {
            Data d = tk.data;
            arena = Arena.ofShared();
            offsets = BenchSupport.offHeap(arena, d.offsets());
            logp = BenchSupport.offHeap(arena, d.logp());
            old = BenchSupport.offHeap(arena, d.old());
            adv = BenchSupport.offHeap(arena, d.adv());
            float[] perRow = new float[d.numRows()];  // the advantage of each row (every row has a token)
            for (int r = 0; r < perRow.length; r++) perRow[r] = d.adv()[(int) d.offsets()[r]];
            rowAdv = BenchSupport.offHeap(arena, perRow);
            mask = BenchSupport.offHeap(arena, d.maskBytes());
            grad = BenchSupport.zeroed(arena, 4L * d.n());
            sums = BenchSupport.zeroed(arena, 8L * AbiIndices.LOSS_SUMS);
            params = lossParams(CONFIG, d.normalizer());
            run(d);
            ClippedLoss.Result want = expected(d);
            BenchSupport.check("nativeCpu grad", want.grad(), BenchSupport.floats(grad, d.n()), 1e-6);
            BenchSupport.check("nativeCpu loss", want.loss(), sums.get(ValueLayout.JAVA_DOUBLE, 0), 1e-9);
        }

        void run(Data d) {
            Kernels.clippedLoss(Backend.CPU, params, d.numRows(), offsets, d.n(), logp, old, adv, null, mask, grad,
                    sums, null);
        }

        void runRows(Data d) {
            Kernels.clippedLossRows(Backend.CPU, params, d.numRows(), offsets, offsets, d.n(), logp, old, rowAdv, null, mask,
                    grad, sums, null);
        }

        @TearDown(Level.Trial)
        public void tearDown() {
            arena.close();
        }
    }

    /** CPU tensors made once (mask as bool); each op's graph and temporaries are freed by a PointerScope. */
    @State(Scope.Benchmark)
    public static class Torch {
        Tensor offsets, logp, old, adv, mask;

        @Setup(Level.Trial)
        public void setup(Tokens tk) {
            torch.set_num_threads(BenchSupport.threads());
            Data d = tk.data;
            offsets = TorchReference.longs(d.offsets());
            logp = TorchReference.floats(d.logp());
            old = TorchReference.floats(d.old());
            adv = TorchReference.floats(d.adv());
            mask = TorchReference.bools(d.mask());
            float[] grad;
            double loss;
            try (PointerScope scope = new PointerScope()) {
                TorchReference.LossResult r = run(d);
                grad = TorchReference.toFloats(r.grad());
                loss = r.loss();
            }
            ClippedLoss.Result want = expected(d);
            BenchSupport.check("libtorch grad", want.grad(), grad, 1e-4);
            BenchSupport.check("libtorch loss", want.loss(), loss, 1e-4);
        }

        TorchReference.LossResult run(Data d) {
            return TorchReference.clippedLoss(CONFIG, d.normalizer(), offsets, logp, old, adv, null, mask);
        }

        @TearDown(Level.Trial)
        public void tearDown() {
            for (Tensor t : new Tensor[]{offsets, logp, old, adv, mask}) if (t != null) t.deallocate();
        }
    }

    @State(Scope.Benchmark)
    public static class Plain {
        float[] grad;
        double[] sums;

        @Setup(Level.Trial)
        public void setup(Tokens tk) {
            Data d = tk.data;
            grad = new float[d.n()];
            sums = new double[AbiIndices.LOSS_SUMS];
            plainLoss(CONFIG, d.normalizer(), d.offsets(), d.logp(), d.old(), d.adv(), d.maskBytes(), grad, sums);
            ClippedLoss.Result want = expected(d);
            BenchSupport.check("plainJava grad", want.grad(), grad, 1e-5);
            BenchSupport.check("plainJava loss", want.loss(), sums[AbiIndices.LOSS_LOSS], 1e-5);
        }
    }

    /** The test oracle; it boxes every valid token index, so it is only run up to {@link BenchSupport#REFERENCE_MAX} tokens. */
    @State(Scope.Benchmark)
    public static class Reference {
        @Setup(Level.Trial)
        public void setup(Tokens tk) {
            if (tk.tokens > BenchSupport.REFERENCE_MAX) {
                throw new IllegalStateException("referenceJava is limited to " + BenchSupport.REFERENCE_MAX
                        + " tokens (ReferenceKernels boxes every token); skip tokens=" + tk.tokens);
            }
            Data d = tk.data;
            ReferenceKernels.LossRef r = ReferenceKernels.clippedLoss(CONFIG, d.normalizer(), d.offsets(), d.logp(),
                    d.old(), d.adv(), null, d.mask());
            BenchSupport.check("referenceJava loss", expected(d).loss(), r.sums()[AbiIndices.LOSS_LOSS], 1e-4);
        }
    }

    /** Copies tokens × 17 / 2 bytes: the same read + write traffic as the kernel's minimum. */
    @State(Scope.Benchmark)
    public static class Copy {
        @Param({"65536", "1048576", "16777216"})
        public int tokens;

        CopyBaseline copy;

        @Setup(Level.Trial)
        public void setup() {
            copy = CopyBaseline.forTraffic((long) BYTES_PER_TOKEN * tokens, BenchSupport.threads());
        }

        @TearDown(Level.Trial)
        public void tearDown() {
            copy.close();
        }
    }

    // ------------------------------------------------------------------ plain Java

    /**
     * The loss as a simple single-threaded loop: drmas_math.h token_loss in float arithmetic,
     * per-row weights, sums in double, in the order of AbiIndices.LOSS_*. No KL term
     * (the benchmark's config has none).
     */
    static void plainLoss(LossConfig c, double normalizer, long[] off, float[] logp, float[] old, float[] adv,
                          byte[] mask, float[] grad, double[] sums) {
        if (c.kl() != KlEstimator.NONE) throw new UnsupportedOperationException("plainLoss has no KL term");
        boolean perRowMean = c.aggregation().perRowMean();
        double invNorm = 1.0 / normalizer;
        float lo = (float) (1.0 - c.clipLow()), hi = (float) (1.0 + c.clipHigh());
        boolean dual = c.dualClip() > 0;
        float dualC = (float) c.dualClip();
        java.util.Arrays.fill(sums, 0.0);
        int rows = off.length - 1;
        java.util.Arrays.fill(grad, 0, (int) off[0], 0f);
        java.util.Arrays.fill(grad, (int) off[rows], grad.length, 0f);
        for (int r = 0; r < rows; r++) {
            int b = (int) off[r], e = (int) off[r + 1];
            double w = invNorm;
            if (perRowMean) {
                int nv = 0;
                for (int t = b; t < e; t++) nv += mask[t] != 0 ? 1 : 0;
                w = nv > 0 ? invNorm / nv : 0.0;
            }
            float wf = (float) w;
            double pgSum = 0, ppo = 0;
            long ntok = 0, clipped = 0, lower = 0;
            for (int t = b; t < e; t++) {
                if (mask[t] == 0) {
                    grad[t] = 0f;
                    continue;
                }
                float a = adv[t];
                float d = logp[t] - old[t];
                float dc = Math.clamp(d, -20f, 20f);
                float ratio = (float) Math.exp(dc);
                float dRatio = (d >= -20f && d <= 20f) ? ratio : 0f;
                float pg1 = -a * ratio, pg2 = -a * Math.clamp(ratio, lo, hi);
                float pg = pg1 > pg2 ? pg1 : pg2;
                float dPg = pg2 > pg1 ? 0f : -a;
                if (pg2 > pg1) clipped++;
                if (dual && a < 0f) {
                    float pg3 = -a * dualC;
                    if (pg > pg3) {
                        lower++;
                        pg = pg3;
                        dPg = 0f;
                    } else if (pg == pg3) {
                        dPg *= 0.5f;
                    }
                }
                grad[t] = wf * (dPg * dRatio);
                pgSum += pg;
                ppo += -dc;
                ntok++;
            }
            sums[AbiIndices.LOSS_LOSS] += w * pgSum;
            sums[AbiIndices.LOSS_PG_LOSS] += w * pgSum;
            sums[AbiIndices.LOSS_TOKENS] += ntok;
            sums[AbiIndices.LOSS_CLIPPED] += clipped;
            sums[AbiIndices.LOSS_CLIPPED_LOWER] += lower;
            sums[AbiIndices.LOSS_PPO_KL] += ppo;
        }
    }

    // ------------------------------------------------------------------ benchmarks

    /** (a) The headline: drmas_clipped_loss_f32 on off-heap segments. */
    @Benchmark
    public MemorySegment nativeCpu(Tokens tk, Native s) {
        s.run(tk.data);
        return s.sums;
    }

    /**
     * (a'') One advantage per row (drmas_clipped_loss_rows_f32, the training step's form): 4 B/token
     * less to read than the headline's per-token advantages; BenchReport counts its own 13 B/token.
     */
    @Benchmark
    public MemorySegment nativeRows(Tokens tk, Native s) {
        s.runRows(tk.data);
        return s.sums;
    }

    /** (a') The production array API: arrays read in place, the boolean mask converted per call. */
    @Benchmark
    public ClippedLoss.Result arrayApi(Tokens tk) {
        return expected(tk.data);
    }

    /** (b) The LibTorch composition: forward graph + autograd backward. */
    @Benchmark
    public double libtorch(Tokens tk, Torch t) {
        try (PointerScope scope = new PointerScope()) {
            return t.run(tk.data).loss();
        }
    }

    /** (c) A simple single-threaded Java loop (plainLoss). */
    @Benchmark
    public float[] plainJava(Tokens tk, Plain p) {
        Data d = tk.data;
        plainLoss(CONFIG, d.normalizer(), d.offsets(), d.logp(), d.old(), d.adv(), d.maskBytes(), p.grad, p.sums);
        return p.grad;
    }

    /** (c') The test oracle ReferenceKernels.clippedLoss (double precision, boxed), at most 1M tokens. */
    @Benchmark
    public ReferenceKernels.LossRef referenceJava(Tokens tk, Reference g) {
        Data d = tk.data;
        return ReferenceKernels.clippedLoss(CONFIG, d.normalizer(), d.offsets(), d.logp(), d.old(), d.adv(), null,
                d.mask());
    }

    /** (d) Memory-copy baseline with the kernel's minimal traffic (17 B/token). */
    @Benchmark
    public byte copy(Copy c) {
        c.copy.run();
        return c.copy.probe();
    }
}

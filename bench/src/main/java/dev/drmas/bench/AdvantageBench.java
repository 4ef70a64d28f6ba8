// AdvantageBench.java — times the full advantage computation (mode drmas, or another by the `mode`
// parameter; trajectory pooling) at 64K–16M rows, grouped by uid and shuffled: native CPU kernel vs
// array API, LibTorch ops, plain Java and a memory copy of the kernel's minimal traffic (20 B/row), to
// show where the native kernel stands.
package dev.drmas.bench;

import dev.drmas.algo.Advantages;
import dev.drmas.algo.NormConfig;
import dev.drmas.algo.NormMode;
import dev.drmas.algo.ReferenceKernels;
import dev.drmas.algo.TorchReference;
import dev.drmas.bindings.Backend;
import dev.drmas.bindings.Kernels;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.SplittableRandom;
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
public class AdvantageBench {
    /** Bytes the kernel must minimally read and write per row. */
    public static final int READ_BYTES_PER_ROW = 16, WRITE_BYTES_PER_ROW = 4;
    public static final int BYTES_PER_ROW = READ_BYTES_PER_ROW + WRITE_BYTES_PER_ROW;
    /** The default mode's config (Dr. MAS); GpuBench uses it. */
    static final NormConfig CONFIG = NormConfig.of(NormMode.DRMAS);

    // ------------------------------------------------------------------ inputs

    /**
     * Rows as rollouts produce them: grouped by uid, {@link #TRAJS_PER_UID} trajectories per uid,
     * each of 1 or 2 turns (2 with probability 3/4) in which the solver (agent 0) and the
     * verifier (agent 1) each write a row, interleaved: solver, verifier, solver, verifier. That
     * is ≈ 14 rows per (uid, agent) segment, ≈ 28 per uid. Trajectory ids are global (dense);
     * the last uid may be cut short to make exactly n rows. Scores are uniform in [0, 1).
     * "random" applies one random permutation to the rows (ids unsorted; the kernels take
     * their general path).
     */
    public record Data(int n, float[] scores, int[] uid, int[] traj, int[] agent, int numUids, int numTrajs) {
        public static final int TRAJS_PER_UID = 8, NUM_AGENTS = 2;

        public int numAgents() {
            return NUM_AGENTS;
        }

        public static Data generate(int n, String layout, long seed) {
            if (n < 1) throw new IllegalArgumentException("rows must be >= 1, got " + n);
            SplittableRandom rng = new SplittableRandom(seed);
            float[] scores = new float[n];
            int[] uid = new int[n], traj = new int[n], agent = new int[n];
            int i = 0, u = 0, t = 0;
            fill:
            for (; ; u++) {
                for (int j = 0; j < TRAJS_PER_UID; j++, t++) {
                    int turns = rng.nextInt(4) == 0 ? 1 : 2;
                    for (int turn = 0; turn < turns; turn++) {
                        for (int k = 0; k < NUM_AGENTS; k++) {
                            if (i == n) break fill;
                            uid[i] = u;
                            traj[i] = t;
                            agent[i] = k;
                            scores[i] = (float) rng.nextDouble();
                            i++;
                        }
                    }
                }
            }
            switch (layout) {
                case "grouped" -> { }
                case "random" -> {
                    for (int a = n - 1; a > 0; a--) {
                        int b = rng.nextInt(a + 1);
                        float s = scores[a]; scores[a] = scores[b]; scores[b] = s;
                        int x = uid[a]; uid[a] = uid[b]; uid[b] = x;
                        x = traj[a]; traj[a] = traj[b]; traj[b] = x;
                        x = agent[a]; agent[a] = agent[b]; agent[b] = x;
                    }
                }
                default -> throw new IllegalArgumentException("layout must be grouped or random, got " + layout);
            }
            int maxUid = 0, maxTraj = 0;
            for (int r = 0; r < n; r++) {
                maxUid = Math.max(maxUid, uid[r]);
                maxTraj = Math.max(maxTraj, traj[r]);
            }
            return new Data(n, scores, uid, traj, agent, maxUid + 1, maxTraj + 1);
        }
    }

    @State(Scope.Benchmark)
    public static class Rows {
        @Param({"65536", "1048576", "16777216"})
        public int rows;
        @Param({"grouped", "random"})
        public String layout;
        /** The normalisation mode as a config names it: drmas (the headline), grpo (the paper's baseline), ... */
        @Param({"drmas"})
        public String mode;

        Data data;
        NormConfig config;

        @Setup(Level.Trial)
        public void setup() {
            BenchSupport.configureNativeThreads();
            config = NormConfig.of(NormMode.parse(mode));
            data = Data.generate(rows, layout, BenchSupport.SEED);
        }
    }

    /** Inputs and output off-heap, allocated once: the kernel's own cost, no Java-array access. */
    @State(Scope.Benchmark)
    public static class Native {
        Arena arena;
        MemorySegment scores, uid, traj, agent, out;
        Kernels.NormParams params;

        @Setup(Level.Trial)
        public void setup(Rows r) {
            Data d = r.data;
            arena = Arena.ofShared();
            scores = BenchSupport.offHeap(arena, d.scores());
            uid = BenchSupport.offHeap(arena, d.uid());
            traj = BenchSupport.offHeap(arena, d.traj());
            agent = BenchSupport.offHeap(arena, d.agent());
            out = BenchSupport.zeroed(arena, 4L * d.n());
            params = normParams(r.config);
            run(d);
            // the direct call must mean what the production API means
            BenchSupport.check("nativeCpu", Advantages.compute(r.config, d.scores(), d.uid(), d.traj(), d.agent(),
                    d.numUids(), d.numTrajs(), d.numAgents()), BenchSupport.floats(out, d.n()), 1e-6);
        }

        void run(Data d) {
            Kernels.advantage(Backend.CPU, params, d.n(), scores, uid, traj, agent, d.numUids(), d.numTrajs(),
                    d.numAgents(), out, null, null);
        }

        void runTrusted(Data d) {
            Kernels.advantage(Backend.CPU, params, true, d.n(), scores, uid, traj, agent, d.numUids(), d.numTrajs(),
                    d.numAgents(), out, null, null);
        }

        @TearDown(Level.Trial)
        public void tearDown() {
            arena.close();
        }
    }

    /** CPU tensors made once; each op's temporaries are freed by a PointerScope. */
    @State(Scope.Benchmark)
    public static class Torch {
        Tensor scores, uid, traj, agent;
        NormConfig config;

        @Setup(Level.Trial)
        public void setup(Rows r) {
            torch.set_num_threads(BenchSupport.threads());
            config = r.config;
            Data d = r.data;
            scores = TorchReference.floats(d.scores());
            uid = TorchReference.ints(d.uid());
            traj = TorchReference.ints(d.traj());
            agent = TorchReference.ints(d.agent());
            float[] got;
            try (PointerScope scope = new PointerScope()) {
                got = TorchReference.toFloats(run(d));
            }
            BenchSupport.check("libtorch", expected(r), got, 1e-4);
        }

        Tensor run(Data d) {
            return TorchReference.advantages(config, scores, uid, traj, agent, d.numUids(), d.numTrajs(), d.numAgents());
        }

        @TearDown(Level.Trial)
        public void tearDown() {
            for (Tensor t : new Tensor[]{scores, uid, traj, agent}) if (t != null) t.deallocate();
        }
    }

    @State(Scope.Benchmark)
    public static class Plain {
        PlainJavaAdvantage impl;
        float[] out;

        @Setup(Level.Trial)
        public void setup(Rows r) {
            Data d = r.data;
            impl = new PlainJavaAdvantage(r.config);
            out = new float[d.n()];
            impl.compute(d.scores(), d.uid(), d.traj(), d.agent(), d.numUids(), d.numTrajs(), d.numAgents(), out);
            BenchSupport.check("plainJava", expected(r), out, 1e-4);
        }
    }

    /** The test oracle; it boxes every value, so it is only run up to {@link BenchSupport#REFERENCE_MAX} rows. */
    @State(Scope.Benchmark)
    public static class Reference {
        @Setup(Level.Trial)
        public void setup(Rows r) {
            if (r.rows > BenchSupport.REFERENCE_MAX) {
                throw new IllegalStateException("referenceJava is limited to " + BenchSupport.REFERENCE_MAX
                        + " rows (ReferenceKernels boxes every value); skip rows=" + r.rows);
            }
            Data d = r.data;
            BenchSupport.check("referenceJava", expected(r), ReferenceKernels.advantages(r.config, d.scores(), d.uid(),
                    d.traj(), d.agent(), d.numUids(), d.numTrajs(), d.numAgents()), 1e-4);
        }
    }

    /** Copies rows × 20 / 2 bytes: the same read + write traffic as the kernel's minimum. */
    @State(Scope.Benchmark)
    public static class Copy {
        @Param({"65536", "1048576", "16777216"})
        public int rows;

        CopyBaseline copy;

        @Setup(Level.Trial)
        public void setup() {
            copy = CopyBaseline.forTraffic((long) BYTES_PER_ROW * rows, BenchSupport.threads());
        }

        @TearDown(Level.Trial)
        public void tearDown() {
            copy.close();
        }
    }

    static Kernels.NormParams normParams(NormConfig c) {
        return Advantages.params(c);
    }

    /** The production result, what every other implementation is checked against. */
    static float[] expected(Rows r) {
        Data d = r.data;
        return Advantages.compute(r.config, d.scores(), d.uid(), d.traj(), d.agent(), d.numUids(), d.numTrajs(),
                d.numAgents());
    }

    // ------------------------------------------------------------------ benchmarks

    /** (a) The headline: drmas_advantage_f32 on off-heap segments (no output allocation). */
    @Benchmark
    public MemorySegment nativeCpu(Rows r, Native s) {
        s.run(r.data);
        return s.out;
    }

    /** (a') The trusted entry (drmas_advantage_trusted_f32, the trainer's ids): no separate validation pass. */
    @Benchmark
    public MemorySegment nativeTrusted(Rows r, Native s) {
        s.runTrusted(r.data);
        return s.out;
    }

    /** (b) The production array API: Java arrays read in place, a new float[] per call. */
    @Benchmark
    public float[] arrayApi(Rows r) {
        Data d = r.data;
        return Advantages.compute(r.config, d.scores(), d.uid(), d.traj(), d.agent(), d.numUids(), d.numTrajs(),
                d.numAgents());
    }

    /** (c) The same computation composed from LibTorch ops (index_add_, index_select, where). */
    @Benchmark
    public long libtorch(Rows r, Torch t) {
        try (PointerScope scope = new PointerScope()) {
            return t.run(r.data).numel();
        }
    }

    /** (d) Fast plain Java (PlainJavaAdvantage: the native algorithm, one thread). */
    @Benchmark
    public float[] plainJava(Rows r, Plain p) {
        Data d = r.data;
        p.impl.compute(d.scores(), d.uid(), d.traj(), d.agent(), d.numUids(), d.numTrajs(), d.numAgents(), p.out);
        return p.out;
    }

    /** (d') The test oracle ReferenceKernels.advantages (clarity, not speed), at most 1M rows. */
    @Benchmark
    public float[] referenceJava(Rows r, Reference g) {
        Data d = r.data;
        return ReferenceKernels.advantages(r.config, d.scores(), d.uid(), d.traj(), d.agent(), d.numUids(),
                d.numTrajs(), d.numAgents());
    }

    /** (e) Memory-copy baseline with the kernel's minimal traffic (20 B/row). */
    @Benchmark
    public byte copy(Copy c) {
        c.copy.run();
        return c.copy.probe();
    }
}

// ShardedOptimizerTest.java — distributed.shard_optimizer (ZeRO stage 2: gradients reduced per micro-batch) over
// the real Gloo process group, ranks as threads of this JVM: the PPO update with the optimiser
// state sharded ends with the weights of one unsharded process (fp32; on 2 ranks, and on 8 with
// ranks without rows), and with the
// masters of unsharded ranks on the same rows (bf16 with fp32 masters: bf16 forwards of other batch
// shapes round differently, so one process is not the reference there); each rank holds 1/W of the
// optimiser state; the gathered state (what checkpoints store) reaches rank 0 alone, loads into
// another world size and continues alike, and gathers back bit for bit; a micro-batch's reduction of
// the gradients holds a few buckets on the host, not the model, as does the unsharded reduction; a
// micro-batch's reduction and a step's spreading are one store round trip each, however many buckets.
package dev.drmas.train;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.drmas.config.DistributedConfig;
import dev.drmas.dist.Collective;
import dev.drmas.dist.DistEnv;
import dev.drmas.dist.ProcessGroup;
import dev.drmas.metrics.PeakMemory;
import dev.drmas.model.CausalLm;
import dev.drmas.model.Tensors;
import dev.drmas.testing.HeapCounter;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.function.BiFunction;
import org.bytedeco.javacpp.PointerScope;
import org.bytedeco.pytorch.Device;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.global.torch;
import org.bytedeco.pytorch.global.torch.ScalarType;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

class ShardedOptimizerTest {
    /** 4 KiB: the tiny model's gradients go over the ranks in many buckets, some parameters alone. */
    static final long BUCKET = 4096;

    /** 256 KiB, for the synthetic parameters of {@link #shapes()}: about a hundred buckets. */
    static final long BIG_BUCKET = 256 << 10;

    /**
     * A bound on what a few of BIG_BUCKET's buffers add to the heap, with room for the JVM's own
     * native memory meanwhile (its JIT compiler's arenas: a few MiB, at any time).
     */
    static final long FEW_BUCKETS = 16 * BIG_BUCKET + (8L << 20);

    /**
     * Parameter shapes of awkward sizes: 112 matrices of 54,707 elements (each below BIG_BUCKET, so
     * that a bucket holds one of them), a scalar, a prime, a 3-D one: 6,135,209 parameters, whose
     * optimiser state is 73.6 MB.
     */
    static Map<String, long[]> shapes() {
        Map<String, long[]> s = new LinkedHashMap<>();
        s.put("embed.weight", new long[] {241, 227});
        s.put("scale", new long[] {});
        for (int l = 0; l < 111; l++) s.put("layers." + l + ".proj.weight", new long[] {227, 241});
        s.put("layers.110.norm.weight", new long[] {7919});
        s.put("head.bias", new long[] {3, 5, 7});
        return s;
    }

    static long parameters() {
        long n = 0;
        for (long[] shape : shapes().values()) {
            long k = 1;
            for (long d : shape) k *= d;
            n += k;
        }
        return n;
    }

    /** bf16 zeros of {@link #shapes()}: a model's weights before its optimiser restores them. */
    static Map<String, Tensor> weights() {
        Map<String, Tensor> p = new LinkedHashMap<>();
        shapes().forEach((k, s) -> p.put(k, torch.zeros(s).to(ScalarType.BFloat16)));
        return p;
    }

    interface RankWork<T> {
        T run(Collective dist) throws Exception;
    }

    /** {@code work} on two Gloo ranks, threads of this JVM; each rank's result. */
    static <T> List<T> onTwoRanks(RankWork<T> work) throws Exception {
        return onTwoRanks(1, work);
    }

    /** As above, the group's own sums (the unsharded reduction's) in buckets of {@code bucketMb}. */
    static <T> List<T> onTwoRanks(double bucketMb, RankWork<T> work) throws Exception {
        return onTwoRanks(bucketMb, 60, work);
    }

    /** As above, with distributed.timeout_s {@code timeoutS} (a test of a failure's promptness keeps it small). */
    static <T> List<T> onTwoRanks(double bucketMb, double timeoutS, RankWork<T> work) throws Exception {
        return onRanks(2, bucketMb, timeoutS, true, work);
    }

    /** {@code work} on {@code world} Gloo ranks, threads of this JVM, with distributed.shard_optimizer {@code sharded}; each rank's result. */
    static <T> List<T> onRanks(int world, double bucketMb, double timeoutS, boolean sharded, RankWork<T> work) throws Exception {
        int port;
        try (ServerSocket s = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
            port = s.getLocalPort();
        }
        DistributedConfig dc = new DistributedConfig(DistributedConfig.Backend.GLOO, timeoutS, 1, bucketMb, sharded);
        ExecutorService ex = Executors.newFixedThreadPool(world);
        List<T> out = new ArrayList<>();
        try {
            List<Future<T>> fs = new ArrayList<>();
            for (int r = 0; r < world; r++) {
                DistEnv env = new DistEnv("127.0.0.1", port, r, world, r);
                fs.add(ex.submit(() -> {
                    try (ProcessGroup pg = new ProcessGroup(env, dc, false); PointerScope scope = new PointerScope()) {
                        return work.run(pg);
                    }
                }));
            }
            for (Future<T> f : fs) out.add(f.get(300, TimeUnit.SECONDS));
        } finally {
            ex.shutdownNow();
        }
        return out;
    }

    /**
     * What {@code work}, run on every rank at once, added at its peak to this process's heap (the
     * exact count of the pom's preloaded libdrmas_memcount: both ranks together), on rank 0; -1 on
     * the others. The ranks are idle while rank 0 waits for the JIT to be quiet (HeapCounter.awaitQuietJit:
     * the compilations earlier work started, done before the count) and starts the count.
     */
    static long heapAdded(Collective dist, java.util.concurrent.Callable<?> work) throws Exception {
        if (dist.isMaster()) HeapCounter.awaitQuietJit();
        dist.barrier("before the measured work");
        PeakMemory phase = dist.isMaster() ? PeakMemory.start() : null;
        dist.barrier("the count started");
        work.call();
        dist.barrier("after the measured work");
        return phase == null ? -1 : phase.addedBytes();
    }

    /** After the update: the model's weights, the gathered masters and moments (host copies), this rank's state bytes. */
    record Result(Map<String, float[]> weights, Map<String, float[]> masters, Map<String, float[]> moments, long stateBytes,
                  long parameters) {
    }

    private static Map<String, float[]> host(Map<String, Tensor> m) {
        Map<String, float[]> out = new LinkedHashMap<>();
        if (m == null) return out;
        try (PointerScope scope = new PointerScope()) {
            m.forEach((k, t) -> out.put(k, Tensors.toFloats(t.to(ScalarType.Float))));
        }
        return out;
    }

    /** One PPO update of a fresh tiny model on {@code rows}, through {@code optim(model params, dist)}. */
    static Result update(List<PpoUpdater.Row> rows, Collective dist, ScalarType dtype,
                         BiFunction<Map<String, Tensor>, Collective, ModelOptimizer> optim) {
        try (CausalLm m = CausalLm.random(PpoUpdaterDistributedTest.CFG, 5, dtype, new Device("cpu"));
             ModelOptimizer o = optim.apply(m.parameters(), dist);
             PointerScope scope = new PointerScope()) {
            new PpoUpdater(m, o, null, PpoUpdaterDistributedTest.PPO, dist, "policy").update(rows, 17);
            ModelOptimizer.Snapshot s = o.gatherState();
            long n = 0;
            for (Tensor p : m.parameters().values()) n += p.numel();
            return new Result(PpoUpdaterTest.snapshot(m), host(s.master()), host(s.state()), o.stateBytes(), n);
        }
    }

    static List<Result> twoRanks(List<PpoUpdater.Row> all, int rank0Rows, ScalarType dtype, boolean sharded) throws Exception {
        return ranks(all, new int[] {0, rank0Rows, all.size()}, dtype, sharded);
    }

    /** One update on {@code bounds.length - 1} Gloo ranks (threads of this JVM), rank r on rows [bounds[r], bounds[r + 1]). */
    static List<Result> ranks(List<PpoUpdater.Row> all, int[] bounds, ScalarType dtype, boolean sharded) throws Exception {
        boolean mixed = dtype != ScalarType.Float;
        return onRanks(bounds.length - 1, 1e-3, 60, sharded, dist -> update(all.subList(bounds[dist.rank()], bounds[dist.rank() + 1]), dist,
                dtype, (p, d) -> sharded ? ModelOptimizer.sharded(p, PpoUpdaterDistributedTest.OPT, d, BUCKET)
                        : ModelOptimizer.create(p, PpoUpdaterDistributedTest.OPT, mixed)));
    }

    private static double maxDiff(Map<String, float[]> a, Map<String, float[]> b) {
        assertEquals(a.keySet(), b.keySet());
        double d = 0;
        for (String k : a.keySet()) {
            float[] x = a.get(k), y = b.get(k);
            assertEquals(x.length, y.length, k);
            for (int i = 0; i < x.length; i++) d = Math.max(d, Math.abs(x[i] - y[i]));
        }
        return d;
    }

    @ParameterizedTest
    @ValueSource(strings = {"float32", "bfloat16"})
    void twoShardedRanksUpdateLikeOneUnshardedProcess(String dtypeName) throws Exception {
        ScalarType dtype = dtypeName.equals("float32") ? ScalarType.Float : ScalarType.BFloat16;
        boolean mixed = dtype != ScalarType.Float;
        List<PpoUpdater.Row> all = PpoUpdaterDistributedTest.rows();
        Result one = update(all, Collective.single(), dtype, (p, d) -> ModelOptimizer.create(p, PpoUpdaterDistributedTest.OPT, mixed));
        List<Result> ranks = twoRanks(all, 7, dtype, true);
        List<Result> unsharded = mixed ? twoRanks(all, 7, dtype, false) : null;
        Map<String, float[]> init;
        try (CausalLm m = CausalLm.random(PpoUpdaterDistributedTest.CFG, 5, dtype, new Device("cpu"))) {
            init = PpoUpdaterTest.snapshot(m);
        }
        double moved = maxDiff(one.weights(), init);
        assertTrue(moved > 1e-3, "the update barely moved the weights: " + moved);
        // only rank 0, which writes checkpoints, receives the gathered state
        assertTrue(ranks.get(1).moments().isEmpty() && ranks.get(1).masters().isEmpty(),
                "rank 1 kept gathered state: " + ranks.get(1).moments().size() + " moments, " + ranks.get(1).masters().size() + " masters");
        Result r = ranks.get(0);
        if (mixed) {
            // the fp32 masters agree with unsharded ranks on the same rows; the bf16 weights are their rounding
            Result u = unsharded.get(0);
            double dm = maxDiff(u.masters(), r.masters());
            assertTrue(dm <= 1e-6, "masters, 2 unsharded vs 2 sharded ranks: max |Δ| = " + dm);
            assertTrue(maxDiff(u.weights(), r.weights()) <= 1e-6, "bf16 weights, unsharded vs sharded");
            double dv = maxDiff(u.moments(), r.moments());
            assertTrue(dv <= 1e-6, "AdamW moments, 2 unsharded vs 2 sharded ranks: max |Δ| = " + dv);
        } else {
            double dw = maxDiff(one.weights(), r.weights());
            assertTrue(dw <= 1e-5, "weights, 1 process vs 2 sharded ranks: max |Δw| = " + dw);
            double dv = maxDiff(one.moments(), r.moments());
            assertTrue(dv <= 1e-5, "AdamW moments, 1 process vs 2 sharded ranks: max |Δ| = " + dv);
        }
        assertEquals(0, maxDiff(ranks.get(0).weights(), ranks.get(1).weights()), "both ranks hold the same weights");
        // each rank: fp32 masters + two moments of its half of the parameters
        long p = one.parameters(), half = (p + 1) / 2;
        assertEquals(12 * half, ranks.get(0).stateBytes());
        assertEquals(12 * (p - half), ranks.get(1).stateBytes());
        assertEquals(mixed ? 12 * p : 8 * p, one.stateBytes(), "unsharded: moments (and masters when mixed) of every parameter");
    }

    /**
     * The GPU configs run 8 ranks: chunks of ⌈P / W⌉ parameters that cut the model's tensors at other
     * places, buckets that span more ranks' chunks, and ranks with no rows of the step (they still
     * take part in every reduction): rows cut unevenly, some ranks with none.
     */
    @Test
    void eightShardedRanksUpdateLikeOneProcess() throws Exception {
        List<PpoUpdater.Row> all = PpoUpdaterDistributedTest.rows();
        int[] bounds = {0, 3, 3, 5, 6, 9, 10, 13, 13};
        int world = bounds.length - 1;
        assertEquals(all.size(), bounds[world]);
        Result one = update(all, Collective.single(), ScalarType.Float, (p, d) -> ModelOptimizer.create(p, PpoUpdaterDistributedTest.OPT, false));
        List<Result> ranks = ranks(all, bounds, ScalarType.Float, true);
        Map<String, float[]> init;
        try (CausalLm m = CausalLm.random(PpoUpdaterDistributedTest.CFG, 5, ScalarType.Float, new Device("cpu"))) {
            init = PpoUpdaterTest.snapshot(m);
        }
        assertTrue(maxDiff(one.weights(), init) > 1e-3, "the update barely moved the weights");
        Result r0 = ranks.get(0);
        double dw = maxDiff(one.weights(), r0.weights());
        assertTrue(dw <= 1e-5, "weights, 1 process vs " + world + " sharded ranks: max |Δw| = " + dw);
        double dv = maxDiff(one.moments(), r0.moments());
        assertTrue(dv <= 1e-5, "AdamW moments, 1 process vs " + world + " sharded ranks: max |Δ| = " + dv);
        long p = one.parameters(), chunk = (p + world - 1) / world;
        for (int r = 0; r < world; r++) {
            Result rr = ranks.get(r);
            assertEquals(0, maxDiff(r0.weights(), rr.weights()), "rank " + r + " holds rank 0's weights");
            if (r > 0) assertTrue(rr.moments().isEmpty() && rr.masters().isEmpty(), "rank " + r + " kept gathered state");
            long lo = Math.min(p, r * chunk), hi = Math.min(p, lo + chunk);
            assertEquals(12 * (hi - lo), rr.stateBytes(), "rank " + r + "'s state: fp32 masters and two moments of its chunk");
        }
    }

    @Test
    void aMicroBatchsReductionHoldsAFewBucketsNotTheModel() throws Exception {
        // under the pom's exact heap counter: the fp32 buckets of the gradients' sum are freed one by
        // one (a PointerScope around all of them held a fp32 copy of every gradient, and the
        // concatenated buckets, until the last: 8 bytes a parameter on every rank, each micro-batch)
        HeapCounter.require();
        torch.set_num_threads(1);
        long whole = 8 * parameters(), bound = FEW_BUCKETS;  // (both ranks: a bucket's parts, concatenation, flat copy, Gloo's scratch)
        long[] added = new long[1];
        onTwoRanks(dist -> {
            Map<String, Tensor> w = weights();
            try (ModelOptimizer o = ModelOptimizer.sharded(w, PpoUpdaterDistributedTest.OPT, dist, BIG_BUCKET)) {
                torch.manual_seed(3 + dist.rank());
                for (Tensor p : w.values()) {
                    p.requires_grad_(true);
                    p.mutable_grad().put(torch.randn(AdamW.shape(p)).to(ScalarType.BFloat16));
                }
                o.afterBackward();  // a first time: Gloo keeps buffers for a message size it has not sent before (once)
                // the least of three micro-batches, as the unsharded reduction's below: a compilation the
                // call itself starts may still fall within one reading
                long a = Long.MAX_VALUE;
                for (int k = 0; k < 3; k++) {
                    for (Tensor p : w.values()) p.mutable_grad().put(torch.randn(AdamW.shape(p)).to(ScalarType.BFloat16));
                    a = Math.min(a, heapAdded(dist, () -> {
                        o.afterBackward();
                        return null;
                    }));
                }
                if (dist.isMaster()) added[0] = a;
            }
            return null;
        });
        assertTrue(whole > 3 * bound, "the gradients in fp32 (" + whole + " bytes, both ranks) must dwarf the bound (" + bound + ")");
        assertTrue(added[0] <= bound, "a micro-batch's reduction added " + added[0] + " bytes to the heap at its peak, both ranks "
                + "(buckets of " + BIG_BUCKET + "; every gradient in fp32 on both ranks is " + whole + ")");
    }

    @Test
    void aMicroBatchAndAStepAreOneStoreRoundTripEach() throws Exception {
        // about a hundred buckets: each used to be a collective of its own, with a round trip to
        // rank 0's store (its arrival) and a blocking wait before the next bucket was even made
        List<long[]> ops = onTwoRanks(dist -> {
            ProcessGroup pg = (ProcessGroup) dist;
            Map<String, Tensor> w = weights();
            try (ModelOptimizer o = ModelOptimizer.sharded(w, PpoUpdaterDistributedTest.OPT, dist, BIG_BUCKET)) {
                torch.manual_seed(3 + dist.rank());
                for (Tensor p : w.values()) {
                    p.requires_grad_(true);
                    p.mutable_grad().put(torch.randn(AdamW.shape(p)).to(ScalarType.BFloat16));
                }
                long before = pg.operations();
                o.afterBackward();
                long reduce = pg.operations() - before;
                before = pg.operations();
                o.step();
                return new long[] {reduce, pg.operations() - before};
            }
        });
        for (long[] r : ops) {
            assertEquals(1, r[0], "store round trips of a micro-batch's reduction");
            assertEquals(1, r[1], "store round trips of a step's spreading of the weights");
        }
    }

    @Test
    void anUnshardedReductionHoldsAFewBucketsNotTheModel() throws Exception {
        // distributed.shard_optimizer false, 2 ranks: the fp32 accumulators are summed in buckets of
        // the group's bucket_mb, four parameters to a bucket here (each flattened into a copy);
        // flattening every bucket before the first was sent held a copy of all the gradients (4
        // bytes a parameter on each rank) until the last came back
        HeapCounter.require();
        torch.set_num_threads(1);
        Map<String, long[]> shapes = new LinkedHashMap<>();
        shapes.put("scale", new long[] {});
        for (int l = 0; l < 400; l++) shapes.put("layers." + l + ".weight", new long[] {19, 790});  // 60,040 bytes in fp32
        long n = 1 + 400 * 19 * 790, whole = 4 * 2 * n, bound = FEW_BUCKETS;
        long[] added = new long[1];
        onTwoRanks((double) BIG_BUCKET / (1 << 20), dist -> {
            Map<String, Tensor> w = new LinkedHashMap<>();
            shapes.forEach((k, s) -> w.put(k, torch.zeros(s).to(ScalarType.BFloat16)));
            try (ModelOptimizer o = ModelOptimizer.create(w, PpoUpdaterDistributedTest.OPT, true)) {
                torch.manual_seed(5 + dist.rank());
                for (Tensor p : w.values()) {
                    p.requires_grad_(true);
                    p.mutable_grad().put(torch.randn(AdamW.shape(p)).to(ScalarType.BFloat16));
                }
                o.afterBackward();  // into the fp32 accumulators
                o.reduceGradients(dist, "warm-up");  // Gloo keeps buffers for a message size it has not sent before (once)
                // the smaller of two counts: what the reduction holds comes back every time, while
                // other native allocations of this JVM meanwhile come and go (one count of a first
                // version of this test, whose buckets needed no copy at all, read 40 MB once and never
                // again in five runs; cause not identified)
                long a = Long.MAX_VALUE;
                for (int k = 0; k < 2; k++) {
                    a = Math.min(a, heapAdded(dist, () -> {
                        o.reduceGradients(dist, "the gradients of policy");
                        return null;
                    }));
                }
                if (dist.isMaster()) added[0] = a;
            }
            return null;
        });
        assertTrue(whole > 3 * bound, "the gradients in fp32 (" + whole + " bytes, both ranks) must dwarf the bound (" + bound + ")");
        assertTrue(added[0] <= bound, "an unsharded reduction added " + added[0] + " bytes to the heap at its peak, both ranks "
                + "(buckets of " + BIG_BUCKET + "; every gradient in fp32 on both ranks is " + whole + ")");
    }

    @ParameterizedTest
    @ValueSource(ints = {1, 2, 8})
    void theGatheredStateLoadsIntoAnotherWorldSize(int world) throws Exception {
        // the state after one update on one process (fp32: the weights are the masters), loaded into
        // `world` sharded ranks, then a second update on each side: the same weights (what resuming a
        // checkpoint with another world size does)
        List<PpoUpdater.Row> all = PpoUpdaterDistributedTest.rows();
        try (CausalLm m = CausalLm.random(PpoUpdaterDistributedTest.CFG, 5);
             ModelOptimizer o = ModelOptimizer.create(m.parameters(), PpoUpdaterDistributedTest.OPT, false);
             PointerScope scope = new PointerScope()) {
            new PpoUpdater(m, o, null, PpoUpdaterDistributedTest.PPO, Collective.single(), "policy").update(all, 17);
            ModelOptimizer.Snapshot saved = o.gatherState();
            Map<String, float[]> masters = PpoUpdaterTest.snapshot(m), moments = host(saved.state());
            new PpoUpdater(m, o, null, PpoUpdaterDistributedTest.PPO, Collective.single(), "policy").update(all, 18);
            Map<String, float[]> want = PpoUpdaterTest.snapshot(m);

            List<Map<String, float[]>> got = new ArrayList<>();
            if (world == 1) {
                got.add(resumeAndUpdate(all, masters, moments, saved.steps(), Collective.single()));
            } else {
                // 2 ranks: 5 rows and 8; 8 ranks: 1, 2, 1, 2, 2, 1, 2, 2
                int[] bounds = world == 2 ? new int[] {0, 5, all.size()} : new int[] {0, 1, 3, 4, 6, 8, 9, 11, 13};
                got.addAll(onRanks(world, 1e-3, 60, true, dist -> resumeAndUpdate(all.subList(bounds[dist.rank()],
                        bounds[dist.rank() + 1]), masters, moments, saved.steps(), dist)));
            }
            for (Map<String, float[]> g : got) {
                double d = maxDiff(want, g);
                assertTrue(d <= 1e-5, "resumed on " + world + " sharded rank(s) vs continued: max |Δw| = " + d);
            }
        }
    }

    /** A fresh fp32 model and sharded optimiser restored from whole-tensor state (as Checkpoints loads it), then one update. */
    private static Map<String, float[]> resumeAndUpdate(List<PpoUpdater.Row> rows, Map<String, float[]> masters,
                                                        Map<String, float[]> moments, long steps, Collective dist) {
        try (CausalLm m = CausalLm.random(PpoUpdaterDistributedTest.CFG, 99);
             ModelOptimizer o = ModelOptimizer.sharded(m.parameters(), PpoUpdaterDistributedTest.OPT, dist, BUCKET);
             PointerScope scope = new PointerScope()) {
            Map<String, Tensor> w = new LinkedHashMap<>(), st = new LinkedHashMap<>();
            // whole tensors in their parameters' shapes, as a checkpoint holds them
            masters.forEach((k, v) -> w.put(k, Tensors.floats(v).view(m.parameters().get(k).sizes())));
            moments.forEach((k, v) -> st.put(k, Tensors.floats(v).view(m.parameters().get(k.substring(k.indexOf('.') + 1)).sizes())));
            o.loadMasterWeights(w);
            o.load(st, steps);
            // the gather checkpoints store gives back, on rank 0 alone, exactly what was loaded
            ModelOptimizer.Snapshot back = o.gatherState();
            if (dist.isMaster()) {
                Map<String, float[]> got = host(back.state());
                assertEquals(moments.keySet(), got.keySet());
                moments.forEach((k, v) -> assertArrayEquals(v, got.get(k), k));
            } else {
                assertTrue(back.state().isEmpty(), "rank " + dist.rank() + " kept " + back.state().size() + " gathered moments");
            }
            new PpoUpdater(m, o, null, PpoUpdaterDistributedTest.PPO, dist, "policy").update(rows, 18);
            return PpoUpdaterTest.snapshot(m);
        }
    }
}

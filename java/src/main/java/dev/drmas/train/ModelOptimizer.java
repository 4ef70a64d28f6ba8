// ModelOptimizer.java — the optimiser of one model as the update drives it, in full or mixed
// precision. Full precision: AdamW updates the model's parameters from their own .grad (as before).
// Mixed precision (models.<id>.dtype bfloat16 or float16, master_dtype float32), as FSDP's and
// Megatron's: the model's reduced-precision weights serve the forward, backward and generation; the
// optimiser keeps fp32 master weights and fp32 AdamW moments; after every micro-batch's backward the
// reduced-precision .grad is added into an fp32 accumulator and zeroed (Megatron's main_grad), so
// gradients are accumulated, reduced across ranks, measured and clipped in fp32; after each step the
// masters are rounded into the model's weights. bf16 keeps 8 significant bits: an update of relative
// size 1e-6 (the paper's lr) is lost when added to bf16 weights, but not to fp32 masters.
// Sharded (distributed.shard_optimizer, ZeRO stage 2): the parameters are laid end to end in one
// flat vector of W equal chunks; each rank owns chunk `rank`: its fp32 master weights, AdamW
// moments and fp32 gradient exist only there (1/W of the whole). After every micro-batch's
// backward the parameters' .grad are summed over the ranks in fp32 buckets of
// distributed.bucket_mb and each rank adds the part of its chunk to its fp32 gradient (the update
// pads every rank to the same number of micro-batches, so the collectives pair up); the norm is
// summed over the ranks, each rank steps its chunk, and the updated masters are all-gathered
// bucket by bucket and rounded into the model's weights. AdamW is element-wise, so the chunks' steps are the single process's step.
// Checkpoints gather the whole state to rank 0 (a collective: every rank takes part, window by
// window), which writes each window into the files as it arrives, and store it by parameter name, so
// that a run resumes with any world size; on resume each rank reads only its own part of each tensor.
// Float16 weights with a loss scaler (LossScaler): the backward ran on loss × S, and the .grad is
// divided by S as it goes into fp32 (the accumulators, or the sharded buckets), so everything after
// it sees the true gradient; a step that is skipped or taken updates the scaler.
package dev.drmas.train;

import dev.drmas.dist.Collective;
import dev.drmas.model.Scopes;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.bytedeco.javacpp.PointerScope;
import org.bytedeco.pytorch.NoGradGuard;
import org.bytedeco.pytorch.Scalar;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.global.torch;
import org.bytedeco.pytorch.global.torch.ScalarType;

public final class ModelOptimizer implements AutoCloseable {
    private final Map<String, Tensor> params;  // the model's live parameters
    private final boolean mixed;
    private final Map<String, Tensor> master;  // fp32 copies (mixed) or params itself
    private final Map<String, Tensor> grad32;  // fp32 gradient accumulators (mixed), else null
    private final AdamW adam;
    private final boolean ownsAdam;
    private final Shard shard;  // null unless sharded
    private LossScaler scaler;  // null: no loss scaling

    private ModelOptimizer(Map<String, Tensor> params, boolean mixed, Map<String, Tensor> master, Map<String, Tensor> grad32,
                           AdamW adam, boolean ownsAdam, Shard shard) {
        this.params = params;
        this.mixed = mixed;
        this.master = master;
        this.grad32 = grad32;
        this.adam = adam;
        this.ownsAdam = ownsAdam;
        this.shard = shard;
    }

    /**
     * The sharded layout: parameter i covers [offset[i], offset[i] + numel[i]) of the flat vector
     * of {@code total} elements, padded to W chunks of {@code chunk}; this rank owns [lo, hi).
     * {@code gradChunk} is the reduced fp32 gradient of this rank's chunk, {@code masterChunk} its
     * fp32 masters ([chunk], of which hi − lo are real); gradients are summed over the ranks in
     * buckets of about {@code bucketBytes}.
     */
    private record Shard(Collective dist, long[] offset, long[] numel, long total, long chunk, long lo, long hi, long bucketBytes,
                         Tensor gradChunk, Tensor masterChunk) {
        long owned() {
            return hi - lo;
        }
    }

    /**
     * The optimiser of {@code params} (a model's live parameters). {@code mixed}: keep fp32 master
     * weights, moments and gradient accumulators (the parameters are in a reduced dtype); else
     * AdamW works on the parameters themselves, in their dtype.
     */
    public static ModelOptimizer create(Map<String, Tensor> params, AdamW.Settings settings, boolean mixed) {
        if (!mixed) return new ModelOptimizer(params, false, params, null, new AdamW(params, settings), true, null);
        Map<String, Tensor> master = new LinkedHashMap<>(), grad32 = new LinkedHashMap<>();
        try (PointerScope scope = new PointerScope(); NoGradGuard ng = new NoGradGuard()) {
            for (Map.Entry<String, Tensor> e : params.entrySet()) {
                Tensor m = e.getValue().detach().to(ScalarType.Float).clone();
                master.put(e.getKey(), Scopes.retain(m));
                grad32.put(e.getKey(), Scopes.retain(torch.zeros_like(m)));
            }
        }
        return new ModelOptimizer(params, true, Collections.unmodifiableMap(master), Collections.unmodifiableMap(grad32),
                new AdamW(master, settings), true, null);
    }

    /**
     * The optimiser of {@code params} with its state sharded over the ranks of {@code dist} (in
     * mixed or full precision alike: the masters are fp32 either way). With one rank it is the
     * whole state in one chunk.
     */
    public static ModelOptimizer sharded(Map<String, Tensor> params, AdamW.Settings settings, Collective dist) {
        return sharded(params, settings, dist, 25L << 20);
    }

    /** As above, the gradients summed over the ranks in fp32 buckets of about {@code bucketBytes}. */
    public static ModelOptimizer sharded(Map<String, Tensor> params, AdamW.Settings settings, Collective dist, long bucketBytes) {
        int n = params.size(), w = dist.worldSize();
        long[] offset = new long[n], numel = new long[n];
        long total = 0;
        int i = 0;
        org.bytedeco.pytorch.Device device = null;
        for (Tensor p : params.values()) {
            offset[i] = total;
            numel[i] = p.numel();
            total += numel[i++];
            if (device == null) device = p.device();
        }
        long chunk = Math.max(1, (total + w - 1) / w);
        long lo = Math.min(total, dist.rank() * chunk), hi = Math.min(total, lo + chunk);
        Tensor gradChunk, masterChunk;
        try (PointerScope scope = new PointerScope(); NoGradGuard ng = new NoGradGuard()) {
            org.bytedeco.pytorch.TensorOptions f32 = new org.bytedeco.pytorch.TensorOptions(ScalarType.Float)
                    .device(new org.bytedeco.pytorch.DeviceOptional(device == null ? new org.bytedeco.pytorch.Device("cpu") : device));
            gradChunk = Scopes.retain(torch.zeros(new long[] {chunk}, f32));
            masterChunk = Scopes.retain(torch.zeros(new long[] {chunk}, f32));
        }
        Shard sh = new Shard(dist, offset, numel, total, chunk, lo, hi, Math.max(1, bucketBytes), gradChunk, masterChunk);
        Map<String, Tensor> grad32 = Map.of();
        Map<String, Tensor> masterMap;
        try (PointerScope scope = new PointerScope()) {
            masterMap = Map.of("chunk", Scopes.retain(masterChunk.narrow(0, 0, hi - lo)));
        }
        ModelOptimizer o = new ModelOptimizer(params, true, masterMap, Collections.unmodifiableMap(grad32),
                new AdamW(masterMap, settings), true, sh);
        o.reloadFromWeights();
        return o;
    }

    /** Full precision around an existing AdamW of the model's parameters (tests build their own). */
    public static ModelOptimizer wrap(AdamW adam) {
        return new ModelOptimizer(adam.weights(), false, adam.weights(), null, adam, false, null);
    }

    /**
     * Scales the loss of this optimiser's model with {@code s} (null: none) from now on: float16
     * weights with fp32 masters only, the gradient that {@link #afterBackward} takes into fp32 is
     * divided by the scale. Returns this optimiser.
     */
    public ModelOptimizer useLossScaler(LossScaler s) {
        if (s != null) {
            if (!mixed) throw new IllegalStateException("loss scaling needs fp32 master weights (master_dtype float32)");
            for (Tensor p : params.values()) {
                if (p.scalar_type().intern() != ScalarType.Half) {
                    throw new IllegalStateException("loss scaling is for float16 weights, not " + p.scalar_type().intern());
                }
            }
        }
        this.scaler = s;
        return this;
    }

    /** The loss scaler, or null when the loss is not scaled. */
    public LossScaler lossScaler() {
        return scaler;
    }

    /** The factor the backward's loss is multiplied by before each backward: the loss scale, 1 without one. */
    public double lossScale() {
        return scaler == null ? 1 : scaler.scale();
    }

    /** Whether the state is sharded over data-parallel ranks. */
    public boolean sharded() {
        return shard != null;
    }

    /**
     * Runs {@code f(param index, the part of the flat vector in [from, to) that parameter i covers:
     * its first flat element, its first element inside the parameter, the length)} for every
     * parameter that overlaps [from, to).
     */
    private interface Overlap {
        void on(int i, long flatStart, long paramStart, long length);
    }

    private void overlaps(long from, long to, Overlap f) {
        for (int i = 0; i < shard.offset().length; i++) {
            long a = Math.max(from, shard.offset()[i]), b = Math.min(to, shard.offset()[i] + shard.numel()[i]);
            if (a < b) f.on(i, a, a - shard.offset()[i], b - a);
        }
    }

    private List<Tensor> paramList() {
        return new ArrayList<>(params.values());
    }

    private List<String> names() {
        return new ArrayList<>(params.keySet());
    }

    /** Whether the model's weights are in reduced precision with fp32 masters apart from them. */
    public boolean mixedPrecision() {
        return keepsMasterWeights();
    }

    /** The model's parameter names, in order. */
    public java.util.Set<String> parameterNames() {
        return params.keySet();
    }

    public AdamW.Settings settings() {
        return adam.settings();
    }

    public long steps() {
        return adam.steps();
    }

    public double currentLr() {
        return adam.currentLr();
    }

    /** The learning rate of the latest step; NaN before the first. */
    public double lastLr() {
        return adam.lastLr();
    }

    /**
     * After each backward (each micro-batch): mixed precision adds the parameters' gradients into
     * the fp32 accumulators and zeroes them, so nothing is summed in the reduced dtype; with a loss
     * scale S the backward ran on loss × S, and the gradients are divided by S on their way in.
     * Full precision: nothing (autograd accumulates in .grad).
     */
    public void afterBackward() {
        if (shard != null) {
            reduceIntoChunk();
            return;
        }
        if (!mixed) return;
        double s = lossScale();
        try (PointerScope scope = new PointerScope(); NoGradGuard ng = new NoGradGuard()) {
            Scalar unscale = new Scalar(1 / s);
            for (Map.Entry<String, Tensor> e : params.entrySet()) {
                Tensor g = e.getValue().grad();
                if (!g.defined()) continue;
                // add_ promotes the bf16/fp16 values exactly into fp32; with a power-of-two S (a dynamic one from
                // the default or any power-of-two start) g·(1/S) is exact too; another S rounds 1/S to fp32, where
                // the sharded buckets divide by S: the two may then differ in the last bit
                if (s == 1) grad32.get(e.getKey()).add_(g);
                else grad32.get(e.getKey()).add_(g, unscale);
                g.detach_().zero_();
            }
        }
    }

    /**
     * Sharded: whether {@link #afterBackward} is a collective (every rank must call it equally
     * often per mini-batch, with an empty micro-batch where it has none).
     */
    public boolean reducesEachMicroBatch() {
        return shard != null;
    }

    /**
     * ZeRO-2's reduction of one micro-batch: the parameters' .grad (zeros where undefined), in
     * fp32 buckets of consecutive parameters, summed over the ranks (one operation, a few buckets
     * in flight); this rank adds the part that falls in its chunk to its fp32 gradient; the .grad
     * are zeroed.
     */
    private void reduceIntoChunk() {
        List<Tensor> ps = paramList();
        double s = lossScale();
        forEachBucket("the gradients of a micro-batch", (from, to, start, end) -> {
            Tensor[] parts = new Tensor[to - from];
            for (int i = from; i < to; i++) {
                Tensor g = ps.get(i).grad();
                parts[i - from] = g.defined() ? g.detach().reshape(-1).to(ScalarType.Float) : zerosF32(shard.numel()[i], ps.get(i));
            }
            Tensor bucket = torch.cat(new org.bytedeco.pytorch.TensorVector(parts), 0);
            // the backward ran on loss × S: the fp32 bucket (a fresh tensor, cat's) is the gradient once divided by S
            if (s != 1) bucket.div_(new Scalar(s));
            // the bucket is a copy: the .grad can take the next micro-batch's while it is summed
            for (int i = from; i < to; i++) {
                Tensor g = ps.get(i).grad();
                if (g.defined()) g.detach_().zero_();
            }
            return bucket;
        }, (from, to, start, end, bucket) -> {
            long a = Math.max(start, shard.lo()), b = Math.min(end, shard.hi());
            if (a < b) shard.gradChunk().narrow(0, a - shard.lo(), b - a).add_(bucket.narrow(0, a - start, b - a));
        });
    }

    /** Makes the fp32 bucket of parameters [from, to), which cover [start, end) of the flat vector. */
    private interface BucketMaker {
        Tensor make(int from, int to, long start, long end);
    }

    /** Takes the bucket of parameters [from, to) back, summed over the ranks. */
    private interface BucketTaker {
        void take(int from, int to, long start, long end, Tensor summed);
    }

    /**
     * Sums the parameters over the ranks in buckets of consecutive ones, about bucketBytes of fp32
     * each (at least one parameter), without autograd: the same cut for the gradients' reduction
     * and the weights' spreading, so every rank's collectives pair up. One collective operation
     * ({@link Collective#sumEach}): a bucket is made when its turn comes and freed once taken, so
     * that only the few buckets in flight exist at once, never a buffer of the whole model.
     */
    private void forEachBucket(String what, BucketMaker maker, BucketTaker taker) {
        int n = shard.numel().length;
        List<Integer> cuts = new ArrayList<>();  // bucket b holds parameters [cuts[b], cuts[b + 1])
        cuts.add(0);
        for (int from = 0; from < n; ) {
            int to = from;
            long bytes = 0;
            while (to < n && (to == from || bytes + shard.numel()[to] * 4 <= shard.bucketBytes())) bytes += shard.numel()[to++] * 4;
            cuts.add(to);
            from = to;
        }
        try (NoGradGuard ng = new NoGradGuard()) {
            shard.dist().sumEach(what, new Collective.Buckets() {
                @Override
                public int count() {
                    return cuts.size() - 1;
                }

                @Override
                public String name(int b) {
                    return "parameters " + cuts.get(b) + ".." + (cuts.get(b + 1) - 1);
                }

                @Override
                public Tensor make(int b) {
                    int from = cuts.get(b), to = cuts.get(b + 1);
                    return maker.make(from, to, shard.offset()[from], end(to));
                }

                @Override
                public void done(int b, Tensor summed) {
                    int from = cuts.get(b), to = cuts.get(b + 1);
                    taker.take(from, to, shard.offset()[from], end(to), summed);
                }

                private long end(int to) {
                    return shard.offset()[to - 1] + shard.numel()[to - 1];
                }
            });
        }
    }

    /** float32 zeros [n] on {@code like}'s device. */
    private static Tensor zerosF32(long n, Tensor like) {
        return torch.zeros(new long[] {n}, new org.bytedeco.pytorch.TensorOptions(ScalarType.Float)
                .device(new org.bytedeco.pytorch.DeviceOptional(like.device())));
    }

    /** Sums the gradients over the ranks (the fp32 accumulators in mixed precision; sharded: done per micro-batch). */
    public void reduceGradients(Collective dist, String what) {
        if (shard != null) return;
        if (!mixed) {
            dist.sumGradients(params, what);
            return;
        }
        if (dist.worldSize() == 1) return;
        dist.sumTensors(new ArrayList<>(grad32.values()), what);
    }

    /** The global L2 norm of the gradients AdamW will use. */
    public double gradNorm() {
        return Math.sqrt(squaredNorm(grads()));
    }

    /** The squared norm of the gradients AdamW will use: sharded, the sum of every rank's chunk. */
    private double squaredNorm(List<Tensor> g) {
        double sq = GradNorm.squaredSum(g);
        if (shard == null) return sq;
        double[] all = {sq};
        shard.dist().sum(all, "the gradient norm's shards");
        return all[0];
    }

    /**
     * The norm before clipping; the gradients are scaled by max/(norm + 1e-6) where that is below 1,
     * as torch's clip_grad_norm_ (0: no clipping, non-finite: untouched).
     */
    public double clipGradNorm(double max) {
        List<Tensor> g = grads();
        double norm = Math.sqrt(squaredNorm(g));
        GradNorm.scale(g, norm, max);
        return norm;
    }

    private List<Tensor> grads() {
        if (shard != null) {
            return List.of(shard.gradChunk().narrow(0, 0, shard.owned()));  // in the caller's scope
        }
        if (mixed) return new ArrayList<>(grad32.values());
        List<Tensor> g = new ArrayList<>(params.size());
        for (Tensor p : params.values()) g.add(p.grad());
        return g;
    }

    /**
     * One AdamW step; mixed precision then rounds the masters into the model's weights. A loss
     * scaler counts it as a step taken.
     */
    public void step() {
        if (!mixed) {
            adam.step();
            return;
        }
        if (shard != null) {
            try (PointerScope scope = new PointerScope()) {
                adam.step(Map.of("chunk", shard.gradChunk().narrow(0, 0, shard.owned())));
            }
        } else {
            adam.step(grad32);
        }
        publish();
        if (scaler != null) scaler.update(true);
    }

    /**
     * The step that is not taken because the gradient is not finite (its norm, the same on every
     * rank: summed over them before it is measured): nothing changes but a dynamic loss scale,
     * which halves, as GradScaler's update after a skipped optimizer.step.
     */
    public void skipStep() {
        if (scaler != null) scaler.update(false);
    }

    /** Copies the masters into the model's weights (rounded to their dtype); sharded, all-gathered first. */
    private void publish() {
        publish("the all-gather of the updated weights");
    }

    /** The same; {@code what} names the spreading (sharded: a collective) in the error of a rank that does not come. */
    private void publish(String what) {
        if (shard != null) {
            // bucket by bucket: each rank writes the part of its chunk into a zeroed buffer, the
            // buffer is summed over the ranks (x + 0 is x: exact), and the parameters take their
            // values; no buffer of the whole model
            List<Tensor> ps = paramList();
            forEachBucket(what, (from, to, start, end) -> {
                Tensor buf = zerosF32(end - start, shard.masterChunk());
                long a = Math.max(start, shard.lo()), b = Math.min(end, shard.hi());
                if (a < b) buf.narrow(0, a - start, b - a).copy_(shard.masterChunk().narrow(0, a - shard.lo(), b - a));
                return buf;
            }, (from, to, start, end, buf) -> {
                for (int i = from; i < to; i++) {
                    ps.get(i).copy_(buf.narrow(0, shard.offset()[i] - start, shard.numel()[i]).view(ps.get(i).sizes()));
                }
            });
            return;
        }
        try (PointerScope scope = new PointerScope(); NoGradGuard ng = new NoGradGuard()) {
            for (Map.Entry<String, Tensor> e : params.entrySet()) e.getValue().copy_(master.get(e.getKey()));
        }
    }

    /** Drops the gradients (accumulators and the parameters' own). */
    public void zeroGrad() {
        adam.zeroGrad();
        if (!mixed) return;
        try (PointerScope scope = new PointerScope()) {
            for (Tensor p : params.values()) {
                Tensor g = p.grad();
                if (g.defined()) g.detach_().zero_();
            }
            if (shard != null) {
                shard.gradChunk().zero_();
            } else {
                for (Tensor g : grad32.values()) g.zero_();
            }
        }
    }

    /** AdamW's moments by name (live views), as checkpoints store them; sharded: see {@link #gatherState}. */
    public Map<String, Tensor> state() {
        if (shard != null) throw new IllegalStateException("a sharded optimiser's state is gathered first (gatherState)");
        return adam.state();
    }

    /** The fp32 master weights by name (live), or null in full precision (the parameters are the masters). */
    public Map<String, Tensor> masterWeights() {
        if (shard != null) throw new IllegalStateException("a sharded optimiser's master weights are gathered first (gatherState)");
        return mixed ? master : null;
    }

    /** Whether checkpoints store master weights apart from the model's (reduced-precision weights with fp32 masters). */
    public boolean keepsMasterWeights() {
        return shard != null ? !isFloat32Model() : mixed;
    }

    private boolean isFloat32Model() {
        for (Tensor p : params.values()) return p.scalar_type().intern() == ScalarType.Float;
        return true;
    }

    /** What a checkpoint stores: moments by name, master weights by name (null when the model's weights are them), steps. */
    public record Snapshot(Map<String, Tensor> state, Map<String, Tensor> master, long steps) {
    }

    /**
     * The whole state by parameter name. Unsharded: live views. Sharded: a collective (every rank
     * must call it at the same point): rank 0 gets the moments and the masters as fresh host
     * tensors of the parameters' shapes, the whole state at once (tests compare it; checkpoints
     * stream it instead, {@link #gatherState(Pieces, Pieces)}); the other ranks take part and keep
     * nothing (an empty snapshot).
     */
    public Snapshot gatherState() {
        if (shard == null) return new Snapshot(adam.state(), mixed ? master : null, adam.steps());
        StateLayout layout = stateLayout();
        boolean root = shard.dist().isMaster();
        Map<String, Tensor> state = root ? hostTensors(layout.moments()) : Map.of();
        Map<String, Tensor> m = root && keepsMasterWeights() ? hostTensors(layout.masters()) : null;
        try {
            gatherState((name, first, values) -> state.get(name).view(-1).narrow(0, first, values.numel()).copy_(values),
                    (name, first, values) -> m.get(name).view(-1).narrow(0, first, values.numel()).copy_(values));
        } catch (java.io.IOException e) {
            throw new java.io.UncheckedIOException(e);  // (copies into memory throw none)
        }
        return new Snapshot(state, m, adam.steps());
    }

    /** fp32 host tensors of these shapes, by name, owned by the caller's scope. */
    private static Map<String, Tensor> hostTensors(Map<String, long[]> shapes) {
        Map<String, Tensor> out = new LinkedHashMap<>();
        org.bytedeco.pytorch.TensorOptions f32 = new org.bytedeco.pytorch.TensorOptions(ScalarType.Float);
        shapes.forEach((k, shape) -> out.put(k, torch.empty(shape, f32, null)));
        return out;
    }

    /**
     * Where rank 0 puts the state a sharded optimiser gathers: elements [first, first +
     * values.numel()) of tensor {@code name} flattened; {@code values} is fp32 on the CPU, valid
     * during the call only.
     */
    public interface Pieces {
        void put(String name, long first, Tensor values) throws java.io.IOException;
    }

    /**
     * What a sharded optimiser's gather delivers, by tensor name with its shape (all fp32): the
     * moments (as {@link #state} names them) and the masters by parameter name (empty where the
     * model's weights are the masters).
     */
    public record StateLayout(Map<String, long[]> moments, Map<String, long[]> masters) {
    }

    /** The tensors of {@link #gatherState(Pieces, Pieces)}, in the order it delivers them. */
    public StateLayout stateLayout() {
        if (shard == null) throw new IllegalStateException("an unsharded optimiser's state is not gathered (gatherState() gives it)");
        Map<String, long[]> moments = new LinkedHashMap<>(), masters = new LinkedHashMap<>();
        List<String> names = names();
        List<Tensor> ps = paramList();
        for (String prefix : List.of("exp_avg.", "exp_avg_sq.")) {
            for (int i = 0; i < names.size(); i++) moments.put(prefix + names.get(i), AdamW.shape(ps.get(i)));
        }
        if (keepsMasterWeights()) for (int i = 0; i < names.size(); i++) masters.put(names.get(i), AdamW.shape(ps.get(i)));
        return new StateLayout(Collections.unmodifiableMap(moments), Collections.unmodifiableMap(masters));
    }

    /**
     * Sharded: the whole state gathered to rank 0 piece by piece, a collective (every rank must call
     * it at the same point). On rank 0 each window's pieces go to {@code moments} and {@code
     * masters} as they arrive, so that no rank holds more of the state than a window (about
     * bucketBytes) beyond its own chunk; the other ranks take part and call neither (they may be
     * null; so may rank 0's, to take part only). Should {@code moments} or {@code masters} fail,
     * the gather goes on to its end without calling them again (the ranks' collectives stay
     * paired) and then throws that failure.
     */
    public void gatherState(Pieces moments, Pieces masters) throws java.io.IOException {
        if (shard == null) throw new IllegalStateException("an unsharded optimiser's state is not gathered (gatherState() gives it)");
        Map<String, Tensor> adamState = adam.state();
        Exception failed = gather("exp_avg.", adamState.get("exp_avg.chunk"), moments, null);
        failed = gather("exp_avg_sq.", adamState.get("exp_avg_sq.chunk"), moments, failed);
        if (keepsMasterWeights()) failed = gather("", master.get("chunk"), masters, failed);
        if (failed instanceof java.io.IOException e) throw e;
        if (failed instanceof RuntimeException e) throw e;
    }

    /**
     * The flat vector of which this rank holds [lo, hi) ({@code mine}), delivered to {@code sink}
     * on rank 0 cut at the parameters' bounds, as tensors {@code prefix + parameter name}. The
     * chunks are all-gathered a window at a time (the same offset in every rank's chunk, W windows
     * of about bucketBytes together): no rank allocates a buffer of the whole model, on the device
     * or the host. {@code failed}: an earlier failure of the sink, which is then no longer called;
     * returns the first failure, if any.
     */
    private Exception gather(String prefix, Tensor mine, Pieces sink, Exception failed) {
        boolean root = shard.dist().isMaster();
        int w = shard.dist().worldSize();
        List<String> names = names();
        try (PointerScope scope = new PointerScope(); NoGradGuard ng = new NoGradGuard()) {
            long window = Math.max(1, Math.min(shard.chunk(), shard.bucketBytes() / 4 / w));
            for (long off = 0; off < shard.chunk(); off += window) {
                long len = Math.min(window, shard.chunk() - off), real = Math.min(len, shard.owned() - off);
                try (PointerScope ws = new PointerScope()) {
                    Tensor piece = zerosF32(len, shard.masterChunk());
                    if (real > 0) piece.narrow(0, 0, real).copy_(mine.narrow(0, off, real));
                    Tensor full = zerosF32(len * w, piece);
                    shard.dist().allGather(piece, full, "the gather of the optimiser state");
                    if (!root || failed != null || sink == null) continue;
                    Tensor cpu;
                    try {
                        cpu = full.cpu();  // rank 0's alone: a failure here is the sink's, and the gather goes on
                    } catch (RuntimeException e) {
                        failed = e;
                        continue;
                    }
                    for (int r = 0; r < w && failed == null; r++) {
                        // piece r of the buffer is [start, start + len) of the flat vector
                        long start = r * shard.chunk() + off, at = r * len;
                        try {
                            long end = Math.min(start + len, shard.total());
                            for (int p = 0; p < shard.offset().length; p++) {  // (overlaps(), with the sink's IOException)
                                long a = Math.max(start, shard.offset()[p]), b = Math.min(end, shard.offset()[p] + shard.numel()[p]);
                                if (a < b) sink.put(prefix + names.get(p), a - shard.offset()[p], cpu.narrow(0, at + a - start, b - a));
                            }
                        } catch (java.io.IOException | RuntimeException e) {
                            failed = e;
                        }
                    }
                }
            }
        }
        return failed;
    }

    /**
     * Restores AdamW's moments (by name, whole tensors as {@link #gatherState} gives them) and the
     * step count; sharded, each rank takes its part of every tensor.
     */
    public void load(Map<String, Tensor> state, long steps) {
        if (shard == null) {
            adam.load(state, steps);
            return;
        }
        load(StateSource.of(state), steps);
    }

    /**
     * Whole tensors by name, of which a sharded optimiser reads only its own part (from a mapped
     * checkpoint file: only that part of it is read).
     */
    public interface StateSource {
        /** The shape of tensor {@code name}, or null when there is none. */
        long[] shape(String name);

        /** Copies elements [first, first + into.numel()) of tensor {@code name}, flattened, into {@code into}. */
        void read(String name, long first, Tensor into);

        /** Tensors in memory. */
        static StateSource of(Map<String, Tensor> byName) {
            return new StateSource() {
                @Override
                public long[] shape(String name) {
                    Tensor t = byName.get(name);
                    return t == null ? null : AdamW.shape(t);
                }

                @Override
                public void read(String name, long first, Tensor into) {
                    into.copy_(byName.get(name).reshape(-1).narrow(0, first, into.numel()));
                }
            };
        }
    }

    /**
     * Restores AdamW's moments from {@code state} and the step count, read straight into the live
     * moments (a mapped checkpoint file: no copy of a whole moment, let alone of all of them, on the
     * way); sharded, this rank's part of each.
     */
    public void load(StateSource state, long steps) {
        Map<String, Tensor> adamState = adam.state();
        try (PointerScope scope = new PointerScope(); NoGradGuard ng = new NoGradGuard()) {
            // both moments checked before either changes; then read straight into the live state
            checkState(state);
            if (shard != null) {
                readOwn("exp_avg.", state, adamState.get("exp_avg.chunk"));
                readOwn("exp_avg_sq.", state, adamState.get("exp_avg_sq.chunk"));
            } else {
                readWhole("exp_avg.", state, adamState);
                readWhole("exp_avg_sq.", state, adamState);
            }
            adam.restoreSteps(steps);
        }
    }

    /**
     * Unsharded: reads every tensor {@code prefix + name} of {@code source} into {@code live}'s
     * tensor of that name, one at a time (the source's temporaries freed before the next).
     */
    private void readWhole(String prefix, StateSource source, Map<String, Tensor> live) {
        for (String name : params.keySet()) {
            try (PointerScope ts = new PointerScope()) {
                source.read(prefix + name, 0, live.get(prefix + name));
            }
        }
    }

    /**
     * Every tensor {@code prefix + name} is in {@code source} with its parameter's shape: all of them,
     * not only this rank's, so that every rank stops alike rather than one waiting for the others.
     */
    private void checkShapes(String prefix, StateSource source) {
        List<String> names = names();
        List<Tensor> ps = paramList();
        for (int i = 0; i < names.size(); i++) {
            long[] shape = source.shape(prefix + names.get(i));
            if (shape == null) throw new IllegalArgumentException((prefix.isEmpty() ? "the master weights have" : "optimizer state has")
                    + " no tensor " + prefix + names.get(i));
            // the whole shape: a transposed [64, 32] has the element count of a [32, 64] and would load scrambled
            if (!java.util.Arrays.equals(shape, AdamW.shape(ps.get(i)))) {
                throw new IllegalArgumentException((prefix.isEmpty() ? "master weight " : "optimizer state ") + prefix + names.get(i)
                        + " has shape " + java.util.Arrays.toString(shape) + ", the parameter has "
                        + java.util.Arrays.toString(AdamW.shape(ps.get(i))));
            }
        }
    }

    /**
     * Reads this rank's part [lo, hi) of the flat vector of the tensors {@code prefix + name} into
     * {@code into} (its [0, hi − lo)), a window of about bucketBytes at a time, so that a device
     * chunk takes no host copy of a whole parameter on its way.
     */
    private void readOwn(String prefix, StateSource source, Tensor into) {
        List<String> names = names();
        long window = Math.max(1, shard.bucketBytes() / 4);
        overlaps(shard.lo(), shard.hi(), (i, flatStart, paramStart, len) -> {
            for (long k = 0; k < len; k += window) {
                try (PointerScope ws = new PointerScope()) {
                    long n = Math.min(window, len - k);
                    source.read(prefix + names.get(i), paramStart + k, into.narrow(0, flatStart - shard.lo() + k, n));
                }
            }
        });
    }

    /**
     * Restores the fp32 master weights (mixed precision) from {@code weights} by name and rounds
     * them into the model's weights, so that a resumed run continues from the exact masters.
     */
    public void loadMasterWeights(Map<String, Tensor> weights) {
        if (!mixed) throw new IllegalStateException("full precision keeps no master weights");
        if (shard != null) {
            loadMasterWeights(StateSource.of(weights));
            return;
        }
        try (PointerScope scope = new PointerScope(); NoGradGuard ng = new NoGradGuard()) {
            for (Map.Entry<String, Tensor> e : master.entrySet()) {
                Tensor t = weights.get(e.getKey());
                if (t == null) throw new IllegalArgumentException("the master weights have no tensor " + e.getKey());
                if (!java.util.Arrays.equals(AdamW.shape(t), AdamW.shape(e.getValue()))) {
                    throw new IllegalArgumentException("master weight " + e.getKey() + " has shape "
                            + java.util.Arrays.toString(AdamW.shape(t)) + ", the parameter has "
                            + java.util.Arrays.toString(AdamW.shape(e.getValue())));
                }
                e.getValue().copy_(t);
            }
        }
        publish();
    }

    /**
     * Restores the fp32 master weights from {@code weights}, read straight into the live masters,
     * and rounds them into the model's weights; sharded, this rank's part of each, spread over
     * every rank's weights (a collective: every rank calls it at the same point, so a sharded
     * resume checks its files first, {@link #checkMasterWeights}, and meets the others at a ready
     * point before it: a rank that failed here would leave them in the spreading until
     * distributed.timeout_s).
     */
    public void loadMasterWeights(StateSource weights) {
        checkMasterWeights(weights);
        try (PointerScope scope = new PointerScope(); NoGradGuard ng = new NoGradGuard()) {
            if (shard != null) readOwn("", weights, master.get("chunk"));
            else readWhole("", weights, master);
        }
        publish("the resume's spreading of the master weights over every rank's weights");
    }

    /**
     * Whether {@link #loadMasterWeights(StateSource)} can take {@code weights}: every tensor there,
     * of its parameter's shape (all of them, not only this rank's part); throws naming what is not.
     */
    public void checkMasterWeights(StateSource weights) {
        if (!mixed) throw new IllegalStateException("full precision keeps no master weights");
        checkShapes("", weights);
    }

    /** Whether {@link #load(StateSource, long)} can take {@code state}: both moments of every parameter, of its shape. */
    public void checkState(StateSource state) {
        checkShapes("exp_avg.", state);
        checkShapes("exp_avg_sq.", state);
    }

    /** Sharded: the group whose ranks share this optimiser (its resume is a collective); else null. */
    Collective shardGroup() {
        return shard == null ? null : shard.dist();
    }

    /**
     * Makes the masters the model's present weights again (mixed precision; nothing otherwise):
     * after something else changed the weights in place (the warm start's own optimiser).
     */
    public void reloadFromWeights() {
        if (!mixed) return;
        if (shard != null) {
            List<Tensor> ps = paramList();
            try (PointerScope scope = new PointerScope(); NoGradGuard ng = new NoGradGuard()) {
                Tensor m = master.get("chunk");
                overlaps(shard.lo(), shard.hi(), (i, flatStart, paramStart, len) -> m.narrow(0, flatStart - shard.lo(), len)
                        .copy_(ps.get(i).detach().reshape(-1).narrow(0, paramStart, len)));
            }
            return;
        }
        try (PointerScope scope = new PointerScope(); NoGradGuard ng = new NoGradGuard()) {
            for (Map.Entry<String, Tensor> e : params.entrySet()) master.get(e.getKey()).copy_(e.getValue());
        }
    }

    /**
     * Sets the fp32 masters (mixed precision) to the values of {@code weights} by name and leaves the
     * model's weights as they are, which must be those values rounded already (the model was loaded
     * from the same files): so nothing is spread and, sharded, nothing is a collective, each rank
     * reading its own part. Files that hold more than the model's dtype (fp32 weights of a bf16
     * model) so give the masters their exact values, where {@link #create} gives them the rounding.
     */
    public void startMastersFrom(StateSource weights) {
        checkMasterWeights(weights);
        try (PointerScope scope = new PointerScope(); NoGradGuard ng = new NoGradGuard()) {
            if (shard != null) readOwn("", weights, master.get("chunk"));
            else readWhole("", weights, master);
        }
    }

    /** Bytes of the optimiser state this rank holds: AdamW's moments and the fp32 master weights (not the model's own weights). */
    public long stateBytes() {
        long b = 0;
        for (Tensor t : adam.state().values()) b += t.numel() * t.element_size();
        if (mixed) for (Tensor t : master.values()) b += t.numel() * t.element_size();
        return b;
    }

    @Override
    public void close() {
        if (ownsAdam) adam.close();
        if (!mixed) return;
        for (Tensor t : master.values()) t.releaseReference();
        for (Tensor t : grad32.values()) t.releaseReference();
        if (shard != null) {
            shard.gradChunk().releaseReference();
            shard.masterChunk().releaseReference();
        }
    }
}

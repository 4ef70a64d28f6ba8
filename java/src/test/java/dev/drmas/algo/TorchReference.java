// TorchReference.java — drmas's kernels (segment statistics, advantage normalisation, row
// broadcast, clipped PPO loss) composed from plain vectorised LibTorch ops, with autograd giving
// dL/dlogp: the oracle the native kernels are compared with, and the benchmarks' baseline.
package dev.drmas.algo;

import dev.drmas.model.Scopes;
import org.bytedeco.javacpp.PointerScope;
import org.bytedeco.pytorch.Scalar;
import org.bytedeco.pytorch.ScalarOptional;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.TensorOptions;
import org.bytedeco.pytorch.global.torch;
import org.bytedeco.pytorch.global.torch.ScalarType;

/**
 * The semantics of ARCHITECTURE §5/§6 (and drmas.h) written as LibTorch tensor programs:
 * segment reductions are {@code index_add_} over ids, per-row lookups {@code index_select},
 * policies {@code where}; there is no per-element Java loop. Inputs live on the CPU: float32
 * values, int32 or int64 ids, int64 row offsets, bool or uint8 masks. Statistics are computed in
 * float64; the per-token loss in the dtype of {@code logp} (float32, as the native kernel), its
 * sums in float64.
 *
 * <p>Memory (JavaCPP): every {@link Tensor}, {@link Scalar}, {@link TensorOptions} Java object
 * owns a native handle (an {@code at::Tensor} is itself a ref-counted pointer to storage).
 * Each public method runs in its own {@link PointerScope}, so all its intermediates are released
 * when it returns; the results are retained past that scope and then attached to the caller's
 * innermost {@code PointerScope} (if there is none, the garbage collector frees them). Callers
 * should therefore wrap loops in {@code try (PointerScope s = new PointerScope()) { ... }}.
 * In-place ops and {@code grad()} return non-owning aliases (JavaCPP {@code @ByRef}); they are
 * never handed out — results come from by-value ops ({@code detach()} for the gradient).
 * The autograd graph keeps its own references to saved tensors, so a loss returned by
 * {@link #clippedLossTensor} can be back-propagated after its intermediates' handles are gone.
 */
public final class TorchReference {
    private TorchReference() {
    }

    /** Per-segment statistics: count (int64), mean, m2, std (float64); empty segments are 0. */
    public record Stats(Tensor count, Tensor mean, Tensor m2, Tensor std) {
    }

    /** dL/dlogp (dtype of logp, 0 for invalid tokens) and the aggregated loss. */
    public record LossResult(Tensor grad, double loss) {
    }

    // ------------------------------------------------------------------ segment statistics

    /**
     * count, mean, M2 = Σ(x − mean)² and std = sqrt(M2 / (count − ddof)) (0 when count ≤ ddof)
     * of {@code values} grouped by {@code ids} in [0, numSegments); computed in float64.
     */
    public static Stats segmentStats(Tensor values, Tensor ids, long numSegments, boolean unbiased) {
        Stats s;
        try (PointerScope scope = new PointerScope()) {
            Stats t = stats(values.to(ScalarType.Double), ids.to(ScalarType.Long), numSegments, unbiased ? 1 : 0);
            s = new Stats(Scopes.retain(t.count().to(ScalarType.Long)), Scopes.retain(t.mean()), Scopes.retain(t.m2()), Scopes.retain(t.std()));
        }
        return new Stats(Scopes.adopt(s.count()), Scopes.adopt(s.mean()), Scopes.adopt(s.m2()), Scopes.adopt(s.std()));
    }

    /** Statistics of float64 {@code x} over int64 {@code ids}; count stays float64 here. */
    private static Stats stats(Tensor x, Tensor ids, long numSegments, int ddof) {
        Tensor count = zeros(numSegments, ScalarType.Double);
        count.index_add_(0, ids, torch.ones_like(x));
        Tensor denom = count.clamp_min(s(1.0)); // empty segments: sum 0 / 1 = mean 0
        Tensor sum = zeros(numSegments, ScalarType.Double);
        sum.index_add_(0, ids, x);
        Tensor mean0 = sum.div(denom);
        // Second pass (the two-pass method): mean += Σ(x − mean)/n. Besides refining the mean,
        // it makes a constant segment's mean exactly its value (the residuals are exact), so
        // its M2 and std are exactly 0, as the spec requires.
        Tensor resid = zeros(numSegments, ScalarType.Double);
        resid.index_add_(0, ids, x.sub(mean0.index_select(0, ids)));
        Tensor mean = mean0.add(resid.div(denom));
        Tensor dev = x.sub(mean.index_select(0, ids));
        Tensor m2 = zeros(numSegments, ScalarType.Double);
        m2.index_add_(0, ids, dev.mul(dev));
        Tensor std = torch.where(count.gt(s(ddof)),
                m2.div(count.sub(s(ddof)).clamp_min(s(1.0))).sqrt(), s(0.0));
        return new Stats(count, mean, m2, std);
    }

    // ------------------------------------------------------------------ advantages

    /**
     * Advantages of rows (scores, uid, traj, agent) under {@code c} (ARCHITECTURE §5), float32.
     * {@code traj} may be null under ROWS pooling. Ids are int32 or int64.
     */
    public static Tensor advantages(NormConfig c, Tensor scores, Tensor uid, Tensor traj, Tensor agent,
                                    long numUids, long numTrajs, long numAgents) {
        Tensor out;
        try (PointerScope scope = new PointerScope()) {
            out = Scopes.retain(advantagesImpl(c, scores, uid, traj, agent, numUids, numTrajs, numAgents));
        }
        return Scopes.adopt(out);
    }

    private static Tensor advantagesImpl(NormConfig c, Tensor scores, Tensor uid, Tensor traj, Tensor agent,
                                         long numUids, long numTrajs, long numAgents) {
        int ddof = c.unbiased() ? 1 : 0;
        boolean trajPooling = c.globalPooling() == GlobalPooling.TRAJECTORIES;
        if (trajPooling && traj == null) throw new IllegalArgumentException("traj is required with trajectory pooling");
        Tensor x = scores.to(ScalarType.Double);
        Tensor u = uid.to(ScalarType.Long);

        // agent segments (u, k) -> u*K + k, statistics over rows
        Tensor seg = u.mul(s(numAgents)).add(agent.to(ScalarType.Long));
        Stats a = stats(x, seg, numUids * numAgents, ddof);
        Tensor aCount = a.count().index_select(0, seg);
        Tensor aMean = a.mean().index_select(0, seg);
        Tensor aStd = a.std().index_select(0, seg);

        // group segments: over the trajectory means S_t of u's non-empty trajectories, or its rows
        Tensor num = x;
        Stats g;
        if (trajPooling) {
            Tensor t = traj.to(ScalarType.Long);
            Stats ts = stats(x, t, numTrajs, ddof);             // S_t = ts.mean (0 when empty)
            Tensor trajUid = zeros(numTrajs, ScalarType.Long);
            trajUid.scatter_(0, t, u);                          // every row of t carries t's uid
            // empty trajectories go to a spare segment numUids that no row reads
            Tensor gid = torch.where(ts.count().gt(s(0.0)), trajUid, s(numUids));
            g = stats(ts.mean(), gid, numUids + 1, ddof);
            if (c.mode().trajectoryNumerator()) num = ts.mean().index_select(0, t);
        } else {
            g = stats(x, u, numUids, ddof);
        }
        Tensor gCount = g.count().index_select(0, u);
        Tensor gMean = g.mean().index_select(0, u);
        Tensor gStd = g.std().index_select(0, u);

        Tensor singleA = aCount.eq(s(1.0));
        Tensor singleG = gCount.eq(s(1.0));
        boolean am = c.mode().agentMean(), as = c.mode().agentStd(), scale = c.scaleByStd();
        Tensor mean, std, zero;
        switch (c.singleton()) {
            case FALLBACK -> {
                // a single agent segment is replaced by its group; a single group that ends up
                // used (for the mean, or for the std when scaling) gives A = 0
                mean = am ? torch.where(singleA, gMean, aMean) : gMean;
                std = as ? torch.where(singleA, gStd, aStd) : gStd;
                boolean groupForEveryRow = !am || (scale && !as);
                zero = groupForEveryRow ? singleG : singleG.logical_and(singleA);
            }
            case ZERO -> {
                mean = am ? aMean : gMean;
                std = as ? aStd : gStd;
                zero = am ? singleA : singleG;
                if (scale) zero = zero.logical_or(as ? singleA : singleG);
            }
            case RAW -> {
                mean = torch.where(am ? singleA : singleG, s(0.0), am ? aMean : gMean);
                std = torch.where(as ? singleA : singleG, s(1.0), as ? aStd : gStd);
                zero = null;
            }
            default -> throw new AssertionError(c.singleton());
        }
        Tensor diff = num.sub(mean);
        Tensor adv = scale
                ? torch.where(diff.eq(s(0.0)), s(0.0), diff.div(std.add(s(c.eps()))))
                : diff;
        if (zero != null) adv = torch.where(zero, s(0.0), adv);
        return adv.to(ScalarType.Float);
    }

    // ------------------------------------------------------------------ broadcast

    /** token[t] = rowValues[r] for offsets[r] ≤ t < offsets[r+1]; 0 for tokens no row owns. */
    public static Tensor broadcastRows(Tensor rowValues, Tensor offsets, long numTokens) {
        Tensor out;
        try (PointerScope scope = new PointerScope()) {
            long rows = offsets.numel() - 1;
            Tensor padded = zeros(rows + 1, rowValues.scalar_type()); // slot `rows` = "no row" = 0
            padded.narrow(0, 0, rows).copy_(rowValues);
            out = Scopes.retain(padded.index_select(0, tokenRows(offsets, numTokens)));
        }
        return Scopes.adopt(out);
    }

    /**
     * The row of each token (int64): r with offsets[r] ≤ t < offsets[r+1], or R = numRows for
     * tokens outside every row. bucketize(right) counts the offsets ≤ t, so empty rows (equal
     * offsets) are skipped.
     */
    private static Tensor tokenRows(Tensor offsets, long numTokens) {
        long rows = offsets.numel() - 1;
        Tensor off = offsets.to(ScalarType.Long).contiguous();
        Tensor pos = torch.arange(new Scalar(numTokens), new TensorOptions(ScalarType.Long));
        Tensor r = torch.bucketize(pos, off, false, true).sub(s(1L)); // in [-1, R]
        return torch.where(r.lt(s(0L)), s(rows), r);
    }

    // ------------------------------------------------------------------ loss

    /**
     * The loss of ARCHITECTURE §6 by autograd: returns dL/dlogp (logp's dtype) and L.
     * {@code logp} is copied into a fresh leaf, so the caller's tensor is left untouched.
     */
    public static LossResult clippedLoss(LossConfig c, double normalizer, Tensor offsets, Tensor logp,
                                         Tensor old, Tensor adv, Tensor ref, Tensor mask) {
        Tensor grad;
        double loss;
        try (PointerScope scope = new PointerScope()) {
            Tensor leaf = logp.detach().clone();
            leaf.set_requires_grad(true);
            Tensor l = clippedLossTensor(c, normalizer, offsets, leaf, old, adv, ref, mask);
            l.backward();
            loss = l.item_double();
            grad = Scopes.retain(leaf.grad().detach()); // grad() is an alias (@ByRef); detach() owns a handle
        }
        return new LossResult(Scopes.adopt(grad), loss);
    }

    /**
     * The scalar loss L as a differentiable function of {@code logp} (which may come out of a
     * model). Invalid tokens (outside every row, or mask false) contribute nothing even if they
     * hold NaN: every input is routed through where() before any arithmetic, so neither the value
     * nor the gradient sees them (a multiply by 0 would turn NaN into NaN).
     */
    public static Tensor clippedLossTensor(LossConfig c, double normalizer, Tensor offsets, Tensor logp,
                                           Tensor old, Tensor adv, Tensor ref, Tensor mask) {
        Tensor out;
        try (PointerScope scope = new PointerScope()) {
            out = Scopes.retain(lossImpl(c, normalizer, offsets, logp, old, adv, ref, mask));
        }
        return Scopes.adopt(out);
    }

    private static Tensor lossImpl(LossConfig c, double normalizer, Tensor offsets, Tensor logp,
                                   Tensor old, Tensor adv, Tensor ref, Tensor mask) {
        long numTokens = logp.numel();
        long rows = offsets.numel() - 1;
        Tensor row = tokenRows(offsets, numTokens);
        Tensor valid = row.lt(s(rows));
        if (mask != null) valid = valid.logical_and(mask.to(ScalarType.Bool));
        Tensor lp = torch.where(valid, logp, s(0.0));
        Tensor o = torch.where(valid, old, s(0.0));
        Tensor a = torch.where(valid, adv, s(0.0));

        Tensor ratio = lp.sub(o).clamp(opt(-20.0), opt(20.0)).exp();
        Tensor negA = a.neg();
        Tensor pg1 = negA.mul(ratio);
        Tensor pg2 = negA.mul(ratio.clamp(opt(1.0 - c.clipLow()), opt(1.0 + c.clipHigh())));
        Tensor pg = torch.maximum(pg1, pg2);
        if (c.dualClip() > 0) {
            pg = torch.where(a.lt(s(0.0)), torch.minimum(pg, negA.mul(s(c.dualClip()))), pg);
        }
        Tensor l = pg;
        if (ref != null && c.kl() != KlEstimator.NONE) {
            Tensor rf = torch.where(valid, ref, s(0.0));
            Tensor kl = switch (c.kl()) {
                case K1 -> lp.sub(rf);
                case K2 -> lp.sub(rf).square().mul(s(0.5));
                case K3 -> {
                    Tensor d = rf.sub(lp).clamp(opt(-20.0), opt(20.0));
                    yield d.exp().sub(d).sub(s(1.0)).clamp(opt(-10.0), opt(10.0));
                }
                case NONE -> throw new AssertionError();
            };
            l = l.add(kl.mul(s(c.klCoef())));
        }
        // sums accumulate in float64 (as the native kernel's sums); autograd casts the gradient
        // back to logp's dtype
        Tensor lv = torch.where(valid, l, s(0.0)).to(ScalarType.Double);
        Tensor total;
        if (c.aggregation().perRowMean()) {
            // per-row sums and valid counts; the spare row `rows` collects nothing
            Tensor rowSum = zeros(rows + 1, ScalarType.Double);
            rowSum.index_add_(0, row, lv);
            Tensor n = zeros(rows + 1, ScalarType.Double);
            n.index_add_(0, row, valid.to(ScalarType.Double));
            // clamp_min keeps 0/0 out of the graph (where() would pass its NaN gradient on)
            total = torch.where(n.gt(s(0.0)), rowSum.div(n.clamp_min(s(1.0))), s(0.0)).sum();
        } else {
            total = lv.sum(); // the other aggregations differ only in their normaliser
        }
        return total.div(s(normalizer));
    }

    // ------------------------------------------------------------------ Java arrays <-> tensors

    /** A new float32 CPU tensor holding a copy of {@code a}. */
    public static Tensor floats(float... a) {
        Tensor t;
        try (PointerScope scope = new PointerScope()) {
            t = Scopes.retain(empty(a.length, ScalarType.Float));
            if (a.length > 0) t.data_ptr_float().put(a); // data_ptr of an empty tensor is null
        }
        return Scopes.adopt(t);
    }

    public static Tensor doubles(double... a) {
        Tensor t;
        try (PointerScope scope = new PointerScope()) {
            t = Scopes.retain(empty(a.length, ScalarType.Double));
            if (a.length > 0) t.data_ptr_double().put(a); // data_ptr of an empty tensor is null
        }
        return Scopes.adopt(t);
    }

    /** A new int32 CPU tensor. */
    public static Tensor ints(int... a) {
        Tensor t;
        try (PointerScope scope = new PointerScope()) {
            t = Scopes.retain(empty(a.length, ScalarType.Int));
            if (a.length > 0) t.data_ptr_int().put(a); // data_ptr of an empty tensor is null
        }
        return Scopes.adopt(t);
    }

    /** A new int64 CPU tensor. */
    public static Tensor longs(long... a) {
        Tensor t;
        try (PointerScope scope = new PointerScope()) {
            t = Scopes.retain(empty(a.length, ScalarType.Long));
            if (a.length > 0) t.data_ptr_long().put(a); // data_ptr of an empty tensor is null
        }
        return Scopes.adopt(t);
    }

    /** A new bool CPU tensor. */
    public static Tensor bools(boolean... a) {
        byte[] b = new byte[a.length];
        for (int i = 0; i < a.length; i++) b[i] = (byte) (a[i] ? 1 : 0);
        Tensor t;
        try (PointerScope scope = new PointerScope()) {
            Tensor u8 = empty(a.length, ScalarType.Byte);
            if (b.length > 0) u8.data_ptr_byte().put(b);
            t = Scopes.retain(u8.to(ScalarType.Bool));
        }
        return Scopes.adopt(t);
    }

    public static float[] toFloats(Tensor t) {
        try (PointerScope scope = new PointerScope()) {
            Tensor c = t.detach().to(ScalarType.Float).contiguous();
            float[] a = new float[size(c)];
            if (a.length > 0) c.data_ptr_float().get(a);
            return a;
        }
    }

    public static double[] toDoubles(Tensor t) {
        try (PointerScope scope = new PointerScope()) {
            Tensor c = t.detach().to(ScalarType.Double).contiguous();
            double[] a = new double[size(c)];
            if (a.length > 0) c.data_ptr_double().get(a);
            return a;
        }
    }

    public static int[] toInts(Tensor t) {
        try (PointerScope scope = new PointerScope()) {
            Tensor c = t.detach().to(ScalarType.Int).contiguous();
            int[] a = new int[size(c)];
            if (a.length > 0) c.data_ptr_int().get(a);
            return a;
        }
    }

    public static long[] toLongs(Tensor t) {
        try (PointerScope scope = new PointerScope()) {
            Tensor c = t.detach().to(ScalarType.Long).contiguous();
            long[] a = new long[size(c)];
            if (a.length > 0) c.data_ptr_long().get(a);
            return a;
        }
    }

    public static boolean[] toBooleans(Tensor t) {
        byte[] b;
        try (PointerScope scope = new PointerScope()) {
            Tensor c = t.detach().to(ScalarType.Byte).contiguous();
            b = new byte[size(c)];
            if (b.length > 0) c.data_ptr_byte().get(b);
        }
        boolean[] a = new boolean[b.length];
        for (int i = 0; i < b.length; i++) a[i] = b[i] != 0;
        return a;
    }

    // ------------------------------------------------------------------ internals

    private static int size(Tensor t) {
        long n = t.numel();
        if (n > Integer.MAX_VALUE) throw new IllegalArgumentException("tensor too large for a Java array: " + n);
        return (int) n;
    }

    private static Tensor empty(long n, ScalarType type) {
        return torch.empty(new long[]{n}, new TensorOptions(type), null);
    }

    private static Tensor zeros(long n, ScalarType type) {
        return torch.zeros(new long[]{n}, new TensorOptions(type));
    }

    private static Scalar s(double v) {
        return new Scalar(v);
    }

    private static Scalar s(long v) {
        return new Scalar(v);
    }

    private static ScalarOptional opt(double v) {
        return new ScalarOptional(new Scalar(v));
    }
}

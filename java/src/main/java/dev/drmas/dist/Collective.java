// Collective.java — the few collective operations data-parallel training needs (sums of numbers and
// of tensors, a barrier, a cross-rank equality check, and a barrier at which one rank's failure stops
// every rank with its reason), behind one interface so that the trainer runs
// the same code on one process (every operation a no-op) and on many (c10d, see ProcessGroup).
package dev.drmas.dist;

import dev.drmas.model.Scopes;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import org.bytedeco.javacpp.PointerScope;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.global.torch;

public interface Collective extends AutoCloseable {
    int rank();

    int worldSize();

    /** Sums {@code x} element-wise over the ranks, in place. {@code what} names the call in errors. */
    void sum(double[] x, String what);

    /**
     * Sums the tensors over the ranks, in place: flattened into buckets (one dtype and device per
     * bucket), a few of them in flight at a time (see {@link #sumEach}), one operation.
     */
    void sumTensors(List<Tensor> tensors, String what);

    /**
     * The buckets of {@link #sumEach}: bucket i is made when its turn comes and handed back summed,
     * so that only the buckets in flight exist at once.
     */
    interface Buckets {
        int count();

        /** What bucket i holds, for errors ("parameters 10..19"). */
        String name(int i);

        /**
         * Bucket i: a contiguous tensor (one dtype, on the group's device), summed in place. What
         * else make allocates is freed when it returns; the bucket itself after {@link #done}.
         */
        Tensor make(int i);

        /** Bucket i, summed over the ranks (the tensor {@link #make} gave), in order of i. */
        void done(int i, Tensor summed);
    }

    /**
     * Sums a sequence of buckets over the ranks, in place, as one operation: bucket i + 1 (up to a
     * few ahead) is made and its sum started before bucket i's is awaited, so that making a bucket
     * and the waits overlap the transfers, while memory holds a few buckets, not all of them. The
     * element-wise sums are those of one bucket at a time: the results do not depend on the window.
     * Every rank must call it with the same number of buckets of the same sizes.
     */
    void sumEach(String what, Buckets buckets);

    /**
     * All-gather into a flat buffer (ZeRO's updated weights): {@code full} is 1-D and holds
     * {@code worldSize()} equal chunks of {@code chunk.numel()} elements; chunk r becomes rank r's
     * {@code chunk}. Both on one device, one dtype.
     */
    void allGather(Tensor chunk, Tensor full, String what);

    /** Returns when every rank has called it. */
    void barrier(String what);

    /**
     * A barrier for the steps each rank takes on its own before the next collective operation
     * (opening files, checks): returns when every rank has got here. When a rank announced instead
     * that it failed ({@link #announceFailure}), every rank waiting here, or coming here later,
     * throws a DistributedException naming that rank and its reason, within moments instead of
     * waiting in the next collective until distributed.timeout_s (a collective only sees a rank
     * that does not come, not why; and NCCL's may not even see a rank whose process ended). Bounded
     * by distributed.timeout_s, as a barrier, for a rank that neither comes nor says why; sooner for one
     * whose process died (ProcessGroup: its heartbeat in the store stops). Every rank must make the
     * same calls in the same order.
     */
    void awaitReady(String what);

    /**
     * Tells the other ranks that this rank stops, and why ({@code what} it was doing and {@code
     * cause}): those in {@link #awaitReady}, or waiting in a collective operation this rank will not
     * join (ProcessGroup looks about once a second), stop too, naming it. Call it before rethrowing; it never
     * throws. Rank 0, whose store carries the message, waits (briefly: at most 30 s) until the other
     * ranks have read it, or its process would take the message with it.
     */
    void announceFailure(String what, Throwable cause);

    /** Seconds this process has spent inside collective calls so far (waiting included). */
    double collectiveSeconds();

    @Override
    void close();

    /** The one-process collective: sums of one term, a barrier of one. */
    static Collective single() {
        return Single.INSTANCE;
    }

    default boolean isMaster() {
        return rank() == 0;
    }

    /** Whether {@code mine} holds on any rank, which every rank learns alike (one sum; none on a single process). */
    default boolean any(boolean mine, String what) {
        if (worldSize() == 1) return mine;
        double[] x = {mine ? 1 : 0};
        sum(x, what);
        return x[0] > 0;
    }

    /** Every rank's {@code mine}, indexed by rank (one sum of a vector with a slot per rank). */
    default double[][] gather(double[] mine, String what) {
        int w = worldSize(), n = mine.length;
        double[] all = new double[w * n];
        System.arraycopy(mine, 0, all, rank() * n, n);
        sum(all, what);
        double[][] out = new double[w][];
        for (int r = 0; r < w; r++) out[r] = Arrays.copyOfRange(all, r * n, (r + 1) * n);
        return out;
    }

    /**
     * Sums the gradients of {@code params} over the ranks. A parameter without a gradient on this
     * rank (its share of the mini-batch was empty) gets a zero one first, so every rank sends the
     * same buffers.
     */
    default void sumGradients(Map<String, Tensor> params, String what) {
        if (worldSize() == 1) return;
        try (PointerScope scope = new PointerScope()) {
            List<Tensor> grads = new ArrayList<>(params.size());
            for (Tensor p : params.values()) {
                if (!p.grad().defined()) p.mutable_grad().put(torch.zeros_like(p));
                grads.add(p.grad());
            }
            sumTensors(grads, what);
        }
    }

    /**
     * Stops the run when ranks disagree: every rank's {@code values} (a checksum) must equal rank
     * 0's within {@code rtol}, relative. All ranks throw alike, naming the ranks that differ.
     */
    default void requireSame(double[] values, double rtol, String what) {
        requireSame(values, rtol, what, SAME_WEIGHTS);
    }

    /** Why ranks must hold the same weights, for the message of a weight checksum that differs. */
    String SAME_WEIGHTS = "every rank must hold the same weights after each optimiser step; a rank that computed "
            + "differently —other threads, other library, a bug— makes the run meaningless, so it stops";

    /** As above, with {@code why} (what the check protects, for the message) in place of the weights' explanation. */
    default void requireSame(double[] values, double rtol, String what, String why) {
        if (worldSize() == 1) return;
        requireSame(gather(values, what), rtol, what, why);
    }

    /** The check of requireSame on values every rank has gathered already ({@link #gather}, indexed by rank). */
    static void requireSame(double[][] all, double rtol, String what, String why) {
        double[] values = all[0];
        StringBuilder diff = new StringBuilder();
        for (int r = 1; r < all.length; r++) {
            for (int i = 0; i < values.length; i++) {
                double a = all[0][i], b = all[r][i];
                if (!(Math.abs(a - b) <= rtol * Math.max(Math.abs(a), Math.abs(b)))) {
                    diff.append(String.format("%n  rank %d: %s[%d] = %.17g, rank 0: %.17g", r, what, i, b, a));
                }
            }
        }
        if (!diff.isEmpty()) {
            throw new DistributedException("the ranks diverged: " + what + " differs between ranks" + diff + "\n  (" + why + ")");
        }
    }

    /** One process: nothing to exchange. */
    final class Single implements Collective {
        static final Single INSTANCE = new Single();

        private Single() {
        }

        @Override
        public int rank() {
            return 0;
        }

        @Override
        public int worldSize() {
            return 1;
        }

        @Override
        public void sum(double[] x, String what) {
        }

        @Override
        public void sumTensors(List<Tensor> tensors, String what) {
        }

        @Override
        public void sumEach(String what, Buckets buckets) {
            // a sum of one term: each bucket is made (its temporaries freed) and handed back as it is
            for (int i = 0; i < buckets.count(); i++) {
                try (PointerScope scope = new PointerScope()) {
                    Tensor t;
                    try (PointerScope making = new PointerScope()) {
                        t = Scopes.retain(new Tensor(buckets.make(i)));
                    }
                    buckets.done(i, Scopes.adopt(t));
                }
            }
        }

        @Override
        public void allGather(Tensor chunk, Tensor full, String what) {
            full.copy_(chunk);
        }

        @Override
        public void barrier(String what) {
        }

        @Override
        public void awaitReady(String what) {
        }

        @Override
        public void announceFailure(String what, Throwable cause) {
        }

        @Override
        public double collectiveSeconds() {
            return 0;
        }

        @Override
        public void close() {
        }
    }
}

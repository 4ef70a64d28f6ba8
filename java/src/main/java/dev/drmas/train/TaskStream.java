// TaskStream.java — the training tasks in the order a run consumes them: a seeded permutation per
// pass over the data, and the position (tasks consumed), which checkpoints save so that a resumed
// run draws exactly the tasks an uninterrupted one would.
package dev.drmas.train;

import dev.drmas.env.Task;
import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;

final class TaskStream {
    private final List<Task> tasks;
    private final long seed;
    private long position;
    private long permSeed = Long.MIN_VALUE;
    private int[] perm;  // only the current pass's permutation is kept

    TaskStream(List<Task> tasks, long runSeed, long position) {
        this.tasks = tasks;
        this.seed = runSeed;
        this.position = position;
    }

    /** The training tasks (one pass). */
    int size() {
        return tasks.size();
    }

    /** Tasks consumed so far. */
    long position() {
        return position;
    }

    /** The next {@code count} tasks. */
    List<Task> next(int count) {
        if (tasks.isEmpty() && count > 0) throw new IllegalStateException("the run has no training tasks");
        List<Task> out = new ArrayList<>(count);
        for (int i = 0; i < count; i++, position++) {
            long pass = position / tasks.size();
            int at = (int) (position % tasks.size());
            out.add(tasks.get(permutation(passSeed(seed, pass))[at]));
        }
        return out;
    }

    /**
     * The seed of pass {@code pass}'s permutation. Passes 0–30 keep the form runs have always used,
     * seed·31 + pass, so that runs and their checkpoints draw the tasks they drew before; from pass 31
     * on that form gives seed + 1's pass 0 (pass 32 its pass 1, ...), so two runs of consecutive seeds,
     * as {@code drmas experiment} starts them, would draw the same orders. Later passes therefore mix
     * the seed and the pass (SplitMix64's finaliser); a value equal to another run's is then as
     * unlikely as any 64-bit coincidence.
     */
    static long passSeed(long seed, long pass) {
        if (pass >= 0 && pass < 31) return seed * 31 + pass;
        return mix(mix(seed) + pass * 0x9E3779B97F4A7C15L);
    }

    private static long mix(long z) {
        z = (z ^ (z >>> 30)) * 0xBF58476D1CE4E5B9L;
        z = (z ^ (z >>> 27)) * 0x94D049BB133111EBL;
        return z ^ (z >>> 31);
    }

    private int[] permutation(long passSeed) {
        if (perm == null || permSeed != passSeed) {
            perm = PpoUpdater.permutation(tasks.size(), new SplittableRandom(passSeed));
            permSeed = passSeed;
        }
        return perm;
    }
}

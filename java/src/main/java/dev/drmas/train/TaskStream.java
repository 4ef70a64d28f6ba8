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
            out.add(tasks.get(permutation(seed * 31 + pass)[at]));
        }
        return out;
    }

    private int[] permutation(long passSeed) {
        if (perm == null || permSeed != passSeed) {
            perm = PpoUpdater.permutation(tasks.size(), new SplittableRandom(passSeed));
            permSeed = passSeed;
        }
        return perm;
    }
}

// TaskStreamTest.java — the training tasks' order: each pass a permutation of the tasks, the first
// 31 passes as runs have always drawn them, and no pass of one seed repeating a pass of the next seed.
package dev.drmas.train;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;

import dev.drmas.env.Task;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;

class TaskStreamTest {
    private static final int N = 40;

    private static List<Task> tasks() {
        List<Task> t = new ArrayList<>();
        for (int i = 0; i < N; i++) t.add(new Task("t" + i, "q" + i, "a" + i));
        return t;
    }

    private static int[] pass(long seed, long pass) {
        TaskStream s = new TaskStream(tasks(), seed, pass * N);
        List<Task> drawn = s.next(N);
        int[] order = new int[N];
        for (int i = 0; i < N; i++) order[i] = Integer.parseInt(drawn.get(i).id().substring(1));
        return order;
    }

    @Test
    void everyPassIsAPermutation() {
        for (long p : new long[] {0, 1, 30, 31, 32, 1000}) {
            Set<Integer> seen = new HashSet<>();
            for (int i : pass(5, p)) seen.add(i);
            assertEquals(N, seen.size(), "pass " + p);
        }
    }

    @Test
    void earlyPassesDrawAsBefore() {
        // the order runs and their checkpoints have always had: pass p from seed·31 + p
        for (long p : new long[] {0, 1, 7, 30})
            assertArrayEquals(PpoUpdater.permutation(N, new SplittableRandom(7 * 31 + p)), pass(7, p), "pass " + p);
    }

    @Test
    void consecutiveSeedsDoNotShareAnOrder() {
        // seed·31 + pass made seed 7's pass 31 seed 8's pass 0, pass 32 its pass 1, ...
        for (long p = 0; p < 3; p++) {
            assertFalse(java.util.Arrays.equals(pass(7, 31 + p), pass(8, p)), "seed 7 pass " + (31 + p) + " vs seed 8 pass " + p);
            assertFalse(TaskStream.passSeed(7, 31 + p) == TaskStream.passSeed(8, p));
        }
        // later passes of one run differ from each other too
        assertFalse(java.util.Arrays.equals(pass(7, 31), pass(7, 32)));
    }
}

// Shard.java — a rank's contiguous, balanced share of a training step's tasks, so that a group never
// straddles ranks (an evaluation deals its tasks out in turn instead: Evaluator.chunks).
package dev.drmas.train;

import dev.drmas.dist.Collective;

/** @param first index of the rank's first task; @param count how many it has */
record Shard(int first, int count) {
    static Shard of(int total, Collective dist) {
        int lo = start(total, dist.rank(), dist.worldSize()), hi = start(total, dist.rank() + 1, dist.worldSize());
        return new Shard(lo, hi - lo);
    }

    private static int start(int total, int rank, int worldSize) {
        return (int) ((long) total * rank / worldSize);
    }
}

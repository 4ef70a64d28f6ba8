// ShardedResumeOneRankBadFilesTest.java — a sharded resume (Checkpoints.loadOptimizer) in which one
// rank sees the checkpoint otherwise than the other (a run folder that is not really shared) stops
// both ranks within moments, each naming the cause: a corrupt master/<id> file on rank 1, and a
// master/<id> folder that rank 1 lacks. The resume spreads the masters over every rank's weights (a
// collective): rank 1 used to fail at its master file after the ready point, or skip the spreading,
// while rank 0 waited in the spreading until distributed.timeout_s (small here, so that the old
// behaviour shows as a wait of the whole of it) and then blamed rank 1's absence from "the all-gather
// of the updated weights". Two ranks as threads over the real Gloo group on 127.0.0.1.
package dev.drmas.train;

import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.drmas.dist.DistributedException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.function.IntFunction;
import org.bytedeco.pytorch.global.torch;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

class ShardedResumeOneRankBadFilesTest {
    @TempDir
    Path dir;

    /** distributed.timeout_s: the old behaviour waited all of it; the new ends well within half of it. */
    static final double TIMEOUT_S = 10;

    /** What one rank ended with: its error's type and message, or null when it resumed; when (System.nanoTime()). */
    record Outcome(int rank, Class<?> type, String error, long endNanos) {
        @Override
        public String toString() {
            return "rank " + rank + ": " + (error == null ? "resumed" : type.getSimpleName() + ": " + error);
        }
    }

    @Test
    @Timeout(120)
    void aCorruptMasterFileOnOneRankStopsTheOtherNamingIt() throws Exception {
        Path ck = savedCheckpoint(), other = copy(ck);
        Path bad = other.resolve("master/policy/model.safetensors");
        Files.writeString(bad, "garbage");
        long t0 = System.nanoTime();
        List<Outcome> got = resume(r -> r == 0 ? ck : other);
        Outcome r0 = got.get(0), r1 = got.get(1);
        assertTrue(r1.error() != null && r1.error().contains(bad.toString()), got.toString());
        assertTrue(r0.type() == DistributedException.class && r0.error().contains("rank 1 failed")
                && r0.error().contains(bad.toString()), got.toString());
        assertPrompt(t0, got);
    }

    @Test
    @Timeout(120)
    void aMasterFolderOnlyOneRankSeesStopsBoth() throws Exception {
        Path ck = savedCheckpoint(), other = copy(ck);
        Checkpoints.deleteTree(other.resolve("master"));
        long t0 = System.nanoTime();
        List<Outcome> got = resume(r -> r == 0 ? ck : other);
        for (Outcome o : got) {
            assertTrue(o.type() == DistributedException.class && o.error().contains("the checkpoint has master/policy (1) or not (0) "
                    + "differs between ranks") && o.error().contains((o.rank() == 0 ? ck : other).resolve("master/policy").toString()),
                    got.toString());
        }
        assertPrompt(t0, got);
    }

    /** A sharded checkpoint of step 3 (bf16 weights: with fp32 masters) written by two ranks. */
    private Path savedCheckpoint() throws Exception {
        torch.set_num_threads(1);
        ShardedCheckpointTest.State state = ShardedCheckpointTest.State.random();
        Checkpoints cps = new Checkpoints(dir.resolve("checkpoints"));
        ShardedOptimizerTest.onTwoRanks(dist -> {
            try (ModelOptimizer o = ShardedCheckpointTest.holding(state, dist)) {
                ShardedCheckpointTest.save(cps, 3, o, dist);
            }
            return null;
        });
        return cps.dir(3);
    }

    /** Rank 1's view of the checkpoint: a copy, to be spoilt. */
    private Path copy(Path ck) throws Exception {
        Path other = dir.resolve("other");
        try (var s = Files.walk(ck)) {
            for (Path p : s.toList()) {
                Path q = other.resolve(ck.relativize(p).toString());
                if (Files.isDirectory(p)) Files.createDirectories(q);
                else Files.copy(p, q);
            }
        }
        return other;
    }

    /** Each rank resumes its view of the checkpoint; a failure is announced to the others, as Trainer.open does. */
    private static List<Outcome> resume(IntFunction<Path> view) throws Exception {
        return ShardedOptimizerTest.onTwoRanks(1, TIMEOUT_S, dist -> {
            try (ModelOptimizer o = ModelOptimizer.sharded(ShardedOptimizerTest.weights(), ShardedCheckpointTest.OPT, dist,
                    ShardedCheckpointTest.BUCKET)) {
                Checkpoints.loadOptimizer(view.apply(dist.rank()), "policy", o);
                return new Outcome(dist.rank(), null, null, System.nanoTime());
            } catch (RuntimeException e) {
                dist.announceFailure("opening the trainer", e);
                return new Outcome(dist.rank(), e.getClass(), e.getMessage(), System.nanoTime());
            }
        });
    }

    /** Both ranks ended well within distributed.timeout_s of the resume's start. */
    private static void assertPrompt(long t0, List<Outcome> got) {
        for (Outcome o : got) {
            double s = (o.endNanos() - t0) / 1e9;
            assertTrue(s < TIMEOUT_S / 2, "rank " + o.rank() + " ended " + s + " s after the resume began (distributed.timeout_s "
                    + TIMEOUT_S + "): " + got);
        }
    }
}

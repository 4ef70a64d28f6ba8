// PausedJobTest.java — heartbeat verdicts with ranks as processes of their own (only real processes
// can be stopped, and only a process's end takes its store with it). A whole data-parallel job paused
// (SIGSTOP, a scheduler's suspend, a machine asleep) for longer than heartbeatStaleMs must not make a
// rank declare a live one dead: the heartbeats freeze in the same pause, and the waiting rank, which
// could not look while paused, counts their silence from its resume (the pause ends for rank 0 a moment
// before rank 1, the order in which the old count read the whole pause as rank 1's silence). And with
// three ranks, one of them frozen for good (as a dead NCCL peer on another node), both others name it:
// rank 0, which ends at once, leaves its verdict in its store until the other has read it, where a rank
// that looked after rank 0's end found the store gone and named rank 0.
package dev.drmas.dist;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

class PausedJobTest {
    @TempDir
    Path dir;

    /** A rank judged dead after this long without a heartbeat (the default is 10 s). */
    static final long STALE_MS = 3_000;

    @Test
    @Timeout(value = 120, unit = TimeUnit.SECONDS)
    void aPauseOfTheWholeJobIsNoRankDying() throws Exception {
        Path go = dir.resolve("go");
        List<Process> ranks = RankProcess.start(dir, 2, Long.toString(STALE_MS), go, "1");
        try {
            RankProcess.await(dir, 2, "warmed");
            Thread.sleep(1_500);  // rank 0 waits in the sum, looking at rank 1's heartbeat about once a second
            RankProcess.signal("STOP", ranks.get(1));
            RankProcess.signal("STOP", ranks.get(0));
            Thread.sleep(STALE_MS + 2_000);  // longer than a rank may be silent, and than ProcessGroup.PAUSED_MS
            RankProcess.signal("CONT", ranks.get(0));
            Thread.sleep(1_500);  // rank 0 looks at once, then a second later: rank 1 still frozen, silent 1.5 s of rank 0's time
            RankProcess.signal("CONT", ranks.get(1));
            Files.writeString(go, "");
            for (Process p : ranks) assertTrue(p.waitFor(60, TimeUnit.SECONDS), "a rank did not end");
            for (int r = 0; r < 2; r++) {
                String said = RankProcess.said(dir, r);
                assertTrue(said.contains("sum 3.0"), "rank " + r + ": " + said);
                assertEquals(0, ranks.get(r).exitValue(), said);
            }
        } finally {
            for (Process p : ranks) {
                RankProcess.signal("CONT", p);
                p.destroyForcibly();
            }
        }
    }

    @Test
    @Timeout(value = 120, unit = TimeUnit.SECONDS)
    void withThreeRanksBothOthersNameTheOneThatDied() throws Exception {
        // rank 1 would take rank 2 for dead only after 30 s: it learns of it from rank 0's verdict, in rank 0's store, which
        // must outlive rank 0's own end until rank 1 has read it (before, rank 1 found the store gone and named rank 0)
        List<Process> ranks = RankProcess.start(dir, 3, STALE_MS + ",30000," + STALE_MS, dir.resolve("never"), "2");
        try {
            RankProcess.await(dir, 3, "warmed");
            RankProcess.signal("STOP", ranks.get(2));  // frozen for good, its connections open: no peer sees it end
            for (int r = 0; r < 2; r++) assertTrue(ranks.get(r).waitFor(60, TimeUnit.SECONDS), "rank " + r + " did not end");
            String zero = RankProcess.said(dir, 0), one = RankProcess.said(dir, 1);
            assertTrue(zero.contains("failed: rank 0: the gradients (collective 2): rank 2 (at collective 1) did not arrive and stopped "
                    + "without a word"), zero);
            assertTrue(one.contains("failed: rank 1: stopped at the gradients (collective 2): rank 2 failed before the gradients "
                    + "(collective 2): it stopped without a word (its heartbeat in the store had not moved for 3.0 s when rank 0 looked)"), one);
        } finally {
            for (Process p : ranks) {
                RankProcess.signal("CONT", p);
                p.destroyForcibly();
            }
        }
    }
}

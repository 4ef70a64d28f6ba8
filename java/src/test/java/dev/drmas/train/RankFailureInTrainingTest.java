// RankFailureInTrainingTest.java — one rank's failure in the middle of training (here rank 1 throws at
// the start of a step, as a reward function's exception or an out-of-memory would, its process living
// on) stops the other rank within moments, with an error naming rank 1 and its reason. Two ranks as
// threads over the real Gloo group on 127.0.0.1, whose groups outlive the failure as a live process's
// would: rank 0 used to wait in the step's first collective until distributed.timeout_s (15 s here)
// and then say only "rank 1 did not arrive".
package dev.drmas.train;

import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.drmas.config.DistributedConfig;
import dev.drmas.config.RunConfig;
import dev.drmas.dist.DistEnv;
import dev.drmas.dist.DistributedException;
import dev.drmas.dist.ProcessGroup;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

class RankFailureInTrainingTest {
    @TempDir
    Path tmp;

    static final double TIMEOUT_S = 15;
    /** How long after rank 1 rank 0 may end: its rollout of the step, and a look at the store about once a second. */
    static final double PROMPT_S = 6;

    @Test
    @Timeout(value = 120, unit = TimeUnit.SECONDS)
    void aRankThatThrowsMidTrainingStopsTheOtherWithItsReason() throws Exception {
        int port;
        try (java.net.ServerSocket s = new java.net.ServerSocket(0, 1, java.net.InetAddress.getLoopbackAddress())) {
            port = s.getLocalPort();
        }
        var dc = new DistributedConfig(DistributedConfig.Backend.GLOO, TIMEOUT_S, 1, 1, false);
        ExecutorService ex = Executors.newFixedThreadPool(2);
        var rank0Ended = new java.util.concurrent.CountDownLatch(1);
        List<RankFailureAtOpeningTest.Outcome> got = new ArrayList<>();
        try {
            List<Future<RankFailureAtOpeningTest.Outcome>> fs = new ArrayList<>();
            for (int r = 0; r < 2; r++) {
                var env = new DistEnv("127.0.0.1", port, r, 2, r);
                // steps 2, failing at the second: the ranks' first step's collectives pair up as usual
                RunConfig cfg = RunConfig.parse(TrainerEndToEndTest.YAML, List.of("run.output_dir=" + tmp.resolve("r" + r),
                        "run.threads=1", "trainer.steps=2", "trainer.eval_freq=0", "trainer.save_freq=0"));
                int rank = r;
                fs.add(ex.submit(() -> {
                    try (var pg = new ProcessGroup(env, dc, false)) {
                        RankFailureAtOpeningTest.Outcome o;
                        try (Trainer t = Trainer.open(cfg, RankFailureAtOpeningTest.QUIET, pg)) {
                            if (rank == 1) {
                                t.stepHook = () -> {
                                    if (t.step() == 1) throw new IllegalStateException("the reward function of task 7 threw: boom");
                                };
                            }
                            t.train();
                            o = new RankFailureAtOpeningTest.Outcome(rank, null, null, System.nanoTime());
                        } catch (Exception e) {
                            o = new RankFailureAtOpeningTest.Outcome(rank, e.getMessage(), e.getClass(), System.nanoTime());
                        }
                        // rank 1's process lives on with its group (a process that goes on with other work, or is slow to
                        // end; Gloo would see a process that ended at once, NCCL on another node may not): until rank 0 ends
                        if (rank == 0) rank0Ended.countDown();
                        else rank0Ended.await(60, TimeUnit.SECONDS);
                        java.lang.ref.Reference.reachabilityFence(pg);
                        return o;
                    } catch (Exception e) {
                        return new RankFailureAtOpeningTest.Outcome(rank, e.getMessage(), e.getClass(), System.nanoTime());
                    }
                }));
            }
            for (var f : fs) got.add(f.get(100, TimeUnit.SECONDS));
        } finally {
            ex.shutdownNow();
        }
        RankFailureAtOpeningTest.Outcome r0 = got.get(0), r1 = got.get(1);
        assertTrue(r1.error() != null && r1.error().contains("boom"), r1.toString());
        assertTrue(r0.type() == DistributedException.class && r0.error().contains("rank 1 failed training step 2: the reward "
                + "function of task 7 threw: boom"), r0.toString());
        double apart = Math.abs(r0.endNanos() - r1.endNanos()) / 1e9;
        System.out.printf("the ranks ended %.2f s apart (distributed.timeout_s %.0f): %s; %s%n", apart, TIMEOUT_S, r0, r1);
        assertTrue(apart < PROMPT_S, "the ranks ended " + apart + " s apart: " + r0 + "; " + r1);
    }
}

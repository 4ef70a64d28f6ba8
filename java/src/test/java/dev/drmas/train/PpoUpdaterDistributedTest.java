// PpoUpdaterDistributedTest.java — the sharded PPO update over the real Gloo process group (two
// ranks as two threads of this JVM, each with its own copy of a tiny model): with the rows split
// unevenly (so that many mini-batches have an empty share on one rank) both ranks end with the
// parameters and statistics of one process updating on all rows. Random advantages, so the
// clipped policy loss, the entropy bonus and the per-agent gradient norms all take part; token-mean
// divides by the mini-batch's tokens on all ranks, seq-mean-token-mean by its rows on all ranks.
package dev.drmas.train;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.drmas.algo.LossAggregation;
import dev.drmas.algo.LossConfig;
import dev.drmas.config.DistributedConfig;
import dev.drmas.dist.DistEnv;
import dev.drmas.dist.ProcessGroup;
import dev.drmas.model.CausalLm;
import dev.drmas.model.Family;
import dev.drmas.model.ModelConfig;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

class PpoUpdaterDistributedTest {
    record Result(Map<String, float[]> params, PpoUpdater.Stats stats) {
    }

    static final ModelConfig CFG = ModelConfig.tiny(Family.LLAMA, PpoUpdaterTest.VOCAB);
    // Adam's eps = 1e-3, as in PpoUpdaterTest: summation-order rounding must not become lr-sized steps
    static final AdamW.Settings OPT = new AdamW.Settings(3e-3, 0.9, 0.999, 1e-3, 0.01, 0);

    static List<PpoUpdater.Row> rows() {
        List<PpoUpdater.Row> out = new ArrayList<>();
        int i = 0;
        for (PpoUpdater.Row r : PpoUpdaterTest.rows(21, 13)) {
            out.add(new PpoUpdater.Row(r.promptIds(), r.responseIds(), r.advantage(), i++ % 2));  // two agents on one model
        }
        return out;
    }

    static final PpoUpdater.Settings PPO = ppo(LossAggregation.TOKEN_MEAN, 0);

    /** Mini-batches of 4 rows, or with {@code updatesPerStep} n &gt; 0 that many per epoch (ppo.updates_per_step). */
    static PpoUpdater.Settings ppo(LossAggregation aggregation, int updatesPerStep) {
        return new PpoUpdater.Settings(2, 4, 2, 1.0, 0.01, 1.0, LossConfig.defaults().withAggregation(aggregation), 8, true, true,
                0, false, updatesPerStep);
    }

    static Result update(List<PpoUpdater.Row> rows, dev.drmas.dist.Collective dist, LossAggregation aggregation, int updatesPerStep) {
        try (CausalLm m = CausalLm.random(CFG, 5); AdamW o = new AdamW(m.parameters(), OPT)) {
            PpoUpdater.Stats st = new PpoUpdater(m, o, null, ppo(aggregation, updatesPerStep), dist, "policy").update(rows, 17);
            return new Result(PpoUpdaterTest.snapshot(m), st);
        }
    }

    @ParameterizedTest
    @CsvSource({"2, TOKEN_MEAN, 0", "7, TOKEN_MEAN, 0", "7, SEQ_MEAN_TOKEN_MEAN, 0", "2, TOKEN_MEAN, 3", "7, SEQ_MEAN_TOKEN_MEAN, 3"})
    void twoRanksUpdateLikeOneProcess(int rank0Rows, LossAggregation aggregation, int updatesPerStep) throws Exception {
        // with ppo.updates_per_step the mini-batch size comes from the global row count (13), not
        // a rank's own (2 or 11): both ranks cut the same 3 mini-batches of 4, 4 and 5 rows
        List<PpoUpdater.Row> all = rows();
        Result one = update(all, dev.drmas.dist.Collective.single(), aggregation, updatesPerStep);
        int port;
        try (ServerSocket s = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
            port = s.getLocalPort();
        }
        DistributedConfig dc = new DistributedConfig(DistributedConfig.Backend.GLOO, 30, 1, 1e-3, false);  // ~1 KiB buckets: several
        ExecutorService ex = Executors.newFixedThreadPool(2);
        List<Result> ranks = new ArrayList<>();
        try {
            List<Future<Result>> fs = new ArrayList<>();
            for (int r = 0; r < 2; r++) {
                DistEnv env = new DistEnv("127.0.0.1", port, r, 2, r);
                List<PpoUpdater.Row> mine = r == 0 ? all.subList(0, rank0Rows) : all.subList(rank0Rows, all.size());
                fs.add(ex.submit(() -> {
                    try (ProcessGroup pg = new ProcessGroup(env, dc, false)) {
                        return update(mine, pg, aggregation, updatesPerStep);
                    }
                }));
            }
            for (Future<Result> f : fs) ranks.add(f.get(120, TimeUnit.SECONDS));
        } finally {
            ex.shutdownNow();
        }
        PpoUpdater.Stats s1 = one.stats();
        assertEquals(updatesPerStep == 0 ? 8 : 6, s1.optimizerSteps());  // 2 epochs × ceil(13 / 4), or × 3
        for (Result r : ranks) {
            PpoUpdater.Stats s = r.stats();
            assertEquals(s1.optimizerSteps(), s.optimizerSteps());
            assertEquals(s1.tokens(), s.tokens());
            assertEquals(s1.pgLoss(), s.pgLoss(), 1e-6 + 1e-5 * Math.abs(s1.pgLoss()));
            assertEquals(s1.clipfrac(), s.clipfrac(), 1e-9);
            assertEquals(s1.entropy(), s.entropy(), 1e-5);
            assertEquals(s1.gradNormMean(), s.gradNormMean(), 1e-5 * s1.gradNormMean());
            assertEquals(s1.agentGradNorms().keySet(), s.agentGradNorms().keySet());
            for (int a : s1.agentGradNorms().keySet()) {
                assertEquals(s1.agentGradNorms().get(a), s.agentGradNorms().get(a), 1e-5 * s1.agentGradNorms().get(a), "agent " + a);
            }
            double maxDiff = 0, moved = 0;
            Map<String, float[]> init;
            try (CausalLm m = CausalLm.random(CFG, 5)) {
                init = PpoUpdaterTest.snapshot(m);
            }
            for (String k : one.params().keySet()) {
                float[] x = one.params().get(k), y = r.params().get(k), z = init.get(k);
                for (int i = 0; i < x.length; i++) {
                    maxDiff = Math.max(maxDiff, Math.abs(x[i] - y[i]));
                    moved = Math.max(moved, Math.abs(x[i] - z[i]));
                }
            }
            assertTrue(moved > 1e-3, "the update barely moved the weights: " + moved);
            assertTrue(maxDiff <= 1e-5, "1 process vs 2 ranks: max |Δw| = " + maxDiff);
        }
    }
}

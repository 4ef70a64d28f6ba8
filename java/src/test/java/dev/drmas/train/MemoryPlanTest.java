// MemoryPlanTest.java — MemoryPlan's arithmetic against figures worked out by hand for a tiny
// Qwen3 shape (hidden 8, 2 layers, 2 heads / 1 kv head of 4, intermediate 16, vocab 366, tied
// embeddings): parameter count, the resident bytes in float32 and in bfloat16 with fp32 master
// weights sharded over 4 ranks, the KV cache, the micro-batch shapes with and without a token
// bound, a decoder layer's bytes per token, and a forward's end; and that the plan's peaks are
// the resident bytes plus the largest transient.
package dev.drmas.train;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.drmas.config.RunConfig;
import dev.drmas.model.ModelConfig;
import dev.drmas.tokenizer.BuiltinTokenizer;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

class MemoryPlanTest {
    static final String YAML = """
            models:
              policy:
                family: qwen3
                size: {hidden: 8, layers: 2, heads: 2, kv_heads: 1, intermediate: 16, max_positions: 64}
            rollout: {tasks_per_step: 8, rollouts_per_task: 3, max_new_tokens: 6, max_prompt_tokens: 10}
            ppo: {mini_batch_size: 8, micro_batch_size: 4}
            trainer: {eval_freq: 0}
            """;

    static MemoryPlan plan(int gpus, String... overrides) {
        RunConfig cfg = RunConfig.parse(YAML, List.of(overrides));
        ModelConfig c = cfg.models().get("policy").toModelConfig(BuiltinTokenizer.VOCAB_SIZE, List.of());
        return MemoryPlan.of(cfg, Map.of("policy", c), new MemoryPlan.Machine(gpus, 1L << 30));
    }

    static ModelConfig shape() {
        return RunConfig.parse(YAML, List.of()).models().get("policy").toModelConfig(366, List.of());
    }

    // embeddings 366·8 = 2928; a layer: q 64, k 32, v 32, o 64, q/k norm 4 + 4, gate/up/down 3·128,
    // two norms 16 = 600; two layers 1200; final norm 8 (the head is tied): 4136
    static final long PARAMS = 4136;

    @Test
    void residentBytesInFloat32() {
        MemoryPlan.ModelPlan m = plan(1).models().get(0);
        assertEquals(PARAMS, m.params());
        assertEquals(new MemoryPlan.Resident(4 * PARAMS, 0, 8 * PARAMS, 4 * PARAMS, 0, 0), m.resident());
        assertEquals(4 * PARAMS, plan(1, "++ppo.reference_model=true").models().get(0).resident().reference());
    }

    @Test
    void residentBytesInBfloat16WithFp32MasterShardedOverFourRanks() {
        MemoryPlan.ModelPlan m = plan(4, "models.policy.dtype=bfloat16", "distributed.shard_optimizer=true").models().get(0);
        // bf16 weights and .grad whole (8272 each); fp32 master and gradient 16544 / 4 (chunks of 1034); moments 2 · 16544 / 4
        assertEquals(new MemoryPlan.Resident(8272, 4136, 8272, 8272, 4136, 0), m.resident());
        // not sharded: everything whole
        MemoryPlan.ModelPlan whole = plan(4, "models.policy.dtype=bfloat16").models().get(0);
        assertEquals(new MemoryPlan.Resident(8272, 16544, 33088, 8272, 16544, 0), whole.resident());
    }

    @Test
    void kvCacheOfOneTurnPerRank() {
        // 8 tasks over 4 ranks: 2 · 3 rollouts = 6 rows of 10 + 6 slots; per slot 2 (k, v) · 2 layers · 1 kv head · 4 · 2 bytes
        MemoryPlan.Generation g = plan(4, "models.policy.dtype=bfloat16").models().get(0).generation();
        assertEquals(6, g.rows());
        assertEquals(16, g.capacity());
        assertEquals(6L * 16 * 2 * 2 * 4 * 2, g.kvCache());
        // a budget of 40 slots holds 2 rows of 16
        assertEquals(2, plan(4, "rollout.max_batch_tokens=40").models().get(0).generation().rows());
    }

    @Test
    void microBatches() {
        assertEquals(new MemoryPlan.MicroBatch(4, 64, 16, 24), MemoryPlan.microBatch(4, 0, 10, 6));
        // 40 tokens: rows of >= 1 prompt token and <= 6 response tokens hold at most 40·6/7 = 34 response tokens
        assertEquals(new MemoryPlan.MicroBatch(2, 40, 16, 34), MemoryPlan.microBatch(4, 40, 10, 6));
        // a bound below one row: the row alone
        assertEquals(16, MemoryPlan.microBatch(4, 5, 10, 6).tokens());
    }

    @Test
    void aDecoderLayerPerToken() {
        // float32, h = qd = 8, kvd = 4, I = 16, 2 heads, 1 kv head: made 10h + 9qd + 9kvd + 4I = 252 values, the
        // attention's logsumexp (2 floats) and the norms' factors (2 + 2 + 1 floats); saved 6h + 4qd + 4kvd + 4I = 160
        // values and the same floats
        assertEquals(new MemoryPlan.PerToken(4 * 252 + 8 + 20, 4 * 160 + 8 + 20), MemoryPlan.layer(shape(), 4));
    }

    @Test
    void aTrainingForwardAtItsEnd() {
        // 4 rows of 16 tokens (n = 64): inputs 41 + rope 84 bytes per token (d = 4: 4 + 8 + 48 + 8 + 16); masks
        // 2·64·16 + 2·16² + 64 + 16·16 = 2880 and the negation 64·16; the embedding 32, two layers' saved tensors
        // 2·668 plus the last layer's unsaved ones (1036 − 668: each layer runs in its own scope) and the final
        // norm 100 bytes per token; each layer's float32 mask 64·16·4
        long expected = 64 * (41 + 84) + 2880 + 1024 + 64 * (32 + 2 * 668 + (1036 - 668) + 100) + 2 * 64 * 16 * 4;
        assertEquals(expected, MemoryPlan.forwardEnd(shape(), 4, MemoryPlan.microBatch(4, 0, 10, 6), false));
    }

    @Test
    void phasesAreResidentPlusTheLargestTransient() {
        MemoryPlan p = plan(1);
        MemoryPlan.ModelPlan m = p.models().get(0);
        assertEquals(m.resident().total(), p.residentBytes());
        assertEquals(p.residentBytes() + m.generation().added(), p.phases().get(0).peak());
        assertEquals(p.residentBytes() + m.update().added(), p.phases().get(2).peak());
        assertTrue(p.fits());
        assertTrue(p.advice().isEmpty());
        // checkpointing keeps less than the whole forward
        assertTrue(m.update().peakCheckpointed() < m.update().peak());
    }
}

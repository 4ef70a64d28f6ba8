// MemoryPlanTest.java — MemoryPlan's arithmetic against figures worked out by hand for a tiny
// Qwen3 shape (hidden 8, 2 layers, 2 heads / 1 kv head of 4, intermediate 16, vocab 366, tied
// embeddings): parameter count, the resident bytes in float32 and in bfloat16 with fp32 master
// weights sharded over 4 ranks, the KV cache, the micro-batch shapes with and without a token
// bound, a decoder layer's bytes per token, and a forward's end; and that the plan's peaks are
// the resident bytes plus the largest transient (in generation with several models, plus the
// prompts the other models keep for reuse). The fused LM head (ppo.fused_lm_head): what
// FusedLmHead holds per chunk and across a micro-batch in float32, bfloat16 and at a temperature,
// the micro-batch's peak with it at a real vocabulary, and the advice that switches it on (a GPU
// run's line says its CUDA path has not run on a GPU yet). Only the prefill's attention is masked (and, on a
// GPU, copies k and v to the query heads); the training and log-prob forwards are causal, without a mask.
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
        // 4 rows of 16 tokens (n = 64): inputs 41 + rope 84 bytes per token (d = 4: 4 + 8 + 48 + 8 + 16); no
        // mask (right-padded without cache: causal attention); the embedding 32, two layers' saved tensors
        // 2·668 plus the last layer's unsaved ones (1036 − 668: each layer runs in its own scope) and the final
        // norm 100 bytes per token
        long expected = 64 * (41 + 84) + 64 * (32 + 2 * 668 + (1036 - 668) + 100);
        assertEquals(expected, MemoryPlan.forwardEnd(shape(), 4, MemoryPlan.microBatch(4, 0, 10, 6), false));
    }

    @Test
    void onlyThePrefillIsMaskedAndOnAGpuItsKvHeadsAreExpanded() {
        ModelConfig c = shape();
        MemoryPlan.MicroBatch mb = MemoryPlan.microBatch(4, 0, 10, 6);
        long causal = MemoryPlan.inferenceForward(c, 4, mb, false, false);
        // 4 rows of 16 tokens (n = 64): inputs 41, rope 84, embedding 32, one layer's 1036 and its input 32, final norm 100
        assertEquals(64 * (41 + 84 + 32 + 1036 + 32 + 100), causal);
        // masked: the masks 2·64·16 + 2·16² + 64 + 16·16 = 2880, one float32 converted mask 64·16·4 and its bool
        // negation 64·16
        long masked = causal + 2880 + 64 * 16 * 4 + 64 * 16;
        assertEquals(masked, MemoryPlan.inferenceForward(c, 4, mb, true, false));
        // k and v expanded to the 2 query heads of 4: 2 · 8 floats a token more in the layer
        assertEquals(masked + 64 * 2 * 8 * 4, MemoryPlan.inferenceForward(c, 4, mb, true, true));
        // the generation's prefill on 4 ranks (6 rows of 10 prompt tokens, as kvCacheOfOneTurnPerRank) is masked, expanded
        // only off the CPU
        long onCpu = plan(4, "run.device=cpu").models().get(0).generation().prefill();
        long onGpu = plan(4, "run.device=cuda").models().get(0).generation().prefill();
        assertEquals(6 * 10 * (41 + 84 + 32 + 1036 + 32 + 100) + 2 * 60 * 10 + 2 * 10 * 10 + 60 + 16 * 10 + 60 * 10 * 4 + 60 * 10, onCpu);
        assertEquals(60L * 2 * 8 * 4, onGpu - onCpu);
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

    /**
     * Two models, each generator keeping its prompts for reuse (rollout.prefix_cache) until the
     * rollout phase ends: while one generates, the other's kept prompts are still held, so the
     * generation phase's peak is the generating model's transient plus the other's cache (the plan
     * counted only the largest single transient).
     */
    @Test
    void generationHoldsTheOtherModelsKeptPrompts() {
        String two = """
                models:
                  a: {family: qwen3, size: {hidden: 8, layers: 2, heads: 2, kv_heads: 1, intermediate: 16, max_positions: 64}}
                  b: {family: qwen3, size: {hidden: 16, layers: 3, heads: 2, kv_heads: 1, intermediate: 32, max_positions: 64}}
                agents:
                  - {id: solver, role: solver, model: a}
                  - {id: verifier, role: verifier, model: b}
                orchestra: {name: math, options: {max_loops: 2}}
                rollout: {tasks_per_step: 8, rollouts_per_task: 3, max_new_tokens: 6, max_prompt_tokens: 10, prefix_cache: true}
                ppo: {mini_batch_size: 8, micro_batch_size: 4}
                trainer: {eval_freq: 0}
                """;
        java.util.function.Function<String, MemoryPlan> planOf = cache -> {
            RunConfig cfg = RunConfig.parse(two, List.of("rollout.prefix_cache=" + cache));
            Map<String, ModelConfig> shapes = Map.of("a", cfg.models().get("a").toModelConfig(BuiltinTokenizer.VOCAB_SIZE, List.of()),
                    "b", cfg.models().get("b").toModelConfig(BuiltinTokenizer.VOCAB_SIZE, List.of()));
            return MemoryPlan.of(cfg, shapes, new MemoryPlan.Machine(1, 1L << 30));
        };
        MemoryPlan p = planOf.apply("true");
        MemoryPlan.Generation a = p.models().get(0).generation(), b = p.models().get(1).generation();
        // 24 rows of 10 prompt tokens kept; a slot is 2 · layers · 1 kv head · 4 · 4 bytes
        assertEquals(24L * 10 * 2 * 2 * 4 * 4, a.prefixCache());
        assertEquals(24L * 10 * 2 * 3 * 8 * 4, b.prefixCache());
        long whileA = a.added() + b.prefixCache(), whileB = b.added() + a.prefixCache();
        MemoryPlan.Phase gen = p.phases().get(0);
        assertEquals(p.residentBytes() + Math.max(whileA, whileB), gen.peak());
        assertTrue(gen.peak() > p.residentBytes() + Math.max(a.added(), b.added()), "the other model's cache is counted");
        String other = whileA >= whileB ? "b" : "a";
        assertEquals(whileA >= whileB ? "a" : "b", gen.largestModel());
        assertEquals(p.models().stream().filter(m -> m.id().equals(other)).findFirst().orElseThrow().generation().prefixCache(),
                gen.held());
        assertEquals(whileA >= whileB ? a.added() : b.added(), gen.transientOfLargest());
        // the other phases hold nothing of the rollout (the trainer clears the kept prompts before the reward)
        assertEquals(0, p.phases().get(1).held());
        assertEquals(0, p.phases().get(2).held());
        // without the cache nothing is kept across the phase: the largest transient alone
        MemoryPlan off = planOf.apply("false");
        assertEquals(0, off.phases().get(0).held());
        assertEquals(off.residentBytes() + Math.max(off.models().get(0).generation().added(), off.models().get(1).generation().added()),
                off.phases().get(0).peak());
    }

    // ------------------------------------------------------------------ the fused LM head

    @Test
    void theFusedHeadOfAMicroBatchInFloat32() {
        // 4 rows of 6 response tokens: N = 24, V = 366 (one chunk: the default chunk is 65536 tokens at this vocabulary), H = 8.
        // The chunk: logits [24, V] float32 (dL/dz in place) and dL/dh's product [24, H]; across the chunks dL/dh [N, H] and
        // 28 bytes a token (log-probs, entropies, targets, token positions, old log-probs); .grad is float32: nothing after
        MemoryPlan.FusedHead f = plan(1).models().get(0).update().fusedHead();
        assertEquals(new MemoryPlan.FusedHead(24, 24 * 366 * 4 + 24 * 8 * 4, 24 * 8 * 4 + 24 * 28, 0), f);
        // a temperature: the logits are divided in place (nothing more); a KL term: the reference log-probs
        MemoryPlan.FusedHead t = plan(1, "rollout.temperature=1.5", "++ppo.reference_model=true", "++ppo.kl_coef=0.01")
                .models().get(0).update().fusedHead();
        assertEquals(new MemoryPlan.FusedHead(24, 24 * 366 * 4 + 24 * 8 * 4, 24 * 8 * 4 + 24 * 32, 0), t);
        // the log-prob pass: the logits alone; the targets and log-probs across the chunks
        assertEquals(new MemoryPlan.FusedHead(24, 24 * 366 * 4, 24 * 12, 0), plan(1).models().get(0).logProbFusedHead());
    }

    @Test
    void theFusedHeadOfAMicroBatchInBfloat16() {
        // the chunk: the product's logits in bf16 and their float32 copy, dL/dz cast back to bf16 for dL/dh = dz·W, that
        // product [24, H] in bf16 and the chunk's hidden states in float32 for dL/dW; across: dL/dh in bf16 and dL/dW's
        // float32 sum [V, H]; after the chunks .grad.add_(dL/dW) promotes the bf16 .grad: two float32 [min(V, 4096), H] temporaries
        MemoryPlan.FusedHead f = plan(1, "models.policy.dtype=bfloat16").models().get(0).update().fusedHead();
        long vh4 = 366 * 8 * 4;
        assertEquals(new MemoryPlan.FusedHead(24, 24 * 366 * (2 + 4) + 24 * 366 * 2 + 24 * 8 * 2 + 24 * 8 * 4,
                24 * 8 * 2 + vh4 + 24 * 28, 2 * vh4), f);
        assertEquals(f.heldBytes() + f.chunkBytes(), f.peak());
    }

    @Test
    void theBfloat16GradIsAddedInBlocksOfRows() {
        // at V = 151,936 the float32 temporaries of .grad.add_(dL/dW) are two [4096, H] blocks, not two [V, H]
        MemoryPlan.FusedHead f = bigVocab(1L << 30, "models.policy.dtype=bfloat16").models().get(0).update().fusedHead();
        assertEquals(2L * dev.drmas.algo.FusedLmHead.GRAD_ADD_ROWS * 8 * 4, f.finishBytes());
    }

    /** The tiny shape at Qwen's vocabulary (151,936), one task of one rollout (a single generation row). */
    static MemoryPlan bigVocab(long gpuBytes, String... overrides) {
        List<String> o = new java.util.ArrayList<>(List.of("rollout.tasks_per_step=1", "rollout.rollouts_per_task=1",
                "ppo.mini_batch_size=4"));
        o.addAll(List.of(overrides));
        RunConfig cfg = RunConfig.parse(YAML, o);
        ModelConfig c = cfg.models().get("policy").toModelConfig(151936, List.of());
        return MemoryPlan.of(cfg, Map.of("policy", c), new MemoryPlan.Machine(1, gpuBytes));
    }

    @Test
    void atARealVocabularyTheHeadIsTheUpdatesPeak() {
        MemoryPlan.Update u = bigVocab(1L << 30).models().get(0).update();
        // chunks of 220 tokens at V = 151936 (128 MiB of float32 logits), N = 24 < 220: one chunk of 24
        assertEquals(24, u.fusedHead().chunkTokens());
        // what autograd saved, per token (d = 4, float32): rope 32, embedding 32, two layers 2·668, final norm 36 = 1436
        // bytes (no mask: the attention is causal): 64 · 1436 = 91904
        long saved = 91904, picked = 24 * 8 * 4, nv = 24L * 151936 * 4;
        // fused: saved + the response positions' hidden states + the head (one chunk of logits and dL/dh's product,
        // dL/dh and 28 bytes a token)
        assertEquals(saved + picked + (nv + 24 * 8 * 4) + (24 * 8 * 4 + 24 * 28), u.peak(false, true));
        // materialised: the end of TeacherForcing, saved + the final hidden states [64, 8] + picked + 4 [N, V] tensors
        assertEquals(saved + 64 * 8 * 4 + picked + 4 * nv, u.peak(false, false));
        assertEquals(4 * nv, u.materialisedHeadBytes());
    }

    @Test
    void thePhasesFollowTheConfiguredHead() {
        MemoryPlan off = bigVocab(1L << 30, "ppo.fused_lm_head=false"), on = bigVocab(1L << 30);
        MemoryPlan.ModelPlan a = off.models().get(0), b = on.models().get(0);
        assertEquals(a.update().peak(false, true), b.update().peak(false, true));  // both columns whatever is configured
        // (the optimiser step's transient, AdamW's temporaries of the [V, H] embedding, is above the fused micro-batch)
        assertEquals(off.residentBytes() + a.update().peak(false, false), off.phases().get(2).peak());
        assertEquals(on.residentBytes() + Math.max(b.update().peak(false, true), b.update().stepTransient()), on.phases().get(2).peak());
        assertEquals(off.residentBytes() + a.logProbPeakMaterialised(), off.phases().get(1).peak());
        assertEquals(on.residentBytes() + b.logProbPeakFused(), on.phases().get(1).peak());
        // the log-prob pass: 2 [N, V] float32 (logits, log_softmax) against one chunk's logits
        assertTrue(b.logProbPeakFused() < a.logProbPeakMaterialised() / 1.9, b.logProbPeakFused() + " vs " + a.logProbPeakMaterialised());
        assertTrue(b.update().peak(false, true) < a.update().peak(false, false) / 3);
        assertTrue(on.phases().get(2).peak() < off.phases().get(2).peak());
    }

    /** Every "key: value (" line of the advice, as overrides (PlanCommandTest reads the printed advice the same way). */
    static List<String> overrides(List<String> advice) {
        List<String> o = new java.util.ArrayList<>();
        for (String a : advice) {
            var m = java.util.regex.Pattern.compile("^([a-z_.]+): (\\S+) \\(").matcher(a);
            if (m.find()) o.add(m.group(1) + "=" + m.group(2));
        }
        return o;
    }

    @Test
    void theAdviceSwitchesTheFusedHeadOnForACpuRun() {
        // 64 MiB (57.6 usable): the resident ~19 MB and the materialised update's ~58 MB do not fit; the fused ~15 MB does
        long gpu = 64L << 20;
        MemoryPlan p = bigVocab(gpu, "run.device=cpu", "ppo.fused_lm_head=false");
        assertTrue(!p.fits());
        List<String> advice = p.advice();
        assertEquals(List.of("ppo.fused_lm_head=true"), overrides(advice), advice.toString());
        assertTrue(advice.get(0).contains("become chunks of 24 tokens"), advice.toString());
        assertTrue(advice.get(advice.size() - 1).startsWith("with all of these it fits"), advice.toString());
        assertTrue(bigVocab(gpu, "run.device=cpu", "ppo.fused_lm_head=true").fits());
        // the default is the fused head: it fits as it is, and nothing is advised about the head
        MemoryPlan byDefault = bigVocab(gpu, "run.device=cpu");
        assertTrue(byDefault.fits());
        assertTrue(byDefault.advice().stream().noneMatch(a -> a.contains("fused_lm_head")), byDefault.advice().toString());
    }

    @Test
    void aGpuRunIsAdvisedTheFusedHeadToo() {
        long gpu = 64L << 20;
        List<String> advice = bigVocab(gpu, "run.device=cuda", "ppo.fused_lm_head=false").advice();
        assertTrue(advice.stream().anyMatch(a -> a.startsWith("ppo.fused_lm_head: true (") && a.contains("has not run on a GPU yet")),
                advice.toString());
        List<String> o = overrides(advice);
        assertEquals(List.of("ppo.fused_lm_head=true"), o, advice.toString());
        List<String> all = new java.util.ArrayList<>(List.of("run.device=cuda", "ppo.fused_lm_head=false"));
        all.addAll(o);
        assertTrue(bigVocab(gpu, all.toArray(String[]::new)).fits(), advice.toString());
    }

    @Test
    void aSmallHeadIsNotAdvised() {
        // MemoryPlanCheckTest's Qwen3 (hidden 256, 4 layers, rows of 64 + 448 tokens) at V = 366: the head's 4 [N, V]
        // tensors (~10 MiB) are below a tenth of the update micro-batch; a GPU too small for it gets other advice only
        String[] shape = {"run.device=cpu", "models.policy.size.hidden=256", "models.policy.size.layers=4", "models.policy.size.heads=4",
                "models.policy.size.kv_heads=2", "models.policy.size.intermediate=768", "models.policy.size.max_positions=512",
                "rollout.max_new_tokens=448", "rollout.max_prompt_tokens=64", "rollout.tasks_per_step=1", "rollout.rollouts_per_task=4"};
        RunConfig cfg = RunConfig.parse(YAML, List.of(shape));
        Map<String, ModelConfig> shapes = Map.of("policy", cfg.models().get("policy").toModelConfig(BuiltinTokenizer.VOCAB_SIZE, List.of()));
        MemoryPlan.ModelPlan m = MemoryPlan.of(cfg, shapes, new MemoryPlan.Machine(1, 1L << 40)).models().get(0);
        assertTrue(m.update().materialisedHeadBytes() * 10 < m.update().added(), m.update().toString());
        MemoryPlan small = MemoryPlan.of(cfg, shapes, new MemoryPlan.Machine(1, (long) (m.update().added() * 0.9 / MemoryPlan.USABLE_FRACTION)));
        assertTrue(!small.fits());
        List<String> advice = small.advice();
        assertTrue(advice.stream().anyMatch(a -> a.startsWith("models.policy.activation_checkpointing: true")), advice.toString());
        assertTrue(advice.stream().noneMatch(a -> a.contains("fused_lm_head")), advice.toString());
    }
}

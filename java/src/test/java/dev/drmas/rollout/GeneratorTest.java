// GeneratorTest.java — the rollout engine on tiny random models of each family: batched
// generation of mixed prompt lengths equals one-by-one generation, the KV cache gives the tokens
// a full recompute gives, the engine's log-probs equal the trainer's teacher-forced ones, draws
// are reproducible from their seed, requests stop for the right reason, native memory stays
// flat over many calls, and a token budget (rollout.max_batch_tokens) splits the requests into
// batches whose KV caches stay within it, with the same tokens.
package dev.drmas.rollout;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.drmas.model.CausalLm;
import dev.drmas.model.Family;
import dev.drmas.model.ModelConfig;
import dev.drmas.model.Tensors;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Set;
import org.bytedeco.javacpp.PointerScope;
import org.bytedeco.pytorch.global.torch;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;
import org.junit.jupiter.api.Test;

class GeneratorTest {
    static final int VOCAB = 97;
    static final List<CausalLm> MODELS = new ArrayList<>();

    @BeforeAll
    static void threads() {
        torch.set_num_threads(2);
        for (Family f : Family.values()) MODELS.add(CausalLm.random(ModelConfig.tiny(f, VOCAB), 1234 + f.ordinal()));
    }

    @AfterAll
    static void close() {
        for (CausalLm m : MODELS) m.close();
    }

    static CausalLm model(Family f) {
        return MODELS.get(f.ordinal());
    }

    static List<Request> prompts() {
        return List.of(new Request(new int[] {5, 17, 42}, 0), new Request(new int[] {9}, 1),
                new Request(new int[] {3, 1, 4, 1, 5, 9, 2, 6}, 2), new Request(new int[] {60, 61}, 3));
    }

    @ParameterizedTest
    @EnumSource(Family.class)
    void batchedEqualsOneByOne(Family f) {
        Generator g = new Generator(model(f));
        GenerationConfig cfg = GenerationConfig.greedy(12, Set.of());
        List<Completion> batch = g.generate(prompts(), cfg);
        for (int r = 0; r < prompts().size(); r++) {
            Completion alone = g.generate(List.of(prompts().get(r)), cfg).get(0);
            assertArrayEquals(alone.tokens(), batch.get(r).tokens(), "request " + r);
            for (int j = 0; j < alone.length(); j++) {
                assertEquals(alone.logprobs()[j], batch.get(r).logprobs()[j], 1e-4, "request " + r + " token " + j);
            }
        }
    }

    @ParameterizedTest
    @EnumSource(Family.class)
    void cacheGivesTheTokensOfAFullRecompute(Family f) {
        Generator g = new Generator(model(f));
        GenerationConfig cfg = GenerationConfig.greedy(10, Set.of()).withSampling(new SamplingParams(0.9, 20, 0.95), 77);
        List<Completion> cached = g.generate(prompts(), cfg);
        List<Completion> recomputed = g.generate(prompts(), cfg.withCache(false));
        for (int r = 0; r < cached.size(); r++) {
            assertArrayEquals(recomputed.get(r).tokens(), cached.get(r).tokens(), "request " + r);
        }
    }

    @ParameterizedTest
    @EnumSource(Family.class)
    void engineLogProbsEqualTeacherForcedLogProbs(Family f) {
        engineAndTeacherForcingAgree(f, 0, VOCAB);
    }

    /**
     * With a vocabulary limit (a checkpoint's head padded past its tokenizer) the trainer scores over
     * the ids the engine samples from; over the whole head the log-probs differed by ~0.08.
     */
    @ParameterizedTest
    @EnumSource(Family.class)
    void underAVocabularyLimitTheTrainerScoresWhatTheEngineSampledFrom(Family f) {
        engineAndTeacherForcingAgree(f, VOCAB - 8, VOCAB - 8);
        // a response token the engine could not have sampled cannot be scored
        var e = assertThrows(IllegalArgumentException.class, () -> TeacherForcing.logProbs(model(f), List.of(new int[] {3}),
                List.of(new int[] {5, VOCAB - 8}), 1.0, false, false, VOCAB - 8));
        assertTrue(e.getMessage().contains("response 0: token 1 = " + (VOCAB - 8) + " is outside the vocabulary limit"), e.getMessage());
    }

    private static void engineAndTeacherForcingAgree(Family f, int vocabLimit, int scored) {
        Generator g = new Generator(model(f));
        double temperature = 0.7;
        GenerationConfig cfg = GenerationConfig.greedy(9, Set.of()).withSampling(SamplingParams.temperature(temperature), 5)
                .withVocabLimit(vocabLimit);
        List<Completion> out = g.generate(prompts(), cfg);
        List<int[]> ps = new ArrayList<>(), rs = new ArrayList<>();
        for (int r = 0; r < out.size(); r++) {
            ps.add(prompts().get(r).promptIds());
            rs.add(out.get(r).tokens());
            for (int t : out.get(r).tokens()) assertTrue(t < scored, "request " + r + " sampled " + t + ", past the limit " + scored);
        }
        try (PointerScope scope = new PointerScope()) {
            TeacherForcing.Result tf = TeacherForcing.logProbs(model(f), ps, rs, temperature, true, true, vocabLimit);
            float[] lp = Tensors.toFloats(tf.logprobs());
            float[] ent = Tensors.toFloats(tf.entropy());
            for (int r = 0; r < out.size(); r++) {
                for (int j = 0; j < out.get(r).length(); j++) {
                    int k = (int) tf.offsets()[r] + j;
                    assertEquals(out.get(r).logprobs()[j], lp[k], 1e-4, "request " + r + " token " + j);
                    // entropy of a distribution over the scored tokens lies in [0, log scored]
                    assertTrue(ent[k] >= -1e-5 && ent[k] <= Math.log(scored) + 1e-5, "entropy " + ent[k]);
                }
            }
        }
    }

    /** Seven prompts of 1 to 9 tokens, in no order of length. */
    static List<Request> unevenPrompts() {
        int[] lengths = {4, 9, 1, 6, 2, 9, 3};
        List<Request> out = new ArrayList<>();
        for (int r = 0; r < lengths.length; r++) {
            int[] p = new int[lengths[r]];
            for (int j = 0; j < p.length; j++) p[j] = (r * 31 + j * 7 + 3) % VOCAB;
            out.add(new Request(p, 100 + r));
        }
        return out;
    }

    enum DecodePath { CPU_DECODE, GENERAL_CACHED, RECOMPUTE }

    @ParameterizedTest
    @EnumSource(DecodePath.class)
    void aTokenBudgetSplitsTheBatchAndKeepsEveryToken(DecodePath path) {
        // CPU_DECODE: float32 on the CPU decodes through DecodeStep; GENERAL_CACHED: a float64 model
        // takes the general layers (as on a GPU) with its KV cache; RECOMPUTE: no cache at all
        CausalLm m = path == DecodePath.GENERAL_CACHED
                ? CausalLm.random(ModelConfig.tiny(Family.QWEN3, VOCAB), 77, org.bytedeco.pytorch.global.torch.ScalarType.Double,
                        new org.bytedeco.pytorch.Device("cpu"))
                : CausalLm.random(ModelConfig.tiny(Family.QWEN3, VOCAB), 77);
        try (m) {
            List<Request> reqs = unevenPrompts();
            GenerationConfig free = GenerationConfig.greedy(8, Set.of()).withSampling(new SamplingParams(1.0, 30, 0.95), 4242)
                    .withCache(path != DecodePath.RECOMPUTE);
            Generator unbounded = new Generator(m);
            // a stop token that request 0 draws at its third token: it and any row that draws it stop early
            int stop = unbounded.generate(reqs, free).get(0).tokens()[2];
            GenerationConfig cfg = new GenerationConfig(free.sampling(), free.maxNewTokens(), Set.of(stop), List.of(), null,
                    free.seed(), free.useCache(), 0);
            List<Completion> want = unbounded.generate(reqs, cfg);
            assertEquals(List.of(new Generator.Batch(7, 17)), unbounded.lastBatches(), "unbounded: one batch of all rows");
            assertTrue(want.stream().anyMatch(c -> c.finishReason() == Completion.FinishReason.STOP_TOKEN && c.length() < 8)
                    && want.stream().anyMatch(c -> c.finishReason() == Completion.FinishReason.LENGTH), "some rows stop early, some do not");
            // 40 slots: two rows of the 9-token prompts (2 × 17), then rows of 6 + 8, ...
            final long budget = 40;
            Generator bounded = new Generator(m, budget, Generator.Engine.STATIC);
            List<Completion> got = bounded.generate(reqs, cfg);
            List<Generator.Batch> batches = bounded.lastBatches();
            assertTrue(batches.size() >= 3, "batches: " + batches);
            int rows = 0;
            for (Generator.Batch b : batches) {
                assertTrue(b.slots() <= budget, "a batch of " + b + " = " + b.slots() + " slots exceeds the budget " + budget);
                rows += b.rows();
            }
            assertEquals(reqs.size(), rows, "every request in exactly one batch: " + batches);
            assertEquals(want.size(), got.size());
            for (int r = 0; r < want.size(); r++) {
                assertArrayEquals(want.get(r).tokens(), got.get(r).tokens(), "request " + r + " (in request order)");
                assertEquals(want.get(r).finishReason(), got.get(r).finishReason(), "request " + r);
                for (int j = 0; j < want.get(r).length(); j++) {
                    assertEquals(want.get(r).logprobs()[j], got.get(r).logprobs()[j], 1e-5, "request " + r + " token " + j);
                }
            }
            // continuous batching: one cache of the budget's two rows, the others join as rows finish
            Generator continuous = new Generator(m, budget, Generator.Engine.CONTINUOUS);
            List<Completion> joined = continuous.generate(reqs, cfg);
            assertEquals(path == DecodePath.RECOMPUTE ? batches : List.of(new Generator.Batch(2, 17)), continuous.lastBatches());
            for (int r = 0; r < want.size(); r++) {
                assertArrayEquals(want.get(r).tokens(), joined.get(r).tokens(), "continuous: request " + r);
                assertEquals(want.get(r).finishReason(), joined.get(r).finishReason(), "continuous: request " + r);
            }
            // a budget that holds everything runs one batch
            Generator roomy = new Generator(m, 7 * 17, Generator.Engine.STATIC);
            List<Completion> one = roomy.generate(reqs, cfg);
            assertEquals(List.of(new Generator.Batch(7, 17)), roomy.lastBatches());
            for (int r = 0; r < want.size(); r++) assertArrayEquals(want.get(r).tokens(), one.get(r).tokens(), "request " + r);
        }
    }

    @Test
    void theBatchPlanPacksLongestFirstWithinTheBudget() {
        // lengths 4 9 1 6 2 9 3 + 8 new tokens, 40 slots: {1, 5} at 17, {3, 0} at 14, {6, 4, 2} at 11 (33 of 40)
        List<int[]> plan = Generator.plan(unevenPrompts(), 8, 40);
        assertEquals(3, plan.size());
        assertArrayEquals(new int[] {1, 5}, plan.get(0));
        assertArrayEquals(new int[] {3, 0}, plan.get(1));
        assertArrayEquals(new int[] {6, 4, 2}, plan.get(2));
        // a budget of one longest row: one row a batch
        assertEquals(7, Generator.plan(unevenPrompts(), 8, 17).size());
    }

    @Test
    void aRequestLargerThanTheBudgetIsNamed() {
        Generator g = new Generator(model(Family.QWEN3), 12);
        var e = assertThrows(IllegalArgumentException.class, () -> g.generate(unevenPrompts(), GenerationConfig.greedy(8, Set.of())));
        assertEquals("request 1: its prompt of 9 tokens + max new tokens 8 = 17 token slots, more than a batch may hold"
                + " (max_batch_tokens 12)", e.getMessage());
        assertThrows(IllegalArgumentException.class, () -> new Generator(model(Family.QWEN3), -1));
    }

    @Test
    void teacherForcingKeepsTheGraph() {
        CausalLm m = CausalLm.random(ModelConfig.tiny(Family.QWEN3, VOCAB), 9);
        try (m; PointerScope scope = new PointerScope()) {
            m.setRequiresGrad(true);
            TeacherForcing.Result tf = TeacherForcing.logProbs(m, List.of(new int[] {1, 2}, new int[] {3}),
                    List.of(new int[] {4, 5, 6}, new int[] {7}), 1.0, false);
            assertEquals(4, tf.logprobs().size(0));
            tf.logprobs().sum().backward();
            var grad = m.parameters().get("model.embed_tokens.weight").grad();
            assertTrue(grad.defined() && grad.abs().sum().item_double() > 0, "gradient reaches the embeddings");
        }
    }

    @Test
    void sameSeedSameTokensOtherSeedOtherTokens() {
        Generator g = new Generator(model(Family.LLAMA));
        GenerationConfig cfg = GenerationConfig.greedy(16, Set.of()).withSampling(SamplingParams.temperature(1.0), 2026);
        List<Completion> a = g.generate(prompts(), cfg), b = g.generate(prompts(), cfg);
        List<Completion> c = g.generate(prompts(), cfg.withSampling(SamplingParams.temperature(1.0), 2027));
        boolean anyDiffers = false;
        for (int r = 0; r < a.size(); r++) {
            assertArrayEquals(a.get(r).tokens(), b.get(r).tokens());
            anyDiffers |= !java.util.Arrays.equals(a.get(r).tokens(), c.get(r).tokens());
        }
        assertTrue(anyDiffers, "another seed must change some of 4 x 16 tokens sampled at temperature 1");
        // a request sampled alone draws what it draws inside the batch
        Completion alone = g.generate(List.of(prompts().get(2)), cfg).get(0);
        assertArrayEquals(a.get(2).tokens(), alone.tokens());
    }

    @Test
    void requestsStopForTheirReasons() {
        Generator g = new Generator(model(Family.QWEN2));
        List<Request> one = List.of(prompts().get(0));
        int[] free = g.generate(one, GenerationConfig.greedy(8, Set.of())).get(0).tokens();
        assertEquals(8, free.length);
        // a stop token: the first occurrence of free[3] ends the request there
        int firstAt = 0;
        while (free[firstAt] != free[3]) firstAt++;
        Completion stopped = g.generate(one, GenerationConfig.greedy(8, Set.of(free[3]))).get(0);
        assertEquals(Completion.FinishReason.STOP_TOKEN, stopped.finishReason());
        assertArrayEquals(java.util.Arrays.copyOf(free, firstAt + 1), stopped.tokens());
        // a stop string over a decoder that spells token t as "<t>"
        java.util.function.Function<int[], String> dec = ids -> {
            StringBuilder sb = new StringBuilder();
            for (int t : ids) sb.append('<').append(t).append('>');
            return sb.toString();
        };
        String stop = free[4] + "><" + free[5];  // spans two tokens
        Completion s = g.generate(one, GenerationConfig.greedy(8, Set.of()).withStopStrings(List.of(stop), dec)).get(0);
        assertEquals(Completion.FinishReason.STOP_STRING, s.finishReason());
        assertTrue(dec.apply(s.tokens()).contains(stop));
        assertFalse(dec.apply(java.util.Arrays.copyOf(s.tokens(), s.length() - 1)).contains(stop));
        // the budget
        Completion budget = g.generate(one, GenerationConfig.greedy(3, Set.of())).get(0);
        assertEquals(Completion.FinishReason.LENGTH, budget.finishReason());
        assertArrayEquals(java.util.Arrays.copyOf(free, 3), budget.tokens());
        // a mixed batch: each row stops on its own, the others go on
        List<Completion> mixed = g.generate(List.of(prompts().get(0), prompts().get(1)), GenerationConfig.greedy(8, Set.of(free[0])));
        assertEquals(1, mixed.get(0).length());
        assertEquals(Completion.FinishReason.STOP_TOKEN, mixed.get(0).finishReason());
    }

    @Test
    void badInputsAreNamed() {
        Generator g = new Generator(model(Family.QWEN3));
        var e = assertThrows(IllegalArgumentException.class,
                () -> g.generate(List.of(new Request(new int[] {1, VOCAB}, 0)), GenerationConfig.greedy(2, Set.of())));
        assertTrue(e.getMessage().contains("request 0: prompt token 1 = " + VOCAB), e.getMessage());
        assertThrows(IllegalArgumentException.class, () -> new Request(new int[0], 0));
        assertThrows(IllegalArgumentException.class, () -> GenerationConfig.greedy(0, Set.of()));
        var e2 = assertThrows(IllegalArgumentException.class,
                () -> TeacherForcing.logProbs(model(Family.QWEN3), List.of(new int[] {1}), List.of(new int[] {-1}), 1.0, false));
        assertTrue(e2.getMessage().contains("response 0: token 0 = -1"), e2.getMessage());
        // a budget whose slots overflow an int (b × capacity) is refused before anything is allocated (issue 20),
        // by a model whose positions would allow it
        List<Request> many = new java.util.ArrayList<>();
        for (int i = 0; i < 8; i++) many.add(new Request(new int[] {1, 2}, i));
        try (CausalLm endless = CausalLm.random(ModelConfig.tiny(Family.QWEN3, VOCAB).withMaxPositions(Integer.MAX_VALUE), 3)) {
            var e3 = assertThrows(IllegalArgumentException.class,
                    () -> new Generator(endless).generate(many, GenerationConfig.greedy(Integer.MAX_VALUE / 4, Set.of())));
            assertTrue(e3.getMessage().contains("8 requests × (longest prompt 2 + max new tokens 536870911) = 4294967304 token slots"),
                    e3.getMessage());
        }
        // a prompt and its new tokens past the model's positions (256 for the tiny shapes): RoPE positions it never saw
        int[] longPrompt = new int[250];
        GenerationConfig seven = GenerationConfig.greedy(7, Set.of());
        var e4 = assertThrows(IllegalArgumentException.class,
                () -> g.generate(List.of(new Request(new int[] {1}, 0), new Request(longPrompt, 1)), seven));
        assertTrue(e4.getMessage().contains("request 1: its prompt of 250 tokens + max new tokens 7 = 257 positions, more than the model"
                + " takes (256, max_position_embeddings)"), e4.getMessage());
        assertEquals(6, g.generate(List.of(new Request(longPrompt, 1)), GenerationConfig.greedy(6, Set.of())).get(0).length(),
                "the last position is usable");
    }

    @Test
    void nativeMemoryIsReleasedAtEveryCall() throws Exception {
        Generator g = new Generator(model(Family.QWEN3));
        GenerationConfig cfg = GenerationConfig.greedy(4, Set.of()).withSampling(SamplingParams.temperature(1.0), 3);
        List<Request> two = List.of(prompts().get(0), prompts().get(1));
        for (int i = 0; i < 100; i++) g.generate(two, cfg);  // warm up allocator pools, JIT and heap
        // Exact: a native object that escaped generate's own scopes would attach to this one.
        // Coarse: resident memory after every 100 calls, which wanders by tens of MB (malloc
        // arenas, the Java heap), so the medians of the first and last thirds are compared.
        long[] rss = new long[10];
        try (CountingScope outer = new CountingScope()) {
            for (int k = 0; k < rss.length; k++) {
                for (int i = 0; i < 100; i++) g.generate(two, cfg);
                System.gc();
                rss[k] = rssBytes();
            }
            assertEquals(0, outer.attached, "native objects left behind by 1000 generate calls");
        }
        long first = median(Arrays.copyOfRange(rss, 0, 3)), last = median(Arrays.copyOfRange(rss, 7, 10));
        StringBuilder series = new StringBuilder();
        for (long r : rss) series.append(r >> 20).append(' ');
        assertTrue(last - first < 32L << 20, "resident memory grew by " + ((last - first) >> 20)
                + " MiB over 1000 calls (MiB every 100 calls: " + series + ")");
    }

    /** A scope that counts the native objects attached to it. */
    static final class CountingScope extends PointerScope {
        int attached;

        @Override
        public PointerScope attach(org.bytedeco.javacpp.Pointer p) {
            attached++;
            return super.attach(p);
        }
    }

    static long median(long[] a) {
        long[] c = a.clone();
        Arrays.sort(c);
        return c[c.length / 2];
    }

    static long rssBytes() throws Exception {
        for (String line : Files.readAllLines(Path.of("/proc/self/status"))) {
            if (line.startsWith("VmRSS:")) return Long.parseLong(line.replaceAll("[^0-9]", "")) * 1024;
        }
        throw new IllegalStateException("no VmRSS in /proc/self/status");
    }
}

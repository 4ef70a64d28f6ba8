// ContinuousEngineTest.java — continuous batching (Generator.Engine.CONTINUOUS) against the static
// engine on tiny random models: a task's rollouts with one prompt, prompts sharing a long prefix,
// responses whose lengths differ more than 10×, requests joining as rows finish under a token
// budget, the write column going round the cache and the rows compacted at the end — the same
// tokens, finish reasons and log-probs for the same seeds, on the CPU decoding step and on the
// general layers (as on a GPU), with fewer prompt tokens prefilled.
package dev.drmas.rollout;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.drmas.model.CausalLm;
import dev.drmas.model.Family;
import dev.drmas.model.KvCache;
import dev.drmas.model.ModelConfig;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.SplittableRandom;
import org.bytedeco.pytorch.Device;
import org.bytedeco.pytorch.global.torch;
import org.bytedeco.pytorch.global.torch.ScalarType;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

class ContinuousEngineTest {
    static final int VOCAB = 61;

    @BeforeAll
    static void threads() {
        torch.set_num_threads(2);
    }

    enum Path { CPU_DECODE, GENERAL_LAYERS }

    static CausalLm model(Path path, Family f) {
        ModelConfig c = ModelConfig.tiny(f, VOCAB);
        return path == Path.GENERAL_LAYERS ? CausalLm.random(c, 91, ScalarType.Double, new Device("cpu")) : CausalLm.random(c, 91);
    }

    /**
     * {@code tasks} tasks of {@code n} rollouts each (one prompt per task, one stream per
     * rollout): every prompt starts with the same {@code prefix} tokens, then a task's own 1–12.
     */
    static List<Request> rollouts(int tasks, int n, int prefix, long seed) {
        SplittableRandom rng = new SplittableRandom(seed);
        int[] head = new int[prefix];
        for (int j = 0; j < prefix; j++) head[j] = rng.nextInt(VOCAB);
        List<Request> out = new ArrayList<>();
        for (int t = 0; t < tasks; t++) {
            int[] p = new int[prefix + 1 + rng.nextInt(12)];
            System.arraycopy(head, 0, p, 0, prefix);
            for (int j = prefix; j < p.length; j++) p[j] = rng.nextInt(VOCAB);
            for (int r = 0; r < n; r++) out.add(new Request(p, 1000L * t + r));
        }
        return out;
    }

    /** Sampling at temperature 1 with five stop tokens of 61: lengths from 1 to the budget. */
    static GenerationConfig mixedLengths(int maxNew) {
        return new GenerationConfig(SamplingParams.temperature(1.0), maxNew, Set.of(3, 11, 19, 27, 35), List.of(), null, 77, true, 0);
    }

    static void assertSame(List<Completion> want, List<Completion> got, String what) {
        assertEquals(want.size(), got.size(), what);
        for (int r = 0; r < want.size(); r++) {
            assertArrayEquals(want.get(r).tokens(), got.get(r).tokens(), what + ": request " + r);
            assertEquals(want.get(r).finishReason(), got.get(r).finishReason(), what + ": request " + r);
            for (int j = 0; j < want.get(r).length(); j++) {
                assertEquals(want.get(r).logprobs()[j], got.get(r).logprobs()[j], 1e-4, what + ": request " + r + " token " + j);
            }
        }
    }

    @ParameterizedTest
    @EnumSource(Path.class)
    void joiningRowsAndSharedPrefixesKeepEveryToken(Path path) {
        try (CausalLm m = model(path, Family.QWEN3)) {
            // a 60-token prefix shared by 6 prompts: computing it once saves 5 × 60 tokens, more than a forward's worth
            List<Request> reqs = rollouts(6, 4, 60, 5);
            GenerationConfig cfg = mixedLengths(40);
            List<Completion> want = new Generator(m, 0, Generator.Engine.STATIC).generate(reqs, cfg);
            int shortest = want.stream().mapToInt(Completion::length).min().orElseThrow();
            int longestOut = want.stream().mapToInt(Completion::length).max().orElseThrow();
            assertTrue(longestOut >= 10 * shortest, "responses of " + shortest + " to " + longestOut + " tokens");

            // unbounded: one batch of all 24 rows, the 6 prompts prefilled once, their 20-token prefix once
            Generator all = new Generator(m, 0, Generator.Engine.CONTINUOUS);
            assertSame(want, all.generate(reqs, cfg), "unbounded");
            Generator.Stats s = all.lastStats();
            long prompts = reqs.stream().mapToLong(r -> r.promptIds().length).sum();
            assertEquals(prompts, s.promptTokens());
            long distinct = 0;
            for (int t = 0; t < 6; t++) distinct += reqs.get(4 * t).promptIds().length - 60;
            assertEquals(60 + distinct, s.prefilledTokens(), "the prefix once, each task's rest once: " + s);
            assertTrue(s.compactions() >= 1, "the rows still generating were compacted: " + s);

            // a budget of 5 rows: the others join as rows finish, the column goes round the cache
            int capacity = reqs.stream().mapToInt(r -> r.promptIds().length).max().orElseThrow() + 40;
            Generator five = new Generator(m, 5L * capacity, Generator.Engine.CONTINUOUS);
            assertSame(want, five.generate(reqs, cfg), "five rows");
            assertEquals(List.of(new Generator.Batch(5, capacity)), five.lastBatches());
            Generator.Stats f = five.lastStats();
            assertTrue(f.admissions() >= 4 && f.wrapped(), "requests joined " + f.admissions() + " times, wrapped " + f.wrapped());
        }
    }

    @ParameterizedTest
    @EnumSource(Family.class)
    void everyFamilyGivesTheStaticTokens(Family family) {
        try (CausalLm m = model(Path.CPU_DECODE, family)) {
            List<Request> reqs = rollouts(5, 3, 17, 11);
            GenerationConfig cfg = mixedLengths(24);
            List<Completion> want = new Generator(m, 0, Generator.Engine.STATIC).generate(reqs, cfg);
            int capacity = reqs.stream().mapToInt(r -> r.promptIds().length).max().orElseThrow() + 24;
            for (long rows : new long[] {1, 2, 7, reqs.size()}) {
                Generator g = new Generator(m, rows * capacity, Generator.Engine.CONTINUOUS);
                assertSame(want, g.generate(reqs, cfg), rows + " rows");
            }
        }
    }

    @Test
    void oneRequestPerPromptAndNoSharedPrefixPrefillsEveryToken() {
        try (CausalLm m = model(Path.CPU_DECODE, Family.LLAMA)) {
            SplittableRandom rng = new SplittableRandom(3);
            List<Request> reqs = new ArrayList<>();
            for (int r = 0; r < 9; r++) {
                int[] p = new int[1 + rng.nextInt(30)];
                for (int j = 0; j < p.length; j++) p[j] = rng.nextInt(VOCAB);
                reqs.add(new Request(p, r));
            }
            GenerationConfig cfg = mixedLengths(16);
            Generator g = new Generator(m, 0, Generator.Engine.CONTINUOUS);
            assertSame(new Generator(m, 0, Generator.Engine.STATIC).generate(reqs, cfg), g.generate(reqs, cfg), "distinct prompts");
            long prompts = reqs.stream().mapToLong(r -> r.promptIds().length).sum();
            assertEquals(prompts, g.lastStats().promptTokens());
            assertEquals(prompts, g.lastStats().prefilledTokens());
        }
    }

    /**
     * Prompts of a multi-turn workflow: per task a question after a shared system prompt, then per
     * rollout a history of {@code history} tokens (each rollout's starting with its own token).
     */
    static List<Request> turn(int tasks, int n, int system, int question, int history, long seed, int turn) {
        SplittableRandom rng = new SplittableRandom(seed);
        int[] head = new int[system];
        for (int j = 0; j < system; j++) head[j] = rng.nextInt(VOCAB);
        List<Request> out = new ArrayList<>();
        for (int t = 0; t < tasks; t++) {
            int[] q = new int[question];
            for (int j = 0; j < question; j++) q[j] = rng.nextInt(VOCAB);
            for (int r = 0; r < n; r++) {
                int[] p = new int[system + question + history];
                System.arraycopy(head, 0, p, 0, system);
                System.arraycopy(q, 0, p, system, question);
                for (int j = 0; j < history; j++) p[system + question + j] = j == 0 ? (t * n + r) % VOCAB : rng.nextInt(VOCAB);
                out.add(new Request(p, 1000L * t + r + 100_000L * turn));
            }
        }
        return out;
    }

    /** The same requests with {@code more} tokens appended to each prompt (the next turn's history). */
    static List<Request> extended(List<Request> reqs, int more, long seed) {
        SplittableRandom rng = new SplittableRandom(seed);
        List<Request> out = new ArrayList<>();
        for (Request r : reqs) {
            int[] p = java.util.Arrays.copyOf(r.promptIds(), r.promptIds().length + more);
            for (int j = r.promptIds().length; j < p.length; j++) p[j] = rng.nextInt(VOCAB);
            out.add(new Request(p, r.stream() + 7));
        }
        return out;
    }

    @ParameterizedTest
    @EnumSource(Path.class)
    void aTasksPromptsShareTheirStemsOnce(Path path) {
        try (CausalLm m = model(path, Family.QWEN3)) {
            // 3 tasks x 4 rollouts: a 40-token system prompt, a 100-token question, 5-token histories
            // (each stem saves more than a forward's worth: 11 × 40 and 3 × 100 tokens)
            List<Request> reqs = turn(3, 4, 40, 100, 5, 41, 0);
            GenerationConfig cfg = mixedLengths(12);
            Generator g = new Generator(m, 0, Generator.Engine.CONTINUOUS);
            assertSame(new Generator(m, 0, Generator.Engine.STATIC).generate(reqs, cfg), g.generate(reqs, cfg), "stems");
            // the system prompt once, each question once, each history once
            assertEquals(40 + 3 * 100 + 12 * 5, g.lastStats().prefilledTokens(), g.lastStats().toString());
            // short stems are not worth a forward of their own: 3 × 20 and 11 × 20 tokens
            List<Request> small = turn(3, 4, 20, 20, 5, 41, 0);
            assertSame(new Generator(m, 0, Generator.Engine.STATIC).generate(small, cfg), g.generate(small, cfg), "short stems");
            assertEquals(12 * 45, g.lastStats().prefilledTokens(), "every prompt whole: " + g.lastStats());
        }
    }

    @ParameterizedTest
    @EnumSource(Path.class)
    void aLaterTurnStartsFromTheEarlierPrompts(Path path) {
        try (CausalLm m = model(path, Family.QWEN3)) {
            List<Request> first = turn(3, 4, 40, 100, 6, 43, 0), second = extended(first, 9, 44);
            GenerationConfig cfg = mixedLengths(12);
            Generator fresh = new Generator(m, 0, Generator.Engine.CONTINUOUS);
            Generator kept = new Generator(m, 0, Generator.Engine.CONTINUOUS).keepPrefixes(0);
            Generator statics = new Generator(m, 0, Generator.Engine.STATIC);
            assertSame(statics.generate(first, cfg), kept.generate(first, cfg), "first turn");
            assertTrue(kept.prefixCache().size() > 0, "the first turn's prompts are kept");
            List<Completion> want = statics.generate(second, cfg);
            assertSame(want, kept.generate(second, cfg), "second turn, from the kept prompts");
            assertSame(want, fresh.generate(second, cfg), "second turn, from scratch");
            // each second-turn prompt copies its whole first-turn prompt and computes the 9 new tokens
            long firstLength = first.get(0).promptIds().length;
            assertEquals(12 * firstLength, kept.lastStats().reusedTokens(), kept.lastStats().toString());
            assertEquals(12 * 9, kept.lastStats().prefilledTokens(), kept.lastStats().toString());
            // from scratch: the system prompt, each question and each history (15 tokens now) once
            long scratch = 40 + 3 * 100 + 12 * 15;
            assertEquals(scratch, fresh.lastStats().prefilledTokens(), fresh.lastStats().toString());

            // new weights: nothing kept is used, the tokens are the new model's
            try (var scope = new org.bytedeco.javacpp.PointerScope(); var ng = new org.bytedeco.pytorch.NoGradGuard()) {
                m.parameters().get("model.norm.weight").mul_(new org.bytedeco.pytorch.Scalar(1.5));
            }
            List<Completion> changed = statics.generate(second, cfg);
            assertSame(changed, kept.generate(second, cfg), "after a weight change");
            assertEquals(scratch, kept.lastStats().prefilledTokens(), "nothing from before the change: " + kept.lastStats());
            kept.clearPrefixes();
            assertEquals(0, kept.prefixCache().size());
            assertEquals(0, kept.prefixCache().slots());
        }
    }

    @Test
    void aSmallBudgetEvictsOldPromptsAndKeepsTheTokens() {
        try (CausalLm m = model(Path.CPU_DECODE, Family.LLAMA)) {
            List<Request> first = turn(4, 3, 16, 18, 4, 45, 0), second = extended(first, 5, 46), third = extended(second, 5, 47);
            GenerationConfig cfg = mixedLengths(10);
            Generator statics = new Generator(m, 0, Generator.Engine.STATIC);
            // about one store cache of these prompts (38 to 48 tokens): each turn's longer prompts
            // take a new store cache, which pushes the older ones out
            long budget = PrefixCache.CHUNK_ROWS * 64L;
            Generator small = new Generator(m, 0, Generator.Engine.CONTINUOUS).keepPrefixes(budget);
            Set<KvCache> seen = identitySet();
            Set<KvCache> evicted = identitySet();
            for (List<Request> t : List.of(first, second, third)) {
                assertSame(statics.generate(t, cfg), small.generate(t, cfg), "budget " + budget);
                PrefixCache pc = small.prefixCache();
                Set<KvCache> held = identitySet();
                held.addAll(pc.storeCaches());
                long slots = 0;  // the store caches' own sizes, not the counter eviction keeps
                for (KvCache c : held) slots += c.batchSize() * c.capacity();
                assertTrue(slots > 0, "the prompts are kept");
                assertEquals(slots, pc.slots(), "slots counted against the store caches held");
                assertTrue(slots <= budget, slots + " slots kept, budget " + budget);
                for (KvCache c : seen) {
                    if (held.contains(c)) continue;
                    evicted.add(c);
                    assertTrue(c.isClosed(), "an evicted store cache is freed");
                }
                seen.addAll(held);
            }
            assertTrue(!evicted.isEmpty(), "older store caches were evicted: " + seen.size() + " made");
            assertTrue(small.lastStats().reusedTokens() > 0, "the latest turn still found its prompts: " + small.lastStats());
            small.clearPrefixes();
            assertEquals(0, small.prefixCache().slots());
            for (KvCache c : seen) assertTrue(c.isClosed(), "clearing frees every store cache");
        }
    }

    /** A set of caches by identity (KvCache has no value equality to rely on). */
    private static Set<KvCache> identitySet() {
        return java.util.Collections.newSetFromMap(new java.util.IdentityHashMap<>());
    }

    @Test
    void stopStringsAndFirstTokenStopsFinishRows() {
        try (CausalLm m = model(Path.CPU_DECODE, Family.QWEN2)) {
            List<Request> reqs = rollouts(4, 2, 0, 8);
            // every token a stop token for some rows' first draw: rows that stop at once never take a step
            Set<Integer> stops = new HashSet<>();
            for (int t = 0; t < VOCAB; t += 2) stops.add(t);
            GenerationConfig cfg = new GenerationConfig(SamplingParams.temperature(1.0), 10, stops, List.of(), null, 5, true, 0);
            assertSame(new Generator(m, 0, Generator.Engine.STATIC).generate(reqs, cfg),
                    new Generator(m, 0, Generator.Engine.CONTINUOUS).generate(reqs, cfg), "first-token stops");
            GenerationConfig text = GenerationConfig.greedy(12, Set.of()).withSampling(SamplingParams.temperature(1.0), 9)
                    .withStopStrings(List.of("7"), ids -> {
                        StringBuilder sb = new StringBuilder();
                        for (int id : ids) sb.append(id % 10);
                        return sb.toString();
                    });
            List<Completion> got = new Generator(m, 0, Generator.Engine.CONTINUOUS).generate(reqs, text);
            assertSame(new Generator(m, 0, Generator.Engine.STATIC).generate(reqs, text), got, "stop strings");
            assertTrue(got.stream().anyMatch(c -> c.finishReason() == Completion.FinishReason.STOP_STRING), "a stop string stopped a row");
        }
    }
}

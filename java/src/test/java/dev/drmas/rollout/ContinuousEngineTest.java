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
            List<Request> reqs = rollouts(6, 4, 20, 5);
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
            for (int t = 0; t < 6; t++) distinct += reqs.get(4 * t).promptIds().length - 20;
            assertEquals(20 + distinct, s.prefilledTokens(), "the prefix once, each task's rest once: " + s);
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

// GenerationConfig.java — what one batched generate call does for every request in it: how to
// pick tokens, how many new tokens at most, and when a request stops early (a stop token such
// as EOS or <|im_end|>, or a stop string in the decoded text), plus the seed of its draws.
package dev.drmas.rollout;

import java.util.List;
import java.util.Set;
import java.util.function.Function;

/**
 * @param sampling      greedy or sampling parameters
 * @param maxNewTokens  the token budget of each request (>= 1)
 * @param stopTokenIds  tokens that end a request (kept as its last token)
 * @param stopStrings   strings that end a request once its decoded response contains one; the
 *                      tokens up to the one that completes the string are kept (HF's
 *                      StopStringCriteria); needs {@code decoder}
 * @param decoder       token ids to text, for stop strings (null when there are none)
 * @param seed          the seed of every request's draws (with the request's stream id and the
 *                      step, see {@link Sampler#uniform})
 * @param useCache      false recomputes the whole sequence at every step (for benchmarks and
 *                      cross-checks: the tokens must be the same)
 * @param vocabLimit    0, or only ids below it may be generated (a checkpoint's embedding matrix
 *                      is often padded past its tokenizer: Qwen3 has 151,936 rows for 151,669
 *                      ids); the distribution is then the one over the allowed ids
 */
public record GenerationConfig(SamplingParams sampling, int maxNewTokens, Set<Integer> stopTokenIds,
                               List<String> stopStrings, Function<int[], String> decoder, long seed, boolean useCache,
                               int vocabLimit) {
    public GenerationConfig {
        if (sampling == null) throw new IllegalArgumentException("sampling must be given");
        if (maxNewTokens < 1) throw new IllegalArgumentException("max_new_tokens must be >= 1, got " + maxNewTokens);
        stopTokenIds = Set.copyOf(stopTokenIds == null ? Set.of() : stopTokenIds);
        stopStrings = List.copyOf(stopStrings == null ? List.of() : stopStrings);
        for (String s : stopStrings) {
            if (s.isEmpty()) throw new IllegalArgumentException("stop strings must not be empty");
        }
        if (vocabLimit < 0) throw new IllegalArgumentException("vocab_limit must be >= 0 (0 = none), got " + vocabLimit);
        if (!stopStrings.isEmpty() && decoder == null) {
            throw new IllegalArgumentException("stop strings need a decoder (token ids -> text)");
        }
    }

    /** Greedy decoding of up to {@code maxNewTokens}, stopping at {@code stopTokenIds}. */
    public static GenerationConfig greedy(int maxNewTokens, Set<Integer> stopTokenIds) {
        return new GenerationConfig(SamplingParams.GREEDY, maxNewTokens, stopTokenIds, List.of(), null, 0L, true, 0);
    }

    public GenerationConfig withSampling(SamplingParams p, long seed) {
        return new GenerationConfig(p, maxNewTokens, stopTokenIds, stopStrings, decoder, seed, useCache, vocabLimit);
    }

    public GenerationConfig withStopStrings(List<String> strings, Function<int[], String> dec) {
        return new GenerationConfig(sampling, maxNewTokens, stopTokenIds, strings, dec, seed, useCache, vocabLimit);
    }

    public GenerationConfig withVocabLimit(int limit) {
        return new GenerationConfig(sampling, maxNewTokens, stopTokenIds, stopStrings, decoder, seed, useCache, limit);
    }

    public GenerationConfig withCache(boolean on) {
        return new GenerationConfig(sampling, maxNewTokens, stopTokenIds, stopStrings, decoder, seed, on, vocabLimit);
    }
}

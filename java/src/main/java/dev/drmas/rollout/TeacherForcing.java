// TeacherForcing.java — the trainer's forward pass: log-probabilities (and optionally the
// entropy) of given response tokens after their prompts, batched, at the sampling temperature.
// The result is packed like the loss kernel's input (response tokens of all rows back to back,
// with row offsets) and keeps its autograd graph when the model's parameters require grad; with
// activation checkpointing, the caller finishes its backward pass with Result.finishBackward().
// With a vocabulary limit the softmax is over the ids below it, the distribution the rollout
// engine samples from (GenerationConfig.vocabLimit), so that PPO scores what was sampled.
package dev.drmas.rollout;

import dev.drmas.model.CausalLm;
import dev.drmas.model.Scopes;
import dev.drmas.model.Tensors;
import java.util.List;
import org.bytedeco.javacpp.PointerScope;
import org.bytedeco.pytorch.Scalar;
import org.bytedeco.pytorch.ScalarTypeOptional;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.global.torch.ScalarType;

public final class TeacherForcing {
    private TeacherForcing() {
    }

    /**
     * @param logprobs float32 [N] on the model's device, N = Σ response lengths: log p(token |
     *                 prefix) at the temperature
     * @param entropy  float32 [N] entropy of each predicted distribution, or null when not asked
     * @param offsets  row r's tokens are [offsets[r], offsets[r + 1])
     * @param pending  the backward pass through checkpointed layers (see {@link #finishBackward})
     */
    public record Result(Tensor logprobs, Tensor entropy, long[] offsets, CausalLm.PendingBackward pending) {
        /**
         * To call after the backward pass of a loss of these log-probs: with activation
         * checkpointing, the layers' part of it ({@link CausalLm.PendingBackward#finishBackward});
         * without, nothing.
         */
        public void finishBackward() {
            pending.finishBackward();
        }
    }

    /**
     * Scores {@code responses[r]} after {@code prompts[r]} for every row in one forward (rows
     * right-padded to the longest prompt + response). Only the positions that predict a
     * response token go through the LM head. {@code temperature} 0 (greedy) scores at 1.
     * The returned tensors belong to the caller's innermost PointerScope; so do the saved layer
     * inputs of a checkpointed forward, which {@link Result#finishBackward} frees.
     */
    public static Result logProbs(CausalLm model, List<int[]> prompts, List<int[]> responses, double temperature,
                                  boolean withEntropy) {
        return logProbs(model, prompts, responses, temperature, withEntropy, withEntropy);
    }

    /**
     * As above; {@code entropyGrad} false computes the entropy without autograd (a metric only:
     * its graph would hold two [N, V] tensors through the whole backward pass).
     */
    public static Result logProbs(CausalLm model, List<int[]> prompts, List<int[]> responses, double temperature,
                                  boolean withEntropy, boolean entropyGrad) {
        return logProbs(model, prompts, responses, temperature, withEntropy, entropyGrad, 0);
    }

    /**
     * As above over the ids below {@code vocabLimit} (0: the whole vocabulary): the logits narrowed
     * as the rollout engine narrows them (Generator.allowed), log-probs and entropy over those ids.
     * A response token at or past the limit is refused.
     */
    public static Result logProbs(CausalLm model, List<int[]> prompts, List<int[]> responses, double temperature,
                                  boolean withEntropy, boolean entropyGrad, int vocabLimit) {
        if (!(temperature >= 0) || Double.isInfinite(temperature)) {
            throw new IllegalArgumentException("temperature must be finite and >= 0, got " + temperature);
        }
        Tensor lp, ent = null;
        Hidden h;
        try (PointerScope scope = new PointerScope()) {
            h = responseHidden(model, prompts, responses, vocabLimit);
            Tensor logits = model.logits(h.hidden());  // [N, V] float32
            long v = scoredVocab(model, vocabLimit);
            if (v < logits.size(1)) logits = logits.narrow(1, 0, v);
            if (temperature > 0 && temperature != 1.0) logits = logits.div(new Scalar(temperature));
            Tensor logp = logits.log_softmax(1);
            lp = Scopes.retain(logp.gather(1, h.targets().unsqueeze(1)).squeeze(1));
            if (withEntropy) {
                try (org.bytedeco.pytorch.NoGradGuard ng = entropyGrad ? null : new org.bytedeco.pytorch.NoGradGuard()) {
                    ent = Scopes.retain(logp.exp().mul(logp).sum(new long[] {1}, false, new ScalarTypeOptional()).neg());
                }
            }
            h.pending().retain();
        }
        return new Result(Scopes.adopt(lp), ent == null ? null : Scopes.adopt(ent), h.offsets(), h.pending().adopt());
    }

    /**
     * The final hidden states of the positions that predict the response tokens, for a caller that
     * applies the LM head itself (the fused one, dev.drmas.algo.FusedLmHead).
     *
     * @param hidden  [N, hidden] in the model's dtype, on its device, with its autograd graph
     * @param targets int64 [N]: the response tokens they predict
     * @param offsets row r's tokens are [offsets[r], offsets[r + 1])
     * @param pending the backward pass through checkpointed layers, to finish after hidden's
     */
    public record Hidden(Tensor hidden, Tensor targets, long[] offsets, CausalLm.PendingBackward pending) {
    }

    /**
     * The forward of {@link #logProbs} up to the LM head: rows right-padded to the longest prompt +
     * response, the positions that predict a response token picked out. Right padding keeps each
     * row's real tokens at slots 0..len−1, so CausalLm runs the attention causal without a mask
     * (CausalLm.generalPass); the padding positions, whose outputs that changes, are never picked.
     * The tensors (and the saved inputs of a checkpointed forward) belong to the caller's innermost
     * PointerScope.
     */
    public static Hidden responseHidden(CausalLm model, List<int[]> prompts, List<int[]> responses) {
        return responseHidden(model, prompts, responses, 0);
    }

    /** As above, refusing a response token at or past {@code vocabLimit} (0: none), which the head's narrowed softmax cannot score. */
    public static Hidden responseHidden(CausalLm model, List<int[]> prompts, List<int[]> responses, int vocabLimit) {
        final int b = prompts.size();
        if (responses.size() != b) {
            throw new IllegalArgumentException(b + " prompts but " + responses.size() + " responses");
        }
        final int vocab = model.config().vocabSize(), scored = (int) scoredVocab(model, vocabLimit);
        long[] offsets = new long[b + 1];
        int longest = 0;
        for (int r = 0; r < b; r++) {
            int[] p = prompts.get(r), a = responses.get(r);
            if (p.length == 0) throw new IllegalArgumentException("prompt " + r + " is empty: nothing predicts its first token");
            checkTokens("prompt", r, p, vocab, "the vocabulary");
            checkTokens("response", r, a, scored, scored < vocab ? "the vocabulary limit (the ids the rollout engine may sample)"
                    : "the vocabulary");
            offsets[r + 1] = offsets[r] + a.length;
            longest = Math.max(longest, p.length + a.length);
        }
        final int n = (int) offsets[b];
        long[] ids = new long[b * longest], valid = new long[b * longest], where = new long[n], target = new long[n];
        for (int r = 0, k = 0; r < b; r++) {
            int[] p = prompts.get(r), a = responses.get(r);
            for (int j = 0; j < p.length; j++) {
                ids[r * longest + j] = p[j];
                valid[r * longest + j] = 1;
            }
            for (int j = 0; j < a.length; j++, k++) {
                ids[r * longest + p.length + j] = a[j];
                valid[r * longest + p.length + j] = 1;
                where[k] = (long) r * longest + p.length + j - 1;  // the position that predicts it
                target[k] = a[j];
            }
        }
        Tensor picked, targets;
        CausalLm.PendingBackward pending;
        try (PointerScope scope = new PointerScope()) {
            var dev = model.device();
            Tensor in = Tensors.longs(ids).reshape(b, longest).to(dev, ScalarType.Long);
            Tensor mask = Tensors.longs(valid).reshape(b, longest).to(dev, ScalarType.Long);
            CausalLm.TrainingForward forward = model.trainingHidden(in, CausalLm.positionIds(mask), mask);
            pending = forward.pending().retain();
            Tensor hidden = forward.hidden();
            picked = Scopes.retain(hidden.reshape(b * (long) longest, hidden.size(2))
                    .index_select(0, Tensors.longs(where).to(dev, ScalarType.Long)));
            targets = Scopes.retain(Tensors.longs(target).to(dev, ScalarType.Long));
        }
        return new Hidden(Scopes.adopt(picked), Scopes.adopt(targets), offsets, pending.adopt());
    }

    /**
     * The ids a softmax under {@code vocabLimit} runs over: the first vocabLimit rows of the LM head,
     * or all of them when the limit is 0 or not below the model's vocabulary (as Generator.allowed).
     */
    public static long scoredVocab(CausalLm model, int vocabLimit) {
        if (vocabLimit < 0) throw new IllegalArgumentException("vocabulary limit must be >= 0 (0 = none), got " + vocabLimit);
        long v = model.config().vocabSize();
        return vocabLimit > 0 && vocabLimit < v ? vocabLimit : v;
    }

    private static void checkTokens(String what, int row, int[] t, int vocab, String range) {
        for (int j = 0; j < t.length; j++) {
            if (t[j] < 0 || t[j] >= vocab) {
                throw new IllegalArgumentException(what + " " + row + ": token " + j + " = " + t[j]
                        + " is outside " + range + " [0, " + vocab + ")");
            }
        }
    }
}

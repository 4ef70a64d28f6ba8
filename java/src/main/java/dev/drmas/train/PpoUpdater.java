// PpoUpdater.java — the update of one model from its agents' rows (ARCHITECTURE §2, §6): old
// log-probs recomputed by the model's own forward pass, then epochs × mini-batches of the fused
// clipped loss (the native kernel writes dL/dlogp; LibTorch back-propagates it), gradient norm,
// clipping, a skipped step when the norm is not finite, and an AdamW step per mini-batch; with float16
// weights the backward runs on the loss times the optimiser's loss scale (ModelOptimizer unscales).
// Data-parallel: the rows of all ranks form one global list (rank order), the mini-batch
// permutation is global and seeded alike everywhere, each rank computes its share of every
// mini-batch with the global normaliser, and the gradients are summed across ranks before the
// norm, the clipping and the step, so every rank takes the single-process step.
// Per-step data stays on the model's device: old and reference log-probs are computed once and
// gathered per micro-batch there, the loss kernel gets the offsets on the host too (so it never
// synchronises), and the loss sums and the entropy are read back once per mini-batch.
package dev.drmas.train;

import dev.drmas.algo.ClippedLoss;
import dev.drmas.algo.FusedLmHead;
import dev.drmas.algo.LossAggregation;
import dev.drmas.algo.LossConfig;
import dev.drmas.bindings.AbiIndices;
import dev.drmas.dist.Collective;
import dev.drmas.model.CausalLm;
import dev.drmas.model.Scopes;
import dev.drmas.model.Tensors;
import dev.drmas.rollout.TeacherForcing;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;
import org.bytedeco.javacpp.PointerScope;
import org.bytedeco.pytorch.DeviceOptional;
import org.bytedeco.pytorch.InferenceMode;
import org.bytedeco.pytorch.Scalar;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.TensorOptions;
import org.bytedeco.pytorch.TensorVector;
import org.bytedeco.pytorch.global.torch.ScalarType;
import org.bytedeco.pytorch.global.torch;

public final class PpoUpdater {
    /**
     * @param epochs            passes over the rows
     * @param miniBatchRows     rows per optimiser step (when updatesPerStep is 0)
     * @param microBatchRows    rows per forward/backward (gradients accumulate over a mini-batch;
     *                          the loss is normalised over the whole mini-batch, so the result does
     *                          not depend on it)
     * @param temperature       the sampling temperature (log-probs are taken at it; 0 counts as 1)
     * @param entropyCoef       weight of the entropy bonus (0: off)
     * @param gradClip          max global gradient norm (0: no clipping)
     * @param loss              clip range, dual clip, KL and aggregation
     * @param constantNormalizer the divisor of seq-mean-token-sum-norm (Dr. GRPO: the token budget)
     * @param gradNormPerAgent  also measure each agent's own gradient norm before the update (one
     *                          extra forward and backward per agent of the model)
     * @param shuffle           cut each epoch's mini-batches from a seeded permutation of the rows
     *                          (default); false cuts them in row order (all ranks' rows in rank order),
     *                          the same every epoch
     * @param maxTokensPerMicroBatch 0, or micro-batches by tokens (verl's use_dynamic_bsz) instead of
     *                          microBatchRows rows, for the update and the log-prob passes: rows are
     *                          taken in order while the padded batch the forward runs, rows × the
     *                          longest prompt + response among them, stays within it (a longer row
     *                          goes alone); as microBatchRows, it changes only memory and summation order
     * @param fusedLmHead       the LM head, log-probs, entropy and loss a chunk of tokens at a time
     *                          ({@link FusedLmHead}: no [N, V] logits) in the update and the log-prob
     *                          passes, instead of TeacherForcing's materialised logits; the same loss
     *                          and gradients up to rounding. CPU and CUDA models (the kernel runs where
     *                          the model is)
     * @param updatesPerStep    0, or the optimiser steps of each epoch whatever the row count (the
     *                          Dr. MAS reference's adaptive mini-batch size, ppo.updates_per_step): the
     *                          global rows, all ranks together, cut into that many mini-batches of
     *                          ⌈rows / n⌉ or ⌊rows / n⌋ rows (one per row when there are fewer rows);
     *                          miniBatchRows is then unused
     */
    public record Settings(int epochs, int miniBatchRows, int microBatchRows, double temperature, double entropyCoef,
                           double gradClip, LossConfig loss, double constantNormalizer, boolean gradNormPerAgent,
                           boolean shuffle, int maxTokensPerMicroBatch, boolean fusedLmHead, int updatesPerStep) {
        public Settings(int epochs, int miniBatchRows, int microBatchRows, double temperature, double entropyCoef,
                        double gradClip, LossConfig loss, double constantNormalizer, boolean gradNormPerAgent, boolean shuffle,
                        int maxTokensPerMicroBatch, boolean fusedLmHead) {
            this(epochs, miniBatchRows, microBatchRows, temperature, entropyCoef, gradClip, loss, constantNormalizer,
                    gradNormPerAgent, shuffle, maxTokensPerMicroBatch, fusedLmHead, 0);
        }

        public Settings(int epochs, int miniBatchRows, int microBatchRows, double temperature, double entropyCoef,
                        double gradClip, LossConfig loss, double constantNormalizer, boolean gradNormPerAgent, boolean shuffle,
                        int maxTokensPerMicroBatch) {
            this(epochs, miniBatchRows, microBatchRows, temperature, entropyCoef, gradClip, loss, constantNormalizer,
                    gradNormPerAgent, shuffle, maxTokensPerMicroBatch, false);
        }

        public Settings(int epochs, int miniBatchRows, int microBatchRows, double temperature, double entropyCoef,
                        double gradClip, LossConfig loss, double constantNormalizer) {
            this(epochs, miniBatchRows, microBatchRows, temperature, entropyCoef, gradClip, loss, constantNormalizer, false);
        }

        public Settings(int epochs, int miniBatchRows, int microBatchRows, double temperature, double entropyCoef,
                        double gradClip, LossConfig loss, double constantNormalizer, boolean gradNormPerAgent) {
            this(epochs, miniBatchRows, microBatchRows, temperature, entropyCoef, gradClip, loss, constantNormalizer,
                    gradNormPerAgent, true);
        }

        public Settings(int epochs, int miniBatchRows, int microBatchRows, double temperature, double entropyCoef,
                        double gradClip, LossConfig loss, double constantNormalizer, boolean gradNormPerAgent, boolean shuffle) {
            this(epochs, miniBatchRows, microBatchRows, temperature, entropyCoef, gradClip, loss, constantNormalizer,
                    gradNormPerAgent, shuffle, 0);
        }

        public Settings {
            if (maxTokensPerMicroBatch < 0) {
                throw new IllegalArgumentException("ppo.max_tokens_per_micro_batch must be >= 0 (0 = off), got " + maxTokensPerMicroBatch);
            }
            if (microBatchRows < 1) throw new IllegalArgumentException("ppo.micro_batch_size must be >= 1, got " + microBatchRows);
            if (epochs < 1) throw new IllegalArgumentException("ppo.epochs must be >= 1, got " + epochs);
            if (miniBatchRows < 1) throw new IllegalArgumentException("ppo.mini_batch_size must be >= 1, got " + miniBatchRows);
            if (updatesPerStep < 0) throw new IllegalArgumentException("ppo.updates_per_step must be >= 0 (0 = off), got " + updatesPerStep);
            if (!(gradClip >= 0)) throw new IllegalArgumentException("grad_clip must be >= 0, got " + gradClip);
            if (loss.aggregation().divisor() == LossAggregation.Divisor.ROWS_TIMES_CONSTANT && !(constantNormalizer > 0)) {
                throw new IllegalArgumentException(loss.aggregation().configName() + " needs a positive constant normaliser, got "
                        + constantNormalizer);
            }
        }
    }

    /** One agent turn to learn from: its prompt and response tokens, its advantage and its agent. */
    public record Row(int[] promptIds, int[] responseIds, float advantage, int agent) {
        public Row(int[] promptIds, int[] responseIds, float advantage) {
            this(promptIds, responseIds, advantage, 0);
        }
    }

    /** Means over the mini-batches (losses, gradient norms) or over the tokens (fractions, KL, entropy). */
    public record Stats(double pgLoss, double klLoss, double clipfrac, double clipfracLower, double ppoKl, double kl,
                        double entropy, double gradNormMean, double gradNormMax, int optimizerSteps, int skippedSteps,
                        long tokens, Map<Integer, Double> agentGradNorms) {
        /** The update of a model with no rows on any rank: nothing measured, no step. */
        static final Stats NONE = new Stats(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, Map.of());

        /** Whether any response token reached the loss; when none did, the losses, fractions and norms measure nothing. */
        public boolean measured() {
            return tokens > 0;
        }
    }

    /**
     * How a mini-batch's loss reaches autograd: a scalar whose gradient with respect to
     * {@code logp} is dL/dlogp, and the kernel's metric sums ({@link AbiIndices}{@code .LOSS_*}).
     * {@code adv} holds one advantage per row (float32, numRows entries): the native kernel reads
     * it through the offsets, so the step builds no per-token copy.
     */
    interface LossBackend {
        LossOut apply(LossConfig c, double normalizer, Tensor offsets, Tensor logp, Tensor old, Tensor adv, Tensor ref);

        /** The same with the offsets also on the host ({@code hostOffsets}), for a backend that can use them. */
        default LossOut apply(LossConfig c, double normalizer, long[] hostOffsets, Tensor offsets, Tensor logp, Tensor old,
                              Tensor adv, Tensor ref) {
            return apply(c, normalizer, offsets, logp, old, adv, ref);
        }
    }

    /** The sums come as host values ({@code sums}) or as a float64 tensor on the model's device ({@code deviceSums}). */
    record LossOut(Tensor surrogate, double[] sums, Tensor deviceSums) {
        LossOut(Tensor surrogate, double[] sums) {
            this(surrogate, sums, null);
        }
    }

    /**
     * The fused native kernel: dL/dlogp in one pass, then d/dlogp of Σ logp·g is g. With the host
     * offsets it is only queued on the device, and its sums stay there.
     */
    static final LossBackend NATIVE = new LossBackend() {
        @Override
        public LossOut apply(LossConfig c, double normalizer, Tensor offsets, Tensor logp, Tensor old, Tensor adv, Tensor ref) {
            return apply(c, normalizer, null, offsets, logp, old, adv, ref);
        }

        @Override
        public LossOut apply(LossConfig c, double normalizer, long[] hostOffsets, Tensor offsets, Tensor logp, Tensor old,
                             Tensor adv, Tensor ref) {
            ClippedLoss.DeviceResult r = ClippedLoss.computeRowsOnDevice(c, normalizer, hostOffsets, offsets,
                    logp.detach().contiguous(), old, adv, ref, null);
            return new LossOut(logp.mul(r.grad()).sum(), null, r.sums());
        }
    };

    private final CausalLm model;
    private final ModelOptimizer optim;
    private final CausalLm reference;
    private final Settings s;
    private final LossBackend backend;
    private final Collective dist;
    private final String name;  // the model, in error messages of collectives
    private int vocabLimit;  // 0, or the log-probs are over the ids below it: those the rollout engine samples

    /** {@code reference} (may be null) supplies ref log-probs for the KL term. */
    public PpoUpdater(CausalLm model, AdamW optim, CausalLm reference, Settings settings) {
        this(model, ModelOptimizer.wrap(optim), reference, settings, NATIVE, Collective.single(), "the model");
    }

    /** As above with the model's optimiser in full or mixed precision. */
    public PpoUpdater(CausalLm model, ModelOptimizer optim, CausalLm reference, Settings settings) {
        this(model, optim, reference, settings, NATIVE, Collective.single(), "the model");
    }

    /** As above, as one rank of {@code dist}: {@link #update} then takes this rank's rows of model {@code name}. */
    public PpoUpdater(CausalLm model, AdamW optim, CausalLm reference, Settings settings, Collective dist, String name) {
        this(model, ModelOptimizer.wrap(optim), reference, settings, NATIVE, dist, name);
    }

    public PpoUpdater(CausalLm model, ModelOptimizer optim, CausalLm reference, Settings settings, Collective dist, String name) {
        this(model, optim, reference, settings, NATIVE, dist, name);
    }

    PpoUpdater(CausalLm model, AdamW optim, CausalLm reference, Settings settings, LossBackend backend) {
        this(model, ModelOptimizer.wrap(optim), reference, settings, backend, Collective.single(), "the model");
    }

    PpoUpdater(CausalLm model, ModelOptimizer optim, CausalLm reference, Settings settings, LossBackend backend, Collective dist,
               String name) {
        this.model = model;
        this.optim = optim;
        this.reference = reference;
        this.s = settings;
        this.backend = backend;
        this.dist = dist;
        this.name = name;
        if (settings.loss().usesReference() && reference == null) {
            throw new IllegalArgumentException("a KL term (" + settings.loss().kl() + ") needs a reference model");
        }
    }

    /**
     * Scores the responses with the softmax over the ids below {@code limit} (0: all), the
     * distribution the rollout engine sampled them from (GenerationConfig.vocabLimit; the trainer
     * passes both the same Policies.Policy.vocabLimit), in the old, reference and new log-probs
     * and the entropy alike. Returns this updater.
     */
    public PpoUpdater vocabLimit(int limit) {
        if (limit < 0) throw new IllegalArgumentException("vocabulary limit must be >= 0 (0 = none), got " + limit);
        this.vocabLimit = limit;
        return this;
    }

    /**
     * Every rank's rows in one list: where this rank's start, how many there are, and each global
     * row's response length and agent (what every rank needs to cut the same mini-batches and
     * compute the same normalisers).
     */
    private record GlobalRows(int offset, int total, long[] length, int[] agent) {
        boolean mine(int g, int local) {
            return g >= offset && g < offset + local;
        }
    }

    private GlobalRows globalRows(List<Row> rows, String what) {
        double[] counts = new double[dist.worldSize()];
        counts[dist.rank()] = rows.size();
        dist.sum(counts, "row counts of " + what);
        int offset = 0, total = 0;
        for (int r = 0; r < counts.length; r++) {
            if (r < dist.rank()) offset += (int) counts[r];
            total += (int) counts[r];
        }
        double[] meta = new double[2 * total];
        for (int i = 0; i < rows.size(); i++) {
            meta[offset + i] = rows.get(i).responseIds().length;
            meta[total + offset + i] = rows.get(i).agent();
        }
        dist.sum(meta, "row lengths of " + what);
        long[] length = new long[total];
        int[] agent = new int[total];
        for (int g = 0; g < total; g++) {
            length[g] = (long) meta[g];
            agent[g] = (int) meta[total + g];
        }
        return new GlobalRows(offset, total, length, agent);
    }

    /** Runs the update; {@code seed} orders the mini-batches. With several ranks, {@code rows} are this rank's. */
    public Stats update(List<Row> rows, long seed) {
        String what = "the update of model " + name;
        GlobalRows g = globalRows(rows, what);
        if (g.total() == 0) return Stats.NONE;
        try (RowLogProbs old = logProbs(model, rows);
             RowLogProbs ref = s.loss().usesReference() ? logProbs(reference, rows) : null) {
            return update(rows, seed, g, old, ref, what);
        }
    }

    private Stats update(List<Row> rows, long seed, GlobalRows g, RowLogProbs old, RowLogProbs ref, String what) {
        model.setRequiresGrad(true);
        Map<Integer, Double> agentNorms = new java.util.TreeMap<>();
        if (s.gradNormPerAgent()) {
            // each agent's own gradient at the current policy, as if it were trained alone
            java.util.TreeSet<Integer> agents = new java.util.TreeSet<>();
            for (int a : g.agent()) agents.add(a);
            for (int a : agents) {
                long tokens = 0;
                int agentRows = 0;
                for (int i = 0; i < g.total(); i++) {
                    if (g.agent()[i] != a) continue;
                    tokens += g.length()[i];
                    agentRows++;
                }
                if (tokens == 0) continue;
                List<Row> mine = new ArrayList<>();
                List<Integer> mineIdx = new ArrayList<>();
                for (int i = 0; i < rows.size(); i++) {
                    if (rows.get(i).agent() != a) continue;
                    mine.add(rows.get(i));
                    mineIdx.add(i);
                }
                miniBatch(mine, mineIdx, old, ref, normalizer(tokens, agentRows), tokens);
                optim.reduceGradients(dist, "the gradient of agent " + a + " in " + what);
                agentNorms.put(a, optim.gradNorm());
                optim.zeroGrad();
            }
        }
        double pg = 0, klLoss = 0, entSum = 0, normSum = 0, normMax = 0;
        double[] sums = new double[AbiIndices.LOSS_SUMS];
        int steps = 0, skipped = 0, batches = 0;
        SplittableRandom rng = new SplittableRandom(seed);
        for (int epoch = 0; epoch < s.epochs(); epoch++) {
            // the permutation of the global rows: the same on every rank, whatever the world size
            int[] order = s.shuffle() ? permutation(g.total(), rng) : identity(g.total());
            int[] cuts = miniBatchCuts(g.total());
            for (int c = 0; c + 1 < cuts.length; c++) {
                int from = cuts[c], to = cuts[c + 1];
                long tokens = 0;
                for (int i = from; i < to; i++) tokens += g.length()[order[i]];
                if (tokens == 0) continue;  // no response tokens on any rank
                // this rank's share of the mini-batch (possibly none: it still joins the gradient sum)
                List<Row> mb = new ArrayList<>(to - from);
                List<Integer> mbIdx = new ArrayList<>(to - from);
                for (int i = from; i < to; i++) {
                    if (!g.mine(order[i], rows.size())) continue;
                    int local = order[i] - g.offset();
                    mb.add(rows.get(local));
                    mbIdx.add(local);
                }
                MiniBatch r = miniBatch(mb, mbIdx, old, ref, normalizer(tokens, to - from), tokens);
                optim.reduceGradients(dist, "the gradients of " + what + " (epoch " + epoch + ", rows " + from + ".." + to + ")");
                batches++;
                pg += r.sums[AbiIndices.LOSS_PG_LOSS];
                klLoss += r.sums[AbiIndices.LOSS_KL_LOSS];
                // the raw sums (tokens onwards) add up; the aggregated losses are averaged over mini-batches
                for (int k = AbiIndices.LOSS_TOKENS; k < sums.length; k++) sums[k] += r.sums[k];
                entSum += r.entropySum;
                double norm = optim.clipGradNorm(s.gradClip());
                if (Double.isFinite(norm)) {
                    optim.step();
                    steps++;
                    normSum += norm;
                    normMax = Math.max(normMax, norm);
                } else {
                    optim.skipStep();  // a loss scale halves (float16: the scaled backward overflowed)
                    skipped++;
                }
                optim.zeroGrad();
            }
        }
        model.setRequiresGrad(false);
        // the loss and metric sums of every rank's shares (norms and step counts are alike everywhere)
        double[] part = new double[sums.length + 3];
        System.arraycopy(sums, 0, part, 0, sums.length);
        part[sums.length] = pg;
        part[sums.length + 1] = klLoss;
        part[sums.length + 2] = entSum;
        dist.sum(part, "the statistics of " + what);
        System.arraycopy(part, 0, sums, 0, sums.length);
        pg = part[sums.length];
        klLoss = part[sums.length + 1];
        entSum = part[sums.length + 2];
        double tokens = sums[AbiIndices.LOSS_TOKENS];
        return new Stats(batches == 0 ? 0 : pg / batches, batches == 0 ? 0 : klLoss / batches,
                ratio(sums[AbiIndices.LOSS_CLIPPED], tokens), ratio(sums[AbiIndices.LOSS_CLIPPED_LOWER], tokens),
                ratio(sums[AbiIndices.LOSS_PPO_KL], tokens), ratio(sums[AbiIndices.LOSS_KL], tokens), ratio(entSum, tokens),
                // every step skipped (non-finite norm): NaN, not a 0.0 that reads as a calm step; skipped_steps counts them
                steps == 0 ? (skipped > 0 ? Double.NaN : 0) : normSum / steps, steps == 0 && skipped > 0 ? Double.NaN : normMax,
                steps, skipped, (long) tokens, agentNorms);
    }

    private record MiniBatch(double[] sums, double entropySum) {
    }

    /**
     * Where an epoch's mini-batches of {@code total} global rows begin, and the end: every
     * miniBatchRows rows, or with updatesPerStep n the balanced cut into min(n, total) parts (the
     * bounds ⌊i·total / parts⌋). The total is all ranks' rows, so every rank cuts alike.
     */
    int[] miniBatchCuts(int total) {
        int parts = s.updatesPerStep() > 0 ? Math.min(s.updatesPerStep(), total)
                : (total + s.miniBatchRows() - 1) / s.miniBatchRows();
        int[] cuts = new int[parts + 1];
        for (int i = 0; i <= parts; i++) {
            cuts[i] = s.updatesPerStep() > 0 ? (int) ((long) i * total / parts) : (int) Math.min(total, (long) i * s.miniBatchRows());
        }
        return cuts;
    }

    /** The loss divisor of a mini-batch of {@code rows} rows and {@code tokens} response tokens (all ranks together). */
    private double normalizer(long tokens, int rows) {
        return s.loss().aggregation().normalizer(tokens, rows, s.constantNormalizer());
    }

    /**
     * Forward, fused loss and backward of (this rank's share of) one mini-batch, a micro-batch at a
     * time; gradients accumulate in the parameters. The normaliser and token count are the whole
     * mini-batch's (token-mean: its tokens on all ranks), so micro-batching and sharding change
     * nothing but memory and summation order. {@code idx} are the rows' indices into old and ref.
     * The loss sums and the entropy sum accumulate on the device and are read once at the end.
     */
    private MiniBatch miniBatch(List<Row> mb, List<Integer> idx, RowLogProbs old, RowLogProbs ref, double normalizer,
                                long total) {
        try (PointerScope scope = new PointerScope()) {
            // [loss sums..., entropy sum] of the device; host sums of a backend that returns them so
            Tensor acc = torch.zeros(new long[] {AbiIndices.LOSS_SUMS + 1},
                    new TensorOptions(ScalarType.Double).device(new DeviceOptional(model.device())));
            double[] host = new double[AbiIndices.LOSS_SUMS];
            List<int[]> cuts = microBatches(mb);
            int rounds = cuts.size();
            if (optim.reducesEachMicroBatch()) {
                // ZeRO-2 reduces every micro-batch: every rank runs as many as the rank with the most
                // (an empty one where it has none), so that the collectives pair up
                for (double[] r : dist.gather(new double[] {cuts.size()}, "the micro-batch counts of " + name)) {
                    rounds = Math.max(rounds, (int) r[0]);
                }
            }
            for (int i = 0; i < rounds; i++) {
                if (i < cuts.size()) {
                    int[] cut = cuts.get(i);
                    microBatch(mb.subList(cut[0], cut[1]), idx.subList(cut[0], cut[1]), old, ref, normalizer, total, acc, host);
                }
                optim.afterBackward();  // mixed precision: into the fp32 accumulators; sharded: reduced into this rank's chunk
            }
            double[] all = new double[AbiIndices.LOSS_SUMS + 1];
            Tensor read = acc.is_cpu() ? acc : acc.cpu();  // the mini-batch's one device-to-host read
            read.data_ptr_double().get(all);
            double[] sums = new double[AbiIndices.LOSS_SUMS];
            for (int k = 0; k < sums.length; k++) sums[k] = all[k] + host[k];
            return new MiniBatch(sums, all[AbiIndices.LOSS_SUMS]);
        }
    }

    private void microBatch(List<Row> mb, List<Integer> idx, RowLogProbs old, RowLogProbs ref, double normalizer,
                            long miniBatchTokens, Tensor acc, double[] host) {
        List<int[]> prompts = new ArrayList<>(mb.size()), responses = new ArrayList<>(mb.size());
        for (Row r : mb) {
            prompts.add(r.promptIds());
            responses.add(r.responseIds());
        }
        if (s.fusedLmHead()) {
            fusedMicroBatch(mb, idx, prompts, responses, old, ref, normalizer, miniBatchTokens, acc, host);
            return;
        }
        try (PointerScope scope = new PointerScope()) {
            // the entropy is differentiated only when it is in the loss
            TeacherForcing.Result tf = TeacherForcing.logProbs(model, prompts, responses, s.temperature(), true, s.entropyCoef() > 0,
                    vocabLimit);
            long[] off = tf.offsets();
            int n = (int) off[mb.size()];
            if (n == 0) return;
            // token positions of these rows in old and ref, and each row's advantage
            long[] at = new long[n];
            float[] adv = new float[mb.size()];
            for (int r = 0; r < mb.size(); r++) {
                long first = old.start()[idx.get(r)];
                for (int t = (int) off[r]; t < (int) off[r + 1]; t++) at[t] = first + t - off[r];
                adv[r] = mb.get(r).advantage();
            }
            var dev = model.device();
            Tensor where = Tensors.longs(at).to(dev, ScalarType.Long);
            Tensor logp = tf.logprobs();
            LossOut loss = backend.apply(s.loss(), normalizer, off, Tensors.longs(off).to(dev, ScalarType.Long), logp,
                    old.values().index_select(0, where), Tensors.floats(adv).to(dev, ScalarType.Float),
                    ref == null ? null : ref.values().index_select(0, where));
            if (loss.deviceSums() != null) {
                acc.narrow(0, 0, AbiIndices.LOSS_SUMS).add_(loss.deviceSums().to(dev, ScalarType.Double));
            } else {
                for (int k = 0; k < host.length; k++) host[k] += loss.sums()[k];
            }
            // one backward for the policy loss and the entropy bonus (token mean over the mini-batch)
            Tensor surrogate = loss.surrogate();
            Tensor ent = tf.entropy();
            acc.narrow(0, AbiIndices.LOSS_SUMS, 1).add_(ent.detach().sum().to(dev, ScalarType.Double));
            if (s.entropyCoef() > 0) surrogate = surrogate.sub(ent.sum().mul(new Scalar(s.entropyCoef() / miniBatchTokens)));
            // float16: the backward runs on loss × S (optim.afterBackward divides the gradient by S in fp32)
            double scale = optim.lossScale();
            if (scale != 1) surrogate = surrogate.mul(new Scalar(scale));
            surrogate.backward();
            tf.finishBackward();  // the checkpointed layers' part of the backward (nothing without checkpointing)
        }
    }

    /**
     * {@link #microBatch} through the fused LM head: the model's forward up to the response positions'
     * hidden states, then FusedLmHead's chunks (loss, dL/dW into the head's .grad, hidden.backward),
     * then the checkpointed layers' part. The loss backend of the package-private constructor is not
     * used on this path (the kernel computes the loss itself).
     */
    private void fusedMicroBatch(List<Row> mb, List<Integer> idx, List<int[]> prompts, List<int[]> responses, RowLogProbs old,
                                 RowLogProbs ref, double normalizer, long miniBatchTokens, Tensor acc, double[] host) {
        try (PointerScope scope = new PointerScope()) {
            TeacherForcing.Hidden hd = TeacherForcing.responseHidden(model, prompts, responses, vocabLimit);
            long[] off = hd.offsets();
            int n = (int) off[mb.size()];
            if (n == 0) return;
            long[] at = new long[n];
            float[] adv = new float[mb.size()];
            for (int r = 0; r < mb.size(); r++) {
                long first = old.start()[idx.get(r)];
                for (int t = (int) off[r]; t < (int) off[r + 1]; t++) at[t] = first + t - off[r];
                adv[r] = mb.get(r).advantage();
            }
            Tensor where = Tensors.longs(at).to(model.device(), ScalarType.Long);
            FusedLmHead.Update u = FusedLmHead.lossAndBackward(hd.hidden(), model.lmHeadWeight(), hd.targets(), s.temperature(),
                    s.loss(), normalizer, s.entropyCoef() / miniBatchTokens, off, old.values().index_select(0, where), adv,
                    ref == null ? null : ref.values().index_select(0, where), null,
                    FusedLmHead.defaultChunkTokens(model.config().vocabSize()), vocabLimit, optim.lossScale());
            hd.pending().finishBackward();  // the checkpointed layers' part (nothing without checkpointing)
            for (int k = 0; k < host.length; k++) host[k] += u.sums()[k];
            acc.narrow(0, AbiIndices.LOSS_SUMS, 1).add_(new Scalar(u.sums()[AbiIndices.LMHEAD_ENTROPY]));
        }
    }

    /**
     * Every row's response log-probs under one model, back to back on its device (row i from
     * {@code start[i]}): computed once per update, gathered per micro-batch on the device.
     */
    private record RowLogProbs(Tensor values, long[] start) implements AutoCloseable {
        @Override
        public void close() {
            values.releaseReference();  // the reference retained by logProbs
        }
    }

    /** Log-probs of every row's response under {@code m}, without autograd, a micro-batch at a time. */
    private RowLogProbs logProbs(CausalLm m, List<Row> rows) {
        long[] start = new long[rows.size() + 1];
        for (int i = 0; i < rows.size(); i++) start[i + 1] = start[i] + rows.get(i).responseIds().length;
        List<Tensor> parts = new ArrayList<>();
        try {
            for (int[] cut : microBatches(rows)) {
                List<int[]> p = new ArrayList<>(), a = new ArrayList<>();
                for (int i = cut[0]; i < cut[1]; i++) {
                    p.add(rows.get(i).promptIds());
                    a.add(rows.get(i).responseIds());
                }
                // inference mode, not just no-grad: nothing of this pass is differentiated
                try (PointerScope scope = new PointerScope(); InferenceMode inference = new InferenceMode()) {
                    if (s.fusedLmHead()) {
                        TeacherForcing.Hidden hd = TeacherForcing.responseHidden(m, p, a, vocabLimit);
                        parts.add(Scopes.retain(FusedLmHead.logProbs(hd.hidden(), m.lmHeadWeight(), hd.targets(), s.temperature(), false,
                                FusedLmHead.defaultChunkTokens(m.config().vocabSize()), vocabLimit).logprobs()));
                    } else {
                        parts.add(Scopes.retain(TeacherForcing.logProbs(m, p, a, s.temperature(), false, false, vocabLimit).logprobs()));
                    }
                }
            }
            try (PointerScope scope = new PointerScope()) {
                Tensor all = parts.isEmpty()
                        ? torch.empty(new long[] {0}, new TensorOptions(ScalarType.Float).device(new DeviceOptional(m.device())), null)
                        : torch.cat(new TensorVector(parts.toArray(Tensor[]::new)), 0);
                return new RowLogProbs(Scopes.retain(all), start);
            }
        } finally {
            for (Tensor t : parts) t.releaseReference();
        }
    }

    /**
     * The micro-batches of {@code rows} as [from, to) ranges, in order: microBatchRows rows each, or
     * with maxTokensPerMicroBatch as many rows as keep rows × their longest prompt + response (the
     * padded forward of TeacherForcing) within it, at least one.
     */
    List<int[]> microBatches(List<Row> rows) {
        List<int[]> cuts = new ArrayList<>();
        final int n = rows.size();
        if (s.maxTokensPerMicroBatch() == 0) {
            for (int from = 0; from < n; from += s.microBatchRows()) cuts.add(new int[] {from, Math.min(n, from + s.microBatchRows())});
            return cuts;
        }
        for (int from = 0; from < n; ) {
            long longest = tokens(rows.get(from));
            int to = from + 1;
            while (to < n) {
                long l = Math.max(longest, tokens(rows.get(to)));
                if ((long) (to + 1 - from) * l > s.maxTokensPerMicroBatch()) break;
                longest = l;
                to++;
            }
            cuts.add(new int[] {from, to});
            from = to;
        }
        return cuts;
    }

    private static long tokens(Row r) {
        return (long) r.promptIds().length + r.responseIds().length;
    }

    private static int[] identity(int n) {
        int[] p = new int[n];
        for (int i = 0; i < n; i++) p[i] = i;
        return p;
    }

    /** A uniformly random permutation of 0..n-1 (Fisher–Yates). */
    static int[] permutation(int n, SplittableRandom rng) {
        int[] p = new int[n];
        for (int i = 0; i < n; i++) p[i] = i;
        for (int i = n - 1; i > 0; i--) {
            int j = rng.nextInt(i + 1);
            int t = p[i];
            p[i] = p[j];
            p[j] = t;
        }
        return p;
    }

    private static double ratio(double a, double b) {
        return b > 0 ? a / b : 0;
    }
}

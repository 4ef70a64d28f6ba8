// StepMetrics.java — a training step's metrics, merged across ranks: the reward and row counts, the
// verifier's verdict rates (from the episodes' shared verdict counters), the workload's own episode
// metrics, per agent the score and advantage moments, E[A²], μ_k, σ_k and Lemma 4.2's inflation
// (means over the groups where each is defined) and the share of its replies cut at max_new_tokens,
// per model the PPO statistics, the phase timings with generation speed, and the rollout engine's
// prompt, prefilled and prefix-reused token counts.
// Every sum travels through named Sums, so that no metric is addressed by a hand-kept index.
package dev.drmas.train;

import dev.drmas.agent.Episode;
import dev.drmas.agent.Team;
import dev.drmas.algo.AdvantageSummary;
import dev.drmas.algo.Advantages;
import dev.drmas.bindings.AbiIndices;
import dev.drmas.dist.Collective;
import dev.drmas.dist.Moments;
import dev.drmas.env.Task;
import dev.drmas.metrics.PhaseTimer;
import dev.drmas.workflow.Workload;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collection;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

final class StepMetrics {
    private StepMetrics() {
    }

    /**
     * What one step produced, for its metrics; {@code prefill}: this rank's rollout engine account
     * {prompt tokens, tokens prefilled, tokens reused from the prefix cache} (EnginePolicy.prefill).
     */
    record Step(long number, RolloutBatch batch, Advantages.Result adv, PpoUpdater.Stats[] stats, int truncatedPrompts,
                long[] prefill, PhaseTimer timer, double collectiveSecondsBefore) {
    }

    static Map<String, Double> of(Step s, Team team, Workload workload, Policies policies, Collective dist) {
        return of(s, team, workload, policies.byId.values(), dist);
    }

    /** As above for the models {@code policies} (in the order of {@code s.stats()}), so that a test needs no loaded model. */
    static Map<String, Double> of(Step s, Team team, Workload workload, Collection<Policies.Policy> policies, Collective dist) {
        Map<String, Double> m = new LinkedHashMap<>();
        RolloutBatch b = s.batch();
        Sums counts = new Sums(List.of("reward", "episodes", "rows", "approvals", "rejections", "malformed", "truncated", "tokens",
                "prompt_tokens", "prefilled_tokens", "prefix_reused_tokens"));
        counts.add("reward", b.rewardSum);
        counts.add("episodes", b.episodes.size());
        counts.add("rows", b.rows());
        for (Episode e : b.episodes) {
            counts.add("approvals", e.count(Episode.APPROVALS));
            counts.add("rejections", e.count(Episode.REJECTIONS));
            counts.add("malformed", e.count(Episode.MALFORMED_VERDICTS));
        }
        counts.add("truncated", s.truncatedPrompts());
        counts.add("tokens", b.generatedTokens());
        counts.add("prompt_tokens", s.prefill()[0]);
        counts.add("prefilled_tokens", s.prefill()[1]);
        counts.add("prefix_reused_tokens", s.prefill()[2]);
        counts.allReduce(dist, "the batch counts of step " + s.number());
        m.put("reward/mean", counts.get("reward") / counts.get("episodes"));
        m.put("rows", counts.get("rows"));
        int approvals = (int) counts.get("approvals"), rejections = (int) counts.get("rejections");
        int malformed = (int) counts.get("malformed"), verdicts = approvals + rejections + malformed;
        if (verdicts > 0) {
            m.put("verifier/approve_rate", approvals / (double) verdicts);
            m.put("verifier/reject_rate", rejections / (double) verdicts);
            m.put("verifier/malformed_rate", malformed / (double) verdicts);
        }
        workload("", b.tasks, b.episodes, workload, dist, m);
        agents(s, team, dist, m);
        int mi = 0;
        for (Policies.Policy p : policies) model(p.id(), s.stats()[mi++], p.reference() != null, p.optim(), team, m);
        m.put("prompt_truncated", counts.get("truncated"));
        m.putAll(s.timer().drain());
        if (dist.worldSize() > 1) {
            // this rank's time inside collectives (waiting for slower ranks included)
            m.put("time/collective_s", dist.collectiveSeconds() - s.collectiveSecondsBefore());
            // the step's rollout ends when the slowest rank's does
            double[] slowest = new double[dist.worldSize()];
            slowest[dist.rank()] = m.getOrDefault("time/rollout_s", 0.0);
            dist.sum(slowest, "the rollout times of step " + s.number());
            m.put("time/rollout_s", Arrays.stream(slowest).max().orElse(0));
        }
        double rolloutS = m.getOrDefault("time/rollout_s", 0.0);
        if (rolloutS > 0) m.put("perf/gen_tokens_per_s", (long) counts.get("tokens") / rolloutS);
        for (String k : List.of("prompt_tokens", "prefilled_tokens", "prefix_reused_tokens")) m.put("perf/" + k, counts.get(k));
        return m;
    }

    /**
     * Per model: the PPO statistics (left out when no token of the model reached the loss on any
     * rank: a 0.0 would read as a calm step), the skipped steps, the loss scale (float16), the learning rate its latest
     * optimiser step used, and this rank's optimiser state bytes.
     */
    static void model(String id, PpoUpdater.Stats st, boolean hasReference, ModelOptimizer optim, Team team, Map<String, Double> m) {
        String pre = "model/" + id + "/";
        if (st.measured()) {
            m.put(pre + "pg_loss", st.pgLoss());
            m.put(pre + "clipfrac", st.clipfrac());
            // verl's pg_clipfrac_lower: tokens with A < 0 whose loss the dual clip (ppo.dual_clip) bounds
            m.put(pre + "clipfrac_lower", st.clipfracLower());
            m.put(pre + "ppo_kl", st.ppoKl());
            m.put(pre + "entropy", st.entropy());
            if (hasReference) m.put(pre + "kl", st.kl());
            st.agentGradNorms().forEach((a, norm) -> m.put("agent/" + team.agent(a).id() + "/grad_norm", norm));
            m.put(pre + "grad_norm", st.gradNormMean());
            m.put(pre + "grad_norm_max", st.gradNormMax());
        }
        m.put(pre + "skipped_steps", (double) st.skippedSteps());
        // float16: the loss scale the next backward uses (after this step's halvings and doublings)
        if (optim.lossScaler() != null) m.put(pre + "loss_scale", optim.lossScale());
        double lr = optim.lastLr();  // NaN until the model's first step
        if (!Double.isNaN(lr)) m.put(pre + "lr", lr);
        // this rank's optimiser state (moments, and in mixed precision the fp32 masters and accumulators)
        m.put("memory/" + id + "/optimizer_bytes", (double) optim.stateBytes());
    }

    /**
     * Per agent: score and advantage moments, E[A²], and means over the groups where each is
     * defined: μ_k over the groups the agent acted in, σ_k over those where it has two rows or more,
     * Lemma 4.2's inflation over those whose group std is not 0 (AdvantageSummary's rule).
     */
    static void agents(Step s, Team team, Collective dist, Map<String, Double> m) {
        RolloutBatch b = s.batch();
        float[] adv = s.adv().advantages();
        double[] d = s.adv().diagnostics();
        final int k = team.size(), numUids = b.tasks.size(), segs = numUids * k;
        List<String> keys = new ArrayList<>();
        for (int a = 0; a < k; a++) for (String f : AGENT_SUMS) keys.add(a + "/" + f);
        Sums sums = new Sums(keys);
        Moments[] scores = new Moments[k], advs = new Moments[k];
        Arrays.fill(scores, Moments.EMPTY);
        Arrays.fill(advs, Moments.EMPTY);
        for (int i = 0; i < b.rows(); i++) {
            int a = b.agent[i];
            scores[a] = scores[a].plus(b.scores[i]);
            advs[a] = advs[a].plus(adv[i]);
            sums.add(a + "/valid", b.steps.get(i).valid() ? 1 : 0);
            sums.add(a + "/tokens", b.turn(i).responseIds().length);
            sums.add(a + "/clipped", b.turn(i).finishReason() == dev.drmas.rollout.Completion.FinishReason.LENGTH ? 1 : 0);
        }
        for (int a = 0; a < k; a++) {
            for (int g = 0; g < numUids; g++) {
                int seg = g * k + a;
                if (d[AbiIndices.DIAG_AGENT_COUNT * segs + seg] == 0) continue;
                sums.add(a + "/groups", 1);
                sums.add(a + "/mu", d[AbiIndices.DIAG_AGENT_MEAN * segs + seg]);
                // a segment of one row has no std (the kernels write 0 there): averaging those 0s in would
                // pull σ_k down by the share of such groups (ARCHITECTURE §5's single segments)
                if (d[AbiIndices.DIAG_AGENT_COUNT * segs + seg] >= 2) {
                    sums.add(a + "/sigma_groups", 1);
                    sums.add(a + "/sigma", d[AbiIndices.DIAG_AGENT_STD * segs + seg]);
                }
                double f = AdvantageSummary.inflation(d, segs, seg);  // NaN where the group's std is 0 or rounding noise
                if (Double.isFinite(f)) {
                    sums.add(a + "/inflation_groups", 1);
                    sums.add(a + "/inflation", f);
                }
            }
        }
        Moments[] mom = new Moments[2 * k];  // merged in one collective: scores and advantages interleaved
        for (int a = 0; a < k; a++) {
            mom[2 * a] = scores[a];
            mom[2 * a + 1] = advs[a];
        }
        mom = Moments.allMerge(dist, mom, "the agent moments of step " + s.number());
        sums.allReduce(dist, "the agent sums of step " + s.number());
        for (int a = 0; a < k; a++) {
            String pre = "agent/" + team.agent(a).id() + "/";
            Moments sc = mom[2 * a], av = mom[2 * a + 1];
            double cnt = sc.count();
            if (cnt == 0) continue;
            m.put(pre + "rows", cnt);
            m.put(pre + "score_mean", sc.mean());
            m.put(pre + "score_std", Math.sqrt(sc.variance()));
            m.put(pre + "adv_mean", av.mean());
            m.put(pre + "adv_std", Math.sqrt(av.variance()));
            m.put(pre + "adv_sq_mean", av.variance() + av.mean() * av.mean());  // E[A²], what Lemma 4.2 bounds
            m.put(pre + "valid_ratio", sums.get(a + "/valid") / cnt);
            m.put(pre + "response_len", sums.get(a + "/tokens") / cnt);
            // verl's response_length/clip_ratio, per agent: replies cut at rollout.max_new_tokens (a solver cut before its
            // \boxed{} scores as a wrong answer would)
            m.put(pre + "response_clipped", sums.get(a + "/clipped") / cnt);
            double groups = sums.get(a + "/groups"), sigmaGroups = sums.get(a + "/sigma_groups");
            double inflGroups = sums.get(a + "/inflation_groups");
            if (groups > 0) m.put(pre + "mu", sums.get(a + "/mu") / groups);
            if (sigmaGroups > 0) m.put(pre + "sigma", sums.get(a + "/sigma") / sigmaGroups);
            if (inflGroups > 0) m.put(pre + "inflation", sums.get(a + "/inflation") / inflGroups);
        }
    }

    private static final List<String> AGENT_SUMS = List.of("valid", "tokens", "clipped", "groups", "mu", "sigma_groups", "sigma", "inflation_groups",
            "inflation");

    /**
     * The workload's metrics per episode ({@code prefix} + name), summed over every rank's episodes.
     * The sums travel in the order of their sorted names, not the map's: a workflow's map (Map.of
     * with two entries or more) may iterate in another order in each rank's JVM, and a sum by
     * position would then add one metric to another. Ranks whose names differ stop at once, naming
     * them, instead of summing vectors of different lengths (which waits until distributed.timeout_s
     * and blames a peer).
     */
    static void workload(String prefix, List<Task> tasks, List<Episode> episodes, Workload w, Collective dist,
                         Map<String, Double> m) {
        Map<String, Double> sums = w.episodeSums(tasks, episodes);
        List<String> names = new ArrayList<>(sums.keySet());
        java.util.Collections.sort(names);
        String what = "the " + (prefix.isEmpty() ? "workload" : prefix + " workload") + " metrics";
        requireSameNames(names, dist, what);
        double[] v = new double[names.size() + 1];
        for (int i = 0; i < names.size(); i++) v[i] = sums.get(names.get(i));
        v[names.size()] = episodes.size();
        dist.sum(v, what);
        double n = v[names.size()];
        if (n == 0) return;
        // logged in the workload's own order, each under its name
        for (String key : sums.keySet()) m.put(prefix + key, v[names.indexOf(key)] / n);
    }

    /** Stops every rank alike, naming this rank's names, when the ranks' sorted metric names differ (count and hash, gathered). */
    static void requireSameNames(List<String> sorted, Collective dist, String what) {
        if (dist.worldSize() == 1) return;
        double[][] all = dist.gather(new double[] {sorted.size(), String.join("\n", sorted).hashCode()}, what + " (their names)");
        StringBuilder diff = new StringBuilder();
        for (int r = 1; r < all.length; r++) {
            if (all[r][0] != all[0][0] || all[r][1] != all[0][1]) diff.append(diff.isEmpty() ? "" : ", ").append(r);
        }
        if (!diff.isEmpty()) {
            throw new dev.drmas.dist.DistributedException(what + ": the ranks' Workload.episodeSums return different names (rank 0 "
                    + (int) all[0][0] + " names; rank(s) " + diff + " differ); this rank (" + dist.rank() + ") has " + sorted
                    + ". Every rank must return the same names, even for no episodes (a rank without evaluation tasks included)");
        }
    }
}

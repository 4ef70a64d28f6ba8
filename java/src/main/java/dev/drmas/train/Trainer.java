// Trainer.java — one run of multi-agent RL (ARCHITECTURE §2): sample tasks × rollouts, run the
// workflow of agents with generation batched per model, score, normalise advantages with the
// native kernels (grpo | drmas | agent-mean | agent-std), update each model with PPO, and log,
// evaluate and checkpoint on schedule. Also the supervised warm start (`drmas sft`) and
// evaluation alone (`drmas eval`). What depends on the task family (team, workflow, data, reward,
// demonstrations) comes from its Workload: math or search.
// Data-parallel (dev.drmas.dist): each rank rolls out a contiguous share of the step's tasks, with
// draws keyed by the global trajectory index, normalises its own groups, and joins the collectives
// of PpoUpdater; batch metrics are merged across ranks; rank 0 alone writes files.
package dev.drmas.train;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.drmas.agent.Agent;
import dev.drmas.agent.AgentPolicy;
import dev.drmas.agent.Episode;
import dev.drmas.agent.EpisodeInit;
import dev.drmas.agent.Message;
import dev.drmas.agent.Orchestra;
import dev.drmas.agent.Step;
import dev.drmas.agent.Team;
import dev.drmas.agent.Turn;
import dev.drmas.agent.TurnRequest;
import dev.drmas.algo.Advantages;
import dev.drmas.config.RunConfig;
import dev.drmas.dist.Collective;
import dev.drmas.dist.DistEnv;
import dev.drmas.dist.Moments;
import dev.drmas.dist.ProcessGroup;
import dev.drmas.env.Task;
import dev.drmas.metrics.MetricsLogger;
import dev.drmas.metrics.PassAtK;
import dev.drmas.metrics.PhaseTimer;
import dev.drmas.rollout.Completion;
import dev.drmas.rollout.GenerationConfig;
import dev.drmas.rollout.Request;
import dev.drmas.rollout.SamplingParams;
import dev.drmas.rollout.TeacherForcing;
import java.io.IOException;
import java.io.PrintStream;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;
import org.bytedeco.javacpp.PointerScope;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.global.torch;

public final class Trainer implements AutoCloseable {
    private final RunConfig cfg;
    private final Path runDir;
    private final PrintStream log;
    private final Policies policies;
    private final Team team;
    private final Orchestra orchestra;
    private final Workload workload;
    private final List<Task> train, test;
    private long step;      // training steps completed
    private long dataPos;   // training tasks consumed
    private final boolean resumed;
    private final Collective dist;

    private Trainer(RunConfig cfg, PrintStream log, Path checkpoint, Collective dist) {
        this.cfg = cfg;
        this.dist = dist;
        if (cfg.rollout().tasksPerStep() < dist.worldSize()) {
            throw new IllegalArgumentException("rollout.tasks_per_step (" + cfg.rollout().tasksPerStep() + ") is smaller than "
                    + "WORLD_SIZE (" + dist.worldSize() + "): every rank needs at least one task per step");
        }
        this.runDir = cfg.run().runDir();
        this.log = log;
        int threads = cfg.run().threads() > 0 ? cfg.run().threads() : Runtime.getRuntime().availableProcessors();
        torch.set_num_threads(threads);
        try {
            Files.createDirectories(runDir);
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
        this.workload = Workload.of(cfg, log);
        this.team = workload.team();
        this.orchestra = workload.orchestra();
        this.train = workload.train();
        this.test = workload.test();
        Policies ps;
        try {
            // rank 0 first: it writes what the run folder lacks (the built-in tokenizer); the others then read it
            if (!dist.isMaster()) dist.barrier("rank 0's setup of the run folder");
            ps = Policies.open(cfg, runDir, checkpoint, runDir.resolve("sft").resolve("models"));
            if (dist.isMaster()) dist.barrier("rank 0's setup of the run folder");
        } catch (RuntimeException e) {
            workload.close();  // the retriever's index
            throw e;
        }
        this.policies = ps;
        if (checkpoint != null) {
            var st = Checkpoints.state(checkpoint);
            this.step = st.path("step").asLong();
            this.dataPos = st.path("data_position").asLong();
            this.resumed = true;
            log.println("drmas: resumed " + checkpoint + " at step " + step);
        } else {
            this.resumed = false;
            if (!policies.origin.isEmpty()) log.println("drmas: models: " + policies.origin);
        }
    }

    /** A trainer for {@code cfg}: resumes its latest checkpoint when run.resume says so. */
    public static Trainer open(RunConfig cfg, PrintStream log) {
        return open(cfg, log, Collective.single());
    }

    /**
     * As {@link #open(RunConfig, PrintStream)}, as one rank of {@code dist} (which the caller
     * closes after the trainer). Every rank reads the same checkpoint, whatever the world size it
     * was written with: the trainer state (step, data position) is global.
     */
    public static Trainer open(RunConfig cfg, PrintStream log, Collective dist) {
        Path cp = null;
        if (cfg.run().resumeAuto()) {
            cp = new Checkpoints(cfg.run().runDir().resolve("checkpoints")).latest().orElse(null);
        } else if (!cfg.run().resumeNever()) {
            cp = cfg.run().resumeFrom();
            if (!Files.isRegularFile(cp.resolve(Checkpoints.STATE_FILE))) {
                throw new IllegalArgumentException("run.resume: " + cp + " is not a checkpoint (no " + Checkpoints.STATE_FILE + ")");
            }
        }
        return new Trainer(cfg, log, cp, dist);
    }

    /** The collective of this process: c10d when {@code env} names several ranks, else the no-op one. */
    public static Collective connect(RunConfig cfg, DistEnv env) {
        if (!env.distributed()) return Collective.single();
        return new ProcessGroup(env, cfg.distributed(), Policies.device(cfg).is_cuda());
    }

    public long step() {
        return step;
    }

    public Path runDir() {
        return runDir;
    }

    /** The run's models, for tests in this package. */
    Map<String, Policies.Policy> policiesForTest() {
        return policies.byId;
    }

    // ------------------------------------------------------------------ the agents' policy

    /** Acts with the rollout engine: chat rendering, tokenising, batched generation per call. */
    private final class EnginePolicy implements AgentPolicy {
        final SamplingParams sampling;
        final long streamBase;
        final long seed;
        final long trajOffset;  // this rank's first trajectory in the step: draws follow the global index
        int truncated;

        EnginePolicy(SamplingParams sampling, long streamBase, long seed) {
            this(sampling, streamBase, seed, 0);
        }

        EnginePolicy(SamplingParams sampling, long streamBase, long seed, long trajOffset) {
            this.sampling = sampling;
            this.streamBase = streamBase;
            this.seed = seed;
            this.trajOffset = trajOffset;
        }

        @Override
        public List<Turn> act(Agent agent, List<TurnRequest> requests) {
            Policies.Policy p = policies.get(agent.modelId());
            int maxPrompt = cfg.rollout().maxPromptTokens();
            List<Request> reqs = new ArrayList<>(requests.size());
            boolean[] cut = new boolean[requests.size()];
            for (int i = 0; i < requests.size(); i++) {
                TurnRequest r = requests.get(i);
                int[] ids = p.tokenizer().encode(p.chat().render(Message.toMaps(r.messages()), true));
                if (ids.length > maxPrompt) {  // keep the end: the question and the latest context
                    ids = Arrays.copyOfRange(ids, ids.length - maxPrompt, ids.length);
                    cut[i] = true;
                    truncated++;
                }
                // a stable id per (step, trajectory, turn): the same draws whatever the batch
                reqs.add(new Request(ids, streamBase + (trajOffset + r.traj()) * 64 + r.turn()));
            }
            GenerationConfig gc = new GenerationConfig(sampling, cfg.rollout().maxNewTokens(),
                    new HashSet<>(p.tokenizer().stopTokenIds()), List.of(), null, seed, true,
                    Math.min(p.tokenizer().vocabSize(), p.model().config().vocabSize()));
            List<Completion> out = p.generator().generate(reqs, gc);
            List<Turn> turns = new ArrayList<>(out.size());
            for (int i = 0; i < out.size(); i++) {
                Completion c = out.get(i);
                turns.add(new Turn(p.tokenizer().decode(c.tokens(), true),
                        new TurnData(reqs.get(i).promptIds(), c.tokens(), c.logprobs(), c.finishReason(), cut[i])));
            }
            return turns;
        }
    }

    // ------------------------------------------------------------------ training

    /** Trains to trainer.steps with logging, evaluation and checkpoints; returns the last eval. */
    public Map<String, Double> train() throws IOException {
        var tc = cfg.trainer();
        if (dist.isMaster()) cfg.save(runDir.resolve("config.yaml"));
        Map<String, Double> lastEval = Map.of();
        List<String> shown = List.of("reward/mean", "eval/pass@1");
        try (MetricsLogger metrics = logger(tc.steps(), resumed ? step : -1, shown)) {
            if (step == 0 && tc.evalBeforeTrain() && tc.evalFreq() > 0) {
                lastEval = evaluate();
                metrics.log(0, lastEval);
            }
            while (step < tc.steps()) {
                Map<String, Double> m = trainStep();
                step++;
                if (tc.logFreq() > 0 && (step % tc.logFreq() == 0 || step == tc.steps())) metrics.log(step, m);
                if (tc.evalFreq() > 0 && (step % tc.evalFreq() == 0 || step == tc.steps())) {
                    lastEval = evaluate();
                    metrics.log(step, lastEval);
                }
                if (tc.saveFreq() > 0 && (step % tc.saveFreq() == 0 || step == tc.steps())) save();
                int cf = cfg.distributed().checksumFreq();
                if (dist.worldSize() > 1 && cf > 0 && (step % cf == 0 || step == tc.steps())) checkSameWeights();
            }
        }
        return lastEval;
    }

    private MetricsLogger logger(long total, long resumeFrom, List<String> shown) throws IOException {
        var mc = cfg.metrics();
        boolean m = dist.isMaster();  // the other ranks' metrics are merged into rank 0's
        return MetricsLogger.forRun(runDir, total, resumeFrom, shown, m && mc.jsonl(), m && mc.tensorboard(), m && mc.progressBar());
    }

    /** Writes a checkpoint of the current step (rank 0 writes, the others wait for it). */
    public Path save() throws IOException {
        Checkpoints cps = new Checkpoints(runDir.resolve("checkpoints"));
        if (dist.isMaster()) {
            ObjectNode st = new ObjectMapper().createObjectNode();
            st.put("data_position", dataPos);
            st.put("seed", cfg.run().seed());
            st.put("world_size", dist.worldSize());  // informative: resume works with any world size
            Path p = cps.save(step, policies.models(), policies.optimizers(), st);
            policies.copyTokenizers(p.resolve("models"));
        }
        dist.barrier("the checkpoint of step " + step);
        return cps.dir(step);
    }

    /** Stops the run when the ranks no longer hold the same weights (sum and sum of squares per model). */
    private void checkSameWeights() {
        List<Double> sums = new ArrayList<>();
        for (Policies.Policy p : policies.byId.values()) {
            try (PointerScope scope = new PointerScope()) {
                double s1 = 0, s2 = 0;
                for (Tensor t : p.model().parameters().values()) {
                    Tensor d = t.detach().to(torch.ScalarType.Double);
                    s1 += d.sum().item_double();
                    s2 += d.mul(d).sum().item_double();
                }
                sums.add(s1);
                sums.add(s2);
            }
        }
        double[] v = sums.stream().mapToDouble(Double::doubleValue).toArray();
        // identical inputs and ops give identical bits; the slack only allows for nodes whose
        // libraries sum in a different order
        dist.requireSame(v, 1e-9, "the parameter checksum of models " + policies.byId.keySet() + " at step " + step);
    }

    /** The training tasks of the next step: a seeded permutation per pass over the data. */
    private List<Task> nextTasks(int count) {
        List<Task> out = new ArrayList<>(count);
        for (int i = 0; i < count; i++, dataPos++) {
            long pass = dataPos / train.size();
            int at = (int) (dataPos % train.size());
            out.add(train.get(permutation(train.size(), cfg.run().seed() * 31 + pass)[at]));
        }
        return out;
    }

    private long permSeed = Long.MIN_VALUE;
    private int[] perm;

    /** The permutation of one pass over the data (only the current pass's is kept). */
    private int[] permutation(int n, long seed) {
        if (perm == null || permSeed != seed) {
            perm = PpoUpdater.permutation(n, new SplittableRandom(seed));
            permSeed = seed;
        }
        return perm;
    }

    /** One training step; returns its metrics. */
    public Map<String, Double> trainStep() {
        var rc = cfg.rollout();
        PhaseTimer timer = new PhaseTimer();
        Map<String, Double> m = new LinkedHashMap<>();
        // this rank's groups: uids lo..lo+b-1 of the step's global tasks (all of them on one rank),
        // so that a group never straddles ranks; uid and traj below are rank-local and dense
        final int global = rc.tasksPerStep(), lo = shardStart(global, dist.rank()), b = shardStart(global, dist.rank() + 1) - lo;
        final int n = rc.rolloutsPerTask(), k = team.size();
        long collective0 = (long) (dist.collectiveSeconds() * 1e9);
        List<Episode> episodes;
        List<Task> tasks;
        EnginePolicy policy = new EnginePolicy(rc.sampling(), (step + 1) << 24, cfg.run().seed(), (long) lo * n);
        try (var t = timer.phase("rollout")) {
            tasks = nextTasks(global).subList(lo, lo + b);
            List<EpisodeInit> init = new ArrayList<>(b * n);
            for (int u = 0; u < b; u++)
                for (int j = 0; j < n; j++) init.add(new EpisodeInit(u, u * n + j, tasks.get(u).question(), tasks.get(u).answer()));
            episodes = orchestra.run(init, policy);
        }
        // ---- rewards and the columnar batch: one row per agent turn
        List<Integer> uid = new ArrayList<>(), traj = new ArrayList<>(), agent = new ArrayList<>();
        List<Float> score = new ArrayList<>();
        List<Step> steps = new ArrayList<>();
        double rewardSum = 0;
        int approvals = 0, rejections = 0, malformed = 0;
        try (var t = timer.phase("reward")) {
            for (Episode e : episodes) {
                double r = workload.reward(tasks.get(e.uid()), e);
                rewardSum += r;
                approvals += e.approvals();
                rejections += e.rejections();
                malformed += e.malformed();
                for (Step s : e.steps()) {
                    uid.add(e.uid());
                    traj.add(e.traj());
                    agent.add(s.agent());
                    score.add((float) workload.rowScore(r, s));
                    steps.add(s);
                }
            }
        }
        final int rows = steps.size();
        float[] scores = new float[rows];
        int[] u = new int[rows], tr = new int[rows], ag = new int[rows];
        for (int i = 0; i < rows; i++) {
            scores[i] = score.get(i);
            u[i] = uid.get(i);
            tr[i] = traj.get(i);
            ag[i] = agent.get(i);
        }
        Advantages.Result adv;
        try (var t = timer.phase("advantage")) {
            adv = Advantages.computeWithDiagnostics(cfg.normConfig(), scores, u, tr, ag, b, b * n, k);
        }
        // ---- per-model PPO updates
        PpoUpdater.Stats[] stats = new PpoUpdater.Stats[policies.byId.size()];
        try (var t = timer.phase("update")) {
            int mi = 0;
            for (Policies.Policy p : policies.byId.values()) {
                List<PpoUpdater.Row> mine = new ArrayList<>();
                for (int i = 0; i < rows; i++) {
                    if (!team.agent(ag[i]).modelId().equals(p.id())) continue;
                    TurnData d = steps.get(i).output().payload(TurnData.class);
                    mine.add(new PpoUpdater.Row(d.promptIds(), d.responseIds(), adv.advantages()[i], ag[i]));
                }
                stats[mi++] = new PpoUpdater(p.model(), p.optim(), p.reference(), ppoSettings(p), dist, p.id()).update(mine,
                        cfg.run().seed() * 1_000_003L + step * 131 + mi);
            }
        }
        // ---- metrics (batch-level: merged across ranks)
        long genTokens = 0;
        for (Step s : steps) genTokens += s.output().payload(TurnData.class).responseIds().length;
        double[] counts = {rewardSum, episodes.size(), rows, approvals, rejections, malformed, policy.truncated, genTokens};
        dist.sum(counts, "the batch counts of step " + (step + 1));
        rewardSum = counts[0];
        approvals = (int) counts[3];
        rejections = (int) counts[4];
        malformed = (int) counts[5];
        genTokens = (long) counts[7];
        m.put("reward/mean", rewardSum / counts[1]);
        m.put("rows", counts[2]);
        int verdicts = approvals + rejections + malformed;
        if (verdicts > 0) {
            m.put("verifier/approve_rate", approvals / (double) verdicts);
            m.put("verifier/reject_rate", rejections / (double) verdicts);
            m.put("verifier/malformed_rate", malformed / (double) verdicts);
        }
        workloadMetrics("", tasks, episodes, m);
        agentMetrics(m, adv, scores, ag, steps, b, k);
        int mi = 0;
        for (Policies.Policy p : policies.byId.values()) {
            PpoUpdater.Stats s = stats[mi++];
            String pre = "model/" + p.id() + "/";
            m.put(pre + "pg_loss", s.pgLoss());
            m.put(pre + "clipfrac", s.clipfrac());
            m.put(pre + "ppo_kl", s.ppoKl());
            m.put(pre + "entropy", s.entropy());
            if (p.reference() != null) m.put(pre + "kl", s.kl());
            s.agentGradNorms().forEach((a, norm) -> m.put("agent/" + team.agent(a).id() + "/grad_norm", norm));
            m.put(pre + "grad_norm", s.gradNormMean());
            m.put(pre + "grad_norm_max", s.gradNormMax());
            m.put(pre + "skipped_steps", (double) s.skippedSteps());
            m.put(pre + "lr", p.optim().currentLr());
        }
        m.put("prompt_truncated", counts[6]);
        m.putAll(timer.drain());
        if (dist.worldSize() > 1) {
            // this rank's time inside collectives (waiting for slower ranks included)
            m.put("time/collective_s", dist.collectiveSeconds() - collective0 / 1e9);
            // the step's rollout ends when the slowest rank's does
            double[] slowest = new double[dist.worldSize()];
            slowest[dist.rank()] = m.getOrDefault("time/rollout_s", 0.0);
            dist.sum(slowest, "the rollout times of step " + (step + 1));
            m.put("time/rollout_s", Arrays.stream(slowest).max().orElse(0));
        }
        double rolloutS = m.getOrDefault("time/rollout_s", 0.0);
        if (rolloutS > 0) m.put("perf/gen_tokens_per_s", genTokens / rolloutS);
        return m;
    }

    private PpoUpdater.Settings ppoSettings(Policies.Policy p) {
        var pc = cfg.ppo();
        return new PpoUpdater.Settings(pc.epochs(), pc.miniBatchSize(), pc.microBatchSize(), cfg.rollout().temperature(),
                pc.entropyCoef(), p.gradClip(), cfg.lossConfig(), cfg.rollout().maxNewTokens(), cfg.trainer().gradNormPerAgent());
    }

    /** Per agent: score and advantage moments, E[A²], μ_k, σ_k and Lemma 4.2's inflation (means over groups). */
    private void agentMetrics(Map<String, Double> m, Advantages.Result adv, float[] scores, int[] ag, List<Step> steps,
                              int numUids, int k) {
        double[] d = adv.diagnostics();
        final int segs = numUids * k;
        // per agent, this rank's part: moments of scores and advantages, and additive sums
        final int nSums = 7;  // valid, len, groups, mu, sigma, inflGroups, infl
        Moments[] mom = new Moments[2 * k];
        Arrays.fill(mom, Moments.EMPTY);
        double[] sums = new double[nSums * k];
        for (int i = 0; i < scores.length; i++) {
            int a = ag[i];
            mom[2 * a] = mom[2 * a].plus(scores[i]);
            mom[2 * a + 1] = mom[2 * a + 1].plus(adv.advantages()[i]);
            sums[nSums * a] += steps.get(i).valid() ? 1 : 0;
            sums[nSums * a + 1] += steps.get(i).output().payload(TurnData.class).responseIds().length;
        }
        for (int a = 0; a < k; a++) {
            for (int g = 0; g < numUids; g++) {
                int s = g * k + a;
                if (d[Advantages.DIAG_AGENT_COUNT * segs + s] == 0) continue;
                sums[nSums * a + 2]++;
                sums[nSums * a + 3] += d[Advantages.DIAG_AGENT_MEAN * segs + s];
                sums[nSums * a + 4] += d[Advantages.DIAG_AGENT_STD * segs + s];
                double f = d[Advantages.DIAG_INFLATION * segs + s];
                if (Double.isFinite(f)) {
                    sums[nSums * a + 5]++;
                    sums[nSums * a + 6] += f;
                }
            }
        }
        mom = Moments.allMerge(dist, mom, "the agent moments of step " + (step + 1));
        dist.sum(sums, "the agent sums of step " + (step + 1));
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
            m.put(pre + "valid_ratio", sums[nSums * a] / cnt);
            m.put(pre + "response_len", sums[nSums * a + 1] / cnt);
            double groups = sums[nSums * a + 2], inflGroups = sums[nSums * a + 5];
            if (groups > 0) {
                m.put(pre + "mu", sums[nSums * a + 3] / groups);
                m.put(pre + "sigma", sums[nSums * a + 4] / groups);
            }
            if (inflGroups > 0) m.put(pre + "inflation", sums[nSums * a + 6] / inflGroups);
        }
    }

    /** The workload's metrics per episode, summed over every rank's episodes. */
    private void workloadMetrics(String prefix, List<Task> tasks, List<Episode> episodes, Map<String, Double> m) {
        Map<String, Double> sums = workload.episodeSums(tasks, episodes);
        double[] v = new double[sums.size() + 1];
        int i = 0;
        for (double x : sums.values()) v[i++] = x;
        v[i] = episodes.size();
        dist.sum(v, "the " + (prefix.isEmpty() ? "workload" : prefix + " workload") + " metrics");
        if (v[i] == 0) return;
        i = 0;
        for (String key : sums.keySet()) m.put(prefix + key, v[i++] / v[sums.size()]);
    }

    /** The first of the {@code global} tasks (uids) that rank {@code r} handles: contiguous, balanced shares. */
    private int shardStart(int global, int r) {
        return (int) ((long) global * r / dist.worldSize());
    }

    // ------------------------------------------------------------------ evaluation

    /** avg@n and pass@k on the held-out tasks with the eval sampling settings. */
    public Map<String, Double> evaluate() {
        var ec = cfg.eval();
        List<Task> tasks = ec.tasks() > 0 && ec.tasks() < test.size() ? test.subList(0, ec.tasks()) : test;
        if (tasks.isEmpty()) return Map.of();
        int n = ec.samplesPerTask();
        // this rank's share of the tasks; the correct counts are summed across ranks below
        int lo = shardStart(tasks.size(), dist.rank()), hi = shardStart(tasks.size(), dist.rank() + 1);
        List<EpisodeInit> init = new ArrayList<>();
        for (int u = 0; u < hi - lo; u++)
            for (int j = 0; j < n; j++) init.add(new EpisodeInit(u, u * n + j, tasks.get(lo + u).question(), tasks.get(lo + u).answer()));
        long t0 = System.nanoTime();
        // eval draws live in their own stream space, fixed across steps: same tasks, same seeds
        List<Episode> eps = init.isEmpty() ? List.of()
                : orchestra.run(init, new EnginePolicy(ec.sampling(), -(1L << 40), cfg.run().seed() + 7, (long) lo * n));
        double[] hits = new double[tasks.size() * n];
        for (Episode e : eps) if (workload.reward(tasks.get(lo + e.uid()), e) == 1.0) hits[(lo * n) + e.traj()] = 1;
        dist.sum(hits, "the evaluation results");
        boolean[][] correct = new boolean[tasks.size()][n];
        for (int u = 0; u < tasks.size(); u++) for (int j = 0; j < n; j++) correct[u][j] = hits[u * n + j] > 0;
        List<PassAtK.Counts> counts = new ArrayList<>();
        for (boolean[] c : correct) counts.add(PassAtK.Counts.of(c));
        Map<String, Double> m = new LinkedHashMap<>(PassAtK.scalars("eval/", counts, ks(ec.k(), n)));
        workloadMetrics("eval/", tasks.subList(lo, hi), eps, m);
        m.put("eval/tasks", (double) tasks.size());
        m.put("time/eval_s", (System.nanoTime() - t0) / 1e9);
        return m;
    }

    private static int[] ks(int k, int n) {
        return k == 1 ? new int[] {1} : new int[] {1, Math.min(k, n)};
    }

    // ------------------------------------------------------------------ supervised warm start

    /**
     * Trains every model on demonstrations of the workflow (solver right with probability
     * sft.solver_correct_prob, verifier labels consistent with the answers), token-mean
     * cross-entropy on the responses (which end with the end-of-turn token), then saves the
     * weights to runDir/sft/models, where training picks them up as its starting point.
     */
    public Map<String, Double> sft() throws IOException {
        var sc = cfg.sft();
        Map<String, AdamW> optims = new LinkedHashMap<>();
        for (Policies.Policy p : policies.byId.values()) {
            optims.put(p.id(), new AdamW(p.model().parameters(), new AdamW.Settings(sc.lr(), 0.9, 0.999, 1e-8, 0.0, 0)));
        }
        SplittableRandom rng = new SplittableRandom(cfg.run().seed() ^ 0x5F7L);
        Map<String, Double> last = new LinkedHashMap<>();
        int every = Math.max(1, sc.steps() / 10);
        long t0 = System.nanoTime();
        try {
            for (int s = 0; s < sc.steps(); s++) {
                Map<String, List<PpoUpdater.Row>> byModel = demonstrations(sc.batchSize(), sc.solverCorrectProb(), rng);
                for (Policies.Policy p : policies.byId.values()) {
                    List<PpoUpdater.Row> rows = byModel.getOrDefault(p.id(), List.of());
                    if (rows.isEmpty()) continue;
                    double loss = crossEntropyStep(p, optims.get(p.id()), rows);
                    last.put("sft/" + p.id() + "/loss", loss);
                }
                if ((s + 1) % every == 0 || s + 1 == sc.steps()) {
                    StringBuilder sb = new StringBuilder(String.format("sft %d/%d", s + 1, sc.steps()));
                    last.forEach((key, v) -> sb.append(String.format("  %s=%.4f", key, v)));
                    sb.append(String.format("  (%.0f s)", (System.nanoTime() - t0) / 1e9));
                    log.println(sb);
                }
            }
        } finally {
            optims.values().forEach(AdamW::close);
        }
        Path dir = runDir.resolve("sft").resolve("models");
        for (Policies.Policy p : policies.byId.values()) p.model().save(dir.resolve(p.id()));
        policies.copyTokenizers(dir);
        log.println("drmas: warm-start weights written to " + dir);
        return last;
    }

    /** Demonstration turns (prompt and response tokens) per model for {@code episodes} workflow runs. */
    private Map<String, List<PpoUpdater.Row>> demonstrations(int episodes, double pCorrect, SplittableRandom rng) {
        List<EpisodeInit> init = new ArrayList<>();
        List<Task> tasks = nextTasks(episodes);
        for (int i = 0; i < episodes; i++) init.add(new EpisodeInit(i, i, tasks.get(i).question(), tasks.get(i).answer()));
        AgentPolicy scripted = workload.demonstrator(tasks, pCorrect, rng);
        Map<String, List<PpoUpdater.Row>> byModel = new LinkedHashMap<>();
        for (Episode e : orchestra.run(init, scripted)) {
            for (Step s : e.steps()) {
                Agent a = team.agent(s.agent());
                Policies.Policy p = policies.get(a.modelId());
                int[] prompt = p.tokenizer().encode(p.chat().render(Message.toMaps(s.prompt()), true));
                int[] body = p.tokenizer().encode(s.text());
                int[] resp = Arrays.copyOf(body, body.length + 1);
                resp[body.length] = p.tokenizer().eosTokenId();  // learn to stop
                byModel.computeIfAbsent(p.id(), x -> new ArrayList<>()).add(new PpoUpdater.Row(prompt, resp, 0f));
            }
        }
        return byModel;
    }

    /** One step of token-mean cross-entropy on the responses; returns the loss. */
    private static double crossEntropyStep(Policies.Policy p, AdamW optim, List<PpoUpdater.Row> rows) {
        List<int[]> prompts = new ArrayList<>(), responses = new ArrayList<>();
        for (PpoUpdater.Row r : rows) {
            prompts.add(r.promptIds());
            responses.add(r.responseIds());
        }
        p.model().setRequiresGrad(true);
        double loss;
        try (PointerScope scope = new PointerScope()) {
            Tensor lp = TeacherForcing.logProbs(p.model(), prompts, responses, 1.0, false).logprobs();
            Tensor l = lp.mean().neg();
            loss = l.item_double();
            l.backward();
        }
        double norm = GradNorm.clip(p.model().parameters(), p.gradClip());
        if (Double.isFinite(norm)) optim.step();
        optim.zeroGrad();
        p.model().setRequiresGrad(false);
        return loss;
    }

    @Override
    public void close() {
        try {
            policies.close();
        } finally {
            workload.close();
        }
    }
}

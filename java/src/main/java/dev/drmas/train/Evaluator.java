// Evaluator.java — held-out evaluation: every rank runs the workflow on its share of the test tasks,
// eval.samples times each, with the eval sampling settings on random streams that are the same at
// every evaluation (same tasks, same seeds: evaluations of a run are comparable), and the correct
// counts are summed across ranks into avg@n and the unbiased pass@k, plus the workload's metrics.
// A rank runs its tasks a chunk at a time (eval.chunk_tasks), so that memory does not grow with the
// test set. A long evaluation (many tasks, many rounds) shows that it is alive: rank 0 prints a
// progress line after a round (one agent's, or several agents' together) when
// drmas.progress.interval_s (default 15) seconds have passed since the last one, and one after each
// chunk; the lines change nothing in the results. A reward that is not finite stops the evaluation
// with the task's id rather than counting as a miss.
package dev.drmas.train;

import dev.drmas.agent.Agent;
import dev.drmas.agent.AgentPolicy;
import dev.drmas.agent.Episode;
import dev.drmas.agent.Turn;
import dev.drmas.agent.TurnRequest;
import dev.drmas.config.RunConfig;
import dev.drmas.dist.Collective;
import dev.drmas.env.Task;
import dev.drmas.metrics.PassAtK;
import dev.drmas.workflow.Workload;
import java.io.PrintStream;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;

final class Evaluator {
    private final RunConfig cfg;
    private final Workload workload;
    private final Policies policies;
    private final Collective dist;
    private final PrintStream log;

    Evaluator(RunConfig cfg, Workload workload, Policies policies, Collective dist, PrintStream log) {
        this.cfg = cfg;
        this.workload = workload;
        this.policies = policies;
        this.dist = dist;
        this.log = log;
    }

    /** Seconds between progress lines of one evaluation (system property drmas.progress.interval_s; 0: after every round). */
    static double progressInterval() {
        try {
            return Double.parseDouble(System.getProperty("drmas.progress.interval_s", "15"));
        } catch (NumberFormatException e) {
            return 15;
        }
    }

    /** Runs after each chunk's results are summed (and kept): tests in this package stop an evaluation there. */
    Runnable afterChunk = () -> { };

    /**
     * avg@n and pass@k on the held-out tasks, with each task's counts (on every rank). Task i goes to
     * rank i mod W: test files list their benchmarks one after another, and contiguous shares gave
     * the last ranks all of the long ones (AIME after MATH500), which the other ranks then waited for
     * at the results' sum, past distributed.timeout_s. A rank runs its tasks eval.chunk_tasks at a
     * time: each chunk's episodes are reduced to correct counts and workload sums and dropped (a whole
     * test set's replies and token ids did not fit the heap), and the ranks' counts and sums are
     * summed after every chunk, so a collective waits for one chunk's imbalance, not the whole
     * evaluation's. Every sample draws from the stream of its global trajectory, so the results do
     * not depend on the number of ranks or the chunk size (up to batch-dependent arithmetic).
     *
     * @param kept     where rank 0 keeps each chunk's results as it ends (forced to disk: PartialEvaluation,
     *                 eval/step_N then the fingerprint's digits), so that an evaluation stopped part-way (a
     *                 crash, a kill) continues from its last whole chunk when run again alike; null: nowhere
     * @param identity what else decides the results (Trainer.evaluationIdentity), read on rank 0: with the
     *                 ranks, the chunk size and the tasks, an earlier run's file must have been written alike
     */
    Evaluation evaluateTasks(java.nio.file.Path kept, java.util.function.Supplier<String> identity) {
        var ec = cfg.eval();
        List<Task> tasks = evaluated(workload.test(), ec.tasks());
        if (tasks.isEmpty()) return new Evaluation(Map.of(), List.of(), null);
        int n = ec.samplesPerTask(), w = dist.worldSize(), perChunk = ec.tasksPerChunk();
        PartialEvaluation partial = null;
        if (kept != null && dist.isMaster()) {
            StringBuilder ids = new StringBuilder();
            for (Task t : tasks) ids.append(t.id()).append('\n').append(t.question()).append('\n').append(t.answer()).append('\n').append(t.aliases()).append('\n');
            partial = PartialEvaluation.of(kept, PartialEvaluation.fingerprint(identity.get(), "ranks " + w, "chunk " + perChunk, ids.toString()));
        }
        List<List<Integer>> plan = chunks(tasks.size(), dist.rank(), w, perChunk);
        int chunks = plan.size();
        long t0 = System.nanoTime();
        // the workload's metric names, in its order (logged so) and sorted (summed so): the same on every rank
        List<String> order = new ArrayList<>(workload.episodeSums(List.of(), List.of()).keySet());
        List<String> names = new ArrayList<>(order);
        java.util.Collections.sort(names);
        String what = "the eval/ workload metrics";
        StepMetrics.requireSameNames(names, dist, what);
        java.util.Set<String> nameSet = java.util.Set.copyOf(names);
        // the totals of the chunks done: each task's correct count, the workload's sums (sorted names), the episodes
        double[] correct = new double[tasks.size()];
        double[] sums = new double[names.size() + 1];
        int done = kept == null ? 0 : resume(partial, chunks, correct, sums, tasks.size());
        Progress progress = null;
        try {
            for (int c = done; c < chunks; c++) {
                List<Integer> global = plan.get(c);
                List<Task> part = global.stream().map(tasks::get).toList();
                EnginePolicy policy = new EnginePolicy(policies, ec.sampling(), cfg.rollout().maxPromptTokens(), cfg.rollout().truncation(),
                        cfg.rollout().maxNewTokens(), SamplingStreams.evaluation(), cfg.run().seed() + 7, globalTrajectory(global, n));
                AgentPolicy watched = policy;
                if (dist.isMaster()) watched = progress = new Progress(policy, part.size() * n, progressInterval(), t0, log, progress);
                List<Episode> eps = RolloutBatch.run(workload.orchestra(), part, n, watched);
                // the chunk's slice: global tasks [c·perChunk·w, (c + 1)·perChunk·w), every rank's share of it, then the sums
                int first = (int) Math.min((long) c * perChunk * w, tasks.size());
                int last = (int) Math.min((long) (c + 1) * perChunk * w, tasks.size());
                double[] slice = new double[last - first + names.size() + 1];
                for (Episode e : eps) if (solved(workload, part.get(e.uid()), e)) slice[global.get(e.uid()) - first]++;
                Map<String, Double> s = workload.episodeSums(part, eps);
                if (!s.keySet().equals(nameSet)) {
                    throw new IllegalStateException("Workload.episodeSums returned " + new java.util.TreeSet<>(s.keySet()) + " for a chunk of"
                            + " the evaluation but " + names + " for no episodes: it must return the same names for any episodes");
                }
                for (int i = 0; i < names.size(); i++) slice[last - first + i] = s.get(names.get(i));
                slice[slice.length - 1] = eps.size();
                dist.sum(slice, "the evaluation results (chunk " + (c + 1) + " of " + chunks + ")");
                System.arraycopy(slice, 0, correct, first, last - first);
                for (int i = 0; i < sums.length; i++) sums[i] += slice[last - first + i];
                if (partial != null) partial.append(c, first, java.util.Arrays.copyOfRange(correct, first, last), names, sums);
                if (progress != null && chunks > 1) progress.chunkDone(c + 1, chunks, last, tasks.size(), correct, n);
                afterChunk.run();
            }
        } finally {
            policies.clearPrefixes();
        }
        List<PassAtK.Counts> counts = new ArrayList<>();
        List<Evaluation.TaskResult> results = new ArrayList<>(tasks.size());
        for (int u = 0; u < tasks.size(); u++) {
            PassAtK.Counts k = new PassAtK.Counts(n, (int) correct[u]);
            counts.add(k);
            results.add(new Evaluation.TaskResult(tasks.get(u).id(), tasks.get(u).dataSource(), n, k.c()));
        }
        int[] ks = ks(ec.k(), n);
        Map<String, Double> m = new LinkedHashMap<>(PassAtK.scalars("eval/", counts, ks));
        double episodes = sums[names.size()];
        if (episodes > 0) for (String key : order) m.put("eval/" + key, sums[names.indexOf(key)] / episodes);
        m.put("eval/tasks", (double) tasks.size());
        perSource(tasks, counts, ks, m);
        m.put("time/eval_s", (System.nanoTime() - t0) / 1e9);
        return new Evaluation(m, results, partial == null ? null : partial.file());
    }

    /**
     * The chunks that {@code partial} (rank 0's; null on the others) holds of this evaluation, which
     * every rank gets by a sum: their counts into {@code correct} and their sums into {@code sums}; 0
     * when it holds none.
     */
    private int resume(PartialEvaluation partial, int chunks, double[] correct, double[] sums, int tasks) {
        double[] got = new double[1 + tasks + sums.length];
        if (partial != null) {
            PartialEvaluation.Loaded l = partial.load(chunks, tasks, sums.length - 1, log);
            got[0] = l.chunks();
            System.arraycopy(l.correct(), 0, got, 1, tasks);
            System.arraycopy(l.sums(), 0, got, 1 + tasks, sums.length);
        }
        dist.sum(got, "the evaluation's results kept from an earlier run");
        System.arraycopy(got, 1, correct, 0, tasks);
        System.arraycopy(got, 1 + tasks, sums, 0, sums.length);
        return (int) got[0];
    }

    /**
     * The chunks of {@code rank}'s tasks among {@code w} ranks, each a list of test-task indices: task i
     * is rank i mod w's, its j-th (i = j·w + rank), and chunk c holds its tasks j in
     * [c·perChunk, (c + 1)·perChunk), so that chunk c of all the ranks together is the tasks
     * [c·perChunk·w, (c + 1)·perChunk·w). Every rank has as many chunks (rank 0's count; a rank's
     * last ones may be empty), so that their collectives pair up.
     */
    static List<List<Integer>> chunks(int tasks, int rank, int w, int perChunk) {
        int mine = tasks > rank ? (tasks - rank + w - 1) / w : 0, most = (tasks + w - 1) / w;
        List<List<Integer>> out = new ArrayList<>();
        for (long lo = 0; lo < most; lo += perChunk) {
            List<Integer> chunk = new ArrayList<>();
            for (long j = lo; j < Math.min(lo + perChunk, mine); j++) chunk.add((int) (j * w + rank));
            out.add(chunk);
        }
        return out;
    }

    /**
     * The global trajectory of a chunk's local trajectory t (its task t / n, draw t % n): its task's
     * test-file index × n + the draw, whose random stream the sample takes.
     */
    static java.util.function.LongUnaryOperator globalTrajectory(List<Integer> chunk, int n) {
        return t -> (long) chunk.get((int) (t / n)) * n + t % n;
    }

    /**
     * The first {@code n} test tasks (all when n is 0 or more than there are); when the tasks name
     * their benchmarks, n taken round-robin over the benchmarks (in the order they first appear, each
     * in file order), so that a mixed file's benchmarks, usually concatenated, are all evaluated.
     * Kept in file order.
     */
    static List<Task> evaluated(List<Task> test, int n) {
        if (n <= 0 || n >= test.size()) return test;
        if (test.getFirst().dataSource() == null) return test.subList(0, n);
        Map<String, ArrayDeque<Integer>> bySource = new LinkedHashMap<>();
        for (int i = 0; i < test.size(); i++) bySource.computeIfAbsent(test.get(i).dataSource(), s -> new ArrayDeque<>()).add(i);
        boolean[] take = new boolean[test.size()];
        for (int left = n; left > 0; ) {
            for (ArrayDeque<Integer> q : bySource.values()) {
                if (left > 0 && !q.isEmpty()) {
                    take[q.poll()] = true;
                    left--;
                }
            }
        }
        List<Task> out = new ArrayList<>(n);
        for (int i = 0; i < take.length; i++) if (take[i]) out.add(test.get(i));
        return out;
    }

    /**
     * avg@n and pass@k of each benchmark of a test file that names them (Task.dataSource), as
     * eval/<source>/..., in the order the benchmarks first appear; every rank has every task's counts.
     */
    static void perSource(List<Task> tasks, List<PassAtK.Counts> counts, int[] ks, Map<String, Double> m) {
        Map<String, List<PassAtK.Counts>> bySource = new LinkedHashMap<>();
        for (int u = 0; u < tasks.size(); u++) {
            String src = tasks.get(u).dataSource();
            if (src != null) bySource.computeIfAbsent(src, x -> new ArrayList<>()).add(counts.get(u));
        }
        for (Map.Entry<String, List<PassAtK.Counts>> e : bySource.entrySet()) {
            m.putAll(PassAtK.scalars("eval/" + e.getKey() + "/", e.getValue(), ks));
            m.put("eval/" + e.getKey() + "/tasks", (double) e.getValue().size());
        }
    }

    /** Whether {@code e} solved {@code task} (reward 1); a reward that is not finite is an error naming the task, not a miss. */
    static boolean solved(Workload workload, Task task, Episode e) {
        double r = workload.reward(task, e);
        if (!Double.isFinite(r)) {
            throw new IllegalStateException(String.format("the evaluation reward of task '%s' (trajectory %d) is %s: a reward must be finite",
                    task.id(), e.traj(), r));
        }
        return r == 1.0;
    }

    /**
     * The policy with progress lines: after a round (one policy call: one agent, or several agents
     * together) a line when {@code every} seconds have passed since the last. It passes actTogether
     * on as one call, so agents that share a model stay in one engine batch.
     */
    static final class Progress implements AgentPolicy {
        private final AgentPolicy policy;
        private final int episodes;
        private final double every;
        private final long t0;
        private final PrintStream log;
        private long last;
        private int rounds;

        Progress(AgentPolicy policy, int episodes, double every, long t0, PrintStream log) {
            this(policy, episodes, every, t0, log, null);
        }

        /** For the next chunk of an evaluation: its rounds counted on from {@code before}'s, its lines as far apart. */
        Progress(AgentPolicy policy, int episodes, double every, long t0, PrintStream log, Progress before) {
            this.policy = policy;
            this.episodes = episodes;
            this.every = every;
            this.t0 = t0;
            this.log = log;
            this.last = before != null ? before.last : t0;
            this.rounds = before != null ? before.rounds : 0;
        }

        @Override
        public List<Turn> act(Agent agent, List<TurnRequest> requests) {
            List<Turn> turns = policy.act(agent, requests);
            roundDone(agent.id(), requests.size());
            return turns;
        }

        @Override
        public List<List<Turn>> actTogether(List<Agent> agents, List<List<TurnRequest>> requests) {
            List<List<Turn>> turns = policy.actTogether(agents, requests);
            roundDone(String.join("+", agents.stream().map(Agent::id).toList()), requests.stream().mapToInt(List::size).sum());
            return turns;
        }

        private void roundDone(String who, int running) {
            rounds++;
            long now = System.nanoTime();
            if ((now - last) / 1e9 >= every) {
                last = now;
                log.printf(Locale.ROOT, "eval: round %d done (%s, %d of %d episodes still running), %.0f s%n", rounds, who, running,
                        episodes, (now - t0) / 1e9);
            }
        }

        /** After chunk {@code c} of {@code chunks}: the tasks done (the first {@code done} of {@code total}) and their avg so far. */
        void chunkDone(int c, int chunks, int done, int total, double[] correct, int n) {
            double right = 0;
            for (int i = 0; i < done; i++) right += correct[i];
            long now = System.nanoTime();
            last = now;
            log.printf(Locale.ROOT, "eval: chunk %d of %d done, %d of %d tasks, avg@%d so far %.4f, %.0f s%n", c, chunks, done, total, n,
                    right / ((double) done * n), (now - t0) / 1e9);
        }
    }

    private static int[] ks(int k, int n) {
        return k == 1 ? new int[] {1} : new int[] {1, Math.min(k, n)};
    }
}

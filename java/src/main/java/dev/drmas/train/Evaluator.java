// Evaluator.java — held-out evaluation: every rank runs the workflow on its share of the test tasks,
// eval.samples times each, with the eval sampling settings on random streams that are the same at
// every evaluation (same tasks, same seeds: evaluations of a run are comparable), and the correct
// counts are summed across ranks into avg@n and the unbiased pass@k, plus the workload's metrics.
// A long evaluation (many tasks, many rounds) shows that it is alive: rank 0 prints a progress line
// after a round (one agent's, or several agents' together) when drmas.progress.interval_s (default
// 15) seconds have passed since the last one; the lines change nothing in the results. A reward that
// is not finite stops the evaluation with the task's id rather than counting as a miss.
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

    /** avg@n and pass@k on the held-out tasks; empty when there are none. */
    Map<String, Double> evaluate() {
        var ec = cfg.eval();
        List<Task> test = workload.test();
        List<Task> tasks = evaluated(test, ec.tasks());
        if (tasks.isEmpty()) return Map.of();
        int n = ec.samplesPerTask();
        Shard mine = Shard.of(tasks.size(), dist);  // the correct counts are summed across ranks below
        List<Task> local = tasks.subList(mine.first(), mine.first() + mine.count());
        long t0 = System.nanoTime();
        EnginePolicy policy = new EnginePolicy(policies, ec.sampling(), cfg.rollout().maxPromptTokens(), cfg.rollout().truncation(), cfg.rollout().maxNewTokens(),
                SamplingStreams.evaluation(), cfg.run().seed() + 7, (long) mine.first() * n);
        AgentPolicy watched = dist.isMaster() ? new Progress(policy, local.size() * n, progressInterval(), t0, log) : policy;
        List<Episode> eps;
        try {
            eps = RolloutBatch.run(workload.orchestra(), local, n, watched);
        } finally {
            policies.clearPrefixes();
        }
        double[] hits = new double[tasks.size() * n];
        for (Episode e : eps) if (solved(workload, local.get(e.uid()), e)) hits[(mine.first() * n) + e.traj()] = 1;
        dist.sum(hits, "the evaluation results");
        List<PassAtK.Counts> counts = new ArrayList<>();
        for (int u = 0; u < tasks.size(); u++) {
            boolean[] correct = new boolean[n];
            for (int j = 0; j < n; j++) correct[j] = hits[u * n + j] > 0;
            counts.add(PassAtK.Counts.of(correct));
        }
        int[] ks = ks(ec.k(), n);
        Map<String, Double> m = new LinkedHashMap<>(PassAtK.scalars("eval/", counts, ks));
        StepMetrics.workload("eval/", local, eps, workload, dist, m);
        m.put("eval/tasks", (double) tasks.size());
        perSource(tasks, counts, ks, m);
        m.put("time/eval_s", (System.nanoTime() - t0) / 1e9);
        return m;
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
            this.policy = policy;
            this.episodes = episodes;
            this.every = every;
            this.t0 = t0;
            this.log = log;
            this.last = t0;
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
    }

    private static int[] ks(int k, int n) {
        return k == 1 ? new int[] {1} : new int[] {1, Math.min(k, n)};
    }
}

// RolloutBatch.java — a step's episodes as the columnar rows of ARCHITECTURE §5: one row per agent
// turn with its group (uid: the task), trajectory, agent and score (the workload's reward of the
// episode, minus the invalid-action penalty of the row), plus what the update and the metrics read
// from it: the advantages of the rows, each model's own rows, the reward sum and the tokens
// generated. Also the one place where tasks × rollouts become the episodes an orchestra runs.
package dev.drmas.train;

import dev.drmas.agent.AgentPolicy;
import dev.drmas.agent.Episode;
import dev.drmas.agent.EpisodeInit;
import dev.drmas.agent.Orchestra;
import dev.drmas.agent.Step;
import dev.drmas.agent.Team;
import dev.drmas.algo.Advantages;
import dev.drmas.algo.NormConfig;
import dev.drmas.env.Task;
import dev.drmas.workflow.Workload;
import java.util.ArrayList;
import java.util.List;

final class RolloutBatch {
    final List<Task> tasks;        // by uid
    final List<Episode> episodes;
    final List<Step> steps;        // by row
    final float[] scores;
    final int[] uid, traj, agent;
    final double rewardSum;
    final int rolloutsPerTask;

    private RolloutBatch(List<Task> tasks, List<Episode> episodes, List<Step> steps, float[] scores, int[] uid, int[] traj,
                         int[] agent, double rewardSum, int rolloutsPerTask) {
        this.tasks = tasks;
        this.episodes = episodes;
        this.steps = steps;
        this.scores = scores;
        this.uid = uid;
        this.traj = traj;
        this.agent = agent;
        this.rewardSum = rewardSum;
        this.rolloutsPerTask = rolloutsPerTask;
    }

    /** The episodes of {@code tasks} × {@code n} rollouts: uid u for task u, trajectory u·n + j. */
    static List<Episode> run(Orchestra orchestra, List<Task> tasks, int n, AgentPolicy policy) {
        List<EpisodeInit> init = new ArrayList<>(tasks.size() * n);
        for (int u = 0; u < tasks.size(); u++)
            for (int j = 0; j < n; j++) init.add(new EpisodeInit(u, u * n + j, tasks.get(u).question(), tasks.get(u).answer()));
        return init.isEmpty() ? List.of() : orchestra.run(init, policy);
    }

    /** The rows of {@code episodes} (of {@code tasks}, {@code n} rollouts each), scored by {@code w}. */
    static RolloutBatch of(List<Task> tasks, List<Episode> episodes, int n, Workload w) {
        List<Step> steps = new ArrayList<>();
        List<Float> score = new ArrayList<>();
        double rewardSum = 0;
        for (Episode e : episodes) {
            Task task = tasks.get(e.uid());
            double r = w.reward(task, e);
            if (!Double.isFinite(r))
                throw new IllegalStateException(String.format("the reward of task '%s' (uid %d, trajectory %d) is %s: a reward must be finite",
                        task.id(), e.uid(), e.traj(), r));
            rewardSum += r;
            for (Step s : e.steps()) {
                // the kernels take float scores: a finite double past float's range would reach them as ±inf
                float sc = (float) w.rowScore(r, s);
                if (!Float.isFinite(sc))
                    throw new IllegalStateException(String.format(
                            "the score of agent %d's turn %d in task '%s' (uid %d, trajectory %d) is %s: past float's range (reward %s)",
                            s.agent(), s.turn(), task.id(), e.uid(), e.traj(), w.rowScore(r, s), r));
                score.add(sc);
                steps.add(s);
            }
        }
        int rows = steps.size();
        float[] scores = new float[rows];
        int[] uid = new int[rows], traj = new int[rows], agent = new int[rows];
        int i = 0;
        for (Episode e : episodes) {
            for (Step s : e.steps()) {
                scores[i] = score.get(i);
                uid[i] = e.uid();
                traj[i] = e.traj();
                agent[i++] = s.agent();
            }
        }
        return new RolloutBatch(tasks, episodes, steps, scores, uid, traj, agent, rewardSum, n);
    }

    int rows() {
        return steps.size();
    }

    /** The rows' advantages (and the per-segment diagnostics) by the native kernel. */
    Advantages.Result advantages(NormConfig c, int numAgents) {
        return Advantages.computeWithDiagnosticsOwnIds(c, scores, uid, traj, agent, tasks.size(), tasks.size() * rolloutsPerTask,
                numAgents);
    }

    /** The rows of the agents that model {@code modelId} generated, in row order, with their advantages. */
    List<PpoUpdater.Row> rowsOf(String modelId, Team team, float[] advantages) {
        List<PpoUpdater.Row> mine = new ArrayList<>();
        for (int i = 0; i < rows(); i++) {
            if (!team.agent(agent[i]).modelId().equals(modelId)) continue;
            TurnData d = turn(i);
            mine.add(new PpoUpdater.Row(d.promptIds(), d.responseIds(), advantages[i], agent[i]));
        }
        return mine;
    }

    /** What the rollout engine attached to row {@code i}. */
    TurnData turn(int i) {
        return steps.get(i).output().payload(TurnData.class);
    }

    /** Response tokens generated for the batch. */
    long generatedTokens() {
        long n = 0;
        for (int i = 0; i < rows(); i++) n += turn(i).responseIds().length;
        return n;
    }
}

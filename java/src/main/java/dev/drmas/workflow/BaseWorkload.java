// BaseWorkload.java — what most workloads hold alike and only hand back: the team, the orchestra,
// the training and held-out tasks, and the row score (the reward minus the invalid-action penalty).
// A workflow extends it and writes what is its own: the reward, its metrics, its turn bound and its
// demonstrations.
package dev.drmas.workflow;

import dev.drmas.agent.Orchestra;
import dev.drmas.agent.Step;
import dev.drmas.agent.Team;
import dev.drmas.env.Task;
import java.util.List;

public abstract class BaseWorkload<O extends Orchestra> implements Workload {
    protected final Team team;
    protected final O orchestra;
    protected final TaskFiles.Split data;
    protected final InvalidActionPenalty penalty;

    protected BaseWorkload(Team team, O orchestra, TaskFiles.Split data, InvalidActionPenalty penalty) {
        this.team = team;
        this.orchestra = orchestra;
        this.data = data;
        this.penalty = penalty;
    }

    @Override
    public Team team() {
        return team;
    }

    @Override
    public O orchestra() {
        return orchestra;
    }

    @Override
    public List<Task> train() {
        return data.train();
    }

    @Override
    public List<Task> test() {
        return data.test();
    }

    @Override
    public double rowScore(double reward, Step s) {
        return penalty.rowScore(reward, s.valid());
    }
}

// Workload.java — everything a task family gives the trainer, so that one training loop runs every
// workflow: the team and its orchestra, the training and held-out tasks, the episode reward and
// each row's score, the workflow's own episode metrics, the most agent turns an episode can take,
// and a scripted demonstrator for the supervised warm start. A Workflow (found by Workflows) opens
// one per run; nothing outside dev.drmas.workflow knows which workflow it is.
package dev.drmas.workflow;

import dev.drmas.agent.AgentPolicy;
import dev.drmas.agent.Episode;
import dev.drmas.agent.Orchestra;
import dev.drmas.agent.Step;
import dev.drmas.agent.Team;
import dev.drmas.env.Task;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;

public interface Workload extends AutoCloseable {
    Team team();

    Orchestra orchestra();

    /** Training tasks, in dataset order (the trainer permutes them). */
    List<Task> train();

    /** Held-out tasks for evaluation (may be empty). */
    List<Task> test();

    /** The episode reward of {@code e}, an episode of {@code task}; 1.0 means solved. */
    double reward(Task task, Episode e);

    /** The score of one training row: the reward, minus the invalid-action penalty when the step's output was malformed. */
    double rowScore(double reward, Step s);

    /**
     * The workload's own metrics over finished episodes ({@code tasks.get(e.uid())} is each
     * episode's task) as sums over the episodes, by name, in a fixed order with every name present
     * even for no episodes. The trainer adds them up across ranks and logs each divided by the
     * number of episodes: sums rather than means, so that data-parallel ranks merge exactly.
     */
    Map<String, Double> episodeSums(List<Task> tasks, List<Episode> episodes);

    /**
     * The most agent calls one episode can make with these options (math: 2·max_loops − 1), so
     * that the trainer can check at start-up that its per-turn random streams can key them.
     */
    int maxTurnsPerEpisode();

    /**
     * A scripted policy that plays the workflow well on {@code tasks} (request.episode() indexes
     * them), with final answers right with probability {@code pCorrect}: the supervised warm
     * start's demonstrations.
     */
    AgentPolicy demonstrator(List<Task> tasks, double pCorrect, SplittableRandom rng);

    @Override
    default void close() {
    }
}

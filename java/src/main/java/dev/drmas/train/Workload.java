// Workload.java — what the trainer needs from a task family, so that one training loop runs both
// of the paper's workloads: the team and its workflow, the training and held-out tasks, the episode
// reward and each row's score, workload metrics, and a scripted demonstrator for the supervised
// warm start. MathWorkload (solver–verifier) and SearchWorkload (verifier → searcher | answerer with
// a retriever) implement it; Workload.of picks one by orchestra.name.
package dev.drmas.train;

import dev.drmas.agent.AgentPolicy;
import dev.drmas.agent.Episode;
import dev.drmas.agent.Orchestra;
import dev.drmas.agent.Orchestras;
import dev.drmas.agent.Step;
import dev.drmas.agent.Team;
import dev.drmas.config.OrchestraConfig;
import dev.drmas.config.RunConfig;
import dev.drmas.env.Task;
import java.io.PrintStream;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;

interface Workload extends AutoCloseable {
    /** The workload of {@code cfg}: search for orchestra.name search, else math (and other registered workflows). */
    static Workload of(RunConfig cfg, PrintStream log) {
        String name = cfg.orchestra().name();
        if (name.equals(OrchestraConfig.SEARCH)) return new SearchWorkload(cfg, log);
        if (!Orchestras.names().contains(name)) {
            // search is built here (it needs a retriever), so the registry's own error would not list it
            List<String> valid = new ArrayList<>(Orchestras.names());
            valid.add(OrchestraConfig.SEARCH);
            throw new IllegalArgumentException("orchestra.name: unknown workflow '" + name + "'; valid: " + String.join(", ", valid));
        }
        return new MathWorkload(cfg);
    }

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
     * A scripted policy that plays the workflow well on {@code tasks} (request.episode() indexes
     * them), with final answers right with probability {@code pCorrect}: the supervised warm
     * start's demonstrations.
     */
    AgentPolicy demonstrator(List<Task> tasks, double pCorrect, SplittableRandom rng);

    @Override
    default void close() {
    }
}

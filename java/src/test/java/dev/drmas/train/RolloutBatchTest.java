// RolloutBatchTest.java — a step's rows from its episodes: each row's score is its episode's reward
// (minus the penalty of a malformed turn), and a reward or score the kernels cannot take is an error
// that names the task and trajectory, before any row reaches them. The workload here is a stand-in
// that scores by a table (a workflow's own rewards are tested with the workflow).
package dev.drmas.train;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.drmas.agent.AgentPolicy;
import dev.drmas.agent.Episode;
import dev.drmas.agent.Message;
import dev.drmas.agent.Orchestra;
import dev.drmas.agent.Step;
import dev.drmas.agent.Team;
import dev.drmas.agent.Turn;
import dev.drmas.env.Task;
import dev.drmas.workflow.InvalidActionPenalty;
import dev.drmas.workflow.Workload;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;

class RolloutBatchTest {
    static final List<Task> TASKS = List.of(new Task("gsm8k-17", "1 + 1?", "2"), new Task("gsm8k-42", "2 + 2?", "4"));

    /** Rewards by trajectory; rows scored by the invalid-action rule with penalty 0.25. */
    record TableWorkload(double[] rewardOfTraj) implements Workload {
        static final InvalidActionPenalty PENALTY = new InvalidActionPenalty(0.25);

        @Override public Team team() { throw new UnsupportedOperationException(); }
        @Override public Orchestra orchestra() { throw new UnsupportedOperationException(); }
        @Override public List<Task> train() { return TASKS; }
        @Override public List<Task> test() { return List.of(); }
        @Override public double reward(Task task, Episode e) { return rewardOfTraj[e.traj()]; }
        @Override public double rowScore(double reward, Step s) { return PENALTY.rowScore(reward, s.valid()); }
        @Override public Map<String, Double> episodeSums(List<Task> tasks, List<Episode> episodes) { return Map.of(); }
        @Override public int maxTurnsPerEpisode() { return 2; }
        @Override public AgentPolicy demonstrator(List<Task> tasks, double pCorrect, SplittableRandom rng) { throw new UnsupportedOperationException(); }
    }

    static Step step(int agent, int turn, boolean valid) {
        return new Step(agent, turn, 0, List.of(new Message("user", "q")), new Turn("a", null), valid);
    }

    /** Two tasks × two rollouts; trajectory t has a solver turn and a verifier turn, trajectory 2's verifier malformed. */
    static List<Episode> episodes() {
        return List.of(
                new Episode(0, 0, "1 + 1?", "2", List.of(step(0, 0, true), step(1, 1, true)), "", true, Map.of()),
                new Episode(0, 1, "1 + 1?", "2", List.of(step(0, 0, true), step(1, 1, true)), "", true, Map.of()),
                new Episode(1, 2, "2 + 2?", "4", List.of(step(0, 0, true), step(1, 1, false)), "", true, Map.of()),
                new Episode(1, 3, "2 + 2?", "4", List.of(step(0, 0, true), step(1, 1, true)), "", true, Map.of()));
    }

    @Test
    void rowsCarryTheirEpisodesRewardAndIds() {
        RolloutBatch b = RolloutBatch.of(TASKS, episodes(), 2, new TableWorkload(new double[] {1, 0, 1, 0.5}));
        assertEquals(8, b.rows());
        assertArrayEquals(new float[] {1, 1, 0, 0, 1, 0.75f, 0.5f, 0.5f}, b.scores);
        assertArrayEquals(new int[] {0, 0, 0, 0, 1, 1, 1, 1}, b.uid);
        assertArrayEquals(new int[] {0, 0, 1, 1, 2, 2, 3, 3}, b.traj);
        assertArrayEquals(new int[] {0, 1, 0, 1, 0, 1, 0, 1}, b.agent);
        assertEquals(2.5, b.rewardSum);
    }

    @Test
    void aNonFiniteRewardNamesItsTaskAndTrajectory() {
        for (double bad : new double[] {Double.NaN, Double.POSITIVE_INFINITY, Double.NEGATIVE_INFINITY}) {
            var e = assertThrows(IllegalStateException.class,
                    () -> RolloutBatch.of(TASKS, episodes(), 2, new TableWorkload(new double[] {1, 0, bad, 0.5})));
            assertTrue(e.getMessage().contains("task 'gsm8k-42' (uid 1, trajectory 2)") && e.getMessage().contains(Double.toString(bad)),
                    e.getMessage());
        }
    }

    @Test
    void aScorePastFloatRangeNamesItsRow() {
        // finite as a double, ±inf as the float the kernels read
        var e = assertThrows(IllegalStateException.class,
                () -> RolloutBatch.of(TASKS, episodes(), 2, new TableWorkload(new double[] {1, -1e39, 1, 0.5})));
        assertTrue(e.getMessage().contains("agent 0's turn 0 in task 'gsm8k-17' (uid 0, trajectory 1)"), e.getMessage());
        assertTrue(e.getMessage().contains("past float's range"), e.getMessage());
    }
}

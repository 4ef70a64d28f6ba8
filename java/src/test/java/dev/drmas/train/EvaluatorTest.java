// EvaluatorTest.java — the parts of held-out evaluation that need no model: a reward that is not
// finite is an error naming the task (it counted as a miss). The workload is a stand-in:
// RolloutBatchTest's reward table.
package dev.drmas.train;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.drmas.agent.Episode;
import java.util.List;
import org.junit.jupiter.api.Test;

class EvaluatorTest {
    @Test
    void aRewardThatIsNotFiniteIsAnErrorNamingTheTask() {
        List<Episode> eps = RolloutBatchTest.episodes();
        var w = new RolloutBatchTest.TableWorkload(new double[] {1, 0, Double.NaN, 0.5});
        assertTrue(Evaluator.solved(w, RolloutBatchTest.TASKS.get(0), eps.get(0)));
        assertFalse(Evaluator.solved(w, RolloutBatchTest.TASKS.get(0), eps.get(1)));
        assertFalse(Evaluator.solved(w, RolloutBatchTest.TASKS.get(1), eps.get(3)), "0.5 is not solved");
        var e = assertThrows(IllegalStateException.class, () -> Evaluator.solved(w, RolloutBatchTest.TASKS.get(1), eps.get(2)));
        assertEquals("the evaluation reward of task 'gsm8k-42' (trajectory 2) is NaN: a reward must be finite", e.getMessage());
    }
}
